// What checkpoint_test.cc and checkpoint_recovery_test.cc share: an independent decoder and
// encoder of TensorFlow's table format (LevelDB's table_format.txt) to craft and inspect index
// files, and the fixture (a cpu backend and a fresh directory per test).
#ifndef TRAINYARD_TESTS_UNIT_CHECKPOINT_TEST_UTIL_H_
#define TRAINYARD_TESTS_UNIT_CHECKPOINT_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/wire/tensor_bundle.pb.h"

namespace trainyard::checkpoint_test {

namespace fs = std::filesystem;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

inline constexpr char kCrashDirVariable[] = "TRAINYARD_CHECKPOINT_CRASH_DIR";

// ---- The table format, decoded independently of the library (LevelDB's table_format.txt). ----

inline uint32_t bitwise_crc32c(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t reg = 0xFFFFFFFF;
  for (std::size_t i = 0; i < n; ++i) {
    reg ^= p[i];
    for (int bit = 0; bit < 8; ++bit) reg = (reg & 1) ? (reg >> 1) ^ 0x82F63B78 : reg >> 1;
  }
  return ~reg;
}

inline uint32_t reference_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

inline uint64_t le(const std::string& bytes, std::size_t pos, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) {
    value |= uint64_t{static_cast<unsigned char>(bytes.at(pos + i))} << (8 * i);
  }
  return value;
}

inline uint64_t varint(const std::string& bytes, std::size_t* pos) {
  uint64_t value = 0;
  for (int shift = 0;; shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes.at((*pos)++));
    value |= uint64_t{byte & 0x7fu} << shift;
    if (!(byte & 0x80)) return value;
  }
}

inline void put_varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

inline void put_le(std::string* out, uint64_t value, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

struct Handle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

inline Handle handle_at(const std::string& bytes, std::size_t* pos) {
  Handle h;
  h.offset = varint(bytes, pos);
  h.size = varint(bytes, pos);
  return h;
}

struct Entry {
  uint64_t shared = 0;
  std::string key;
  std::string value;
  std::size_t offset = 0;  // within the block
};

struct Block {
  Handle handle;
  std::vector<Entry> entries;
  std::vector<uint32_t> restarts;
};

// Checks the block's trailer (uncompressed, masked CRC over contents + type) and decodes it.
inline Block decode_block(const std::string& file, Handle handle) {
  Block block;
  block.handle = handle;
  const std::string raw = file.substr(handle.offset, handle.size);
  EXPECT_EQ(file.at(handle.offset + handle.size), 0)
      << "block at " << handle.offset << " is compressed";
  const std::string covered = file.substr(handle.offset, handle.size + 1);
  EXPECT_EQ(le(file, handle.offset + handle.size + 1, 4),
            reference_mask(bitwise_crc32c(covered.data(), covered.size())))
      << "trailer CRC of the block at " << handle.offset;
  const auto num_restarts = static_cast<uint32_t>(le(raw, raw.size() - 4, 4));
  const std::size_t limit = raw.size() - 4 * (num_restarts + 1);
  for (uint32_t i = 0; i < num_restarts; ++i) {
    block.restarts.push_back(static_cast<uint32_t>(le(raw, limit + 4 * i, 4)));
  }
  std::size_t pos = 0;
  std::string key;
  while (pos < limit) {
    Entry e;
    e.offset = pos;
    e.shared = varint(raw, &pos);
    const uint64_t non_shared = varint(raw, &pos);
    const uint64_t value_length = varint(raw, &pos);
    key = key.substr(0, e.shared) + raw.substr(pos, non_shared);
    pos += non_shared;
    e.key = key;
    e.value = raw.substr(pos, value_length);
    pos += value_length;
    block.entries.push_back(e);
  }
  EXPECT_EQ(pos, limit);
  return block;
}

struct Table {
  Handle metaindex;
  Handle index;
  Block index_block;
  std::vector<Block> data_blocks;
};

inline Table decode_table(const std::string& file) {
  Table table;
  EXPECT_GE(file.size(), 48u);
  const std::size_t footer = file.size() - 48;
  EXPECT_EQ(le(file, footer + 40, 8), 0xdb4775248b80fb57ull) << "footer magic";
  std::size_t pos = footer;
  table.metaindex = handle_at(file, &pos);
  table.index = handle_at(file, &pos);
  for (; pos < footer + 40; ++pos) EXPECT_EQ(file[pos], 0) << "footer padding at " << pos;
  table.index_block = decode_block(file, table.index);
  for (const Entry& e : table.index_block.entries) {
    std::size_t p = 0;
    table.data_blocks.push_back(decode_block(file, handle_at(e.value, &p)));
  }
  return table;
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A small snappy encoder (literals and 2-byte-offset copies), independent of the library.
inline std::string snappy_compress(const std::string& input) {
  std::string out;
  put_varint(&out, input.size());
  std::string literal;
  auto flush_literal = [&] {
    for (std::size_t start = 0; start < literal.size(); start += 256) {
      const std::size_t n = std::min<std::size_t>(256, literal.size() - start);
      if (n <= 60) {
        out.push_back(static_cast<char>((n - 1) << 2));
      } else {
        out.push_back(static_cast<char>(60 << 2));
        out.push_back(static_cast<char>(n - 1));
      }
      out.append(literal, start, n);
    }
    literal.clear();
  };
  std::size_t i = 0;
  while (i < input.size()) {
    std::size_t best_length = 0;
    std::size_t best_offset = 0;
    for (std::size_t offset = 1; offset <= std::min<std::size_t>(i, 4096); ++offset) {
      std::size_t n = 0;
      while (i + n < input.size() && n < 64 && input[i + n] == input[i + n - offset]) ++n;
      if (n > best_length) {
        best_length = n;
        best_offset = offset;
      }
    }
    if (best_length >= 4) {
      flush_literal();
      out.push_back(static_cast<char>(((best_length - 1) << 2) | 2));
      put_le(&out, best_offset, 2);
      i += best_length;
    } else {
      literal.push_back(input[i++]);
    }
  }
  flush_literal();
  return out;
}

// Rewrites a table with its data blocks snappy-compressed (type 1), as some writers do.
inline std::string compress_data_blocks(const std::string& file) {
  const Table table = decode_table(file);
  std::string out;
  std::string index;
  std::vector<uint32_t> restarts;
  auto add_block = [&](const std::string& contents, char type) {
    Handle h{out.size(), contents.size()};
    out += contents;
    out.push_back(type);
    const std::string covered = out.substr(h.offset, h.size + 1);
    put_le(&out, reference_mask(bitwise_crc32c(covered.data(), covered.size())), 4);
    return h;
  };
  for (std::size_t b = 0; b < table.data_blocks.size(); ++b) {
    const Handle old = table.data_blocks[b].handle;
    const Handle h = add_block(snappy_compress(file.substr(old.offset, old.size)), 1);
    restarts.push_back(static_cast<uint32_t>(index.size()));
    std::string encoded;
    put_varint(&encoded, h.offset);
    put_varint(&encoded, h.size);
    const std::string& key = table.index_block.entries[b].key;
    put_varint(&index, 0);
    put_varint(&index, key.size());
    put_varint(&index, encoded.size());
    index += key + encoded;
  }
  const Handle metaindex = add_block(file.substr(table.metaindex.offset, table.metaindex.size), 0);
  for (uint32_t r : restarts) put_le(&index, r, 4);
  put_le(&index, restarts.size(), 4);
  const Handle index_handle = add_block(index, 0);
  std::string footer;
  put_varint(&footer, metaindex.offset);
  put_varint(&footer, metaindex.size);
  put_varint(&footer, index_handle.offset);
  put_varint(&footer, index_handle.size);
  footer.resize(40, '\0');
  put_le(&footer, 0xdb4775248b80fb57ull, 8);
  return out + footer;
}

// ---- Fixture ----

class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointTest() : registry_(settings()) {
    backend_ = registry_.create<Backend>(ClassKind::kBackend, "cpu");
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("trainyard_checkpoint_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~CheckpointTest() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  static PluginRegistry::Settings settings() {
    PluginRegistry::Settings s;
    s.use_environment = false;
    return s;
  }

  template <class T>
  Tensor make(Shape shape, std::vector<T> values) {
    return Tensor::from_vector(*backend_, std::move(shape), values);
  }
  Tensor make_raw(Shape shape, DType dtype, const std::vector<uint8_t>& bytes) {
    return Tensor::from_host(*backend_, std::move(shape), dtype, bytes.data(), bytes.size());
  }
  static std::vector<uint8_t> bytes_of(const Tensor& t) {
    std::vector<uint8_t> out(t.size_bytes());
    t.to_host(out.data(), out.size());
    return out;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  PluginRegistry registry_;
  std::shared_ptr<Backend> backend_;
  fs::path dir_;
};

// A clock that the test advances.
struct FakeClock {
  double now = 1700000000.0;
  CheckpointManager::Clock clock() {
    return [this] { return now; };
  }
};

// `file` (an uncompressed table) rewritten as one data block whose header entry (the empty key)
// holds `header` instead.
inline std::string with_bundle_header(const std::string& file,
                                      const wire::tf::BundleHeaderProto& header) {
  const Table table = decode_table(file);
  std::string block;
  std::string last_key;
  for (const Block& b : table.data_blocks) {
    for (const Entry& e : b.entries) {
      const std::string value = e.key.empty() ? header.SerializeAsString() : e.value;
      put_varint(&block, 0);
      put_varint(&block, e.key.size());
      put_varint(&block, value.size());
      block += e.key + value;
      last_key = e.key;
    }
  }
  put_le(&block, 0, 4);
  put_le(&block, 1, 4);
  std::string out;
  auto add_block = [&](const std::string& contents) {
    Handle h{out.size(), contents.size()};
    out += contents;
    out.push_back('\0');
    const std::string covered = out.substr(h.offset, h.size + 1);
    put_le(&out, reference_mask(bitwise_crc32c(covered.data(), covered.size())), 4);
    return h;
  };
  const Handle data = add_block(block);
  const Handle metaindex = add_block(file.substr(table.metaindex.offset, table.metaindex.size));
  std::string encoded;
  put_varint(&encoded, data.offset);
  put_varint(&encoded, data.size);
  std::string index;
  put_varint(&index, 0);
  put_varint(&index, last_key.size());
  put_varint(&index, encoded.size());
  index += last_key + encoded;
  put_le(&index, 0, 4);
  put_le(&index, 1, 4);
  const Handle index_handle = add_block(index);
  std::string footer;
  put_varint(&footer, metaindex.offset);
  put_varint(&footer, metaindex.size);
  put_varint(&footer, index_handle.offset);
  put_varint(&footer, index_handle.size);
  footer.resize(40, '\0');
  put_le(&footer, 0xdb4775248b80fb57ull, 8);
  return out + footer;
}

}  // namespace trainyard::checkpoint_test

#endif  // TRAINYARD_TESTS_UNIT_CHECKPOINT_TEST_UTIL_H_
