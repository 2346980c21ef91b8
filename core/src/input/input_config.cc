#include "trainyard/core/input_config.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/config_dialect.h"
#include "trainyard/core/image_transforms.h"
#include "trainyard/error.h"
#include "trainyard/example_transforms.h"
#include "trainyard/names.h"

namespace trainyard {
namespace {

DType dtype_named(const std::string& name, const std::string& where) {
  std::string known;
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64,
                  DType::kU8, DType::kBool}) {
    if (name == dtype_name(d)) return d;
    known += std::string(known.empty() ? "" : ", ") + dtype_name(d);
  }
  throw ConfigError(where + ": '" + name + "' is not a dtype (one of " + known + ")");
}

// The type registered for one data_augmentation_options step (config_dialect.h).
const InputTransformType& transform_type_of(const google::protobuf::Any& step,
                                            const std::string& where) {
  const std::string& url = step.type_url();
  const std::string type_name = url.substr(url.rfind('/') + 1);
  if (type_name.empty()) throw ConfigError(where + " names no message type");
  const std::shared_ptr<const InputTransformType> type =
      config_dialects::input_transform_type(type_name);
  if (!type) {
    const std::vector<std::string> known = config_dialects::input_transform_type_names();
    throw ConfigError(
        where + ": no loaded task plugin builds steps of type '" + type_name +
        "' (types known: " + (known.empty() ? std::string("none") : join_names(known)) + ")");
  }
  return *type;
}

}  // namespace

std::vector<std::shared_ptr<const ExampleTransform>> transforms_from_config(
    const google::protobuf::RepeatedPtrField<config::PreprocessingStep>& steps,
    const std::string& field) {
  std::vector<std::shared_ptr<const ExampleTransform>> out;
  for (int i = 0; i < steps.size(); ++i) {
    const config::PreprocessingStep& step = steps.Get(i);
    const std::string where = field + ".preprocessing_step[" + std::to_string(i) + "]";
    switch (step.preprocessing_step_case()) {
      case config::PreprocessingStep::kRandomHorizontalFlip: {
        const config::RandomHorizontalFlip& c = step.random_horizontal_flip();
        RandomHorizontalFlip::Options o;
        o.image = c.image_feature();
        o.boxes = c.boxes_feature();
        o.probability = c.probability();
        try {
          out.push_back(std::make_shared<RandomHorizontalFlip>(o));
        } catch (const InvalidArgument& e) {
          throw ConfigError(where + ".random_horizontal_flip: " + e.what());
        }
        break;
      }
      case config::PreprocessingStep::kImageClassificationPreprocessing: {
        const config::ImageClassificationPreprocessing& c =
            step.image_classification_preprocessing();
        using Normalization = ImageClassificationPreprocessing::Normalization;
        ImageClassificationPreprocessing::Options o;
        o.image = c.image_feature();
        o.fixed_resize_side = c.fixed_resize_side();
        o.default_image_size = c.default_image_size();
        o.random_crop = c.random_crop();
        o.random_flip = c.random_flip();
        switch (c.normalization()) {
          case config::ImageClassificationPreprocessing::VGG:
            o.normalization = Normalization::kVgg;
            break;
          case config::ImageClassificationPreprocessing::INCEPTION:
            o.normalization = Normalization::kInception;
            break;
          case config::ImageClassificationPreprocessing::LENET:
            o.normalization = Normalization::kLenet;
            break;
          case config::ImageClassificationPreprocessing::NONE:
            o.normalization = Normalization::kNone;
            break;
        }
        try {
          out.push_back(std::make_shared<ImageClassificationPreprocessing>(o));
        } catch (const InvalidArgument& e) {
          throw ConfigError(where + ".image_classification_preprocessing: " + e.what());
        }
        break;
      }
      case config::PreprocessingStep::PREPROCESSING_STEP_NOT_SET:
        throw ConfigError(where +
                          " sets no transform (known: random_horizontal_flip, "
                          "image_classification_preprocessing)");
    }
  }
  return out;
}

InputOptions input_options_from_config(const config::InputReader& reader, int64_t batch_size,
                                       uint64_t seed, const std::string& field) {
  InputOptions o;
  o.data_pattern = reader.data_pattern();
  o.batch_size = batch_size;
  o.num_readers = reader.num_readers();
  o.num_epochs = reader.num_epochs();
  o.shuffle = reader.shuffle();
  o.shuffle_buffer_size = reader.has_shuffle_buffer_size() ? reader.shuffle_buffer_size() : 0;
  o.prefetch_batches = reader.prefetch_batches();
  o.skip_corrupt_records = reader.skip_corrupt_records();
  o.deterministic = reader.deterministic();
  o.seed = seed;
  if (reader.has_memory_budget_mb()) {
    constexpr int64_t kMostMb = int64_t{1} << 30;  // 1 PiB: no overflow in bytes
    if (reader.memory_budget_mb() < 1 || reader.memory_budget_mb() > kMostMb) {
      throw ConfigError(field + ".memory_budget_mb is " +
                        std::to_string(reader.memory_budget_mb()) +
                        "; expected a number of MiB from 1 to " + std::to_string(kMostMb) +
                        " (unset: a quarter of physical memory)");
    }
    o.memory_budget_bytes = reader.memory_budget_mb() << 20;
  }
  for (int i = 0; i < reader.padding_size(); ++i) {
    const config::FeaturePadding& p = reader.padding(i);
    const std::string where = field + ".padding[" + std::to_string(i) + "]";
    if (p.feature().empty()) throw ConfigError(where + ": 'feature' is missing");
    if (!p.has_pad_to()) throw ConfigError(where + " ('" + p.feature() + "'): 'pad_to' is missing");
    FeaturePadding f;
    f.pad_to = p.pad_to();
    f.pad_value = p.pad_value();
    f.truncate = p.truncate();
    f.count_feature = p.count_feature();
    f.count_dtype = dtype_named(p.count_dtype(), where + ".count_dtype");
    f.mask_feature = p.mask_feature();
    f.mask_dtype = dtype_named(p.mask_dtype(), where + ".mask_dtype");
    if (!o.padding.emplace(p.feature(), f).second) {
      throw ConfigError(where + ": feature '" + p.feature() + "' is padded twice");
    }
  }
  for (int i = 0; i < reader.pad_to_largest_size(); ++i) {
    const std::string& name = reader.pad_to_largest(i);
    const std::string where = field + ".pad_to_largest[" + std::to_string(i) + "]";
    if (name.empty()) throw ConfigError(where + " is empty; it names a feature");
    if (!o.pad_to_largest.insert(name).second) {
      throw ConfigError(where + ": feature '" + name + "' is named twice");
    }
  }
  if (reader.sample_1_of_n_examples() < 1) {
    throw ConfigError(field + ".sample_1_of_n_examples is " +
                      std::to_string(reader.sample_1_of_n_examples()) + "; it must be at least 1");
  }
  o.sample_1_of_n_examples = reader.sample_1_of_n_examples();
  // A task's steps first (the Object Detection API's data_augmentation_options), then
  // Trainyard's own.
  for (int i = 0; i < reader.data_augmentation_options_size(); ++i) {
    const std::string where = field + ".data_augmentation_options[" + std::to_string(i) + "]";
    const google::protobuf::Any& step = reader.data_augmentation_options(i);
    try {
      o.transforms.push_back(transform_type_of(step, where).build(step.value()));
    } catch (const ConfigError& e) {
      if (std::string_view(e.what()).substr(0, where.size()) == where) throw;
      throw ConfigError(where + ": " + e.what());
    }
  }
  for (auto& transform : transforms_from_config(reader.preprocessing_step(), field)) {
    o.transforms.push_back(std::move(transform));
  }
  return o;
}

void keep_only_evaluation_steps(config::InputReader* reader, const std::string& field) {
  google::protobuf::RepeatedPtrField<google::protobuf::Any> kept;
  for (int i = 0; i < reader->data_augmentation_options_size(); ++i) {
    google::protobuf::Any& step = *reader->mutable_data_augmentation_options(i);
    const std::string where = field + ".data_augmentation_options[" + std::to_string(i) + "]";
    if (transform_type_of(step, where).kept_in_evaluation(step.value())) {
      *kept.Add() = std::move(step);
    }
  }
  reader->mutable_data_augmentation_options()->Swap(&kept);
}

}  // namespace trainyard
