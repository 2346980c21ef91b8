// Writes what tests/integration/onnx_yt8m_interop.py checks with onnx and ONNX Runtime: for each
// YouTube-8M model below, the ONNX export at --opset (NAME.onnx), a batch of random features
// (NAME.features.f32, [batch, D] or [batch, max_frames, D]) with their num_frames
// (NAME.num_frames.i32) and Trainyard's own predictions for them (NAME.predictions.f32), as raw
// little-endian row-major arrays, and a manifest line "name max_frames feature_size classes
// batch" (max_frames 0 for a video-level model). The predictions are what `trainyard predict`
// computes: the YouTube-8M task's prepare_batch (the L2 normalization) and the forward in
// Mode::kPredict, with the task's prepare_batch also in the exported graph. Frame-level batches
// mix num_frames of 1, max_frames and between, with random values past num_frames (the reader
// pads with zeros; these prove the frame mask). The variables are the context's random
// initial values with every bias and batch-norm offset drawn away from 0. MoeModel and
// FrameLevelLogisticModel are also written as train_dirs (model_flags.json and a checkpoint) for
// `trainyard export --format onnx`, with their features in NAME_train_dir.features.f32 ... .
// With --tflite 1, the TFLite export (tflite_export.h) of each video-level model and of
// FrameLevelLogisticModel is written beside it (NAME.tflite), for
// tests/integration/tflite_interop.py.
//
//   onnx_yt8m_interop_writer --output_dir D --opset 13 [--tflite 1]   (plugins from the build tree)
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
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
#include "trainyard/task.h"
#include "trainyard/testing.h"

namespace {

using namespace trainyard;
namespace fs = std::filesystem;

struct Case {
  std::string name;   // the file stem
  std::string model;  // the class
  std::map<std::string, OptionValue> options;
  int64_t max_frames;  // 0: video level
  int64_t feature_size, classes;
  std::string model_params_json;  // for a train_dir case: model_flags.json's model_params
};

const int64_t kBatch = 5;

template <class T>
void write_array(const fs::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw Error("cannot write " + path.string());
}

// Biases and batch-norm offsets away from their initial 0, deterministically.
void vary_biases(testing::FakeModelContext& ctx) {
  int k = 0;
  for (const std::string& name : ctx.variable_names()) {
    if (!name.ends_with("/biases") && !name.ends_with("/bias") && !name.ends_with("/beta")) {
      continue;
    }
    const int64_t n = ctx.at(name).value().num_elements();
    std::vector<double> values(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      values[static_cast<std::size_t>(i)] =
          0.4 * std::sin(1.3 * static_cast<double>(i) + 0.7 * static_cast<double>(++k));
    }
    ctx.set_value(name, values);
  }
}

struct Inputs {
  std::vector<float> features;
  std::vector<int32_t> num_frames;
};

Inputs random_inputs(const Case& c, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Inputs in;
  const int64_t frames = c.max_frames == 0 ? 1 : c.max_frames;
  in.features.resize(static_cast<std::size_t>(kBatch * frames * c.feature_size));
  for (float& v : in.features) v = uniform(generator);
  if (c.max_frames == 0) {
    in.num_frames.assign(kBatch, 1);
  } else {
    const int64_t t = c.max_frames;
    in.num_frames = {1, static_cast<int32_t>(t), static_cast<int32_t>((t + 1) / 2), 2,
                     static_cast<int32_t>(t - 1)};
  }
  return in;
}

Batch batch_of(Backend& backend, const Case& c, const Inputs& in) {
  Batch batch;
  Shape shape = c.max_frames == 0 ? Shape{kBatch, c.feature_size}
                                  : Shape{kBatch, c.max_frames, c.feature_size};
  batch.features["features"] = Tensor::from_vector(backend, shape, in.features);
  batch.num_frames = Tensor::from_vector(backend, Shape{kBatch}, in.num_frames);
  return batch;
}

// Trainyard's predictions as predict computes them: the task's batch preparation, the forward.
std::vector<float> predictions(BaseModel& model, ModelContext& ctx, const Task& task, Batch batch) {
  NoGradScope no_grad;
  task.prepare_batch(batch);
  return ops::cast(model.forward(ctx, batch, Mode::kPredict).predictions, DType::kF32)
      .to_vector<float>();
}

void write_case(const fs::path& dir, const std::string& stem, const Case& c, const Inputs& in,
                const std::vector<float>& expected, std::ofstream& manifest) {
  write_array(dir / (stem + ".features.f32"), in.features);
  write_array(dir / (stem + ".num_frames.i32"), in.num_frames);
  write_array(dir / (stem + ".predictions.f32"), expected);
  manifest << stem << " " << c.max_frames << " " << c.feature_size << " " << c.classes << " "
           << kBatch << "\n";
}

// A YouTube-8M train_dir as train.py leaves it: model_flags.json and a checkpoint.
void write_train_dir(const fs::path& dir, const Case& c, testing::FakeModelContext& ctx) {
  fs::create_directories(dir);
  std::ofstream flags(dir / "model_flags.json", std::ios::trunc);
  flags << "{\"model\": \"" << c.model << "\", \"feature_sizes\": \"" << c.feature_size
        << "\", \"feature_names\": \"" << (c.max_frames == 0 ? "mean_rgb" : "rgb")
        << "\", \"frame_features\": " << (c.max_frames == 0 ? "false" : "true")
        << ", \"label_loss\": \"CrossEntropyLoss\", \"num_classes\": " << c.classes
        << ", \"model_params\": {" << c.model_params_json << "}}\n";
  if (!flags) throw Error("cannot write " + (dir / "model_flags.json").string());
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
    std::cerr << "usage: onnx_yt8m_interop_writer --output_dir D --opset K\n";
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
  std::shared_ptr<Task> task = registry.create<Task>(ClassKind::kTask, "yt8m", {});
  // The train_dir cases take the frame reader's default max_frames, 300.
  const std::vector<Case> cases = {
      {"logistic", "LogisticModel", {}, 0, 24, 11, ""},
      {"moe",
       "MoeModel",
       {{"moe_num_mixtures", int64_t{3}}},
       0,
       24,
       11,
       "\"moe_num_mixtures\": \"3\""},
      {"moe_low_rank_prob_gating",
       "MoeModel",
       {{"moe_num_mixtures", int64_t{2}},
        {"moe_low_rank_gating", int64_t{4}},
        {"moe_prob_gating", true}},
       0,
       24,
       11,
       ""},
      {"frame_logistic", "FrameLevelLogisticModel", {}, 7, 6, 9, ""},
      {"frame_logistic_300", "FrameLevelLogisticModel", {}, 300, 6, 9, ""},
      {"lstm",
       "LstmModel",
       {{"lstm_cells", int64_t{5}}, {"lstm_layers", int64_t{2}}, {"moe_num_mixtures", int64_t{2}}},
       7,
       6,
       9,
       ""},
      {"lstm_per_step",
       "LstmModel",
       {{"lstm_cells", int64_t{5}},
        {"lstm_layers", int64_t{1}},
        {"rnn_implementation", std::string("per_step")}},
       6,
       6,
       9,
       ""},
      {"lstm_concat_state",
       "LstmModel",
       {{"lstm_cells", int64_t{4}}, {"lstm_layers", int64_t{2}}, {"lstm_concat_state", true}},
       5,
       6,
       9,
       ""},
      {"gru", "GruModel", {{"gru_cells", int64_t{4}}, {"gru_layers", int64_t{2}}}, 6, 6, 9, ""},
  };
  std::ofstream manifest(dir / "manifest.txt", std::ios::trunc);
  std::ofstream train_dirs(dir / "train_dirs.txt", std::ios::trunc);
  uint32_t seed = 1;
  for (const Case& c : cases) {
    std::shared_ptr<BaseModel> model =
        registry.create<BaseModel>(ClassKind::kModel, c.model, c.options);
    testing::FakeModelContext ctx(*backend, c.classes);
    const Inputs in = random_inputs(c, ++seed);
    predictions(*model, ctx, *task, batch_of(*backend, c, in));  // creates the variables
    vary_biases(ctx);
    const std::vector<float> expected = predictions(*model, ctx, *task, batch_of(*backend, c, in));

    OnnxExportOptions options;
    options.opset = opset;
    options.model_name = c.model;
    options.output_name = "predictions";
    const int64_t frames = c.max_frames == 0 ? 1 : c.max_frames;
    options.inputs = {{"features", DType::kF32,
                       c.max_frames == 0 ? std::vector<int64_t>{c.feature_size}
                                         : std::vector<int64_t>{c.max_frames, c.feature_size},
                       0.0},
                      {"num_frames", DType::kI32, {}, static_cast<double>(frames)}};
    options.prepare_batch = [&task](Batch& batch) { task->prepare_batch(batch); };
    const std::string bytes = onnx_model_bytes(*model, ctx, options);
    std::ofstream onnx_file(dir / (c.name + ".onnx"), std::ios::binary | std::ios::trunc);
    onnx_file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!onnx_file) throw Error("cannot write " + (dir / (c.name + ".onnx")).string());
    write_case(dir, c.name, c, in, expected, manifest);
    if (tflite && (c.max_frames == 0 || c.model == "FrameLevelLogisticModel")) {
      TfliteExportOptions tflite_options;
      tflite_options.model_name = c.model;
      tflite_options.output_name = "predictions";
      tflite_options.inputs = options.inputs;
      tflite_options.prepare_batch = options.prepare_batch;
      const std::string flatbuffer = tflite_model_bytes(*model, ctx, tflite_options);
      std::ofstream tflite_file(dir / (c.name + ".tflite"), std::ios::binary | std::ios::trunc);
      tflite_file.write(flatbuffer.data(), static_cast<std::streamsize>(flatbuffer.size()));
      if (!tflite_file) throw Error("cannot write " + (dir / (c.name + ".tflite")).string());
    }

    if (!c.model_params_json.empty() || c.name == "frame_logistic_300") {
      write_train_dir(dir / (c.name + "_train_dir"), c, ctx);
      train_dirs << c.name << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "onnx_yt8m_interop_writer: " << e.what() << "\n";
    return 1;
  }
}
