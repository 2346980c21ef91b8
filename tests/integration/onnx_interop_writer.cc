// Writes what tests/integration/onnx_interop.py checks with onnx and ONNX Runtime: for each of
// the image classifiers below, the ONNX export at --opset (model.onnx), a batch of fixed images
// and Trainyard's own probabilities for them (raw little-endian f32, row-major), and a manifest
// line "name height width channels classes batch". The variables are the initializers' values,
// with batch-norm scales and offsets drawn away from 1 and 0 and the moving statistics those of
// the fixed images (one training forward with batch_norm_decay 0), so that the activations stay
// normalized through the depth, the probabilities differ from image to image and every
// exported parameter changes them. lenet is also written as a train_dir (pipeline.config
// and a checkpoint), for `trainyard export --format onnx` to export through the pipeline.
// With --tflite 1, each classifier's TFLite export (tflite_export.h) is written beside it
// (name.tflite), for tests/integration/tflite_interop.py.
//
//   onnx_interop_writer --output_dir D --opset 13 [--tflite 1]   (plugins from the build tree)
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
#include "trainyard/core/onnx_export.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tflite_export.h"
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
  if (!flags.count("--output_dir") || !flags.count("--opset")) {
    std::cerr << "usage: onnx_interop_writer --output_dir D --opset K\n";
    return 2;
  }
  const fs::path dir = flags["--output_dir"];
  const int opset = std::stoi(flags["--opset"]);
  const bool tflite = flags.count("--tflite") > 0 && flags["--tflite"] == "1";
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
  std::ofstream manifest(dir / "manifest.txt", std::ios::trunc);
  for (const Case& c : cases) {
    std::shared_ptr<BaseModel> model =
        registry.create<BaseModel>(ClassKind::kModel, c.model, c.options);
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
    OnnxExportOptions options;
    options.opset = opset;
    options.model_name = c.model;
    const std::string bytes =
        onnx_model_bytes(*model, ctx, {c.height, c.width, c.channels}, options);
    std::ofstream onnx_file(dir / (c.name + ".onnx"), std::ios::binary | std::ios::trunc);
    onnx_file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!onnx_file) throw Error("cannot write " + (dir / (c.name + ".onnx")).string());
    if (tflite) {
      TfliteExportOptions tflite_options;
      tflite_options.model_name = c.model;
      tflite_options.inputs = {{"image", DType::kF32, {c.height, c.width, c.channels}, 0.0}};
      const std::string flatbuffer = tflite_model_bytes(*model, ctx, tflite_options);
      std::ofstream tflite_file(dir / (c.name + ".tflite"), std::ios::binary | std::ios::trunc);
      tflite_file.write(flatbuffer.data(), static_cast<std::streamsize>(flatbuffer.size()));
      if (!tflite_file) throw Error("cannot write " + (dir / (c.name + ".tflite")).string());
    }
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
    std::cerr << "onnx_interop_writer: " << e.what() << "\n";
    return 1;
  }
}
