// The frame-level aggregation models of the WILLOW fork of the YouTube-8M starter code
// (antoine77340/Youtube-8M-WILLOW, frame_level_models.py, the 2017 challenge's winner): each
// pools the frames of a video into one vector, with one pooling block for the video (rgb)
// stream and one for the audio stream ("LF": late fusion), then a hidden layer, an optional
// Context Gating and a video-level classifier (MoE by default, pkg/yt8m video_level.h).
//
// Input: batch.features["features"] f32 [B, T, D], each frame already L2-normalized by the
// trainer, and batch.num_frames i32/i64 [B]. The number of classes comes from the context.
//
// The shared skeleton, as the original's create_model writes it (X: frames, N = B * S rows):
//   1. X <- `iterations` (S) frames per video: SampleRandomFrames (with replacement, in draw
//      order) or, with sample_random_frames false, SampleRandomSequence (pkg/yt8m
//      model_utils.h), drawn from a generator seeded with VariableScope::op_seed(
//      "SampleRandomFrames" / "SampleRandomSequence"), that is from ModelContext::seed().
//   2. X <- BN(X) over [N, D] ("input_bn", center and scale) when the model's batch-norm
//      option is on.
//   3. The video stream X[:, :Dv] goes through the block in scope "video_<BLOCK>" with K
//      clusters, the audio stream X[:, Dv:] through the block in "audio_<BLOCK>" with K / 2
//      clusters (K / 8 for the DBoF family); the two outputs are concatenated.
//   4. h = P "hidden1_weights" [dim, H], drawn from N(0, 1/sqrt(K)) (K the video stream's
//      cluster count, not the fan-in); then BN "hidden1_bn" when both `*_relu` and the
//      batch-norm option are on, else + "hidden1_biases" [H] ~ N(0, 0.01); then ReLU6 when
//      `*_relu`.
//   5. NetVLAD and NetFV with `gating`: Context Gating h <- h * sigmoid(BN(h W)), W
//      "gating_weights_2" [H, H] (yt8m::context_gating).
//   6. video_level_classifier_model on h (yt8m::moe_model with the moe_* options and
//      gating_remove_diag, or LogisticModel with l2 moe_l2), in the model's mode.
//
// The pooling blocks. Each starts with a cluster layer on its stream x [N, d]: x W with
// "cluster_weights" [d, k] ~ N(0, 1/sqrt(d)), then BN "cluster_bn" (center, scale) or, with
// batch norm off, + "cluster_biases" [k] ~ N(0, 1/sqrt(d)); a = softmax over the k clusters,
// viewed as [B, S, k]. With Σ_t over the S sampled frames and intra-norm the L2 normalization
// over the feature axis j of a [B, d, k] tensor:
//   NetVLAD    V_jk = Σ_t a_tk x_tj - (Σ_t a_tk) c_jk, c "cluster_weights2" [1, d, k]
//              ~ N(0, 1/sqrt(d)); intra-norm, flatten feature-major to [B, d k], L2.
//   NetRVLAD   (`lightvlad`) V_jk = Σ_t a_tk x_tj, then as NetVLAD; no cluster_weights2.
//   NetVLAGD   (`vlagd`) V_jk = (Σ_t a_tk x_tj) sigmoid(G_kj), G "gate_weights" [1, k, d]
//              ~ N(0, 1/sqrt(d)); then as NetVLAD.
//   NetFV      mu = fv_coupling_factor * cluster_weights with fv_couple_weights, else
//              "cluster_weights2" [1, d, k] ~ N(0, 1/sqrt(d)); sigma = w^2 + 1e-6 with
//              "covar_weights" [d, k] ~ N(1, 1/sqrt(d)); A_k = Σ_t a_tk;
//              fv1 = (Σ_t a_tk x_tj - A_k mu_jk) / sigma_jk, intra-norm, flatten, L2;
//              fv2 = (Σ_t a_tk x_tj^2 - 2 mu_jk Σ_t a_tk x_tj + A_k mu_jk^2) / sigma_jk^2 - A_k,
//              flatten, L2, L2 again (no intra-norm); output [fv1, fv2], [B, 2 d k].
//   SoftDBoF   L2(Σ_t a_tk), with softdbof_maxpool also L2(max_t a_tk) after it: [B, k or 2k].
//   GatedDBoF  s = Σ_t a_tk; m = L2(max_t a_tk); g = sigmoid(BN(m R W2)) with "dim_red" R
//              [k, d] and "cluster_weights_2" W2 [d, k], both ~ N(0, 1/sqrt(d)), BN
//              "cluster_bn_2" or + "cluster_biases_2" [k]; output L2(g * s), [B, k].
//   DBoF       (WILLOW's) the cluster layer without softmax and without any activation (the
//              quirk below); output [L2(mean_t), L2(max_t)], [B, 2k].
//
// The models, their blocks and batch-norm option:
//   NetVLADModelLF    video_VLAD / audio_VLAD: NetVLAD, NetRVLAD with `lightvlad`, else
//                     NetVLAGD with `vlagd` (lightvlad wins when both are set, as the
//                     original's if/elif); netvlad_add_batch_norm.
//   NetFVModelLF      video_FV / audio_FV: NetFV; netvlad_add_batch_norm (the original reads
//                     that flag here, not an fv_ one).
//   SoftDbofModelLF   video_DBOF / audio_DBOF: SoftDBoF, SoftDBoF; dbof_add_batch_norm;
//                     fc_dimred false skips the hidden layer (h = the pooled vector).
//   GatedDbofModelLF  video_DBOF / audio_DBOF: GatedDBoF, SoftDBoF; as SoftDbofModelLF.
//   DbofModelLF       video_DBOF / audio_DBOF: DBoF, DBoF; dbof_activation "glu" doubles K.
//
// The split into streams. The original slices each frame at a hard-coded 1024 (rgb, 1024
// features) / 128 (audio) and so only runs on D = 1152. Here the video stream is the first
// `video_feature_size` (default 1024) features and the audio stream the rest, sized to what is
// there: at D = 1152 that is the original's split. When D <= video_feature_size (an input with
// fewer features than the rgb stream alone, as the conformance suite's tiny batches), the
// split falls back to the original's proportion 128 : 1152 = 1 : 9: the audio stream takes the
// last max(1, D / 9) features and the video stream the rest. D < 2 throws InvalidArgument.
//
// Quirks of the original, reproduced:
//   - Python 2 integer division: the audio stream gets K / 2 clusters (K / 8 for the DBoF
//     family), floored; a K that leaves it no cluster throws InvalidArgument naming the option.
//   - WILLOW's DBoF block applies no activation: it tests `activation == 'glu'` and
//     `activation == 'relu'` on the activation *tensor* (the name is shadowed), which never
//     holds. dbof_activation only matters through "glu" doubling the cluster count.
//   - Frames are sampled at random (with replacement, unsorted) in every mode, inference too,
//     so predictions depend on ModelContext::seed().
//   - hidden1_weights are drawn from N(0, 1/sqrt(K)), K the video cluster count, not fan-in.
//   - `*_relu` false means a bias and no activation at all (the winning runs use it).
//   - NetFV's Context Gating ignores gating_remove_diag (only NetVLAD's applies it; the MoE's
//     prob gating applies it for every model), and NetFV's second-order part is normalized
//     twice without intra-normalization.
//
// Deviations, each where the original cannot run:
//   - Batch norm off: the original's cluster_biases (and cluster_biases_2, gating_biases) fail
//     to build (an undefined name, or tf.random_normal given as an initializer without a
//     shape). Here they are the [k] biases N(0, 1/sqrt(d)) it meant (gating_biases [H],
//     N(0, 1/sqrt(D))), and NetVLAGD adds its cluster_biases, which the original forgot.
//   - DbofModelLF calls the MoE without is_training, which WILLOW's MoeModel requires, so the
//     original fails to build; here the MoE runs in the model's mode like the other models'.
//   - video_level_classifier_model also accepts LogisticModel (WILLOW's module has only
//     MoeModel), with moe_l2 as its penalty.
//
// Variables are created in the input's dtype. Errors: a batch without [B, T, D] features or
// with num_frames that do not match throws InvalidArgument naming the model and the shapes; an
// option out of range throws InvalidArgument at construction naming the option and its value.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/yt8m/model_utils.h"
#include "trainyard/pkg/yt8m/video_level.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

namespace trainyard::models {
namespace {

using layers::VariableScope;

// ---- Options -------------------------------------------------------------------------------

// The options every model here reads: sampling, the stream split and the classifier.
constexpr std::array<OptionSpec, 10> kFrameOptions = join_options(
    std::array<OptionSpec, 3>{{
        {"iterations", OptionType::kInt, "30", "Number of frames sampled per video"},
        {"sample_random_frames", OptionType::kBool, "true",
         "Sample frames at random with replacement (true) or one random run of consecutive frames "
         "(false); in every mode, as the original"},
        {"video_feature_size", OptionType::kInt, "1024",
         "Features of the video (rgb) stream at the front of each frame, the rest being the audio "
         "stream; frames of at most this many features are split 8:1 instead"},
    }},
    yt8m::kClassifierOptions);

constexpr std::array<OptionSpec, 4> kDbofOptions = {{
    {"dbof_cluster_size", OptionType::kInt, "16384",
     "Clusters K of the video stream (the audio stream gets K / 8)"},
    {"dbof_hidden_size", OptionType::kInt, "2048", "Units of the hidden layer"},
    {"dbof_relu", OptionType::kBool, "true",
     "hidden1_bn then ReLU6 after the hidden layer; false: a bias and no activation"},
    {"dbof_add_batch_norm", OptionType::kBool, "true",
     "Batch norm on the input, the cluster layers and the hidden layer (else biases)"},
}};

constexpr std::array<OptionSpec, 2> kSoftDbofOptions = {{
    {"softdbof_maxpool", OptionType::kBool, "false",
     "SoftDBoF blocks also output the L2-normalized max over frames"},
    {"fc_dimred", OptionType::kBool, "true",
     "The hidden layer after pooling; false: the classifier gets the pooled vector"},
}};

struct FrameOptions {
  int64_t iterations;
  bool sample_random_frames;
  int64_t video_feature_size;
  yt8m::Classifier classifier;
};

[[noreturn]] void bad_option(std::string_view model, std::string_view option,
                             const OptionValue& value, std::string_view expected) {
  throw InvalidArgument(std::string(model) + ": " + std::string(option) + " is " +
                        option_value_to_string(value) + "; expected " + std::string(expected));
}

int64_t positive_int(std::string_view model, const Options& options, std::string_view name) {
  const int64_t value = options.get_int(name);
  if (value <= 0) bad_option(model, name, value, "a value > 0");
  return value;
}

FrameOptions frame_options(std::string_view model, const Options& options) {
  FrameOptions o;
  o.iterations = positive_int(model, options, "iterations");
  o.sample_random_frames = options.get_bool("sample_random_frames");
  o.video_feature_size = positive_int(model, options, "video_feature_size");
  o.classifier = yt8m::classifier_options(model, options);
  return o;
}

// K / divisor as Python 2 divides, checked to leave the audio stream a cluster.
int64_t audio_clusters(std::string_view model, std::string_view option, int64_t clusters,
                       int64_t divisor) {
  if (clusters / divisor < 1) {
    bad_option(model, option, clusters,
               "at least " + std::to_string(divisor) + ": the audio stream gets " +
                   std::string(option) + " / " + std::to_string(divisor) +
                   " clusters (integer division, as the original)");
  }
  return clusters / divisor;
}

// ---- Layers --------------------------------------------------------------------------------

double inverse_sqrt(int64_t n) { return 1.0 / std::sqrt(static_cast<double>(n)); }

// tf.get_variable(name, shape, initializer=tf.random_normal_initializer(mean, stddev)), in the
// input's dtype.
Tensor normal_variable(const VariableScope& scope, const char* name, Shape shape, DType dtype,
                       double stddev, double mean = 0.0) {
  VariableSpec spec;
  spec.name = name;
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  spec.initializer = layers::random_normal_initializer(mean, stddev);
  return scope.variable(spec).value();
}

// slim.batch_norm(center=True, scale=True, scope=name) in the scope's mode.
Tensor batch_norm(VariableScope& scope, const Tensor& x, const char* name) {
  layers::BatchNormOptions options;
  options.center = true;
  options.scale = true;
  options.scope = name;
  return layers::batch_norm(scope, x, options);
}

// x [N, d] -> BN(x W) or x W + b, [N, k]; `weights` is cluster_weights, for NetFV's coupling.
struct ClusterLayer {
  Tensor weights;
  Tensor logits;
};

ClusterLayer cluster_layer(VariableScope& scope, const Tensor& x, int64_t clusters,
                           bool add_batch_norm) {
  const int64_t d = x.shape()[1];
  ClusterLayer layer;
  layer.weights =
      normal_variable(scope, "cluster_weights", Shape{d, clusters}, x.dtype(), inverse_sqrt(d));
  layer.logits = ops::matmul(x, layer.weights);
  if (add_batch_norm) {
    layer.logits = batch_norm(scope, layer.logits, "cluster_bn");
  } else {
    layer.logits = ops::add(layer.logits, normal_variable(scope, "cluster_biases", Shape{clusters},
                                                          x.dtype(), inverse_sqrt(d)));
  }
  return layer;
}

// softmax over the clusters, as [B, S, k].
Tensor soft_assignment(const Tensor& logits, int64_t frames) {
  return ops::reshape(ops::softmax(logits), Shape{-1, frames, logits.shape()[1]});
}

// [B, d, k] -> intra-norm over d, flatten to [B, d k], L2.
Tensor normalize_and_flatten(const Tensor& v) {
  const int64_t size = v.shape()[1] * v.shape()[2];
  return ops::l2_normalize(ops::reshape(ops::l2_normalize(v, 1), Shape{-1, size}), 1);
}

// ---- Pooling blocks: x [B * S, d] -> [B, out] ----------------------------------------------

enum class VladKind { kNetVlad, kLightVlad, kNetVlagd };

Tensor vlad_block(VariableScope& scope, const Tensor& x, int64_t frames, int64_t clusters,
                  bool add_batch_norm, VladKind kind) {
  const int64_t d = x.shape()[1];
  Tensor a = soft_assignment(cluster_layer(scope, x, clusters, add_batch_norm).logits, frames);
  // [B, S, d]^T [B, S, k] -> [B, d, k]: Σ_t x_tj a_tk, the original's transposed a^T X.
  Tensor vlad = ops::matmul(ops::reshape(x, Shape{-1, frames, d}), a, /*transpose_a=*/true);
  if (kind == VladKind::kNetVlad) {
    Tensor centers = normal_variable(scope, "cluster_weights2", Shape{1, d, clusters}, x.dtype(),
                                     inverse_sqrt(d));
    vlad = ops::sub(vlad, ops::mul(ops::reduce_sum(a, {1}, /*keepdims=*/true), centers));
  } else if (kind == VladKind::kNetVlagd) {
    Tensor gates =
        normal_variable(scope, "gate_weights", Shape{1, clusters, d}, x.dtype(), inverse_sqrt(d));
    vlad = ops::mul(vlad, ops::transpose(ops::sigmoid(gates), {0, 2, 1}));
  }
  return normalize_and_flatten(vlad);
}

Tensor fv_block(VariableScope& scope, const Tensor& x, int64_t frames, int64_t clusters,
                bool add_batch_norm, bool couple_weights, double coupling_factor) {
  const int64_t d = x.shape()[1];
  Tensor covar = normal_variable(scope, "covar_weights", Shape{d, clusters}, x.dtype(),
                                 inverse_sqrt(d), /*mean=*/1.0);
  covar = ops::add(ops::square(covar), 1e-6);
  ClusterLayer layer = cluster_layer(scope, x, clusters, add_batch_norm);
  Tensor a = soft_assignment(layer.logits, frames);
  Tensor a_sum = ops::reduce_sum(a, {1}, /*keepdims=*/true);  // [B, 1, k]
  Tensor mu = couple_weights ? ops::mul(layer.weights, coupling_factor)
                             : normal_variable(scope, "cluster_weights2", Shape{1, d, clusters},
                                               x.dtype(), inverse_sqrt(d));
  Tensor x3 = ops::reshape(x, Shape{-1, frames, d});
  Tensor first = ops::matmul(x3, a, /*transpose_a=*/true);                // Σ_t a x, [B, d, k]
  Tensor second = ops::matmul(ops::square(x3), a, /*transpose_a=*/true);  // Σ_t a x^2

  // The original's add_n([a2, fv2, -2 b2]), then / sigma^2 - A.
  Tensor fv2 = ops::add(ops::add(ops::mul(a_sum, ops::square(mu)), second),
                        ops::mul(ops::mul(first, mu), -2.0));
  fv2 = ops::sub(ops::div(fv2, ops::square(covar)), a_sum);
  fv2 = ops::reshape(fv2, Shape{-1, d * clusters});
  fv2 = ops::l2_normalize(ops::l2_normalize(fv2, 1), 1);

  Tensor fv1 = ops::div(ops::sub(first, ops::mul(a_sum, mu)), covar);
  const Tensor parts[] = {normalize_and_flatten(fv1), fv2};
  return ops::concat(parts, 1);
}

Tensor soft_dbof_block(VariableScope& scope, const Tensor& x, int64_t frames, int64_t clusters,
                       bool add_batch_norm, bool max_pool) {
  Tensor a = soft_assignment(cluster_layer(scope, x, clusters, add_batch_norm).logits, frames);
  Tensor sum = ops::l2_normalize(ops::reduce_sum(a, {1}), 1);
  if (!max_pool) return sum;
  const Tensor parts[] = {sum, ops::l2_normalize(ops::reduce_max(a, {1}), 1)};
  return ops::concat(parts, 1);
}

Tensor gated_dbof_block(VariableScope& scope, const Tensor& x, int64_t frames, int64_t clusters,
                        bool add_batch_norm) {
  const int64_t d = x.shape()[1];
  Tensor a = soft_assignment(cluster_layer(scope, x, clusters, add_batch_norm).logits, frames);
  Tensor sum = ops::reduce_sum(a, {1});
  Tensor max = ops::l2_normalize(ops::reduce_max(a, {1}), 1);
  Tensor dim_red =
      normal_variable(scope, "dim_red", Shape{clusters, d}, x.dtype(), inverse_sqrt(d));
  Tensor weights2 =
      normal_variable(scope, "cluster_weights_2", Shape{d, clusters}, x.dtype(), inverse_sqrt(d));
  Tensor gates = ops::matmul(ops::matmul(max, dim_red), weights2);
  if (add_batch_norm) {
    gates = batch_norm(scope, gates, "cluster_bn_2");
  } else {
    gates = ops::add(gates, normal_variable(scope, "cluster_biases_2", Shape{clusters}, x.dtype(),
                                            inverse_sqrt(d)));
  }
  return ops::l2_normalize(ops::mul(ops::sigmoid(gates), sum), 1);
}

// WILLOW's DBoF: the cluster layer and no activation at all (the quirk in the header).
Tensor dbof_block(VariableScope& scope, const Tensor& x, int64_t frames, int64_t clusters,
                  bool add_batch_norm) {
  Tensor activation = ops::reshape(cluster_layer(scope, x, clusters, add_batch_norm).logits,
                                   Shape{-1, frames, clusters});
  const Tensor parts[] = {
      ops::l2_normalize(yt8m::frame_pooling(activation, yt8m::FramePoolingMethod::kAverage), 1),
      ops::l2_normalize(yt8m::frame_pooling(activation, yt8m::FramePoolingMethod::kMax), 1)};
  return ops::concat(parts, 1);
}

// ---- The shared skeleton -------------------------------------------------------------------

// The sampled, batch-normalized frames split into the two streams, each [B * S, d].
struct Streams {
  Tensor video;
  Tensor audio;
  int64_t frames = 0;        // S
  int64_t feature_size = 0;  // D
};

Streams sample_streams(std::string_view model, VariableScope& root, const Batch& batch,
                       const FrameOptions& o, bool add_batch_norm) {
  auto it = batch.features.find("features");
  if (it == batch.features.end() || it->second.shape().rank() != 3) {
    throw InvalidArgument(
        std::string(model) + ": 'features' is " +
        (it == batch.features.end() ? std::string("missing") : it->second.description()) +
        "; a frame-level model needs [batch, frames, feature_size] (use a video-level model for "
        "[batch, feature_size])");
  }
  const Tensor& input = it->second;
  if (!batch.num_frames.defined()) {
    throw InvalidArgument(std::string(model) + ": the batch has no num_frames; a frame-level " +
                          "model needs the frame count of each video, [batch]");
  }
  Streams s;
  s.frames = o.iterations;
  s.feature_size = input.shape()[2];
  int64_t video = o.video_feature_size;
  if (s.feature_size <= video) {
    if (s.feature_size < 2) {
      throw InvalidArgument(std::string(model) + ": frames are " + input.description() +
                            "; the video and audio streams need at least one feature each");
    }
    video = s.feature_size - std::max<int64_t>(1, s.feature_size / 9);
  }

  Tensor frames;
  if (o.sample_random_frames) {
    Generator generator(root.op_seed("SampleRandomFrames"));
    frames = yt8m::sample_random_frames(input, batch.num_frames, o.iterations, generator);
  } else {
    Generator generator(root.op_seed("SampleRandomSequence"));
    frames = yt8m::sample_random_sequence(input, batch.num_frames, o.iterations, generator);
  }
  frames = ops::reshape(frames, Shape{-1, s.feature_size});
  if (add_batch_norm) frames = batch_norm(root, frames, "input_bn");
  s.video = ops::slice(frames, {0, 0}, {-1, video});
  s.audio = ops::slice(frames, {0, video}, {-1, -1});
  return s;
}

struct HiddenLayer {
  int64_t size;
  bool relu;
  bool add_batch_norm;
  int64_t init_clusters;  // K of hidden1_weights' N(0, 1/sqrt(K))
};

Tensor hidden_layer(VariableScope& root, const Tensor& pooled, const HiddenLayer& h) {
  Tensor activation =
      ops::matmul(pooled, normal_variable(root, "hidden1_weights", Shape{pooled.shape()[1], h.size},
                                          pooled.dtype(), inverse_sqrt(h.init_clusters)));
  if (h.add_batch_norm && h.relu) {
    activation = batch_norm(root, activation, "hidden1_bn");
  } else {
    activation = ops::add(
        activation, normal_variable(root, "hidden1_biases", Shape{h.size}, pooled.dtype(), 0.01));
  }
  return h.relu ? ops::relu6(activation) : activation;
}

ModelOutput classify(VariableScope& root, const Tensor& h, const FrameOptions& o) {
  ModelOutput output;
  output.predictions =
      yt8m::video_level_classifier_model(root, o.classifier, h, root.context().num_classes());
  return output;
}

Tensor concat_streams(const Tensor& video, const Tensor& audio) {
  const Tensor parts[] = {video, audio};
  return ops::concat(parts, 1);
}

// ---------------------------------------------------------------------------------------------

class NetVLADModelLF final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      kFrameOptions,
      std::array<OptionSpec, 7>{{
          {"netvlad_cluster_size", OptionType::kInt, "64",
           "Clusters K of the video stream (the audio stream gets K / 2)"},
          {"netvlad_hidden_size", OptionType::kInt, "1024", "Units of the hidden layer"},
          {"netvlad_relu", OptionType::kBool, "true",
           "hidden1_bn then ReLU6 after the hidden layer; false: a bias and no "
           "activation"},
          {"netvlad_add_batch_norm", OptionType::kBool, "true",
           "Batch norm on the input, the cluster layers, the hidden layer and "
           "the gates (else biases)"},
          {"gating", OptionType::kBool, "false", "Context Gating after the hidden layer"},
          {"lightvlad", OptionType::kBool, "false", "NetRVLAD: no cluster centres subtracted"},
          {"vlagd", OptionType::kBool, "false",
           "NetVLAGD: sigmoid-gated aggregation instead of centres"},
      }});
  static constexpr std::string_view kName = "NetVLADModelLF";

  explicit NetVLADModelLF(const Options& options)
      : frame_(frame_options(kName, options)),
        clusters_(positive_int(kName, options, "netvlad_cluster_size")),
        audio_clusters_(audio_clusters(kName, "netvlad_cluster_size", clusters_, 2)),
        add_batch_norm_(options.get_bool("netvlad_add_batch_norm")),
        gating_(options.get_bool("gating")),
        kind_(options.get_bool("lightvlad") ? VladKind::kLightVlad
              : options.get_bool("vlagd")   ? VladKind::kNetVlagd
                                            : VladKind::kNetVlad),
        hidden_{positive_int(kName, options, "netvlad_hidden_size"),
                options.get_bool("netvlad_relu"), add_batch_norm_, clusters_} {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    VariableScope root(ctx, mode);
    Streams s = sample_streams(kName, root, batch, frame_, add_batch_norm_);
    VariableScope video = root.child("video_VLAD");
    VariableScope audio = root.child("audio_VLAD");
    // Video first: the blocks create their variables in this order (checkpoints, initializer
    // draws), which function arguments would leave unspecified.
    Tensor pooled_video = vlad_block(video, s.video, s.frames, clusters_, add_batch_norm_, kind_);
    Tensor pooled_audio =
        vlad_block(audio, s.audio, s.frames, audio_clusters_, add_batch_norm_, kind_);
    Tensor h = hidden_layer(root, concat_streams(pooled_video, pooled_audio), hidden_);
    if (gating_) {
      h = yt8m::context_gating(root, h, frame_.classifier.moe.remove_diag, add_batch_norm_,
                               s.feature_size);
    }
    return classify(root, h, frame_);
  }

 private:
  FrameOptions frame_;
  int64_t clusters_;
  int64_t audio_clusters_;
  bool add_batch_norm_;
  bool gating_;
  VladKind kind_;
  HiddenLayer hidden_;
};

// ---------------------------------------------------------------------------------------------

class NetFVModelLF final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      kFrameOptions,
      std::array<OptionSpec, 7>{{
          {"fv_cluster_size", OptionType::kInt, "64",
           "Clusters K of the video stream (the audio stream gets K / 2)"},
          {"fv_hidden_size", OptionType::kInt, "2048", "Units of the hidden layer"},
          {"fv_relu", OptionType::kBool, "true",
           "hidden1_bn then ReLU6 after the hidden layer; false: a bias and no "
           "activation"},
          {"fv_couple_weights", OptionType::kBool, "true",
           "Means tied to the assignment weights (fv_coupling_factor * "
           "cluster_weights); false: free cluster_weights2"},
          {"fv_coupling_factor", OptionType::kFloat, "0.01", "Factor of the tied means"},
          {"netvlad_add_batch_norm", OptionType::kBool, "true",
           "Batch norm on the input, the cluster layers, the hidden layer and "
           "the gates (else biases); the original's NetFV reads this flag"},
          {"gating", OptionType::kBool, "false", "Context Gating after the hidden layer"},
      }});
  static constexpr std::string_view kName = "NetFVModelLF";

  explicit NetFVModelLF(const Options& options)
      : frame_(frame_options(kName, options)),
        clusters_(positive_int(kName, options, "fv_cluster_size")),
        audio_clusters_(audio_clusters(kName, "fv_cluster_size", clusters_, 2)),
        add_batch_norm_(options.get_bool("netvlad_add_batch_norm")),
        gating_(options.get_bool("gating")),
        couple_weights_(options.get_bool("fv_couple_weights")),
        coupling_factor_(options.get_float("fv_coupling_factor")),
        hidden_{positive_int(kName, options, "fv_hidden_size"), options.get_bool("fv_relu"),
                add_batch_norm_, clusters_} {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    VariableScope root(ctx, mode);
    Streams s = sample_streams(kName, root, batch, frame_, add_batch_norm_);
    VariableScope video = root.child("video_FV");
    VariableScope audio = root.child("audio_FV");
    Tensor pooled_video = fv_block(video, s.video, s.frames, clusters_, add_batch_norm_,
                                   couple_weights_, coupling_factor_);
    Tensor pooled_audio = fv_block(audio, s.audio, s.frames, audio_clusters_, add_batch_norm_,
                                   couple_weights_, coupling_factor_);
    Tensor h = hidden_layer(root, concat_streams(pooled_video, pooled_audio), hidden_);
    if (gating_) {
      h = yt8m::context_gating(root, h, /*remove_diag=*/false, add_batch_norm_, s.feature_size);
    }
    return classify(root, h, frame_);
  }

 private:
  FrameOptions frame_;
  int64_t clusters_;
  int64_t audio_clusters_;
  bool add_batch_norm_;
  bool gating_;
  bool couple_weights_;
  double coupling_factor_;
  HiddenLayer hidden_;
};

// ---------------------------------------------------------------------------------------------

// SoftDbofModelLF and GatedDbofModelLF: they differ only in the video stream's block.
template <bool kGated>
class SoftDbofModels final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(kFrameOptions, kDbofOptions, kSoftDbofOptions);
  static constexpr std::string_view kName = kGated ? "GatedDbofModelLF" : "SoftDbofModelLF";

  explicit SoftDbofModels(const Options& options)
      : frame_(frame_options(kName, options)),
        clusters_(positive_int(kName, options, "dbof_cluster_size")),
        audio_clusters_(audio_clusters(kName, "dbof_cluster_size", clusters_, 8)),
        add_batch_norm_(options.get_bool("dbof_add_batch_norm")),
        max_pool_(options.get_bool("softdbof_maxpool")),
        fc_dimred_(options.get_bool("fc_dimred")),
        hidden_{positive_int(kName, options, "dbof_hidden_size"), options.get_bool("dbof_relu"),
                add_batch_norm_, clusters_} {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    VariableScope root(ctx, mode);
    Streams s = sample_streams(kName, root, batch, frame_, add_batch_norm_);
    VariableScope video = root.child("video_DBOF");
    VariableScope audio = root.child("audio_DBOF");
    Tensor pooled_video =
        kGated ? gated_dbof_block(video, s.video, s.frames, clusters_, add_batch_norm_)
               : soft_dbof_block(video, s.video, s.frames, clusters_, add_batch_norm_, max_pool_);
    Tensor pooled_audio =
        soft_dbof_block(audio, s.audio, s.frames, audio_clusters_, add_batch_norm_, max_pool_);
    Tensor pooled = concat_streams(pooled_video, pooled_audio);
    return classify(root, fc_dimred_ ? hidden_layer(root, pooled, hidden_) : pooled, frame_);
  }

 private:
  FrameOptions frame_;
  int64_t clusters_;
  int64_t audio_clusters_;
  bool add_batch_norm_;
  bool max_pool_;
  bool fc_dimred_;
  HiddenLayer hidden_;
};

using SoftDbofModelLF = SoftDbofModels<false>;
using GatedDbofModelLF = SoftDbofModels<true>;

// ---------------------------------------------------------------------------------------------

class DbofModelLF final : public BaseModel {
 public:
  static constexpr auto kOptions =
      join_options(kFrameOptions, kDbofOptions,
                   std::array<OptionSpec, 1>{{
                       {"dbof_activation", OptionType::kString, "relu",
                        "relu or glu; no activation is applied either way (the original's "
                        "quirk), glu doubles dbof_cluster_size"},
                   }});
  static constexpr std::string_view kName = "DbofModelLF";

  explicit DbofModelLF(const Options& options)
      : frame_(frame_options(kName, options)),
        clusters_(positive_int(kName, options, "dbof_cluster_size") *
                  (glu(options.get_string("dbof_activation")) ? 2 : 1)),
        audio_clusters_(audio_clusters(kName, "dbof_cluster_size", clusters_, 8)),
        add_batch_norm_(options.get_bool("dbof_add_batch_norm")),
        hidden_{positive_int(kName, options, "dbof_hidden_size"), options.get_bool("dbof_relu"),
                add_batch_norm_, clusters_} {}

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    VariableScope root(ctx, mode);
    Streams s = sample_streams(kName, root, batch, frame_, add_batch_norm_);
    VariableScope video = root.child("video_DBOF");
    VariableScope audio = root.child("audio_DBOF");
    Tensor pooled_video = dbof_block(video, s.video, s.frames, clusters_, add_batch_norm_);
    Tensor pooled_audio = dbof_block(audio, s.audio, s.frames, audio_clusters_, add_batch_norm_);
    Tensor pooled = concat_streams(pooled_video, pooled_audio);
    return classify(root, hidden_layer(root, pooled, hidden_), frame_);
  }

 private:
  static bool glu(const std::string& activation) {
    if (activation != "relu" && activation != "glu") {
      bad_option(kName, "dbof_activation", activation, "'relu' or 'glu'");
    }
    return activation == "glu";
  }

  FrameOptions frame_;
  int64_t clusters_;
  int64_t audio_clusters_;
  bool add_batch_norm_;
  HiddenLayer hidden_;
};

}  // namespace
}  // namespace trainyard::models

#define TRAINYARD_WILLOW_MODEL_CLASSES(X)                                                    \
  X(model, NetVLADModelLF, trainyard::models::NetVLADModelLF,                                \
    "WILLOW frame level: NetVLAD (or NetRVLAD, NetVLAGD) per stream, hidden layer, MoE")     \
  X(model, NetFVModelLF, trainyard::models::NetFVModelLF,                                    \
    "WILLOW frame level: NetFV (first and second order) per stream, hidden layer, MoE")      \
  X(model, SoftDbofModelLF, trainyard::models::SoftDbofModelLF,                              \
    "WILLOW frame level: soft bag of frames per stream, hidden layer, MoE")                  \
  X(model, GatedDbofModelLF, trainyard::models::GatedDbofModelLF,                            \
    "WILLOW frame level: gated soft bag of frames (video), soft (audio), hidden layer, MoE") \
  X(model, DbofModelLF, trainyard::models::DbofModelLF,                                      \
    "WILLOW frame level: bag of frames without activation, mean and max pooled, hidden, MoE")
TRAINYARD_PLUGIN(willow_models, 0, 1, 0, TRAINYARD_WILLOW_MODEL_CLASSES)
