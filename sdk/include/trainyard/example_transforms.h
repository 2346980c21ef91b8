// Per-example transforms the SDK provides (transform.h), implemented by the core: for the core's
// own preprocessing_step and for the tasks' transforms.
#ifndef TRAINYARD_EXAMPLE_TRANSFORMS_H_
#define TRAINYARD_EXAMPLE_TRANSFORMS_H_

#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/transform.h"

namespace trainyard {

// The Object Detection API's random_horizontal_flip (preprocessor.py): with probability
// `probability`, mirrors an image left to right and its boxes with it.
//
// `image`: [H, W, C] (or any [..., H, W, C]), of any dtype (u8 and f32 in practice).
// `boxes` (optional, empty name for none): [N, 4] f32, normalized [ymin, xmin, ymax, xmax];
// a flipped box is [ymin, 1 - xmax, ymax, 1 - xmin].
// `masks` (optional: skipped when "" or absent from the record): instance masks [N, H, W] of any
// dtype, one plane per box, mirrored left to right with the image (the API's masks[:, :, ::-1]).
// Every other feature is left alone. One draw of the record's random stream decides, so the
// image, its boxes and its masks flip together.
class TRAINYARD_API RandomHorizontalFlip : public ExampleTransform {
 public:
  struct Options {
    std::string image = "image";
    std::string boxes = "groundtruth_boxes";
    std::string masks = "groundtruth_instance_masks";  // "": none
    float probability = 0.5f;
  };

  // Throws InvalidArgument for a probability outside [0, 1] or an empty image name.
  explicit RandomHorizontalFlip(Options options);

  std::string name() const override { return "RandomHorizontalFlip"; }
  // Throws InvalidArgument when the image is missing or has rank < 3, the boxes are missing
  // or are not f32 [-1 or N, 4], or the masks (when declared) are not of rank 3. apply() throws
  // InvalidArgument when a record's masks are not [N, H, W] of its image's H x W.
  std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const override;
  void apply(ParsedRecord& record, ExampleRandom& random,
             const RecordLocation& where) const override;

  // The flips themselves, in place: `shape` is the image's ([..., H, W, C]); `boxes` holds
  // count x [ymin, xmin, ymax, xmax].
  static void flip_image(std::byte* data, const std::vector<int64_t>& shape,
                         std::size_t element_size);
  static void flip_boxes(float* boxes, std::size_t count);

 private:
  Options options_;
};

}  // namespace trainyard

#endif  // TRAINYARD_EXAMPLE_TRANSFORMS_H_
