// A DetectionModel (SSD, Faster R-CNN) driven by the trainer, evaluator and exporter that drive a
// BaseModel: the Object Detection API's model_fn, one batch at a time. Internal to the core.
//
// The batch, as the detection task's input gives it (DetectionReader, the preprocessing steps,
// resize_image to the model's size, then padding to max_number_of_boxes):
//   "image"                    f32 [B, H, W, C]
//   "groundtruth_boxes"        f32 [B, P, 4] normalized [ymin, xmin, ymax, xmax]
//   "groundtruth_classes"      i32 [B, P], 0-based (the record's 1-based label - 1)
//   "num_groundtruth_boxes"    i32 [B]: the rows of image b that are real
//   "groundtruth_weights"      f32 [B, P], optional (all ones without it)
//   "true_image_shape"         i32 [B, 3], optional (the image's own shape otherwise); when
//                              the model's preprocess changes the image size, its own
//                              true_image_shapes are what loss() and postprocess() get
// Groundtruth is required in kTrain and kEval (with its losses) and not read in kPredict.
//
// forward():
//   kTrain    provide_groundtruth, preprocess, predict, loss. ModelOutput::loss is the sum of
//             the loss dict's entries (each already weighted, as the API's losses are);
//             predictions are the predict dict's "class_predictions_with_background"
//             [B, anchors, classes + 1] (nothing reads them for detection; clones concatenate
//             them).
//   kEval     the same losses, then postprocess: predictions are the detections packed as
//             below.
//   kPredict  preprocess, predict, postprocess: the packed detections.
// Packed detections: trainyard/core/packed_detections.h.
// Instance masks: loss() gets each image's groundtruth_instance_masks (below) when the batch has
// them and predict() gave "mask_predictions" (the API's key: a box predictor that predicts
// instance masks, in training); otherwise they are not sliced. A postprocess() that gives
// "detection_masks" [B, M, mask_height, mask_width] (Mask R-CNN's box masks, each inside its
// detection's box, zero past num_detections) has them kept beside the packed detections:
// last_outputs(), which the evaluator and predict add to the batch the task reads.
#ifndef TRAINYARD_CORE_SRC_DETECTION_MODEL_ADAPTER_H_
#define TRAINYARD_CORE_SRC_DETECTION_MODEL_ADAPTER_H_

#include <map>
#include <memory>
#include <string>

#include "trainyard/detection_model.h"
#include "trainyard/model.h"

namespace trainyard {

// The loss dict of the last forward() in kTrain or kEval, by the model's names
// ("Loss/localization_loss", "Loss/classification_loss"), as host doubles.
using DetectionLosses = std::map<std::string, double>;

class DetectionModelAdapter final : public BaseModel {
 public:
  explicit DetectionModelAdapter(std::shared_ptr<DetectionModel> model);

  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode mode) override;

  DetectionModel& model() { return *model_; }
  const DetectionLosses& last_losses() const { return last_losses_; }
  // What the last forward() in kEval or kPredict gave beside the packed detections, by name
  // ("detection_masks"); empty after kTrain and for models without masks.
  const TensorDict& last_outputs() const { return last_outputs_; }

 private:
  std::shared_ptr<DetectionModel> model_;
  DetectionLosses last_losses_;
  TensorDict last_outputs_;
};

// Packs the API's postprocess dict ("detection_boxes" [B, M, 4], "detection_scores" [B, M],
// "detection_classes" [B, M], "num_detections" [B]) as described above. Throws InvalidArgument
// naming the model and the missing or misshapen entry.
Tensor pack_detections(Backend& backend, const TensorDict& detections, const std::string& model);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SRC_DETECTION_MODEL_ADAPTER_H_
