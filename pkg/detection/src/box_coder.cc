#include "trainyard/pkg/detection/box_coder.h"

#include <cmath>
#include <string>
#include <utility>

#include "trainyard/error.h"
#include "trainyard/ops.h"
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

// Checks codes [..., N, 4] f32 against N anchors; returns N.
int64_t check_decode_tensor(const char* coder, const Tensor& codes,
                            std::span<const float> anchors) {
  const int64_t a = num_boxes(anchors, "anchors");
  const Shape& s = codes.shape();
  if (codes.dtype() != DType::kF32 || s.rank() < 2 || s[s.rank() - 1] != 4 ||
      s[s.rank() - 2] != a) {
    throw InvalidArgument(std::string(coder) + ".decode_tensor: codes are " + codes.description() +
                          "; expected f32 [..., " + std::to_string(a) + ", 4] for " +
                          std::to_string(a) + " anchors");
  }
  return a;
}

// Column k of codes [..., N, 4]: [..., N, 1].
Tensor column(const Tensor& codes, int64_t k) {
  std::vector<int64_t> begin(codes.shape().rank(), 0);
  std::vector<int64_t> size = codes.shape().to_vector();
  begin.back() = k;
  size.back() = 1;
  return ops::slice(codes, begin, size);
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

// decode's arithmetic in the same order: the codes divided by the scale factors, exp of the size
// codes times the anchor's size, the center moved by the anchor's size, the corners at half the
// size from the center.
Tensor FasterRcnnBoxCoder::decode_tensor(const Tensor& codes,
                                         std::span<const float> anchors) const {
  const int64_t n = check_decode_tensor("FasterRcnnBoxCoder", codes, anchors);
  Backend& backend = codes.backend();
  std::vector<float> yc(static_cast<std::size_t>(n)), xc(yc.size()), h(yc.size()), w(yc.size());
  for (std::size_t i = 0; i < yc.size(); ++i) {
    const CenterSize a = center_size(&anchors[i * 4]);
    yc[i] = a.yc;
    xc[i] = a.xc;
    h[i] = a.h;
    w[i] = a.w;
  }
  const Shape anchor_shape{n, 1};
  return decode_center_size(codes, Tensor::from_vector(backend, anchor_shape, yc),
                            Tensor::from_vector(backend, anchor_shape, xc),
                            Tensor::from_vector(backend, anchor_shape, h),
                            Tensor::from_vector(backend, anchor_shape, w));
}

Tensor FasterRcnnBoxCoder::decode_tensor(const Tensor& codes, const Tensor& anchors) const {
  const Shape& c = codes.shape();
  const Shape& a = anchors.shape();
  if (codes.dtype() != DType::kF32 || anchors.dtype() != DType::kF32 || c.rank() < 2 ||
      a.rank() != c.rank() || c[c.rank() - 1] != 4 || a[a.rank() - 1] != 4) {
    throw InvalidArgument("FasterRcnnBoxCoder.decode_tensor: codes are " + codes.description() +
                          " and anchors " + anchors.description() +
                          "; expected f32 [..., 4] of one rank");
  }
  // center_size's arithmetic: the size first, the center at half of it from the minimum.
  const Tensor two = Tensor::from_vector(codes.backend(), Shape{1}, std::vector<float>{2.0f});
  const Tensor a_h = ops::sub(column(anchors, 2), column(anchors, 0));
  const Tensor a_w = ops::sub(column(anchors, 3), column(anchors, 1));
  return decode_center_size(codes, ops::add(column(anchors, 0), ops::div(a_h, two)),
                            ops::add(column(anchors, 1), ops::div(a_w, two)), a_h, a_w);
}

// decode's arithmetic on codes [..., 4] against anchor centers and sizes that broadcast to
// [..., 1].
Tensor FasterRcnnBoxCoder::decode_center_size(const Tensor& codes, const Tensor& a_yc,
                                              const Tensor& a_xc, const Tensor& a_h,
                                              const Tensor& a_w) const {
  Backend& backend = codes.backend();
  Tensor scaled = codes;
  if (!scale_factors_.empty()) {
    std::vector<float> s;
    for (double f : scale_factors_) s.push_back(static_cast<float>(f));
    scaled = ops::div(codes, Tensor::from_vector(backend, Shape{4}, s));
  }
  const Tensor box_w = ops::mul(ops::exp(column(scaled, 3)), a_w);
  const Tensor box_h = ops::mul(ops::exp(column(scaled, 2)), a_h);
  const Tensor center_y = ops::add(ops::mul(column(scaled, 0), a_h), a_yc);
  const Tensor center_x = ops::add(ops::mul(column(scaled, 1), a_w), a_xc);
  const Tensor half_h =
      ops::div(box_h, Tensor::from_vector(backend, Shape{1}, std::vector<float>{2.0f}));
  const Tensor half_w =
      ops::div(box_w, Tensor::from_vector(backend, Shape{1}, std::vector<float>{2.0f}));
  const std::vector<Tensor> corners = {ops::sub(center_y, half_h), ops::sub(center_x, half_w),
                                       ops::add(center_y, half_h), ops::add(center_x, half_w)};
  return ops::concat(corners, static_cast<int64_t>(codes.shape().rank()) - 1);
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

// codes * stddev + anchors, as decode.
Tensor MeanStddevBoxCoder::decode_tensor(const Tensor& codes,
                                         std::span<const float> anchors) const {
  const int64_t n = check_decode_tensor("MeanStddevBoxCoder", codes, anchors);
  Backend& backend = codes.backend();
  const Tensor sd =
      Tensor::from_vector(backend, Shape{1}, std::vector<float>{static_cast<float>(stddev_)});
  const Tensor a =
      Tensor::from_vector(backend, Shape{n, 4}, std::vector<float>(anchors.begin(), anchors.end()));
  return ops::add(ops::mul(codes, sd), a);
}

}  // namespace trainyard::detection
