// The Keras names of the API's Keras SSD models' variables (keras_variable_names.h).
#include "keras_variable_names.h"

#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/pkg/layers/variable_scope.h"

namespace trainyard::models {
namespace {

std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t slash = name.find('/'); slash != std::string::npos;
       slash = name.find('/', start)) {
    parts.push_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

[[noreturn]] void no_keras_name(const std::string& slim_name, const std::string& what) {
  throw InvalidArgument("the Keras " + what + " has no variable for '" + slim_name + "'");
}

// A convolution's leaf (Keras Conv2D, DepthwiseConv2D) or a batch norm's (the same in both).
std::string keras_leaf(const std::string& slim_name, const std::string& leaf,
                       const std::string& what) {
  if (leaf == "weights") return "kernel";
  if (leaf == "depthwise_weights") return "depthwise_kernel";
  if (leaf == "biases") return "bias";
  no_keras_name(slim_name, what);
}

bool is_batch_norm_leaf(const std::string& leaf) {
  return leaf == "gamma" || leaf == "beta" || leaf == "moving_mean" || leaf == "moving_variance";
}

// "<n>" of "<prefix><n>" when the rest is a decimal number.
std::optional<std::string> numbered(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  const std::string n = name.substr(prefix.size());
  for (char ch : n) {
    if (std::isdigit(static_cast<unsigned char>(ch)) == 0) return std::nullopt;
  }
  return n;
}

// A convolution <keras_conv>/<leaf> or its batch norm <keras_bn>/<leaf> from the slim parts
// after the layer's scope: {<leaf>} or {"BatchNorm", <leaf>}.
std::string conv_or_batch_norm(const std::string& slim_name, const std::vector<std::string>& rest,
                               const std::string& keras_conv, const std::string& keras_bn,
                               const std::string& what) {
  if (rest.size() == 1) return keras_conv + "/" + keras_leaf(slim_name, rest[0], what);
  if (rest.size() == 2 && rest[0] == "BatchNorm" && is_batch_norm_leaf(rest[1])) {
    return keras_bn + "/" + rest[1];
  }
  no_keras_name(slim_name, what);
}

}  // namespace

Variable& RenamedModelContext::variable(const VariableSpec& spec) {
  VariableSpec renamed = spec;
  renamed.name = rename_(spec.name);
  return inner_.variable(renamed);
}

std::string keras_mobilenet_v2_name(const std::string& slim_name, const std::string& slim_scope,
                                    const std::string& keras_scope) {
  const std::string what = "MobileNetV2 (models/keras_applications/mobilenet_v2.py)";
  const std::string prefix = slim_scope + "/";
  if (slim_name.compare(0, prefix.size(), prefix) != 0) no_keras_name(slim_name, what);
  const std::vector<std::string> parts = split(slim_name.substr(prefix.size()));
  const std::string& layer = parts[0];
  const std::vector<std::string> rest(parts.begin() + 1, parts.end());
  const std::string under = keras_scope + "/";
  if (layer == "Conv") {
    return under + conv_or_batch_norm(slim_name, rest, "Conv1", "bn_Conv1", what);
  }
  if (layer == "Conv_1") {
    return under + conv_or_batch_norm(slim_name, rest, "Conv_1", "Conv_1_bn", what);
  }
  const std::optional<std::string> block = numbered(layer, "expanded_conv_");
  if ((layer == "expanded_conv" || block) && rest.size() >= 2 &&
      (rest[0] == "expand" || rest[0] == "depthwise" || rest[0] == "project")) {
    const std::string keras =
        (block ? "block_" + *block : std::string("expanded_conv")) + "_" + rest[0];
    return under + conv_or_batch_norm(slim_name, {rest.begin() + 1, rest.end()}, keras,
                                      keras + "_BN", what);
  }
  if (layer.compare(0, 6, "layer_") == 0) {  // KerasMultiResolutionFeatureMaps' new layers
    return under + conv_or_batch_norm(slim_name, rest, "FeatureMaps/" + layer + "_conv",
                                      "FeatureMaps/" + layer + "_batchnorm", what);
  }
  no_keras_name(slim_name, what);
}

std::string keras_box_predictor_name(const std::string& slim_name) {
  const std::string what =
      "ConvolutionalBoxPredictor (predictors/convolutional_keras_box_predictor.py)";
  const std::vector<std::string> parts = split(slim_name);
  const std::optional<std::string> index =
      parts.empty() ? std::nullopt : numbered(parts[0], "BoxPredictor_");
  if (!index || parts.size() != 3) no_keras_name(slim_name, what);
  std::string head;
  if (parts[1] == "BoxEncodingPredictor") {
    head = "ConvolutionalBoxHead_";
  } else if (parts[1] == "ClassPredictor") {
    head = "ConvolutionalClassHead_";
  } else {
    no_keras_name(slim_name, what);
  }
  return "BoxPredictor/" + head + *index + "/" + parts[1] + "/" +
         keras_leaf(slim_name, parts[2], what);
}

namespace {

class KerasNamedBoxPredictor final : public detection::BoxPredictor {
 public:
  explicit KerasNamedBoxPredictor(std::shared_ptr<detection::BoxPredictor> slim)
      : slim_(std::move(slim)) {}

  int64_t box_code_size() const override { return slim_->box_code_size(); }
  bool accepts_anchors_per_location(const std::vector<int64_t>& per_location) const override {
    return slim_->accepts_anchors_per_location(per_location);
  }
  detection::BoxPredictions predict(layers::VariableScope& root,
                                    const std::vector<Tensor>& feature_maps,
                                    const std::vector<int64_t>& num_predictions_per_location,
                                    int64_t num_classes) override {
    RenamedModelContext keras(root.context(), keras_box_predictor_name);
    layers::VariableScope keras_root(keras, root.mode());
    return slim_->predict(keras_root, feature_maps, num_predictions_per_location, num_classes);
  }

 private:
  std::shared_ptr<detection::BoxPredictor> slim_;
};

}  // namespace

std::shared_ptr<detection::BoxPredictor> keras_named_box_predictor(
    std::shared_ptr<detection::BoxPredictor> slim) {
  return std::make_unique<KerasNamedBoxPredictor>(std::move(slim));
}

}  // namespace trainyard::models
