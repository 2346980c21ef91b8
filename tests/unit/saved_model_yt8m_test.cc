// The starter code's SavedModel of YouTube-8M models (saved_model_export.h's
// example_saved_model_contents; export_model.py's ModelExporter): the serving_default signature
// (example_bytes -> video_id, class_indexes, predictions), the parsing of serialized tf.Example
// and tf.SequenceExample as readers.py does it (ParseExampleV2 / ParseSequenceExampleV2 with
// their keys, DecodeRaw, utils.Dequantize's constants, the padding to max_frames), the model's
// forward behind it (MoeModel's reshape of the batch merged with the classes keeps -1 first),
// TopKV2 with k = min(20, classes), and the errors. That TensorFlow runs these graphs on
// `trainyard data synth-yt8m`'s records and gets `trainyard predict`'s top 20 is the interop
// test interop.tensorflow_runs_exported_saved_models.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/wire/saved_model.pb.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;
namespace tfw = wire::tf;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return test::plugin_registry().create<BaseModel>(ClassKind::kModel, name, options);
}

// The YouTube-8M task's prepare_batch: the starter's l2_normalize of the features.
void l2_normalize(Batch& batch) {
  batch.features.at("features") = ops::l2_normalize(batch.features.at("features"), -1, 1e-12);
}

ExampleServingInput video_input() {
  ExampleServingInput input;
  input.feature_names = {"mean_rgb", "mean_audio"};
  input.feature_sizes = {16, 8};
  return input;
}

ExampleServingInput frame_input() {
  ExampleServingInput input;
  input.frame_level = true;
  input.feature_names = {"rgb", "audio"};
  input.feature_sizes = {16, 8};
  input.max_frames = 7;
  return input;
}

tfw::SavedModel exported(BaseModel& model, FakeModelContext& ctx, const ExampleServingInput& input,
                         const std::string& name) {
  SavedModelExportOptions options;
  options.model_name = name;
  tfw::SavedModel proto;
  EXPECT_TRUE(proto.ParseFromString(
      example_saved_model_contents(model, ctx, input, l2_normalize, options).saved_model_pb));
  EXPECT_EQ(proto.meta_graphs_size(), 1);
  return proto;
}

const tfw::NodeDef& node(const tfw::GraphDef& graph, const std::string& name) {
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.name() == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  static const tfw::NodeDef none;
  return none;
}

int count(const tfw::GraphDef& graph, const std::string& op) {
  int n = 0;
  for (const tfw::NodeDef& node : graph.node()) n += node.op() == op;
  return n;
}

std::vector<int64_t> dims(const tfw::TensorShapeProto& shape) {
  std::vector<int64_t> out;
  for (const auto& d : shape.dim()) out.push_back(d.size());
  return out;
}

std::vector<std::string> strings(const tfw::NodeDef& constant) {
  const auto& values = constant.attr().at("value").tensor().string_val();
  return {values.begin(), values.end()};
}

std::vector<int64_t> int32s(const tfw::NodeDef& constant) {
  const auto& values = constant.attr().at("value").tensor().int_val();
  return {values.begin(), values.end()};
}

void expect_signature(const tfw::MetaGraphDef& meta, int64_t k) {
  ASSERT_EQ(meta.signature_def().count("serving_default"), 1u);
  const tfw::SignatureDef& s = meta.signature_def().at("serving_default");
  EXPECT_EQ(s.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs().at("example_bytes").name(), "example_bytes:0");
  EXPECT_EQ(s.inputs().at("example_bytes").dtype(), tfw::DT_STRING);
  EXPECT_EQ(dims(s.inputs().at("example_bytes").tensor_shape()), (std::vector<int64_t>{-1}));
  ASSERT_EQ(s.outputs().size(), 3u);
  EXPECT_EQ(s.outputs().at("video_id").dtype(), tfw::DT_STRING);
  EXPECT_EQ(s.outputs().at("class_indexes").name(), "class_indexes:0");
  EXPECT_EQ(s.outputs().at("class_indexes").dtype(), tfw::DT_INT32);
  EXPECT_EQ(dims(s.outputs().at("class_indexes").tensor_shape()), (std::vector<int64_t>{-1, k}));
  EXPECT_EQ(s.outputs().at("predictions").dtype(), tfw::DT_FLOAT);
  EXPECT_EQ(dims(s.outputs().at("predictions").tensor_shape()), (std::vector<int64_t>{-1, k}));
  const tfw::GraphDef& graph = meta.graph_def();
  EXPECT_EQ(node(graph, "example_bytes").op(), "Placeholder");
  EXPECT_EQ(node(graph, "class_indexes").input(0), "tower/TopKV2:1");
  EXPECT_EQ(node(graph, "predictions").input(0), "tower/TopKV2");
  EXPECT_EQ(int32s(node(graph, "tower/TopKV2/k")), (std::vector<int64_t>{k}));
  EXPECT_EQ(node(graph, "tower/TopKV2").input(0), "tower/predictions");
}

TEST(SavedModelYt8m, MoeModelParsesTfExamplesAsTheReaderAndReturnsTheTop20) {
  FakeModelContext ctx(cpu(), 30);
  auto model = make_model("MoeModel");
  const tfw::SavedModel proto = exported(*model, ctx, video_input(), "MoeModel");
  const tfw::MetaGraphDef& meta = proto.meta_graphs(0);
  const tfw::GraphDef& graph = meta.graph_def();
  expect_signature(meta, 20);

  // tf.io.parse_example's keys, sorted: the id and the float features with their sizes.
  const tfw::NodeDef& parse = node(graph, "ParseExample/ParseExampleV2");
  EXPECT_EQ(parse.op(), "ParseExampleV2");
  EXPECT_EQ(parse.input(0), "example_bytes");
  EXPECT_EQ(strings(node(graph, parse.input(3))),
            (std::vector<std::string>{"id", "mean_audio", "mean_rgb"}));
  ASSERT_EQ(parse.attr().at("dense_shapes").list().shape_size(), 3);
  EXPECT_EQ(dims(parse.attr().at("dense_shapes").list().shape(1)), (std::vector<int64_t>{8}));
  EXPECT_EQ(dims(parse.attr().at("dense_shapes").list().shape(2)), (std::vector<int64_t>{16}));
  EXPECT_EQ(parse.attr().at("Tdense").list().type(0), tfw::DT_STRING);
  EXPECT_EQ(node(graph, "video_id").input(0), "ParseExample/ParseExampleV2");
  // The features concatenated in feature_names order (mean_rgb, then mean_audio), then fed to
  // the model as its input.
  const tfw::NodeDef& concat = node(graph, "ParseExample/concat");
  EXPECT_EQ(concat.input(0), "ParseExample/ParseExampleV2:2");
  EXPECT_EQ(concat.input(1), "ParseExample/ParseExampleV2:1");
  EXPECT_EQ(node(graph, "model_input_raw").op(), "Identity");
  EXPECT_EQ(node(graph, "model_input_raw").input(0), "ParseExample/concat");
  EXPECT_EQ(count(graph, "Placeholder"), 1);
  // The l2_normalize of prepare_batch is in the graph: x * rsqrt(max(sum(x^2), eps)).
  EXPECT_EQ(count(graph, "Rsqrt"), 1);
  // MoE's softmax over [B * classes, mixtures + 1]: the reshape keeps the batch dynamic.
  bool merged = false;
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.op() != "Reshape") continue;
    const std::vector<int64_t> shape = int32s(node(graph, n.input(1)));
    EXPECT_EQ(shape.at(0), -1) << n.name();
    merged = merged || shape == std::vector<int64_t>{-1, 3};
  }
  EXPECT_TRUE(merged) << "no reshape to [-1, mixtures + 1]";
}

TEST(SavedModelYt8m, TopKIsTwentyOrTheNumberOfClasses) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("LogisticModel");
  expect_signature(exported(*model, ctx, video_input(), "LogisticModel").meta_graphs(0), 5);
}

TEST(SavedModelYt8m, FrameLevelParsesSequenceExamplesDequantizesAndPadsToMaxFrames) {
  FakeModelContext ctx(cpu(), 30);
  auto model = make_model("FrameLevelLogisticModel");
  const tfw::SavedModel proto = exported(*model, ctx, frame_input(), "FrameLevelLogisticModel");
  const tfw::MetaGraphDef& meta = proto.meta_graphs(0);
  const tfw::GraphDef& graph = meta.graph_def();
  expect_signature(meta, 20);
  const tfw::NodeDef& parse = node(graph, "ParseSequenceExample/ParseSequenceExampleV2");
  EXPECT_EQ(parse.op(), "ParseSequenceExampleV2");
  EXPECT_EQ(strings(node(graph, parse.input(3))), (std::vector<std::string>{"id"}));
  EXPECT_EQ(strings(node(graph, parse.input(7))), (std::vector<std::string>{"audio", "rgb"}));
  EXPECT_EQ(node(graph, "video_id").input(0), "ParseSequenceExample/ParseSequenceExampleV2");
  // Per feature: DecodeRaw of uint8, Cast, then Dequantize's float32 scalar and bias (max 2,
  // min -2: 4 / 255 and 4 / 512 - 2).
  EXPECT_EQ(count(graph, "DecodeRaw"), 2);
  EXPECT_EQ(node(graph, "ParseSequenceExample/rgb/DecodeRaw").input(0),
            "ParseSequenceExample/ParseSequenceExampleV2:2");
  EXPECT_EQ(node(graph, "ParseSequenceExample/audio/DecodeRaw").input(0),
            "ParseSequenceExample/ParseSequenceExampleV2:1");
  EXPECT_EQ(node(graph, "ParseSequenceExample/rgb/DecodeRaw").attr().at("out_type").type(),
            tfw::DT_UINT8);
  EXPECT_EQ(node(graph, "ParseSequenceExample/Dequantize/scalar")
                .attr()
                .at("value")
                .tensor()
                .float_val(0),
            static_cast<float>(4.0 / 255.0));
  EXPECT_EQ(
      node(graph, "ParseSequenceExample/Dequantize/bias").attr().at("value").tensor().float_val(0),
      static_cast<float>(4.0 / 512.0 - 2.0));
  const tfw::NodeDef& concat = node(graph, "ParseSequenceExample/concat");
  EXPECT_EQ(concat.input(0), "ParseSequenceExample/rgb/Dequantize/add");
  EXPECT_EQ(concat.input(1), "ParseSequenceExample/audio/Dequantize/add");
  // Zero padding (after dequantization) and truncation to max_frames, by rgb's frame splits.
  const tfw::NodeDef& padded = node(graph, "ParseSequenceExample/resize_axis");
  EXPECT_EQ(padded.op(), "RaggedTensorToTensor");
  EXPECT_EQ(int32s(node(graph, padded.input(0))), (std::vector<int64_t>{-1, 7, 24}));
  EXPECT_EQ(padded.input(3), "ParseSequenceExample/ParseSequenceExampleV2:4");
  EXPECT_EQ(int32s(node(graph, "ParseSequenceExample/max_frames")), (std::vector<int64_t>{7}));
  EXPECT_EQ(node(graph, "model_input_raw").input(0), "ParseSequenceExample/resize_axis");
  EXPECT_EQ(node(graph, "num_frames").input(0), "ParseSequenceExample/num_frames");
  EXPECT_EQ(count(graph, "Less"), 1);  // the model's mask of the valid frames
}

TEST(SavedModelYt8m, AModelThatSamplesFramesIsAnErrorNamingTheRandomOp) {
  FakeModelContext ctx(cpu(), 30);
  auto model = make_model("DbofModel", {{"dbof_cluster_size", int64_t{8}},
                                        {"dbof_hidden_size", int64_t{8}},
                                        {"iterations", int64_t{4}}});
  SavedModelExportOptions options;
  options.model_name = "DbofModel";
  try {
    example_saved_model_contents(*model, ctx, frame_input(), l2_normalize, options);
    FAIL() << "DbofModel samples frames at random; no exact SavedModel";
  } catch (const Unimplemented& e) {
    EXPECT_NE(std::string(e.what()).find("DbofModel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'random_uniform'"), std::string::npos) << e.what();
  }
}

TEST(SavedModelYt8m, ALayoutThatCannotBeParsedIsAnError) {
  FakeModelContext ctx(cpu(), 30);
  auto model = make_model("LogisticModel");
  SavedModelExportOptions options;
  ExampleServingInput sizes = video_input();
  sizes.feature_sizes = {16};
  EXPECT_THROW(example_saved_model_contents(*model, ctx, sizes, l2_normalize, options),
               InvalidArgument);
  ExampleServingInput twice = video_input();
  twice.feature_names = {"mean_rgb", "id"};
  try {
    example_saved_model_contents(*model, ctx, twice, l2_normalize, options);
    FAIL() << "the id key named as a feature";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'id' is named twice"), std::string::npos) << e.what();
  }
  ExampleServingInput none = video_input();
  none.top_k = 0;
  EXPECT_THROW(example_saved_model_contents(*model, ctx, none, l2_normalize, options),
               InvalidArgument);
  ExampleServingInput frames = frame_input();
  frames.max_frames = 0;
  EXPECT_THROW(example_saved_model_contents(*model, ctx, frames, l2_normalize, options),
               InvalidArgument);
}

}  // namespace
}  // namespace trainyard
