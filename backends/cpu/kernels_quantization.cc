// Quantization kernels (ops/quantization.h) on the CPU: TensorFlow's fake quantization with
// learned ranges, per tensor and per channel of the last dimension, and their gradients, with
// TensorFlow's f32 arithmetic (nudge_fake_quant_range and fake_quantize in the SDK header, shared
// with the CUDA kernels).
//
// The elementwise parts run in parallel ranges. The gradients for min and max are sums, in
// double, over the elements in a fixed order (row-major) that no thread count changes, rounded
// once to T: TensorFlow's Eigen reductions add in an order of their own, so where the f32 sum
// is not exact the last bit may differ from TensorFlow's (and is the more accurate).
#include <cstdint>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// The nudged range of each channel (one for the per-tensor ops).
template <class T>
std::vector<FakeQuantRange<T>> ranges_of(const KernelArgs& args, const Tensor& min,
                                         const Tensor& max) {
  const auto& a = args.get_attrs<FakeQuantAttrs>();
  const int64_t channels = min.num_elements();
  const T* lo = data<T>(min);
  const T* hi = data<T>(max);
  std::vector<FakeQuantRange<T>> ranges(static_cast<std::size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    ranges[static_cast<std::size_t>(c)] =
        nudge_fake_quant_range<T>(lo[c], hi[c], a.num_bits, a.narrow_range);
  }
  return ranges;
}

template <class T, bool kPerChannel>
void fake_quant_typed(const KernelArgs& args) {
  const std::vector<FakeQuantRange<T>> ranges = ranges_of<T>(args, args.inputs[1], args.inputs[2]);
  const int64_t channels = static_cast<int64_t>(ranges.size());
  const T* x = data<T>(args.inputs[0]);
  T* y = data<T>(args.outputs[0]);
  parallel_ranges(args.inputs[0].num_elements(), args.inputs[0].num_elements(),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      const auto& r =
                          ranges[static_cast<std::size_t>(kPerChannel ? i % channels : 0)];
                      y[i] = fake_quantize<T>(x[i], r, kPerChannel);
                    }
                  });
}

// TensorFlow sums the output gradient times 1 or 0 below and above the range.
template <class T, bool kPerChannel>
void fake_quant_gradient_typed(const KernelArgs& args) {
  const std::vector<FakeQuantRange<T>> ranges = ranges_of<T>(args, args.inputs[2], args.inputs[3]);
  const int64_t channels = static_cast<int64_t>(ranges.size());
  const int64_t n = args.inputs[1].num_elements();
  const T* dy = data<T>(args.inputs[0]);
  const T* x = data<T>(args.inputs[1]);
  T* dx = data<T>(args.outputs[0]);
  T* dmin = data<T>(args.outputs[1]);
  T* dmax = data<T>(args.outputs[2]);
  parallel_ranges(n, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto& r = ranges[static_cast<std::size_t>(kPerChannel ? i % channels : 0)];
      dx[i] = fake_quant_gradient<T>(dy[i], x[i], r).dx;
    }
  });
  std::vector<double> below(static_cast<std::size_t>(channels), 0.0);
  std::vector<double> above(static_cast<std::size_t>(channels), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::size_t>(kPerChannel ? i % channels : 0);
    const FakeQuantGradient<T> g = fake_quant_gradient<T>(dy[i], x[i], ranges[c]);
    below[c] += static_cast<double>(g.below);
    above[c] += static_cast<double>(g.above);
  }
  for (std::size_t c = 0; c < ranges.size(); ++c) {
    dmin[c] = fake_quant_flush_denormal(static_cast<T>(below[c]));
    dmax[c] = fake_quant_flush_denormal(static_cast<T>(above[c]));
  }
}

template <bool kPerChannel>
void fake_quant_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    fake_quant_typed<typename decltype(tag)::type, kPerChannel>(args);
  });
}

template <bool kPerChannel>
void fake_quant_gradient_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    fake_quant_gradient_typed<typename decltype(tag)::type, kPerChannel>(args);
  });
}

}  // namespace

void add_quantization_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&fake_quant_kernel<false>>("fake_quant_with_min_max_vars"));
  table.push_back(
      cpu_kernel<&fake_quant_gradient_kernel<false>>("fake_quant_with_min_max_vars_gradient"));
  table.push_back(cpu_kernel<&fake_quant_kernel<true>>("fake_quant_with_min_max_vars_per_channel"));
  table.push_back(cpu_kernel<&fake_quant_gradient_kernel<true>>(
      "fake_quant_with_min_max_vars_per_channel_gradient"));
}

}  // namespace trainyard::cpu
