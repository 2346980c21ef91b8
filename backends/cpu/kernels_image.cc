// Image kernels (ops/image.h) on the CPU: crop_and_resize and its gradient with respect to the
// image, with TensorFlow's sampling grid and arithmetic (its CropAndResize kernels), the
// coordinates computed in the image's dtype.
//
// The forward pass runs crop rows in parallel; the channel loop is innermost and vectorizes.
// The gradient adds every sample's share to its pixels in a fixed order (box, row, column) that
// no thread count changes: threads own disjoint (image, channel block) pieces of the output.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

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
        const T* tl = top + sx.lo * depth;
        const T* tr = top + sx.hi * depth;
        const T* bl = bottom + sx.lo * depth;
        const T* br = bottom + sx.hi * depth;
        const T x_lerp = sx.lerp;
#pragma omp simd
        for (int64_t d = 0; d < depth; ++d) {
          const T t = tl[d] + (tr[d] - tl[d]) * x_lerp;
          const T u = bl[d] + (br[d] - bl[d]) * x_lerp;
          o[d] = t + (u - t) * y_lerp;
        }
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
          const T y_lerp = sy.lerp, one_y_lerp = T(1) - sy.lerp;
          for (int64_t x = 0; x < cw; ++x) {
            const Sample<T> sx = sample(ax, x, nearest);
            if (sx.lo < 0) continue;
            const T* g = grads + ((b * ch + y) * cw + x) * depth;
            if (nearest) {
              T* pixel = top + sx.lo * depth;
              for (int64_t d = c0; d < c1; ++d) pixel[d] += g[d];
              continue;
            }
            const T x_lerp = sx.lerp, one_x_lerp = T(1) - sx.lerp;
            T* tl = top + sx.lo * depth;
            T* tr = top + sx.hi * depth;
            T* bl = bottom + sx.lo * depth;
            T* br = bottom + sx.hi * depth;
            // TensorFlow's order: the four pixels in turn (they may coincide).
            for (int64_t d = c0; d < c1; ++d) {
              const T dtop = one_y_lerp * g[d];
              tl[d] += one_x_lerp * dtop;
              tr[d] += x_lerp * dtop;
              const T dbottom = y_lerp * g[d];
              bl[d] += one_x_lerp * dbottom;
              br[d] += x_lerp * dbottom;
            }
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

}  // namespace

void add_image_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&crop_and_resize_kernel>("crop_and_resize"));
  table.push_back(cpu_kernel<&crop_and_resize_grad_image_kernel>("crop_and_resize_grad_image"));
}

}  // namespace trainyard::cpu
