// The ops models, losses and optimizers compose. Each call checks its inputs, runs the kernel
// of the inputs' backend and, when an input requires a gradient and gradient recording is on,
// records the op for autodiff (autodiff.h).
//
// Errors: a shape or dtype mismatch throws InvalidArgument naming the op and both shapes and
// dtypes; inputs on different backends or an out-of-range axis or index throw InvalidArgument
// naming them; an op the backend has no kernel for throws Unimplemented naming the op and the
// device. Nothing aborts.
//
// Axes may be negative (counted from the end). Every op returns new tensors except the views:
// reshape() and slice_outer() share their input's storage.
#ifndef TRAINYARD_OPS_H_
#define TRAINYARD_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

// A stream of random numbers: a key and a position. Each draw takes the numbers after the
// previous one, so the same seed gives the same sequence of draws (random.h).
class TRAINYARD_API Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t counter = 0) : seed_(seed), counter_(counter) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_state(uint64_t seed, uint64_t counter) {
    seed_ = seed;
    counter_ = counter;
  }
  // Reserves `blocks` Philox blocks and returns the first.
  uint64_t take(uint64_t blocks) {
    uint64_t first = counter_;
    counter_ += blocks;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t counter_;
};

enum class PaddingType { kValid, kSame, kExplicit };

struct Padding2D {
  PaddingType type = PaddingType::kValid;
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // kExplicit only
  static Padding2D valid() { return {}; }
  static Padding2D same() { return {PaddingType::kSame}; }
  static Padding2D explicit_pads(int64_t top, int64_t bottom, int64_t left, int64_t right) {
    return {PaddingType::kExplicit, top, bottom, left, right};
  }
};

namespace ops {

// Creation.
TRAINYARD_API Tensor full(Backend& backend, const Shape& shape, double value,
                          DType dtype = DType::kF32);
TRAINYARD_API Tensor zeros(Backend& backend, const Shape& shape, DType dtype = DType::kF32);
TRAINYARD_API Tensor ones(Backend& backend, const Shape& shape, DType dtype = DType::kF32);
TRAINYARD_API Tensor scalar(Backend& backend, double value, DType dtype = DType::kF32);
TRAINYARD_API Tensor zeros_like(const Tensor& x);
TRAINYARD_API Tensor ones_like(const Tensor& x);

// Elementwise unary.
TRAINYARD_API Tensor neg(const Tensor& x);
TRAINYARD_API Tensor abs(const Tensor& x);
TRAINYARD_API Tensor sign(const Tensor& x);
TRAINYARD_API Tensor exp(const Tensor& x);
TRAINYARD_API Tensor log(const Tensor& x);
TRAINYARD_API Tensor log1p(const Tensor& x);
TRAINYARD_API Tensor sqrt(const Tensor& x);
TRAINYARD_API Tensor rsqrt(const Tensor& x);
TRAINYARD_API Tensor square(const Tensor& x);
TRAINYARD_API Tensor sigmoid(const Tensor& x);
TRAINYARD_API Tensor tanh(const Tensor& x);
TRAINYARD_API Tensor relu(const Tensor& x);
TRAINYARD_API Tensor relu6(const Tensor& x);
TRAINYARD_API Tensor elu(const Tensor& x, double alpha = 1.0);
TRAINYARD_API Tensor softplus(const Tensor& x);
TRAINYARD_API Tensor pow(const Tensor& x, double exponent);
TRAINYARD_API Tensor clip_by_value(const Tensor& x, double min_value, double max_value);

// Elementwise binary, NumPy broadcasting.
TRAINYARD_API Tensor add(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor sub(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor mul(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor div(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor maximum(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor minimum(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor pow(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor not_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor less(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor less_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor greater(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor greater_equal(const Tensor& a, const Tensor& b);
TRAINYARD_API Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// Scalar second operand, of a's dtype.
TRAINYARD_API Tensor add(const Tensor& a, double b);
TRAINYARD_API Tensor mul(const Tensor& a, double b);

// Reductions. An empty `axes` reduces every axis.
TRAINYARD_API Tensor reduce_sum(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_mean(const Tensor& x, std::vector<int64_t> axes = {},
                                 bool keepdims = false);
TRAINYARD_API Tensor reduce_max(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_min(const Tensor& x, std::vector<int64_t> axes = {},
                                bool keepdims = false);
TRAINYARD_API Tensor reduce_logsumexp(const Tensor& x, std::vector<int64_t> axes = {},
                                      bool keepdims = false);
TRAINYARD_API Tensor argmax(const Tensor& x, int64_t axis);
TRAINYARD_API Tensor softmax(const Tensor& x, int64_t axis = -1);
TRAINYARD_API Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// Linear algebra.
TRAINYARD_API Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                            bool transpose_b = false);
TRAINYARD_API Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     Activation activation = Activation::kNone);

// Convolution and pooling, NHWC. Filters are [KH, KW, C / groups, O]. depthwise_conv2d takes
// TensorFlow's depthwise filter [KH, KW, C, multiplier].
TRAINYARD_API Tensor conv2d(const Tensor& input, const Tensor& filter,
                            std::pair<int64_t, int64_t> strides = {1, 1},
                            Padding2D padding = Padding2D::valid(),
                            std::pair<int64_t, int64_t> dilations = {1, 1}, int64_t groups = 1);
TRAINYARD_API Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter,
                                      std::pair<int64_t, int64_t> strides = {1, 1},
                                      Padding2D padding = Padding2D::valid(),
                                      std::pair<int64_t, int64_t> dilations = {1, 1});
TRAINYARD_API Tensor max_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                                std::pair<int64_t, int64_t> strides,
                                Padding2D padding = Padding2D::valid());
TRAINYARD_API Tensor avg_pool2d(const Tensor& input, std::pair<int64_t, int64_t> window,
                                std::pair<int64_t, int64_t> strides,
                                Padding2D padding = Padding2D::valid());

// Batch normalization over the last axis.
struct BatchNormResult {
  Tensor y;
  Tensor batch_mean;      // training only
  Tensor batch_variance;  // training only, biased
};
TRAINYARD_API BatchNormResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                                  const Tensor& beta, double epsilon = 1e-3);
TRAINYARD_API Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          const Tensor& mean, const Tensor& variance,
                                          double epsilon = 1e-3);
// The moving-average update op: moving = moving * decay + value * (1 - decay), in place,
// never recorded.
TRAINYARD_API void assign_moving_average(Tensor& moving, const Tensor& value, double decay);

// Keeps each element with probability 1 - rate, scaled by 1 / (1 - rate); identity when not
// training or rate is 0.
TRAINYARD_API Tensor dropout(const Tensor& x, double rate, Generator& generator, bool training);

// Shapes and data movement.
TRAINYARD_API Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1; a view
TRAINYARD_API Tensor slice_outer(const Tensor& x, int64_t begin, int64_t size);  // a view
TRAINYARD_API Tensor slice(const Tensor& x, std::vector<int64_t> begin,
                           std::vector<int64_t> size);  // size -1: to the end
TRAINYARD_API Tensor concat(std::span<const Tensor> inputs, int64_t axis);
TRAINYARD_API std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis);
TRAINYARD_API Tensor transpose(const Tensor& x, std::vector<int64_t> perm);
TRAINYARD_API Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> paddings,
                         double value = 0.0);
TRAINYARD_API Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);
TRAINYARD_API Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis,
                                 const Shape& output_shape);
TRAINYARD_API Tensor one_hot(const Tensor& indices, int64_t depth, double on_value = 1.0,
                             double off_value = 0.0, DType dtype = DType::kF32);
TRAINYARD_API std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k);
TRAINYARD_API Tensor cast(const Tensor& x, DType dtype);
TRAINYARD_API Tensor copy(const Tensor& x);
// x / sqrt(max(sum(x^2, axis), epsilon)), as tf.nn.l2_normalize.
TRAINYARD_API Tensor l2_normalize(const Tensor& x, int64_t axis = -1, double epsilon = 1e-12);

// Losses.
TRAINYARD_API Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// The YouTube-8M CrossEntropyLoss of probabilities per example: the sum over the last axis of
// -(y log(p + eps) + (1 - y) log((1 - p) + eps)); shape [...] for p [..., C]. One fused pass
// (and one for the gradient) on backends with the kernel, the composed ops elsewhere.
TRAINYARD_API Tensor binary_cross_entropy(const Tensor& predictions, const Tensor& labels,
                                          double epsilon);
// tf.nn.l2_loss: sum(x^2) / 2, a scalar.
TRAINYARD_API Tensor l2_loss(const Tensor& x);
// tf.clip_by_norm over the whole tensor: x * clip / max(||x||, clip).
TRAINYARD_API Tensor clip_by_norm(const Tensor& x, double clip);

// Random numbers (random.h), drawn from `generator`.
TRAINYARD_API Tensor random_uniform(Backend& backend, const Shape& shape, Generator& generator,
                                    double low = 0.0, double high = 1.0, DType dtype = DType::kF32);
TRAINYARD_API Tensor random_normal(Backend& backend, const Shape& shape, Generator& generator,
                                   double mean = 0.0, double stddev = 1.0,
                                   DType dtype = DType::kF32);
TRAINYARD_API Tensor truncated_normal(Backend& backend, const Shape& shape, Generator& generator,
                                      double mean = 0.0, double stddev = 1.0,
                                      DType dtype = DType::kF32);

// Optimizer updates, in place on `var` and the slots; never recorded.
TRAINYARD_API void apply_gradient_descent(Tensor& var, const Tensor& grad, double learning_rate);
TRAINYARD_API void apply_momentum(Tensor& var, Tensor& accum, const Tensor& grad,
                                  double learning_rate, double momentum, bool use_nesterov);
TRAINYARD_API void apply_adam(Tensor& var, Tensor& m, Tensor& v, const Tensor& grad,
                              double learning_rate, double beta1, double beta2, double epsilon,
                              int64_t step);  // step t >= 1

// Copies `value` into `target` (same shape and dtype, same backend), in place.
TRAINYARD_API void assign(Tensor& target, const Tensor& value);

}  // namespace ops

// Operators for the common cases.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator-(const Tensor& x) { return ops::neg(x); }

}  // namespace trainyard

#endif  // TRAINYARD_OPS_H_
