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

// Parses the table in `contents` (the whole file) and returns every entry in key order. Checks
// the footer magic, every block's CRC and the block structure; decompresses snappy blocks.
// Throws DataLoss naming `file_name` and the byte offset of what is wrong.
std::vector<std::pair<std::string, std::string>> read_table(std::string_view contents,
                                                            const std::string& file_name);

// Decodes a raw snappy stream; throws DataLoss naming `what` when it is malformed.
std::string snappy_uncompress(std::string_view compressed, const std::string& what);

}  // namespace trainyard::sstable

#endif  // TRAINYARD_CORE_SSTABLE_H_
