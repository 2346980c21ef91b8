#include "registry/detection_model_adapter.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

std::string model_name(const DetectionModel& model) {
  const std::string& name = model.plugin_origin().class_name;
  return name.empty() ? std::string("detection model") : name;
}

const Tensor& feature(const Batch& batch, const std::string& name, const std::string& model,
                      const char* expected) {
  auto it = batch.features.find(name);
  if (it == batch.features.end()) {
    throw InvalidArgument(model + ": the batch has no '" + name + "'; expected " + expected +
                          " (a detection reader's groundtruth, padded to max_number_of_boxes)");
  }
  return it->second;
}

std::vector<float> host_f32(const Tensor& t) {
  return t.dtype() == DType::kF32 ? t.to_vector<float>()
                                  : ops::cast(t, DType::kF32).to_vector<float>();
}

std::vector<int32_t> host_i32(const Tensor& t) {
  return t.dtype() == DType::kI32 ? t.to_vector<int32_t>()
                                  : ops::cast(t, DType::kI32).to_vector<int32_t>();
}

// The padded groundtruth of the batch as the API's per-image lists: boxes [N_i, 4], one-hot
// classes [N_i, num_classes], weights [N_i].
Groundtruth groundtruth_of(Backend& backend, const Batch& batch, int64_t num_classes,
                           const std::string& model) {
  const Tensor& boxes = feature(batch, "groundtruth_boxes", model, "f32 [batch, boxes, 4]");
  const Tensor& classes = feature(batch, "groundtruth_classes", model, "i32 [batch, boxes]");
  const Tensor& counts = feature(batch, "num_groundtruth_boxes", model, "i32 [batch]");
  const Shape& bs = boxes.shape();
  if (bs.rank() != 3 || bs[2] != 4 || classes.shape().rank() != 2 || classes.shape()[0] != bs[0] ||
      classes.shape()[1] != bs[1] || counts.shape().rank() != 1 || counts.shape()[0] != bs[0]) {
    throw InvalidArgument(model + ": groundtruth_boxes " + boxes.description() +
                          ", groundtruth_classes " + classes.description() +
                          " and num_groundtruth_boxes " + counts.description() +
                          " do not agree; expected [B, P, 4], [B, P] and [B]");
  }
  const int64_t images = bs[0];
  const int64_t rows = bs[1];
  const std::vector<float> b = host_f32(boxes);
  const std::vector<int32_t> c = host_i32(classes);
  const std::vector<int32_t> n = host_i32(counts);
  std::vector<float> w;
  auto weights = batch.features.find("groundtruth_weights");
  if (weights != batch.features.end()) {
    if (weights->second.shape() != classes.shape()) {
      throw InvalidArgument(model + ": groundtruth_weights is " + weights->second.description() +
                            "; expected the shape of groundtruth_classes [B, P]");
    }
    w = host_f32(weights->second);
  }
  Groundtruth gt;
  for (int64_t i = 0; i < images; ++i) {
    const int64_t count = n[static_cast<std::size_t>(i)];
    if (count < 0 || count > rows) {
      throw InvalidArgument(model + ": image " + std::to_string(i) + " of the batch has " +
                            std::to_string(count) + " groundtruth boxes, outside [0, " +
                            std::to_string(rows) + "]");
    }
    const auto first = static_cast<std::size_t>(i * rows);
    std::vector<float> image_boxes(b.begin() + static_cast<std::ptrdiff_t>(first * 4),
                                   b.begin() + static_cast<std::ptrdiff_t>((first + count) * 4));
    std::vector<float> one_hot(static_cast<std::size_t>(count * num_classes), 0.0f);
    for (int64_t r = 0; r < count; ++r) {
      const int32_t label = c[first + static_cast<std::size_t>(r)];
      if (label < 0 || label >= num_classes) {
        throw InvalidArgument(model + ": image " + std::to_string(i) + " of the batch has a box " +
                              "of class " + std::to_string(label) + " (0-based), outside [0, " +
                              std::to_string(num_classes) + ")");
      }
      one_hot[static_cast<std::size_t>(r * num_classes + label)] = 1.0f;
    }
    gt.boxes.push_back(Tensor::from_vector(backend, Shape{count, 4}, image_boxes));
    gt.classes.push_back(Tensor::from_vector(backend, Shape{count, num_classes}, one_hot));
    if (!w.empty()) {
      std::vector<float> image_weights(w.begin() + static_cast<std::ptrdiff_t>(first),
                                       w.begin() + static_cast<std::ptrdiff_t>(first + count));
      gt.weights.push_back(Tensor::from_vector(backend, Shape{count}, image_weights));
    }
  }
  return gt;
}

// true_image_shape from the batch, else every image's own [H, W, C].
Tensor true_image_shapes(Backend& backend, const Batch& batch, const Tensor& images) {
  auto it = batch.features.find("true_image_shape");
  if (it != batch.features.end()) return ops::cast(it->second, DType::kI32);
  const Shape& s = images.shape();
  std::vector<int32_t> shapes;
  for (int64_t i = 0; i < s[0]; ++i) {
    shapes.insert(shapes.end(), {static_cast<int32_t>(s[1]), static_cast<int32_t>(s[2]),
                                 static_cast<int32_t>(s[3])});
  }
  return Tensor::from_vector(backend, Shape{s[0], 3}, shapes);
}

// The batch's true_image_shape [B, 3] as host numbers when some image is smaller than the
// batch's extent (the input padded the batch to its largest image: pad_to_largest), else empty.
std::vector<int32_t> padded_image_shapes(const Batch& batch, const Tensor& images,
                                         const std::string& model) {
  auto it = batch.features.find("true_image_shape");
  if (it == batch.features.end()) return {};
  const Shape& s = images.shape();
  if (it->second.shape() != Shape{s[0], 3}) {
    throw InvalidArgument(model + ": true_image_shape is " + it->second.description() +
                          "; expected [" + std::to_string(s[0]) + ", 3] for 'image' " +
                          images.description());
  }
  std::vector<int32_t> shapes = host_i32(it->second);
  bool padded = false;
  for (int64_t i = 0; i < s[0]; ++i) {
    const int32_t h = shapes[static_cast<std::size_t>(i * 3)];
    const int32_t w = shapes[static_cast<std::size_t>(i * 3 + 1)];
    if (h < 1 || h > s[1] || w < 1 || w > s[2]) {
      throw InvalidArgument(model + ": image " + std::to_string(i) + " of the batch has " +
                            "true_image_shape " + std::to_string(h) + " x " + std::to_string(w) +
                            ", outside the batch's images " + images.description());
    }
    padded = padded || h != s[1] || w != s[2];
  }
  if (!padded) shapes.clear();
  return shapes;
}

// A batch padded to its largest image, preprocessed as the Object Detection API's trainer does
// (one preprocess() call per image at its own size, then the results stacked): each image cut
// to its true_image_shape, preprocessed alone, and the results zero-padded at the bottom and
// right to the largest (when the model's resizer does not already give one size, as
// pad_to_max_dimension does) and stacked with their own true_image_shapes.
PreprocessedImages preprocess_each(DetectionModel& m, ModelContext& ctx, const Tensor& images,
                                   const std::vector<int32_t>& shapes, const std::string& model) {
  const Shape& s = images.shape();
  std::vector<PreprocessedImages> each;
  int64_t height = 0, width = 0;
  for (int64_t i = 0; i < s[0]; ++i) {
    const auto at = static_cast<std::size_t>(i * 3);
    const Tensor image = ops::slice(images, {i, 0, 0, 0}, {1, shapes[at], shapes[at + 1], s[3]});
    PreprocessedImages pre =
        guard_plugin_call(m, "preprocess", [&] { return m.preprocess(ctx, image); });
    if (pre.images.shape().rank() != 4 || pre.images.shape()[0] != 1 ||
        pre.true_image_shapes.shape() != Shape{1, 3}) {
      throw InvalidArgument(model + ": preprocess() of one image gave images " +
                            pre.images.description() + " and true_image_shapes " +
                            pre.true_image_shapes.description() +
                            "; expected [1, height, width, channels] and [1, 3]");
    }
    height = std::max(height, pre.images.shape()[1]);
    width = std::max(width, pre.images.shape()[2]);
    each.push_back(std::move(pre));
  }
  std::vector<Tensor> stacked, true_shapes;
  for (PreprocessedImages& pre : each) {
    const Shape& p = pre.images.shape();
    stacked.push_back(
        p[1] == height && p[2] == width
            ? pre.images
            : ops::pad(pre.images, {{0, 0}, {0, height - p[1]}, {0, width - p[2]}, {0, 0}}));
    true_shapes.push_back(ops::cast(pre.true_image_shapes, DType::kI32));
  }
  PreprocessedImages out;
  out.images = ops::concat(stacked, 0);
  out.true_image_shapes = ops::concat(true_shapes, 0);
  return out;
}

// loss()'s dict: the prediction dict and, when the batch has groundtruth_instance_masks
// [B, P, H, W] and the model predicted masks ("mask_predictions"), each image's masks as
// "groundtruth_instance_masks/<b>" [N_b, h_b, w_b]: its num_groundtruth_boxes rows, cut to its
// true_image_shape when the batch was padded to its largest image and the mask planes have the
// images' size.
TensorDict with_instance_masks(const TensorDict& prediction, const Batch& batch,
                               const Tensor& images, const std::vector<int32_t>& padded,
                               const std::string& model) {
  auto it = batch.features.find("groundtruth_instance_masks");
  if (it == batch.features.end() || prediction.count("mask_predictions") == 0) return prediction;
  const Tensor& masks = it->second;
  const Tensor& counts = feature(batch, "num_groundtruth_boxes", model, "i32 [batch]");
  const Shape& s = masks.shape();
  const Shape& is = images.shape();
  if (s.rank() != 4 || s[0] != is[0] || counts.shape() != Shape{s[0]}) {
    throw InvalidArgument(model + ": groundtruth_instance_masks is " + masks.description() +
                          " and num_groundtruth_boxes " + counts.description() + " for 'image' " +
                          images.description() + "; expected [B, boxes, height, width] and [B]");
  }
  const std::vector<int32_t> n = host_i32(counts);
  const bool same_size = s[2] == is[1] && s[3] == is[2];
  TensorDict out = prediction;
  for (int64_t b = 0; b < s[0]; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const int64_t count = n[i];
    if (count < 0 || count > s[1]) {
      throw InvalidArgument(model + ": image " + std::to_string(b) + " of the batch has " +
                            std::to_string(count) + " groundtruth boxes but " +
                            std::to_string(s[1]) + " instance mask rows");
    }
    int64_t height = s[2];
    int64_t width = s[3];
    if (!padded.empty() && same_size) {
      height = padded[i * 3];
      width = padded[i * 3 + 1];
    }
    out["groundtruth_instance_masks/" + std::to_string(b)] = ops::reshape(
        ops::slice(masks, {b, 0, 0, 0}, {1, count, height, width}), Shape{count, height, width});
  }
  return out;
}

const Tensor& entry(const TensorDict& dict, const char* key, const std::string& model,
                    const char* call) {
  auto it = dict.find(key);
  if (it == dict.end()) {
    std::string keys;
    for (const auto& [name, value] : dict) keys += (keys.empty() ? "" : ", ") + name;
    throw InvalidArgument(model + ": " + call + "() returned no '" + key +
                          "' (it has: " + (keys.empty() ? "nothing" : keys) + ")");
  }
  return it->second;
}

}  // namespace

DetectionModelAdapter::DetectionModelAdapter(std::shared_ptr<DetectionModel> model)
    : model_(std::move(model)) {
  if (!model_) throw InvalidArgument("DetectionModelAdapter: no model");
}

ModelOutput DetectionModelAdapter::forward(ModelContext& ctx, const Batch& batch, Mode mode) {
  DetectionModel& m = *model_;
  const std::string name = model_name(m);
  const Tensor& images = feature(batch, "image", name, "f32 [batch, height, width, channels]");
  if (images.shape().rank() != 4) {
    throw InvalidArgument(name + ": 'image' is " + images.description() +
                          "; expected [batch, height, width, channels]");
  }
  Backend& backend = ctx.backend();
  Tensor shapes = true_image_shapes(backend, batch, images);
  const bool with_loss = mode != Mode::kPredict;
  if (with_loss) {
    Groundtruth gt = groundtruth_of(backend, batch, ctx.num_classes(), name);
    guard_plugin_call(m, "provide_groundtruth", [&] { m.provide_groundtruth(std::move(gt)); });
  }
  const std::vector<int32_t> padded = padded_image_shapes(batch, images, name);
  PreprocessedImages pre;
  if (!padded.empty()) {
    pre = preprocess_each(m, ctx, images, padded, name);
    shapes = pre.true_image_shapes;
  } else {
    pre = guard_plugin_call(m, "preprocess", [&] { return m.preprocess(ctx, images); });
    // A model that resizes in preprocess (Faster R-CNN's keep_aspect_ratio_resizer) knows the
    // true shapes of what it made; otherwise the batch's stand (the input pipeline's resize).
    if (pre.images.shape().rank() == 4 && (pre.images.shape()[1] != images.shape()[1] ||
                                           pre.images.shape()[2] != images.shape()[2])) {
      shapes = pre.true_image_shapes;
    }
  }
  const TensorDict prediction =
      guard_plugin_call(m, "predict", [&] { return m.predict(ctx, pre, mode); });

  ModelOutput out;
  last_losses_.clear();
  last_outputs_.clear();
  if (with_loss) {
    const TensorDict with_masks = with_instance_masks(prediction, batch, images, padded, name);
    const TensorDict losses =
        guard_plugin_call(m, "loss", [&] { return m.loss(ctx, with_masks, shapes); });
    if (losses.empty()) throw InvalidArgument(name + ": loss() returned no losses");
    std::optional<Tensor> total;
    for (const auto& [key, value] : losses) {
      if (value.shape().rank() != 0) {
        throw InvalidArgument(name + ": loss '" + key + "' is " + value.description() +
                              "; expected a scalar");
      }
      total = total ? ops::add(*total, value) : value;
      NoGradScope no_grad;
      last_losses_[key] = to_double(value);
    }
    out.loss = *total;
  }
  if (mode == Mode::kTrain) {
    out.predictions = entry(prediction, "class_predictions_with_background", name, "predict");
    return out;
  }
  NoGradScope no_grad;
  const TensorDict detections =
      guard_plugin_call(m, "postprocess", [&] { return m.postprocess(ctx, prediction, shapes); });
  out.predictions = pack_detections(backend, detections, name);
  auto masks = detections.find("detection_masks");
  if (masks != detections.end()) {
    const Shape& ms = masks->second.shape();
    const Shape& ps = out.predictions.shape();
    if (ms.rank() != 4 || ms[0] != ps[0] || ms[1] != ps[1]) {
      throw InvalidArgument(
          name + ": postprocess() gave detection_masks " + masks->second.description() +
          " for detection_boxes " +
          entry(detections, "detection_boxes", name, "postprocess").description() +
          "; expected [B, M, mask_height, mask_width]");
    }
    last_outputs_["detection_masks"] = masks->second;
  }
  return out;
}

Tensor pack_detections(Backend& backend, const TensorDict& detections, const std::string& model) {
  const Tensor& boxes = entry(detections, "detection_boxes", model, "postprocess");
  const Tensor& scores = entry(detections, "detection_scores", model, "postprocess");
  const Tensor& classes = entry(detections, "detection_classes", model, "postprocess");
  const Tensor& counts = entry(detections, "num_detections", model, "postprocess");
  const Shape& bs = boxes.shape();
  if (bs.rank() != 3 || bs[2] != 4 || scores.shape() != Shape{bs[0], bs[1]} ||
      classes.shape() != Shape{bs[0], bs[1]} || counts.shape() != Shape{bs[0]}) {
    throw InvalidArgument(model + ": postprocess() gave detection_boxes " + boxes.description() +
                          ", detection_scores " + scores.description() + ", detection_classes " +
                          classes.description() + " and num_detections " + counts.description() +
                          "; expected [B, M, 4], [B, M], [B, M] and [B]");
  }
  const int64_t images = bs[0];
  const int64_t m = bs[1];
  const std::vector<float> b = host_f32(boxes);
  const std::vector<float> s = host_f32(scores);
  const std::vector<float> c = host_f32(classes);
  const std::vector<float> n = host_f32(counts);
  std::vector<float> packed(static_cast<std::size_t>(images * m * kPackedDetectionWidth), 0.0f);
  for (int64_t i = 0; i < images; ++i) {
    const auto valid = static_cast<int64_t>(
        std::clamp<float>(n[static_cast<std::size_t>(i)], 0.0f, static_cast<float>(m)));
    for (int64_t j = 0; j < m; ++j) {
      const auto at = static_cast<std::size_t>(i * m + j);
      float* row = packed.data() + at * kPackedDetectionWidth;
      if (j >= valid) {
        row[5] = -1.0f;
        continue;
      }
      std::copy_n(b.data() + at * 4, 4, row);
      row[4] = s[at];
      row[5] = c[at];
    }
  }
  return Tensor::from_vector(backend, Shape{images, m, kPackedDetectionWidth}, packed);
}

}  // namespace trainyard
