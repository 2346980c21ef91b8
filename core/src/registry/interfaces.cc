// Out-of-line destructors: they make libtrainyard_core the one home of each interface's
// vtable and type_info, which dynamic_cast across plugin libraries relies on.
#include "trainyard/abi.h"
#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/plugin.h"
#include "trainyard/reader.h"
#include "trainyard/task.h"

namespace trainyard {

PluginObject::~PluginObject() = default;
ModelContext::~ModelContext() = default;
BaseModel::~BaseModel() = default;
DetectionModel::~DetectionModel() = default;
Summaries::~Summaries() = default;
TaskEvaluation::~TaskEvaluation() = default;
void TaskEvaluation::write_summaries(int64_t, Summaries&) const {}
PredictionWriter::~PredictionWriter() = default;
RunRecorder::~RunRecorder() = default;
Task::~Task() = default;
TaskFlagDialect Task::flag_dialect() const { return {}; }
std::optional<CheckpointInput> Task::checkpoint_input(const std::string&, const std::string&,
                                                      int64_t) const {
  return std::nullopt;
}
void Task::prepare_batch(Batch&) const {}
void Task::check_or_record_run(const TaskPipeline&, RunRecorder& recorder) const {
  recorder.check_or_record_pipeline_config();
}
std::optional<RecordedRun> Task::read_run_record(const std::string&) const { return std::nullopt; }
void Task::write_export_files(const TaskPipeline&, const std::string&) const {}
Reader::~Reader() = default;
Loss::~Loss() = default;
Optimizer::~Optimizer() = default;
std::vector<std::pair<std::string, double>> Optimizer::non_slot_values(int64_t) const { return {}; }

namespace {
struct KindName {
  ClassKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {ClassKind::kModel, "model"},           {ClassKind::kDetectionModel, "detection_model"},
    {ClassKind::kReader, "reader"},         {ClassKind::kLoss, "loss"},
    {ClassKind::kOptimizer, "optimizer"},   {ClassKind::kBackend, "backend"},
    {ClassKind::kCollective, "collective"}, {ClassKind::kTask, "task"},
};
}  // namespace

const char* class_kind_name(ClassKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown-kind";
}

bool parse_class_kind(std::string_view name, ClassKind* kind) {
  for (const KindName& k : kKindNames) {
    if (name == k.name) {
      *kind = k.kind;
      return true;
    }
  }
  return false;
}

const char* compiler_family_name(CompilerFamily family) {
  switch (family) {
    case CompilerFamily::kGcc:
      return "GCC";
    case CompilerFamily::kClang:
      return "Clang";
    case CompilerFamily::kUnknown:
      break;
  }
  return "an unknown compiler";
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kTrain:
      return "train";
    case Mode::kEval:
      return "eval";
    case Mode::kPredict:
      return "predict";
  }
  return "unknown";
}

}  // namespace trainyard
