#include "trainyard/core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "trainyard/core/atomic_file.h"
#include "trainyard/error.h"
#include "trainyard/json.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace {

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

bool dtype_from_safetensors(const std::string& name, DType* out) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64,
                  DType::kU8, DType::kBool}) {
    if (name == safetensors_dtype(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

// A JSON reader for exactly what a safetensors header holds: an object of objects with
// strings, integers and arrays of integers.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<int64_t> offsets;
  };

  void parse(std::vector<std::pair<std::string, Entry>>* entries,
             std::map<std::string, std::string>* metadata) {
    expect('{');
    if (peek() == '}') {
      ++i_;
      return;
    }
    while (true) {
      std::string key = string();
      expect(':');
      if (key == "__metadata__") {
        expect('{');
        if (peek() != '}') {
          while (true) {
            std::string k = string();
            expect(':');
            (*metadata)[k] = string();
            if (peek() == ',') {
              ++i_;
              continue;
            }
            break;
          }
        }
        expect('}');
      } else {
        entries->emplace_back(key, entry(key));
      }
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
  }

 private:
  Entry entry(const std::string& name) {
    Entry e;
    expect('{');
    bool has_dtype = false, has_shape = false, has_offsets = false;
    while (peek() != '}') {
      std::string field = string();
      expect(':');
      if (field == "dtype") {
        e.dtype = string();
        has_dtype = true;
      } else if (field == "shape") {
        e.shape = integers();
        has_shape = true;
      } else if (field == "data_offsets") {
        e.offsets = integers();
        has_offsets = true;
      } else {
        fail("unknown field '" + field + "' of tensor '" + name + "'");
      }
      if (peek() == ',') ++i_;
    }
    ++i_;
    if (!has_dtype || !has_shape || !has_offsets || e.offsets.size() != 2) {
      fail("tensor '" + name + "' needs dtype, shape and two data_offsets");
    }
    return e;
  }
  std::vector<int64_t> integers() {
    std::vector<int64_t> out;
    expect('[');
    while (peek() != ']') {
      skip_space();
      std::size_t start = i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) != 0)) ++i_;
      if (start == i_) fail("expected a non-negative integer at byte " + std::to_string(start));
      int64_t value = 0;
      const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + i_, value);
      if (ec != std::errc() || end != s_.data() + i_) {
        fail("integer " + s_.substr(start, i_ - start) + " at byte " + std::to_string(start) +
             " is larger than 2^63 - 1");
      }
      out.push_back(value);
      if (peek() == ',') ++i_;
    }
    ++i_;
    return out;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) break;
        char c = s_[i_];
        if (c == 'u' && i_ + 4 < s_.size()) {
          unsigned code = 0;
          const char* first = s_.data() + i_ + 1;
          const auto [end, ec] = std::from_chars(first, first + 4, code, 16);
          if (ec != std::errc() || end != first + 4) {
            fail("bad \\u escape '" + s_.substr(i_ - 1, 6) + "' at byte " + std::to_string(i_ - 1));
          }
          out += static_cast<char>(code);
          i_ += 4;
        } else {
          out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
      } else {
        out += s_[i_];
      }
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])) != 0) ++i_;
  }
  char peek() {
    skip_space();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) {
      fail(std::string("expected '") + c + "' at byte " + std::to_string(i_) + " of the header");
    }
    ++i_;
  }
  [[noreturn]] void fail(const std::string& what) {
    throw DataLoss(path_ + ": bad safetensors header: " + what);
  }

  const std::string& s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::ostringstream header;
  header << "{";
  bool first = true;
  if (!metadata.empty()) {
    header << "\"__metadata__\":{";
    bool first_meta = true;
    for (const auto& [k, v] : metadata) {
      header << (first_meta ? "" : ",") << json_quoted(k) << ":" << json_quoted(v);
      first_meta = false;
    }
    header << "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || !names.insert(name).second) {
      throw InvalidArgument("write_safetensors " + path + ": bad or duplicate tensor name '" +
                            name + "'");
    }
    uint64_t bytes = 0;
    try {
      bytes = t.size_bytes();
    } catch (const InvalidArgument& err) {
      throw InvalidArgument("write_safetensors " + path + ": tensor '" + name + "': " + err.what());
    }
    if (offset + bytes < offset) {
      throw InvalidArgument("write_safetensors " + path + ": tensor '" + name +
                            "' ends past 2^64 bytes of data");
    }
    header << (first ? "" : ",") << json_quoted(name) << ":{\"dtype\":\""
           << safetensors_dtype(t.dtype()) << "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape().rank(); ++d) header << (d ? "," : "") << t.shape()[d];
    header << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
    offset += bytes;
    first = false;
  }
  header << "}";
  std::string h = header.str();
  while (h.size() % 8 != 0) h += ' ';

  AtomicFile file(path);
  const std::string& temporary = file.temporary_path();
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + temporary + ": " + std::strerror(errno));
  auto write_all = [&](const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string why = std::strerror(errno);
        ::close(fd);
        throw Error("cannot write " + temporary + ": " + why);
      }
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  };
  unsigned char length[8];
  uint64_t n = h.size();
  for (int b = 0; b < 8; ++b) length[b] = static_cast<unsigned char>(n >> (8 * b));
  write_all(length, 8);
  write_all(h.data(), h.size());
  std::vector<char> buffer;
  for (const auto& [name, t] : tensors) {
    buffer.resize(t.size_bytes());
    t.to_host(buffer.data(), buffer.size());
    write_all(buffer.data(), buffer.size());
  }
  if (::close(fd) != 0) throw Error("cannot write " + temporary + ": " + std::strerror(errno));
  file.commit();
}

SafetensorsFile read_safetensors(const std::string& path, Backend& backend) {
  // A FIFO would block, a device (/dev/zero) would be read until memory runs out.
  const std::string data = read_user_file(path, "safetensors file", kMaxSafetensorsBytes);
  if (data.size() < 8) throw DataLoss(path + ": truncated safetensors file (no header length)");
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(data[b]);
  if (n > data.size() - 8) {
    throw DataLoss(path + ": header length " + std::to_string(n) + " exceeds the file's " +
                   std::to_string(data.size()) + " bytes");
  }
  std::string header = data.substr(8, n);
  std::vector<std::pair<std::string, HeaderParser::Entry>> entries;
  SafetensorsFile file;
  HeaderParser(header, path).parse(&entries, &file.metadata);
  const uint64_t body = data.size() - 8 - n;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& [name, e] : entries) {
    DType dtype;
    if (!dtype_from_safetensors(e.dtype, &dtype)) {
      throw DataLoss(path + ": tensor '" + name + "' has unsupported dtype " + e.dtype);
    }
    if (e.shape.size() > kMaxTensorRank) {
      throw DataLoss(path + ": tensor '" + name + "' has rank " + std::to_string(e.shape.size()));
    }
    Shape shape(e.shape);
    uint64_t bytes = 0;
    try {
      bytes = static_cast<uint64_t>(shape.num_elements());
    } catch (const InvalidArgument& err) {
      throw DataLoss(path + ": tensor '" + name + "': " + err.what());
    }
    if (__builtin_mul_overflow(bytes, uint64_t{dtype_size(dtype)}, &bytes)) {
      throw DataLoss(path + ": tensor '" + name + "' of shape " + shape.to_string() +
                     " has more bytes than a 64-bit size holds");
    }
    uint64_t begin = static_cast<uint64_t>(e.offsets[0]), end = static_cast<uint64_t>(e.offsets[1]);
    if (end < begin || end - begin != bytes || end > body) {
      throw DataLoss(path + ": tensor '" + name + "' has data_offsets [" + std::to_string(begin) +
                     ", " + std::to_string(end) + "] for " + std::to_string(bytes) +
                     " bytes in a body of " + std::to_string(body));
    }
    ranges.emplace_back(e.offsets[0], e.offsets[1]);
    file.tensors.emplace_back(
        name, Tensor::from_host(backend, shape, dtype, data.data() + 8 + n + begin, bytes));
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      throw DataLoss(path + ": tensors overlap in the data section");
    }
  }
  return file;
}

}  // namespace trainyard
