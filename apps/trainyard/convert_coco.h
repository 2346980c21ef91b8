// `trainyard data convert-coco`: a COCO instances file and its images as the Object Detection
// API's dataset_tools/create_coco_tf_record.py converts them (create_tf_example, with or without
// --include_masks).
//
// One tf.Example per entry of "images", in file order, with create_tf_example's keys:
//   image/height, image/width        int64, the entry's height and width
//   image/filename                   bytes, its file_name; the image is <image_dir>/<file_name>
//   image/source_id                  bytes, its id in decimal
//   image/key/sha256                 bytes, hex SHA-256 of the image file
//   image/encoded, image/format      the JPEG file's bytes, "jpeg"
//   image/object/bbox/{xmin,xmax,ymin,ymax}   float: bbox [x, y, w, h] as x / width,
//                                    (x + w) / width, y / height, (y + h) / height
//   image/object/class/text          bytes, the category's name
//   image/object/is_crowd            int64, iscrowd (0 when absent)
//   image/object/area                float, area (w * h when absent)
// and, as later versions of the script write it, image/object/class/label (int64): the
// category id, or with a label map the id of the item whose name or display_name is the
// category's name (as the API's tf_example_decoder maps class/text with a label map).
// With include_masks (the script's --include_masks), also
//   image/object/mask                bytes, one PNG per box written: the annotation's
//                                    segmentation as pycocotools' COCO.annToMask gives it
//                                    (frPyObjects + decode: polygons rasterized and merged,
//                                    compressed and uncompressed RLE decoded), height x width,
//                                    one gray channel, 1 on the mask and 0 elsewhere.
// Every annotation kept then needs a segmentation at the image's size (an RLE's "size" must be
// [height, width]); a missing or malformed one is a DataLoss naming the file, the annotation
// (index and id) and "segmentation" (coco_mask.h bounds the sizes and coordinates).
// An image's boxes are its annotations in file order, less those the script skips and counts:
// w <= 0 or h <= 0, or x + w > width or y + h > height; this also skips x < 0 or y < 0, which
// the script writes as boxes that start outside the image (DetectionReader refuses those).
// Images without boxes are written with empty object lists (the script's behaviour) unless
// drop_images_without_boxes. The i-th record written goes to shard i % num_shards, the files
// named <output>-00000-of-00010 ... (tf_record_creation_util), even for one shard.
//
// Stricter than the script, which would stop with a KeyError or write a wrong record: an image
// entry needs id, file_name, width and height (positive, and equal to the JPEG's own size); an
// annotation's category_id must be in "categories" and, with a label map, its name in the map.
// Annotations of an image id that "images" lacks are counted and reported (the script ignores
// them silently). The JSON is read by pkg/detection's COCO reader (coco_json.h: any size up to
// 4 GiB; its errors name the file and the JSON path, "annotations[3].bbox[0]"). Nothing is
// written unless every record converts (record_shards.h).
#ifndef TRAINYARD_APPS_TRAINYARD_CONVERT_COCO_H_
#define TRAINYARD_APPS_TRAINYARD_CONVERT_COCO_H_

#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::app {

struct ConvertCocoOptions {
  std::string image_dir;
  std::string annotations;     // instances_*.json
  std::string output;          // prefix of the shards
  std::string label_map_path;  // optional, see above
  int num_shards = 1;
  bool drop_images_without_boxes = false;
  bool include_masks = false;  // image/object/mask, see above
};

struct ConvertCocoSummary {
  int64_t images = 0;                     // written
  int64_t images_without_boxes = 0;       // among the images of the file, written or dropped
  int64_t dropped_images = 0;             // by drop_images_without_boxes
  int64_t boxes = 0;                      // written
  int64_t crowd_boxes = 0;                // of those, is_crowd
  int64_t skipped_annotations = 0;        // degenerate or outside the image
  int64_t annotations_without_image = 0;  // of image ids that "images" lacks
  std::vector<std::string> files;
};

ConvertCocoSummary convert_coco(const ConvertCocoOptions& options);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_CONVERT_COCO_H_
