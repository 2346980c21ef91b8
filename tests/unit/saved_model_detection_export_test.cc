// SavedModel export of detection models (detection_saved_model_contents, saved_model_export.h):
// SSDMetaArch created through the plugin registry (MobileNet v1 at depth 0.25 on 64 x 64 images)
// becomes the Object Detection API's exported graph: input image_tensor (uint8 [-1, -1, -1, 3]),
// cast and resized in the graph; signature serving_default with the API's input key `inputs` and
// outputs detection_boxes [-1, M, 4], detection_scores, detection_classes, num_detections; the box
// decoding in the graph; the multiclass NMS as a While loop over the batch whose body holds one
// NonMaxSuppressionV5 per class, merged by one TopKV2; and a frozen graph whose variables are
// Const nodes. NMS options without an exact TensorFlow form are refused naming the option, as is
// a model that computes on the host from a value the graph computes. That TensorFlow gives
// Trainyard's detections from such exports is the interop test
// interop.tensorflow_runs_exported_detectors (tests/integration/saved_model_detection_interop.py).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/wire/saved_model.pb.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;
namespace tfw = wire::tf;

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

DetectionSavedModel exported(const Opts& options,
                             const std::vector<int64_t>& image_shape = {64, 64, 3},
                             DetectionInputType input_type = DetectionInputType::kImageTensor) {
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", options);
  SavedModelExportOptions export_options;
  export_options.model_name = "SSDMetaArch";
  return detection_saved_model_contents(*model, ctx, image_shape, export_options, input_type);
}

int count(const google::protobuf::RepeatedPtrField<tfw::NodeDef>& nodes, const std::string& op) {
  int n = 0;
  for (const tfw::NodeDef& node : nodes) n += node.op() == op;
  return n;
}

const tfw::NodeDef* find(const tfw::GraphDef& graph, const std::string& name) {
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

std::vector<int64_t> dims(const tfw::TensorShapeProto& shape) {
  std::vector<int64_t> out;
  for (const auto& d : shape.dim()) out.push_back(d.size());
  return out;
}

TEST(SavedModelDetectionExport, SsdHasTheApisSignatureResizeDecodingAndPerClassNmsInALoop) {
  const DetectionSavedModel e = exported(ssd_options());
  tfw::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  ASSERT_EQ(saved.meta_graphs_size(), 1);
  const tfw::MetaGraphDef& meta = saved.meta_graphs(0);
  EXPECT_EQ(meta.meta_info_def().tags(0), "serve");
  ASSERT_EQ(meta.signature_def().size(), 1u);
  const tfw::SignatureDef& signature = meta.signature_def().at("serving_default");
  EXPECT_EQ(signature.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(signature.inputs().size(), 1u);
  const tfw::TensorInfo& input = signature.inputs().at("inputs");
  EXPECT_EQ(input.name(), "image_tensor:0");
  EXPECT_EQ(input.dtype(), tfw::DT_UINT8);
  EXPECT_EQ(dims(input.tensor_shape()), (std::vector<int64_t>{-1, -1, -1, 3}));
  const std::map<std::string, std::vector<int64_t>> wanted = {{"detection_boxes", {-1, 20, 4}},
                                                              {"detection_scores", {-1, 20}},
                                                              {"detection_classes", {-1, 20}},
                                                              {"num_detections", {-1}}};
  ASSERT_EQ(signature.outputs().size(), wanted.size());
  for (const auto& [name, shape] : wanted) {
    const tfw::TensorInfo& output = signature.outputs().at(name);
    EXPECT_EQ(output.name(), name + ":0");
    EXPECT_EQ(output.dtype(), tfw::DT_FLOAT) << name;
    EXPECT_EQ(dims(output.tensor_shape()), shape) << name;
  }
  const tfw::GraphDef& graph = meta.graph_def();
  const tfw::NodeDef* image = find(graph, "image_tensor");
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->op(), "Placeholder");
  EXPECT_EQ(image->attr().at("dtype").type(), tfw::DT_UINT8);
  const tfw::NodeDef* resize = find(graph, "Preprocessor/ResizeImage/ResizeBilinear");
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(resize->input(0), "ToFloat");
  EXPECT_FALSE(resize->attr().at("align_corners").b());
  // Decoding (the exp of the size codes) and the sigmoid are nodes; one loop over the batch, its
  // body one NonMaxSuppressionV5 per class; one TopKV2 merging the classes.
  EXPECT_EQ(count(graph.node(), "Exp"), 2);
  EXPECT_EQ(count(graph.node(), "Sigmoid"), 1);
  EXPECT_EQ(count(graph.node(), "TopKV2"), 1);
  EXPECT_EQ(count(graph.node(), "NonMaxSuppressionV5"), 0);
  ASSERT_EQ(count(graph.node(), "While"), 1);
  const tfw::NodeDef* loop = nullptr;
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.op() == "While") loop = &n;
  }
  std::map<std::string, const tfw::FunctionDef*> functions;
  for (const tfw::FunctionDef& f : graph.library().function()) {
    functions[f.signature().name()] = &f;
  }
  ASSERT_EQ(functions.count(loop->attr().at("body").func().name()), 1u);
  ASSERT_EQ(functions.count(loop->attr().at("cond").func().name()), 1u);
  const tfw::FunctionDef& body = *functions.at(loop->attr().at("body").func().name());
  EXPECT_EQ(count(body.node_def(), "NonMaxSuppressionV5"), 4);
  EXPECT_EQ(body.signature().input_arg_size(), body.signature().output_arg_size());
  EXPECT_EQ(body.ret().size(), static_cast<std::size_t>(body.signature().output_arg_size()));
  // Every variable the SavedModel restores is a VariableV2 node.
  EXPECT_FALSE(e.saved_model.variables.empty());
  for (const auto& [name, value] : e.saved_model.variables) {
    const tfw::NodeDef* v = find(graph, name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->op(), "VariableV2") << name;
  }
}

TEST(SavedModelDetectionExport, EncodedImageStringTensorIsDecodedByDecodeImageInALoop) {
  const DetectionSavedModel e =
      exported(ssd_options(), {64, 64, 3}, DetectionInputType::kEncodedImageStringTensor);
  tfw::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  const tfw::MetaGraphDef& meta = saved.meta_graphs(0);
  const tfw::TensorInfo& input = meta.signature_def().at("serving_default").inputs().at("inputs");
  EXPECT_EQ(input.name(), "encoded_image_string_tensor:0");
  EXPECT_EQ(input.dtype(), tfw::DT_STRING);
  EXPECT_EQ(dims(input.tensor_shape()), (std::vector<int64_t>{-1}));
  const tfw::GraphDef& graph = meta.graph_def();
  EXPECT_EQ(find(graph, "image_tensor"), nullptr);
  EXPECT_EQ(count(graph.node(), "While"), 2);  // the decoding and the NMS
  int decodes = 0, nms = 0;
  for (const tfw::FunctionDef& f : graph.library().function()) {
    decodes += count(f.node_def(), "DecodeImage");
    nms += count(f.node_def(), "NonMaxSuppressionV5");
  }
  EXPECT_EQ(decodes, 1);
  EXPECT_EQ(nms, 4);
  const tfw::NodeDef* to_float = find(graph, "ToFloat");
  ASSERT_NE(to_float, nullptr);
  const tfw::NodeDef* stacked = find(graph, to_float->input(0));
  ASSERT_NE(stacked, nullptr);
  EXPECT_EQ(stacked->op(), "TensorListStack");
}

TEST(SavedModelDetectionExport, TfExampleIsParsedForImageEncodedThenDecoded) {
  const DetectionSavedModel e =
      exported(ssd_options(), {64, 64, 3}, DetectionInputType::kTfExample);
  tfw::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  const tfw::MetaGraphDef& meta = saved.meta_graphs(0);
  const tfw::TensorInfo& input = meta.signature_def().at("serving_default").inputs().at("inputs");
  EXPECT_EQ(input.name(), "tf_example:0");
  EXPECT_EQ(input.dtype(), tfw::DT_STRING);
  const tfw::GraphDef& graph = meta.graph_def();
  const tfw::NodeDef* parse = find(graph, "ParseExample/ParseExampleV2");
  ASSERT_NE(parse, nullptr);
  EXPECT_EQ(parse->input(0), "tf_example");
  const tfw::NodeDef* keys = find(graph, parse->input(3));
  ASSERT_NE(keys, nullptr);
  EXPECT_EQ(keys->attr().at("value").tensor().string_val(0), "image/encoded");
  // TfExampleDecoder's default_value='': a scalar "" (an empty [0] tensor would make it required).
  const tfw::NodeDef* default_value = find(graph, parse->input(5));
  ASSERT_NE(default_value, nullptr);
  const tfw::TensorProto& d = default_value->attr().at("value").tensor();
  EXPECT_EQ(d.dtype(), tfw::DT_STRING);
  EXPECT_EQ(d.tensor_shape().dim_size(), 0);
  ASSERT_EQ(d.string_val_size(), 1);
  EXPECT_EQ(d.string_val(0), "");
  // The parsed strings are the decoding loop's.
  bool decoded = false;
  for (const tfw::NodeDef& n : graph.node()) {
    decoded = decoded || (n.op() == "While" && n.input(2) == parse->name());
  }
  EXPECT_TRUE(decoded);
}

TEST(SavedModelDetectionExport, TheFrozenGraphHoldsTheVariablesAsConstantsAndNoSaver) {
  const DetectionSavedModel e = exported(ssd_options());
  tfw::GraphDef frozen;
  ASSERT_TRUE(frozen.ParseFromString(e.frozen_graph_pb));
  EXPECT_EQ(count(frozen.node(), "VariableV2"), 0);
  for (const tfw::NodeDef& n : frozen.node()) {
    EXPECT_FALSE(n.name().starts_with("save/")) << n.name();
  }
  for (const auto& [name, value] : e.saved_model.variables) {
    const tfw::NodeDef* c = find(frozen, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->op(), "Const") << name;
    const std::string& content = c->attr().at("value").tensor().tensor_content();
    ASSERT_EQ(content.size(), value.size_bytes()) << name;
    const std::vector<float> values = value.to_vector<float>();
    EXPECT_EQ(std::memcmp(content.data(), values.data(), content.size()), 0) << name;
  }
  EXPECT_NE(find(frozen, "detection_boxes"), nullptr);
  EXPECT_EQ(frozen.library().function_size(), 2);
}

TEST(SavedModelDetectionExport, NmsOptionsWithoutAnExactTensorflowFormAreRefusedNamingTheOption) {
  auto refused = [&](const std::string& option, const OptionValue& value) {
    Opts o = ssd_options();
    o[kNms + option] = value;
    try {
      exported(o);
      ADD_FAILURE() << option << ": exported";
    } catch (const Unimplemented& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("SavedModel export of SSDMetaArch"), std::string::npos)
          << e.what();
    }
  };
  refused("soft_nms_sigma", 0.5);
  refused("use_class_agnostic_nms", true);
  refused("use_combined_nms", true);
}

// A detector (of any batch) whose postprocess computes on the host from a value the graph computes
// (as Faster R-CNN's proposals are), or (`host_made`) reads only a host-made tensor there.
class HostComputingDetector final : public DetectionModel {
 public:
  explicit HostComputingDetector(bool host_made) : host_made_(host_made) {}
  int64_t num_classes() const override { return 1; }
  PreprocessedImages preprocess(ModelContext& ctx, const Tensor& images) override {
    const int64_t batch = images.shape()[0];
    std::vector<int32_t> shapes;
    for (int64_t b = 0; b < batch; ++b) shapes.insert(shapes.end(), {8, 8, 3});
    // A scale variable, as a model's weights (a SavedModel restores at least one).
    const Tensor& scale =
        ctx.variable({"scale", Shape{}, DType::kF32, Initializer::constant(0.5)}).value();
    return {ops::mul(images, scale), Tensor::from_vector(ctx.backend(), Shape{batch, 3}, shapes)};
  }
  TensorDict predict(ModelContext&, const PreprocessedImages& inputs, Mode) override {
    const int64_t batch = inputs.images.shape()[0];
    return {{"scores", ops::reshape(ops::relu(inputs.images), Shape{batch, 64, 3})}};
  }
  TensorDict postprocess(ModelContext& ctx, const TensorDict& prediction,
                         const Tensor& true_image_shapes) override {
    const Tensor scores = prediction.at("scores");
    const int64_t batch = scores.shape()[0];
    Tensor boxes = ops::reshape(
        ops::slice(ops::concat(std::vector<Tensor>{scores, scores}, 2), {0, 0, 0}, {batch, 64, 4}),
        Shape{batch, 64, 1, 4});
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

TEST(SavedModelDetectionExport, ADetectorThatComputesOnTheHostFromAGraphValueIsRefused) {
  FakeModelContext ctx(cpu(), 3);
  SavedModelExportOptions options;
  options.model_name = "HostComputingDetector";
  HostComputingDetector host(false);
  try {
    detection_saved_model_contents(host, ctx, {8, 8, 3}, options);
    ADD_FAILURE() << "a host computation was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(
        message.find("SavedModel export of HostComputingDetector: the model copies the output"),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("op 'slice'"), std::string::npos) << message;
  }
  HostComputingDetector host_made(true);
  const DetectionSavedModel e = detection_saved_model_contents(host_made, ctx, {8, 8, 3}, options);
  tfw::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  EXPECT_EQ(count(saved.meta_graphs(0).graph_def().node(), "While"), 1);
}

TEST(SavedModelDetectionExport, AnImageShapeThatIsNotHw3IsRefused) {
  EXPECT_THROW(exported(ssd_options(), {64, 64}), InvalidArgument);
  EXPECT_THROW(exported(ssd_options(), {64, 64, 1}), InvalidArgument);
}

// keep_aspect_ratio_resizer with pad_to_max_dimension (DetectionResizeToRange): the graph computes
// the size from the images' shape in f32 (Round of each side, SelectV2 of the smaller size),
// resizes to it (ResizeBilinear, align_corners false) and pads to 96 x 96; the NMS takes each
// image's clip window from it. That TensorFlow gives Trainyard's detections on images of several
// aspect ratios is interop.tensorflow_runs_exported_detectors.
TEST(SavedModelDetectionExport, ResizeToRangeResizesToTheImagesSizeAndPadsInTheGraph) {
  Opts options = ssd_options();
  options["image_resizer.fixed_shape_resizer.height"] = int64_t{96};
  options["image_resizer.fixed_shape_resizer.width"] = int64_t{96};
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", options);
  SavedModelExportOptions export_options;
  export_options.model_name = "SSDMetaArch";
  const DetectionSavedModel e = detection_saved_model_contents(
      *model, ctx, {96, 96, 3}, export_options, DetectionInputType::kImageTensor,
      DetectionResizeToRange{64, 96});
  tfw::SavedModel saved;
  ASSERT_TRUE(saved.ParseFromString(e.saved_model.saved_model_pb));
  const tfw::GraphDef& graph = saved.meta_graphs(0).graph_def();
  EXPECT_EQ(find(graph, "Preprocessor/ResizeImage/ResizeBilinear"), nullptr);
  std::map<std::string, int> ops;
  const tfw::NodeDef* resize = nullptr;
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.name().rfind("Preprocessor/ResizeToRange/", 0) != 0) continue;
    ++ops[n.op()];
    if (n.op() == "ResizeBilinear") resize = &n;
  }
  EXPECT_EQ(ops["Round"], 4);  // the larger and the smaller size's two sides
  EXPECT_EQ(ops["SelectV2"], 1);
  EXPECT_EQ(ops["Pad"], 1);
  EXPECT_EQ(ops["Tile"], 1);  // the clip windows
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(resize->input(0), "ToFloat");
  EXPECT_FALSE(resize->attr().at("align_corners").b());
  EXPECT_FALSE(resize->attr().at("half_pixel_centers").b());
  // The NMS's window bounds are gathered from the clip windows, not constants.
  int windows_read = 0;
  for (const tfw::NodeDef& n : graph.node()) {
    for (const std::string& input : n.input()) {
      windows_read += input.rfind("Preprocessor/ResizeToRange/Tile", 0) == 0 &&
                      n.name().rfind("Preprocessor/", 0) != 0;
    }
  }
  EXPECT_EQ(windows_read, 2);  // its lower and upper bounds
  // The model must be captured at max_dimension x max_dimension.
  EXPECT_THROW(detection_saved_model_contents(*model, ctx, {64, 64, 3}, export_options,
                                              DetectionInputType::kImageTensor,
                                              DetectionResizeToRange{64, 96}),
               InvalidArgument);
}

}  // namespace
}  // namespace trainyard
