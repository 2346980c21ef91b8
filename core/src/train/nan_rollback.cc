#include "train/nan_rollback.h"

#include <optional>

#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

// "input batch 13 (50 examples, ids 'vid0' to 'vid49')".
std::string describe_batch(const LoopState& s, const Batch& batch) {
  std::string out = "input batch " + std::to_string(s.input_batches);
  if (batch.ids.empty()) return out;
  out +=
      " (" + std::to_string(batch.ids.size()) + (batch.ids.size() == 1 ? " example" : " examples");
  out += batch.ids.size() == 1 ? ", id '" + batch.ids.front() + "')"
                               : ", ids '" + batch.ids.front() + "' to '" + batch.ids.back() + "')";
  return out;
}

}  // namespace

NanRollback::NanRollback(const config::TrainConfig& tc)
    : max_(tc.max_nan_rollbacks()), train_dir_(tc.train_dir()) {}

bool NanRollback::recover(const NonFiniteError& error, LoopState& s, const Batch& batch) {
  if (used_ >= max_) return false;
  ++used_;
  std::string what = "skipping " + describe_batch(s, batch);
  if (std::optional<std::string> latest = latest_checkpoint(train_dir_)) {
    CheckpointReader checkpoint(*latest);
    s.step.restore(checkpoint);
    Tensor step = checkpoint.read("global_step", s.step.backend());
    s.global_step = ops::cast(step, DType::kI64).to_vector<int64_t>().at(0);
    what += " and rolling back to " + *latest + " at step " + std::to_string(s.global_step);
  } else {
    what += "; no checkpoint yet, so the variables keep the values the step found";
  }
  s.log << "warning: " << error.what() << "; " << what << " (rollback " << used_ << " of " << max_
        << ", train_config.max_nan_rollbacks)\n";
  return true;
}

NonFiniteError NanRollback::final_error(const NonFiniteError& error, const LoopState& s,
                                        const Batch& batch) const {
  std::string message = std::string(error.what()) + ", on " + describe_batch(s, batch);
  const std::optional<std::string> latest = latest_checkpoint(train_dir_);
  message += "; the last good checkpoint is kept" + (latest ? " (" + *latest + ")" : std::string());
  if (max_ > 0) {
    message += "; the " + std::to_string(max_) +
               " rollbacks train_config.max_nan_rollbacks allows are used up";
  }
  return NonFiniteError(message, error.step(), error.source(), error.variable());
}

}  // namespace trainyard
