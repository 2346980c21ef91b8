// TensorBoard summaries: SummaryWriter writes event files the way TensorFlow 1.x's FileWriter
// does (TFRecord framing, one serialized tf::Event per record, the first carrying file_version
// "brain.Event:2"); EventFileReader reads them back, also while they are still being written.
// The messages are in trainyard/proto/event.pb.h and summary.pb.h, wire-compatible with
// TensorFlow's event.proto and summary.proto.
#ifndef TRAINYARD_CORE_SUMMARY_WRITER_H_
#define TRAINYARD_CORE_SUMMARY_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/summaries.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace trainyard {

class TFRecordReader;

// TensorFlow's default histogram bucket limits (tensorflow/core/lib/histogram/histogram.cc):
// -DBL_MAX, the negated series, 0, then 1e-12 growing by a factor of 1.1 while below 1e20,
// then DBL_MAX. Bucket i counts the values v with limit[i - 1] <= v < limit[i].
TRAINYARD_API const std::vector<double>& default_histogram_bucket_limits();

// The defaults are those of TensorFlow 1.x's FileWriter (max_queue 10, flush_secs 120).
struct SummaryWriterOptions {
  // Pending events are flushed (and fsynced) by a background thread once this many have been
  // added since the last flush; 0 turns this off.
  int flush_events = 10;
  // ... and at the latest this many seconds after the oldest pending event was added; 0 or
  // less turns this off.
  double flush_secs = 120;
};

// Writes one event file. All members may be called from any number of threads at once; events
// land in the file in the order their calls took the writer's lock.
//
// Errors: I/O failures throw Error naming the file. A failure in the background flush is
// remembered and thrown by the next add_*, flush() or close(); the writer is unusable after an
// I/O error. Bad arguments throw InvalidArgument naming the tag.
class TRAINYARD_API SummaryWriter final : public Summaries {
 public:
  // Creates `log_dir` (and its parents) and the file
  //   <log_dir>/events.out.tfevents.<10-digit Unix seconds>.<hostname><filename_suffix>,
  // writes the file_version event and flushes it. Throws Error when the directory or file
  // cannot be created, including when that name already exists (two writers started in the
  // same second in one directory: give them different suffixes), and InvalidArgument when the
  // suffix contains '/' or flush_events is negative.
  explicit SummaryWriter(const std::string& log_dir, const std::string& filename_suffix = "",
                         const SummaryWriterOptions& options = {});
  // Closes; errors on close are lost (call close() to see them).
  ~SummaryWriter() override;
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // The event file's path.
  const std::string& path() const { return path_; }

  // A scalar as Summary.Value.simple_value (a float, as in TensorFlow).
  void add_scalar(std::string_view tag, double value, int64_t step) override;

  // A HistogramProto of `values` over default_histogram_bucket_limits(), encoded as
  // TensorFlow's Histogram::EncodeToProto does: runs of empty buckets collapse into one entry
  // with the run's last limit. Empty `values` give num 0, min DBL_MAX, max -DBL_MAX and the
  // single bucket (DBL_MAX, 0). Throws InvalidArgument naming the tag, index and value for a
  // NaN or infinite value (TensorFlow's "Nan in summary histogram").
  void add_histogram(std::string_view tag, std::span<const double> values, int64_t step);

  // A rank-0 DT_STRING TensorProto holding `text`, with plugin_name "text" and empty content
  // (TextPluginData version 0), data_class DATA_CLASS_TENSOR: what TensorBoard's text
  // dashboard reads. TensorBoard renders it as Markdown.
  void add_text(std::string_view tag, std::string_view text, int64_t step);

  // A PNG-encoded Summary.Image. `pixels` holds height * width * channels bytes, row-major and
  // channel-interleaved; channels is 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA), which is
  // also the colorspace written. Throws InvalidArgument for other channel counts, non-positive
  // sizes or null pixels, and Error when libpng fails.
  void add_image(std::string_view tag, int height, int width, int channels, const uint8_t* pixels,
                 int64_t step) override;

  // Writes `event` as given, except that a wall_time of 0 is replaced by the current time. For
  // events the add_* members do not cover (SessionLog START on resume, a graph). `event` is a
  // tf.Event of any generated copy of event.proto (an application's own: the core's stays
  // internal), read through its serialized bytes. Throws InvalidArgument when those do not parse
  // as an Event.
  void add_event(const google::protobuf::Message& event);

  // Writes everything added so far to the file and fsyncs it. A no-op after close().
  void flush();

  // Stops the background flush, flushes, fsyncs and closes the file. Later add_* calls throw
  // Error; calling close() again does nothing.
  void close();

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

// Reads the events of one event file in order, while the file may still be growing.
class TRAINYARD_API EventFileReader {
 public:
  // Opens `path`; throws NotFound naming the file when it cannot be opened.
  explicit EventFileReader(const std::string& path);
  ~EventFileReader();
  EventFileReader(const EventFileReader&) = delete;
  EventFileReader& operator=(const EventFileReader&) = delete;

  // Reads the next event into *event and returns true, or returns false when there is none
  // yet: at the end of the file, or where the file ends inside a record (the writer has not
  // finished writing it). Calling again later continues from the same place, so each event is
  // returned exactly once however the file grows between calls. A record the writer never
  // finishes (it crashed) therefore reads as "not yet written" forever, as in TensorBoard;
  // partial_record() tells that case apart from a clean end.
  //
  // Throws DataLoss naming the file and byte offset when a CRC does not match or a record is
  // not an Event; after a data CRC mismatch or an unparsable record the reader has moved past
  // that record, so reading may continue.
  //
  // `event` is a tf.Event of any generated copy of event.proto (an application's own: the
  // core's stays internal); it is parsed from the record's bytes.
  bool next(google::protobuf::Message* event);

  // Whether the last next() returned false because the file ends inside a record.
  bool partial_record() const { return partial_record_; }

  // Byte offset of the next record.
  uint64_t offset() const;

  const std::string& path() const { return path_; }

  // The event files in `log_dir` (regular files whose name contains "tfevents", as TensorBoard
  // selects them), sorted by name: for files from one host, by creation time. Throws NotFound
  // when `log_dir` is not a readable directory.
  static std::vector<std::string> list_event_files(const std::string& log_dir);

 private:
  std::string path_;
  std::unique_ptr<TFRecordReader> reader_;
  bool partial_record_ = false;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SUMMARY_WRITER_H_
