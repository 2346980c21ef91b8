// Instance masks from the data to the batch: `trainyard data synth-shapes --masks` files read
// through an Object Detection API pipeline.config with load_instance_masks, a horizontal flip, a
// crop and the model's resizer, as the host builds its input (the config's conversion,
// input_options_from_config, DetectionReader from the converted reader spec, InputPipeline).
// Every mask of the batch must still lie inside its box, row for row, whatever the draws.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "od_config_test_util.h"
#include "synth_shapes.h"
#include "test_registry.h"
#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/registry.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

const bool kDialectsLoaded = test::load_task_dialects();

template <class T>
std::vector<T> values_of(const ParsedFeature& f) {
  std::vector<T> out(f.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

// The converted reader spec as the reader's options (its params are bools, ints and strings).
std::shared_ptr<Reader> reader_of(const config::InputReader& input) {
  std::map<std::string, OptionValue> options;
  for (const config::Param& p : input.reader().params()) {
    if (p.has_bool_value()) options[p.key()] = p.bool_value();
    if (p.has_int_value()) options[p.key()] = p.int_value();
    if (p.has_string_value()) options[p.key()] = p.string_value();
  }
  return test::plugin_registry().create<Reader>(ClassKind::kReader, input.reader().class_(),
                                                options);
}

class DetectionMasksInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kDialectsLoaded);
    dir_ = fs::temp_directory_path() / ("detection_masks_input_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    app::SynthShapesOptions o;
    o.output_dir = dir_.string();
    o.num_images = 16;
    o.num_val_images = 1;
    o.image_size = 48;
    o.max_image_size = 72;  // images of their own sizes
    o.num_shards = 1;
    o.seed = 38;
    o.masks = true;
    app::synth_shapes(o);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The API's config with `resizer` and the augmentations.
  config::Pipeline pipeline(const std::string& resizer) const {
    const std::string text =
        "model { ssd { num_classes: 4 image_resizer { " + resizer +
        " } } }\n"
        "train_config { batch_size: 4 optimizer { adam_optimizer { learning_rate { "
        "constant_learning_rate { learning_rate: 0.01 } } } }\n"
        "  data_augmentation_options { random_horizontal_flip { } }\n"
        "  data_augmentation_options { random_crop_image { min_object_covered: 0.3 "
        "overlap_thresh: 0.5 } } }\n"
        "train_input_reader { load_instance_masks: true mask_type: PNG_MASKS "
        "max_number_of_boxes: 6 label_map_path: '" +
        (dir_ / "label_map.pbtxt").string() + "' tf_record_input_reader { input_path: '" +
        (dir_ / "train-*").string() + "' } }\n";
    return parse_pipeline_config(text, "masks.config");
  }

  // Reads every batch of one epoch and checks each mask against its box; counts the batches.
  void check_batches(const config::Pipeline& p, int64_t height, int64_t width, int64_t* batches) {
    InputOptions o = input_options_from_config(p.train_input_reader(), 4, 7, "train_input_reader");
    o.num_epochs = 1;
    const std::shared_ptr<Reader> reader = reader_of(p.train_input_reader());
    InputPipeline input(*reader, o);
    int64_t masks_seen = 0;
    *batches = 0;
    while (std::optional<HostBatch> batch = input.next()) {
      ++*batches;
      const ParsedFeature& masks = batch->features.at("groundtruth_instance_masks");
      const ParsedFeature& image = batch->features.at("image");
      const std::vector<float> boxes = values_of<float>(batch->features.at("groundtruth_boxes"));
      const std::vector<int32_t> counts =
          values_of<int32_t>(batch->features.at("num_groundtruth_boxes"));
      const std::vector<int32_t> shapes =
          values_of<int32_t>(batch->features.at("true_image_shape"));
      EXPECT_EQ(masks.dtype, DType::kU8);
      EXPECT_EQ(masks.shape.size(), 4u);
      EXPECT_EQ(masks.shape[0], image.shape[0]);
      EXPECT_EQ(masks.shape[1], 6);  // max_number_of_boxes
      EXPECT_EQ(masks.shape[2], image.shape[1]);
      EXPECT_EQ(masks.shape[3], image.shape[2]);
      if (height > 0) {
        EXPECT_EQ(masks.shape[2], height);
        EXPECT_EQ(masks.shape[3], width);
      }
      const int64_t H = masks.shape[2], W = masks.shape[3];
      const std::vector<uint8_t> bits = values_of<uint8_t>(masks);
      for (int64_t b = 0; b < masks.shape[0]; ++b) {
        // Each image's own size (the batch pads it with zeros beyond).
        const int64_t h = shapes[static_cast<std::size_t>(3 * b)];
        const int64_t w = shapes[static_cast<std::size_t>(3 * b + 1)];
        for (int64_t k = 0; k < 6; ++k) {
          const float* box = &boxes[static_cast<std::size_t>((b * 6 + k) * 4)];
          int64_t set = 0;
          for (int64_t y = 0; y < H; ++y) {
            for (int64_t x = 0; x < W; ++x) {
              const uint8_t v = bits[static_cast<std::size_t>(((b * 6 + k) * H + y) * W + x)];
              if (v == 0) continue;
              ++set;
              ASSERT_EQ(v, 1);
              ASSERT_LT(k, counts[static_cast<std::size_t>(b)]) << "a padded row has pixels";
              ASSERT_LT(y, h);
              ASSERT_LT(x, w);
              // Inside the box, with a pixel of slack for the window's and resize's rounding.
              const auto fh = static_cast<float>(h), fw = static_cast<float>(w);
              EXPECT_GE(static_cast<float>(y + 1), box[0] * fh - 1.0f) << b << " " << k;
              EXPECT_LE(static_cast<float>(y), box[2] * fh + 1.0f) << b << " " << k;
              EXPECT_GE(static_cast<float>(x + 1), box[1] * fw - 1.0f) << b << " " << k;
              EXPECT_LE(static_cast<float>(x), box[3] * fw + 1.0f) << b << " " << k;
            }
          }
          if (::testing::Test::HasFailure()) return;
          masks_seen += set > 0 ? 1 : 0;
        }
      }
    }
    EXPECT_GT(masks_seen, 10);  // the check saw masks, not only empty rows
  }

  fs::path dir_;
};

TEST_F(DetectionMasksInput, FlipCropAndFixedShapeResizerKeepEachMaskInsideItsBox) {
  const config::Pipeline p =
      pipeline("fixed_shape_resizer { height: 40 width: 56 resize_method: BILINEAR }");
  int64_t batches = 0;
  check_batches(p, 40, 56, &batches);
  EXPECT_EQ(batches, 4);
}

TEST_F(DetectionMasksInput, KeepAspectRatioResizerPadsTheMasksToTheLargestImage) {
  const config::Pipeline p =
      pipeline("keep_aspect_ratio_resizer { min_dimension: 32 max_dimension: 64 }");
  int64_t batches = 0;
  check_batches(p, 0, 0, &batches);
  EXPECT_EQ(batches, 4);
}

}  // namespace
}  // namespace trainyard
