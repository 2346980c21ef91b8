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

namespace trainyard {

PluginObject::~PluginObject() = default;
ModelContext::~ModelContext() = default;
BaseModel::~BaseModel() = default;
DetectionModel::~DetectionModel() = default;
Reader::~Reader() = default;
Loss::~Loss() = default;
Optimizer::~Optimizer() = default;
std::vector<std::pair<std::string, double>> Optimizer::non_slot_values(int64_t) const { return {}; }
Collective::~Collective() = default;
CollectiveWork::~CollectiveWork() = default;

namespace {
class CompletedWork final : public CollectiveWork {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};
}  // namespace

std::shared_ptr<CollectiveWork> Collective::all_reduce_async(std::span<Tensor> tensors,
                                                             ReduceOp op) {
  for (Tensor& t : tensors) all_reduce(t, op);
  return std::make_shared<CompletedWork>();
}

void Collective::all_gather(const Tensor& tensor, Tensor& out) {
  if (!tensor.defined() || !out.defined()) {
    throw InvalidArgument("all_gather: undefined tensor");
  }
  std::vector<int64_t> dims = {world_size()};
  for (int64_t d : tensor.shape().dims()) dims.push_back(d);
  if (out.shape() != Shape(dims) || out.dtype() != tensor.dtype()) {
    throw InvalidArgument("all_gather: out must be " + Shape(dims).to_string() + " of " +
                          dtype_name(tensor.dtype()) + ", got " + out.description());
  }
  if (world_size() != 1) {
    throw Unimplemented("all_gather is not implemented by this collective for a world of " +
                        std::to_string(world_size()));
  }
  ops::assign(out, ops::reshape(tensor, out.shape()));
}

namespace {
struct KindName {
  ClassKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {ClassKind::kModel, "model"},           {ClassKind::kDetectionModel, "detection_model"},
    {ClassKind::kReader, "reader"},         {ClassKind::kLoss, "loss"},
    {ClassKind::kOptimizer, "optimizer"},   {ClassKind::kBackend, "backend"},
    {ClassKind::kCollective, "collective"},
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
