// A minimal Trainyard plugin: two models and a loss, built outside the Trainyard tree against
// the installed SDK (see README.md, and the SDK's CONTRACT.md for what the host promises and
// expects: sdk/docs/ in the source tree, /usr/share/doc/libtrainyard-dev/ from the packages).
// Copy this directory, rename the classes and the plugin, and replace the maths.
//
//   TemplateLinearModel  p = sigmoid(x W + b): one logistic regression per class, the same
//                        maths as the standard LogisticModel. Its label loss is the
//                        --label_loss class (TemplateSquaredLoss, CrossEntropyLoss, ...).
//   TemplateMlpModel     p = sigmoid(relu(x W1 + b1) W2 + b2), with a `hidden_size` option. It
//                        has logits, so it returns its own label loss computed on them
//                        (numerically stable), and --label_loss is not used.
//   TemplateSquaredLoss  the batch mean of sum_c (p_c - y_c)^2, times `scale`.
//
// What the host provides: a model gets its input in batch.features["features"], f32
// [batch, feature_size], and the number of classes from the ModelContext. Variables are made
// through the context, by name; the first call creates and initializes them, later calls
// return the same ones, and checkpoints, restore maps and freeze regexes refer to these names.
// Both classes only compose ops (trainyard/ops.h), so the core records them and derives the
// gradients: a plugin never writes a backward pass.
#include <cstdint>
#include <optional>
#include <string>

#include "trainyard/error.h"
#include "trainyard/logit_losses.h"
#include "trainyard/loss.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"
#include "trainyard/variable.h"

// Keep a plugin's classes in a namespace of its own; only the entry point that
// TRAINYARD_PLUGIN defines is exported from the library.
namespace trainyard_template {

using trainyard::Tensor;
namespace ops = trainyard::ops;

class TemplateLinearModel final : public trainyard::BaseModel {
 public:
  // Declared options: the host lists them (`trainyard plugins describe TemplateLinearModel`),
  // checks configs and flags against them and fills in these defaults.
  static constexpr trainyard::OptionSpec kOptions[] = {
      {"l2_penalty", trainyard::OptionType::kFloat, "1e-8", "L2 penalty on the weights"},
  };

  // The host constructs the class with its options; throwing here is reported as a failure to
  // create the class, naming this plugin and library.
  explicit TemplateLinearModel(const trainyard::Options& options)
      : l2_penalty_(options.get_float("l2_penalty")) {
    if (!(l2_penalty_ >= 0.0)) {
      throw trainyard::InvalidArgument("TemplateLinearModel: l2_penalty must be >= 0");
    }
  }

  trainyard::ModelOutput forward(trainyard::ModelContext& ctx, const trainyard::Batch& batch,
                                 trainyard::Mode) override {
    auto it = batch.features.find("features");
    if (it == batch.features.end() || it->second.shape().rank() != 2) {
      throw trainyard::InvalidArgument(
          "TemplateLinearModel: expected features [batch, feature_size]");
    }
    const Tensor& x = it->second;
    const int64_t num_classes = ctx.num_classes();

    trainyard::VariableSpec weights;
    weights.name = "template_linear/weights";
    weights.shape = trainyard::Shape{x.shape()[1], num_classes};
    weights.dtype = x.dtype();
    weights.initializer = trainyard::Initializer::glorot_uniform();
    weights.l2_regularization = l2_penalty_;  // the trainer adds it to the regularization loss

    trainyard::VariableSpec biases;
    biases.name = "template_linear/biases";
    biases.shape = trainyard::Shape{num_classes};
    biases.dtype = x.dtype();
    biases.initializer = trainyard::Initializer::zeros();

    const Tensor& w = ctx.variable(weights).value();
    const Tensor& b = ctx.variable(biases).value();
    trainyard::ModelOutput output;
    // Predictions are probabilities [batch, num_classes]; add() broadcasts b over the batch.
    output.predictions = ops::sigmoid(ops::add(ops::matmul(x, w), b));
    return output;
  }

 private:
  double l2_penalty_;
};

// A hidden ReLU layer of `hidden_size` units, then one logistic regression per class on it.
class TemplateMlpModel final : public trainyard::BaseModel {
 public:
  static constexpr trainyard::OptionSpec kOptions[] = {
      {"hidden_size", trainyard::OptionType::kInt, "32", "Units of the hidden ReLU layer"},
      {"l2_penalty", trainyard::OptionType::kFloat, "1e-8", "L2 penalty on both weights"},
  };

  explicit TemplateMlpModel(const trainyard::Options& options)
      : hidden_size_(options.get_int("hidden_size")), l2_penalty_(options.get_float("l2_penalty")) {
    if (hidden_size_ < 1) {
      throw trainyard::InvalidArgument("TemplateMlpModel: hidden_size must be >= 1, not " +
                                       std::to_string(hidden_size_));
    }
    if (!(l2_penalty_ >= 0.0)) {
      throw trainyard::InvalidArgument("TemplateMlpModel: l2_penalty must be >= 0");
    }
  }

  trainyard::ModelOutput forward(trainyard::ModelContext& ctx, const trainyard::Batch& batch,
                                 trainyard::Mode mode) override {
    auto it = batch.features.find("features");
    if (it == batch.features.end() || it->second.shape().rank() != 2) {
      throw trainyard::InvalidArgument("TemplateMlpModel: expected features [batch, feature_size]");
    }
    const Tensor& x = it->second;
    // Variables are asked for on every call, never kept: the host may call this object with
    // another context (evaluation, export), whose variables are other objects.
    Tensor hidden = ops::relu(dense(ctx, "template_mlp/hidden", x, hidden_size_));
    Tensor logits = dense(ctx, "template_mlp/logits", hidden, ctx.num_classes());

    trainyard::ModelOutput output;
    output.predictions = ops::sigmoid(logits);
    // The model's own label loss, on the logits: finite and with an exact gradient where the
    // probabilities have saturated. Labels are f32 multi-hot [batch, num_classes]; predict
    // needs no loss (and may have no labels).
    if (mode != trainyard::Mode::kPredict && batch.labels.defined()) {
      output.loss = ops::sigmoid_cross_entropy_label_loss(batch.labels, logits);
    }
    return output;
  }

 private:
  // x W + b under `scope`: the variables "<scope>/weights" [in, units] and "<scope>/biases"
  // [units], the names --bias_grad_multiplier and the variable regexes of train_config match.
  Tensor dense(trainyard::ModelContext& ctx, const std::string& scope, const Tensor& x,
               int64_t units) const {
    trainyard::VariableSpec weights{.name = scope + "/weights",
                                    .shape = trainyard::Shape{x.shape()[1], units},
                                    .dtype = x.dtype(),
                                    .initializer = trainyard::Initializer::glorot_uniform(),
                                    .l2_regularization = l2_penalty_};
    trainyard::VariableSpec biases{.name = scope + "/biases",
                                   .shape = trainyard::Shape{units},
                                   .dtype = x.dtype(),
                                   .initializer = trainyard::Initializer::zeros()};
    return ops::matmul(x, ctx.variable(weights).value()) + ctx.variable(biases).value();
  }

  int64_t hidden_size_;
  double l2_penalty_;
};

class TemplateSquaredLoss final : public trainyard::Loss {
 public:
  static constexpr trainyard::OptionSpec kOptions[] = {
      {"scale", trainyard::OptionType::kFloat, "1.0", "Multiplies the loss"},
  };

  explicit TemplateSquaredLoss(const trainyard::Options& options)
      : scale_(options.get_float("scale")) {}

  // predictions and labels are [batch, num_classes]; label_weights are not used.
  Tensor calculate_loss(const Tensor& predictions, const Tensor& labels,
                        const std::optional<Tensor>&) override {
    if (!labels.defined() || labels.shape() != predictions.shape()) {
      throw trainyard::InvalidArgument(
          "TemplateSquaredLoss: predictions are " + predictions.description() + " but labels are " +
          (labels.defined() ? labels.description() : std::string("missing")) +
          "; they must have the same shape");
    }
    Tensor y =
        labels.dtype() == predictions.dtype() ? labels : ops::cast(labels, predictions.dtype());
    Tensor per_class = ops::square(ops::sub(predictions, y));
    Tensor per_example = ops::reduce_sum(per_class, {1});
    return ops::mul(ops::reduce_mean(per_example), scale_);
  }

 private:
  double scale_;
};

}  // namespace trainyard_template

// The plugin's class table, once per library, at global scope. Each X(...) is (kind, class
// name as users write it in configs and flags, C++ type, one-line summary).
#define TEMPLATE_CLASSES(X)                                              \
  X(model, TemplateLinearModel, trainyard_template::TemplateLinearModel, \
    "Template: one logistic regression per class, sigmoid(x W + b)")     \
  X(model, TemplateMlpModel, trainyard_template::TemplateMlpModel,       \
    "Template: a hidden ReLU layer of hidden_size units, then sigmoid")  \
  X(loss, TemplateSquaredLoss, trainyard_template::TemplateSquaredLoss,  \
    "Template: squared error summed over classes, averaged over the batch")
// Plugin name and version (major, minor, patch), shown by `trainyard plugins list`. The macro
// also stamps the SDK ABI version, compiler family and libstdc++ ABI from the headers, which
// the host checks before it runs any code of the library.
TRAINYARD_PLUGIN(template_plugin, 0, 1, 0, TEMPLATE_CLASSES)
