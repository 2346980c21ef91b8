// InputOptions from a pipeline config's input reader message (train_input_reader,
// eval_input_reader in pipeline.proto), including its padding and preprocessing steps.
#ifndef TRAINYARD_CORE_INPUT_CONFIG_H_
#define TRAINYARD_CORE_INPUT_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/core/input_pipeline.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

// The options for `reader` with `batch_size` and `seed` (the run's). `field` names the message
// in errors ("train_input_reader"). Throws ConfigError for a padding without a feature or
// pad_to, a feature padded twice, a dtype name that is not one, a preprocessing step with
// no transform set, or a data_augmentation_options step whose type no loaded task builds
// (trainyard/config_dialect.h).
TRAINYARD_API InputOptions input_options_from_config(const config::InputReader& reader,
                                                     int64_t batch_size, uint64_t seed,
                                                     const std::string& field);

// model_main's --eval_training_data when the config has no evaluation input: the evaluation
// reads with the training reader's settings but does not augment, so of `reader`'s
// data_augmentation_options only the steps their task keeps in evaluation (the Object Detection
// API's resize_image: the model's image_resizer) stay, in their order. `field` names the reader
// in errors. Throws ConfigError for a step no loaded task builds.
TRAINYARD_API void keep_only_evaluation_steps(config::InputReader* reader,
                                              const std::string& field);

// The transforms of `steps`, in order.
TRAINYARD_API std::vector<std::shared_ptr<const ExampleTransform>> transforms_from_config(
    const google::protobuf::RepeatedPtrField<config::PreprocessingStep>& steps,
    const std::string& field);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_INPUT_CONFIG_H_
