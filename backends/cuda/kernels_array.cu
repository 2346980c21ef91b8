// The CUDA kernels of the array ops (core/src/ops/array.cc): concat, slice, transpose, pad,
// gather, scatter_add, one_hot and top_k (cast and copy are kernels_math.cu's).
//
// Data movement copies elements as unsigned integers of their size, so it serves every dtype;
// only pad's constant and one_hot's on/off values need the dtype itself. One thread writes
// each output element.
//
// scatter_add and top_k sort with cub::DeviceRadixSort, which is stable: scatter_add adds the
// updates of a repeated index in index order (as the CPU backend does), and top_k keeps equal
// values in index order with NaN above every number. Neither uses atomics, so reruns are
// bitwise equal.
//
// Indices are device data that a kernel cannot check without synchronising: an index outside
// the axis gives zeros in gather and drops the update in scatter_add, is noted in the backend's
// IndexFault record, and the next synchronisation throws the CPU backend's InvalidArgument.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <cstring>
#include <memory>
#include <type_traits>

#include "kernels.cuh"

namespace trainyard::cuda {
namespace {

// ---- Shared helpers ----

// The unsigned integer type of `kBytes` bytes (1, 2, 4 or 8).
template <std::size_t kBytes>
using UnsignedOf = std::conditional_t<
    kBytes == 1, uint8_t,
    std::conditional_t<kBytes == 2, uint16_t, std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

using kernel_utils::visit_bits;

// Calls f(Tag<I>{}) with the C++ type of an index dtype (i32 or i64), or throws Unimplemented.
template <class F>
void visit_index(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kI32:
      return f(Tag<int32_t>{});
    case DType::kI64:
      return f(Tag<int64_t>{});
    default:
      unsupported_dtype(op, dtype);
  }
}

// A scalar attribute as an element's bits in the low bytes (kernel_utils.h, the encoding the CPU
// backend uses too): static_cast to the dtype's unsigned type keeps them.
using kernel_utils::encode_scalar_bits;
using kernel_utils::product;

// Sorts `count` (key, value) pairs stably by the low `bits` bits of the keys, on the kernel's
// stream; the sorted pairs end up in keys.Current() and values.Current().
template <class K, class V>
void radix_sort(Backend& backend, const KernelArgs& args, cub::DoubleBuffer<K>& keys,
                cub::DoubleBuffer<V>& values, int64_t count, int bits) {
  const std::string what = std::string("op ") + args.op + ": cub::DeviceRadixSort::SortPairs";
  std::size_t temp_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, values, count, 0, bits,
                                             stream_of(args)),
             what);
  // Never 0 bytes (a null temporary storage is cub's size query).
  Scratch temp(backend, std::max<std::size_t>(temp_bytes, 1));
  check_cuda(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys, values, count, 0, bits,
                                             stream_of(args)),
             what);
}

// ---- Concat ----

// Up to this many inputs go into one launch (by value, in the kernel's parameters).
constexpr int kConcatBatch = 32;

// A run of consecutive inputs of concat, each seen as [outer, columns] (columns: its extent
// along the axis times the dims inside it). Input j holds the run's columns end[j - 1] (0 for
// the first) to end[j].
template <class U>
struct ConcatBatch {
  const U* src[kConcatBatch];
  int64_t end[kConcatBatch];
  int count;
};

// out[o, begin + c] for the run's columns c in [0, width): the element of the input that holds
// column c, in row o. `n` is outer * width.
template <class U>
__global__ void concat_kernel(ConcatBatch<U> batch, U* __restrict__ out, int64_t out_width,
                              int64_t begin, int64_t width, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t o = i / width;
    const int64_t c = i % width;
    int j = 0;
    while (batch.end[j] <= c) ++j;
    const int64_t first = j == 0 ? 0 : batch.end[j - 1];
    out[o * out_width + begin + c] = batch.src[j][o * (batch.end[j] - first) + (c - first)];
  }
}

void concat(Backend&, const KernelArgs& args) {
  const Tensor& out = args.outputs[0];
  if (out.num_elements() == 0) return;
  const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
  const Shape& shape = out.shape();
  const int64_t outer = product(shape, 0, axis);
  const int64_t inner = product(shape, axis + 1, shape.rank());
  const int64_t out_width = shape[axis] * inner;
  visit_bits(out.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    ConcatBatch<U> batch{};
    int64_t begin = 0;  // the batch's first column in the output
    int64_t width = 0;  // the batch's columns so far
    auto launch = [&] {
      if (batch.count == 0) return;
      const int64_t n = outer * width;
      concat_kernel<U><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(batch, data<U>(out),
                                                                        out_width, begin, width, n);
      check_launch(args.op);
      begin += width;
      width = 0;
      batch.count = 0;
    };
    for (const Tensor& in : args.inputs) {
      const int64_t columns = in.shape()[axis] * inner;
      if (columns == 0) continue;
      width += columns;
      batch.src[batch.count] = data<U>(in);
      batch.end[batch.count] = width;
      if (++batch.count == kConcatBatch) launch();
    }
    launch();
  });
}

// ---- Slice, transpose ----

// Drops dims of size 1 and merges each dim into the one outside it where the two step through
// the input as one (outer stride = inner stride * inner size), so the kernel divides less.
Dims collapse(const Dims& map) {
  Dims c;
  for (int d = 0; d < map.rank; ++d) {
    if (map.size[d] == 1) continue;
    if (c.rank > 0 && c.stride[c.rank - 1] == map.stride[d] * map.size[d]) {
      c.size[c.rank - 1] *= map.size[d];
      c.stride[c.rank - 1] = map.stride[d];
    } else {
      c.size[c.rank] = map.size[d];
      c.stride[c.rank] = map.stride[d];
      ++c.rank;
    }
  }
  return c;
}

// out[i] = in[offset(i)]: output element i's index over the dims map.size, dotted with
// map.stride (the input element stride of each output dim).
template <class U>
__global__ void strided_read_kernel(const U* __restrict__ in, U* __restrict__ out, Dims map,
                                    int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    int64_t rest = i;
    int64_t offset = 0;
    for (int d = map.rank - 1; d >= 0; --d) {
      offset += (rest % map.size[d]) * map.stride[d];
      rest /= map.size[d];
    }
    out[i] = in[offset];
  }
}

// Copies `out` from the input elements `map` reaches from element `base` of `in`.
void strided_read(const KernelArgs& args, const Tensor& in, const Tensor& out, int64_t base,
                  const Dims& map) {
  const int64_t n = out.num_elements();
  visit_bits(in.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    strided_read_kernel<U><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<U>(in) + base, data<U>(out), collapse(map), n);
    check_launch(args.op);
  });
}

void slice(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  if (out.num_elements() == 0) return;
  const auto& attrs = args.get_attrs<SliceAttrs>();
  Dims map = dims_of(in.shape());
  int64_t base = 0;
  for (int d = 0; d < map.rank; ++d) {
    base += attrs.begin[d] * map.stride[d];
    map.size[d] = attrs.size[d];
  }
  strided_read(args, in, out, base, map);
}

void transpose(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  if (out.num_elements() == 0) return;
  const auto& perm = args.get_attrs<PermAttrs>().perm;
  const Dims in_dims = dims_of(in.shape());
  Dims map;
  map.rank = in_dims.rank;
  for (int d = 0; d < map.rank; ++d) {
    map.size[d] = in_dims.size[perm[d]];
    map.stride[d] = in_dims.stride[perm[d]];
  }
  strided_read(args, in, out, 0, map);
}

// ---- Pad ----

struct PadDims {
  int rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t in[kMaxRank] = {};
  int64_t before[kMaxRank] = {};
};

// out[i] = the input element at output index i minus `before` in each dim, or `value` where
// that falls outside the input.
template <class U>
__global__ void pad_kernel(const U* __restrict__ in, U* __restrict__ out, PadDims p, U value,
                           int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    int64_t rest = i;
    int64_t offset = 0;
    int64_t stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t j = rest % p.out[d] - p.before[d];
      rest /= p.out[d];
      inside = inside && j >= 0 && j < p.in[d];
      offset += j * stride;
      stride *= p.in[d];
    }
    out[i] = inside ? in[offset] : value;
  }
}

void pad(Backend&, const KernelArgs& args) {
  const Tensor& in = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const auto& attrs = args.get_attrs<PadAttrs>();
  PadDims p;
  p.rank = static_cast<int>(in.shape().rank());
  for (int d = 0; d < p.rank; ++d) {
    p.out[d] = out.shape()[d];
    p.in[d] = in.shape()[d];
    p.before[d] = attrs.before[d];
  }
  const uint64_t value = encode_scalar_bits(in.dtype(), attrs.value);
  visit_bits(in.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    pad_kernel<U><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(data<U>(in), data<U>(out), p,
                                                                   static_cast<U>(value), n);
    check_launch(args.op);
  });
}

// ---- Gather ----

// out[o, k, c] = params[o, indices[k], c], params seen as [outer, dim, inner]; an index outside
// [0, dim) gives zero bits and is noted in `fault`.
template <class U, class I>
__global__ void gather_kernel(const U* __restrict__ params, const I* __restrict__ indices,
                              U* __restrict__ out, int64_t dim, int64_t count, int64_t inner,
                              int64_t n, IndexFault* fault) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = i % inner;
    const int64_t row = i / inner;  // o * count + k
    const auto j = static_cast<int64_t>(indices[row % count]);
    if (j >= 0 && j < dim) {
      out[i] = params[((row / count) * dim + j) * inner + c];
    } else {
      out[i] = U(0);
      note_bad_index(fault, row % count);
    }
  }
}

void gather(Backend& backend, const KernelArgs& args) {
  const Tensor& params = args.inputs[0];
  const Tensor& indices = args.inputs[1];
  const Tensor& out = args.outputs[0];
  visit_index(args.op, indices.dtype(), [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const int64_t n = out.num_elements();
    if (n == 0) return;
    const auto axis = static_cast<std::size_t>(args.get_attrs<AxisAttrs>().axis);
    const Shape& shape = params.shape();
    const int64_t dim = shape[axis];
    const int64_t inner = product(shape, axis + 1, shape.rank());
    visit_bits(params.dtype(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      gather_kernel<U, I><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
          data<U>(params), data<I>(indices), data<U>(out), dim, indices.num_elements(), inner, n,
          cuda_backend(backend).index_fault());
      check_launch(args.op);
    });
    record_index_fault<I>(backend, args, data<I>(indices), static_cast<int64_t>(axis), dim);
  });
}

// ---- Scatter_add ----

// key[i] = indices[i] where it lies in [0, dim), else dim (sorting after every valid index,
// and noted in `fault`); position[i] = i.
template <class I>
__global__ void index_keys_kernel(const I* __restrict__ indices, int64_t dim,
                                  uint64_t* __restrict__ key, int64_t* __restrict__ position,
                                  int64_t count, IndexFault* fault) {
  TRAINYARD_GRID_LOOP(i, count) {
    const auto v = static_cast<int64_t>(indices[i]);
    const bool valid = v >= 0 && v < dim;
    key[i] = static_cast<uint64_t>(valid ? v : dim);
    position[i] = i;
    if (!valid) note_bad_index(fault, i);
  }
}

// start[j] for j in [0, dim]: the first place in the sorted keys holding j or more (binary
// search), so the positions of index j are the places start[j] to start[j + 1].
__global__ void group_starts_kernel(const uint64_t* __restrict__ sorted, int64_t count,
                                    int64_t* __restrict__ start, int64_t dim) {
  TRAINYARD_GRID_LOOP(j, dim + 1) {
    int64_t lo = 0;
    int64_t hi = count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sorted[mid] < static_cast<uint64_t>(j)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    start[j] = lo;
  }
}

// out[o, j, c] = the sum of updates[o, p, c] over the positions p whose index is j, added in
// increasing p from zero (the CPU backend's order), out seen as [outer, dim, inner].
template <class T>
__global__ void scatter_sum_kernel(const T* __restrict__ updates,
                                   const int64_t* __restrict__ position,
                                   const int64_t* __restrict__ start, T* __restrict__ out,
                                   int64_t dim, int64_t count, int64_t inner, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    const int64_t c = i % inner;
    const int64_t row = i / inner;  // o * dim + j
    const int64_t j = row % dim;
    const T* src = updates + (row / dim) * count * inner + c;
    T sum = T(0);
    for (int64_t s = start[j]; s < start[j + 1]; ++s) sum += src[position[s] * inner];
    out[i] = sum;
  }
}

// The positions of an index list grouped by index, in increasing order within a group:
// position[start[j]] to position[start[j + 1] - 1] hold index j. Indices outside [0, dim) are
// in no group. Costs one stable radix sort of the list over bit_width(dim) key bits.
struct IndexGroups {
  Scratch position_a, position_b;
  Scratch start;
  const int64_t* position = nullptr;

  IndexGroups(Backend& backend, const KernelArgs& args, const Tensor& indices, int64_t axis,
              int64_t dim)
      : position_a(backend, sizeof(int64_t) * static_cast<std::size_t>(indices.num_elements())),
        position_b(backend, sizeof(int64_t) * static_cast<std::size_t>(indices.num_elements())),
        start(backend, sizeof(int64_t) * static_cast<std::size_t>(dim + 1)) {
    const int64_t count = indices.num_elements();
    Scratch key_a(backend, sizeof(uint64_t) * static_cast<std::size_t>(count));
    Scratch key_b(backend, sizeof(uint64_t) * static_cast<std::size_t>(count));
    visit_index(args.op, indices.dtype(), [&](auto tag) {
      using I = typename decltype(tag)::type;
      index_keys_kernel<I><<<blocks_for(count), kThreads, 0, stream_of(args)>>>(
          data<I>(indices), dim, key_a.as<uint64_t>(), position_a.as<int64_t>(), count,
          cuda_backend(backend).index_fault());
      check_launch(args.op);
      record_index_fault<I>(backend, args, data<I>(indices), axis, dim);
    });
    cub::DoubleBuffer<uint64_t> keys(key_a.as<uint64_t>(), key_b.as<uint64_t>());
    cub::DoubleBuffer<int64_t> positions(position_a.as<int64_t>(), position_b.as<int64_t>());
    radix_sort(backend, args, keys, positions, count,
               static_cast<int>(std::bit_width(static_cast<uint64_t>(dim))));
    group_starts_kernel<<<blocks_for(dim + 1), kThreads, 0, stream_of(args)>>>(
        keys.Current(), count, start.as<int64_t>(), dim);
    check_launch(args.op);
    position = positions.Current();
  }
};

void scatter_add(Backend& backend, const KernelArgs& args) {
  const Tensor& updates = args.inputs[0];
  const Tensor& indices = args.inputs[1];
  const Tensor& out = args.outputs[0];
  visit<DTypeSet::kNumeric>(args.op, updates.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = out.num_elements();
    if (n == 0) return;
    const int64_t count = indices.num_elements();
    if (count == 0) {
      check_cuda(cudaMemsetAsync(data<T>(out), 0, static_cast<std::size_t>(n) * sizeof(T),
                                 stream_of(args)),
                 std::string("op ") + args.op + ": cudaMemsetAsync");
      return;
    }
    const auto axis = static_cast<std::size_t>(args.get_attrs<ScatterAttrs>().axis);
    const Shape& shape = out.shape();
    const int64_t dim = shape[axis];
    const int64_t inner = product(shape, axis + 1, shape.rank());
    const IndexGroups groups(backend, args, indices, static_cast<int64_t>(axis), dim);
    scatter_sum_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        data<T>(updates), groups.position, groups.start.as<int64_t>(), data<T>(out), dim, count,
        inner, n);
    check_launch(args.op);
  });
}

// ---- One_hot ----

// out[i, d] = on where indices[i] == d, else off (an index outside [0, depth) gives a row of
// off).
template <class U, class I>
__global__ void one_hot_kernel(const I* __restrict__ indices, U* __restrict__ out, int64_t depth,
                               U on, U off, int64_t n) {
  TRAINYARD_GRID_LOOP(i, n) {
    out[i] = static_cast<int64_t>(indices[i / depth]) == i % depth ? on : off;
  }
}

void one_hot(Backend&, const KernelArgs& args) {
  const Tensor& indices = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const auto& attrs = args.get_attrs<OneHotAttrs>();
  visit_index(args.op, indices.dtype(), [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const int64_t n = out.num_elements();
    if (n == 0) return;
    const uint64_t on = encode_scalar_bits(out.dtype(), attrs.on_value);
    const uint64_t off = encode_scalar_bits(out.dtype(), attrs.off_value);
    visit_bits(out.dtype(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      one_hot_kernel<U, I><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
          data<I>(indices), data<U>(out), attrs.depth, static_cast<U>(on), static_cast<U>(off), n);
      check_launch(args.op);
    });
  });
}

// ---- Top_k ----

// An unsigned key of v whose ascending order is top_k's: descending values, NaN first (above
// every number), and -0 with +0 and every NaN with every other NaN equal (so they stay in index
// order, as the CPU backend's strict weak order leaves them).
template <class T>
__device__ UnsignedOf<sizeof(T)> rank_key(T v) {
  using Key = UnsignedOf<sizeof(T)>;
  constexpr Key kSign = Key(1) << (8 * sizeof(T) - 1);
  Key ascending;
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) return 0;
    if (v == T(0)) v = T(0);
    Key bits;
    memcpy(&bits, &v, sizeof v);
    ascending = (bits & kSign) ? static_cast<Key>(~bits) : static_cast<Key>(bits | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    ascending = static_cast<Key>(static_cast<Key>(v) ^ kSign);
  } else {
    ascending = v;
  }
  return static_cast<Key>(~ascending);
}

// key[i] = rank_key(x[i]); flat[i] = i.
template <class T>
__global__ void rank_keys_kernel(const T* __restrict__ x, UnsignedOf<sizeof(T)>* __restrict__ key,
                                 int64_t* __restrict__ flat, int64_t total) {
  TRAINYARD_GRID_LOOP(i, total) {
    key[i] = rank_key(x[i]);
    flat[i] = i;
  }
}

// row[i] = the row of flat element flat[i], rows being n long.
__global__ void row_keys_kernel(const int64_t* __restrict__ flat, int64_t n,
                                uint64_t* __restrict__ row, int64_t total) {
  TRAINYARD_GRID_LOOP(i, total) row[i] = static_cast<uint64_t>(flat[i] / n);
}

// values[r, j] = x at flat[r * n + j] and indices[r, j] its place in row r, for j < k: the
// first k of row r's elements in top_k's order.
template <class T>
__global__ void top_k_output_kernel(const T* __restrict__ x, const int64_t* __restrict__ flat,
                                    int64_t n, int64_t k, T* __restrict__ values,
                                    int64_t* __restrict__ indices, int64_t total) {
  TRAINYARD_GRID_LOOP(i, total) {
    const int64_t r = i / k;
    const int64_t f = flat[r * n + i % k];
    values[i] = x[f];
    indices[i] = f - r * n;
  }
}

// Sorts every element of x stably by rank_key, then stably by row: each row ends up in top_k's
// order (equal keys keep index order through both sorts). Costs two radix sorts of the whole
// input (the second over bit_width(rows - 1) bits) and 2 * (key + 16) bytes of scratch per
// element, whatever k is.
void top_k(Backend& backend, const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& values = args.outputs[0];
  const Tensor& indices = args.outputs[1];
  const int64_t k = args.get_attrs<TopKAttrs>().k;
  visit<DTypeSet::kAll>(args.op, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Key = UnsignedOf<sizeof(T)>;
    const int64_t out_total = values.num_elements();
    if (out_total == 0) return;
    const int64_t n = x.shape()[x.shape().rank() - 1];
    const int64_t rows = out_total / k;
    const int64_t total = rows * n;
    const cudaStream_t stream = stream_of(args);
    Scratch key_a(backend, sizeof(Key) * static_cast<std::size_t>(total));
    Scratch key_b(backend, sizeof(Key) * static_cast<std::size_t>(total));
    Scratch flat_a(backend, sizeof(int64_t) * static_cast<std::size_t>(total));
    Scratch flat_b(backend, sizeof(int64_t) * static_cast<std::size_t>(total));
    rank_keys_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(data<T>(x), key_a.as<Key>(),
                                                                    flat_a.as<int64_t>(), total);
    check_launch(args.op);
    cub::DoubleBuffer<Key> keys(key_a.as<Key>(), key_b.as<Key>());
    cub::DoubleBuffer<int64_t> flat(flat_a.as<int64_t>(), flat_b.as<int64_t>());
    radix_sort(backend, args, keys, flat, total, static_cast<int>(8 * sizeof(Key)));
    if (rows > 1) {
      Scratch row_a(backend, sizeof(uint64_t) * static_cast<std::size_t>(total));
      Scratch row_b(backend, sizeof(uint64_t) * static_cast<std::size_t>(total));
      row_keys_kernel<<<blocks_for(total), kThreads, 0, stream>>>(flat.Current(), n,
                                                                  row_a.as<uint64_t>(), total);
      check_launch(args.op);
      cub::DoubleBuffer<uint64_t> row_keys(row_a.as<uint64_t>(), row_b.as<uint64_t>());
      radix_sort(backend, args, row_keys, flat, total,
                 static_cast<int>(std::bit_width(static_cast<uint64_t>(rows - 1))));
    }
    top_k_output_kernel<T><<<blocks_for(out_total), kThreads, 0, stream>>>(
        data<T>(x), flat.Current(), n, k, data<T>(values), data<int64_t>(indices), out_total);
    check_launch(args.op);
  });
}

}  // namespace

void add_array_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cuda_kernel<&concat>("concat"));
  table.push_back(cuda_kernel<&slice>("slice"));
  table.push_back(cuda_kernel<&transpose>("transpose"));
  table.push_back(cuda_kernel<&pad>("pad"));
  table.push_back(cuda_kernel<&gather>("gather"));
  table.push_back(cuda_kernel<&scatter_add>("scatter_add"));
  table.push_back(cuda_kernel<&one_hot>("one_hot"));
  table.push_back(cuda_kernel<&top_k>("top_k"));
}

}  // namespace trainyard::cuda
