// model_flags.json, the starter code's record of a training run (train.py writes it into
// train_dir; eval.py and inference.py read it): the flags a later run, eval or predict must agree
// with. train.py writes the first five keys; Trainyard adds num_classes and the options of the
// model and its label loss, so that eval and predict need no training flag repeated (the
// original's eval.py ignores the extra keys; a file without them still reads).
#ifndef TRAINYARD_PKG_YT8M_MODEL_FLAGS_H_
#define TRAINYARD_PKG_YT8M_MODEL_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/task.h"

namespace trainyard::yt8m {

// The reader classes of the two input layouts.
inline constexpr const char* kVideoReader = "YT8MAggregatedFeatureReader";
inline constexpr const char* kFrameReader = "YT8MFrameFeatureReader";

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

// The flags of a run of `pipeline` (its training input's layout).
ModelFlags model_flags_of(const TaskPipeline& pipeline);
std::string model_flags_to_json(const ModelFlags& flags);
// Throws ConfigError naming the file when it cannot be read or parsed (a FIFO, a directory or a
// file over 1 MiB included).
ModelFlags read_model_flags(const std::string& path);

}  // namespace trainyard::yt8m

#endif  // TRAINYARD_PKG_YT8M_MODEL_FLAGS_H_
