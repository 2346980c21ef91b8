// A Trainyard export (`trainyard export --export_dir D`, exporter.h) loaded for inference, as
// `trainyard predict` runs it: the model of D/pipeline.config with its variables restored from
// the export's checkpoint (the moving averages where the pipeline asks for them), run forward in
// Mode::kPredict on caller tensors. The C inference library (apps/infer) is built on it.
//
// D may also be a SavedModel Trainyard wrote (`trainyard export --format saved_model`,
// saved_model_export.h): a directory with saved_model.pb and no pipeline.config, or the Object
// Detection API's layout with D/saved_model/. The model is then rebuilt from the pipeline in its
// assets.extra/trainyard/pipeline.config and restored from its variables/ checkpoint (the values
// the SavedModel's graph reads, moving averages included), and runs as from Trainyard's export
// of the same checkpoint. A SavedModel without that file (not written by Trainyard) is refused.
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
// Detection models (DetectionModel plugins: SSD, Faster R-CNN) take what the Object Detection
// API's exported graph takes, one input "image_tensor" u8 [-1, -1, -1, 3], and give its outputs,
// all f32: "detection_boxes" [N, M, 4] (ymin, xmin, ymax, xmax normalized to the image given),
// "detection_scores" [N, M], "detection_classes" [N, M] (1-based: the postprocess dict's classes
// plus the label_id_offset 1, as the exporter adds it, so rows past num_detections hold 1) and
// "num_detections" [N], with M the model's max_total_detections. Each image goes through what
// the eval reader does after decoding: its data_augmentation_options (resize_image: the
// model's fixed_shape_resizer) and preprocessing steps, then the model's preprocess, predict
// and postprocess, as predict runs them.
//
// Besides caller tensors, every model runs on
//  - uint8 images (run_images): each image becomes the record the reader would yield for it
//    (its "image" feature; "true_image_shape" its height, width and channels where the reader
//    declares one; every other feature empty or zero, as groundtruth is not read in predict),
//    then the eval reader's transforms, the batching of its padding and pad_to_largest, the
//    task's batch preparation and the model. Images of differing sizes share a call when the
//    transforms bring them to one size (image_classification_preprocessing's crop, a
//    fixed_shape_resizer) or the reader pads "image" to the largest (pad_to_largest, as the
//    detection configs with keep_aspect_ratio_resizer do); otherwise run them one at a time.
//  - serialized records (run_examples: tf.Examples, tf.SequenceExamples for frame-level
//    YouTube-8M), parsed by the pipeline's reader, then as above: the same batch predict makes
//    of the same records.
// The transforms run with the random stream of the record's index in the call; the eval
// reader's steps draw nothing.
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
#include <string_view>
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
  // NotFound naming the file when pipeline.config or the checkpoint is missing (for a SavedModel:
  // naming the directory and assets.extra/trainyard/pipeline.config or variables/), DataLoss
  // naming saved_model.pb when it does not parse, InvalidArgument naming a SavedModel's file
  // that resolves outside its directory, ConfigError
  // naming the field for a config the plugins refuse, and what the model's warm-up forward
  // throws (NotFound naming a variable the checkpoint lacks; a detector's warm-up runs one
  // 32x32 zero image).
  ExportedModel(const PluginRegistry& registry, const std::string& export_dir);
  ~ExportedModel();
  ExportedModel(const ExportedModel&) = delete;
  ExportedModel& operator=(const ExportedModel&) = delete;

  const std::string& model_class() const;
  const std::string& checkpoint_prefix() const;
  const std::vector<ExportedTensorInfo>& inputs() const;
  const std::vector<ExportedTensorInfo>& outputs() const;

  // Whether the model is a DetectionModel (inputs() is "image_tensor", outputs() the four
  // detection outputs).
  bool is_detector() const;

  // The values of every output, in the order of outputs(), for a batch: `inputs` as for run()
  // (a detector's "image_tensor" u8 [N, H, W, 3], H and W at least 1).
  std::vector<std::vector<float>> run_outputs(const std::vector<HostTensorView>& inputs) const;

  // The outputs for `images` (each u8 [H, W, C], C the reader's channels), as described above.
  // Throws InvalidArgument naming the image (its index) for a wrong shape or byte count, and
  // naming the feature when the images cannot share a batch.
  std::vector<std::vector<float>> run_images(const std::vector<HostTensorView>& images) const;

  // The outputs for serialized records; errors name the record by its index ("record 2 of the
  // call") and the key, as the reader names them.
  std::vector<std::vector<float>> run_examples(const std::vector<std::string_view>& records) const;

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
