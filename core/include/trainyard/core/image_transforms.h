// The per-example transform of image classification (transform.h, InputOptions::transforms):
// TF-Slim's preprocessing of one decoded image, configured by PreprocessingStep's
// image_classification_preprocessing (pipeline.proto).
#ifndef TRAINYARD_CORE_IMAGE_TRANSFORMS_H_
#define TRAINYARD_CORE_IMAGE_TRANSFORMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/transform.h"

namespace trainyard {

// TF-Slim's vgg_preprocessing with the walkthrough's names, in this order:
//   1. fixed_resize_side > 0: resize so that the shorter side is fixed_resize_side, keeping the
//      aspect ratio (_aspect_preserving_resize: _smallest_size_at_least, then
//      tf.image.resize_bilinear with align_corners=False; image_ops.h)
//   2. crop a default_image_size square: at a uniformly random offset (random_crop,
//      _random_crop: the row offset drawn first, then the column) or at the centre
//      (_central_crop: offset (size - crop) / 2, rounded down)
//   3. random_flip: mirror left to right with probability 0.5 (random_flip_left_right)
//   4. normalization on values in [0, 255]:
//        kVgg        x - mean per channel, means R 123.68, G 116.78, B 103.94 (3 channels)
//        kInception  (x / 255 - 0.5) * 2, in [-1, 1] (inception_preprocessing's scaling)
//        kLenet      (x - 128) / 128 (lenet_preprocessing)
//        kNone       x
// `image`: u8 or f32 [height, width, channels] (heights and widths may vary per record: -1 in
// the declaration); it becomes f32 [default_image_size, default_image_size, channels]. Every
// other feature is left alone. All draws come from the record's ExampleRandom stream.
class TRAINYARD_API ImageClassificationPreprocessing : public ExampleTransform {
 public:
  enum class Normalization { kVgg, kInception, kLenet, kNone };

  struct Options {
    std::string image = "image";
    int64_t fixed_resize_side = 256;  // 0: no resize
    int64_t default_image_size = 224;
    bool random_crop = false;
    bool random_flip = false;
    Normalization normalization = Normalization::kVgg;
  };

  // Throws InvalidArgument for an empty image name, a negative fixed_resize_side or a
  // default_image_size < 1.
  explicit ImageClassificationPreprocessing(Options options);

  std::string name() const override { return "ImageClassificationPreprocessing"; }
  // Throws InvalidArgument when the image is missing, is not u8 or f32 of rank 3 with a known
  // number of channels, or has other than 3 channels for kVgg.
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override;
  // Throws InvalidArgument naming the record when the image (after resizing) is smaller than
  // the crop, as TF-Slim's _crop asserts.
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

 private:
  Options options_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_IMAGE_TRANSFORMS_H_
