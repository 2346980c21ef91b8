// Neural-network kernels (ops/nn.h): convolution and pooling; batch norm is
// kernels_batch_norm.cc's.
//
// f32 convolution and forward pooling run through oneDNN primitives, created once per shape and
// attributes and cached in DnnlContext; tensors are wrapped in place, only filters are
// reordered to the layout a convolution chooses. Under the backend's bf16 policy
// (compute_precision.h) a convolution's passes read bf16 copies of their multiplied inputs and
// write f32. f64 runs own OpenMP-parallel loops, the reference for gradient checks. Pooling
// gradients and zero-sized problems run own loops for both dtypes; those loops give the same bits
// whatever the thread count, and oneDNN gives the same bits run to run for a given thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kernels_dnnl.h"

namespace trainyard::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DataType = memory::data_type;
constexpr DataType kF32 = DataType::f32;
constexpr DataType kBf16 = DataType::bf16;

template <class T>
void fill(const Tensor& t, T value) {
  std::fill_n(data<T>(t), t.num_elements(), value);
}

// ---------------------------------------------------------------------------------------------
// Convolution

// input [n, h, w, c], filter [kh, kw, cg = c / groups, o], output [n, oh, ow, o]; output
// channel j belongs to group j / (o / groups) and reads input channels g * cg .. g * cg + cg.
struct ConvProblem {
  int64_t n, h, w, c, kh, kw, cg, o, oh, ow, groups;
  int64_t stride_h, stride_w, dilation_h, dilation_w;  // TensorFlow's dilations (1 = dense)
  int64_t pad_top, pad_bottom, pad_left, pad_right;
};

ConvProblem conv_problem(const Shape& input, const Shape& filter, const Shape& output,
                         const Conv2DAttrs& a) {
  return {input[0],     input[1],  input[2],     input[3],   filter[0],  filter[1],  filter[2],
          filter[3],    output[1], output[2],    a.groups,   a.stride_h, a.stride_w, a.dilation_h,
          a.dilation_w, a.pad_top, a.pad_bottom, a.pad_left, a.pad_right};
}

PrimitiveKey conv_key(const char* op, const ConvProblem& p, bool bf16) {
  PrimitiveKey key = f32_key(op);
  key.add(bf16);
  for (int64_t v :
       {p.n, p.h, p.w, p.c, p.kh, p.kw, p.cg, p.o, p.oh, p.ow, p.groups, p.stride_h, p.stride_w,
        p.dilation_h, p.dilation_w, p.pad_top, p.pad_bottom, p.pad_left, p.pad_right}) {
    key.add(v);
  }
  return key;
}

// "conv2d input [n, h, w, c] filter [kh, kw, cg, o] output [n, oh, ow, o] strides [..]
// dilations [..] padding [top, bottom, left, right] groups g", in TensorFlow's layouts.
std::string describe_conv(const char* op, const ConvProblem& p) {
  return std::string(op) + " input " + dims_string({p.n, p.h, p.w, p.c}) + " filter " +
         dims_string({p.kh, p.kw, p.cg, p.o}) + " output " + dims_string({p.n, p.oh, p.ow, p.o}) +
         " strides " + dims_string({p.stride_h, p.stride_w}) + " dilations " +
         dims_string({p.dilation_h, p.dilation_w}) + " padding " +
         dims_string({p.pad_top, p.pad_bottom, p.pad_left, p.pad_right}) + " groups " +
         std::to_string(p.groups);
}

memory::desc conv_data_md(const ConvProblem& p, bool output, DataType type = kF32) {
  return output ? memory::desc({p.n, p.o, p.oh, p.ow}, type, Tag::nhwc)
                : memory::desc({p.n, p.c, p.h, p.w}, type, Tag::nhwc);
}

// The filter as oneDNN sees it: [o, c, kh, kw] stored hwio, or per group [g, o/g, cg, kh, kw]
// stored hwigo (TensorFlow's [kh, kw, cg, o] with o split as [g, o/g]). `any` lets the
// primitive choose its layout.
memory::desc conv_weights_md(const ConvProblem& p, bool any, DataType type = kF32) {
  if (p.groups == 1) return memory::desc({p.o, p.c, p.kh, p.kw}, type, any ? Tag::any : Tag::hwio);
  return memory::desc({p.groups, p.o / p.groups, p.cg, p.kh, p.kw}, type,
                      any ? Tag::any : Tag::hwigo);
}

// The forward convolution with `src`, `weights` and `dst` of these types (weights in the layout
// the primitive chooses); the backward passes' hint.
dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvProblem& p, DataType src,
                                                          DataType weights, DataType dst) {
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      conv_data_md(p, false, src), conv_weights_md(p, true, weights), conv_data_md(p, true, dst),
      {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_top, p.pad_left},
      {p.pad_bottom, p.pad_right});
  return {desc, dnnl_attr(), DnnlContext::get().engine()};
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvProblem& p) {
  return conv_forward_pd(p, kF32, kF32, kF32);
}

// The hint of a bf16 backward pass: the all-bf16 forward convolution.
dnnl::convolution_forward::primitive_desc conv_forward_bf16_hint(const ConvProblem& p) {
  return conv_forward_pd(p, kBf16, kBf16, kBf16);
}

// A primitive and the reorder between the user's filter layout and the one it chose (empty
// when they agree). Under the bf16 policy (`bf16`) the primitive reads bf16 copies of its data
// input (`data_bf16`: the input of conv2d and conv2d_backward_filter, dy of
// conv2d_backward_input), of dy in conv2d_backward_filter (`dy_bf16`) and of the filter (the
// weights reorder converts it); what it writes is f32.
template <class Primitive>
struct ConvEntry {
  Primitive primitive;
  memory::desc user_weights, weights;
  dnnl::reorder weights_reorder;
  bool reorder_weights = false;
  bool bf16 = false;
  Bf16Operand data_bf16, dy_bf16;
};

template <class Primitive>
void set_weights_reorder(ConvEntry<Primitive>& e, const ConvProblem& p, const memory::desc& chosen,
                         bool to_user) {
  const dnnl::engine& engine = DnnlContext::get().engine();
  e.user_weights = conv_weights_md(p, false);
  e.weights = chosen;
  e.reorder_weights = e.user_weights != chosen;
  if (!e.reorder_weights) return;
  e.weights_reorder = to_user ? dnnl::reorder(dnnl::reorder::primitive_desc(
                                    engine, chosen, engine, e.user_weights, dnnl_attr()))
                              : dnnl::reorder(dnnl::reorder::primitive_desc(
                                    engine, e.user_weights, engine, chosen, dnnl_attr()));
}

// The filter in the primitive's layout and type: the user's memory itself or a reordered
// (under the bf16 policy converted) copy in `holder`, or, for a forward pass on a backend with
// prepack_filters (`prepack`), the copy kept from the filter's first use (prepacked_filters.h).
template <class Primitive>
memory conv_weights_in(const ConvEntry<Primitive>& e, Backend& backend, const Tensor& filter,
                       std::shared_ptr<Storage>& holder, bool prepack = false) {
  memory user = wrap(e.user_weights, filter);
  if (!e.reorder_weights) return user;
  PrepackedFilters* prepacked =
      prepack ? static_cast<CpuBackend&>(backend).prepacked_filters() : nullptr;
  if (prepacked != nullptr) {
    void* packed = prepacked->get(filter, e.weights, [&](void* data) {
      memory chosen = wrap(e.weights, data);
      execute(e.weights_reorder, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, chosen}});
    });
    return wrap(e.weights, packed);
  }
  holder = scratch(backend, e.weights.get_size());
  memory chosen = wrap(e.weights, scratch_data(holder));
  execute(e.weights_reorder, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, chosen}});
  return chosen;
}

// A data tensor (input or dy, f32 nhwc) as the primitive reads it: the tensor itself, or under
// the bf16 policy its bf16 copy in `holder`.
template <class Primitive>
memory conv_data_in(const ConvEntry<Primitive>& e, const Bf16Operand& operand, Backend& backend,
                    const memory::desc& f32, const Tensor& t, std::shared_ptr<Storage>& holder) {
  if (!e.bf16) return wrap(f32, t);
  return to_bf16(operand, backend, data<float>(t), holder);
}

// The entry of one pass: with `bf16`, the bf16 primitive `make_pd(true)` returns where oneDNN
// has an optimized implementation of it (compute_precision.h), else the f32 one; `finish`
// sets the weights reorder from the chosen pd.
template <class Primitive, class MakePd, class Finish>
ConvEntry<Primitive> make_conv_entry(const char* op, const ConvProblem& p, bool bf16,
                                     MakePd&& make_pd, Finish&& finish) {
  auto describe = [&] { return describe_conv(op, p); };
  ConvEntry<Primitive> e;
  if (bf16) {
    auto pd = make_pd(true);
    if (use_bf16_implementation(pd, op, describe)) {
      e.primitive = Primitive(pd);
      e.bf16 = true;
      finish(e, pd);
      return e;
    }
  }
  auto pd = make_pd(false);
  check_not_reference(pd, describe);
  e.primitive = Primitive(pd);
  finish(e, pd);
  return e;
}

void conv_forward_dnnl(Backend& backend, const ConvProblem& p, const Tensor& input,
                       const Tensor& filter, const Tensor& output) {
  using Entry = ConvEntry<dnnl::convolution_forward>;
  const bool bf16 = computes_in_bf16(backend);
  auto entry = DnnlContext::get().find_or_create<Entry>(conv_key("conv2d", p, bf16), [&] {
    return make_conv_entry<dnnl::convolution_forward>(
        "conv2d", p, bf16,
        [&](bool lo) { return lo ? conv_forward_pd(p, kBf16, kBf16, kF32) : conv_forward_pd(p); },
        [&](Entry& e, const dnnl::convolution_forward::primitive_desc& pd) {
          set_weights_reorder(e, p, pd.weights_desc(), false);
          if (e.bf16) e.data_bf16 = bf16_operand(conv_data_md(p, false), pd.src_desc());
        });
  });
  std::shared_ptr<Storage> holder, input_holder;
  memory weights = conv_weights_in(*entry, backend, filter, holder, /*prepack=*/true);
  execute(entry->primitive,
          {{DNNL_ARG_SRC, conv_data_in(*entry, entry->data_bf16, backend, conv_data_md(p, false),
                                       input, input_holder)},
           {DNNL_ARG_WEIGHTS, weights},
           {DNNL_ARG_DST, wrap(conv_data_md(p, true), output)}});
}

void conv_backward_input_dnnl(Backend& backend, const ConvProblem& p, const Tensor& dy,
                              const Tensor& filter, const Tensor& dinput) {
  using Entry = ConvEntry<dnnl::convolution_backward_data>;
  using Pd = dnnl::convolution_backward_data::primitive_desc;
  const bool bf16 = computes_in_bf16(backend);
  auto entry =
      DnnlContext::get().find_or_create<Entry>(conv_key("conv2d_backward_input", p, bf16), [&] {
        return make_conv_entry<dnnl::convolution_backward_data>(
            "conv2d_backward_input", p, bf16,
            [&](bool lo) {
              dnnl::convolution_backward_data::desc desc(
                  dnnl::algorithm::convolution_direct, conv_data_md(p, false),
                  conv_weights_md(p, true, lo ? kBf16 : kF32),
                  conv_data_md(p, true, lo ? kBf16 : kF32), {p.stride_h, p.stride_w},
                  {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_top, p.pad_left},
                  {p.pad_bottom, p.pad_right});
              return Pd(desc, dnnl_attr(), DnnlContext::get().engine(),
                        lo ? conv_forward_bf16_hint(p) : conv_forward_pd(p));
            },
            [&](Entry& e, const Pd& pd) {
              set_weights_reorder(e, p, pd.weights_desc(), false);
              if (e.bf16) e.data_bf16 = bf16_operand(conv_data_md(p, true), pd.diff_dst_desc());
            });
      });
  std::shared_ptr<Storage> holder, dy_holder;
  memory weights = conv_weights_in(*entry, backend, filter, holder);
  execute(entry->primitive,
          {{DNNL_ARG_DIFF_DST,
            conv_data_in(*entry, entry->data_bf16, backend, conv_data_md(p, true), dy, dy_holder)},
           {DNNL_ARG_WEIGHTS, weights},
           {DNNL_ARG_DIFF_SRC, wrap(conv_data_md(p, false), dinput)}});
}

void conv_backward_filter_dnnl(Backend& backend, const ConvProblem& p, const Tensor& input,
                               const Tensor& dy, const Tensor& dfilter) {
  using Entry = ConvEntry<dnnl::convolution_backward_weights>;
  using Pd = dnnl::convolution_backward_weights::primitive_desc;
  const bool bf16 = computes_in_bf16(backend);
  auto entry =
      DnnlContext::get().find_or_create<Entry>(conv_key("conv2d_backward_filter", p, bf16), [&] {
        return make_conv_entry<dnnl::convolution_backward_weights>(
            "conv2d_backward_filter", p, bf16,
            [&](bool lo) {
              dnnl::convolution_backward_weights::desc desc(
                  dnnl::algorithm::convolution_direct, conv_data_md(p, false, lo ? kBf16 : kF32),
                  conv_weights_md(p, true), conv_data_md(p, true, lo ? kBf16 : kF32),
                  {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1},
                  {p.pad_top, p.pad_left}, {p.pad_bottom, p.pad_right});
              return Pd(desc, dnnl_attr(), DnnlContext::get().engine(),
                        lo ? conv_forward_bf16_hint(p) : conv_forward_pd(p));
            },
            [&](Entry& e, const Pd& pd) {
              set_weights_reorder(e, p, pd.diff_weights_desc(), true);
              if (e.bf16) {
                e.data_bf16 = bf16_operand(conv_data_md(p, false), pd.src_desc());
                e.dy_bf16 = bf16_operand(conv_data_md(p, true), pd.diff_dst_desc());
              }
            });
      });
  memory user = wrap(entry->user_weights, dfilter);
  std::shared_ptr<Storage> holder, input_holder, dy_holder;
  memory chosen = user;
  if (entry->reorder_weights) {
    holder = scratch(backend, entry->weights.get_size());
    chosen = wrap(entry->weights, scratch_data(holder));
  }
  execute(entry->primitive,
          {{DNNL_ARG_SRC, conv_data_in(*entry, entry->data_bf16, backend, conv_data_md(p, false),
                                       input, input_holder)},
           {DNNL_ARG_DIFF_DST,
            conv_data_in(*entry, entry->dy_bf16, backend, conv_data_md(p, true), dy, dy_holder)},
           {DNNL_ARG_DIFF_WEIGHTS, chosen}});
  if (entry->reorder_weights) {
    execute(entry->weights_reorder, {{DNNL_ARG_FROM, chosen}, {DNNL_ARG_TO, user}});
  }
}

// Input row of output row `oy` at filter tap `ky` (may lie in the padding).
inline int64_t conv_in_row(const ConvProblem& p, int64_t oy, int64_t ky) {
  return oy * p.stride_h - p.pad_top + ky * p.dilation_h;
}
inline int64_t conv_in_col(const ConvProblem& p, int64_t ox, int64_t kx) {
  return ox * p.stride_w - p.pad_left + kx * p.dilation_w;
}

template <class T>
void conv_forward_loops(const ConvProblem& p, const T* x, const T* f, T* y) {
  const int64_t og = p.o / p.groups;
#pragma omp parallel for collapse(2) \
    schedule(static) if (p.n * p.oh * p.ow * p.o * p.kh * p.kw * p.cg > kParallelThreshold)
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        T* out = y + ((b * p.oh + oy) * p.ow + ox) * p.o;
        std::fill_n(out, p.o, T(0));
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = conv_in_row(p, oy, ky);
          if (iy < 0 || iy >= p.h) continue;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = conv_in_col(p, ox, kx);
            if (ix < 0 || ix >= p.w) continue;
            const T* in = x + ((b * p.h + iy) * p.w + ix) * p.c;
            const T* taps = f + (ky * p.kw + kx) * p.cg * p.o;
            for (int64_t g = 0; g < p.groups; ++g) {
              T* out_g = out + g * og;
              for (int64_t ci = 0; ci < p.cg; ++ci) {
                const T v = in[g * p.cg + ci];
                const T* row = taps + ci * p.o + g * og;
#pragma omp simd
                for (int64_t j = 0; j < og; ++j) out_g[j] += v * row[j];
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_backward_input_loops(const ConvProblem& p, const T* dy, const T* f, T* dx) {
  const int64_t og = p.o / p.groups;
#pragma omp parallel for collapse(2) \
    schedule(static) if (p.n * p.oh * p.ow * p.o * p.kh * p.kw * p.cg > kParallelThreshold)
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t iy = 0; iy < p.h; ++iy) {
      for (int64_t ix = 0; ix < p.w; ++ix) {
        T* out = dx + ((b * p.h + iy) * p.w + ix) * p.c;
        std::fill_n(out, p.c, T(0));
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t ty = iy + p.pad_top - ky * p.dilation_h;
          if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= p.oh) continue;
          const int64_t oy = ty / p.stride_h;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t tx = ix + p.pad_left - kx * p.dilation_w;
            if (tx < 0 || tx % p.stride_w != 0 || tx / p.stride_w >= p.ow) continue;
            const int64_t ox = tx / p.stride_w;
            const T* d = dy + ((b * p.oh + oy) * p.ow + ox) * p.o;
            const T* taps = f + (ky * p.kw + kx) * p.cg * p.o;
            for (int64_t g = 0; g < p.groups; ++g) {
              const T* d_g = d + g * og;
              for (int64_t ci = 0; ci < p.cg; ++ci) {
                const T* row = taps + ci * p.o + g * og;
                T sum = 0;
                for (int64_t j = 0; j < og; ++j) sum += d_g[j] * row[j];
                out[g * p.cg + ci] += sum;
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_backward_filter_loops(const ConvProblem& p, const T* x, const T* dy, T* df) {
  const int64_t og = p.o / p.groups;
#pragma omp parallel for collapse(3) \
    schedule(static) if (p.n * p.oh * p.ow * p.o * p.kh * p.kw * p.cg > kParallelThreshold)
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      for (int64_t ci = 0; ci < p.cg; ++ci) {
        T* out = df + ((ky * p.kw + kx) * p.cg + ci) * p.o;
        std::fill_n(out, p.o, T(0));
        for (int64_t b = 0; b < p.n; ++b) {
          for (int64_t oy = 0; oy < p.oh; ++oy) {
            const int64_t iy = conv_in_row(p, oy, ky);
            if (iy < 0 || iy >= p.h) continue;
            for (int64_t ox = 0; ox < p.ow; ++ox) {
              const int64_t ix = conv_in_col(p, ox, kx);
              if (ix < 0 || ix >= p.w) continue;
              const T* in = x + ((b * p.h + iy) * p.w + ix) * p.c;
              const T* d = dy + ((b * p.oh + oy) * p.ow + ox) * p.o;
              for (int64_t g = 0; g < p.groups; ++g) {
                const T v = in[g * p.cg + ci];
                T* out_g = out + g * og;
                const T* d_g = d + g * og;
#pragma omp simd
                for (int64_t j = 0; j < og; ++j) out_g[j] += v * d_g[j];
              }
            }
          }
        }
      }
    }
  }
}

enum class ConvPass { kForward, kBackwardInput, kBackwardFilter };

template <ConvPass kPass>
void conv_kernel(Backend& backend, const KernelArgs& args) {
  constexpr const char* op = kPass == ConvPass::kForward         ? "conv2d"
                             : kPass == ConvPass::kBackwardInput ? "conv2d_backward_input"
                                                                 : "conv2d_backward_filter";
  const Conv2DAttrs& attrs = args.get_attrs<Conv2DAttrs>();
  const Tensor& in0 = args.inputs[0];
  const Tensor& in1 = args.inputs[1];
  const Tensor& out = args.outputs[0];
  // The (input, filter, output) shapes of the forward convolution: forward (input, filter) ->
  // output, backward input (dy, filter) -> dinput, backward filter (input, dy) -> dfilter.
  const Shape& input = kPass == ConvPass::kBackwardInput ? out.shape() : in0.shape();
  const Shape& filter = kPass == ConvPass::kBackwardFilter ? out.shape() : in1.shape();
  const Shape& output = kPass == ConvPass::kForward         ? out.shape()
                        : kPass == ConvPass::kBackwardInput ? in0.shape()
                                                            : in1.shape();
  const ConvProblem p = conv_problem(input, filter, output, attrs);
  if (out.num_elements() == 0) return;
  const bool empty_sum = in0.num_elements() == 0 || in1.num_elements() == 0;
  switch (in0.dtype()) {
    case DType::kF32:
      if (empty_sum) return fill(out, 0.0f);
      return with_dnnl_errors(op, [&] {
        if constexpr (kPass == ConvPass::kForward) {
          conv_forward_dnnl(backend, p, in0, in1, out);
        } else if constexpr (kPass == ConvPass::kBackwardInput) {
          conv_backward_input_dnnl(backend, p, in0, in1, out);
        } else {
          conv_backward_filter_dnnl(backend, p, in0, in1, out);
        }
      });
    case DType::kF64:
      if constexpr (kPass == ConvPass::kForward) {
        conv_forward_loops<double>(p, data<double>(in0), data<double>(in1), data<double>(out));
      } else if constexpr (kPass == ConvPass::kBackwardInput) {
        conv_backward_input_loops<double>(p, data<double>(in0), data<double>(in1),
                                          data<double>(out));
      } else {
        conv_backward_filter_loops<double>(p, data<double>(in0), data<double>(in1),
                                           data<double>(out));
      }
      return;
    default:
      unsupported_dtype(op, in0.dtype());
  }
}

// ---------------------------------------------------------------------------------------------
// Pooling

struct PoolProblem {
  int64_t n, h, w, c, oh, ow;
  int64_t window_h, window_w, stride_h, stride_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right;

  // The window of output (oy, ox) clipped to the input: rows [y0, y1), cols [x0, x1).
  void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    y0 = oy * stride_h - pad_top;
    x0 = ox * stride_w - pad_left;
    y1 = std::min(y0 + window_h, h);
    x1 = std::min(x0 + window_w, w);
    y0 = std::max<int64_t>(y0, 0);
    x0 = std::max<int64_t>(x0, 0);
  }
};

PoolProblem pool_problem(const Shape& input, const Shape& output, const PoolAttrs& a) {
  return {input[0],   input[1],   input[2],   input[3],  output[1],    output[2],  a.window_h,
          a.window_w, a.stride_h, a.stride_w, a.pad_top, a.pad_bottom, a.pad_left, a.pad_right};
}

// Channels handled together by one task of the pooling loops.
constexpr int64_t kPoolChannelBlock = 16;

template <class T, bool kMax>
void pool_forward_loops(const PoolProblem& p, const T* x, T* y) {
  const int64_t blocks = ceil_div(p.c, kPoolChannelBlock);
#pragma omp parallel for collapse(2) \
    schedule(static) if (p.n * p.oh * p.ow * p.c * p.window_h * p.window_w > kParallelThreshold)
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t y0, y1, x0, x1;
        p.window(oy, ox, y0, y1, x0, x1);
        T* out = y + ((b * p.oh + oy) * p.ow + ox) * p.c;
        const int64_t count = std::max<int64_t>(y1 - y0, 0) * std::max<int64_t>(x1 - x0, 0);
        for (int64_t cb = 0; cb < blocks; ++cb) {
          const int64_t c0 = cb * kPoolChannelBlock;
          const int64_t nc = std::min(kPoolChannelBlock, p.c - c0);
          T acc[kPoolChannelBlock];
          std::fill_n(acc, nc, kMax ? -std::numeric_limits<T>::infinity() : T(0));
          for (int64_t iy = y0; iy < y1; ++iy) {
            for (int64_t ix = x0; ix < x1; ++ix) {
              const T* in = x + ((b * p.h + iy) * p.w + ix) * p.c + c0;
              for (int64_t j = 0; j < nc; ++j) {
                if constexpr (kMax) {
                  acc[j] = in[j] > acc[j] ? in[j] : acc[j];
                } else {
                  acc[j] += in[j];
                }
              }
            }
          }
          for (int64_t j = 0; j < nc; ++j) out[c0 + j] = kMax ? acc[j] : acc[j] / T(count);
        }
      }
    }
  }
}

// The first maximum in row-major order of one window over a block of `n` channels (kFixed when
// it is known, so the loops vectorize): its value in best[j] and its position (iy * w + ix) in
// where[j]. Branch-free selects of the value and the position (an Index as wide as T where the
// image's positions fit, so the two share vector lanes); the ?: form of the position select
// left GCC's loop scalar.
template <class T, int64_t kFixed, class Index>
inline void window_argmax(const PoolProblem& p, const T* x_b, int64_t y0, int64_t y1, int64_t x0,
                          int64_t x1, int64_t nc, T* best, Index* where) {
  const int64_t n = kFixed > 0 ? kFixed : nc;
  const auto first = static_cast<Index>(y0 * p.w + x0);
  const T* in0 = x_b + static_cast<int64_t>(first) * p.c;
  for (int64_t j = 0; j < n; ++j) {
    best[j] = in0[j];
    where[j] = first;
  }
  for (int64_t iy = y0; iy < y1; ++iy) {
    for (int64_t ix = x0; ix < x1; ++ix) {
      const auto at = static_cast<Index>(iy * p.w + ix);
      const T* in = x_b + static_cast<int64_t>(at) * p.c;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T v = in[j], b = best[j];
        const Index take = -static_cast<Index>(v > b);  // all ones where v is the new maximum
        best[j] = b < v ? v : b;
        where[j] = (where[j] & ~take) | (at & take);
      }
    }
  }
}

// max_pool2d_grad for one window of overlapping windows: d added at the first maximum.
template <class T, int64_t kFixed, class Index>
inline void window_argmax_scatter(const PoolProblem& p, const T* x_b, const T* d, T* dx_b,
                                  int64_t y0, int64_t y1, int64_t x0, int64_t x1, int64_t nc) {
  const int64_t n = kFixed > 0 ? kFixed : nc;
  T best[kPoolChannelBlock];
  Index where[kPoolChannelBlock];
  window_argmax<T, kFixed, Index>(p, x_b, y0, y1, x0, x1, nc, best, where);
  for (int64_t j = 0; j < n; ++j) dx_b[static_cast<int64_t>(where[j]) * p.c + j] += d[j];
}

// max_pool2d_grad when no two windows share an input element (stride >= window on both axes,
// as lenet's and resnet_20's 2x2/2 and 1x1/2 pools): each window's positions get dy at the first
// maximum and 0 elsewhere, written once, so there is no zero fill (where the windows cover the
// input) and no read-modify-write scatter. A task owns one output row of one image with all its
// channels, contiguous in NHWC. 0 + dy keeps the general path's bits (a -0 dy gives +0).
template <class T, int64_t kFixed, class Index>
inline void window_argmax_write(const PoolProblem& p, const T* x_b, const T* d, T* dx_b, int64_t y0,
                                int64_t y1, int64_t x0, int64_t x1, int64_t nc) {
  const int64_t n = kFixed > 0 ? kFixed : nc;
  T best[kPoolChannelBlock];
  Index where[kPoolChannelBlock];
  window_argmax<T, kFixed, Index>(p, x_b, y0, y1, x0, x1, nc, best, where);
  for (int64_t iy = y0; iy < y1; ++iy) {
    for (int64_t ix = x0; ix < x1; ++ix) {
      const auto at = static_cast<Index>(iy * p.w + ix);
      T* out = dx_b + static_cast<int64_t>(at) * p.c;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T g = T(0) + d[j];
        out[j] = where[j] == at ? g : T(0);
      }
    }
  }
}

template <class T>
void max_pool_backward_disjoint(const PoolProblem& p, const T* x, const T* dy, T* dx) {
  using Index = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  const bool covered = p.pad_top == 0 && p.pad_left == 0 && p.stride_h == p.window_h &&
                       p.stride_w == p.window_w && p.oh * p.stride_h == p.h &&
                       p.ow * p.stride_w == p.w;
  const int64_t image = p.h * p.w * p.c;
  const bool parallel = p.n * p.h * p.w * p.c > kParallelThreshold;
  if (!covered) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t b = 0; b < p.n; ++b) std::fill_n(dx + b * image, image, T(0));
  }
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const T* x_b = x + b * image;
      T* dx_b = dx + b * image;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t y0, y1, x0, x1;
        p.window(oy, ox, y0, y1, x0, x1);
        if (y1 <= y0 || x1 <= x0) continue;
        const T* d = dy + ((b * p.oh + oy) * p.ow + ox) * p.c;
        int64_t c0 = 0;
        for (; c0 + kPoolChannelBlock <= p.c; c0 += kPoolChannelBlock) {
          window_argmax_write<T, kPoolChannelBlock, Index>(p, x_b + c0, d + c0, dx_b + c0, y0, y1,
                                                           x0, x1, kPoolChannelBlock);
        }
        if (c0 < p.c) {
          window_argmax_write<T, 0, Index>(p, x_b + c0, d + c0, dx_b + c0, y0, y1, x0, x1,
                                           p.c - c0);
        }
      }
    }
  }
}

// Gradients scatter each output's dy into its window. A task owns one image and one block of
// channels, so the sums are sequential (deterministic) and tasks never write the same element.
template <class T, bool kMax>
void pool_backward_loops(const PoolProblem& p, const T* x, const T* dy, T* dx) {
  if constexpr (kMax) {
    if (p.stride_h >= p.window_h && p.stride_w >= p.window_w &&
        p.h * p.w <= std::numeric_limits<int32_t>::max()) {
      return max_pool_backward_disjoint(p, x, dy, dx);
    }
  }
  const int64_t blocks = ceil_div(p.c, kPoolChannelBlock);
#pragma omp parallel for collapse(2) \
    schedule(static) if (p.n * p.oh * p.ow * p.c * p.window_h * p.window_w > kParallelThreshold)
  for (int64_t b = 0; b < p.n; ++b) {
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const int64_t c0 = cb * kPoolChannelBlock;
      const int64_t nc = std::min(kPoolChannelBlock, p.c - c0);
      T* dx_b = dx + b * p.h * p.w * p.c + c0;
      for (int64_t i = 0; i < p.h * p.w; ++i) std::fill_n(dx_b + i * p.c, nc, T(0));
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          int64_t y0, y1, x0, x1;
          p.window(oy, ox, y0, y1, x0, x1);
          if (y1 <= y0 || x1 <= x0) continue;
          const T* d = dy + ((b * p.oh + oy) * p.ow + ox) * p.c + c0;
          if constexpr (kMax) {
            using Narrow = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
            const T* x_b = x + b * p.h * p.w * p.c + c0;
            if (p.h * p.w > std::numeric_limits<int32_t>::max()) {
              window_argmax_scatter<T, 0, int64_t>(p, x_b, d, dx_b, y0, y1, x0, x1, nc);
            } else if (nc == kPoolChannelBlock) {
              window_argmax_scatter<T, kPoolChannelBlock, Narrow>(p, x_b, d, dx_b, y0, y1, x0, x1,
                                                                  kPoolChannelBlock);
            } else {
              window_argmax_scatter<T, 0, Narrow>(p, x_b, d, dx_b, y0, y1, x0, x1, nc);
            }
          } else {
            const T scale = T(1) / T((y1 - y0) * (x1 - x0));
            for (int64_t iy = y0; iy < y1; ++iy) {
              for (int64_t ix = x0; ix < x1; ++ix) {
                T* out = dx_b + (iy * p.w + ix) * p.c;
                for (int64_t j = 0; j < nc; ++j) out[j] += d[j] * scale;
              }
            }
          }
        }
      }
    }
  }
}

struct PoolEntry {
  dnnl::pooling_forward primitive;
  memory::desc src, dst;
};

void pool_forward_f32(const char* op, const PoolProblem& p, const Tensor& input,
                      const Tensor& output) {
  PrimitiveKey key = f32_key(op);
  for (int64_t v : {p.n, p.h, p.w, p.c, p.oh, p.ow, p.window_h, p.window_w, p.stride_h, p.stride_w,
                    p.pad_top, p.pad_bottom, p.pad_left, p.pad_right}) {
    key.add(v);
  }
  auto entry = DnnlContext::get().find_or_create<PoolEntry>(key, [&] {
    PoolEntry e;
    e.src = memory::desc({p.n, p.c, p.h, p.w}, kF32, Tag::nhwc);
    e.dst = memory::desc({p.n, p.c, p.oh, p.ow}, kF32, Tag::nhwc);
    dnnl::pooling_forward::desc desc(
        dnnl::prop_kind::forward_inference,
        std::strcmp(op, "max_pool2d") == 0 ? dnnl::algorithm::pooling_max
                                           : dnnl::algorithm::pooling_avg_exclude_padding,
        e.src, e.dst, {p.stride_h, p.stride_w}, {p.window_h, p.window_w}, {p.pad_top, p.pad_left},
        {p.pad_bottom, p.pad_right});
    const dnnl::pooling_forward::primitive_desc pd(desc, dnnl_attr(), DnnlContext::get().engine());
    check_not_reference(pd, [&] {
      return std::string(op) + " input " + dims_string({p.n, p.h, p.w, p.c}) + " output " +
             dims_string({p.n, p.oh, p.ow, p.c}) + " window " +
             dims_string({p.window_h, p.window_w}) + " strides " +
             dims_string({p.stride_h, p.stride_w}) + " padding " +
             dims_string({p.pad_top, p.pad_bottom, p.pad_left, p.pad_right});
    });
    e.primitive = dnnl::pooling_forward(pd);
    return e;
  });
  execute(entry->primitive,
          {{DNNL_ARG_SRC, wrap(entry->src, input)}, {DNNL_ARG_DST, wrap(entry->dst, output)}});
}

template <OpLabel kOp>
void pool_kernel(Backend&, const KernelArgs& args) {
  constexpr bool kMax = kOp == "max_pool2d" || kOp == "max_pool2d_grad";
  constexpr bool kForward = kOp == "max_pool2d" || kOp == "avg_pool2d";
  const PoolAttrs& attrs = args.get_attrs<PoolAttrs>();
  const Tensor& out = args.outputs[0];
  const Tensor& dy = args.inputs.back();
  // Forward: (input) -> output; max grad: (input, dy) -> dinput; avg grad: (dy) -> dinput.
  const PoolProblem p = kForward ? pool_problem(args.inputs[0].shape(), out.shape(), attrs)
                                 : pool_problem(out.shape(), dy.shape(), attrs);
  const DType dtype = args.inputs[0].dtype();
  if (out.num_elements() == 0) return;
  switch (dtype) {
    case DType::kF32:
      if constexpr (kForward) {
        return with_dnnl_errors(kOp, [&] { pool_forward_f32(kOp, p, args.inputs[0], out); });
      } else {
        return pool_backward_loops<float, kMax>(p, data<float>(args.inputs[0]), data<float>(dy),
                                                data<float>(out));
      }
    case DType::kF64:
      if constexpr (kForward) {
        return pool_forward_loops<double, kMax>(p, data<double>(args.inputs[0]), data<double>(out));
      } else {
        return pool_backward_loops<double, kMax>(p, data<double>(args.inputs[0]), data<double>(dy),
                                                 data<double>(out));
      }
    default:
      unsupported_dtype(kOp.name, dtype);
  }
}

}  // namespace

void add_nn_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&conv_kernel<ConvPass::kForward>>("conv2d"));
  table.push_back(cpu_kernel<&conv_kernel<ConvPass::kBackwardInput>>("conv2d_backward_input"));
  table.push_back(cpu_kernel<&conv_kernel<ConvPass::kBackwardFilter>>("conv2d_backward_filter"));
  table.push_back(cpu_kernel<&pool_kernel<"max_pool2d">>("max_pool2d"));
  table.push_back(cpu_kernel<&pool_kernel<"avg_pool2d">>("avg_pool2d"));
  table.push_back(cpu_kernel<&pool_kernel<"max_pool2d_grad">>("max_pool2d_grad"));
  table.push_back(cpu_kernel<&pool_kernel<"avg_pool2d_grad">>("avg_pool2d_grad"));
  add_batch_norm_kernels(table);  // kernels_batch_norm.cc
}

}  // namespace trainyard::cpu
