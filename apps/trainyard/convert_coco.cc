#include "convert_coco.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "detection_record.h"
#include "label_map_lookup.h"
#include "record_shards.h"
#include "trainyard/core/progress.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_json.h"
#include "trainyard/pkg/detection/coco_mask.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {
namespace {

namespace fs = std::filesystem;

// "annotations[17] (id 42)", as coco_json.h names a place in the file.
std::string annotation_place(const std::string& file, std::size_t index, int64_t id) {
  return file + ": annotations[" + std::to_string(index) + "] (id " + std::to_string(id) + ")";
}

// create_tf_example's include_masks: the annotation's segmentation as COCO.annToMask gives it
// (polygons merged, RLE decoded), a PNG of one gray channel, 1 on the mask and 0 elsewhere, at
// the image's size.
std::string mask_png(const detection::CocoAnnotation& annotation,
                     const detection::CocoImageInfo& image, const std::string& place) {
  const detection::CocoSegmentation& segmentation = annotation.segmentation;
  if (segmentation.kind == detection::CocoSegmentation::Kind::kNone) {
    throw DataLoss(place +
                   ": segmentation: missing (--include_masks writes each kept annotation's mask)");
  }
  detection::Rle rle;
  try {
    rle = detection::coco_segmentation_rle(segmentation, image.height, image.width);
  } catch (const InvalidArgument& e) {
    throw DataLoss(place + ": segmentation: " + e.what());
  }
  if (rle.height != image.height || rle.width != image.width) {
    throw DataLoss(place + ": segmentation: the RLE's size is [" + std::to_string(rle.height) +
                   ", " + std::to_string(rle.width) + "] but the image is [" +
                   std::to_string(image.height) + ", " + std::to_string(image.width) +
                   "] (height, width)");
  }
  return image::encode_png(detection::rle_decode_row_major(rle), image.height, image.width, 1);
}

void check_options(const ConvertCocoOptions& o) {
  if (o.image_dir.empty()) throw InvalidArgument("convert-coco: --image_dir is required");
  if (o.annotations.empty()) throw InvalidArgument("convert-coco: --annotations is required");
  if (o.output.empty()) throw InvalidArgument("convert-coco: --output is required");
  if (!fs::is_directory(o.image_dir)) {
    throw NotFound("convert-coco: --image_dir " + o.image_dir + " is not a directory");
  }
}

// The file's categories by id, and each image's annotations (indices into coco.annotations) in
// file order; every category checked before anything is written.
struct AnnotationIndex {
  std::unordered_map<int64_t, const detection::CocoCategory*> categories;
  std::vector<std::vector<std::size_t>> annotations_of;  // per image of coco.images
};

AnnotationIndex index_annotations(const detection::CocoInstances& coco, const std::string& file,
                                  ConvertCocoSummary& summary) {
  AnnotationIndex index;
  for (const detection::CocoCategory& category : coco.categories) {
    index.categories[category.id] = &category;
  }
  std::unordered_map<int64_t, std::size_t> images;  // id -> index in coco.images
  for (std::size_t i = 0; i < coco.images.size(); ++i) images[coco.images[i].id] = i;
  index.annotations_of.resize(coco.images.size());
  for (std::size_t k = 0; k < coco.annotations.size(); ++k) {
    const detection::CocoAnnotation& annotation = coco.annotations[k];
    if (index.categories.count(annotation.category_id) == 0) {
      throw DataLoss(annotation_place(file, k, annotation.id) + ": category_id " +
                     std::to_string(annotation.category_id) +
                     " is not the id of an entry of \"categories\"");
    }
    const auto image = images.find(annotation.image_id);
    if (image == images.end()) {
      ++summary.annotations_without_image;
    } else {
      index.annotations_of[image->second].push_back(k);
    }
  }
  return index;
}

// create_tf_example for image i of the file: its JPEG and the boxes of its annotations that lie
// inside it (the others counted as skipped), with their masks under --include_masks.
struct ImageExample {
  wire::tf::Example example;
  int boxes = 0;
};

ImageExample image_example(const ConvertCocoOptions& o, const detection::CocoInstances& coco,
                           const AnnotationIndex& index,
                           const std::optional<LabelMapLookup>& label_map, std::size_t i,
                           ConvertCocoSummary& summary) {
  const detection::CocoImageInfo& image = coco.images[i];
  const std::string place =
      o.annotations + ": images[" + std::to_string(i) + "] (id " + std::to_string(image.id) + ")";
  if (image.file_name.empty()) throw DataLoss(place + ": missing member \"file_name\"");
  if (image.width <= 0 || image.height <= 0) {
    throw DataLoss(place + ": width and height must be given and positive (they are " +
                   std::to_string(image.width) + " and " + std::to_string(image.height) +
                   "; the boxes are normalized by them)");
  }
  const std::string image_path = (fs::path(o.image_dir) / image.file_name).string();
  const SourceJpeg jpeg = read_source_jpeg(image_path, place, image.width, image.height);

  ImageExample result;
  wire::tf::Example& example = result.example;
  add_image_features(jpeg, image.file_name, std::to_string(image.id), example.mutable_features());
  ObjectFeatures objects(example.mutable_features(), image.width, image.height);
  auto& f = *example.mutable_features()->mutable_feature();
  auto* is_crowd = f["image/object/is_crowd"].mutable_int64_list();
  auto* area = f["image/object/area"].mutable_float_list();
  auto* masks = o.include_masks ? f["image/object/mask"].mutable_bytes_list() : nullptr;
  for (const std::size_t k : index.annotations_of[i]) {
    const detection::CocoAnnotation& annotation = coco.annotations[k];
    const auto [x, y, w, h] = annotation.bbox;
    if (w <= 0 || h <= 0 || x < 0 || y < 0 || x + w > static_cast<double>(image.width) ||
        y + h > static_cast<double>(image.height)) {
      ++summary.skipped_annotations;
      continue;
    }
    const detection::CocoCategory& category = *index.categories.at(annotation.category_id);
    objects.add(
        x, y, x + w, y + h, category.name,
        label_map ? label_map->id(category.name, annotation_place(o.annotations, k, annotation.id))
                  : category.id);
    if (masks != nullptr) {
      masks->add_value(
          mask_png(annotation, image, annotation_place(o.annotations, k, annotation.id)));
    }
    is_crowd->add_value(annotation.iscrowd ? 1 : 0);
    area->add_value(static_cast<float>(annotation.area));
    ++summary.boxes;
    if (annotation.iscrowd) ++summary.crowd_boxes;
  }
  result.boxes = objects.size();
  return result;
}

}  // namespace

ConvertCocoSummary convert_coco(const ConvertCocoOptions& o) {
  check_options(o);
  std::optional<LabelMapLookup> label_map;
  if (!o.label_map_path.empty())
    label_map.emplace(o.label_map_path, LabelMapLookup::Match::kNameOrDisplayName);
  const detection::CocoInstances coco =
      detection::read_coco_instances(o.annotations, o.include_masks);
  ConvertCocoSummary summary;
  const AnnotationIndex index = index_annotations(coco, o.annotations, summary);

  RecordShards shards("convert-coco", o.output, o.num_shards, /*plain_name_when_one=*/false);
  Progress progress("data convert-coco", "images", static_cast<int64_t>(coco.images.size()),
                    std::cerr);
  for (std::size_t i = 0; i < coco.images.size(); ++i) {
    const ImageExample image = image_example(o, coco, index, label_map, i, summary);
    progress.advance();
    if (image.boxes == 0) {
      ++summary.images_without_boxes;
      if (o.drop_images_without_boxes) {
        ++summary.dropped_images;
        continue;
      }
    }
    shards.write(image.example);
    ++summary.images;
  }
  progress.finish();
  summary.files = shards.commit();
  return summary;
}

}  // namespace trainyard::app
