// Array kernels (ops/array.h) on the CPU: data movement (concat, slice, transpose, pad, gather,
// scatter_add, one_hot, top_k), cast and copy; own loops over contiguous runs.
//
// Data movement copies bytes (dtype_size per element), so it serves every dtype; only the
// constant of pad and the on/off values of one_hot need the dtype itself.
//
// A result does not depend on the number of threads: scatter_add adds repeated indices in
// index order. top_k ranks NaN above every number (as argmax does) and keeps equal values in
// index order.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels_common.h"

namespace trainyard::cpu {
namespace {

// ---- Shared helpers ----

std::byte* bytes_of(const Tensor& t) { return data<std::byte>(t); }

// ---- Scalars of any dtype as bytes (pad value, one_hot on/off) ----

using kernel_utils::encode_scalar;
using kernel_utils::ScalarBytes;

template <class U>
U load_pattern(const ScalarBytes& pattern) {
  U v;
  std::memcpy(&v, pattern.data(), sizeof v);
  return v;
}

// Writes `count` copies of the element `pattern` (esize bytes) to dst.
void fill_elements(std::byte* dst, int64_t count, const ScalarBytes& pattern, std::size_t esize) {
  if (count <= 0) return;
  const auto n = static_cast<std::size_t>(count);
  if (std::all_of(pattern.begin(), pattern.begin() + static_cast<std::ptrdiff_t>(esize),
                  [](std::byte b) { return b == std::byte{0}; })) {
    std::memset(dst, 0, n * esize);
    return;
  }
  switch (esize) {
    case 1:
      std::memset(dst, std::to_integer<int>(pattern[0]), n);
      break;
    case 2:
      std::fill_n(reinterpret_cast<uint16_t*>(dst), n, load_pattern<uint16_t>(pattern));
      break;
    case 4:
      std::fill_n(reinterpret_cast<uint32_t*>(dst), n, load_pattern<uint32_t>(pattern));
      break;
    case 8:
      std::fill_n(reinterpret_cast<uint64_t*>(dst), n, load_pattern<uint64_t>(pattern));
      break;
    default:
      for (std::size_t i = 0; i < n; ++i) std::memcpy(dst + i * esize, pattern.data(), esize);
  }
}

// Calls fn with a zero of the unsigned type of `esize` bytes.
template <class F>
void with_element_type(std::size_t esize, const F& fn) {
  switch (esize) {
    case 1:
      fn(uint8_t{});
      break;
    case 2:
      fn(uint16_t{});
      break;
    case 4:
      fn(uint32_t{});
      break;
    default:
      fn(uint64_t{});
      break;
  }
}

// Copies rows of run_bytes to consecutive places of dst; row r starts at src + offset, with
// the odometer (byte strides) at r.
template <int64_t kBytes>
void copy_rows_fixed(std::byte* dst, const std::byte* src, Odometer od, int64_t begin,
                     int64_t end) {
  od.seek(begin);
  for (int64_t r = begin; r < end; ++r) {
    std::memcpy(dst + r * kBytes, src + od.offset, kBytes);
    od.next();
  }
}

void copy_rows(std::byte* dst, const std::byte* src, const Odometer& rows, int64_t run_bytes,
               int64_t work) {
  if (run_bytes <= 0) return;
  parallel_ranges(rows.count(), work, [&](int64_t begin, int64_t end) {
    switch (run_bytes) {
      case 1:
        copy_rows_fixed<1>(dst, src, rows, begin, end);
        return;
      case 2:
        copy_rows_fixed<2>(dst, src, rows, begin, end);
        return;
      case 4:
        copy_rows_fixed<4>(dst, src, rows, begin, end);
        return;
      case 8:
        copy_rows_fixed<8>(dst, src, rows, begin, end);
        return;
      case 16:
        copy_rows_fixed<16>(dst, src, rows, begin, end);
        return;
      default:
        break;
    }
    Odometer od = rows;
    od.seek(begin);
    const auto n = static_cast<std::size_t>(run_bytes);
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(dst + r * run_bytes, src + od.offset, n);
      od.next();
    }
  });
}

// ---- Concat, slice, transpose, pad ----

void concat_kernel(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  const int64_t esize = static_cast<int64_t>(dtype_size(out.dtype()));
  const Shape& shape = out.shape();
  if (out.num_elements() == 0) return;
  const int64_t outer = product(shape, 0, axis);
  const int64_t inner_bytes = product(shape, axis + 1, shape.rank()) * esize;
  const int64_t out_width = shape[axis] * inner_bytes;
  const auto k = static_cast<int64_t>(args.inputs.size());
  std::vector<const std::byte*> src(args.inputs.size());
  std::vector<int64_t> width(args.inputs.size());
  std::vector<int64_t> start(args.inputs.size());
  int64_t offset = 0;
  for (std::size_t j = 0; j < args.inputs.size(); ++j) {
    src[j] = bytes_of(args.inputs[j]);
    width[j] = args.inputs[j].shape()[axis] * inner_bytes;
    start[j] = offset;
    offset += width[j];
  }
  std::byte* dst = bytes_of(out);
  parallel_ranges(outer * k, out.num_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / k;
      const auto j = static_cast<std::size_t>(u % k);
      if (width[j] == 0) continue;
      std::memcpy(dst + o * out_width + start[j], src[j] + o * width[j],
                  static_cast<std::size_t>(width[j]));
    }
  });
}

void slice_kernel(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<SliceAttrs>();
  const int64_t esize = static_cast<int64_t>(dtype_size(in.dtype()));
  if (out.num_elements() == 0) return;
  const Shape& shape = in.shape();
  const int rank = static_cast<int>(shape.rank());
  std::array<int64_t, kMaxRank> stride{};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    stride[d] = s;
    s *= shape[d];
  }
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) base += attrs.begin[d] * stride[d];
  // The contiguous run: the innermost partial dim and every full dim inside it.
  int k = rank;
  int64_t run = 1;
  while (k > 0) {
    --k;
    run *= attrs.size[k];
    if (attrs.size[k] != shape[k]) break;
  }
  Odometer rows;
  for (int d = 0; d < k; ++d) rows.add(attrs.size[d], stride[d] * esize);
  copy_rows(bytes_of(out), bytes_of(in) + base * esize, rows, run * esize, out.num_elements());
}

template <class U>
void transpose_tiled(const U* in, U* out, const Odometer& outer, int64_t n_p, int64_t n_l,
                     int64_t out_stride_p, int64_t in_stride_l, int64_t work) {
  constexpr int64_t kTile = 32;
  const int64_t p_blocks = (n_p + kTile - 1) / kTile;
  parallel_ranges(outer.count() * p_blocks, work, [&](int64_t begin, int64_t end) {
    Odometer od = outer;
    for (int64_t u = begin; u < end; ++u) {
      od.seek(u / p_blocks);
      const int64_t i0 = (u % p_blocks) * kTile;
      const int64_t i1 = std::min(n_p, i0 + kTile);
      for (int64_t j0 = 0; j0 < n_l; j0 += kTile) {
        const int64_t j1 = std::min(n_l, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          U* o = out + od.offset2 + i * out_stride_p;
          const U* s = in + od.offset + i;
          for (int64_t j = j0; j < j1; ++j) o[j] = s[j * in_stride_l];
        }
      }
    }
  });
}

void transpose_kernel(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const auto& perm = args.get_attrs<PermAttrs>().perm;
  const auto esize = dtype_size(in.dtype());
  const int64_t total = out.num_elements();
  if (total == 0) return;
  const Shape& shape = in.shape();
  const int rank = static_cast<int>(shape.rank());
  // Drop size-1 dims, then merge output neighbours that are input neighbours too.
  std::array<int, kMaxRank> renumber{};
  std::array<int64_t, kMaxRank> dims{};
  int m = 0;
  for (int d = 0; d < rank; ++d) {
    renumber[d] = shape[d] == 1 ? -1 : m;
    if (shape[d] != 1) dims[m++] = shape[d];
  }
  std::array<int, kMaxRank> first{};  // per output group: its first (renumbered) input dim
  std::array<int, kMaxRank> length{};
  std::array<int64_t, kMaxRank> gsize{};
  int groups = 0;
  for (int i = 0; i < rank; ++i) {
    const int d = renumber[static_cast<std::size_t>(perm[i])];
    if (d < 0) continue;
    if (groups > 0 && d == first[groups - 1] + length[groups - 1]) {
      ++length[groups - 1];
      gsize[groups - 1] *= dims[d];
    } else {
      first[groups] = d;
      length[groups] = 1;
      gsize[groups] = dims[d];
      ++groups;
    }
  }
  const std::byte* src = bytes_of(in);
  std::byte* dst = bytes_of(out);
  if (groups <= 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(total) * esize);
    return;
  }
  // Output group g is input group in_pos[g]; strides of the collapsed input and output.
  std::array<int, kMaxRank> in_pos{};
  for (int g = 0; g < groups; ++g) {
    for (int h = 0; h < groups; ++h) in_pos[g] += first[h] < first[g] ? 1 : 0;
  }
  std::array<int64_t, kMaxRank> in_dims{};
  for (int g = 0; g < groups; ++g) in_dims[in_pos[g]] = gsize[g];
  std::array<int64_t, kMaxRank> in_stride{};
  std::array<int64_t, kMaxRank> out_stride{};
  int64_t s = 1;
  int64_t t = 1;
  for (int g = groups - 1; g >= 0; --g) {
    in_stride[g] = s;
    s *= in_dims[g];
    out_stride[g] = t;
    t *= gsize[g];
  }
  const int last = groups - 1;
  if (in_pos[last] == last) {  // the innermost run stays contiguous
    Odometer rows;
    for (int g = 0; g < last; ++g) {
      rows.add(gsize[g], in_stride[in_pos[g]] * static_cast<int64_t>(esize));
    }
    copy_rows(dst, src, rows, gsize[last] * static_cast<int64_t>(esize), total);
    return;
  }
  int p = 0;  // the output group that is the input's innermost
  while (in_pos[p] != last) ++p;
  Odometer outer;
  for (int g = 0; g < last; ++g) {
    if (g != p) outer.add(gsize[g], in_stride[in_pos[g]], out_stride[g]);
  }
  const int64_t in_stride_l = in_stride[in_pos[last]];
  with_element_type(esize, [&](auto tag) {
    using U = decltype(tag);
    transpose_tiled(data<U>(in), data<U>(out), outer, gsize[p], gsize[last], out_stride[p],
                    in_stride_l, total);
  });
}

void pad_kernel(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<PadAttrs>();
  const auto esize = dtype_size(in.dtype());
  const auto es = static_cast<int64_t>(esize);
  const int64_t total = out.num_elements();
  if (total == 0) return;
  const ScalarBytes value = encode_scalar(in.dtype(), attrs.value);
  std::byte* dst = bytes_of(out);
  if (in.num_elements() == 0) {
    parallel_ranges(total, total, [&](int64_t begin, int64_t end) {
      fill_elements(dst + begin * es, end - begin, value, esize);
    });
    return;
  }
  const std::byte* src = bytes_of(in);
  const Shape& shape = in.shape();
  int n = static_cast<int>(shape.rank());
  if (n == 0) {
    std::memcpy(dst, src, esize);
    return;
  }
  std::array<int64_t, kMaxRank> dim{};
  std::array<int64_t, kMaxRank> before{};
  std::array<int64_t, kMaxRank> after{};
  for (int d = 0; d < n; ++d) {
    dim[d] = shape[d];
    before[d] = attrs.before[d];
    after[d] = attrs.after[d];
  }
  // An unpadded innermost dim joins the dim outside it.
  while (n >= 2 && before[n - 1] == 0 && after[n - 1] == 0) {
    before[n - 2] *= dim[n - 1];
    after[n - 2] *= dim[n - 1];
    dim[n - 2] *= dim[n - 1];
    --n;
  }
  std::array<int64_t, kMaxRank> in_stride{};
  int64_t s = 1;
  for (int d = n - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= dim[d];
  }
  Odometer rows;  // over the output's outer dims; offset: input element offset + shift
  int64_t shift = 0;
  for (int d = 0; d < n - 1; ++d) {
    rows.add(before[d] + dim[d] + after[d], in_stride[d]);
    shift += before[d] * in_stride[d];
  }
  const int64_t lead = before[n - 1];
  const int64_t width = dim[n - 1];
  const int64_t trail = after[n - 1];
  const int64_t row_len = lead + width + trail;
  parallel_ranges(rows.count(), total, [&](int64_t begin, int64_t end) {
    Odometer od = rows;
    od.seek(begin);
    for (int64_t r = begin; r < end; ++r) {
      std::byte* d = dst + r * row_len * es;
      bool inside = true;
      for (int k = 0; k < n - 1; ++k) {
        const int64_t i = od.index[k];
        inside = inside && i >= before[k] && i < before[k] + dim[k];
      }
      if (inside) {
        fill_elements(d, lead, value, esize);
        std::memcpy(d + lead * es, src + (od.offset - shift) * es,
                    static_cast<std::size_t>(width * es));
        fill_elements(d + (lead + width) * es, trail, value, esize);
      } else {
        fill_elements(d, row_len, value, esize);
      }
      od.next();
    }
  });
}

// ---- Gather, scatter_add, one_hot ----

template <class I>
void check_indices(const char* op, const I* index, int64_t count, int64_t axis, int64_t dim,
                   const Shape& shape) {
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] < 0 || index[i] >= dim) {
      throw InvalidArgument(std::string(op) + ": index " + std::to_string(index[i]) +
                            " (position " + std::to_string(i) + " of the indices) is out of " +
                            "range for axis " + std::to_string(axis) + " of dimension " +
                            std::to_string(dim) + " in shape " + shape.to_string() +
                            "; valid indices are 0 to " + std::to_string(dim - 1));
    }
  }
}

template <class I>
void gather_typed(const Tensor& params, const Tensor& indices, const Tensor& out,
                  std::size_t axis) {
  const Shape& shape = params.shape();
  const int64_t outer = product(shape, 0, axis);
  const int64_t dim = shape[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  const int64_t count = indices.num_elements();
  const I* index = data<I>(indices);
  check_indices("gather", index, count, static_cast<int64_t>(axis), dim, shape);
  if (out.num_elements() == 0) return;
  const auto esize = dtype_size(params.dtype());
  if (inner == 1) {
    with_element_type(esize, [&](auto tag) {
      using U = decltype(tag);
      const U* src = data<U>(params);
      U* dst = data<U>(out);
      parallel_ranges(outer, outer * count, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          const U* row = src + o * dim;
          U* d = dst + o * count;
          for (int64_t i = 0; i < count; ++i) d[i] = row[index[i]];
        }
      });
    });
    return;
  }
  const int64_t row_bytes = inner * static_cast<int64_t>(esize);
  const std::byte* src = bytes_of(params);
  std::byte* dst = bytes_of(out);
  parallel_ranges(outer * count, out.num_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / count;
      const int64_t i = u % count;
      std::memcpy(dst + u * row_bytes, src + (o * dim + static_cast<int64_t>(index[i])) * row_bytes,
                  static_cast<std::size_t>(row_bytes));
    }
  });
}

void gather_kernel(Backend&, const KernelArgs& args) {
  const Tensor& params = args.inputs[0];
  const Tensor& indices = args.inputs[1];
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  switch (indices.dtype()) {
    case DType::kI32:
      return gather_typed<int32_t>(params, indices, args.outputs[0], axis);
    case DType::kI64:
      return gather_typed<int64_t>(params, indices, args.outputs[0], axis);
    default:
      unsupported_dtype("gather", indices.dtype());
  }
}

// Each thread owns a range of (outer index, column chunk) pairs and adds the updates in index
// order, so repeated indices sum in a fixed order.
template <class T, class I>
void scatter_add_typed(const Tensor& updates, const Tensor& indices, const Tensor& out,
                       std::size_t axis) {
  const Shape& shape = out.shape();
  const int64_t outer = product(shape, 0, axis);
  const int64_t dim = shape[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  const int64_t count = indices.num_elements();
  const I* index = data<I>(indices);
  check_indices("scatter_add", index, count, static_cast<int64_t>(axis), dim, shape);
  const int64_t total = out.num_elements();
  if (total == 0) return;
  T* y = data<T>(out);
  std::memset(y, 0, static_cast<std::size_t>(total) * sizeof(T));
  if (count == 0 || inner == 0) return;
  const T* u = data<T>(updates);
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_ranges(outer * chunks, updates.num_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t o = w / chunks;
      const int64_t c0 = (w % chunks) * kChunk;
      const int64_t c1 = std::min(inner, c0 + kChunk);
      for (int64_t i = 0; i < count; ++i) {
        T* dst = y + (o * dim + static_cast<int64_t>(index[i])) * inner;
        const T* src = u + (o * count + i) * inner;
        for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
      }
    }
  });
}

template <class T>
void scatter_add_index(const Tensor& updates, const Tensor& indices, const Tensor& out,
                       std::size_t axis) {
  switch (indices.dtype()) {
    case DType::kI32:
      return scatter_add_typed<T, int32_t>(updates, indices, out, axis);
    case DType::kI64:
      return scatter_add_typed<T, int64_t>(updates, indices, out, axis);
    default:
      unsupported_dtype("scatter_add", indices.dtype());
  }
}

void scatter_add_kernel(Backend&, const KernelArgs& args) {
  const Tensor& updates = args.inputs[0];
  const Tensor& indices = args.inputs[1];
  const auto axis = static_cast<std::size_t>(args.get_attrs<ScatterAttrs>().axis);
  switch (updates.dtype()) {
    case DType::kF32:
      return scatter_add_index<float>(updates, indices, args.outputs[0], axis);
    case DType::kF64:
      return scatter_add_index<double>(updates, indices, args.outputs[0], axis);
    case DType::kI32:
      return scatter_add_index<int32_t>(updates, indices, args.outputs[0], axis);
    case DType::kI64:
      return scatter_add_index<int64_t>(updates, indices, args.outputs[0], axis);
    default:
      unsupported_dtype("scatter_add", updates.dtype());
  }
}

template <class I>
void one_hot_typed(const Tensor& indices, const Tensor& out, const OneHotAttrs& attrs) {
  const int64_t depth = attrs.depth;
  const int64_t count = indices.num_elements();
  if (out.num_elements() == 0) return;
  const auto esize = dtype_size(out.dtype());
  const auto es = static_cast<int64_t>(esize);
  const ScalarBytes on = encode_scalar(out.dtype(), attrs.on_value);
  const ScalarBytes off = encode_scalar(out.dtype(), attrs.off_value);
  const I* index = data<I>(indices);
  std::byte* dst = bytes_of(out);
  parallel_ranges(count, out.num_elements(), [&](int64_t begin, int64_t end) {
    fill_elements(dst + begin * depth * es, (end - begin) * depth, off, esize);
    for (int64_t i = begin; i < end; ++i) {
      const auto v = static_cast<int64_t>(index[i]);
      if (v >= 0 && v < depth) std::memcpy(dst + (i * depth + v) * es, on.data(), esize);
    }
  });
}

void one_hot_kernel(Backend&, const KernelArgs& args) {
  const Tensor& indices = args.inputs[0];
  const auto& attrs = args.get_attrs<OneHotAttrs>();
  switch (indices.dtype()) {
    case DType::kI32:
      return one_hot_typed<int32_t>(indices, args.outputs[0], attrs);
    case DType::kI64:
      return one_hot_typed<int64_t>(indices, args.outputs[0], attrs);
    default:
      unsupported_dtype("one_hot", indices.dtype());
  }
}

// ---- TopK ----

template <class T>
void top_k_typed(const Tensor& input, const Tensor& values, const Tensor& indices, int64_t k) {
  const int64_t out_total = values.num_elements();
  if (out_total == 0 || k == 0) return;
  const Shape& shape = input.shape();
  const int64_t n = shape[shape.rank() - 1];
  const int64_t rows = out_total / k;
  const T* x = data<T>(input);
  T* v = data<T>(values);
  int64_t* idx = data<int64_t>(indices);
  constexpr int64_t kSmallK = 64;
  if (k <= kSmallK) {
    // One pass keeping the best k sorted; most elements lose to the k-th and cost one compare.
    parallel_ranges(rows, rows * n, [&](int64_t begin, int64_t end) {
      std::array<T, kSmallK> best;
      std::array<int64_t, kSmallK> where;
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = x + r * n;
        int64_t filled = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T value = xr[i];
          int64_t pos;
          if (filled == k) {
            if (!greater(value, best[k - 1])) continue;
            pos = k - 1;
          } else {
            pos = filled++;
          }
          // Equal values stay behind the earlier (lower) index.
          while (pos > 0 && greater(value, best[pos - 1])) {
            best[pos] = best[pos - 1];
            where[pos] = where[pos - 1];
            --pos;
          }
          best[pos] = value;
          where[pos] = i;
        }
        std::copy_n(best.begin(), k, v + r * k);
        std::copy_n(where.begin(), k, idx + r * k);
      }
    });
    return;
  }
  parallel_ranges(rows, rows * n, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      std::iota(order.begin(), order.end(), int64_t{0});
      // Descending; equal values keep the lower index first (a strict total order).
      auto before = [xr](int64_t a, int64_t b) {
        if (greater(xr[a], xr[b])) return true;
        if (greater(xr[b], xr[a])) return false;
        return a < b;
      };
      if (k < n) {
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      } else {
        std::sort(order.begin(), order.end(), before);
      }
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = order[static_cast<std::size_t>(j)];
        v[r * k + j] = xr[i];
        idx[r * k + j] = i;
      }
    }
  });
}

void top_k_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const int64_t k = args.get_attrs<TopKAttrs>().k;
  const Tensor& values = args.outputs[0];
  const Tensor& indices = args.outputs[1];
  switch (x.dtype()) {
    case DType::kF32:
      return top_k_typed<float>(x, values, indices, k);
    case DType::kF64:
      return top_k_typed<double>(x, values, indices, k);
    case DType::kI32:
      return top_k_typed<int32_t>(x, values, indices, k);
    case DType::kI64:
      return top_k_typed<int64_t>(x, values, indices, k);
    case DType::kU8:
      return top_k_typed<uint8_t>(x, values, indices, k);
    default:
      unsupported_dtype("top_k", x.dtype());
  }
}

// ---- Cast, copy ----

// Element conversion for kCast (not to bool): float -> int truncates toward zero, and a float
// going to u8 wraps modulo 256 as an integer would.
template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, uint8_t> && std::is_floating_point_v<From>) {
    return static_cast<uint8_t>(static_cast<int64_t>(x));
  } else {
    return static_cast<To>(x);
  }
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  const auto chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin,
                std::min(kChunk, bytes - begin));
  }
}

void cast_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& y = args.outputs[0];
  const DType to = args.get_attrs<CastAttrs>().dtype;
  const bool to_bool = to == DType::kBool;
  if (x.dtype() == to && to != DType::kBool) {
    copy_bytes(data<std::byte>(y), data<std::byte>(x), x.size_bytes());
    return;
  }
  visit<DTypeSet::kAll>("cast", x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    visit<DTypeSet::kAll>("cast", to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* in = data<From>(x);
      To* out = data<To>(y);
      const int64_t n = x.num_elements();
      if (to_bool) {
#pragma omp parallel for if (n > kParallelThreshold)
        for (int64_t i = 0; i < n; ++i) out[i] = in[i] != From(0);
      } else {
#pragma omp parallel for if (n > kParallelThreshold)
        for (int64_t i = 0; i < n; ++i) out[i] = convert<To>(in[i]);
      }
    });
  });
}

void copy_kernel(Backend&, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  copy_bytes(data<std::byte>(args.outputs[0]), data<std::byte>(x), x.size_bytes());
}

}  // namespace

void add_array_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&concat_kernel>("concat"));
  table.push_back(cpu_kernel<&slice_kernel>("slice"));
  table.push_back(cpu_kernel<&transpose_kernel>("transpose"));
  table.push_back(cpu_kernel<&pad_kernel>("pad"));
  table.push_back(cpu_kernel<&gather_kernel>("gather"));
  table.push_back(cpu_kernel<&scatter_add_kernel>("scatter_add"));
  table.push_back(cpu_kernel<&one_hot_kernel>("one_hot"));
  table.push_back(cpu_kernel<&top_k_kernel>("top_k"));
  table.push_back(cpu_kernel<&cast_kernel>("cast"));
  table.push_back(cpu_kernel<&copy_kernel>("copy"));
}

}  // namespace trainyard::cpu
