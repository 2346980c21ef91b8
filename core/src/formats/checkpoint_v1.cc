// TensorFlow V1 checkpoints (checkpoint_v1.h).
#include "formats/checkpoint_v1.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <tuple>

#include "formats/sstable.h"
#include "trainyard/error.h"
#include "trainyard/proto/tensor_bundle.pb.h"

namespace trainyard::checkpoint_internal {
namespace {

// tensor_slice_writer.h: the versions a V1 file records; we read producer 1 and newer.
constexpr int kSavedTensorSlicesVersion = 1;

// OrderedCode (tensorflow/core/lib/strings/ordered_code.h), the three encodings a slice's key
// uses; each sorts bytewise as its values do.

// A length byte, then the value's big-endian bytes without leading zeros.
void put_num_increasing(std::string* out, uint64_t value) {
  char bytes[8];
  int n = 0;
  for (uint64_t v = value; v != 0; v >>= 8) bytes[7 - n++] = static_cast<char>(v & 0xff);
  out->push_back(static_cast<char>(n));
  out->append(bytes + 8 - n, static_cast<std::size_t>(n));
}

// The bytes with 0x00 written 0x00 0xff and 0xff written 0xff 0x00, then the separator 0x00 0x01.
void put_string(std::string* out, std::string_view text) {
  for (const char c : text) {
    if (c == '\0') {
      out->append("\x00\xff", 2);
    } else if (c == '\xff') {
      out->append("\xff\x00", 2);
    } else {
      out->push_back(c);
    }
  }
  out->append("\x00\x01", 2);
}

// n bytes (1 to 10) hold [-2^(7n-1), 2^(7n-1)): the value's two's complement, big-endian, whose
// leading n bits are flipped, so that they read as n copies of the sign bit (1 for >= 0) and
// the bit after them as its opposite.
void put_signed_num_increasing(std::string* out, int64_t value) {
  const auto bits = static_cast<uint64_t>(value);
  const uint64_t magnitude = value < 0 ? ~bits : bits;
  const int length = std::bit_width(magnitude) / 7 + 1;
  unsigned char bytes[10];  // the value sign-extended to 80 bits
  bytes[0] = bytes[1] = value < 0 ? 0xff : 0x00;
  for (int i = 0; i < 8; ++i) bytes[2 + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  unsigned char* begin = bytes + 10 - length;
  const unsigned header = (0xffffu << (16 - length)) & 0xffffu;  // `length` leading ones
  begin[0] = static_cast<unsigned char>(begin[0] ^ (header >> 8));
  if (length > 1) begin[1] = static_cast<unsigned char>(begin[1] ^ (header & 0xffu));
  out->append(reinterpret_cast<const char*>(begin), static_cast<std::size_t>(length));
}

bool has_length(const tf::TensorSliceProto::Extent& e) {
  return e.has_length_case() == tf::TensorSliceProto::Extent::kLength;
}

std::string extent_text(const tf::TensorSliceProto& slice) {
  std::string text = "[";
  for (int d = 0; d < slice.extent_size(); ++d) {
    const auto& e = slice.extent(d);
    text += (d ? ", " : "") + std::to_string(e.start()) + ":" +
            (has_length(e) ? std::to_string(e.start() + e.length()) : std::string("end"));
  }
  return text + "]";
}

bool same_extents(const tf::TensorSliceProto& a, const tf::TensorSliceProto& b) {
  if (a.extent_size() != b.extent_size()) return false;
  for (int d = 0; d < a.extent_size(); ++d) {
    const auto &x = a.extent(d), &y = b.extent(d);
    if (x.start() != y.start() || has_length(x) != has_length(y) ||
        (has_length(x) && x.length() != y.length())) {
      return false;
    }
  }
  return true;
}

// The slice's start and length on each dimension of a tensor of shape `dims` (an extent without
// a length, or none at all, is the whole dimension); nullopt when it lies outside.
std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>> slice_bounds(
    const tf::TensorSliceProto& slice, const std::vector<int64_t>& dims) {
  std::vector<int64_t> start(dims.size(), 0), length(dims);
  for (std::size_t d = 0; d < dims.size() && d < static_cast<std::size_t>(slice.extent_size());
       ++d) {
    const auto& e = slice.extent(static_cast<int>(d));
    start[d] = e.start();
    if (has_length(e)) length[d] = e.length();
    if (start[d] < 0 || length[d] < 0 || start[d] > dims[d] || length[d] > dims[d] - start[d]) {
      return std::nullopt;
    }
  }
  return std::pair(std::move(start), std::move(length));
}

// The `count` values of `data` as little-endian bytes of `dtype`: a view of the proto's own
// storage where it holds them so (tensor_content; float, double, int32 and int64 values),
// otherwise converted into `storage`. nullopt when the proto holds another number of values.
std::optional<std::string_view> slice_values(const tf::TensorProto& data, DType dtype,
                                             int64_t count, std::string& storage) {
  const auto n = static_cast<std::size_t>(count);
  const std::size_t size = dtype_size(dtype);
  if (!data.tensor_content().empty()) {
    if (data.tensor_content().size() != n * size) return std::nullopt;
    return std::string_view(data.tensor_content());
  }
  auto view = [&](const auto& values) -> std::optional<std::string_view> {
    if (static_cast<std::size_t>(values.size()) != n) return std::nullopt;
    if (n == 0) return std::string_view();
    return std::string_view(reinterpret_cast<const char*>(values.data()), n * size);
  };
  auto convert = [&](const auto& values, auto to) -> std::optional<std::string_view> {
    if (static_cast<std::size_t>(values.size()) != n) return std::nullopt;
    storage.assign(n * size, '\0');
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = to(values[static_cast<int>(i)]);
      std::memcpy(storage.data() + i * size, &v, size);
    }
    return std::string_view(storage);
  };
  switch (dtype) {
    case DType::kF32:
      return view(data.float_val());
    case DType::kF64:
      return view(data.double_val());
    case DType::kI32:
      return view(data.int_val());
    case DType::kI64:
      return view(data.int64_val());
    case DType::kU8:
      return convert(data.int_val(), [](int32_t v) { return static_cast<uint8_t>(v); });
    case DType::kBool:
      return convert(data.bool_val(), [](bool v) { return static_cast<uint8_t>(v ? 1 : 0); });
    case DType::kF16:
    case DType::kBF16:
      return convert(data.half_val(), [](int32_t v) { return static_cast<uint16_t>(v); });
  }
  return std::nullopt;
}

// Copies a slice's row-major `values` (at `start`, `length` on each dimension) into `out`, the
// tensor of shape `dims`, a run along the last dimension at a time, marking `covered`. Throws
// DataLoss when it writes an element another slice wrote.
void place(const std::vector<int64_t>& dims, const std::vector<int64_t>& start,
           const std::vector<int64_t>& length, std::size_t element_size, std::string_view values,
           std::string& out, std::vector<bool>& covered, const std::string& where) {
  const std::size_t rank = dims.size();
  int64_t count = 1;
  for (const int64_t l : length) count *= l;
  if (count == 0) return;
  const auto run = static_cast<std::size_t>(rank == 0 ? 1 : length[rank - 1]);
  std::vector<int64_t> index(rank, 0);  // over the leading dimensions; the last stays 0
  for (std::size_t done = 0; done < static_cast<std::size_t>(count); done += run) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset = offset * dims[d] + start[d] + index[d];
    const auto o = static_cast<std::size_t>(offset);
    for (std::size_t k = o; k < o + run; ++k) {
      if (covered[k]) throw DataLoss(where + ": its slices overlap");
      covered[k] = true;
    }
    std::memcpy(out.data() + o * element_size, values.data() + done * element_size,
                run * element_size);
    for (std::size_t d = rank > 0 ? rank - 1 : 0; d-- > 0;) {
      if (++index[d] < length[d]) break;
      index[d] = 0;
    }
  }
}

// `e`'s message with `path`'s prefix replaced by `where` (the path and the tensor).
std::string about_tensor(const Error& e, const std::string& path, const std::string& where) {
  std::string message = e.what();
  const std::string prefix = path + ": ";
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  return where + ": " + message;
}

}  // namespace

std::string encode_tensor_name_slice(std::string_view name, const tf::TensorSliceProto& slice) {
  std::string key;
  put_num_increasing(&key, 0);
  put_string(&key, name);
  put_num_increasing(&key, static_cast<uint64_t>(slice.extent_size()));
  for (const auto& e : slice.extent()) {
    put_signed_num_increasing(&key, e.start());
    put_signed_num_increasing(&key, has_length(e) ? e.length() : -1);
  }
  return key;
}

V1Checkpoint::V1Checkpoint(std::unique_ptr<sstable::TableFile> file, uint64_t max_read_bytes)
    : file_(std::move(file)), max_read_bytes_(max_read_bytes) {
  const std::string& path = file_->name();
  try {
    table_ = std::make_unique<sstable::Table>(*file_);
    // The metadata is the first entry of the first block (the empty key sorts first).
    tf::SavedTensorSlices head;
    bool parsed = false;
    if (!table_->blocks().empty()) {
      const sstable::BlockHandle& first = table_->blocks().front().second;
      if (first.size > max_read_bytes_) {
        throw Error(path + ": the block holding the metadata is " + std::to_string(first.size) +
                    " bytes, more than the limit of " + std::to_string(max_read_bytes_) +
                    " bytes one read holds");
      }
      bool first_entry = true;
      sstable::for_each_entry(table_->read_block(first), first, path,
                              [&](std::string_view key, std::string_view value) {
                                if (first_entry && key.empty()) {
                                  parsed = head.ParseFromArray(value.data(),
                                                               static_cast<int>(value.size()));
                                }
                                first_entry = false;
                              });
    }
    if (!parsed || !head.has_meta()) {
      throw DataLoss(path + ": not a TensorFlow V1 checkpoint (no metadata under the empty key)");
    }
    if (head.meta().versions().min_consumer() > kSavedTensorSlicesVersion) {
      throw Unimplemented(path + ": the checkpoint needs a reader of version " +
                          std::to_string(head.meta().versions().min_consumer()) + " or newer");
    }

    std::map<std::string, std::pair<CheckpointTensorInfo, std::vector<Slice>>> tensors;
    const auto file_bytes = static_cast<int64_t>(std::min<uint64_t>(file_->size(), INT64_MAX));
    int64_t total_elements = 0;  // every element needs at least one byte of the file
    for (const tf::SavedSliceMeta& meta : head.meta().tensor()) {
      const std::string where = path + ": tensor '" + meta.name() + "'";
      if (meta.name().empty() || tensors.count(meta.name()) != 0) {
        throw DataLoss(path + ": the metadata names tensor '" + meta.name() + "' " +
                       (meta.name().empty() ? "without a name" : "twice"));
      }
      auto& [info, slices] = tensors[meta.name()];
      info.name = meta.name();
      info.tf_dtype = meta.type();
      const std::optional<DType> dtype = from_tf_dtype(meta.type());
      std::vector<int64_t> dims;
      for (const auto& dim : meta.shape().dim()) dims.push_back(dim.size());
      if (!dtype) {
        info.unsupported = tf_dtype_name(meta.type()) + " has no Trainyard dtype";
        continue;
      }
      if (meta.shape().unknown_rank() || dims.size() > kMaxTensorRank ||
          std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
        throw DataLoss(where + " has an unusable shape (rank " + std::to_string(dims.size()) + ")");
      }
      int64_t elements = 1;
      for (int64_t d : dims) {
        if (d != 0 && elements > file_bytes / d) elements = file_bytes + 1;
        if (elements <= file_bytes) elements *= d;
      }
      if (elements > file_bytes - total_elements) {
        throw DataLoss(where + " " + Shape(dims).to_string() +
                       " has more elements than the file has bytes left for it");
      }
      total_elements += elements;
      info.dtype = *dtype;
      info.shape = Shape(dims);
      std::set<std::string> keys;
      for (const tf::TensorSliceProto& extents : meta.slice()) {
        const std::string slice_where = where + " slice " + extent_text(extents);
        if (extents.extent_size() > static_cast<int>(dims.size())) {
          throw DataLoss(slice_where + " has more dimensions than the tensor " +
                         info.shape.to_string());
        }
        if (!slice_bounds(extents, dims)) {
          throw DataLoss(slice_where + " lies outside the tensor " + info.shape.to_string());
        }
        Slice slice{extents, encode_tensor_name_slice(meta.name(), extents), {}};
        if (!keys.insert(slice.key).second) {
          throw DataLoss(slice_where + " is listed twice: its slices overlap");
        }
        const std::optional<sstable::BlockHandle> block = table_->block_for(slice.key);
        if (!block) {
          throw DataLoss(slice_where + " is not in the table (its key sorts after every block)");
        }
        slice.block = *block;
        slices.push_back(std::move(slice));
      }
    }
    for (auto& [name, tensor] : tensors) {
      infos_.push_back(std::move(tensor.first));
      slices_.push_back(std::move(tensor.second));
    }
  } catch (const std::bad_alloc&) {
    throw Error(path + ": out of memory reading the index and metadata of this V1 checkpoint (" +
                std::to_string(file_->size()) + " bytes)");
  }
}

V1Checkpoint::~V1Checkpoint() = default;

std::string V1Checkpoint::read(std::size_t i) const {
  const CheckpointTensorInfo& info = infos_.at(i);
  const std::string& path = file_->name();
  const std::string where = path + ": tensor '" + info.name + "'";
  const std::string description = dtype_name(info.dtype) + info.shape.to_string();
  const std::vector<int64_t> dims(info.shape.dims().begin(), info.shape.dims().end());
  const std::size_t element_size = dtype_size(info.dtype);
  // At most the file's size (checked when it was opened).
  const auto elements = static_cast<uint64_t>(info.shape.num_elements());
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, uint64_t{element_size}, &bytes) || bytes > max_read_bytes_) {
    throw Error(where + " " + description + " is " + std::to_string(elements) + " x " +
                std::to_string(element_size) + " bytes, more than the limit of " +
                std::to_string(max_read_bytes_) + " bytes one read holds");
  }
  try {
    // In file order, so that each block is read once.
    std::vector<const Slice*> order;
    for (const Slice& slice : slices_[i]) order.push_back(&slice);
    std::sort(order.begin(), order.end(), [](const Slice* a, const Slice* b) {
      return std::tie(a->block.offset, a->block.size, a->key) <
             std::tie(b->block.offset, b->block.size, b->key);
    });
    std::string out;
    std::vector<bool> covered;
    bool allocated = false;
    auto allocate = [&] {
      if (allocated) return;
      out.assign(static_cast<std::size_t>(bytes), '\0');
      covered.assign(static_cast<std::size_t>(elements), false);
      allocated = true;
    };
    for (std::size_t first = 0; first < order.size();) {
      const sstable::BlockHandle handle = order[first]->block;
      std::size_t end = first;
      while (end < order.size() && order[end]->block.offset == handle.offset &&
             order[end]->block.size == handle.size) {
        ++end;
      }
      if (handle.size > max_read_bytes_) {
        throw Error(where + " slice " + extent_text(order[first]->extents) +
                    " lies in a block of " + std::to_string(handle.size) +
                    " bytes, more than the limit of " + std::to_string(max_read_bytes_) +
                    " bytes one read holds");
      }
      // The slices this block holds, parsed; the block is freed before they are placed.
      std::vector<tf::SavedTensorSlices> saved(end - first);
      std::vector<bool> found(end - first, false);
      {
        std::map<std::string_view, std::size_t> wanted;
        for (std::size_t k = first; k < end; ++k) wanted.emplace(order[k]->key, k - first);
        std::string block;
        try {
          block = table_->read_block(handle);
        } catch (const DataLoss& e) {
          throw DataLoss(about_tensor(e, path, where));
        } catch (const Error& e) {
          throw Error(about_tensor(e, path, where));
        }
        sstable::for_each_entry(
            block, handle, path, [&](std::string_view key, std::string_view value) {
              const auto it = wanted.find(key);
              if (it == wanted.end() || found[it->second]) return;
              found[it->second] = true;
              if (!saved[it->second].ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                saved[it->second].Clear();
              }
            });
      }
      allocate();
      for (std::size_t k = first; k < end; ++k) {
        const Slice& slice = *order[k];
        const std::string slice_where = where + " slice " + extent_text(slice.extents);
        if (!found[k - first]) {
          throw DataLoss(
              slice_where +
              " is not in the table (no entry under its key in the block at byte offset " +
              std::to_string(handle.offset) + ")");
        }
        tf::SavedTensorSlices& entry = saved[k - first];
        if (!entry.has_data() || entry.data().name() != info.name ||
            !same_extents(entry.data().slice(), slice.extents)) {
          throw DataLoss(slice_where + ": the entry under its key is not that saved slice" +
                         (entry.has_data()
                              ? " (it holds tensor '" + entry.data().name() + "' slice " +
                                    extent_text(entry.data().slice()) + ")"
                              : std::string()));
        }
        const auto [start, length] = *slice_bounds(slice.extents, dims);
        int64_t count = 1;
        for (const int64_t l : length) count *= l;
        std::string storage;
        const std::optional<std::string_view> values =
            slice_values(entry.data().data(), info.dtype, count, storage);
        if (!values) {
          throw DataLoss(slice_where + " does not hold " + std::to_string(count) + " values of " +
                         dtype_name(info.dtype));
        }
        place(dims, start, length, element_size, *values, out, covered, where);
        entry = tf::SavedTensorSlices();  // frees its values
      }
      first = end;
    }
    allocate();
    if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
      throw DataLoss(where + " " + info.shape.to_string() + " is not covered by its saved slices");
    }
    return out;
  } catch (const std::bad_alloc&) {
    throw Error(where + " " + description + ": out of memory reading it (" + std::to_string(bytes) +
                " bytes, and the blocks holding its slices)");
  }
}

}  // namespace trainyard::checkpoint_internal
