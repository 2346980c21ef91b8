// What od_config.cc shares with the conversion of each meta-architecture's model block
// (od_config_faster_rcnn.cc), and its steps.
#ifndef TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_INTERNAL_H_
#define TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_INTERNAL_H_

#include <google/protobuf/message.h>

#include <string>
#include <string_view>

#include "detection_config/pipeline.pb.h"
#include "od_pipeline.pb.h"

namespace trainyard::detection {

// The steps of parse_od_dialect (od_config.h). `config` is the task's copy of pipeline.proto
// (CMakeLists.txt).

// Parses the API's text format. Throws ConfigError "SOURCE:LINE:COLUMN: message" (1-based)
// for syntax errors and for fields od_pipeline.proto does not have.
od::TrainEvalPipelineConfig parse_od_pipeline_config(std::string_view text,
                                                     std::string_view source_name);

// The conversion above. Throws ConfigError "SOURCE: <api field path>: why" for what Trainyard
// cannot run as the API would (a missing model or optimizer, a refused field).
config::Pipeline pipeline_from_od_config(const od::TrainEvalPipelineConfig& od,
                                         std::string_view source_name);

// The model section the conversion makes of `ssd`: class SSDMetaArch and the flattened params.
config::PluginSpec ssd_model_spec(const od::Ssd& ssd);

// The model section the conversion makes of `faster_rcnn`: class FasterRCNNMetaArch and the
// flattened params (od_config_faster_rcnn.cc). Throws the ConfigErrors above.
config::PluginSpec faster_rcnn_model_spec(const od::FasterRcnn& faster_rcnn);

}  // namespace trainyard::detection

namespace trainyard::detection::od_internal {

// Appends to spec's params the set fields of `model` (the API's `ssd` or `faster_rcnn` message),
// flattened by od_config.h's rule; num_classes and the deprecated SSD batch_norm_trainable give
// none. `where` is the model's path in the API's config ("model.faster_rcnn"), for the
// ConfigErrors: an empty oneof wrapper, a repeated message or bool field.
void flatten_model_params(const google::protobuf::Message& model, const std::string& where,
                          config::PluginSpec* spec);

}  // namespace trainyard::detection::od_internal

#endif  // TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_INTERNAL_H_
