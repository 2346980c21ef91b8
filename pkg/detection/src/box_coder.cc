#include "trainyard/pkg/detection/box_coder.h"

#include <cmath>
#include <string>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/box_ops.h"

namespace trainyard::detection {

namespace {

void check_encode_sizes(const char* coder, std::span<const float> boxes,
                        std::span<const float> anchors) {
  const int64_t n = num_boxes(boxes, "boxes"), a = num_boxes(anchors, "anchors");
  if (n != a) {
    throw InvalidArgument(std::string(coder) + ".encode: " + std::to_string(n) + " boxes for " +
                          std::to_string(a) + " anchors; encode needs one box per anchor");
  }
}

// The anchor count, after checking that codes hold k * anchors rows of 4.
int64_t check_decode_sizes(const char* coder, std::span<const float> codes,
                           std::span<const float> anchors) {
  const int64_t a = num_boxes(anchors, "anchors");
  const int64_t rows = num_boxes(codes, "codes");
  if ((a == 0 && rows != 0) || (a != 0 && rows % a != 0)) {
    throw InvalidArgument(std::string(coder) + ".decode: " + std::to_string(rows) +
                          " code rows for " + std::to_string(a) +
                          " anchors; decode needs a multiple of the anchors");
  }
  return a;
}

struct CenterSize {
  float yc, xc, h, w;
};

// get_center_coordinates_and_sizes, in f32 as the API's.
inline CenterSize center_size(const float* b) {
  const float h = b[2] - b[0], w = b[3] - b[1];
  return {b[0] + h / 2.0f, b[1] + w / 2.0f, h, w};
}

}  // namespace

FasterRcnnBoxCoder::FasterRcnnBoxCoder(std::vector<double> scale_factors)
    : scale_factors_(std::move(scale_factors)) {
  if (!scale_factors_.empty()) {
    if (scale_factors_.size() != 4) {
      throw InvalidArgument("FasterRcnnBoxCoder: scale_factors has " +
                            std::to_string(scale_factors_.size()) +
                            " entries; it needs 4 (y, x, height, width) or none");
    }
    for (double s : scale_factors_) {
      if (!(s > 0.0)) {
        throw InvalidArgument("FasterRcnnBoxCoder: scale factor " + std::to_string(s) +
                              " is not positive");
      }
    }
  }
}

std::vector<float> FasterRcnnBoxCoder::encode(std::span<const float> boxes,
                                              std::span<const float> anchors) const {
  check_encode_sizes("FasterRcnnBoxCoder", boxes, anchors);
  std::vector<float> out(boxes.size());
  const bool scaled = !scale_factors_.empty();
  float s[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int k = 0; k < 4 && scaled; ++k) s[k] = static_cast<float>(scale_factors_[k]);
  for (std::size_t i = 0; i < boxes.size(); i += 4) {
    CenterSize a = center_size(&anchors[i]);
    CenterSize b = center_size(&boxes[i]);
    a.h += kEpsilon;
    a.w += kEpsilon;
    b.h += kEpsilon;
    b.w += kEpsilon;
    float ty = (b.yc - a.yc) / a.h, tx = (b.xc - a.xc) / a.w;
    float th = std::log(b.h / a.h), tw = std::log(b.w / a.w);
    if (scaled) {
      ty *= s[0];
      tx *= s[1];
      th *= s[2];
      tw *= s[3];
    }
    out[i] = ty;
    out[i + 1] = tx;
    out[i + 2] = th;
    out[i + 3] = tw;
  }
  return out;
}

std::vector<float> FasterRcnnBoxCoder::decode(std::span<const float> codes,
                                              std::span<const float> anchors) const {
  const int64_t num_anchors = check_decode_sizes("FasterRcnnBoxCoder", codes, anchors);
  std::vector<float> out(codes.size());
  const bool scaled = !scale_factors_.empty();
  float s[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int k = 0; k < 4 && scaled; ++k) s[k] = static_cast<float>(scale_factors_[k]);
  const std::size_t anchor_floats = static_cast<std::size_t>(num_anchors) * 4;
  for (std::size_t i = 0; i < codes.size(); i += 4) {
    const CenterSize a = center_size(&anchors[i % anchor_floats]);
    float ty = codes[i], tx = codes[i + 1], th = codes[i + 2], tw = codes[i + 3];
    if (scaled) {
      ty /= s[0];
      tx /= s[1];
      th /= s[2];
      tw /= s[3];
    }
    const float w = std::exp(tw) * a.w, h = std::exp(th) * a.h;
    const float yc = ty * a.h + a.yc, xc = tx * a.w + a.xc;
    out[i] = yc - h / 2.0f;
    out[i + 1] = xc - w / 2.0f;
    out[i + 2] = yc + h / 2.0f;
    out[i + 3] = xc + w / 2.0f;
  }
  return out;
}

MeanStddevBoxCoder::MeanStddevBoxCoder(double stddev) : stddev_(stddev) {
  if (!(stddev > 0.0)) {
    throw InvalidArgument("MeanStddevBoxCoder: stddev " + std::to_string(stddev) +
                          " is not positive");
  }
}

std::vector<float> MeanStddevBoxCoder::encode(std::span<const float> boxes,
                                              std::span<const float> anchors) const {
  check_encode_sizes("MeanStddevBoxCoder", boxes, anchors);
  const float sd = static_cast<float>(stddev_);
  std::vector<float> out(boxes.size());
  for (std::size_t i = 0; i < boxes.size(); ++i) out[i] = (boxes[i] - anchors[i]) / sd;
  return out;
}

std::vector<float> MeanStddevBoxCoder::decode(std::span<const float> codes,
                                              std::span<const float> anchors) const {
  const int64_t num_anchors = check_decode_sizes("MeanStddevBoxCoder", codes, anchors);
  const float sd = static_cast<float>(stddev_);
  const std::size_t anchor_floats = static_cast<std::size_t>(num_anchors) * 4;
  std::vector<float> out(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i)
    out[i] = codes[i] * sd + anchors[i % anchor_floats];
  return out;
}

}  // namespace trainyard::detection
