#include "trainyard/core/summary_writer.h"

#include <fcntl.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/proto/event.pb.h"
#include "trainyard/proto/summary.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr char kFileVersion[] = "brain.Event:2";

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

double now_seconds() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string quoted(std::string_view tag) { return "'" + std::string(tag) + "'"; }

void check_tag(std::string_view what, std::string_view tag) {
  if (tag.empty()) throw InvalidArgument(std::string(what) + ": the tag is empty");
}

std::vector<double> make_default_bucket_limits() {
  std::vector<double> positive;
  std::vector<double> negative;
  // The same loop as TensorFlow, so that the limits are bit-identical to its.
  double v = 1.0e-12;
  while (v < 1.0e20) {
    positive.push_back(v);
    negative.push_back(-v);
    v *= 1.1;
  }
  positive.push_back(DBL_MAX);
  negative.push_back(-DBL_MAX);
  std::vector<double> limits(negative.rbegin(), negative.rend());
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

std::string encode_png(std::string_view tag, int height, int width, int channels,
                       const uint8_t* pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  static constexpr png_uint_32 kFormats[] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                             PNG_FORMAT_RGBA};
  image.format = kFormats[channels - 1];
  const auto failed = [&](const char* stage) {
    const std::string message = "add_image(" + quoted(tag) + "): PNG encoding of a " +
                                std::to_string(height) + "x" + std::to_string(width) + "x" +
                                std::to_string(channels) + " image failed (" + stage +
                                "): " + image.message;
    png_image_free(&image);
    return Error(message);
  };
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr)) {
    throw failed("sizing");
  }
  std::string png(size, '\0');
  if (!png_image_write_to_memory(&image, png.data(), &size, 0, pixels, 0, nullptr)) {
    throw failed("writing");
  }
  png.resize(size);
  return png;
}

}  // namespace

const std::vector<double>& default_histogram_bucket_limits() {
  static const std::vector<double>* const limits =
      new std::vector<double>(make_default_bucket_limits());  // never freed
  return *limits;
}

namespace {

// The bucket of `value` among the default limits: the first limit above it (upper_bound), the
// last bucket for DBL_MAX. The limits a side are 1e-12 * 1.1^k, so the logarithm guesses the
// index within a step or two and a short walk over the limits themselves settles it exactly
// (the same bucket as a binary search, in a log instead of eleven unpredictable compares).
std::size_t default_bucket_of(double value, const std::vector<double>& limits) {
  static const double kStepsPerLog = 1.0 / std::log(1.1);
  const std::size_t last = limits.size() - 1, zero = limits.size() / 2;
  std::size_t guess = zero;
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e-12) {
    const double k = std::min(std::log(magnitude * 1e12) * kStepsPerLog, double(zero));
    const auto steps = static_cast<std::size_t>(k);
    guess = value > 0 ? std::min(zero + 2 + steps, last) : zero - std::min(steps, zero);
  }
  while (guess > 0 && limits[guess - 1] > value) --guess;
  while (guess < limits.size() && limits[guess] <= value) ++guess;
  return std::min(guess, last);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SummaryWriter. Events are serialized outside the lock and appended to the TFRecordWriter's
// buffer under `mu`. Flushing (the TFRecordWriter's write to the file, then fsync on a second
// descriptor of the same file) is serialized by `sync_mu`, and the fsync runs without `mu` so
// that adders do not wait for the disk. Lock order: close_mu, sync_mu, mu.

struct SummaryWriter::Impl {
  std::string path;
  SummaryWriterOptions options;
  int sync_fd = -1;  // the file, opened to fsync it; owned

  std::mutex close_mu;
  std::mutex sync_mu;
  std::mutex mu;
  std::condition_variable wake;  // the flusher waits on it
  std::unique_ptr<TFRecordWriter> writer;
  int64_t pending = 0;  // events added since the last flush
  SteadyClock::time_point first_pending{};
  bool flush_requested = false;
  bool stopping = false;
  bool closed = false;
  std::string failure;  // the first I/O error; the writer is unusable after it
  std::thread flusher;

  ~Impl() {
    if (sync_fd >= 0) ::close(sync_fd);
  }

  // Requires mu.
  void check_usable() const {
    if (!failure.empty())
      throw Error(failure + " (the SummaryWriter is unusable after this error)");
    if (closed) throw Error(path + ": an event was added to a SummaryWriter after close()");
  }

  void write(const tf::Event& event) {
    const std::string record = event.SerializeAsString();
    std::lock_guard<std::mutex> lock(mu);
    check_usable();
    try {
      writer->write(record);
    } catch (const std::exception& e) {
      failure = e.what();
      throw;
    }
    if (pending++ == 0) {
      first_pending = SteadyClock::now();
      if (options.flush_secs > 0) wake.notify_one();
    }
    if (options.flush_events > 0 && pending >= options.flush_events && !flush_requested) {
      flush_requested = true;
      wake.notify_one();
    }
  }

  // Flushes and fsyncs; with `only_if_pending`, does nothing when no event is pending. Does
  // nothing after close.
  void flush(bool only_if_pending) {
    std::lock_guard<std::mutex> sync(sync_mu);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return;
      if (!failure.empty()) throw Error(failure);
      flush_requested = false;
      if (only_if_pending && pending == 0) return;
      pending = 0;
      try {
        writer->flush();
      } catch (const std::exception& e) {
        failure = e.what();
        throw;
      }
    }
    // Pipes and character devices report EINVAL: there is nothing to sync.
    if (::fsync(sync_fd) != 0 && errno != EINVAL) {
      const int err = errno;
      std::lock_guard<std::mutex> lock(mu);
      failure = path + ": fsync failed: " + errno_text(err);
      throw Error(failure);
    }
  }

  SteadyClock::duration flush_period() const {
    return std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(options.flush_secs));
  }

  void run_flusher() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      if (!failure.empty()) {
        wake.wait(lock);
        continue;
      }
      const bool timed = options.flush_secs > 0 && pending > 0;
      const SteadyClock::time_point deadline = first_pending + flush_period();
      if (flush_requested || (timed && SteadyClock::now() >= deadline)) {
        lock.unlock();
        try {
          flush(/*only_if_pending=*/true);
        } catch (const std::exception&) {
          // Recorded in `failure`, which the next call on the writer throws.
        }
        lock.lock();
        continue;
      }
      if (timed) {
        wake.wait_until(lock, deadline);
      } else {
        wake.wait(lock);
      }
    }
  }

  void close() {
    std::lock_guard<std::mutex> closing(close_mu);
    if (flusher.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
      }
      wake.notify_all();
      flusher.join();
    }
    std::lock_guard<std::mutex> sync(sync_mu);
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return;
    closed = true;
    const int fd = sync_fd;
    sync_fd = -1;
    ::close(fd);
    if (!failure.empty()) {
      writer.reset();  // its own close error would only repeat the failure
      throw Error(failure);
    }
    try {
      writer->close();  // flushes and fsyncs
    } catch (const std::exception& e) {
      failure = e.what();
      throw;
    }
  }
};

SummaryWriter::SummaryWriter(const std::string& log_dir, const std::string& filename_suffix,
                             const SummaryWriterOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (filename_suffix.find('/') != std::string::npos) {
    throw InvalidArgument("SummaryWriter: filename_suffix '" + filename_suffix +
                          "' contains '/'; it is appended to the event file's name");
  }
  if (options.flush_events < 0) {
    throw InvalidArgument("SummaryWriter: flush_events is " + std::to_string(options.flush_events) +
                          "; use a positive count, or 0 to flush only by time");
  }
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  if (ec) {
    throw Error(log_dir + ": cannot create the summary log directory: " + ec.message());
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(std::time(nullptr)));
  path_ = (fs::path(log_dir) /
           ("events.out.tfevents." + std::string(seconds) + "." + hostname() + filename_suffix))
              .string();

  Impl& impl = *impl_;
  impl.path = path_;
  impl.options = options;
  // O_EXCL: never truncate another writer's file of the same second.
  impl.sync_fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (impl.sync_fd < 0) {
    const int err = errno;
    std::string message = path_ + ": cannot create the event file: " + errno_text(err);
    if (err == EEXIST) {
      message +=
          " (another SummaryWriter in this directory started in the same second; give "
          "each a different filename_suffix)";
    }
    throw Error(message);
  }
  impl.writer = std::make_unique<TFRecordWriter>(path_, Compression::kNone);

  tf::Event first;
  first.set_wall_time(now_seconds());
  first.set_file_version(kFileVersion);
  first.mutable_source_metadata()->set_writer("trainyard");
  impl.write(first);
  impl.flush(/*only_if_pending=*/false);

  if (options.flush_events > 0 || options.flush_secs > 0) {
    impl.flusher = std::thread([&impl] { impl.run_flusher(); });
  }
}

SummaryWriter::~SummaryWriter() {
  try {
    impl_->close();
  } catch (const std::exception&) {
    // Documented: errors on an implicit close are lost.
  }
}

void SummaryWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  check_tag("add_scalar", tag);
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  impl_->write(event);
}

void SummaryWriter::add_histogram(std::string_view tag, std::span<const double> values,
                                  int64_t step) {
  check_tag("add_histogram", tag);
  const std::vector<double>& limits = default_histogram_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  double min = limits.back();
  double max = -DBL_MAX;
  double sum = 0;
  double sum_squares = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double value = values[i];
    if (!std::isfinite(value)) {
      throw InvalidArgument("add_histogram(" + quoted(tag) + "): value " + std::to_string(i) +
                            " of " + std::to_string(values.size()) + " is " +
                            (std::isnan(value) ? "NaN"
                             : value > 0       ? "+inf"
                                               : "-inf") +
                            "; histograms take finite values only");
    }
    counts[default_bucket_of(value, limits)] += 1.0;
    min = std::min(min, value);
    max = std::max(max, value);
    sum += value;
    sum_squares += value * value;
  }

  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  tf::HistogramProto* histo = v->mutable_histo();
  histo->set_min(min);
  histo->set_max(max);
  histo->set_num(static_cast<double>(values.size()));
  histo->set_sum(sum);
  histo->set_sum_squares(sum_squares);
  for (std::size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0.0) {
      while (i < counts.size() && counts[i] <= 0.0) {
        end = limits[i];
        count = counts[i];
        ++i;
      }
    }
    histo->add_bucket_limit(end);
    histo->add_bucket(count);
  }
  impl_->write(event);
}

void SummaryWriter::add_text(std::string_view tag, std::string_view text, int64_t step) {
  check_tag("add_text", tag);
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  tf::SummaryMetadata* metadata = v->mutable_metadata();
  metadata->mutable_plugin_data()->set_plugin_name("text");
  metadata->set_data_class(tf::DATA_CLASS_TENSOR);
  tf::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(tf::DT_STRING);
  tensor->mutable_tensor_shape();  // rank 0
  tensor->add_string_val(std::string(text));
  impl_->write(event);
}

void SummaryWriter::add_image(std::string_view tag, int height, int width, int channels,
                              const uint8_t* pixels, int64_t step) {
  check_tag("add_image", tag);
  if (channels < 1 || channels > 4) {
    throw InvalidArgument("add_image(" + quoted(tag) + "): channels is " +
                          std::to_string(channels) +
                          "; use 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA)");
  }
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("add_image(" + quoted(tag) + "): the image is " + std::to_string(height) +
                          "x" + std::to_string(width) + " (height x width); both must be positive");
  }
  if (pixels == nullptr) {
    throw InvalidArgument("add_image(" + quoted(tag) + "): pixels is null");
  }
  tf::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tf::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  tf::Summary::Image* image = v->mutable_image();
  image->set_height(height);
  image->set_width(width);
  image->set_colorspace(channels);
  image->set_encoded_image_string(encode_png(tag, height, width, channels, pixels));
  impl_->write(event);
}

void SummaryWriter::add_event(const google::protobuf::Message& event) {
  const auto* own = dynamic_cast<const tf::Event*>(&event);
  tf::Event copy;
  if (own == nullptr) {
    if (!copy.ParseFromString(event.SerializeAsString())) {
      throw InvalidArgument(path_ + ": add_event was given a " + event.GetTypeName() +
                            " that does not parse as a tf.Event");
    }
    own = &copy;
  }
  if (own->wall_time() != 0) {
    impl_->write(*own);
    return;
  }
  tf::Event timed = *own;
  timed.set_wall_time(now_seconds());
  impl_->write(timed);
}

void SummaryWriter::flush() { impl_->flush(/*only_if_pending=*/false); }

void SummaryWriter::close() { impl_->close(); }

// ---------------------------------------------------------------------------------------------
// EventFileReader.

EventFileReader::EventFileReader(const std::string& path)
    : path_(path), reader_(std::make_unique<TFRecordReader>(path, Compression::kNone)) {}

EventFileReader::~EventFileReader() = default;

bool EventFileReader::next(google::protobuf::Message* event) {
  std::string record;
  const TFRecordReader::Result result = reader_->read(&record);
  partial_record_ = false;
  switch (result.kind) {
    case TFRecordReader::Result::kRecord:
      break;
    case TFRecordReader::Result::kEndOfFile:
      return false;
    case TFRecordReader::Result::kTruncated:
      // The writer is still appending this record: come back to its start next time.
      partial_record_ = true;
      reader_->seek(result.offset);
      return false;
    case TFRecordReader::Result::kCorrupt:
      throw DataLoss(result.message);
  }
  if (!event->ParseFromString(record)) {
    throw DataLoss(path_ + ": the record at byte offset " + std::to_string(result.offset) + " (" +
                   std::to_string(record.size()) + " bytes) does not parse as an Event");
  }
  return true;
}

uint64_t EventFileReader::offset() const { return reader_->offset(); }

std::vector<std::string> EventFileReader::list_event_files(const std::string& log_dir) {
  std::error_code ec;
  fs::directory_iterator it(log_dir, ec);
  if (ec) throw NotFound(log_dir + ": cannot list the summary log directory: " + ec.message());
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : it) {
    if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
    if (!entry.is_regular_file(ec)) continue;
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace trainyard
