// The Object Detection API's pipeline.config converted into Trainyard's Pipeline (od_config.h).
#include "od_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "od_config_internal.h"
#include "trainyard/config_dialect.h"
#include "trainyard/error.h"
#include "trainyard/names.h"

namespace trainyard::detection {
namespace {

namespace pb = google::protobuf;

class FirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (message_.empty()) {
      line_ = line;
      column_ = column;
      message_ = message;
    }
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return !message_.empty(); }
  int line() const { return line_; }
  int column() const { return column_; }
  std::string describe(std::string_view source) const {
    if (message_.empty()) return std::string(source) + ": cannot parse";
    return std::string(source) + ":" + std::to_string(line_ + 1) + ":" +
           std::to_string(column_ + 1) + ": " + message_;
  }

 private:
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// A float field as the shortest decimal that reads back as the same float (0.03f -> 0.03).
double to_double(float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  double out = value;
  if (error == std::errc()) std::from_chars(text, end, out);
  return out;
}

// ---- the model's params ----

// The API's oneof wrappers (BoxCoder, Matcher, ImageResizer, ...): every field is a member of
// the same oneof.
bool is_oneof_wrapper(const pb::Descriptor* d) {
  if (d->field_count() == 0 || d->field(0)->containing_oneof() == nullptr) return false;
  for (int i = 1; i < d->field_count(); ++i) {
    if (d->field(i)->containing_oneof() != d->field(0)->containing_oneof()) return false;
  }
  return true;
}

std::string joined(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

config::Param* add_param(config::PluginSpec* spec, const std::string& key) {
  config::Param* param = spec->add_params();
  param->set_key(key);
  return param;
}

void add_scalar(const pb::Message& m, const pb::FieldDescriptor* f, const std::string& key,
                config::PluginSpec* spec) {
  const pb::Reflection* r = m.GetReflection();
  config::Param* p = add_param(spec, key);
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      p->set_bool_value(r->GetBool(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT32:
      p->set_int_value(r->GetInt32(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      p->set_int_value(r->GetInt64(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      p->set_int_value(r->GetUInt32(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      p->set_int_value(static_cast<int64_t>(r->GetUInt64(m, f)));
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      p->set_float_value(to_double(r->GetFloat(m, f)));
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      p->set_float_value(r->GetDouble(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      p->set_string_value(r->GetString(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      p->set_string_value(r->GetEnum(m, f)->name());
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

void add_list(const pb::Message& m, const pb::FieldDescriptor* f, const std::string& key,
              const std::string& where, config::PluginSpec* spec) {
  const pb::Reflection* r = m.GetReflection();
  const int n = r->FieldSize(m, f);
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      config::FloatList* list = add_param(spec, key)->mutable_float_list();
      for (int i = 0; i < n; ++i) {
        list->add_value(f->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT
                            ? to_double(r->GetRepeatedFloat(m, f, i))
                            : r->GetRepeatedDouble(m, f, i));
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_INT64:
    case pb::FieldDescriptor::CPPTYPE_UINT32:
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      config::IntList* list = add_param(spec, key)->mutable_int_list();
      for (int i = 0; i < n; ++i) {
        switch (f->cpp_type()) {
          case pb::FieldDescriptor::CPPTYPE_INT32:
            list->add_value(r->GetRepeatedInt32(m, f, i));
            break;
          case pb::FieldDescriptor::CPPTYPE_INT64:
            list->add_value(r->GetRepeatedInt64(m, f, i));
            break;
          case pb::FieldDescriptor::CPPTYPE_UINT32:
            list->add_value(r->GetRepeatedUInt32(m, f, i));
            break;
          default:
            list->add_value(static_cast<int64_t>(r->GetRepeatedUInt64(m, f, i)));
        }
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING:
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      config::StringList* list = add_param(spec, key)->mutable_string_list();
      for (int i = 0; i < n; ++i) {
        list->add_value(f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING
                            ? r->GetRepeatedString(m, f, i)
                            : r->GetRepeatedEnum(m, f, i)->name());
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL:
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  throw ConfigError(where + "." + key + ": a repeated " +
                    (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL ? "bool" : "message") +
                    " field has no param form");
}

// Fields of the model that are not params (od_config.h).
bool is_not_a_param(const pb::FieldDescriptor* f) {
  return f == od::Ssd::descriptor()->FindFieldByName("num_classes") ||
         f == od::FasterRcnn::descriptor()->FindFieldByName("num_classes") ||
         f == od::SsdFeatureExtractor::descriptor()->FindFieldByName("batch_norm_trainable");
}

// `where` names the model's message in errors ("model.ssd").
void flatten(const pb::Message& m, const std::string& path, const std::string& where,
             config::PluginSpec* spec) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);  // by field number
  for (const pb::FieldDescriptor* f : fields) {
    if (is_not_a_param(f)) continue;
    const std::string key = joined(path, f->name());
    if (const pb::OneofDescriptor* oneof = f->containing_oneof(); oneof != nullptr) {
      const std::string oneof_key =
          is_oneof_wrapper(m.GetDescriptor()) ? path : joined(path, oneof->name());
      add_param(spec, oneof_key)->set_string_value(f->name());
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        flatten(r->GetMessage(m, f), key, where, spec);
      } else {
        add_scalar(m, f, key, spec);
      }
      continue;
    }
    if (f->is_repeated()) {
      add_list(m, f, key, where, spec);
      continue;
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      add_scalar(m, f, key, spec);
      continue;
    }
    const pb::Message& sub = r->GetMessage(m, f);
    if (is_oneof_wrapper(f->message_type())) {
      std::vector<const pb::FieldDescriptor*> chosen;
      sub.GetReflection()->ListFields(sub, &chosen);
      if (chosen.empty()) {
        std::vector<std::string> members;
        for (int i = 0; i < f->message_type()->field_count(); ++i) {
          members.push_back(f->message_type()->field(i)->name());
        }
        throw ConfigError(where + "." + key + " is empty; it must set one of " +
                          join_names(members));
      }
    } else {
      add_param(spec, key)->set_bool_value(true);
    }
    flatten(sub, key, where, spec);
  }
}

// ---- train_config ----

void convert_learning_rate(const od::LearningRate& in, const std::string& where,
                           config::LearningRate* out) {
  switch (in.learning_rate_case()) {
    case od::LearningRate::kConstantLearningRate:
      out->mutable_constant()->set_learning_rate(
          to_double(in.constant_learning_rate().learning_rate()));
      return;
    case od::LearningRate::kExponentialDecayLearningRate: {
      const od::ExponentialDecayLearningRate& e = in.exponential_decay_learning_rate();
      config::ExponentialDecayLearningRate* o = out->mutable_exponential_decay_learning_rate();
      o->set_initial_learning_rate(to_double(e.initial_learning_rate()));
      o->set_decay_steps(e.decay_steps());
      o->set_decay_factor(to_double(e.decay_factor()));
      o->set_staircase(e.staircase());
      o->set_burnin_learning_rate(to_double(e.burnin_learning_rate()));
      o->set_burnin_steps(e.burnin_steps());
      o->set_min_learning_rate(to_double(e.min_learning_rate()));
      return;
    }
    case od::LearningRate::kManualStepLearningRate: {
      const od::ManualStepLearningRate& m = in.manual_step_learning_rate();
      config::ManualStepLearningRate* o = out->mutable_manual_step_learning_rate();
      o->set_initial_learning_rate(to_double(m.initial_learning_rate()));
      for (const auto& s : m.schedule()) {
        auto* step = o->add_schedule();
        step->set_step(s.step());
        step->set_learning_rate(to_double(s.learning_rate()));
      }
      o->set_warmup(m.warmup());
      return;
    }
    case od::LearningRate::kCosineDecayLearningRate: {
      const od::CosineDecayLearningRate& c = in.cosine_decay_learning_rate();
      config::CosineDecayLearningRate* o = out->mutable_cosine_decay_learning_rate();
      o->set_learning_rate_base(to_double(c.learning_rate_base()));
      o->set_total_steps(c.total_steps());
      o->set_warmup_learning_rate(to_double(c.warmup_learning_rate()));
      o->set_warmup_steps(c.warmup_steps());
      o->set_hold_base_rate_steps(c.hold_base_rate_steps());
      return;
    }
    case od::LearningRate::LEARNING_RATE_NOT_SET:
      break;
  }
  throw ConfigError(where +
                    ".learning_rate is not set (constant_learning_rate, "
                    "exponential_decay_learning_rate, manual_step_learning_rate or "
                    "cosine_decay_learning_rate)");
}

void float_param(config::PluginSpec* spec, const char* key, float value) {
  add_param(spec, key)->set_float_value(to_double(value));
}

void convert_optimizer(const od::Optimizer& in, config::TrainConfig* tc) {
  const std::string where = "train_config.optimizer";
  config::PluginSpec* spec = tc->mutable_optimizer();
  switch (in.optimizer_case()) {
    case od::Optimizer::kRmsPropOptimizer: {
      const od::RMSPropOptimizer& o = in.rms_prop_optimizer();
      spec->set_class_("RMSPropOptimizer");
      float_param(spec, "decay", o.decay());
      float_param(spec, "momentum", o.momentum_optimizer_value());
      float_param(spec, "epsilon", o.epsilon());
      convert_learning_rate(o.learning_rate(), where + ".rms_prop_optimizer",
                            tc->mutable_learning_rate());
      break;
    }
    case od::Optimizer::kMomentumOptimizer: {
      const od::MomentumOptimizer& o = in.momentum_optimizer();
      spec->set_class_("MomentumOptimizer");
      float_param(spec, "momentum", o.momentum_optimizer_value());
      convert_learning_rate(o.learning_rate(), where + ".momentum_optimizer",
                            tc->mutable_learning_rate());
      break;
    }
    case od::Optimizer::kAdamOptimizer: {
      const od::AdamOptimizer& o = in.adam_optimizer();
      spec->set_class_("AdamOptimizer");
      float_param(spec, "epsilon", o.epsilon());
      convert_learning_rate(o.learning_rate(), where + ".adam_optimizer",
                            tc->mutable_learning_rate());
      break;
    }
    case od::Optimizer::OPTIMIZER_NOT_SET:
      throw ConfigError(where +
                        " names no optimizer (rms_prop_optimizer, momentum_optimizer or "
                        "adam_optimizer)");
  }
  tc->set_use_moving_average(in.use_moving_average());
  tc->set_moving_average_decay(to_double(in.moving_average_decay()));
}

void refuse_if(bool set, const std::string& field, const std::string& why) {
  if (set) throw ConfigError(field + ": " + why);
}

void convert_train_config(const od::TrainConfig& t, config::Pipeline* p) {
  config::TrainConfig* tc = p->mutable_train_config();
  tc->set_batch_size(t.batch_size());
  if (t.num_steps() > 0) tc->set_max_steps(t.num_steps());
  if (!t.has_optimizer()) {
    throw ConfigError(
        "train_config.optimizer is not set (rms_prop_optimizer, momentum_optimizer or "
        "adam_optimizer)");
  }
  convert_optimizer(t.optimizer(), tc);
  tc->set_clip_gradient_norm(to_double(t.gradient_clipping_by_norm()));
  tc->set_keep_checkpoint_every_n_hours(to_double(t.keep_checkpoint_every_n_hours()));
  if (!t.fine_tune_checkpoint().empty()) {
    tc->set_fine_tune_checkpoint(t.fine_tune_checkpoint());
    // The API's rule (model_lib.py): the type, else from_detection_checkpoint's.
    tc->set_fine_tune_checkpoint_type(!t.fine_tune_checkpoint_type().empty()
                                          ? t.fine_tune_checkpoint_type()
                                      : t.from_detection_checkpoint() ? "detection"
                                                                      : "classification");
    tc->set_load_all_detection_checkpoint_vars(t.load_all_detection_checkpoint_vars());
  }
  for (const std::string& pattern : t.freeze_variables()) tc->add_freeze_variables(pattern);
  for (const std::string& pattern : t.update_trainable_variables()) {
    tc->add_update_trainable_variables(pattern);
  }
  tc->set_bias_grad_multiplier(to_double(t.bias_grad_multiplier()));
  tc->set_regularization_penalty(t.add_regularization_loss() ? 1.0 : 0.0);
  if (t.summarize_gradients()) tc->set_summarize_gradients(true);
  refuse_if(t.merge_multiple_label_boxes(), "train_config.merge_multiple_label_boxes",
            "true merges boxes with the same coordinates into one multi-label box, which "
            "Trainyard's detection input does not do");
  refuse_if(t.use_multiclass_scores(), "train_config.use_multiclass_scores",
            "true trains on image/object/class/multiclass_scores, which Trainyard's detection "
            "input does not read");
  refuse_if(t.use_bfloat16(), "train_config.use_bfloat16",
            "true trains in bfloat16 on TPUs; Trainyard trains the model in float32");
}

// ---- input readers ----

// The largest fixed_shape_resizer side (as the model's kMaxImageDimension bounds
// keep_aspect_ratio_resizer) and the most groundtruth boxes an image is padded to (as the
// model bounds its NMS sizes).
constexpr int64_t kMaxResizedSide = 16384;
constexpr int64_t kMaxBoxesPerImage = 100000;

// The input's resize to the model's image_resizer at `where` ("model.ssd.image_resizer"): a
// resize_image step for fixed_shape_resizer. keep_aspect_ratio_resizer gives no step: the
// model's preprocess resizes each image (SSD's and Faster R-CNN's alike) and the input keeps its
// size.
std::optional<od::PreprocessingStep> resize_step(const od::ImageResizer& resizer,
                                                 const std::string& where) {
  od::PreprocessingStep step;
  switch (resizer.image_resizer_oneof_case()) {
    case od::ImageResizer::kFixedShapeResizer: {
      const od::FixedShapeResizer& fixed = resizer.fixed_shape_resizer();
      refuse_if(fixed.convert_to_grayscale(), where + ".fixed_shape_resizer.convert_to_grayscale",
                "true is not supported (the input keeps its channels)");
      // Each image of a batch is resized to this before anything else: bounded as the model
      // bounds keep_aspect_ratio_resizer's dimensions.
      for (const auto& [field, value] :
           {std::pair{"height", fixed.height()}, std::pair{"width", fixed.width()}}) {
        if (value < 1 || value > kMaxResizedSide) {
          throw ConfigError(where + ".fixed_shape_resizer." + field + " is " +
                            std::to_string(value) + "; expected 1 to " +
                            std::to_string(kMaxResizedSide) + " pixels");
        }
      }
      od::ResizeImage* resize = step.mutable_resize_image();
      resize->set_new_height(fixed.height());
      resize->set_new_width(fixed.width());
      switch (fixed.resize_method()) {
        case od::BILINEAR:
          resize->set_method(od::ResizeImage::BILINEAR);
          break;
        case od::NEAREST_NEIGHBOR:
          resize->set_method(od::ResizeImage::NEAREST_NEIGHBOR);
          break;
        case od::BICUBIC:
          resize->set_method(od::ResizeImage::BICUBIC);
          break;
        case od::AREA:
          resize->set_method(od::ResizeImage::AREA);
          break;
      }
      return step;
    }
    case od::ImageResizer::kKeepAspectRatioResizer:
      return std::nullopt;
    case od::ImageResizer::IMAGE_RESIZER_ONEOF_NOT_SET:
      break;
  }
  throw ConfigError(where + " is not set (keep_aspect_ratio_resizer or fixed_shape_resizer)");
}

// The groundtruth features the API pads to max_number_of_boxes (pad_input_data_to_static_shapes)
// and the count feature of the first.
constexpr const char* kPaddedFeatures[] = {"groundtruth_boxes",     "groundtruth_classes",
                                           "groundtruth_difficult", "groundtruth_is_crowd",
                                           "groundtruth_group_of",  "groundtruth_area"};
// DetectionReader's masks (its option instance_masks), padded as the boxes when read.
constexpr const char* kInstanceMasks = "groundtruth_instance_masks";

void convert_input_reader(const od::InputReader& in, const std::string& where, bool train,
                          int64_t num_classes, int64_t max_boxes,
                          const std::optional<od::PreprocessingStep>& resize,
                          config::InputReader* out) {
  std::string pattern;
  for (const std::string& path : in.tf_record_input_reader().input_path()) {
    refuse_if(path.find(',') != std::string::npos, where + ".tf_record_input_reader.input_path",
              "'" + path + "' has a comma, which Trainyard's data_pattern uses between patterns");
    pattern += (pattern.empty() ? "" : ",") + path;
  }
  if (!pattern.empty()) out->set_data_pattern(pattern);
  config::PluginSpec* reader = out->mutable_reader();
  reader->set_class_("DetectionReader");
  add_param(reader, "num_classes")->set_int_value(num_classes);
  if (!in.label_map_path().empty()) {
    add_param(reader, "label_map_path")->set_string_value(in.label_map_path());
  }
  if (in.use_display_name()) add_param(reader, "use_display_name")->set_bool_value(true);
  out->set_shuffle(in.shuffle());
  if (in.has_num_readers()) out->set_num_readers(static_cast<int32_t>(in.num_readers()));
  if (in.has_shuffle_buffer_size()) out->set_shuffle_buffer_size(in.shuffle_buffer_size());
  // The API shards only when n > 1: 0 reads every record, as 1 does.
  if (in.has_sample_1_of_n_examples()) {
    out->set_sample_1_of_n_examples(std::max<int64_t>(1, in.sample_1_of_n_examples()));
  }
  // model_lib evaluates one epoch whatever the eval reader says (override_eval_num_epochs).
  out->set_num_epochs(train ? static_cast<int64_t>(in.num_epochs()) : 1);
  if (in.num_prefetch_batches() > 0) out->set_prefetch_batches(in.num_prefetch_batches());
  refuse_if(in.num_additional_channels() > 0, where + ".num_additional_channels",
            "additional image channels are not decoded by Trainyard's detection input");
  refuse_if(in.num_keypoints() > 0, where + ".num_keypoints",
            "keypoints are not decoded by Trainyard's detection input");
  // The API's tf_example_decoder: PNG strings for PNG_MASKS, a dense float list otherwise.
  if (in.load_instance_masks()) {
    add_param(reader, "instance_masks")
        ->set_string_value(in.mask_type() == od::PNG_MASKS ? "png" : "numerical");
  }
  std::vector<std::string> padded(std::begin(kPaddedFeatures), std::end(kPaddedFeatures));
  if (in.load_instance_masks()) padded.emplace_back(kInstanceMasks);
  for (const std::string& feature : padded) {
    config::FeaturePadding* padding = out->add_padding();
    padding->set_feature(feature);
    padding->set_pad_to(max_boxes);
    padding->set_truncate(true);
    if (out->padding_size() == 1) padding->set_count_feature("num_groundtruth_boxes");
  }
  if (resize.has_value()) {
    out->add_data_augmentation_options()->PackFrom(*resize);
  } else {
    // keep_aspect_ratio_resizer: each image keeps its own size until the model's preprocess, so
    // a batch pads its images to the largest, as the API's batcher (dynamic_pad) does; the
    // model preprocesses each image at its true_image_shape.
    out->add_pad_to_largest("image");
    // The masks [boxes, height, width] of those images: max_number_of_boxes rows (above), each
    // padded with zeros to the batch's largest image, as the image.
    if (in.load_instance_masks()) out->add_pad_to_largest(kInstanceMasks);
  }
}

// ---- eval_config ----

// eval_util.py's EVAL_METRICS_CLASS_DICT.
const std::vector<std::string>& api_metrics_sets() {
  static const std::vector<std::string> names = {
      "coco_detection_metrics",
      "coco_keypoint_metrics",
      "coco_mask_metrics",
      "coco_panoptic_metrics",
      "lvis_mask_metrics",
      "oid_challenge_detection_metrics",
      "oid_challenge_segmentation_metrics",
      "oid_V2_detection_metrics",
      // oid_V2_detection_metrics's later name; eval_util.py maps both to
      // OpenImagesDetectionEvaluator (ssd_mobilenet_v2_oid_v4.config names this one).
      "open_images_V2_detection_metrics",
      "pascal_voc_detection_metrics",
      "pascal_voc_instance_segmentation_metrics",
      "precision_at_recall_detection_metrics",
      "weighted_pascal_voc_detection_metrics",
      "weighted_pascal_voc_instance_segmentation_metrics",
  };
  return names;
}

void convert_eval_config(const od::EvalConfig& e, config::EvalConfig* ec) {
  ec->set_batch_size(e.batch_size());
  if (e.has_num_examples()) ec->set_num_examples(e.num_examples());
  ec->set_eval_interval_secs(e.eval_interval_secs());
  ec->set_use_moving_averages(e.use_moving_averages());
  for (int i = 0; i < e.metrics_set_size(); ++i) {
    const std::string& name = e.metrics_set(i);
    const auto& known = api_metrics_sets();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::string nearest = nearest_name(name, known);
      throw ConfigError("eval_config.metrics_set[" + std::to_string(i) + "]: '" + name +
                        "' is not a metrics set of the API" +
                        (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") +
                        " (known: " + join_names(known) + ")");
    }
    // Refused here, not when the evaluation starts after a run's training.
    if (name != "coco_detection_metrics" && name != "coco_mask_metrics" &&
        name != "pascal_voc_detection_metrics" && name != "open_images_V2_detection_metrics" &&
        name != "oid_V2_detection_metrics") {
      throw ConfigError("eval_config.metrics_set[" + std::to_string(i) + "]: '" + name +
                        "' is a metrics set of the API that Trainyard does not compute (it "
                        "computes coco_detection_metrics, coco_mask_metrics, "
                        "pascal_voc_detection_metrics and open_images_V2_detection_metrics, also "
                        "named oid_V2_detection_metrics)");
    }
    ec->add_metrics_set(name);
  }
  if (ec->metrics_set_size() == 0) ec->add_metrics_set("coco_detection_metrics");
  ec->set_num_visualizations(static_cast<int32_t>(e.num_visualizations()));
  ec->set_min_score_threshold(to_double(e.min_score_threshold()));
  ec->set_max_num_boxes_to_visualize(e.max_num_boxes_to_visualize());
  // COCO adds each category's mAP (DetectionBoxes_PerformanceByCategory/mAP/<name>);
  // pascal_voc_detection_metrics reports every category's AP whatever the flag, as the API's does.
  ec->set_include_metrics_per_category(e.include_metrics_per_category());
  refuse_if(!e.export_path().empty(), "eval_config.export_path",
            "writing the detections as COCO JSON is not supported");
  refuse_if(!e.visualization_export_dir().empty(), "eval_config.visualization_export_dir",
            "writing visualization images to a directory is not supported");
  refuse_if(e.ignore_groundtruth(), "eval_config.ignore_groundtruth",
            "true exports detections without evaluating them, which is not supported");
  refuse_if(e.recall_lower_bound() != 0.0f || e.recall_upper_bound() != 1.0f,
            "eval_config.recall_lower_bound / recall_upper_bound",
            "a recall range other than [0, 1] is not supported");
}

// graph_rewriter: the model's "graph_rewriter.quantization.*" params, which SSDMetaArch reads
// (contrib.quantize's rewrite, as graph_rewriter_builder.build applies it). A graph_rewriter
// without its quantization message quantizes with the defaults, as the API's builder reads them.
void add_graph_rewriter(const od::TrainEvalPipelineConfig& od, config::PluginSpec* model) {
  const od::Quantization& q = od.graph_rewriter().quantization();
  if (!od.model().has_ssd()) {
    throw ConfigError(
        "graph_rewriter: quantization-aware training is supported for SSD models only; "
        "model.faster_rcnn trains without it (remove graph_rewriter)");
  }
  if (q.weight_bits() != 8 || q.activation_bits() != 8) {
    throw ConfigError("graph_rewriter.quantization: weight_bits " +
                      std::to_string(q.weight_bits()) + " and activation_bits " +
                      std::to_string(q.activation_bits()) +
                      ": only 8bit quantization is supported (as the API's "
                      "graph_rewriter_builder says)");
  }
  // graph_rewriter_builder passes only quant_delay to contrib.quantize, so the API trains such a
  // config with the ranges of symmetric: false; refused rather than silently trained otherwise
  // than the user wrote.
  refuse_if(q.symmetric(), "graph_rewriter.quantization.symmetric",
            "true: the Object Detection API's graph_rewriter_builder never passes it to "
            "contrib.quantize (its training ignores it and keeps asymmetric ranges); remove it, "
            "or set it false, for the API's training");
  add_param(model, "graph_rewriter.quantization")->set_bool_value(true);
  add_param(model, "graph_rewriter.quantization.delay")->set_int_value(q.delay());
  add_param(model, "graph_rewriter.quantization.weight_bits")->set_int_value(q.weight_bits());
  add_param(model, "graph_rewriter.quantization.activation_bits")
      ->set_int_value(q.activation_bits());
}

config::Pipeline convert(const od::TrainEvalPipelineConfig& od) {
  config::Pipeline p;
  p.set_task("detection");
  int32_t num_classes = 0;
  std::string where;
  std::optional<od::PreprocessingStep> resize;
  switch (od.model().model_case()) {
    case od::DetectionModel::kSsd:
      num_classes = od.model().ssd().num_classes();
      where = "model.ssd";
      *p.mutable_model() = ssd_model_spec(od.model().ssd());
      resize = resize_step(od.model().ssd().image_resizer(), where + ".image_resizer");
      break;
    case od::DetectionModel::kFasterRcnn:
      num_classes = od.model().faster_rcnn().num_classes();
      where = "model.faster_rcnn";
      *p.mutable_model() = faster_rcnn_model_spec(od.model().faster_rcnn());
      resize = resize_step(od.model().faster_rcnn().image_resizer(), where + ".image_resizer");
      break;
    case od::DetectionModel::MODEL_NOT_SET:
      throw ConfigError("model names no meta-architecture (ssd or faster_rcnn)");
  }
  if (od.has_graph_rewriter()) add_graph_rewriter(od, p.mutable_model());
  if (num_classes < 1) {
    throw ConfigError(where + ".num_classes is " + std::to_string(num_classes) +
                      "; it must be at least 1");
  }
  p.set_num_classes(num_classes);
  convert_train_config(od.train_config(), &p);
  const od::TrainConfig& t = od.train_config();
  // Every record's groundtruth is padded to this many boxes (pad_input_data_to_static_shapes).
  auto max_boxes = [&t](const od::InputReader& in, const std::string& reader) -> int64_t {
    const bool own = in.has_max_number_of_boxes() || !t.has_max_number_of_boxes();
    const int64_t value = own ? in.max_number_of_boxes() : t.max_number_of_boxes();
    if (value < 1 || value > kMaxBoxesPerImage) {
      throw ConfigError((own ? reader : std::string("train_config")) + ".max_number_of_boxes is " +
                        std::to_string(value) + "; expected 1 to " +
                        std::to_string(kMaxBoxesPerImage) + " boxes per image");
    }
    return value;
  };
  if (od.has_train_input_reader()) {
    config::InputReader* train = p.mutable_train_input_reader();
    for (const od::PreprocessingStep& step : t.data_augmentation_options()) {
      train->add_data_augmentation_options()->PackFrom(step);
    }
    convert_input_reader(od.train_input_reader(), "train_input_reader", true, num_classes,
                         max_boxes(od.train_input_reader(), "train_input_reader"), resize, train);
  } else if (t.data_augmentation_options_size() > 0) {
    throw ConfigError(
        "train_config.data_augmentation_options: there is no train_input_reader to apply "
        "them to");
  }
  if (od.eval_input_reader_size() > 1) {
    throw ConfigError("eval_input_reader is given " + std::to_string(od.eval_input_reader_size()) +
                      " times; Trainyard evaluates one input (model_main evaluates only the "
                      "first): keep one");
  }
  if (od.eval_input_reader_size() == 1) {
    convert_input_reader(od.eval_input_reader(0), "eval_input_reader", false, num_classes,
                         max_boxes(od.eval_input_reader(0), "eval_input_reader"), resize,
                         p.mutable_eval_input_reader());
  }
  convert_eval_config(od.eval_config(), p.mutable_eval_config());
  const auto& sets = od.eval_config().metrics_set();
  if (std::find(sets.begin(), sets.end(), "coco_mask_metrics") != sets.end() &&
      od.eval_input_reader_size() == 1 && !od.eval_input_reader(0).load_instance_masks()) {
    throw ConfigError(
        "eval_config.metrics_set: coco_mask_metrics compares the detection masks with the "
        "groundtruth masks; set load_instance_masks: true in eval_input_reader");
  }
  return p;
}

// Field names of the API's format that Trainyard's Pipeline does not have, for telling the
// formats apart when neither parses (od_config.h).
bool names_api_fields(std::string_view text) {
  static const std::set<std::string> kMarkers = {"ssd",
                                                 "faster_rcnn",
                                                 "center_net",
                                                 "experimental_model",
                                                 "graph_rewriter",
                                                 "tf_record_input_reader",
                                                 "external_input_reader",
                                                 "input_path",
                                                 "label_map_path",
                                                 "rms_prop_optimizer",
                                                 "momentum_optimizer",
                                                 "adam_optimizer",
                                                 "num_steps"};
  struct Quiet : pb::io::ErrorCollector {
    void AddError(int, pb::io::ColumnNumber, const std::string&) override {}
  } quiet;
  pb::io::ArrayInputStream stream(text.data(), static_cast<int>(text.size()));
  pb::io::Tokenizer tokenizer(&stream, &quiet);
  tokenizer.set_comment_style(pb::io::Tokenizer::SH_COMMENT_STYLE);
  while (tokenizer.Next()) {
    if (tokenizer.current().type == pb::io::Tokenizer::TYPE_IDENTIFIER &&
        kMarkers.count(tokenizer.current().text) != 0) {
      return true;
    }
  }
  return false;
}

// ---- Trainyard's own form of before the detection task ----

// The end of the string literal or comment that starts at text[i], or i when none does.
std::size_t skip_literal(std::string_view text, std::size_t i) {
  if (text[i] == '#') {
    const std::size_t end = text.find('\n', i);
    return end == std::string_view::npos ? text.size() : end;
  }
  if (text[i] != '"' && text[i] != '\'') return i;
  const char quote = text[i];
  for (++i; i < text.size() && text[i] != quote; ++i) {
    if (text[i] == '\\') ++i;
  }
  return std::min(i + 1, text.size());
}

// The first character at or after i that is neither white space nor in a comment.
std::size_t next_token(std::string_view text, std::size_t i) {
  while (i < text.size()) {
    if (text[i] == '#') {
      i = skip_literal(text, i);
    } else if (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n') {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// A pipeline.config that Trainyard recorded before the detection task carried the API's
// steps (train_dir/pipeline.config of an earlier run) held the API's PreprocessingStep itself
// in data_augmentation_options: `data_augmentation_options { ssd_random_crop { } }`. Returns the
// text with each such step in today's form, `data_augmentation_options {
// [type.googleapis.com/trainyard.od.PreprocessingStep] { ssd_random_crop { } } }`, or nullopt
// when it has none to rewrite. (The printer wrote each step as `field { ... }`; the list and
// angle-bracket spellings of text format are left as they are, and fail to parse as today's.)
std::optional<std::string> steps_as_any(std::string_view text) {
  constexpr std::string_view kField = "data_augmentation_options";
  std::string out;
  bool rewrote = false;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::size_t literal_end = skip_literal(text, i);
    if (literal_end != i) {
      i = literal_end - 1;
      continue;
    }
    if (text.compare(i, kField.size(), kField) != 0 || (i > 0 && is_identifier_char(text[i - 1])) ||
        (i + kField.size() < text.size() && is_identifier_char(text[i + kField.size()]))) {
      continue;
    }
    std::size_t open = next_token(text, i + kField.size());
    if (open < text.size() && text[open] == ':') open = next_token(text, open + 1);
    if (open >= text.size() || text[open] != '{') continue;
    const std::size_t first = next_token(text, open + 1);
    if (first >= text.size() || text[first] == '[') continue;  // today's form
    // The brace that closes the step.
    int depth = 0;
    std::size_t close = open;
    for (; close < text.size(); ++close) {
      const std::size_t end = skip_literal(text, close);
      if (end != close) {
        close = end - 1;
      } else if (text[close] == '{') {
        ++depth;
      } else if (text[close] == '}' && --depth == 0) {
        break;
      }
    }
    if (close >= text.size()) return std::nullopt;  // unbalanced: the parser says where
    out.append(text.substr(copied, open + 1 - copied));
    out += " [type.googleapis.com/trainyard.od.PreprocessingStep] {";
    out.append(text.substr(open + 1, close - open - 1));
    out += "} ";
    copied = close;
    i = close;
    rewrote = true;
  }
  if (!rewrote) return std::nullopt;
  out.append(text.substr(copied));
  return out;
}

}  // namespace

config::PluginSpec ssd_model_spec(const od::Ssd& ssd) {
  config::PluginSpec spec;
  spec.set_class_("SSDMetaArch");
  if (ssd.feature_extractor().has_batch_norm_trainable() &&
      !ssd.feature_extractor().batch_norm_trainable()) {
    throw ConfigError(
        "model.ssd.feature_extractor.batch_norm_trainable: false is the API's field of before "
        "2018; set model.ssd.freeze_batchnorm: true instead");
  }
  if (ssd.box_predictor().has_mask_rcnn_box_predictor() ||
      ssd.box_predictor().has_rfcn_box_predictor()) {
    throw ConfigError(std::string("model.ssd.box_predictor.") +
                      (ssd.box_predictor().has_rfcn_box_predictor() ? "rfcn_box_predictor"
                                                                    : "mask_rcnn_box_predictor") +
                      ": is Faster R-CNN's second stage box predictor; SSD's are "
                      "convolutional_box_predictor and weight_shared_convolutional_box_predictor");
  }
  flatten(ssd, "", "model.ssd", &spec);
  return spec;
}

namespace od_internal {

void flatten_model_params(const google::protobuf::Message& model, const std::string& where,
                          config::PluginSpec* spec) {
  flatten(model, "", where, spec);
}

}  // namespace od_internal

od::TrainEvalPipelineConfig parse_od_pipeline_config(std::string_view text,
                                                     std::string_view source_name) {
  od::TrainEvalPipelineConfig out;
  pb::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &out)) {
    throw ConfigError(errors.describe(source_name));
  }
  return out;
}

config::Pipeline pipeline_from_od_config(const od::TrainEvalPipelineConfig& od,
                                         std::string_view source_name) {
  try {
    return convert(od);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(source_name) + ": " + e.what());
  }
}

ConfigDialectParse parse_od_dialect(std::string_view text, std::string_view source_name) {
  ConfigDialectParse out;
  od::TrainEvalPipelineConfig od;
  pb::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(std::string(text), &od)) {
    // Without a model it is no config the API could run either: the text was Trainyard's.
    if (!od.has_model()) return out;
    out.converted = true;
    pb::TextFormat::Printer printer;
    printer.SetExpandAny(true);
    printer.PrintToString(pipeline_from_od_config(od, source_name), &out.pipeline_text);
    return out;
  }
  out.error_line = errors.line();
  out.error_column = errors.column();
  out.error = errors.describe(source_name);
  out.names_own_field = names_api_fields(text);
  // Trainyard's own form as an earlier Trainyard recorded it, with the steps in today's form.
  if (const std::optional<std::string> rewritten = steps_as_any(text)) {
    config::Pipeline pipeline;
    pb::TextFormat::Parser parser_of_rewritten;
    FirstError rewritten_errors;
    parser_of_rewritten.RecordErrorsTo(&rewritten_errors);
    if (parser_of_rewritten.ParseFromString(*rewritten, &pipeline)) {
      out.converted = true;
      out.pipeline_text = *rewritten;
      return out;
    }
    // It has another mistake: when that parse read further than the API's, its error is the
    // one to show (the rewrite keeps the lines; columns shift on a rewritten step's line), with
    // Trainyard's message names, not this task's copy's.
    if (std::pair(rewritten_errors.line(), rewritten_errors.column()) >
        std::pair(out.error_line, out.error_column)) {
      out.error_line = rewritten_errors.line();
      out.error_column = rewritten_errors.column();
      out.error = rewritten_errors.describe(source_name);
      const std::string copy_package = "trainyard.detection.config.";
      for (std::size_t at = out.error.find(copy_package); at != std::string::npos;
           at = out.error.find(copy_package, at)) {
        out.error.replace(at, copy_package.size(), "trainyard.config.");
      }
      out.names_own_field = false;
    }
  }
  return out;
}

ConfigDialect od_dialect() {
  ConfigDialect dialect;
  dialect.description = "the Object Detection API's pipeline.config";
  dialect.message_type = "trainyard.od.TrainEvalPipelineConfig";  // proto/od_pipeline.proto
  dialect.model_param_prefixes = {"model.ssd.", "model.faster_rcnn."};
  dialect.parse = parse_od_dialect;
  return dialect;
}

}  // namespace trainyard::detection
