// The CUDA kernels of the loss ops (core/src/ops/loss.cc): sigmoid cross entropy with logits
// and its gradient, elementwise; and the fused composites the CPU backend also fuses
// (backends/cpu/kernels_loss.cc): the YouTube-8M binary cross entropy of probabilities and its
// gradient, and tf.nn.l2_loss. Sums accumulate in f64 in a fixed tree order (one block per row,
// or fixed-size chunks combined in order), so reruns give the same bits.
#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }
__device__ float log_of(float x) { return logf(x); }
__device__ double log_of(double x) { return log(x); }
__device__ float log1p_of(float x) { return log1pf(x); }
__device__ double log1p_of(double x) { return log1p(x); }

// Sums the kThreads values of `s` (one per thread of the block) in a fixed tree order and
// returns the total to every thread. Begins and ends with a barrier, so `s` may be reused.
__device__ double block_sum(double* s, double v) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  const double total = s[0];
  __syncthreads();
  return total;
}

// ---------------------------------------------------------------------------------------------
// Sigmoid cross entropy, (logits x, labels z[, dloss]) elementwise.

// max(x, 0) - x * z + log1p(exp(-|x|)), TensorFlow's overflow-free form.
template <class T>
__global__ void sigmoid_cross_entropy_kernel(const T* x, const T* z, T* out, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T v = x[i];
    out[i] = (v > T(0) ? v : T(0)) - v * z[i] + log1p_of(exp_of(-fabs(v)));
  }
}

// dloss * (sigmoid(x) - z), the sigmoid taken as exp(-|x|)-based without overflow.
template <class T>
__global__ void sigmoid_cross_entropy_grad_kernel(const T* x, const T* z, const T* dloss, T* out,
                                                  int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T v = x[i];
    const T e = exp_of(-fabs(v));
    const T s = T(1) / (T(1) + e);
    const T sigmoid = v >= T(0) ? s : e * s;
    out[i] = dloss[i] * (sigmoid - z[i]);
  }
}

void sigmoid_cross_entropy(Backend&, const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  visit<DTypeSet::kFloat>(args.op, logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = logits.num_elements();
    if (n == 0) return;
    sigmoid_cross_entropy_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(logits), data<T>(args.inputs[1]), data<T>(args.outputs[0]), n);
    check_launch(args.op);
  });
}

void sigmoid_cross_entropy_grad(Backend&, const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  visit<DTypeSet::kFloat>(args.op, logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = logits.num_elements();
    if (n == 0) return;
    sigmoid_cross_entropy_grad_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(logits), data<T>(args.inputs[1]), data<T>(args.inputs[2]), data<T>(args.outputs[0]),
        n);
    check_launch(args.op);
  });
}

// ---------------------------------------------------------------------------------------------
// Binary cross entropy of probabilities p [rows, cols] against labels y, a = eps.

// -(y log(p + eps) + (1 - y) log((1 - p) + eps)), in T as the CPU's composition computes it.
template <class T>
__device__ T bce_term(T p, T y, T eps) {
  const T positive = y * log_of(p + eps);
  const T negative = (-y + T(1)) * log_of((-p + T(1)) + eps);
  return -(positive + negative);
}

// One block per row: out[r] = the f64 sum of the row's terms, in T.
template <class T>
__global__ void binary_cross_entropy_kernel(const T* p, const T* y, T* out, int64_t rows,
                                            int64_t cols, T eps) {
  __shared__ double partial[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      sum += static_cast<double>(bce_term(p[r * cols + c], y[r * cols + c], eps));
    }
    sum = block_sum(partial, sum);
    if (threadIdx.x == 0) out[r] = static_cast<T>(sum);
  }
}

// dp = dloss[row] * ((1 - y) / ((1 - p) + eps) - y / (p + eps)), elementwise.
template <class T>
__global__ void binary_cross_entropy_grad_kernel(const T* p, const T* y, const T* dloss, T* out,
                                                 int64_t n, int64_t cols, T eps) {
  TRAINYARD_GRID_LOOP(i, n) {
    const T pi = p[i], yi = y[i];
    out[i] = dloss[i / cols] * ((-yi + T(1)) / ((-pi + T(1)) + eps) - yi / (pi + eps));
  }
}

// Rows and classes of a [..., C] tensor.
void rows_and_cols(const Tensor& t, int64_t* rows, int64_t* cols) {
  const Shape& shape = t.shape();
  *cols = shape[shape.rank() - 1];
  *rows = 1;
  for (std::size_t d = 0; d + 1 < shape.rank(); ++d) *rows *= shape[d];
}

void binary_cross_entropy(Backend&, const KernelArgs& args) {
  const Tensor& p = args.inputs[0];
  visit<DTypeSet::kFloat>(args.op, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t rows, cols;
    rows_and_cols(p, &rows, &cols);
    if (rows == 0) return;
    const auto eps = static_cast<T>(args.get_attrs<ScalarAttrs>().a);
    binary_cross_entropy_kernel<T><<<blocks_for(rows, 1), kThreads, 0, stream_of(args)>>>(
        data<T>(p), data<T>(args.inputs[1]), data<T>(args.outputs[0]), rows, cols, eps);
    check_launch(args.op);
  });
}

void binary_cross_entropy_grad(Backend&, const KernelArgs& args) {
  const Tensor& p = args.inputs[0];
  visit<DTypeSet::kFloat>(args.op, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t rows, cols;
    rows_and_cols(p, &rows, &cols);
    const int64_t n = rows * cols;
    if (n == 0) return;
    const auto eps = static_cast<T>(args.get_attrs<ScalarAttrs>().a);
    binary_cross_entropy_grad_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(p), data<T>(args.inputs[1]), data<T>(args.inputs[2]), data<T>(args.outputs[0]), n,
        cols, eps);
    check_launch(args.op);
  });
}

// ---------------------------------------------------------------------------------------------
// l2_loss: sum(x^2) / 2 over the whole tensor, in two passes.

// Elements per block of the first pass: the chunks, and so the result, depend only on n.
constexpr int64_t kL2Chunk = int64_t{kThreads} * 16;

// First pass: partial[b] = the f64 sum of squares of chunk b.
template <class T>
__global__ void sum_of_squares_kernel(const T* x, int64_t n, double* partial, int64_t chunks) {
  __shared__ double s[kThreads];
  for (int64_t b = blockIdx.x; b < chunks; b += gridDim.x) {
    const int64_t end = min(n, (b + 1) * kL2Chunk);
    double sum = 0.0;
    for (int64_t i = b * kL2Chunk + threadIdx.x; i < end; i += blockDim.x) {
      const auto v = static_cast<double>(x[i]);
      sum += v * v;
    }
    sum = block_sum(s, sum);
    if (threadIdx.x == 0) partial[b] = sum;
  }
}

// Second pass, one block: *out = (the sum of partial[0, chunks)) / 2, in T.
template <class T>
__global__ void half_total_kernel(const double* partial, int64_t chunks, T* out) {
  __shared__ double s[kThreads];
  double sum = 0.0;
  for (int64_t b = threadIdx.x; b < chunks; b += blockDim.x) sum += partial[b];
  sum = block_sum(s, sum);
  if (threadIdx.x == 0) *out = static_cast<T>(sum / 2);
}

void l2_loss(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  visit<DTypeSet::kFloat>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = x.num_elements();
    const int64_t chunks = std::max<int64_t>(1, (n + kL2Chunk - 1) / kL2Chunk);
    std::shared_ptr<Storage> scratch =
        backend.allocate(static_cast<std::size_t>(chunks) * sizeof(double));
    auto* partial = reinterpret_cast<double*>(static_cast<CudaStorage*>(scratch.get())->data());
    cudaStream_t stream = stream_of(args);
    sum_of_squares_kernel<T>
        <<<blocks_for(chunks, 1), kThreads, 0, stream>>>(data<T>(x), n, partial, chunks);
    check_launch(args.op);
    half_total_kernel<T><<<1, kThreads, 0, stream>>>(partial, chunks, data<T>(args.outputs[0]));
    check_launch(args.op);
  });
}

}  // namespace

void add_loss_kernels(std::vector<KernelRegistration>& table) {
  const KernelRegistration kernels[] = {
      cuda_kernel<&sigmoid_cross_entropy>("sigmoid_cross_entropy_with_logits"),
      cuda_kernel<&sigmoid_cross_entropy_grad>("sigmoid_cross_entropy_with_logits_grad"),
      cuda_kernel<&binary_cross_entropy>("binary_cross_entropy", kFusedComposite),
      cuda_kernel<&binary_cross_entropy_grad>("binary_cross_entropy_grad", kFusedComposite),
      cuda_kernel<&l2_loss>("l2_loss", kFusedComposite),
  };
  table.insert(table.end(), std::begin(kernels), std::end(kernels));
}

}  // namespace trainyard::cuda
