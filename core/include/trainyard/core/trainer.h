// The training and evaluation loops of the YouTube-8M starter code (train.py, eval.py) with
// TF-Slim's train op, driven by a pipeline config (pipeline.proto) and plugins found by class.
#ifndef TRAINYARD_CORE_TRAINER_H_
#define TRAINYARD_CORE_TRAINER_H_

#include <cstdint>
#include <iosfwd>
#include <string>

#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/registry.h"

namespace trainyard {

struct TrainResult {
  int64_t global_step = 0;
  double last_loss = 0.0;
  double examples_per_sec = 0.0;
  std::string last_checkpoint;  // prefix, "" when none was written
};

// Trains as train.py does: restores the latest checkpoint in train_config.train_dir unless
// start_new_model, checks and writes model_flags.json, runs until max_steps or the end of
// num_epochs, logs every log_every_n_steps, writes summaries and checkpoints. Throws Error
// with a one-line message naming what is wrong (class, flag, file, variable); a checkpoint is
// never left half-written.
TrainResult train(const PluginRegistry& registry, const config::Pipeline& pipeline,
                  std::ostream& log);

struct EvalResult {
  int64_t global_step = 0;
  int64_t examples = 0;
  double avg_hit_at_one = 0.0;
  double avg_perr = 0.0;
  double mean_ap = 0.0;
  double gap = 0.0;
  double avg_loss = 0.0;
};

// Evaluates the checkpoint `checkpoint_prefix` (or the latest in train_dir when empty) on
// eval_input_reader's data, as eval.py: Hit@1, PERR, mAP and GAP (top_k from eval_config).
EvalResult evaluate(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const std::string& checkpoint_prefix, std::ostream& log);

// inference.py: writes `VideoId,LabelConfidencePairs` CSV lines ("id c1 s1 c2 s2 ...", the
// top_k classes by descending score) for every video of eval_input_reader's data, from the
// checkpoint `checkpoint_prefix` (or the latest in train_dir). Returns the number of videos.
// The CSV is written to a temporary file and renamed, so a failed run leaves no partial file.
int64_t predict(const PluginRegistry& registry, const config::Pipeline& pipeline,
                const std::string& checkpoint_prefix, const std::string& output_csv, int top_k,
                std::ostream& log);

// Writes an export directory that `predict` (and `eval`) load without the training run: the
// checkpoint's files, model_flags.json, the effective pipeline config (pipeline.config) and a
// `checkpoint` state file. Written under a temporary name and renamed. Returns the checkpoint
// prefix inside the export.
std::string export_model(const config::Pipeline& pipeline, const std::string& checkpoint_prefix,
                         const std::string& export_dir);

// model_flags.json of train.py: the flags a later run, eval or predict must agree with.
struct ModelFlags {
  std::string model;
  std::string feature_names;
  std::string feature_sizes;
  bool frame_features = false;
  std::string label_loss;
};
ModelFlags model_flags_of(const config::Pipeline& pipeline);
std::string model_flags_to_json(const ModelFlags& flags);
// Throws ConfigError naming the file when it cannot be read or parsed.
ModelFlags read_model_flags(const std::string& path);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRAINER_H_
