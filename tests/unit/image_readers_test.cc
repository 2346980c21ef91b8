// ImageClassificationReader (plugins/readers/image_readers.cc) on tf.Example records in
// TF-Slim's layout: what it yields, the optional keys, labels_offset, channels, and errors that
// name the file, the record and the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_registry.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/reader.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const RecordLocation kWhere{"train-00.tfrecord", 17};
constexpr int64_t kH = 5, kW = 7;

std::shared_ptr<Reader> make_reader(const std::map<std::string, OptionValue>& options = {}) {
  std::map<std::string, OptionValue> o = {{"num_classes", int64_t{5}}};
  for (const auto& [k, v] : options) o[k] = v;
  return test::plugin_registry().create<Reader>(ClassKind::kReader, "ImageClassificationReader", o);
}

std::vector<uint8_t> rgb_pixels() {
  std::vector<uint8_t> p;
  for (int64_t i = 0; i < kH * kW * 3; ++i) p.push_back(static_cast<uint8_t>(i * 7 % 256));
  return p;
}

void set_bytes(wire::tf::Example* e, const std::string& key, const std::string& value) {
  (*e->mutable_features()->mutable_feature())[key].mutable_bytes_list()->add_value(value);
}

void set_int(wire::tf::Example* e, const std::string& key, int64_t value) {
  (*e->mutable_features()->mutable_feature())[key].mutable_int64_list()->add_value(value);
}

// What slim's dataset_utils.image_to_tfexample writes, with a PNG.
wire::tf::Example slim_example(int64_t label = 2) {
  wire::tf::Example e;
  set_bytes(&e, "image/encoded", image::encode_png(rgb_pixels(), kH, kW, 3));
  set_bytes(&e, "image/format", "png");
  set_int(&e, "image/class/label", label);
  set_int(&e, "image/height", kH);
  set_int(&e, "image/width", kW);
  return e;
}

std::vector<float> floats_of(const ParsedFeature& f) {
  std::vector<float> out(f.bytes.size() / 4);
  std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

std::string error_of(const Reader& reader, const wire::tf::Example& e) {
  try {
    reader.parse(e.SerializeAsString(), kWhere);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ImageClassificationReader, DeclaresImageAndLabels) {
  auto reader = make_reader();
  const std::vector<FeatureSpec> specs = reader->features();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "image");
  EXPECT_EQ(specs[0].dtype, DType::kU8);
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{-1, -1, 3}));
  EXPECT_EQ(specs[1].name, "labels");
  EXPECT_EQ(specs[1].dtype, DType::kF32);
  EXPECT_EQ(specs[1].shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(make_reader({{"channels", int64_t{1}}})->features()[0].shape,
            (std::vector<int64_t>{-1, -1, 1}));
}

TEST(ImageClassificationReader, DecodesTheImageAndOneHotLabel) {
  auto reader = make_reader();
  ParsedRecord r = reader->parse(slim_example().SerializeAsString(), kWhere);
  EXPECT_EQ(r.id, "");
  ASSERT_EQ(r.features.size(), 2u);
  const ParsedFeature& image = r.features.at("image");
  EXPECT_EQ(image.dtype, DType::kU8);
  EXPECT_EQ(image.shape, (std::vector<int64_t>{kH, kW, 3}));
  const std::vector<uint8_t> expected = rgb_pixels();
  ASSERT_EQ(image.bytes.size(), expected.size());
  EXPECT_EQ(std::memcmp(image.bytes.data(), expected.data(), expected.size()), 0);
  EXPECT_EQ(floats_of(r.features.at("labels")), (std::vector<float>{0, 0, 1, 0, 0}));
}

TEST(ImageClassificationReader, JpegGrayAndChannels) {
  wire::tf::Example e;
  std::vector<uint8_t> gray(static_cast<std::size_t>(kH * kW), 128);
  set_bytes(&e, "image/encoded", image::encode_jpeg(gray, kH, kW, 1, 95));
  set_int(&e, "image/class/label", 0);
  // No image/format: "jpeg", TF-Slim's default.
  ParsedRecord rgb = make_reader()->parse(e.SerializeAsString(), kWhere);
  EXPECT_EQ(rgb.features.at("image").shape, (std::vector<int64_t>{kH, kW, 3}));
  ParsedRecord one = make_reader({{"channels", int64_t{1}}})->parse(e.SerializeAsString(), kWhere);
  EXPECT_EQ(one.features.at("image").shape, (std::vector<int64_t>{kH, kW, 1}));
  EXPECT_EQ(static_cast<int>(one.features.at("image").bytes[0]), 128);
}

TEST(ImageClassificationReader, FormatNamingTheOtherFormatStillDecodes) {
  wire::tf::Example e = slim_example();
  (*e.mutable_features()->mutable_feature())["image/format"].mutable_bytes_list()->set_value(
      0, "jpeg");
  EXPECT_EQ(make_reader()->parse(e.SerializeAsString(), kWhere).features.at("image").shape,
            (std::vector<int64_t>{kH, kW, 3}));
}

TEST(ImageClassificationReader, IdFromSourceIdThenFilename) {
  wire::tf::Example e = slim_example();
  set_bytes(&e, "image/filename", "daisy/1.jpg");
  EXPECT_EQ(make_reader()->parse(e.SerializeAsString(), kWhere).id, "daisy/1.jpg");
  set_bytes(&e, "image/source_id", "img-001");
  EXPECT_EQ(make_reader()->parse(e.SerializeAsString(), kWhere).id, "img-001");
}

TEST(ImageClassificationReader, AbsentLabelGivesZeros) {
  wire::tf::Example e = slim_example();
  e.mutable_features()->mutable_feature()->erase("image/class/label");
  ParsedRecord r = make_reader()->parse(e.SerializeAsString(), kWhere);
  EXPECT_EQ(floats_of(r.features.at("labels")), (std::vector<float>(5, 0.0f)));
}

TEST(ImageClassificationReader, LabelsOffset) {
  auto reader = make_reader({{"labels_offset", int64_t{1}}});
  ParsedRecord r = reader->parse(slim_example(5).SerializeAsString(), kWhere);
  EXPECT_EQ(floats_of(r.features.at("labels")), (std::vector<float>{0, 0, 0, 0, 1}));
  EXPECT_THAT(error_of(*reader, slim_example(0)),
              HasSubstr("'image/class/label' is 0 (-1 after labels_offset 1); expected 0 <= "
                        "label - labels_offset < 5 (num_classes)"));
}

TEST(ImageClassificationReader, ErrorsNameFileRecordAndKey) {
  auto reader = make_reader();
  const std::string prefix = "train-00.tfrecord, record 17: ";
  EXPECT_THAT(error_of(*reader, slim_example(5)),
              HasSubstr(prefix + "feature 'image/class/label' is 5"));

  wire::tf::Example no_image = slim_example();
  no_image.mutable_features()->mutable_feature()->erase("image/encoded");
  EXPECT_THAT(error_of(*reader, no_image),
              HasSubstr(prefix + "feature 'image/encoded' is missing"));

  wire::tf::Example wrong_height = slim_example();
  (*wrong_height.mutable_features()->mutable_feature())["image/height"]
      .mutable_int64_list()
      ->set_value(0, 6);
  EXPECT_THAT(error_of(*reader, wrong_height),
              HasSubstr(prefix + "feature 'image/height' is 6 but 'image/encoded' decodes to a "
                                 "5 x 7 png image"));

  wire::tf::Example raw = slim_example();
  (*raw.mutable_features()->mutable_feature())["image/format"].mutable_bytes_list()->set_value(
      0, "raw");
  EXPECT_THAT(error_of(*reader, raw), HasSubstr(prefix + "feature 'image/format' is 'raw'"));

  wire::tf::Example two_labels = slim_example();
  set_int(&two_labels, "image/class/label", 3);
  EXPECT_THAT(error_of(*reader, two_labels),
              HasSubstr(prefix + "feature 'image/class/label' is an int64 list of 2 values"));
}

TEST(ImageClassificationReader, CorruptImageIsDataLossNamingRecordAndKey) {
  auto reader = make_reader();
  wire::tf::Example e = slim_example();
  std::string png = image::encode_png(rgb_pixels(), kH, kW, 3);
  png.resize(png.size() - 20);
  (*e.mutable_features()->mutable_feature())["image/encoded"].mutable_bytes_list()->set_value(0,
                                                                                              png);
  try {
    reader->parse(e.SerializeAsString(), kWhere);
    ADD_FAILURE() << "a truncated PNG decoded";
  } catch (const DataLoss& error) {
    EXPECT_THAT(error.what(), StartsWith("train-00.tfrecord, record 17: image/encoded: "));
    EXPECT_THAT(error.what(), HasSubstr("truncated"));
  }
  auto small = make_reader({{"max_image_pixels", int64_t{kH * kW - 1}}});
  EXPECT_THAT(error_of(*small, slim_example()), HasSubstr("over the limit of 34"));
}

TEST(ImageClassificationReader, BadOptions) {
  EXPECT_THROW(make_reader({{"channels", int64_t{2}}}), InvalidArgument);
  EXPECT_THROW(make_reader({{"num_classes", int64_t{0}}}), InvalidArgument);
  EXPECT_THROW(make_reader({{"max_image_pixels", int64_t{0}}}), InvalidArgument);
}

}  // namespace
}  // namespace trainyard
