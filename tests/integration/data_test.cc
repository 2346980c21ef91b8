// `trainyard data`: the synthetic YouTube-8M data has the real layout and learnable structure,
// inspect counts and checks records, convert-mnist writes image Examples TensorFlow's
// decoders read, and convert-images writes TF-Slim's layout that ImageClassificationReader reads
// back.
#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data_tools.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/reader.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("trainyard_data_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

PluginRegistry& registry() {
  static PluginRegistry r([] {
    PluginRegistry::Settings s;
    s.use_environment = false;
    return s;
  }());
  return r;
}

TEST(SynthYt8mTest, VideoLevelFilesHaveTheYouTube8MLayout) {
  fs::path dir = temp_dir("video");
  app::SynthYt8mOptions o;
  o.output_dir = dir.string();
  o.num_videos = 40;
  o.num_classes = 50;
  o.num_shards = 2;
  o.feature_sizes = {16, 4};
  app::SynthYt8mSummary s = app::synth_yt8m(o);
  EXPECT_TRUE(fs::exists(dir / "train-0000.tfrecord"));
  EXPECT_TRUE(fs::exists(dir / "train-0001.tfrecord"));
  EXPECT_TRUE(fs::exists(dir / "validate-0000.tfrecord"));
  EXPECT_EQ(s.validate_videos, 8);

  TFRecordReader reader((dir / "train-0000.tfrecord").string());
  std::string record;
  ASSERT_TRUE(reader.read_or_throw(&record));
  wire::tf::Example example;
  ASSERT_TRUE(example.ParseFromString(record));
  const auto& f = example.features().feature();
  EXPECT_EQ(f.at("id").bytes_list().value_size(), 1);
  EXPECT_GE(f.at("labels").int64_list().value_size(), 1);
  for (int64_t label : f.at("labels").int64_list().value()) EXPECT_LT(label, 50);
  EXPECT_EQ(f.at("mean_rgb").float_list().value_size(), 16);
  EXPECT_EQ(f.at("mean_audio").float_list().value_size(), 4);

  std::ostringstream out;
  app::InspectSummary summary = app::inspect_records((dir / "*.tfrecord").string(), 1, out);
  EXPECT_EQ(summary.records, 48);
  EXPECT_EQ(summary.corrupt, 0);
  EXPECT_NE(out.str().find("mean_rgb: float[16]"), std::string::npos) << out.str();
  fs::remove_all(dir);
}

// One flipped bit in a record's length field used to make inspect print the same error line
// forever (the reader stayed at the record); now the corruption is reported once, the file's
// earlier records are counted and inspect goes on to the next file.
TEST(InspectTest, FlippedLengthBitIsReportedOnceAndInspectEnds) {
  fs::path dir = temp_dir("flipped");
  for (const char* name : {"a.tfrecord", "b.tfrecord"}) {
    TFRecordWriter writer((dir / name).string());
    for (int i = 0; i < 3; ++i) writer.write("record " + std::to_string(i));
    writer.close();
  }
  const fs::path bad = dir / "a.tfrecord";
  const uint64_t second = 12 + 8 + 4;  // offset of record 1 ("record 0" is 8 bytes)
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(second + 1));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x04);
    f.seekp(static_cast<std::streamoff>(second + 1));
    f.write(&c, 1);
  }
  std::ostringstream out;
  app::InspectSummary summary = app::inspect_records((dir / "*.tfrecord").string(), 0, out);
  EXPECT_EQ(summary.files, 2);
  EXPECT_EQ(summary.records, 4);  // one before the damage, three in b.tfrecord
  EXPECT_EQ(summary.corrupt, 1);
  const std::string text = out.str();
  const std::string error = "ERROR " + bad.string() + ": corrupt record at byte offset " +
                            std::to_string(second) + ": length CRC mismatch";
  EXPECT_NE(text.find(error), std::string::npos) << text;
  EXPECT_EQ(text.find(error, text.find(error) + 1), std::string::npos) << text;
  EXPECT_NE(text.find(bad.string() + ": 1 records"), std::string::npos) << text;
  fs::remove_all(dir);
}

TEST(SynthYt8mTest, FrameLevelFilesHoldQuantizedFrames) {
  fs::path dir = temp_dir("frame");
  app::SynthYt8mOptions o;
  o.output_dir = dir.string();
  o.num_videos = 5;
  o.num_classes = 10;
  o.num_shards = 1;
  o.frame_level = true;
  o.feature_sizes = {8, 2};
  o.min_frames = 3;
  o.max_frames = 6;
  app::synth_yt8m(o);
  TFRecordReader reader((dir / "train-0000.tfrecord").string());
  std::string record;
  ASSERT_TRUE(reader.read_or_throw(&record));
  wire::tf::SequenceExample example;
  ASSERT_TRUE(example.ParseFromString(record));
  EXPECT_EQ(example.context().feature().at("id").bytes_list().value_size(), 1);
  const auto& rgb = example.feature_lists().feature_list().at("rgb");
  const auto& audio = example.feature_lists().feature_list().at("audio");
  EXPECT_GE(rgb.feature_size(), 3);
  EXPECT_LE(rgb.feature_size(), 6);
  EXPECT_EQ(rgb.feature_size(), audio.feature_size());
  EXPECT_EQ(rgb.feature(0).bytes_list().value(0).size(), 8u);
  EXPECT_EQ(audio.feature(0).bytes_list().value(0).size(), 2u);
  fs::remove_all(dir);
}

TEST(SynthYt8mTest, ALogisticModelLearnsItClearlyAboveChance) {
  // Train a logistic regression on the synthetic training split through the real reader and
  // input pipeline, then measure Hit@1 on the validation split.
  fs::path dir = temp_dir("learn");
  app::SynthYt8mOptions o;
  o.output_dir = dir.string();
  o.num_videos = 1500;
  o.num_classes = 40;
  o.num_shards = 2;
  o.feature_sizes = {32, 8};
  o.seed = 3;
  app::synth_yt8m(o);

  std::map<std::string, OptionValue> reader_options = {
      {"feature_names", std::vector<std::string>{"mean_rgb", "mean_audio"}},
      {"feature_sizes", std::vector<int64_t>{32, 8}},
      {"num_classes", int64_t{40}}};
  auto reader =
      registry().create<Reader>(ClassKind::kReader, "YT8MAggregatedFeatureReader", reader_options);
  auto cpu = registry().create<Backend>(ClassKind::kBackend, "cpu");
  Generator init(1);
  Tensor w = ops::random_normal(*cpu, Shape{40, 40}, init, 0, 0.01);
  Tensor b = ops::zeros(*cpu, Shape{40});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  auto to_tensor = [&](const ParsedFeature& f) {
    return Tensor::from_host(*cpu, Shape(f.shape), f.dtype, f.bytes.data(), f.bytes.size());
  };
  InputOptions train;
  train.data_pattern = (dir / "train-*.tfrecord").string();
  train.batch_size = 100;
  train.num_epochs = 8;
  train.num_readers = 2;
  train.seed = 5;
  InputPipeline pipeline(*reader, train);
  while (auto batch = pipeline.next()) {
    Tensor x = ops::l2_normalize(to_tensor(batch->features.at("features")), 1);
    Tensor y = to_tensor(batch->features.at("labels"));
    Tensor logits = ops::matmul_bias_act(x, w, b);
    Tensor loss =
        ops::reduce_mean(ops::reduce_sum(ops::sigmoid_cross_entropy_with_logits(y, logits), {1}));
    std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{w, b});
    ops::apply_gradient_descent(w, g[0], 2.0);
    ops::apply_gradient_descent(b, g[1], 2.0);
  }
  InputOptions eval = train;
  eval.data_pattern = (dir / "validate-*.tfrecord").string();
  eval.num_epochs = 1;
  eval.shuffle = false;
  InputPipeline eval_pipeline(*reader, eval);
  double hits = 0, videos = 0;
  NoGradScope no_grad;
  while (auto batch = eval_pipeline.next()) {
    Tensor x = ops::l2_normalize(to_tensor(batch->features.at("features")), 1);
    std::vector<int64_t> top = ops::argmax(ops::matmul_bias_act(x, w, b), 1).to_vector<int64_t>();
    std::vector<float> labels = to_tensor(batch->features.at("labels")).to_vector<float>();
    for (std::size_t i = 0; i < top.size(); ++i) {
      hits += labels[i * 40 + static_cast<std::size_t>(top[i])];
      videos += 1;
    }
  }
  double hit_at_1 = hits / videos;
  // About 2.5 labels per video out of 40 classes: a random guess hits ~6% of the time.
  EXPECT_GT(hit_at_1, 0.5) << "Hit@1 " << hit_at_1 << " over " << videos << " videos";
  fs::remove_all(dir);
}

void write_idx(const fs::path& path, std::vector<uint32_t> header,
               const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  for (uint32_t v : header) {
    unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                          static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
    out.write(reinterpret_cast<char*>(b), 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

TEST(ConvertMnistTest, WritesPngImageExamplesWithLabels) {
  fs::path dir = temp_dir("mnist");
  std::vector<uint8_t> pixels(3 * 4 * 5);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 4);
  write_idx(dir / "images", {0x803, 3, 4, 5}, pixels);
  write_idx(dir / "labels", {0x801, 3}, {7, 0, 9});
  EXPECT_EQ(app::convert_mnist((dir / "images").string(), (dir / "labels").string(),
                               (dir / "out.tfrecord").string()),
            3);
  TFRecordReader reader((dir / "out.tfrecord").string());
  std::string record;
  std::vector<int64_t> labels;
  for (int i = 0; reader.read_or_throw(&record); ++i) {
    wire::tf::Example example;
    ASSERT_TRUE(example.ParseFromString(record));
    const auto& f = example.features().feature();
    labels.push_back(f.at("image/class/label").int64_list().value(0));
    EXPECT_EQ(f.at("image/format").bytes_list().value(0), "png");
    EXPECT_EQ(f.at("image/height").int64_list().value(0), 4);
    EXPECT_EQ(f.at("image/width").int64_list().value(0), 5);
    const std::string& png = f.at("image/encoded").bytes_list().value(0);
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    ASSERT_TRUE(png_image_begin_read_from_memory(&image, png.data(), png.size()));
    image.format = PNG_FORMAT_GRAY;
    std::vector<uint8_t> decoded(PNG_IMAGE_SIZE(image));
    ASSERT_TRUE(png_image_finish_read(&image, nullptr, decoded.data(), 0, nullptr));
    EXPECT_EQ(decoded,
              std::vector<uint8_t>(pixels.begin() + i * 20, pixels.begin() + (i + 1) * 20));
  }
  EXPECT_EQ(labels, (std::vector<int64_t>{7, 0, 9}));

  write_idx(dir / "short_labels", {0x801, 2}, {1, 2});
  try {
    app::convert_mnist((dir / "images").string(), (dir / "short_labels").string(),
                       (dir / "out2.tfrecord").string());
    FAIL() << "mismatched counts were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has 3 images but"), std::string::npos) << e.what();
  }
  EXPECT_THROW(app::convert_mnist((dir / "labels").string(), (dir / "labels").string(),
                                  (dir / "out3.tfrecord").string()),
               DataLoss);
  fs::remove_all(dir);
}

// A directory of 3 classes (sorted: "cat", "daisy", "tulip"), each with PNGs and JPEGs whose
// first pixel holds the class index times 80 (gray) and whose width is 4 + the image's number.
fs::path make_image_dir(const fs::path& dir) {
  const std::vector<std::string> classes = {"tulip", "cat", "daisy"};
  for (const std::string& name : classes) fs::create_directories(dir / name);
  auto write = [](const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  };
  const std::map<std::string, int> label = {{"cat", 0}, {"daisy", 1}, {"tulip", 2}};
  for (const std::string& name : classes) {
    for (int i = 0; i < 4; ++i) {
      const int64_t height = 6, width = 4 + i;
      std::vector<uint8_t> gray(static_cast<std::size_t>(height * width),
                                static_cast<uint8_t>(80 * label.at(name)));
      if (i % 2 == 0) {
        write(dir / name / ("img" + std::to_string(i) + ".png"),
              image::encode_png(gray, height, width, 1));
      } else {
        // A JPEG with a .png name: the format comes from the content.
        write(dir / name / ("img" + std::to_string(i) + (i == 3 ? ".png" : ".jpg")),
              image::encode_jpeg(gray, height, width, 1, 95));
      }
    }
  }
  return dir;
}

TEST(ConvertImagesTest, WritesSlimLayoutThatImageClassificationReaderReads) {
  fs::path dir = temp_dir("images");
  app::ConvertImagesOptions o;
  o.image_dir = make_image_dir(dir / "photos").string();
  o.output = (dir / "out" / "flowers").string();
  o.validation_fraction = 0.25;
  o.num_shards = 2;
  o.seed = 3;
  app::ConvertImagesSummary s = app::convert_images(o);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"cat", "daisy", "tulip"}));
  EXPECT_EQ(s.train_images, 9);
  EXPECT_EQ(s.validation_images, 3);
  const fs::path out = dir / "out";
  for (const char* name :
       {"flowers_train_00000-of-00002.tfrecord", "flowers_train_00001-of-00002.tfrecord",
        "flowers_validation_00000-of-00002.tfrecord", "flowers_validation_00001-of-00002.tfrecord",
        "labels.txt"}) {
    EXPECT_TRUE(fs::exists(out / name)) << name;
  }
  std::ifstream labels(out / "labels.txt");
  std::stringstream text;
  text << labels.rdbuf();
  EXPECT_EQ(text.str(), "0:cat\n1:daisy\n2:tulip\n");

  // Read every record back through the reader plugin.
  auto reader = registry().create<Reader>(ClassKind::kReader, "ImageClassificationReader",
                                          {{"num_classes", int64_t{3}}});
  std::map<std::string, int> seen;
  for (const std::string split : {"train", "validation"}) {
    for (int shard = 0; shard < 2; ++shard) {
      const std::string path =
          (out / ("flowers_" + split + "_0000" + std::to_string(shard) + "-of-00002.tfrecord"))
              .string();
      TFRecordReader file(path);
      std::string record;
      for (int64_t index = 0; file.read_or_throw(&record); ++index) {
        wire::tf::Example example;
        ASSERT_TRUE(example.ParseFromString(record));
        const auto& f = example.features().feature();
        const std::string name = f.at("image/filename").bytes_list().value(0);
        EXPECT_EQ(f.at("image/source_id").bytes_list().value(0), name);
        const bool jpeg =
            name.find("img1") != std::string::npos || name.find("img3") != std::string::npos;
        EXPECT_EQ(f.at("image/format").bytes_list().value(0), jpeg ? "jpeg" : "png") << name;
        ParsedRecord parsed = reader->parse(record, {path, index});
        EXPECT_EQ(parsed.id, name);
        const ParsedFeature& image = parsed.features.at("image");
        const int64_t width = 4 + (name[name.size() - 5] - '0');
        EXPECT_EQ(image.shape, (std::vector<int64_t>{6, width, 3})) << name;
        std::vector<float> one_hot(3);
        std::memcpy(one_hot.data(), parsed.features.at("labels").bytes.data(), 12);
        const int label = name.rfind("cat", 0) == 0 ? 0 : name.rfind("daisy", 0) == 0 ? 1 : 2;
        EXPECT_EQ(one_hot[static_cast<std::size_t>(label)], 1.0f) << name;
        EXPECT_NEAR(static_cast<int>(image.bytes[0]), 80 * label, 2) << name;
        ++seen[split];
      }
    }
  }
  EXPECT_EQ(seen["train"], 9);
  EXPECT_EQ(seen["validation"], 3);

  // A file that does not decode is an error naming it, and leaves no output behind.
  std::ofstream(dir / "photos" / "daisy" / "broken.jpg", std::ios::binary) << "\xFF\xD8\xFFxx";
  o.output = (dir / "out2" / "flowers").string();
  try {
    app::convert_images(o);
    FAIL() << "an undecodable file was converted";
  } catch (const DataLoss& e) {
    EXPECT_NE(std::string(e.what()).find("daisy/broken.jpg: corrupt JPEG"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir / "out2"));
  fs::remove_all(dir);
}

// labels.txt holds "label:name" lines: a class directory named "x\n9:injected" forged a line.
// A control character in a class name is refused, naming the directory; nothing is written.
TEST(ConvertImagesTest, AClassNameWithAControlCharacterIsRefused) {
  fs::path dir = temp_dir("forged_labels");
  app::ConvertImagesOptions o;
  o.image_dir = make_image_dir(dir / "photos").string();
  fs::rename(dir / "photos" / "tulip", dir / "photos" / "tulip\n9:injected");
  o.output = (dir / "out" / "flowers").string();
  try {
    app::convert_images(o);
    FAIL() << "a class name with a newline was converted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "convert-images: class directory " + (dir / "photos" / "tulip\n9:injected").string() +
                  " has a control character in its name (byte 10); labels.txt holds one class "
                  "name a line: rename it");
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "labels.txt"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainyard
