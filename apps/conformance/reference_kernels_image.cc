// The reference kernels of the image family: crop_and_resize and its gradient with respect to
// the image, in double precision (reference_backend.h), written from TensorFlow's definition of
// the sampling grid: crop row y of a box (y1, x1, y2, x2) samples the image row
// y1 (H - 1) + y (y2 - y1) (H - 1) / (crop_h - 1), or (y1 + y2) (H - 1) / 2 for one row.
#include <cmath>
#include <string>

#include "reference_kernels.h"
#include "trainyard/error.h"
#include "trainyard/op.h"

namespace trainyard::conformance::reference {
namespace {

// The image coordinate crop index i samples along an axis of `size` pixels, from box edges a, b.
double coordinate(double a, double b, int64_t size, int64_t count, int64_t i) {
  if (count == 1) return 0.5 * (a + b) * static_cast<double>(size - 1);
  return a * static_cast<double>(size - 1) + static_cast<double>(i) * (b - a) *
                                                 static_cast<double>(size - 1) /
                                                 static_cast<double>(count - 1);
}

// The pixels a sample at v reads and their weights: (p0, w0), (p1, w1). False outside
// [0, size - 1].
bool taps(double v, int64_t size, bool nearest, int64_t p[2], double w[2]) {
  if (!(v >= 0.0 && v <= static_cast<double>(size - 1))) return false;
  if (nearest) {
    p[0] = p[1] = static_cast<int64_t>(std::floor(v + 0.5));
    w[0] = 1.0;
    w[1] = 0.0;
  } else {
    p[0] = static_cast<int64_t>(std::floor(v));
    p[1] = static_cast<int64_t>(std::ceil(v));
    w[1] = v - static_cast<double>(p[0]);
    w[0] = 1.0 - w[1];
  }
  return true;
}

int64_t checked_image(const KernelArgs& a, const Values& box_ind, int64_t b, int64_t batch) {
  const auto n = static_cast<int64_t>(box_ind[static_cast<std::size_t>(b)]);
  if (n < 0 || n >= batch) {
    throw InvalidArgument(std::string(a.op) + ": box " + std::to_string(b) + " has box_ind " +
                          std::to_string(n) + " outside [0, " + std::to_string(batch) + ")");
  }
  return n;
}

// Calls f(out_index, image_index, weight) for every (pixel, weight) an output element reads;
// calls outside(out_index) for samples outside the image.
template <class F, class G>
void for_each_tap(const KernelArgs& a, int64_t num_boxes, const F& f, const G& outside) {
  const CropAndResizeAttrs& attrs = a.get_attrs<CropAndResizeAttrs>();
  const auto [batch, height, width, depth] = attrs.image_shape;
  const Values boxes = read(a.inputs[1]), box_ind = read(a.inputs[2]);
  const int64_t ch = attrs.crop_height, cw = attrs.crop_width;
  for (int64_t b = 0; b < num_boxes; ++b) {
    const int64_t n = checked_image(a, box_ind, b, batch);
    const double* box = &boxes[static_cast<std::size_t>(4 * b)];
    for (int64_t y = 0; y < ch; ++y) {
      for (int64_t x = 0; x < cw; ++x) {
        int64_t py[2], px[2];
        double wy[2], wx[2];
        const bool inside =
            taps(coordinate(box[0], box[2], height, ch, y), height, attrs.nearest, py, wy) &&
            taps(coordinate(box[1], box[3], width, cw, x), width, attrs.nearest, px, wx);
        for (int64_t c = 0; c < depth; ++c) {
          const int64_t out = ((b * ch + y) * cw + x) * depth + c;
          if (!inside) {
            outside(out);
            continue;
          }
          for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 2; ++j) {
              f(out, ((n * height + py[i]) * width + px[j]) * depth + c, wy[i] * wx[j]);
            }
          }
        }
      }
    }
  }
}

void k_crop_and_resize(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values image = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  const double extrapolated = a.get_attrs<CropAndResizeAttrs>().extrapolation_value;
  for_each_tap(
      a, a.inputs[1].shape()[0],
      [&](int64_t o, int64_t i, double w) {
        out[static_cast<std::size_t>(o)] += w * image[static_cast<std::size_t>(i)];
      },
      [&](int64_t o) { out[static_cast<std::size_t>(o)] = extrapolated; });
  write(a.outputs[0], out);
}

void k_crop_and_resize_grad_image(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values grads = read(a.inputs[0]);
  Values dimage(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_tap(
      a, a.inputs[1].shape()[0],
      [&](int64_t o, int64_t i, double w) {
        dimage[static_cast<std::size_t>(i)] += w * grads[static_cast<std::size_t>(o)];
      },
      [](int64_t) {});
  write(a.outputs[0], dimage);
}

constexpr KernelRegistration kImageKernels[] = {
    {"crop_and_resize", &k_crop_and_resize},
    {"crop_and_resize_grad_image", &k_crop_and_resize_grad_image},
};

}  // namespace

std::span<const KernelRegistration> image_kernels() { return kImageKernels; }

}  // namespace trainyard::conformance::reference
