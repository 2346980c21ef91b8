// TFLite export of SSD (ssd_tflite_model_bytes, tflite_export.h), read back through the code flatc
// generates from core/proto/tflite_schema.fbs: SSDMetaArch created through the plugin registry
// (MobileNet v1 at depth 0.25 on 64 x 64 images) becomes export_tflite_ssd_graph.py's graph, the
// input normalized_input_image_tensor [1, 64, 64, 3], the score conversion (LOGISTIC) as an
// operator, and the custom op TFLite_Detection_PostProcess reading raw_outputs/box_encodings,
// raw_outputs/class_predictions and the anchors (center-size), its flexbuffer options under the
// names the TFLite kernel reads, its four outputs under the converter's names; without the op
// the raw outputs are the outputs; a quantization-aware model's activations keep their fake
// quantization as FAKE_QUANT; options out of range are refused naming the flag. That TF
// Lite's interpreter runs such a file and gives Trainyard's detections is
// interop.tflite_interpreter_runs_exported_ssd (tests/integration/tflite_detection_interop.py).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flatbuffers/flexbuffers.h"
#include "test_backends.h"
#include "test_registry.h"
#include "tflite_reading.h"
#include "trainyard/core/tflite_export.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

namespace fb = trainyard::tflite;
using namespace tflite_reading;  // NOLINT(build/namespaces): the file reads models back
using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

// ssd_mobilenet_v1_coco.config's `ssd` message at 64 x 64 and depth 0.25, flattened as the config
// converter does.
Opts ssd_options() {
  Opts o;
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = int64_t{64};
  o["image_resizer.fixed_shape_resizer.width"] = int64_t{64};
  o["anchor_generator"] = std::string("ssd_anchor_generator");
  for (const std::string prefix : {"feature_extractor.conv_hyperparams",
                                   "box_predictor.convolutional_box_predictor.conv_hyperparams"}) {
    o[prefix] = true;
    o[prefix + ".activation"] = std::string("RELU_6");
    o[prefix + ".initializer"] = std::string("truncated_normal_initializer");
    o[prefix + ".batch_norm"] = true;
  }
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("ssd_mobilenet_v1");
  o["feature_extractor.depth_multiplier"] = 0.25;
  o["feature_extractor.min_depth"] = int64_t{8};
  o["post_processing"] = true;
  o["post_processing.score_converter"] = std::string("SIGMOID");
  return o;
}

// The pipeline's options as export_tflite reads them, with values unlike the defaults.
TfliteSsdPipelineOptions pipeline_options() {
  TfliteSsdPipelineOptions p;
  p.score_converter = "SIGMOID";
  p.nms_score_threshold = 1e-8f;
  p.nms_iou_threshold = 0.5f;
  p.y_scale = 8.0f;
  p.x_scale = 12.0f;
  p.h_scale = 4.0f;
  p.w_scale = 6.0f;
  return p;
}

struct Exported {
  std::string bytes;
  std::vector<float> anchors;  // the model's, corners [A, 4]
};

Exported exported(const TfliteSsdOptions& ssd,
                  const TfliteSsdPipelineOptions& pipeline = pipeline_options()) {
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", ssd_options());
  Exported out;
  out.bytes = ssd_tflite_model_bytes(*model, ctx, "SSDMetaArch", {64, 64, 3}, pipeline, ssd);
  PreprocessedImages pre{ops::zeros(cpu(), Shape{1, 64, 64, 3}),
                         Tensor::from_vector(cpu(), Shape{1, 3}, std::vector<int32_t>{64, 64, 3})};
  out.anchors = model->predict(ctx, pre, Mode::kPredict).at("anchors").to_vector<float>();
  return out;
}

TEST(TfliteSsdExport, TheGraphEndsWithTheDetectionPostProcessCustomOpAndItsOptions) {
  TfliteSsdOptions ssd;
  ssd.max_detections = 7;
  ssd.max_classes_per_detection = 2;
  ssd.detections_per_class = 3;
  ssd.use_regular_nms = true;
  const Exported e = exported(ssd);
  const fb::Model* model = verified(e.bytes);
  const fb::SubGraph* graph = model->subgraphs()->Get(0);
  ASSERT_EQ(graph->inputs()->size(), 1u);
  const fb::Tensor* input = tensor(model, graph->inputs()->Get(0));
  EXPECT_EQ(input->name()->str(), "normalized_input_image_tensor");
  EXPECT_EQ(shape(input), (std::vector<int32_t>{1, 64, 64, 3}));
  // export_tflite_ssd_graph.py's batch is 1: no dynamic dimension.
  EXPECT_TRUE(input->shape_signature() == nullptr || input->shape_signature()->size() == 0);

  const fb::Operator* last = graph->operators()->Get(graph->operators()->size() - 1);
  const fb::OperatorCode* code = model->operator_codes()->Get(last->opcode_index());
  EXPECT_EQ(code->builtin_code(), fb::BuiltinOperator_CUSTOM);
  EXPECT_EQ(code->deprecated_builtin_code(), fb::BuiltinOperator_CUSTOM);
  ASSERT_NE(code->custom_code(), nullptr);
  EXPECT_EQ(code->custom_code()->str(), "TFLite_Detection_PostProcess");
  EXPECT_EQ(last->custom_options_format(), fb::CustomOptionsFormat_FLEXBUFFERS);
  ASSERT_NE(last->custom_options(), nullptr);
  const flexbuffers::Map options =
      flexbuffers::GetRoot(last->custom_options()->data(), last->custom_options()->size()).AsMap();
  EXPECT_EQ(options["max_detections"].AsInt32(), 7);
  EXPECT_EQ(options["max_classes_per_detection"].AsInt32(), 2);
  EXPECT_EQ(options["detections_per_class"].AsInt32(), 3);
  EXPECT_TRUE(options["use_regular_nms"].AsBool());
  EXPECT_FLOAT_EQ(options["nms_score_threshold"].AsFloat(), 1e-8f);
  EXPECT_FLOAT_EQ(options["nms_iou_threshold"].AsFloat(), 0.5f);
  EXPECT_EQ(options["num_classes"].AsInt32(), 4);
  EXPECT_FLOAT_EQ(options["y_scale"].AsFloat(), 8.0f);
  EXPECT_FLOAT_EQ(options["x_scale"].AsFloat(), 12.0f);
  EXPECT_FLOAT_EQ(options["h_scale"].AsFloat(), 4.0f);
  EXPECT_FLOAT_EQ(options["w_scale"].AsFloat(), 6.0f);

  // Its inputs: the raw outputs (sigmoid scores, background first) and the anchors as
  // ycenter, xcenter, height, width.
  ASSERT_EQ(last->inputs()->size(), 3u);
  const fb::Tensor* boxes = tensor(model, last->inputs()->Get(0));
  const fb::Tensor* scores = tensor(model, last->inputs()->Get(1));
  const fb::Tensor* anchors = tensor(model, last->inputs()->Get(2));
  const auto count = static_cast<int32_t>(e.anchors.size() / 4);
  EXPECT_EQ(boxes->name()->str(), "raw_outputs/box_encodings");
  EXPECT_EQ(shape(boxes), (std::vector<int32_t>{1, count, 4}));
  EXPECT_EQ(scores->name()->str(), "raw_outputs/class_predictions");
  EXPECT_EQ(shape(scores), (std::vector<int32_t>{1, count, 5}));
  EXPECT_EQ(anchors->name()->str(), "anchors");
  EXPECT_EQ(shape(anchors), (std::vector<int32_t>{count, 4}));
  const std::vector<float> center_size = buffer_values<float>(model, anchors);
  ASSERT_EQ(center_size.size(), e.anchors.size());
  for (std::size_t i = 0; i < center_size.size(); i += 4) {
    const float* corners = &e.anchors[i];
    EXPECT_FLOAT_EQ(center_size[i], (corners[0] + corners[2]) / 2) << "anchor " << i / 4;
    EXPECT_FLOAT_EQ(center_size[i + 1], (corners[1] + corners[3]) / 2) << "anchor " << i / 4;
    EXPECT_FLOAT_EQ(center_size[i + 2], corners[2] - corners[0]) << "anchor " << i / 4;
    EXPECT_FLOAT_EQ(center_size[i + 3], corners[3] - corners[1]) << "anchor " << i / 4;
  }
  const fb::Operator* before = graph->operators()->Get(graph->operators()->size() - 2);
  EXPECT_EQ(builtin_code(model, before), fb::BuiltinOperator_LOGISTIC);

  // Its outputs are the subgraph's: D = max_detections * max_classes_per_detection rows.
  const std::vector<std::pair<std::string, std::vector<int32_t>>> wanted = {
      {"TFLite_Detection_PostProcess", {1, 14, 4}},
      {"TFLite_Detection_PostProcess:1", {1, 14}},
      {"TFLite_Detection_PostProcess:2", {1, 14}},
      {"TFLite_Detection_PostProcess:3", {1}}};
  ASSERT_EQ(last->outputs()->size(), 4u);
  ASSERT_EQ(graph->outputs()->size(), 4u);
  for (flatbuffers::uoffset_t i = 0; i < 4; ++i) {
    EXPECT_EQ(graph->outputs()->Get(i), last->outputs()->Get(i));
    const fb::Tensor* out = tensor(model, last->outputs()->Get(i));
    EXPECT_EQ(out->name()->str(), wanted[i].first);
    EXPECT_EQ(shape(out), wanted[i].second) << wanted[i].first;
    EXPECT_EQ(out->type(), fb::TensorType_FLOAT32);
  }
}

TEST(TfliteSsdExport, WithoutThePostProcessingOpTheRawOutputsAreTheOutputs) {
  TfliteSsdOptions ssd;
  ssd.add_postprocessing_op = false;
  const Exported e = exported(ssd);
  const fb::Model* model = verified(e.bytes);
  const fb::SubGraph* graph = model->subgraphs()->Get(0);
  ASSERT_EQ(graph->outputs()->size(), 2u);
  EXPECT_EQ(tensor(model, graph->outputs()->Get(0))->name()->str(), "raw_outputs/box_encodings");
  EXPECT_EQ(tensor(model, graph->outputs()->Get(1))->name()->str(),
            "raw_outputs/class_predictions");
  for (const fb::OperatorCode* code : *model->operator_codes()) {
    EXPECT_NE(code->builtin_code(), fb::BuiltinOperator_CUSTOM);
  }
}

TEST(TfliteSsdExport, AQuantizationAwareModelKeepsItsActivationsFakeQuantizationAsFakeQuant) {
  Opts options = ssd_options();
  options["graph_rewriter.quantization"] = true;
  options["graph_rewriter.quantization.delay"] = int64_t{0};
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", options);
  const std::string bytes =
      ssd_tflite_model_bytes(*model, ctx, "SSDMetaArch", {64, 64, 3}, pipeline_options(), {});
  const fb::Model* m = verified(bytes);
  int fake_quants = 0;
  for (const fb::Operator* op : *m->subgraphs()->Get(0)->operators()) {
    if (builtin_code(m, op) != fb::BuiltinOperator_FAKE_QUANT) {
      continue;
    }
    ++fake_quants;
    const fb::FakeQuantOptions* o = op->builtin_options_as_FakeQuantOptions();
    ASSERT_NE(o, nullptr);
    // act_quant's range as initialized (0, 6): nothing has trained it.
    EXPECT_EQ(o->min(), 0.0f);
    EXPECT_EQ(o->max(), 6.0f);
    EXPECT_EQ(o->num_bits(), 8);
    EXPECT_FALSE(o->narrow_range());
  }
  // Every layer's activations: MobileNet v1's 27 and the extra layers' and predictors'; the
  // weights' fake quantization is folded into the constants.
  EXPECT_GE(fake_quants, 27);
}

std::string quantized_export(bool quantization_aware, const TfliteQuantization& quantization) {
  Opts options = ssd_options();
  if (quantization_aware) {
    options["graph_rewriter.quantization"] = true;
    options["graph_rewriter.quantization.delay"] = int64_t{0};
  }
  FakeModelContext ctx(cpu(), /*num_classes=*/4, /*seed=*/0, /*initializer_seed=*/3);
  auto model = test::plugin_registry().create<DetectionModel>(ClassKind::kDetectionModel,
                                                              "SSDMetaArch", options);
  return ssd_tflite_model_bytes(*model, ctx, "SSDMetaArch", {64, 64, 3}, pipeline_options(), {},
                                quantization);
}

// TOCO's --inference_type=QUANTIZED_UINT8: the fake quantizations' ranges become the values'
// uint8 parameters (act_quant's initial (0, 6): scale 6 / 255, zero point 0), the input's
// come from --mean_values / --std_values, the biases are int32 at input scale x weight scale, the
// class scores after the sigmoid take TFLite's fixed 1/256, and only the post-processing's
// outputs stay float.
TEST(TfliteSsdExport, QuantizedUint8TakesTheFakeQuantizationRangesAsScalesAndZeroPoints) {
  TfliteQuantization quantization;
  quantization.uint8 = true;
  quantization.mean_value = 127.0;
  quantization.std_value = 64.0;
  const std::string bytes = quantized_export(true, quantization);
  const fb::Model* m = verified(bytes);
  const fb::SubGraph* graph = m->subgraphs()->Get(0);
  const auto params = [](const fb::Tensor* t) {
    EXPECT_NE(t->quantization(), nullptr) << t->name()->str();
    return std::make_pair(t->quantization()->scale()->Get(0),
                          t->quantization()->zero_point()->Get(0));
  };
  const fb::Tensor* input = tensor(m, graph->inputs()->Get(0));
  EXPECT_EQ(input->type(), fb::TensorType_UINT8);
  EXPECT_EQ(params(input), std::make_pair(1.0f / 64.0f, int64_t{127}));
  int convolutions = 0, at_initial_range = 0;
  for (const fb::Operator* op : *graph->operators()) {
    const fb::BuiltinOperator code = builtin_code(m, op);
    EXPECT_NE(code, fb::BuiltinOperator_FAKE_QUANT);
    if (code == fb::BuiltinOperator_CUSTOM) {
      for (int32_t out : *op->outputs()) EXPECT_EQ(tensor(m, out)->type(), fb::TensorType_FLOAT32);
      EXPECT_EQ(tensor(m, op->inputs()->Get(1))->type(), fb::TensorType_UINT8);
      EXPECT_EQ(params(tensor(m, op->inputs()->Get(1))), std::make_pair(1.0f / 256.0f, int64_t{0}));
      continue;
    }
    const fb::Tensor* out = tensor(m, op->outputs()->Get(0));
    EXPECT_EQ(out->type(), fb::TensorType_UINT8) << out->name()->str();
    if (code != fb::BuiltinOperator_CONV_2D && code != fb::BuiltinOperator_DEPTHWISE_CONV_2D) {
      continue;
    }
    ++convolutions;
    if (params(out) == std::make_pair(static_cast<float>(6.0 / 255.0), int64_t{0})) {
      ++at_initial_range;
    }
    const fb::Tensor* x = tensor(m, op->inputs()->Get(0));
    const fb::Tensor* w = tensor(m, op->inputs()->Get(1));
    const fb::Tensor* bias = tensor(m, op->inputs()->Get(2));
    EXPECT_EQ(w->type(), fb::TensorType_UINT8);
    EXPECT_EQ(bias->type(), fb::TensorType_INT32);
    EXPECT_FLOAT_EQ(params(bias).first, params(x).first * params(w).first);
    EXPECT_EQ(params(bias).second, 0);
  }
  // Every convolution's output carries a range; MobileNet v1's and the extra layers' are
  // act_quant's initial one, the box predictors' too (nothing trained them).
  EXPECT_GE(convolutions, 27);
  EXPECT_EQ(at_initial_range, convolutions);
}

TEST(TfliteSsdExport, QuantizedUint8OfAModelWithoutFakeQuantizationIsRefusedNamingAValue) {
  TfliteQuantization quantization;
  quantization.uint8 = true;
  try {
    quantized_export(false, quantization);
    ADD_FAILURE() << "expected Unimplemented";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("has no quantization range"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SSDMetaArch"), std::string::npos) << e.what();
  }
  quantization.std_value = 0.0;
  EXPECT_THROW(quantized_export(true, quantization), InvalidArgument);
}

TEST(TfliteSsdExport, OptionsOutOfRangeAreRefusedNamingTheFlagOrTheConfigField) {
  auto refused = [](const TfliteSsdOptions& ssd, const TfliteSsdPipelineOptions& pipeline,
                    const std::string& named) {
    try {
      exported(ssd, pipeline);
      ADD_FAILURE() << "expected InvalidArgument naming " << named;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("SSDMetaArch"), std::string::npos) << e.what();
    }
  };
  TfliteSsdOptions ssd;
  ssd.max_classes_per_detection = 5;  // of 4 classes
  refused(ssd, pipeline_options(), "--max_classes_per_detection");
  ssd = {};
  ssd.max_detections = 0;
  refused(ssd, pipeline_options(), "--max_detections");
  ssd = {};
  ssd.detections_per_class = -1;
  refused(ssd, pipeline_options(), "--detections_per_class");
  TfliteSsdPipelineOptions pipeline = pipeline_options();
  pipeline.nms_iou_threshold = 0.0f;  // the kernel takes (0, 1]
  refused({}, pipeline, "iou_threshold");
  pipeline = pipeline_options();
  pipeline.score_converter = "TANH";
  refused({}, pipeline, "score_converter");
}

}  // namespace
}  // namespace trainyard
