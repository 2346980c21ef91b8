// ONNX export (core/include/trainyard/core/onnx_export.h) of the image classifiers and the
// YouTube-8M models (their inputs, the frame mask from num_frames, the unrolled LSTM, random
// frame sampling refused; ONNX Runtime's predictions are checked by
// interop.onnxruntime_runs_exported_yt8m_models), created
// through the plugin registry with a FakeModelContext: the graph each one becomes (node types in
// order or by count, NCHW from the first convolution with one Transpose of the NHWC image),
// initializers named by the TF-Slim variable names with their values in ONNX's layout, the
// dynamic batch, the opset range, and the errors for what the exporter cannot express. That
// ONNX Runtime computes Trainyard's probabilities from these files is the interop test
// interop.onnxruntime_runs_exported_classifiers (tests/integration/onnx_interop.py).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/task.h"
#include "trainyard/testing.h"
#include "trainyard/wire/onnx.pb.h"

namespace trainyard {
namespace {

using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return test::plugin_registry().create<BaseModel>(ClassKind::kModel, name, options);
}

wire::onnx::ModelProto exported(BaseModel& model, FakeModelContext& ctx,
                                const std::vector<int64_t>& example, const std::string& name,
                                int opset = 13) {
  OnnxExportOptions options;
  options.model_name = name;
  options.opset = opset;
  wire::onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(onnx_model_bytes(model, ctx, example, options)));
  return proto;
}

std::vector<std::string> op_types(const wire::onnx::ModelProto& model) {
  std::vector<std::string> types;
  for (const wire::onnx::NodeProto& n : model.graph().node()) types.push_back(n.op_type());
  return types;
}

int count(const wire::onnx::ModelProto& model, const std::string& op_type) {
  int n = 0;
  for (const wire::onnx::NodeProto& node : model.graph().node()) n += node.op_type() == op_type;
  return n;
}

const wire::onnx::TensorProto* initializer(const wire::onnx::ModelProto& model,
                                           const std::string& name) {
  for (const wire::onnx::TensorProto& t : model.graph().initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

std::vector<int64_t> dims(const wire::onnx::TensorProto* t) {
  if (t == nullptr) return {-1};
  return {t->dims().begin(), t->dims().end()};
}

std::vector<std::string> value_dims(const wire::onnx::ValueInfoProto& info) {
  std::vector<std::string> out;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  }
  return out;
}

const wire::onnx::AttributeProto* attribute(const wire::onnx::NodeProto& node,
                                            const std::string& name) {
  for (const wire::onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::vector<float> floats(const wire::onnx::TensorProto* t) {
  std::vector<float> out(t->raw_data().size() / sizeof(float));
  std::memcpy(out.data(), t->raw_data().data(), out.size() * sizeof(float));
  return out;
}

TEST(OnnxExport, LenetIsNchwFromTheFirstConvolutionWithSlimInitializers) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const wire::onnx::ModelProto proto = exported(*model, ctx, {28, 28, 1}, "lenet");
  EXPECT_EQ(proto.ir_version(), 8);
  ASSERT_EQ(proto.opset_import_size(), 1);
  EXPECT_EQ(proto.opset_import(0).domain(), "");
  EXPECT_EQ(proto.opset_import(0).version(), 13);
  EXPECT_EQ(proto.graph().name(), "lenet");
  // The image is transposed once; the biases ride on the Conv nodes; slim's flatten reads NHWC
  // order, so the pooled map goes back to NHWC before the Reshape.
  EXPECT_EQ(op_types(proto),
            (std::vector<std::string>{"Transpose", "Conv", "Relu", "MaxPool", "Conv", "Relu",
                                      "MaxPool", "Transpose", "Reshape", "Gemm", "Relu", "Gemm",
                                      "Softmax", "Identity"}));
  ASSERT_EQ(proto.graph().input_size(), 1);
  EXPECT_EQ(proto.graph().input(0).name(), "image");
  EXPECT_EQ(value_dims(proto.graph().input(0)), (std::vector<std::string>{"N", "28", "28", "1"}));
  ASSERT_EQ(proto.graph().output_size(), 1);
  EXPECT_EQ(proto.graph().output(0).name(), "probabilities");
  EXPECT_EQ(value_dims(proto.graph().output(0)), (std::vector<std::string>{"N", "10"}));

  EXPECT_EQ(dims(initializer(proto, "LeNet/conv1/weights")), (std::vector<int64_t>{32, 1, 5, 5}));
  EXPECT_EQ(dims(initializer(proto, "LeNet/conv1/biases")), (std::vector<int64_t>{32}));
  EXPECT_EQ(dims(initializer(proto, "LeNet/conv2/weights")), (std::vector<int64_t>{64, 32, 5, 5}));
  EXPECT_EQ(dims(initializer(proto, "LeNet/fc3/weights")), (std::vector<int64_t>{3136, 1024}));
  EXPECT_EQ(dims(initializer(proto, "LeNet/fc4/biases")), (std::vector<int64_t>{10}));
  const wire::onnx::NodeProto& conv2 = proto.graph().node(4);
  EXPECT_EQ(conv2.name(), "LeNet/conv2/Conv");
  EXPECT_EQ(conv2.input(2), "LeNet/conv2/biases");
  ASSERT_NE(attribute(conv2, "pads"), nullptr);  // SAME 5x5: 2 on every side
  EXPECT_EQ(std::vector<int64_t>(attribute(conv2, "pads")->ints().begin(),
                                 attribute(conv2, "pads")->ints().end()),
            (std::vector<int64_t>{2, 2, 2, 2}));
  // The reshape keeps the batch dynamic.
  const wire::onnx::TensorProto* flatten = initializer(proto, proto.graph().node(8).input(1));
  ASSERT_NE(flatten, nullptr);
  EXPECT_EQ(std::vector<int64_t>(flatten->int64_data().begin(), flatten->int64_data().end()),
            (std::vector<int64_t>{0, 3136}));
}

TEST(OnnxExport, ConvolutionFiltersAreStoredOihw) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const wire::onnx::ModelProto proto = exported(*model, ctx, {28, 28, 1}, "lenet");
  const std::vector<float> hwio = ctx.at("LeNet/conv2/weights").value().to_vector<float>();
  const std::vector<float> oihw = floats(initializer(proto, "LeNet/conv2/weights"));
  ASSERT_EQ(oihw.size(), hwio.size());
  // [5, 5, 32, 64] HWIO against [64, 32, 5, 5] OIHW, everywhere.
  for (int64_t o = 0; o < 64; ++o) {
    for (int64_t i = 0; i < 32; ++i) {
      for (int64_t h = 0; h < 5; ++h) {
        for (int64_t w = 0; w < 5; ++w) {
          ASSERT_EQ(oihw[static_cast<std::size_t>(((o * 32 + i) * 5 + h) * 5 + w)],
                    hwio[static_cast<std::size_t>(((h * 5 + w) * 32 + i) * 64 + o)]);
        }
      }
    }
  }
  const std::vector<float> fc = ctx.at("LeNet/fc3/weights").value().to_vector<float>();
  EXPECT_EQ(floats(initializer(proto, "LeNet/fc3/weights")), fc);  // Gemm's B is [K, N] as ours
}

TEST(OnnxExport, Resnet20HasOneTransposeAndBatchNormsNamedBySlim) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("resnet_20");
  const wire::onnx::ModelProto proto = exported(*model, ctx, {32, 32, 3}, "resnet_20");
  // conv1, two per unit in nine units, two projection shortcuts, the logits.
  EXPECT_EQ(count(proto, "Conv"), 22);
  EXPECT_EQ(count(proto, "BatchNormalization"), 21);
  EXPECT_EQ(count(proto, "Transpose"), 1);
  EXPECT_EQ(count(proto, "MaxPool"), 2);  // the subsampled identity shortcuts
  EXPECT_EQ(count(proto, "ReduceMean"), 1);
  EXPECT_EQ(count(proto, "Add"), 9);  // the residual sums
  EXPECT_EQ(count(proto, "Relu"), 19);
  // The 1x1 logits map is [N, 10, 1, 1] in NCHW, already in [N, 10] order: no Transpose.
  EXPECT_EQ(count(proto, "Reshape"), 1);
  EXPECT_EQ(dims(initializer(proto, "resnet_20/conv1/weights")),
            (std::vector<int64_t>{16, 3, 3, 3}));
  EXPECT_EQ(dims(initializer(proto, "resnet_20/block2/unit_1/basic_v1/shortcut/weights")),
            (std::vector<int64_t>{32, 16, 1, 1}));
  for (const char* p : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    EXPECT_EQ(dims(initializer(proto, std::string("resnet_20/block3/unit_3/basic_v1/conv2/"
                                                  "BatchNorm/") +
                                          p)),
              (std::vector<int64_t>{64}))
        << p;
  }
  EXPECT_EQ(dims(initializer(proto, "resnet_20/logits/biases")), (std::vector<int64_t>{10}));
  // Every initializer but the small index constants is a variable of the model, under its name.
  int variables = 0;
  for (const wire::onnx::TensorProto& t : proto.graph().initializer()) {
    if (ctx.find(t.name()) != nullptr) {
      ++variables;
    } else {
      EXPECT_EQ(t.name().rfind("const", 0), 0u) << t.name();
    }
  }
  EXPECT_EQ(variables, static_cast<int>(ctx.variable_names().size()));
  for (const wire::onnx::NodeProto& n : proto.graph().node()) {
    if (n.op_type() == "BatchNormalization") {
      ASSERT_NE(attribute(n, "epsilon"), nullptr);
      EXPECT_FLOAT_EQ(attribute(n, "epsilon")->f(), 1e-5f);
    }
  }
}

TEST(OnnxExport, MobilenetV1DepthwiseConvolutionsAreGroupedConvs) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("mobilenet_v1", {{"depth_multiplier", 0.25}});
  const wire::onnx::ModelProto proto = exported(*model, ctx, {64, 64, 3}, "mobilenet_v1", 17);
  EXPECT_EQ(proto.opset_import(0).version(), 17);
  EXPECT_EQ(count(proto, "Conv"), 28);  // Conv2d_0, 13 depthwise, 13 pointwise, the logits
  EXPECT_EQ(count(proto, "Clip"), 27);  // relu6
  EXPECT_EQ(count(proto, "AveragePool"), 1);
  EXPECT_EQ(count(proto, "Transpose"), 1);
  EXPECT_EQ(dims(initializer(proto, "MobilenetV1/Conv2d_1_depthwise/depthwise_weights")),
            (std::vector<int64_t>{8, 1, 3, 3}));
  EXPECT_EQ(dims(initializer(proto, "MobilenetV1/Conv2d_13_pointwise/weights")),
            (std::vector<int64_t>{256, 256, 1, 1}));
  int grouped = 0;
  for (const wire::onnx::NodeProto& n : proto.graph().node()) {
    if (n.op_type() != "Conv") continue;
    const int64_t group = attribute(n, "group")->i();
    if (n.name().find("_depthwise") != std::string::npos) {
      const wire::onnx::TensorProto* filter = initializer(proto, n.input(1));
      ASSERT_NE(filter, nullptr);
      EXPECT_EQ(group, filter->dims(0)) << n.name();  // one group per channel
      ++grouped;
    } else {
      EXPECT_EQ(group, 1) << n.name();
    }
  }
  EXPECT_EQ(grouped, 13);
}

TEST(OnnxExport, ExplicitPaddingIsAPadNodeInTheLayoutOfItsInput) {
  FakeModelContext ctx(cpu(), 5);
  auto model =
      make_model("mobilenet_v1", {{"depth_multiplier", 0.25}, {"use_explicit_padding", true}});
  const wire::onnx::ModelProto proto = exported(*model, ctx, {64, 64, 3}, "mobilenet_v1");
  // _fixed_padding before Conv2d_0 and each depthwise convolution, then VALID convolutions. The
  // image is padded as it comes (NHWC) and transposed after; the others are NCHW values.
  EXPECT_EQ(count(proto, "Pad"), 14);
  EXPECT_EQ(count(proto, "Transpose"), 1);
  std::vector<std::vector<int64_t>> pads;
  for (const wire::onnx::NodeProto& n : proto.graph().node()) {
    if (n.op_type() != "Pad") continue;
    const wire::onnx::TensorProto* p = initializer(proto, n.input(1));
    ASSERT_NE(p, nullptr);
    pads.emplace_back(p->int64_data().begin(), p->int64_data().end());  // all begins, all ends
  }
  ASSERT_EQ(pads.size(), 14u);
  EXPECT_EQ(proto.graph().node(0).op_type(), "Pad");
  EXPECT_EQ(pads[0], (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 1, 0}));  // [N, H, W, C]
  for (std::size_t i = 1; i < pads.size(); ++i) {
    EXPECT_EQ(pads[i], (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1})) << i;  // [N, C, H, W]
  }
}

TEST(OnnxExport, OpsetsOutside13To17AreRefused) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  for (int opset : {12, 18}) {
    OnnxExportOptions options;
    options.opset = opset;
    try {
      onnx_model_bytes(*model, ctx, {28, 28, 1}, options);
      ADD_FAILURE() << "opset " << opset << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("choose 13 to 17"), std::string::npos) << e.what();
    }
  }
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

TEST(OnnxExport, AnOpWithoutAnOnnxFormIsAnErrorNamingTheOpAndTheModel) {
  FakeModelContext ctx(cpu(), 2);
  OnnxExportOptions options;
  options.model_name = "TopKModel";
  TopKModel top_k;
  try {
    onnx_model_bytes(top_k, ctx, {4, 4, 1}, options);
    ADD_FAILURE() << "top_k was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ONNX export of TopKModel: op 'top_k'"), std::string::npos) << message;
  }
  options.model_name = "BatchMergingModel";
  BatchMergingModel merging;
  try {
    onnx_model_bytes(merging, ctx, {2, 2, 1}, options);
    ADD_FAILURE() << "a reshape across the batch was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("the output 'probabilities' ([2, 2]) holds the batch merged into its "
                           "rows"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("BatchMergingModel"), std::string::npos) << message;
  }
}

// ---- The YouTube-8M models (issue 39) ----

// The task's batch preparation (the YouTube-8M task's L2 normalization) in the graph.
std::function<void(Batch&)> yt8m_prepare() {
  static std::shared_ptr<Task> task =
      test::plugin_registry().create<Task>(ClassKind::kTask, "yt8m", Opts{});
  return [](Batch& batch) { task->prepare_batch(batch); };
}

wire::onnx::ModelProto exported_yt8m(BaseModel& model, FakeModelContext& ctx,
                                     std::vector<OnnxInput> inputs, const std::string& name) {
  OnnxExportOptions options;
  options.model_name = name;
  options.output_name = "predictions";
  options.inputs = std::move(inputs);
  options.prepare_batch = yt8m_prepare();
  wire::onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(onnx_model_bytes(model, ctx, options)));
  return proto;
}

std::vector<OnnxInput> frame_inputs(int64_t max_frames, int64_t feature_size) {
  return {{"features", DType::kF32, {max_frames, feature_size}, 0.0},
          {"num_frames", DType::kI32, {}, static_cast<double>(max_frames)}};
}

TEST(OnnxExportYt8m, VideoLevelModelsTakeTheNormalizedFeaturesAndLeaveOutUnreadInputs) {
  for (const char* name : {"LogisticModel", "MoeModel"}) {
    FakeModelContext ctx(cpu(), 7);
    auto model =
        make_model(name, name == std::string("MoeModel") ? Opts{{"moe_num_mixtures", 3}} : Opts{});
    // The video-level reader gives num_frames too; the predictions do not read it.
    auto proto = exported_yt8m(
        *model, ctx, {{"features", DType::kF32, {5}, 0.0}, {"num_frames", DType::kI32, {}, 1.0}},
        name);
    ASSERT_EQ(proto.graph().input_size(), 1) << name;
    const auto& input = proto.graph().input(0);
    EXPECT_EQ(input.name(), "features");
    EXPECT_EQ(input.type().tensor_type().elem_type(), wire::onnx::TensorProto::FLOAT);
    EXPECT_EQ(value_dims(input), (std::vector<std::string>{"N", "5"}));
    ASSERT_EQ(proto.graph().output_size(), 1);
    EXPECT_EQ(proto.graph().output(0).name(), "predictions");
    EXPECT_EQ(value_dims(proto.graph().output(0)), (std::vector<std::string>{"N", "7"}));
    // tf.nn.l2_normalize: x * rsqrt(max(sum(x^2), 1e-12)), first in the graph.
    const std::vector<std::string> types = op_types(proto);
    ASSERT_GE(types.size(), 5u);
    EXPECT_EQ(std::vector<std::string>(types.begin(), types.begin() + 3),
              (std::vector<std::string>{"Mul", "ReduceSum", "Max"}))
        << name;
    EXPECT_EQ(proto.graph().node(0).input(0), "features");
  }
  FakeModelContext ctx(cpu(), 7);
  auto moe = make_model("MoeModel", Opts{{"moe_num_mixtures", 3}});
  auto proto = exported_yt8m(*moe, ctx, {{"features", DType::kF32, {5}, 0.0}}, "MoeModel");
  EXPECT_EQ(dims(initializer(proto, "gates/weights")), (std::vector<int64_t>{5, 7 * 4}));
  EXPECT_EQ(dims(initializer(proto, "experts/weights")), (std::vector<int64_t>{5, 7 * 3}));
  EXPECT_EQ(count(proto, "Softmax"), 1);
}

TEST(OnnxExportYt8m, FrameLevelLogisticModelMasksTheFramesWithNumFramesInTheGraph) {
  FakeModelContext ctx(cpu(), 4);
  auto model = make_model("FrameLevelLogisticModel");
  auto proto = exported_yt8m(*model, ctx, frame_inputs(6, 3), "FrameLevelLogisticModel");
  ASSERT_EQ(proto.graph().input_size(), 2);
  EXPECT_EQ(proto.graph().input(0).name(), "features");
  EXPECT_EQ(value_dims(proto.graph().input(0)), (std::vector<std::string>{"N", "6", "3"}));
  EXPECT_EQ(proto.graph().input(1).name(), "num_frames");
  EXPECT_EQ(proto.graph().input(1).type().tensor_type().elem_type(),
            wire::onnx::TensorProto::INT32);
  EXPECT_EQ(value_dims(proto.graph().input(1)), (std::vector<std::string>{"N"}));
  // valid[b, t] = t < num_frames[b], computed from the input.
  EXPECT_EQ(count(proto, "Less"), 1);
  bool reads_num_frames = false;
  for (const auto& n : proto.graph().node()) {
    for (const auto& in : n.input()) reads_num_frames = reads_num_frames || in == "num_frames";
  }
  EXPECT_TRUE(reads_num_frames);
}

TEST(OnnxExportYt8m, LstmModelIsUnrolledOverMaxFramesWithTheMaskFromNumFrames) {
  for (const char* implementation : {"sequence", "per_step"}) {
    FakeModelContext ctx(cpu(), 4);
    auto model = make_model("LstmModel", Opts{{"lstm_cells", 3},
                                              {"lstm_layers", 2},
                                              {"moe_num_mixtures", 2},
                                              {"rnn_implementation", implementation}});
    const int64_t frames = 5;
    auto proto = exported_yt8m(*model, ctx, frame_inputs(frames, 4), "LstmModel");
    ASSERT_EQ(proto.graph().input_size(), 2) << implementation;
    EXPECT_EQ(proto.graph().input(1).name(), "num_frames");
    // Per layer and step, c and h keep their state where t >= num_frames (but the last step's
    // c of each layer, which nothing reads: layer 1 gets layer 0's h, the classifier the top h).
    EXPECT_EQ(count(proto, "Where"), 2 * 2 * frames - 2) << implementation;
    EXPECT_EQ(count(proto, "Less"), 1) << implementation;
    // The kernel's input rows (the projection of every frame at once) and recurrent rows.
    const std::string kernel = "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel";
    EXPECT_EQ(dims(initializer(proto, kernel)), (std::vector<int64_t>{4, 4 * 3})) << implementation;
    EXPECT_EQ(dims(initializer(proto, kernel + "/value")), (std::vector<int64_t>{3, 4 * 3}))
        << implementation;
  }
}

TEST(OnnxExportYt8m, RandomFrameSamplingIsRefusedNamingTheOp) {
  FakeModelContext ctx(cpu(), 4);
  auto model = make_model("DbofModel", Opts{{"iterations", 3},
                                            {"dbof_cluster_size", 4},
                                            {"dbof_hidden_size", 4},
                                            {"moe_num_mixtures", 2}});
  OnnxExportOptions options;
  options.model_name = "DbofModel";
  options.inputs = frame_inputs(5, 3);
  try {
    onnx_model_bytes(*model, ctx, options);
    ADD_FAILURE() << "DbofModel's random frame sampling was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ONNX export of DbofModel: op 'random_uniform'"), std::string::npos)
        << message;
  }
}

TEST(OnnxExportYt8m, InputsMustBeGivenOnceEach) {
  FakeModelContext ctx(cpu(), 4);
  auto model = make_model("LogisticModel");
  OnnxExportOptions options;
  options.model_name = "LogisticModel";
  EXPECT_THROW(onnx_model_bytes(*model, ctx, options), InvalidArgument);
  options.inputs = {{"features", DType::kF32, {3}, 0.0}, {"features", DType::kF32, {3}, 0.0}};
  try {
    onnx_model_bytes(*model, ctx, options);
    ADD_FAILURE() << "a feature given twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'features' is given twice"), std::string::npos)
        << e.what();
  }
}

// [B, 16] -> [B * 4, 4] rows plus a constant that differs from row to row: right at batch 1 only.
class PerRowConstantModel final : public BaseModel {
 public:
  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode) override {
    const Tensor& x = batch.features.at("features");
    Tensor rows = ops::reshape(ops::relu(x), Shape{x.shape()[0] * 4, 4});
    std::vector<float> per_row(16);
    for (std::size_t i = 0; i < per_row.size(); ++i) per_row[i] = static_cast<float>(i);
    Tensor shifted = ops::add(rows, Tensor::from_vector(ctx.backend(), Shape{4, 4}, per_row));
    return {ops::reshape(shifted, Shape{x.shape()[0], 16}), std::nullopt, std::nullopt};
  }
};

TEST(OnnxExportYt8m, AConstantVaryingAlongRowsThatHoldTheBatchIsRefused) {
  FakeModelContext ctx(cpu(), 2);
  PerRowConstantModel model;
  OnnxExportOptions options;
  options.model_name = "PerRowConstantModel";
  options.inputs = {{"features", DType::kF32, {16}, 0.0}};
  try {
    onnx_model_bytes(model, ctx, options);
    ADD_FAILURE() << "a per-row constant was broadcast against rows holding the batch";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("op 'add'"), std::string::npos) << message;
    EXPECT_NE(message.find("the constant [4, 4], which varies along the rows"), std::string::npos)
        << message;
  }
}

TEST(GraphCapture, RecordsThisThreadsLaunchesWithTheirAttributes) {
  NoGradScope no_grad;
  Tensor x = ops::ones(cpu(), Shape{1, 4, 4, 2}, DType::kF32);
  Tensor f = ops::ones(cpu(), Shape{3, 3, 2, 5}, DType::kF32);
  GraphCapture capture;
  Tensor y = ops::conv2d(x, f, {2, 2}, Padding2D::same());
  Tensor r = ops::reshape(y, Shape{1, -1});  // a view: no launch
  ASSERT_EQ(capture.ops().size(), 1u);
  const GraphCapture::Op& op = capture.ops()[0];
  EXPECT_STREQ(op.op->name, "conv2d");
  const auto attrs = op.attributes<Conv2DAttrs>("Conv2DAttrs");
  EXPECT_EQ(attrs.stride_h, 2);
  EXPECT_EQ(attrs.pad_bottom, 1);
  EXPECT_EQ(op.outputs[0].storage(), y.storage());
  EXPECT_EQ(r.storage(), y.storage());
  EXPECT_THROW(op.attributes<PoolAttrs>("PoolAttrs"), InvalidArgument);
  EXPECT_THROW(GraphCapture second, Error);
}

}  // namespace
}  // namespace trainyard
