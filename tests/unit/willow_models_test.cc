// The WILLOW frame-level models (plugin willow_models), created through the plugin registry and
// run with testing::FakeModelContext on every test backend: the original's flags and defaults,
// variable names and shapes, the audio stream's integer-divided cluster counts and the stream
// split, predictions against a double-precision hand computation of the original's math,
// gradients by central differences, batch norm's statistics out of training, and frame
// sampling in every mode.
//
// The tiny configuration: B = 3 videos of T = 5 frames of D = 12 features split 8 (video) / 4
// (audio), K = 4 clusters (2 for audio), 6 hidden units, 3 classes. With iterations == T,
// sample_random_frames false and num_frames == T, SampleRandomSequence takes every frame in
// order, so the hand computation sees the input frames as they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using OptionMap = std::map<std::string, OptionValue>;
using Vec = std::vector<double>;

PluginRegistry& registry() { return test::plugin_registry(); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const OptionMap& options = {}) {
  return registry().create<BaseModel>(ClassKind::kModel, name, options);
}

constexpr int64_t kB = 3, kT = 5, kD = 12, kVideo = 8, kK = 4, kH = 6, kC = 3;

// The tiny configuration of each model, plus `extra`.
OptionMap tiny(const std::string& model, OptionMap extra = {}) {
  OptionMap o = {
      {"iterations", kT}, {"sample_random_frames", false}, {"video_feature_size", kVideo}};
  if (model == "NetVLADModelLF") {
    o["netvlad_cluster_size"] = kK;
    o["netvlad_hidden_size"] = kH;
  } else if (model == "NetFVModelLF") {
    o["fv_cluster_size"] = kK;
    o["fv_hidden_size"] = kH;
  } else {
    o["dbof_cluster_size"] = int64_t{16};  // the audio stream gets 16 / 8 = 2
    o["dbof_hidden_size"] = kH;
  }
  for (auto& [name, value] : extra) o[name] = value;
  return o;
}

const char* const kModels[] = {"NetVLADModelLF", "NetFVModelLF", "SoftDbofModelLF",
                               "GatedDbofModelLF", "DbofModelLF"};

Vec values(const Tensor& t) {
  NoGradScope no_grad;
  return t.dtype() == DType::kF64 ? t.to_vector<double>()
                                  : ops::cast(t, DType::kF64).to_vector<double>();
}

// Frames of unit L2 norm, as the trainer normalizes them.
Vec unit_frames(int64_t rows, int64_t cols, double phase) {
  Vec v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * static_cast<double>(i) + phase);
  for (int64_t r = 0; r < rows; ++r) {
    double norm = 0;
    for (int64_t c = 0; c < cols; ++c) norm += v[r * cols + c] * v[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] /= std::sqrt(norm);
  }
  return v;
}

class WillowModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  Batch batch(DType dtype = DType::kF64, int64_t b = kB, int64_t t = kT, int64_t d = kD,
              std::vector<double> num_frames = {}) const {
    if (num_frames.empty()) num_frames.assign(static_cast<std::size_t>(b), static_cast<double>(t));
    Batch out;
    Tensor x = Tensor::from_vector(backend(), Shape{b, t, d}, unit_frames(b * t, d, 0.3));
    out.features["features"] = dtype == DType::kF64 ? x : ops::cast(x, dtype);
    out.num_frames = ops::cast(Tensor::from_vector(backend(), Shape{b}, num_frames), DType::kI32);
    return out;
  }

  // Batch-norm betas and gammas away from 0 and 1, so that centre and scale are exercised.
  static void perturb_batch_norms(FakeModelContext& ctx) {
    for (const std::string& name : ctx.variable_names()) {
      const bool beta = name.ends_with("/beta"), gamma = name.ends_with("/gamma");
      if (!beta && !gamma) continue;
      Vec v = ctx.values(name);
      for (std::size_t i = 0; i < v.size(); ++i) {
        v[i] = beta ? 0.1 * std::cos(1.3 * static_cast<double>(i)) : 1.0 + 0.2 * std::sin(i);
      }
      ctx.set_value(name, v);
    }
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, WillowModelsTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

// ---- The hand computation ------------------------------------------------------------------

// Row-major matrices in double, reading the model's variables from the context.
struct Reference {
  FakeModelContext& ctx;
  bool training;

  Vec var(const std::string& name) const { return ctx.values(name); }

  static Vec matmul(const Vec& a, int64_t n, int64_t k, const Vec& b, int64_t m) {
    Vec out(static_cast<std::size_t>(n * m), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < m; ++j) out[i * m + j] += a[i * k + p] * b[p * m + j];
    return out;
  }
  // slim.batch_norm(center, scale, epsilon 1e-3) over the rows.
  Vec batch_norm(const Vec& x, int64_t rows, int64_t cols, const std::string& scope) const {
    Vec beta = var(scope + "/beta"), gamma = var(scope + "/gamma");
    Vec mean = var(scope + "/moving_mean"), variance = var(scope + "/moving_variance");
    if (training) {
      for (int64_t c = 0; c < cols; ++c) {
        double m = 0, v = 0;
        for (int64_t r = 0; r < rows; ++r) m += x[r * cols + c] / static_cast<double>(rows);
        for (int64_t r = 0; r < rows; ++r) {
          v += (x[r * cols + c] - m) * (x[r * cols + c] - m) / static_cast<double>(rows);
        }
        mean[c] = m;
        variance[c] = v;
      }
    }
    Vec y(x.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] =
            (x[r * cols + c] - mean[c]) / std::sqrt(variance[c] + 1e-3) * gamma[c] + beta[c];
    return y;
  }
  static Vec softmax_rows(Vec x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
      double z = 0;
      for (int64_t c = 0; c < cols; ++c) z += std::exp(x[r * cols + c]);
      for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = std::exp(x[r * cols + c]) / z;
    }
    return x;
  }
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  // L2-normalizes x[offset + i * stride] for i < n.
  static void l2(Vec& x, std::size_t offset, std::size_t stride, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += x[offset + i * stride] * x[offset + i * stride];
    for (std::size_t i = 0; i < n; ++i) x[offset + i * stride] /= std::sqrt(std::max(s, 1e-12));
  }
  static void l2_rows(Vec& x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) l2(x, r * cols, 1, cols);
  }
  // Columns [begin, begin + width) of a [rows, cols] matrix.
  static Vec columns(const Vec& x, int64_t rows, int64_t cols, int64_t begin, int64_t width) {
    Vec out;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = begin; c < begin + width; ++c) out.push_back(x[r * cols + c]);
    return out;
  }
  static Vec concat_rows(const Vec& a, int64_t wa, const Vec& b, int64_t wb, int64_t rows) {
    Vec out;
    for (int64_t r = 0; r < rows; ++r) {
      out.insert(out.end(), a.begin() + r * wa, a.begin() + (r + 1) * wa);
      out.insert(out.end(), b.begin() + r * wb, b.begin() + (r + 1) * wb);
    }
    return out;
  }

  // The cluster layer: BN(x W) [N, k] before the softmax.
  Vec cluster_logits(const Vec& x, int64_t d, int64_t k, const std::string& scope) const {
    const int64_t n = static_cast<int64_t>(x.size()) / d;
    return batch_norm(matmul(x, n, d, var(scope + "/cluster_weights"), k), n, k,
                      scope + "/cluster_bn");
  }

  // NetVLAD / NetRVLAD / NetVLAGD, [B, d k] with index j k + c.
  Vec vlad(const Vec& x, int64_t d, int64_t k, const std::string& scope,
           const std::string& kind) const {
    Vec a = softmax_rows(cluster_logits(x, d, k, scope), kB * kT, k);
    Vec out(static_cast<std::size_t>(kB * d * k), 0.0);
    Vec centers = kind == "vlad" ? var(scope + "/cluster_weights2") : Vec{};
    Vec gates = kind == "vlagd" ? var(scope + "/gate_weights") : Vec{};  // [1, k, d]
    for (int64_t b = 0; b < kB; ++b) {
      for (int64_t j = 0; j < d; ++j) {
        for (int64_t c = 0; c < k; ++c) {
          double v = 0, a_sum = 0;
          for (int64_t t = 0; t < kT; ++t) {
            v += a[(b * kT + t) * k + c] * x[(b * kT + t) * d + j];
            a_sum += a[(b * kT + t) * k + c];
          }
          if (kind == "vlad") v -= a_sum * centers[j * k + c];
          if (kind == "vlagd") v *= sigmoid(gates[c * d + j]);
          out[(b * d + j) * k + c] = v;
        }
      }
      for (int64_t c = 0; c < k; ++c) l2(out, (b * d) * k + c, k, d);  // intra-norm over j
      l2(out, b * d * k, 1, d * k);
    }
    return out;
  }

  // NetFV, [B, 2 d k]: fv1 then fv2.
  Vec fv(const Vec& x, int64_t d, int64_t k, const std::string& scope, bool coupled) const {
    Vec a = softmax_rows(cluster_logits(x, d, k, scope), kB * kT, k);
    Vec mu = coupled ? var(scope + "/cluster_weights") : var(scope + "/cluster_weights2");
    if (coupled)
      for (double& m : mu) m *= 0.01;
    Vec covar = var(scope + "/covar_weights");
    for (double& s : covar) s = s * s + 1e-6;
    Vec fv1(static_cast<std::size_t>(kB * d * k)), fv2(fv1.size());
    for (int64_t b = 0; b < kB; ++b) {
      for (int64_t j = 0; j < d; ++j) {
        for (int64_t c = 0; c < k; ++c) {
          double s1 = 0, s2 = 0, a_sum = 0;
          for (int64_t t = 0; t < kT; ++t) {
            const double at = a[(b * kT + t) * k + c], xt = x[(b * kT + t) * d + j];
            s1 += at * xt;
            s2 += at * xt * xt;
            a_sum += at;
          }
          const double m = mu[j * k + c], s = covar[j * k + c];
          fv1[(b * d + j) * k + c] = (s1 - a_sum * m) / s;
          fv2[(b * d + j) * k + c] = (s2 - 2 * m * s1 + a_sum * m * m) / (s * s) - a_sum;
        }
      }
      for (int64_t c = 0; c < k; ++c) l2(fv1, (b * d) * k + c, k, d);
      l2(fv1, b * d * k, 1, d * k);
      l2(fv2, b * d * k, 1, d * k);
    }
    return concat_rows(fv1, d * k, fv2, d * k, kB);
  }

  // SoftDBoF: L2(sum_t a) (and L2(max_t a)), [B, k or 2k].
  Vec soft_dbof(const Vec& x, int64_t d, int64_t k, const std::string& scope, bool max_pool) const {
    Vec a = softmax_rows(cluster_logits(x, d, k, scope), kB * kT, k);
    Vec sum(static_cast<std::size_t>(kB * k), 0.0), max(sum.size(), -1e300);
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t c = 0; c < k; ++c) {
          sum[b * k + c] += a[(b * kT + t) * k + c];
          max[b * k + c] = std::max(max[b * k + c], a[(b * kT + t) * k + c]);
        }
    l2_rows(sum, kB, k);
    l2_rows(max, kB, k);
    return max_pool ? concat_rows(sum, k, max, k, kB) : sum;
  }

  // GatedDBoF: L2(sigmoid(BN(L2(max) R W2)) * sum), [B, k].
  Vec gated_dbof(const Vec& x, int64_t d, int64_t k, const std::string& scope) const {
    Vec a = softmax_rows(cluster_logits(x, d, k, scope), kB * kT, k);
    Vec sum(static_cast<std::size_t>(kB * k), 0.0), max(sum.size(), -1e300);
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t c = 0; c < k; ++c) {
          sum[b * k + c] += a[(b * kT + t) * k + c];
          max[b * k + c] = std::max(max[b * k + c], a[(b * kT + t) * k + c]);
        }
    l2_rows(max, kB, k);
    Vec gates = matmul(matmul(max, kB, k, var(scope + "/dim_red"), d), kB, d,
                       var(scope + "/cluster_weights_2"), k);
    gates = batch_norm(gates, kB, k, scope + "/cluster_bn_2");
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] *= sigmoid(gates[i]);
    l2_rows(sum, kB, k);
    return sum;
  }

  // WILLOW's DBoF: [L2(mean_t), L2(max_t)] of the cluster layer with `activation` (none in the
  // original, which is the quirk under test).
  Vec dbof(const Vec& x, int64_t d, int64_t k, const std::string& scope, bool relu6) const {
    Vec z = cluster_logits(x, d, k, scope);
    if (relu6)
      for (double& v : z) v = std::clamp(v, 0.0, 6.0);
    Vec mean(static_cast<std::size_t>(kB * k), 0.0), max(mean.size(), -1e300);
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t t = 0; t < kT; ++t)
        for (int64_t c = 0; c < k; ++c) {
          mean[b * k + c] += z[(b * kT + t) * k + c] / kT;
          max[b * k + c] = std::max(max[b * k + c], z[(b * kT + t) * k + c]);
        }
    l2_rows(mean, kB, k);
    l2_rows(max, kB, k);
    return concat_rows(mean, k, max, k, kB);
  }

  struct Head {
    bool relu = true;
    bool gating = false;
    bool prob_gating = false;
    bool gating_remove_diag = false;  // Context Gating's
    bool prob_remove_diag = false;    // the MoE's prob gating's
  };

  // gates - diag(W) * x, as tf.matrix_diag_part; W [n, n].
  static void remove_diag(Vec& gates, const Vec& x, const Vec& w, int64_t n) {
    for (int64_t r = 0; r < kB; ++r)
      for (int64_t c = 0; c < n; ++c) gates[r * n + c] -= w[c * n + c] * x[r * n + c];
  }

  // hidden1 (BN + ReLU6, or a bias), Context Gating, MoE with 2 mixtures (+ prob gating).
  Vec head(const Vec& pooled, int64_t p, const Head& h) const {
    Vec act = matmul(pooled, kB, p, var("hidden1_weights"), kH);
    if (h.relu) {
      act = batch_norm(act, kB, kH, "hidden1_bn");
      for (double& v : act) v = std::clamp(v, 0.0, 6.0);
    } else {
      Vec bias = var("hidden1_biases");
      for (int64_t r = 0; r < kB; ++r)
        for (int64_t c = 0; c < kH; ++c) act[r * kH + c] += bias[c];
    }
    if (h.gating) {
      Vec w = var("gating_weights_2");
      Vec gates = matmul(act, kB, kH, w, kH);
      if (h.gating_remove_diag) remove_diag(gates, act, w, kH);
      gates = batch_norm(gates, kB, kH, "gating_bn");
      for (std::size_t i = 0; i < act.size(); ++i) act[i] *= sigmoid(gates[i]);
    }
    constexpr int64_t m = 2;
    Vec g = matmul(act, kB, kH, var("gates/weights"), kC * (m + 1));
    Vec e = matmul(act, kB, kH, var("experts/weights"), kC * m);
    Vec eb = var("experts/biases");
    Vec p_out(static_cast<std::size_t>(kB * kC));
    for (int64_t r = 0; r < kB; ++r) {
      for (int64_t c = 0; c < kC; ++c) {
        double z = 0, prob = 0;
        for (int64_t j = 0; j <= m; ++j) z += std::exp(g[r * kC * (m + 1) + c * (m + 1) + j]);
        for (int64_t j = 0; j < m; ++j) {
          prob += std::exp(g[r * kC * (m + 1) + c * (m + 1) + j]) / z *
                  sigmoid(e[r * kC * m + c * m + j] + eb[c * m + j]);
        }
        p_out[r * kC + c] = prob;
      }
    }
    if (h.prob_gating) {
      Vec w = var("gating_prob_weights");
      Vec gates = matmul(p_out, kB, kC, w, kC);
      if (h.prob_remove_diag) remove_diag(gates, p_out, w, kC);
      gates = batch_norm(gates, kB, kC, "gating_prob_bn");
      for (std::size_t i = 0; i < p_out.size(); ++i) p_out[i] *= sigmoid(gates[i]);
    }
    return p_out;
  }

  // input_bn over the frames, then the two streams.
  std::pair<Vec, Vec> streams(const Vec& frames) const {
    Vec x = batch_norm(frames, kB * kT, kD, "input_bn");
    return {columns(x, kB * kT, kD, 0, kVideo), columns(x, kB * kT, kD, kVideo, kD - kVideo)};
  }
};

// Runs the model in `mode` and compares with `expected(reference)`.
template <class Expected>
void expect_hand_computation(FakeModelContext& ctx, BaseModel& model, const Batch& batch, Mode mode,
                             Expected expected, double tolerance) {
  Vec got = values(model.forward(ctx, batch, mode).predictions);
  Reference reference{ctx, is_training(mode)};
  EXPECT_EQ(testing::compare_close(got, expected(reference), tolerance, tolerance), "")
      << mode_name(mode);
}

// ---- Declarations and variables ------------------------------------------------------------

TEST(WillowModelsDeclarationTest, DeclaresTheOriginalFlagsWithTheirDefaults) {
  const std::map<std::string, std::string> shared = {{"iterations", "30"},
                                                     {"sample_random_frames", "true"},
                                                     {"video_feature_size", "1024"},
                                                     {"video_level_classifier_model", "MoeModel"},
                                                     {"moe_num_mixtures", "2"},
                                                     {"moe_l2", "1e-8"},
                                                     {"moe_low_rank_gating", "-1"},
                                                     {"moe_prob_gating", "false"},
                                                     {"moe_prob_gating_input", "prob"},
                                                     {"gating_remove_diag", "false"}};
  const std::map<std::string, std::string> dbof = {{"dbof_cluster_size", "16384"},
                                                   {"dbof_hidden_size", "2048"},
                                                   {"dbof_relu", "true"},
                                                   {"dbof_add_batch_norm", "true"}};
  std::map<std::string, std::map<std::string, std::string>> own = {
      {"NetVLADModelLF",
       {{"netvlad_cluster_size", "64"},
        {"netvlad_hidden_size", "1024"},
        {"netvlad_relu", "true"},
        {"netvlad_add_batch_norm", "true"},
        {"gating", "false"},
        {"lightvlad", "false"},
        {"vlagd", "false"}}},
      {"NetFVModelLF",
       {{"fv_cluster_size", "64"},
        {"fv_hidden_size", "2048"},
        {"fv_relu", "true"},
        {"fv_couple_weights", "true"},
        {"fv_coupling_factor", "0.01"},
        {"netvlad_add_batch_norm", "true"},
        {"gating", "false"}}},
      {"SoftDbofModelLF", {{"softdbof_maxpool", "false"}, {"fc_dimred", "true"}}},
      {"GatedDbofModelLF", {{"softdbof_maxpool", "false"}, {"fc_dimred", "true"}}},
      {"DbofModelLF", {{"dbof_activation", "relu"}}}};
  for (const char* model : kModels) {
    SCOPED_TRACE(model);
    std::map<std::string, std::string> expected = shared;
    if (std::string(model).find("Dbof") != std::string::npos)
      expected.insert(dbof.begin(), dbof.end());
    expected.insert(own[model].begin(), own[model].end());
    std::map<std::string, std::string> declared;
    for (const auto& option :
         registry().describe(registry().find(ClassKind::kModel, model)).options) {
      declared[option.name] = option.default_value;
    }
    EXPECT_EQ(declared, expected);
  }
}

TEST_P(WillowModelsTest, CreatesTheOriginalVariablesWithTheirShapes) {
  auto bn = [](const std::string& scope, int64_t n) {
    std::map<std::string, Shape> v;
    for (const char* s : {"beta", "gamma", "moving_mean", "moving_variance"})
      v[scope + "/" + s] = Shape{n};
    return v;
  };
  auto join = [](std::initializer_list<std::map<std::string, Shape>> parts) {
    std::map<std::string, Shape> all;
    for (const auto& p : parts) all.insert(p.begin(), p.end());
    return all;
  };
  const auto moe = std::map<std::string, Shape>{{"gates/weights", Shape{kH, kC * 3}},
                                                {"experts/weights", Shape{kH, kC * 2}},
                                                {"experts/biases", Shape{kC * 2}}};
  const auto common = join({bn("input_bn", kD), bn("hidden1_bn", kH), moe});
  auto cluster = [&](const std::string& scope, int64_t d, int64_t k) {
    return join({{{scope + "/cluster_weights", Shape{d, k}}}, bn(scope + "/cluster_bn", k)});
  };
  struct Case {
    std::string model;
    OptionMap options;
    std::map<std::string, Shape> variables;
  };
  const std::vector<Case> cases = {
      {"NetVLADModelLF",
       {},
       join({common,
             cluster("video_VLAD", 8, 4),
             cluster("audio_VLAD", 4, 2),
             {{"video_VLAD/cluster_weights2", Shape{1, 8, 4}},
              {"audio_VLAD/cluster_weights2", Shape{1, 4, 2}},
              {"hidden1_weights", Shape{8 * 4 + 4 * 2, kH}}}})},
      {"NetVLADModelLF",
       {{"lightvlad", true}},
       join({common,
             cluster("video_VLAD", 8, 4),
             cluster("audio_VLAD", 4, 2),
             {{"hidden1_weights", Shape{40, kH}}}})},
      {"NetVLADModelLF",
       {{"vlagd", true}},
       join({common,
             cluster("video_VLAD", 8, 4),
             cluster("audio_VLAD", 4, 2),
             {{"video_VLAD/gate_weights", Shape{1, 4, 8}},
              {"audio_VLAD/gate_weights", Shape{1, 2, 4}},
              {"hidden1_weights", Shape{40, kH}}}})},
      {"NetVLADModelLF",
       {{"netvlad_relu", false}, {"gating", true}, {"moe_prob_gating", true}},
       join({bn("input_bn", kD),
             moe,
             cluster("video_VLAD", 8, 4),
             cluster("audio_VLAD", 4, 2),
             bn("gating_bn", kH),
             bn("gating_prob_bn", kC),
             {{"video_VLAD/cluster_weights2", Shape{1, 8, 4}},
              {"audio_VLAD/cluster_weights2", Shape{1, 4, 2}},
              {"hidden1_weights", Shape{40, kH}},
              {"hidden1_biases", Shape{kH}},
              {"gating_weights_2", Shape{kH, kH}},
              {"gating_prob_weights", Shape{kC, kC}}}})},
      {"NetFVModelLF",
       {},
       join({common,
             cluster("video_FV", 8, 4),
             cluster("audio_FV", 4, 2),
             {{"video_FV/covar_weights", Shape{8, 4}},
              {"audio_FV/covar_weights", Shape{4, 2}},
              {"hidden1_weights", Shape{2 * 40, kH}}}})},
      {"NetFVModelLF",
       {{"fv_couple_weights", false}},
       join({common,
             cluster("video_FV", 8, 4),
             cluster("audio_FV", 4, 2),
             {{"video_FV/covar_weights", Shape{8, 4}},
              {"audio_FV/covar_weights", Shape{4, 2}},
              {"video_FV/cluster_weights2", Shape{1, 8, 4}},
              {"audio_FV/cluster_weights2", Shape{1, 4, 2}},
              {"hidden1_weights", Shape{80, kH}}}})},
      {"SoftDbofModelLF",
       {},
       join({common,
             cluster("video_DBOF", 8, 16),
             cluster("audio_DBOF", 4, 2),
             {{"hidden1_weights", Shape{16 + 2, kH}}}})},
      {"SoftDbofModelLF",
       {{"softdbof_maxpool", true}},
       join({common,
             cluster("video_DBOF", 8, 16),
             cluster("audio_DBOF", 4, 2),
             {{"hidden1_weights", Shape{2 * 18, kH}}}})},
      {"SoftDbofModelLF",
       {{"fc_dimred", false}},
       join({bn("input_bn", kD),
             cluster("video_DBOF", 8, 16),
             cluster("audio_DBOF", 4, 2),
             {{"gates/weights", Shape{18, kC * 3}},
              {"experts/weights", Shape{18, kC * 2}},
              {"experts/biases", Shape{kC * 2}}}})},
      {"GatedDbofModelLF",
       {},
       join({common,
             cluster("video_DBOF", 8, 16),
             cluster("audio_DBOF", 4, 2),
             bn("video_DBOF/cluster_bn_2", 16),
             {{"video_DBOF/dim_red", Shape{16, 8}},
              {"video_DBOF/cluster_weights_2", Shape{8, 16}},
              {"hidden1_weights", Shape{18, kH}}}})},
      {"DbofModelLF",
       {},
       join({common,
             cluster("video_DBOF", 8, 16),
             cluster("audio_DBOF", 4, 2),
             {{"hidden1_weights", Shape{2 * 16 + 2 * 2, kH}}}})},
      {"DbofModelLF",
       {{"dbof_activation", std::string("glu")}},
       join({common,
             cluster("video_DBOF", 8, 32),
             cluster("audio_DBOF", 4, 4),
             {{"hidden1_weights", Shape{2 * 32 + 2 * 4, kH}}}})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " " + std::to_string(c.options.size()) + " option(s) set");
    auto model = make_model(c.model, tiny(c.model, c.options));
    FakeModelContext ctx(backend(), kC);
    ModelOutput out = model->forward(ctx, batch(DType::kF32), Mode::kTrain);
    EXPECT_EQ(out.predictions.shape(), (Shape{kB, kC}));
    std::map<std::string, Shape> created;
    for (const std::string& name : ctx.variable_names()) created[name] = ctx.at(name).spec().shape;
    EXPECT_EQ(created, c.variables);
  }
}

TEST_P(WillowModelsTest, DrawsHiddenWeightsFromTheClusterCountNotTheFanIn) {
  auto model = make_model("NetFVModelLF", tiny("NetFVModelLF"));
  FakeModelContext ctx(backend(), kC);
  model->forward(ctx, batch(), Mode::kTrain);
  auto expect_normal = [&](const std::string& name, double mean, double stddev) {
    SCOPED_TRACE(name);
    const Initializer& init = ctx.at(name).spec().initializer;
    EXPECT_EQ(init.kind, Initializer::Kind::kNormal);
    EXPECT_DOUBLE_EQ(init.mean, mean);
    EXPECT_DOUBLE_EQ(init.stddev, stddev);
  };
  expect_normal("hidden1_weights", 0.0, 1.0 / std::sqrt(4.0));  // K = 4; the fan-in is 80
  expect_normal("video_FV/cluster_weights", 0.0, 1.0 / std::sqrt(8.0));
  expect_normal("audio_FV/covar_weights", 1.0, 1.0 / std::sqrt(4.0));

  auto relu_off = make_model("NetVLADModelLF", tiny("NetVLADModelLF", {{"netvlad_relu", false}}));
  FakeModelContext ctx2(backend(), kC);
  relu_off->forward(ctx2, batch(), Mode::kTrain);
  const Initializer& bias = ctx2.at("hidden1_biases").spec().initializer;
  EXPECT_EQ(bias.kind, Initializer::Kind::kNormal);
  EXPECT_DOUBLE_EQ(bias.stddev, 0.01);
}

TEST_P(WillowModelsTest, AudioStreamGetsTheClusterCountIntegerDivided) {
  {
    auto model = make_model("NetVLADModelLF",
                            tiny("NetVLADModelLF", {{"netvlad_cluster_size", int64_t{5}}}));
    FakeModelContext ctx(backend(), kC);
    model->forward(ctx, batch(), Mode::kTrain);
    EXPECT_EQ(ctx.at("audio_VLAD/cluster_weights").spec().shape, (Shape{4, 2})) << "5 / 2 = 2";
  }
  {
    auto model = make_model("GatedDbofModelLF",
                            tiny("GatedDbofModelLF", {{"dbof_cluster_size", int64_t{23}}}));
    FakeModelContext ctx(backend(), kC);
    model->forward(ctx, batch(), Mode::kTrain);
    EXPECT_EQ(ctx.at("audio_DBOF/cluster_weights").spec().shape, (Shape{4, 2})) << "23 / 8 = 2";
  }
  EXPECT_THROW(make_model("NetVLADModelLF", {{"netvlad_cluster_size", int64_t{1}}}), Error);
  EXPECT_THROW(make_model("NetFVModelLF", {{"fv_cluster_size", int64_t{1}}}), Error);
  EXPECT_THROW(make_model("SoftDbofModelLF", {{"dbof_cluster_size", int64_t{7}}}), Error);
}

TEST_P(WillowModelsTest, SplitsFramesAt1024And128OrEightToOneWhenNarrower) {
  const OptionMap small = {{"netvlad_cluster_size", int64_t{4}},
                           {"netvlad_hidden_size", int64_t{2}},
                           {"iterations", int64_t{2}}};
  {
    auto model = make_model("NetVLADModelLF", small);  // video_feature_size 1024
    FakeModelContext ctx(backend(), kC);
    model->forward(ctx, batch(DType::kF32, 1, 2, 1152), Mode::kTrain);
    EXPECT_EQ(ctx.at("video_VLAD/cluster_weights").spec().shape, (Shape{1024, 4}));
    EXPECT_EQ(ctx.at("audio_VLAD/cluster_weights").spec().shape, (Shape{128, 2}));
  }
  {
    auto model = make_model("NetVLADModelLF", small);
    FakeModelContext ctx(backend(), kC);
    model->forward(ctx, batch(DType::kF32, 2, 2, 16), Mode::kTrain);
    EXPECT_EQ(ctx.at("video_VLAD/cluster_weights").spec().shape, (Shape{15, 4})) << "16 - 16 / 9";
    EXPECT_EQ(ctx.at("audio_VLAD/cluster_weights").spec().shape, (Shape{1, 2}));
  }
  {
    auto model = make_model("NetVLADModelLF", small);
    FakeModelContext ctx(backend(), kC);
    model->forward(ctx, batch(DType::kF32, 2, 2, 36), Mode::kTrain);
    EXPECT_EQ(ctx.at("audio_VLAD/cluster_weights").spec().shape, (Shape{4, 2})) << "36 / 9";
  }
  auto model = make_model("NetVLADModelLF", small);
  FakeModelContext ctx(backend(), kC);
  EXPECT_THROW(model->forward(ctx, batch(DType::kF32, 2, 2, 1), Mode::kTrain), InvalidArgument);
}

// ---- Predictions against the hand computation ----------------------------------------------

TEST_P(WillowModelsTest, NetVLADVariantsMatchTheHandComputation) {
  struct Variant {
    const char* kind;
    OptionMap options;
  };
  for (const Variant& v : {Variant{"vlad", {}}, Variant{"light", {{"lightvlad", true}}},
                           Variant{"vlagd", {{"vlagd", true}}}}) {
    SCOPED_TRACE(v.kind);
    auto model = make_model("NetVLADModelLF", tiny("NetVLADModelLF", v.options));
    FakeModelContext ctx(backend(), kC);
    Batch b = batch();
    model->forward(ctx, b, Mode::kTrain);
    perturb_batch_norms(ctx);
    const Vec frames = values(b.features["features"]);
    auto expected = [&](const Reference& r) {
      auto [video, audio] = r.streams(frames);
      Vec pooled = Reference::concat_rows(r.vlad(video, 8, 4, "video_VLAD", v.kind), 32,
                                          r.vlad(audio, 4, 2, "audio_VLAD", v.kind), 8, kB);
      return r.head(pooled, 40, {});
    };
    expect_hand_computation(ctx, *model, b, Mode::kTrain, expected, 1e-10);
    expect_hand_computation(ctx, *model, b, Mode::kEval, expected, 1e-10);
  }
}

TEST_P(WillowModelsTest, NetFVMatchesTheHandComputationCoupledOrNot) {
  for (bool coupled : {true, false}) {
    SCOPED_TRACE(coupled ? "fv_couple_weights" : "free cluster_weights2");
    auto model = make_model("NetFVModelLF", tiny("NetFVModelLF", {{"fv_couple_weights", coupled}}));
    FakeModelContext ctx(backend(), kC);
    Batch b = batch();
    model->forward(ctx, b, Mode::kTrain);
    perturb_batch_norms(ctx);
    const Vec frames = values(b.features["features"]);
    auto expected = [&](const Reference& r) {
      auto [video, audio] = r.streams(frames);
      Vec pooled = Reference::concat_rows(r.fv(video, 8, 4, "video_FV", coupled), 64,
                                          r.fv(audio, 4, 2, "audio_FV", coupled), 16, kB);
      return r.head(pooled, 80, {});
    };
    expect_hand_computation(ctx, *model, b, Mode::kTrain, expected, 1e-10);
    expect_hand_computation(ctx, *model, b, Mode::kEval, expected, 1e-10);
  }
}

TEST_P(WillowModelsTest, SoftAndGatedDbofMatchTheHandComputation) {
  for (const char* name : {"SoftDbofModelLF", "GatedDbofModelLF"}) {
    for (bool max_pool : {false, true}) {
      SCOPED_TRACE(std::string(name) + (max_pool ? " softdbof_maxpool" : ""));
      auto model = make_model(name, tiny(name, {{"softdbof_maxpool", max_pool}}));
      FakeModelContext ctx(backend(), kC);
      Batch b = batch();
      model->forward(ctx, b, Mode::kTrain);
      perturb_batch_norms(ctx);
      const Vec frames = values(b.features["features"]);
      const bool gated = std::string(name) == "GatedDbofModelLF";
      auto expected = [&](const Reference& r) {
        auto [video, audio] = r.streams(frames);
        Vec v = gated ? r.gated_dbof(video, 8, 16, "video_DBOF")
                      : r.soft_dbof(video, 8, 16, "video_DBOF", max_pool);
        const int64_t wv = gated || !max_pool ? 16 : 32, wa = max_pool ? 4 : 2;
        Vec pooled =
            Reference::concat_rows(v, wv, r.soft_dbof(audio, 4, 2, "audio_DBOF", max_pool), wa, kB);
        return r.head(pooled, wv + wa, {});
      };
      expect_hand_computation(ctx, *model, b, Mode::kTrain, expected, 1e-10);
    }
  }
}

TEST_P(WillowModelsTest, DbofModelLFAppliesNoActivationToItsClusterLayer) {
  auto model = make_model("DbofModelLF", tiny("DbofModelLF"));  // dbof_activation "relu"
  FakeModelContext ctx(backend(), kC);
  Batch b = batch();
  model->forward(ctx, b, Mode::kTrain);
  perturb_batch_norms(ctx);
  const Vec frames = values(b.features["features"]);
  auto expected_with = [&](bool relu6) {
    return [&, relu6](const Reference& r) {
      auto [video, audio] = r.streams(frames);
      Vec pooled = Reference::concat_rows(r.dbof(video, 8, 16, "video_DBOF", relu6), 32,
                                          r.dbof(audio, 4, 2, "audio_DBOF", relu6), 4, kB);
      return r.head(pooled, 36, {});
    };
  };
  expect_hand_computation(ctx, *model, b, Mode::kTrain, expected_with(false), 1e-10);
  // The configuration tells the two apart: with the intended ReLU6 the predictions differ.
  Reference r{ctx, true};
  Vec got = values(model->forward(ctx, b, Mode::kTrain).predictions);
  EXPECT_NE(testing::compare_close(got, expected_with(true)(r), 1e-6, 1e-6), "");
}

TEST_P(WillowModelsTest, ReluFalseMeansBiasWithoutActivationAndGatingMatches) {
  for (bool remove_diag : {false, true}) {
    SCOPED_TRACE(remove_diag ? "gating_remove_diag" : "with diagonal");
    auto model =
        make_model("NetVLADModelLF", tiny("NetVLADModelLF", {{"netvlad_relu", false},
                                                             {"gating", true},
                                                             {"moe_prob_gating", true},
                                                             {"gating_remove_diag", remove_diag}}));
    FakeModelContext ctx(backend(), kC);
    Batch b = batch();
    model->forward(ctx, b, Mode::kTrain);
    perturb_batch_norms(ctx);
    Vec bias(kH);
    for (int64_t i = 0; i < kH; ++i) bias[i] = -3.0 + static_cast<double>(i);  // negatives pass
    ctx.set_value("hidden1_biases", bias);
    const Vec frames = values(b.features["features"]);
    auto expected = [&](const Reference& r) {
      auto [video, audio] = r.streams(frames);
      Vec pooled = Reference::concat_rows(r.vlad(video, 8, 4, "video_VLAD", "vlad"), 32,
                                          r.vlad(audio, 4, 2, "audio_VLAD", "vlad"), 8, kB);
      Reference::Head head;
      head.relu = false;
      head.gating = true;
      head.prob_gating = true;
      head.gating_remove_diag = remove_diag;
      head.prob_remove_diag = remove_diag;
      return r.head(pooled, 40, head);
    };
    expect_hand_computation(ctx, *model, b, Mode::kTrain, expected, 1e-10);
    expect_hand_computation(ctx, *model, b, Mode::kEval, expected, 1e-10);
  }
}

TEST_P(WillowModelsTest, NetFVContextGatingKeepsItsDiagonal) {
  // gating_remove_diag reaches the MoE's prob gating but not NetFV's Context Gating.
  auto model =
      make_model("NetFVModelLF",
                 tiny("NetFVModelLF",
                      {{"gating", true}, {"moe_prob_gating", true}, {"gating_remove_diag", true}}));
  FakeModelContext ctx(backend(), kC);
  Batch b = batch();
  model->forward(ctx, b, Mode::kTrain);
  perturb_batch_norms(ctx);
  const Vec frames = values(b.features["features"]);
  auto expected_with = [&](bool gating_remove_diag) {
    return [&, gating_remove_diag](const Reference& r) {
      auto [video, audio] = r.streams(frames);
      Vec pooled = Reference::concat_rows(r.fv(video, 8, 4, "video_FV", true), 64,
                                          r.fv(audio, 4, 2, "audio_FV", true), 16, kB);
      Reference::Head head;
      head.gating = true;
      head.prob_gating = true;
      head.gating_remove_diag = gating_remove_diag;
      head.prob_remove_diag = true;
      return r.head(pooled, 80, head);
    };
  };
  expect_hand_computation(ctx, *model, b, Mode::kTrain, expected_with(false), 1e-10);
  Reference r{ctx, true};
  Vec got = values(model->forward(ctx, b, Mode::kTrain).predictions);
  EXPECT_NE(testing::compare_close(got, expected_with(true)(r), 1e-9, 1e-9), "");
}

// ---- Gradients, modes and sampling ---------------------------------------------------------

TEST_P(WillowModelsTest, GradientsMatchCentralDifferences) {
  struct Case {
    const char* model;
    OptionMap options;
  };
  const std::vector<Case> cases = {
      {"NetVLADModelLF", {}},
      {"NetVLADModelLF", {{"lightvlad", true}}},
      {"NetVLADModelLF", {{"vlagd", true}, {"netvlad_relu", false}}},
      {"NetFVModelLF", {}},
      {"NetFVModelLF", {{"fv_couple_weights", false}, {"gating", true}}},
      {"NetVLADModelLF",
       {{"gating", true}, {"moe_prob_gating", true}, {"gating_remove_diag", true}}},
      {"SoftDbofModelLF", {{"softdbof_maxpool", true}}},
      {"GatedDbofModelLF", {}},
      {"DbofModelLF", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.model) + " " + std::to_string(c.options.size()) + " option(s)");
    auto model = make_model(c.model, tiny(c.model, c.options));
    FakeModelContext ctx(backend(), kC);
    Batch b = batch();
    model->forward(ctx, b, Mode::kTrain);
    perturb_batch_norms(ctx);
    std::vector<Variable*> variables = ctx.store().trainable();
    std::vector<Tensor> inputs = {b.features["features"]};
    for (Variable* v : variables) inputs.push_back(v->value());
    auto f = [&](const std::vector<Tensor>& in) {
      for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(in[i + 1]);
      Batch batch_in = b;
      batch_in.features["features"] = in[0];
      return model->forward(ctx, batch_in, Mode::kTrain).predictions;
    };
    testing::GradCheckResult result = testing::check_gradients(f, inputs);
    EXPECT_TRUE(result.ok) << result.report;
    std::size_t elements = 0;
    for (const Tensor& t : inputs) elements += static_cast<std::size_t>(t.num_elements());
    EXPECT_EQ(result.checked, elements) << "every input and trainable variable element";
  }
}

TEST_P(WillowModelsTest, EvalAndPredictLeaveBatchNormStatisticsUnchanged) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    auto model = make_model(name, tiny(name));
    FakeModelContext ctx(backend(), kC);
    Batch b = batch(DType::kF32);
    model->forward(ctx, b, Mode::kTrain);
    auto statistics = [&]() {
      std::map<std::string, Vec> out;
      for (const std::string& n : ctx.variable_names())
        if (!ctx.at(n).trainable()) out[n] = ctx.values(n);
      return out;
    };
    const auto before = statistics();
    ASSERT_FALSE(before.empty());
    model->forward(ctx, b, Mode::kEval);
    model->forward(ctx, b, Mode::kPredict);
    EXPECT_EQ(statistics(), before);
    model->forward(ctx, b, Mode::kTrain);
    EXPECT_NE(statistics(), before) << "training updates them, so the check can fail";
  }
}

TEST_P(WillowModelsTest, SamplesRandomFramesInEveryModeFromTheContextSeed) {
  // Defaults but small: 30 frames drawn with replacement from videos of 5, 2 and 1 frames.
  auto model = make_model(
      "NetVLADModelLF",
      {{"netvlad_cluster_size", kK}, {"netvlad_hidden_size", kH}, {"video_feature_size", kVideo}});
  FakeModelContext ctx(backend(), kC, /*seed=*/1);
  Batch b = batch(DType::kF32, kB, kT, kD, {5, 2, 1});
  model->forward(ctx, b, Mode::kTrain);
  for (Mode mode : {Mode::kEval, Mode::kPredict}) {
    SCOPED_TRACE(mode_name(mode));
    ctx.set_seed(1);
    Vec first = values(model->forward(ctx, b, mode).predictions);
    EXPECT_EQ(values(model->forward(ctx, b, mode).predictions), first) << "same seed, same frames";
    ctx.set_seed(2);
    Vec other = values(model->forward(ctx, b, mode).predictions);
    // The third video has one frame: every draw is that frame, so its row does not change.
    EXPECT_NE(Vec(other.begin(), other.begin() + 2 * kC),
              Vec(first.begin(), first.begin() + 2 * kC))
        << "another step's seed samples other frames, out of training too";
    EXPECT_EQ(Vec(other.begin() + 2 * kC, other.end()), Vec(first.begin() + 2 * kC, first.end()));
  }
}

TEST_P(WillowModelsTest, PredictsProbabilitiesForEveryModelAndMode) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    OptionMap options = tiny(name);
    options.erase("sample_random_frames");  // the default: frames with replacement
    options["iterations"] = int64_t{7};
    auto model = make_model(name, options);
    FakeModelContext ctx(backend(), kC, 5);
    Batch b = batch(DType::kF32, kB, kT, kD, {5, 3, 1});
    for (Mode mode : {Mode::kTrain, Mode::kEval, Mode::kPredict}) {
      ModelOutput out = model->forward(ctx, b, mode);
      ASSERT_EQ(out.predictions.shape(), (Shape{kB, kC})) << mode_name(mode);
      EXPECT_EQ(out.predictions.dtype(), DType::kF32);
      for (double p : values(out.predictions)) {
        EXPECT_GT(p, 0.0) << mode_name(mode);
        EXPECT_LT(p, 1.0) << mode_name(mode);
      }
    }
  }
}

TEST_P(WillowModelsTest, RejectsVideoLevelInputMissingCountsAndBadOptions) {
  auto model = make_model("NetVLADModelLF", tiny("NetVLADModelLF"));
  FakeModelContext ctx(backend(), kC);
  Batch video_level;
  video_level.features["features"] = ops::zeros(backend(), Shape{kB, kD});
  video_level.num_frames = batch().num_frames;
  EXPECT_THROW(model->forward(ctx, video_level, Mode::kTrain), InvalidArgument);
  Batch no_counts = batch();
  no_counts.num_frames = Tensor();
  EXPECT_THROW(model->forward(ctx, no_counts, Mode::kTrain), InvalidArgument);
  EXPECT_THROW(make_model("NetFVModelLF", {{"iterations", int64_t{0}}}), Error);
  EXPECT_THROW(
      make_model("SoftDbofModelLF", {{"video_level_classifier_model", std::string("Moe")}}), Error);
  EXPECT_THROW(make_model("DbofModelLF", {{"dbof_activation", std::string("sigmoid")}}), Error);
  EXPECT_THROW(make_model("GatedDbofModelLF", {{"moe_prob_gating_input", std::string("x")}}),
               Error);
}

}  // namespace
}  // namespace trainyard
