// ONNX export of a model's inference graph (issue 13: the image classifiers, opset 13 to 17).
//
// The model runs forward once in Mode::kPredict on a batch of one zero example while a
// GraphCapture (graph_capture.h) records the ops it launches; the capture becomes an ONNX graph:
// IR version 8, the default operator set at the chosen opset, one input (the batch feature the
// model reads, f32 [N, example shape...]) and one output (the predictions, [N, ...]), where N is
// the dynamic batch dimension "N". Every variable the forward reads is an initializer named by
// its variable name (TF-Slim's, so `resnet_v1_50/conv1/weights`), holding the value the model
// would use, in ONNX's layout: convolutions run NCHW with OIHW filters, and the NHWC input is
// transposed once where the first convolution reads it (onnx_graph.h in the core's sources has
// the mapping). Nothing is approximated: an op, or a use of an op, that the exporter cannot
// express exactly is an Unimplemented error naming the op and the model, never a different graph.
#ifndef TRAINYARD_CORE_ONNX_EXPORT_H_
#define TRAINYARD_CORE_ONNX_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

inline constexpr int kOnnxMinOpset = 13;
inline constexpr int kOnnxMaxOpset = 17;

struct OnnxExportOptions {
  int opset = kOnnxMinOpset;
  std::string model_name = "model";           // the graph's name; errors name it
  std::string input_feature = "image";        // the batch feature fed, and the graph input's name
  std::string output_name = "probabilities";  // the graph output: ModelOutput::predictions
};

// The serialized ONNX ModelProto of `model`, captured on one zero example of `example_shape`
// ([H, W, C] for an image) with the variables `ctx` gives (created there on first use, as the
// trainer's contexts do). Records no autodiff tape and updates no variable. Throws
// InvalidArgument for an opset outside kOnnxMinOpset..kOnnxMaxOpset and Unimplemented naming the
// op and options.model_name for an op the exporter cannot express.
TRAINYARD_API std::string onnx_model_bytes(BaseModel& model, ModelContext& ctx,
                                           const std::vector<int64_t>& example_shape,
                                           const OnnxExportOptions& options);

// The shape of one example of `feature` as the pipeline feeds its model: what the reader of
// eval_input_reader declares after its preprocessing steps (train_input_reader's, when the
// eval input has no steps and the train input has some) (image_classification_preprocessing crops
// to default_image_size; the reader's `channels` option sets C). Throws ConfigError when the
// feature is missing or a dimension is left open (an image without a fixed-size crop).
TRAINYARD_API std::vector<int64_t> pipeline_feature_shape(const PluginRegistry& registry,
                                                          const config::Pipeline& pipeline,
                                                          const std::string& feature);

// Exports the pipeline's model with its variables restored from `checkpoint_prefix` (the latest
// checkpoint in train_dir when empty; the moving averages where eval_config or train_config asks
// for them) to `output_path`, written under a temporary name and renamed, so the file is whole
// or absent. `image_shape` ([H, W, C]) defaults to pipeline_feature_shape(..., "image"). Logs one
// line to `log`. Throws as onnx_model_bytes does, NotFound for a missing checkpoint or variable,
// and Error naming the file when it cannot be written.
TRAINYARD_API void export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                               const std::string& checkpoint_prefix, const std::string& output_path,
                               int opset, std::ostream& log,
                               const std::vector<int64_t>& image_shape = {});

}  // namespace trainyard

#endif  // TRAINYARD_CORE_ONNX_EXPORT_H_
