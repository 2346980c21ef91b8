#include "trainyard/core/tfrecord.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "trainyard/error.h"

namespace trainyard {
namespace {

// ---------------------------------------------------------------------------------------------
// CRC-32C. Both paths work on the raw register (the CRC before the final inversion); crc32c()
// does the inversions. Setting TRAINYARD_CRC32C=software in the environment before the first
// call forces the table path (the tests use it to check that path on SSE4.2 machines).

constexpr uint32_t kCastagnoliReflected = 0x82F63B78;

struct SlicingTables {
  uint32_t t[8][256];
};

constexpr SlicingTables make_slicing_tables() {
  SlicingTables tables{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t reg = i;
    for (int bit = 0; bit < 8; ++bit) reg = (reg >> 1) ^ (kCastagnoliReflected & (0u - (reg & 1)));
    tables.t[0][i] = reg;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) {
      const uint32_t prev = tables.t[k - 1][i];
      tables.t[k][i] = (prev >> 8) ^ tables.t[0][prev & 0xff];
    }
  }
  return tables;
}

constexpr SlicingTables kSlicing = make_slicing_tables();

uint32_t load_le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Slicing-by-8.
uint32_t crc32c_software(uint32_t reg, const unsigned char* p, std::size_t n) {
  const auto& t = kSlicing.t;
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = reg ^ load_le32(p);
    const uint32_t hi = load_le32(p + 4);
    reg = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) reg = t[0][(reg ^ *p) & 0xff] ^ (reg >> 8);
  return reg;
}

// The register after feeding a fixed number of zero bytes, as a function of the register: a
// linear map over GF(2), applied one byte of the register at a time.
struct ZeroShift {
  uint32_t t[4][256];

  uint32_t operator()(uint32_t reg) const {
    return t[0][reg & 0xff] ^ t[1][(reg >> 8) & 0xff] ^ t[2][(reg >> 16) & 0xff] ^ t[3][reg >> 24];
  }
};

// `basis[i]` is the image of the register with only bit i set.
ZeroShift zero_shift_from_basis(const std::array<uint32_t, 32>& basis) {
  ZeroShift shift{};
  for (int k = 0; k < 4; ++k) {
    shift.t[k][0] = 0;
    for (uint32_t b = 1; b < 256; ++b) {
      shift.t[k][b] = shift.t[k][b & (b - 1)] ^ basis[8 * k + std::countr_zero(b)];
    }
  }
  return shift;
}

// Shifts by `lane` zero bytes (*once) and by 2 * `lane` (*twice).
void make_zero_shifts(std::size_t lane, ZeroShift* once, ZeroShift* twice) {
  std::array<uint32_t, 32> basis{};
  for (int i = 0; i < 32; ++i) {
    uint32_t reg = uint32_t{1} << i;
    for (std::size_t j = 0; j < lane; ++j) reg = kSlicing.t[0][reg & 0xff] ^ (reg >> 8);
    basis[i] = reg;
  }
  *once = zero_shift_from_basis(basis);
  for (auto& b : basis) b = (*once)(b);
  *twice = zero_shift_from_basis(basis);
}

// The hardware path runs three independent CRC streams over three adjacent lanes, which hides
// the latency of the crc32 instruction, and joins them with the zero shifts.
constexpr std::size_t kLongLane = 4096;
constexpr std::size_t kShortLane = 256;

struct Crc32cDispatch {
  bool hardware = false;
  ZeroShift long_once, long_twice, short_once, short_twice;
};

Crc32cDispatch* make_crc32c_dispatch() {
  auto* dispatch = new Crc32cDispatch;
#if defined(__x86_64__)
  const char* forced = std::getenv("TRAINYARD_CRC32C");
  const bool software_only = forced != nullptr && std::string_view(forced) == "software";
  dispatch->hardware = !software_only && __builtin_cpu_supports("sse4.2");
#endif
  if (dispatch->hardware) {
    make_zero_shifts(kLongLane, &dispatch->long_once, &dispatch->long_twice);
    make_zero_shifts(kShortLane, &dispatch->short_once, &dispatch->short_twice);
  }
  return dispatch;
}

const Crc32cDispatch& crc32c_dispatch() {
  static const Crc32cDispatch* const dispatch = make_crc32c_dispatch();  // never freed
  return *dispatch;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t reg, const unsigned char* p,
                                                        std::size_t n,
                                                        const Crc32cDispatch& dispatch) {
  struct Level {
    std::size_t lane;
    const ZeroShift* once;
    const ZeroShift* twice;
  };
  const Level levels[] = {{kLongLane, &dispatch.long_once, &dispatch.long_twice},
                          {kShortLane, &dispatch.short_once, &dispatch.short_twice}};
  for (const Level& level : levels) {
    const std::size_t lane = level.lane;
    for (; n >= 3 * lane; p += 3 * lane, n -= 3 * lane) {
      uint64_t a = reg, b = 0, c = 0;
      for (std::size_t i = 0; i < lane; i += 8) {
        uint64_t wa, wb, wc;
        std::memcpy(&wa, p + i, 8);
        std::memcpy(&wb, p + lane + i, 8);
        std::memcpy(&wc, p + 2 * lane + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
      }
      reg = (*level.twice)(static_cast<uint32_t>(a)) ^ (*level.once)(static_cast<uint32_t>(b)) ^
            static_cast<uint32_t>(c);
    }
  }
  uint64_t reg64 = reg;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    reg64 = _mm_crc32_u64(reg64, word);
  }
  reg = static_cast<uint32_t>(reg64);
  for (; n > 0; ++p, --n) reg = _mm_crc32_u8(reg, *p);
  return reg;
}
#endif

// ---------------------------------------------------------------------------------------------
// Record framing.

constexpr std::size_t kBufferSize = 256 * 1024;
constexpr std::size_t kHeaderSize = 12;  // uint64 length, uint32 masked CRC of the length
constexpr std::size_t kFooterSize = 4;   // uint32 masked CRC of the data
constexpr uint32_t kMaskDelta = 0xa282ead8;
constexpr uint64_t kMaxRecordLength = TFRecordReader::kMaxRecordLength;

void encode_fixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
void encode_fixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
uint64_t decode_fixed64(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint64_t{load_le32(u)} | uint64_t{load_le32(u + 4)} << 32;
}
uint32_t decode_fixed32(const char* p) {
  return load_le32(reinterpret_cast<const unsigned char*>(p));
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  const Crc32cDispatch& dispatch = crc32c_dispatch();
  uint32_t reg = ~crc;
#if defined(__x86_64__)
  if (dispatch.hardware) return ~crc32c_sse42(reg, p, size, dispatch);
#endif
  return ~crc32c_software(reg, p, size);
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// ---------------------------------------------------------------------------------------------
// Reader. All record parsing works on a buffer of the uncompressed stream; the source below it
// is either the file or zlib's inflate over the file. Records too large for the buffer are read
// from the source straight into the caller's string.

struct TFRecordReader::Impl {
  explicit Impl(std::string path) : path(std::move(path)) {}
  ~Impl() {
    if (inflating) inflateEnd(&zs);
    if (fd >= 0) ::close(fd);
  }

  std::string path;
  int fd = -1;
  bool gzip = false;

  std::unique_ptr<char[]> buf = std::make_unique_for_overwrite<char[]>(kBufferSize);
  std::size_t pos = 0;  // next unconsumed byte of buf
  std::size_t end = 0;  // end of valid bytes in buf
  uint64_t offset = 0;  // stream offset of buf[pos]: the next record
  // False after a large record was cut short: the source is past `offset` and read() must go
  // back to it first.
  bool synced = true;
  // True after a corrupt record the reader cannot step over (a bad length or its CRC, a gzip
  // data error): read() reports the end of the stream there until seek() is called.
  bool stopped = false;

  z_stream zs{};
  bool inflating = false;
  std::unique_ptr<unsigned char[]> zbuf;
  uint64_t compressed_read = 0;  // bytes of the file handed to inflate so far
  bool member_open = false;      // inflate has begun a gzip member it has not finished
  std::string gzip_error;        // zlib's message after a data error; the stream stops there

  [[noreturn]] void throw_io(const char* what, int err) const {
    throw Error(path + ": " + what + " failed near byte offset " + std::to_string(offset) + ": " +
                errno_text(err));
  }

  std::size_t read_file(void* dst, std::size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd, dst, std::min<std::size_t>(n, INT_MAX));
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) throw_io("read", errno);
    }
  }

  void seek_file(uint64_t file_offset) {
    if (::lseek(fd, static_cast<off_t>(file_offset), SEEK_SET) < 0) throw_io("seek", errno);
  }

  uint64_t file_size() const {
    struct stat st;
    if (::fstat(fd, &st) != 0) throw_io("stat", errno);
    return static_cast<uint64_t>(st.st_size);
  }

  // Decompresses up to n bytes; returns fewer only where the compressed file ends for now, or
  // at a data error (then gzip_error is set).
  std::size_t read_gzip(char* dst, std::size_t n) {
    if (!gzip_error.empty()) return 0;
    zs.next_out = reinterpret_cast<Bytef*>(dst);
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(n, UINT_MAX));
    const uInt wanted = zs.avail_out;
    while (zs.avail_out > 0) {
      if (zs.avail_in == 0) {
        const std::size_t got = read_file(zbuf.get(), kBufferSize);
        if (got == 0) {
          if (!member_open) break;
          // zlib may still hold output decoded from input it has already consumed (the last
          // call stopped because the output buffer was full): drain it before giving up.
          const uInt before = zs.avail_out;
          const int ret = inflate(&zs, Z_NO_FLUSH);
          if (ret == Z_STREAM_END) {
            member_open = false;
            inflateReset(&zs);
            continue;
          }
          if (ret != Z_OK && ret != Z_BUF_ERROR) {
            gzip_error = zs.msg != nullptr ? zs.msg : "zlib error " + std::to_string(ret);
            gzip_error += " at compressed byte offset " + std::to_string(compressed_read);
            break;
          }
          if (zs.avail_out == before) break;
          continue;
        }
        compressed_read += got;
        zs.next_in = zbuf.get();
        zs.avail_in = static_cast<uInt>(got);
      }
      member_open = true;
      const int ret = inflate(&zs, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        // Concatenated gzip members form one stream, as gunzip reads them.
        member_open = false;
        inflateReset(&zs);
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        gzip_error = zs.msg != nullptr ? zs.msg : "zlib error " + std::to_string(ret);
        gzip_error += " at compressed byte offset " + std::to_string(compressed_read - zs.avail_in);
        break;
      }
    }
    return wanted - zs.avail_out;
  }

  std::size_t read_source(char* dst, std::size_t n) {
    return gzip ? read_gzip(dst, n) : read_file(dst, n);
  }

  // Makes at least `need` (<= kBufferSize) bytes available at buf[pos] unless the stream ends
  // first; returns how many are available.
  std::size_t fill(std::size_t need) {
    std::size_t avail = end - pos;
    if (avail >= need) return avail;
    if (pos > 0) {
      std::memmove(buf.get(), buf.get() + pos, avail);
      pos = 0;
      end = avail;
    }
    while (end < need) {
      const std::size_t got = read_source(buf.get() + end, kBufferSize - end);
      if (got == 0) break;
      end += got;
    }
    return end;
  }

  void restart_gzip() {
    seek_file(0);
    inflateReset(&zs);
    zs.avail_in = 0;
    compressed_read = 0;
    member_open = false;
    gzip_error.clear();
    pos = end = 0;
    offset = 0;
    synced = true;
  }

  // Moves forward to `target` by reading; false where the stream ends first.
  bool skip_to(uint64_t target) {
    while (offset < target) {
      const std::size_t avail = fill(1);
      if (avail == 0) return false;
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(avail, target - offset));
      pos += n;
      offset += n;
    }
    return true;
  }

  // Positions the source at `target` without checking the length of the stream.
  bool reposition(uint64_t target) {
    if (!gzip) {
      seek_file(target);
      pos = end = 0;
      offset = target;
      synced = true;
      return true;
    }
    restart_gzip();
    return skip_to(target);
  }

  Result corrupt(uint64_t record_offset, const std::string& what) const {
    Result r;
    r.kind = Result::kCorrupt;
    r.offset = record_offset;
    r.message =
        path + ": corrupt record at byte offset " + std::to_string(record_offset) + ": " + what;
    return r;
  }

  // The stream ended `have` bytes into a record of `need` bytes; `length` is UINT64_MAX when the
  // header itself is incomplete.
  Result short_read(uint64_t record_offset, uint64_t have, uint64_t need, uint64_t length) {
    if (!gzip_error.empty()) {
      return corrupt_and_stop(record_offset, "gzip data error: " + gzip_error);
    }
    Result r;
    r.kind = Result::kTruncated;
    r.offset = record_offset;
    r.message = path + ": truncated record at byte offset " + std::to_string(record_offset) + ": ";
    if (length == UINT64_MAX) {
      r.message += "the " + std::string(gzip ? "uncompressed stream" : "file") + " ends " +
                   std::to_string(have) + " bytes into the 12-byte record header";
    } else {
      r.message += "the record needs " + std::to_string(need) + " bytes (12-byte header, " +
                   std::to_string(length) + " bytes of data, 4-byte data CRC) but the " +
                   (gzip ? "uncompressed stream" : "file") + " ends after " + std::to_string(have);
    }
    if (gzip && member_open) r.message += " (the gzip stream is incomplete)";
    return r;
  }

  // A corrupt record after which the next one cannot be found: the reader stops at it.
  Result corrupt_and_stop(uint64_t record_offset, const std::string& what) {
    stopped = true;
    return corrupt(record_offset, what);
  }

  Result read(std::string* record) {
    const uint64_t start = offset;
    if (stopped) {
      Result r;
      r.kind = Result::kEndOfFile;
      r.offset = start;
      return r;
    }
    if (!synced && !reposition(start)) {
      // The stream got shorter than it was when the record was first read.
      const uint64_t reached = offset;
      offset = start;
      synced = false;
      if (!gzip_error.empty()) return short_read(start, 0, 0, UINT64_MAX);
      Result r;
      r.kind = Result::kTruncated;
      r.offset = start;
      r.message = path + ": truncated record at byte offset " + std::to_string(start) +
                  ": the stream now ends at byte offset " + std::to_string(reached);
      return r;
    }

    std::size_t avail = fill(kHeaderSize);
    if (avail < kHeaderSize) {
      if (avail == 0 && gzip_error.empty() && !member_open) {
        Result r;
        r.kind = Result::kEndOfFile;
        r.offset = start;
        return r;
      }
      return short_read(start, avail, kHeaderSize, UINT64_MAX);
    }
    const char* header = buf.get() + pos;
    const uint64_t length = decode_fixed64(header);
    const uint32_t stored_length_crc = decode_fixed32(header + 8);
    const uint32_t length_crc = mask_crc32c(crc32c(header, 8));
    if (stored_length_crc != length_crc) {
      return corrupt_and_stop(start, "length CRC mismatch (stored masked CRC " +
                                         hex32(stored_length_crc) + ", computed " +
                                         hex32(length_crc) + " over the length bytes)");
    }
    if (length > kMaxRecordLength) {
      return corrupt_and_stop(start, "record length " + std::to_string(length) +
                                         " is larger than the maximum of " +
                                         std::to_string(kMaxRecordLength) + " bytes");
    }
    const uint64_t total = kHeaderSize + length + kFooterSize;

    uint32_t stored_crc;
    if (total <= kBufferSize) {
      avail = fill(static_cast<std::size_t>(total));
      if (avail < total) return short_read(start, avail, total, length);
      const char* data = buf.get() + pos + kHeaderSize;
      stored_crc = decode_fixed32(data + length);
      record->assign(data, static_cast<std::size_t>(length));
      pos += static_cast<std::size_t>(total);
    } else {
      if (!gzip) {
        // Check the size first: a truncated record then leaves the buffer as it is, and reading
        // again picks up where a growing file has been extended.
        const uint64_t size = file_size();
        if (start + total > size) {
          return short_read(start, size > start ? size - start : 0, total, length);
        }
        record->resize(static_cast<std::size_t>(length));
      } else {
        // The length is not checked against anything yet: grow the string as data arrives.
        record->resize(static_cast<std::size_t>(std::min<uint64_t>(length, 4 * kBufferSize)));
      }
      std::size_t got = std::min<std::size_t>(avail - kHeaderSize, length);
      std::memcpy(record->data(), buf.get() + pos + kHeaderSize, got);
      pos += kHeaderSize + got;
      while (got < length) {
        if (got == record->size()) {
          record->resize(static_cast<std::size_t>(std::min<uint64_t>(length, 2 * got)));
        }
        const std::size_t n = read_source(record->data() + got, record->size() - got);
        if (n == 0) {
          synced = false;
          return short_read(start, kHeaderSize + got, total, length);
        }
        got += n;
      }
      avail = fill(kFooterSize);
      if (avail < kFooterSize) {
        synced = false;
        return short_read(start, kHeaderSize + length + avail, total, length);
      }
      stored_crc = decode_fixed32(buf.get() + pos);
      pos += kFooterSize;
    }
    offset = start + total;

    const uint32_t data_crc = mask_crc32c(crc32c(record->data(), record->size()));
    if (stored_crc != data_crc) {
      record->clear();
      return corrupt(start, "data CRC mismatch (" + std::to_string(length) +
                                " bytes of data; stored masked CRC " + hex32(stored_crc) +
                                ", computed " + hex32(data_crc) + ")");
    }
    Result r;
    r.kind = Result::kRecord;
    r.offset = start;
    return r;
  }

  void seek(uint64_t target) {
    stopped = false;
    if (synced) {
      const uint64_t buffer_start = offset - pos;
      if (target >= buffer_start && target - buffer_start <= end) {
        pos = static_cast<std::size_t>(target - buffer_start);
        offset = target;
        return;
      }
    }
    if (!gzip) {
      const uint64_t size = file_size();
      if (target > size) {
        throw DataLoss(path + ": cannot seek to byte offset " + std::to_string(target) +
                       ": the file has " + std::to_string(size) + " bytes");
      }
      reposition(target);
      return;
    }
    if (!synced || target < offset) restart_gzip();
    if (!skip_to(target)) {
      std::string message = path + ": cannot seek to byte offset " + std::to_string(target) +
                            ": the uncompressed stream ends at byte offset " +
                            std::to_string(offset);
      if (!gzip_error.empty()) message += " with a gzip data error: " + gzip_error;
      throw DataLoss(message);
    }
  }
};

TFRecordReader::TFRecordReader(const std::string& path, Compression compression)
    : path_(path), impl_(std::make_unique<Impl>(path)) {
  Impl& impl = *impl_;
  // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused below.
  impl.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (impl.fd < 0) throw NotFound(path + ": cannot open TFRecord file: " + errno_text(errno));
  struct stat st;
  if (::fstat(impl.fd, &st) != 0) {
    throw Error(path + ": cannot open TFRecord file: stat failed: " + errno_text(errno));
  }
  if (S_ISDIR(st.st_mode)) throw NotFound(path + ": cannot open TFRecord file: it is a directory");
  if (!S_ISREG(st.st_mode)) {
    // A FIFO or a device (/dev/stdin, /dev/zero) has no end a record can be checked against.
    throw InvalidArgument(path + ": cannot open TFRecord file: it is " +
                          (S_ISFIFO(st.st_mode)   ? "a FIFO"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "not a regular file") +
                          ", not a regular file");
  }
  const int flags = ::fcntl(impl.fd, F_GETFL);
  if (flags < 0 || ::fcntl(impl.fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw Error(path + ": cannot open TFRecord file: fcntl failed: " + errno_text(errno));
  }
  impl.gzip = compression == Compression::kGzip;
  if (compression == Compression::kAuto) {
    // The gzip magic and method byte 1f 8b 08 could also begin an uncompressed record's length
    // (559903 + k * 2^24 bytes); such a record has a valid length CRC where a gzip header does
    // not.
    char head[kHeaderSize];
    ssize_t got;
    do {
      got = ::pread(impl.fd, head, sizeof head, 0);
    } while (got < 0 && errno == EINTR);
    const bool magic = got >= 3 && static_cast<unsigned char>(head[0]) == 0x1f &&
                       static_cast<unsigned char>(head[1]) == 0x8b && head[2] == 0x08;
    const bool record_header = got == static_cast<ssize_t>(kHeaderSize) &&
                               decode_fixed32(head + 8) == mask_crc32c(crc32c(head, 8));
    impl.gzip = magic && !record_header;
  }
  if (impl.gzip) {
    if (inflateInit2(&impl.zs, 16 + MAX_WBITS) != Z_OK) {
      throw Error(path + ": cannot start gzip decompression: " +
                  (impl.zs.msg != nullptr ? impl.zs.msg : "inflateInit2 failed"));
    }
    impl.inflating = true;
    impl.zbuf = std::make_unique_for_overwrite<unsigned char[]>(kBufferSize);
  }
  ::posix_fadvise(impl.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
}

TFRecordReader::~TFRecordReader() = default;

TFRecordReader::Result TFRecordReader::read(std::string* record) {
  Result r = impl_->read(record);
  if (r.kind != Result::kRecord) record->clear();
  return r;
}

bool TFRecordReader::read_or_throw(std::string* record) {
  Result r = read(record);
  switch (r.kind) {
    case Result::kRecord:
      return true;
    case Result::kEndOfFile:
      return false;
    case Result::kTruncated:
    case Result::kCorrupt:
      break;
  }
  throw DataLoss(r.message);
}

uint64_t TFRecordReader::offset() const { return impl_->offset; }

void TFRecordReader::seek(uint64_t offset) { impl_->seek(offset); }

// ---------------------------------------------------------------------------------------------
// Writer. Records go into a buffer of the uncompressed stream; a full buffer (or a record
// larger than it) goes to the file, through deflate for GZIP.

struct TFRecordWriter::Impl {
  explicit Impl(std::string path) : path(std::move(path)) {}
  ~Impl() { release(); }

  std::string path;
  int fd = -1;
  bool gzip = false;
  std::unique_ptr<char[]> buf = std::make_unique_for_overwrite<char[]>(kBufferSize);
  std::size_t used = 0;
  uint64_t file_bytes = 0;  // bytes handed to the file so far

  z_stream zs{};
  bool deflating = false;
  bool deflate_pending = false;  // input given to deflate since the last flush
  std::unique_ptr<unsigned char[]> zout;

  std::string failure;  // set by the first error; the writer is unusable after it
  bool closed = false;

  void release() {
    if (deflating) deflateEnd(&zs);
    deflating = false;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  [[noreturn]] void fail(std::string message) {
    failure = message;
    release();
    throw Error(message);
  }

  void check_usable() const {
    if (!failure.empty()) throw Error(failure + " (the writer is unusable after this error)");
    if (closed) throw Error(path + ": write to a TFRecordWriter after close()");
  }

  void write_file(const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t put = ::write(fd, p, std::min<std::size_t>(n, INT_MAX));
      if (put < 0) {
        if (errno == EINTR) continue;
        fail(path + ": write failed at byte offset " + std::to_string(file_bytes) + ": " +
             errno_text(errno));
      }
      p += put;
      n -= static_cast<std::size_t>(put);
      file_bytes += static_cast<uint64_t>(put);
    }
  }

  void deflate_out(int flush) {
    int ret;
    do {
      zs.next_out = zout.get();
      zs.avail_out = kBufferSize;
      ret = deflate(&zs, flush);
      if (ret == Z_STREAM_ERROR) fail(path + ": gzip compression failed");
      write_file(zout.get(), kBufferSize - zs.avail_out);
    } while (zs.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
  }

  void sink(const char* p, std::size_t n) {
    if (!gzip) {
      write_file(p, n);
      return;
    }
    while (n > 0) {
      const std::size_t chunk = std::min<std::size_t>(n, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
      zs.avail_in = static_cast<uInt>(chunk);
      deflate_out(Z_NO_FLUSH);
      deflate_pending = true;
      p += chunk;
      n -= chunk;
    }
  }

  void drain() {
    if (used == 0) return;
    sink(buf.get(), used);
    used = 0;
  }

  void append(const char* p, std::size_t n) {
    if (n > kBufferSize - used) {
      drain();
      if (n >= kBufferSize) {
        sink(p, n);
        return;
      }
    }
    std::memcpy(buf.get() + used, p, n);
    used += n;
  }

  void flush() {
    check_usable();
    drain();
    if (gzip && deflate_pending) {
      deflate_out(Z_SYNC_FLUSH);
      deflate_pending = false;
    }
  }

  void close() {
    if (closed) return;
    if (!failure.empty()) {
      closed = true;
      throw Error(failure);
    }
    closed = true;
    drain();
    if (gzip) {
      deflate_out(Z_FINISH);
      deflateEnd(&zs);
      deflating = false;
    }
    // fsync is meaningless for pipes and character devices, which report EINVAL.
    if (::fsync(fd) != 0 && errno != EINVAL) {
      fail(path + ": fsync failed after " + std::to_string(file_bytes) +
           " bytes: " + errno_text(errno));
    }
    const int fd_to_close = fd;
    fd = -1;
    if (::close(fd_to_close) != 0) {
      failure = path + ": close failed after " + std::to_string(file_bytes) +
                " bytes: " + errno_text(errno);
      throw Error(failure);
    }
  }
};

TFRecordWriter::TFRecordWriter(const std::string& path, Compression compression)
    : path_(path), impl_(std::make_unique<Impl>(path)) {
  Impl& impl = *impl_;
  impl.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (impl.fd < 0) throw Error(path + ": cannot create TFRecord file: " + errno_text(errno));
  impl.gzip = compression == Compression::kGzip;
  if (impl.gzip) {
    if (deflateInit2(&impl.zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      throw Error(path + ": cannot start gzip compression: " +
                  (impl.zs.msg != nullptr ? impl.zs.msg : "deflateInit2 failed"));
    }
    impl.deflating = true;
    impl.zout = std::make_unique_for_overwrite<unsigned char[]>(kBufferSize);
  }
}

TFRecordWriter::~TFRecordWriter() {
  if (!impl_->closed) {
    try {
      impl_->close();
    } catch (const Error&) {
      // Documented: errors on an implicit close are lost.
    }
  }
}

void TFRecordWriter::write(std::string_view record) {
  Impl& impl = *impl_;
  impl.check_usable();
  char header[kHeaderSize];
  encode_fixed64(header, record.size());
  encode_fixed32(header + 8, mask_crc32c(crc32c(header, 8)));
  char footer[kFooterSize];
  encode_fixed32(footer, mask_crc32c(crc32c(record.data(), record.size())));
  impl.append(header, kHeaderSize);
  impl.append(record.data(), record.size());
  impl.append(footer, kFooterSize);
}

void TFRecordWriter::flush() { impl_->flush(); }

void TFRecordWriter::close() { impl_->close(); }

}  // namespace trainyard
