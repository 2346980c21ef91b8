// The kernel interface backends implement, the attributes ops pass to kernels, and the list
// of ops the core declares.
//
// An op is declared once, in its family's file in the core (core/src/engine/ops/<family>.cc): its
// name, inputs, outputs, attribute struct, a one-line summary, the checks on its inputs, the
// shape and dtype of its outputs and its gradient written in other ops. `trainyard plugins
// describe cpu` and declared_ops() list them. A backend registers kernels by op name
// (Backend::kernels()); the core binds them to its own op table, which lives outside every SDK
// type, so adding an op to the core changes no layout here and a backend built before the op
// existed still loads (the op is then Unimplemented on its device). A kernel registered for a
// name the core does not declare is refused when the backend is created.
//
// Before calling a kernel the core has checked every input, computed the output shapes and
// dtypes and allocated the outputs on the kernel's backend; a kernel only computes. Every
// tensor a kernel sees is contiguous and row-major, starting at its byte_offset() in its
// storage, and lives on the kernel's own backend. A kernel runs on KernelArgs::stream: a
// backend with asynchronous streams queues the work there and returns.
//
// Layout conventions (TensorFlow's): images are NHWC; conv2d filters are
// [filter_height, filter_width, in_channels / groups, out_channels]; batch norm normalizes the
// last axis.
#ifndef TRAINYARD_OP_H_
#define TRAINYARD_OP_H_

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;
class Stream;

inline constexpr std::size_t kMaxRank = kMaxTensorRank;

// The attribute struct of ops that have none.
struct NoAttrs {};

struct ScalarAttrs {
  double a = 0.0;
  double b = 0.0;
};

struct FillAttrs {
  double value = 0.0;
};

struct ReduceAttrs {
  uint32_t axis_mask = 0;  // bit i set: reduce axis i (of the input)
  bool keepdims = false;
};

struct AxisAttrs {
  int64_t axis = 0;  // already non-negative
};

enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  Activation activation = Activation::kNone;  // kMatMulBiasAct only
};

struct Conv2DAttrs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t groups = 1;
  std::array<int64_t, 4> input_shape{};   // N, H, W, C
  std::array<int64_t, 4> filter_shape{};  // KH, KW, C / groups, O
};

struct PoolAttrs {
  int64_t window_h = 1, window_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::array<int64_t, 4> input_shape{};  // N, H, W, C
};

struct BatchNormAttrs {
  double epsilon = 1e-3;
};

struct SliceAttrs {
  std::array<int64_t, kMaxRank> begin{};
  std::array<int64_t, kMaxRank> size{};
};

struct PermAttrs {
  std::array<int64_t, kMaxRank> perm{};
};

struct PadAttrs {
  std::array<int64_t, kMaxRank> before{};
  std::array<int64_t, kMaxRank> after{};
  double value = 0.0;
};

struct ScatterAttrs {
  int64_t axis = 0;
  std::array<int64_t, kMaxRank> output_shape{};
  std::size_t output_rank = 0;
};

struct OneHotAttrs {
  int64_t depth = 0;
  double on_value = 1.0;
  double off_value = 0.0;
  DType dtype = DType::kF32;
};

struct TopKAttrs {
  int64_t k = 1;
};

struct CastAttrs {
  DType dtype = DType::kF32;
};

struct RandomAttrs {
  uint64_t seed = 0;     // the generator's key
  uint64_t counter = 0;  // the first Philox counter block this draw uses
  double a = 0.0;        // low or mean
  double b = 1.0;        // high or stddev
};

struct OptimizerAttrs {
  double learning_rate = 0.0;
  double momentum = 0.0;  // kApplyMomentum
  bool use_nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // kApplyAdam
  double beta1_power = 1.0, beta2_power = 1.0;        // b1^t, b2^t for this step t (1-based)
  double rho = 0.9;  // kApplyRmsProp, kApplyCenteredRmsProp (with momentum and epsilon)
};

// crop_and_resize and its gradient with respect to the image (ops/image.h).
struct CropAndResizeAttrs {
  int64_t crop_height = 1, crop_width = 1;
  bool nearest = false;  // "nearest" sampling instead of "bilinear"
  double extrapolation_value = 0.0;
  std::array<int64_t, 4> image_shape{};  // N, H, W, C
};

// batch_multiclass_non_max_suppression (ops/detection.h): the Object Detection API's
// batch_non_max_suppression options.
struct MultiClassNmsAttrs {
  float score_threshold = 0.0f;
  float iou_threshold = 0.6f;
  int64_t max_detections_per_class = 100;
  int64_t max_total_detections = 100;
  bool use_class_agnostic_nms = false;
  bool has_clip_window = false;  // clip to clip_window, else to the extent of the batch's boxes
  std::array<float, 4> clip_window{};    // ymin, xmin, ymax, xmax
  bool change_coordinate_frame = false;  // boxes relative to clip_window (which it needs)
};

// What a kernel receives. `attrs` points to the op's attribute struct (OpInfo::attrs names
// it; null for ops without attributes), `attrs_size` bytes of plain data that live only during
// the call: a kernel that runs its work later copies them. Outputs are allocated and have
// their final shapes. `op` is the op's name, for error messages. `stream` is where the
// kernel's work goes (never null when the core calls a kernel).
struct KernelArgs {
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  const void* attrs = nullptr;
  Stream* stream = nullptr;
  const char* op = "";
  std::size_t attrs_size = 0;

  template <class T>
  const T& get_attrs() const {
    return *static_cast<const T*>(attrs);
  }
};

// A kernel throws Unimplemented for a dtype it does not support, naming the op and dtype.
using KernelFn = void (*)(Backend& backend, const KernelArgs& args);

// Flags in KernelRegistration::flags.
enum KernelFlags : uint32_t {
  // The kernel computes a composite (composite.h) in one pass instead of its composition.
  // Composites may be declared by plugins loaded after the backend, so the core binds such a
  // kernel when the composite is declared and never refuses its name.
  kFusedComposite = 1u << 0,
};

// One kernel: the name of the op it computes (an op the core declares, or a composite with
// kFusedComposite), and the function. `op` must stay valid as long as the backend lives.
struct KernelRegistration {
  const char* op;
  KernelFn fn;
  uint32_t flags = 0;
};

// An op or composite the core knows, as declared in its family's file.
struct OpInfo {
  const char* name;        // "add", "conv2d_backward_input", "binary_cross_entropy"
  const char* family;      // "math", "reduce", "linalg", "nn", "loss", "array", "random", ...
  int num_inputs;          // -1: any number (concat)
  int num_outputs;         // 0 for the in-place updates (apply_*), which write their inputs
  const char* attrs;       // the attribute struct's name in this header ("NoAttrs" for none)
  const char* summary;     // inputs -> outputs and the formula
  bool composite;          // defined by other ops; a backend may register a fused kernel
  std::size_t attrs_size;  // sizeof the attribute struct, 0 for none
};

// Every op and composite declared so far, in declaration order (the core's ops first, then
// composites as plugins declare them).
TRAINYARD_API std::vector<OpInfo> declared_ops();
// The op or composite named `name`, or null.
TRAINYARD_API const OpInfo* find_op(std::string_view name);

}  // namespace trainyard

#endif  // TRAINYARD_OP_H_
