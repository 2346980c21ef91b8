// Input-pipeline benchmark: Trainyard's InputPipeline with a YouTube-8M reader over TFRecord
// files, for comparison with TensorFlow's tf.data on the same files
// (tests/bench/peers/input_tfdata.py; tests/bench/peers/run_input_bench.sh runs both).
//
//   bench_input --pattern 'DIR/train-*.tfrecord' --reader frame|video --threads N
//               [--batch_size B] [--seconds S] [--num_classes K]
//
// Runs one epoch without shuffling (or, with --seconds S > 0, epochs until S seconds have
// passed) and prints one JSON line:
//   {"framework": "trainyard", "workload": ..., "threads": ..., "records_per_sec": ...,
//    "mb_per_sec": ..., "cpu_seconds": ...}
// mb_per_sec counts serialized record bytes (TFRecord payloads, 1 MB = 1e6 bytes); cpu_seconds
// is the process's user + system time over the timed part (pipeline start to last batch).
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainyard/core/host_malloc.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/registry.h"
#include "trainyard/reader.h"

namespace {

struct Args {
  std::string pattern;
  std::string reader = "video";
  int threads = 1;
  int64_t batch_size = 0;  // 0: 1024 video level, 64 frame level
  double seconds = 0;      // 0: one epoch
  int64_t num_classes = 3862;
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_input: " << message
            << "\nusage: bench_input --pattern GLOBS --reader frame|video --threads N "
               "[--batch_size B] [--seconds S] [--num_classes K]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--pattern") {
      args.pattern = value;
    } else if (flag == "--reader") {
      args.reader = value;
    } else if (flag == "--threads") {
      args.threads = std::stoi(value);
    } else if (flag == "--batch_size") {
      args.batch_size = std::stoll(value);
    } else if (flag == "--seconds") {
      args.seconds = std::stod(value);
    } else if (flag == "--num_classes") {
      args.num_classes = std::stoll(value);
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (args.pattern.empty()) usage("--pattern is required");
  if (args.reader != "frame" && args.reader != "video") usage("--reader is frame or video");
  if (args.threads < 1) usage("--threads must be >= 1");
  if (args.batch_size == 0) args.batch_size = args.reader == "frame" ? 64 : 1024;
  return args;
}

// Records and payload bytes of TFRecord files, from the length headers alone.
struct FileCensus {
  int64_t records = 0;
  int64_t payload_bytes = 0;
};

FileCensus census(const std::vector<std::string>& files) {
  FileCensus c;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) usage("cannot open " + file);
    unsigned char header[12];
    while (in.read(reinterpret_cast<char*>(header), sizeof header)) {
      uint64_t length = 0;
      for (int b = 7; b >= 0; --b) length = (length << 8) | header[b];  // little-endian
      c.records += 1;
      c.payload_bytes += static_cast<int64_t>(length);
      in.seekg(static_cast<std::streamoff>(length + 4), std::ios::cur);  // data, data crc
    }
  }
  return c;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

int run(const Args& args) {
  using trainyard::OptionValue;
  const std::vector<std::string> files = trainyard::expand_file_patterns(args.pattern);
  const FileCensus files_census = census(files);
  if (files_census.records == 0) usage("no records in " + args.pattern);
  const double bytes_per_record =
      static_cast<double>(files_census.payload_bytes) / static_cast<double>(files_census.records);

  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  std::map<std::string, OptionValue> reader_options = {
      {"num_classes", OptionValue(args.num_classes)},
      {"feature_sizes", OptionValue(std::vector<int64_t>{1024, 128})},
  };
  std::string reader_class;
  if (args.reader == "frame") {
    reader_class = "YT8MFrameFeatureReader";
    reader_options["feature_names"] = std::vector<std::string>{"rgb", "audio"};
    reader_options["max_frames"] = int64_t{300};
  } else {
    reader_class = "YT8MAggregatedFeatureReader";
    reader_options["feature_names"] = std::vector<std::string>{"mean_rgb", "mean_audio"};
  }
  std::shared_ptr<trainyard::Reader> reader = registry.create<trainyard::Reader>(
      trainyard::ClassKind::kReader, reader_class, reader_options);

  trainyard::InputOptions options;
  options.data_pattern = args.pattern;
  options.batch_size = args.batch_size;
  options.num_readers = args.threads;
  options.num_epochs = args.seconds > 0 ? 0 : 1;
  options.shuffle = false;  // tf.data side reads files in order without a shuffle buffer
  options.prefetch_batches = 2;
  options.allow_smaller_final_batch = true;

  using Clock = std::chrono::steady_clock;
  const double cpu_start = cpu_seconds();
  const Clock::time_point start = Clock::now();
  int64_t records = 0;
  int64_t checksum = 0;  // keeps the batches observably used
  {
    trainyard::InputPipeline pipeline(*reader, options);
    while (std::optional<trainyard::HostBatch> batch = pipeline.next()) {
      records += batch->size;
      checksum += static_cast<int64_t>(batch->features.at("features").bytes.size());
      pipeline.recycle(std::move(*batch));
      if (args.seconds > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() >= args.seconds) {
        break;
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_start;
  if (checksum == 0) usage("no feature bytes were produced");

  const double records_per_sec = static_cast<double>(records) / elapsed;
  std::printf(
      "{\"framework\": \"trainyard\", \"workload\": \"%s\", \"threads\": %d, \"batch_size\": "
      "%lld, \"records\": %lld, \"seconds\": %.3f, \"records_per_sec\": %.1f, \"mb_per_sec\": "
      "%.1f, \"cpu_seconds\": %.3f}\n",
      args.reader.c_str(), args.threads, static_cast<long long>(args.batch_size),
      static_cast<long long>(records), elapsed, records_per_sec,
      records_per_sec * bytes_per_record * 1e-6, cpu);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // As the host `trainyard` does at start (host_malloc.h).
  trainyard::tune_malloc_for_training();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_input: " << e.what() << "\n";
    return 1;
  }
}
