// Object detection models (SSD, Faster R-CNN), with the Object Detection API's contract.
//
// The trainer calls, per step: provide_groundtruth(), preprocess(), predict(), loss(); the
// evaluator and exporter call preprocess(), predict(), postprocess(). Tensors are keyed by the
// Object Detection API's standard field names ("detection_boxes", "detection_scores",
// "detection_classes", "num_detections"; loss names such as "Loss/localization_loss").
// Boxes are [ymin, xmin, ymax, xmax] normalized to [0, 1].
//
// A batch whose images keep their own sizes (keep_aspect_ratio_resizer) comes padded to its
// largest image; the host then calls preprocess() once per image, on the image cut to its
// true_image_shape, and stacks the results (zero-padded to the largest when they differ), as
// the API's trainer preprocesses image by image. Boxes stay normalized to each image's own size.
#ifndef TRAINYARD_DETECTION_MODEL_H_
#define TRAINYARD_DETECTION_MODEL_H_

#include <map>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/model.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

// The detections a detection model's evaluation and prediction hand the task: the core's
// DetectionModelAdapter packs the Object Detection API's postprocess dict as f32
// [B, max_detections, kPackedDetectionWidth], one row per detection, sorted by score: ymin,
// xmin, ymax, xmax (normalized to the image), score, class (0-based, as the API's
// detection_classes); rows past num_detections have class -1 and score 0.
inline constexpr int64_t kPackedDetectionWidth = 6;

using TensorDict = std::map<std::string, Tensor>;

struct PreprocessedImages {
  Tensor images;             // [B, H, W, C] float, resized and normalized
  Tensor true_image_shapes;  // [B, 3] int32: height, width, channels before padding
};

struct Groundtruth {
  std::vector<Tensor> boxes;    // per image [N_i, 4]
  std::vector<Tensor> classes;  // per image [N_i, num_classes] one-hot
  std::vector<Tensor> weights;  // per image [N_i]; empty means all ones
};

class TRAINYARD_API DetectionModel : public PluginObject {
 public:
  ~DetectionModel() override;

  virtual int64_t num_classes() const = 0;
  virtual PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) = 0;
  virtual TensorDict predict(ModelContext& ctx, const PreprocessedImages& inputs, Mode mode) = 0;
  virtual TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction_dict,
                                 const Tensor& true_image_shapes) = 0;
  // Uses the groundtruth given by the last provide_groundtruth() call.
  virtual TensorDict loss(ModelContext& ctx, const TensorDict& prediction_dict,
                          const Tensor& true_image_shapes) = 0;
  virtual void provide_groundtruth(Groundtruth groundtruth) = 0;
  // Which variables fine-tuning reads from a checkpoint of type `fine_tune_checkpoint_type`
  // ("detection" or "classification"), and under which names, as the Object Detection API's
  // restore_map(fine_tune_checkpoint_type, load_all_detection_checkpoint_vars) decides it,
  // written as scopes: this model's variable scope -> the checkpoint's scope. A variable under
  // a listed scope (the longest that matches; "" matches every name) is read from the
  // checkpoint with that scope replaced by the mapped one; a variable under none is left as
  // initialized. SSD's "detection" is {"FeatureExtractor/": "FeatureExtractor/"} (the API
  // restores only the feature extractor), or {"": ""} (every variable by its own name) with
  // load_all_detection_checkpoint_vars; its "classification" is {"FeatureExtractor/": ""} (a
  // classification checkpoint's MobilenetV1/... into FeatureExtractor/MobilenetV1/...), where
  // load_all_detection_checkpoint_vars does not apply. Throws InvalidArgument for a type other
  // than these two.
  virtual std::map<std::string, std::string> restore_map(
      const std::string& fine_tune_checkpoint_type, bool load_all_detection_checkpoint_vars) = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_DETECTION_MODEL_H_
