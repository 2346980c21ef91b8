// The CUDA kernels of the image ops (core/src/ops/image.cc): crop_and_resize and
// position_sensitive_crop_regions and their gradients with respect to the image, with the CPU's
// sampling arithmetic (backends/cpu/kernels_image.cc, TensorFlow's grid).
//
// The forward pass is one thread per output element. The gradient is deterministic without
// atomics: TensorFlow scatters each sample into its four pixels with atomic adds; here a first
// pass computes where every crop row and column samples (the pixels and weight), and then one
// thread per image element gathers, in a fixed order (box, row, column), the samples that read
// it: the CPU's order of additions, with its rounding. A box_ind outside [0, N) is noted as an
// index fault (kernels.cuh) naming the box. position_sensitive_crop_regions works the same way:
// one thread per output element (per box and channel with global_pool, summing as the CPU does),
// and a gradient gathered per image element from the samples of its channel's bin.
#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// Products and sums rounded one at a time, as the CPU (and TensorFlow's kernel) computes them:
// nvcc would otherwise fuse them into FMAs, which round once, and a sample next to a pixel or
// the image's border could fall on the other side of it than on the CPU.
__device__ inline float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add(double a, double b) { return __dadd_rn(a, b); }

// Where crop row (or column) i of a box (a, b) samples an axis of `size` pixels, as TensorFlow
// computes it in T (the one-sample midpoint in double). False outside [0, size - 1] or NaN.
template <class T>
__device__ bool sample_at(T a, T b, int64_t size, int64_t count, int64_t i, bool nearest, int* lo,
                          int* hi, T* lerp) {
  T v;
  if (count > 1) {
    const T scale = (b - a) * static_cast<T>(size - 1) / static_cast<T>(count - 1);
    v = add(mul(a, static_cast<T>(size - 1)), mul(static_cast<T>(i), scale));
  } else {
    v = static_cast<T>(0.5 * static_cast<double>(a + b) * static_cast<double>(size - 1));
  }
  if (!(v >= T(0) && v <= static_cast<T>(size - 1))) return false;
  if (nearest) {
    *lo = *hi = static_cast<int>(round(v));
    *lerp = T(0);
  } else {
    *lo = static_cast<int>(floor(v));
    *hi = static_cast<int>(ceil(v));
    *lerp = v - static_cast<T>(*lo);
  }
  return true;
}

// The bilinear sample between the pixels top-left, top-right, bottom-left and bottom-right, in
// the CPU's (TensorFlow's) order of roundings.
template <class T>
__device__ T bilinear(T tl, T tr, T bl, T br, T x_lerp, T y_lerp) {
  const T t = add(tl, mul(tr - tl, x_lerp));
  const T u = add(bl, mul(br - bl, x_lerp));
  return add(t, mul(u - t, y_lerp));
}

// `sum` plus the shares of a sample's gradient g that go to pixel (py, px) of the sample's four
// (rows top and bottom, columns left and right): TensorFlow's four shares, in its order (the
// pixels may coincide).
template <class T>
__device__ T add_bilinear_shares(T sum, T g, int top, int bottom, T y_lerp, int left, int right,
                                 T x_lerp, int py, int px) {
  const T dtop = (T(1) - y_lerp) * g;
  const T dbottom = y_lerp * g;
  if (top == py && left == px) sum = add(sum, mul(T(1) - x_lerp, dtop));
  if (top == py && right == px) sum = add(sum, mul(x_lerp, dtop));
  if (bottom == py && left == px) sum = add(sum, mul(T(1) - x_lerp, dbottom));
  if (bottom == py && right == px) sum = add(sum, mul(x_lerp, dbottom));
  return sum;
}

struct CropDims {
  int64_t batch, height, width, depth;
  int64_t num_boxes, crop_height, crop_width;
};

CropDims crop_dims(const KernelArgs& args, int64_t num_boxes) {
  const auto& a = args.get_attrs<CropAndResizeAttrs>();
  return {a.image_shape[0], a.image_shape[1], a.image_shape[2], a.image_shape[3],
          num_boxes,        a.crop_height,    a.crop_width};
}

template <class T>
__global__ void crop_and_resize_kernel(const T* __restrict__ image, const T* __restrict__ boxes,
                                       const int32_t* __restrict__ box_ind, T* __restrict__ out,
                                       CropDims d, bool nearest, T extrapolated, int64_t n,
                                       IndexFault* fault) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = i % d.depth;
    const int64_t x = (i / d.depth) % d.crop_width;
    const int64_t y = (i / (d.depth * d.crop_width)) % d.crop_height;
    const int64_t b = i / (d.depth * d.crop_width * d.crop_height);
    const int64_t n_in = box_ind[b];
    if (n_in < 0 || n_in >= d.batch) {
      out[i] = extrapolated;
      note_bad_index(fault, b);
      continue;
    }
    const T* box = boxes + 4 * b;
    int top, bottom, left, right;
    T y_lerp, x_lerp;
    if (!sample_at(box[0], box[2], d.height, d.crop_height, y, nearest, &top, &bottom, &y_lerp) ||
        !sample_at(box[1], box[3], d.width, d.crop_width, x, nearest, &left, &right, &x_lerp)) {
      out[i] = extrapolated;
      continue;
    }
    const T* img = image + n_in * d.height * d.width * d.depth + c;
    const T tl = img[(top * d.width + left) * d.depth];
    if (nearest) {
      out[i] = tl;
      continue;
    }
    out[i] = bilinear(tl, img[(top * d.width + right) * d.depth],
                      img[(bottom * d.width + left) * d.depth],
                      img[(bottom * d.width + right) * d.depth], x_lerp, y_lerp);
  }
}

void crop_and_resize(Backend& backend, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const auto& a = args.get_attrs<CropAndResizeAttrs>();
  const CropDims d = crop_dims(args, args.inputs[1].shape()[0]);
  const int32_t* box_ind = data<int32_t>(args.inputs[2]);
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    crop_and_resize_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(args.inputs[0]), data<T>(args.inputs[1]), box_ind, data<T>(out), d, a.nearest,
        static_cast<T>(a.extrapolation_value), n, cuda_backend(backend).index_fault());
    check_launch(args.op);
  });
  record_index_fault<int32_t>(backend, args, box_ind, 0, d.batch);
}

// The samples of every crop row (i < num_boxes * crop_height) and then every crop column: the
// two pixels read (lo == hi == -1 outside the image or for a box with a bad box_ind) and the
// weight of the second.
template <class T>
__global__ void samples_kernel(const T* __restrict__ boxes, const int32_t* __restrict__ box_ind,
                               CropDims d, bool nearest, int* __restrict__ lo, int* __restrict__ hi,
                               T* __restrict__ lerp, int64_t n, IndexFault* fault) {
  const int64_t rows = d.num_boxes * d.crop_height;
  TRAINYARD_GRID_LOOP(i, n) {
    const bool is_row = i < rows;
    const int64_t b = is_row ? i / d.crop_height : (i - rows) / d.crop_width;
    const int64_t k = is_row ? i % d.crop_height : (i - rows) % d.crop_width;
    const T* box = boxes + 4 * b;
    int l = -1, h = -1;
    T w = T(0);
    const int64_t n_in = box_ind[b];
    if (n_in < 0 || n_in >= d.batch) {
      if (is_row && k == 0) note_bad_index(fault, b);
    } else if (!(is_row
                     ? sample_at(box[0], box[2], d.height, d.crop_height, k, nearest, &l, &h, &w)
                     : sample_at(box[1], box[3], d.width, d.crop_width, k, nearest, &l, &h, &w))) {
      l = h = -1;
    }
    lo[i] = l;
    hi[i] = h;
    lerp[i] = w;
  }
}

// dimage[n, py, px, c]: the sum over boxes b of image n, crop rows y sampling row py and crop
// columns x sampling column px, of TensorFlow's weighted shares of grads[b, y, x, c].
template <class T>
__global__ void crop_and_resize_grad_image_kernel(const T* __restrict__ grads,
                                                  const int32_t* __restrict__ box_ind,
                                                  const int* __restrict__ lo,
                                                  const int* __restrict__ hi,
                                                  const T* __restrict__ lerp, CropDims d,
                                                  bool nearest, T* __restrict__ dimage, int64_t n) {
  const int64_t rows = d.num_boxes * d.crop_height;
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = i % d.depth;
    const int px = static_cast<int>((i / d.depth) % d.width);
    const int py = static_cast<int>((i / (d.depth * d.width)) % d.height);
    const int64_t image = i / (d.depth * d.width * d.height);
    T sum = T(0);
    for (int64_t b = 0; b < d.num_boxes; ++b) {
      if (box_ind[b] != image) continue;
      for (int64_t y = 0; y < d.crop_height; ++y) {
        const int64_t r = b * d.crop_height + y;
        const int top = lo[r], bottom = hi[r];
        if (top != py && bottom != py) continue;
        const T y_lerp = lerp[r];
        for (int64_t x = 0; x < d.crop_width; ++x) {
          const int64_t s = rows + b * d.crop_width + x;
          const int left = lo[s], right = hi[s];
          if (left != px && right != px) continue;
          const T x_lerp = lerp[s];
          const T g = grads[(r * d.crop_width + x) * d.depth + c];
          if (nearest) {
            sum = add(sum, g);
            continue;
          }
          sum = add_bilinear_shares(sum, g, top, bottom, y_lerp, left, right, x_lerp, py, px);
        }
      }
    }
    dimage[i] = sum;
  }
}

void crop_and_resize_grad_image(Backend& backend, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const auto& a = args.get_attrs<CropAndResizeAttrs>();
  const CropDims d = crop_dims(args, args.inputs[1].shape()[0]);
  const int32_t* box_ind = data<int32_t>(args.inputs[2]);
  const int64_t samples = d.num_boxes * (d.crop_height + d.crop_width);
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::size_t count = static_cast<std::size_t>(samples);
    Scratch lo(backend, count * sizeof(int)), hi(backend, count * sizeof(int)),
        lerp(backend, count * sizeof(T));
    if (samples > 0) {
      samples_kernel<T><<<blocks_for(samples), kThreads, 0, stream_of(args)>>>(
          data<T>(args.inputs[1]), box_ind, d, a.nearest, lo.as<int>(), hi.as<int>(), lerp.as<T>(),
          samples, cuda_backend(backend).index_fault());
      check_launch(args.op);
    }
    crop_and_resize_grad_image_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(args.inputs[0]), box_ind, lo.as<int>(), hi.as<int>(), lerp.as<T>(), d, a.nearest,
        data<T>(out), n);
    check_launch(args.op);
  });
  record_index_fault<int32_t>(backend, args, box_ind, 0, d.batch);
}

// ---- position_sensitive_crop_regions ----

struct PsDims {
  int64_t batch, height, width, depth;
  int64_t num_boxes, bins_y, bins_x, bin_h, bin_w, channels;  // channels per bin
  bool global_pool;
};

PsDims ps_dims(const KernelArgs& args) {
  const auto& a = args.get_attrs<PositionSensitiveCropAttrs>();
  const int64_t bins = a.bins_y * a.bins_x;
  return {a.image_shape[0],
          a.image_shape[1],
          a.image_shape[2],
          a.image_shape[3],
          args.inputs[1].shape()[1],
          a.bins_y,
          a.bins_x,
          a.crop_height / a.bins_y,
          a.crop_width / a.bins_x,
          a.image_shape[3] / bins,
          a.global_pool};
}

// The API's bin edge lo + (bin + end) (hi - lo) / bins, rounded as the CPU rounds it.
template <class T>
__device__ T bin_edge(T lo, T hi, int64_t bins, int64_t bin, int64_t end) {
  const T step = (hi - lo) / static_cast<T>(bins);
  return add(lo, mul(static_cast<T>(bin + end), step));
}

// Crop sample (y, x) of bin (i, j) of `box`: false outside the image, else the four pixels'
// rows and columns and the weights.
template <class T>
__device__ bool ps_sample(const T* box, const PsDims& d, int64_t i, int64_t j, int64_t y, int64_t x,
                          int* top, int* bottom, T* y_lerp, int* left, int* right, T* x_lerp) {
  return sample_at(bin_edge(box[0], box[2], d.bins_y, i, 0),
                   bin_edge(box[0], box[2], d.bins_y, i, 1), d.height, d.bin_h, y, false, top,
                   bottom, y_lerp) &&
         sample_at(bin_edge(box[1], box[3], d.bins_x, j, 0),
                   bin_edge(box[1], box[3], d.bins_x, j, 1), d.width, d.bin_w, x, false, left,
                   right, x_lerp);
}

// The bilinear sample (y, x) of bin (i, j) of box nb in channel c of its image; 0 outside.
template <class T>
__device__ T ps_value(const T* image, const T* boxes, const PsDims& d, int64_t nb, int64_t i,
                      int64_t j, int64_t y, int64_t x, int64_t c) {
  int top, bottom, left, right;
  T y_lerp, x_lerp;
  if (!ps_sample(boxes + 4 * nb, d, i, j, y, x, &top, &bottom, &y_lerp, &left, &right, &x_lerp)) {
    return T(0);
  }
  const T* img = image + (nb / d.num_boxes) * d.height * d.width * d.depth + c;
  return bilinear(img[(top * d.width + left) * d.depth], img[(top * d.width + right) * d.depth],
                  img[(bottom * d.width + left) * d.depth],
                  img[(bottom * d.width + right) * d.depth], x_lerp, y_lerp);
}

// Without global_pool: one thread per output element [N B, crop_h, crop_w, channels].
template <class T>
__global__ void ps_assemble_kernel(const T* __restrict__ image, const T* __restrict__ boxes,
                                   T* __restrict__ out, PsDims d, int64_t n) {
  const int64_t crop_w = d.bin_w * d.bins_x, crop_h = d.bin_h * d.bins_y;
  TRAINYARD_GRID_LOOP(e, n) {
    const int64_t c = e % d.channels;
    const int64_t ox = (e / d.channels) % crop_w;
    const int64_t oy = (e / (d.channels * crop_w)) % crop_h;
    const int64_t nb = e / (d.channels * crop_w * crop_h);
    const int64_t i = oy / d.bin_h, j = ox / d.bin_w;
    out[e] = ps_value(image, boxes, d, nb, i, j, oy % d.bin_h, ox % d.bin_w,
                      (i * d.bins_x + j) * d.channels + c);
  }
}

// With global_pool: one thread per [N B, channels]: per position the sum over bins (in bin
// order) divided by the bins, summed over positions, divided by the positions, as on the CPU.
template <class T>
__global__ void ps_pool_kernel(const T* __restrict__ image, const T* __restrict__ boxes,
                               T* __restrict__ out, PsDims d, int64_t n) {
  const T bins = static_cast<T>(d.bins_y * d.bins_x);
  TRAINYARD_GRID_LOOP(e, n) {
    const int64_t c = e % d.channels, nb = e / d.channels;
    T total = T(0);
    for (int64_t y = 0; y < d.bin_h; ++y) {
      for (int64_t x = 0; x < d.bin_w; ++x) {
        T sum = T(0);
        for (int64_t i = 0; i < d.bins_y; ++i) {
          for (int64_t j = 0; j < d.bins_x; ++j) {
            sum = add(sum, ps_value(image, boxes, d, nb, i, j, y, x,
                                    (i * d.bins_x + j) * d.channels + c));
          }
        }
        total = add(total, sum / bins);
      }
    }
    out[e] = total / static_cast<T>(d.bin_h * d.bin_w);
  }
}

void position_sensitive_crop_regions(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const PsDims d = ps_dims(args);
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (d.global_pool) {
      ps_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
          data<T>(args.inputs[0]), data<T>(args.inputs[1]), data<T>(out), d, n);
    } else {
      ps_assemble_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
          data<T>(args.inputs[0]), data<T>(args.inputs[1]), data<T>(out), d, n);
    }
    check_launch(args.op);
  });
}

// dimage[n, py, px, c]: channel c belongs to bin k = c / channels; the sum over image n's boxes,
// bin k's crop rows sampling row py and columns sampling column px, of TensorFlow's weighted
// shares of the sample's gradient (with global_pool, the box's output gradient / (bins
// positions)), in the CPU's order.
template <class T>
__global__ void ps_grad_image_kernel(const T* __restrict__ grads, const T* __restrict__ boxes,
                                     PsDims d, T* __restrict__ dimage, int64_t n) {
  const int64_t crop_w = d.bin_w * d.bins_x, crop_h = d.bin_h * d.bins_y;
  const T scale = T(1) / static_cast<T>(d.bins_y * d.bins_x) / static_cast<T>(d.bin_h * d.bin_w);
  TRAINYARD_GRID_LOOP(e, n) {
    const int64_t c = e % d.depth;
    const int px = static_cast<int>((e / d.depth) % d.width);
    const int py = static_cast<int>((e / (d.depth * d.width)) % d.height);
    const int64_t image = e / (d.depth * d.width * d.height);
    const int64_t k = c / d.channels, ch = c % d.channels;
    const int64_t i = k / d.bins_x, j = k % d.bins_x;
    T sum = T(0);
    for (int64_t b = 0; b < d.num_boxes; ++b) {
      const int64_t nb = image * d.num_boxes + b;
      const T* box = boxes + 4 * nb;
      const T y1 = bin_edge(box[0], box[2], d.bins_y, i, 0);
      const T y2 = bin_edge(box[0], box[2], d.bins_y, i, 1);
      const T x1 = bin_edge(box[1], box[3], d.bins_x, j, 0);
      const T x2 = bin_edge(box[1], box[3], d.bins_x, j, 1);
      for (int64_t y = 0; y < d.bin_h; ++y) {
        int top, bottom;
        T y_lerp;
        if (!sample_at(y1, y2, d.height, d.bin_h, y, false, &top, &bottom, &y_lerp) ||
            (top != py && bottom != py)) {
          continue;
        }
        for (int64_t x = 0; x < d.bin_w; ++x) {
          int left, right;
          T x_lerp;
          if (!sample_at(x1, x2, d.width, d.bin_w, x, false, &left, &right, &x_lerp) ||
              (left != px && right != px)) {
            continue;
          }
          const T g = d.global_pool
                          ? mul(grads[nb * d.channels + ch], scale)
                          : grads[((nb * crop_h + i * d.bin_h + y) * crop_w + j * d.bin_w + x) *
                                      d.channels +
                                  ch];
          sum = add_bilinear_shares(sum, g, top, bottom, y_lerp, left, right, x_lerp, py, px);
        }
      }
    }
    dimage[e] = sum;
  }
}

void position_sensitive_crop_regions_grad_image(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const PsDims d = ps_dims(args);
  visit<DTypeSet::kFloat>(args.op, out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ps_grad_image_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(args.inputs[0]), data<T>(args.inputs[1]), d, data<T>(out), n);
    check_launch(args.op);
  });
}

}  // namespace

void add_image_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&crop_and_resize>("crop_and_resize"));
  table.push_back(cuda_kernel<&crop_and_resize_grad_image>("crop_and_resize_grad_image"));
  table.push_back(cuda_kernel<&position_sensitive_crop_regions>("position_sensitive_crop_regions"));
  table.push_back(cuda_kernel<&position_sensitive_crop_regions_grad_image>(
      "position_sensitive_crop_regions_grad_image"));
}

}  // namespace trainyard::cuda
