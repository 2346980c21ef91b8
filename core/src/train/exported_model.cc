#include "trainyard/core/exported_model.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <shared_mutex>

#include "engine/model_context.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/reader.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// A StoreContext that several forwards may share: variables the warm-up created are looked up
// under a shared lock; a new one is created and restored under the exclusive lock.
class SharedContext final : public ModelContext {
 public:
  SharedContext(Backend& backend, VariableStore& store, StoreContext& inner)
      : backend_(backend), store_(store), inner_(inner) {}
  Backend& backend() override { return backend_; }
  int64_t num_classes() const override { return inner_.num_classes(); }
  uint64_t seed() const override { return inner_.seed(); }
  Variable& variable(const VariableSpec& spec) override {
    {
      std::shared_lock lock(mutex_);
      if (Variable* v = store_.find(spec.name)) {
        if (v->value().shape() == spec.shape) return *v;
      }
    }
    std::unique_lock lock(mutex_);
    return inner_.variable(spec);  // creates, or throws naming both shapes
  }

 private:
  Backend& backend_;
  VariableStore& store_;
  StoreContext& inner_;
  std::shared_mutex mutex_;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

struct ExportedModel::State {
  std::string model_class;
  std::string prefix;
  std::shared_ptr<const Task> task;
  std::shared_ptr<Backend> backend;
  std::shared_ptr<BaseModel> model;
  std::unique_ptr<CheckpointReader> restore;
  std::unique_ptr<VariableStore> store;
  std::unique_ptr<StoreContext> store_context;
  std::unique_ptr<SharedContext> ctx;
  std::vector<ExportedTensorInfo> inputs;
  std::vector<ExportedTensorInfo> outputs;
  int64_t frames = 0;  // the frame axis of a rank-3 "features", else 0

  Batch batch(const std::vector<HostTensorView>& given, const std::string& where) const;
};

ExportedModel::ExportedModel(const PluginRegistry& registry, const std::string& export_dir)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  std::error_code error;
  if (!fs::is_directory(export_dir, error)) {
    throw NotFound("export directory " + export_dir + " does not exist or is not a directory");
  }
  const fs::path config_path = fs::path(export_dir) / "pipeline.config";
  if (!fs::is_regular_file(config_path, error)) {
    throw NotFound(export_dir + " is not a Trainyard export: it has no pipeline.config (" +
                   config_path.string() + "); write one with trainyard export --export_dir");
  }
  config::Pipeline pipeline = load_pipeline_config(config_path);
  pipeline.mutable_train_config()->set_train_dir(export_dir);
  s.task = task_of(registry, pipeline);
  s.model_class = trainyard::model_class(registry, pipeline);
  if (model_kind(registry, s.model_class) == ClassKind::kDetectionModel) {
    throw Unimplemented("the detection model " + s.model_class + " of " + config_path.string() +
                        " is not yet supported by the inference library, which runs models "
                        "of kind model (BaseModel)");
  }
  s.prefix = checkpoint_or_latest(pipeline, "");

  // The features as predict feeds them: eval's reader and steps where eval has steps or train
  // has none (pipeline_feature_shape's rule), else train's.
  const bool eval = pipeline.has_eval_input_reader() &&
                    (pipeline.eval_input_reader().preprocessing_step_size() > 0 ||
                     pipeline.train_input_reader().preprocessing_step_size() == 0);
  const std::string field = eval ? "eval_input_reader" : "train_input_reader";
  config::InputReader input = eval ? pipeline.eval_input_reader() : pipeline.train_input_reader();
  if (!input.has_reader() && pipeline.train_input_reader().has_reader()) {
    *input.mutable_reader() = pipeline.train_input_reader().reader();
  }
  std::shared_ptr<Reader> reader = make_reader(registry, pipeline, input, field.c_str());
  std::vector<FeatureSpec> specs =
      guard_plugin_call(*reader, "features", [&] { return reader->features(); });
  for (const auto& transform : transforms_from_config(input.preprocessing_step(), field)) {
    specs = transform->features(std::move(specs));
  }
  for (const FeatureSpec& spec : specs) {
    if (spec.name == "labels") continue;
    for (int64_t d : spec.shape) {
      if (d < 0) {
        throw ConfigError(config_path.string() + ": " + field + " gives '" + spec.name + "' as " +
                          shape_text(spec.shape) +
                          ", with a size left open; the inference library needs fixed "
                          "example shapes (crop images to default_image_size)");
      }
    }
    ExportedTensorInfo info{spec.name, spec.dtype, {-1}};
    info.shape.insert(info.shape.end(), spec.shape.begin(), spec.shape.end());
    if (spec.name == "features" && spec.shape.size() == 2) s.frames = spec.shape[0];
    s.inputs.push_back(std::move(info));
  }

  s.backend = make_backend(registry, pipeline);
  s.model = make_model(registry, pipeline);
  s.restore = std::make_unique<CheckpointReader>(s.prefix);
  s.store = std::make_unique<VariableStore>(*s.backend, 0);
  s.store_context = std::make_unique<StoreContext>(*s.backend, *s.store, pipeline.num_classes(), 0,
                                                   s.restore.get());
  s.store_context->set_use_averages(pipeline.eval_config().use_moving_averages() ||
                                    pipeline.train_config().use_moving_average());
  s.ctx = std::make_unique<SharedContext>(*s.backend, *s.store, *s.store_context);

  // The warm-up forward on one zero example: restores every variable the model reads and gives
  // the output's shape.
  std::vector<std::vector<std::byte>> zeros;
  std::vector<HostTensorView> views;
  for (const ExportedTensorInfo& info : s.inputs) {
    if (info.name == "num_frames") continue;
    HostTensorView view{info.name, info.dtype, info.shape, nullptr, 0};
    view.shape[0] = 1;
    view.bytes =
        static_cast<std::size_t>(Shape(view.shape).num_elements()) * dtype_size(info.dtype);
    zeros.emplace_back(view.bytes);
    view.data = zeros.back().data();
    views.push_back(std::move(view));
  }
  Batch batch = s.batch(views, export_dir);
  NoGradScope no_grad;
  ModelOutput out = guard_plugin_call(
      *s.model, "forward", [&] { return s.model->forward(*s.ctx, batch, Mode::kPredict); });
  if (!out.predictions.defined() || out.predictions.shape().rank() < 1 ||
      out.predictions.shape()[0] != 1) {
    throw InvalidArgument("the model " + s.model_class + " of " + export_dir +
                          " gave no predictions of one row for one example");
  }
  ExportedTensorInfo predictions{"predictions", DType::kF32, out.predictions.shape().to_vector()};
  predictions.shape[0] = -1;
  s.outputs.push_back(std::move(predictions));
}

ExportedModel::~ExportedModel() = default;

const std::string& ExportedModel::model_class() const { return state_->model_class; }
const std::string& ExportedModel::checkpoint_prefix() const { return state_->prefix; }
const std::vector<ExportedTensorInfo>& ExportedModel::inputs() const { return state_->inputs; }
const std::vector<ExportedTensorInfo>& ExportedModel::outputs() const { return state_->outputs; }

Batch ExportedModel::State::batch(const std::vector<HostTensorView>& given,
                                  const std::string& where) const {
  HostBatch host;
  int64_t batch_size = -1;
  std::string known;
  for (const ExportedTensorInfo& info : inputs) known += (known.empty() ? "" : ", ") + info.name;
  for (const HostTensorView& view : given) {
    auto info = std::find_if(inputs.begin(), inputs.end(),
                             [&](const ExportedTensorInfo& i) { return i.name == view.name; });
    if (info == inputs.end()) {
      throw InvalidArgument(where + ": no input named '" + view.name + "'; the inputs are " +
                            known);
    }
    if (host.features.count(view.name) != 0) {
      throw InvalidArgument(where + ": input '" + view.name + "' is given twice");
    }
    if (view.dtype != info->dtype) {
      throw InvalidArgument(where + ": input '" + view.name + "' is " + dtype_name(view.dtype) +
                            "; expected " + dtype_name(info->dtype));
    }
    bool fits =
        view.shape.size() == info->shape.size() && !view.shape.empty() && view.shape[0] >= 1;
    for (std::size_t i = 1; fits && i < view.shape.size(); ++i) {
      fits = view.shape[i] == info->shape[i];
    }
    if (!fits) {
      throw InvalidArgument(where + ": input '" + view.name + "' has shape " +
                            shape_text(view.shape) + "; expected " + shape_text(info->shape) +
                            " (-1: the batch size, at least 1)");
    }
    if (batch_size >= 0 && view.shape[0] != batch_size) {
      throw InvalidArgument(where + ": input '" + view.name + "' has a batch of " +
                            std::to_string(view.shape[0]) + " where another input has " +
                            std::to_string(batch_size));
    }
    batch_size = view.shape[0];
    const std::size_t bytes =
        static_cast<std::size_t>(Shape(view.shape).num_elements()) * dtype_size(view.dtype);
    if (view.bytes != bytes || (view.data == nullptr && bytes != 0)) {
      throw InvalidArgument(where + ": input '" + view.name + "' of shape " +
                            shape_text(view.shape) + " needs " + std::to_string(bytes) +
                            " bytes of " + dtype_name(view.dtype) + "; given " +
                            std::to_string(view.bytes));
    }
    ParsedFeature& feature = host.features[view.name];
    feature.dtype = view.dtype;
    feature.shape = view.shape;
    feature.bytes.resize(bytes);
    std::copy_n(static_cast<const std::byte*>(view.data), bytes, feature.bytes.data());
  }
  for (const ExportedTensorInfo& info : inputs) {
    if (host.features.count(info.name) != 0) continue;
    if (info.name != "num_frames" || batch_size < 0) {
      throw InvalidArgument(where + ": input '" + info.name + "' " + shape_text(info.shape) +
                            " is missing; the inputs are " + known);
    }
    ParsedFeature& feature = host.features[info.name];
    feature.dtype = info.dtype;
    feature.shape = {batch_size};
    std::vector<int32_t> frames(static_cast<std::size_t>(batch_size),
                                static_cast<int32_t>(std::max<int64_t>(this->frames, 1)));
    if (info.dtype != DType::kI32) {
      throw InvalidArgument(where + ": input 'num_frames' is " + dtype_name(info.dtype) +
                            ", not i32; give it");
    }
    feature.bytes.resize(frames.size() * sizeof(int32_t));
    std::copy_n(reinterpret_cast<const std::byte*>(frames.data()), feature.bytes.size(),
                feature.bytes.data());
  }
  host.ids.resize(static_cast<std::size_t>(batch_size));
  return to_device(*task, *backend, host);
}

std::vector<float> ExportedModel::run(const std::vector<HostTensorView>& inputs) const {
  const State& s = *state_;
  Batch batch = s.batch(inputs, "run of " + s.model_class);
  NoGradScope no_grad;
  ModelOutput out = guard_plugin_call(
      *s.model, "forward", [&] { return s.model->forward(*s.ctx, batch, Mode::kPredict); });
  const Tensor& p = out.predictions;
  std::vector<int64_t> expected = s.outputs[0].shape;
  expected[0] = static_cast<int64_t>(batch.ids.size());
  if (!p.defined() || p.shape().to_vector() != expected || p.dtype() != DType::kF32) {
    throw InvalidArgument("the model " + s.model_class + " gave predictions " +
                          (p.defined() ? p.description() : std::string("(none)")) +
                          "; expected f32" + shape_text(expected));
  }
  return p.to_vector<float>();
}

}  // namespace trainyard
