// The frame-level models (the starter code's and WILLOW's) against TensorFlow:
// tests/golden/make_frame_models_golden.py built each
// case in a TensorFlow 1.x graph with the originals' ops (tf_slim, BasicLSTMCell, GRUCell,
// dynamic_rnn), saved its variables under the originals' names and recorded its predictions.
// Here each checkpoint is loaded by name into the Trainyard model of the same class and
// options, and the predictions must agree to 1e-4 on every test backend. Every variable the
// model creates must be found in the checkpoint, and every checkpoint variable must be used, so
// the test pins the variable names as well as the math.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
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

const std::string kDir = std::string(TRAINYARD_GOLDEN_DIR) + "/frame_models";

struct GoldenCase {
  std::string name, model;
  int64_t num_classes = 0;
  std::map<std::string, OptionValue> options;
  std::vector<int64_t> shape;
  std::vector<int32_t> num_frames;
  std::vector<double> features, predictions;
};

template <class T>
std::vector<T> numbers(std::istringstream& in) {
  std::vector<T> out;
  T v;
  while (in >> v) out.push_back(v);
  return out;
}

std::vector<GoldenCase> read_manifest() {
  std::ifstream file(kDir + "/manifest.txt");
  if (!file) throw std::runtime_error("cannot read " + kDir + "/manifest.txt");
  std::vector<GoldenCase> cases;
  GoldenCase c;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      c = GoldenCase();
      in >> c.name;
    } else if (key == "model") {
      in >> c.model;
    } else if (key == "num_classes") {
      in >> c.num_classes;
    } else if (key == "option") {
      std::string name, type, value;
      in >> name >> type >> value;
      if (type == "int") c.options[name] = int64_t{std::stoll(value)};
      if (type == "bool") c.options[name] = value == "true";
      if (type == "string") c.options[name] = value;
    } else if (key == "shape") {
      c.shape = numbers<int64_t>(in);
    } else if (key == "num_frames") {
      c.num_frames = numbers<int32_t>(in);
    } else if (key == "features") {
      c.features = numbers<double>(in);
    } else if (key == "predictions") {
      c.predictions = numbers<double>(in);
    } else if (key == "end") {
      cases.push_back(c);
    }
  }
  return cases;
}

PluginRegistry& registry() { return test::plugin_registry(); }

class FrameModelsGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, FrameModelsGoldenTest,
                         ::testing::ValuesIn(test::backend_names()), backend_test_name);

TEST_P(FrameModelsGoldenTest, PredictionsMatchTensorFlowWithTheOriginalsVariables) {
  std::vector<GoldenCase> cases = read_manifest();
  ASSERT_EQ(cases.size(), 14u) << "the manifest lists the generator's fourteen cases";
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name + " (" + c.model + ")");
    auto model = registry().create<BaseModel>(ClassKind::kModel, c.model, c.options);
    testing::FakeModelContext ctx(backend(), c.num_classes);
    Batch batch;
    batch.features["features"] = ops::cast(
        Tensor::from_vector(backend(), Shape{c.shape[0], c.shape[1], c.shape[2]}, c.features),
        DType::kF32);
    batch.num_frames = Tensor::from_vector(backend(), Shape{c.shape[0]}, c.num_frames);
    model->forward(ctx, batch, Mode::kEval);

    CheckpointReader reader(kDir + "/" + c.name + "/model.ckpt");
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
    EXPECT_TRUE(unused.empty()) << "checkpoint variables the model does not create, e.g. "
                                << *unused.begin();

    ModelOutput out = model->forward(ctx, batch, Mode::kEval);
    ASSERT_EQ(out.predictions.shape(), (Shape{c.shape[0], c.num_classes}));
    std::vector<double> got = ops::cast(out.predictions, DType::kF64).to_vector<double>();
    EXPECT_EQ(testing::compare_close(got, c.predictions, 1e-4, 0.0), "");
  }
}

}  // namespace
}  // namespace trainyard
