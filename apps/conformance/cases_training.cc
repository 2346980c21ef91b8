// Op cases of the training family (op_cases.h; the ops are declared in
// core/src/engine/ops/training.cc): optimizer updates and gradient clipping.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

void add_training_cases(std::vector<OpCase>& c) {
  using namespace ops;
  // The fused clipping composite (tf.clip_by_norm); without a kernel the core composes it.
  for (double clip : {1.0, 100.0}) {
    c.push_back({"clip_by_norm",
                 clip < 10 ? "clip_by_norm_clipped" : "clip_by_norm_unclipped",
                 {f32(Shape{4, 5})},
                 [clip](Backend&, const Inputs& x) { return Outputs{clip_by_norm(x[0], clip)}; },
                 kAccumulating,
                 true});
  }

  // Optimizer updates, in place: the outputs are the updated inputs.
  c.push_back({"apply_gradient_descent",
               "apply_gradient_descent",
               {f32(Shape{3, 4}), f32(Shape{3, 4})},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0];
                 apply_gradient_descent(var, x[1], 0.1);
                 return Outputs{var};
               }});
  for (bool nesterov : {false, true}) {
    c.push_back({"apply_momentum",
                 nesterov ? "apply_momentum_nesterov" : "apply_momentum",
                 {f32(Shape{3, 4}), f32(Shape{3, 4}), f32(Shape{3, 4})},
                 [nesterov](Backend&, const Inputs& x) {
                   Tensor var = x[0], accum = x[1];
                   apply_momentum(var, accum, x[2], 0.1, 0.9, nesterov);
                   return Outputs{var, accum};
                 }});
  }
  c.push_back({"apply_adam",
               "apply_adam",
               {f32(Shape{3, 4}), f32(Shape{3, 4}), f32(Shape{3, 4}, 0.0, 1.0), f32(Shape{3, 4})},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0], m = x[1], v = x[2];
                 apply_adam(var, m, v, x[3], 0.01, 0.9, 0.999, 1e-8, 3);
                 return Outputs{var, m, v};
               }});
  // The mean squares positive and above the squared means, as after TF1's start at ones.
  c.push_back({"apply_rms_prop",
               "apply_rms_prop",
               {f32(Shape{3, 4}), f32(Shape{3, 4}, 0.5, 1.0), f32(Shape{3, 4}), f32(Shape{3, 4})},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0], ms = x[1], mom = x[2];
                 apply_rms_prop(var, ms, mom, x[3], 0.004, 0.9, 0.9, 1e-3);
                 return Outputs{var, ms, mom};
               }});
  c.push_back({"apply_centered_rms_prop",
               "apply_centered_rms_prop",
               {f32(Shape{3, 4}), f32(Shape{3, 4}, -0.5, 0.5), f32(Shape{3, 4}, 0.5, 1.0),
                f32(Shape{3, 4}), f32(Shape{3, 4}, -1.0, 1.0)},
               [](Backend&, const Inputs& x) {
                 Tensor var = x[0], mg = x[1], ms = x[2], mom = x[3];
                 apply_centered_rms_prop(var, mg, ms, mom, x[4], 0.01, 0.9, 0.5, 1e-3);
                 return Outputs{var, mg, ms, mom};
               }});
}

}  // namespace trainyard::conformance
