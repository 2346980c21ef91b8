// The linalg ops. Matrix products: matmul (batched, transposes) and the fused matmul + bias +
// activation.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_LINALG_OPS(X) \
  X(kMatMul, "matmul", 2, 1, MatMulAttrs, "(a [..., M, K], b [..., K, N]) -> [..., M, N]; transposes of the last two dims; equal batch dims or a rank-2 side shared by every batch") \
  X(kMatMulBiasAct, "matmul_bias_act", 3, 1, MatMulAttrs, "(x [M, K], w [K, N], bias [N]) -> activation(x w + bias) (no transposes)")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(linalg, TRAINYARD_LINALG_OPS)

namespace ops {
using namespace ops_internal;

// ---- Linear algebra ----

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const char* name = "matmul";
  Backend& backend = common_backend(name, {&a, &b});
  require_float(name, a);
  require_same_dtype(name, a, b);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.rank() < 2 || sb.rank() < 2) {
    invalid(name,
            "expects tensors of rank >= 2, got " + a.description() + " and " + b.description());
  }
  std::size_t ra = sa.rank(), rb = sb.rank();
  int64_t m = transpose_a ? sa[ra - 1] : sa[ra - 2];
  int64_t ka = transpose_a ? sa[ra - 2] : sa[ra - 1];
  int64_t kb = transpose_b ? sb[rb - 1] : sb[rb - 2];
  int64_t n = transpose_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb) {
    invalid(name, "inner dimensions differ: " + a.description() +
                      (transpose_a ? " (transposed)" : "") + " has " + std::to_string(ka) + ", " +
                      b.description() + (transpose_b ? " (transposed)" : "") + " has " +
                      std::to_string(kb));
  }
  // Batch dims: equal, or one side is rank 2 and shared by every batch of the other.
  bool shared_a = ra == 2 && rb > 2;
  bool shared_b = rb == 2 && ra > 2;
  if (!shared_a && !shared_b) {
    bool same = ra == rb;
    for (std::size_t i = 0; same && i + 2 < ra; ++i) same = sa[i] == sb[i];
    if (!same) {
      invalid(name, "batch dimensions differ: " + a.description() + " and " + b.description() +
                        " (either side may also be rank 2, shared by every batch)");
    }
  }
  const Shape& batched = shared_a ? sb : sa;
  std::vector<int64_t> dims(batched.dims().begin(), batched.dims().end() - 2);
  dims.push_back(m);
  dims.push_back(n);
  MatMulAttrs attrs{transpose_a, transpose_b, Activation::kNone};
  Tensor y = run<2>(backend, kMatMul, {a, b}, &attrs, Shape(dims), a.dtype());
  if (should_record({&a, &b})) {
    Tensor as = detached(a), bs = detached(b);
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    record(kMatMul.name(), {&a, &b}, std::span<Tensor>(&y, 1),
           [as, bs, transpose_a, transpose_b, shared_a, shared_b, need_a,
            need_b](GradOutputs grads) -> Grads {
             const Tensor& g = grads[0];
             Tensor da, db;
             if (!transpose_a && !transpose_b) {
               if (need_a) da = matmul(g, bs, false, true);
               if (need_b) db = matmul(as, g, true, false);
             } else if (transpose_a && !transpose_b) {
               if (need_a) da = matmul(bs, g, false, true);
               if (need_b) db = matmul(as, g, false, false);
             } else if (!transpose_a && transpose_b) {
               if (need_a) da = matmul(g, bs, false, false);
               if (need_b) db = matmul(g, as, true, false);
             } else {
               if (need_a) da = matmul(bs, g, true, true);
               if (need_b) db = matmul(g, as, true, true);
             }
             // A side shared by every batch gets the sum over the batches.
             auto sum_batches = [](const Tensor& t) {
               std::vector<int64_t> axes(t.shape().rank() - 2);
               std::iota(axes.begin(), axes.end(), 0);
               return reduce_sum(t, axes);
             };
             if (shared_a && da.defined()) da = sum_batches(da);
             if (shared_b && db.defined()) db = sum_batches(db);
             return {da, db};
           });
  }
  return y;
}

Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                       Activation activation) {
  const char* name = "matmul_bias_act";
  Backend& backend = common_backend(name, {&x, &w, &bias});
  require_float(name, x);
  require_same_dtype(name, x, w);
  require_same_dtype(name, x, bias);
  if (x.shape().rank() != 2 || w.shape().rank() != 2 || bias.shape().rank() != 1 ||
      x.shape()[1] != w.shape()[0] || bias.shape()[0] != w.shape()[1]) {
    invalid(name, "expects x [M, K], w [K, N], bias [N]; got " + x.description() + ", " +
                      w.description() + ", " + bias.description());
  }
  MatMulAttrs attrs{false, false, activation};
  Tensor y = run<3>(backend, kMatMulBiasAct, {x, w, bias}, &attrs,
                    Shape{x.shape()[0], w.shape()[1]}, x.dtype());
  if (should_record({&x, &w, &bias})) {
    Tensor xs = detached(x), ws = detached(w), ys = detached(y);
    const std::array<bool, 3> need = {x.requires_grad(), w.requires_grad(), bias.requires_grad()};
    // From g = d loss / d (x w + bias). Input features need no gradient: their matmul is the
    // step's third.
    auto from_preactivation = [xs, ws, need](GradOutputs grads) -> Grads {
      const Tensor& g = grads[0];
      return {need[0] ? matmul(g, ws, false, true) : Tensor(),
              need[1] ? matmul(xs, g, true, false) : Tensor(),
              need[2] ? reduce_sum(g, {0}) : Tensor()};
    };
    record(kMatMulBiasAct.name(), {&x, &w, &bias}, std::span<Tensor>(&y, 1),
           [ys, activation, from_preactivation](GradOutputs grads) -> Grads {
             const Tensor g = activation_grad(activation, ys, grads[0]);
             return from_preactivation(std::span<const Tensor>(&g, 1));
           });
    if (activation != Activation::kNone) {
      // A consumer that differentiates through the activation itself (a loss over sigmoid
      // outputs) may hand over d loss / d (x w + bias) directly (autodiff_internal.h).
      Node& node = *y.autograd_meta()->grad_fn;
      node.output_activation = activation;
      node.backward_from_preactivation = from_preactivation;
    }
  }
  return y;
}

}  // namespace ops
}  // namespace trainyard
