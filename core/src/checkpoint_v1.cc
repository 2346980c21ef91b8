// TensorFlow V1 checkpoints (checkpoint_v1.h).
#include "checkpoint_v1.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>

#include "sstable.h"
#include "trainyard/error.h"
#include "trainyard/proto/tensor_bundle.pb.h"

namespace trainyard::checkpoint_internal {
namespace {

// tensor_slice_writer.h: the versions a V1 file records; we read producer 1 and newer.
constexpr int kSavedTensorSlicesVersion = 1;

// One tensor being assembled: its shape, and which elements the slices have written.
struct Assembly {
  std::vector<int64_t> dims;
  std::size_t element_size = 0;
  std::string bytes;
  std::vector<uint8_t> covered;
};

// The values of `data` as little-endian bytes of `dtype`, `count` of them; nullopt when the
// proto holds another number of values.
std::optional<std::string> slice_bytes(const tf::TensorProto& data, DType dtype, int64_t count) {
  const auto n = static_cast<std::size_t>(count);
  const std::size_t size = dtype_size(dtype);
  if (!data.tensor_content().empty()) {
    if (data.tensor_content().size() != n * size) return std::nullopt;
    return data.tensor_content();
  }
  std::string out(n * size, '\0');
  auto fill = [&](const auto& values, auto convert) -> bool {
    if (static_cast<std::size_t>(values.size()) != n) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = convert(values[static_cast<int>(i)]);
      std::memcpy(out.data() + i * size, &v, size);
    }
    return true;
  };
  bool ok = false;
  switch (dtype) {
    case DType::kF32:
      ok = fill(data.float_val(), [](float v) { return v; });
      break;
    case DType::kF64:
      ok = fill(data.double_val(), [](double v) { return v; });
      break;
    case DType::kI32:
      ok = fill(data.int_val(), [](int32_t v) { return v; });
      break;
    case DType::kU8:
      ok = fill(data.int_val(), [](int32_t v) { return static_cast<uint8_t>(v); });
      break;
    case DType::kI64:
      ok = fill(data.int64_val(), [](int64_t v) { return v; });
      break;
    case DType::kBool:
      ok = fill(data.bool_val(), [](bool v) { return static_cast<uint8_t>(v ? 1 : 0); });
      break;
    case DType::kF16:
    case DType::kBF16:
      ok = fill(data.half_val(), [](int32_t v) { return static_cast<uint16_t>(v); });
      break;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::string extent_text(const tf::TensorSliceProto& slice) {
  std::string text = "[";
  for (int d = 0; d < slice.extent_size(); ++d) {
    const auto& e = slice.extent(d);
    text += (d ? ", " : "") + std::to_string(e.start()) + ":" +
            (e.has_length_case() == tf::TensorSliceProto::Extent::kLength
                 ? std::to_string(e.start() + e.length())
                 : std::string("end"));
  }
  return text + "]";
}

// Copies one slice's row-major values into the whole tensor.
void place(Assembly& a, const tf::TensorSliceProto& slice, const std::string& values,
           const std::string& where) {
  const std::size_t rank = a.dims.size();
  std::vector<int64_t> start(rank, 0), length(a.dims);
  for (std::size_t d = 0; d < rank && d < static_cast<std::size_t>(slice.extent_size()); ++d) {
    const auto& e = slice.extent(static_cast<int>(d));
    start[d] = e.start();
    if (e.has_length_case() == tf::TensorSliceProto::Extent::kLength) length[d] = e.length();
  }
  int64_t count = 1;
  for (std::size_t d = 0; d < rank; ++d) count *= length[d];
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset = offset * a.dims[d] + start[d] + index[d];
    const auto o = static_cast<std::size_t>(offset);
    if (a.covered[o] != 0) throw DataLoss(where + ": its slices overlap");
    a.covered[o] = 1;
    std::memcpy(a.bytes.data() + o * a.element_size,
                values.data() + static_cast<std::size_t>(i) * a.element_size, a.element_size);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < length[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

std::vector<V1Tensor> read_v1_checkpoint(std::string_view contents, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> table = sstable::read_table(contents, path);
  tf::SavedTensorSlices head;
  if (table.empty() || !table.front().first.empty() ||
      !head.ParseFromString(table.front().second) || !head.has_meta()) {
    throw DataLoss(path + ": not a TensorFlow V1 checkpoint (no metadata under the empty key)");
  }
  if (head.meta().versions().min_consumer() > kSavedTensorSlicesVersion) {
    throw Unimplemented(path + ": the checkpoint needs a reader of version " +
                        std::to_string(head.meta().versions().min_consumer()) + " or newer");
  }
  std::map<std::string, V1Tensor> tensors;
  std::map<std::string, Assembly> assemblies;
  int64_t total_elements = 0;  // every element needs at least one byte of the file
  for (const tf::SavedSliceMeta& meta : head.meta().tensor()) {
    const std::string where = path + ": tensor '" + meta.name() + "'";
    if (meta.name().empty() || tensors.count(meta.name()) != 0) {
      throw DataLoss(path + ": the metadata names tensor '" + meta.name() + "' " +
                     (meta.name().empty() ? "without a name" : "twice"));
    }
    V1Tensor& t = tensors[meta.name()];
    t.info.name = meta.name();
    t.info.tf_dtype = meta.type();
    const std::optional<DType> dtype = from_tf_dtype(meta.type());
    std::vector<int64_t> dims;
    for (const auto& dim : meta.shape().dim()) dims.push_back(dim.size());
    if (!dtype) {
      t.info.unsupported = tf_dtype_name(meta.type()) + " has no Trainyard dtype";
      continue;
    }
    if (meta.shape().unknown_rank() || dims.size() > kMaxTensorRank ||
        std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
      throw DataLoss(where + " has an unusable shape (rank " + std::to_string(dims.size()) + ")");
    }
    const auto file_bytes = static_cast<int64_t>(contents.size());
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
    t.info.dtype = *dtype;
    t.info.shape = Shape(dims);
    Assembly& a = assemblies[meta.name()];
    a.dims = dims;
    a.element_size = dtype_size(*dtype);
    a.bytes.assign(static_cast<std::size_t>(elements) * a.element_size, '\0');
    a.covered.assign(static_cast<std::size_t>(elements), 0);
  }

  for (std::size_t i = 1; i < table.size(); ++i) {
    tf::SavedTensorSlices entry;
    if (!entry.ParseFromString(table[i].second) || !entry.has_data()) {
      throw DataLoss(path + ": entry " + std::to_string(i) + " is not a saved slice");
    }
    const tf::SavedSlice& slice = entry.data();
    const auto t = tensors.find(slice.name());
    if (t == tensors.end()) {
      throw DataLoss(path + ": a slice of tensor '" + slice.name() +
                     "', which the metadata does not list");
    }
    if (!t->second.info.unsupported.empty()) continue;
    Assembly& a = assemblies.at(slice.name());
    const std::string where =
        path + ": tensor '" + slice.name() + "' slice " + extent_text(slice.slice());
    if (slice.slice().extent_size() > static_cast<int>(a.dims.size())) {
      throw DataLoss(where + " has more dimensions than the tensor " +
                     t->second.info.shape.to_string());
    }
    int64_t count = 1;
    for (std::size_t d = 0; d < a.dims.size(); ++d) {
      int64_t start = 0, length = a.dims[d];
      if (d < static_cast<std::size_t>(slice.slice().extent_size())) {
        const auto& e = slice.slice().extent(static_cast<int>(d));
        start = e.start();
        if (e.has_length_case() == tf::TensorSliceProto::Extent::kLength) length = e.length();
      }
      if (start < 0 || length < 0 || start > a.dims[d] || length > a.dims[d] - start) {
        throw DataLoss(where + " lies outside the tensor " + t->second.info.shape.to_string());
      }
      count *= length;
    }
    const std::optional<std::string> values =
        slice_bytes(slice.data(), t->second.info.dtype, count);
    if (!values) {
      throw DataLoss(where + " does not hold " + std::to_string(count) + " values of " +
                     dtype_name(t->second.info.dtype));
    }
    place(a, slice.slice(), *values, where);
  }

  std::vector<V1Tensor> out;
  for (auto& [name, tensor] : tensors) {
    if (tensor.info.unsupported.empty()) {
      Assembly& a = assemblies.at(name);
      if (std::find(a.covered.begin(), a.covered.end(), uint8_t{0}) != a.covered.end()) {
        throw DataLoss(path + ": tensor '" + name + "' " + tensor.info.shape.to_string() +
                       " is not covered by its saved slices");
      }
      tensor.bytes = std::move(a.bytes);
    }
    out.push_back(std::move(tensor));
  }
  return out;
}

}  // namespace trainyard::checkpoint_internal
