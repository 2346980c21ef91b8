// TensorBoard event files: naming, the file_version event, every field of scalar, histogram,
// text and image summaries read back, automatic flushing, concurrent writers, and reading a file
// while it is being appended to.
#include "trainyard/core/summary_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tf_python.h"
#include "trainyard/error.h"
#include "trainyard/wire/event.pb.h"
#include "trainyard/wire/summary.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SummaryWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("trainyard_summary_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

std::string host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<wire::tf::Event> read_all(const std::string& path) {
  EventFileReader reader(path);
  std::vector<wire::tf::Event> events;
  wire::tf::Event event;
  while (reader.next(&event)) events.push_back(event);
  EXPECT_FALSE(reader.partial_record()) << path;
  return events;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Polls `reader` until it has returned `want` events in total or `timeout` passes.
void poll_until(EventFileReader& reader, std::vector<wire::tf::Event>& seen, std::size_t want,
                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  wire::tf::Event event;
  while (seen.size() < want && std::chrono::steady_clock::now() < deadline) {
    while (reader.next(&event)) seen.push_back(event);
    if (seen.size() < want) std::this_thread::sleep_for(5ms);
  }
}

// The histogram TensorFlow's Histogram::Add + EncodeToProto produce, by linear search over the
// limits: bucket i counts limit[i - 1] <= v < limit[i]; runs of empty buckets collapse into one
// entry carrying the run's last limit.
struct ReferenceHistogram {
  std::vector<double> limits, counts;
};

ReferenceHistogram reference_histogram(const std::vector<double>& values) {
  const std::vector<double>& limits = default_histogram_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  for (double v : values) {
    std::size_t i = 0;
    while (i + 1 < limits.size() && !(v < limits[i])) ++i;
    counts[i] += 1;
  }
  ReferenceHistogram out;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (counts[i] == 0 && !out.counts.empty() && out.counts.back() == 0) {
      out.limits.back() = limits[i];
    } else {
      out.limits.push_back(limits[i]);
      out.counts.push_back(counts[i]);
    }
  }
  return out;
}

std::vector<uint8_t> decode_png(const std::string& png, png_uint_32 format, int* height, int* width,
                                png_uint_32* file_format) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png.data(), png.size())) {
    ADD_FAILURE() << "not a PNG: " << image.message;
    return {};
  }
  *file_format = image.format;
  *height = static_cast<int>(image.height);
  *width = static_cast<int>(image.width);
  image.format = format;
  std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    ADD_FAILURE() << "PNG decoding failed: " << image.message;
    return {};
  }
  return pixels;
}

TEST_F(SummaryWriterTest, FileIsNamedLikeTensorFlowsAndDirectoryIsCreated) {
  const fs::path log_dir = dir_ / "nested" / "train";
  const std::time_t before = std::time(nullptr);
  SummaryWriter writer(log_dir.string(), ".v2");
  const std::time_t after = std::time(nullptr);

  const fs::path path(writer.path());
  EXPECT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(path.parent_path(), log_dir);
  std::smatch match;
  const std::string name = path.filename().string();
  ASSERT_TRUE(std::regex_match(name, match, std::regex(R"(events\.out\.tfevents\.(\d{10})\.(.*))")))
      << name;
  const long long seconds = std::stoll(match[1]);
  EXPECT_GE(seconds, before);
  EXPECT_LE(seconds, after);
  EXPECT_EQ(match[2].str(), host() + ".v2");
  EXPECT_EQ(EventFileReader::list_event_files(log_dir.string()),
            std::vector<std::string>{writer.path()});
}

TEST_F(SummaryWriterTest, RefusesToTruncateAnExistingEventFile) {
  fs::create_directories(dir_);
  // Every name the writer could pick in the next few seconds already exists.
  const std::time_t now = std::time(nullptr);
  for (std::time_t t = now; t < now + 5; ++t) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(t));
    std::ofstream(dir_ / ("events.out.tfevents." + std::string(seconds) + "." + host())) << "x";
  }
  try {
    SummaryWriter writer(dir_.string());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("filename_suffix"), std::string::npos) << e.what();
  }
  for (const auto& entry : fs::directory_iterator(dir_)) EXPECT_EQ(fs::file_size(entry), 1u);
}

TEST_F(SummaryWriterTest, RejectsSuffixWithSlashAndNegativeFlushEvents) {
  EXPECT_THROW(SummaryWriter(dir_.string(), "a/b"), InvalidArgument);
  SummaryWriterOptions options;
  options.flush_events = -1;
  EXPECT_THROW(SummaryWriter(dir_.string(), "", options), InvalidArgument);
}

TEST_F(SummaryWriterTest, FirstEventIsFileVersionAndIsOnDiskAtOnce) {
  const double before = unix_now();
  SummaryWriter writer(dir_.string());
  const double after = unix_now();
  // Read while the writer is open and nothing else has been flushed.
  EventFileReader reader(writer.path());
  wire::tf::Event event;
  ASSERT_TRUE(reader.next(&event));
  EXPECT_EQ(event.what_case(), wire::tf::Event::kFileVersion);
  EXPECT_EQ(event.file_version(), "brain.Event:2");
  EXPECT_EQ(event.step(), 0);
  EXPECT_GE(event.wall_time(), before - 1e-3);
  EXPECT_LE(event.wall_time(), after + 1e-3);
  EXPECT_EQ(event.source_metadata().writer(), "trainyard");
  EXPECT_FALSE(reader.next(&event));
  EXPECT_FALSE(reader.partial_record());
}

TEST_F(SummaryWriterTest, DefaultBucketLimitsAreTensorFlows) {
  const std::vector<double>& limits = default_histogram_bucket_limits();
  // 1e-12 * 1.1^k < 1e20 for k = 0 .. 773: 774 limits a side, plus 0 and +-DBL_MAX.
  ASSERT_EQ(limits.size(), 2u * 774 + 3);
  const std::size_t zero = limits.size() / 2;
  EXPECT_EQ(limits.front(), -DBL_MAX);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_EQ(limits[zero], 0.0);
  EXPECT_EQ(limits[zero + 1], 1e-12);
  EXPECT_EQ(limits[zero - 1], -1e-12);
  double v = 1e-12;
  for (std::size_t i = zero + 1; i + 1 < limits.size(); ++i, v *= 1.1) {
    ASSERT_EQ(limits[i], v) << i;
    ASSERT_EQ(limits[limits.size() - 1 - i], -v) << i;
  }
  EXPECT_LT(limits[limits.size() - 2], 1e20);
  EXPECT_GE(limits[limits.size() - 2] * 1.1, 1e20);
}

TEST_F(SummaryWriterTest, ScalarsHistogramTextAndImageReadBackFieldByField) {
  const std::vector<double> values = {-3.5, -1e-13, 0.0, 0.0, 1e-12, 0.5, 1.0, 1.0, 2.0, 7e5};
  const std::string text = "**loss** went down\nline two";
  const int height = 3, width = 5, channels = 3;
  std::vector<uint8_t> pixels(height * width * channels);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 17 + 3);

  const double before = unix_now();
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    writer.add_scalar("loss", 0.25, 1);
    writer.add_scalar("loss", 0.125, 2);
    writer.add_scalar("accuracy/top1", 1.0 / 3.0, 2);
    writer.add_histogram("weights", values, 3);
    writer.add_text("notes", text, 4);
    writer.add_image("input", height, width, channels, pixels.data(), 5);
    writer.close();
  }
  const double after = unix_now();

  const std::vector<wire::tf::Event> events = read_all(path);
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].what_case(), wire::tf::Event::kSummary) << i;
    EXPECT_GE(events[i].wall_time(), before - 1e-3) << i;
    EXPECT_LE(events[i].wall_time(), after + 1e-3) << i;
    EXPECT_GE(events[i].wall_time(), events[i - 1].wall_time()) << i;
    ASSERT_EQ(events[i].summary().value_size(), 1) << i;
  }

  struct Scalar {
    std::string tag;
    int64_t step;
    float value;
  };
  const Scalar scalars[] = {
      {"loss", 1, 0.25f}, {"loss", 2, 0.125f}, {"accuracy/top1", 2, static_cast<float>(1.0 / 3.0)}};
  for (int i = 0; i < 3; ++i) {
    const wire::tf::Summary::Value& v = events[1 + i].summary().value(0);
    EXPECT_EQ(events[1 + i].step(), scalars[i].step);
    EXPECT_EQ(v.tag(), scalars[i].tag);
    EXPECT_EQ(v.value_case(), wire::tf::Summary::Value::kSimpleValue);
    EXPECT_EQ(v.simple_value(), scalars[i].value);
    EXPECT_FALSE(v.has_metadata());
  }

  {
    EXPECT_EQ(events[4].step(), 3);
    const wire::tf::Summary::Value& v = events[4].summary().value(0);
    EXPECT_EQ(v.tag(), "weights");
    ASSERT_EQ(v.value_case(), wire::tf::Summary::Value::kHisto);
    const wire::tf::HistogramProto& h = v.histo();
    EXPECT_EQ(h.num(), 10);
    EXPECT_EQ(h.min(), -3.5);
    EXPECT_EQ(h.max(), 7e5);
    double sum = 0, sum_squares = 0;
    for (double x : values) {
      sum += x;
      sum_squares += x * x;
    }
    EXPECT_EQ(h.sum(), sum);
    EXPECT_EQ(h.sum_squares(), sum_squares);
    const ReferenceHistogram ref = reference_histogram(values);
    EXPECT_EQ(std::vector<double>(h.bucket_limit().begin(), h.bucket_limit().end()), ref.limits);
    EXPECT_EQ(std::vector<double>(h.bucket().begin(), h.bucket().end()), ref.counts);
    // Hand-checked: -1e-13 is in [-1e-12, 0); both zeros in [0, 1e-12); 1e-12 in the next bucket.
    const std::vector<double> limits(h.bucket_limit().begin(), h.bucket_limit().end());
    const auto at = [&](double limit) {
      const auto it = std::find(limits.begin(), limits.end(), limit);
      return it == limits.end() ? -1.0 : h.bucket(static_cast<int>(it - limits.begin()));
    };
    const std::vector<double>& all = default_histogram_bucket_limits();
    const std::size_t zero = all.size() / 2;
    EXPECT_EQ(at(0.0), 1);
    EXPECT_EQ(at(1e-12), 2);
    EXPECT_EQ(at(all[zero + 2]), 1);
    EXPECT_EQ(h.bucket_limit(h.bucket_limit_size() - 1), DBL_MAX);
    EXPECT_EQ(h.bucket(h.bucket_size() - 1), 0);
    double total = 0;
    for (double c : h.bucket()) total += c;
    EXPECT_EQ(total, 10);
  }

  {
    EXPECT_EQ(events[5].step(), 4);
    const wire::tf::Summary::Value& v = events[5].summary().value(0);
    EXPECT_EQ(v.tag(), "notes");
    ASSERT_EQ(v.value_case(), wire::tf::Summary::Value::kTensor);
    EXPECT_EQ(v.tensor().dtype(), wire::tf::DT_STRING);
    EXPECT_TRUE(v.tensor().has_tensor_shape());
    EXPECT_EQ(v.tensor().tensor_shape().dim_size(), 0);
    EXPECT_FALSE(v.tensor().tensor_shape().unknown_rank());
    ASSERT_EQ(v.tensor().string_val_size(), 1);
    EXPECT_EQ(v.tensor().string_val(0), text);
    EXPECT_EQ(v.metadata().plugin_data().plugin_name(), "text");
    EXPECT_EQ(v.metadata().plugin_data().content(), "");
    EXPECT_EQ(v.metadata().data_class(), wire::tf::DATA_CLASS_TENSOR);
  }

  {
    EXPECT_EQ(events[6].step(), 5);
    const wire::tf::Summary::Value& v = events[6].summary().value(0);
    EXPECT_EQ(v.tag(), "input");
    ASSERT_EQ(v.value_case(), wire::tf::Summary::Value::kImage);
    EXPECT_EQ(v.image().height(), height);
    EXPECT_EQ(v.image().width(), width);
    EXPECT_EQ(v.image().colorspace(), 3);
    int h = 0, w = 0;
    png_uint_32 file_format = 0;
    const std::vector<uint8_t> decoded =
        decode_png(v.image().encoded_image_string(), PNG_FORMAT_RGB, &h, &w, &file_format);
    EXPECT_EQ(h, height);
    EXPECT_EQ(w, width);
    EXPECT_EQ(file_format, static_cast<png_uint_32>(PNG_FORMAT_RGB));
    EXPECT_EQ(decoded, pixels);
  }
}

TEST_F(SummaryWriterTest, HistogramEdgeCasesMatchTensorFlow) {
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    writer.add_histogram("zero", std::vector<double>{0.0}, 1);
    writer.add_histogram("empty", std::span<const double>(), 2);
    writer.add_histogram("extremes", std::vector<double>{-DBL_MAX, DBL_MAX, 1e30, -1e30}, 3);
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 100.0);
    std::vector<double> random(1000);
    for (double& x : random) x = normal(rng);
    writer.add_histogram("random", random, 4);
    const std::vector<double> bad = {1.0, std::nan("")};
    try {
      writer.add_histogram("bad", bad, 5);
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'bad'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("value 1 "), std::string::npos) << e.what();
    }
    EXPECT_THROW(writer.add_histogram("inf", std::vector<double>{INFINITY}, 5), InvalidArgument);
    writer.close();

    const std::vector<wire::tf::Event> events = read_all(path);
    ASSERT_EQ(events.size(), 5u);  // nothing was written for the rejected histograms
    const wire::tf::HistogramProto& zero = events[1].summary().value(0).histo();
    EXPECT_EQ(std::vector<double>(zero.bucket_limit().begin(), zero.bucket_limit().end()),
              (std::vector<double>{0.0, 1e-12, DBL_MAX}));
    EXPECT_EQ(std::vector<double>(zero.bucket().begin(), zero.bucket().end()),
              (std::vector<double>{0, 1, 0}));
    EXPECT_EQ(zero.min(), 0);
    EXPECT_EQ(zero.max(), 0);

    const wire::tf::HistogramProto& empty = events[2].summary().value(0).histo();
    EXPECT_EQ(empty.num(), 0);
    EXPECT_EQ(empty.min(), DBL_MAX);
    EXPECT_EQ(empty.max(), -DBL_MAX);
    EXPECT_EQ(empty.sum(), 0);
    EXPECT_EQ(empty.sum_squares(), 0);
    ASSERT_EQ(empty.bucket_limit_size(), 1);
    EXPECT_EQ(empty.bucket_limit(0), DBL_MAX);
    EXPECT_EQ(empty.bucket(0), 0);

    // -DBL_MAX and -1e30 fall in [-DBL_MAX, limit[1]) (bucket 0, below -DBL_MAX, stays empty);
    // 1e30 and DBL_MAX in the last bucket.
    const wire::tf::HistogramProto& extremes = events[3].summary().value(0).histo();
    ASSERT_GE(extremes.bucket_size(), 4);
    EXPECT_EQ(extremes.bucket_limit(0), -DBL_MAX);
    EXPECT_EQ(extremes.bucket(0), 0);
    EXPECT_EQ(extremes.bucket_limit(1), default_histogram_bucket_limits()[1]);
    EXPECT_EQ(extremes.bucket(1), 2);
    EXPECT_EQ(extremes.bucket_limit(extremes.bucket_limit_size() - 1), DBL_MAX);
    EXPECT_EQ(extremes.bucket(extremes.bucket_size() - 1), 2);
    EXPECT_EQ(extremes.min(), -DBL_MAX);
    EXPECT_EQ(extremes.max(), DBL_MAX);

    const wire::tf::HistogramProto& rand = events[4].summary().value(0).histo();
    const ReferenceHistogram ref = reference_histogram(random);
    EXPECT_EQ(std::vector<double>(rand.bucket_limit().begin(), rand.bucket_limit().end()),
              ref.limits);
    EXPECT_EQ(std::vector<double>(rand.bucket().begin(), rand.bucket().end()), ref.counts);
  }
}

// Every default limit, the doubles just below and above it, and values spread over the whole
// range of magnitudes with both signs: each lands in the bucket of the linear search (the
// writer finds buckets from a logarithm's guess and a walk over the limits).
TEST_F(SummaryWriterTest, HistogramBucketsAtAndBesideEveryLimitMatchTheLinearSearch) {
  std::vector<double> values;
  for (double limit : default_histogram_bucket_limits()) {
    for (double v : {std::nextafter(limit, -INFINITY), limit, std::nextafter(limit, INFINITY)}) {
      if (std::isfinite(v)) values.push_back(v);
    }
  }
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exponent(-320.0, 308.0);
  for (int i = 0; i < 20000; ++i) {
    const double v = std::pow(10.0, exponent(rng));
    values.push_back(i % 2 == 0 ? v : -v);
  }
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    writer.add_histogram("limits", values, 1);
    writer.close();
  }
  const std::vector<wire::tf::Event> events = read_all(path);
  ASSERT_EQ(events.size(), 2u);
  const wire::tf::HistogramProto& h = events[1].summary().value(0).histo();
  const ReferenceHistogram ref = reference_histogram(values);
  EXPECT_EQ(std::vector<double>(h.bucket_limit().begin(), h.bucket_limit().end()), ref.limits);
  EXPECT_EQ(std::vector<double>(h.bucket().begin(), h.bucket().end()), ref.counts);
}

TEST_F(SummaryWriterTest, ImagesOfEveryChannelCountDecodeToTheirPixels) {
  struct Case {
    int channels;
    png_uint_32 format;
  };
  const Case cases[] = {
      {1, PNG_FORMAT_GRAY}, {2, PNG_FORMAT_GA}, {3, PNG_FORMAT_RGB}, {4, PNG_FORMAT_RGBA}};
  const int height = 17, width = 23;
  std::mt19937 rng(3);
  std::vector<std::vector<uint8_t>> images;
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    for (const Case& c : cases) {
      std::vector<uint8_t> pixels(height * width * c.channels);
      for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
      writer.add_image("image/" + std::to_string(c.channels), height, width, c.channels,
                       pixels.data(), c.channels);
      images.push_back(std::move(pixels));
    }
    const uint8_t pixel[5] = {};
    EXPECT_THROW(writer.add_image("five", 1, 1, 5, pixel, 0), InvalidArgument);
    EXPECT_THROW(writer.add_image("zero", 0, 1, 1, pixel, 0), InvalidArgument);
    EXPECT_THROW(writer.add_image("null", 1, 1, 1, nullptr, 0), InvalidArgument);
  }
  const std::vector<wire::tf::Event> events = read_all(path);
  ASSERT_EQ(events.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    const wire::tf::Summary::Image& image = events[1 + i].summary().value(0).image();
    EXPECT_EQ(image.colorspace(), cases[i].channels);
    int h = 0, w = 0;
    png_uint_32 file_format = 0;
    EXPECT_EQ(decode_png(image.encoded_image_string(), cases[i].format, &h, &w, &file_format),
              images[i])
        << cases[i].channels << " channels";
    EXPECT_EQ(file_format, cases[i].format);
    EXPECT_EQ(h, height);
    EXPECT_EQ(w, width);
  }
}

TEST_F(SummaryWriterTest, AddEventFillsInWallTime) {
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    wire::tf::Event start;
    start.set_step(100);
    start.mutable_session_log()->set_status(wire::tf::SessionLog::START);
    writer.add_event(start);
    wire::tf::Event dated = start;
    dated.set_wall_time(12345.5);
    writer.add_event(dated);
  }
  const std::vector<wire::tf::Event> events = read_all(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].session_log().status(), wire::tf::SessionLog::START);
  EXPECT_EQ(events[1].step(), 100);
  EXPECT_GE(events[1].wall_time(), events[0].wall_time());
  EXPECT_EQ(events[2].wall_time(), 12345.5);
}

TEST_F(SummaryWriterTest, CloseIsFinalAndIdempotent) {
  SummaryWriter writer(dir_.string());
  writer.add_scalar("x", 1, 1);
  writer.close();
  EXPECT_EQ(read_all(writer.path()).size(), 2u);
  EXPECT_THROW(writer.add_scalar("x", 2, 2), Error);
  EXPECT_NO_THROW(writer.flush());
  EXPECT_NO_THROW(writer.close());
  EXPECT_THROW(writer.add_scalar("", 2, 2), InvalidArgument);
}

TEST_F(SummaryWriterTest, FlushesAfterFlushEventsEvents) {
  SummaryWriterOptions options;
  options.flush_events = 3;
  options.flush_secs = 0;
  SummaryWriter writer(dir_.string(), "", options);
  EventFileReader reader(writer.path());
  std::vector<wire::tf::Event> seen;
  writer.add_scalar("x", 1, 1);
  writer.add_scalar("x", 2, 2);
  poll_until(reader, seen, 3, 300ms);
  EXPECT_EQ(seen.size(), 1u) << "two events are below flush_events and stay buffered";
  writer.add_scalar("x", 3, 3);
  poll_until(reader, seen, 4, 20s);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[3].step(), 3);
}

TEST_F(SummaryWriterTest, FlushesAfterFlushSecs) {
  SummaryWriterOptions options;
  options.flush_events = 0;
  options.flush_secs = 0.2;
  SummaryWriter writer(dir_.string(), "", options);
  EventFileReader reader(writer.path());
  std::vector<wire::tf::Event> seen;
  writer.add_scalar("x", 1, 7);
  poll_until(reader, seen, 2, 20s);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].step(), 7);
  // A second batch is flushed by the timer too.
  writer.add_scalar("x", 2, 8);
  poll_until(reader, seen, 3, 20s);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].step(), 8);
}

TEST_F(SummaryWriterTest, ConcurrentWritersLoseAndDuplicateNothing) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  SummaryWriterOptions options;
  options.flush_events = 7;
  options.flush_secs = 0.01;
  std::string path;
  {
    SummaryWriter writer(dir_.string(), "", options);
    path = writer.path();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&writer, t] {
        for (int i = 0; i < kPerThread; ++i) {
          writer.add_scalar("thread" + std::to_string(t), i, i);
          if (i % 50 == 0) writer.flush();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  const std::vector<wire::tf::Event> events = read_all(path);
  ASSERT_EQ(events.size(), 1u + kThreads * kPerThread);
  std::map<std::string, int64_t> next_step;
  for (std::size_t i = 1; i < events.size(); ++i) {
    const std::string& tag = events[i].summary().value(0).tag();
    EXPECT_EQ(events[i].step(), next_step[tag]++) << tag;
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next_step["thread" + std::to_string(t)], kPerThread);
}

// Appends the bytes of a finished event file to a new file in chunks of random sizes, polling
// a reader after each chunk, so that the file often ends inside a record header, its data or
// its data CRC.
void check_tailing_in_chunks(const std::string& source, const std::string& growing,
                             std::size_t max_chunk, uint32_t seed) {
  const std::vector<wire::tf::Event> expected = read_all(source);
  const std::string bytes = file_bytes(source);
  std::vector<std::size_t> record_ends;  // byte offset just past each record
  for (std::size_t off = 0; off + 8 <= bytes.size();) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[off + i]);
    off += 12 + length + 4;
    record_ends.push_back(off);
  }
  ASSERT_EQ(record_ends.size(), expected.size());
  ASSERT_EQ(record_ends.back(), bytes.size());
  const int fd = ::open(growing.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  EventFileReader reader(growing);
  std::vector<wire::tf::Event> seen;
  wire::tf::Event event;
  EXPECT_FALSE(reader.next(&event));
  EXPECT_FALSE(reader.partial_record());

  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> chunk(1, max_chunk);
  int partial_polls = 0;
  for (std::size_t pos = 0; pos < bytes.size();) {
    const std::size_t n = std::min(chunk(rng), bytes.size() - pos);
    ASSERT_EQ(::write(fd, bytes.data() + pos, n), static_cast<ssize_t>(n));
    pos += n;
    while (reader.next(&event)) seen.push_back(event);
    if (reader.partial_record()) ++partial_polls;
    // Every record wholly in the file so far has been returned, and nothing more.
    const std::size_t complete = static_cast<std::size_t>(
        std::upper_bound(record_ends.begin(), record_ends.end(), pos) - record_ends.begin());
    ASSERT_EQ(seen.size(), complete) << "after " << pos << " bytes";
    EXPECT_EQ(reader.partial_record(), complete == 0 ? pos > 0 : record_ends[complete - 1] < pos);
  }
  ::close(fd);
  EXPECT_FALSE(reader.next(&event));
  EXPECT_FALSE(reader.partial_record());
  EXPECT_GT(partial_polls, 0);
  ASSERT_EQ(seen.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(seen[i].SerializeAsString(), expected[i].SerializeAsString()) << "event " << i;
  }
}

TEST_F(SummaryWriterTest, TailingAFileBeingAppendedSeesEachEventOnce) {
  std::string source;
  {
    SummaryWriter writer((dir_ / "source").string());
    source = writer.path();
    for (int i = 0; i < 40; ++i) writer.add_scalar("loss", 1.0 / (i + 1), i);
    writer.add_text("notes", "text", 40);
    writer.add_histogram("h", std::vector<double>{1, 2, 3}, 41);
  }
  fs::create_directories(dir_ / "tail");
  check_tailing_in_chunks(source, (dir_ / "tail" / "small.tfevents").string(), 9, 1);
}

TEST_F(SummaryWriterTest, TailingSeesARecordLargerThanTheReadBufferOnce) {
  std::string source;
  {
    SummaryWriter writer((dir_ / "source").string());
    source = writer.path();
    // Random pixels do not compress: the PNG is over 256 KiB, the TFRecord reader's buffer.
    const int side = 300;
    std::vector<uint8_t> pixels(side * side * 4);
    std::mt19937 rng(11);
    for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
    writer.add_scalar("before", 1, 1);
    writer.add_image("noise", side, side, 4, pixels.data(), 2);
    writer.add_scalar("after", 1, 3);
  }
  ASSERT_GT(fs::file_size(source), 300u * 1024);
  fs::create_directories(dir_ / "tail");
  check_tailing_in_chunks(source, (dir_ / "tail" / "large.tfevents").string(), 40000, 2);
}

TEST_F(SummaryWriterTest, ReaderPollingALiveWriterSeesEachEventOnce) {
  constexpr int kEvents = 500;
  SummaryWriterOptions options;
  options.flush_events = 1;
  options.flush_secs = 0;
  SummaryWriter writer(dir_.string(), "", options);
  EventFileReader reader(writer.path());
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int i = 0; i < kEvents; ++i) {
      writer.add_scalar("loss", i, i);
      if (i % 3 == 0) writer.flush();
    }
    writer.close();
    done = true;
  });
  std::vector<wire::tf::Event> seen;
  wire::tf::Event event;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const bool finished = done.load();
    while (reader.next(&event)) seen.push_back(event);
    if (finished || std::chrono::steady_clock::now() > deadline) break;
  }
  producer.join();
  ASSERT_EQ(seen.size(), 1u + kEvents);
  for (int i = 0; i < kEvents; ++i) EXPECT_EQ(seen[1 + i].step(), i);
}

TEST_F(SummaryWriterTest, CorruptRecordThrowsDataLossNamingTheOffset) {
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    writer.add_scalar("loss", 1, 1);
    writer.add_scalar("loss", 2, 2);
  }
  std::string bytes = file_bytes(path);
  const std::size_t first = 12 + read_all(path)[0].ByteSizeLong() + 4;  // second record's offset
  bytes[first + 12 + 2] ^= 0x40;  // inside the second record's data
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EventFileReader reader(path);
  wire::tf::Event event;
  ASSERT_TRUE(reader.next(&event));
  try {
    reader.next(&event);
    FAIL() << "expected DataLoss";
  } catch (const DataLoss& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first)), std::string::npos) << e.what();
  }
  ASSERT_TRUE(reader.next(&event));  // moved past the bad record
  EXPECT_EQ(event.step(), 2);
}

TEST_F(SummaryWriterTest, TensorBoardsEventAccumulatorReadsTheScalars) {
  const test::TensorFlowPython python = test::tensorflow_python();
  if (python.status == test::TensorFlowPython::kSkip) GTEST_SKIP() << python.reason;
  ASSERT_EQ(python.status, 0) << python.reason;
  std::string path;
  {
    SummaryWriter writer(dir_.string());
    path = writer.path();
    writer.add_scalar("loss", 0.5, 1);
    writer.add_scalar("loss", 0.25, 2);
    writer.add_scalar("loss", 0.125, 10);
  }
  const fs::path script = dir_ / "read_scalars.py";
  std::ofstream(script) << "import sys\n"
                           "from tensorboard.backend.event_processing import event_accumulator\n"
                           "acc = event_accumulator.EventAccumulator(sys.argv[1])\n"
                           "acc.Reload()\n"
                           "for e in acc.Scalars('loss'):\n"
                           "    print(e.step, repr(e.value))\n";
  const std::string command = "TF_CPP_MIN_LOG_LEVEL=3 TF_ENABLE_ONEDNN_OPTS=0 '" +
                              python.interpreter + "' '" + script.string() + "' '" + path +
                              "' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << output;
  EXPECT_EQ(output, "1 0.5\n2 0.25\n10 0.125\n");
}

}  // namespace
}  // namespace trainyard
