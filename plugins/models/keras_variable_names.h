// The Object Detection API's Keras models (SSD_KERAS_FEATURE_EXTRACTOR_CLASS_MAP and
// box_predictor_builder.build_keras) compute what its slim models do but name their variables
// as Keras layers do: one layer per convolution and per batch norm, side by side ("Conv1/kernel",
// "bn_Conv1/gamma") where slim nests the batch norm ("Conv/weights", "Conv/BatchNorm/gamma").
// Trainyard builds them with the slim-named network code through a RenamedModelContext, which
// gives every variable its Keras name, so that Keras-trained checkpoints restore by name.
#ifndef TRAINYARD_PLUGINS_MODELS_KERAS_VARIABLE_NAMES_H_
#define TRAINYARD_PLUGINS_MODELS_KERAS_VARIABLE_NAMES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/model.h"
#include "trainyard/pkg/detection/box_predictor.h"
#include "trainyard/variable.h"

namespace trainyard::models {

// A ModelContext that creates every variable in `inner` under rename(spec.name) and forwards the
// rest. `inner` must outlive it; `rename` throws (InvalidArgument naming the variable) for a name
// it has no Keras name for, so that no variable is created under a slim name by mistake.
class RenamedModelContext final : public ModelContext {
 public:
  RenamedModelContext(ModelContext& inner, std::function<std::string(const std::string&)> rename)
      : inner_(inner), rename_(std::move(rename)) {}

  Backend& backend() override { return inner_.backend(); }
  int64_t num_classes() const override { return inner_.num_classes(); }
  Variable& variable(const VariableSpec& spec) override;
  uint64_t seed() const override { return inner_.seed(); }

 private:
  ModelContext& inner_;
  std::function<std::string(const std::string&)> rename_;
};

// The Keras name of a variable of slim's MobilenetV2 under `slim_scope`
// ("FeatureExtractor/MobilenetV2") as models/keras_applications/mobilenet_v2.py (the
// tf.keras.applications MobileNetV2 with the API's layer overrides) and
// KerasMultiResolutionFeatureMaps name it under `keras_scope`:
//   Conv/weights, Conv/BatchNorm/*            Conv1/kernel, bn_Conv1/*
//   expanded_conv/<op>/..., its BatchNorm     expanded_conv_<op>/..., expanded_conv_<op>_BN/*
//   expanded_conv_<n>/<op>/...                block_<n>_<op>/..., block_<n>_<op>_BN/*
//   Conv_1/weights, Conv_1/BatchNorm/*        Conv_1/kernel, Conv_1_bn/*
//   layer_19_..., its BatchNorm               FeatureMaps/layer_19_..._conv/...,
//                                             FeatureMaps/layer_19_..._batchnorm/*
// with the leaves weights -> kernel, depthwise_weights -> depthwise_kernel, biases -> bias.
// InvalidArgument naming the variable for any other name.
std::string keras_mobilenet_v2_name(const std::string& slim_name, const std::string& slim_scope,
                                    const std::string& keras_scope);

// The Keras name of a variable of the slim ConvolutionalBoxPredictor (num_layers_before_predictor
// 0, no depthwise heads) as box_predictor_builder.build_convolutional_keras_box_predictor names
// it: BoxPredictor_<i>/BoxEncodingPredictor/weights ->
// BoxPredictor/ConvolutionalBoxHead_<i>/BoxEncodingPredictor/kernel, ClassPredictor under
// ConvolutionalClassHead_<i>, biases -> bias. InvalidArgument naming the variable otherwise.
std::string keras_box_predictor_name(const std::string& slim_name);

// `slim` (a convolutional_box_predictor) predicting under the Keras names of
// keras_box_predictor_name().
std::shared_ptr<detection::BoxPredictor> keras_named_box_predictor(
    std::shared_ptr<detection::BoxPredictor> slim);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_KERAS_VARIABLE_NAMES_H_
