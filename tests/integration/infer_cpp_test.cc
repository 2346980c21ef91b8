// libtrainyard_infer through its C++ wrapper (trainyard/infer.hpp) on the exports
// infer_exports.sh made: the library's predictions for every validation record equal what
// `trainyard predict` wrote for that export (the CSV with every class, printed to 6 digits, so
// within 1e-6); several threads running one session give the single-thread results; errors
// name what is wrong.
//
// usage: infer_cpp_test WORKDIR [gtest flags]   (WORKDIR: infer_exports.sh's)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/infer.hpp"
#include "trainyard/reader.h"
#include "trainyard/transform.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
namespace ti = trainyard::infer;

fs::path g_work;

// id -> the score of each class, from a predictions CSV of "id,c s c s ...".
std::map<std::string, std::vector<double>> read_predictions(const fs::path& csv,
                                                            std::size_t classes) {
  std::ifstream in(csv);
  EXPECT_TRUE(in.good()) << csv;
  std::string line;
  std::getline(in, line);  // header
  std::map<std::string, std::vector<double>> out;
  while (std::getline(in, line)) {
    const std::size_t comma = line.rfind(',');
    std::vector<double> scores(classes, std::nan(""));
    std::istringstream pairs(line.substr(comma + 1));
    std::size_t c = 0;
    double score = 0;
    while (pairs >> c >> score) {
      if (c < classes) scores[c] = score;
    }
    out[line.substr(0, comma)] = scores;
  }
  return out;
}

// The validation records of a pattern "DIR/PREFIX*", parsed by the export's eval reader and
// its preprocessing steps, as `trainyard predict` feeds them.
std::vector<ParsedRecord> records(const PluginRegistry& registry, const fs::path& export_dir,
                                  const fs::path& dir, const std::string& prefix) {
  const config::Pipeline pipeline = load_pipeline_config(export_dir / "pipeline.config");
  const config::InputReader& input = pipeline.eval_input_reader();
  std::map<std::string, OptionValue> params =
      plugin_params(input.reader(), "eval_input_reader.reader");
  params.emplace("num_classes", OptionValue(int64_t{pipeline.num_classes()}));
  auto reader = registry.create<Reader>(ClassKind::kReader, input.reader().class_(), params);
  const auto transforms = transforms_from_config(input.preprocessing_step(), "eval_input_reader");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<ParsedRecord> out;
  for (const std::string& file : files) {
    TFRecordReader tfrecord(file);
    std::string bytes;
    for (int64_t i = 0; tfrecord.read_or_throw(&bytes); ++i) {
      RecordLocation where{file, i};
      ParsedRecord record = reader->parse(bytes, where);
      ExampleRandom random(0);
      for (const auto& t : transforms) t->apply(record, random, where);
      out.push_back(std::move(record));
    }
  }
  return out;
}

// Every input the session declares, stacked over `records` ("num_frames" as i32).
struct Batch {
  std::map<std::string, std::vector<float>> floats;
  std::vector<int32_t> frames;
  std::vector<ti::Input> inputs;
};

Batch stack(const ti::Session& session, const std::vector<ParsedRecord>& records, std::size_t begin,
            std::size_t end) {
  Batch batch;
  for (const ti::TensorInfo& info : session.inputs()) {
    std::vector<int64_t> shape = info.shape;
    shape[0] = static_cast<int64_t>(end - begin);
    if (info.name == "num_frames") {
      for (std::size_t r = begin; r < end; ++r) {
        int32_t value = 0;
        std::memcpy(&value, records[r].features.at("num_frames").bytes.data(), sizeof(value));
        batch.frames.push_back(value);
      }
      batch.inputs.emplace_back(info.name, shape, batch.frames);
      continue;
    }
    // A record's feature, zero-padded to the declared shape: a reader may give only the leading
    // rows of a fixed first dimension (the frame reader's kept frames), as the core batches them.
    std::size_t per_record = 1;
    for (std::size_t d = 1; d < shape.size(); ++d) per_record *= static_cast<std::size_t>(shape[d]);
    std::vector<float>& values = batch.floats[info.name];
    for (std::size_t r = begin; r < end; ++r) {
      const ParsedFeature& f = records[r].features.at(info.name);
      if (f.bytes.size() > per_record * sizeof(float)) {
        throw std::runtime_error(info.name + " of a record is larger than the declared shape");
      }
      const std::size_t at = values.size();
      values.resize(at + per_record, 0.0f);
      std::memcpy(values.data() + at, f.bytes.data(), f.bytes.size());
    }
    batch.inputs.emplace_back(info.name, shape, values);
  }
  return batch;
}

void expect_equals_predict(const std::string& name, const fs::path& data_dir,
                           const std::string& prefix, std::size_t classes) {
  SCOPED_TRACE(name);
  const fs::path export_dir = g_work / (name + "_export");
  PluginRegistry registry(PluginRegistry::Settings{});
  const std::vector<ParsedRecord> parsed = records(registry, export_dir, data_dir, prefix);
  ASSERT_GE(parsed.size(), 3u);
  const auto expected = read_predictions(g_work / (name + ".csv"), classes);
  ASSERT_EQ(expected.size(), parsed.size());

  ti::Session session(export_dir.string());
  ASSERT_EQ(session.outputs().size(), 1u);
  EXPECT_EQ(session.outputs()[0].name, "predictions");
  EXPECT_EQ(session.outputs()[0].shape, (std::vector<int64_t>{-1, int64_t(classes)}));
  // One batch of every record, and the records one at a time.
  Batch all = stack(session, parsed, 0, parsed.size());
  const std::vector<float> batched = session.run(all.inputs);
  ASSERT_EQ(batched.size(), parsed.size() * classes);
  for (std::size_t r = 0; r < parsed.size(); ++r) {
    const auto it = expected.find(parsed[r].id);
    ASSERT_NE(it, expected.end()) << parsed[r].id << " is not in " << name << ".csv";
    Batch one = stack(session, parsed, r, r + 1);
    const std::vector<float> single = session.run(one.inputs);
    for (std::size_t c = 0; c < classes; ++c) {
      EXPECT_NEAR(batched[r * classes + c], it->second[c], 1e-6) << parsed[r].id << " class " << c;
      EXPECT_NEAR(single[c], it->second[c], 1e-6) << parsed[r].id << " class " << c << " alone";
    }
  }
}

TEST(InferLibrary, ImageClassifierGivesPredictsOutputs) {
  expect_equals_predict("lenet", g_work / "data", "shapes_validation_", 3);
}

TEST(InferLibrary, VideoLevelModelGivesPredictsOutputs) {
  expect_equals_predict("logistic", g_work / "yt8m", "validate-", 10);
}

TEST(InferLibrary, FrameLevelModelGivesPredictsOutputs) {
  expect_equals_predict("frames", g_work / "yt8m_frames", "validate-", 10);
}

// The raw records of a pattern "DIR/PREFIX*", serialized, with the ids the reader gives them.
std::vector<std::pair<std::string, std::string>> raw_records(const fs::path& dir,
                                                             const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& file : files) {
    TFRecordReader tfrecord(file);
    std::string bytes;
    while (tfrecord.read_or_throw(&bytes)) out.emplace_back(std::string(), bytes);
  }
  return out;
}

// RunExamples on the serialized validation records (one call for all) gives predict's CSV:
// the reader's parse and the eval preprocessing run inside the library. For an image
// classifier, RunImages on the decoded images (the reader's "image" before its preprocessing
// steps) gives the same.
void expect_examples_equal_predict(const std::string& name, const fs::path& data_dir,
                                   const std::string& prefix, std::size_t classes) {
  SCOPED_TRACE(name);
  const fs::path export_dir = g_work / (name + "_export");
  PluginRegistry registry(PluginRegistry::Settings{});
  const std::vector<ParsedRecord> parsed = records(registry, export_dir, data_dir, prefix);
  const auto raw = raw_records(data_dir, prefix);
  ASSERT_EQ(raw.size(), parsed.size());
  const auto expected = read_predictions(g_work / (name + ".csv"), classes);
  ti::Session session(export_dir.string());
  std::vector<std::string> serialized;
  for (const auto& [id, bytes] : raw) serialized.push_back(bytes);
  const ti::Outputs got = session.run_examples(serialized);
  const std::vector<float>& p = got.at("predictions");
  ASSERT_EQ(p.size(), parsed.size() * classes);
  for (std::size_t r = 0; r < parsed.size(); ++r) {
    const auto& want = expected.at(parsed[r].id);
    for (std::size_t c = 0; c < classes; ++c) {
      EXPECT_NEAR(p[r * classes + c], want[c], 1e-6) << parsed[r].id << " class " << c;
    }
  }
  if (session.inputs()[0].name != "image") return;
  // The decoded images: the reader's parse without the preprocessing steps.
  const config::Pipeline pipeline = load_pipeline_config(export_dir / "pipeline.config");
  const config::InputReader& input = pipeline.eval_input_reader();
  std::map<std::string, OptionValue> params =
      plugin_params(input.reader(), "eval_input_reader.reader");
  params.emplace("num_classes", OptionValue(int64_t{pipeline.num_classes()}));
  auto reader = registry.create<Reader>(ClassKind::kReader, input.reader().class_(), params);
  std::vector<ParsedRecord> decoded;
  std::vector<TyInferImage> images;
  for (std::size_t r = 0; r < raw.size(); ++r) {
    decoded.push_back(reader->parse(raw[r].second, RecordLocation{"raw", int64_t(r)}));
  }
  for (const ParsedRecord& record : decoded) {
    const ParsedFeature& image = record.features.at("image");
    images.push_back({reinterpret_cast<const uint8_t*>(image.bytes.data()), image.shape[0],
                      image.shape[1], image.shape[2]});
  }
  const std::vector<float> from_images = session.run_images(images).at("predictions");
  ASSERT_EQ(from_images.size(), p.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(from_images[i], p[i], 1e-6) << i;
}

TEST(InferLibrary, ExamplesAndImagesGivePredictsOutputs) {
  expect_examples_equal_predict("lenet", g_work / "data", "shapes_validation_", 3);
  expect_examples_equal_predict("logistic", g_work / "yt8m", "validate-", 10);
  expect_examples_equal_predict("frames", g_work / "yt8m_frames", "validate-", 10);
}

TEST(InferLibrary, ReportsInputsAndOutputs) {
  ti::Session lenet((g_work / "lenet_export").string());
  EXPECT_EQ(lenet.model_class(), "lenet");
  ASSERT_EQ(lenet.inputs().size(), 1u);
  EXPECT_EQ(lenet.inputs()[0].name, "image");
  EXPECT_EQ(lenet.inputs()[0].dtype, TY_INFER_FLOAT32);
  EXPECT_EQ(lenet.inputs()[0].shape, (std::vector<int64_t>{-1, 28, 28, 3}));
  ti::Session frames((g_work / "frames_export").string());
  EXPECT_EQ(frames.model_class(), "FrameLevelLogisticModel");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& info : frames.inputs()) shapes[info.name] = info.shape;
  // max_frames is the reader's default, 300: model_flags.json records no --max_frames (nor does
  // the starter code's), so predict reads the export with 300 frames too.
  EXPECT_EQ(shapes["features"], (std::vector<int64_t>{-1, 300, 32}));
  EXPECT_EQ(shapes["num_frames"], (std::vector<int64_t>{-1}));
}

// Four threads run `export_name` on examples of `shape` (batch 1 first) from one session, each
// example's predictions compared with what one thread got for it alone.
void expect_concurrent_runs_agree(const std::string& export_name, const std::string& input,
                                  const std::vector<int64_t>& shape) {
  SCOPED_TRACE(export_name);
  ti::Session session((g_work / export_name).string());
  constexpr int kExamples = 8, kThreads = 4, kRounds = 25;
  std::size_t size = 1;
  for (int64_t d : shape) size *= static_cast<std::size_t>(d);
  std::vector<std::vector<float>> inputs, expected;
  for (int e = 0; e < kExamples; ++e) {
    std::vector<float> x(size);
    for (std::size_t i = 0; i < size; ++i) x[i] = std::sin(0.37f * float(i + 1) * float(e + 1));
    expected.push_back(session.run({{input, shape, x}}));
    inputs.push_back(std::move(x));
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int round = 0; round < kRounds; ++round) {
          const int e = (t + round) % kExamples;
          const std::vector<float> got = session.run({{input, shape, inputs[e]}});
          for (std::size_t c = 0; c < got.size(); ++c) {
            if (std::fabs(got[c] - expected[e][c]) > 1e-6) ++mismatches[t];
          }
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

TEST(InferLibrary, ConcurrentRunsGiveTheSingleThreadResults) {
  expect_concurrent_runs_agree("logistic_export", "features", {1, 32});
  expect_concurrent_runs_agree("lenet_export", "image", {1, 28, 28, 3});
}

// The message of the Error `fn` throws, with its code.
template <class Fn>
std::pair<TyInferStatusCode, std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ti::Error& e) {
    return {e.code(), e.what()};
  }
  return {TY_INFER_OK, "(no error)"};
}

TEST(InferLibrary, ErrorsNameWhatIsWrong) {
  const std::string missing = (g_work / "no_such_export").string();
  auto [code, message] = error_of([&] { ti::Session s(missing); });
  EXPECT_EQ(code, TY_INFER_NOT_FOUND);
  EXPECT_NE(message.find(missing), std::string::npos) << message;

  ti::Session session((g_work / "logistic_export").string());
  const std::vector<float> x(32, 0.5f);
  std::tie(code, message) = error_of([&] { session.run({{"mean_rgb", {1, 32}, x}}); });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("no input named 'mean_rgb'"), std::string::npos) << message;
  EXPECT_NE(message.find("features"), std::string::npos) << message;

  std::tie(code, message) = error_of([&] { session.run({{"features", {2, 16}, x}}); });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'features' has shape [2, 16]; expected [-1, 32]"), std::string::npos)
      << message;

  // Images and records name the one that is wrong.
  ti::Session lenet((g_work / "lenet_export").string());
  const std::vector<uint8_t> pixels(28 * 28 * 4, 7);
  std::tie(code, message) = error_of([&] {
    lenet.run_images({{pixels.data(), 28, 28, 3}, {pixels.data(), 28, 28, 4}});
  });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("image 1 is u8 [28, 28, 4]; expected u8 [H, W, 3]"), std::string::npos)
      << message;
  std::tie(code, message) = error_of([&] { session.run_images({{pixels.data(), 28, 28, 3}}); });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("yields no u8 'image'"), std::string::npos) << message;
  const std::string good = raw_records(g_work / "yt8m", "validate-").at(0).second;
  std::tie(code, message) = error_of([&] {
    session.run_examples({good, std::string("\x0a\x03junk", 6)});
  });
  EXPECT_EQ(code, TY_INFER_DATA_LOSS) << message;
  EXPECT_NE(message.find("record 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainyard

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: infer_cpp_test WORKDIR (infer_exports.sh's)\n");
    return 2;
  }
  trainyard::g_work = argv[1];
  return RUN_ALL_TESTS();
}
