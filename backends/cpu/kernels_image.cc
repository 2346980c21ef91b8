// Image kernels (ops/image.h) on the CPU: crop_and_resize and position_sensitive_crop_regions
// and their gradients with respect to the image, with TensorFlow's sampling grid and arithmetic
// (its CropAndResize kernels), the coordinates computed in the image's dtype.
//
// The forward passes run crop rows (or boxes) in parallel; the channel loop is innermost and
// vectorizes. The gradients add every sample's share to its pixels in a fixed order (box, row,
// column) that no thread count changes: threads own disjoint (image, channel block) pieces of
// the output.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// Where a box's crop row (or column) i samples the image, along an axis of `size` pixels, as
// TensorFlow computes it: in T, except the one-sample midpoint, which TensorFlow computes in
// double.
template <class T>
struct Axis {
  T start, scale;
  int64_t size, count;

  Axis(T a, T b, int64_t size_, int64_t count_) : size(size_), count(count_) {
    start = a * static_cast<T>(size - 1);
    scale = count > 1 ? (b - a) * static_cast<T>(size - 1) / static_cast<T>(count - 1) : T(0);
    if (count == 1) {
      start = static_cast<T>(0.5 * static_cast<double>(a + b) * static_cast<double>(size - 1));
    }
  }
  T at(int64_t i) const { return count > 1 ? start + static_cast<T>(i) * scale : start; }
  // False for samples outside [0, size - 1] (and NaN), which read extrapolation_value.
  bool inside(T v) const { return v >= T(0) && v <= static_cast<T>(size - 1); }
};

// One sample along an axis: the pixels it reads and the weight of the second. Nearest reads
// round(v) twice with weight 0.
template <class T>
struct Sample {
  int64_t lo = -1, hi = -1;  // -1: outside the image
  T lerp = T(0);
};

template <class T>
Sample<T> sample(const Axis<T>& axis, int64_t i, bool nearest) {
  const T v = axis.at(i);
  Sample<T> s;
  if (!axis.inside(v)) return s;
  if (nearest) {
    s.lo = s.hi = static_cast<int64_t>(std::round(v));
  } else {
    s.lo = static_cast<int64_t>(std::floor(v));
    s.hi = static_cast<int64_t>(std::ceil(v));
    s.lerp = v - static_cast<T>(s.lo);
  }
  return s;
}

// The bilinear samples of `count` channels between the four pixels top-left, top-right,
// bottom-left and bottom-right, TensorFlow's arithmetic: written to `dst`, or with kAccumulate
// added to it.
template <bool kAccumulate, class T>
inline void bilinear(const T* tl, const T* tr, const T* bl, const T* br, T x_lerp, T y_lerp,
                     int64_t count, T* dst) {
#pragma omp simd
  for (int64_t d = 0; d < count; ++d) {
    const T t = tl[d] + (tr[d] - tl[d]) * x_lerp;
    const T u = bl[d] + (br[d] - bl[d]) * x_lerp;
    const T v = t + (u - t) * y_lerp;
    dst[d] = kAccumulate ? dst[d] + v : v;
  }
}

// The gradient of bilinear(): each of `count` channels of `g` shared out to the four pixels, in
// TensorFlow's CropAndResizeGradImage order (the four in turn; they may coincide).
template <class T>
inline void bilinear_grad(const T* g, T x_lerp, T y_lerp, int64_t count, T* tl, T* tr, T* bl,
                          T* br) {
  const T one_x_lerp = T(1) - x_lerp, one_y_lerp = T(1) - y_lerp;
  for (int64_t d = 0; d < count; ++d) {
    const T dtop = one_y_lerp * g[d];
    tl[d] += one_x_lerp * dtop;
    tr[d] += x_lerp * dtop;
    const T dbottom = y_lerp * g[d];
    bl[d] += one_x_lerp * dbottom;
    br[d] += x_lerp * dbottom;
  }
}

void check_box_ind(const char* op, const int32_t* box_ind, int64_t num_boxes, int64_t batch) {
  for (int64_t b = 0; b < num_boxes; ++b) {
    if (box_ind[b] < 0 || box_ind[b] >= batch) {
      throw InvalidArgument(std::string(op) + ": box " + std::to_string(b) + " has box_ind " +
                            std::to_string(box_ind[b]) + ", outside the image batch of " +
                            std::to_string(batch) + " (valid: 0 to " + std::to_string(batch - 1) +
                            ")");
    }
  }
}

template <class T>
void crop_and_resize_typed(const KernelArgs& args) {
  const auto& a = args.get_attrs<CropAndResizeAttrs>();
  const auto [n_images, height, width, depth] = a.image_shape;
  const T* image = data<T>(args.inputs[0]);
  const T* boxes = data<T>(args.inputs[1]);
  const int32_t* box_ind = data<int32_t>(args.inputs[2]);
  T* out = data<T>(args.outputs[0]);
  const int64_t num_boxes = args.inputs[1].shape()[0];
  check_box_ind(args.op, box_ind, num_boxes, n_images);
  const int64_t ch = a.crop_height, cw = a.crop_width;
  const T extrapolated = static_cast<T>(a.extrapolation_value);
  const bool nearest = a.nearest;
  const int64_t rows = num_boxes * ch;
  parallel_ranges(rows, args.outputs[0].num_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / ch, y = r % ch;
      const T* box = boxes + 4 * b;
      const Axis<T> ay(box[0], box[2], height, ch), ax(box[1], box[3], width, cw);
      T* row = out + r * cw * depth;
      const Sample<T> sy = sample(ay, y, nearest);
      if (sy.lo < 0) {
        std::fill(row, row + cw * depth, extrapolated);
        continue;
      }
      const T* img = image + static_cast<int64_t>(box_ind[b]) * height * width * depth;
      const T* top = img + sy.lo * width * depth;
      const T* bottom = img + sy.hi * width * depth;
      const T y_lerp = sy.lerp;
      for (int64_t x = 0; x < cw; ++x) {
        T* o = row + x * depth;
        const Sample<T> sx = sample(ax, x, nearest);
        if (sx.lo < 0) {
          std::fill(o, o + depth, extrapolated);
          continue;
        }
        if (nearest) {
          std::copy(top + sx.lo * depth, top + (sx.lo + 1) * depth, o);
          continue;
        }
        bilinear<false>(top + sx.lo * depth, top + sx.hi * depth, bottom + sx.lo * depth,
                        bottom + sx.hi * depth, sx.lerp, y_lerp, depth, o);
      }
    }
  });
}

void crop_and_resize_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    crop_and_resize_typed<typename decltype(tag)::type>(args);
  });
}

// Channels per piece of the gradient's output.
inline constexpr int64_t kChannelBlock = 64;

template <class T>
void crop_and_resize_grad_image_typed(const KernelArgs& args) {
  const auto& a = args.get_attrs<CropAndResizeAttrs>();
  const auto [n_images, height, width, depth] = a.image_shape;
  const T* grads = data<T>(args.inputs[0]);
  const T* boxes = data<T>(args.inputs[1]);
  const int32_t* box_ind = data<int32_t>(args.inputs[2]);
  T* dimage = data<T>(args.outputs[0]);
  const int64_t num_boxes = args.inputs[1].shape()[0];
  check_box_ind(args.op, box_ind, num_boxes, n_images);
  const int64_t ch = a.crop_height, cw = a.crop_width;
  const bool nearest = a.nearest;
  const int64_t image_size = height * width * depth;
  const int64_t blocks = (depth + kChannelBlock - 1) / kChannelBlock;
  const int64_t work = args.outputs[0].num_elements() + args.inputs[0].num_elements();
  parallel_ranges(n_images * blocks, work, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t n = piece / blocks;
      const int64_t c0 = (piece % blocks) * kChannelBlock;
      const int64_t c1 = std::min(depth, c0 + kChannelBlock);
      T* img = dimage + n * image_size;
      for (int64_t p = 0; p < height * width; ++p) {
        std::fill(img + p * depth + c0, img + p * depth + c1, T(0));
      }
      for (int64_t b = 0; b < num_boxes; ++b) {
        if (box_ind[b] != n) continue;
        const T* box = boxes + 4 * b;
        const Axis<T> ay(box[0], box[2], height, ch), ax(box[1], box[3], width, cw);
        for (int64_t y = 0; y < ch; ++y) {
          const Sample<T> sy = sample(ay, y, nearest);
          if (sy.lo < 0) continue;
          T* top = img + sy.lo * width * depth;
          T* bottom = img + sy.hi * width * depth;
          for (int64_t x = 0; x < cw; ++x) {
            const Sample<T> sx = sample(ax, x, nearest);
            if (sx.lo < 0) continue;
            const T* g = grads + ((b * ch + y) * cw + x) * depth;
            if (nearest) {
              T* pixel = top + sx.lo * depth;
              for (int64_t d = c0; d < c1; ++d) pixel[d] += g[d];
              continue;
            }
            bilinear_grad(g + c0, sx.lerp, sy.lerp, c1 - c0, top + sx.lo * depth + c0,
                          top + sx.hi * depth + c0, bottom + sx.lo * depth + c0,
                          bottom + sx.hi * depth + c0);
          }
        }
      }
    }
  });
}

void crop_and_resize_grad_image_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    crop_and_resize_grad_image_typed<typename decltype(tag)::type>(args);
  });
}

// ---- position_sensitive_crop_regions ----

// Where bin (i, j) of box `box` samples the image: the API's bin edges in T, then
// crop_and_resize's grid of bin_h x bin_w samples over them.
template <class T>
struct BinGrid {
  Axis<T> y, x;
  BinGrid(const T* box, int64_t i, int64_t j, const PositionSensitiveCropAttrs& a, int64_t bin_h,
          int64_t bin_w)
      : y(edge(box[0], box[2], a.bins_y, i, 0), edge(box[0], box[2], a.bins_y, i, 1),
          a.image_shape[1], bin_h),
        x(edge(box[1], box[3], a.bins_x, j, 0), edge(box[1], box[3], a.bins_x, j, 1),
          a.image_shape[2], bin_w) {}
  // ymin + bin * step, ymin + (bin + 1) * step with step = (ymax - ymin) / bins, as the API.
  static T edge(T lo, T hi, int64_t bins, int64_t bin, int64_t end) {
    const T step = (hi - lo) / static_cast<T>(bins);
    return lo + static_cast<T>(bin + end) * step;
  }
};

template <class T>
void position_sensitive_crop_regions_typed(const KernelArgs& args) {
  const auto& a = args.get_attrs<PositionSensitiveCropAttrs>();
  const auto [n_images, height, width, depth] = a.image_shape;
  const T* image = data<T>(args.inputs[0]);
  const T* boxes = data<T>(args.inputs[1]);
  T* out = data<T>(args.outputs[0]);
  const int64_t num_boxes = args.inputs[1].shape()[1];
  const int64_t bins = a.bins_y * a.bins_x, cd = depth / bins;
  const int64_t bin_h = a.crop_height / a.bins_y, bin_w = a.crop_width / a.bins_x;
  const int64_t out_h = a.global_pool ? 1 : a.crop_height;
  const int64_t out_w = a.global_pool ? 1 : a.crop_width;
  const T bins_t = static_cast<T>(bins), positions = static_cast<T>(bin_h * bin_w);
  const int64_t work = n_images * num_boxes * a.crop_height * a.crop_width * cd;
  parallel_ranges(n_images * num_boxes, work, [&](int64_t begin, int64_t end) {
    // With global_pool: the sum over bins of each position's crop (the API's add_n).
    std::vector<T> sums(a.global_pool ? static_cast<std::size_t>(bin_h * bin_w * cd) : 0);
    for (int64_t nb = begin; nb < end; ++nb) {
      const int64_t n = nb / num_boxes;
      const T* box = boxes + 4 * nb;
      const T* img = image + n * height * width * depth;
      T* o = out + nb * out_h * out_w * cd;
      std::fill(sums.begin(), sums.end(), T(0));
      for (int64_t i = 0; i < a.bins_y; ++i) {
        for (int64_t j = 0; j < a.bins_x; ++j) {
          const BinGrid<T> grid(box, i, j, a, bin_h, bin_w);
          const int64_t c0 = (i * a.bins_x + j) * cd;
          for (int64_t y = 0; y < bin_h; ++y) {
            const Sample<T> sy = sample(grid.y, y, false);
            for (int64_t x = 0; x < bin_w; ++x) {
              const Sample<T> sx = sample(grid.x, x, false);
              T* dst = a.global_pool ? sums.data() + (y * bin_w + x) * cd
                                     : o + ((i * bin_h + y) * out_w + j * bin_w + x) * cd;
              if (sy.lo < 0 || sx.lo < 0) {
                if (!a.global_pool) std::fill(dst, dst + cd, T(0));
                continue;  // 0 outside the image: nothing to add
              }
              const T* tl = img + (sy.lo * width + sx.lo) * depth + c0;
              const T* tr = img + (sy.lo * width + sx.hi) * depth + c0;
              const T* bl = img + (sy.hi * width + sx.lo) * depth + c0;
              const T* br = img + (sy.hi * width + sx.hi) * depth + c0;
              if (a.global_pool) {
                bilinear<true>(tl, tr, bl, br, sx.lerp, sy.lerp, cd, dst);
              } else {
                bilinear<false>(tl, tr, bl, br, sx.lerp, sy.lerp, cd, dst);
              }
            }
          }
        }
      }
      if (!a.global_pool) continue;
      // The mean over bins, then over the bin_h x bin_w positions.
      for (int64_t d = 0; d < cd; ++d) o[d] = T(0);
      for (int64_t p = 0; p < bin_h * bin_w; ++p) {
        for (int64_t d = 0; d < cd; ++d) o[d] += sums[p * cd + d] / bins_t;
      }
      for (int64_t d = 0; d < cd; ++d) o[d] /= positions;
    }
  });
}

void position_sensitive_crop_regions_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    position_sensitive_crop_regions_typed<typename decltype(tag)::type>(args);
  });
}

// Threads own (image, bin) pieces: a bin's channel block of one image.
template <class T>
void position_sensitive_crop_regions_grad_image_typed(const KernelArgs& args) {
  const auto& a = args.get_attrs<PositionSensitiveCropAttrs>();
  const auto [n_images, height, width, depth] = a.image_shape;
  const T* grads = data<T>(args.inputs[0]);
  const T* boxes = data<T>(args.inputs[1]);
  T* dimage = data<T>(args.outputs[0]);
  const int64_t num_boxes = args.inputs[1].shape()[1];
  const int64_t bins = a.bins_y * a.bins_x, cd = depth / bins;
  const int64_t bin_h = a.crop_height / a.bins_y, bin_w = a.crop_width / a.bins_x;
  const int64_t out_h = a.global_pool ? 1 : a.crop_height;
  const int64_t out_w = a.global_pool ? 1 : a.crop_width;
  // With global_pool every sample's gradient is the output's over bins and positions.
  const T scale = T(1) / static_cast<T>(bins) / static_cast<T>(bin_h * bin_w);
  const int64_t work =
      args.outputs[0].num_elements() + n_images * num_boxes * a.crop_height * a.crop_width * cd;
  parallel_ranges(n_images * bins, work, [&](int64_t begin, int64_t end) {
    std::vector<T> g(static_cast<std::size_t>(cd));
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t n = piece / bins, k = piece % bins;
      const int64_t i = k / a.bins_x, j = k % a.bins_x, c0 = k * cd;
      T* img = dimage + n * height * width * depth + c0;
      for (int64_t p = 0; p < height * width; ++p)
        std::fill(img + p * depth, img + p * depth + cd, T(0));
      for (int64_t b = 0; b < num_boxes; ++b) {
        const int64_t nb = n * num_boxes + b;
        const BinGrid<T> grid(boxes + 4 * nb, i, j, a, bin_h, bin_w);
        const T* dout = grads + nb * out_h * out_w * cd;
        for (int64_t y = 0; y < bin_h; ++y) {
          const Sample<T> sy = sample(grid.y, y, false);
          if (sy.lo < 0) continue;
          for (int64_t x = 0; x < bin_w; ++x) {
            const Sample<T> sx = sample(grid.x, x, false);
            if (sx.lo < 0) continue;
            if (a.global_pool) {
              for (int64_t d = 0; d < cd; ++d) g[d] = dout[d] * scale;
            } else {
              const T* src = dout + ((i * bin_h + y) * out_w + j * bin_w + x) * cd;
              std::copy(src, src + cd, g.begin());
            }
            bilinear_grad(g.data(), sx.lerp, sy.lerp, cd, img + (sy.lo * width + sx.lo) * depth,
                          img + (sy.lo * width + sx.hi) * depth,
                          img + (sy.hi * width + sx.lo) * depth,
                          img + (sy.hi * width + sx.hi) * depth);
          }
        }
      }
    }
  });
}

void position_sensitive_crop_regions_grad_image_kernel(Backend&, const KernelArgs& args) {
  visit<DTypeSet::kFloat>(args.op, args.inputs[0].dtype(), [&](auto tag) {
    position_sensitive_crop_regions_grad_image_typed<typename decltype(tag)::type>(args);
  });
}

}  // namespace

void add_image_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&crop_and_resize_kernel>("crop_and_resize"));
  table.push_back(cpu_kernel<&crop_and_resize_grad_image_kernel>("crop_and_resize_grad_image"));
  table.push_back(
      cpu_kernel<&position_sensitive_crop_regions_kernel>("position_sensitive_crop_regions"));
  table.push_back(cpu_kernel<&position_sensitive_crop_regions_grad_image_kernel>(
      "position_sensitive_crop_regions_grad_image"));
}

}  // namespace trainyard::cpu
