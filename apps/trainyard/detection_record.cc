#include "detection_record.h"

#include <optional>
#include <span>
#include <string>

#include "sha256.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/user_file.h"

namespace trainyard::app {

SourceJpeg read_source_jpeg(const std::string& path, const std::string& where, int64_t width,
                            int64_t height) {
  SourceJpeg jpeg;
  jpeg.bytes = read_user_file(path, where + ": image", kMaxSourceJpegBytes);
  const auto data = std::as_bytes(std::span<const char>(jpeg.bytes.data(), jpeg.bytes.size()));
  const std::optional<image::ImageFormat> format = image::sniff_image_format(data);
  if (format != image::ImageFormat::kJpeg) {
    throw DataLoss(where + ": image " + path + " is " +
                   (format ? std::string("a ") + image::image_format_name(*format) + " file"
                           : std::string("neither a JPEG nor a PNG file")) +
                   ", not a JPEG (the records say image/format 'jpeg', as the API's scripts "
                   "write them)");
  }
  const image::DecodedImage decoded = image::decode_image(data, 0, where + ": image " + path);
  if (decoded.width != width || decoded.height != height) {
    throw DataLoss(where + ": the annotation says " + std::to_string(width) + " x " +
                   std::to_string(height) + " pixels but the image " + path + " is " +
                   std::to_string(decoded.width) + " x " + std::to_string(decoded.height) +
                   " (the boxes are normalized by the annotation's size)");
  }
  jpeg.height = decoded.height;
  jpeg.width = decoded.width;
  jpeg.sha256 = sha256_hex(jpeg.bytes);
  return jpeg;
}

void add_image_features(const SourceJpeg& jpeg, const std::string& filename,
                        const std::string& source_id, wire::tf::Features* features) {
  auto& f = *features->mutable_feature();
  f["image/height"].mutable_int64_list()->add_value(jpeg.height);
  f["image/width"].mutable_int64_list()->add_value(jpeg.width);
  f["image/filename"].mutable_bytes_list()->add_value(filename);
  f["image/source_id"].mutable_bytes_list()->add_value(source_id);
  f["image/key/sha256"].mutable_bytes_list()->add_value(jpeg.sha256);
  f["image/encoded"].mutable_bytes_list()->add_value(jpeg.bytes);
  f["image/format"].mutable_bytes_list()->add_value("jpeg");
}

ObjectFeatures::ObjectFeatures(wire::tf::Features* features, int64_t width, int64_t height)
    : width_(static_cast<double>(width)), height_(static_cast<double>(height)) {
  auto& f = *features->mutable_feature();
  xmin_ = f["image/object/bbox/xmin"].mutable_float_list();
  xmax_ = f["image/object/bbox/xmax"].mutable_float_list();
  ymin_ = f["image/object/bbox/ymin"].mutable_float_list();
  ymax_ = f["image/object/bbox/ymax"].mutable_float_list();
  text_ = f["image/object/class/text"].mutable_bytes_list();
  label_ = f["image/object/class/label"].mutable_int64_list();
}

void ObjectFeatures::add(double xmin, double ymin, double xmax, double ymax,
                         const std::string& text, int64_t label) {
  xmin_->add_value(static_cast<float>(xmin / width_));
  xmax_->add_value(static_cast<float>(xmax / width_));
  ymin_->add_value(static_cast<float>(ymin / height_));
  ymax_->add_value(static_cast<float>(ymax / height_));
  text_->add_value(text);
  label_->add_value(label);
}

}  // namespace trainyard::app
