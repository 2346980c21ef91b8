// Names of the ops in op.h, in OpId order.
#include "trainyard/op.h"

namespace trainyard {
namespace {

constexpr const char* kOpNames[] = {
    "neg",
    "abs",
    "sign",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "square",
    "sigmoid",
    "tanh",
    "relu",
    "relu6",
    "elu",
    "softplus",
    "pow_scalar",
    "clip_by_value",
    "fill",
    "sigmoid_grad",
    "tanh_grad",
    "relu_grad",
    "relu6_grad",
    "elu_grad",
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "where",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "logsumexp",
    "argmax",
    "softmax",
    "log_softmax",
    "matmul",
    "matmul_bias_act",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_filter",
    "max_pool2d",
    "avg_pool2d",
    "max_pool2d_grad",
    "avg_pool2d_grad",
    "batch_norm_training",
    "batch_norm_inference",
    "batch_norm_grad",
    "sigmoid_cross_entropy_with_logits",
    "sigmoid_cross_entropy_with_logits_grad",
    "concat",
    "slice",
    "transpose",
    "pad",
    "gather",
    "scatter_add",
    "one_hot",
    "top_k",
    "cast",
    "copy",
    "random_uniform",
    "random_normal",
    "truncated_normal",
    "apply_gradient_descent",
    "apply_momentum",
    "apply_adam",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kOpCount, "one name per OpId");

}  // namespace

const char* op_name(OpId op) {
  auto index = static_cast<std::size_t>(op);
  return index < kOpCount ? kOpNames[index] : "unknown_op";
}

}  // namespace trainyard
