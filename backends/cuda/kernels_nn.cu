// The CUDA kernels of the pooling and batch-norm ops of the nn family (core/src/ops/nn.cc),
// with the CPU backend's semantics (backends/cpu/kernels_nn.cc); the convolutions are
// kernels_conv.cu's.
//
// Pooling and batch norm are own kernels. Pooling gradients gather, for each input element,
// the outputs whose windows hold it, in the CPU's order; batch norm statistics are sums in
// double over fixed chunks of rows added in a fixed order. Nothing uses atomics, so reruns
// give the same bits.
#include <cmath>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Pooling

// input [n, h, w, c], output [n, oh, ow, c]; output (oy, ox) pools the window of rows
// oy * stride_h - pad_top + [0, window_h) and columns likewise, clipped to the input.
struct PoolProblem {
  int64_t n, h, w, c, oh, ow;
  int64_t window_h, window_w, stride_h, stride_w, pad_top, pad_left;

  // The window of output (oy, ox) clipped to the input: rows [y0, y1), columns [x0, x1).
  __device__ void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0,
                         int64_t& x1) const {
    y0 = oy * stride_h - pad_top;
    x0 = ox * stride_w - pad_left;
    y1 = min(y0 + window_h, h);
    x1 = min(x0 + window_w, w);
    y0 = max(y0, int64_t{0});
    x0 = max(x0, int64_t{0});
  }
};

PoolProblem pool_problem(const Shape& input, const Shape& output, const PoolAttrs& a) {
  return {input[0],   input[1],   input[2],   input[3],   output[1], output[2],
          a.window_h, a.window_w, a.stride_h, a.stride_w, a.pad_top, a.pad_left};
}

// The first output index along an axis whose window (stride, window, `pad` before) reaches
// input index i, and the last.
__device__ int64_t first_window(int64_t i, int64_t pad, int64_t window, int64_t stride) {
  const int64_t at = i + pad;
  return at < window ? 0 : (at - window) / stride + 1;
}
__device__ int64_t last_window(int64_t i, int64_t pad, int64_t stride, int64_t outputs) {
  return min((i + pad) / stride, outputs - 1);
}

// max_pool2d / avg_pool2d: y[b, oy, ox, ch] = the maximum of the window, starting from -inf
// so that NaN never wins (padding never does), or its sum over the count of the input
// elements it holds (padding left out, as TensorFlow's SAME).
template <class T, bool kMax>
__global__ void pool_forward(PoolProblem p, const T* x, T* y) {
  TRAINYARD_GRID_LOOP(i, p.n * p.oh * p.ow * p.c) {
    const int64_t ch = i % p.c;
    int64_t r = i / p.c;
    const int64_t ox = r % p.ow;
    r /= p.ow;
    const int64_t oy = r % p.oh;
    const int64_t b = r / p.oh;
    int64_t y0, y1, x0, x1;
    p.window(oy, ox, y0, y1, x0, x1);
    T acc = kMax ? -T(INFINITY) : T(0);
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = x0; ix < x1; ++ix) {
        const T v = x[((b * p.h + iy) * p.w + ix) * p.c + ch];
        if constexpr (kMax) {
          acc = v > acc ? v : acc;
        } else {
          acc += v;
        }
      }
    }
    if constexpr (kMax) {
      y[i] = acc;
    } else {
      y[i] = acc / T(max(y1 - y0, int64_t{0}) * max(x1 - x0, int64_t{0}));
    }
  }
}

// For max_pool2d_grad: where[b, oy, ox, ch] = iy * w + ix of the first maximum of the window
// in row-major order (a NaN first element stays), -1 for an empty window.
template <class T>
__global__ void pool_argmax(PoolProblem p, const T* x, int64_t* where) {
  TRAINYARD_GRID_LOOP(i, p.n * p.oh * p.ow * p.c) {
    const int64_t ch = i % p.c;
    int64_t r = i / p.c;
    const int64_t ox = r % p.ow;
    r /= p.ow;
    const int64_t oy = r % p.oh;
    const int64_t b = r / p.oh;
    int64_t y0, y1, x0, x1;
    p.window(oy, ox, y0, y1, x0, x1);
    if (y1 <= y0 || x1 <= x0) {
      where[i] = -1;
      continue;
    }
    const T* image = x + b * p.h * p.w * p.c + ch;
    int64_t at = y0 * p.w + x0;
    T best = image[at * p.c];
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = x0; ix < x1; ++ix) {
        const T v = image[(iy * p.w + ix) * p.c];
        if (v > best) {
          best = v;
          at = iy * p.w + ix;
        }
      }
    }
    where[i] = at;
  }
}

// max_pool2d_grad / avg_pool2d_grad: dx[b, iy, ix, ch] = the sum, over the outputs whose
// windows hold (iy, ix) in row-major output order, of dy where (iy, ix) is the window's
// argmax (max), or of dy / the window's count (avg).
template <class T, bool kMax>
__global__ void pool_backward(PoolProblem p, const T* dy, const int64_t* where, T* dx) {
  TRAINYARD_GRID_LOOP(i, p.n * p.h * p.w * p.c) {
    const int64_t ch = i % p.c;
    int64_t r = i / p.c;
    const int64_t ix = r % p.w;
    r /= p.w;
    const int64_t iy = r % p.h;
    const int64_t b = r / p.h;
    const int64_t oy1 = last_window(iy, p.pad_top, p.stride_h, p.oh);
    const int64_t ox0 = first_window(ix, p.pad_left, p.window_w, p.stride_w);
    const int64_t ox1 = last_window(ix, p.pad_left, p.stride_w, p.ow);
    T sum = 0;
    for (int64_t oy = first_window(iy, p.pad_top, p.window_h, p.stride_h); oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = ((b * p.oh + oy) * p.ow + ox) * p.c + ch;
        if constexpr (kMax) {
          if (where[o] == iy * p.w + ix) sum += dy[o];
        } else {
          int64_t y0, y1, x0, x1;
          p.window(oy, ox, y0, y1, x0, x1);
          sum += dy[o] * (T(1) / T((y1 - y0) * (x1 - x0)));
        }
      }
    }
    dx[i] = sum;
  }
}

template <class T, bool kMax, bool kForward>
void pool(Backend& backend, const KernelArgs& args) {
  const PoolAttrs& attrs = args.get_attrs<PoolAttrs>();
  const Tensor& out = args.outputs[0];
  const Tensor& dy = args.inputs.back();
  // Forward: (input) -> output; max grad: (input, dy) -> dinput; avg grad: (dy) -> dinput.
  const PoolProblem p = kForward ? pool_problem(args.inputs[0].shape(), out.shape(), attrs)
                                 : pool_problem(out.shape(), dy.shape(), attrs);
  const int64_t outputs = p.n * p.oh * p.ow * p.c;
  if (out.num_elements() == 0) return;
  cudaStream_t stream = stream_of(args);
  if constexpr (kForward) {
    pool_forward<T, kMax>
        <<<blocks_for(outputs), kThreads, 0, stream>>>(p, data<T>(args.inputs[0]), data<T>(out));
    check_launch(args.op);
  } else {
    Scratch where(backend, kMax ? static_cast<std::size_t>(outputs) * sizeof(int64_t) : 0);
    if (kMax && outputs > 0) {
      pool_argmax<T><<<blocks_for(outputs), kThreads, 0, stream>>>(p, data<T>(args.inputs[0]),
                                                                   where.as<int64_t>());
      check_launch(args.op);
    }
    pool_backward<T, kMax><<<blocks_for(out.num_elements()), kThreads, 0, stream>>>(
        p, data<T>(dy), where.as<int64_t>(), data<T>(out));
    check_launch(args.op);
  }
}

template <bool kMax, bool kForward>
void pool_kernel(Backend& backend, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    pool<typename decltype(tag)::type, kMax, kForward>(backend, args);
  });
}

// ---------------------------------------------------------------------------------------------
// Batch norm, over the last axis of x viewed as [rows, c].
//
// Per-column sums run in two passes: blocks of kSumColumns columns by kSumLanes row lanes
// each sum one chunk of rows (lane by lane, then the lanes in order) into partial sums, and one
// thread per column adds the chunks in order. The chunking depends on the shape only.

constexpr int kSumColumns = 32;
constexpr int kSumLanes = 8;
constexpr int64_t kMinChunkRows = 256;
constexpr int64_t kMaxChunks = 1024;

struct Chunking {
  int64_t rows_per_chunk, chunks;
};

Chunking chunking(int64_t rows) {
  const int64_t per = std::max(kMinChunkRows, ceil_div(rows, kMaxChunks));
  return {per, std::max<int64_t>(ceil_div(rows, per), 1)};
}

// The terms of batch_norm_training's sums for row r, column j: x - x[0, j] and its square
// (shifted so that data far from zero loses nothing to cancellation), as the CPU's.
template <class T>
struct StatisticsTerms {
  const T* x;
  int64_t c;
  __device__ void operator()(int64_t r, int64_t j, double& s0, double& s1) const {
    const double d = double(x[r * c + j]) - double(x[j]);
    s0 += d;
    s1 += d * d;
  }
};

// The terms of batch_norm_grad's sums: dy and dy * (x - mean).
template <class T>
struct GradTerms {
  const T* x;
  const T* dy;
  const T* mean;
  int64_t c;
  __device__ void operator()(int64_t r, int64_t j, double& s0, double& s1) const {
    const double d = double(dy[r * c + j]);
    s0 += d;
    s1 += d * (double(x[r * c + j]) - double(mean[j]));
  }
};

// partial[k, 0 or 1, j] = the sums of terms(r, j) over the rows r of chunk k (blockIdx.y)
// for the kSumColumns columns of blockIdx.x.
template <class Terms>
__global__ void column_partial_sums(Terms terms, int64_t rows, int64_t c, int64_t chunk_rows,
                                    double* partial) {
  __shared__ double lane_sums[2][kSumLanes][kSumColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t end = min(begin + chunk_rows, rows);
  double s0 = 0, s1 = 0;
  if (j < c) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kSumLanes) terms(r, j, s0, s1);
  }
  lane_sums[0][threadIdx.y][threadIdx.x] = s0;
  lane_sums[1][threadIdx.y][threadIdx.x] = s1;
  __syncthreads();
  if (threadIdx.y == 0 && j < c) {
    for (int lane = 1; lane < kSumLanes; ++lane) {
      s0 += lane_sums[0][lane][threadIdx.x];
      s1 += lane_sums[1][lane][threadIdx.x];
    }
    double* out = partial + static_cast<int64_t>(blockIdx.y) * 2 * c;
    out[j] = s0;
    out[c + j] = s1;
  }
}

// The two sums of column j over every chunk, added in chunk order.
__device__ void column_totals(const double* partial, int64_t chunks, int64_t c, int64_t j,
                              double& s0, double& s1) {
  s0 = 0;
  s1 = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    s0 += partial[k * 2 * c + j];
    s1 += partial[k * 2 * c + c + j];
  }
}

// Queues the partial sums of terms over x [rows, c] into a scratch array it returns.
template <class Terms>
Scratch column_sums(Backend& backend, const KernelArgs& args, Terms terms, int64_t rows, int64_t c,
                    Chunking k) {
  Scratch partial(backend, static_cast<std::size_t>(k.chunks * 2 * c) * sizeof(double));
  const dim3 grid(static_cast<unsigned>(ceil_div(c, kSumColumns)), static_cast<unsigned>(k.chunks));
  column_partial_sums<<<grid, dim3(kSumColumns, kSumLanes), 0, stream_of(args)>>>(
      terms, rows, c, k.rows_per_chunk, partial.as<double>());
  check_launch(args.op);
  return partial;
}

// batch_norm_training's statistics per column j: mean, biased variance (clamped at 0; NaN for
// no rows, as the CPU's) and scale = gamma / sqrt(variance + epsilon).
template <class T>
__global__ void training_statistics(const double* partial, int64_t chunks, int64_t rows, int64_t c,
                                    const T* x, const T* gamma, double epsilon, T* mean,
                                    T* variance, T* scale) {
  TRAINYARD_GRID_LOOP(j, c) {
    double s0, s1;
    column_totals(partial, chunks, c, j, s0, s1);
    const double n = double(rows);
    const double m = s0 / n;
    const double d = s1 / n - m * m;
    const double v = d < 0.0 ? 0.0 : d;
    mean[j] = static_cast<T>((rows > 0 ? double(x[j]) : 0.0) + m);
    variance[j] = static_cast<T>(v);
    scale[j] = static_cast<T>(double(gamma[j]) / sqrt(v + epsilon));
  }
}

// batch_norm_inference's scale = gamma / sqrt(variance + epsilon) per column.
template <class T>
__global__ void inference_scale(int64_t c, const T* gamma, const T* variance, double epsilon,
                                T* scale) {
  TRAINYARD_GRID_LOOP(j, c) {
    scale[j] = static_cast<T>(double(gamma[j]) / sqrt(double(variance[j]) + epsilon));
  }
}

// y = (x - mean) * scale + shift per column.
template <class T>
__global__ void batch_norm_apply(int64_t count, int64_t c, const T* x, const T* mean,
                                 const T* scale, const T* shift, T* y) {
  TRAINYARD_GRID_LOOP(i, count) {
    const int64_t j = i % c;
    y[i] = (x[i] - mean[j]) * scale[j] + shift[j];
  }
}

// batch_norm_grad per column j: dbeta = sum dy, dgamma = sum dy (x - mean) * inv_std, and the
// coefficients of dx = a dy + b (x - mean) + d (coefficients [3, c]).
template <class T>
__global__ void grad_coefficients(const double* partial, int64_t chunks, int64_t rows, int64_t c,
                                  const T* gamma, const T* variance, double epsilon, T* dgamma,
                                  T* dbeta, T* coefficients) {
  TRAINYARD_GRID_LOOP(j, c) {
    double sum_dy, sum_dy_xc;
    column_totals(partial, chunks, c, j, sum_dy, sum_dy_xc);
    const double n = double(rows);
    const double inv_std = 1.0 / sqrt(double(variance[j]) + epsilon);
    const double g = double(gamma[j]) * inv_std;
    const double dg = sum_dy_xc * inv_std;
    dbeta[j] = static_cast<T>(sum_dy);
    dgamma[j] = static_cast<T>(dg);
    coefficients[j] = static_cast<T>(g);
    coefficients[c + j] = static_cast<T>(-g * inv_std * dg / n);
    coefficients[2 * c + j] = static_cast<T>(-g * sum_dy / n);
  }
}

// dx = a dy + b (x - mean) + d per column.
template <class T>
__global__ void grad_apply(int64_t count, int64_t c, const T* x, const T* dy, const T* mean,
                           const T* coefficients, T* dx) {
  TRAINYARD_GRID_LOOP(i, count) {
    const int64_t j = i % c;
    dx[i] =
        coefficients[j] * dy[i] + coefficients[c + j] * (x[i] - mean[j]) + coefficients[2 * c + j];
  }
}

enum class BatchNormOp { kTraining, kInference, kGrad };

template <class T, BatchNormOp kOp>
void batch_norm(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const int64_t c = x.shape()[x.shape().rank() - 1];
  if (c == 0) return;
  const int64_t count = x.num_elements();
  const int64_t rows = count / c;
  const double epsilon = args.get_attrs<BatchNormAttrs>().epsilon;
  cudaStream_t stream = stream_of(args);
  auto in = [&](std::size_t i) { return data<T>(args.inputs[i]); };
  auto out = [&](std::size_t i) { return data<T>(args.outputs[i]); };
  const Chunking k = chunking(rows);
  if constexpr (kOp == BatchNormOp::kGrad) {
    // (x, gamma, mean, variance, dy) -> (dx, dgamma, dbeta)
    Scratch partial = column_sums(backend, args, GradTerms<T>{in(0), in(4), in(2), c}, rows, c, k);
    Scratch coefficients(backend, static_cast<std::size_t>(3 * c) * sizeof(T));
    grad_coefficients<T><<<blocks_for(c), kThreads, 0, stream>>>(
        partial.as<double>(), k.chunks, rows, c, in(1), in(3), epsilon, out(1), out(2),
        coefficients.as<T>());
    check_launch(args.op);
    if (count == 0) return;
    grad_apply<T><<<blocks_for(count), kThreads, 0, stream>>>(count, c, in(0), in(4), in(2),
                                                              coefficients.as<T>(), out(0));
    check_launch(args.op);
  } else {
    Scratch scale(backend, static_cast<std::size_t>(c) * sizeof(T));
    const T* mean;
    if constexpr (kOp == BatchNormOp::kTraining) {
      // (x, gamma, beta) -> (y, mean, variance)
      Scratch partial = column_sums(backend, args, StatisticsTerms<T>{in(0), c}, rows, c, k);
      training_statistics<T><<<blocks_for(c), kThreads, 0, stream>>>(partial.as<double>(), k.chunks,
                                                                     rows, c, in(0), in(1), epsilon,
                                                                     out(1), out(2), scale.as<T>());
      mean = out(1);
    } else {
      // (x, gamma, beta, mean, variance) -> y
      inference_scale<T>
          <<<blocks_for(c), kThreads, 0, stream>>>(c, in(1), in(4), epsilon, scale.as<T>());
      mean = in(3);
    }
    check_launch(args.op);
    if (count == 0) return;
    batch_norm_apply<T><<<blocks_for(count), kThreads, 0, stream>>>(count, c, in(0), mean,
                                                                    scale.as<T>(), in(2), out(0));
    check_launch(args.op);
  }
}

template <BatchNormOp kOp>
void batch_norm_kernel(Backend& backend, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    batch_norm<typename decltype(tag)::type, kOp>(backend, args);
  });
}

}  // namespace

void add_nn_kernels(std::vector<KernelRegistration>& table) {
  add_conv_kernels(table);
  table.push_back(cuda_kernel<&pool_kernel<true, true>>("max_pool2d"));
  table.push_back(cuda_kernel<&pool_kernel<false, true>>("avg_pool2d"));
  table.push_back(cuda_kernel<&pool_kernel<true, false>>("max_pool2d_grad"));
  table.push_back(cuda_kernel<&pool_kernel<false, false>>("avg_pool2d_grad"));
  table.push_back(cuda_kernel<&batch_norm_kernel<BatchNormOp::kTraining>>("batch_norm_training"));
  table.push_back(cuda_kernel<&batch_norm_kernel<BatchNormOp::kInference>>("batch_norm_inference"));
  table.push_back(cuda_kernel<&batch_norm_kernel<BatchNormOp::kGrad>>("batch_norm_grad"));
}

}  // namespace trainyard::cuda
