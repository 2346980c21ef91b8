// What the Object Detection API's model options share between its meta-architectures (SSD,
// Faster R-CNN) and the parts they are built from (feature extractors, box predictors): the
// hyperparams.proto fields of one Hyperparams message as options, and the checks that name the
// option of a bad value.
#ifndef TRAINYARD_PKG_DETECTION_MODEL_OPTIONS_H_
#define TRAINYARD_PKG_DETECTION_MODEL_OPTIONS_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/detection_model.h"
#include "trainyard/options.h"
#include "trainyard/pkg/layers/layers.h"

namespace trainyard::detection {

// The fields of one Hyperparams message at PREFIX (hyperparams.proto, flattened as
// ssd_options.h describes).
#define TRAINYARD_OD_HYPERPARAMS(PREFIX)                                                           \
  {PREFIX, OptionType::kBool, "false", "the Hyperparams message is set"},                          \
      {PREFIX ".op", OptionType::kString, "CONV", "CONV or FC"},                                   \
      {PREFIX ".activation", OptionType::kString, "RELU", "NONE, RELU or RELU_6"},                 \
      {PREFIX ".regularizer", OptionType::kString, "l2_regularizer",                               \
       "l1_regularizer or l2_regularizer"},                                                        \
      {PREFIX ".regularizer.l2_regularizer.weight", OptionType::kFloat, "1.0", "L2 weight decay"}, \
      {PREFIX ".regularizer.l1_regularizer.weight", OptionType::kFloat, "1.0",                     \
       "L1 (not supported)"},                                                                      \
      {PREFIX ".initializer", OptionType::kString, "truncated_normal_initializer",                 \
       "truncated_normal_initializer, random_normal_initializer or "                               \
       "variance_scaling_initializer"},                                                            \
      {PREFIX ".initializer.truncated_normal_initializer.mean", OptionType::kFloat, "0.0", ""},    \
      {PREFIX ".initializer.truncated_normal_initializer.stddev", OptionType::kFloat, "1.0", ""},  \
      {PREFIX ".initializer.random_normal_initializer.mean", OptionType::kFloat, "0.0", ""},       \
      {PREFIX ".initializer.random_normal_initializer.stddev", OptionType::kFloat, "1.0", ""},     \
      {PREFIX ".initializer.variance_scaling_initializer.factor", OptionType::kFloat, "2.0", ""},  \
      {PREFIX ".initializer.variance_scaling_initializer.uniform", OptionType::kBool, "false",     \
       ""},                                                                                        \
      {PREFIX ".initializer.variance_scaling_initializer.mode", OptionType::kString, "FAN_IN",     \
       "FAN_IN, FAN_OUT or FAN_AVG"},                                                              \
      {PREFIX ".batch_norm", OptionType::kBool, "false", "batch norm after each layer"},           \
      {PREFIX ".batch_norm.decay", OptionType::kFloat, "0.999", ""},                               \
      {PREFIX ".batch_norm.center", OptionType::kBool, "true", ""},                                \
      {PREFIX ".batch_norm.scale", OptionType::kBool, "false", ""},                                \
      {PREFIX ".batch_norm.epsilon", OptionType::kFloat, "0.001", ""}, {                           \
    PREFIX ".batch_norm.train", OptionType::kBool, "true",                                         \
        "batch norm's beta and gamma are trained"                                                  \
  }

// hyperparams.proto as a model uses it.
struct ConvHyperparams {
  layers::ActivationFn activation = layers::ActivationFn::relu();
  double l2_weight = 0.0;  // regularizer { l2_regularizer { weight } }
  Initializer initializer = Initializer::truncated_normal({0.0, 1.0});
  std::optional<layers::BatchNormOptions> batch_norm;  // absent: no normalizer, biases instead
};

// A convolution's options from its Hyperparams: activation, initializer, L2, batch norm (in
// inference mode when training_allowed is false, as freeze_batchnorm).
layers::Conv2DOptions conv_options(const ConvHyperparams& h, bool training_allowed = true);

// The tensor's values as host floats.
std::vector<float> host_f32(const Tensor& t);

// dict[key], or InvalidArgument "<model>: <call> needs '<key>' in the prediction dict".
const Tensor& prediction_entry(const TensorDict& dict, const char* key, const char* call,
                               const char* model);

// Upper bounds of the sizes that allocate (the Object Detection API's zoo uses depth multipliers
// of 0.25 to 1.4, at most 300 detections and images of at most 1,024 pixels a side).
inline constexpr double kMaxDepthMultiplier = 16.0;
inline constexpr int64_t kMaxDetections = 100000;
inline constexpr int64_t kMaxImageDimension = 16384;

// Reads options for the model named `model` (the class name errors start with).
class DetectionOptionReader {
 public:
  DetectionOptionReader(const Options& options, std::string model)
      : o_(options), model_(std::move(model)) {}

  const Options& options() const { return o_; }
  // The model named in errors ("SSDMetaArch").
  const std::string& model() const { return model_; }
  [[noreturn]] void refuse(const std::string& option, const std::string& value,
                           const std::string& expected) const;
  // The option's string value when it is one of `supported`, else InvalidArgument listing them.
  std::string choice(const std::string& key, std::initializer_list<const char*> supported) const;
  double positive(const std::string& key) const;       // > 0
  double unit_interval(const std::string& key) const;  // [0, 1]
  int64_t at_least(const std::string& key, int64_t minimum) const;
  // Sizes that allocate: bounded above too, so a config asking for more memory than a machine
  // has is refused naming the option when the model is built, not later by bad_alloc.
  double positive_at_most(const std::string& key, double maximum) const;  // (0, maximum]
  int64_t in_range(const std::string& key, int64_t minimum, int64_t maximum) const;
  // A list whose every value is finite and > 0 (aspect ratios, scales).
  std::vector<double> positive_list(const std::string& key) const;
  // builders/hyperparams_builder.py for the message at `prefix`; nullopt when it is not set.
  // `op` is the op the message must name (CONV or FC).
  std::optional<ConvHyperparams> hyperparams(const std::string& prefix,
                                             const std::string& op = "CONV") const;

 private:
  const Options& o_;
  std::string model_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_MODEL_OPTIONS_H_
