// The reference kernels of the image family: crop_and_resize and position_sensitive_crop_regions
// and their gradients with respect to the image, in double precision (reference_backend.h),
// written from TensorFlow's definition of the sampling grid: crop row y of a box (y1, x1, y2, x2)
// samples the image row y1 (H - 1) + y (y2 - y1) (H - 1) / (crop_h - 1), or (y1 + y2) (H - 1) / 2
// for one row; and from the Object Detection API's position_sensitive_crop_regions: bin (i, j)
// of a box is the box (y1 + i h, x1 + j w, y1 + (i + 1) h, x1 + (j + 1) w), h = (y2 - y1) /
// bins_y, w = (x2 - x1) / bins_x, cropped from channel block i bins_x + j.
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

// Calls f(out_index, image_index, weight) for every (pixel, weight) an output element of
// position_sensitive_crop_regions reads (with global_pool, weights divided by the crop's
// crop_h crop_w samples, which all add into the box's one output).
template <class F>
void for_each_position_sensitive_tap(const KernelArgs& a, const F& f) {
  const PositionSensitiveCropAttrs& attrs = a.get_attrs<PositionSensitiveCropAttrs>();
  const auto [batch, height, width, depth] = attrs.image_shape;
  const Values boxes = read(a.inputs[1]);
  const int64_t num_boxes = a.inputs[1].shape()[1];
  const int64_t bins = attrs.bins_y * attrs.bins_x, cd = depth / bins;
  const int64_t bin_h = attrs.crop_height / attrs.bins_y, bin_w = attrs.crop_width / attrs.bins_x;
  const double share =
      attrs.global_pool ? 1.0 / static_cast<double>(attrs.crop_height * attrs.crop_width) : 1.0;
  const int64_t cells = attrs.global_pool ? 1 : attrs.crop_height * attrs.crop_width;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t b = 0; b < num_boxes; ++b) {
      const double* box = &boxes[static_cast<std::size_t>(4 * (n * num_boxes + b))];
      const double h = (box[2] - box[0]) / static_cast<double>(attrs.bins_y);
      const double w = (box[3] - box[1]) / static_cast<double>(attrs.bins_x);
      for (int64_t y = 0; y < attrs.crop_height; ++y) {
        for (int64_t x = 0; x < attrs.crop_width; ++x) {
          const int64_t i = y / bin_h, j = x / bin_w;
          const double by = box[0] + static_cast<double>(i) * h;
          const double bx = box[1] + static_cast<double>(j) * w;
          int64_t py[2], px[2];
          double wy[2], wx[2];
          if (!taps(coordinate(by, by + h, height, bin_h, y % bin_h), height, false, py, wy) ||
              !taps(coordinate(bx, bx + w, width, bin_w, x % bin_w), width, false, px, wx)) {
            continue;  // 0 outside the image
          }
          const int64_t cell = attrs.global_pool ? 0 : y * attrs.crop_width + x;
          for (int64_t c = 0; c < cd; ++c) {
            const int64_t out = ((n * num_boxes + b) * cells + cell) * cd + c;
            const int64_t channel = (i * attrs.bins_x + j) * cd + c;
            for (int u = 0; u < 2; ++u) {
              for (int v = 0; v < 2; ++v) {
                f(out, ((n * height + py[u]) * width + px[v]) * depth + channel,
                  share * wy[u] * wx[v]);
              }
            }
          }
        }
      }
    }
  }
}

void k_position_sensitive_crop_regions(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values image = read(a.inputs[0]);
  Values out(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_position_sensitive_tap(a, [&](int64_t o, int64_t i, double w) {
    out[static_cast<std::size_t>(o)] += w * image[static_cast<std::size_t>(i)];
  });
  write(a.outputs[0], out);
}

void k_position_sensitive_crop_regions_grad_image(Backend&, const KernelArgs& a) {
  check_dtypes(a);
  const Values grads = read(a.inputs[0]);
  Values dimage(static_cast<std::size_t>(a.outputs[0].num_elements()), 0.0);
  for_each_position_sensitive_tap(a, [&](int64_t o, int64_t i, double w) {
    dimage[static_cast<std::size_t>(i)] += w * grads[static_cast<std::size_t>(o)];
  });
  write(a.outputs[0], dimage);
}

constexpr KernelRegistration kImageKernels[] = {
    {"crop_and_resize", &k_crop_and_resize},
    {"crop_and_resize_grad_image", &k_crop_and_resize_grad_image},
    {"position_sensitive_crop_regions", &k_position_sensitive_crop_regions},
    {"position_sensitive_crop_regions_grad_image", &k_position_sensitive_crop_regions_grad_image},
};

}  // namespace

std::span<const KernelRegistration> image_kernels() { return kImageKernels; }

}  // namespace trainyard::conformance::reference
