// Op cases of the loss family (op_cases.h; the ops are declared in core/src/engine/ops/loss.cc):
// the losses: sigmoid cross-entropy and the fused YouTube-8M cross-entropy and L2 loss.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_loss_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // The fused loss.
  binary(
      c, "sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
      [](const Tensor& labels, const Tensor& logits) {
        return sigmoid_cross_entropy_with_logits(labels, logits);
      },
      f32(Shape{3, 5}, 0.0, 1.0), f32(Shape{3, 5}, -20, 20));
  c.push_back({"sigmoid_cross_entropy_with_logits_grad",
               "sigmoid_cross_entropy_with_logits_grad",
               {f32(Shape{3, 5}, -20, 20), f32(Shape{3, 5}, 0.0, 1.0), f32(Shape{3, 5})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "sigmoid_cross_entropy_with_logits_grad", x,
                                    {{x[0].shape(), DType::kF32}}, nullptr);
               }});
  // SSD's shape of classes (91 with the background) and 0/1 labels, wide enough for vectorized
  // loops, logits past exp's f32 range.
  binary(
      c, "sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits_wide",
      [](const Tensor& labels, const Tensor& logits) {
        return sigmoid_cross_entropy_with_logits(labels, logits);
      },
      ints(Shape{8, 91}, 0, 1), f32(Shape{8, 91}, -100, 100), kElementwise, false);
  c.push_back({"sigmoid_cross_entropy_with_logits_grad",
               "sigmoid_cross_entropy_with_logits_grad_wide",
               {f32(Shape{8, 91}, -100, 100), ints(Shape{8, 91}, 0, 1), f32(Shape{8, 91})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "sigmoid_cross_entropy_with_logits_grad", x,
                                    {{x[0].shape(), DType::kF32}}, nullptr);
               }});

  // The fused losses and norms on probabilities (YouTube-8M CrossEntropyLoss, tf.nn.l2_loss,
  // tf.clip_by_norm). Without a kernel the core composes them of other ops.
  binary(
      c, "binary_cross_entropy", "binary_cross_entropy",
      [](const Tensor& p, const Tensor& y) { return binary_cross_entropy(p, y, 1e-5); },
      f32(Shape{3, 5}, 0.02, 0.98), ints(Shape{3, 5}, 0, 1), kAccumulating);
  static const ScalarAttrs kBceEpsilon{1e-5, 0.0};
  c.push_back({"binary_cross_entropy_grad",
               "binary_cross_entropy_grad",
               {f32(Shape{3, 5}, 0.02, 0.98), ints(Shape{3, 5}, 0, 1), f32(Shape{3})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "binary_cross_entropy_grad", x,
                                    {{x[0].shape(), DType::kF32}}, &kBceEpsilon);
               }});
  c.push_back({"binary_cross_entropy_sigmoid_grad",
               "binary_cross_entropy_sigmoid_grad",
               {f32(Shape{3, 5}, 0.02, 0.98), ints(Shape{3, 5}, 0, 1), f32(Shape{3})},
               [](Backend& b, const Inputs& x) {
                 return call_kernel(b, "binary_cross_entropy_sigmoid_grad", x,
                                    {{x[0].shape(), DType::kF32}}, &kBceEpsilon);
               }});
  c.push_back({"l2_loss",
               "l2_loss",
               {f32(Shape{7, 9})},
               [](Backend&, const Inputs& x) { return Outputs{l2_loss(x[0])}; },
               kAccumulating,
               true});
}

}  // namespace trainyard::conformance
