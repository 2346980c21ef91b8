#include "image_resizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "trainyard/autodiff.h"
#include "trainyard/error.h"
#include "trainyard/image_ops.h"
#include "trainyard/ops.h"

namespace trainyard::models {

KeepAspectRatioResizer keep_aspect_ratio_resizer_from_options(const DetectionOptionReader& r) {
  const std::string at = "image_resizer.keep_aspect_ratio_resizer.";
  KeepAspectRatioResizer k;
  k.min_dimension = r.in_range(at + "min_dimension", 1, kMaxImageDimension);
  k.max_dimension = r.in_range(at + "max_dimension", 1, kMaxImageDimension);
  if (k.max_dimension < k.min_dimension) {
    r.refuse(at + "max_dimension", std::to_string(k.max_dimension),
             "expected >= min_dimension " + std::to_string(k.min_dimension));
  }
  r.choice(at + "resize_method", {"BILINEAR"});
  k.pad_to_max_dimension = r.options().get_bool(at + "pad_to_max_dimension");
  if (r.options().get_bool(at + "convert_to_grayscale")) {
    throw Unimplemented(r.model() + ": " + at + "convert_to_grayscale is not supported");
  }
  return k;
}

ResizedSize resize_to_range(int64_t height, int64_t width, int64_t min_dimension,
                            int64_t max_dimension, const std::string& model) {
  if (height < 1 || width < 1) {
    throw InvalidArgument(model + ": an image of " + std::to_string(height) + " x " +
                          std::to_string(width) + " pixels cannot be resized");
  }
  // The API's _compute_new_dynamic_size, which its graphs run (the decoded images' shapes are
  // dynamic in training, evaluation and the exported graph): the sides and factors in f32
  // (tf.to_float), tf.round (half to even, as nearbyint in the default rounding mode) of each
  // f32 product, and the larger size's longer side compared with max_dimension in f32. Doubles
  // (the static path's Python arithmetic) round some sides the other way: 95 x 320 to 64..96 is
  // 28 x 96 in doubles but 29 x 96 in the API's graph.
  const float h = static_cast<float>(height);
  const float w = static_cast<float>(width);
  auto scaled = [](float side, float factor) {
    const float product = side * factor;
    return static_cast<int64_t>(std::nearbyint(product));
  };
  const float large = static_cast<float>(min_dimension) / std::min(h, w);
  ResizedSize size{scaled(h, large), scaled(w, large)};
  if (static_cast<float>(std::max(size.height, size.width)) > static_cast<float>(max_dimension)) {
    const float small = static_cast<float>(max_dimension) / std::max(h, w);
    size = {scaled(h, small), scaled(w, small)};
  }
  return size;
}

ResizedImages resize_images(Backend& backend, const Tensor& images,
                            const KeepAspectRatioResizer& resizer, const std::string& model) {
  const Shape& s = images.shape();
  if (s.rank() != 4 || s[3] != 3) {
    throw InvalidArgument(model + ": images are " + images.description() +
                          "; expected [batch, height, width, 3]");
  }
  const int64_t batch = s[0];
  const int64_t height = s[1];
  const int64_t width = s[2];
  ResizedImages out;
  out.images = ops::cast(images, DType::kF32);
  const ResizedSize size =
      resize_to_range(height, width, resizer.min_dimension, resizer.max_dimension, model);
  out.true_size = size;
  const int64_t out_h = resizer.pad_to_max_dimension ? resizer.max_dimension : size.height;
  const int64_t out_w = resizer.pad_to_max_dimension ? resizer.max_dimension : size.width;
  if (size.height == height && size.width == width && out_h == height && out_w == width) {
    return out;
  }
  NoGradScope no_grad;  // the API's resize has no trainable input
  const std::vector<float> in = host_f32(out.images);
  std::vector<float> resized(static_cast<std::size_t>(batch * out_h * out_w * 3), 0.0f);
  std::vector<float> one(static_cast<std::size_t>(size.height * size.width * 3));
  const image::ImageShape in_shape{height, width, 3};
  for (int64_t b = 0; b < batch; ++b) {
    const auto first = static_cast<std::size_t>(b * height * width * 3);
    image::resize_bilinear(std::span<const float>(in.data() + first, in_shape.elements()), in_shape,
                           one, size.height, size.width);
    // pad_to_max_dimension pads with zeros at the bottom and right (before the extractor's
    // preprocess, as the API's resizer pads).
    for (int64_t y = 0; y < size.height; ++y) {
      std::copy_n(one.data() + y * size.width * 3, size.width * 3,
                  resized.data() + ((b * out_h + y) * out_w) * 3);
    }
  }
  out.images = Tensor::from_vector(backend, Shape{batch, out_h, out_w, 3}, resized);
  return out;
}

}  // namespace trainyard::models
