// The frame-level models of the YouTube-8M starter code (frame_level_models.py), with the
// recurrent model of the WILLOW fork that shares their machinery:
//
//   FrameLevelLogisticModel  the mean of the valid frames, sum_t x_t / num_frames, then
//                            slim.fully_connected(num_classes, sigmoid, l2 1e-8): variables
//                            "fully_connected/weights" and "fully_connected/biases".
//   DbofModel                Deep Bag of Frames: sample `iterations` frames (random frames with
//                            replacement, or one random run with sample_random_frames=false),
//                            batch-norm them ("input_bn", center and scale), project each frame
//                            to the cluster space ("cluster_weights" [D, K] N(0, 1/sqrt(D)),
//                            then "cluster_bn" or "cluster_biases" N(0, 1/sqrt(D))), apply
//                            dbof_activation (sigmoid or relu6), pool over the frames
//                            (dbof_pooling_method max or average), a hidden layer
//                            ("hidden1_weights" [K, H] N(0, 1/sqrt(K)), then "hidden1_bn" or
//                            "hidden1_biases" N(0, 0.01)) with the activation, and the
//                            video_level_classifier_model.
//   LstmModel                a stack of lstm_layers BasicLSTMCells of lstm_cells units
//                            (forget_bias 1) run by dynamic_rnn over the valid frames; the top
//                            layer's final h goes to the classifier, as the starter code does
//                            since its PR #45. lstm_concat_state=true is WILLOW's LstmModel: the
//                            classifier gets every layer's [c, h] concatenated
//                            (state_is_tuple=False), the cells live under WILLOW's "RNN" scope,
//                            and lstm_random_sequence / lstm_backward apply.
//   GruModel                 WILLOW's: gru_layers GRUCells of gru_cells units (TensorFlow's
//                            GRUCell: reset gate before the recurrent product) under "RNN"; the
//                            classifier gets every layer's final h concatenated.
//   Both recurrent models take Trainyard's rnn_implementation: "sequence" (default; the steps
//   run as ops::lstm_sequence / gru_sequence, one fused loop per direction on the cpu backend)
//   or "per_step" (TensorFlow's graph of per-step ops); the same function and gradients.
//
// The classifier (`video_level_classifier_model`, MoeModel by default) is the starter code's
// video-level model with WILLOW's options (moe_l2, moe_low_rank_gating, moe_prob_gating,
// moe_prob_gating_input, gating_remove_diag; pkg/yt8m/video_level.h); its variables sit at the
// model's root ("gates/weights", "experts/weights", ...), as the original's.
//
// Input: batch.features["features"] f32 [B, T, D] (frames L2-normalized by the trainer, frames
// past num_frames zero) and batch.num_frames [B]. Frames past num_frames never change an
// output: the logistic model masks them, sampling draws only valid frames, and the recurrent
// models carry their state through them.
//
// Quirks of the originals kept so that numbers match:
//   - Frame sampling (DbofModel, and the recurrent models' random sequence) happens in
//     evaluation and inference too, so their predictions are stochastic (seeded per step by
//     ModelContext::seed()).
//   - The random-sequence option of WILLOW's recurrent models samples `iterations` random frames
//     (with replacement, unsorted) and keeps sequence_length = num_frames, so a video runs over
//     min(num_frames, iterations) of the sampled frames.
//   - DbofModel's hidden weights are drawn with stddev 1/sqrt(cluster size) and its cluster
//     biases with 1/sqrt(D), not glorot.
// One deliberate difference: the original's FrameLevelLogisticModel divides by num_frames and
// gives NaN for a video with no frames; here such a video averages to zeros.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/pkg/layers/layers.h"
#include "trainyard/pkg/layers/rnn.h"
#include "trainyard/pkg/layers/variable_scope.h"
#include "trainyard/pkg/yt8m/model_utils.h"
#include "trainyard/pkg/yt8m/video_level.h"
#include "trainyard/plugin.h"
#include "trainyard/random.h"
#include "trainyard/tensor.h"

namespace trainyard::models {
namespace {

// The [B, T, D] input and its num_frames [B], checked.
struct FrameInput {
  const Tensor& frames;
  const Tensor& num_frames;
};

FrameInput frame_input(std::string_view model, const Batch& batch) {
  auto it = batch.features.find("features");
  if (it == batch.features.end()) {
    throw InvalidArgument(std::string(model) +
                          ": the batch has no 'features'; a frame-level model needs features "
                          "[batch, frames, feature_size] (--frame_features)");
  }
  const Tensor& x = it->second;
  if (x.shape().rank() != 3) {
    throw InvalidArgument(std::string(model) + ": 'features' is " + x.description() +
                          "; a frame-level model needs [batch, frames, feature_size] (use "
                          "--frame_features with YT8MFrameFeatureReader, or a video-level model)");
  }
  if (!batch.num_frames.defined()) {
    throw InvalidArgument(std::string(model) +
                          ": the batch has no num_frames; a frame-level "
                          "model needs the number of valid frames per video");
  }
  return {x, batch.num_frames};
}

int64_t checked_num_classes(std::string_view model, const ModelContext& ctx) {
  const int64_t n = ctx.num_classes();
  if (n <= 0) {
    throw InvalidArgument(std::string(model) + ": num_classes is " + std::to_string(n) +
                          "; expected a positive number of classes");
  }
  return n;
}

int64_t positive(std::string_view model, const Options& options, const char* name) {
  const int64_t v = options.get_int(name);
  if (v <= 0) {
    throw InvalidArgument(std::string(model) + ": " + name + " is " + std::to_string(v) +
                          "; expected > 0");
  }
  return v;
}

// num_frames as f32 [B, 1].
Tensor frame_counts(const Tensor& num_frames) {
  return ops::cast(ops::reshape(num_frames, Shape{num_frames.shape()[0], 1}), DType::kF32);
}

// ---------------------------------------------------------------------------------------------

class FrameLevelLogisticModel final : public BaseModel {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"l2_penalty", OptionType::kFloat, "1e-8", "L2 penalty on the weights (slim l2_regularizer)"},
  };

  explicit FrameLevelLogisticModel(const Options& options)
      : l2_penalty_(options.get_float("l2_penalty")) {
    if (!(l2_penalty_ >= 0.0)) {
      throw InvalidArgument("FrameLevelLogisticModel: l2_penalty is " +
                            option_value_to_string(l2_penalty_) + "; expected >= 0");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    FrameInput in = frame_input("FrameLevelLogisticModel", batch);
    const int64_t num_classes = checked_num_classes("FrameLevelLogisticModel", ctx);
    const int64_t b = in.frames.shape()[0], t = in.frames.shape()[1];
    Backend& backend = ctx.backend();
    // valid[b, t] = t < num_frames[b]; the sum over valid frames divided by their count.
    std::vector<float> steps(static_cast<std::size_t>(t));
    for (int64_t i = 0; i < t; ++i) steps[static_cast<std::size_t>(i)] = static_cast<float>(i);
    Tensor counts = frame_counts(in.num_frames);
    Tensor valid = ops::cast(ops::less(Tensor::from_vector(backend, Shape{1, t}, steps), counts),
                             in.frames.dtype());
    Tensor sum = ops::reduce_sum(ops::mul(in.frames, ops::reshape(valid, Shape{b, t, 1})), {1});
    Tensor denominators = ops::maximum(counts, ops::ones(backend, Shape{1}));
    Tensor avg_pooled = ops::div(sum, ops::cast(denominators, sum.dtype()));
    layers::VariableScope root(ctx, mode);
    ModelOutput output;
    output.predictions = yt8m::logistic_model(root, avg_pooled, num_classes, l2_penalty_);
    return output;
  }

 private:
  double l2_penalty_;
};

// ---------------------------------------------------------------------------------------------

class DbofModel final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 7>{{
          {"iterations", OptionType::kInt, "30", "Number of frames per batch for DBoF"},
          {"dbof_add_batch_norm", OptionType::kBool, "true",
           "Adds batch normalization to the DBoF"},
          {"sample_random_frames", OptionType::kBool, "true",
           "Sample random frames (true) or one random sequence of frames (false)"},
          {"dbof_cluster_size", OptionType::kInt, "8192",
           "Number of units in the DBoF cluster layer"},
          {"dbof_hidden_size", OptionType::kInt, "1024",
           "Number of units in the DBoF hidden layer"},
          {"dbof_pooling_method", OptionType::kString, "max",
           "Pooling over frames in the cluster layer: max or average"},
          {"dbof_activation", OptionType::kString, "sigmoid",
           "Activation of the cluster and hidden layers: sigmoid or relu6"},
      }},
      yt8m::kClassifierOptions);

  explicit DbofModel(const Options& options)
      : iterations_(positive("DbofModel", options, "iterations")),
        add_batch_norm_(options.get_bool("dbof_add_batch_norm")),
        random_frames_(options.get_bool("sample_random_frames")),
        cluster_size_(positive("DbofModel", options, "dbof_cluster_size")),
        hidden_size_(positive("DbofModel", options, "dbof_hidden_size")),
        classifier_(yt8m::classifier_options("DbofModel", options)) {
    const std::string& pooling = options.get_string("dbof_pooling_method");
    if (pooling != "max" && pooling != "average") {
      throw InvalidArgument("DbofModel: dbof_pooling_method is '" + pooling +
                            "'; expected max or average");
    }
    pooling_ = yt8m::frame_pooling_method(pooling);
    activation_ = options.get_string("dbof_activation");
    if (activation_ != "sigmoid" && activation_ != "relu6") {
      throw InvalidArgument("DbofModel: dbof_activation is '" + activation_ +
                            "'; expected sigmoid or relu6");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    FrameInput in = frame_input("DbofModel", batch);
    const int64_t num_classes = checked_num_classes("DbofModel", ctx);
    layers::VariableScope root(ctx, mode);
    Generator generator(root.op_seed("sample_frames"));
    Tensor sampled =
        random_frames_
            ? yt8m::sample_random_frames(in.frames, in.num_frames, iterations_, generator)
            : yt8m::sample_random_sequence(in.frames, in.num_frames, iterations_, generator);
    const int64_t b = sampled.shape()[0], d = sampled.shape()[2];
    Tensor x = ops::reshape(sampled, Shape{b * iterations_, d});
    if (add_batch_norm_) x = batch_norm(root, x, "input_bn");

    Tensor cluster_weights = normal(root, "cluster_weights", Shape{d, cluster_size_},
                                    1.0 / std::sqrt(double(d)), x.dtype());
    Tensor activation = ops::matmul(x, cluster_weights);
    if (add_batch_norm_) {
      activation = batch_norm(root, activation, "cluster_bn");
    } else {
      activation = ops::add(activation, normal(root, "cluster_biases", Shape{cluster_size_},
                                               1.0 / std::sqrt(double(d)), x.dtype()));
    }
    activation = activate(activation);
    activation = yt8m::frame_pooling(ops::reshape(activation, Shape{b, iterations_, cluster_size_}),
                                     pooling_);

    Tensor hidden1_weights = normal(root, "hidden1_weights", Shape{cluster_size_, hidden_size_},
                                    1.0 / std::sqrt(double(cluster_size_)), x.dtype());
    activation = ops::matmul(activation, hidden1_weights);
    if (add_batch_norm_) {
      activation = batch_norm(root, activation, "hidden1_bn");
    } else {
      activation = ops::add(activation,
                            normal(root, "hidden1_biases", Shape{hidden_size_}, 0.01, x.dtype()));
    }
    activation = activate(activation);

    ModelOutput output;
    output.predictions =
        yt8m::video_level_classifier_model(root, classifier_, activation, num_classes);
    return output;
  }

 private:
  static Tensor batch_norm(layers::VariableScope& scope, const Tensor& x, const char* name) {
    layers::BatchNormOptions bn;
    bn.center = true;
    bn.scale = true;
    bn.scope = name;
    return layers::batch_norm(scope, x, bn);
  }

  static Tensor normal(layers::VariableScope& scope, const char* name, Shape shape, double stddev,
                       DType dtype) {
    VariableSpec spec;
    spec.name = name;
    spec.dtype = dtype;
    spec.shape = shape;
    spec.initializer = layers::random_normal_initializer(0.0, stddev);
    return scope.variable(spec).value();
  }

  Tensor activate(const Tensor& x) const {
    return activation_ == "sigmoid" ? ops::sigmoid(x) : ops::clip_by_value(x, 0.0, 6.0);
  }

  int64_t iterations_;
  bool add_batch_norm_;
  bool random_frames_;
  int64_t cluster_size_;
  int64_t hidden_size_;
  yt8m::FramePoolingMethod pooling_ = yt8m::FramePoolingMethod::kMax;
  std::string activation_;
  yt8m::Classifier classifier_;
};

// ---------------------------------------------------------------------------------------------

// What LstmModel and GruModel share: optional random frames and reversal, then dynamic_rnn.
struct RecurrentSettings {
  layers::RnnOptions rnn;
  bool random_sequence = false;
  bool backward = false;
  int64_t iterations = 30;
  bool willow_scope = false;  // the cells under WILLOW's "RNN" variable scope
};

// Trainyard's option of both recurrent models: the whole sequence as one op (fused on the cpu
// backend) or TensorFlow's graph of per-step ops (pkg/layers/rnn.h); the same function.
constexpr OptionSpec kRnnImplementationOption = {
    "rnn_implementation", OptionType::kString, "sequence",
    "Trainyard's: sequence (the steps as one fused op where the backend has it) or per_step "
    "(one product and the gates' ops per step, as TensorFlow's graph)"};

layers::RnnImplementation rnn_implementation(std::string_view model, const Options& options) {
  const std::string& value = options.get_string("rnn_implementation");
  if (value == "sequence") return layers::RnnImplementation::kSequence;
  if (value == "per_step") return layers::RnnImplementation::kPerStep;
  throw InvalidArgument(std::string(model) + ": rnn_implementation is '" + value +
                        "'; expected sequence or per_step");
}

layers::RnnState run_recurrent(layers::VariableScope& root, const FrameInput& in,
                               const RecurrentSettings& s) {
  Tensor frames = in.frames;
  if (s.random_sequence) {
    Generator generator(root.op_seed("sample_frames"));
    frames = yt8m::sample_random_frames(frames, in.num_frames, s.iterations, generator);
  }
  if (s.backward) frames = layers::reverse_sequence(frames, in.num_frames);
  if (s.willow_scope) {
    layers::VariableScope rnn_scope = root.child("RNN");
    return layers::dynamic_rnn(rnn_scope, frames, in.num_frames, s.rnn);
  }
  return layers::dynamic_rnn(root, frames, in.num_frames, s.rnn);
}

class LstmModel final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 7>{{
          {"lstm_cells", OptionType::kInt, "1024", "Number of LSTM cells"},
          {"lstm_layers", OptionType::kInt, "2", "Number of LSTM layers"},
          {"lstm_concat_state", OptionType::kBool, "false",
           "WILLOW's LstmModel: every layer's [c, h] into the classifier, under the RNN scope "
           "(false: the starter code's top-layer h)"},
          {"lstm_random_sequence", OptionType::kBool, "false",
           "Run over `iterations` randomly sampled frames (WILLOW; with lstm_concat_state)"},
          {"lstm_backward", OptionType::kBool, "false",
           "Run over the frames in reverse order (WILLOW; with lstm_concat_state)"},
          {"iterations", OptionType::kInt, "30", "Frames sampled with lstm_random_sequence"},
          kRnnImplementationOption,
      }},
      yt8m::kClassifierOptions);

  explicit LstmModel(const Options& options)
      : concat_state_(options.get_bool("lstm_concat_state")),
        classifier_(yt8m::classifier_options("LstmModel", options)) {
    settings_.rnn.cell = layers::RnnCell::kBasicLstm;
    settings_.rnn.num_units = positive("LstmModel", options, "lstm_cells");
    settings_.rnn.num_layers = positive("LstmModel", options, "lstm_layers");
    settings_.rnn.forget_bias = 1.0;
    settings_.rnn.implementation = rnn_implementation("LstmModel", options);
    settings_.iterations = positive("LstmModel", options, "iterations");
    settings_.random_sequence = options.get_bool("lstm_random_sequence");
    settings_.backward = options.get_bool("lstm_backward");
    settings_.willow_scope = concat_state_;
    if (!concat_state_ && (settings_.random_sequence || settings_.backward)) {
      throw InvalidArgument(
          "LstmModel: lstm_random_sequence and lstm_backward are WILLOW's options; they need "
          "lstm_concat_state=true (the starter code's LstmModel has neither)");
    }
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    FrameInput in = frame_input("LstmModel", batch);
    const int64_t num_classes = checked_num_classes("LstmModel", ctx);
    layers::VariableScope root(ctx, mode);
    layers::RnnState state = run_recurrent(root, in, settings_);
    Tensor pooled = concat_state_ ? state.concatenated() : state.h.back();
    ModelOutput output;
    output.predictions = yt8m::video_level_classifier_model(root, classifier_, pooled, num_classes);
    return output;
  }

 private:
  bool concat_state_;
  RecurrentSettings settings_;
  yt8m::Classifier classifier_;
};

class GruModel final : public BaseModel {
 public:
  static constexpr auto kOptions = join_options(
      std::array<OptionSpec, 6>{{
          {"gru_cells", OptionType::kInt, "1024", "Number of GRU cells"},
          {"gru_layers", OptionType::kInt, "2", "Number of GRU layers"},
          {"gru_random_sequence", OptionType::kBool, "false",
           "Run over `iterations` randomly sampled frames"},
          {"gru_backward", OptionType::kBool, "false", "Run over the frames in reverse order"},
          {"iterations", OptionType::kInt, "30", "Frames sampled with gru_random_sequence"},
          kRnnImplementationOption,
      }},
      yt8m::kClassifierOptions);

  explicit GruModel(const Options& options)
      : classifier_(yt8m::classifier_options("GruModel", options)) {
    settings_.rnn.cell = layers::RnnCell::kGru;
    settings_.rnn.num_units = positive("GruModel", options, "gru_cells");
    settings_.rnn.num_layers = positive("GruModel", options, "gru_layers");
    settings_.rnn.implementation = rnn_implementation("GruModel", options);
    settings_.iterations = positive("GruModel", options, "iterations");
    settings_.random_sequence = options.get_bool("gru_random_sequence");
    settings_.backward = options.get_bool("gru_backward");
    settings_.willow_scope = true;
  }

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override {
    FrameInput in = frame_input("GruModel", batch);
    const int64_t num_classes = checked_num_classes("GruModel", ctx);
    layers::VariableScope root(ctx, mode);
    layers::RnnState state = run_recurrent(root, in, settings_);
    ModelOutput output;
    output.predictions =
        yt8m::video_level_classifier_model(root, classifier_, state.concatenated(), num_classes);
    return output;
  }

 private:
  RecurrentSettings settings_;
  yt8m::Classifier classifier_;
};

}  // namespace
}  // namespace trainyard::models

#define TRAINYARD_YT8M_FRAME_MODEL_CLASSES(X)                                                   \
  X(model, FrameLevelLogisticModel, trainyard::models::FrameLevelLogisticModel,                 \
    "YouTube-8M frame level: logistic regression on the mean of the valid frames")              \
  X(model, DbofModel, trainyard::models::DbofModel,                                             \
    "YouTube-8M frame level: Deep Bag of Frames (sampled frames, cluster layer, pooling, MoE)") \
  X(model, LstmModel, trainyard::models::LstmModel,                                             \
    "YouTube-8M frame level: stacked LSTMs over the frames, final state into the classifier")   \
  X(model, GruModel, trainyard::models::GruModel,                                               \
    "YouTube-8M frame level (WILLOW): stacked GRUs over the frames, all final states into the " \
    "classifier")
TRAINYARD_PLUGIN(yt8m_frame_models, 0, 1, 0, TRAINYARD_YT8M_FRAME_MODEL_CLASSES)
