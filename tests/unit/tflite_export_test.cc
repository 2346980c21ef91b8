// TFLite export (core/include/trainyard/core/tflite_export.h) of the image classifiers, read back
// through the code flatc generates from core/proto/tflite_schema.fbs: the flatbuffer verifier
// accepts the file, its identifier and version, the operators in order with their fused biases
// and activations, filters in TFLite's layouts (OHWI; [1, KH, KW, C * multiplier] for depthwise)
// holding the variables' values (or, with a batch norm folded in, scaled by it), the dynamic
// batch, and the errors for what the exporter cannot express. That
// TensorFlow's tf.lite.Interpreter computes Trainyard's probabilities from these files is
// interop.tflite_interpreter_runs_exported_classifiers (tests/integration/tflite_interop.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "tflite_reading.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tflite_export.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

namespace fb = trainyard::tflite;
using namespace tflite_reading;  // NOLINT(build/namespaces): the file reads models back
using testing::FakeModelContext;
using Opts = std::map<std::string, OptionValue>;

Backend& cpu() { return *test::backend("cpu"); }

std::shared_ptr<BaseModel> make_model(const std::string& name, const Opts& options = {}) {
  return test::plugin_registry().create<BaseModel>(ClassKind::kModel, name, options);
}

std::string exported(BaseModel& model, FakeModelContext& ctx, const std::vector<int64_t>& example,
                     const std::string& name) {
  TfliteExportOptions options;
  options.model_name = name;
  options.inputs = {{"image", DType::kF32, example, 0.0}};
  return tflite_model_bytes(model, ctx, options);
}

std::vector<float> data(const fb::Model* model, const fb::Tensor* t) {
  return buffer_values<float>(model, t);
}
std::vector<int32_t> int32_data(const fb::Model* model, const fb::Tensor* t) {
  return buffer_values<int32_t>(model, t);
}

TEST(TfliteExport, LenetRoundTripsThroughTheGeneratedReaderWithFusedBiasesAndActivations) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const std::string bytes = exported(*model, ctx, {28, 28, 1}, "lenet");
  ASSERT_TRUE(fb::ModelBufferHasIdentifier(bytes.data()));
  const fb::Model* m = verified(bytes);
  EXPECT_EQ(m->version(), 3u);
  ASSERT_EQ(m->subgraphs()->size(), 1u);
  const fb::SubGraph* graph = m->subgraphs()->Get(0);
  EXPECT_EQ(graph->name()->str(), "lenet");
  // Buffer 0 is the empty sentinel that computed tensors point at.
  EXPECT_EQ(m->buffers()->Get(0)->data(), nullptr);
  EXPECT_EQ(operators(m), (std::vector<fb::BuiltinOperator>{
                              fb::BuiltinOperator_CONV_2D, fb::BuiltinOperator_MAX_POOL_2D,
                              fb::BuiltinOperator_CONV_2D, fb::BuiltinOperator_MAX_POOL_2D,
                              fb::BuiltinOperator_RESHAPE, fb::BuiltinOperator_FULLY_CONNECTED,
                              fb::BuiltinOperator_FULLY_CONNECTED, fb::BuiltinOperator_SOFTMAX}));
  ASSERT_EQ(graph->inputs()->size(), 1u);
  EXPECT_EQ(tensor(m, graph->inputs()->Get(0))->name()->str(), "image");
  // The batch is dynamic: shape 1, shape_signature -1, for the input, the output and every
  // value between; the flattening RESHAPE keeps it as -1.
  EXPECT_EQ(shape(tensor(m, graph->inputs()->Get(0))), (std::vector<int32_t>{1, 28, 28, 1}));
  EXPECT_EQ(signature(tensor(m, graph->inputs()->Get(0))), (std::vector<int32_t>{-1, 28, 28, 1}));
  ASSERT_EQ(graph->outputs()->size(), 1u);
  EXPECT_EQ(tensor(m, graph->outputs()->Get(0))->name()->str(), "probabilities");
  EXPECT_EQ(shape(tensor(m, graph->outputs()->Get(0))), (std::vector<int32_t>{1, 10}));
  EXPECT_EQ(signature(tensor(m, graph->outputs()->Get(0))), (std::vector<int32_t>{-1, 10}));
  for (const fb::Operator* op : *graph->operators()) {
    const fb::Tensor* out = tensor(m, op->outputs()->Get(0));
    EXPECT_EQ(signature(out).at(0), -1) << out->name()->str();
  }
  const fb::Operator* flatten = graph->operators()->Get(4);
  EXPECT_EQ(flatten->builtin_options_as_ReshapeOptions()->new_shape()->Get(0), -1);
  EXPECT_EQ(int32_data(m, tensor(m, flatten->inputs()->Get(1))), (std::vector<int32_t>{-1, 3136}));

  // conv2: SAME 5x5, the slim biases as its third input, the relu fused; the filter OHWI.
  const fb::Operator* conv2 = graph->operators()->Get(2);
  const fb::Conv2DOptions* options = conv2->builtin_options_as_Conv2DOptions();
  ASSERT_NE(options, nullptr);
  EXPECT_EQ(options->padding(), fb::Padding_SAME);
  EXPECT_EQ(options->stride_h(), 1);
  EXPECT_EQ(options->fused_activation_function(), fb::ActivationFunctionType_RELU);
  ASSERT_EQ(conv2->inputs()->size(), 3u);
  const fb::Tensor* filter = tensor(m, conv2->inputs()->Get(1));
  EXPECT_EQ(filter->name()->str(), "LeNet/conv2/weights");
  EXPECT_EQ(shape(filter), (std::vector<int32_t>{64, 5, 5, 32}));
  const fb::Tensor* bias = tensor(m, conv2->inputs()->Get(2));
  EXPECT_EQ(bias->name()->str(), "LeNet/conv2/biases");
  EXPECT_EQ(data(m, bias), ctx.at("LeNet/conv2/biases").value().to_vector<float>());
  const std::vector<float> hwio = ctx.at("LeNet/conv2/weights").value().to_vector<float>();
  const std::vector<float> ohwi = data(m, filter);
  ASSERT_EQ(ohwi.size(), hwio.size());
  for (int64_t o = 0; o < 64; ++o) {
    for (int64_t h = 0; h < 5; ++h) {
      for (int64_t w = 0; w < 5; ++w) {
        for (int64_t i = 0; i < 32; ++i) {
          ASSERT_EQ(ohwi[static_cast<std::size_t>(((o * 5 + h) * 5 + w) * 32 + i)],
                    hwio[static_cast<std::size_t>(((h * 5 + w) * 32 + i) * 64 + o)]);
        }
      }
    }
  }
  // fc3: FULLY_CONNECTED's weights are [units, inputs], the transpose of slim's [inputs, units].
  const fb::Tensor* fc3 = tensor(m, graph->operators()->Get(5)->inputs()->Get(1));
  EXPECT_EQ(shape(fc3), (std::vector<int32_t>{1024, 3136}));
  const std::vector<float> ours = ctx.at("LeNet/fc3/weights").value().to_vector<float>();
  const std::vector<float> theirs = data(m, fc3);
  ASSERT_EQ(theirs.size(), ours.size());
  EXPECT_EQ(theirs[static_cast<std::size_t>(7 * 3136 + 100)],
            ours[static_cast<std::size_t>(100 * 1024 + 7)]);
  EXPECT_EQ(graph->operators()
                ->Get(5)
                ->builtin_options_as_FullyConnectedOptions()
                ->fused_activation_function(),
            fb::ActivationFunctionType_RELU);
}

TEST(TfliteExport, MobilenetV1DepthwiseFiltersAreOneByKhByKwByChannels) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("mobilenet_v1", {{"depth_multiplier", 0.25}});
  const fb::Model* m = nullptr;
  const std::string bytes = exported(*model, ctx, {64, 64, 3}, "mobilenet_v1");
  m = verified(bytes);
  int depthwise = 0;
  for (const fb::Operator* op : *m->subgraphs()->Get(0)->operators()) {
    if (builtin_code(m, op) != fb::BuiltinOperator_DEPTHWISE_CONV_2D) {
      continue;
    }
    ++depthwise;
    const fb::DepthwiseConv2DOptions* options = op->builtin_options_as_DepthwiseConv2DOptions();
    ASSERT_NE(options, nullptr);
    EXPECT_EQ(options->depth_multiplier(), 1);
    // The batch norm folds into the filter and bias; the relu6 after it is fused.
    EXPECT_EQ(options->fused_activation_function(), fb::ActivationFunctionType_RELU6);
    const fb::Tensor* filter = tensor(m, op->inputs()->Get(1));
    if (depthwise == 1) {
      EXPECT_EQ(filter->name()->str(), "MobilenetV1/Conv2d_1_depthwise/depthwise_weights");
      EXPECT_EQ(shape(filter), (std::vector<int32_t>{1, 3, 3, 8}));
    }
  }
  EXPECT_EQ(depthwise, 13);
}

// A batch norm after a convolution without a bias folds into it, as TensorFlow's converter folds
// it: each output channel's filter times gamma / sqrt(moving_variance + epsilon), the bias beta -
// moving_mean times that; no MUL or ADD is left in MobileNet v1.
TEST(TfliteExport, BatchNormFoldsIntoTheConvolutionBeforeIt) {
  FakeModelContext ctx(cpu(), 5);
  auto model = make_model("mobilenet_v1", {{"depth_multiplier", 0.25}});
  exported(*model, ctx, {64, 64, 3}, "mobilenet_v1");  // creates the variables
  const std::string bn = "MobilenetV1/Conv2d_1_depthwise/BatchNorm/";
  std::vector<double> gamma, beta, mean, variance;
  for (int c = 0; c < 8; ++c) {
    gamma.push_back(0.5 + 0.25 * c);
    beta.push_back(0.1 * c - 0.3);
    mean.push_back(0.05 * c);
    variance.push_back(0.2 + 0.3 * c);
  }
  ctx.set_value(bn + "gamma", gamma);
  ctx.set_value(bn + "beta", beta);
  ctx.set_value(bn + "moving_mean", mean);
  ctx.set_value(bn + "moving_variance", variance);
  const std::string bytes = exported(*model, ctx, {64, 64, 3}, "mobilenet_v1");
  const fb::Model* m = verified(bytes);
  for (fb::BuiltinOperator code : operators(m)) {
    EXPECT_NE(code, fb::BuiltinOperator_MUL);
    EXPECT_NE(code, fb::BuiltinOperator_ADD);
  }
  const fb::Operator* first = nullptr;
  for (const fb::Operator* op : *m->subgraphs()->Get(0)->operators()) {
    if (builtin_code(m, op) == fb::BuiltinOperator_DEPTHWISE_CONV_2D) {
      first = op;
      break;
    }
  }
  ASSERT_NE(first, nullptr);
  const std::vector<float> w =
      ctx.at("MobilenetV1/Conv2d_1_depthwise/depthwise_weights").value().to_vector<float>();
  const std::vector<float> folded = data(m, tensor(m, first->inputs()->Get(1)));
  const std::vector<float> bias = data(m, tensor(m, first->inputs()->Get(2)));
  ASSERT_EQ(folded.size(), w.size());
  ASSERT_EQ(bias.size(), 8u);
  const double epsilon = 0.001;  // slim's mobilenet_v1 arg scope
  for (std::size_t k = 0; k < w.size(); ++k) {
    const std::size_t c = k % 8;
    const double scale = gamma[c] / std::sqrt(variance[c] + epsilon);
    EXPECT_NEAR(folded[k], w[k] * scale, 1e-6 * std::abs(w[k] * scale) + 1e-12) << k;
    if (k < 8) {
      EXPECT_NEAR(bias[c], beta[c] - mean[c] * scale, 1e-6) << c;
    }
  }
}

TEST(TfliteExport, ATruncatedFileFailsTheVerifier) {
  FakeModelContext ctx(cpu(), 10);
  auto model = make_model("lenet");
  const std::string bytes = exported(*model, ctx, {28, 28, 1}, "lenet");
  const std::string truncated = bytes.substr(0, bytes.size() / 2);
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(truncated.data()),
                                 truncated.size());
  EXPECT_FALSE(fb::VerifyModelBuffer(verifier));
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

class SoftmaxOverChannelsOfAMapModel final : public BaseModel {
 public:
  ModelOutput forward(ModelContext&, const Batch& batch, Mode) override {
    return {ops::softmax(ops::relu(batch.features.at("image")), 1), std::nullopt, std::nullopt};
  }
};

TEST(TfliteExport, AnOpWithoutATfliteFormIsAnErrorNamingTheOpAndTheModel) {
  FakeModelContext ctx(cpu(), 2);
  TopKModel top_k;
  try {
    exported(top_k, ctx, {4, 4, 1}, "TopKModel");
    ADD_FAILURE() << "top_k was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("TFLite export of TopKModel: op 'top_k'"), std::string::npos) << message;
    EXPECT_NE(message.find("has no TFLite mapping"), std::string::npos) << message;
  }
  SoftmaxOverChannelsOfAMapModel softmax;
  try {
    exported(softmax, ctx, {4, 4, 2}, "SoftmaxModel");
    ADD_FAILURE() << "a softmax over axis 1 of 4 was exported";
  } catch (const Unimplemented& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("TFLite export of SoftmaxModel: op 'softmax'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("normalizes over axis 1 of a rank-4 value"), std::string::npos)
        << message;
  }
}

// The batch is the file's dynamic dimension: a model that mixes its examples (a sum over the
// batch, a slice of some examples, rows that do not group by example) cannot be exported.
class MixesTheBatchModel final : public BaseModel {
 public:
  explicit MixesTheBatchModel(int how) : how_(how) {}
  ModelOutput forward(ModelContext&, const Batch& batch, Mode) override {
    const Tensor x = ops::relu(batch.features.at("image"));  // [B, 4]
    const int64_t b = x.shape()[0];
    Tensor y;
    if (how_ == 0) y = ops::reduce_sum(x, {0}, true);
    if (how_ == 1) y = ops::slice(x, {1, 0}, {b - 1, 4});  // rows: a view, not a slice op
    if (how_ == 2) y = ops::reshape(x, Shape{2, 2 * b});   // each row takes half of the batch
    return {ops::sigmoid(y), std::nullopt, std::nullopt};
  }

 private:
  int how_;
};

TEST(TfliteExport, AModelThatMixesTheBatchIsRefusedNamingWhat) {
  FakeModelContext ctx(cpu(), 2);
  const std::vector<std::string> expected = {"reduces over the first dimension, the batch's",
                                             "a view of part of a computed value",
                                             "does not keep the batch (5 in the captured pass)"};
  for (int how = 0; how < 3; ++how) {
    MixesTheBatchModel model(how);
    TfliteExportOptions options;
    options.model_name = "MixesTheBatch";
    options.output_name = "predictions";
    options.inputs = {{"image", DType::kF32, {4}, 1.0}};
    try {
      tflite_model_bytes(model, ctx, options);
      ADD_FAILURE() << "case " << how << " was exported";
    } catch (const Unimplemented& e) {
      EXPECT_NE(std::string(e.what()).find(expected[static_cast<std::size_t>(how)]),
                std::string::npos)
          << e.what();
    }
  }
  // Rows of each example after the batch (MoeModel's [batch * classes, experts]) are kept.
  class RowsOfEachExampleModel final : public BaseModel {
   public:
    ModelOutput forward(ModelContext&, const Batch& batch, Mode) override {
      const Tensor& x = batch.features.at("image");  // [B, 6]
      const Tensor rows = ops::softmax(ops::reshape(x, Shape{x.shape()[0] * 3, 2}), 1);
      return {ops::reshape(rows, Shape{x.shape()[0], 6}), std::nullopt, std::nullopt};
    }
  } rows_model;
  TfliteExportOptions options;
  options.model_name = "Rows";
  options.output_name = "predictions";
  options.inputs = {{"image", DType::kF32, {6}, 1.0}};
  const std::string bytes = tflite_model_bytes(rows_model, ctx, options);
  const fb::Model* m = verified(bytes);
  const fb::SubGraph* graph = m->subgraphs()->Get(0);
  const fb::Operator* split = graph->operators()->Get(0);
  EXPECT_EQ(int32_data(m, tensor(m, split->inputs()->Get(1))), (std::vector<int32_t>{-1, 2}));
  const fb::Tensor* rows = tensor(m, split->outputs()->Get(0));
  EXPECT_EQ(shape(rows), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(signature(rows), (std::vector<int32_t>{-1, 2}));
}

TEST(TfliteExport, InputsMustBeGiven) {
  FakeModelContext ctx(cpu(), 2);
  TopKModel model;
  TfliteExportOptions options;
  options.model_name = "TopKModel";
  EXPECT_THROW(tflite_model_bytes(model, ctx, options), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
