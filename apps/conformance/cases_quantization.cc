// Op cases of the quantization family (op_cases.h; the ops are declared in
// core/src/engine/ops/quantization.cc): fake_quant_with_min_max_vars and its per-channel form,
// 8 and 4 bits, narrow and full range, ranges TensorFlow nudges (a fractional zero point, min > 0,
// max < 0, min = max = 0 on one channel), and their gradient kernels alone.
#include <string>
#include <tuple>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_quantization_cases(std::vector<OpCase>& c) {
  using namespace ops;
  struct PerTensor {
    const char* name;
    DType dtype;
    double min, max;
    int num_bits;
    bool narrow_range;
  };
  for (const PerTensor& k :
       {PerTensor{"fake_quant_b8", DType::kF32, -1.3, 1.1, 8, false},
        PerTensor{"fake_quant_b8_narrow", DType::kF32, -0.37, 1.7, 8, true},
        PerTensor{"fake_quant_b4_min_positive", DType::kF32, 0.2, 1.5, 4, false},
        PerTensor{"fake_quant_b4_max_negative_f64", DType::kF64, -1.6, -0.3, 4, true}}) {
    c.push_back({"fake_quant_with_min_max_vars",
                 k.name,
                 {of(k.dtype, Shape{4, 3, 5}), fixed(Shape{}, k.dtype, {k.min}),
                  fixed(Shape{}, k.dtype, {k.max})},
                 [k](Backend&, const Inputs& x) {
                   return Outputs{
                       fake_quant_with_min_max_vars(x[0], x[1], x[2], k.num_bits, k.narrow_range)};
                 },
                 kElementwise,
                 true});
  }
  // Channels: symmetric, fractional zero point, min > 0, max < 0, min = max = 0.
  const std::vector<double> mins = {-1.0, -0.37, 0.2, -1.6, 0.0};
  const std::vector<double> maxs = {1.0, 1.7, 1.5, -0.3, 0.0};
  for (const auto& [name, num_bits, narrow_range] :
       {std::tuple{"fake_quant_per_channel_b8", 8, false},
        std::tuple{"fake_quant_per_channel_b4_narrow", 4, true}}) {
    c.push_back({"fake_quant_with_min_max_vars_per_channel",
                 name,
                 {f32(Shape{3, 4, 5}), fixed(Shape{5}, DType::kF32, mins),
                  fixed(Shape{5}, DType::kF32, maxs)},
                 [num_bits, narrow_range](Backend&, const Inputs& x) {
                   return Outputs{fake_quant_with_min_max_vars_per_channel(x[0], x[1], x[2],
                                                                           num_bits, narrow_range)};
                 },
                 kElementwise,
                 true});
  }
  // The gradient kernels alone, on an output gradient of their own: the sums for min and max
  // add in a backend's own order.
  FakeQuantAttrs attrs;
  attrs.num_bits = 6;
  c.push_back({"fake_quant_with_min_max_vars_gradient",
               "fake_quant_gradient_b6",
               {f32(Shape{6, 7}), f32(Shape{6, 7}), fixed(Shape{}, DType::kF32, {-0.9}),
                fixed(Shape{}, DType::kF32, {1.2})},
               [attrs](Backend& b, const Inputs& x) {
                 return call_kernel(
                     b, "fake_quant_with_min_max_vars_gradient", x,
                     {{Shape{6, 7}, DType::kF32}, {Shape{}, DType::kF32}, {Shape{}, DType::kF32}},
                     &attrs);
               },
               kAccumulating});
  c.push_back(
      {"fake_quant_with_min_max_vars_per_channel_gradient",
       "fake_quant_per_channel_gradient_b6",
       {f32(Shape{3, 4, 5}), f32(Shape{3, 4, 5}), fixed(Shape{5}, DType::kF32, mins),
        fixed(Shape{5}, DType::kF32, maxs)},
       [attrs](Backend& b, const Inputs& x) {
         return call_kernel(
             b, "fake_quant_with_min_max_vars_per_channel_gradient", x,
             {{Shape{3, 4, 5}, DType::kF32}, {Shape{5}, DType::kF32}, {Shape{5}, DType::kF32}},
             &attrs);
       },
       kAccumulating});
}

}  // namespace trainyard::conformance
