// A Trainyard export (`trainyard export --export_dir D`, exporter.h) loaded for inference, as
// `trainyard predict` runs it: the model of D/pipeline.config with its variables restored from
// the export's checkpoint (the moving averages where the pipeline asks for them), run forward in
// Mode::kPredict on caller tensors. The C inference library (apps/infer) is built on it.
//
// Inputs are the features the pipeline's reader gives after its preprocessing steps (eval's
// reader and steps, as predict reads them), less "labels": their names, dtypes and per-example
// shapes, with the batch dimension first as -1. The caller feeds them as the model sees them
// (an image classifier's "image" already cropped and normalized as the pipeline's
// image_classification_preprocessing does); the task's own batch preparation (YouTube-8M's L2
// normalization of "features") runs inside run(), as it does in predict. "num_frames" may be
// left out: every example then has all the frames of its rank-3 "features".
//
// There is one output, "predictions" (ModelOutput::predictions, f32 [N, num_classes]).
//
// Thread safety: after the constructor returns, run() may be called from several threads at
// once; each call runs its own forward. Variables are created and restored by a warm-up forward
// in the constructor; one a model creates only later is created under a lock.
#ifndef TRAINYARD_CORE_EXPORTED_MODEL_H_
#define TRAINYARD_CORE_EXPORTED_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/core/registry.h"
#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

struct ExportedTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // the batch dimension first, as -1
};

// One caller tensor: `data` holds `bytes` bytes, row-major, of `dtype` in `shape`.
struct HostTensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

class TRAINYARD_API ExportedModel {
 public:
  // Loads `export_dir` with the plugins of `registry`, which must outlive this object. Throws
  // NotFound naming the file when pipeline.config or the checkpoint is missing, ConfigError
  // naming the field for a config the plugins refuse, Unimplemented naming the class for a
  // detection model (not yet supported), and what the model's warm-up forward throws (NotFound
  // naming a variable the checkpoint lacks).
  ExportedModel(const PluginRegistry& registry, const std::string& export_dir);
  ~ExportedModel();
  ExportedModel(const ExportedModel&) = delete;
  ExportedModel& operator=(const ExportedModel&) = delete;

  const std::string& model_class() const;
  const std::string& checkpoint_prefix() const;
  const std::vector<ExportedTensorInfo>& inputs() const;
  const std::vector<ExportedTensorInfo>& outputs() const;

  // The predictions for a batch: `inputs` holds each input once ("num_frames" may be absent),
  // all with the same batch size N >= 1 first and the other dimensions of inputs(). Returns the
  // f32 values of outputs()[0], N rows. Throws InvalidArgument naming the input for an unknown,
  // repeated or missing name, a wrong dtype, shape or byte count.
  std::vector<float> run(const std::vector<HostTensorView>& inputs) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_EXPORTED_MODEL_H_
