// The reference kernels of the quantization family: fake_quant_with_min_max_vars(_per_channel)
// and their gradients, written from TensorFlow's fake_quant_ops_functor.h (Nudge and the
// FakeQuantWithMinMaxVars*Functor structs) without the SDK's helpers. Unlike the other reference
// kernels they compute in the tensors' dtype, not in double: the ops are defined by TensorFlow's
// f32 arithmetic (a level is a floor of a rounded quotient, and double would move the ties). The
// gradients for min and max add in long double.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "reference_kernels.h"
#include "trainyard/op.h"

namespace trainyard::conformance::reference {
namespace {

// TensorFlow's CPU kernels run with FTZ and DAZ set: a subnormal operand is a zero of its sign.
template <class T>
T daz(T v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(T(0), v) : v;
}

template <class T>
struct Nudged {
  bool zero;  // min = max = 0
  T lo, hi, scale, inv_scale;
};

// TensorFlow's Nudge(): the zero point quant_min - min / scale rounded half away from zero into
// [quant_min, quant_max], the range moved to put 0 on it.
template <class T>
Nudged<T> nudge(T min, T max, const FakeQuantAttrs& a) {
  min = daz(min);
  max = daz(max);
  const int quant_min = a.narrow_range ? 1 : 0;
  const int quant_max = (1 << a.num_bits) - 1;
  const T qmin = static_cast<T>(quant_min), qmax = static_cast<T>(quant_max);
  Nudged<T> n{};
  n.zero = min == T(0) && max == T(0);
  n.scale = (max - min) / (qmax - qmin);
  n.inv_scale = (qmax - qmin) / (max - min);
  const T from_min = qmin - min / n.scale;
  int zero_point = 0;  // a NaN zero point: TensorFlow's cast to uint16 on x86
  if (from_min < qmin) {
    zero_point = quant_min;
  } else if (from_min > qmax) {
    zero_point = quant_max;
  } else if (!std::isnan(from_min)) {
    zero_point = static_cast<int>(std::round(from_min));
  }
  n.lo = (qmin - static_cast<T>(zero_point)) * n.scale;
  n.hi = (qmax - static_cast<T>(zero_point)) * n.scale;
  return n;
}

template <class T>
std::vector<Nudged<T>> nudge_all(const KernelArgs& a, const Tensor& min, const Tensor& max) {
  const Values lo = read(min), hi = read(max);
  std::vector<Nudged<T>> out;
  for (std::size_t c = 0; c < lo.size(); ++c) {
    out.push_back(
        nudge<T>(static_cast<T>(lo[c]), static_cast<T>(hi[c]), a.get_attrs<FakeQuantAttrs>()));
  }
  return out;
}

template <class T>
void forward(const KernelArgs& a, bool per_channel) {
  const std::vector<Nudged<T>> ranges = nudge_all<T>(a, a.inputs[1], a.inputs[2]);
  const Values x = read(a.inputs[0]);
  Values y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Nudged<T>& n = ranges[per_channel ? i % ranges.size() : 0];
    if (n.zero) {
      y[i] = 0.0;
      continue;
    }
    const T quant_zero = std::floor(-n.lo * n.inv_scale + T(0.5));
    const T clamped = std::max(std::min(daz(static_cast<T>(x[i])), n.hi), n.lo);
    // The per-tensor functor divides by the scale, the per-channel one multiplies by its inverse.
    const T q = per_channel ? (clamped - n.lo) * n.inv_scale : (clamped - n.lo) / n.scale;
    y[i] = static_cast<double>(daz(std::floor(q - quant_zero + T(0.5)) * n.scale));
  }
  write(a.outputs[0], y);
}

template <class T>
void gradient(const KernelArgs& a, bool per_channel) {
  const std::vector<Nudged<T>> ranges = nudge_all<T>(a, a.inputs[2], a.inputs[3]);
  const Values dy = read(a.inputs[0]), x = read(a.inputs[1]);
  Values dx(x.size());
  std::vector<long double> below(ranges.size(), 0.0L), above(ranges.size(), 0.0L);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = per_channel ? i % ranges.size() : 0;
    const Nudged<T>& n = ranges[c];
    const T v = daz(static_cast<T>(x[i]));
    if (n.zero) {
      dx[i] = dy[i];
      continue;
    }
    const double g = static_cast<double>(daz(static_cast<T>(dy[i])));
    dx[i] = g * (v >= n.lo && v <= n.hi ? 1.0 : 0.0);
    if (v < n.lo) below[c] += g;
    if (v > n.hi) above[c] += g;
  }
  write(a.outputs[0], dx);
  write(a.outputs[1], Values(below.begin(), below.end()));
  write(a.outputs[2], Values(above.begin(), above.end()));
}

template <bool kPerChannel>
void k_fake_quant(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  if (a.inputs[0].dtype() == DType::kF32) {
    forward<float>(a, kPerChannel);
  } else {
    forward<double>(a, kPerChannel);
  }
}

template <bool kPerChannel>
void k_fake_quant_gradient(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  if (a.inputs[1].dtype() == DType::kF32) {
    gradient<float>(a, kPerChannel);
  } else {
    gradient<double>(a, kPerChannel);
  }
}

constexpr KernelRegistration kQuantizationKernels[] = {
    {"fake_quant_with_min_max_vars", &k_fake_quant<false>},
    {"fake_quant_with_min_max_vars_gradient", &k_fake_quant_gradient<false>},
    {"fake_quant_with_min_max_vars_per_channel", &k_fake_quant<true>},
    {"fake_quant_with_min_max_vars_per_channel_gradient", &k_fake_quant_gradient<true>},
};

}  // namespace

std::span<const KernelRegistration> quantization_kernels() { return kQuantizationKernels; }

}  // namespace trainyard::conformance::reference
