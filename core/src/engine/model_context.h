// The ModelContext the trainer, evaluator and predictor give models: variables from a
// VariableStore, restored from a checkpoint (resume, eval) or a fine-tuning checkpoint as the
// model creates them, and a per-step seed. Internal to the core.
#ifndef TRAINYARD_CORE_SRC_MODEL_CONTEXT_H_
#define TRAINYARD_CORE_SRC_MODEL_CONTEXT_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/model.h"
#include "trainyard/variable.h"

namespace trainyard {

// A ModelContext over a VariableStore. When given a checkpoint it restores each variable from
// it the moment the model first asks for it (resume, eval); when given a fine-tuning checkpoint
// instead, it restores the model variables found there with the same shape and records what it
// restored, skipped and found mismatched (the Object Detection API's restore_map).
//
// Checkpoints of the YouTube-8M starter code keep every model variable (and its optimizer
// slots) under train.py's "tower/" variable scope: a variable "fully_connected/weights" that a
// checkpoint lacks is read from "tower/fully_connected/weights" when that is there.
// tower_scope() then says so, and the trainer writes its checkpoints under the same names, so
// the original's graph can restore them in turn.
class StoreContext final : public ModelContext {
 public:
  StoreContext(Backend& backend, VariableStore& store, int64_t num_classes, uint64_t seed,
               const CheckpointReader* restore)
      : backend_(backend),
        store_(store),
        num_classes_(num_classes),
        seed_(seed),
        restore_(restore) {}
  Backend& backend() override { return backend_; }
  int64_t num_classes() const override { return num_classes_; }
  // Stable within a step, different across steps, and a function of (seed, step) only, so a
  // resumed run draws what an uninterrupted one would.
  uint64_t seed() const override { return mix(seed_ ^ mix(static_cast<uint64_t>(step_) + 1)); }
  void set_step(int64_t step) { step_ = step; }
  // Reads variables from `checkpoint` (the moving averages "<name>/ExponentialMovingAverage"
  // where it has them, with `averages`) instead of restore. `restore_scopes` (a detection
  // model's restore_map: model scope -> checkpoint scope) renames each variable under the
  // longest matching scope and leaves the variables under none as initialized; empty, every
  // variable is read by its own name.
  void set_fine_tune(const CheckpointReader* checkpoint, std::vector<std::string> exclude_scopes,
                     std::map<std::string, std::string> restore_scopes = {}) {
    fine_tune_ = checkpoint;
    exclude_scopes_ = std::move(exclude_scopes);
    restore_scopes_ = std::move(restore_scopes);
  }
  void set_use_averages(bool averages) { averages_ = averages; }
  Variable& variable(const VariableSpec& spec) override {
    bool existed = store_.find(spec.name) != nullptr;
    Variable& v = store_.get_or_create(spec);
    if (!existed && restore_ != nullptr) restore(v);
    if (!existed && fine_tune_ != nullptr) fine_tune(v);
    return v;
  }
  // A variable the trainer adds (optimizer slots, moving averages): restored when the
  // checkpoint has it, else fresh (a variable that was frozen when the checkpoint was written
  // has no slots). `initial` replaces the initializer's value when given.
  Variable& extra(const VariableSpec& spec, std::ostream& log, const Tensor* initial = nullptr);
  void restore(Variable& v);

  // The starter code's variable scope of every variable in a checkpoint of its train.py.
  static constexpr const char* kTowerScope = "tower/";
  // Whether a variable was restored from under kTowerScope.
  bool tower_scope() const { return tower_scope_; }

  // What fine-tuning did, one line per variable.
  struct FineTuneReport {
    std::vector<std::string> restored, excluded, missing, mismatched;
    std::vector<std::string> outside_restore_map;  // under none of the restore scopes
  };
  const FineTuneReport& fine_tune_report() const { return report_; }

 private:
  static uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  void fine_tune(Variable& v);
  // `name`, or kTowerScope + name when only that is in `checkpoint`.
  std::string key_in(const CheckpointReader& checkpoint, const std::string& name);

  Backend& backend_;
  VariableStore& store_;
  int64_t num_classes_;
  uint64_t seed_;
  int64_t step_ = 0;
  const CheckpointReader* restore_;
  const CheckpointReader* fine_tune_ = nullptr;
  std::vector<std::string> exclude_scopes_;
  std::map<std::string, std::string> restore_scopes_;
  bool averages_ = false;
  bool tower_scope_ = false;
  FineTuneReport report_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_MODEL_CONTEXT_H_
