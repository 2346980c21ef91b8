// The CUDA kernels of the convolutions of the nn family (core/src/ops/nn.cc: conv2d and its
// two gradients), with the CPU backend's semantics (backends/cpu/kernels_nn.cc).
//
// Convolutions run as GEMMs through cuBLAS, through cuDNN's convolution API on NHWC tensors, or
// as own direct kernels, f32 without tensor-core (TF32) math throughout.
//
// The GEMM path (groups == 1) lays each output position's window of the input out as a row of a
// column matrix (im2col, zero outside the input, with the op's own padding), so that the output
// is that matrix times the filter as TensorFlow stores it ([KH, KW, C, O] is a [KH * KW * C, O]
// matrix), the filter gradient the matrix's transpose times dy, and the input gradient a gather
// (col2im) from dy times the filter's transpose. Batches whose column matrix would be large run
// in chunks of images (filter gradients adding up the chunks' products in chunk order); 1x1
// windows at stride 1 without padding need no column matrix, the input already is one.
//
// cuDNN wants filters as [O, KH, KW, C / groups] (KRSC), so filters are transposed into a
// temporary (and filter gradients back); it pads both sides of an axis alike, so an asymmetric
// padding is done explicitly on a padded copy of the input (and the input gradient is cropped
// from a padded one). The direct kernels, one thread per output element, serve what neither
// takes: groups > 1 where cuDNN lists no deterministic algorithm (f64's backward passes on
// NHWC, with cuDNN 9 on Hopper).
//
// The method is chosen once per pass, dtype and problem. With the backend's autotune on, the
// GEMM path and the deterministic cuDNN algorithm that cudnnFind* measures fastest each run a
// few times on the first call's buffers, timed with all their transposes and copies, and the
// faster is kept. With it off, the GEMM path runs filter gradients and whatever cuDNN has no
// deterministic algorithm for, and cuDNN's heuristic choice the rest: the same choice in every
// process. cuBLAS's GEMMs are deterministic (its atomics are off by default).
#include <cublas_v2.h>
#include <cudnn.h>

#include <climits>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

void fill_zero(const Tensor& t, cudaStream_t stream, const char* op) {
  check_cuda(cudaMemsetAsync(data<std::byte>(t), 0, t.size_bytes(), stream),
             std::string(op) + ": cudaMemsetAsync");
}

// ---------------------------------------------------------------------------------------------
// Convolution

enum class ConvPass { kForward, kBackwardInput, kBackwardFilter };

// One spatial axis of a convolution as cuDNN runs it: `pad` on both sides of the input padded
// explicitly by extra_before and extra_after (at most one of them non-zero). Padding after the
// input that no window reaches (an explicit padding may have some) is dropped first.
struct ConvAxis {
  int64_t in = 0, window = 0, stride = 1, dilation = 1;
  int64_t pad = 0, extra_before = 0, extra_after = 0;
  int64_t padded() const { return in + extra_before + extra_after; }
  // The op's padding before the input, and the extent of the input with all its padding (which
  // every window lies in).
  int64_t pad_before() const { return pad + extra_before; }
  int64_t extent() const { return padded() + 2 * pad; }
};

ConvAxis conv_axis(int64_t in, int64_t window, int64_t stride, int64_t dilation, int64_t pad_before,
                   int64_t out) {
  // The padded extent the `out` windows span, and the part of it after the input.
  const int64_t span = (out - 1) * stride + (window - 1) * dilation + 1;
  const int64_t pad_after = std::max<int64_t>(span - in - pad_before, 0);
  ConvAxis a{in, window, stride, dilation};
  a.pad = std::min(pad_before, pad_after);
  a.extra_before = pad_before - a.pad;
  a.extra_after = pad_after - a.pad;
  return a;
}

// input [n, h, w, c], filter [kh, kw, cg = c / groups, o], output [n, oh, ow, o].
struct ConvProblem {
  int64_t n = 0, c = 0, o = 0, cg = 0, groups = 1, oh = 0, ow = 0;
  ConvAxis h, w;
  bool explicitly_padded() const {
    return h.extra_before != 0 || h.extra_after != 0 || w.extra_before != 0 || w.extra_after != 0;
  }
  int64_t padded_input_elements() const { return n * h.padded() * w.padded() * c; }
  int64_t filter_elements() const { return h.window * w.window * cg * o; }
};

ConvProblem conv_problem(const Shape& input, const Shape& filter, const Shape& output,
                         const Conv2DAttrs& a) {
  ConvProblem p;
  p.n = input[0];
  p.c = input[3];
  p.cg = filter[2];
  p.o = filter[3];
  p.groups = a.groups;
  p.oh = output[1];
  p.ow = output[2];
  p.h = conv_axis(input[1], filter[0], a.stride_h, a.dilation_h, a.pad_top, p.oh);
  p.w = conv_axis(input[2], filter[1], a.stride_w, a.dilation_w, a.pad_left, p.ow);
  return p;
}

// out = in transposed, for a row-major [rows, cols] matrix: TensorFlow's [KH, KW, C / g, O]
// filter is [KH * KW * C / g, O], cuDNN's [O, KH, KW, C / g] its transpose.
template <class T>
__global__ void transpose_matrix(const T* in, int64_t rows, int64_t cols, T* out) {
  TRAINYARD_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, col = i % cols;
    out[col * rows + r] = in[i];
  }
}

// An NHWC image batch [n, h, w, c] inside a zero-padded [n, ph, pw, c] one, `top` rows and
// `left` columns in.
struct PaddedImage {
  int64_t n, h, w, c, ph, pw, top, left;
};

// padded = the image surrounded by zeros.
template <class T>
__global__ void pad_image(PaddedImage g, const T* image, T* padded) {
  TRAINYARD_GRID_LOOP(i, g.n * g.ph * g.pw * g.c) {
    const int64_t ch = i % g.c;
    int64_t r = i / g.c;
    const int64_t x = r % g.pw - g.left;
    r /= g.pw;
    const int64_t y = r % g.ph - g.top;
    const int64_t b = r / g.ph;
    const bool inside = y >= 0 && y < g.h && x >= 0 && x < g.w;
    padded[i] = inside ? image[((b * g.h + y) * g.w + x) * g.c + ch] : T(0);
  }
}

// image = the padded image without its border.
template <class T>
__global__ void crop_image(PaddedImage g, const T* padded, T* image) {
  TRAINYARD_GRID_LOOP(i, g.n * g.h * g.w * g.c) {
    const int64_t ch = i % g.c;
    int64_t r = i / g.c;
    const int64_t x = r % g.w;
    r /= g.w;
    const int64_t y = r % g.h;
    const int64_t b = r / g.h;
    image[i] = padded[((b * g.ph + y + g.top) * g.pw + x + g.left) * g.c + ch];
  }
}

PaddedImage padded_image(const ConvProblem& p) {
  return {p.n, p.h.in, p.w.in, p.c, p.h.padded(), p.w.padded(), p.h.extra_before, p.w.extra_before};
}

template <class T>
constexpr cudnnDataType_t cudnn_type() {
  return std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

int cudnn_int(int64_t v, const std::string& op) {
  if (v > INT_MAX) throw Error("cuda: " + op + ": a dimension beyond cuDNN's int range");
  return static_cast<int>(v);
}

// A cuDNN descriptor, destroyed with its owner.
template <class Handle, cudnnStatus_t (*kCreate)(Handle*), cudnnStatus_t (*kDestroy)(Handle)>
class Descriptor {
 public:
  explicit Descriptor(const std::string& what) { check_cudnn(kCreate(&handle_), what); }
  ~Descriptor() { kDestroy(handle_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

// The descriptors of a convolution as cuDNN runs it: x the (padded) input, w the KRSC filter,
// y the output, conv the convolution (cross-correlation, symmetric pads, groups, FMA math).
struct ConvDescriptors {
  ConvDescriptors(const ConvProblem& p, cudnnDataType_t type, const std::string& op)
      : x(op + ": cudnnCreateTensorDescriptor"),
        y(op + ": cudnnCreateTensorDescriptor"),
        w(op + ": cudnnCreateFilterDescriptor"),
        conv(op + ": cudnnCreateConvolutionDescriptor") {
    auto i = [&](int64_t v) { return cudnn_int(v, op); };
    check_cudnn(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NHWC, type, i(p.n), i(p.c),
                                           i(p.h.padded()), i(p.w.padded())),
                op + ": input descriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NHWC, type, i(p.n), i(p.o),
                                           i(p.oh), i(p.ow)),
                op + ": output descriptor");
    check_cudnn(cudnnSetFilter4dDescriptor(w.get(), type, CUDNN_TENSOR_NHWC, i(p.o), i(p.cg),
                                           i(p.h.window), i(p.w.window)),
                op + ": filter descriptor");
    check_cudnn(cudnnSetConvolution2dDescriptor(conv.get(), i(p.h.pad), i(p.w.pad), i(p.h.stride),
                                                i(p.w.stride), i(p.h.dilation), i(p.w.dilation),
                                                CUDNN_CROSS_CORRELATION, type),
                op + ": convolution descriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(conv.get(), i(p.groups)), op + ": group count");
    // FMA math: cuDNN's default would allow TF32 tensor cores for f32 on Ampere and later.
    check_cudnn(cudnnSetConvolutionMathType(conv.get(), CUDNN_FMA_MATH), op + ": math type");
  }

  Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> x,
      y;
  Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> w;
  Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
             cudnnDestroyConvolutionDescriptor>
      conv;
};

// What identifies a convolution for the choice of its method: pass, dtype, device, autotune
// and the problem, both as cuDNN sees it and as the GEMM path does (the op's own padding).
using ConvKey = std::array<int64_t, 24>;

ConvKey conv_key(ConvPass pass, cudnnDataType_t type, int device, bool autotune,
                 const ConvProblem& p) {
  return {static_cast<int64_t>(pass),
          static_cast<int64_t>(autotune),
          static_cast<int64_t>(type),
          device,
          p.n,
          p.c,
          p.h.padded(),
          p.w.padded(),
          p.o,
          p.groups,
          p.h.window,
          p.w.window,
          p.h.pad,
          p.w.pad,
          p.h.stride,
          p.w.stride,
          p.h.dilation,
          p.w.dilation,
          p.h.in,
          p.w.in,
          p.h.extra_before,
          p.w.extra_before,
          p.oh,
          p.ow};
}

enum class ConvMethod { kGemm, kCudnn, kDirect };

// A method chosen for a key, with cuDNN's algorithm and its workspace size for kCudnn.
struct ConvAlgorithm {
  ConvMethod method = ConvMethod::kDirect;
  int algo = 0;
  std::size_t workspace = 0;  // bytes
};

// The methods chosen so far, shared by every thread and backend.
class AlgorithmCache {
 public:
  bool find(const ConvKey& key, ConvAlgorithm* algorithm) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = chosen_.find(key);
    if (it == chosen_.end()) return false;
    *algorithm = it->second;
    return true;
  }
  // Keeps the first choice for a key (threads may choose at once) and returns it.
  ConvAlgorithm insert(const ConvKey& key, const ConvAlgorithm& algorithm) {
    std::lock_guard<std::mutex> lock(mutex_);
    return chosen_.emplace(key, algorithm).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<ConvKey, ConvAlgorithm> chosen_;
};

AlgorithmCache& algorithm_cache() {
  static AlgorithmCache cache;
  return cache;
}

// The first algorithm of cuDNN's list (fastest first: measured by cudnnFind* when autotuning,
// else its heuristics' order) that is deterministic, runs on this problem and uses no
// tensor-core math, with its workspace size, or kDirect when there is none.
// list(count, &returned, results) lists them, workspace(algo, &bytes) sizes one.
template <class Perf, int kCount, class List, class Workspace>
ConvAlgorithm first_deterministic(const std::string& op, List list, Workspace workspace) {
  std::array<Perf, kCount> results{};
  int returned = 0;
  check_cudnn(list(kCount, &returned, results.data()), op + ": listing algorithms");
  for (int i = 0; i < returned; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    if (r.status == CUDNN_STATUS_SUCCESS && r.determinism == CUDNN_DETERMINISTIC &&
        (r.mathType == CUDNN_DEFAULT_MATH || r.mathType == CUDNN_FMA_MATH)) {
      ConvAlgorithm chosen{ConvMethod::kCudnn, static_cast<int>(r.algo)};
      check_cudnn(workspace(r.algo, &chosen.workspace), op + ": workspace size");
      return chosen;
    }
  }
  return {};
}

// cuDNN's algorithm for pass kPass of the convolution that `d` describes. Autotuning times
// every algorithm (cudnnFind*, which waits for the stream: the first step is slower).
template <ConvPass kPass>
ConvAlgorithm cudnn_algorithm(cudnnHandle_t handle, const ConvDescriptors& d, bool autotune,
                              const std::string& op) {
  if constexpr (kPass == ConvPass::kForward) {
    return first_deterministic<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
        op,
        [&](int count, int* returned, cudnnConvolutionFwdAlgoPerf_t* results) {
          return autotune ? cudnnFindConvolutionForwardAlgorithm(handle, d.x.get(), d.w.get(),
                                                                 d.conv.get(), d.y.get(), count,
                                                                 returned, results)
                          : cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x.get(), d.w.get(),
                                                                   d.conv.get(), d.y.get(), count,
                                                                   returned, results);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(handle, d.x.get(), d.w.get(), d.conv.get(),
                                                         d.y.get(), algo, bytes);
        });
  } else if constexpr (kPass == ConvPass::kBackwardInput) {
    return first_deterministic<cudnnConvolutionBwdDataAlgoPerf_t,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        op,
        [&](int count, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* results) {
          return autotune ? cudnnFindConvolutionBackwardDataAlgorithm(handle, d.w.get(), d.y.get(),
                                                                      d.conv.get(), d.x.get(),
                                                                      count, returned, results)
                          : cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                handle, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), count,
                                returned, results);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.w.get(), d.y.get(),
                                                              d.conv.get(), d.x.get(), algo, bytes);
        });
  } else {
    return first_deterministic<cudnnConvolutionBwdFilterAlgoPerf_t,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        op,
        [&](int count, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
          return autotune
                     ? cudnnFindConvolutionBackwardFilterAlgorithm(handle, d.x.get(), d.y.get(),
                                                                   d.conv.get(), d.w.get(), count,
                                                                   returned, results)
                     : cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.x.get(), d.y.get(),
                                                                     d.conv.get(), d.w.get(), count,
                                                                     returned, results);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), algo, bytes);
        });
  }
}

// The direct kernels, for what neither the GEMM path nor cuDNN's deterministic algorithms take
// (f64's backward passes with groups > 1): one thread per output element sums its terms in a fixed
// order, with TensorFlow's padding as it is. Output channel oc belongs to group oc / og and reads
// the input channels of that group.
struct DirectConv {
  int64_t n, h, w, c, kh, kw, cg, o, og, oh, ow;
  int64_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
};

DirectConv direct_conv(const ConvProblem& p) {
  return {p.n,
          p.h.in,
          p.w.in,
          p.c,
          p.h.window,
          p.w.window,
          p.cg,
          p.o,
          p.o / p.groups,
          p.oh,
          p.ow,
          p.h.stride,
          p.w.stride,
          p.h.dilation,
          p.w.dilation,
          p.h.pad_before(),
          p.w.pad_before()};
}

// conv2d: y[b, oy, ox, oc] = the sum over taps (ky, kx) inside the input and the channels ci
// of oc's group of x[b, iy, ix, group * cg + ci] * f[ky, kx, ci, oc].
template <class T>
__global__ void direct_forward(DirectConv p, const T* x, const T* f, T* y) {
  TRAINYARD_GRID_LOOP(i, p.n * p.oh * p.ow * p.o) {
    const int64_t oc = i % p.o;
    int64_t r = i / p.o;
    const int64_t ox = r % p.ow;
    r /= p.ow;
    const int64_t oy = r % p.oh;
    const int64_t b = r / p.oh;
    const int64_t c0 = oc / p.og * p.cg;
    T sum = 0;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        if (ix < 0 || ix >= p.w) continue;
        const T* in = x + ((b * p.h + iy) * p.w + ix) * p.c + c0;
        const T* taps = f + (ky * p.kw + kx) * p.cg * p.o + oc;
        for (int64_t ci = 0; ci < p.cg; ++ci) sum += in[ci] * taps[ci * p.o];
      }
    }
    y[i] = sum;
  }
}

// conv2d_backward_input: dx[b, iy, ix, ch] = the sum over the taps (ky, kx) and outputs
// (oy, ox) that read (iy, ix), and the output channels oc of ch's group, of
// dy[b, oy, ox, oc] * f[ky, kx, ch % cg, oc].
template <class T>
__global__ void direct_backward_input(DirectConv p, const T* dy, const T* f, T* dx) {
  TRAINYARD_GRID_LOOP(i, p.n * p.h * p.w * p.c) {
    const int64_t ch = i % p.c;
    int64_t r = i / p.c;
    const int64_t ix = r % p.w;
    r /= p.w;
    const int64_t iy = r % p.h;
    const int64_t b = r / p.h;
    const int64_t o0 = ch / p.cg * p.og;
    T sum = 0;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = iy + p.pad_top - ky * p.dilation_h;
      if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= p.oh) continue;
      const int64_t oy = ty / p.stride_h;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t tx = ix + p.pad_left - kx * p.dilation_w;
        if (tx < 0 || tx % p.stride_w != 0 || tx / p.stride_w >= p.ow) continue;
        const int64_t ox = tx / p.stride_w;
        const T* d = dy + ((b * p.oh + oy) * p.ow + ox) * p.o + o0;
        const T* taps = f + ((ky * p.kw + kx) * p.cg + ch % p.cg) * p.o + o0;
        for (int64_t j = 0; j < p.og; ++j) sum += d[j] * taps[j];
      }
    }
    dx[i] = sum;
  }
}

// conv2d_backward_filter: df[ky, kx, ci, oc] = the sum over images and outputs (oy, ox) whose
// tap (ky, kx) is inside the input of x[b, iy, ix, group * cg + ci] * dy[b, oy, ox, oc].
template <class T>
__global__ void direct_backward_filter(DirectConv p, const T* x, const T* dy, T* df) {
  TRAINYARD_GRID_LOOP(i, p.kh * p.kw * p.cg * p.o) {
    const int64_t oc = i % p.o;
    int64_t r = i / p.o;
    const int64_t ci = r % p.cg;
    r /= p.cg;
    const int64_t kx = r % p.kw;
    const int64_t ky = r / p.kw;
    const int64_t ch = oc / p.og * p.cg + ci;
    T sum = 0;
    for (int64_t b = 0; b < p.n; ++b) {
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
        if (iy < 0 || iy >= p.h) continue;
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
          if (ix < 0 || ix >= p.w) continue;
          sum += x[((b * p.h + iy) * p.w + ix) * p.c + ch] *
                 dy[((b * p.oh + oy) * p.ow + ox) * p.o + oc];
        }
      }
    }
    df[i] = sum;
  }
}

template <class T, ConvPass kPass>
void direct_convolution(const KernelArgs& args, const ConvProblem& p) {
  const DirectConv g = direct_conv(p);
  const T* in0 = data<T>(args.inputs[0]);
  const T* in1 = data<T>(args.inputs[1]);
  T* out = data<T>(args.outputs[0]);
  const unsigned blocks = blocks_for(args.outputs[0].num_elements());
  cudaStream_t stream = stream_of(args);
  if constexpr (kPass == ConvPass::kForward) {
    direct_forward<T><<<blocks, kThreads, 0, stream>>>(g, in0, in1, out);
  } else if constexpr (kPass == ConvPass::kBackwardInput) {
    direct_backward_input<T><<<blocks, kThreads, 0, stream>>>(g, in0, in1, out);
  } else {
    direct_backward_filter<T><<<blocks, kThreads, 0, stream>>>(g, in0, in1, out);
  }
  check_launch(args.op);
}

// The GEMM path, for groups == 1. A chunk of n images has the column matrix
// cols [n * oh * ow, kh * kw * c] whose row (b, oy, ox) holds at column (ky * kw + kx) * c + ci
// the input element x[b, oy * stride_h - pad_top + ky * dilation_h,
// ox * stride_w - pad_left + kx * dilation_w, ci], zero outside the input: the chunk's output
// [n * oh * ow, o] is cols times the filter [kh * kw * c, o]. gemm_plan keeps every index and
// coordinate of a chunk within int.
struct Columns {
  int n, h, w, c, kh, kw, oh, ow;
  int stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
  __host__ __device__ int row_length() const { return kh * kw * c; }
  __host__ __device__ int elements() const { return n * oh * ow * row_length(); }
  __host__ __device__ int input_elements() const { return n * h * w * c; }
};

// cols[i] (im2col) of the chunk's input x.
template <class T>
__host__ __device__ T column_element(const Columns& g, const T* x, int i) {
  const int ci = i % g.c;
  int r = i / g.c;
  const int kx = r % g.kw;
  r /= g.kw;
  const int ky = r % g.kh;
  r /= g.kh;
  const int ox = r % g.ow;
  r /= g.ow;
  const int oy = r % g.oh;
  const int b = r / g.oh;
  const int iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
  const int ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
  const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
  return inside ? x[((b * g.h + iy) * g.w + ix) * g.c + ci] : T(0);
}

// dx[i] of the chunk's input gradient [n, h, w, c] from the gradient dcols of its column
// matrix (col2im as a gather): the sum, over the taps (ky, kx) in row-major order whose windows
// hold input element i, of its entry in that window's row.
template <class T>
__host__ __device__ T input_gradient_element(const Columns& g, const T* dcols, int i) {
  const int ci = i % g.c;
  int r = i / g.c;
  const int ix = r % g.w;
  r /= g.w;
  const int iy = r % g.h;
  const int b = r / g.h;
  T sum = 0;
  for (int ky = 0; ky < g.kh; ++ky) {
    // Output row oy reads iy at tap ky where oy * stride_h = iy + pad_top - ky * dilation_h.
    const int ty = iy + g.pad_top - ky * g.dilation_h;
    if (ty < 0 || ty % g.stride_h != 0 || ty / g.stride_h >= g.oh) continue;
    const int row = (b * g.oh + ty / g.stride_h) * g.ow;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int tx = ix + g.pad_left - kx * g.dilation_w;
      if (tx < 0 || tx % g.stride_w != 0 || tx / g.stride_w >= g.ow) continue;
      sum += dcols[(row + tx / g.stride_w) * g.row_length() + (ky * g.kw + kx) * g.c + ci];
    }
  }
  return sum;
}

template <class T>
__global__ void im2col(Columns g, const T* x, T* cols) {
  TRAINYARD_GRID_LOOP(i, g.elements()) cols[i] = column_element(g, x, static_cast<int>(i));
}

template <class T>
__global__ void col2im(Columns g, const T* dcols, T* dx) {
  TRAINYARD_GRID_LOOP(i, g.input_elements()) {
    dx[i] = input_gradient_element(g, dcols, static_cast<int>(i));
  }
}

// A chunk's column matrix, and its input, stay within this many bytes.
constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

// How a convolution runs on the GEMM path: in chunks of `chunk.n` images (the last may hold
// fewer) with the geometry `chunk`; `columns` false where the input is its own column matrix
// (1x1 windows at stride 1 without padding).
struct GemmPlan {
  Columns chunk;
  bool columns;
};

// The GEMM plan of p for elements of element_bytes, or none: groups > 1, one image beyond
// kMaxChunkBytes, or coordinates beyond int (they stay within twice an axis's extent).
std::optional<GemmPlan> gemm_plan(const ConvProblem& p, std::size_t element_bytes) {
  if (p.groups != 1) return std::nullopt;
  const int64_t limit = kMaxChunkBytes / static_cast<int64_t>(element_bytes);  // elements
  const int64_t row_length = p.h.window * p.w.window * p.c;
  const int64_t image = p.h.in * p.w.in * p.c;
  if (row_length > limit || p.oh * p.ow > limit / row_length || image > limit) {
    return std::nullopt;
  }
  for (const ConvAxis& a : {p.h, p.w}) {
    if (a.extent() > INT_MAX / 2 || a.stride > INT_MAX || a.dilation > INT_MAX) {
      return std::nullopt;
    }
  }
  const int64_t images = std::min(p.n, limit / std::max(p.oh * p.ow * row_length, image));
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const Columns chunk{i(images),           i(p.h.in),          i(p.w.in),       i(p.c),
                      i(p.h.window),       i(p.w.window),      i(p.oh),         i(p.ow),
                      i(p.h.stride),       i(p.w.stride),      i(p.h.dilation), i(p.w.dilation),
                      i(p.h.pad_before()), i(p.w.pad_before())};
  const bool identity = p.h.window == 1 && p.w.window == 1 && p.h.stride == 1 && p.w.stride == 1 &&
                        p.h.pad_before() == 0 && p.w.pad_before() == 0 && p.oh == p.h.in &&
                        p.ow == p.w.in;
  return GemmPlan{chunk, !identity};
}

// Row-major c [m, n] = op(a) op(b) + beta c, where a is [m, k] (or [k, m] to transpose) and b
// [k, n] (or [n, k]). cuBLAS is column-major: it computes c^T = op(b)^T op(a)^T, b first.
template <class T>
void row_major_gemm(cublasHandle_t handle, const std::string& op, bool transpose_a,
                    bool transpose_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
                    T beta, T* c) {
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t lda = transpose_a ? m : k;
  const int64_t ldb = transpose_b ? k : n;
  const T one = 1;
  cublasStatus_t status;
  if constexpr (std::is_same_v<T, float>) {
    status = cublasSgemm_64(handle, op_b, op_a, n, m, k, &one, b, ldb, a, lda, &beta, c, n);
  } else {
    status = cublasDgemm_64(handle, op_b, op_a, n, m, k, &one, b, ldb, a, lda, &beta, c, n);
  }
  check_cublas(status, op + ": GEMM of [" + std::to_string(m) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(k) + ", " + std::to_string(n) + "]");
}

// Pass kPass of p on the GEMM path, chunk by chunk. Forward: y = cols f. Backward input:
// dcols = dy f^T, then col2im. Backward filter: df = cols^T dy, each chunk after the first
// adding its product to the earlier ones'.
template <class T, ConvPass kPass>
void gemm_convolution(Backend& backend, const KernelArgs& args, const ConvProblem& p,
                      const GemmPlan& plan) {
  const std::string op = args.op;
  cudaStream_t stream = stream_of(args);
  cublasHandle_t handle = cuda_backend(backend).cublas(stream);
  const int64_t pixels = p.oh * p.ow, row_length = plan.chunk.row_length();
  Scratch cols(backend,
               plan.columns ? static_cast<std::size_t>(plan.chunk.elements()) * sizeof(T) : 0);
  for (int64_t first = 0; first < p.n; first += plan.chunk.n) {
    Columns g = plan.chunk;
    g.n = static_cast<int>(std::min<int64_t>(g.n, p.n - first));
    const int64_t rows = g.n * pixels;
    const int64_t input_offset = first * p.h.in * p.w.in * p.c;
    const int64_t output_offset = first * pixels * p.o;
    if constexpr (kPass == ConvPass::kBackwardInput) {
      T* dx = data<T>(args.outputs[0]) + input_offset;
      T* dcols = plan.columns ? cols.as<T>() : dx;
      row_major_gemm<T>(handle, op, false, true, rows, row_length, p.o,
                        data<T>(args.inputs[0]) + output_offset, data<T>(args.inputs[1]), T(0),
                        dcols);
      if (plan.columns) {
        col2im<T><<<blocks_for(g.input_elements()), kThreads, 0, stream>>>(g, dcols, dx);
        check_launch(args.op);
      }
    } else {
      const T* x = data<T>(args.inputs[0]) + input_offset;
      if (plan.columns) {
        im2col<T><<<blocks_for(g.elements()), kThreads, 0, stream>>>(g, x, cols.as<T>());
        check_launch(args.op);
      }
      const T* chunk_cols = plan.columns ? cols.as<T>() : x;
      if constexpr (kPass == ConvPass::kForward) {
        row_major_gemm<T>(handle, op, false, false, rows, p.o, row_length, chunk_cols,
                          data<T>(args.inputs[1]), T(0), data<T>(args.outputs[0]) + output_offset);
      } else {
        row_major_gemm<T>(handle, op, true, false, row_length, p.o, rows, chunk_cols,
                          data<T>(args.inputs[1]) + output_offset, T(first == 0 ? 0 : 1),
                          data<T>(args.outputs[0]));
      }
    }
  }
}

// Pass kPass of p with cuDNN's algorithm a.
template <class T, ConvPass kPass>
void cudnn_convolution(Backend& backend, const KernelArgs& args, const ConvProblem& p,
                       const ConvAlgorithm& a) {
  const std::string op = args.op;
  cudaStream_t stream = stream_of(args);
  cudnnHandle_t handle = cuda_backend(backend).cudnn(stream);
  ConvDescriptors d(p, cudnn_type<T>(), op);

  // The operands in cuDNN's layouts: the filter (or its gradient) as KRSC, the input (or its
  // gradient) padded when the padding is explicit.
  const int64_t filter_rows = p.h.window * p.w.window * p.cg;
  Scratch krsc(backend, static_cast<std::size_t>(p.filter_elements()) * sizeof(T));
  const bool padded = p.explicitly_padded();
  Scratch padded_input(
      backend, padded ? static_cast<std::size_t>(p.padded_input_elements()) * sizeof(T) : 0);
  const PaddedImage image = padded_image(p);
  if constexpr (kPass != ConvPass::kBackwardFilter) {
    transpose_matrix<T><<<blocks_for(p.filter_elements()), kThreads, 0, stream>>>(
        data<T>(args.inputs[1]), filter_rows, p.o, krsc.as<T>());
    check_launch(args.op);
  }
  if (padded && kPass != ConvPass::kBackwardInput) {
    pad_image<T><<<blocks_for(p.padded_input_elements()), kThreads, 0, stream>>>(
        image, data<T>(args.inputs[0]), padded_input.as<T>());
    check_launch(args.op);
  }
  Scratch workspace(backend, a.workspace);
  const T one = 1, zero = 0;
  if constexpr (kPass == ConvPass::kForward) {
    const T* x = padded ? padded_input.as<T>() : data<T>(args.inputs[0]);
    check_cudnn(
        cudnnConvolutionForward(handle, &one, d.x.get(), x, d.w.get(), krsc.get(), d.conv.get(),
                                static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), workspace.get(),
                                a.workspace, &zero, d.y.get(), data<T>(args.outputs[0])),
        op + ": cudnnConvolutionForward");
  } else if constexpr (kPass == ConvPass::kBackwardInput) {
    T* dx = padded ? padded_input.as<T>() : data<T>(args.outputs[0]);
    check_cudnn(cudnnConvolutionBackwardData(handle, &one, d.w.get(), krsc.get(), d.y.get(),
                                             data<T>(args.inputs[0]), d.conv.get(),
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                                             workspace.get(), a.workspace, &zero, d.x.get(), dx),
                op + ": cudnnConvolutionBackwardData");
    if (padded) {
      crop_image<T><<<blocks_for(args.outputs[0].num_elements()), kThreads, 0, stream>>>(
          image, dx, data<T>(args.outputs[0]));
      check_launch(args.op);
    }
  } else {
    const T* x = padded ? padded_input.as<T>() : data<T>(args.inputs[0]);
    check_cudnn(cudnnConvolutionBackwardFilter(
                    handle, &one, d.x.get(), x, d.y.get(), data<T>(args.inputs[1]), d.conv.get(),
                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), workspace.get(),
                    a.workspace, &zero, d.w.get(), krsc.get()),
                op + ": cudnnConvolutionBackwardFilter");
    transpose_matrix<T><<<blocks_for(p.filter_elements()), kThreads, 0, stream>>>(
        krsc.as<T>(), p.o, filter_rows, data<T>(args.outputs[0]));
    check_launch(args.op);
  }
}

// Queues pass kPass of p with method a.
template <class T, ConvPass kPass>
void run_convolution(Backend& backend, const KernelArgs& args, const ConvProblem& p,
                     const ConvAlgorithm& a) {
  switch (a.method) {
    case ConvMethod::kGemm:
      return gemm_convolution<T, kPass>(backend, args, p, *gemm_plan(p, sizeof(T)));
    case ConvMethod::kCudnn:
      return cudnn_convolution<T, kPass>(backend, args, p, a);
    case ConvMethod::kDirect:
      return direct_convolution<T, kPass>(args, p);
  }
}

// A CUDA event that records time, destroyed with its owner.
class TimingEvent {
 public:
  explicit TimingEvent(const std::string& op) {
    check_cuda(cudaEventCreate(&event_), op + ": cudaEventCreate");
  }
  ~TimingEvent() { cudaEventDestroy(event_); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

constexpr int kTimedRuns = 3;

// The milliseconds kTimedRuns runs of method a take on the call's own buffers (each run writes
// the whole output), after one run that warms up (cuBLAS loads its kernels, the allocator caches
// the temporaries). Waits for the stream.
template <class T, ConvPass kPass>
float time_convolution(Backend& backend, const KernelArgs& args, const ConvProblem& p,
                       const ConvAlgorithm& a) {
  const std::string op = args.op;
  cudaStream_t stream = stream_of(args);
  run_convolution<T, kPass>(backend, args, p, a);
  TimingEvent start(op), stop(op);
  check_cuda(cudaEventRecord(start.get(), stream), op + ": cudaEventRecord");
  for (int i = 0; i < kTimedRuns; ++i) run_convolution<T, kPass>(backend, args, p, a);
  check_cuda(cudaEventRecord(stop.get(), stream), op + ": cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop.get()), op + ": cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), op + ": cudaEventElapsedTime");
  return ms;
}

// The method for pass kPass of p (the header comment says how it is chosen).
template <class T, ConvPass kPass>
ConvAlgorithm choose_algorithm(Backend& backend, const KernelArgs& args, const ConvProblem& p) {
  CudaBackend& cuda = cuda_backend(backend);
  const bool autotune = cuda.autotune();
  const ConvAlgorithm cudnn = cudnn_algorithm<kPass>(
      cuda.cudnn(stream_of(args)), ConvDescriptors(p, cudnn_type<T>(), args.op), autotune, args.op);
  const ConvAlgorithm gemm{ConvMethod::kGemm};
  if (!gemm_plan(p, sizeof(T))) return cudnn;
  if (cudnn.method != ConvMethod::kCudnn) return gemm;
  if (!autotune) return kPass == ConvPass::kBackwardFilter ? gemm : cudnn;
  const float gemm_ms = time_convolution<T, kPass>(backend, args, p, gemm);
  const float cudnn_ms = time_convolution<T, kPass>(backend, args, p, cudnn);
  return gemm_ms <= cudnn_ms ? gemm : cudnn;
}

// Queues one pass of the convolution p on the kernel's stream. Forward: (input, filter) ->
// output; backward input: (dy, filter) -> dinput; backward filter: (input, dy) -> dfilter.
template <class T, ConvPass kPass>
void convolution(Backend& backend, const KernelArgs& args, const ConvProblem& p) {
  CudaBackend& cuda = cuda_backend(backend);
  const ConvKey key = conv_key(kPass, cudnn_type<T>(), cuda.device(), cuda.autotune(), p);
  ConvAlgorithm a;
  if (!algorithm_cache().find(key, &a)) {
    a = algorithm_cache().insert(key, choose_algorithm<T, kPass>(backend, args, p));
  }
  run_convolution<T, kPass>(backend, args, p, a);
}

template <ConvPass kPass>
void conv_kernel(Backend& backend, const KernelArgs& args) {
  const Tensor& in0 = args.inputs[0];
  const Tensor& in1 = args.inputs[1];
  const Tensor& out = args.outputs[0];
  // The (input, filter, output) shapes of the forward convolution.
  const Shape& input = kPass == ConvPass::kBackwardInput ? out.shape() : in0.shape();
  const Shape& filter = kPass == ConvPass::kBackwardFilter ? out.shape() : in1.shape();
  const Shape& output = kPass == ConvPass::kForward         ? out.shape()
                        : kPass == ConvPass::kBackwardInput ? in0.shape()
                                                            : in1.shape();
  visit<DTypeSet::kFloat>(args.op, in0.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (out.num_elements() == 0) return;
    // An empty sum (no images, no input channels): zeros, as cuDNN takes no empty tensors.
    if (in0.num_elements() == 0 || in1.num_elements() == 0) {
      return fill_zero(out, stream_of(args), args.op);
    }
    convolution<T, kPass>(backend, args,
                          conv_problem(input, filter, output, args.get_attrs<Conv2DAttrs>()));
  });
}

}  // namespace

void add_conv_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&conv_kernel<ConvPass::kForward>>("conv2d"));
  table.push_back(cuda_kernel<&conv_kernel<ConvPass::kBackwardInput>>("conv2d_backward_input"));
  table.push_back(cuda_kernel<&conv_kernel<ConvPass::kBackwardFilter>>("conv2d_backward_filter"));
}

}  // namespace trainyard::cuda
