// TFRecord I/O: CRC-32C, the record framing TensorFlow writes, GZIP, and how truncated and
// corrupt files are reported.
#include "trainyard/core/tfrecord.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "trainyard/error.h"

#include <zlib.h>

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// The reader's buffer; records around this size take its large-record path.
constexpr std::size_t kReaderBuffer = 256 * 1024;

// Bit-at-a-time CRC-32C by its definition, independent of the library's tables and instructions.
uint32_t bitwise_crc32c(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t reg = 0xFFFFFFFF;
  for (std::size_t i = 0; i < n; ++i) {
    reg ^= p[i];
    for (int bit = 0; bit < 8; ++bit) reg = (reg & 1) ? (reg >> 1) ^ 0x82F63B78 : reg >> 1;
  }
  return ~reg;
}

uint32_t reference_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string le_bytes(uint64_t value, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

// The bytes TensorFlow's RecordWriter emits for one record, built from the format definition.
std::string tensorflow_record_bytes(std::string_view data) {
  const std::string length = le_bytes(data.size(), 8);
  return length + le_bytes(reference_mask(bitwise_crc32c(length.data(), 8)), 4) +
         std::string(data) + le_bytes(reference_mask(bitwise_crc32c(data.data(), data.size())), 4);
}

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::string contents_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_contents(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void append_contents(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string offset_text(uint64_t offset) { return "byte offset " + std::to_string(offset); }

// ---------------------------------------------------------------------------------------------
// CRC-32C

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // RFC 3720 (iSCSI) B.4.
  const std::string ones(32, '\xff');
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending.data(), descending.size()), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("", 0), 0u);
}

// Lengths around the 3 * 256 and 3 * 4096 byte blocks of the three-stream hardware path, every
// length up to 1100, and random long ones, each at all eight alignments.
std::vector<std::size_t> crc_test_lengths() {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
  for (std::size_t block : {768u, 12288u}) {
    for (std::size_t k = 1; k <= 3; ++k) {
      for (std::size_t d = 0; d <= 18; ++d) lengths.push_back(k * block + d - 9);
    }
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % 60000);
  return lengths;
}

// Returns the first failure, or "" when crc32c agrees with the bitwise definition everywhere,
// for whole buffers and for a buffer fed in two pieces.
std::string compare_crc32c_with_bitwise_reference() {
  std::mt19937_64 rng(42);
  const std::string buffer = random_bytes(60000 + 8, rng);
  for (std::size_t n : crc_test_lengths()) {
    for (std::size_t align = 0; align < 8; ++align) {
      const char* p = buffer.data() + align;
      const uint32_t expected = bitwise_crc32c(p, n);
      if (crc32c(p, n) != expected) {
        return "length " + std::to_string(n) + " alignment " + std::to_string(align);
      }
      const std::size_t split = n == 0 ? 0 : rng() % (n + 1);
      if (crc32c(p + split, n - split, crc32c(p, split)) != expected) {
        return "length " + std::to_string(n) + " split at " + std::to_string(split);
      }
    }
  }
  return "";
}

TEST(Crc32cTest, MatchesBitwiseDefinitionForManyLengthsAlignmentsAndSplits) {
  EXPECT_EQ(compare_crc32c_with_bitwise_reference(), "");
}

// TRAINYARD_CRC32C=software, read at the first call, forces the table path; a fresh process
// (the threadsafe death-test style re-executes the test binary) checks it on SSE4.2 machines.
TEST(Crc32cDeathTest, SoftwareFallbackMatchesBitwiseDefinition) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(setenv("TRAINYARD_CRC32C", "software", 1), 0);
  EXPECT_EXIT(
      {
        const std::string failure = compare_crc32c_with_bitwise_reference();
        if (!failure.empty())
          std::fprintf(stderr, "software crc32c differs: %s\n", failure.c_str());
        std::_Exit(failure.empty() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  unsetenv("TRAINYARD_CRC32C");
}

TEST(Crc32cTest, MaskMatchesTensorFlowFormulaAndUnmaskInvertsIt) {
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  std::mt19937 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t crc = static_cast<uint32_t>(rng());
    EXPECT_EQ(mask_crc32c(crc), reference_mask(crc));
    EXPECT_EQ(unmask_crc32c(mask_crc32c(crc)), crc);
    EXPECT_EQ(mask_crc32c(unmask_crc32c(crc)), crc);
  }
}

// ---------------------------------------------------------------------------------------------
// Files

class TFRecordTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("trainyard_tfrecord_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

struct Written {
  std::vector<std::string> records;
  std::vector<uint64_t> offsets;  // in the uncompressed stream
  uint64_t end = 0;
};

Written write_records(const std::string& path, const std::vector<std::size_t>& sizes,
                      Compression compression, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  Written w;
  TFRecordWriter writer(path, compression);
  for (std::size_t size : sizes) {
    w.records.push_back(random_bytes(size, rng));
    w.offsets.push_back(w.end);
    w.end += 16 + size;
    writer.write(w.records.back());
  }
  writer.close();
  return w;
}

std::vector<std::size_t> varied_sizes() {
  std::vector<std::size_t> sizes = {0,
                                    1,
                                    2,
                                    11,
                                    12,
                                    13,
                                    4096,
                                    kReaderBuffer - 17,
                                    kReaderBuffer - 16,
                                    kReaderBuffer - 15,
                                    kReaderBuffer,
                                    1 << 20,
                                    0,
                                    (3 << 20) + 5,
                                    1};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 600; ++i) sizes.push_back(rng() % 6000);
  sizes.push_back(1 << 20);
  return sizes;
}

void expect_reads_back(const std::string& path, Compression compression, const Written& w) {
  TFRecordReader reader(path, compression);
  std::string record;
  for (std::size_t i = 0; i < w.records.size(); ++i) {
    ASSERT_EQ(reader.offset(), w.offsets[i]) << "record " << i;
    const TFRecordReader::Result r = reader.read(&record);
    ASSERT_EQ(r.kind, TFRecordReader::Result::kRecord) << "record " << i << ": " << r.message;
    EXPECT_EQ(r.offset, w.offsets[i]);
    ASSERT_EQ(record.size(), w.records[i].size()) << "record " << i;
    ASSERT_TRUE(record == w.records[i]) << "record " << i;
  }
  EXPECT_EQ(reader.offset(), w.end);
  for (int again = 0; again < 2; ++again) {
    const TFRecordReader::Result r = reader.read(&record);
    EXPECT_EQ(r.kind, TFRecordReader::Result::kEndOfFile) << r.message;
    EXPECT_EQ(r.offset, w.end);
  }
  EXPECT_FALSE(reader.read_or_throw(&record));
}

TEST_F(TFRecordTest, WritesAndReadsBackRecordsOfVariedSizesUncompressed) {
  const std::string path = file("plain.tfrecord");
  const Written w = write_records(path, varied_sizes(), Compression::kNone);
  EXPECT_EQ(fs::file_size(path), w.end);
  expect_reads_back(path, Compression::kNone, w);
  expect_reads_back(path, Compression::kAuto, w);
}

TEST_F(TFRecordTest, WritesAndReadsBackRecordsOfVariedSizesGzipAndAutoDetectsIt) {
  const std::string path = file("zipped.tfrecord.gz");
  const Written w = write_records(path, varied_sizes(), Compression::kGzip);
  const std::string bytes = contents_of(path);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(bytes.substr(0, 2), "\x1f\x8b");
  expect_reads_back(path, Compression::kGzip, w);
  expect_reads_back(path, Compression::kAuto, w);
}

TEST_F(TFRecordTest, ReadsConcatenatedGzipMembersAsOneStream) {
  const std::string a = file("a.gz"), b = file("b.gz"), both = file("both.gz");
  const Written wa = write_records(a, {5, 300, 70000}, Compression::kGzip, 1);
  const Written wb = write_records(b, {0, 9}, Compression::kGzip, 2);
  put_contents(both, contents_of(a) + contents_of(b));
  Written w = wa;
  for (std::size_t i = 0; i < wb.records.size(); ++i) {
    w.records.push_back(wb.records[i]);
    w.offsets.push_back(wa.end + wb.offsets[i]);
  }
  w.end = wa.end + wb.end;
  expect_reads_back(both, Compression::kAuto, w);
}

// 0x088b1f = 559903: the length's first bytes are the gzip magic and method 1f 8b 08.
TEST_F(TFRecordTest, AutoDetectionReadsUncompressedFileWhoseLengthLooksLikeGzipMagic) {
  const std::string path = file("lookalike.tfrecord");
  const Written w = write_records(path, {0x088b1f, 3}, Compression::kNone);
  EXPECT_EQ(contents_of(path).substr(0, 3), "\x1f\x8b\x08");
  expect_reads_back(path, Compression::kAuto, w);
}

TEST_F(TFRecordTest, OneRecordHasTheExactByteLayout) {
  const std::string path = file("layout.tfrecord");
  {
    TFRecordWriter writer(path);
    writer.write("hello");
    writer.write("");
    writer.close();
  }
  // uint64 LE length 5, masked CRC of the length bytes, the data, masked CRC of the data; then
  // the empty record, whose data CRC is mask(0) = 0xa282ead8.
  const std::string expected = from_hex(
      "0500000000000000"
      "eab2043e"
      "68656c6c6f"
      "bb1f1c19"
      "0000000000000000"
      "29039807"
      "d8ea82a2");
  EXPECT_EQ(contents_of(path), expected);
  EXPECT_EQ(expected, tensorflow_record_bytes("hello") + tensorflow_record_bytes(""));
}

TEST_F(TFRecordTest, ReadsAndWritesTheBytesTensorFlowWritesForFooAndBar) {
  const std::string tf_bytes = tensorflow_record_bytes("foo") + tensorflow_record_bytes("bar");
  ASSERT_EQ(tf_bytes, from_hex("0300000000000000b099490e666f6f618abefe"
                               "0300000000000000b099490e6261724600e5c8"));

  const std::string tf_file = file("tensorflow.tfrecord");
  put_contents(tf_file, tf_bytes);
  TFRecordReader reader(tf_file);
  std::string record;
  TFRecordReader::Result r = reader.read(&record);
  ASSERT_EQ(r.kind, TFRecordReader::Result::kRecord) << r.message;
  EXPECT_EQ(record, "foo");
  EXPECT_EQ(r.offset, 0u);
  r = reader.read(&record);
  ASSERT_EQ(r.kind, TFRecordReader::Result::kRecord) << r.message;
  EXPECT_EQ(record, "bar");
  EXPECT_EQ(r.offset, 19u);
  EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kEndOfFile);

  const std::string ours = file("ours.tfrecord");
  TFRecordWriter writer(ours);
  writer.write("foo");
  writer.write("bar");
  writer.close();
  EXPECT_EQ(contents_of(ours), tf_bytes);
}

TEST_F(TFRecordTest, TruncatedFileReportsTruncatedAtTheRecordOffsetAndReadOrThrowThrows) {
  const std::string full_path = file("full.tfrecord");
  const Written w = write_records(full_path, {100, 200, 300}, Compression::kNone);
  const std::string full = contents_of(full_path);
  const uint64_t third = w.offsets[2];
  // Cuts inside the header, right after it, inside the data and inside the data CRC.
  for (uint64_t cut : {third + 1, third + 11, third + 12, third + 150, w.end - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const std::string path = file("cut.tfrecord");
    put_contents(path, std::string_view(full).substr(0, cut));
    TFRecordReader reader(path);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    ASSERT_TRUE(reader.read_or_throw(&record));
    for (int again = 0; again < 2; ++again) {
      const TFRecordReader::Result r = reader.read(&record);
      EXPECT_EQ(r.kind, TFRecordReader::Result::kTruncated) << r.message;
      EXPECT_EQ(r.offset, third);
      EXPECT_EQ(reader.offset(), third);  // stays at the incomplete record
      EXPECT_EQ(r.message.rfind(path + ": truncated record at " + offset_text(third), 0), 0u)
          << r.message;
    }
    try {
      reader.read_or_throw(&record);
      ADD_FAILURE() << "read_or_throw did not throw";
    } catch (const DataLoss& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      EXPECT_NE(message.find(offset_text(third)), std::string::npos) << message;
    }
  }
}

TEST_F(TFRecordTest, TruncatedRecordIsReadOnceTheFileIsComplete) {
  // A reader tailing a file that is still being written, for a small record and for one larger
  // than the reader's buffer.
  for (std::size_t size : {std::size_t{300}, kReaderBuffer + 1000}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string full_path = file("full.tfrecord");
    const Written w = write_records(full_path, {100, size}, Compression::kNone);
    const std::string full = contents_of(full_path);
    const std::string path = file("growing.tfrecord");
    const std::size_t cut = static_cast<std::size_t>(w.offsets[1]) + 12 + size / 2;
    put_contents(path, std::string_view(full).substr(0, cut));
    TFRecordReader reader(path);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kTruncated);
    append_contents(path, std::string_view(full).substr(cut));
    const TFRecordReader::Result r = reader.read(&record);
    ASSERT_EQ(r.kind, TFRecordReader::Result::kRecord) << r.message;
    EXPECT_TRUE(record == w.records[1]);
    EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kEndOfFile);
  }
}

TEST_F(TFRecordTest, TruncatedGzipFileReportsTruncated) {
  for (std::size_t size : {std::size_t{3000}, 4 * kReaderBuffer}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string full_path = file("full.gz");
    const Written w = write_records(full_path, {size, size, size}, Compression::kGzip);
    const std::string full = contents_of(full_path);
    const std::string path = file("cut.gz");
    put_contents(path, std::string_view(full).substr(0, full.size() / 2));
    TFRecordReader reader(path);
    std::string record;
    TFRecordReader::Result r;
    std::size_t good = 0;
    while ((r = reader.read(&record)).kind == TFRecordReader::Result::kRecord) {
      EXPECT_TRUE(record == w.records[good]);
      ++good;
    }
    EXPECT_EQ(r.kind, TFRecordReader::Result::kTruncated) << r.message;
    ASSERT_LT(good, 3u);
    EXPECT_EQ(r.offset, w.offsets[good]);
    EXPECT_EQ(reader.offset(), w.offsets[good]);
    EXPECT_NE(r.message.find(path + ": truncated record at " + offset_text(r.offset)),
              std::string::npos)
        << r.message;
    EXPECT_THROW(reader.read_or_throw(&record), DataLoss);
  }
}

TEST_F(TFRecordTest, GzipFileCutShortDeliversEveryRecordZlibCanDecompress) {
  // A writer killed mid-file leaves a gzip stream that stops short. zlib can still decompress
  // a prefix of it; every complete record in that prefix must be read, including output zlib
  // holds back when the reader's buffer fills (a bug the fuzzer found).
  const std::string path = file("cut.tfrecord.gz");
  {
    TFRecordWriter writer(path, Compression::kGzip);
    for (int i = 0; i < 3000; ++i) writer.write(std::string(100, 'a'));
    writer.close();
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes.resize(936);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // What zlib itself decompresses from the cut file.
  z_stream zs{};
  ASSERT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  std::string plain(1 << 20, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(plain.data());
  zs.avail_out = static_cast<uInt>(plain.size());
  inflate(&zs, Z_SYNC_FLUSH);
  const std::size_t decompressed = plain.size() - zs.avail_out;
  inflateEnd(&zs);
  const std::size_t complete = decompressed / (100 + 16);
  ASSERT_GT(complete, 2000u);

  TFRecordReader reader(path);
  std::string record;
  std::size_t read = 0;
  TFRecordReader::Result r;
  while ((r = reader.read(&record)).kind == TFRecordReader::Result::kRecord) ++read;
  EXPECT_EQ(read, complete);
  EXPECT_EQ(r.kind, TFRecordReader::Result::kTruncated) << r.message;
}

TEST_F(TFRecordTest, GzipRecordsFlushedByTheWriterAreReadableBeforeClose) {
  const std::string path = file("live.gz");
  TFRecordWriter writer(path, Compression::kGzip);
  writer.write("first");
  writer.flush();
  TFRecordReader reader(path);
  std::string record;
  ASSERT_TRUE(reader.read_or_throw(&record));
  EXPECT_EQ(record, "first");
  EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kTruncated);  // stream unfinished
  writer.write("second");
  writer.close();
  ASSERT_TRUE(reader.read_or_throw(&record));
  EXPECT_EQ(record, "second");
  EXPECT_FALSE(reader.read_or_throw(&record));
}

TEST_F(TFRecordTest, FlippedDataByteIsCorruptDataCrcAndTheNextRecordStillReads) {
  // A small record, one larger than the reader's buffer, and a flip in the stored data CRC.
  struct Case {
    std::size_t size;
    std::size_t flip;  // within the record
  };
  for (const Case c :
       {Case{200, 12 + 50}, Case{kReaderBuffer + 100, 12 + 200000}, Case{200, 12 + 200 + 2}}) {
    SCOPED_TRACE("size " + std::to_string(c.size) + " flip " + std::to_string(c.flip));
    const std::string path = file("flipped.tfrecord");
    const Written w = write_records(path, {10, c.size, 30}, Compression::kNone);
    std::string bytes = contents_of(path);
    bytes[w.offsets[1] + c.flip] ^= 0x40;
    put_contents(path, bytes);

    TFRecordReader reader(path);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    const TFRecordReader::Result r = reader.read(&record);
    EXPECT_EQ(r.kind, TFRecordReader::Result::kCorrupt);
    EXPECT_EQ(r.offset, w.offsets[1]);
    EXPECT_EQ(
        r.message.rfind(
            path + ": corrupt record at " + offset_text(w.offsets[1]) + ": data CRC mismatch", 0),
        0u)
        << r.message;
    EXPECT_EQ(reader.offset(), w.offsets[2]);  // skipped past the bad record
    ASSERT_TRUE(reader.read_or_throw(&record));
    EXPECT_EQ(record, w.records[2]);
    EXPECT_FALSE(reader.read_or_throw(&record));
  }
}

// A flipped bit in a length (or its CRC) leaves the next record unfindable: the reader reports
// the record once and stops there, so a caller that reads on after kCorrupt (data inspect)
// ends instead of reporting the same offset forever.
TEST_F(TFRecordTest, FlippedLengthByteIsCorruptLengthCrcReportedOnceThenTheReaderStops) {
  for (std::size_t flip : {std::size_t{0}, std::size_t{3}, std::size_t{9}}) {  // length, its CRC
    SCOPED_TRACE("flip " + std::to_string(flip));
    const std::string path = file("flipped.tfrecord");
    const Written w = write_records(path, {10, 200, 30}, Compression::kNone);
    std::string bytes = contents_of(path);
    bytes[w.offsets[1] + flip] ^= 0x01;
    put_contents(path, bytes);

    TFRecordReader reader(path);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    const TFRecordReader::Result r = reader.read(&record);
    EXPECT_EQ(r.kind, TFRecordReader::Result::kCorrupt);
    EXPECT_EQ(r.offset, w.offsets[1]);
    EXPECT_EQ(
        r.message.rfind(
            path + ": corrupt record at " + offset_text(w.offsets[1]) + ": length CRC mismatch", 0),
        0u)
        << r.message;
    EXPECT_EQ(reader.offset(), w.offsets[1]);
    for (int again = 0; again < 2; ++again) {
      const TFRecordReader::Result next = reader.read(&record);
      EXPECT_EQ(next.kind, TFRecordReader::Result::kEndOfFile) << next.message;
      EXPECT_EQ(next.offset, w.offsets[1]);
      EXPECT_EQ(reader.offset(), w.offsets[1]);
    }
    EXPECT_FALSE(reader.read_or_throw(&record));
    // seek() starts over: the corruption is reported again, once.
    reader.seek(w.offsets[1]);
    EXPECT_THROW(reader.read_or_throw(&record), DataLoss);
    EXPECT_FALSE(reader.read_or_throw(&record));
  }
}

// A header whose length (with a valid CRC) claims more than kMaxRecordLength is corrupt before
// anything is allocated for it, in a plain file and in a gzip stream (which could otherwise
// inflate gigabytes of zeros into the record before its data CRC is checked).
TEST_F(TFRecordTest, RecordLengthAboveTheMaximumIsCorruptBeforeAllocating) {
  const uint64_t claimed = uint64_t{3} << 30;  // 3 GiB
  const std::string length = le_bytes(claimed, 8);
  const std::string header = length + le_bytes(reference_mask(bitwise_crc32c(length.data(), 8)), 4);
  const std::string good = tensorflow_record_bytes("first");
  const std::string stream = good + header + std::string(64, '\0');
  for (const Compression compression : {Compression::kNone, Compression::kGzip}) {
    const bool gzip = compression == Compression::kGzip;
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string path = file(gzip ? "huge.gz" : "huge.tfrecord");
    if (gzip) {
      gzFile gz = gzopen(path.c_str(), "wb");
      ASSERT_NE(gz, nullptr);
      ASSERT_EQ(gzwrite(gz, stream.data(), static_cast<unsigned>(stream.size())),
                static_cast<int>(stream.size()));
      ASSERT_EQ(gzclose(gz), Z_OK);
    } else {
      put_contents(path, stream);
    }
    TFRecordReader reader(path, compression);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    EXPECT_EQ(record, "first");
    const TFRecordReader::Result r = reader.read(&record);
    EXPECT_EQ(r.kind, TFRecordReader::Result::kCorrupt) << r.message;
    EXPECT_EQ(r.message, path + ": corrupt record at " + offset_text(good.size()) +
                             ": record length 3221225472 is larger than the maximum of "
                             "2147483647 bytes");
    EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kEndOfFile);
  }
}

TEST_F(TFRecordTest, CorruptGzipDataIsReportedAsCorrupt) {
  const std::string path = file("bad.gz");
  const Written w = write_records(path, {4000, 4000, 4000}, Compression::kGzip);
  std::string bytes = contents_of(path);
  // Overwrite a stretch in the middle of the deflate data.
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] = '\xff';
  put_contents(path, bytes);
  TFRecordReader reader(path);
  std::string record;
  TFRecordReader::Result r;
  std::size_t good = 0;
  while ((r = reader.read(&record)).kind == TFRecordReader::Result::kRecord) ++good;
  EXPECT_LT(good, w.records.size());
  EXPECT_EQ(r.kind, TFRecordReader::Result::kCorrupt) << r.message;
  EXPECT_EQ(r.message.rfind(path + ": corrupt record at byte offset ", 0), 0u) << r.message;
}

void expect_seeks_resume(const std::string& path, const Written& w) {
  TFRecordReader reader(path);
  std::vector<std::size_t> order(w.records.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::string record;
  for (std::size_t i : order) {
    reader.seek(w.offsets[i]);
    EXPECT_EQ(reader.offset(), w.offsets[i]);
    const TFRecordReader::Result r = reader.read(&record);
    ASSERT_EQ(r.kind, TFRecordReader::Result::kRecord) << "record " << i << ": " << r.message;
    EXPECT_EQ(r.offset, w.offsets[i]);
    ASSERT_TRUE(record == w.records[i]) << "record " << i;
    if (i + 1 < w.records.size()) {  // and reading continues from there
      ASSERT_TRUE(reader.read_or_throw(&record));
      ASSERT_TRUE(record == w.records[i + 1]) << "record " << i + 1;
    }
  }
  reader.seek(w.end);
  EXPECT_EQ(reader.read(&record).kind, TFRecordReader::Result::kEndOfFile);
  try {
    reader.seek(w.end + 1);
    ADD_FAILURE() << "seek past the end did not throw";
  } catch (const DataLoss& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path + ": cannot seek to " + offset_text(w.end + 1), 0), 0u) << message;
  }
}

std::vector<std::size_t> seek_sizes() {
  std::vector<std::size_t> sizes;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 150; ++i) sizes.push_back(rng() % 9000);
  sizes[20] = kReaderBuffer * 2;
  sizes[100] = kReaderBuffer + 3;
  return sizes;
}

TEST_F(TFRecordTest, SeekToASavedOffsetResumesAtThatRecord) {
  const std::string path = file("seek.tfrecord");
  expect_seeks_resume(path, write_records(path, seek_sizes(), Compression::kNone));
}

TEST_F(TFRecordTest, SeekToASavedOffsetResumesAtThatRecordInGzipFile) {
  const std::string path = file("seek.gz");
  expect_seeks_resume(path, write_records(path, seek_sizes(), Compression::kGzip));
}

TEST_F(TFRecordTest, SavedOffsetFromOneReaderResumesInAnother) {
  const std::string path = file("resume.tfrecord");
  const Written w = write_records(path, {10, 20, 30, 40}, Compression::kNone);
  uint64_t saved;
  {
    TFRecordReader reader(path);
    std::string record;
    ASSERT_TRUE(reader.read_or_throw(&record));
    ASSERT_TRUE(reader.read_or_throw(&record));
    saved = reader.offset();
  }
  TFRecordReader reader(path);
  reader.seek(saved);
  std::string record;
  ASSERT_TRUE(reader.read_or_throw(&record));
  EXPECT_EQ(record, w.records[2]);
}

TEST_F(TFRecordTest, MissingFileThrowsNotFoundNamingThePath) {
  const std::string path = file("no-such.tfrecord");
  try {
    TFRecordReader reader(path);
    ADD_FAILURE() << "no exception";
  } catch (const NotFound& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  EXPECT_THROW(TFRecordReader reader(dir_.string()), NotFound);  // a directory
}

TEST_F(TFRecordTest, EmptyFileIsEndOfFile) {
  const std::string path = file("empty.tfrecord");
  put_contents(path, "");
  const std::string gzip_path = file("empty.gz");
  TFRecordWriter(gzip_path, Compression::kGzip).close();  // a gzip stream holding no records
  for (const auto& [p, compression] :
       {std::pair{path, Compression::kAuto}, std::pair{path, Compression::kNone},
        std::pair{path, Compression::kGzip}, std::pair{gzip_path, Compression::kAuto}}) {
    TFRecordReader reader(p, compression);
    std::string record = "stale";
    const TFRecordReader::Result r = reader.read(&record);
    EXPECT_EQ(r.kind, TFRecordReader::Result::kEndOfFile) << p << ": " << r.message;
    EXPECT_EQ(r.offset, 0u);
    EXPECT_FALSE(reader.read_or_throw(&record));
  }
}

TEST_F(TFRecordTest, WriterThatCannotCreateTheFileThrowsNamingIt) {
  const std::string path = file("missing-dir/out.tfrecord");
  try {
    TFRecordWriter writer(path);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

TEST_F(TFRecordTest, WriterCloseReportsWriteErrorsNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TFRecordWriter writer("/dev/full");
  writer.write("buffered until close");
  try {
    writer.close();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/dev/full: write failed", 0), 0u) << e.what();
  }
  EXPECT_THROW(writer.write("more"), Error);
}

}  // namespace
}  // namespace trainyard
