// The "reference" backend (reference_backend.h): each kernel reads its inputs as doubles,
// computes with obvious loops over row-major indices, and writes the outputs rounded to their
// dtype. Semantics follow the op declarations' summaries and their attribute structs. The
// math, reduce, linalg, nn, loss and array families' kernels are here, the others' in
// reference_kernels_<family>.cc; TRAINYARD_OP_FAMILIES (trainyard/ops/families.h) says which
// families the reference has.
#include "reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "conformance.h"
#include "reference_kernels.h"
#include "trainyard/error.h"

namespace trainyard::conformance {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Host memory ----

class HostStorage final : public Storage {
 public:
  HostStorage(Backend& backend, std::size_t bytes)
      : backend_(&backend),
        size_(bytes),
        data_(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64))) {
    if (data_ == nullptr) throw Error("reference backend: out of host memory");
  }
  ~HostStorage() override { std::free(data_); }
  std::size_t size_bytes() const override { return size_; }
  Backend& backend() const override { return *backend_; }
  std::byte* data() const { return data_; }
  NativeMemory native_memory() const override { return {DeviceKind::kHost, 0, data_}; }

 private:
  Backend* backend_;
  std::size_t size_;
  std::byte* data_;
};

}  // namespace

// ---- Reading and writing tensors as doubles (reference_kernels.h) ----

namespace reference {

Dims dims_of(const Tensor& t) {
  auto d = t.shape().dims();
  return {d.begin(), d.end()};
}

int64_t count(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Dims unravel(int64_t flat, const Dims& dims) {
  Dims index(dims.size());
  for (std::size_t k = dims.size(); k-- > 0;) {
    index[k] = dims[k] == 0 ? 0 : flat % dims[k];
    flat = dims[k] == 0 ? 0 : flat / dims[k];
  }
  return index;
}

int64_t ravel(const Dims& index, const Dims& dims) {
  int64_t flat = 0;
  for (std::size_t k = 0; k < dims.size(); ++k) flat = flat * dims[k] + index[k];
  return flat;
}

Values read(const Tensor& t) { return host_values(t); }

template <class T>
void encode(const Values& v, std::vector<std::byte>& bytes) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const T x = static_cast<T>(v[i]);
    std::memcpy(bytes.data() + i * sizeof(T), &x, sizeof(T));
  }
}

// Integer outputs truncate toward zero (cast's rule); bool is != 0.
void write(const Tensor& t, const Values& v) {
  if (static_cast<int64_t>(v.size()) != t.num_elements()) {
    throw Error("reference backend: " + std::to_string(v.size()) + " values for " +
                t.description());
  }
  std::vector<std::byte> bytes(t.size_bytes());
  switch (t.dtype()) {
    case DType::kF32:
      encode<float>(v, bytes);
      break;
    case DType::kF64:
      encode<double>(v, bytes);
      break;
    case DType::kI32:
      encode<int32_t>(v, bytes);
      break;
    case DType::kI64:
      encode<int64_t>(v, bytes);
      break;
    case DType::kU8:
      encode<uint8_t>(v, bytes);
      break;
    case DType::kBool: {
      Values b(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i] != 0.0 ? 1.0 : 0.0;
      encode<uint8_t>(b, bytes);
      break;
    }
    case DType::kBF16:
    case DType::kF16:
      throw Unimplemented(std::string("reference backend: no ") + dtype_name(t.dtype()) +
                          " outputs");
  }
  if (!bytes.empty()) {
    t.storage()->backend().copy_from_host(*t.storage(), t.byte_offset(), bytes.data(),
                                          bytes.size());
  }
}

void check_dtypes(const KernelArgs& a) {
  for (const Tensor& t : a.inputs) {
    if (t.dtype() == DType::kBF16 || t.dtype() == DType::kF16) {
      throw Unimplemented(std::string("reference backend: no ") + dtype_name(t.dtype()) + " " +
                          a.op);
    }
  }
}

}  // namespace reference

namespace {

using namespace reference;

// ---- Elementwise, with NumPy broadcasting of every input to the output's shape ----

int64_t broadcast_source(int64_t flat, const Dims& out, const Dims& in) {
  int64_t source = 0, stride = 1;
  auto j = static_cast<int64_t>(in.size()) - 1;
  for (auto k = static_cast<int64_t>(out.size()) - 1; k >= 0; --k, --j) {
    const int64_t index = flat % out[k];
    flat /= out[k];
    if (j >= 0) {
      if (in[j] != 1) source += index * stride;
      stride *= in[j];
    }
  }
  return source;
}

void map_n(const KernelArgs& a, const std::function<double(const double*)>& f) {
  check_dtypes(a);
  const Dims out_dims = dims_of(a.outputs[0]);
  std::vector<Values> in;
  std::vector<Dims> in_dims;
  for (const Tensor& t : a.inputs) {
    in.push_back(read(t));
    in_dims.push_back(dims_of(t));
  }
  Values out(static_cast<std::size_t>(count(out_dims)));
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    for (std::size_t j = 0; j < in.size(); ++j) {
      args[j] = in[j][static_cast<std::size_t>(broadcast_source(i, out_dims, in_dims[j]))];
    }
    out[static_cast<std::size_t>(i)] = f(args.data());
  }
  write(a.outputs[0], out);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

#define TY_ELEMENTWISE(kernel, expression)                                           \
  void kernel(Backend&, const KernelArgs& a) {                                       \
    [[maybe_unused]] const ScalarAttrs* s =                                          \
        a.attrs_size == sizeof(ScalarAttrs) ? &a.get_attrs<ScalarAttrs>() : nullptr; \
    map_n(a, [&](const double* v) -> double { return (expression); });               \
  }

TY_ELEMENTWISE(k_neg, -v[0])
TY_ELEMENTWISE(k_abs, std::fabs(v[0]))
TY_ELEMENTWISE(k_sign, std::isnan(v[0]) ? v[0] : (v[0] > 0) - (v[0] < 0))
TY_ELEMENTWISE(k_exp, std::exp(v[0]))
TY_ELEMENTWISE(k_log, std::log(v[0]))
TY_ELEMENTWISE(k_log1p, std::log1p(v[0]))
TY_ELEMENTWISE(k_sqrt, std::sqrt(v[0]))
TY_ELEMENTWISE(k_rsqrt, 1.0 / std::sqrt(v[0]))
TY_ELEMENTWISE(k_square, v[0] * v[0])
TY_ELEMENTWISE(k_sigmoid, sigmoid(v[0]))
TY_ELEMENTWISE(k_tanh, std::tanh(v[0]))
TY_ELEMENTWISE(k_relu, v[0] > 0 ? v[0] : 0.0)
TY_ELEMENTWISE(k_relu6, std::min(std::max(v[0], 0.0), 6.0))
TY_ELEMENTWISE(k_elu, v[0] > 0 ? v[0] : s->a * std::expm1(v[0]))
TY_ELEMENTWISE(k_softplus, std::max(v[0], 0.0) + std::log1p(std::exp(-std::fabs(v[0]))))
TY_ELEMENTWISE(k_pow_scalar, std::pow(v[0], s->a))
TY_ELEMENTWISE(k_clip_by_value, std::min(std::max(v[0], s->a), s->b))
TY_ELEMENTWISE(k_sigmoid_grad, v[1] * v[0] * (1.0 - v[0]))
TY_ELEMENTWISE(k_tanh_grad, v[1] * (1.0 - v[0] * v[0]))
TY_ELEMENTWISE(k_relu_grad, v[0] > 0 ? v[1] : 0.0)
TY_ELEMENTWISE(k_relu6_grad, v[0] > 0 && v[0] < 6 ? v[1] : 0.0)
TY_ELEMENTWISE(k_elu_grad, v[0] > 0 ? v[1] : v[1] * s->a * std::exp(v[0]))
TY_ELEMENTWISE(k_add, v[0] + v[1])
TY_ELEMENTWISE(k_sub, v[0] - v[1])
TY_ELEMENTWISE(k_mul, v[0] * v[1])
TY_ELEMENTWISE(k_div, v[0] / v[1])
TY_ELEMENTWISE(k_maximum, std::isnan(v[0]) || v[0] > v[1] ? v[0] : v[1])
TY_ELEMENTWISE(k_minimum, std::isnan(v[0]) || v[0] < v[1] ? v[0] : v[1])
TY_ELEMENTWISE(k_pow, std::pow(v[0], v[1]))
TY_ELEMENTWISE(k_equal, v[0] == v[1])
TY_ELEMENTWISE(k_not_equal, v[0] != v[1])
TY_ELEMENTWISE(k_less, v[0] < v[1])
TY_ELEMENTWISE(k_less_equal, v[0] <= v[1])
TY_ELEMENTWISE(k_greater, v[0] > v[1])
TY_ELEMENTWISE(k_greater_equal, v[0] >= v[1])
TY_ELEMENTWISE(k_where, v[0] != 0 ? v[1] : v[2])
TY_ELEMENTWISE(k_sigmoid_cross_entropy,
               std::max(v[0], 0.0) - v[0] * v[1] + std::log1p(std::exp(-std::fabs(v[0]))))
TY_ELEMENTWISE(k_sigmoid_cross_entropy_grad, v[2] * (sigmoid(v[0]) - v[1]))
TY_ELEMENTWISE(k_copy, v[0])
TY_ELEMENTWISE(k_cast, v[0])  // write() truncates toward zero for integers

#undef TY_ELEMENTWISE

void k_fill(Backend&, const KernelArgs& a) {
  const Tensor& out = a.outputs[0];
  write(out, Values(static_cast<std::size_t>(out.num_elements()), a.get_attrs<FillAttrs>().value));
}

// ---- Reductions along a mask of axes, and along one axis ----

enum class Reduction { kSum, kMean, kMax, kMin, kLogSumExp };

void reduce(const KernelArgs& a, Reduction kind) {
  check_dtypes(a);
  const ReduceAttrs& attrs = a.get_attrs<ReduceAttrs>();
  const Dims in_dims = dims_of(a.inputs[0]);
  const Values x = read(a.inputs[0]);
  Dims kept;
  for (std::size_t k = 0; k < in_dims.size(); ++k) {
    if (!(attrs.axis_mask & (1u << k))) kept.push_back(in_dims[k]);
  }
  const std::size_t n = static_cast<std::size_t>(count(kept));
  std::vector<Values> groups(n);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const Dims index = unravel(i, in_dims);
    Dims out_index;
    for (std::size_t k = 0; k < in_dims.size(); ++k) {
      if (!(attrs.axis_mask & (1u << k))) out_index.push_back(index[k]);
    }
    groups[static_cast<std::size_t>(ravel(out_index, kept))].push_back(
        x[static_cast<std::size_t>(i)]);
  }
  Values out(n);
  for (std::size_t o = 0; o < n; ++o) {
    const Values& g = groups[o];
    double r = 0.0;
    switch (kind) {
      case Reduction::kSum:
        for (double v : g) r += v;
        break;
      case Reduction::kMean:
        for (double v : g) r += v;
        r = g.empty() ? kNaN : r / static_cast<double>(g.size());
        break;
      case Reduction::kMax:
      case Reduction::kMin: {
        r = kind == Reduction::kMax ? -kInf : kInf;
        for (double v : g) {
          if (std::isnan(v) || std::isnan(r)) {
            r = kNaN;
          } else {
            r = kind == Reduction::kMax ? std::max(r, v) : std::min(r, v);
          }
        }
        break;
      }
      case Reduction::kLogSumExp: {
        double m = -kInf;
        for (double v : g) m = std::max(m, v);
        if (std::isinf(m)) {
          r = m;
          break;
        }
        double sum = 0.0;
        for (double v : g) sum += std::exp(v - m);
        r = m + std::log(sum);
        break;
      }
    }
    out[o] = r;
  }
  write(a.outputs[0], out);
}

void k_reduce_sum(Backend&, const KernelArgs& a) { reduce(a, Reduction::kSum); }
void k_reduce_mean(Backend&, const KernelArgs& a) { reduce(a, Reduction::kMean); }
void k_reduce_max(Backend&, const KernelArgs& a) { reduce(a, Reduction::kMax); }
void k_reduce_min(Backend&, const KernelArgs& a) { reduce(a, Reduction::kMin); }
void k_logsumexp(Backend&, const KernelArgs& a) { reduce(a, Reduction::kLogSumExp); }

// outer x n x inner around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split(const Dims& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k) {
    if (k < axis) s.outer *= dims[k];
    if (k == axis) s.n = dims[k];
    if (k > axis) s.inner *= dims[k];
  }
  return s;
}

void k_argmax(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]);
  const AxisSplit s = split(dims_of(a.inputs[0]), a.get_attrs<AxisAttrs>().axis);
  Values out(static_cast<std::size_t>(s.outer * s.inner));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        const double v = x[static_cast<std::size_t>((o * s.n + j) * s.inner + i)];
        const double b = x[static_cast<std::size_t>((o * s.n + best) * s.inner + i)];
        if (std::isnan(b)) break;
        if (std::isnan(v) || v > b) best = j;
      }
      out[static_cast<std::size_t>(o * s.inner + i)] = static_cast<double>(best);
    }
  }
  write(a.outputs[0], out);
}

void softmax(const KernelArgs& a, bool log) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]);
  const AxisSplit s = split(dims_of(a.inputs[0]), a.get_attrs<AxisAttrs>().axis);
  Values out(x.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<std::size_t>((o * s.n + j) * s.inner + i); };
      double m = -kInf;
      for (int64_t j = 0; j < s.n; ++j) m = std::max(m, x[at(j)]);
      double sum = 0.0;
      for (int64_t j = 0; j < s.n; ++j) sum += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < s.n; ++j) {
        out[at(j)] = log ? x[at(j)] - m - std::log(sum) : std::exp(x[at(j)] - m) / sum;
      }
    }
  }
  write(a.outputs[0], out);
}

void k_softmax(Backend&, const KernelArgs& a) { softmax(a, false); }
void k_log_softmax(Backend&, const KernelArgs& a) { softmax(a, true); }

// ---- Matrix products ----

void k_matmul(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const MatMulAttrs& attrs = a.get_attrs<MatMulAttrs>();
  const Dims ad = dims_of(a.inputs[0]), bd = dims_of(a.inputs[1]), od = dims_of(a.outputs[0]);
  const Values av = read(a.inputs[0]), bv = read(a.inputs[1]);
  const int64_t m = od[od.size() - 2], n = od[od.size() - 1];
  const int64_t k = attrs.transpose_a ? ad[ad.size() - 2] : ad[ad.size() - 1];
  const int64_t batches = count(od) / (m * n);
  const int64_t a_batch = ad.size() == 2 ? 0 : m * k, b_batch = bd.size() == 2 ? 0 : k * n;
  Values out(static_cast<std::size_t>(count(od)));
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = av[static_cast<std::size_t>(
              b * a_batch + (attrs.transpose_a ? p * m + i : i * k + p))];
          const double y = bv[static_cast<std::size_t>(
              b * b_batch + (attrs.transpose_b ? j * k + p : p * n + j))];
          sum += x * y;
        }
        out[static_cast<std::size_t>((b * m + i) * n + j)] = sum;
      }
    }
  }
  write(a.outputs[0], out);
}

void k_matmul_bias_act(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Activation act = a.get_attrs<MatMulAttrs>().activation;
  const Dims xd = dims_of(a.inputs[0]), od = dims_of(a.outputs[0]);
  const Values x = read(a.inputs[0]), w = read(a.inputs[1]), bias = read(a.inputs[2]);
  const int64_t m = od[0], n = od[1], k = xd[1];
  Values out(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[static_cast<std::size_t>(j)];
      for (int64_t p = 0; p < k; ++p) {
        sum += x[static_cast<std::size_t>(i * k + p)] * w[static_cast<std::size_t>(p * n + j)];
      }
      switch (act) {
        case Activation::kNone:
          break;
        case Activation::kRelu:
          sum = sum > 0 ? sum : 0.0;
          break;
        case Activation::kSigmoid:
          sum = sigmoid(sum);
          break;
        case Activation::kTanh:
          sum = std::tanh(sum);
          break;
      }
      out[static_cast<std::size_t>(i * n + j)] = sum;
    }
  }
  write(a.outputs[0], out);
}

// ---- Convolution and pooling, NHWC ----

// Calls f(n, oh, ow, o, kh, kw, input_channel, input_offset, filter_offset) for every term of
// every output element whose input position lies inside the image.
void for_each_conv_term(const Conv2DAttrs& c, const Dims& out_dims,
                        const std::function<void(int64_t, int64_t, int64_t)>& f) {
  const auto [N, H, W, C] = c.input_shape;
  const auto [KH, KW, Cg, O] = c.filter_shape;
  const int64_t OH = out_dims[1], OW = out_dims[2];
  const int64_t per_group = O / c.groups;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        for (int64_t o = 0; o < O; ++o) {
          const int64_t g = o / per_group;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * c.stride_h - c.pad_top + kh * c.dilation_h;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * c.stride_w - c.pad_left + kw * c.dilation_w;
              if (iw < 0 || iw >= W) continue;
              for (int64_t ci = 0; ci < Cg; ++ci) {
                const int64_t input = ((n * H + ih) * W + iw) * C + g * Cg + ci;
                const int64_t filter = ((kh * KW + kw) * Cg + ci) * O + o;
                const int64_t output = ((n * OH + oh) * OW + ow) * O + o;
                f(input, filter, output);
              }
            }
          }
        }
      }
    }
  }
}

void k_conv2d(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Conv2DAttrs& c = a.get_attrs<Conv2DAttrs>();
  const Values x = read(a.inputs[0]), w = read(a.inputs[1]);
  const Dims od = dims_of(a.outputs[0]);
  Values out(static_cast<std::size_t>(count(od)), 0.0);
  for_each_conv_term(c, od, [&](int64_t in, int64_t f, int64_t o) {
    out[static_cast<std::size_t>(o)] +=
        x[static_cast<std::size_t>(in)] * w[static_cast<std::size_t>(f)];
  });
  write(a.outputs[0], out);
}

void k_conv2d_backward_input(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Conv2DAttrs& c = a.get_attrs<Conv2DAttrs>();
  const Values dy = read(a.inputs[0]), w = read(a.inputs[1]);
  Values dx(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_conv_term(c, dims_of(a.inputs[0]), [&](int64_t in, int64_t f, int64_t o) {
    dx[static_cast<std::size_t>(in)] +=
        dy[static_cast<std::size_t>(o)] * w[static_cast<std::size_t>(f)];
  });
  write(a.outputs[0], dx);
}

void k_conv2d_backward_filter(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Conv2DAttrs& c = a.get_attrs<Conv2DAttrs>();
  const Values x = read(a.inputs[0]), dy = read(a.inputs[1]);
  Values dw(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_conv_term(c, dims_of(a.inputs[1]), [&](int64_t in, int64_t f, int64_t o) {
    dw[static_cast<std::size_t>(f)] +=
        x[static_cast<std::size_t>(in)] * dy[static_cast<std::size_t>(o)];
  });
  write(a.outputs[0], dw);
}

// Calls f(output offset, input offsets of the window inside the image, row-major).
void for_each_window(const PoolAttrs& p, const Dims& out_dims,
                     const std::function<void(int64_t, const std::vector<int64_t>&)>& f) {
  const auto [N, H, W, C] = p.input_shape;
  const int64_t OH = out_dims[1], OW = out_dims[2];
  std::vector<int64_t> window;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        for (int64_t ch = 0; ch < C; ++ch) {
          window.clear();
          for (int64_t kh = 0; kh < p.window_h; ++kh) {
            const int64_t ih = oh * p.stride_h - p.pad_top + kh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < p.window_w; ++kw) {
              const int64_t iw = ow * p.stride_w - p.pad_left + kw;
              if (iw >= 0 && iw < W) window.push_back(((n * H + ih) * W + iw) * C + ch);
            }
          }
          f(((n * OH + oh) * OW + ow) * C + ch, window);
        }
      }
    }
  }
}

// The first maximum of the window, row-major.
int64_t window_argmax(const Values& x, const std::vector<int64_t>& window) {
  int64_t best = window.front();
  for (int64_t i : window) {
    if (x[static_cast<std::size_t>(i)] > x[static_cast<std::size_t>(best)]) best = i;
  }
  return best;
}

void k_max_pool2d(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(a.outputs[0].num_elements()));
  for_each_window(a.get_attrs<PoolAttrs>(), dims_of(a.outputs[0]),
                  [&](int64_t o, const std::vector<int64_t>& w) {
                    out[static_cast<std::size_t>(o)] =
                        x[static_cast<std::size_t>(window_argmax(x, w))];
                  });
  write(a.outputs[0], out);
}

void k_avg_pool2d(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(a.outputs[0].num_elements()));
  for_each_window(a.get_attrs<PoolAttrs>(), dims_of(a.outputs[0]),
                  [&](int64_t o, const std::vector<int64_t>& w) {
                    double sum = 0.0;
                    for (int64_t i : w) sum += x[static_cast<std::size_t>(i)];
                    out[static_cast<std::size_t>(o)] = sum / static_cast<double>(w.size());
                  });
  write(a.outputs[0], out);
}

void k_max_pool2d_grad(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]), dy = read(a.inputs[1]);
  Values dx(x.size(), 0.0);
  for_each_window(a.get_attrs<PoolAttrs>(), dims_of(a.inputs[1]),
                  [&](int64_t o, const std::vector<int64_t>& w) {
                    dx[static_cast<std::size_t>(window_argmax(x, w))] +=
                        dy[static_cast<std::size_t>(o)];
                  });
  write(a.outputs[0], dx);
}

void k_avg_pool2d_grad(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values dy = read(a.inputs[0]);
  Values dx(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_window(a.get_attrs<PoolAttrs>(), dims_of(a.inputs[0]),
                  [&](int64_t o, const std::vector<int64_t>& w) {
                    for (int64_t i : w) {
                      dx[static_cast<std::size_t>(i)] +=
                          dy[static_cast<std::size_t>(o)] / static_cast<double>(w.size());
                    }
                  });
  write(a.outputs[0], dx);
}

// ---- Batch normalization over the last axis ----

struct Moments {
  Values mean, variance;
};

Moments moments(const Values& x, int64_t channels) {
  const int64_t rows = static_cast<int64_t>(x.size()) / channels;
  Moments m{Values(static_cast<std::size_t>(channels), 0.0),
            Values(static_cast<std::size_t>(channels), 0.0)};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c)
      m.mean[c] += x[static_cast<std::size_t>(r * channels + c)];
  }
  for (double& v : m.mean) v /= static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      const double d = x[static_cast<std::size_t>(r * channels + c)] - m.mean[c];
      m.variance[c] += d * d;
    }
  }
  for (double& v : m.variance) v /= static_cast<double>(rows);
  return m;
}

Values normalize(const Values& x, const Values& gamma, const Values& beta, const Values& mean,
                 const Values& variance, double epsilon) {
  const std::size_t channels = gamma.size();
  Values y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % channels;
    y[i] = (x[i] - mean[c]) / std::sqrt(variance[c] + epsilon) * gamma[c] + beta[c];
  }
  return y;
}

void k_batch_norm_training(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]), gamma = read(a.inputs[1]), beta = read(a.inputs[2]);
  const Moments m = moments(x, static_cast<int64_t>(gamma.size()));
  write(a.outputs[0],
        normalize(x, gamma, beta, m.mean, m.variance, a.get_attrs<BatchNormAttrs>().epsilon));
  write(a.outputs[1], m.mean);
  write(a.outputs[2], m.variance);
}

void k_batch_norm_inference(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  write(a.outputs[0],
        normalize(read(a.inputs[0]), read(a.inputs[1]), read(a.inputs[2]), read(a.inputs[3]),
                  read(a.inputs[4]), a.get_attrs<BatchNormAttrs>().epsilon));
}

void k_batch_norm_grad(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values x = read(a.inputs[0]), gamma = read(a.inputs[1]), mean = read(a.inputs[2]),
               variance = read(a.inputs[3]), dy = read(a.inputs[4]);
  const std::size_t channels = gamma.size();
  const double rows = static_cast<double>(x.size() / channels);
  const double epsilon = a.get_attrs<BatchNormAttrs>().epsilon;
  Values dgamma(channels, 0.0), dbeta(channels, 0.0), dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % channels;
    const double xhat = (x[i] - mean[c]) / std::sqrt(variance[c] + epsilon);
    dbeta[c] += dy[i];
    dgamma[c] += dy[i] * xhat;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % channels;
    const double rstd = 1.0 / std::sqrt(variance[c] + epsilon);
    const double xhat = (x[i] - mean[c]) * rstd;
    dx[i] = gamma[c] * rstd * (dy[i] - dbeta[c] / rows - xhat * dgamma[c] / rows);
  }
  write(a.outputs[0], dx);
  write(a.outputs[1], dgamma);
  write(a.outputs[2], dbeta);
}

// ---- Data movement ----

void k_concat(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const int64_t axis = a.get_attrs<AxisAttrs>().axis;
  const AxisSplit s = split(dims_of(a.outputs[0]), axis);
  Values out;
  out.reserve(static_cast<std::size_t>(a.outputs[0].num_elements()));
  std::vector<Values> in;
  for (const Tensor& t : a.inputs) in.push_back(read(t));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (std::size_t j = 0; j < in.size(); ++j) {
      const int64_t chunk = static_cast<int64_t>(in[j].size()) / s.outer;
      out.insert(out.end(), in[j].begin() + o * chunk, in[j].begin() + (o + 1) * chunk);
    }
  }
  write(a.outputs[0], out);
}

void k_slice(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const SliceAttrs& attrs = a.get_attrs<SliceAttrs>();
  const Dims in_dims = dims_of(a.inputs[0]), out_dims = dims_of(a.outputs[0]);
  const Values x = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(count(out_dims)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    Dims index = unravel(i, out_dims);
    for (std::size_t k = 0; k < index.size(); ++k) index[k] += attrs.begin[k];
    out[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(ravel(index, in_dims))];
  }
  write(a.outputs[0], out);
}

void k_transpose(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const PermAttrs& attrs = a.get_attrs<PermAttrs>();
  const Dims in_dims = dims_of(a.inputs[0]), out_dims = dims_of(a.outputs[0]);
  const Values x = read(a.inputs[0]);
  Values out(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const Dims index = unravel(i, out_dims);
    Dims source(in_dims.size());
    for (std::size_t k = 0; k < index.size(); ++k) source[attrs.perm[k]] = index[k];
    out[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(ravel(source, in_dims))];
  }
  write(a.outputs[0], out);
}

void k_pad(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const PadAttrs& attrs = a.get_attrs<PadAttrs>();
  const Dims in_dims = dims_of(a.inputs[0]), out_dims = dims_of(a.outputs[0]);
  const Values x = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(count(out_dims)), attrs.value);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    Dims index = unravel(i, in_dims);
    for (std::size_t k = 0; k < index.size(); ++k) index[k] += attrs.before[k];
    out[static_cast<std::size_t>(ravel(index, out_dims))] = x[static_cast<std::size_t>(i)];
  }
  write(a.outputs[0], out);
}

int64_t checked_index(double value, int64_t dim, const char* op) {
  const auto index = static_cast<int64_t>(value);
  if (index < 0 || index >= dim) {
    throw InvalidArgument(std::string(op) + ": index " + std::to_string(index) +
                          " is outside [0, " + std::to_string(dim) + ")");
  }
  return index;
}

void k_gather(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const int64_t axis = a.get_attrs<AxisAttrs>().axis;
  const Values params = read(a.inputs[0]), indices = read(a.inputs[1]);
  const AxisSplit s = split(dims_of(a.inputs[0]), axis);
  Values out;
  out.reserve(static_cast<std::size_t>(a.outputs[0].num_elements()));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (double v : indices) {
      const int64_t j = checked_index(v, s.n, "gather");
      for (int64_t i = 0; i < s.inner; ++i) {
        out.push_back(params[static_cast<std::size_t>((o * s.n + j) * s.inner + i)]);
      }
    }
  }
  write(a.outputs[0], out);
}

void k_scatter_add(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const ScatterAttrs& attrs = a.get_attrs<ScatterAttrs>();
  const Values updates = read(a.inputs[0]), indices = read(a.inputs[1]);
  const Dims out_dims = dims_of(a.outputs[0]);
  const AxisSplit s = split(out_dims, attrs.axis);
  Values out(static_cast<std::size_t>(count(out_dims)), 0.0);
  std::size_t u = 0;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (double v : indices) {
      const int64_t j = checked_index(v, s.n, "scatter_add");
      for (int64_t i = 0; i < s.inner; ++i) {
        out[static_cast<std::size_t>((o * s.n + j) * s.inner + i)] += updates[u++];
      }
    }
  }
  write(a.outputs[0], out);
}

void k_one_hot(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const OneHotAttrs& attrs = a.get_attrs<OneHotAttrs>();
  const Values indices = read(a.inputs[0]);
  Values out;
  out.reserve(indices.size() * static_cast<std::size_t>(attrs.depth));
  for (double v : indices) {
    for (int64_t d = 0; d < attrs.depth; ++d) {
      out.push_back(static_cast<int64_t>(v) == d ? attrs.on_value : attrs.off_value);
    }
  }
  write(a.outputs[0], out);
}

void k_top_k(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const int64_t k = a.get_attrs<TopKAttrs>().k;
  const Dims dims = dims_of(a.inputs[0]);
  const int64_t n = dims.back();
  const Values x = read(a.inputs[0]);
  Values values, indices;
  for (int64_t row = 0; row < static_cast<int64_t>(x.size()) / std::max<int64_t>(n, 1); ++row) {
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    auto at = [&](int64_t j) { return x[static_cast<std::size_t>(row * n + j)]; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      if (std::isnan(at(p))) return !std::isnan(at(q));
      if (std::isnan(at(q))) return false;
      return at(p) > at(q);
    });
    for (int64_t j = 0; j < k; ++j) {
      values.push_back(at(order[static_cast<std::size_t>(j)]));
      indices.push_back(static_cast<double>(order[static_cast<std::size_t>(j)]));
    }
  }
  write(a.outputs[0], values);
  write(a.outputs[1], indices);
}

// The fused composite kernels the suite calls by name (core/src/engine/ops/loss.cc's formula):
// (p [..., C], y same, dloss [...]), a = eps -> dloss * ((1 - y) / ((1 - p) + eps) - y / (p +
// eps)).
void k_binary_cross_entropy_grad(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const double eps = a.get_attrs<ScalarAttrs>().a;
  const Values p = read(a.inputs[0]), y = read(a.inputs[1]), dloss = read(a.inputs[2]);
  const std::size_t classes = p.size() / std::max<std::size_t>(dloss.size(), 1);
  Values dp(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    dp[i] = dloss[i / classes] * ((1.0 - y[i]) / ((1.0 - p[i]) + eps) - y[i] / (p[i] + eps));
  }
  write(a.outputs[0], dp);
}

// The same through the sigmoid that made p: dp p (1 - p).
void k_binary_cross_entropy_sigmoid_grad(Backend& backend, const KernelArgs& a) {
  k_binary_cross_entropy_grad(backend, a);
  const Values p = read(a.inputs[0]), dp = read(a.outputs[0]);
  Values dz(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) dz[i] = dp[i] * p[i] * (1.0 - p[i]);
  write(a.outputs[0], dz);
}

// The tables of the families whose kernels live in this file (reference::<family>_kernels()).
constexpr KernelRegistration kMathKernels[] = {
    {"neg", &k_neg},
    {"abs", &k_abs},
    {"sign", &k_sign},
    {"exp", &k_exp},
    {"log", &k_log},
    {"log1p", &k_log1p},
    {"sqrt", &k_sqrt},
    {"rsqrt", &k_rsqrt},
    {"square", &k_square},
    {"sigmoid", &k_sigmoid},
    {"tanh", &k_tanh},
    {"relu", &k_relu},
    {"relu6", &k_relu6},
    {"elu", &k_elu},
    {"softplus", &k_softplus},
    {"pow_scalar", &k_pow_scalar},
    {"clip_by_value", &k_clip_by_value},
    {"fill", &k_fill},
    {"sigmoid_grad", &k_sigmoid_grad},
    {"tanh_grad", &k_tanh_grad},
    {"relu_grad", &k_relu_grad},
    {"relu6_grad", &k_relu6_grad},
    {"elu_grad", &k_elu_grad},
    {"add", &k_add},
    {"sub", &k_sub},
    {"mul", &k_mul},
    {"div", &k_div},
    {"maximum", &k_maximum},
    {"minimum", &k_minimum},
    {"pow", &k_pow},
    {"equal", &k_equal},
    {"not_equal", &k_not_equal},
    {"less", &k_less},
    {"less_equal", &k_less_equal},
    {"greater", &k_greater},
    {"greater_equal", &k_greater_equal},
    {"where", &k_where},
};
constexpr KernelRegistration kReduceKernels[] = {
    {"reduce_sum", &k_reduce_sum}, {"reduce_mean", &k_reduce_mean}, {"reduce_max", &k_reduce_max},
    {"reduce_min", &k_reduce_min}, {"logsumexp", &k_logsumexp},     {"argmax", &k_argmax},
    {"softmax", &k_softmax},       {"log_softmax", &k_log_softmax},
};
constexpr KernelRegistration kLinalgKernels[] = {
    {"matmul", &k_matmul},
    {"matmul_bias_act", &k_matmul_bias_act},
};
constexpr KernelRegistration kNnKernels[] = {
    {"conv2d", &k_conv2d},
    {"conv2d_backward_input", &k_conv2d_backward_input},
    {"conv2d_backward_filter", &k_conv2d_backward_filter},
    {"max_pool2d", &k_max_pool2d},
    {"avg_pool2d", &k_avg_pool2d},
    {"max_pool2d_grad", &k_max_pool2d_grad},
    {"avg_pool2d_grad", &k_avg_pool2d_grad},
    {"batch_norm_training", &k_batch_norm_training},
    {"batch_norm_inference", &k_batch_norm_inference},
    {"batch_norm_grad", &k_batch_norm_grad},
};
constexpr KernelRegistration kLossKernels[] = {
    {"sigmoid_cross_entropy_with_logits", &k_sigmoid_cross_entropy},
    {"sigmoid_cross_entropy_with_logits_grad", &k_sigmoid_cross_entropy_grad},
    {"binary_cross_entropy_grad", &k_binary_cross_entropy_grad, kFusedComposite},
    {"binary_cross_entropy_sigmoid_grad", &k_binary_cross_entropy_sigmoid_grad, kFusedComposite},
};
constexpr KernelRegistration kArrayKernels[] = {
    {"concat", &k_concat},   {"slice", &k_slice},   {"transpose", &k_transpose},
    {"pad", &k_pad},         {"gather", &k_gather}, {"scatter_add", &k_scatter_add},
    {"one_hot", &k_one_hot}, {"top_k", &k_top_k},   {"cast", &k_cast},
    {"copy", &k_copy},
};

class ReferenceBackend final : public Backend {
 public:
  std::string device_name() const override { return "reference"; }

  std::shared_ptr<Storage> allocate(std::size_t bytes) override {
    ++allocations_;
    return std::make_shared<HostStorage>(*this, bytes);
  }

  void copy_from_host(Storage& storage, std::size_t offset, const void* src,
                      std::size_t bytes) override {
    check_range(storage, offset, bytes);
    if (bytes > 0) std::memcpy(host(storage) + offset, src, bytes);
  }

  void copy_to_host(const Storage& storage, std::size_t offset, void* dst,
                    std::size_t bytes) override {
    check_range(storage, offset, bytes);
    if (bytes > 0) std::memcpy(dst, host(storage) + offset, bytes);
  }

  void synchronize() override {}

  std::span<const KernelRegistration> kernels() const override {
    static const std::vector<KernelRegistration> all = [] {
      // Every family's kernels (reference_kernels.h), in the order of TRAINYARD_OP_FAMILIES.
      std::vector<KernelRegistration> k;
      auto add = [&k](std::span<const KernelRegistration> family) {
        k.insert(k.end(), family.begin(), family.end());
      };
#define TRAINYARD_REFERENCE_ADD_KERNELS_(family, core, cpu, cuda, ref, conformance) \
  TRAINYARD_OP_FAMILY_IF(ref, add(reference::family##_kernels());)
      TRAINYARD_OP_FAMILIES(TRAINYARD_REFERENCE_ADD_KERNELS_)
#undef TRAINYARD_REFERENCE_ADD_KERNELS_
      return k;
    }();
    return all;
  }

  AllocatorStats allocator_stats() const override {
    AllocatorStats s;
    s.system_allocations = allocations_;
    return s;
  }

 private:
  static std::byte* host(const Storage& storage) {
    return static_cast<const HostStorage&>(storage).data();
  }
  void check_range(const Storage& storage, std::size_t offset, std::size_t bytes) const {
    if (&storage.backend() != this) {
      throw InvalidArgument("reference backend: a copy with storage of another backend");
    }
    if (offset > storage.size_bytes() || bytes > storage.size_bytes() - offset) {
      throw InvalidArgument("reference backend: copy of " + std::to_string(bytes) + " bytes at " +
                            std::to_string(offset) + " beyond a storage of " +
                            std::to_string(storage.size_bytes()) + " bytes");
    }
  }
  std::size_t allocations_ = 0;
};

}  // namespace

namespace reference {
std::span<const KernelRegistration> math_kernels() { return kMathKernels; }
std::span<const KernelRegistration> reduce_kernels() { return kReduceKernels; }
std::span<const KernelRegistration> linalg_kernels() { return kLinalgKernels; }
std::span<const KernelRegistration> nn_kernels() { return kNnKernels; }
std::span<const KernelRegistration> loss_kernels() { return kLossKernels; }
std::span<const KernelRegistration> array_kernels() { return kArrayKernels; }
}  // namespace reference

Backend& independent_reference() {
  static std::shared_ptr<Backend> backend = std::make_shared<ReferenceBackend>();
  return *backend;
}

}  // namespace trainyard::conformance
