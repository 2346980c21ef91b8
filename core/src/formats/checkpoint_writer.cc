// Writing V2 checkpoints (checkpoint.h: write_checkpoint, the file names), and the file helpers
// of checkpoint_io.h.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include "formats/checkpoint_io.h"
#include "formats/sstable.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/proto/tensor_bundle.pb.h"

namespace trainyard {

namespace checkpoint_internal {

namespace fs = std::filesystem;

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

}  // namespace checkpoint_internal

namespace {

using checkpoint_internal::create_file;
using checkpoint_internal::errno_text;
using checkpoint_internal::FileDescriptor;
using checkpoint_internal::kTensorBundleVersion;
using checkpoint_internal::kWriteBufferSize;
using checkpoint_internal::parent_directory;
using checkpoint_internal::rename_file;
using checkpoint_internal::sync_directory;
using checkpoint_internal::temp_suffix;

namespace fs = std::filesystem;

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

}  // namespace trainyard
