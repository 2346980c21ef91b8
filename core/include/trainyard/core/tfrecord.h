// TFRecord files, byte-compatible with TensorFlow's: each record is
//   uint64 length (little-endian), uint32 masked CRC-32C of the length bytes,
//   length bytes of data, uint32 masked CRC-32C of the data,
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Files may be GZIP-compressed as a
// whole (TensorFlow's compression_type "GZIP").
#ifndef TRAINYARD_CORE_TFRECORD_H_
#define TRAINYARD_CORE_TFRECORD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "trainyard/export.h"

namespace trainyard {

// CRC-32C (Castagnoli), with the SSE4.2 instruction where the CPU has it. `crc` continues a
// previous value (0 to start).
TRAINYARD_API uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);
TRAINYARD_API uint32_t mask_crc32c(uint32_t crc);
TRAINYARD_API uint32_t unmask_crc32c(uint32_t masked);

enum class Compression {
  kAuto,  // reading: GZIP when the file starts with the gzip magic bytes; writing: none
  kNone,
  kGzip,
};

class TRAINYARD_API TFRecordReader {
 public:
  // Opens `path`; throws NotFound naming the file when it cannot be opened or is a directory,
  // InvalidArgument when it is not a regular file (a FIFO, a device such as /dev/stdin).
  explicit TFRecordReader(const std::string& path, Compression compression = Compression::kAuto);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  struct Result {
    enum Kind {
      kRecord,     // *record holds the next record
      kEndOfFile,  // clean end: no bytes after the last complete record
      kTruncated,  // the file ends inside a record (corrupt, or a file still being written)
      kCorrupt,    // a CRC does not match
    };
    Kind kind = kEndOfFile;
    uint64_t offset = 0;  // byte offset of the record in the (uncompressed) stream
    std::string message;  // for kTruncated and kCorrupt: "FILE: ... at byte offset N"
  };

  // The largest record length read() accepts (a protobuf message is smaller still); a header
  // claiming more is kCorrupt before anything is allocated for it.
  static constexpr uint64_t kMaxRecordLength = (uint64_t{1} << 31) - 1;

  // Reads the next record. A record is never reported twice without a seek() between:
  // - after a kCorrupt data CRC the reader has skipped past the bad record, so reading may
  //   continue (offset() has moved on);
  // - after a kCorrupt it cannot step over (a bad length CRC, a length above kMaxRecordLength,
  //   a gzip data error) the next record cannot be found: the reader stops there, offset()
  //   stays at the corrupt record and every further read returns kEndOfFile;
  // - after kTruncated it stays at that record: reading again repeats the result, or returns
  //   the record once a file that is still being written has grown (event-file tailing).
  Result read(std::string* record);

  // Reads the next record; throws DataLoss with the result's message on kTruncated/kCorrupt.
  // Returns false at a clean end of file.
  bool read_or_throw(std::string* record);

  // Offset of the next record in the uncompressed stream.
  uint64_t offset() const;
  // Continues from `offset` (a value offset() returned), also after the reader stopped at a
  // corrupt record. For GZIP files this re-reads the stream from the start. Throws DataLoss
  // when the offset is past the end.
  void seek(uint64_t offset);

  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

class TRAINYARD_API TFRecordWriter {
 public:
  // Creates or truncates `path`; throws Error naming the file when it cannot.
  explicit TFRecordWriter(const std::string& path, Compression compression = Compression::kNone);
  ~TFRecordWriter();  // closes (errors on close are lost: call close() to see them)
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  void write(std::string_view record);
  void flush();
  // Flushes, fsyncs and closes; throws Error naming the file on failure.
  void close();

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TFRECORD_H_
