#include "trainyard/core/checkpoint.h"

#include <fcntl.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <system_error>

#include "checkpoint_state.h"
#include "checkpoint_v1.h"
#include "sstable.h"
#include "trainyard/backend.h"
#include "trainyard/core/names.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/proto/checkpoint_state.pb.h"
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

using checkpoint_internal::from_tf_dtype;
using checkpoint_internal::is_moved_aside;
using checkpoint_internal::kStateFileName;
using checkpoint_internal::read_state;
using checkpoint_internal::resolve_entry;
using checkpoint_internal::tf_dtype_name;

namespace fs = std::filesystem;

// tensor_bundle.cc: kTensorBundleVersion (also the minimum consumer we accept bundles for).
constexpr int kTensorBundleVersion = 1;
constexpr const char* kCheckpointBaseName = "model.ckpt";
constexpr std::size_t kWriteBufferSize = 4 << 20;

std::string errno_text(int error) { return std::strerror(error); }

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  FileDescriptor(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
      path_ = std::move(other.path_);
    }
    return *this;
  }

  int get() const { return fd_; }
  const std::string& path() const { return path_; }

  void write_all(const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot write " + path_ + ": " + errno_text(errno));
      }
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  void sync() {
    if (::fsync(fd_) != 0) throw Error("cannot fsync " + path_ + ": " + errno_text(errno));
  }
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) {
      throw Error("cannot close " + path_ + ": " + errno_text(errno));
    }
  }

 private:
  int fd_ = -1;
  std::string path_;
};

FileDescriptor create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + path + ": " + errno_text(errno));
  return FileDescriptor(fd, path);
}

std::string parent_directory(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Makes renames and unlinks in `directory` durable.
void sync_directory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open directory " + directory + ": " + errno_text(errno));
  FileDescriptor dir(fd, directory);
  dir.sync();
  dir.close();
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw Error("cannot rename " + from + " to " + to + ": " + errno_text(errno));
  }
}

// ".tempstate<16 hex digits>", as TensorFlow's BundleWriter names its temporary files.
std::string temp_suffix() {
  thread_local std::mt19937_64 generator([] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device() ^ static_cast<uint64_t>(::getpid()) ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }());
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(generator()));
  return std::string(".tempstate") + hex;
}

// The whole file, or nullopt when it does not exist. Throws Error on other failures.
// The most of a V1 checkpoint (read whole, unlike V2's data files) or a V2 index file read:
// 8 GiB or half the machine's memory, whichever is less.
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

tf::DataType to_tf_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return tf::DT_FLOAT;
    case DType::kF64:
      return tf::DT_DOUBLE;
    case DType::kBF16:
      return tf::DT_BFLOAT16;
    case DType::kF16:
      return tf::DT_HALF;
    case DType::kI32:
      return tf::DT_INT32;
    case DType::kI64:
      return tf::DT_INT64;
    case DType::kU8:
      return tf::DT_UINT8;
    case DType::kBool:
      return tf::DT_BOOL;
  }
  throw InvalidArgument("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

std::string hex32(uint32_t value) {
  char hex[11];
  std::snprintf(hex, sizeof(hex), "0x%08x", value);
  return hex;
}

// Python's str(float), which TensorFlow's text_format.MessageToString uses for doubles.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const double magnitude = std::fabs(value);
  const bool fixed = magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e16);
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value,
                    fixed ? std::chars_format::fixed : std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  if (fixed && text.find('.') == std::string::npos) text += ".0";
  return text;
}

// A text-format string literal, escaped as protobuf's CEscape does.
std::string quoted(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (byte < 0x20 || byte >= 0x7f) {
          char octal[5];
          std::snprintf(octal, sizeof(octal), "\\%03o", byte);
          out += octal;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string checkpoint_index_path(const std::string& prefix) { return prefix + ".index"; }

std::string checkpoint_data_path(const std::string& prefix, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard, num_shards);
  return prefix + suffix;
}

void write_checkpoint(const std::string& prefix,
                      const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    if (name.empty()) {
      throw InvalidArgument("write_checkpoint " + prefix + ": tensor " + std::to_string(i) +
                            " has an empty name (the empty key holds the bundle header)");
    }
    if (!tensor.defined()) {
      throw InvalidArgument("write_checkpoint " + prefix + ": tensor '" + name + "' is undefined");
    }
    order[i] = i;
  }
  // Bytewise order, as the table requires (std::string compares as unsigned char).
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tensors[a].first < tensors[b].first; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (tensors[order[i]].first == tensors[order[i - 1]].first) {
      throw InvalidArgument("write_checkpoint " + prefix + ": tensor name '" +
                            tensors[order[i]].first + "' is given twice");
    }
  }

  const std::string directory = parent_directory(prefix);
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) throw Error("cannot create directory " + directory + ": " + error.message());

  const std::string data_path = checkpoint_data_path(prefix);
  const std::string index_path = checkpoint_index_path(prefix);
  const std::string suffix = temp_suffix();
  const std::string temp_data = data_path + suffix;
  const std::string temp_index = index_path + suffix;
  try {
    sstable::TableBuilder table;
    tf::BundleHeaderProto header;
    header.set_num_shards(1);
    header.set_endianness(tf::BundleHeaderProto::LITTLE);
    header.mutable_version()->set_producer(kTensorBundleVersion);
    header.mutable_version()->set_min_consumer(0);
    table.add("", header.SerializeAsString());

    FileDescriptor data = create_file(temp_data);
    std::string buffer;
    std::vector<char> staging;
    int64_t offset = 0;
    for (const std::size_t i : order) {
      const auto& [name, tensor] = tensors[i];
      const std::size_t size = tensor.size_bytes();
      staging.resize(size);
      tensor.to_host(staging.data(), size);
      tf::BundleEntryProto entry;
      entry.set_dtype(to_tf_dtype(tensor.dtype()));
      tf::TensorShapeProto* shape = entry.mutable_shape();
      for (const int64_t dim : tensor.shape().dims()) shape->add_dim()->set_size(dim);
      entry.set_shard_id(0);
      entry.set_offset(offset);
      entry.set_size(static_cast<int64_t>(size));
      entry.set_crc32c(mask_crc32c(crc32c(staging.data(), size)));
      table.add(name, entry.SerializeAsString());
      if (buffer.size() + size > kWriteBufferSize) {
        data.write_all(buffer.data(), buffer.size());
        buffer.clear();
      }
      if (size > kWriteBufferSize) {
        data.write_all(staging.data(), size);
      } else {
        buffer.append(staging.data(), size);
      }
      offset += static_cast<int64_t>(size);
    }
    data.write_all(buffer.data(), buffer.size());
    data.sync();
    data.close();

    const std::string index_bytes = table.finish();
    FileDescriptor index = create_file(temp_index);
    index.write_all(index_bytes.data(), index_bytes.size());
    index.sync();
    index.close();

    // Replacing a checkpoint: take its index away first, so that no instant shows the old index
    // over the new data.
    if (::unlink(index_path.c_str()) == 0) {
      sync_directory(directory);
    } else if (errno != ENOENT) {
      throw Error("cannot remove the old " + index_path + ": " + errno_text(errno));
    }
    rename_file(temp_data, data_path);
    sync_directory(directory);
    rename_file(temp_index, index_path);
    sync_directory(directory);
  } catch (...) {
    ::unlink(temp_data.c_str());
    ::unlink(temp_index.c_str());
    throw;
  }
}

struct CheckpointReader::Impl {
  std::string prefix;
  std::vector<CheckpointTensorInfo> infos;
  std::vector<tf::BundleEntryProto> entries;  // parallel to infos
  std::map<std::string, std::size_t, std::less<>> by_name;
  std::vector<FileDescriptor> shards;
  // A V1 checkpoint's tensors, whole, parallel to infos (empty for V2).
  std::vector<std::string> v1_bytes;
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
      const std::optional<std::string> contents =
          read_whole_file(prefix, "V1 checkpoint", max_whole_checkpoint_bytes());
      std::vector<checkpoint_internal::V1Tensor> tensors;
      try {
        tensors =
            checkpoint_internal::read_v1_checkpoint(contents ? *contents : std::string(), prefix);
      } catch (const std::bad_alloc&) {
        throw Error(prefix + ": out of memory assembling the tensors of this V1 checkpoint (" +
                    std::to_string(contents ? contents->size() : 0) + " bytes)");
      }
      for (checkpoint_internal::V1Tensor& t : tensors) {
        impl_->by_name.emplace(t.info.name, impl_->infos.size());
        impl_->infos.push_back(std::move(t.info));
        impl_->v1_bytes.push_back(std::move(t.bytes));
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
  if (!impl_->v1_bytes.empty()) {
    const std::string& bytes = impl_->v1_bytes[i];
    return Tensor::from_host(backend, info.shape, info.dtype, bytes.data(), bytes.size());
  }
  const std::size_t expected =
      static_cast<std::size_t>(info.shape.num_elements()) * dtype_size(info.dtype);
  impl_->check_size(i);
  std::vector<char> bytes(expected);
  impl_->read_bytes(i, 0, bytes.data(), expected);
  impl_->check_crc(i, crc32c(bytes.data(), bytes.size()));
  return Tensor::from_host(backend, info.shape, info.dtype, bytes.data(), bytes.size());
}

void CheckpointReader::copy_to(const std::string& to_prefix) const {
  if (!impl_->v1_bytes.empty()) {
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
  if (!impl_->v1_bytes.empty()) return;
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

namespace checkpoint_internal {

void write_state(const std::string& directory, const std::string& latest,
                 const std::vector<std::string>& paths, const std::vector<double>& timestamps,
                 double last_preserved_timestamp) {
  const fs::path dir(directory);
  // Paths inside the directory are written relative to it, as TF2's CheckpointManager does.
  auto relative = [&](const std::string& prefix) {
    const fs::path path(prefix);
    return path.parent_path() == dir ? path.filename().string() : prefix;
  };
  std::string text = "model_checkpoint_path: " + quoted(relative(latest)) + "\n";
  for (const std::string& prefix : paths) {
    text += "all_model_checkpoint_paths: " + quoted(relative(prefix)) + "\n";
  }
  for (const double timestamp : timestamps) {
    text += "all_model_checkpoint_timestamps: " + python_float(timestamp) + "\n";
  }
  text += "last_preserved_timestamp: " + python_float(last_preserved_timestamp) + "\n";

  const std::string path = (dir / kStateFileName).string();
  const std::string temp = path + ".tmp" + temp_suffix().substr(std::strlen(".tempstate"));
  try {
    FileDescriptor file = create_file(temp);
    file.write_all(text.data(), text.size());
    file.sync();
    file.close();
    rename_file(temp, path);
    sync_directory(directory);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
}

}  // namespace checkpoint_internal

CheckpointManager::CheckpointManager(std::string directory, int max_to_keep,
                                     double keep_checkpoint_every_n_hours, Clock clock)
    : directory_(std::move(directory)),
      max_to_keep_(max_to_keep),
      keep_checkpoint_every_n_hours_(keep_checkpoint_every_n_hours),
      clock_(std::move(clock)) {
  if (directory_.empty()) throw InvalidArgument("CheckpointManager: empty directory");
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error) throw Error("cannot create directory " + directory_ + ": " + error.message());

  // As tf.train.CheckpointManager recovers its state.
  const double now = clock_();
  const std::optional<tf::CheckpointState> state = read_state(directory_);
  if (!state) {
    last_preserved_timestamp_ = now - 1.0;
    return;
  }
  if (std::optional<std::string> latest =
          resolve_entry(directory_, state->model_checkpoint_path())) {
    latest_ = *latest;
  }
  last_preserved_timestamp_ = std::min(state->last_preserved_timestamp(), now);
  const bool have_timestamps =
      state->all_model_checkpoint_timestamps_size() == state->all_model_checkpoint_paths_size();
  for (int i = 0; i < state->all_model_checkpoint_paths_size(); ++i) {
    // Undated checkpoints count as preserved: they are never deleted.
    const double timestamp = std::min(
        have_timestamps ? state->all_model_checkpoint_timestamps(i) : last_preserved_timestamp_,
        now);
    // An entry outside the directory is never managed, so never deleted.
    const std::optional<std::string> prefix =
        resolve_entry(directory_, state->all_model_checkpoint_paths(i));
    if (prefix && timestamp > last_preserved_timestamp_) {
      checkpoints_.push_back(*prefix);
      timestamps_.push_back(timestamp);
    }
  }
}

CheckpointManager::~CheckpointManager() = default;

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  return trainyard::latest_checkpoint(directory_);
}

void CheckpointManager::remove_leftovers() const {
  const std::string base = std::string(kCheckpointBaseName) + "-";
  std::error_code error;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (starts_with(name, std::string(kStateFileName) + ".tmp")) {
      remove_quietly(it->path());
      continue;
    }
    if (!starts_with(name, base) || is_moved_aside(name)) continue;
    if (name.find(".tempstate") != std::string::npos) {
      remove_quietly(it->path());
      continue;
    }
    // A data file whose index never appeared: a save interrupted between the two renames.
    const std::size_t data = name.find(".data-");
    if (data != std::string::npos && name.find(".index") == std::string::npos) {
      const fs::path index = it->path().parent_path() / (name.substr(0, data) + ".index");
      if (!fs::exists(index, error)) remove_quietly(it->path());
      error.clear();
    }
  }
}

void CheckpointManager::write_state() const {
  checkpoint_internal::write_state(directory_, latest_, checkpoints_, timestamps_,
                                   last_preserved_timestamp_);
}

std::string CheckpointManager::save(int64_t step,
                                    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  remove_leftovers();
  const std::string prefix =
      (fs::path(directory_) / (std::string(kCheckpointBaseName) + "-" + std::to_string(step)))
          .string();
  write_checkpoint(prefix, tensors);
  const double timestamp = clock_();
  if (const std::optional<std::string> damage = checkpoint_damage(prefix)) {
    std::vector<std::string> moved;
    try {
      moved = checkpoint_internal::move_aside(prefix);
    } catch (const Error&) {
      // Reported below; the state file does not name it either way.
    }
    throw DataLoss("checkpoint " + prefix + " is damaged right after it was written (" + *damage +
                   "); moved aside to " + (moved.empty() ? "nothing" : join_names(moved)) +
                   "; the state file and every older checkpoint are left as they were");
  }

  const auto existing = std::find(checkpoints_.begin(), checkpoints_.end(), prefix);
  if (existing != checkpoints_.end()) {
    timestamps_.erase(timestamps_.begin() + (existing - checkpoints_.begin()));
    checkpoints_.erase(existing);
  }
  checkpoints_.push_back(prefix);
  timestamps_.push_back(timestamp);
  latest_ = prefix;

  std::vector<std::string> doomed;
  while (max_to_keep_ > 0 && checkpoints_.size() > static_cast<std::size_t>(max_to_keep_)) {
    const std::string oldest = checkpoints_.front();
    const double oldest_timestamp = timestamps_.front();
    checkpoints_.erase(checkpoints_.begin());
    timestamps_.erase(timestamps_.begin());
    if (keep_checkpoint_every_n_hours_ > 0 &&
        oldest_timestamp - keep_checkpoint_every_n_hours_ * 3600.0 >= last_preserved_timestamp_) {
      last_preserved_timestamp_ = oldest_timestamp;
      continue;
    }
    doomed.push_back(oldest);
  }

  write_state();

  // The index goes first, so that a checkpoint half deleted is never complete.
  for (const std::string& old : doomed) {
    remove_quietly(checkpoint_index_path(old));
    const fs::path old_path(old);
    const std::string data_prefix = old_path.filename().string() + ".data-";
    std::error_code error;
    for (fs::directory_iterator
             it(old_path.parent_path().empty() ? fs::path(".") : old_path.parent_path(), error),
         end;
         !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (starts_with(name, data_prefix) && !is_moved_aside(name)) remove_quietly(it->path());
    }
  }
  return prefix;
}

}  // namespace trainyard
