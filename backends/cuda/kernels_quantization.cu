// The CUDA kernels of the quantization ops (core/src/engine/ops/quantization.cc): TensorFlow's
// fake quantization with learned ranges, per tensor and per channel of the last dimension, and
// their gradients, with the CPU's arithmetic (nudge_fake_quant_range and fake_quantize in
// trainyard/ops/quantization.h, whose products round on their own here as on the CPU).
//
// The forward pass and the inputs' gradient are one thread per element, each nudging its
// channel's range (a few divisions; min and max stay on the device). The gradients for min and
// max are one block per channel, summing its elements in double in a fixed tree (the same for
// any grid, without atomics) and rounding once to T: the CPU's sum, where its order of the
// double additions does not change the rounded result.
#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

template <class T>
__global__ void fake_quant_kernel(const T* __restrict__ x, const T* __restrict__ lo,
                                  const T* __restrict__ hi, T* __restrict__ y, int64_t n,
                                  int64_t channels, FakeQuantAttrs a, bool per_channel) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = per_channel ? i % channels : 0;
    const FakeQuantRange<T> r = nudge_fake_quant_range<T>(lo[c], hi[c], a.num_bits, a.narrow_range);
    y[i] = fake_quantize<T>(x[i], r, per_channel);
  }
}

template <class T>
__global__ void fake_quant_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                     const T* __restrict__ lo, const T* __restrict__ hi,
                                     T* __restrict__ dx, int64_t n, int64_t channels,
                                     FakeQuantAttrs a, bool per_channel) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = per_channel ? i % channels : 0;
    const FakeQuantRange<T> r = nudge_fake_quant_range<T>(lo[c], hi[c], a.num_bits, a.narrow_range);
    dx[i] = fake_quant_gradient<T>(dy[i], x[i], r).dx;
  }
}

// One block per channel (a grid-stride loop over channels): each thread sums, in double, the
// channel's elements k = threadIdx.x, threadIdx.x + blockDim.x, ... (element c + k * channels),
// then the block adds the threads' sums in a fixed tree in shared memory. The partition depends
// only on kThreads, so the result is the same for any grid.
template <class T>
__global__ void fake_quant_dminmax_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                          const T* __restrict__ lo, const T* __restrict__ hi,
                                          T* __restrict__ dmin, T* __restrict__ dmax, int64_t n,
                                          int64_t channels, FakeQuantAttrs a) {
  __shared__ double below_of[kThreads];
  __shared__ double above_of[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const FakeQuantRange<T> r = nudge_fake_quant_range<T>(lo[c], hi[c], a.num_bits, a.narrow_range);
    const int64_t per_channel = n / channels;
    double below = 0.0, above = 0.0;
    for (int64_t k = t; k < per_channel; k += kThreads) {
      const int64_t i = c + k * channels;
      const FakeQuantGradient<T> g = fake_quant_gradient<T>(dy[i], x[i], r);
      below += static_cast<double>(g.below);
      above += static_cast<double>(g.above);
    }
    below_of[t] = below;
    above_of[t] = above;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (t < stride) {
        below_of[t] += below_of[t + stride];
        above_of[t] += above_of[t + stride];
      }
      __syncthreads();
    }
    if (t == 0) {
      dmin[c] = fake_quant_flush_denormal(static_cast<T>(below_of[0]));
      dmax[c] = fake_quant_flush_denormal(static_cast<T>(above_of[0]));
    }
    // The next channel's stores into the arrays wait until thread 0 has read them.
    __syncthreads();
  }
}

template <bool kPerChannel>
void fake_quant(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const int64_t n = x.num_elements();
  if (n == 0) return;
  const int64_t channels = args.inputs[1].num_elements();
  const auto& a = args.get_attrs<FakeQuantAttrs>();
  visit<DTypeSet::kFloat>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fake_quant_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(x), data<T>(args.inputs[1]), data<T>(args.inputs[2]), data<T>(args.outputs[0]), n,
        channels, a, kPerChannel);
    check_launch(args.op);
  });
}

template <bool kPerChannel>
void fake_quant_gradient(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[1];
  const int64_t n = x.num_elements();
  const int64_t channels = args.inputs[2].num_elements();
  const auto& a = args.get_attrs<FakeQuantAttrs>();
  visit<DTypeSet::kFloat>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dy = data<T>(args.inputs[0]);
    const T* lo = data<T>(args.inputs[2]);
    const T* hi = data<T>(args.inputs[3]);
    if (n > 0) {
      fake_quant_dx_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
          dy, data<T>(x), lo, hi, data<T>(args.outputs[0]), n, channels, a, kPerChannel);
      check_launch(args.op);
    }
    if (channels > 0) {
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(channels, kMaxBlocks));
      fake_quant_dminmax_kernel<T><<<blocks, kThreads, 0, stream_of(args)>>>(
          dy, data<T>(x), lo, hi, data<T>(args.outputs[1]), data<T>(args.outputs[2]), n, channels,
          a);
      check_launch(args.op);
    }
  });
}

}  // namespace

void add_quantization_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&fake_quant<false>>("fake_quant_with_min_max_vars"));
  table.push_back(
      cuda_kernel<&fake_quant_gradient<false>>("fake_quant_with_min_max_vars_gradient"));
  table.push_back(cuda_kernel<&fake_quant<true>>("fake_quant_with_min_max_vars_per_channel"));
  table.push_back(
      cuda_kernel<&fake_quant_gradient<true>>("fake_quant_with_min_max_vars_per_channel_gradient"));
}

}  // namespace trainyard::cuda
