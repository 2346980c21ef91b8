// An image file that a dataset converter puts in a record as the Object Detection API's scripts
// do: its bytes unchanged (image/encoded), their SHA-256 (image/key/sha256) and its size.
#ifndef TRAINYARD_APPS_TRAINYARD_SOURCE_JPEG_H_
#define TRAINYARD_APPS_TRAINYARD_SOURCE_JPEG_H_

#include <cstdint>
#include <string>

namespace trainyard::app {

// A source image larger than this is not one a converter takes.
inline constexpr uint64_t kMaxSourceJpegBytes = uint64_t{256} << 20;

struct SourceJpeg {
  std::string bytes;   // the file's bytes
  std::string sha256;  // their digest, 64 lowercase hex digits
  int64_t height = 0;  // from the decoded image
  int64_t width = 0;
};

// Reads the image `path` (`where` says whose image it is, for errors: "convert-voc:
// VOC2007/Annotations/000001.xml") and decodes it whole, so that a corrupt file fails here
// rather than in training. Throws NotFound when the file is missing, InvalidArgument when it is
// over kMaxSourceJpegBytes or not a regular file, DataLoss when it is not a JPEG (the API's
// scripts write image/format "jpeg" and create_pascal_tf_record refuses anything else) or does
// not decode; each message names `where` and the path.
SourceJpeg read_source_jpeg(const std::string& path, const std::string& where);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_SOURCE_JPEG_H_
