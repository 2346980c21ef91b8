// tf.estimator's exporters for train_and_evaluate (eval_config.exporters): after each
// evaluation during training, exports of the evaluated checkpoint under
// train_dir/export/<name>/<timestamp>/ (seconds since the epoch, one more when taken, as
// TensorFlow's timestamped export directories). Internal to the core.
//
//   FINAL   once, for the last evaluation of the run.
//   LATEST  every evaluation; the newest exports_to_keep are kept.
//   BEST    an evaluation whose `metric` beats every earlier one, including those recorded in
//           the eval event files by an earlier process on this train_dir (the best so far
//           survives a restart); the newest exports_to_keep are kept.
#ifndef TRAINYARD_CORE_SRC_EVAL_EXPORTERS_H_
#define TRAINYARD_CORE_SRC_EVAL_EXPORTERS_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/core/evaluator.h"
#include "trainyard/core/registry.h"
#include "trainyard/proto/pipeline.pb.h"
#include "trainyard/task.h"

namespace trainyard {

class EvalExporters {
 public:
  // Checks the exporters of eval_config (names set, unique and plain; a BEST metric the task
  // reports), and reads the best value so far of each BEST exporter from eval_dir(pipeline).
  // Throws ConfigError naming the exporter.
  EvalExporters(const config::Pipeline& pipeline, const Task& task);

  // After an evaluation of `checkpoint`; `final` for the run's last one. With `final_only`
  // (the last evaluation already ran the others) only the FINAL exporters run.
  void after_evaluation(const PluginRegistry& registry, const config::Pipeline& pipeline,
                        const std::string& checkpoint, const EvalResult& result, bool final,
                        std::ostream& log, bool final_only);

  // The best value so far of the exporter `name` (for tests), nullopt when none.
  std::optional<double> best(const std::string& name) const;

 private:
  struct Entry {
    config::Exporter config;
    std::string tag;  // the event tag of a BEST exporter's metric
    std::optional<double> best;
  };
  std::vector<Entry> entries_;
};

// The metric `metric` of the scalar events under `dir`: the best value (lowest, or highest
// with higher_is_better) over every readable event file, nullopt when there is none.
std::optional<double> best_recorded_metric(const std::string& dir, const std::string& tag,
                                           bool higher_is_better);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_EVAL_EXPORTERS_H_
