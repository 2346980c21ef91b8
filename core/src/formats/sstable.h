// TensorFlow "tables" (tensorflow/core/lib/io/table_format.txt): LevelDB's SSTable format
// without filter blocks, as used by checkpoint .index files (V2) and V1 checkpoints.
//
// A table is a sequence of data blocks, an empty metaindex block, an index block and a 48-byte
// footer (the two BlockHandles, zero-padded to 40 bytes, then the fixed64 magic
// 0xdb4775248b80fb57). Every block is followed by a 5-byte trailer: a compression byte
// (0 = none, 1 = snappy) and the masked CRC-32C of the block and that byte. Block entries are
// prefix-compressed against the previous key and restart every `restart_interval` entries.
//
// Internal to libtrainyard_core.
#ifndef TRAINYARD_CORE_SSTABLE_H_
#define TRAINYARD_CORE_SSTABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainyard::sstable {

inline constexpr uint64_t kTableMagicNumber = 0xdb4775248b80fb57ull;
inline constexpr std::size_t kFooterSize = 48;
inline constexpr std::size_t kBlockTrailerSize = 5;

// Builds a whole table in memory (checkpoint indexes are small). Keys must be added in strictly
// increasing bytewise order; add() throws InvalidArgument otherwise.
class TableBuilder {
 public:
  // TensorFlow's defaults (table_options.h): 256 KiB blocks, a restart every 16 keys.
  explicit TableBuilder(std::size_t block_size = 256 * 1024, int restart_interval = 16);

  void add(std::string_view key, std::string_view value);
  // Writes the pending data block, the metaindex and index blocks and the footer; returns the
  // file's bytes. The builder cannot be used afterwards.
  std::string finish();

  std::size_t num_entries() const { return num_entries_; }

 private:
  void flush_data_block();

  std::size_t block_size_;
  int restart_interval_;
  std::string file_;
  std::string data_block_;
  std::vector<uint32_t> data_restarts_{0};
  int data_counter_ = 0;
  std::string last_key_;
  std::string index_block_;
  std::vector<uint32_t> index_restarts_{0};
  std::string last_index_key_;
  bool pending_index_entry_ = false;
  std::string pending_handle_;
  std::size_t num_entries_ = 0;
  bool finished_ = false;
};

// Where a block lies: its contents' offset and size in the file (its 5-byte trailer follows).
struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Random access to the bytes of a table file.
class TableFile {
 public:
  virtual ~TableFile() = default;
  // The file's name, which every error about it gives.
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // Reads bytes [offset, offset + count), which the caller has checked lie within size(), into
  // `out`. Throws DataLoss naming the file when they cannot be read.
  virtual void read(uint64_t offset, char* out, std::size_t count) const = 0;
};

// `contents`, which must outlive the result, as the table file `name`.
std::unique_ptr<TableFile> memory_table_file(std::string_view contents, std::string name);
// The regular file open as `fd` (the result owns and closes it), read with pread. Throws Error
// naming `name` when it cannot be stat'ed.
std::unique_ptr<TableFile> descriptor_table_file(int fd, std::string name);

// A table opened for lookups, as TensorFlow's table::Table: the footer and the index block are
// read when it is made, a data block only when read_block asks for it. `file` must outlive it.
class Table {
 public:
  // Throws DataLoss naming the file and the byte offset when the file is too short for a footer,
  // the footer or the index block is corrupt, or the index's keys are not in increasing order.
  explicit Table(const TableFile& file);

  const TableFile& file() const { return file_; }
  // The data blocks in file order, each under its index key: at least every key in the block
  // and less than every key in the next.
  const std::vector<std::pair<std::string, BlockHandle>>& blocks() const { return blocks_; }
  // The one block that can hold `key` (the first whose index key is at least `key`, as
  // LevelDB's Table::InternalGet looks), or nullopt when `key` sorts after every block.
  std::optional<BlockHandle> block_for(std::string_view key) const;
  // The contents of the block at `handle`, its CRC-32C checked, decompressed. Throws DataLoss
  // naming the file and the offset when the block runs past the end of the file or is corrupt,
  // Error naming the file and the block's size when its bytes cannot be allocated.
  std::string read_block(const BlockHandle& handle) const;

 private:
  const TableFile& file_;
  std::vector<std::pair<std::string, BlockHandle>> blocks_;
};

// Calls visit(key, value) for every entry of `block` (read from `handle` of the file
// `file_name`) in order; `value` views `block`, `key` lasts until the next call. Throws DataLoss
// naming the file and the block's offset when the block is malformed.
void for_each_entry(std::string_view block, const BlockHandle& handle, const std::string& file_name,
                    const std::function<void(std::string_view key, std::string_view value)>& visit);

// Parses the table in `contents` (the whole file) and returns every entry in key order. Checks
// the footer magic, every block's CRC and the block structure; decompresses snappy blocks.
// Throws DataLoss naming `file_name` and the byte offset of what is wrong.
std::vector<std::pair<std::string, std::string>> read_table(std::string_view contents,
                                                            const std::string& file_name);

// Decodes a raw snappy stream; throws DataLoss naming `what` when it is malformed.
std::string snappy_uncompress(std::string_view compressed, const std::string& what);

}  // namespace trainyard::sstable

#endif  // TRAINYARD_CORE_SSTABLE_H_
