#include "nms_options.h"

#include <string>
#include <vector>

#include "trainyard/ops.h"

namespace trainyard::models {

void read_nms_variant(const detection::DetectionOptionReader& r, const std::string& prefix,
                      MultiClassNmsAttrs& nms, bool combined_allowed) {
  const Options& o = r.options();
  if (nms.max_detections_per_class > nms.max_total_detections) {
    r.refuse(prefix + "max_detections_per_class", std::to_string(nms.max_detections_per_class),
             "at most max_total_detections (" + std::to_string(nms.max_total_detections) + ")");
  }
  const std::string sigma = prefix + "soft_nms_sigma";
  if (o.contains(sigma)) {
    const double value = o.get_float(sigma);
    if (!(value >= 0.0)) r.refuse(sigma, std::to_string(value), "non-negative");
    nms.soft_nms_sigma = static_cast<float>(value);
  }
  const std::string agnostic = prefix + "use_class_agnostic_nms";
  if (o.contains(agnostic)) nms.use_class_agnostic_nms = o.get_bool(agnostic);
  const std::string classes = prefix + "max_classes_per_detection";
  if (o.contains(classes) && o.get_int(classes) != 1) {
    r.refuse(classes, std::to_string(o.get_int(classes)), "1 (one class per detection)");
  }
  const std::string combined = prefix + "use_combined_nms";
  if (o.contains(combined)) nms.use_combined_nms = o.get_bool(combined);
  if (!nms.use_combined_nms) return;
  if (!combined_allowed) {
    r.refuse(combined, "true",
             "false: this post-processing changes the coordinate frame, which combined NMS "
             "does not");
  }
  if (nms.use_class_agnostic_nms) r.refuse(combined, "true", "false with use_class_agnostic_nms");
  if (nms.soft_nms_sigma != 0.0f) r.refuse(combined, "true", "false with soft_nms_sigma");
}

TensorDict nms_detection_dict(const std::vector<ops::NmsDetections>& results) {
  std::vector<Tensor> boxes, scores, classes, counts;
  for (const ops::NmsDetections& d : results) {
    boxes.push_back(d.boxes);
    scores.push_back(d.scores);
    classes.push_back(d.classes);
    counts.push_back(ops::cast(d.num_detections, DType::kF32));
  }
  const auto joined = [](const std::vector<Tensor>& parts) {
    return parts.size() == 1 ? parts[0] : ops::concat(parts, 0);
  };
  TensorDict out;
  out["detection_boxes"] = joined(boxes);
  out["detection_scores"] = joined(scores);
  out["detection_classes"] = joined(classes);
  out["num_detections"] = joined(counts);
  return out;
}

}  // namespace trainyard::models
