// Convolution benchmarks: Trainyard's conv2d kernels against raw oneDNN primitives on the same
// shapes in the same run.
//
//   build/bin/bench_conv --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// Rows are conv/<shape>/<pass>/<variant>, pass one of fwd, bwd_data, bwd_filter:
//   trainyard         forward: ops::conv2d / ops::depthwise_conv2d under NoGradScope; backward:
//                     the CPU backend's kConv2DBackwardInput / kConv2DBackwardFilter kernel
//                     called through Backend::kernels() with the attributes and output the core
//                     would pass (checked once against gradients() before timing).
//   raw_any           the oneDNN primitive with the weights kept in the layout it prefers
//                     ('any'), created once; the best case.
//   raw_user_reorder  the same primitive on user-layout weights (hwio, or hwigo for groups)
//                     with the reorder Trainyard does every call (to the primitive's layout
//                     before fwd / bwd_data, back to the user's after bwd_filter).
//   raw_user_fixed    a primitive created on the user layout itself (no reorder; oneDNN may
//                     pick a slower implementation).
// Counters: GFLOPs is achieved GFLOP/s (2 * N * OH * OW * O * KH * KW * C / groups per pass);
// the raw rows are labelled with oneDNN's implementation name. Compare rows of the same shape
// and pass in the same run (ratios, not absolute times, are what carry across machines).
//
// oneDNN's OpenMP threads spin at barriers, so another busy process slows these rows several
// times over, each extra parallel region (a filter reorder) by up to a scheduler slice: a row
// whose CPU time (the main thread's) is well below its real time was disturbed; rerun it.
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/ops.h"
#include "trainyard/random.h"

namespace trainyard {
namespace {

Backend& cpu() {
  static std::shared_ptr<Backend> backend = [] {
    PluginRegistry::Settings settings;
    settings.use_environment = false;
    PluginRegistry registry(settings);
    return registry.create<Backend>(ClassKind::kBackend, "cpu");
  }();
  return *backend;
}

// NHWC input [n, h, w, c], filter [kh, kw, c / groups, o], stride 1, SAME padding.
struct ConvShape {
  const char* name;
  int64_t n, h, w, c, kh, kw, o, groups;
  bool depthwise;  // Trainyard side: ops::depthwise_conv2d with a [kh, kw, c, 1] filter

  int64_t cg() const { return c / groups; }
  int64_t oh() const { return h; }  // SAME, stride 1
  int64_t ow() const { return w; }
  // TensorFlow's SAME split: the smaller half before.
  int64_t pad_top() const { return (kh - 1) / 2; }
  int64_t pad_bottom() const { return kh - 1 - pad_top(); }
  int64_t pad_left() const { return (kw - 1) / 2; }
  int64_t pad_right() const { return kw - 1 - pad_left(); }
  double flops() const { return 2.0 * n * oh() * ow() * o * kh * kw * cg(); }
};

const ConvShape kShapes[] = {
    {"resnet3x3", 32, 32, 32, 64, 3, 3, 64, 1, false},    // ResNet block conv
    {"proj1x1", 32, 32, 32, 64, 1, 1, 128, 1, false},     // 1x1 projection
    {"depthwise3x3", 32, 32, 32, 64, 3, 3, 64, 64, true}  // depthwise, multiplier 1
};

enum class Pass { kForward, kBackwardData, kBackwardFilter };
const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "fwd";
    case Pass::kBackwardData:
      return "bwd_data";
    case Pass::kBackwardFilter:
      return "bwd_filter";
  }
  return "?";
}

enum class Layout { kAny, kUserReorder, kUserFixed };
const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kAny:
      return "raw_any";
    case Layout::kUserReorder:
      return "raw_user_reorder";
    case Layout::kUserFixed:
      return "raw_user_fixed";
  }
  return "?";
}

void set_flops(benchmark::State& state, const ConvShape& s) {
  state.counters["GFLOPs"] =
      benchmark::Counter(s.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- Trainyard ----

// The attributes core/src/engine/ops.cc's conv2d builds (depthwise_conv2d reshapes its filter to
// [kh, kw, 1, c] and calls conv2d with groups = c).
Conv2DAttrs conv_attrs(const ConvShape& s) {
  Conv2DAttrs a;
  a.pad_top = s.pad_top();
  a.pad_bottom = s.pad_bottom();
  a.pad_left = s.pad_left();
  a.pad_right = s.pad_right();
  a.groups = s.groups;
  a.input_shape = {s.n, s.h, s.w, s.c};
  a.filter_shape = {s.kh, s.kw, s.cg(), s.o};
  return a;
}

KernelFn find_kernel(Backend& backend, std::string_view op) {
  for (const KernelRegistration& k : backend.kernels()) {
    if (op == k.op) return k.fn;
  }
  return nullptr;
}

Tensor trainyard_forward(const ConvShape& s, const Tensor& x, const Tensor& f) {
  return s.depthwise ? ops::depthwise_conv2d(x, f, {1, 1}, Padding2D::same())
                     : ops::conv2d(x, f, {1, 1}, Padding2D::same(), {1, 1}, s.groups);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  if (va.size() != vb.size()) return INFINITY;
  float m = 0.0f;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

void BM_TrainyardConv(benchmark::State& state, const ConvShape& s, Pass pass) {
  Backend& backend = cpu();
  Generator gen(1);
  const Shape x_shape{s.n, s.h, s.w, s.c};
  const Shape y_shape{s.n, s.oh(), s.ow(), s.o};
  const Shape f_shape = s.depthwise ? Shape{s.kh, s.kw, s.c, 1} : Shape{s.kh, s.kw, s.cg(), s.o};
  const Shape kernel_f_shape{s.kh, s.kw, s.cg(), s.o};  // what the kernel sees
  Tensor x = ops::random_uniform(backend, x_shape, gen, -1.0, 1.0);
  Tensor f = ops::random_uniform(backend, f_shape, gen, -1.0, 1.0);
  Tensor dy = ops::random_uniform(backend, y_shape, gen, -1.0, 1.0);

  if (pass == Pass::kForward) {
    NoGradScope no_grad;
    benchmark::DoNotOptimize(trainyard_forward(s, x, f));  // creates the cached primitive
    for (auto _ : state) {
      Tensor y = trainyard_forward(s, x, f);
      benchmark::DoNotOptimize(y);
    }
    set_flops(state, s);
    return;
  }

  const char* op = pass == Pass::kBackwardData ? "conv2d_backward_input" : "conv2d_backward_filter";
  KernelFn fn = find_kernel(backend, op);
  if (fn == nullptr) {
    state.SkipWithError("the cpu backend registers no kernel for the op");
    return;
  }
  const Conv2DAttrs attrs = conv_attrs(s);
  // The filter as the core hands it to the kernel (depthwise: the [kh, kw, 1, c] reshape, a
  // view of the same bytes).
  const Tensor kf = f.with_shape(kernel_f_shape, f.byte_offset());
  const std::array<Tensor, 2> inputs =
      pass == Pass::kBackwardData ? std::array<Tensor, 2>{dy, kf} : std::array<Tensor, 2>{x, dy};
  const Shape& out_shape = pass == Pass::kBackwardData ? x_shape : kernel_f_shape;
  auto launch = [&] {
    Tensor out = Tensor::empty(backend, out_shape, DType::kF32);  // as the core's run<2>
    fn(backend, KernelArgs{inputs, std::span<Tensor>(&out, 1), &attrs, &backend.current_stream(),
                           op, sizeof(attrs)});
    return out;
  };

  // The direct call must compute what the core's gradient rule computes.
  {
    Tensor xs = x, fs = f;
    xs.set_requires_grad(true);
    fs.set_requires_grad(true);
    Tensor y = trainyard_forward(s, xs, fs);
    std::vector<Tensor> grads = gradients(y, std::vector<Tensor>{xs, fs}, dy);
    Tensor expected = pass == Pass::kBackwardData
                          ? grads[0]
                          : grads[1].with_shape(kernel_f_shape, grads[1].byte_offset());
    float diff = max_abs_diff(launch(), expected);
    if (!(diff <= 1e-3f)) {
      state.SkipWithError(
          ("direct kernel call differs from gradients() by " + std::to_string(diff)).c_str());
      return;
    }
  }

  for (auto _ : state) {
    Tensor out = launch();
    benchmark::DoNotOptimize(out);
  }
  set_flops(state, s);
}

// ---- Raw oneDNN ----

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

const dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

void execute(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
  p.execute(stream(), args);
  stream().wait();
}

// Library-allocated memory of `md`, filled with values in [-1, 1).
memory filled(const memory::desc& md, uint32_t seed) {
  memory m(md, engine());
  auto* p = static_cast<float*>(m.get_data_handle());
  std::size_t count = md.get_size() / sizeof(float);
  uint32_t state = seed * 2654435761u + 1u;
  for (std::size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    p[i] = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return m;
}

memory::desc src_md(const ConvShape& s) { return {{s.n, s.c, s.h, s.w}, kF32, Tag::nhwc}; }
memory::desc dst_md(const ConvShape& s) { return {{s.n, s.o, s.oh(), s.ow()}, kF32, Tag::nhwc}; }

// [kh, kw, c / groups, o] as oneDNN sees it: oihw stored hwio, or goihw stored hwigo.
memory::desc weights_md(const ConvShape& s, bool any) {
  if (s.groups == 1) return {{s.o, s.c, s.kh, s.kw}, kF32, any ? Tag::any : Tag::hwio};
  return {{s.groups, s.o / s.groups, s.cg(), s.kh, s.kw}, kF32, any ? Tag::any : Tag::hwigo};
}

const memory::dims kStrides{1, 1}, kDilates{0, 0};
memory::dims pad_l(const ConvShape& s) { return {s.pad_top(), s.pad_left()}; }
memory::dims pad_r(const ConvShape& s) { return {s.pad_bottom(), s.pad_right()}; }

dnnl::convolution_forward::primitive_desc forward_pd(const ConvShape& s, bool any) {
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_md(s),
      weights_md(s, any), dst_md(s), kStrides, kDilates, pad_l(s), pad_r(s));
  return {desc, engine()};
}

void BM_RawDnnlConv(benchmark::State& state, const ConvShape& s, Pass pass, Layout layout) {
  const bool any = layout != Layout::kUserFixed;
  try {
    memory src = filled(src_md(s), 1);
    memory dst = filled(dst_md(s), 3);  // dst, or diff_dst for the backward passes
    memory::desc user_md = weights_md(s, false);
    memory user_weights = filled(user_md, 2);  // weights, or diff_weights for bwd_filter
    auto fwd_pd = forward_pd(s, any);

    dnnl::primitive conv;
    memory::desc chosen_md;
    std::string impl;
    if (pass == Pass::kForward) {
      conv = dnnl::convolution_forward(fwd_pd);
      chosen_md = fwd_pd.weights_desc();
      impl = fwd_pd.impl_info_str();
    } else if (pass == Pass::kBackwardData) {
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, src_md(s),
                                                 weights_md(s, any), dst_md(s), kStrides, kDilates,
                                                 pad_l(s), pad_r(s));
      dnnl::convolution_backward_data::primitive_desc pd(desc, engine(), fwd_pd);
      conv = dnnl::convolution_backward_data(pd);
      chosen_md = pd.weights_desc();
      impl = pd.impl_info_str();
    } else {
      dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, src_md(s),
                                                    weights_md(s, any), dst_md(s), kStrides,
                                                    kDilates, pad_l(s), pad_r(s));
      dnnl::convolution_backward_weights::primitive_desc pd(desc, engine(), fwd_pd);
      conv = dnnl::convolution_backward_weights(pd);
      chosen_md = pd.diff_weights_desc();
      impl = pd.impl_info_str();
    }

    // The weights in the primitive's layout, and the reorder to (fwd, bwd_data) or from
    // (bwd_filter) the user's layout when they differ.
    const bool reorder = chosen_md != user_md;
    memory chosen = reorder ? memory(chosen_md, engine()) : user_weights;
    dnnl::reorder to_chosen, to_user;
    if (reorder) {
      to_chosen = dnnl::reorder(user_weights, chosen);
      to_user = dnnl::reorder(chosen, user_weights);
      execute(to_chosen, {{DNNL_ARG_FROM, user_weights}, {DNNL_ARG_TO, chosen}});
    }
    const bool reorder_in_loop = layout == Layout::kUserReorder && reorder;

    std::unordered_map<int, memory> args;
    switch (pass) {
      case Pass::kForward:
        args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, chosen}, {DNNL_ARG_DST, dst}};
        break;
      case Pass::kBackwardData:
        args = {{DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_WEIGHTS, chosen}, {DNNL_ARG_DIFF_SRC, src}};
        break;
      case Pass::kBackwardFilter:
        args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_DIFF_WEIGHTS, chosen}};
        break;
    }
    const std::unordered_map<int, memory> to_chosen_args{{DNNL_ARG_FROM, user_weights},
                                                         {DNNL_ARG_TO, chosen}};
    const std::unordered_map<int, memory> to_user_args{{DNNL_ARG_FROM, chosen},
                                                       {DNNL_ARG_TO, user_weights}};

    execute(conv, args);  // warm-up
    for (auto _ : state) {
      if (reorder_in_loop && pass != Pass::kBackwardFilter) execute(to_chosen, to_chosen_args);
      execute(conv, args);
      if (reorder_in_loop && pass == Pass::kBackwardFilter) execute(to_user, to_user_args);
      benchmark::ClobberMemory();
    }
    state.SetLabel(impl + (reorder_in_loop ? " +reorder" : ""));
    set_flops(state, s);
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

bool register_all() {
  for (const ConvShape& s : kShapes) {
    for (Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter}) {
      const std::string prefix = std::string("conv/") + s.name + "/" + pass_name(pass) + "/";
      benchmark::RegisterBenchmark((prefix + "trainyard").c_str(), BM_TrainyardConv, s, pass)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      for (Layout layout : {Layout::kAny, Layout::kUserReorder, Layout::kUserFixed}) {
        benchmark::RegisterBenchmark((prefix + layout_name(layout)).c_str(), BM_RawDnnlConv, s,
                                     pass, layout)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  return true;
}

[[maybe_unused]] const bool registered = register_all();

}  // namespace
}  // namespace trainyard

// BENCHMARK_MAIN, refusing oneDNN's reference implementations in the cpu backend first
// (bench_util.h): a row that would time the fallback fails instead.
int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
