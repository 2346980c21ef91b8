// libFuzzer target for TFRecordReader and crc32c (core/src/formats/tfrecord.cc).
//
// The input is the bytes of a TFRecord file. The harness keeps the files in memory (memfd,
// opened by its /proc/self/fd path) and reads them as follows, comparing each reading, result by
// result, with a model of the format written here from tfrecord.h: records, data-CRC
// corruptions the reader skips, and where it stops (end of file, or a truncated or corrupt
// record it stays at). A gzip stream is modelled by decompressing it with zlib: the reader must
// yield the records of everything zlib decompresses, ending in kTruncated where the stream is
// incomplete and in kCorrupt where it has a data error.
//
//   1. the input as a file, with Compression kNone, kAuto and kGzip;
//   2. the same, after seek() to a record's offset and to an arbitrary offset;
//   3. the input written in two parts, the reader reading between them (a file being written);
//   4. the decompression of the input when it is a gzip stream, as an uncompressed file (this
//      reaches records larger than the reader's buffer from small inputs);
//   5. the input gzip-compressed by the harness (one or two members), with kGzip and kAuto, also
//      in two parts.
//
// Every result must be one of the documented kinds with the documented message, offset and
// record; after kTruncated or kEndOfFile, reading again repeats the result; after a corrupt
// record the reader cannot step over (bad length, gzip data error) it stops: reading again gives
// kEndOfFile at the same offset.
// crc32c() is compared with a bytewise implementation of CRC-32C. Split points, seek targets
// and gzip levels come from a hash of the input, so every input replays identically.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_files.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

using Result = TFRecordReader::Result;

constexpr uint64_t kHeaderSize = 12;   // uint64 length, uint32 masked CRC of the length
constexpr uint64_t kFramingSize = 16;  // header and the uint32 masked CRC of the data
// Gzip inputs that decompress to more than this are not read: the model would be too slow.
constexpr std::size_t kMaxStreamSize = 16u << 20;
// A reading that returns more results than this is taken to loop forever.
constexpr std::size_t kMaxResults = (kMaxStreamSize / kFramingSize) + 16;

// ---------------------------------------------------------------------------------------------
// The reference model.

// CRC-32C one byte at a time from the polynomial: independent of the slicing and SSE4.2 paths.
// Not instrumented: it runs over every byte several times per input, and its branches tell
// the fuzzer nothing.
struct Crc32cTable {
  uint32_t t[256];
};

constexpr Crc32cTable make_crc32c_table() {
  Crc32cTable table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t reg = i;
    for (int bit = 0; bit < 8; ++bit) reg = (reg >> 1) ^ ((reg & 1) != 0 ? 0x82F63B78u : 0u);
    table.t[i] = reg;
  }
  return table;
}

constexpr Crc32cTable kCrc32cTable = make_crc32c_table();

__attribute__((no_sanitize("address", "coverage"))) uint32_t reference_crc32c(
    std::string_view data) {
  uint32_t reg = ~0u;
  for (const char c : data) {
    reg = kCrc32cTable.t[(reg ^ static_cast<unsigned char>(c)) & 0xff] ^ (reg >> 8);
  }
  return ~reg;
}

uint32_t reference_masked_crc(std::string_view data) {
  const uint32_t crc = reference_crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t load_le(std::string_view bytes, std::size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

const char* kind_name(Result::Kind kind) {
  switch (kind) {
    case Result::kRecord:
      return "record";
    case Result::kEndOfFile:
      return "end-of-file";
    case Result::kTruncated:
      return "truncated";
    case Result::kCorrupt:
      return "corrupt";
  }
  return "INVALID-KIND";
}

// A result the reader moves past: a record, or a record skipped for a data-CRC mismatch.
struct Event {
  Result::Kind kind = Result::kRecord;
  uint64_t offset = 0;
  std::string record;
};

// A reading to the point where the reader stops: kEndOfFile, or a kTruncated or kCorrupt
// record it stays at.
struct Reading {
  std::vector<Event> events;
  Result::Kind end_kind = Result::kEndOfFile;
  uint64_t end_offset = 0;
};

// The reading from event `from` on (a few events of it).
std::string describe(const Reading& reading, std::size_t from = 0) {
  std::string out = from > 0 ? "[" + std::to_string(from) + " events] " : "";
  for (std::size_t i = from; i < reading.events.size(); ++i) {
    if (i - from == 8) {
      out += "[" + std::to_string(reading.events.size() - i) + " more events] ";
      break;
    }
    const Event& e = reading.events[i];
    out += std::string(kind_name(e.kind)) + "@" + std::to_string(e.offset);
    if (e.kind == Result::kRecord) out += "(" + std::to_string(e.record.size()) + " bytes)";
    out += " ";
  }
  return out + "then " + kind_name(reading.end_kind) + "@" + std::to_string(reading.end_offset);
}

// Reads `stream` (an uncompressed TFRecord stream starting at byte offset `base`) as tfrecord.h
// describes the format.
Reading reference_reading(std::string_view stream, uint64_t base) {
  Reading reading;
  const uint64_t max_length = TFRecordReader::kMaxRecordLength;
  std::size_t at = 0;
  for (;;) {
    const std::size_t left = stream.size() - at;
    reading.end_offset = base + at;
    if (left == 0) {
      reading.end_kind = Result::kEndOfFile;
      return reading;
    }
    if (left < kHeaderSize) {
      reading.end_kind = Result::kTruncated;
      return reading;
    }
    const uint64_t length = load_le(stream, at, 8);
    if (load_le(stream, at + 8, 4) != reference_masked_crc(stream.substr(at, 8)) ||
        length > max_length) {
      reading.end_kind = Result::kCorrupt;
      return reading;
    }
    if (left < kFramingSize || length > left - kFramingSize) {
      reading.end_kind = Result::kTruncated;
      return reading;
    }
    const std::string_view data = stream.substr(at + kHeaderSize, length);
    const bool data_ok =
        load_le(stream, at + kHeaderSize + length, 4) == reference_masked_crc(data);
    reading.events.push_back({data_ok ? Result::kRecord : Result::kCorrupt, base + at,
                              data_ok ? std::string(data) : std::string()});
    at += kFramingSize + length;
  }
}

enum class GzipEnd { kComplete, kIncomplete, kDataError, kTooLarge };

// Decompresses `in` as gunzip does (concatenated members are one stream) into `out`, up to
// kMaxStreamSize bytes; says how the stream ends.
GzipEnd gunzip(std::string_view in, std::string* out) {
  out->clear();
  if (in.empty()) return GzipEnd::kComplete;
  z_stream zs{};
  FUZZ_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::vector<char> chunk(64 * 1024);
  GzipEnd end;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = static_cast<uInt>(chunk.size());
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out->append(chunk.data(), chunk.size() - zs.avail_out);
    if (out->size() > kMaxStreamSize) {
      end = GzipEnd::kTooLarge;
      break;
    }
    if (ret == Z_STREAM_END) {
      if (zs.avail_in == 0) {
        end = GzipEnd::kComplete;
        break;
      }
      inflateReset(&zs);
    } else if (ret == Z_BUF_ERROR) {
      end = GzipEnd::kIncomplete;  // all input consumed inside a member
      break;
    } else if (ret != Z_OK) {
      end = GzipEnd::kDataError;
      break;
    }
  }
  inflateEnd(&zs);
  return end;
}

std::string gzip(std::string_view data, int level, std::size_t member_split, bool two_members) {
  std::string out;
  const std::string_view parts[2] = {two_members ? data.substr(0, member_split) : data,
                                     two_members ? data.substr(member_split) : std::string_view()};
  std::vector<char> chunk(64 * 1024);
  for (int m = 0; m < (two_members ? 2 : 1); ++m) {
    z_stream zs{};
    FUZZ_CHECK(deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK,
               "deflateInit2 failed");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(parts[m].data()));
    zs.avail_in = static_cast<uInt>(parts[m].size());
    int ret;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
      zs.avail_out = static_cast<uInt>(chunk.size());
      ret = deflate(&zs, Z_FINISH);
      FUZZ_CHECK(ret != Z_STREAM_ERROR, "deflate failed");
      out.append(chunk.data(), chunk.size() - zs.avail_out);
    } while (ret != Z_STREAM_END);
    deflateEnd(&zs);
  }
  return out;
}

// The uncompressed stream a file holds, how it ends, and the reading of it from the start.
struct Model {
  bool gzip = false;
  std::string stream;
  GzipEnd end = GzipEnd::kComplete;
  Reading reading;
};

// kAuto's rule (tfrecord.h): gzip when the file starts with 1f 8b 08, unless its first 12 bytes
// are a record header with a valid length CRC.
bool auto_detects_gzip(std::string_view file) {
  const bool magic = file.size() >= 3 && static_cast<unsigned char>(file[0]) == 0x1f &&
                     static_cast<unsigned char>(file[1]) == 0x8b && file[2] == 0x08;
  const bool record_header =
      file.size() >= kHeaderSize && load_le(file, 8, 4) == reference_masked_crc(file.substr(0, 8));
  return magic && !record_header;
}

Reading expected_reading(const Model& model, uint64_t from);

// `file` read uncompressed, or as gzip. False when its decompression is too large to model.
bool make_model(std::string_view file, bool gzip, Model* model) {
  model->gzip = gzip;
  if (gzip) {
    model->end = gunzip(file, &model->stream);
    if (model->end == GzipEnd::kTooLarge) return false;
  } else {
    model->stream.assign(file);
    model->end = GzipEnd::kComplete;
  }
  model->reading = expected_reading(*model, 0);
  return true;
}

// The reading of `model` from stream offset `from` (<= the stream's size).
Reading expected_reading(const Model& model, uint64_t from) {
  Reading reading = reference_reading(std::string_view(model.stream).substr(from), from);
  // Where the decompressed stream stops short, the reader cannot finish the record it is at:
  // an incomplete gzip stream is a truncation, a data error a corruption.
  if (model.end == GzipEnd::kIncomplete && reading.end_kind == Result::kEndOfFile) {
    reading.end_kind = Result::kTruncated;
  } else if (model.end == GzipEnd::kDataError) {
    reading.end_kind = Result::kCorrupt;
  }
  return reading;
}

// ---------------------------------------------------------------------------------------------
// Reading and checking.

// What every result must satisfy; `before` is reader.offset() before the read.
void check_result(const Result& r, const std::string& record, const std::string& path,
                  uint64_t before, std::string_view what) {
  // Built only for a failure: this runs for every record of every reading.
  const auto where = [&] {
    return std::string(what) + ", result " + kind_name(r.kind) + " at " + std::to_string(r.offset) +
           ": ";
  };
  FUZZ_CHECK(r.offset == before,
             where() + "offset() before the read was " + std::to_string(before));
  switch (r.kind) {
    case Result::kRecord:
      FUZZ_CHECK(r.message.empty(), where() + "a record has the message '" + r.message + "'");
      return;
    case Result::kEndOfFile:
      FUZZ_CHECK(r.message.empty(), where() + "end of file has the message '" + r.message + "'");
      break;
    case Result::kTruncated:
    case Result::kCorrupt: {
      const std::string prefix = path +
                                 (r.kind == Result::kTruncated ? ": truncated" : ": corrupt") +
                                 " record at byte offset " + std::to_string(r.offset) + ": ";
      FUZZ_CHECK(r.message.starts_with(prefix) && r.message.size() > prefix.size(),
                 where() + "the message '" + r.message + "' does not start with '" + prefix + "'");
      break;
    }
    default:
      FUZZ_CHECK(false, where() + "kind " + std::to_string(static_cast<int>(r.kind)) +
                            " is none of the documented kinds");
  }
  FUZZ_CHECK(record.empty(), where() + "the record was not cleared (" +
                                 std::to_string(record.size()) + " bytes left in it)");
}

// Reads until the reader stops, appending to `reading`.
void read_until_stop(TFRecordReader& reader, std::string_view what, Reading* reading) {
  for (std::size_t n = 0;; ++n) {
    FUZZ_CHECK(n < kMaxResults, std::string(what) + ": more than " + std::to_string(kMaxResults) +
                                    " results; the reader does not advance: " + describe(*reading));
    const uint64_t before = reader.offset();
    std::string record = "stale contents the reader must replace or clear";
    const Result r = reader.read(&record);
    check_result(r, record, reader.path(), before, what);
    if (r.kind == Result::kRecord) {
      FUZZ_CHECK(reader.offset() == r.offset + kFramingSize + record.size(),
                 std::string(what) + ": after a record of " + std::to_string(record.size()) +
                     " bytes at " + std::to_string(r.offset) + " offset() is " +
                     std::to_string(reader.offset()));
      reading->events.push_back({r.kind, r.offset, std::move(record)});
      continue;
    }
    if (r.kind == Result::kCorrupt && reader.offset() != before) {
      // A data CRC mismatch: the reader has moved past the record.
      FUZZ_CHECK(reader.offset() >= before + kFramingSize,
                 std::string(what) + ": after a corrupt record at " + std::to_string(before) +
                     " offset() is " + std::to_string(reader.offset()));
      reading->events.push_back({r.kind, r.offset, {}});
      continue;
    }
    // The reader stays where it is: reading again repeats the result, or after a corrupt record
    // (which is never reported twice) reports the end of the stream.
    std::string again_record = "stale contents the reader must clear";
    const Result again = reader.read(&again_record);
    const Result::Kind again_kind = r.kind == Result::kCorrupt ? Result::kEndOfFile : r.kind;
    const std::string again_message = r.kind == Result::kCorrupt ? std::string() : r.message;
    FUZZ_CHECK(again.kind == again_kind && again.offset == r.offset &&
                   again.message == again_message && again_record.empty() &&
                   reader.offset() == before,
               std::string(what) + ": reading again after " + kind_name(r.kind) + " at " +
                   std::to_string(r.offset) + " ('" + r.message + "') gave " +
                   kind_name(again.kind) + " at " + std::to_string(again.offset) + " ('" +
                   again.message + "'), offset() " + std::to_string(reader.offset()));
    reading->end_kind = r.kind;
    reading->end_offset = r.offset;
    return;
  }
}

void expect_reading(const Reading& got, const Reading& want, std::string_view what) {
  std::size_t n = 0;  // events in common
  while (n < got.events.size() && n < want.events.size() &&
         got.events[n].kind == want.events[n].kind &&
         got.events[n].offset == want.events[n].offset &&
         got.events[n].record == want.events[n].record) {
    ++n;
  }
  const bool same = n == got.events.size() && n == want.events.size() &&
                    got.end_kind == want.end_kind && got.end_offset == want.end_offset;
  FUZZ_CHECK(same, std::string(what) + ": the reader gave\n  " + describe(got, n) +
                       "\nbut the format says\n  " + describe(want, n) + "\n(the first " +
                       std::to_string(n) + " events agree)");
}

// Seeks to `target` and reads on; checks the reading against the model from there.
void check_seek(TFRecordReader& reader, const Model& model, uint64_t target,
                std::string_view what) {
  const std::string where = std::string(what) + ", seek(" + std::to_string(target) + ")";
  if (target > model.stream.size()) {
    bool threw = false;
    try {
      reader.seek(target);
    } catch (const DataLoss&) {
      threw = true;
    }
    FUZZ_CHECK(threw, where + " past the end of a " + std::to_string(model.stream.size()) +
                          "-byte stream did not throw DataLoss");
    return;
  }
  reader.seek(target);
  FUZZ_CHECK(reader.offset() == target,
             where + ": offset() is " + std::to_string(reader.offset()) + " after it");
  Reading got;
  read_until_stop(reader, where, &got);
  expect_reading(got, expected_reading(model, target), where);
}

uint64_t hash(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325u;  // FNV-1a
  for (const char c : data) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3u;
  return h ^ (h >> 29);
}

void check_crc32c(std::string_view data, std::size_t split) {
  const uint32_t want = reference_crc32c(data);
  const uint32_t got = crc32c(data.data(), data.size());
  FUZZ_CHECK(got == want, "crc32c of " + std::to_string(data.size()) + " bytes is " +
                              std::to_string(got) + ", expected " + std::to_string(want));
  const uint32_t first = crc32c(data.data(), split);
  const uint32_t continued = crc32c(data.data() + split, data.size() - split, first);
  FUZZ_CHECK(continued == want, "crc32c continued after " + std::to_string(split) + " of " +
                                    std::to_string(data.size()) + " bytes differs");
  FUZZ_CHECK(unmask_crc32c(mask_crc32c(want)) == want, "unmask(mask(crc)) != crc");
}

// Reads the file in `mem`, which `model` models for `compression`, from the start; then seeks
// back and reads again.
void check_file(MemFile& mem, const Model& model, Compression compression, uint64_t h,
                std::string_view what) {
  TFRecordReader reader(mem.path(), compression);
  Reading got;
  read_until_stop(reader, what, &got);
  expect_reading(got, model.reading, what);

  // Back to a record's offset, then to any offset up to one past the end.
  if (!got.events.empty()) {
    check_seek(reader, model, got.events[(h >> 8) % got.events.size()].offset, what);
  }
  check_seek(reader, model, (h >> 24) % (model.stream.size() + 2), what);
}

// Writes `file`, which `model` models for `compression`, in two parts, reading as far as
// possible after the first.
void check_growing_file(MemFile& mem, std::string_view file, const Model& model, std::size_t split,
                        Compression compression, std::string_view what) {
  mem.assign(file.substr(0, split));
  TFRecordReader reader(mem.path(), compression);
  Reading got;
  read_until_stop(reader, what, &got);
  // The first part's stopping point is not an event; the reader stays there and goes on, unless
  // it stopped at a corrupt record (whose header or gzip data lies wholly in the first part).
  mem.append(file.substr(split));
  if (got.end_kind != Result::kCorrupt) read_until_stop(reader, what, &got);
  expect_reading(got, model.reading,
                 std::string(what) + " written in two parts split at " + std::to_string(split));
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard::fuzz;
  using trainyard::Compression;
  static MemFile file("fuzz_tfrecord");
  static MemFile other("fuzz_tfrecord_other");

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const uint64_t h = hash(input);
  const std::size_t split = static_cast<std::size_t>(h % (size + 1));
  check_crc32c(input, split);
  Model raw;
  make_model(input, /*gzip=*/false, &raw);
  Model gz;
  const bool gz_modelled = make_model(input, /*gzip=*/true, &gz);

  // 1, 2: the input as a file.
  file.assign(input);
  check_file(file, raw, Compression::kNone, h, "input read uncompressed");
  if (auto_detects_gzip(input) && gz_modelled) {
    check_file(file, gz, Compression::kAuto, h, "input read with kAuto");
  } else if (input.starts_with("\x1f\x8b")) {  // otherwise kAuto is kNone, read above
    check_file(file, raw, Compression::kAuto, h, "input read with kAuto");
  }
  if (gz_modelled) check_file(file, gz, Compression::kGzip, h, "input read as gzip");

  // 3: the input written in two parts.
  check_growing_file(other, input, raw, split, Compression::kNone, "input read uncompressed");
  if (gz_modelled) {
    check_growing_file(other, input, gz, split, Compression::kGzip, "input read as gzip");
  }

  // 4: what the input decompresses to, as an uncompressed file.
  if (gz_modelled && !gz.stream.empty()) {
    check_crc32c(gz.stream, static_cast<std::size_t>((h >> 16) % (gz.stream.size() + 1)));
    Model decompressed;
    make_model(gz.stream, /*gzip=*/false, &decompressed);
    other.assign(gz.stream);
    check_file(other, decompressed, Compression::kNone, h >> 3, "the input's decompression");
  }

  // 5: the input gzip-compressed.
  const std::string compressed =
      gzip(input, static_cast<int>((h >> 40) % 10), split, ((h >> 44) & 1) != 0);
  Model compressed_gz;
  if (!make_model(compressed, /*gzip=*/true, &compressed_gz)) return 0;
  other.assign(compressed);
  check_file(other, compressed_gz, Compression::kGzip, h >> 5, "input gzip-compressed");
  if (auto_detects_gzip(compressed)) {  // all but one in 2^32
    check_file(other, compressed_gz, Compression::kAuto, h >> 7, "input gzip-compressed, kAuto");
  }
  check_growing_file(other, compressed, compressed_gz,
                     static_cast<std::size_t>((h >> 48) % (compressed.size() + 1)),
                     Compression::kGzip, "input gzip-compressed");
  return 0;
}
