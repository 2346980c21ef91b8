// The YouTube-8M task (the starter code's train.py, eval.py and inference.py): features
// L2-normalized on the device, model_flags.json recorded in and checked against train_dir,
// Hit@1 / PERR / GAP on logged training batches, Hit@1 / PERR / mAP / GAP / loss per
// evaluation (eval_util.py), the inference CSV, and model_flags.json in exports.
#ifndef TRAINYARD_CORE_TASKS_YT8M_TASK_H_
#define TRAINYARD_CORE_TASKS_YT8M_TASK_H_

#include <string>

#include "trainyard/core/task.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

TRAINYARD_API const Task& yt8m_task();

// model_flags.json of train.py: the flags a later run, eval or predict must agree with.
struct ModelFlags {
  std::string model;
  std::string feature_names;
  std::string feature_sizes;
  bool frame_features = false;
  std::string label_loss;
};
TRAINYARD_API ModelFlags model_flags_of(const config::Pipeline& pipeline);
TRAINYARD_API std::string model_flags_to_json(const ModelFlags& flags);
// Throws ConfigError naming the file when it cannot be read or parsed.
TRAINYARD_API ModelFlags read_model_flags(const std::string& path);

// The reader classes of the two input layouts.
inline constexpr const char* kYt8mVideoReader = "YT8MAggregatedFeatureReader";
inline constexpr const char* kYt8mFrameReader = "YT8MFrameFeatureReader";

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TASKS_YT8M_TASK_H_
