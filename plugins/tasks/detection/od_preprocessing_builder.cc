// build_od_preprocessing_step (od_preprocessing_builder.h): od_preprocessor.proto's steps to
// transforms, with preprocessor_builder.py's defaults.
#include "od_preprocessing_builder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/example_transforms.h"

namespace trainyard::detection {

// ---- The builder ----

namespace {

[[noreturn]] void unsupported(const std::string& step, const std::string& why) {
  throw ConfigError("data_augmentation_options: " + step + " " + why);
}

RandomCropImage::Options crop_options(float min_object_covered, float min_aspect_ratio,
                                      float max_aspect_ratio, float min_area, float max_area,
                                      float overlap_thresh, bool clip_boxes, float random_coef) {
  return {min_object_covered, min_aspect_ratio, max_aspect_ratio, min_area,
          max_area,           overlap_thresh,   clip_boxes,       random_coef};
}

std::unique_ptr<ExampleTransform> build_step(const od::PreprocessingStep& step,
                                             const DetectionFeatureNames& names) {
  using Step = od::PreprocessingStep;
  switch (step.preprocessing_step_case()) {
    case Step::kRandomHorizontalFlip: {
      const od::RandomHorizontalFlip& c = step.random_horizontal_flip();
      if (c.keypoint_flip_permutation_size() > 0) {
        unsupported("random_horizontal_flip",
                    "sets keypoint_flip_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomHorizontalFlip>(
          RandomHorizontalFlip::Options{names.image, names.boxes, names.masks, c.probability()});
    }
    case Step::kRandomVerticalFlip: {
      const od::RandomVerticalFlip& c = step.random_vertical_flip();
      if (c.keypoint_flip_permutation_size() > 0) {
        unsupported("random_vertical_flip",
                    "sets keypoint_flip_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomVerticalFlip>(RandomVerticalFlip::Options{c.probability()},
                                                  names);
    }
    case Step::kRandomRotation90: {
      const od::RandomRotation90& c = step.random_rotation90();
      if (c.keypoint_rot_permutation_size() > 0) {
        unsupported("random_rotation90",
                    "sets keypoint_rot_permutation; keypoints are not "
                    "supported");
      }
      return std::make_unique<RandomRotation90>(RandomRotation90::Options{c.probability()}, names);
    }
    case Step::kRandomCropImage: {
      const od::RandomCropImage& c = step.random_crop_image();
      return std::make_unique<RandomCropImage>(
          crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                       c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                       c.random_coef()),
          names);
    }
    case Step::kSsdRandomCrop: {
      SsdRandomCrop::Options o;
      if (step.ssd_random_crop().operations_size() > 0) {
        o.operations.clear();
        for (const od::SSDRandomCropOperation& c : step.ssd_random_crop().operations()) {
          o.operations.push_back(crop_options(c.min_object_covered(), c.min_aspect_ratio(),
                                              c.max_aspect_ratio(), c.min_area(), c.max_area(),
                                              c.overlap_thresh(), c.clip_boxes(), c.random_coef()));
        }
      }
      return std::make_unique<SsdRandomCrop>(std::move(o), names);
    }
    case Step::kRandomCropToAspectRatio: {
      const od::RandomCropToAspectRatio& c = step.random_crop_to_aspect_ratio();
      return std::make_unique<RandomCropToAspectRatio>(
          RandomCropToAspectRatio::Options{c.aspect_ratio(), c.overlap_thresh(), c.clip_boxes()},
          names);
    }
    case Step::kSsdRandomCropFixedAspectRatio: {
      const od::SSDRandomCropFixedAspectRatio& c = step.ssd_random_crop_fixed_aspect_ratio();
      SsdRandomCropFixedAspectRatio::Options o;
      o.aspect_ratio = c.aspect_ratio();
      if (c.operations_size() > 0) {
        o.operations.clear();
        for (const od::SSDRandomCropFixedAspectRatioOperation& op : c.operations()) {
          // The aspect ratio range is replaced by [aspect_ratio, aspect_ratio].
          o.operations.push_back(crop_options(
              op.min_object_covered(), c.aspect_ratio(), c.aspect_ratio(), op.min_area(),
              op.max_area(), op.overlap_thresh(), op.clip_boxes(), op.random_coef()));
        }
      }
      return std::make_unique<SsdRandomCropFixedAspectRatio>(std::move(o), names);
    }
    case Step::kResizeImage: {
      const od::ResizeImage& c = step.resize_image();
      ResizeImage::Method method = ResizeImage::Method::kBilinear;
      if (c.method() == od::ResizeImage::NEAREST_NEIGHBOR) {
        method = ResizeImage::Method::kNearestNeighbor;
      } else if (c.method() != od::ResizeImage::BILINEAR) {
        unsupported("resize_image", "method " + od::ResizeImage::Method_Name(c.method()) +
                                        " is not implemented; use BILINEAR or NEAREST_NEIGHBOR");
      }
      return std::make_unique<ResizeImage>(
          ResizeImage::Options{c.new_height(), c.new_width(), method}, names);
    }
    case Step::kNormalizeImage: {
      const od::NormalizeImage& c = step.normalize_image();
      if (!c.has_original_minval() || !c.has_original_maxval()) {
        unsupported("normalize_image", "needs original_minval and original_maxval");
      }
      return std::make_unique<NormalizeImage>(
          NormalizeImage::Options{c.original_minval(), c.original_maxval(), c.target_minval(),
                                  c.target_maxval()},
          names);
    }
    case Step::kRandomPixelValueScale: {
      const od::RandomPixelValueScale& c = step.random_pixel_value_scale();
      return std::make_unique<RandomPixelValueScale>(
          RandomPixelValueScale::Options{c.minval(), c.maxval()}, names);
    }
    case Step::kRandomAdjustBrightness:
      return std::make_unique<RandomAdjustBrightness>(
          RandomAdjustBrightness::Options{step.random_adjust_brightness().max_delta()}, names);
    case Step::kRandomAdjustContrast: {
      const od::RandomAdjustContrast& c = step.random_adjust_contrast();
      return std::make_unique<RandomAdjustContrast>(
          RandomAdjustContrast::Options{c.min_delta(), c.max_delta()}, names);
    }
    case Step::kRandomJitterBoxes: {
      const od::RandomJitterBoxes& c = step.random_jitter_boxes();
      if (c.jitter_mode() != od::RandomJitterBoxes::DEFAULT) {
        unsupported("random_jitter_boxes",
                    "jitter_mode " + od::RandomJitterBoxes::JitterMode_Name(c.jitter_mode()) +
                        " is not implemented; only DEFAULT is");
      }
      return std::make_unique<RandomJitterBoxes>(RandomJitterBoxes::Options{c.ratio()}, names);
    }
    case Step::kRandomAdjustHue:
      return std::make_unique<RandomAdjustHue>(
          RandomAdjustHue::Options{step.random_adjust_hue().max_delta()}, names);
    case Step::kRandomAdjustSaturation: {
      const od::RandomAdjustSaturation& c = step.random_adjust_saturation();
      return std::make_unique<RandomAdjustSaturation>(
          RandomAdjustSaturation::Options{c.min_delta(), c.max_delta()}, names);
    }
    case Step::kRandomDistortColor:
      return std::make_unique<RandomDistortColor>(
          RandomDistortColor::Options{step.random_distort_color().color_ordering()}, names);
    case Step::kRandomPadImage: {
      const od::RandomPadImage& c = step.random_pad_image();
      RandomPadImage::Options o;
      // As preprocessor_builder: a minimum or maximum size counts only when both sides are set.
      if (c.has_min_image_height() && c.has_min_image_width()) {
        o.min_image_height = c.min_image_height();
        o.min_image_width = c.min_image_width();
      }
      if (c.has_max_image_height() && c.has_max_image_width()) {
        o.max_image_height = c.max_image_height();
        o.max_image_width = c.max_image_width();
      }
      o.pad_color.assign(c.pad_color().begin(), c.pad_color().end());
      return std::make_unique<RandomPadImage>(std::move(o), names);
    }
    case Step::kRandomBlackPatches: {
      const od::RandomBlackPatches& c = step.random_black_patches();
      return std::make_unique<RandomBlackPatches>(
          RandomBlackPatches::Options{c.max_black_patches(), c.probability(),
                                      c.size_to_image_ratio()},
          names);
    }
    case Step::kRandomImageScale: {
      const od::RandomImageScale& c = step.random_image_scale();
      return std::make_unique<RandomImageScale>(
          RandomImageScale::Options{c.min_scale_ratio(), c.max_scale_ratio()}, names);
    }
    case Step::kRandomCropPadImage: {
      const od::RandomCropPadImage& c = step.random_crop_pad_image();
      CropPadOperation op;
      op.crop = crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                             c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                             c.random_coef());
      // As preprocessor_builder: the ratios count when both are given.
      if (c.min_padded_size_ratio_size() == 2) {
        op.min_padded_size_ratio[0] = c.min_padded_size_ratio(0);
        op.min_padded_size_ratio[1] = c.min_padded_size_ratio(1);
      }
      if (c.max_padded_size_ratio_size() == 2) {
        op.max_padded_size_ratio[0] = c.max_padded_size_ratio(0);
        op.max_padded_size_ratio[1] = c.max_padded_size_ratio(1);
      }
      op.pad_color.assign(c.pad_color().begin(), c.pad_color().end());
      return std::make_unique<RandomCropPadImage>(std::move(op), names);
    }
    case Step::kSsdRandomCropPad: {
      SsdRandomCropPad::Options o;
      if (step.ssd_random_crop_pad().operations_size() > 0) {
        o.operations.clear();
        for (const od::SSDRandomCropPadOperation& c : step.ssd_random_crop_pad().operations()) {
          CropPadOperation op;
          op.crop = crop_options(c.min_object_covered(), c.min_aspect_ratio(), c.max_aspect_ratio(),
                                 c.min_area(), c.max_area(), c.overlap_thresh(), c.clip_boxes(),
                                 c.random_coef());
          if (c.min_padded_size_ratio_size() != 2 || c.max_padded_size_ratio_size() != 2) {
            unsupported("ssd_random_crop_pad",
                        "operation needs two min_padded_size_ratio and two "
                        "max_padded_size_ratio values (height, width)");
          }
          for (int d = 0; d < 2; ++d) {
            op.min_padded_size_ratio[d] = c.min_padded_size_ratio(d);
            op.max_padded_size_ratio[d] = c.max_padded_size_ratio(d);
          }
          // The API's builder always passes the operation's colour (default black).
          op.pad_color = {c.pad_color_r(), c.pad_color_g(), c.pad_color_b()};
          o.operations.push_back(std::move(op));
        }
      }
      return std::make_unique<SsdRandomCropPad>(std::move(o), names);
    }
    case Step::kRandomRgbToGray:
      return std::make_unique<RandomRgbToGray>(
          RandomRgbToGray::Options{step.random_rgb_to_gray().probability()}, names);
    case Step::kSubtractChannelMean: {
      const od::SubtractChannelMean& c = step.subtract_channel_mean();
      return std::make_unique<SubtractChannelMean>(
          SubtractChannelMean::Options{std::vector<float>(c.means().begin(), c.means().end())},
          names);
    }
    case Step::PREPROCESSING_STEP_NOT_SET:
      throw ConfigError("data_augmentation_options: an empty step (no preprocessing step set)");
    default:
      break;
  }
  const google::protobuf::FieldDescriptor* field =
      Step::descriptor()->FindFieldByNumber(static_cast<int>(step.preprocessing_step_case()));
  unsupported(field != nullptr ? field->name() : std::string("step"),
              "is not implemented by Trainyard (implemented: random_horizontal_flip, "
              "random_vertical_flip, random_rotation90, random_crop_image, ssd_random_crop, "
              "random_crop_to_aspect_ratio, ssd_random_crop_fixed_aspect_ratio, "
              "resize_image, normalize_image, random_pixel_value_scale, "
              "random_adjust_brightness, random_adjust_contrast, random_adjust_hue, "
              "random_adjust_saturation, random_distort_color, random_jitter_boxes, "
              "random_pad_image, random_black_patches, random_image_scale, random_crop_pad_image, "
              "ssd_random_crop_pad, random_rgb_to_gray, subtract_channel_mean)");
}

}  // namespace

std::unique_ptr<ExampleTransform> build_od_preprocessing_step(const od::PreprocessingStep& step,
                                                              const DetectionFeatureNames& names) {
  return build_step(step, names);
}

}  // namespace trainyard::detection
