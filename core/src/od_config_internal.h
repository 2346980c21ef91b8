// What od_config.cc shares with the conversion of each meta-architecture's model block
// (od_config_faster_rcnn.cc). Internal to the core.
#ifndef TRAINYARD_CORE_SRC_OD_CONFIG_INTERNAL_H_
#define TRAINYARD_CORE_SRC_OD_CONFIG_INTERNAL_H_

#include <google/protobuf/message.h>

#include <string>

#include "trainyard/proto/pipeline.pb.h"

namespace trainyard::od_internal {

// Appends to spec's params the set fields of `model` (the API's `ssd` or `faster_rcnn` message),
// flattened by od_config.h's rule; num_classes and the deprecated SSD batch_norm_trainable give
// none. `where` is the model's path in the API's config ("model.faster_rcnn"), for the
// ConfigErrors: an empty oneof wrapper, a repeated message or bool field.
void flatten_model_params(const google::protobuf::Message& model, const std::string& where,
                          config::PluginSpec* spec);

}  // namespace trainyard::od_internal

#endif  // TRAINYARD_CORE_SRC_OD_CONFIG_INTERNAL_H_
