// What the ONNX and SavedModel exporters share while they record a forward pass: the context
// that remembers the variables a model reads, and the text of a shape in their messages.
// Internal to the core.
#ifndef TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_
#define TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/model.h"
#include "trainyard/tensor.h"

namespace trainyard::export_internal {

// Passes every call on to `inner` and remembers the variables the model read, by name, in the
// order it first read them.
class RecordingContext final : public ModelContext {
 public:
  explicit RecordingContext(ModelContext& inner) : inner_(inner) {}
  Backend& backend() override { return inner_.backend(); }
  int64_t num_classes() const override { return inner_.num_classes(); }
  uint64_t seed() const override { return inner_.seed(); }
  Variable& variable(const VariableSpec& spec) override {
    Variable& v = inner_.variable(spec);
    if (seen_.insert(v.name()).second) variables_.emplace_back(v.name(), v.value());
    return v;
  }
  const std::vector<std::pair<std::string, Tensor>>& variables() const { return variables_; }

 private:
  ModelContext& inner_;
  std::set<std::string> seen_;
  std::vector<std::pair<std::string, Tensor>> variables_;
};

// "[2, 3, 4]".
inline std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

}  // namespace trainyard::export_internal

#endif  // TRAINYARD_CORE_SRC_FORMATS_EXPORT_RECORDING_H_
