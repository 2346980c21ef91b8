// Writes what tests/integration/saved_model_interop.py checks with TensorFlow: for each of the
// image classifiers below, the SavedModel export (directory <name>/), a batch of fixed images
// and Trainyard's own probabilities for them (raw little-endian f32, row-major), and a manifest
// line "name height width channels classes batch". The variables are the initializers' values,
// with batch-norm scales and offsets drawn away from 1 and 0 and the moving statistics those of
// the fixed images (one training forward with batch_norm_decay 0), so that the activations stay
// normalized through the depth, the probabilities differ from image to image and every
// exported parameter changes them. lenet is also written as a train_dir (pipeline.config
// and a checkpoint), for `trainyard export --format saved_model` to export through the pipeline.
// (The cases and their variables are onnx_interop_writer.cc's.)
//
//   saved_model_interop_writer --output_dir D   (plugins from the build tree)
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace {

using namespace trainyard;
namespace fs = std::filesystem;

struct Case {
  std::string name;   // the file stem
  std::string model;  // the class
  std::map<std::string, OptionValue> options;
  int64_t height, width, channels, classes;
};

const int64_t kBatch = 3;

// The uses of ops the classifiers do not make, each with its TensorFlow form: a convolution with
// pads that are neither SAME nor VALID (Pad + VALID Conv2D), a depthwise convolution with
// multiplier 2 (filter [3, 3, C, 2]) and a grouped filter [3, 3, 1, 2C] (Reshape), a max pool
// with other pads (PadV2 of -inf), a batch norm of [N, C] (through [N, 1, 1, C]), Mean, Slice,
// ClipByValue, ConcatV2, Sub, Mul and AddV2 with constants, MatMul and BiasAdd.
class OpsCoverageModel final : public BaseModel {
 public:
  ModelOutput forward(ModelContext& ctx, const Batch& batch, Mode) override {
    auto var = [&](const std::string& name, Shape shape, Initializer init) {
      VariableSpec spec;
      spec.name = "Coverage/" + name;
      spec.shape = std::move(shape);
      spec.initializer = init;
      return ctx.variable(spec).value();
    };
    const Initializer glorot = Initializer::glorot_uniform();
    const Tensor& x = batch.features.at("image");  // [N, 12, 12, 3]
    Tensor y = ops::conv2d(x, var("conv1/weights", Shape{3, 3, 3, 8}, glorot), {2, 2},
                           Padding2D::explicit_pads(1, 0, 0, 1));
    y = ops::relu6(ops::add(y, var("conv1/biases", Shape{8}, Initializer::random_uniform(-1, 1))));
    y = ops::depthwise_conv2d(y, var("depthwise/depthwise_weights", Shape{3, 3, 8, 2}, glorot),
                              {1, 1}, Padding2D::same());  // [N, 6, 6, 16]
    y = ops::conv2d(y, var("grouped/weights", Shape{3, 3, 1, 32}, glorot), {1, 1},
                    Padding2D::same(), {1, 1}, 16);                                // [N, 6, 6, 32]
    y = ops::max_pool2d(y, {3, 3}, {2, 2}, Padding2D::explicit_pads(0, 1, 1, 0));  // [N, 3, 3, 32]
    Tensor features = ops::reduce_mean(y, {1, 2});                                 // [N, 32]
    features = ops::batch_norm_inference(
        features, var("bn/gamma", Shape{32}, Initializer::random_uniform(0.5, 1.5)),
        var("bn/beta", Shape{32}, Initializer::random_uniform(-0.5, 0.5)),
        var("bn/moving_mean", Shape{32}, Initializer::random_uniform(-0.2, 0.2)),
        var("bn/moving_variance", Shape{32}, Initializer::random_uniform(0.05, 0.2)), 1e-3);
    const Tensor left = ops::clip_by_value(ops::slice(features, {0, 0}, {-1, 20}), -1.5, 1.5);
    const Tensor tail = ops::slice(features, {0, 20}, {-1, 12});
    const Tensor right = ops::add(ops::sub(tail, ops::mul(tail, 0.5)), -0.25);
    const std::vector<Tensor> parts{left, right};
    Tensor logits = ops::matmul(ops::concat(parts, 1), var("fc/weights", Shape{32, 6}, glorot));
    logits = ops::add(logits, var("fc/biases", Shape{6}, Initializer::random_uniform(-1, 1)));
    return {ops::softmax(logits, 1), std::nullopt, std::nullopt};
  }
};

std::vector<float> fixed_images(const Case& c) {
  std::vector<float> pixels(static_cast<std::size_t>(kBatch * c.height * c.width * c.channels));
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    const double x = static_cast<double>(i);
    pixels[i] = static_cast<float>(std::sin(0.37 * x) + 0.5 * std::cos(0.011 * x));
  }
  return pixels;
}

// Batch-norm scales and offsets away from their initial 1 and 0, deterministically.
void vary_batch_norm_scales(testing::FakeModelContext& ctx) {
  int k = 0;
  for (const std::string& name : ctx.variable_names()) {
    const bool gamma = name.ends_with("/gamma"), beta = name.ends_with("/beta");
    if (!gamma && !beta) continue;
    const int64_t n = ctx.at(name).value().num_elements();
    std::vector<double> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double u = std::sin(1.3 * static_cast<double>(i) + 0.7 * static_cast<double>(++k));
      values[static_cast<std::size_t>(i)] = gamma ? 1.0 + 0.3 * u : 0.3 * u;
    }
    ctx.set_value(name, values);
  }
}

void write_floats(const fs::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) throw Error("cannot write " + path.string());
}

// lenet's train_dir: the pipeline of configs/fashion_mnist_lenet.config's model and input, and
// the variables as a checkpoint.
void write_train_dir(const fs::path& dir, testing::FakeModelContext& ctx) {
  fs::create_directories(dir);
  std::ofstream config(dir / "pipeline.config");
  config << "task: \"classification\"\nnum_classes: 10\nmodel { class: \"lenet\" }\n"
            "train_config { train_dir: \""
         << dir.string()
         << "\" }\n"
            "eval_input_reader {\n  reader {\n    class: \"ImageClassificationReader\"\n"
            "    params { key: \"channels\" int_value: 1 }\n  }\n  preprocessing_step {\n"
            "    image_classification_preprocessing {\n      fixed_resize_side: 0\n"
            "      default_image_size: 28\n      normalization: LENET\n    }\n  }\n}\n";
  if (!config) throw Error("cannot write " + (dir / "pipeline.config").string());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ctx.variable_names()) {
    tensors.emplace_back(name, ctx.at(name).value());
  }
  CheckpointManager(dir.string()).save(1, tensors);
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  if (!flags.count("--output_dir")) {
    std::cerr << "usage: saved_model_interop_writer --output_dir D\n";
    return 2;
  }
  const fs::path dir = flags["--output_dir"];
  fs::create_directories(dir);

  PluginRegistry::Settings settings;
  settings.use_environment = false;
  PluginRegistry registry(settings);
  std::shared_ptr<Backend> backend = registry.create<Backend>(ClassKind::kBackend, "cpu");

  const std::vector<Case> cases = {
      {"lenet", "lenet", {}, 28, 28, 1, 10},
      {"resnet_20", "resnet_20", {{"batch_norm_decay", 0.0}}, 32, 32, 3, 10},
      {"mobilenet_v1",
       "mobilenet_v1",
       {{"depth_multiplier", 0.25}, {"batch_norm_decay", 0.0}},
       64,
       64,
       3,
       5},
      {"mobilenet_v1_explicit_padding",
       "mobilenet_v1",
       {{"depth_multiplier", 0.25}, {"batch_norm_decay", 0.0}, {"use_explicit_padding", true}},
       64,
       64,
       3,
       5},
      {"resnet_v1_small",
       "resnet_v1",
       {{"batch_norm_decay", 0.0},
        {"base_depths", std::vector<int64_t>{4, 8}},
        {"num_units", std::vector<int64_t>{1, 2}},
        {"strides", std::vector<int64_t>{2, 1}}},
       64,
       64,
       3,
       7},
  };
  std::vector<Case> all = cases;
  all.push_back({"ops_coverage", "OpsCoverageModel", {}, 12, 12, 3, 6});
  std::ofstream manifest(dir / "manifest.txt", std::ios::trunc);
  for (const Case& c : all) {
    std::shared_ptr<BaseModel> model =
        c.model == "OpsCoverageModel"
            ? std::make_shared<OpsCoverageModel>()
            : registry.create<BaseModel>(ClassKind::kModel, c.model, c.options);
    testing::FakeModelContext ctx(*backend, c.classes);
    const std::vector<float> pixels = fixed_images(c);
    Batch batch;
    batch.features["image"] =
        Tensor::from_vector(*backend, Shape{kBatch, c.height, c.width, c.channels}, pixels);
    {
      NoGradScope no_grad;
      model->forward(ctx, batch, Mode::kPredict);  // creates the variables
      vary_batch_norm_scales(ctx);
      model->forward(ctx, batch, Mode::kTrain);  // moving statistics := the batch's
    }
    SavedModelExportOptions options;
    options.model_name = c.model;
    write_saved_model(saved_model_contents(*model, ctx, {c.height, c.width, c.channels}, options),
                      (dir / c.name).string());
    NoGradScope no_grad;
    const Tensor probabilities = model->forward(ctx, batch, Mode::kPredict).predictions;
    write_floats(dir / (c.name + ".images.f32"), pixels);
    write_floats(dir / (c.name + ".probabilities.f32"), probabilities.to_vector<float>());
    manifest << c.name << " " << c.height << " " << c.width << " " << c.channels << " " << c.classes
             << " " << kBatch << "\n";
    if (c.name == "lenet") write_train_dir(dir / "lenet_train_dir", ctx);
  }
  if (!manifest) throw Error("cannot write " + (dir / "manifest.txt").string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "saved_model_interop_writer: " << e.what() << "\n";
    return 1;
  }
}
