#include "formats/sstable.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"

namespace trainyard::sstable {
namespace {

enum BlockType : uint8_t { kNoCompression = 0, kSnappyCompression = 1 };

void put_fixed32(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

void put_fixed64(std::string* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

void put_varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

uint32_t get_fixed32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return value;
}

uint64_t get_fixed64(const char* p) {
  return uint64_t{get_fixed32(p)} | (uint64_t{get_fixed32(p + 4)} << 32);
}

// Decodes a varint of at most `max_bits` bits from [*pos, end); false when it runs past the
// end or is too long.
bool get_varint(std::string_view bytes, std::size_t* pos, int max_bits, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < max_bits && *pos < bytes.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes[(*pos)++]);
    result |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

void put_handle(std::string* out, const BlockHandle& handle) {
  put_varint(out, handle.offset);
  put_varint(out, handle.size);
}

bool get_handle(std::string_view bytes, std::size_t* pos, BlockHandle* handle) {
  return get_varint(bytes, pos, 64, &handle->offset) && get_varint(bytes, pos, 64, &handle->size);
}

// Appends a block's contents with its restart array (BlockBuilder::Finish).
std::string finish_block(std::string contents, const std::vector<uint32_t>& restarts) {
  for (uint32_t restart : restarts) put_fixed32(&contents, restart);
  put_fixed32(&contents, static_cast<uint32_t>(restarts.size()));
  return contents;
}

// Appends `block` uncompressed with its trailer to `file`; returns its handle.
BlockHandle write_raw_block(std::string* file, std::string_view block) {
  BlockHandle handle{file->size(), block.size()};
  file->append(block);
  const char type = static_cast<char>(kNoCompression);
  uint32_t crc = crc32c(block.data(), block.size());
  crc = crc32c(&type, 1, crc);
  file->push_back(type);
  put_fixed32(file, mask_crc32c(crc));
  return handle;
}

// BytewiseComparator::FindShortestSeparator: a short key k with start <= k < limit.
void shorten_separator(std::string* start, std::string_view limit) {
  const std::size_t min_length = std::min(start->size(), limit.size());
  std::size_t diff = 0;
  while (diff < min_length && (*start)[diff] == limit[diff]) ++diff;
  if (diff >= min_length) return;  // one is a prefix of the other
  const auto byte = static_cast<unsigned char>((*start)[diff]);
  if (byte < 0xff && byte + 1 < static_cast<unsigned char>(limit[diff])) {
    (*start)[diff] = static_cast<char>(byte + 1);
    start->resize(diff + 1);
  }
}

// BytewiseComparator::FindShortSuccessor: a short key k >= key.
void short_successor(std::string* key) {
  for (std::size_t i = 0; i < key->size(); ++i) {
    const auto byte = static_cast<unsigned char>((*key)[i]);
    if (byte != 0xff) {
      (*key)[i] = static_cast<char>(byte + 1);
      key->resize(i + 1);
      return;
    }
  }
}

constexpr uint64_t kSnappyMaxExpansion = 64;

[[noreturn]] void corrupt(const std::string& file_name, const std::string& what, uint64_t offset) {
  throw DataLoss(file_name + ": " + what + " at byte offset " + std::to_string(offset) +
                 " (corrupt or truncated table)");
}

class MemoryTableFile : public TableFile {
 public:
  MemoryTableFile(std::string_view contents, std::string name)
      : contents_(contents), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return contents_.size(); }
  void read(uint64_t offset, char* out, std::size_t count) const override {
    std::memcpy(out, contents_.data() + offset, count);
  }

 private:
  std::string_view contents_;
  std::string name_;
};

class DescriptorTableFile : public TableFile {
 public:
  DescriptorTableFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {
    struct stat status {};
    if (::fstat(fd_, &status) != 0) {
      const int error = errno;
      ::close(fd_);
      throw Error("cannot stat " + name_ + ": " + std::strerror(error));
    }
    size_ = static_cast<uint64_t>(status.st_size);
  }
  ~DescriptorTableFile() override { ::close(fd_); }
  DescriptorTableFile(const DescriptorTableFile&) = delete;
  DescriptorTableFile& operator=(const DescriptorTableFile&) = delete;

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, char* out, std::size_t count) const override {
    for (std::size_t done = 0; done < count;) {
      const ssize_t n = ::pread(fd_, out + done, count - done, static_cast<off_t>(offset + done));
      const int error = errno;
      if (n < 0 && error == EINTR) continue;
      if (n <= 0) {
        throw DataLoss(name_ + ": cannot read " + std::to_string(count) + " bytes at byte offset " +
                       std::to_string(offset) + ": " +
                       (n < 0 ? std::strerror(error) : "unexpected end of file (it shrank?)"));
      }
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
  std::string name_;
  uint64_t size_ = 0;
};

}  // namespace

TableBuilder::TableBuilder(std::size_t block_size, int restart_interval)
    : block_size_(block_size), restart_interval_(std::max(restart_interval, 1)) {}

void TableBuilder::add(std::string_view key, std::string_view value) {
  if (finished_) throw InvalidArgument("TableBuilder::add after finish");
  if (num_entries_ > 0 && key <= std::string_view(last_key_)) {
    throw InvalidArgument("table keys must be added in strictly increasing order: '" +
                          std::string(key) + "' after '" + last_key_ + "'");
  }
  if (pending_index_entry_) {
    shorten_separator(&last_key_, key);
    // The index block restarts at every entry, so its keys are stored whole.
    index_restarts_.push_back(static_cast<uint32_t>(index_block_.size()));
    put_varint(&index_block_, 0);
    put_varint(&index_block_, last_key_.size());
    put_varint(&index_block_, pending_handle_.size());
    index_block_ += last_key_;
    index_block_ += pending_handle_;
    pending_index_entry_ = false;
  }

  std::size_t shared = 0;
  if (data_counter_ < restart_interval_) {
    const std::size_t min_length = std::min(last_key_.size(), key.size());
    while (shared < min_length && last_key_[shared] == key[shared]) ++shared;
  } else {
    data_restarts_.push_back(static_cast<uint32_t>(data_block_.size()));
    data_counter_ = 0;
  }
  if (num_entries_ == 0 || data_block_.empty()) shared = 0;
  put_varint(&data_block_, shared);
  put_varint(&data_block_, key.size() - shared);
  put_varint(&data_block_, value.size());
  data_block_.append(key.substr(shared));
  data_block_.append(value);
  ++data_counter_;
  last_key_.assign(key);
  ++num_entries_;

  const std::size_t estimated_size = data_block_.size() + data_restarts_.size() * 4 + 4;
  if (estimated_size >= block_size_) flush_data_block();
}

void TableBuilder::flush_data_block() {
  if (data_block_.empty()) return;
  const BlockHandle handle =
      write_raw_block(&file_, finish_block(std::move(data_block_), data_restarts_));
  data_block_.clear();
  data_restarts_.assign(1, 0);
  data_counter_ = 0;
  pending_handle_.clear();
  put_handle(&pending_handle_, handle);
  pending_index_entry_ = true;
}

std::string TableBuilder::finish() {
  if (finished_) throw InvalidArgument("TableBuilder::finish called twice");
  finished_ = true;
  flush_data_block();
  const BlockHandle metaindex = write_raw_block(&file_, finish_block({}, {0}));
  if (pending_index_entry_) {
    short_successor(&last_key_);
    index_restarts_.push_back(static_cast<uint32_t>(index_block_.size()));
    put_varint(&index_block_, 0);
    put_varint(&index_block_, last_key_.size());
    put_varint(&index_block_, pending_handle_.size());
    index_block_ += last_key_;
    index_block_ += pending_handle_;
    pending_index_entry_ = false;
  }
  // The first restart point (offset 0) was pushed with the first entry.
  std::vector<uint32_t> restarts(index_restarts_.begin() + 1, index_restarts_.end());
  if (restarts.empty()) restarts.push_back(0);
  const BlockHandle index =
      write_raw_block(&file_, finish_block(std::move(index_block_), restarts));

  std::string footer;
  put_handle(&footer, metaindex);
  put_handle(&footer, index);
  footer.resize(kFooterSize - 8, '\0');
  put_fixed64(&footer, kTableMagicNumber);
  file_ += footer;
  return std::move(file_);
}

std::unique_ptr<TableFile> memory_table_file(std::string_view contents, std::string name) {
  return std::make_unique<MemoryTableFile>(contents, std::move(name));
}

std::unique_ptr<TableFile> descriptor_table_file(int fd, std::string name) {
  return std::make_unique<DescriptorTableFile>(fd, std::move(name));
}

Table::Table(const TableFile& file) : file_(file) {
  const std::string& file_name = file.name();
  const uint64_t size = file.size();
  if (size < kFooterSize) {
    throw DataLoss(file_name + ": " + std::to_string(size) +
                   " bytes, too short for a table (it ends in a 48-byte footer); truncated?");
  }
  const uint64_t footer_offset = size - kFooterSize;
  char footer[kFooterSize];
  file.read(footer_offset, footer, kFooterSize);
  const uint64_t magic = get_fixed64(footer + kFooterSize - 8);
  if (magic != kTableMagicNumber) {
    corrupt(file_name, "bad table magic number (not a TensorFlow table, or truncated)",
            footer_offset + kFooterSize - 8);
  }
  std::size_t pos = 0;
  BlockHandle metaindex;
  BlockHandle index;
  const std::string_view handles(footer, kFooterSize - 8);
  if (!get_handle(handles, &pos, &metaindex) || !get_handle(handles, &pos, &index)) {
    corrupt(file_name, "bad block handle in the footer", footer_offset);
  }
  const std::string index_block = read_block(index);
  for_each_entry(
      index_block, index, file_name, [&](std::string_view key, std::string_view encoded_handle) {
        BlockHandle handle;
        std::size_t handle_pos = 0;
        if (!get_handle(encoded_handle, &handle_pos, &handle)) {
          corrupt(file_name, "bad block handle under index key '" + std::string(key) + "'",
                  index.offset);
        }
        if (!blocks_.empty() && key <= std::string_view(blocks_.back().first)) {
          corrupt(file_name, "index key '" + std::string(key) + "' out of order", index.offset);
        }
        blocks_.emplace_back(std::string(key), handle);
      });
}

std::optional<BlockHandle> Table::block_for(std::string_view key) const {
  const auto it =
      std::lower_bound(blocks_.begin(), blocks_.end(), key,
                       [](const std::pair<std::string, BlockHandle>& block, std::string_view k) {
                         return std::string_view(block.first) < k;
                       });
  if (it == blocks_.end()) return std::nullopt;
  return it->second;
}

std::string Table::read_block(const BlockHandle& handle) const {
  const std::string& file_name = file_.name();
  const uint64_t end_of_blocks = file_.size() - kFooterSize;
  if (handle.offset > end_of_blocks || handle.size > end_of_blocks - handle.offset ||
      kBlockTrailerSize > end_of_blocks - handle.offset - handle.size) {
    corrupt(file_name,
            "block of " + std::to_string(handle.size) + " bytes runs past the end of the " +
                std::to_string(file_.size()) + "-byte file",
            handle.offset);
  }
  auto out_of_memory = [&](uint64_t bytes) {
    return Error(file_name + ": out of memory reading the table block at byte offset " +
                 std::to_string(handle.offset) + " (" + std::to_string(bytes) + " bytes)");
  };
  std::string block;
  try {
    block.resize(static_cast<std::size_t>(handle.size + kBlockTrailerSize));
  } catch (const std::bad_alloc&) {
    throw out_of_memory(handle.size + kBlockTrailerSize);
  }
  file_.read(handle.offset, block.data(), block.size());
  const auto size = static_cast<std::size_t>(handle.size);
  const uint32_t stored = get_fixed32(block.data() + size + 1);
  const uint32_t actual = crc32c(block.data(), size + 1);
  if (unmask_crc32c(stored) != actual) {
    corrupt(file_name, "block checksum mismatch", handle.offset);
  }
  const auto type = static_cast<unsigned char>(block[size]);
  if (type == kNoCompression) {
    block.resize(size);
    return block;
  }
  if (type == kSnappyCompression) {
    try {
      return snappy_uncompress(
          std::string_view(block.data(), size),
          file_name + ": snappy block at byte offset " + std::to_string(handle.offset));
    } catch (const std::bad_alloc&) {
      throw out_of_memory(handle.size);
    }
  }
  corrupt(file_name, "unknown block compression type " + std::to_string(type), handle.offset);
}

void for_each_entry(
    std::string_view block, const BlockHandle& handle, const std::string& file_name,
    const std::function<void(std::string_view key, std::string_view value)>& visit) {
  if (block.size() < 4) corrupt(file_name, "block shorter than its restart count", handle.offset);
  const uint32_t num_restarts = get_fixed32(block.data() + block.size() - 4);
  if (num_restarts == 0 || num_restarts > (block.size() - 4) / 4) {
    corrupt(file_name,
            "block of " + std::to_string(block.size()) + " bytes claims " +
                std::to_string(num_restarts) + " restart points",
            handle.offset);
  }
  const std::size_t limit = block.size() - 4 * (std::size_t{num_restarts} + 1);
  const std::string_view bytes = block.substr(0, limit);
  std::size_t pos = 0;
  std::string key;
  while (pos < limit) {
    const std::size_t entry_start = pos;
    uint64_t shared = 0;
    uint64_t non_shared = 0;
    uint64_t value_length = 0;
    if (!get_varint(bytes, &pos, 35, &shared) || !get_varint(bytes, &pos, 35, &non_shared) ||
        !get_varint(bytes, &pos, 35, &value_length) || shared > key.size() ||
        non_shared > limit - pos || value_length > limit - pos - non_shared) {
      corrupt(file_name, "bad entry at offset " + std::to_string(entry_start) + " of the block",
              handle.offset);
    }
    key.resize(shared);
    key.append(bytes.substr(pos, non_shared));
    pos += non_shared;
    visit(key, bytes.substr(pos, value_length));
    pos += value_length;
  }
}

std::vector<std::pair<std::string, std::string>> read_table(std::string_view contents,
                                                            const std::string& file_name) {
  const std::unique_ptr<TableFile> file = memory_table_file(contents, file_name);
  const Table table(*file);
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [separator, handle] : table.blocks()) {
    const std::size_t first = entries.size();
    for_each_entry(table.read_block(handle), handle, file_name,
                   [&](std::string_view key, std::string_view value) {
                     entries.emplace_back(std::string(key), std::string(value));
                   });
    for (std::size_t i = first; i < entries.size(); ++i) {
      if ((i > 0 && entries[i].first <= entries[i - 1].first) || entries[i].first > separator) {
        corrupt(file_name, "key '" + entries[i].first + "' out of order", handle.offset);
      }
    }
  }
  return entries;
}

std::string snappy_uncompress(std::string_view compressed, const std::string& what) {
  std::size_t pos = 0;
  uint64_t length = 0;
  if (!get_varint(compressed, &pos, 35, &length) || length > (uint64_t{1} << 32)) {
    throw DataLoss(what + ": bad snappy length preamble");
  }
  // No element yields more than 64 bytes per byte it takes (a 3-byte copy yields at most 64),
  // so a preamble claiming more cannot be honest; checked before anything is reserved for it.
  if (length > kSnappyMaxExpansion * (compressed.size() - pos)) {
    throw DataLoss(what + ": snappy length preamble claims " + std::to_string(length) +
                   " bytes, more than the " + std::to_string(compressed.size() - pos) +
                   " compressed bytes after it can hold");
  }
  std::string out;
  out.reserve(length);
  auto fail = [&](const std::string& why) {
    throw DataLoss(what + ": malformed snappy data (" + why + ") at compressed byte " +
                   std::to_string(pos));
  };
  while (pos < compressed.size()) {
    const auto tag = static_cast<unsigned char>(compressed[pos++]);
    const unsigned kind = tag & 3u;
    if (kind == 0) {  // literal
      uint64_t literal = tag >> 2;
      if (literal >= 60) {
        const std::size_t extra = literal - 59;
        if (compressed.size() - pos < extra) fail("literal length runs past the end");
        literal = 0;
        for (std::size_t i = 0; i < extra; ++i) {
          literal |= uint64_t{static_cast<unsigned char>(compressed[pos + i])} << (8 * i);
        }
        pos += extra;
      }
      ++literal;
      if (compressed.size() - pos < literal) fail("literal runs past the end");
      if (out.size() + literal > length) fail("output longer than its preamble");
      out.append(compressed.substr(pos, literal));
      pos += literal;
      continue;
    }
    std::size_t copy_length = 0;
    std::size_t offset = 0;
    if (kind == 1) {
      if (pos >= compressed.size()) fail("copy runs past the end");
      copy_length = 4 + ((tag >> 2) & 7u);
      offset =
          (static_cast<std::size_t>(tag >> 5) << 8) | static_cast<unsigned char>(compressed[pos++]);
    } else {
      const std::size_t bytes = kind == 2 ? 2 : 4;
      if (compressed.size() - pos < bytes) fail("copy runs past the end");
      copy_length = 1 + (tag >> 2);
      for (std::size_t i = 0; i < bytes; ++i) {
        offset |= std::size_t{static_cast<unsigned char>(compressed[pos + i])} << (8 * i);
      }
      pos += bytes;
    }
    if (offset == 0 || offset > out.size()) fail("copy offset outside the output");
    if (out.size() + copy_length > length) fail("output longer than its preamble");
    const std::size_t from = out.size() - offset;
    for (std::size_t i = 0; i < copy_length; ++i) out.push_back(out[from + i]);  // may overlap
  }
  if (out.size() != length) fail("output shorter than its preamble");
  return out;
}

}  // namespace trainyard::sstable
