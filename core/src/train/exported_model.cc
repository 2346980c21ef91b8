#include "trainyard/core/exported_model.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <shared_mutex>

#include <cstring>
#include <optional>

#include "engine/model_context.h"
#include "formats/saved_model_source.h"
#include "input/input_features.h"
#include "registry/pipeline_plugins.h"
#include "trainyard/autodiff.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/core/task.h"
#include "trainyard/detection_model.h"
#include "trainyard/error.h"
#include "trainyard/reader.h"
#include "trainyard/transform.h"

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

using input_internal::ResolvedPadding;

// `records` (each holding exactly `specs`, sorted by name as a record's map is) stacked into one
// batch as the input pipeline batches them: padded features to pad_to with their count and mask
// features, pad_to_largest features to the largest of the batch, the others stacked when their
// shapes agree. `locations` names each record in errors.
HostBatch collate(std::vector<ParsedRecord>& records, const std::vector<FeatureSpec>& specs,
                  const std::vector<std::optional<ResolvedPadding>>& paddings,
                  const std::vector<bool>& pad_largest, const std::vector<std::string>& locations) {
  HostBatch batch;
  const auto size = static_cast<int64_t>(records.size());
  batch.size = size;
  for (ParsedRecord& record : records) batch.ids.push_back(record.id);
  auto shaped = [&](ParsedFeature& f, DType dtype, const std::vector<int64_t>& row_shape) {
    f.dtype = dtype;
    f.shape = {size};
    f.shape.insert(f.shape.end(), row_shape.begin(), row_shape.end());
    f.bytes.assign(static_cast<std::size_t>(Shape(f.shape).num_elements()) * dtype_size(dtype),
                   std::byte{0});
  };
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    ParsedFeature& dst = batch.features[name];
    if (const std::optional<ResolvedPadding>& padding = paddings[i]) {
      const FeaturePadding& o = padding->options;
      shaped(dst, specs[i].dtype, input_internal::padded_shape(*padding));
      ParsedFeature* count = nullptr;
      ParsedFeature* mask = nullptr;
      if (!o.count_feature.empty()) {
        count = &batch.features[o.count_feature];
        shaped(*count, o.count_dtype, {});
      }
      if (!o.mask_feature.empty()) {
        mask = &batch.features[o.mask_feature];
        shaped(*mask, o.mask_dtype, {o.pad_to});
      }
      for (int64_t b = 0; b < size; ++b) {
        const auto at = static_cast<std::size_t>(b);
        ParsedFeature& src = records[at].features.at(name);
        input_internal::fit_to_padding(src, name, *padding, locations[at]);
        input_internal::write_padded_row(
            dst.bytes.data() + at * static_cast<std::size_t>(o.pad_to) * padding->row_bytes, src,
            *padding);
        if (count != nullptr) input_internal::write_integer(*count, at, src.shape[0]);
        if (mask != nullptr) input_internal::write_mask_row(*mask, b, src.shape[0], o.pad_to);
      }
    } else if (pad_largest[i]) {
      std::vector<ParsedFeature> rows;
      for (ParsedRecord& record : records) rows.push_back(std::move(record.features.at(name)));
      input_internal::write_padded_to_largest(dst, size, rows, name, locations);
    } else {
      const ParsedFeature& first = records[0].features.at(name);
      shaped(dst, specs[i].dtype, first.shape);
      for (std::size_t b = 0; b < records.size(); ++b) {
        const ParsedFeature& src = records[b].features.at(name);
        if (src.shape != first.shape) {
          throw InvalidArgument(
              "feature '" + name + "' of " + locations[b] + " has shape " + shape_text(src.shape) +
              " but " + locations[0] + " has " + shape_text(first.shape) +
              " after the eval reader's preprocessing, which neither brings "
              "them to one size nor pads '" +
              name + "' to the largest (pad_to_largest): give them one call each");
        }
        if (!src.bytes.empty()) {
          std::memcpy(dst.bytes.data() + b * src.bytes.size(), src.bytes.data(), src.bytes.size());
        }
      }
    }
  }
  return batch;
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
  bool detector = false;

  // The eval reader, its transforms and batching (run_images, run_examples).
  std::shared_ptr<Reader> reader;
  std::vector<FeatureSpec> reader_specs;
  std::vector<std::shared_ptr<const ExampleTransform>> transforms;
  std::vector<FeatureSpec> specs;  // after the transforms, sorted by name
  std::vector<std::optional<ResolvedPadding>> paddings;
  std::vector<bool> pad_largest;

  Batch batch(const std::vector<HostTensorView>& given, const std::string& where) const;
  std::vector<std::vector<float>> run_records(std::vector<ParsedRecord> records,
                                              const std::string& what) const;
  std::vector<std::vector<float>> outputs_of(const Batch& batch) const;
  std::vector<std::vector<float>> detections_of(const Tensor& packed, int64_t images) const;
};

ExportedModel::ExportedModel(const PluginRegistry& registry, const std::string& export_dir)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  std::error_code error;
  if (!fs::is_directory(export_dir, error)) {
    throw NotFound("export directory " + export_dir + " does not exist or is not a directory");
  }
  load_config_dialects(registry);  // the tasks' config messages (the OD API's steps)
  // Trainyard's own export (pipeline.config and the checkpoint), or a SavedModel Trainyard wrote
  // (its assets.extra's pipeline and its variables, which hold the values the graph reads: the
  // moving averages already where the pipeline asks for them).
  config::Pipeline pipeline;
  fs::path config_path = fs::path(export_dir) / "pipeline.config";
  bool averages_in_checkpoint = true;
  if (const std::optional<std::string> saved_model = saved_model_dir_of(export_dir)) {
    SavedModelSource source = read_saved_model_source(*saved_model);
    config_path = fs::path(source.dir) / kSavedModelExtraDir / kSavedModelPipelineAsset;
    pipeline = std::move(source.pipeline);
    pipeline.mutable_train_config()->set_train_dir(source.dir);
    s.prefix = source.prefix;
    averages_in_checkpoint = false;
  } else {
    if (!fs::is_regular_file(config_path, error)) {
      throw NotFound(export_dir + " is not a Trainyard export: it has no pipeline.config (" +
                     config_path.string() +
                     ") and no saved_model.pb; write one with trainyard export --export_dir");
    }
    pipeline = load_pipeline_config(config_path);
    pipeline.mutable_train_config()->set_train_dir(export_dir);
    s.prefix = checkpoint_or_latest(pipeline, "");
  }
  s.task = task_of(registry, pipeline);
  s.model_class = trainyard::model_class(registry, pipeline);
  s.detector = model_kind(registry, s.model_class) == ClassKind::kDetectionModel;

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
  s.reader = make_reader(registry, pipeline, input, field.c_str());
  s.reader_specs = guard_plugin_call(*s.reader, "features", [&] { return s.reader->features(); });
  InputOptions options = input_options_from_config(input, 1, 0, field);
  s.transforms = options.transforms;
  std::vector<FeatureSpec> specs = s.reader_specs;
  for (const auto& transform : s.transforms) specs = transform->features(std::move(specs));
  s.specs = specs;
  std::sort(s.specs.begin(), s.specs.end(),
            [](const FeatureSpec& a, const FeatureSpec& b) { return a.name < b.name; });
  s.pad_largest =
      input_internal::resolve_pad_to_largest(s.specs, options.pad_to_largest, options.padding);
  s.paddings = input_internal::resolve_padding(s.specs, options.padding);
  if (s.detector) {
    specs.clear();  // one input, image_tensor
    s.inputs.push_back({"image_tensor", DType::kU8, {-1, -1, -1, 3}});
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

  s.backend = make_inference_backend(registry, pipeline);
  s.model = make_model(registry, pipeline);
  s.restore = std::make_unique<CheckpointReader>(s.prefix);
  s.store = std::make_unique<VariableStore>(*s.backend, 0);
  s.store_context = std::make_unique<StoreContext>(*s.backend, *s.store, pipeline.num_classes(), 0,
                                                   s.restore.get());
  s.store_context->set_use_averages(averages_in_checkpoint &&
                                    (pipeline.eval_config().use_moving_averages() ||
                                     pipeline.train_config().use_moving_average()));
  s.ctx = std::make_unique<SharedContext>(*s.backend, *s.store, *s.store_context);

  // The warm-up forward on one zero example: restores every variable the model reads and gives
  // the outputs' shapes.
  if (s.detector) {
    const std::vector<uint8_t> image(32 * 32 * 3, 0);
    const HostTensorView view{
        "image_tensor", DType::kU8, {1, 32, 32, 3}, image.data(), image.size()};
    NoGradScope no_grad;
    const std::vector<std::vector<float>> warm = run_outputs({view});
    const auto m = static_cast<int64_t>(warm[1].size());
    s.outputs = {{"detection_boxes", DType::kF32, {-1, m, 4}},
                 {"detection_scores", DType::kF32, {-1, m}},
                 {"detection_classes", DType::kF32, {-1, m}},
                 {"num_detections", DType::kF32, {-1}}};
    return;
  }
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

bool ExportedModel::is_detector() const { return state_->detector; }

std::vector<float> ExportedModel::run(const std::vector<HostTensorView>& inputs) const {
  return run_outputs(inputs)[0];
}

std::vector<std::vector<float>> ExportedModel::run_outputs(
    const std::vector<HostTensorView>& inputs) const {
  const State& s = *state_;
  if (!s.detector) return s.outputs_of(s.batch(inputs, "run of " + s.model_class));
  const std::string where = "run of " + s.model_class;
  if (inputs.size() != 1 || inputs[0].name != "image_tensor") {
    std::string given;
    for (const HostTensorView& view : inputs) given += (given.empty() ? "" : ", ") + view.name;
    throw InvalidArgument(where + ": a detection model takes one input, 'image_tensor' u8 " +
                          "[-1, -1, -1, 3]; given " + (given.empty() ? "none" : given));
  }
  const HostTensorView& view = inputs[0];
  const std::vector<int64_t>& shape = view.shape;
  if (view.dtype != DType::kU8 || shape.size() != 4 || shape[0] < 1 || shape[1] < 1 ||
      shape[2] < 1 || shape[3] != 3) {
    throw InvalidArgument(where + ": input 'image_tensor' is " + dtype_name(view.dtype) + " " +
                          shape_text(shape) + "; expected u8 [N, H, W, 3], N, H and W at least 1");
  }
  const auto each = static_cast<std::size_t>(shape[1] * shape[2] * shape[3]);
  if (view.data == nullptr || view.bytes != each * static_cast<std::size_t>(shape[0])) {
    throw InvalidArgument(where + ": input 'image_tensor' of shape " + shape_text(shape) +
                          " needs " + std::to_string(each * static_cast<std::size_t>(shape[0])) +
                          " bytes of u8; given " + std::to_string(view.bytes));
  }
  std::vector<HostTensorView> images;
  for (int64_t i = 0; i < shape[0]; ++i) {
    images.push_back({"image_tensor",
                      DType::kU8,
                      {shape[1], shape[2], shape[3]},
                      static_cast<const std::byte*>(view.data) + each * static_cast<std::size_t>(i),
                      each});
  }
  return run_images(images);
}

std::vector<std::vector<float>> ExportedModel::run_images(
    const std::vector<HostTensorView>& images) const {
  const State& s = *state_;
  const std::string what = "run_images of " + s.model_class;
  auto image_spec = std::find_if(s.reader_specs.begin(), s.reader_specs.end(),
                                 [](const FeatureSpec& spec) { return spec.name == "image"; });
  if (image_spec == s.reader_specs.end() || image_spec->dtype != DType::kU8 ||
      image_spec->shape.size() != 3) {
    throw InvalidArgument(what + ": the pipeline's reader yields no u8 'image' [H, W, C], so the " +
                          "model takes no images");
  }
  if (images.empty()) throw InvalidArgument(what + ": no images given");
  const int64_t channels = image_spec->shape[2];
  std::vector<ParsedRecord> records;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const HostTensorView& view = images[i];
    const std::vector<int64_t>& shape = view.shape;
    const std::string name = "image " + std::to_string(i);
    if (view.dtype != DType::kU8 || shape.size() != 3 || shape[0] < 1 || shape[1] < 1 ||
        (channels > 0 && shape[2] != channels)) {
      throw InvalidArgument(what + ": " + name + " is " + dtype_name(view.dtype) + " " +
                            shape_text(shape) + "; expected u8 [H, W, " + std::to_string(channels) +
                            "], H and W at least 1");
    }
    const auto bytes = static_cast<std::size_t>(shape[0] * shape[1] * shape[2]);
    if (view.data == nullptr || view.bytes != bytes) {
      throw InvalidArgument(what + ": " + name + " of shape " + shape_text(shape) + " needs " +
                            std::to_string(bytes) + " bytes; given " + std::to_string(view.bytes) +
                            (view.data == nullptr ? " at NULL" : ""));
    }
    // The record the reader would yield for this image: groundtruth empty, other fixed
    // features zero.
    ParsedRecord record;
    record.id = std::to_string(i);
    for (const FeatureSpec& spec : s.reader_specs) {
      ParsedFeature& f = record.features[spec.name];
      f.dtype = spec.dtype;
      if (spec.name == "image") {
        f.shape = shape;
        f.bytes.resize(bytes);
        std::memcpy(f.bytes.data(), view.data, bytes);
        continue;
      }
      f.shape = spec.shape;
      for (int64_t& d : f.shape) d = d < 0 ? 0 : d;
      f.bytes.assign(
          static_cast<std::size_t>(Shape(f.shape).num_elements()) * dtype_size(spec.dtype),
          std::byte{0});
      if (spec.name == "true_image_shape" && spec.dtype == DType::kI32 &&
          f.shape == std::vector<int64_t>{3}) {
        const int32_t hwc[3] = {static_cast<int32_t>(shape[0]), static_cast<int32_t>(shape[1]),
                                static_cast<int32_t>(shape[2])};
        std::memcpy(f.bytes.data(), hwc, sizeof hwc);
      }
    }
    records.push_back(std::move(record));
  }
  return s.run_records(std::move(records), "image");
}

std::vector<std::vector<float>> ExportedModel::run_examples(
    const std::vector<std::string_view>& serialized) const {
  const State& s = *state_;
  if (serialized.empty()) {
    throw InvalidArgument("run_examples of " + s.model_class + ": no records given");
  }
  std::vector<ParsedRecord> records;
  for (std::size_t i = 0; i < serialized.size(); ++i) {
    const RecordLocation where{"the records given to run_examples", static_cast<int64_t>(i)};
    records.push_back(guard_plugin_call(*s.reader, "parse",
                                        [&] { return s.reader->parse(serialized[i], where); }));
  }
  return s.run_records(std::move(records), "record");
}

std::vector<std::vector<float>> ExportedModel::State::run_records(std::vector<ParsedRecord> records,
                                                                  const std::string& what) const {
  std::vector<std::string> locations;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string given = what == "image" ? "the images given" : "the records given";
    const RecordLocation where{given + " to run_" + what + "s", static_cast<int64_t>(i)};
    input_internal::validate_record(records[i], where, reader_specs, "the reader",
                                    /*leading_rows=*/true);
    input_internal::fill_leading_rows(records[i], reader_specs);
    for (std::size_t t = 0; t < transforms.size(); ++t) {
      ExampleRandom random(static_cast<uint64_t>(i) * 1000003u + t);
      guard_plugin_call(*transforms[t], "apply",
                        [&] { transforms[t]->apply(records[i], random, where); });
    }
    input_internal::validate_record(records[i], where, specs,
                                    "the reader and the eval reader's preprocessing");
    locations.push_back(what + " " + std::to_string(i));
  }
  HostBatch host = collate(records, specs, paddings, pad_largest, locations);
  return outputs_of(to_device(*task, *backend, host));
}

std::vector<std::vector<float>> ExportedModel::State::outputs_of(const Batch& batch) const {
  NoGradScope no_grad;
  ModelOutput out = guard_plugin_call(*model, "forward",
                                      [&] { return model->forward(*ctx, batch, Mode::kPredict); });
  const Tensor& p = out.predictions;
  const auto images = static_cast<int64_t>(batch.ids.size());
  if (detector) return detections_of(p, images);
  std::vector<int64_t> expected = outputs[0].shape;
  expected[0] = images;
  if (!p.defined() || p.shape().to_vector() != expected || p.dtype() != DType::kF32) {
    throw InvalidArgument("the model " + model_class + " gave predictions " +
                          (p.defined() ? p.description() : std::string("(none)")) +
                          "; expected f32" + shape_text(expected));
  }
  return {p.to_vector<float>()};
}

std::vector<std::vector<float>> ExportedModel::State::detections_of(const Tensor& packed,
                                                                    int64_t images) const {
  const bool fits = packed.defined() && packed.dtype() == DType::kF32 &&
                    packed.shape().rank() == 3 && packed.shape()[0] == images &&
                    packed.shape()[2] == kPackedDetectionWidth &&
                    (outputs.empty() || packed.shape()[1] == outputs[1].shape[1]);
  if (!fits) {
    throw InvalidArgument("the detection model " + model_class + " gave detections " +
                          (packed.defined() ? packed.description() : std::string("(none)")) +
                          "; expected f32 [" + std::to_string(images) + ", max_detections, " +
                          std::to_string(kPackedDetectionWidth) + "]");
  }
  const int64_t m = packed.shape()[1];
  const std::vector<float> d = packed.to_vector<float>();
  std::vector<std::vector<float>> out(4);
  out[0].assign(static_cast<std::size_t>(images * m * 4), 0.0f);
  out[1].assign(static_cast<std::size_t>(images * m), 0.0f);
  out[2].assign(static_cast<std::size_t>(images * m), 1.0f);  // padding: class 0 + 1
  out[3].assign(static_cast<std::size_t>(images), 0.0f);
  for (int64_t i = 0; i < images; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      const auto at = static_cast<std::size_t>(i * m + j);
      const float* row = d.data() + at * static_cast<std::size_t>(kPackedDetectionWidth);
      if (row[5] < 0.0f) continue;
      std::copy_n(row, 4, out[0].data() + at * 4);
      out[1][at] = row[4];
      out[2][at] = row[5] + 1.0f;
      out[3][static_cast<std::size_t>(i)] += 1.0f;
    }
  }
  return out;
}

}  // namespace trainyard
