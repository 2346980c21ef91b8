// Box coders of the Object Detection API (core/box_coder.py, box_coders/): how a box is written
// relative to an anchor as a regression target, and back.
//
// Boxes and anchors are row-major [N, 4] float arrays of [ymin, xmin, ymax, xmax]; codes are
// [N, code_size()]. encode(boxes, anchors) needs as many boxes as anchors. decode(codes, anchors)
// accepts k * N code rows for N anchors (a batch of k images laid out image by image) and
// decodes row r against anchor r mod N. Size mismatches throw InvalidArgument naming both
// sizes.
//
// decode_tensor(codes, anchors) is decode's arithmetic as ops on the backend, [..., N, code_size()]
// f32 codes (every leading index an image of the batch) against the N anchors -> [..., N, 4]:
// what postprocess runs, so that a graph capture (the ONNX export) records the decoding. The
// anchors' center and size are computed on the host as decode computes them. InvalidArgument
// when the codes' last two dimensions are not [N, code_size()] or the dtype is not f32.
#ifndef TRAINYARD_PKG_DETECTION_BOX_CODER_H_
#define TRAINYARD_PKG_DETECTION_BOX_CODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "trainyard/tensor.h"

namespace trainyard::detection {

class BoxCoder {
 public:
  virtual ~BoxCoder() = default;
  virtual int64_t code_size() const = 0;
  virtual std::vector<float> encode(std::span<const float> boxes,
                                    std::span<const float> anchors) const = 0;
  virtual std::vector<float> decode(std::span<const float> codes,
                                    std::span<const float> anchors) const = 0;
  virtual Tensor decode_tensor(const Tensor& codes, std::span<const float> anchors) const = 0;
};

// FasterRcnnBoxCoder: [ty, tx, th, tw] = scale_factors * [(y - ya) / ha, (x - xa) / wa,
// log(h / ha), log(w / wa)] in center-size form. encode adds EPSILON (1e-8) to the anchor's and
// the box's height and width first (so a zero-size box encodes finitely), decode does not, as
// the API's. Empty scale_factors means no scaling; the reference configs use 10, 10, 5, 5.
class FasterRcnnBoxCoder final : public BoxCoder {
 public:
  static constexpr float kEpsilon = 1e-8f;

  // Throws InvalidArgument unless scale_factors is empty or four positive numbers.
  explicit FasterRcnnBoxCoder(std::vector<double> scale_factors = {});
  int64_t code_size() const override { return 4; }
  std::vector<float> encode(std::span<const float> boxes,
                            std::span<const float> anchors) const override;
  std::vector<float> decode(std::span<const float> codes,
                            std::span<const float> anchors) const override;
  Tensor decode_tensor(const Tensor& codes, std::span<const float> anchors) const override;
  // decode_tensor against anchors that are themselves a tensor (f32 [..., N, 4], broadcastable to
  // the codes' shape, as Faster R-CNN's second stage decodes against its proposals): their center
  // and size computed as ops too, in decode's order. InvalidArgument naming both shapes unless
  // the codes are f32 [..., 4] and the anchors f32 of the same rank ending in 4.
  Tensor decode_tensor(const Tensor& codes, const Tensor& anchors) const;
  const std::vector<double>& scale_factors() const { return scale_factors_; }

 private:
  Tensor decode_center_size(const Tensor& codes, const Tensor& a_yc, const Tensor& a_xc,
                            const Tensor& a_h, const Tensor& a_w) const;

  std::vector<double> scale_factors_;
};

// MeanStddevBoxCoder: code = (box - anchor) / stddev on the corners (the anchor is the mean).
class MeanStddevBoxCoder final : public BoxCoder {
 public:
  // Throws InvalidArgument unless stddev > 0.
  explicit MeanStddevBoxCoder(double stddev = 0.01);
  int64_t code_size() const override { return 4; }
  std::vector<float> encode(std::span<const float> boxes,
                            std::span<const float> anchors) const override;
  std::vector<float> decode(std::span<const float> codes,
                            std::span<const float> anchors) const override;
  Tensor decode_tensor(const Tensor& codes, std::span<const float> anchors) const override;
  double stddev() const { return stddev_; }

 private:
  double stddev_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_BOX_CODER_H_
