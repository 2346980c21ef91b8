// The TF Object Detection API's preprocessing steps (core/preprocessor.py, configured by
// preprocessor.proto's PreprocessingStep, which the detection task builds them from:
// plugins/tasks/detection/od_preprocessing_builder.cc) as per-example transforms (transform.h),
// for the features DetectionReader yields.
//
// Every transform works on one record's
//   image   u8 or f32 [height, width, channels], pixel values in [0, 255] (the API's float
//           image before normalization); geometric steps keep the dtype, steps that compute on
//           pixel values (resize, normalization, colour) make it f32
//   boxes   f32 [N, 4], normalized [ymin, xmin, ymax, xmax]
//   per-box features: those of DetectionFeatureNames::per_box that the record has, [N, ...] of
//           any dtype; a step that drops boxes (a crop) drops their rows too
//   instance masks (when the record has DetectionFeatureNames::masks): [N, height, width] of any
//           dtype (DetectionReader's u8 0/1), one plane per box, in the boxes' order. Every
//           geometric step moves them with the image as the API's preprocessor moves
//           groundtruth_instance_masks: flips and rotation mirror them, crops cut them to the
//           window (and drop the rows of dropped boxes), pads put them at the image's offset
//           in zeros, resizes take the nearest neighbour (tf.image.resize_nearest_neighbor,
//           half_pixel_centers off; align_corners as said per step), so 0/1 stays 0/1. Steps that
//           leave the geometry alone (colour, normalization, box jitter, black patches) leave
//           them alone. A step throws InvalidArgument naming itself when the masks are not
//           [num_boxes, height, width] of the image, rather than move one without the other.
//   true_image_shape (when the record has it): i32 [3], set to the image's new shape
// All randomness comes from the record's ExampleRandom stream, so a record is transformed the
// same way for a seed whatever the threads. Keypoints are not supported.
//
// Constructors throw InvalidArgument for options outside the API's ranges; features() throws
// InvalidArgument naming a missing feature or one of the wrong dtype or rank.
#ifndef TRAINYARD_PKG_DETECTION_TRANSFORMS_H_
#define TRAINYARD_PKG_DETECTION_TRANSFORMS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/transform.h"

namespace trainyard::detection {

struct DetectionFeatureNames {
  std::string image = "image";
  std::string boxes = "groundtruth_boxes";
  // Filtered together with the boxes when a step drops boxes; absent ones are skipped.
  std::vector<std::string> per_box = {"groundtruth_classes",  "groundtruth_difficult",
                                      "groundtruth_is_crowd", "groundtruth_group_of",
                                      "groundtruth_area",     "groundtruth_weights"};
  // A per-box feature with the image's spatial dimensions, [N, height, width]: moved with the
  // image by the geometric steps and filtered with the boxes; skipped when absent or "".
  std::string masks = "groundtruth_instance_masks";
  std::string true_image_shape = "true_image_shape";  // updated when present
};

// What the detection steps share: the feature names and their checks.
class DetectionTransform : public ExampleTransform {
 public:
  explicit DetectionTransform(DetectionFeatureNames names);
  // Checks the image (rank 3, u8 or f32) and the boxes (f32 [N, 4]); keeps `input`, except
  // that the image becomes f32 when float_image() is true.
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override;

  const DetectionFeatureNames& names() const { return names_; }

 protected:
  // Whether apply() leaves an f32 image.
  virtual bool float_image() const { return false; }

  DetectionFeatureNames names_;
};

// random_vertical_flip: with `probability`, mirrors the image top to bottom; a box becomes
// [1 - ymax, xmin, 1 - ymin, xmax].
class RandomVerticalFlip : public DetectionTransform {
 public:
  struct Options {
    float probability = 0.5f;
  };
  RandomVerticalFlip(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomVerticalFlip"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

// random_rotation90: with `probability`, rotates the image 90 degrees counter-clockwise (an
// H x W image becomes W x H; output pixel (i, j) is input pixel (j, W - 1 - i)); a box becomes
// [1 - xmax, ymin, 1 - xmin, ymax].
class RandomRotation90 : public DetectionTransform {
 public:
  struct Options {
    float probability = 0.5f;
  };
  RandomRotation90(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomRotation90"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

// random_crop_image (preprocessor.py's _strict_random_crop_image behind a random_coef draw):
// with probability random_coef the record is left alone; otherwise a window is drawn as
// tf.image.sample_distorted_bounding_box does (max_attempts 100, use_image_if_no_bounding_boxes):
// per attempt, a box (in whole pixels, truncated) chosen uniformly among the boxes clipped to
// [0, 1] (the whole image when there are none), an aspect ratio uniform in [min_aspect_ratio,
// max_aspect_ratio], a height uniform between the heights whose area lies in [min_area,
// max_area] x H x W, a width round(height x aspect ratio), a uniform position; the window is
// accepted when it covers at least min_object_covered of some box's area (boxes under one
// pixel of area are skipped). No window in 100 attempts: the whole image. The image is cut to
// the window; boxes entirely outside it, or with less than overlap_thresh of their area inside
// it, are dropped with their per-box rows (a crop may leave no box: the API keeps the image);
// the others are expressed in the window's frame and, with clip_boxes, clipped to [0, 1].
class RandomCropImage : public DetectionTransform {
 public:
  struct Options {
    float min_object_covered = 1.0f;
    float min_aspect_ratio = 0.75f;
    float max_aspect_ratio = 1.33f;
    float min_area = 0.1f;
    float max_area = 1.0f;
    float overlap_thresh = 0.3f;
    bool clip_boxes = true;
    float random_coef = 0.0f;
  };
  RandomCropImage(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomCropImage"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

  // The crop itself with these options (no random_coef draw): for SsdRandomCrop.
  static void crop(const Options& options, const DetectionFeatureNames& names, ParsedRecord& record,
                   ExampleRandom& random);

  struct Window {
    int64_t top = 0, left = 0, height = 0, width = 0;  // pixels
  };
  // sample_distorted_bounding_box on an image of height x width with `boxes` (count x [ymin,
  // xmin, ymax, xmax], normalized). Returns the whole image when no attempt succeeds.
  static Window sample_window(int64_t height, int64_t width, const std::vector<float>& boxes,
                              const Options& options, ExampleRandom& random);
  // Cuts the record to `window` (inside the image) and filters and re-frames its boxes with
  // options.overlap_thresh and options.clip_boxes, as described above.
  static void apply_window(const Options& options, const DetectionFeatureNames& names,
                           ParsedRecord& record, const Window& window);

 private:
  Options options_;
};

// ssd_random_crop: one of `operations`, chosen uniformly per record, applied as
// RandomCropImage. The default operations are the API's seven (ssd_random_crop's defaults):
// min_object_covered = overlap_thresh in {0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}, aspect ratio
// [0.5, 2], area [0.1, 1], clip_boxes, random_coef 0.15.
class SsdRandomCrop : public DetectionTransform {
 public:
  struct Options {
    std::vector<RandomCropImage::Options> operations = default_operations();
  };
  static std::vector<RandomCropImage::Options> default_operations();

  // Throws InvalidArgument for no operations or an operation outside the API's ranges.
  SsdRandomCrop(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "SsdRandomCrop"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

// random_crop_to_aspect_ratio (preprocessor.py): the largest window of `aspect_ratio` (width /
// height) the image holds, at a uniformly random offset: the whole height and a width of
// round(height x aspect_ratio) when the image is wider than that, else the whole width and a
// height of round(width / aspect_ratio). Boxes as RandomCropImage's window: those covering less
// than overlap_thresh of their area inside it dropped, the rest re-framed to it (and clipped to
// [0, 1] with clip_boxes). Always applied.
class RandomCropToAspectRatio : public DetectionTransform {
 public:
  struct Options {
    float aspect_ratio = 1.0f;
    float overlap_thresh = 0.3f;
    bool clip_boxes = true;
  };
  // Throws InvalidArgument for an aspect_ratio <= 0 or an overlap_thresh outside [0, 1].
  RandomCropToAspectRatio(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomCropToAspectRatio"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

  // The window of an image of height x width (before its random offset: top and left 0).
  static RandomCropImage::Window window_size(int64_t height, int64_t width, float aspect_ratio);

 private:
  Options options_;
};

// ssd_random_crop_fixed_aspect_ratio: SsdRandomCrop with every operation's aspect ratio range
// [aspect_ratio, aspect_ratio], then always RandomCropToAspectRatio to aspect_ratio with
// overlap_thresh 0.3 and clip_boxes (the API passes the operations' clip_boxes list, which is
// true whatever it holds), since sample_distorted_bounding_box's rounding leaves the first crop
// near the ratio only. The default operations are SsdRandomCrop's seven with aspect ratio 1.
class SsdRandomCropFixedAspectRatio : public DetectionTransform {
 public:
  struct Options {
    std::vector<RandomCropImage::Options> operations = SsdRandomCrop::default_operations();
    float aspect_ratio = 1.0f;
  };
  // Throws InvalidArgument as SsdRandomCrop and RandomCropToAspectRatio do.
  SsdRandomCropFixedAspectRatio(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "SsdRandomCropFixedAspectRatio"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  SsdRandomCrop crop_;
  RandomCropToAspectRatio to_aspect_ratio_;
};

// resize_image: resizes the image to new_height x new_width (tf.image.resize_images with
// align_corners=False as TF 1 did it: bilinear as image_ops.h's resize_bilinear, nearest
// neighbour taking input pixel floor(y x in/out), floor(x x in/out)). The image becomes f32;
// normalized boxes are unchanged; masks take the nearest neighbour whatever the method (as the
// API's resize_image). AREA and BICUBIC are not implemented.
class ResizeImage : public DetectionTransform {
 public:
  enum class Method { kBilinear, kNearestNeighbor };
  struct Options {
    int64_t new_height = 0;
    int64_t new_width = 0;
    Method method = Method::kBilinear;
  };
  ResizeImage(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "ResizeImage"; }
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override;
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// normalize_image: x -> (x - original_minval) x (target_maxval - target_minval) /
// (original_maxval - original_minval) + target_minval; the image becomes f32.
class NormalizeImage : public DetectionTransform {
 public:
  struct Options {
    float original_minval = 0.0f;
    float original_maxval = 255.0f;
    float target_minval = 0.0f;
    float target_maxval = 1.0f;
  };
  NormalizeImage(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "NormalizeImage"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_pixel_value_scale: multiplies every value by its own factor uniform in [minval,
// maxval], then clips to [0, 255]. The image becomes f32.
class RandomPixelValueScale : public DetectionTransform {
 public:
  struct Options {
    float minval = 0.9f;
    float maxval = 1.1f;
  };
  RandomPixelValueScale(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomPixelValueScale"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_adjust_brightness: adds delta x 255, delta uniform in [-max_delta, max_delta], then
// clips to [0, 255] (tf.image.adjust_brightness on the image / 255). The image becomes f32.
class RandomAdjustBrightness : public DetectionTransform {
 public:
  struct Options {
    float max_delta = 0.2f;
  };
  RandomAdjustBrightness(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomAdjustBrightness"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_adjust_contrast: per channel, x -> mean + (x - mean) x factor, factor uniform in
// [min_delta, max_delta], mean over the image's pixels (tf.image.adjust_contrast), then clips
// to [0, 255]. The image becomes f32.
class RandomAdjustContrast : public DetectionTransform {
 public:
  struct Options {
    float min_delta = 0.8f;
    float max_delta = 1.25f;
  };
  RandomAdjustContrast(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomAdjustContrast"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_jitter_boxes (jitter_mode DEFAULT): each coordinate of each box moves by its own
// uniform draw in [-ratio, ratio] times the box's height (ymin, ymax) or width (xmin, xmax),
// then is clipped to [0, 1]. The image is left alone.
class RandomJitterBoxes : public DetectionTransform {
 public:
  struct Options {
    float ratio = 0.05f;
  };
  RandomJitterBoxes(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomJitterBoxes"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

// random_adjust_hue: in HSV (tf.image.rgb_to_hsv on the image / 255), the hue moves by a delta
// uniform in [-max_delta, max_delta] (a fraction of the hue circle, wrapped), then back to RGB
// x 255, clipped to [0, 255]. Needs 3 channels; the image becomes f32.
class RandomAdjustHue : public DetectionTransform {
 public:
  struct Options {
    float max_delta = 0.02f;
  };
  RandomAdjustHue(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomAdjustHue"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;
  // In place on RGB values in [0, 255].
  static void adjust_hue(std::vector<float>& rgb, float delta);

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_adjust_saturation: in HSV, the saturation is multiplied by a factor uniform in
// [min_delta, max_delta] and clipped to [0, 1]. Needs 3 channels; the image becomes f32.
class RandomAdjustSaturation : public DetectionTransform {
 public:
  struct Options {
    float min_delta = 0.8f;
    float max_delta = 1.25f;
  };
  RandomAdjustSaturation(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomAdjustSaturation"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;
  // In place on RGB values in [0, 255].
  static void adjust_saturation(std::vector<float>& rgb, float factor);

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_distort_color: brightness (max_delta 32/255), then color_ordering 0: saturation [0.5,
// 1.5], hue 0.2, contrast [0.5, 1.5]; color_ordering 1: contrast, saturation, hue. The image
// becomes f32.
class RandomDistortColor : public DetectionTransform {
 public:
  struct Options {
    int color_ordering = 0;
  };
  RandomDistortColor(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomDistortColor"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_pad_image: the image is placed at a random offset in a larger canvas filled with
// pad_color (default: the image's mean colour). The canvas's height is uniform in [min, max)
// (an integer; max when max <= min), min_image_height defaulting to the image's height and
// max_image_height to twice it (each at least the image's height), the width likewise; the
// offset is uniform in [0, canvas - image). Boxes move into the canvas's frame. The image
// becomes f32.
class RandomPadImage : public DetectionTransform {
 public:
  struct Options {
    int64_t min_image_height = 0;  // 0: unset
    int64_t min_image_width = 0;
    int64_t max_image_height = 0;
    int64_t max_image_width = 0;
    std::vector<float> pad_color;  // empty: the mean colour; else one value per channel
  };
  RandomPadImage(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomPadImage"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;
  // Pads to target_height x target_width with the image at (top, left).
  static void pad(const DetectionFeatureNames& names, ParsedRecord& record, int64_t top,
                  int64_t left, int64_t target_height, int64_t target_width,
                  const std::vector<float>& pad_color);
  // The random padding described above with these options (for the crop-and-pad steps).
  static void random_pad(const Options& options, const DetectionFeatureNames& names,
                         ParsedRecord& record, ExampleRandom& random);

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_crop_pad_image and ssd_random_crop_pad: RandomCropImage's crop (skipped with
// probability random_coef), then RandomPadImage's padding of the result to a canvas whose sides
// are drawn between min_padded_size_ratio and max_padded_size_ratio times the ORIGINAL image's
// (each at least the cropped image's), filled with pad_color (empty: the cropped image's mean
// colour). SsdRandomCropPad picks one operation uniformly per record; its defaults are the
// API's six: min_object_covered = overlap_thresh in {0.1, 0.3, 0.5, 0.7, 0.9, 1.0}, aspect
// ratio [0.5, 2], area [0.1, 1], clip_boxes, random_coef 0.15, padded size ratios [1, 1] to
// [2, 2], the mean colour.
struct CropPadOperation {
  RandomCropImage::Options crop;
  float min_padded_size_ratio[2] = {1.0f, 1.0f};  // height, width
  float max_padded_size_ratio[2] = {2.0f, 2.0f};
  std::vector<float> pad_color;
};

class RandomCropPadImage : public DetectionTransform {
 public:
  using Options = CropPadOperation;
  RandomCropPadImage(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomCropPadImage"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;
  static void crop_pad(const CropPadOperation& op, const DetectionFeatureNames& names,
                       ParsedRecord& record, ExampleRandom& random);

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

class SsdRandomCropPad : public DetectionTransform {
 public:
  struct Options {
    std::vector<CropPadOperation> operations = default_operations();
  };
  static std::vector<CropPadOperation> default_operations();
  SsdRandomCropPad(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "SsdRandomCropPad"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_black_patches: max_black_patches times, with `probability`, a square of side
// int(min(height, width) x size_to_image_ratio) at a position whose normalized top and left
// are uniform in [0, 1 - size_to_image_ratio) is set to 0. Boxes are unchanged. The image
// keeps its dtype.
class RandomBlackPatches : public DetectionTransform {
 public:
  struct Options {
    int max_black_patches = 10;
    float probability = 0.5f;
    float size_to_image_ratio = 0.1f;
  };
  RandomBlackPatches(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomBlackPatches"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

// random_image_scale: the image is resized by one factor uniform in [min_scale_ratio,
// max_scale_ratio] (new sizes int(size x factor), at least 1), bilinear with
// align_corners=True as the API resizes it. Normalized boxes are unchanged; the image becomes
// f32. Masks: nearest neighbour with align_corners=True per plane (masks[..., None]; the API
// hands the rank-3 masks to tf.image.resize_images, which would read [N, H, W] as one image of
// height N, so Trainyard resizes each plane as the API's resize_image does).
class RandomImageScale : public DetectionTransform {
 public:
  struct Options {
    float min_scale_ratio = 0.5f;
    float max_scale_ratio = 2.0f;
  };
  RandomImageScale(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomImageScale"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// random_rgb_to_gray: with `probability`, every pixel becomes its luma 0.2989 R + 0.5870 G +
// 0.1140 B in all three channels (the image keeps 3 channels). The image becomes f32.
class RandomRgbToGray : public DetectionTransform {
 public:
  struct Options {
    float probability = 0.1f;
  };
  RandomRgbToGray(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "RandomRgbToGray"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

// subtract_channel_mean: x - means[c] per channel (one mean per channel). The image becomes
// f32.
class SubtractChannelMean : public DetectionTransform {
 public:
  struct Options {
    std::vector<float> means;
  };
  SubtractChannelMean(Options options, DetectionFeatureNames names = {});
  std::string name() const override { return "SubtractChannelMean"; }
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 protected:
  bool float_image() const override { return true; }

 private:
  Options options_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_TRANSFORMS_H_
