// The CUDA kernels of the training ops (core/src/ops/training.cc): the optimizer updates, in
// place on their first inputs, with the CPU's formulas (backends/cpu/kernels_training.cc).
#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// w -= lr g
template <class T>
__global__ void gradient_descent(T* w, const T* g, T lr, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) { w[i] -= lr * g[i]; }
}

// accum = momentum accum + g; w -= lr accum, or with Nesterov w -= lr (g + momentum accum).
template <class T>
__global__ void momentum_update(T* w, T* accum, const T* g, T lr, T momentum, bool nesterov,
                                int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T a = momentum * accum[i] + g[i];
    accum[i] = a;
    w[i] -= nesterov ? lr * (g[i] + momentum * a) : lr * a;
  }
}

// TensorFlow's ApplyAdam: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
// w -= lr_t m / (sqrt(v) + epsilon), lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) computed on the host.
template <class T>
__global__ void adam_update(T* w, T* m, T* v, const T* g, T lr_t, T one_minus_beta1,
                            T one_minus_beta2, T epsilon, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T gi = g[i];
    const T mi = m[i] + (gi - m[i]) * one_minus_beta1;
    const T vi = v[i] + (gi * gi - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr_t * mi / (sqrt(vi) + epsilon);
  }
}

// TensorFlow's ApplyRMSProp and, with mg, ApplyCenteredRMSProp: ms += (g^2 - ms)(1 - rho);
// [mg += (g - mg)(1 - rho);] mom = mom momentum + g lr / sqrt(ms [- mg^2] + epsilon); w -= mom.
template <class T>
__global__ void rms_prop_update(T* w, T* mg, T* ms, T* mom, const T* g, T lr, T one_minus_rho,
                                T momentum, T epsilon, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T gi = g[i];
    const T ms_i = ms[i] + (gi * gi - ms[i]) * one_minus_rho;
    T denominator = ms_i;
    if (mg != nullptr) {
      const T mg_i = mg[i] + (gi - mg[i]) * one_minus_rho;
      mg[i] = mg_i;
      denominator = ms_i - mg_i * mg_i;
    }
    const T mom_i = mom[i] * momentum + (gi * lr) / sqrt(denominator + epsilon);
    ms[i] = ms_i;
    mom[i] = mom_i;
    w[i] -= mom_i;
  }
}

void apply_gradient_descent_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  const int64_t n = var.num_elements();
  if (n == 0) return;
  visit<DTypeSet::kFloat>(args.op, var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    gradient_descent<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(var), data<T>(args.inputs[1]), static_cast<T>(attrs.learning_rate), n);
    check_launch(args.op);
  });
}

void apply_momentum_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  const int64_t n = var.num_elements();
  if (n == 0) return;
  visit<DTypeSet::kFloat>(args.op, var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    momentum_update<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(var), data<T>(args.inputs[1]), data<T>(args.inputs[2]),
        static_cast<T>(attrs.learning_rate), static_cast<T>(attrs.momentum), attrs.use_nesterov, n);
    check_launch(args.op);
  });
}

void apply_adam_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  const int64_t n = var.num_elements();
  if (n == 0) return;
  visit<DTypeSet::kFloat>(args.op, var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lr_t = static_cast<T>(attrs.learning_rate * std::sqrt(1.0 - attrs.beta2_power) /
                                  (1.0 - attrs.beta1_power));
    adam_update<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(var), data<T>(args.inputs[1]), data<T>(args.inputs[2]), data<T>(args.inputs[3]),
        lr_t, static_cast<T>(1.0 - attrs.beta1), static_cast<T>(1.0 - attrs.beta2),
        static_cast<T>(attrs.epsilon), n);
    check_launch(args.op);
  });
}

// Inputs (var, ms, mom, grad), or (var, mg, ms, mom, grad) when centered.
template <bool kCentered>
void apply_rms_prop_kernel(Backend&, const KernelArgs& args) {
  const Tensor& var = args.inputs[0];
  const auto& attrs = args.get_attrs<OptimizerAttrs>();
  const int64_t n = var.num_elements();
  if (n == 0) return;
  visit<DTypeSet::kFloat>(args.op, var.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kFirstSlot = kCentered ? 2 : 1;
    T* mg = kCentered ? data<T>(args.inputs[1]) : nullptr;
    rms_prop_update<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(var), mg, data<T>(args.inputs[kFirstSlot]), data<T>(args.inputs[kFirstSlot + 1]),
        data<T>(args.inputs[kFirstSlot + 2]), static_cast<T>(attrs.learning_rate),
        T(1) - static_cast<T>(attrs.rho), static_cast<T>(attrs.momentum),
        static_cast<T>(attrs.epsilon), n);
    check_launch(args.op);
  });
}

}  // namespace

void add_training_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&apply_gradient_descent_kernel>("apply_gradient_descent"));
  table.push_back(cuda_kernel<&apply_momentum_kernel>("apply_momentum"));
  table.push_back(cuda_kernel<&apply_adam_kernel>("apply_adam"));
  table.push_back(cuda_kernel<&apply_rms_prop_kernel<false>>("apply_rms_prop"));
  table.push_back(cuda_kernel<&apply_rms_prop_kernel<true>>("apply_centered_rms_prop"));
}

}  // namespace trainyard::cuda
