// The Object Detection API's keep_aspect_ratio_resizer (builders/image_resizer_builder.py with
// core/preprocessor.resize_to_range) as the meta-architectures' preprocess runs it: SSD and
// Faster R-CNN both resize each image here, so their sizes and pixels are the same function's.
// fixed_shape_resizer is the input pipeline's resize_image step instead (the config converter
// adds it), so it has no code here.
#ifndef TRAINYARD_PLUGINS_MODELS_IMAGE_RESIZER_H_
#define TRAINYARD_PLUGINS_MODELS_IMAGE_RESIZER_H_

#include <cstdint>
#include <string>

#include "detection_options.h"
#include "trainyard/backend.h"
#include "trainyard/options.h"
#include "trainyard/tensor.h"

// The keep_aspect_ratio_resizer message's options, with the proto's defaults (a model's option
// table lists them after its "image_resizer" choice).
// clang-format off
#define TRAINYARD_KEEP_ASPECT_RATIO_RESIZER_OPTIONS                                               \
  {"image_resizer.keep_aspect_ratio_resizer.min_dimension", OptionType::kInt, "600", ""},         \
  {"image_resizer.keep_aspect_ratio_resizer.max_dimension", OptionType::kInt, "1024", ""},        \
  {"image_resizer.keep_aspect_ratio_resizer.resize_method", OptionType::kString, "BILINEAR",      \
   "BILINEAR"},                                                                                   \
  {"image_resizer.keep_aspect_ratio_resizer.pad_to_max_dimension", OptionType::kBool, "false",    \
   ""},                                                                                           \
  {"image_resizer.keep_aspect_ratio_resizer.convert_to_grayscale", OptionType::kBool, "false",    \
   "not supported"}
// clang-format on

namespace trainyard::models {

struct KeepAspectRatioResizer {
  int64_t min_dimension = 600;
  int64_t max_dimension = 1024;
  // Pads the resized image with zeros at the bottom and right to max_dimension x max_dimension
  // (the true image shape stays the resized size).
  bool pad_to_max_dimension = false;
};

// The image_resizer.keep_aspect_ratio_resizer options, checked as image_resizer_builder.build
// checks them (min_dimension <= max_dimension), both bounded by kMaxImageDimension; a
// resize_method other than BILINEAR and convert_to_grayscale are refused by name.
KeepAspectRatioResizer keep_aspect_ratio_resizer_from_options(const DetectionOptionReader& r);

// preprocessor.resize_to_range's size (as its graphs compute it from a dynamic shape, in f32):
// the size whose shorter side is min_dimension unless the longer side would then exceed
// max_dimension, in which case the longer side is max_dimension; each side rounded half to even,
// as tf.round. Throws
// InvalidArgument naming `model` for an empty image.
struct ResizedSize {
  int64_t height = 0;
  int64_t width = 0;
};
ResizedSize resize_to_range(int64_t height, int64_t width, int64_t min_dimension,
                            int64_t max_dimension, const std::string& model);

// Every image of `images` [B, H, W, 3] (all of one size, as the API maps the resizer over a
// batch) resized by `resizer` with TensorFlow 1's resize_bilinear (align_corners false), then
// zero-padded to max_dimension with pad_to_max_dimension: f32 [B, H', W', 3] and the true size
// of each resized image. Images already of that size come back unchanged (cast to f32).
struct ResizedImages {
  Tensor images;
  ResizedSize true_size;
};
ResizedImages resize_images(Backend& backend, const Tensor& images,
                            const KeepAspectRatioResizer& resizer, const std::string& model);

}  // namespace trainyard::models

#endif  // TRAINYARD_PLUGINS_MODELS_IMAGE_RESIZER_H_
