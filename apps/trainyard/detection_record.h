// What the dataset converters' records share, as the Object Detection API's dataset scripts write
// them: the image (its file's bytes unchanged in image/encoded, their SHA-256 in
// image/key/sha256, its size) and each object's normalized box, class text and label.
#ifndef TRAINYARD_APPS_TRAINYARD_DETECTION_RECORD_H_
#define TRAINYARD_APPS_TRAINYARD_DETECTION_RECORD_H_

#include <cstdint>
#include <string>

#include "trainyard/wire/example.pb.h"

namespace trainyard::app {

// A source image larger than this is not one a converter takes.
inline constexpr uint64_t kMaxSourceJpegBytes = uint64_t{256} << 20;

struct SourceJpeg {
  std::string bytes;   // the file's bytes
  std::string sha256;  // their digest, 64 lowercase hex digits
  int64_t height = 0;  // from the decoded image
  int64_t width = 0;
};

// Reads the image `path` and decodes it whole, so that a corrupt file fails here rather than in
// training. `where` names whose image it is in errors (the annotation file, or the place in it:
// "instances.json: images[3] (id 42)"). Throws NotFound when the file is missing,
// InvalidArgument when it is over kMaxSourceJpegBytes or not a regular file, DataLoss when it is
// not a JPEG (the API's scripts write image/format "jpeg" and create_pascal_tf_record refuses
// anything else), does not decode, or is not `width` x `height` pixels (the annotation's size,
// which the boxes are normalized by); each message names `where` and the path.
SourceJpeg read_source_jpeg(const std::string& path, const std::string& where, int64_t width,
                            int64_t height);

// The image's features of a record as the API's scripts write them: image/height, image/width,
// image/filename, image/source_id, image/key/sha256, image/encoded (the bytes as read) and
// image/format "jpeg".
void add_image_features(const SourceJpeg& jpeg, const std::string& filename,
                        const std::string& source_id, wire::tf::Features* features);

// The per-object lists both scripts write: image/object/bbox/{xmin,xmax,ymin,ymax} and
// image/object/class/{text,label}. They are created when this is, so a record without objects
// holds them empty, as the scripts write it.
class ObjectFeatures {
 public:
  // `features` must outlive this; `width` and `height` are the image's, in pixels.
  ObjectFeatures(wire::tf::Features* features, int64_t width, int64_t height);

  // A box in pixels, stored as Python computes float(x) / width and FloatList keeps it: divided
  // in double, then rounded to float.
  void add(double xmin, double ymin, double xmax, double ymax, const std::string& text,
           int64_t label);
  int size() const { return xmin_->value_size(); }

 private:
  double width_;
  double height_;
  wire::tf::FloatList* xmin_;
  wire::tf::FloatList* xmax_;
  wire::tf::FloatList* ymin_;
  wire::tf::FloatList* ymax_;
  wire::tf::BytesList* text_;
  wire::tf::Int64List* label_;
};

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_DETECTION_RECORD_H_
