// libtrainyard_infer on SavedModels Trainyard wrote (`trainyard export --format saved_model`),
// through its C++ wrapper: each loads and gives exactly (bit for bit) the outputs of Trainyard's
// own export of the same checkpoint, made by infer_exports.sh and infer_detection_exports.sh
// (whose outputs infer_cpp_test and infer_detect_test check against `trainyard predict`): a LeNet
// image classifier (also one trained with moving averages, which the SavedModel's variables hold),
// a video-level and a frame-level YouTube-8M model, and SSD in the Object Detection API's layout
// (loaded by its export directory and by its saved_model/, and, moved, from the label map it
// carries). A SavedModel not written by Trainyard, a corrupt one and one with a file resolving
// outside its directory get errors naming them.
//
// usage: infer_saved_model_test WORKDIR DETECTION_WORKDIR [gtest flags]
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/core/tfrecord.h"
#include "trainyard/infer.hpp"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
namespace ti = trainyard::infer;

fs::path g_work, g_detection_work;

// The serialized records of the files "DIR/PREFIX*", in name order.
std::vector<std::string> raw_records(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const std::string& file : files) {
    TFRecordReader tfrecord(file);
    std::string bytes;
    while (tfrecord.read_or_throw(&bytes)) out.push_back(bytes);
  }
  return out;
}

void expect_same_infos(const std::vector<ti::TensorInfo>& got,
                       const std::vector<ti::TensorInfo>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name) << i;
    EXPECT_EQ(got[i].dtype, want[i].dtype) << want[i].name;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
  }
}

// Every output equal, bit for bit.
void expect_identical(const ti::Outputs& got, const ti::Outputs& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, values] : want) {
    const auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    ASSERT_FALSE(values.empty()) << name;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::memcmp(&it->second[i], &values[i], sizeof(float)) != 0) ++differ;
    }
    EXPECT_EQ(differ, 0u) << name << ": first values " << it->second[0] << " and " << values[0];
  }
}

// The SavedModel NAME_saved_model and the export NAME_export: the same model, inputs, outputs,
// and outputs on the validation records and on a made-up batch of the first input.
void expect_saved_model_equals_export(const std::string& name, const std::string& saved,
                                      const std::vector<std::string>& records) {
  SCOPED_TRACE(name);
  ASSERT_GE(records.size(), 3u);
  ti::Session want((g_work / (name + "_export")).string());
  ti::Session got((g_work / saved).string());
  EXPECT_EQ(got.model_class(), want.model_class());
  expect_same_infos(got.inputs(), want.inputs());
  expect_same_infos(got.outputs(), want.outputs());
  expect_identical(got.run_examples(records), want.run_examples(records));
  const ti::TensorInfo input = want.inputs()[0];
  ASSERT_EQ(input.dtype, TY_INFER_FLOAT32);
  std::vector<int64_t> shape = input.shape;
  shape[0] = 2;
  std::size_t size = 1;
  for (int64_t d : shape) size *= static_cast<std::size_t>(d);
  std::vector<float> x(size);
  for (std::size_t i = 0; i < size; ++i) x[i] = std::sin(0.37f * float(i + 1));
  expect_identical(got.run_all({{input.name, shape, x}}), want.run_all({{input.name, shape, x}}));
}

TEST(InferSavedModel, ClassifierGivesTheTrainyardExportsOutputs) {
  const auto records = raw_records(g_work / "data", "shapes_validation_");
  expect_saved_model_equals_export("lenet", "lenet_saved_model", records);
  // Moving averages: the SavedModel's variables are the averages, which the export reads from
  // the checkpoint's ExponentialMovingAverage slots.
  expect_saved_model_equals_export("lenet_ema", "lenet_ema_saved_model", records);
}

TEST(InferSavedModel, YouTube8MModelsGiveTheTrainyardExportsOutputs) {
  expect_saved_model_equals_export("logistic", "logistic_saved_model",
                                   raw_records(g_work / "yt8m", "validate-"));
  expect_saved_model_equals_export("frames", "frames_saved_model",
                                   raw_records(g_work / "yt8m_frames", "validate-"));
}

TEST(InferSavedModel, SsdInTheObjectDetectionApisLayoutGivesTheTrainyardExportsDetections) {
  const auto records = raw_records(g_detection_work / "ssd_data", "val-");
  ASSERT_EQ(records.size(), 4u);
  ti::Session want((g_detection_work / "ssd_export").string());
  const ti::Outputs expected = want.run_examples(records);
  float detections = 0;
  for (float n : expected.at("num_detections")) detections += n;
  EXPECT_GT(detections, 0.0f);
  for (const fs::path& dir : {g_detection_work / "ssd_saved_model",
                              g_detection_work / "ssd_saved_model" / "saved_model"}) {
    SCOPED_TRACE(dir.string());
    ti::Session got(dir.string());
    EXPECT_EQ(got.model_class(), "SSDMetaArch");
    expect_same_infos(got.inputs(), want.inputs());
    expect_same_infos(got.outputs(), want.outputs());
    expect_identical(got.run_examples(records), expected);
    // An image_tensor of two images of another size than the resizer's.
    std::vector<uint8_t> pixels(2 * 50 * 70 * 3);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 37) % 251);
    const std::vector<ti::Input> tensor{{"image_tensor", {2, 50, 70, 3}, pixels}};
    expect_identical(got.run_all(tensor), want.run_all(tensor));
  }
}

TEST(InferSavedModel, SsdSavedModelCarriesItsLabelMapAndReadsNothingOutside) {
  const fs::path saved = g_detection_work / "ssd_saved_model" / "saved_model";
  const fs::path asset = saved / "assets.extra" / "trainyard" / "eval_input_reader.label_map_path";
  auto text_of = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string label_map = text_of(g_detection_work / "ssd_data" / "label_map.pbtxt");
  ASSERT_FALSE(label_map.empty());
  EXPECT_EQ(text_of(asset), label_map);
  // A copy whose pipeline names a label map and data that do not exist here (as on another
  // machine) loads, from the label map beside its pipeline, and gives the same detections.
  const fs::path moved = g_detection_work / "ssd_saved_model_moved";
  fs::remove_all(moved);
  fs::copy(saved, moved, fs::copy_options::recursive);
  const fs::path config = moved / "assets.extra" / "trainyard" / "pipeline.config";
  std::string text = text_of(config);
  const std::string data = (g_detection_work / "ssd_data").string();
  ASSERT_NE(text.find(data), std::string::npos);
  for (std::size_t at; (at = text.find(data)) != std::string::npos;) {
    text.replace(at, data.size(), "/nonexistent/ssd_data");
  }
  std::ofstream(config, std::ios::trunc) << text;
  const auto records = raw_records(g_detection_work / "ssd_data", "val-");
  ti::Session want((g_detection_work / "ssd_export").string());
  ti::Session got(moved.string());
  expect_identical(got.run_examples(records), want.run_examples(records));
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

// A fresh copy of the LeNet SavedModel at g_work/saved_model_errors/NAME.
fs::path copy_of_lenet(const std::string& name) {
  const fs::path dir = g_work / "saved_model_errors" / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  fs::copy(g_work / "lenet_saved_model", dir, fs::copy_options::recursive);
  ti::Session loads(dir.string());  // the copy itself loads
  return dir;
}

void expect_error(const fs::path& dir, TyInferStatusCode code,
                  const std::vector<std::string>& phrases) {
  SCOPED_TRACE(dir.string());
  const auto [got, message] = error_of([&] { ti::Session s(dir.string()); });
  EXPECT_EQ(got, code) << message;
  for (const std::string& phrase : phrases) {
    EXPECT_NE(message.find(phrase), std::string::npos) << "'" << phrase << "' in: " << message;
  }
}

TEST(InferSavedModel, ForeignSavedModelIsRefusedNamingWhatIsMissing) {
  // TensorFlow's own SavedModels have no assets.extra/trainyard/pipeline.config.
  const fs::path foreign = copy_of_lenet("foreign");
  fs::remove_all(foreign / "assets.extra");
  expect_error(
      foreign, TY_INFER_NOT_FOUND,
      {foreign.string(), "not written by Trainyard", "assets.extra/trainyard/pipeline.config"});
  const fs::path no_variables = copy_of_lenet("no_variables");
  fs::remove_all(no_variables / "variables");
  expect_error(no_variables, TY_INFER_NOT_FOUND,
               {no_variables.string(), "variables/variables.index"});
  const fs::path empty = g_work / "saved_model_errors" / "empty";
  fs::create_directories(empty);
  expect_error(empty, TY_INFER_NOT_FOUND, {empty.string(), "saved_model.pb"});
}

TEST(InferSavedModel, CorruptSavedModelIsRefusedNamingTheFile) {
  const fs::path graph = copy_of_lenet("bad_graph");
  std::ofstream(graph / "saved_model.pb", std::ios::binary | std::ios::trunc) << "\xff\xff\xff\xff";
  expect_error(graph, TY_INFER_DATA_LOSS, {(graph / "saved_model.pb").string(), "does not parse"});
  const fs::path index = copy_of_lenet("bad_index");
  fs::resize_file(index / "variables" / "variables.index", 12);
  expect_error(index, TY_INFER_DATA_LOSS, {"variables.index"});
  const fs::path config = copy_of_lenet("bad_config");
  std::ofstream(config / "assets.extra" / "trainyard" / "pipeline.config", std::ios::trunc)
      << "model { class: \n";
  expect_error(config, TY_INFER_CONFIG_ERROR, {"pipeline.config"});
}

TEST(InferSavedModel, FilesOutsideTheDirectoryAreRefused) {
  // The pipeline, and the variables directory, as symlinks to a copy outside the SavedModel.
  const fs::path outside = copy_of_lenet("outside");
  const fs::path config = copy_of_lenet("config_link");
  const fs::path asset = config / "assets.extra" / "trainyard" / "pipeline.config";
  fs::remove(asset);
  fs::create_symlink(outside / "assets.extra" / "trainyard" / "pipeline.config", asset);
  expect_error(config, TY_INFER_INVALID_ARGUMENT, {asset.string(), "outside the SavedModel"});
  const fs::path variables = copy_of_lenet("variables_link");
  fs::remove_all(variables / "variables");
  fs::create_directory_symlink(outside / "variables", variables / "variables");
  expect_error(variables, TY_INFER_INVALID_ARGUMENT,
               {(variables / "variables").string(), "outside the SavedModel"});
  // A symlink inside the directory is followed.
  const fs::path inside = copy_of_lenet("inside_link");
  fs::rename(inside / "variables" / "variables.index", inside / "index.copy");
  fs::create_symlink("../index.copy", inside / "variables" / "variables.index");
  ti::Session loads(inside.string());
  EXPECT_EQ(loads.model_class(), "lenet");
}

}  // namespace
}  // namespace trainyard

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: infer_saved_model_test WORKDIR DETECTION_WORKDIR (infer_exports.sh's and "
                 "infer_detection_exports.sh's)\n");
    return 2;
  }
  trainyard::g_work = argv[1];
  trainyard::g_detection_work = argv[2];
  return RUN_ALL_TESTS();
}
