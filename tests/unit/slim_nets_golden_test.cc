// TF-Slim checkpoints written by TensorFlow itself, in both layouts, restored by name into the
// image classifiers: tests/golden/make_slim_nets_golden.py built a slim-named ResNet v1
// (tf_slim.nets.resnet_v1 with small blocks), MobileNet v1 (depth_multiplier 0.25), slim's own
// mobilenet_v3.small (depth_multiplier 0.25: hard_swish, squeeze_excite, Conv_2's biases,
// reduce_to_1x1) and tensorflow/models' Inception v2 and v3 (depth_multiplier 0.1, v3 with its
// AuxLogits) in a TensorFlow 1.x graph, set every variable (batch norm statistics included) to
// values that keep activations of order one, saved them as V2 (.index + .data) and V1 (one file,
// as TF-Slim's published checkpoints) and recorded the softmax of four fixed images. Here both
// checkpoints restore every variable the model creates, use every tensor they hold, and give
// TensorFlow's probabilities to 1e-4 (Inception v3: 1e-3, below) on every test backend: the
// names, the HWIO layouts, conv2d_same's explicit padding against TensorFlow's SAME, the stride on
// the bottleneck's 3x3 conv, relu6, the reduced average-pool kernel, Inception's branch order, its
// separable first layer outside the arg scope (biases, no batch norm) and batch norm without gamma
// are all pinned.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "test_registry.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

const std::string kDir = std::string(TRAINYARD_GOLDEN_DIR) + "/slim_nets";

std::vector<float> read_f32(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() != count * sizeof(float)) {
    throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(count * sizeof(float)));
  }
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data(), bytes.size());  // the files are little-endian, as we are
  return out;
}

struct GoldenNet {
  const char* dir;
  const char* model;
  std::map<std::string, OptionValue> options;
  int64_t size;  // square images, 3 channels
  // Of the probabilities. Inception v3 (94 batch norms on calibrated statistics) is
  // ill-conditioned with these weights: a random relative change of 1e-6 in TensorFlow's own
  // input, or in Conv2d_1a_3x3's weights, moves its probabilities by up to 9.4e-4 (ours differ
  // from them by up to 1.8e-4, on one image); a wrong padding or branch moves them by tenths.
  double tolerance = 1e-4;
};

std::vector<GoldenNet> golden_nets() {
  return {
      {"resnet_v1_small",
       "resnet_v1",
       {{"base_depths", std::vector<int64_t>{4, 8}},
        {"num_units", std::vector<int64_t>{2, 2}},
        {"strides", std::vector<int64_t>{2, 1}},
        {"scope", std::string("resnet_v1_small")}},
       32},
      {"mobilenet_v1_025", "mobilenet_v1", {{"depth_multiplier", 0.25}}, 64},
      {"inception_v2_01", "inception_v2", {{"depth_multiplier", 0.1}}, 64},
      {"inception_v3_01", "inception_v3", {{"depth_multiplier", 0.1}}, 139, 1e-3},
      {"mobilenet_v3_small_025", "mobilenet_v3_small", {{"depth_multiplier", 0.25}}, 64},
  };
}

constexpr int64_t kImages = 4;
constexpr int64_t kClasses = 5;

class SlimNetsGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, SlimNetsGoldenTest, ::testing::ValuesIn(test::backend_names()),
                         backend_test_name);

TEST_P(SlimNetsGoldenTest, CheckpointsOfBothLayoutsGiveTensorFlowsProbabilities) {
  for (const GoldenNet& net : golden_nets()) {
    const std::string dir = kDir + "/" + net.dir;
    const std::vector<float> images =
        read_f32(dir + "/images.f32", static_cast<std::size_t>(kImages * net.size * net.size * 3));
    const std::vector<float> expected_f32 =
        read_f32(dir + "/probabilities.f32", static_cast<std::size_t>(kImages * kClasses));
    const std::vector<double> expected(expected_f32.begin(), expected_f32.end());
    // V2 by its prefix, V1 by its file: the two ways users name them.
    for (const std::string layout : {"v2/model.ckpt", "v1/model.ckpt"}) {
      SCOPED_TRACE(std::string(net.dir) + " " + layout);
      auto model =
          test::plugin_registry().create<BaseModel>(ClassKind::kModel, net.model, net.options);
      testing::FakeModelContext ctx(backend(), kClasses);
      Batch batch;
      batch.features["image"] =
          Tensor::from_vector(backend(), Shape{kImages, net.size, net.size, 3}, images);
      NoGradScope no_grad;
      model->forward(ctx, batch, Mode::kEval);

      CheckpointReader reader(dir + "/" + layout);
      std::set<std::string> unused;
      for (const CheckpointTensorInfo& info : reader.tensors()) unused.insert(info.name);
      for (Variable* v : ctx.store().collection(kGlobalVariables)) {
        ASSERT_TRUE(reader.contains(v->name()))
            << "the model's variable " << v->name() << " is not in TensorFlow's checkpoint";
        Tensor value = reader.read(v->name(), backend());
        ASSERT_EQ(value.shape(), v->spec().shape) << v->name();
        value.set_requires_grad(v->trainable());
        v->assign(value);
        unused.erase(v->name());
      }
      EXPECT_TRUE(unused.empty()) << unused.size()
                                  << " checkpoint tensors the model does not create, e.g. "
                                  << *unused.begin();

      ModelOutput out = model->forward(ctx, batch, Mode::kEval);
      ASSERT_EQ(out.predictions.shape(), (Shape{kImages, kClasses}));
      const std::vector<double> got = ops::cast(out.predictions, DType::kF64).to_vector<double>();
      EXPECT_EQ(testing::compare_close(got, expected, net.tolerance, 0.0), "");
    }
  }
}

}  // namespace
}  // namespace trainyard
