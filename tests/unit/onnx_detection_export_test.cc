// ONNX export of detection models (detection_onnx_model_bytes, onnx_export.h): SSDMetaArch created
// through the plugin registry (MobileNet v1 at depth 0.25 on 64 x 64 images) becomes a graph with
// the Object Detection API's exported names (input image_tensor uint8 [N, 64, 64, 3]; outputs
// detection_boxes [N, M, 4], detection_scores, detection_classes, num_detections), its box
// decoding in the graph (not a constant of the captured image's boxes) and the multiclass NMS as
// NonMaxSuppression, ScatterND and TopK; NMS options without an exact ONNX form are refused
// naming the option, as is a model that computes on the host from a value the graph computes
// (proposals computed on the host would become constants). Faster R-CNN's and Mask R-CNN's
// exports: tests/unit/faster_rcnn_meta_arch_test.cc and mask_rcnn_meta_arch_test.cc. That ONNX
// Runtime gives Trainyard's detections from such files is the interop test
// interop.onnxruntime_runs_exported_detectors (tests/integration/onnx_detection_interop.py).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/wire/onnx.pb.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

const std::string kNms = "post_processing.batch_non_max_suppression.";

// ssd_mobilenet_v1_coco.config's `ssd` message at 64 x 64 and depth 0.25, flattened as the config
// converter does.
Opts ssd_options() {
  Opts o;
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = int64_t{64};
  o["image_resizer.fixed_shape_resizer.width"] = int64_t{64};
  o["box_coder"] = std::string("faster_rcnn_box_coder");
  o["matcher"] = std::string("argmax_matcher");
  o["similarity_calculator"] = std::string("iou_similarity");
  o["anchor_generator"] = std::string("ssd_anchor_generator");
  o["box_predictor"] = std::string("convolutional_box_predictor");
  for (const std::string prefix : {"feature_extractor.conv_hyperparams",
                                   "box_predictor.convolutional_box_predictor.conv_hyperparams"}) {
    o[prefix] = true;
    o[prefix + ".activation"] = std::string("RELU_6");
    o[prefix + ".initializer"] = std::string("truncated_normal_initializer");
    o[prefix + ".initializer.truncated_normal_initializer.stddev"] = 0.03;
    o[prefix + ".batch_norm"] = true;
    o[prefix + ".batch_norm.scale"] = true;
  }
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("ssd_mobilenet_v1");
  o["feature_extractor.depth_multiplier"] = 0.25;
  o["feature_extractor.min_depth"] = int64_t{8};
  o["post_processing"] = true;
  o["post_processing.batch_non_max_suppression"] = true;
  o[kNms + "score_threshold"] = 1e-8;
  o[kNms + "max_detections_per_class"] = int64_t{20};
  o[kNms + "max_total_detections"] = int64_t{20};
  o["post_processing.score_converter"] = std::string("SIGMOID");
  return o;
}

std::string exported_bytes(const Opts& options,
                           const std::vector<int64_t>& image_shape = {64, 64, 3},
                           bool resize_images = false,
                           std::optional<DetectionResizeToRange> resize_to_range = std::nullopt) {
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", options);
  OnnxExportOptions export_options;
  export_options.model_name = "SSDMetaArch";
  export_options.resize_images = resize_images;
  export_options.resize_to_range = resize_to_range;
  return detection_onnx_model_bytes(*model, ctx, image_shape, export_options);
}

std::vector<std::string> dims(const wire::onnx::ValueInfoProto& info) {
  std::vector<std::string> out;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  }
  return out;
}

int count(const wire::onnx::ModelProto& model, const std::string& op_type) {
  int n = 0;
  for (const wire::onnx::NodeProto& node : model.graph().node()) n += node.op_type() == op_type;
  return n;
}

TEST(OnnxDetectionExport, SsdHasTheApisInputAndOutputsWithDecodingAndNmsInTheGraph) {
  wire::onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(exported_bytes(ssd_options())));
  ASSERT_EQ(model.graph().input_size(), 1);
  const auto& input = model.graph().input(0);
  EXPECT_EQ(input.name(), "image_tensor");
  EXPECT_EQ(input.type().tensor_type().elem_type(), wire::onnx::TensorProto::UINT8);
  EXPECT_EQ(dims(input), (std::vector<std::string>{"N", "64", "64", "3"}));
  ASSERT_EQ(model.graph().output_size(), 4);
  const std::vector<std::pair<std::string, std::vector<std::string>>> wanted = {
      {"detection_boxes", {"N", "20", "4"}},
      {"detection_scores", {"N", "20"}},
      {"detection_classes", {"N", "20"}},
      {"num_detections", {"N"}}};
  for (int i = 0; i < 4; ++i) {
    const auto& output = model.graph().output(i);
    EXPECT_EQ(output.name(), wanted[static_cast<std::size_t>(i)].first);
    EXPECT_EQ(dims(output), wanted[static_cast<std::size_t>(i)].second) << output.name();
    EXPECT_EQ(output.type().tensor_type().elem_type(), wire::onnx::TensorProto::FLOAT)
        << output.name();
  }
  // Decoding (the exp of the size codes) and the sigmoid are nodes; one NMS over all classes,
  // merged by one TopK.
  EXPECT_EQ(count(model, "Exp"), 2);
  EXPECT_EQ(count(model, "Sigmoid"), 1);
  EXPECT_EQ(count(model, "NonMaxSuppression"), 1);
  EXPECT_EQ(count(model, "ScatterND"), 1);
  EXPECT_EQ(count(model, "TopK"), 1);
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "NonMaxSuppression") continue;
    ASSERT_EQ(node.input_size(), 5);
  }
}

// resize_images (the export of a fixed_shape_resizer's model): the input takes images of any
// size, and the first nodes cast them to f32 ("ToFloat") and resize them to the model's size with
// TensorFlow's ResizeBilinear sampling (linear, asymmetric), the target size [N, 3, 64, 64] made
// from the input's dynamic batch.
TEST(OnnxDetectionExport, ResizingTheInputTakesImagesOfAnySize) {
  wire::onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(exported_bytes(ssd_options(), {64, 64, 3}, true)));
  ASSERT_EQ(model.graph().input_size(), 1);
  const auto& input = model.graph().input(0);
  EXPECT_EQ(input.name(), "image_tensor");
  EXPECT_EQ(input.type().tensor_type().elem_type(), wire::onnx::TensorProto::UINT8);
  EXPECT_EQ(dims(input), (std::vector<std::string>{"N", "H", "W", "3"}));
  ASSERT_GT(model.graph().node_size(), 0);
  EXPECT_EQ(model.graph().node(0).op_type(), "Cast");
  EXPECT_EQ(model.graph().node(0).output(0), "ToFloat");
  ASSERT_EQ(count(model, "Resize"), 1);
  std::map<std::string, std::string> modes;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "Resize") continue;
    for (const auto& a : node.attribute()) modes[a.name()] = a.s();
    ASSERT_EQ(node.input_size(), 4);
    EXPECT_EQ(node.input(1), "");
    EXPECT_EQ(node.input(2), "");
  }
  EXPECT_EQ(modes["mode"], "linear");
  EXPECT_EQ(modes["coordinate_transformation_mode"], "asymmetric");
  // The sizes: the input's batch, 3 and the model's [64, 64].
  bool size = false;
  for (const auto& t : model.graph().initializer()) {
    size |= t.name().rfind("Preprocessor/ResizeImage/", 0) == 0 &&
            std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end()) ==
                std::vector<int64_t>{64, 64};
  }
  EXPECT_TRUE(size);
  // Every node's inputs are defined before it (the resize was put in front).
  std::set<std::string> defined{"image_tensor", ""};
  for (const auto& t : model.graph().initializer()) defined.insert(t.name());
  for (const auto& node : model.graph().node()) {
    for (const auto& in : node.input())
      EXPECT_EQ(defined.count(in), 1u) << node.name() << " " << in;
    defined.insert(node.output().begin(), node.output().end());
  }
}

// resize_to_range (keep_aspect_ratio_resizer with pad_to_max_dimension): the batch's size computed
// from the input's shape as _compute_new_dynamic_size does (two Rounds: the large and the small
// candidate, a Where between them), the resized images padded to max_dimension, and each
// image's clip window (Preprocessor/clip_windows, [N, 4]) read by the NMS, whose boxes are put in
// that window's frame.
TEST(OnnxDetectionExport, ResizeToRangeComputesTheSizePadsAndClipsEachImagesWindow) {
  wire::onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(
      exported_bytes(ssd_options(), {64, 64, 3}, true, DetectionResizeToRange{48, 64})));
  EXPECT_EQ(dims(model.graph().input(0)), (std::vector<std::string>{"N", "H", "W", "3"}));
  EXPECT_EQ(count(model, "Round"), 2);
  EXPECT_EQ(count(model, "Resize"), 1);
  EXPECT_EQ(count(model, "Pad"), 1);
  int window_readers = 0;
  bool windows_made = false;
  for (const auto& node : model.graph().node()) {
    for (const auto& out : node.output()) windows_made |= out == "Preprocessor/clip_windows";
    for (const auto& in : node.input()) window_readers += in == "Preprocessor/clip_windows";
  }
  EXPECT_TRUE(windows_made);
  EXPECT_EQ(window_readers, 2);  // the windows' lower and upper corners
}

TEST(OnnxDetectionExport, NmsOptionsWithoutAnExactOnnxFormAreRefusedNamingTheOption) {
  auto refused = [&](const std::string& option, const OptionValue& value) {
    Opts o = ssd_options();
    o[kNms + option] = value;
    try {
      exported_bytes(o);
      ADD_FAILURE() << option << ": exported";
    } catch (const Unimplemented& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("SSDMetaArch"), std::string::npos) << e.what();
    }
  };
  refused("soft_nms_sigma", 0.5);
  refused("use_class_agnostic_nms", true);
  refused("use_combined_nms", true);
}

// A detector whose postprocess computes on the host from a value the graph computes (as Faster
// R-CNN's proposals once were), or (`host_made`) reads only a host-made tensor there.
class HostComputingDetector final : public DetectionModel {
 public:
  explicit HostComputingDetector(bool host_made) : host_made_(host_made) {}
  int64_t num_classes() const override { return 1; }
  PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) override {
    return {ops::mul(images, 0.5),
            Tensor::from_vector(ctx.backend(), Shape{1, 3}, std::vector<int32_t>{8, 8, 3})};
  }
  TensorDict predict(ModelContext&, const PreprocessedImages& inputs, Mode) override {
    return {{"scores", ops::reshape(ops::relu(inputs.images), Shape{1, 64, 3})}};
  }
  TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction,
                         const Tensor& true_image_shapes) override {
    const Tensor scores = prediction.at("scores");
    Tensor boxes = ops::reshape(
        ops::slice(ops::concat(std::vector<Tensor>{scores, scores}, 2), {0, 0, 0}, {1, 64, 4}),
        Shape{1, 64, 1, 4});
    if (host_made_) {
      EXPECT_EQ(true_image_shapes.to_vector<int32_t>()[0], 8);
    } else {
      boxes = Tensor::from_vector(ctx.backend(), boxes.shape(), boxes.to_vector<float>());
    }
    MultiClassNmsAttrs nms;
    nms.max_detections_per_class = 5;
    nms.max_total_detections = 5;
    const ops::NmsDetections d = ops::batch_multiclass_non_max_suppression(boxes, scores, nms);
    return {{"detection_boxes", d.boxes},
            {"detection_scores", d.scores},
            {"detection_classes", d.classes},
            {"num_detections", d.num_detections}};
  }
  TensorDict loss(ModelContext&, const TensorDict&, const Tensor&) override { return {}; }
  void provide_groundtruth(Groundtruth) override {}
  std::map<std::string, std::string> restore_map(const std::string&, bool) override { return {}; }

 private:
  bool host_made_;
};

TEST(OnnxDetectionExport, ADetectorThatComputesOnTheHostFromAGraphValueIsRefused) {
  FakeModelContext ctx(cpu(), 3);
  OnnxExportOptions options;
  options.model_name = "HostComputingDetector";
  HostComputingDetector host(false);
  try {
    detection_onnx_model_bytes(host, ctx, {8, 8, 3}, options);
    ADD_FAILURE() << "a host computation was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ONNX export of HostComputingDetector: the model copies the output"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("op 'slice'"), std::string::npos) << message;
  }
  HostComputingDetector host_made(true);
  wire::onnx::ModelProto model;
  ASSERT_TRUE(
      model.ParseFromString(detection_onnx_model_bytes(host_made, ctx, {8, 8, 3}, options)));
  EXPECT_EQ(count(model, "NonMaxSuppression"), 1);
}

TEST(OnnxDetectionExport, AnImageShapeThatIsNotHw3IsRefused) {
  EXPECT_THROW(exported_bytes(ssd_options(), {64, 64}), InvalidArgument);
  EXPECT_THROW(exported_bytes(ssd_options(), {64, 64, 1}), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
