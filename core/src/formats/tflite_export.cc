#include "trainyard/core/tflite_export.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "engine/model_context.h"
#include "formats/export_recording.h"
#include "formats/tflite_graph.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/atomic_file.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/task.h"

namespace trainyard {

using export_internal::RecordingContext;
using export_internal::shape_text;

namespace {
// The batch the forward pass is captured at (the file's batch is dynamic): a first dimension that
// is a multiple of it holds the batch, alone or with rows of each example (tflite_graph.h); 5,
// so that it is told apart from a dimension of 1 and unlikely to be a model's own constant.
constexpr int64_t kCaptureBatch = 5;
}  // namespace

std::string tflite_model_bytes(BaseModel& model, ModelContext& ctx,
                               const TfliteExportOptions& options) {
  if (options.inputs.empty()) {
    throw InvalidArgument("TFLite export of " + options.model_name + ": no inputs given");
  }
  NoGradScope no_grad;
  Batch batch;
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const OnnxInput& input : options.inputs) {
    std::vector<int64_t> dims{kCaptureBatch};
    for (int64_t d : input.example_shape) {
      if (d <= 0) {
        throw InvalidArgument("TFLite export of " + options.model_name + ": the example shape " +
                              shape_text(input.example_shape) + " of '" + input.name +
                              "' has a non-positive dimension");
      }
      dims.push_back(d);
    }
    Tensor t = ops::full(ctx.backend(), Shape(dims), input.capture_value, input.dtype);
    const bool taken = input.name == "num_frames" ? batch.num_frames.defined()
                                                  : batch.features.count(input.name) > 0;
    if (taken) {
      throw InvalidArgument("TFLite export of " + options.model_name + ": the input '" +
                            input.name + "' is given twice");
    }
    (input.name == "num_frames" ? batch.num_frames : batch.features[input.name]) = t;
    inputs.emplace_back(input.name, t);
  }
  RecordingContext recording(ctx);
  GraphCapture capture;
  if (options.prepare_batch) options.prepare_batch(batch);
  ModelOutput out = guard_plugin_call(
      model, "forward", [&] { return model.forward(recording, batch, Mode::kPredict); });
  if (!out.predictions.defined()) {
    throw InvalidArgument("TFLite export of " + options.model_name +
                          ": the model returned no predictions");
  }
  tflite_internal::GraphSpec spec;
  spec.model_name = options.model_name;
  spec.batch = kCaptureBatch;
  spec.inputs = inputs;
  spec.outputs = {{options.output_name, out.predictions}};
  spec.variables = recording.variables();
  return tflite_internal::build_tflite_model(capture, spec);
}

void export_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                   const std::string& checkpoint_prefix, const std::string& output_path,
                   std::ostream& log, const std::vector<int64_t>& image_shape) {
  if (output_path.empty()) throw ConfigError("TFLite export: no output file given");
  const std::string prefix = checkpoint_or_latest(pipeline, checkpoint_prefix);
  const std::string model_name = model_class(registry, pipeline);
  if (model_kind(registry, model_name) == ClassKind::kDetectionModel) {
    throw Unimplemented("TFLite export of " + model_name +
                        ": detection models (SSD with TFLite_Detection_PostProcess) are not "
                        "exported to TFLite yet; --format onnx or saved_model export them");
  }
  const export_internal::RestoredBaseModel restored(registry, pipeline, prefix, model_name,
                                                    image_shape);
  TfliteExportOptions options;
  options.model_name = model_name;
  options.inputs = restored.inputs;
  options.output_name = restored.output_name;
  options.prepare_batch = restored.prepare_batch();
  const std::string bytes = tflite_model_bytes(*restored.model, restored.variables->ctx, options);
  write_file_atomically(output_path, bytes);
  log << "exported " << model_name << " from " << prefix << " to " << output_path
      << " (TFLite float32, dynamic batch, output " << options.output_name << " [-1, "
      << pipeline.num_classes() << "], " << bytes.size() << " bytes)\n";
}

}  // namespace trainyard
