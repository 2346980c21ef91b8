// The object detection task (the Object Detection API's model_main and legacy train.py): images
// with padded groundtruth boxes moved to the device as they are, the run's pipeline.config
// recorded in train_dir, the total loss on logged training steps, the API's evaluation metrics
// (eval_config.metrics_set: coco_detection_metrics, pascal_voc_detection_metrics,
// open_images_V2_detection_metrics alias oid_V2_detection_metrics; coco_mask_metrics on the
// instance masks) with its tag names, and detections written as a COCO results JSON by predict
// (with each detection's mask as COCO RLE when the model predicts masks).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/coco_mask.h"
#include "trainyard/pkg/detection/detection_evaluation.h"
#include "trainyard/pkg/detection/instance_masks.h"
#include "trainyard/pkg/detection/label_map.h"
#include "trainyard/pkg/detection/visualization.h"
#include "trainyard/plugin.h"
#include "trainyard/task.h"

namespace trainyard::tasks {
namespace {

std::vector<float> host_f32(const Tensor& t) {
  return t.dtype() == DType::kF32 ? t.to_vector<float>()
                                  : ops::cast(t, DType::kF32).to_vector<float>();
}

const Tensor* find(const Batch& batch, const char* name) {
  auto it = batch.features.find(name);
  return it == batch.features.end() ? nullptr : &it->second;
}

const Tensor& require(const Batch& batch, const char* name) {
  const Tensor* t = find(batch, name);
  if (t == nullptr) {
    throw InvalidArgument(std::string("detection evaluation: the batch has no '") + name +
                          "' (DetectionReader with padding to max_number_of_boxes)");
  }
  return *t;
}

// The valid detections of image i of packed `detections` [B, m, width]: the first rows whose
// class is not -1 (pack_detections writes the valid rows first).
int64_t valid_detections(const std::vector<float>& detections, int64_t i, int64_t m) {
  int64_t n = 0;
  while (n < m &&
         detections[static_cast<std::size_t>((i * m + n) * kPackedDetectionWidth + 5)] >= 0.0f) {
    ++n;
  }
  return n;
}

// Mask R-CNN's detection masks of image i in image coordinates, as the API hands them to its
// evaluators and users: the batch's "detection_masks" (box masks [B, M, mask_height, mask_width],
// DetectionModelAdapter) of its first `count` detections reframed into the height x width image
// and thresholded at 0.5 (instance_masks.h): u8 [count, height, width], row-major. Empty when
// the model gives no masks.
std::vector<uint8_t> detection_image_masks(const Batch& batch, const std::vector<float>& detections,
                                           int64_t i, int64_t m, int64_t count, int64_t height,
                                           int64_t width) {
  const Tensor* masks = find(batch, "detection_masks");
  if (masks == nullptr || count == 0) return {};
  const Shape& s = masks->shape();
  if (s.rank() != 4 || s[1] != m) {
    throw InvalidArgument("detection: detection_masks is " + masks->description() +
                          "; expected [batch, " + std::to_string(m) +
                          ", mask_height, mask_width] beside the detections");
  }
  std::vector<float> boxes;
  for (int64_t j = 0; j < count; ++j) {
    const float* row = detections.data() + (i * m + j) * kPackedDetectionWidth;
    boxes.insert(boxes.end(), row, row + 4);
  }
  const Tensor box_masks = ops::reshape(ops::slice(*masks, {i, 0, 0, 0}, {1, count, s[2], s[3]}),
                                        Shape{count, s[2], s[3]});
  return detection::reframe_box_masks_to_image_masks(box_masks, boxes, height, width);
}

// The categories evaluations report per category and name: the label map of the eval input's
// reader when it names one, else ids 1..num_classes named by their id.
std::vector<detection::Category> categories_of(const TaskPipeline& pipeline) {
  const std::string path = pipeline.eval_reader.param("label_map_path", "");
  if (!path.empty()) {
    const bool display = pipeline.eval_reader.param("use_display_name", "false") == "true";
    return detection::label_map_categories(detection::load_label_map(path), display);
  }
  std::vector<detection::Category> out;
  for (int64_t id = 1; id <= pipeline.num_classes; ++id) {
    out.push_back({id, std::to_string(id)});
  }
  return out;
}

// A box [ymin, xmin, ymax, xmax] normalized to the image, in its pixels.
void append_absolute(const float* box, float height, float width, std::vector<float>& out) {
  out.insert(out.end(), {box[0] * height, box[1] * width, box[2] * height, box[3] * width});
}

// A batch's groundtruth on the host: the boxes of each image padded to `rows`, their fields
// (empty when the batch has none), and the images' true shapes (empty: the batch's extent).
struct HostGroundtruth {
  int64_t rows = 0;
  std::vector<float> boxes, classes, counts, difficult, crowd, group_of, area, shapes;

  static HostGroundtruth of(const Batch& batch) {
    HostGroundtruth g;
    const Tensor& boxes = require(batch, "groundtruth_boxes");
    g.rows = boxes.shape()[1];
    g.boxes = host_f32(boxes);
    g.classes = host_f32(require(batch, "groundtruth_classes"));
    g.counts = host_f32(require(batch, "num_groundtruth_boxes"));
    auto optional = [&](const char* name) {
      const Tensor* t = find(batch, name);
      return t ? host_f32(*t) : std::vector<float>();
    };
    g.difficult = optional("groundtruth_difficult");
    g.crowd = optional("groundtruth_is_crowd");
    g.group_of = optional("groundtruth_group_of");
    g.area = optional("groundtruth_area");
    g.shapes = optional("true_image_shape");
    return g;
  }

  // Image i's groundtruth in its pixels (height x width), classes 1-based.
  detection::GroundtruthImage image(int64_t i, float height, float width) const {
    detection::GroundtruthImage gt;
    const auto at = static_cast<std::size_t>(i);
    const auto count = static_cast<int64_t>(counts[at]);
    for (int64_t r = 0; r < count; ++r) {
      const std::size_t k = at * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r);
      append_absolute(boxes.data() + k * 4, height, width, gt.boxes);
      gt.classes.push_back(static_cast<int64_t>(classes[k]) + 1);
      gt.difficult.push_back(!difficult.empty() && difficult[k] != 0.0f);
      gt.is_crowd.push_back(!crowd.empty() && crowd[k] != 0.0f);
      gt.group_of.push_back(!group_of.empty() && group_of[k] != 0.0f);
      if (!area.empty()) gt.area.push_back(area[k]);
    }
    return gt;
  }
};

// Image i's packed detections (of m rows; a negative class marks padding) in its pixels,
// classes 1-based.
detection::DetectionsImage detections_image(const std::vector<float>& detections, int64_t i,
                                            int64_t m, float height, float width) {
  detection::DetectionsImage dt;
  for (int64_t j = 0; j < m; ++j) {
    const float* row =
        detections.data() +
        (static_cast<std::size_t>(i) * static_cast<std::size_t>(m) + static_cast<std::size_t>(j)) *
            static_cast<std::size_t>(kPackedDetectionWidth);
    if (row[5] < 0.0f) continue;
    append_absolute(row, height, width, dt.boxes);
    dt.scores.push_back(row[4]);
    dt.classes.push_back(static_cast<int64_t>(row[5]) + 1);
  }
  return dt;
}

// model_lib's eval_metric_ops: the evaluators eval_config.metrics_set names (COCO when it
// names none), fed per image in absolute pixel coordinates of the image as decoded
// (true_image_shape), plus the loss.
class DetectionEvaluation final : public TaskEvaluation {
 public:
  explicit DetectionEvaluation(const TaskPipeline& pipeline)
      : num_visualizations_(std::max(0, pipeline.num_visualizations)),
        min_score_threshold_(pipeline.min_score_threshold),
        max_boxes_to_visualize_(std::max(0, pipeline.max_num_boxes_to_visualize)) {
    const std::vector<detection::Category> categories = categories_of(pipeline);
    std::vector<std::string> sets = pipeline.metrics_set;
    if (sets.empty()) sets.push_back("coco_detection_metrics");
    for (const std::string& set : sets) {
      evaluators_.push_back(detection::make_detection_evaluator(
          set, categories, pipeline.include_metrics_per_category));
      evaluates_masks_ = evaluates_masks_ || set == "coco_mask_metrics";
    }
  }

  void add(const Tensor& predictions, const Batch& batch, double loss,
           int64_t batch_size) override {
    loss_sum_ += loss * static_cast<double>(batch_size);
    examples_ += batch_size;
    const std::vector<float> detections = host_f32(predictions);
    const int64_t m = predictions.shape()[1];
    const HostGroundtruth groundtruth = HostGroundtruth::of(batch);
    const Tensor& images = require(batch, "image");
    std::vector<float> pixels;
    ImageMasks groundtruth_masks;
    const bool visualizing = static_cast<int64_t>(visualizations_.size()) < num_visualizations_;
    if (visualizing) pixels = host_f32(images);
    if (visualizing || evaluates_masks_) {
      if (const Tensor* masks = find(batch, "groundtruth_instance_masks")) {
        groundtruth_masks =
            ImageMasks::of(*masks, batch_size, groundtruth.rows, "groundtruth_instance_masks");
      } else if (evaluates_masks_) {
        throw InvalidArgument(
            "detection evaluation: coco_mask_metrics needs groundtruth_instance_masks in the "
            "batch (load_instance_masks: true in eval_input_reader)");
      }
    }
    for (int64_t i = 0; i < batch_size; ++i) {
      const auto at = static_cast<std::size_t>(i);
      const std::string id = at < batch.ids.size() && !batch.ids[at].empty()
                                 ? batch.ids[at]
                                 : std::to_string(images_seen_);
      ++images_seen_;
      const std::vector<float>& shapes = groundtruth.shapes;
      const float height = shapes.empty() ? static_cast<float>(images.shape()[1]) : shapes[at * 3];
      const float width =
          shapes.empty() ? static_cast<float>(images.shape()[2]) : shapes[at * 3 + 1];
      detection::GroundtruthImage gt = groundtruth.image(i, height, width);
      const auto count = static_cast<int64_t>(gt.classes.size());
      // coco_mask_metrics: the groundtruth masks cut to the image, the detections' reframed.
      const auto image_h = static_cast<int64_t>(height);
      const auto image_w = static_cast<int64_t>(width);
      if (evaluates_masks_) add_groundtruth_masks(gt, groundtruth_masks, i, id, image_h, image_w);
      const int64_t valid = valid_detections(detections, i, m);
      ImageMasks detection_masks;
      if (evaluates_masks_ || visualizing) {
        detection_masks.values =
            detection_image_masks(batch, detections, i, m, valid, image_h, image_w);
        if (!detection_masks.values.empty()) {
          detection_masks.rows = valid;
          detection_masks.height = image_h;
          detection_masks.width = image_w;
        }
      }
      detection::DetectionsImage dt = detections_image(detections, i, m, height, width);
      if (evaluates_masks_ && valid > 0) add_detection_masks(dt, detection_masks, valid);
      for (auto& evaluator : evaluators_) {
        evaluator->add_groundtruth(id, gt);
        evaluator->add_detections(id, dt);
      }
      if (static_cast<int64_t>(visualizations_.size()) < num_visualizations_) {
        visualize(images, pixels, i, shapes, detections, m, groundtruth.boxes, groundtruth.rows,
                  count, groundtruth_masks, detection_masks);
      }
    }
  }

  // eval_util's visualizations: the image with its detections (score >= min_score_threshold, at
  // most max_num_boxes_to_visualize, coloured by class) on the left and its groundtruth boxes
  // (black) on the right, as "Detections_Left_Groundtruth_Right/<i>". Instance masks, the
  // groundtruth's (groundtruth_instance_masks) and the detections' when they carry them, are
  // tinted in their box's colour under the boxes (visualization_utils.draw_mask_on_image_array).
  void write_summaries(int64_t global_step, Summaries& summaries) const override {
    for (std::size_t i = 0; i < visualizations_.size(); ++i) {
      const Visualization& v = visualizations_[i];
      summaries.add_image("Detections_Left_Groundtruth_Right/" + std::to_string(i),
                          static_cast<int>(v.height), static_cast<int>(v.width), 3, v.rgb.data(),
                          global_step);
    }
  }

  std::vector<Metric> result() const override {
    std::vector<Metric> out;
    for (const auto& evaluator : evaluators_) {
      for (const auto& [tag, value] : evaluator->evaluate()) out.push_back({tag, tag, value});
    }
    const double n = std::max<double>(static_cast<double>(examples_), 1.0);
    out.push_back({"loss", "loss", loss_sum_ / n});
    out.push_back({"examples", "", static_cast<double>(examples_)});
    return out;
  }

 private:
  struct Visualization {
    int64_t height = 0;
    int64_t width = 0;  // twice the image's
    std::vector<uint8_t> rgb;
  };

  // A batch's instance masks on the host: u8 [B, rows, height, width], image masks padded as
  // the images (pad_to_largest) and, row for row, as the boxes. Empty when there are none.
  struct ImageMasks {
    std::vector<uint8_t> values;
    int64_t rows = 0, height = 0, width = 0;

    static ImageMasks of(const Tensor& t, int64_t batch_size, int64_t min_rows, const char* name) {
      const std::vector<int64_t> shape = t.shape().to_vector();
      if (shape.size() != 4 || shape[0] != batch_size || shape[1] < min_rows ||
          t.dtype() != DType::kU8) {
        std::string dims;
        for (const int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        throw InvalidArgument(std::string("detection evaluation: '") + name + "' is [" + dims +
                              "]; expected u8 [" + std::to_string(batch_size) + ", at least " +
                              std::to_string(min_rows) + ", height, width]");
      }
      return {t.to_vector<uint8_t>(), shape[1], shape[2], shape[3]};
    }
    const uint8_t* plane(int64_t i, int64_t r) const {
      return values.data() + (i * rows + r) * height * width;
    }
    // Mask r of image i, drawn into `view` in `color`.
    void draw(int64_t i, int64_t r, const detection::RgbView& view,
              const std::array<uint8_t, 3>& color) const {
      detection::draw_instance_masks(view, plane(i, r), 1, height, width, std::span(&color, 1));
    }
  };

  // coco_mask_metrics: image i's groundtruth masks, cut to its height x width, as RLE.
  static void add_groundtruth_masks(detection::GroundtruthImage& gt, const ImageMasks& masks,
                                    int64_t i, const std::string& id, int64_t height,
                                    int64_t width) {
    if (masks.height < height || masks.width < width) {
      throw InvalidArgument("detection evaluation: groundtruth_instance_masks are " +
                            std::to_string(masks.height) + " x " + std::to_string(masks.width) +
                            ", smaller than image " + id + " (" + std::to_string(height) + " x " +
                            std::to_string(width) + ")");
    }
    for (std::size_t r = 0; r < gt.classes.size(); ++r) {
      gt.masks.push_back(detection::rle_encode_row_major(masks.plane(i, static_cast<int64_t>(r)),
                                                         height, width, masks.width));
    }
  }

  // coco_mask_metrics: the first `valid` detections' image masks, as RLE.
  static void add_detection_masks(detection::DetectionsImage& dt, const ImageMasks& masks,
                                  int64_t valid) {
    if (masks.values.empty()) {
      throw InvalidArgument(
          "detection evaluation: coco_mask_metrics needs the model's detection_masks (a "
          "Mask R-CNN box predictor with predict_instance_masks); the model gives none");
    }
    for (int64_t j = 0; j < valid; ++j) {
      dt.masks.push_back(detection::rle_encode_row_major(masks.plane(0, j), masks.height,
                                                         masks.width, masks.width));
    }
  }

  // Draws image i of the batch at its true_image_shape where the batch padded it to its largest
  // image (pad_to_largest); the boxes are normalized to that size. `detection_masks` are image
  // i's alone (its valid detections' image masks, image 0 of their own).
  void visualize(const Tensor& images, const std::vector<float>& pixels, int64_t i,
                 const std::vector<float>& shapes, const std::vector<float>& detections, int64_t m,
                 const std::vector<float>& boxes, int64_t rows, int64_t count,
                 const ImageMasks& groundtruth_masks, const ImageMasks& detection_masks) {
    const int64_t stride_h = images.shape()[1];
    const int64_t stride_w = images.shape()[2];
    const int64_t c = images.shape()[3];
    auto visible = [&](std::size_t at, int64_t extent) {
      if (shapes.empty()) return extent;
      const auto size = static_cast<int64_t>(shapes[at]);
      return size >= 1 && size <= extent ? size : extent;
    };
    const int64_t h = visible(static_cast<std::size_t>(i * 3), stride_h);
    const int64_t w = visible(static_cast<std::size_t>(i * 3 + 1), stride_w);
    Visualization v;
    v.height = h;
    v.width = 2 * w;
    v.rgb.assign(static_cast<std::size_t>(h * 2 * w * 3), 0);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t k = 0; k < 3; ++k) {
          const float value = pixels[static_cast<std::size_t>(
              ((i * stride_h + y) * stride_w + x) * c + std::min(k, c - 1))];
          const auto byte = static_cast<uint8_t>(std::clamp(value, 0.0f, 255.0f));
          v.rgb[static_cast<std::size_t>((y * 2 * w + x) * 3 + k)] = byte;
          v.rgb[static_cast<std::size_t>((y * 2 * w + w + x) * 3 + k)] = byte;
        }
      }
    }
    // The detections drawn: their masks first, then their boxes.
    std::vector<int64_t> shown;
    for (int64_t j = 0; j < m && static_cast<int64_t>(shown.size()) < max_boxes_to_visualize_;
         ++j) {
      const float* row =
          detections.data() + static_cast<std::size_t>((i * m + j) * kPackedDetectionWidth);
      if (row[5] < 0.0f || row[4] < min_score_threshold_) continue;
      shown.push_back(j);
    }
    auto color_of = [&](int64_t j) {
      return class_color(static_cast<int64_t>(
          detections[static_cast<std::size_t>((i * m + j) * kPackedDetectionWidth + 5)]));
    };
    const detection::RgbView left{v.rgb.data(), h, w, v.width};
    const detection::RgbView right{v.rgb.data() + w * 3, h, w, v.width};
    if (!detection_masks.values.empty()) {
      for (const int64_t j : shown) {
        if (j < detection_masks.rows) detection_masks.draw(0, j, left, color_of(j));
      }
    }
    for (const int64_t j : shown) {
      draw_box(v, detections.data() + static_cast<std::size_t>((i * m + j) * kPackedDetectionWidth),
               0, w, h, color_of(j));
    }
    if (!groundtruth_masks.values.empty()) {
      for (int64_t r = 0; r < count; ++r) groundtruth_masks.draw(i, r, right, {0, 0, 0});
    }
    for (int64_t r = 0; r < count; ++r) {
      draw_box(v, boxes.data() + static_cast<std::size_t>((i * rows + r) * 4), w, w, h, {0, 0, 0});
    }
    visualizations_.push_back(std::move(v));
  }

  static std::array<uint8_t, 3> class_color(int64_t c) {
    static constexpr std::array<std::array<uint8_t, 3>, 8> kPalette{{{255, 64, 64},
                                                                     {64, 200, 64},
                                                                     {64, 96, 255},
                                                                     {255, 200, 0},
                                                                     {200, 64, 255},
                                                                     {0, 200, 200},
                                                                     {255, 128, 0},
                                                                     {128, 128, 128}}};
    return kPalette[static_cast<std::size_t>(c) % kPalette.size()];
  }

  // A 2-pixel outline of normalized `box` in the panel starting at column `x0`.
  static void draw_box(Visualization& v, const float* box, int64_t x0, int64_t w, int64_t h,
                       std::array<uint8_t, 3> color) {
    auto clampi = [](double value, int64_t hi) {
      return static_cast<int64_t>(std::clamp(value, 0.0, static_cast<double>(hi - 1)));
    };
    const int64_t top = clampi(box[0] * static_cast<double>(h), h);
    const int64_t left = clampi(box[1] * static_cast<double>(w), w);
    const int64_t bottom = clampi(box[2] * static_cast<double>(h), h);
    const int64_t right = clampi(box[3] * static_cast<double>(w), w);
    auto put = [&](int64_t y, int64_t x) {
      if (y < 0 || y >= h || x < 0 || x >= w) return;
      std::copy(color.begin(), color.end(), v.rgb.begin() + (y * v.width + x0 + x) * 3);
    };
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t x = left; x <= right; ++x) {
        put(top + t, x);
        put(bottom - t, x);
      }
      for (int64_t y = top; y <= bottom; ++y) {
        put(y, left + t);
        put(y, right - t);
      }
    }
  }

  int64_t num_visualizations_ = 0;
  bool evaluates_masks_ = false;  // coco_mask_metrics
  float min_score_threshold_ = 0.5f;
  int64_t max_boxes_to_visualize_ = 20;
  std::vector<Visualization> visualizations_;
  std::vector<std::unique_ptr<detection::DetectionEvaluator>> evaluators_;
  double loss_sum_ = 0.0;
  int64_t examples_ = 0;
  int64_t images_seen_ = 0;
};

// A COCO results list (pycocotools' loadRes layout): one object per detection with its image
// id (the record's id, a number when it is one), category id (1-based), bbox [x, y, width,
// height] in pixels of the image as decoded, and score; with a model that predicts masks, the
// detection's mask in the image as pycocotools' mask.encode writes it (compressed RLE:
// "segmentation": {"size": [height, width], "counts": "..."}).
class CocoResultsWriter final : public PredictionWriter {
 public:
  explicit CocoResultsWriter(std::ostream& out) : out_(out) { out_ << "["; }
  ~CocoResultsWriter() override { out_ << (first_ ? "]\n" : "\n]\n"); }

  void write(const Tensor& predictions, const Batch& batch) override {
    const std::vector<float> d = host_f32(predictions);
    const int64_t images = predictions.shape()[0];
    const int64_t m = predictions.shape()[1];
    const Tensor* shape_t = find(batch, "true_image_shape");
    const std::vector<float> shapes = shape_t ? host_f32(*shape_t) : std::vector<float>();
    const Tensor& image_t = require(batch, "image");
    for (int64_t i = 0; i < images; ++i, ++index_) {
      const auto at = static_cast<std::size_t>(i);
      const std::string id =
          at < batch.ids.size() && !batch.ids[at].empty() ? batch.ids[at] : std::to_string(index_);
      const double h = shapes.empty() ? static_cast<double>(image_t.shape()[1]) : shapes[at * 3];
      const double w =
          shapes.empty() ? static_cast<double>(image_t.shape()[2]) : shapes[at * 3 + 1];
      const int64_t valid = valid_detections(d, i, m);
      const auto mask_h = static_cast<int64_t>(h);
      const auto mask_w = static_cast<int64_t>(w);
      const std::vector<uint8_t> masks =
          detection_image_masks(batch, d, i, m, valid, mask_h, mask_w);
      for (int64_t j = 0; j < valid; ++j) {
        const float* row =
            d.data() + (at * static_cast<std::size_t>(m) + static_cast<std::size_t>(j)) *
                           static_cast<std::size_t>(kPackedDetectionWidth);
        out_ << (first_ ? "\n" : ",\n") << "{\"image_id\": " << json_id(id)
             << ", \"category_id\": " << static_cast<int64_t>(row[5]) + 1 << ", \"bbox\": ["
             << std::setprecision(6) << std::defaultfloat << row[1] * w << ", " << row[0] * h
             << ", " << (row[3] - row[1]) * w << ", " << (row[2] - row[0]) * h
             << "], \"score\": " << row[4];
        if (!masks.empty()) {
          const detection::Rle rle = detection::rle_encode_row_major(
              masks.data() + j * mask_h * mask_w, mask_h, mask_w, mask_w);
          // The compressed counts are ASCII '0'..'o': '\\' is the one character JSON escapes.
          std::string counts;
          for (char c : detection::rle_to_string(rle)) {
            if (c == '\\') counts += '\\';
            counts += c;
          }
          out_ << ", \"segmentation\": {\"size\": [" << mask_h << ", " << mask_w
               << "], \"counts\": \"" << counts << "\"}";
        }
        out_ << "}";
        first_ = false;
      }
    }
  }

 private:
  // A number as it is; anything else as a JSON string.
  static std::string json_id(const std::string& id) {
    const bool number =
        !id.empty() && id.size() < 19 &&
        std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number) return id;
    std::string out = "\"";
    for (char c : id) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
        out += buffer;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  std::ostream& out_;
  bool first_ = true;
  int64_t index_ = 0;
};

}  // namespace

class DetectionTask final : public Task {
 public:
  explicit DetectionTask(const Options&) {}

  // Detection models compute their own losses; SoftmaxLoss names the class the trainer creates
  // beside them and never calls.
  TaskDefaults defaults() const override {
    TaskDefaults d;
    d.model = "SSDMetaArch";
    d.loss = "SoftmaxLoss";
    d.optimizer = "RMSPropOptimizer";
    d.reader = "DetectionReader";
    return d;  // no train_dir: model_main.py requires --model_dir
  }

  // trainer.py's slim.learning.train log line "global step N: loss = L (T sec/step)", with
  // examples/sec; scalars Losses/TotalLoss and LearningRate as the API names them.
  void report_train_step(const TaskPipeline&, const TrainStepReport& step, std::ostream& log,
                         Summaries& summaries) const override {
    log << "global step " << step.global_step << ": loss = " << std::fixed << std::setprecision(4)
        << step.loss << " (" << std::setprecision(1) << step.examples_per_sec << " examples/sec)\n";
    summaries.add_scalar("Losses/TotalLoss", step.loss, step.global_step);
    summaries.add_scalar("LearningRate", step.learning_rate, step.global_step);
    summaries.add_scalar("examples/sec", step.examples_per_sec, step.global_step);
  }

  std::unique_ptr<TaskEvaluation> make_evaluation(const TaskPipeline& pipeline) const override {
    return std::make_unique<DetectionEvaluation>(pipeline);
  }

  std::vector<Metric> evaluation_metrics() const override {
    std::vector<Metric> out;
    for (const char* set : {"coco_detection_metrics", "coco_mask_metrics",
                            "pascal_voc_detection_metrics", "open_images_V2_detection_metrics"}) {
      for (const std::string& tag : detection::detection_evaluator_tags(set)) {
        out.push_back({tag, tag, 0.0});
      }
    }
    out.push_back({"loss", "loss", 0.0});
    out.push_back({"examples", "", 0.0});
    return out;
  }

  // The estimator's "Saving dict for global step N: ..." line, every metric written.
  void report_evaluation(int64_t global_step, const std::vector<Metric>& metrics, std::ostream& log,
                         Summaries& summaries) const override {
    log << "Saving dict for global step " << global_step << ":";
    bool first = true;
    for (const Metric& m : metrics) {
      if (m.tag.empty()) continue;
      log << (first ? " " : ", ") << m.name << " = " << std::defaultfloat << std::setprecision(6)
          << m.value;
      first = false;
      summaries.add_scalar(m.tag, m.value, global_step);
    }
    for (const Metric& m : metrics) {
      if (m.tag.empty()) log << ", " << m.name << " = " << static_cast<int64_t>(m.value);
    }
    log << ", global_step = " << global_step << "\n";
  }

  std::unique_ptr<PredictionWriter> make_prediction_writer(const TaskPipeline&, std::ostream& out,
                                                           int) const override {
    return std::make_unique<CocoResultsWriter>(out);
  }
};

}  // namespace trainyard::tasks

#define DETECTION_TASK_CLASSES(X)                     \
  X(task, detection, trainyard::tasks::DetectionTask, \
    "Object detection (the Object Detection API's model_main and train.py)")
// Never unloaded: this library carries the generated descriptors of the Object Detection API's
// messages (proto/od_*.proto), which protobuf's process-wide pool keeps, and every pipeline with
// a data_augmentation_options step refers to (od_dialect.cc).
TRAINYARD_PLUGIN_WITH_FLAGS(task_detection, 1, 0, 0, trainyard::kPluginNeverUnload,
                            DETECTION_TASK_CLASSES)
