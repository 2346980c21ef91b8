// The YouTube-8M task (the starter code's train.py, eval.py and inference.py): features
// L2-normalized on the device, model_flags.json recorded in and checked against train_dir,
// Hit@1 / PERR / GAP on logged training batches, Hit@1 / PERR / mAP / GAP / loss per
// evaluation (eval_util.py), the inference CSV, and model_flags.json in exports.
#ifndef TRAINYARD_CORE_TASKS_YT8M_TASK_H_
#define TRAINYARD_CORE_TASKS_YT8M_TASK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/task.h"
#include "trainyard/export.h"
#include "trainyard/proto/pipeline.pb.h"

namespace trainyard {

TRAINYARD_API const Task& yt8m_task();

// model_flags.json of train.py: the flags a later run, eval or predict must agree with.
// train.py writes the first five; Trainyard adds num_classes and the model's options, so that
// eval and predict need no training flag repeated (the original's eval.py ignores the extra
// keys; a file without them still reads, with the flags' values).
struct ModelFlags {
  std::string model;
  std::string feature_names;
  std::string feature_sizes;
  bool frame_features = false;
  std::string label_loss;
  int64_t num_classes = 0;  // 0: not recorded
  // The options the config set for the model, as text ("moe_num_mixtures": "4").
  std::vector<std::pair<std::string, std::string>> model_params;
  // The options the config set for the label loss, likewise (eval computes its loss with them).
  std::vector<std::pair<std::string, std::string>> label_loss_params;
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
