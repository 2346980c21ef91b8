// SavedModel export (core/include/trainyard/core/saved_model_export.h) of the image classifiers,
// created through the plugin registry with a FakeModelContext: the GraphDef each one becomes
// (TensorFlow's ops in NHWC, no Transpose; VariableV2 nodes named by the TF-Slim variables, read
// through "<name>/read"), the Saver graph the SaverDef names, the serving_default signature, the
// checkpoint's tensors, the directory written, and the errors for what the exporter cannot
// express. That TensorFlow loads these exports and computes Trainyard's probabilities is the
// interop test interop.tensorflow_runs_exported_saved_models
// (tests/integration/saved_model_interop.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"
#include "trainyard/wire/saved_model.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;
namespace tfw = wire::tf;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return test::plugin_registry().create<BaseModel>(ClassKind::kModel, name, options);
}

struct Exported {
  SavedModelContents contents;
  tfw::SavedModel proto;
  const tfw::MetaGraphDef& meta() const { return proto.meta_graphs(0); }
  const tfw::GraphDef& graph() const { return meta().graph_def(); }
};

Exported exported(BaseModel& model, FakeModelContext& ctx, const std::vector<int64_t>& example,
                  const std::string& name) {
  SavedModelExportOptions options;
  options.model_name = name;
  Exported e{saved_model_contents(model, ctx, example, options), {}};
  EXPECT_TRUE(e.proto.ParseFromString(e.contents.saved_model_pb));
  EXPECT_EQ(e.proto.meta_graphs_size(), 1);
  return e;
}

const tfw::NodeDef* find(const tfw::GraphDef& graph, const std::string& name) {
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

int count(const tfw::GraphDef& graph, const std::string& op) {
  int n = 0;
  for (const tfw::NodeDef& node : graph.node()) n += node.op() == op;
  return n;
}

// The ops of the nodes the output depends on, in graph order, leaving out Const, VariableV2 and
// the variables' reads.
std::vector<std::string> compute_ops(const tfw::GraphDef& graph) {
  std::vector<std::string> ops;
  for (const tfw::NodeDef& n : graph.node()) {
    if (n.name().starts_with("save/") || n.op() == "Const" || n.op() == "VariableV2" ||
        n.name().ends_with("/read")) {
      continue;
    }
    ops.push_back(n.op());
  }
  return ops;
}

std::vector<int64_t> dims(const tfw::TensorShapeProto& shape) {
  std::vector<int64_t> out;
  for (const auto& d : shape.dim()) out.push_back(d.size());
  return out;
}

std::string node_of(const std::string& input) {
  std::string name = input.substr(input[0] == '^' ? 1 : 0);
  return name.substr(0, name.find(':'));
}

// Every input names a node of the graph, and names are unique.
void expect_well_formed(const tfw::GraphDef& graph) {
  std::set<std::string> names;
  for (const tfw::NodeDef& n : graph.node()) EXPECT_TRUE(names.insert(n.name()).second) << n.name();
  for (const tfw::NodeDef& n : graph.node()) {
    for (const std::string& input : n.input()) {
      EXPECT_EQ(names.count(node_of(input)), 1u) << n.name() << " reads " << input;
    }
  }
}

TEST(SavedModelExport, LenetIsTensorflowOpsWithSlimVariablesAndTheServingSignature) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const Exported e = exported(*model, ctx, {28, 28, 1}, "lenet");
  EXPECT_EQ(e.proto.saved_model_schema_version(), 1);
  ASSERT_EQ(e.meta().meta_info_def().tags_size(), 1);
  EXPECT_EQ(e.meta().meta_info_def().tags(0), "serve");
  expect_well_formed(e.graph());
  EXPECT_EQ(
      compute_ops(e.graph()),
      (std::vector<std::string>{"Placeholder", "Conv2D", "BiasAdd", "Relu", "MaxPool", "Conv2D",
                                "BiasAdd", "Relu", "MaxPool", "Reshape", "MatMul", "BiasAdd",
                                "Relu", "MatMul", "BiasAdd", "Softmax", "Identity", "ArgMax"}));
  const tfw::NodeDef* image = find(e.graph(), "image");
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->op(), "Placeholder");
  EXPECT_EQ(dims(image->attr().at("shape").shape()), (std::vector<int64_t>{-1, 28, 28, 1}));
  const tfw::NodeDef* conv1 = find(e.graph(), "LeNet/conv1/Conv2D");
  ASSERT_NE(conv1, nullptr);
  EXPECT_EQ(conv1->input(0), "image");
  EXPECT_EQ(conv1->input(1), "LeNet/conv1/weights/read");
  EXPECT_EQ(conv1->attr().at("padding").s(), "SAME");
  EXPECT_EQ(conv1->attr().at("data_format").s(), "NHWC");
  const tfw::NodeDef* weights = find(e.graph(), "LeNet/conv1/weights");
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->op(), "VariableV2");
  EXPECT_EQ(dims(weights->attr().at("shape").shape()), (std::vector<int64_t>{5, 5, 1, 32}));
  EXPECT_EQ(weights->attr().at("dtype").type(), tfw::DT_FLOAT);
  const tfw::NodeDef* classes = find(e.graph(), "classes");
  ASSERT_NE(classes, nullptr);
  EXPECT_EQ(classes->input(0), "probabilities");
  EXPECT_EQ(classes->attr().at("output_type").type(), tfw::DT_INT64);

  // The variables the graph holds are those the checkpoint gets, with the context's values.
  EXPECT_EQ(count(e.graph(), "VariableV2"), 8);
  ASSERT_EQ(e.contents.variables.size(), 8u);
  for (const auto& [name, value] : e.contents.variables) {
    const tfw::NodeDef* v = find(e.graph(), name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->op(), "VariableV2");
    EXPECT_EQ(value.to_vector<float>(), ctx.at(name).value().to_vector<float>()) << name;
  }

  // The signature, under serving_default and the estimator's PredictOutput key.
  for (const char* key : {"serving_default", "tensorflow/serving/predict"}) {
    ASSERT_EQ(e.meta().signature_def().count(key), 1u) << key;
    const tfw::SignatureDef& s = e.meta().signature_def().at(key);
    EXPECT_EQ(s.method_name(), "tensorflow/serving/predict");
    ASSERT_EQ(s.inputs().size(), 1u);
    EXPECT_EQ(s.inputs().at("image").name(), "image:0");
    EXPECT_EQ(s.inputs().at("image").dtype(), tfw::DT_FLOAT);
    EXPECT_EQ(dims(s.inputs().at("image").tensor_shape()), (std::vector<int64_t>{-1, 28, 28, 1}));
    ASSERT_EQ(s.outputs().size(), 2u);
    EXPECT_EQ(s.outputs().at("probabilities").name(), "probabilities:0");
    EXPECT_EQ(dims(s.outputs().at("probabilities").tensor_shape()), (std::vector<int64_t>{-1, 10}));
    EXPECT_EQ(s.outputs().at("classes").name(), "classes:0");
    EXPECT_EQ(s.outputs().at("classes").dtype(), tfw::DT_INT64);
  }
}

TEST(SavedModelExport, TheSaverDefNamesARestoreAndASaveOfEveryVariable) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const Exported e = exported(*model, ctx, {28, 28, 1}, "lenet");
  const tfw::SaverDef& saver = e.meta().saver_def();
  EXPECT_EQ(saver.filename_tensor_name(), "save/Const:0");
  EXPECT_EQ(saver.save_tensor_name(), "save/control_dependency:0");
  EXPECT_EQ(saver.restore_op_name(), "save/restore_all");
  EXPECT_EQ(saver.version(), tfw::SaverDef::V2);
  const tfw::NodeDef* restore = find(e.graph(), "save/RestoreV2");
  ASSERT_NE(restore, nullptr);
  EXPECT_EQ(restore->input(0), "save/Const");
  const tfw::NodeDef* names = find(e.graph(), "save/RestoreV2/tensor_names");
  ASSERT_NE(names, nullptr);
  const auto& restored = names->attr().at("value").tensor().string_val();
  ASSERT_EQ(static_cast<std::size_t>(restored.size()), e.contents.variables.size());
  const tfw::NodeDef* restore_all = find(e.graph(), "save/restore_all");
  ASSERT_NE(restore_all, nullptr);
  ASSERT_EQ(static_cast<std::size_t>(restore_all->input_size()), e.contents.variables.size());
  for (int i = 0; i < restore_all->input_size(); ++i) {
    // Each Assign writes variable i with RestoreV2's output i.
    const tfw::NodeDef* assign = find(e.graph(), node_of(restore_all->input(i)));
    ASSERT_NE(assign, nullptr);
    EXPECT_EQ(assign->op(), "Assign");
    EXPECT_EQ(assign->input(0), restored[i]);
    EXPECT_EQ(assign->input(1), i == 0 ? "save/RestoreV2" : "save/RestoreV2:" + std::to_string(i));
  }
  const tfw::NodeDef* save = find(e.graph(), "save/SaveV2");
  ASSERT_NE(save, nullptr);
  EXPECT_EQ(static_cast<std::size_t>(save->input_size()), 3 + e.contents.variables.size());
  EXPECT_NE(find(e.graph(), "save/control_dependency"), nullptr);
}

TEST(SavedModelExport, MobilenetV1HasDepthwiseConvolutionsAndInferenceBatchNorms) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("mobilenet_v1", {{"depth_multiplier", 0.25}});
  const Exported e = exported(*model, ctx, {64, 64, 3}, "mobilenet_v1");
  expect_well_formed(e.graph());
  EXPECT_EQ(count(e.graph(), "Conv2D"), 15);  // Conv2d_0, 13 pointwise, the logits
  EXPECT_EQ(count(e.graph(), "DepthwiseConv2dNative"), 13);
  EXPECT_EQ(count(e.graph(), "FusedBatchNormV3"), 27);
  EXPECT_EQ(count(e.graph(), "Relu6"), 27);
  EXPECT_EQ(count(e.graph(), "AvgPool"), 1);
  EXPECT_EQ(count(e.graph(), "Transpose"), 0);
  for (const tfw::NodeDef& n : e.graph().node()) {
    if (n.op() == "FusedBatchNormV3") {
      EXPECT_FALSE(n.attr().at("is_training").b()) << n.name();
    }
    if (n.op() != "DepthwiseConv2dNative") continue;
    // slim's [3, 3, C, 1] depthwise weights are DepthwiseConv2dNative's filter as they are.
    EXPECT_TRUE(n.input(1).ends_with("/depthwise_weights/read")) << n.input(1);
  }
  const tfw::NodeDef* dw1 = find(e.graph(), "MobilenetV1/Conv2d_1_depthwise/depthwise_weights");
  ASSERT_NE(dw1, nullptr);
  EXPECT_EQ(dims(dw1->attr().at("shape").shape()), (std::vector<int64_t>{3, 3, 8, 1}));
}

// Models that do what the exporter cannot express, each with its own error.
class TopKModel final : public BaseModel {
 public:
  ModelOutput forward(ModelContext&, const Batch& batch, Mode) override {
    const Tensor& x = batch.features.at("image");
    Tensor flat = ops::reshape(x, Shape{x.shape()[0], -1});
    return {ops::softmax(ops::top_k(flat, 2).first, 1), std::nullopt, std::nullopt};
  }
};

class BatchMergingModel final : public BaseModel {
 public:
  ModelOutput forward(ModelContext&, const Batch& batch, Mode) override {
    Tensor y = ops::relu(batch.features.at("image"));
    return {ops::reshape(y, Shape{-1, 2}), std::nullopt, std::nullopt};
  }
};

TEST(SavedModelExport, AnOpWithoutATensorflowFormIsAnErrorNamingTheOpAndTheModel) {
  FakeModelContext ctx(cpu(), 2);
  SavedModelExportOptions options;
  options.model_name = "TopKModel";
  TopKModel top_k;
  try {
    saved_model_contents(top_k, ctx, {4, 4, 1}, options);
    ADD_FAILURE() << "top_k was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("SavedModel export of TopKModel: op 'top_k'"), std::string::npos)
        << message;
  }
  options.model_name = "BatchMergingModel";
  BatchMergingModel merging;
  try {
    saved_model_contents(merging, ctx, {2, 2, 1}, options);
    ADD_FAILURE() << "a reshape across the batch was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a reshape of [1, 2, 2, 1] to [2, 2]"), std::string::npos) << message;
    EXPECT_NE(message.find("BatchMergingModel"), std::string::npos) << message;
  }
}

TEST(SavedModelExport, WritesSavedModelPbAndTheVariablesCheckpointReplacingAnEarlierExport) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  SavedModelExportOptions options;
  options.model_name = "lenet";
  const SavedModelContents contents = saved_model_contents(*model, ctx, {28, 28, 1}, options);
  const fs::path root = fs::path(::testing::TempDir()) / "saved_model_export_test";
  fs::remove_all(root);
  const fs::path dir = root / "export";
  fs::create_directories(dir);
  std::ofstream(dir / "stale.txt") << "from an earlier export";
  write_saved_model(contents, dir.string());
  EXPECT_FALSE(fs::exists(dir / "stale.txt"));
  std::ifstream in(dir / "saved_model.pb", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(bytes.str(), contents.saved_model_pb);
  CheckpointReader reader((dir / "variables" / "variables").string());
  for (const auto& [name, value] : contents.variables) {
    EXPECT_EQ(reader.read(name, cpu()).to_vector<float>(), value.to_vector<float>()) << name;
  }
  std::vector<std::string> hidden;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.path().filename().string().starts_with(".")) hidden.push_back(entry.path());
  }
  EXPECT_TRUE(hidden.empty()) << hidden.front();
  fs::remove_all(root);
}

}  // namespace
}  // namespace trainyard
