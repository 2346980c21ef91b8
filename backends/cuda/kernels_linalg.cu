// The CUDA kernels of the linalg ops (core/src/ops/linalg.cc): matmul through cuBLAS's strided
// batched GEMM, and matmul_bias_act as that GEMM followed by one pass adding the bias and
// applying the activation.
//
// Tensors are row-major and cuBLAS is column-major: a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so each call passes B before A and the dims as (n, m, k).
// f32 uses cuBLAS's default math (no TF32), so results match the CPU's f32 products.
#include <cublas_v2.h>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

struct Gemm {
  int64_t batch = 1;
  bool shared_a = false, shared_b = false;  // one matrix used by every batch
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
};

Gemm gemm_of(const Tensor& a, const Tensor& b, const Tensor& out, const MatMulAttrs& attrs) {
  const Shape& as = a.shape();
  const Shape& os = out.shape();
  Gemm g;
  g.transpose_a = attrs.transpose_a;
  g.transpose_b = attrs.transpose_b;
  g.m = os[os.rank() - 2];
  g.n = os[os.rank() - 1];
  g.k = g.transpose_a ? as[as.rank() - 2] : as[as.rank() - 1];
  g.batch = out.num_elements() / std::max<int64_t>(g.m * g.n, 1);
  g.shared_a = a.shape().rank() == 2 && os.rank() > 2;
  g.shared_b = b.shape().rank() == 2 && os.rank() > 2;
  return g;
}

template <class T>
void gemm(CudaBackend& backend, const char* op, cudaStream_t stream, const Gemm& g, const T* a,
          const T* b, T* c) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (g.k == 0) {
    check_cuda(cudaMemsetAsync(c, 0, sizeof(T) * g.batch * g.m * g.n, stream),
               std::string(op) + ": cudaMemsetAsync");
    return;
  }
  cublasHandle_t handle = backend.cublas(stream);
  const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Leading dims of the row-major storage: a is [m, k] (or [k, m] transposed), b [k, n].
  const int64_t lda = g.transpose_a ? g.m : g.k;
  const int64_t ldb = g.transpose_b ? g.k : g.n;
  const int64_t stride_a = g.shared_a ? 0 : g.m * g.k;
  const int64_t stride_b = g.shared_b ? 0 : g.k * g.n;
  const int64_t stride_c = g.m * g.n;
  const T one = 1, zero = 0;
  cublasStatus_t status;
  if constexpr (std::is_same_v<T, float>) {
    status = cublasSgemmStridedBatched_64(handle, op_b, op_a, g.n, g.m, g.k, &one, b, ldb, stride_b,
                                          a, lda, stride_a, &zero, c, g.n, stride_c, g.batch);
  } else {
    status = cublasDgemmStridedBatched_64(handle, op_b, op_a, g.n, g.m, g.k, &one, b, ldb, stride_b,
                                          a, lda, stride_a, &zero, c, g.n, stride_c, g.batch);
  }
  check_cublas(status, std::string(op) + ": GEMM of [" + std::to_string(g.m) + ", " +
                           std::to_string(g.k) + "] x [" + std::to_string(g.k) + ", " +
                           std::to_string(g.n) + "], batch " + std::to_string(g.batch));
}

void matmul_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  const Gemm g = gemm_of(a, b, out, args.get_attrs<MatMulAttrs>());
  visit<DTypeSet::kFloat>(args.op, a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm<T>(cuda_backend(backend), args.op, stream_of(args), g, data<T>(a), data<T>(b),
            data<T>(out));
  });
}

// The activations of matmul_bias_act, as the CPU computes them (kernels_linalg.cc).
template <class T>
__device__ T activate(Activation activation, T x) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kSigmoid:
      return T(1) / (T(1) + exp(-x));
    case Activation::kTanh:
      return tanh(x);
  }
  return x;
}

// c[i, j] = activation(c[i, j] + bias[j]) over a [rows, n] matrix.
template <class T>
__global__ void bias_act(T* c, const T* bias, int64_t rows, int64_t n, Activation activation) {
  TRAINYARD_GRID_LOOP(i, rows * n) { c[i] = activate(activation, c[i] + bias[i % n]); }
}

void matmul_bias_act_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& w = args.inputs[1];
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<MatMulAttrs>();
  const Gemm g = gemm_of(x, w, out, MatMulAttrs{});
  visit<DTypeSet::kFloat>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaStream_t stream = stream_of(args);
    gemm<T>(cuda_backend(backend), args.op, stream, g, data<T>(x), data<T>(w), data<T>(out));
    const int64_t count = g.m * g.n;
    if (count == 0) return;
    bias_act<T><<<blocks_for(count), kThreads, 0, stream>>>(data<T>(out), data<T>(args.inputs[2]),
                                                            g.m, g.n, attrs.activation);
    check_launch(args.op);
  });
}

}  // namespace

void add_linalg_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&matmul_kernel>("matmul"));
  table.push_back(cuda_kernel<&matmul_bias_act_kernel>("matmul_bias_act"));
}

}  // namespace trainyard::cuda
