// Reading checkpoints of both layouts (checkpoint.h: CheckpointReader): V2 bundles here, V1
// tables through checkpoint_v1.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <new>
#include <system_error>

#include "formats/checkpoint_io.h"
#include "formats/checkpoint_state.h"
#include "formats/checkpoint_v1.h"
#include "formats/sstable.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/names.h"
#include "trainyard/proto/tensor_bundle.pb.h"
#include "trainyard/user_file.h"

namespace trainyard {

namespace checkpoint_internal {

std::optional<DType> from_tf_dtype(int dtype) {
  switch (dtype) {
    case tf::DT_FLOAT:
      return DType::kF32;
    case tf::DT_DOUBLE:
      return DType::kF64;
    case tf::DT_BFLOAT16:
      return DType::kBF16;
    case tf::DT_HALF:
      return DType::kF16;
    case tf::DT_INT32:
      return DType::kI32;
    case tf::DT_INT64:
      return DType::kI64;
    case tf::DT_UINT8:
      return DType::kU8;
    case tf::DT_BOOL:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

std::string tf_dtype_name(int dtype) {
  const std::string& name = tf::DataType_Name(static_cast<tf::DataType>(dtype));
  return name.empty() ? "DataType " + std::to_string(dtype) : name;
}

}  // namespace checkpoint_internal

namespace {

using checkpoint_internal::create_file;
using checkpoint_internal::errno_text;
using checkpoint_internal::FileDescriptor;
using checkpoint_internal::from_tf_dtype;
using checkpoint_internal::kTensorBundleVersion;
using checkpoint_internal::kWriteBufferSize;
using checkpoint_internal::tf_dtype_name;

namespace fs = std::filesystem;

// The whole file, or nullopt when it does not exist. Throws Error on other failures.
// The most a V2 index file (read whole) or one read from a V1 checkpoint (a tensor, a block
// holding its slices) holds: 8 GiB or half the machine's memory, whichever is less.
uint64_t max_whole_checkpoint_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t half = pages > 0 && page > 0
                            ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2
                            : uint64_t{8} << 30;
  return std::min<uint64_t>(uint64_t{8} << 30, half);
}

// The whole file (nullopt when there is none), refused when it holds more than `max_bytes`; a
// failed allocation is an error naming the file.
std::optional<std::string> read_whole_file(const std::string& path, std::string_view what,
                                           uint64_t max_bytes) {
  const int fd = checkpoint_internal::open_regular_file(path);
  if (fd < 0) return std::nullopt;
  FileDescriptor file(fd, path);
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw Error("cannot stat " + path + ": " + errno_text(errno));
  const auto size = static_cast<uint64_t>(status.st_size);
  auto too_large = [&](uint64_t bytes) {
    return DataLoss(path + ": " + std::string(what) + " of " + std::to_string(bytes) +
                    " bytes is read whole, and that is more than the limit of " +
                    std::to_string(max_bytes) + " bytes (8 GiB or half this machine's memory)");
  };
  if (size > max_bytes) throw too_large(size);
  std::string contents;
  try {
    contents.reserve(static_cast<std::size_t>(size));
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot read " + path + ": " + errno_text(errno));
      }
      if (n == 0) break;
      contents.append(buffer, static_cast<std::size_t>(n));
      if (contents.size() > max_bytes) throw too_large(contents.size());
    }
  } catch (const std::bad_alloc&) {
    throw Error(path + ": out of memory reading the " + std::string(what) + " of " +
                std::to_string(size) + " bytes");
  }
  return contents;
}

std::string hex32(uint32_t value) {
  char hex[11];
  std::snprintf(hex, sizeof(hex), "0x%08x", value);
  return hex;
}

}  // namespace

struct CheckpointReader::Impl {
  std::string prefix;
  std::vector<CheckpointTensorInfo> infos;
  std::vector<tf::BundleEntryProto> entries;  // parallel to infos
  std::map<std::string, std::size_t, std::less<>> by_name;
  std::vector<FileDescriptor> shards;
  // A V1 checkpoint, read by slice (null for V2).
  std::unique_ptr<checkpoint_internal::V1Checkpoint> v1;
  // V2: the index as read, and the bytes of each data shard that its entries refer to.
  std::string index_bytes;
  std::vector<int64_t> shard_extents;

  std::size_t find(const std::string& name) const {
    const auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    std::vector<std::pair<std::size_t, std::string>> ranked;
    std::vector<std::string> names;
    for (const CheckpointTensorInfo& info : infos) {
      ranked.emplace_back(edit_distance(name, info.name), info.name);
      names.push_back(info.name);
    }
    std::sort(ranked.begin(), ranked.end());
    std::vector<std::string> similar;
    for (std::size_t i = 0; i < ranked.size() && i < 5; ++i) similar.push_back(ranked[i].second);
    std::string message = "tensor '" + name + "' not found in checkpoint " + prefix + " (" +
                          std::to_string(infos.size()) + " tensors)";
    if (similar.empty()) {
      message += "; the checkpoint holds no tensors";
    } else {
      message += ". Most similar names: " + join_names(similar) + ".";
      const std::string nearest = nearest_name(name, names);
      if (!nearest.empty()) message += " Did you mean '" + nearest + "'?";
    }
    throw NotFound(message);
  }

  const FileDescriptor& shard_of(std::size_t i) const {
    return shards[static_cast<std::size_t>(entries[i].shard_id())];
  }

  // Throws DataLoss when the entry's byte size does not match its (supported) dtype and shape,
  // or the shape has more bytes than 64 bits count (its byte size would wrap, to 0 for 2^62
  // floats, and match a forged entry).
  void check_size(std::size_t i) const {
    const CheckpointTensorInfo& info = infos[i];
    uint64_t expected = 0;
    bool fits = false;
    try {
      fits = !__builtin_mul_overflow(static_cast<uint64_t>(info.shape.num_elements()),
                                     uint64_t{dtype_size(info.dtype)}, &expected);
    } catch (const InvalidArgument&) {  // more elements than an int64 holds
    }
    if (!fits) {
      throw DataLoss(shard_of(i).path() + ": tensor '" + info.name + "' (" +
                     dtype_name(info.dtype) + info.shape.to_string() +
                     ") has more bytes than a 64-bit size holds; its entry says " +
                     std::to_string(entries[i].size()));
    }
    if (static_cast<uint64_t>(entries[i].size()) != expected) {
      throw DataLoss(shard_of(i).path() + ": tensor '" + info.name + "' (" +
                     dtype_name(info.dtype) + info.shape.to_string() + ") needs " +
                     std::to_string(expected) + " bytes but its entry says " +
                     std::to_string(entries[i].size()));
    }
  }

  // Bytes [from, from + size) of tensor i's stored bytes.
  void read_bytes(std::size_t i, std::size_t from, char* out, std::size_t size) const {
    const tf::BundleEntryProto& entry = entries[i];
    const FileDescriptor& shard = shard_of(i);
    const int64_t start = entry.offset() + static_cast<int64_t>(from);
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(shard.get(), out + done, size - done,
                                static_cast<off_t>(start + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw DataLoss(shard.path() + ": cannot read tensor '" + infos[i].name +
                       "' at byte offset " + std::to_string(entry.offset()) + ": " +
                       (n < 0 ? errno_text(errno) : std::string("unexpected end of file")));
      }
      done += static_cast<std::size_t>(n);
    }
  }

  // Throws DataLoss when `actual`, the CRC-32C of tensor i's bytes, is not the one stored.
  void check_crc(std::size_t i, uint32_t actual) const {
    const tf::BundleEntryProto& entry = entries[i];
    const uint32_t stored = unmask_crc32c(entry.crc32c());
    if (stored == actual) return;
    throw DataLoss(shard_of(i).path() + ": CRC-32C mismatch for tensor '" + infos[i].name + "' (" +
                   std::to_string(entry.size()) + " bytes at offset " +
                   std::to_string(entry.offset()) + "): stored " + hex32(stored) + ", computed " +
                   hex32(actual) + "; the checkpoint is corrupt");
  }
};

namespace {

// "; D holds: a, b, c" (the first dozen names, sorted), or "; D does not exist".
std::string listing(const fs::path& directory) {
  std::error_code error;
  const fs::path dir = directory.empty() ? fs::path(".") : directory;
  if (!fs::is_directory(dir, error)) return "; " + dir.string() + " does not exist";
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "; " + dir.string() + " is empty";
  std::string text = "; " + dir.string() + " holds: ";
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 12) text += " (and " + std::to_string(names.size() - 12) + " more)";
  return text;
}

// Whether the file ends in a table footer's magic number (a V1 checkpoint is a table), read
// without reading the whole file.
bool has_table_footer(const std::string& path) {
  int fd = -1;
  try {
    fd = open_user_file(path, "checkpoint");
  } catch (const Error&) {
    return false;  // not a file that can be a V1 checkpoint; the caller says what was found
  }
  FileDescriptor file(fd, path);
  struct stat status {};
  if (::fstat(fd, &status) != 0 || status.st_size < static_cast<off_t>(sstable::kFooterSize)) {
    return false;
  }
  unsigned char magic[8];
  if (::pread(fd, magic, sizeof(magic), status.st_size - 8) != 8) return false;
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | magic[i];
  return value == sstable::kTableMagicNumber;
}

// What a checkpoint path may be: a prefix P (V2: P.index and P.data-*; V1: the file P), P.index,
// one of P's data files, or a directory (its newest complete checkpoint).
std::string checkpoint_prefix_of(const std::string& path) {
  std::error_code error;
  if (path.size() > 6 && path.ends_with(".index") && fs::is_regular_file(path, error)) {
    return path.substr(0, path.size() - 6);
  }
  // P.data-NNNNN-of-NNNNN
  const std::size_t data = path.rfind(".data-");
  if (data != std::string::npos && path.size() - data == 20 &&
      path.compare(data + 11, 4, "-of-") == 0 && fs::is_regular_file(path, error)) {
    return path.substr(0, data);
  }
  if (fs::is_directory(path, error)) {
    if (std::optional<std::string> latest = latest_checkpoint(path)) return *latest;
    throw NotFound("no checkpoint in directory " + path +
                   " (no `checkpoint` file naming a complete one)" + listing(path));
  }
  return path;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  const std::string prefix = checkpoint_prefix_of(path);
  impl_->prefix = prefix;
  const std::string index_path = checkpoint_index_path(prefix);
  const std::optional<std::string> index =
      read_whole_file(index_path, "checkpoint index", max_whole_checkpoint_bytes());
  if (!index) {
    std::error_code error;
    if (fs::is_regular_file(prefix, error)) {
      // A V1 checkpoint: the prefix is the one file.
      if (!has_table_footer(prefix)) {
        throw DataLoss(prefix + " is not a checkpoint: " + index_path +
                       " does not exist, and the file itself is not a V1 checkpoint (no "
                       "TensorFlow table footer)");
      }
      const int fd = open_user_file(prefix, "V1 checkpoint");
      impl_->v1 = std::make_unique<checkpoint_internal::V1Checkpoint>(
          sstable::descriptor_table_file(fd, prefix), max_whole_checkpoint_bytes());
      for (const CheckpointTensorInfo& info : impl_->v1->tensors()) {
        impl_->by_name.emplace(info.name, impl_->infos.size());
        impl_->infos.push_back(info);
      }
      return;
    }
    throw NotFound("checkpoint " + prefix + " not found: " + index_path +
                   " does not exist, nor a V1 checkpoint file " + prefix +
                   listing(fs::path(prefix).parent_path()));
  }
  std::vector<std::pair<std::string, std::string>> table = sstable::read_table(*index, index_path);
  if (table.empty() || !table.front().first.empty()) {
    throw DataLoss(index_path + ": no bundle header (the entry under the empty key)");
  }
  tf::BundleHeaderProto header;
  if (!header.ParseFromString(table.front().second)) {
    throw DataLoss(index_path + ": the bundle header does not parse as a BundleHeaderProto");
  }
  if (header.endianness() != tf::BundleHeaderProto::LITTLE) {
    throw Unimplemented(index_path + ": big-endian bundles are not supported");
  }
  const tf::VersionDef& version = header.version();
  if (version.min_consumer() > kTensorBundleVersion) {
    throw Unimplemented(index_path + ": the bundle needs a reader of version " +
                        std::to_string(version.min_consumer()) + " or newer; this one is " +
                        std::to_string(kTensorBundleVersion));
  }
  for (const int bad : version.bad_consumers()) {
    if (bad == kTensorBundleVersion) {
      throw Unimplemented(index_path + ": the bundle disallows reader version " +
                          std::to_string(kTensorBundleVersion));
    }
  }
  if (header.num_shards() <= 0 || header.num_shards() > checkpoint_internal::kMaxCheckpointShards) {
    throw DataLoss(index_path + ": the bundle header claims " +
                   std::to_string(header.num_shards()) + " data shards (at most " +
                   std::to_string(checkpoint_internal::kMaxCheckpointShards) + " are read)");
  }
  {
    // The last data file must exist before a table of num_shards extents is allocated.
    const std::string last =
        checkpoint_data_path(prefix, header.num_shards() - 1, header.num_shards());
    std::error_code error;
    if (!fs::exists(last, error)) {
      throw DataLoss("checkpoint " + prefix + " is incomplete: " + index_path + " claims " +
                     std::to_string(header.num_shards()) + " data shards but " + last +
                     " does not exist");
    }
  }

  std::vector<int64_t> shard_extent(static_cast<std::size_t>(header.num_shards()), 0);
  for (std::size_t i = 1; i < table.size(); ++i) {
    const std::string& name = table[i].first;
    tf::BundleEntryProto entry;
    if (!entry.ParseFromString(table[i].second)) {
      throw DataLoss(index_path + ": the entry of tensor '" + name +
                     "' does not parse as a BundleEntryProto");
    }
    if (entry.shard_id() < 0 || entry.shard_id() >= header.num_shards() || entry.offset() < 0 ||
        entry.size() < 0 || entry.size() > INT64_MAX - entry.offset()) {
      throw DataLoss(
          index_path + ": tensor '" + name + "' lies at shard " + std::to_string(entry.shard_id()) +
          ", bytes [" + std::to_string(entry.offset()) + ", +" + std::to_string(entry.size()) +
          "), outside the bundle's " + std::to_string(header.num_shards()) + " shard(s)");
    }
    int64_t& extent = shard_extent[static_cast<std::size_t>(entry.shard_id())];
    extent = std::max(extent, entry.offset() + entry.size());

    CheckpointTensorInfo info;
    info.name = name;
    info.tf_dtype = entry.dtype();
    const std::optional<DType> dtype = from_tf_dtype(entry.dtype());
    const tf::TensorShapeProto& shape = entry.shape();
    if (!dtype) {
      info.unsupported = tf_dtype_name(entry.dtype()) + " has no Trainyard dtype";
    } else if (entry.slices_size() > 0) {
      info.unsupported = "partitioned variable (" + std::to_string(entry.slices_size()) +
                         " slices) is not supported";
    } else if (shape.unknown_rank()) {
      info.unsupported = "the shape has unknown rank";
    } else if (static_cast<std::size_t>(shape.dim_size()) > kMaxTensorRank) {
      info.unsupported = "rank " + std::to_string(shape.dim_size()) + " exceeds the maximum of " +
                         std::to_string(kMaxTensorRank);
    } else {
      std::vector<int64_t> dims;
      for (const auto& dim : shape.dim()) dims.push_back(dim.size());
      if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) {
        info.unsupported = "the shape has an unknown dimension";
      } else {
        info.dtype = *dtype;
        try {
          info.shape = Shape(dims);
          (void)info.shape.num_elements();  // a count that overflows is refused here, by name
        } catch (const InvalidArgument& e) {
          throw DataLoss(index_path + ": tensor '" + name + "': " + e.what());
        }
      }
    }
    impl_->by_name.emplace(name, impl_->infos.size());
    impl_->infos.push_back(std::move(info));
    impl_->entries.push_back(std::move(entry));
  }

  for (int shard = 0; shard < header.num_shards(); ++shard) {
    const std::string path = checkpoint_data_path(prefix, shard, header.num_shards());
    const int fd = checkpoint_internal::open_regular_file(path);
    if (fd < 0) {
      throw DataLoss("checkpoint " + prefix + " is incomplete: cannot open " + path + " (" +
                     errno_text(ENOENT) + "), which " + index_path + " refers to");
    }
    FileDescriptor file(fd, path);
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
      throw Error("cannot stat " + path + ": " + errno_text(errno));
    }
    const int64_t needed = shard_extent[static_cast<std::size_t>(shard)];
    if (status.st_size < needed) {
      throw DataLoss(path + " is " + std::to_string(status.st_size) + " bytes but " + index_path +
                     " needs " + std::to_string(needed) + " (truncated?)");
    }
    impl_->shards.push_back(std::move(file));
  }
  impl_->index_bytes = *index;
  impl_->shard_extents = std::move(shard_extent);
}

CheckpointReader::~CheckpointReader() = default;

const std::string& CheckpointReader::prefix() const { return impl_->prefix; }

const std::vector<CheckpointTensorInfo>& CheckpointReader::tensors() const { return impl_->infos; }

bool CheckpointReader::contains(const std::string& name) const {
  return impl_->by_name.count(name) > 0;
}

const CheckpointTensorInfo& CheckpointReader::info(const std::string& name) const {
  return impl_->infos[impl_->find(name)];
}

Tensor CheckpointReader::read(const std::string& name, Backend& backend) const {
  const std::size_t i = impl_->find(name);
  const CheckpointTensorInfo& info = impl_->infos[i];
  if (!info.unsupported.empty()) {
    throw Unimplemented("checkpoint " + impl_->prefix + ": cannot read tensor '" + name +
                        "': " + info.unsupported);
  }
  try {
    if (impl_->v1) {
      const std::string bytes = impl_->v1->read(i);
      return Tensor::from_host(backend, info.shape, info.dtype, bytes.data(), bytes.size());
    }
    const std::size_t expected =
        static_cast<std::size_t>(info.shape.num_elements()) * dtype_size(info.dtype);
    impl_->check_size(i);
    std::vector<char> bytes(expected);
    impl_->read_bytes(i, 0, bytes.data(), expected);
    impl_->check_crc(i, crc32c(bytes.data(), bytes.size()));
    return Tensor::from_host(backend, info.shape, info.dtype, bytes.data(), bytes.size());
  } catch (const std::bad_alloc&) {
    throw Error("checkpoint " + impl_->prefix + ": out of memory reading tensor '" + name + "' (" +
                dtype_name(info.dtype) + info.shape.to_string() + ")");
  }
}

void CheckpointReader::copy_to(const std::string& to_prefix) const {
  if (impl_->v1) {
    throw InvalidArgument("checkpoint " + impl_->prefix +
                          " is a V1 checkpoint; only V2 checkpoints (P.index, P.data-*) are "
                          "copied: train from it (fine_tune_checkpoint) to write a V2 one");
  }
  const std::string index_path = checkpoint_index_path(to_prefix);
  FileDescriptor index = create_file(index_path);
  index.write_all(impl_->index_bytes.data(), impl_->index_bytes.size());
  index.sync();
  index.close();
  const int num_shards = static_cast<int>(impl_->shards.size());
  std::vector<char> buffer(std::size_t{1} << 20);
  for (int shard = 0; shard < num_shards; ++shard) {
    const FileDescriptor& from = impl_->shards[static_cast<std::size_t>(shard)];
    FileDescriptor to = create_file(checkpoint_data_path(to_prefix, shard, num_shards));
    const int64_t extent = impl_->shard_extents[static_cast<std::size_t>(shard)];
    for (int64_t offset = 0; offset < extent;) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<int64_t>(extent - offset, buffer.size()));
      const ssize_t n = ::pread(from.get(), buffer.data(), want, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw DataLoss("cannot read " + from.path() + " at byte " + std::to_string(offset) + ": " +
                       (n < 0 ? errno_text(errno) : std::string("unexpected end of file")));
      }
      to.write_all(buffer.data(), static_cast<std::size_t>(n));
      offset += n;
    }
    to.sync();
    to.close();
  }
}

void CheckpointReader::verify() const {
  if (impl_->v1) {
    // Each tensor read (its blocks' CRC-32C checked, its slices assembled) and dropped in turn.
    for (std::size_t i = 0; i < impl_->infos.size(); ++i) {
      if (impl_->infos[i].unsupported.empty()) (void)impl_->v1->read(i);
    }
    return;
  }
  // In file order, so that the data files are read front to back once.
  std::vector<std::size_t> order(impl_->entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const tf::BundleEntryProto& x = impl_->entries[a];
    const tf::BundleEntryProto& y = impl_->entries[b];
    return std::pair(x.shard_id(), x.offset()) < std::pair(y.shard_id(), y.offset());
  });
  std::vector<char> buffer;
  for (const std::size_t i : order) {
    const tf::BundleEntryProto& entry = impl_->entries[i];
    const int dtype = entry.dtype();
    if (entry.slices_size() > 0 || dtype == tf::DT_STRING || dtype == tf::DT_VARIANT ||
        dtype == tf::DT_RESOURCE) {
      continue;
    }
    if (impl_->infos[i].unsupported.empty()) impl_->check_size(i);
    const auto size = static_cast<std::size_t>(entry.size());
    uint32_t crc = 0;
    for (std::size_t done = 0; done < size;) {
      const std::size_t chunk = std::min(size - done, kWriteBufferSize);
      buffer.resize(chunk);
      impl_->read_bytes(i, done, buffer.data(), chunk);
      crc = crc32c(buffer.data(), chunk, crc);
      done += chunk;
    }
    impl_->check_crc(i, crc);
  }
}

}  // namespace trainyard
