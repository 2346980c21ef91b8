// `trainyard data synth-shapes`: a small, learnable object detection data set in the TF Object
// Detection API's tf.Example layout, for trying detection pipelines without downloading COCO.
#ifndef TRAINYARD_APPS_TRAINYARD_SYNTH_SHAPES_H_
#define TRAINYARD_APPS_TRAINYARD_SYNTH_SHAPES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::app {

// The classes, label i + 1 (the API's labels start at 1; 0 is the background).
inline constexpr std::array<const char*, 4> kSynthShapeClasses = {"circle", "square", "triangle",
                                                                  "cross"};

struct SynthShapesOptions {
  std::string output_dir;
  int64_t num_images = 1000;    // training images
  int64_t num_val_images = -1;  // validation images; -1: round(val_fraction x num_images)
  double val_fraction = 0.1;    // used when num_val_images is -1 (at least 1 image)
  int64_t image_size = 256;     // height and width, pixels
  // When above image_size, each image's height and width are drawn uniformly in
  // [image_size, max_image_size] (images of their own sizes and aspect ratios); 0: all square.
  int64_t max_image_size = 0;
  int num_shards = 4;  // training files; validation gets ceil(shards x val / train)
  uint64_t seed = 0;
  int min_shapes = 1;  // shapes per image, uniform in [min_shapes, max_shapes]
  int max_shapes = 6;
  int jpeg_quality = 90;
  bool masks = false;  // also write each object's instance mask (image/object/mask)
};

struct SynthShapesSummary {
  std::vector<std::string> files;  // the TFRecord files, then label_map.pbtxt
  int64_t train_images = 0;
  int64_t val_images = 0;
  int64_t boxes = 0;          // over both splits
  int64_t cut_by_border = 0;  // boxes of shapes that the image border cuts
  int64_t hidden_shapes = 0;  // with masks: shapes painted over whole, left unlabelled
};

// Writes <output_dir>/train-00000-of-0000N.tfrecord ... and val-00000-of-0000M.tfrecord ...
// (consecutive images per file) and label_map.pbtxt (StringIntLabelMap: item { id name
// display_name } for kSynthShapeClasses). Each image is image_size^2 RGB (or of its own height
// and width up to max_image_size): a textured background
// (noise, stripes or a gradient) with min_shapes..max_shapes filled shapes of random class,
// colour, size, rotation and position, which may overlap (a new shape's box overlaps an earlier
// one's by IoU <= 0.3) and may be cut by the border. One tf.Example per image, as the API's
// create_*_tf_record.py scripts write it:
//   image/encoded (JPEG), image/format "jpeg", image/height, image/width,
//   image/source_id and image/filename ("train-000017", "train-000017.jpg"),
//   image/key/sha256 is not written,
//   image/object/bbox/{xmin,ymin,xmax,ymax} (float, normalized: the tight box of the shape's
//     pixels inside the image, so a shape cut by the border has the box of its visible part;
//     pixel column c spans [c, c + 1) / width),
//   image/object/class/label (int64, 1-based), image/object/class/text (the class name),
//   image/object/difficult and image/object/is_crowd (int64, 0),
//   image/object/area (float, the shape's pixel count inside the image),
//   with `masks`: image/object/mask (bytes list of N PNGs, height x width, one gray channel,
//     1 where the object is seen and 0 elsewhere: the shape's pixels inside the image that no
//     later shape paints over, as create_coco_tf_record.py writes COCO's masks). A shape that
//     later ones paint over whole would have an empty mask: with `masks` it is not labelled (no
//     box, no mask; counted in hidden_shapes), so every object has at least one mask pixel; the
//     image is the same. Without `masks` the records are byte for byte those of earlier
//     versions (such a shape keeps its box).
// Image i of a split depends only on (seed, split, i): the files are the same for a seed
// whatever the shard count. Each file is written under a hidden temporary name and all are
// renamed into place once complete (atomic_file.h). Throws InvalidArgument for bad options.
SynthShapesSummary synth_shapes(const SynthShapesOptions& options);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_SYNTH_SHAPES_H_
