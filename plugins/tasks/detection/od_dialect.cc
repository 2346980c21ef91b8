// What the detection task adds to the pipeline config (trainyard/config_dialect.h): the Object
// Detection API's pipeline.config as a config dialect (od_config.h), and its PreprocessingStep as
// the input transform type of data_augmentation_options (od_preprocessing_builder.h). Both stay
// registered while this library is loaded, which is until the process ends (the descriptor of
// trainyard.od.PreprocessingStep must outlive every pipeline that holds one: detection_task.cc's
// plugin descriptor sets kPluginNeverUnload).
#include <memory>
#include <string>

#include "od_config.h"
#include "od_preprocessing_builder.h"
#include "od_preprocessor.pb.h"
#include "trainyard/config_dialect.h"
#include "trainyard/error.h"

namespace trainyard::detection {
namespace {

od::PreprocessingStep parse_step(const std::string& serialized) {
  od::PreprocessingStep step;
  if (!step.ParseFromString(serialized)) {
    throw ConfigError("a trainyard.od.PreprocessingStep whose bytes do not parse as one");
  }
  return step;
}

InputTransformType od_step_type() {
  InputTransformType type;
  type.build = [](const std::string& serialized) -> std::shared_ptr<const ExampleTransform> {
    return build_od_preprocessing_step(parse_step(serialized));
  };
  // The model's image_resizer (a resize_image step) shapes every input; the rest augments.
  type.kept_in_evaluation = [](const std::string& serialized) {
    return parse_step(serialized).has_resize_image();
  };
  return type;
}

const NamedRegistration kDialect = config_dialects::add_dialect(kOdDialectName, od_dialect());
const NamedRegistration kStepType = config_dialects::add_input_transform_type(
    "trainyard.od.PreprocessingStep", od_step_type());  // proto/od_preprocessor.proto

}  // namespace
}  // namespace trainyard::detection
