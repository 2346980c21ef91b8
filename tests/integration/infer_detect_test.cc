// libtrainyard_infer on detection models, through its C++ wrapper (trainyard/infer.hpp), on the
// exports infer_detection_exports.sh made (SSD with fixed_shape_resizer, Faster R-CNN with
// keep_aspect_ratio_resizer on images of their own sizes): the library's detections for the
// val records equal `trainyard predict`'s COCO results list of the same export within 1e-5
// (relative to the pixel size; predict prints six digits), whether the images come as
// serialized tf.Examples (RunExamples), decoded images (RunImages, DecodeImage) or an
// image_tensor (Run); concurrent runs give the single-thread detections; errors name the input;
// and trainyard-detect's detections.json equals the same list.
//
// usage: infer_detect_test WORKDIR TRAINYARD_DETECT [gtest flags]
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainyard/core/tfrecord.h"
#include "trainyard/example.h"
#include "trainyard/infer.hpp"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
namespace ti = trainyard::infer;

fs::path g_work;
std::string g_detect;

struct Detection {
  std::string image_id;
  int64_t category = 0;
  double bbox[4] = {0, 0, 0, 0};
  double score = 0;
};

// A COCO results list as predict and trainyard-detect write it: one object per line.
std::vector<Detection> read_results(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Detection> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"image_id\"") == std::string::npos) continue;
    Detection d;
    const std::size_t id = line.find("\"image_id\": ") + 12;
    const std::size_t id_end = line.find(", \"category_id\"");
    d.image_id = line.substr(id, id_end - id);
    if (!d.image_id.empty() && d.image_id.front() == '"') {
      d.image_id = d.image_id.substr(1, d.image_id.size() - 2);
    }
    const int read =
        std::sscanf(line.c_str() + id_end,
                    ", \"category_id\": %ld, \"bbox\": [%lf, %lf, %lf, %lf], "
                    "\"score\": %lf",
                    &d.category, &d.bbox[0], &d.bbox[1], &d.bbox[2], &d.bbox[3], &d.score);
    EXPECT_EQ(read, 6) << line;
    out.push_back(d);
  }
  return out;
}

struct ValImage {
  std::string id;
  std::string record;   // the serialized tf.Example
  std::string encoded;  // image/encoded
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // decoded by the library
};

std::vector<ValImage> val_images(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("val-", 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  const TyInferApi& api = ti::api();
  std::vector<ValImage> out;
  for (const std::string& file : files) {
    TFRecordReader tfrecord(file);
    std::string bytes;
    for (int64_t i = 0; tfrecord.read_or_throw(&bytes); ++i) {
      ValImage v;
      v.record = bytes;
      const ParsedExample example = parse_example(v.record, RecordLocation{file, i});
      v.id = std::string(example.features.find("image/source_id")->bytes().at(0));
      v.encoded = std::string(example.features.find("image/encoded")->bytes().at(0));
      ti::check(
          api.DecodeImage(v.encoded.data(), v.encoded.size(), &v.height, &v.width, nullptr, 0));
      v.pixels.resize(static_cast<std::size_t>(v.height * v.width * 3));
      ti::check(api.DecodeImage(v.encoded.data(), v.encoded.size(), &v.height, &v.width,
                                v.pixels.data(), v.pixels.size()));
      out.push_back(std::move(v));
    }
  }
  return out;
}

// The library's outputs as a COCO results list, in pixels of each image, as predict writes it.
std::vector<Detection> as_results(const ti::Outputs& out, const std::vector<ValImage>& images) {
  const std::vector<float>& boxes = out.at("detection_boxes");
  const std::vector<float>& scores = out.at("detection_scores");
  const std::vector<float>& classes = out.at("detection_classes");
  const std::vector<float>& counts = out.at("num_detections");
  EXPECT_EQ(counts.size(), images.size());
  const std::size_t m = scores.size() / images.size();
  std::vector<Detection> results;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const double h = static_cast<double>(images[i].height);
    const double w = static_cast<double>(images[i].width);
    for (std::size_t j = 0; j < static_cast<std::size_t>(counts[i]); ++j) {
      const float* b = boxes.data() + (i * m + j) * 4;
      Detection d;
      d.image_id = images[i].id;
      d.category = static_cast<int64_t>(classes[i * m + j]);
      d.bbox[0] = b[1] * w;
      d.bbox[1] = b[0] * h;
      d.bbox[2] = (b[3] - b[1]) * w;
      d.bbox[3] = (b[2] - b[0]) * h;
      d.score = scores[i * m + j];
      results.push_back(d);
    }
  }
  return results;
}

void expect_same(const std::vector<Detection>& got, const std::vector<Detection>& want,
                 const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].image_id, want[k].image_id) << "detection " << k;
    EXPECT_EQ(got[k].category, want[k].category) << "detection " << k;
    EXPECT_NEAR(got[k].score, want[k].score, 1e-5) << "detection " << k;
    for (int c = 0; c < 4; ++c) {
      EXPECT_NEAR(got[k].bbox[c], want[k].bbox[c], 1e-5 * std::max(1.0, std::fabs(want[k].bbox[c])))
          << "detection " << k << " bbox[" << c << "]";
    }
  }
}

std::vector<TyInferImage> c_images(const std::vector<ValImage>& images) {
  std::vector<TyInferImage> out;
  for (const ValImage& v : images) out.push_back({v.pixels.data(), v.height, v.width, 3});
  return out;
}

std::vector<std::string> records_of(const std::vector<ValImage>& images) {
  std::vector<std::string> out;
  for (const ValImage& v : images) out.push_back(v.record);
  return out;
}

TEST(InferDetection, ReportsTheObjectDetectionApisInputsAndOutputs) {
  ti::Session ssd((g_work / "ssd_export").string());
  EXPECT_EQ(ssd.model_class(), "SSDMetaArch");
  ASSERT_EQ(ssd.inputs().size(), 1u);
  EXPECT_EQ(ssd.inputs()[0].name, "image_tensor");
  EXPECT_EQ(ssd.inputs()[0].dtype, TY_INFER_UINT8);
  EXPECT_EQ(ssd.inputs()[0].shape, (std::vector<int64_t>{-1, -1, -1, 3}));
  const std::vector<ti::TensorInfo> outputs = ssd.outputs();
  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_EQ(outputs[0].name, "detection_boxes");
  EXPECT_EQ(outputs[1].name, "detection_scores");
  EXPECT_EQ(outputs[2].name, "detection_classes");
  EXPECT_EQ(outputs[3].name, "num_detections");
  // max_total_detections of the config.
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{-1, 100, 4}));
  EXPECT_EQ(outputs[3].shape, (std::vector<int64_t>{-1}));
}

TEST(InferDetection, SsdGivesPredictsDetections) {
  const std::vector<ValImage> images = val_images(g_work / "ssd_data");
  ASSERT_EQ(images.size(), 4u);
  const std::vector<Detection> want = read_results(g_work / "ssd.json");
  ti::Session session((g_work / "ssd_export").string());
  const ti::Outputs from_records = session.run_examples(records_of(images));
  expect_same(as_results(from_records, images), want, "RunExamples");
  const ti::Outputs from_images = session.run_images(c_images(images));
  expect_same(as_results(from_images, images), want, "RunImages");
  // One image_tensor of the four (all 96 x 96).
  std::vector<uint8_t> tensor;
  for (const ValImage& v : images) tensor.insert(tensor.end(), v.pixels.begin(), v.pixels.end());
  const ti::Outputs from_tensor =
      session.run_all({{"image_tensor", {4, images[0].height, images[0].width, 3}, tensor}});
  expect_same(as_results(from_tensor, images), want, "Run(image_tensor)");
  // tf.Examples give what the equivalent tensor gives.
  for (const auto& [name, values] : from_tensor) {
    ASSERT_EQ(from_records.at(name).size(), values.size()) << name;
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(from_records.at(name)[i], values[i], 1e-6) << name << "[" << i << "]";
    }
  }
  // Rows past num_detections: zero boxes and scores, class 1 (the padding's 0 plus the offset).
  const std::size_t valid = static_cast<std::size_t>(from_tensor.at("num_detections")[0]);
  if (valid < 100) {
    EXPECT_EQ(from_tensor.at("detection_scores")[valid], 0.0f);
    EXPECT_EQ(from_tensor.at("detection_classes")[valid], 1.0f);
  }
}

TEST(InferDetection, FasterRcnnGivesPredictsDetectionsForImagesOfTheirOwnSizes) {
  const std::vector<ValImage> images = val_images(g_work / "frcnn_data");
  ASSERT_EQ(images.size(), 3u);
  bool differ = false;
  for (const ValImage& v : images) differ = differ || v.height != images[0].height;
  for (const ValImage& v : images) differ = differ || v.width != images[0].width;
  EXPECT_TRUE(differ) << "the val images should have different sizes";
  const std::vector<Detection> want = read_results(g_work / "frcnn.json");
  ti::Session session((g_work / "frcnn_export").string());
  EXPECT_EQ(session.model_class(), "FasterRCNNMetaArch");
  // All three in one call: the config pads images to the largest (pad_to_largest).
  expect_same(as_results(session.run_examples(records_of(images)), images), want, "RunExamples");
  expect_same(as_results(session.run_images(c_images(images)), images), want, "RunImages");
  // One image_tensor per image: predict with batches of one image (Faster R-CNN's detections
  // depend on the batch's padded size).
  std::vector<Detection> one_by_one;
  for (const ValImage& v : images) {
    const auto got =
        as_results(session.run_all({{"image_tensor", {1, v.height, v.width, 3}, v.pixels}}), {v});
    one_by_one.insert(one_by_one.end(), got.begin(), got.end());
  }
  expect_same(one_by_one, read_results(g_work / "frcnn_single.json"),
              "Run(image_tensor) one image at a time");
}

// A fixed_shape_resizer brings images of any sizes to one (the eval reader's resize_image), so
// they share a call, each with what it gets alone.
TEST(InferDetection, SsdTakesImagesOfDifferingSizesInOneCall) {
  const std::vector<ValImage> images = val_images(g_work / "ssd_data");
  ValImage small = images[1];
  small.height = 50;
  small.width = 70;
  small.pixels.resize(50 * 70 * 3);
  for (std::size_t i = 0; i < small.pixels.size(); ++i) small.pixels[i] = uint8_t(i * 7 % 256);
  ti::Session session((g_work / "ssd_export").string());
  const ti::Outputs both = session.run_images(c_images({images[0], small}));
  const ti::Outputs first = session.run_images(c_images({images[0]}));
  const ti::Outputs second = session.run_images(c_images({small}));
  for (const auto& [name, values] : both) {
    const std::size_t half = values.size() / 2;
    ASSERT_EQ(first.at(name).size(), half) << name;
    for (std::size_t i = 0; i < half; ++i) {
      EXPECT_NEAR(values[i], first.at(name)[i], 1e-6) << name << "[" << i << "]";
      EXPECT_NEAR(values[half + i], second.at(name)[i], 1e-6) << name << "[" << half + i << "]";
    }
  }
}

TEST(InferDetection, ConcurrentRunsGiveTheSingleThreadDetections) {
  const std::vector<ValImage> images = val_images(g_work / "ssd_data");
  ti::Session session((g_work / "ssd_export").string());
  std::vector<ti::Outputs> expected;
  for (const ValImage& v : images) expected.push_back(session.run_images(c_images({v})));
  constexpr int kThreads = 4, kRounds = 6;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int round = 0; round < kRounds; ++round) {
          const std::size_t e = static_cast<std::size_t>(t + round) % images.size();
          const ti::Outputs got = session.run_images(c_images({images[e]}));
          if (got != expected[e]) ++mismatches[t];
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

template <class Fn>
std::pair<TyInferStatusCode, std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ti::Error& e) {
    return {e.code(), e.what()};
  }
  return {TY_INFER_OK, "(no error)"};
}

TEST(InferDetection, ErrorsNameTheInput) {
  ti::Session session((g_work / "ssd_export").string());
  const std::vector<uint8_t> gray(8 * 8, 100);
  const std::vector<uint8_t> rgb(8 * 8 * 3, 100);
  auto [code, message] = error_of([&] { session.run_all({{"image", {1, 8, 8, 3}, rgb}}); });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'image_tensor'"), std::string::npos) << message;
  std::tie(code, message) = error_of([&] {
    session.run_images({{rgb.data(), 8, 8, 3}, {gray.data(), 8, 8, 1}});
  });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("image 1 is u8 [8, 8, 1]"), std::string::npos) << message;
  std::tie(code, message) = error_of([&] {
    session.run_all({{"image_tensor", {1, 8, 8, 3}, gray}});
  });
  EXPECT_EQ(code, TY_INFER_INVALID_ARGUMENT);
  EXPECT_NE(message.find("needs 192 bytes"), std::string::npos) << message;
  int64_t h = 0, w = 0;
  const std::string junk = "\x89PNG\r\n\x1a\n truncated";
  TyInferStatus* status = ti::api().DecodeImage(junk.data(), junk.size(), &h, &w, nullptr, 0);
  EXPECT_EQ(TyInferGetStatusCode(status), TY_INFER_DATA_LOSS) << TyInferGetStatusMessage(status);
  TyInferReleaseStatus(status);
}

// trainyard-detect on the val images written as files: its detections.json is predict's list
// (the image ids are the files' names), and it draws each image.
TEST(InferDetection, TrainyardDetectWritesTheLibrarysDetections) {
  const std::vector<ValImage> images = val_images(g_work / "ssd_data");
  const fs::path in = g_work / "detect_images";
  const fs::path out = g_work / "detect_output";
  fs::remove_all(in);
  fs::remove_all(out);
  fs::create_directories(in);
  std::string command = g_detect + " " + (g_work / "ssd_export").string();
  for (const ValImage& v : images) {
    const bool png = v.encoded.rfind("\x89PNG", 0) == 0;
    const fs::path file = in / (v.id + (png ? ".png" : ".jpg"));
    std::ofstream(file, std::ios::binary) << v.encoded;
    command += " " + file.string();
  }
  command += " --output_dir " + out.string() + " --label_map " +
             (g_work / "ssd_data" / "label_map.pbtxt").string() + " --min_score_threshold 0.3";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  expect_same(read_results(out / "detections.json"), read_results(g_work / "ssd.json"),
              "trainyard-detect");
  for (const ValImage& v : images) {
    int64_t h = 0, w = 0;
    std::ifstream drawn(out / (v.id + ".png"), std::ios::binary);
    ASSERT_TRUE(drawn.good()) << v.id << ".png";
    const std::string bytes((std::istreambuf_iterator<char>(drawn)), {});
    ti::check(ti::api().DecodeImage(bytes.data(), bytes.size(), &h, &w, nullptr, 0));
    EXPECT_EQ(h, v.height);
    EXPECT_EQ(w, v.width);
    std::vector<uint8_t> pixels(static_cast<std::size_t>(h * w * 3));
    ti::check(
        ti::api().DecodeImage(bytes.data(), bytes.size(), &h, &w, pixels.data(), pixels.size()));
    EXPECT_NE(pixels, v.pixels) << v.id << ": no box was drawn";
  }
}

}  // namespace
}  // namespace trainyard

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: infer_detect_test WORKDIR TRAINYARD_DETECT\n");
    return 2;
  }
  trainyard::g_work = argv[1];
  trainyard::g_detect = argv[2];
  return RUN_ALL_TESTS();
}
