// DetectionReader (plugins/readers/detection_reader.cc) on tf.Example records in the Object
// Detection API's layout: what it yields, the label map, invalid boxes, errors naming the record
// and the box; and `trainyard data synth-shapes` output read back through it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "synth_shapes.h"
#include "test_registry.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/reader.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const RecordLocation kWhere{"train-00000-of-00001.tfrecord", 17};
constexpr int64_t kH = 4, kW = 8;

std::shared_ptr<Reader> make_reader(const std::map<std::string, OptionValue>& options = {}) {
  std::map<std::string, OptionValue> o = {{"num_classes", int64_t{3}}};
  for (const auto& [k, v] : options) o[k] = v;
  return test::plugin_registry().create<Reader>(ClassKind::kReader, "DetectionReader", o);
}

template <class T>
std::vector<T> values_of(const ParsedFeature& f) {
  std::vector<T> out(f.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
  return out;
}

wire::tf::Feature& feature(wire::tf::Example* e, const std::string& key) {
  return (*e->mutable_features()->mutable_feature())[key];
}

struct Box {
  float ymin, xmin, ymax, xmax;
};

// A PNG image with `boxes`, labels 1..N and class texts "a", "b", ...
wire::tf::Example api_example(const std::vector<Box>& boxes) {
  std::vector<uint8_t> pixels(static_cast<std::size_t>(kH * kW * 3));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 5 % 256);
  wire::tf::Example e;
  feature(&e, "image/encoded")
      .mutable_bytes_list()
      ->add_value(image::encode_png(pixels, kH, kW, 3));
  feature(&e, "image/format").mutable_bytes_list()->add_value("png");
  feature(&e, "image/height").mutable_int64_list()->add_value(kH);
  feature(&e, "image/width").mutable_int64_list()->add_value(kW);
  feature(&e, "image/source_id").mutable_bytes_list()->add_value("img-7");
  feature(&e, "image/filename").mutable_bytes_list()->add_value("img-7.png");
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    feature(&e, "image/object/bbox/ymin").mutable_float_list()->add_value(boxes[i].ymin);
    feature(&e, "image/object/bbox/xmin").mutable_float_list()->add_value(boxes[i].xmin);
    feature(&e, "image/object/bbox/ymax").mutable_float_list()->add_value(boxes[i].ymax);
    feature(&e, "image/object/bbox/xmax").mutable_float_list()->add_value(boxes[i].xmax);
    feature(&e, "image/object/class/label")
        .mutable_int64_list()
        ->add_value(static_cast<int64_t>(i + 1));
    feature(&e, "image/object/class/text")
        .mutable_bytes_list()
        ->add_value(std::string(1, static_cast<char>('a' + i)));
  }
  return e;
}

std::string invalid_argument_of(const Reader& reader, const wire::tf::Example& e) {
  try {
    reader.parse(e.SerializeAsString(), kWhere);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected InvalidArgument";
  return "";
}

TEST(DetectionReader, YieldsImageBoxesZeroBasedClassesAndDefaults) {
  const auto reader = make_reader();
  const wire::tf::Example e = api_example({{0.0f, 0.25f, 0.5f, 0.75f}, {0.5f, 0.0f, 1.0f, 0.5f}});
  const ParsedRecord r = reader->parse(e.SerializeAsString(), kWhere);
  EXPECT_EQ(r.id, "img-7");
  EXPECT_EQ(r.features.at("image").shape, (std::vector<int64_t>{kH, kW, 3}));
  EXPECT_EQ(r.features.at("image").dtype, DType::kU8);
  EXPECT_EQ(values_of<uint8_t>(r.features.at("image"))[7], 35);
  EXPECT_EQ(r.features.at("groundtruth_boxes").shape, (std::vector<int64_t>{2, 4}));
  EXPECT_THAT(values_of<float>(r.features.at("groundtruth_boxes")),
              ElementsAre(0.0f, 0.25f, 0.5f, 0.75f, 0.5f, 0.0f, 1.0f, 0.5f));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_classes")), ElementsAre(0, 1));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_difficult")), ElementsAre(0, 0));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_is_crowd")), ElementsAre(0, 0));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_group_of")), ElementsAre(0, 0));
  // No image/object/area: the box's area in pixels, 0.5 x 4 by 0.5 x 8.
  EXPECT_THAT(values_of<float>(r.features.at("groundtruth_area")), ElementsAre(8.0f, 8.0f));
  EXPECT_THAT(values_of<int32_t>(r.features.at("true_image_shape")), ElementsAre(kH, kW, 3));
  ASSERT_EQ(reader->features().size(), r.features.size());
  for (const FeatureSpec& spec : reader->features()) {
    EXPECT_EQ(r.features.at(spec.name).dtype, spec.dtype) << spec.name;
  }
}

TEST(DetectionReader, ReadsDifficultIsCrowdGroupOfAreaAndTheIdFallbacks) {
  const auto reader = make_reader();
  wire::tf::Example e = api_example({{0.0f, 0.0f, 0.5f, 0.5f}});
  feature(&e, "image/object/difficult").mutable_int64_list()->add_value(1);
  feature(&e, "image/object/is_crowd").mutable_int64_list()->add_value(1);
  // The decoder casts image/object/group_of to bool.
  feature(&e, "image/object/group_of").mutable_int64_list()->add_value(2);
  feature(&e, "image/object/area").mutable_float_list()->add_value(3.5f);
  ParsedRecord r = reader->parse(e.SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_difficult")), ElementsAre(1));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_is_crowd")), ElementsAre(1));
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_group_of")), ElementsAre(1));
  EXPECT_THAT(values_of<float>(r.features.at("groundtruth_area")), ElementsAre(3.5f));
  e.mutable_features()->mutable_feature()->erase("image/source_id");
  EXPECT_EQ(reader->parse(e.SerializeAsString(), kWhere).id, "img-7.png");
  e.mutable_features()->mutable_feature()->erase("image/filename");
  EXPECT_EQ(reader->parse(e.SerializeAsString(), kWhere).id,
            "train-00000-of-00001.tfrecord, record 17");
}

TEST(DetectionReader, AnImageWithoutBoxesYieldsEmptyGroundtruth) {
  const ParsedRecord r = make_reader()->parse(api_example({}).SerializeAsString(), kWhere);
  EXPECT_EQ(r.features.at("groundtruth_boxes").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(r.features.at("groundtruth_classes").shape, (std::vector<int64_t>{0}));
}

TEST(DetectionReader, AClassOutsideOneToNumClassesNamesTheRecordAndBox) {
  const auto reader = make_reader({{"num_classes", int64_t{1}}});
  const std::string what =
      invalid_argument_of(*reader, api_example({{0, 0, 0.5f, 0.5f}, {0, 0, 0.5f, 0.5f}}));
  EXPECT_THAT(what, HasSubstr("train-00000-of-00001.tfrecord, record 17"));
  EXPECT_THAT(what, HasSubstr("box 1 has class 2"));
  wire::tf::Example zero = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&zero, "image/object/class/label").mutable_int64_list()->set_value(0, 0);
  EXPECT_THAT(invalid_argument_of(*reader, zero), HasSubstr("box 0 has class 0"));
}

TEST(DetectionReader, InvalidBoxesAreAnErrorNamingTheBoxByDefault) {
  const auto reader = make_reader();
  for (const Box& bad : {Box{0.5f, 0.0f, 0.2f, 0.5f}, Box{0.0f, 0.0f, 1.5f, 0.5f},
                         Box{0.2f, 0.2f, 0.2f, 0.5f}, Box{NAN, 0.0f, 0.5f, 0.5f}}) {
    const std::string what = invalid_argument_of(*reader, api_example({{0, 0, 0.5f, 0.5f}, bad}));
    EXPECT_THAT(what, HasSubstr("record 17: box 1 is [ymin, xmin, ymax, xmax]"));
    EXPECT_THAT(what, HasSubstr("invalid_boxes"));
  }
}

TEST(DetectionReader, InvalidBoxesClipOrDropWithTheirRows) {
  const wire::tf::Example e = api_example({{-0.1f, 0.0f, 0.5f, 1.2f},   // clipped
                                           {0.5f, 0.0f, 0.2f, 0.5f},    // inverted: dropped
                                           {0.0f, 0.0f, 0.5f, 0.5f}});  // valid
  const ParsedRecord clipped =
      make_reader({{"invalid_boxes", std::string("clip")}})->parse(e.SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<float>(clipped.features.at("groundtruth_boxes")),
              ElementsAre(0.0f, 0.0f, 0.5f, 1.0f, 0.0f, 0.0f, 0.5f, 0.5f));
  EXPECT_THAT(values_of<int32_t>(clipped.features.at("groundtruth_classes")), ElementsAre(0, 2));
  const ParsedRecord dropped =
      make_reader({{"invalid_boxes", std::string("drop")}})->parse(e.SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<float>(dropped.features.at("groundtruth_boxes")),
              ElementsAre(0.0f, 0.0f, 0.5f, 0.5f));
  EXPECT_THAT(values_of<int32_t>(dropped.features.at("groundtruth_classes")), ElementsAre(2));
  EXPECT_THROW(make_reader({{"invalid_boxes", std::string("fix")}}), InvalidArgument);
}

TEST(DetectionReader, MismatchedListLengthsNameTheKey) {
  wire::tf::Example e = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&e, "image/object/bbox/xmax").mutable_float_list()->add_value(0.7f);
  EXPECT_THAT(invalid_argument_of(*make_reader(), e), HasSubstr("image/object/bbox/xmax"));
  wire::tf::Example group_of = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&group_of, "image/object/group_of").mutable_int64_list()->add_value(0);
  feature(&group_of, "image/object/group_of").mutable_int64_list()->add_value(1);
  EXPECT_THAT(invalid_argument_of(*make_reader(), group_of), HasSubstr("image/object/group_of"));
  wire::tf::Example no_label = api_example({{0, 0, 0.5f, 0.5f}});
  no_label.mutable_features()->mutable_feature()->erase("image/object/class/label");
  EXPECT_THAT(invalid_argument_of(*make_reader(), no_label),
              HasSubstr("image/object/class/label' is missing"));
}

class LabelMapFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() /
            ("detection_reader_label_map_" + std::to_string(::getpid()) + ".pbtxt");
    std::ofstream(path_) << "item { id: 3 name: 'a' display_name: 'Apple' }\n"
                            "item { id: 1 name: 'b' display_name: 'Banana' }\n";
  }
  void TearDown() override { fs::remove(path_); }
  fs::path path_;
};

TEST_F(LabelMapFile, ClassTextsAreMappedAndPreferredToLabels) {
  const auto reader = make_reader({{"label_map_path", path_.string()}});
  // Labels say 1, 2; texts say a -> 3, b -> 1.
  const ParsedRecord r = reader->parse(
      api_example({{0, 0, 0.5f, 0.5f}, {0, 0, 0.5f, 0.5f}}).SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_classes")), ElementsAre(2, 0));
}

TEST_F(LabelMapFile, UnmappedTextsAreDroppedOrAnError) {
  // The third text, "c", is not in the map.
  const wire::tf::Example e = api_example({{0, 0, 0.5f, 0.5f}, {0, 0, 0.5f, 0.5f}, {0, 0, 1, 1}});
  const ParsedRecord r =
      make_reader({{"label_map_path", path_.string()}})->parse(e.SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_classes")), ElementsAre(2, 0));
  const auto strict = make_reader(
      {{"label_map_path", path_.string()}, {"unmapped_class_text", std::string("error")}});
  EXPECT_THAT(invalid_argument_of(*strict, e), HasSubstr("'c'"));
}

TEST_F(LabelMapFile, UseDisplayNameLooksTextsUpByDisplayName) {
  const auto reader = make_reader({{"label_map_path", path_.string()}, {"use_display_name", true}});
  wire::tf::Example e = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&e, "image/object/class/text").mutable_bytes_list()->set_value(0, "Banana");
  const ParsedRecord r = reader->parse(e.SerializeAsString(), kWhere);
  EXPECT_THAT(values_of<int32_t>(r.features.at("groundtruth_classes")), ElementsAre(0));
}

TEST_F(LabelMapFile, AnIdAboveNumClassesIsRefused) {
  EXPECT_THROW(make_reader({{"label_map_path", path_.string()}, {"num_classes", int64_t{2}}}),
               InvalidArgument);
}

// instance_masks png: image/object/mask's PNGs (values above 0 are the mask, as the decoder's
// tf.greater(mask, 0)) become u8 [N, H, W] of 0 and 1, only for the boxes kept.
TEST(DetectionReaderMasks, PngMasksOfTheBoxesKeptBecomeZeroOneMasks) {
  wire::tf::Example e = api_example({{0, 0, 0.5f, 0.5f}, {0.2f, 0.9f, 0.1f, 1.0f}, {0, 0, 1, 1}});
  std::vector<std::vector<uint8_t>> planes;
  for (int m = 0; m < 3; ++m) {
    std::vector<uint8_t> plane(static_cast<std::size_t>(kH * kW));
    for (std::size_t p = 0; p < plane.size(); ++p) plane[p] = (p + m) % 3 == 0 ? 255 : 0;
    plane[1] = static_cast<uint8_t>(m + 1);  // any value above 0 is in the mask
    feature(&e, "image/object/mask")
        .mutable_bytes_list()
        ->add_value(image::encode_png(plane, kH, kW, 1));
    planes.push_back(plane);
  }
  // Box 1 is inverted: dropped, and its mask with it.
  const auto reader =
      make_reader({{"instance_masks", std::string("png")}, {"invalid_boxes", std::string("drop")}});
  const ParsedRecord r = reader->parse(e.SerializeAsString(), kWhere);
  const ParsedFeature& masks = r.features.at("groundtruth_instance_masks");
  EXPECT_EQ(masks.dtype, DType::kU8);
  EXPECT_EQ(masks.shape, (std::vector<int64_t>{2, kH, kW}));
  const std::vector<uint8_t> got = values_of<uint8_t>(masks);
  const std::size_t plane = static_cast<std::size_t>(kH * kW);
  for (std::size_t k = 0; k < 2; ++k) {
    const std::vector<uint8_t>& want = planes[k == 0 ? 0 : 2];
    for (std::size_t p = 0; p < plane; ++p) {
      EXPECT_EQ(got[k * plane + p], want[p] > 0 ? 1 : 0) << "mask " << k << " pixel " << p;
    }
  }
  // Without the option the reader neither declares nor yields masks.
  EXPECT_EQ(make_reader({{"invalid_boxes", std::string("drop")}})
                ->parse(e.SerializeAsString(), kWhere)
                .features.count("groundtruth_instance_masks"),
            0u);
}

TEST(DetectionReaderMasks, NumericalMasksAreReadMaskByMaskRowMajor) {
  wire::tf::Example e = api_example({{0, 0, 0.5f, 0.5f}, {0, 0, 1, 1}});
  auto* values = feature(&e, "image/object/mask").mutable_float_list();
  for (int64_t i = 0; i < 2 * kH * kW; ++i) values->add_value(i % 5 == 0 ? 0.5f : -1.0f);
  const auto reader = make_reader({{"instance_masks", std::string("numerical")}});
  const ParsedRecord r = reader->parse(e.SerializeAsString(), kWhere);
  EXPECT_EQ(r.features.at("groundtruth_instance_masks").shape, (std::vector<int64_t>{2, kH, kW}));
  const std::vector<uint8_t> got = values_of<uint8_t>(r.features.at("groundtruth_instance_masks"));
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i % 5 == 0 ? 1 : 0) << i;
}

TEST(DetectionReaderMasks, MasksThatDoNotFitTheRecordAreErrorsNamingTheMask) {
  const auto png = make_reader({{"instance_masks", std::string("png")}});
  const auto numerical = make_reader({{"instance_masks", std::string("numerical")}});
  const auto error_of = [](const std::shared_ptr<Reader>& reader, const wire::tf::Example& e) {
    try {
      reader->parse(e.SerializeAsString(), kWhere);
    } catch (const InvalidArgument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::vector<uint8_t> plane(static_cast<std::size_t>(kH * kW), 1);
  const std::vector<uint8_t> small(static_cast<std::size_t>(kH * (kW - 1)), 1);
  wire::tf::Example missing = api_example({{0, 0, 0.5f, 0.5f}});
  EXPECT_THAT(error_of(png, missing),
              AllOf(HasSubstr("train-00000-of-00001.tfrecord"), HasSubstr("record 17"),
                    HasSubstr("'image/object/mask' is missing"), HasSubstr("1 boxes")));
  wire::tf::Example too_few = api_example({{0, 0, 0.5f, 0.5f}, {0, 0, 1, 1}});
  feature(&too_few, "image/object/mask")
      .mutable_bytes_list()
      ->add_value(image::encode_png(plane, kH, kW, 1));
  EXPECT_THAT(error_of(png, too_few), HasSubstr("'image/object/mask' has 1 values"));
  wire::tf::Example wrong_size = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&wrong_size, "image/object/mask")
      .mutable_bytes_list()
      ->add_value(image::encode_png(small, kH, kW - 1, 1));
  EXPECT_THAT(error_of(png, wrong_size),
              AllOf(HasSubstr("'image/object/mask' value 0 is a 4 x 7 mask"),
                    HasSubstr("the image is 4 x 8")));
  wire::tf::Example short_list = api_example({{0, 0, 0.5f, 0.5f}});
  feature(&short_list, "image/object/mask").mutable_float_list()->add_value(1.0f);
  EXPECT_THAT(error_of(numerical, short_list),
              AllOf(HasSubstr("'image/object/mask' has 1 values"), HasSubstr("1 masks of 4 x 8")));
  EXPECT_THAT(error_of(png, short_list), HasSubstr("expected a bytes list"));
  EXPECT_THROW(make_reader({{"instance_masks", std::string("polygons")}}), InvalidArgument);
}

TEST(SynthShapes, ReadsBackThroughDetectionReaderWithTheBoxesItWrote) {
  const fs::path dir = fs::temp_directory_path() / ("synth_shapes_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  app::SynthShapesOptions o;
  o.output_dir = dir.string();
  o.num_images = 12;
  o.num_val_images = 3;
  o.image_size = 64;
  o.num_shards = 2;
  o.seed = 5;
  const app::SynthShapesSummary s = app::synth_shapes(o);
  EXPECT_EQ(s.train_images, 12);
  EXPECT_EQ(s.val_images, 3);
  EXPECT_TRUE(fs::exists(dir / "train-00000-of-00002.tfrecord"));
  EXPECT_TRUE(fs::exists(dir / "train-00001-of-00002.tfrecord"));
  EXPECT_TRUE(fs::exists(dir / "val-00000-of-00001.tfrecord"));
  ASSERT_TRUE(fs::exists(dir / "label_map.pbtxt"));

  // Through the label map, as a pipeline config would read it.
  const auto reader = make_reader(
      {{"num_classes", int64_t{4}}, {"label_map_path", (dir / "label_map.pbtxt").string()}});
  int64_t records = 0, boxes = 0;
  std::vector<std::string> first_records;
  for (const char* name : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
                           "val-00000-of-00001.tfrecord"}) {
    TFRecordReader file((dir / name).string());
    std::string record;
    int64_t index = 0;
    while (file.read_or_throw(&record)) {
      if (index == 0) first_records.push_back(record);
      const ParsedRecord r = reader->parse(record, {name, index++});
      ++records;
      wire::tf::Example e;
      ASSERT_TRUE(e.ParseFromString(record));
      const auto& f = e.features().feature();
      const auto& labels = f.at("image/object/class/label").int64_list().value();
      const auto& xmin = f.at("image/object/bbox/xmin").float_list().value();
      const auto& ymax = f.at("image/object/bbox/ymax").float_list().value();
      const std::vector<float> got = values_of<float>(r.features.at("groundtruth_boxes"));
      const std::vector<int32_t> classes = values_of<int32_t>(r.features.at("groundtruth_classes"));
      ASSERT_EQ(classes.size(), static_cast<std::size_t>(labels.size()));
      ASSERT_GE(classes.size(), 1u);
      ASSERT_LE(classes.size(), 6u);
      for (int i = 0; i < labels.size(); ++i) {
        EXPECT_EQ(classes[static_cast<std::size_t>(i)], labels[i] - 1);
        EXPECT_EQ(got[static_cast<std::size_t>(4 * i + 1)], xmin[i]);
        EXPECT_EQ(got[static_cast<std::size_t>(4 * i + 2)], ymax[i]);
        EXPECT_EQ(f.at("image/object/class/text").bytes_list().value(i),
                  app::kSynthShapeClasses[static_cast<std::size_t>(labels[i] - 1)]);
      }
      boxes += static_cast<int64_t>(classes.size());
      EXPECT_THAT(values_of<int32_t>(r.features.at("true_image_shape")), ElementsAre(64, 64, 3));
    }
  }
  EXPECT_EQ(records, 15);
  EXPECT_EQ(boxes, s.boxes);

  // The same seed gives the same files, whatever the shard count.
  const fs::path again = dir / "again";
  o.output_dir = again.string();
  o.num_shards = 1;
  app::synth_shapes(o);
  TFRecordReader file((again / "train-00000-of-00001.tfrecord").string());
  std::string record;
  ASSERT_TRUE(file.read_or_throw(&record));
  EXPECT_EQ(record, first_records[0]);
  fs::remove_all(dir);
}

// --max_image_size: each image has its own height and width in [image_size, max_image_size],
// decoded at that size, and its boxes are normalized by its own height (y) and width (x): a box
// holds at least the shape's visible pixels (image/object/area) when scaled back by them.
TEST(SynthShapes, MaxImageSizeGivesEachImageItsOwnHeightAndWidth) {
  const fs::path dir =
      fs::temp_directory_path() / ("synth_shapes_sizes_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  app::SynthShapesOptions o;
  o.output_dir = dir.string();
  o.num_images = 16;
  o.num_val_images = 1;
  o.image_size = 48;
  o.max_image_size = 96;
  o.num_shards = 1;
  app::synth_shapes(o);
  const auto reader = make_reader({{"num_classes", int64_t{4}}});
  std::set<int64_t> heights, widths;
  int64_t non_square = 0;
  TFRecordReader file((dir / "train-00000-of-00001.tfrecord").string());
  std::string record;
  int64_t index = 0;
  while (file.read_or_throw(&record)) {
    const ParsedRecord r = reader->parse(record, {"train", index++});
    const std::vector<int32_t> shape = values_of<int32_t>(r.features.at("true_image_shape"));
    const int64_t h = shape[0], w = shape[1];
    EXPECT_EQ(r.features.at("image").shape, (std::vector<int64_t>{h, w, 3}));
    EXPECT_GE(h, 48);
    EXPECT_LE(h, 96);
    EXPECT_GE(w, 48);
    EXPECT_LE(w, 96);
    heights.insert(h);
    widths.insert(w);
    non_square += h != w ? 1 : 0;
    const std::vector<float> boxes = values_of<float>(r.features.at("groundtruth_boxes"));
    const std::vector<float> areas = values_of<float>(r.features.at("groundtruth_area"));
    for (std::size_t i = 0; i < areas.size(); ++i) {
      const float* b = boxes.data() + 4 * i;
      const double pixels =
          (b[2] - b[0]) * static_cast<double>(h) * (b[3] - b[1]) * static_cast<double>(w);
      EXPECT_GE(pixels + 0.5, areas[i]) << "record " << index - 1 << " box " << i;
      EXPECT_LE(pixels, 4.0 * areas[i]) << "record " << index - 1 << " box " << i;
    }
  }
  EXPECT_EQ(index, 16);
  EXPECT_GE(heights.size(), 4u);
  EXPECT_GE(widths.size(), 4u);
  EXPECT_GE(non_square, 8);
  o.max_image_size = 40;  // below image_size
  EXPECT_THROW(app::synth_shapes(o), InvalidArgument);
  fs::remove_all(dir);
}

// --masks: each object's mask is the shape's pixels no later shape paints over. A mask lies
// inside its box and holds at least one and at most the shape's pixels inside the image
// (image/object/area) and, for a shape no later one overlaps, exactly them, with the box as its
// tight box. A shape painted over whole is not labelled: seed 0 has one in these 10 images.
TEST(SynthShapes, MasksAreTheVisiblePixelsOfEachShape) {
  const fs::path dir =
      fs::temp_directory_path() / ("synth_shapes_masks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  app::SynthShapesOptions o;
  o.output_dir = dir.string();
  o.num_images = 10;
  o.num_val_images = 0;
  o.image_size = 64;
  o.max_image_size = 80;
  o.num_shards = 1;
  o.masks = true;
  const app::SynthShapesSummary summary = app::synth_shapes(o);
  EXPECT_GE(summary.hidden_shapes, 1);
  const auto reader =
      make_reader({{"num_classes", int64_t{4}}, {"instance_masks", std::string("png")}});
  TFRecordReader file((dir / "train-00000-of-00001.tfrecord").string());
  std::string record;
  int64_t index = 0, exact = 0, occluded = 0, boxes_read = 0;
  std::vector<std::string> with_masks;
  while (file.read_or_throw(&record)) {
    with_masks.push_back(record);
    const ParsedRecord r = reader->parse(record, {"train", index++});
    const std::vector<int32_t> shape = values_of<int32_t>(r.features.at("true_image_shape"));
    const int64_t h = shape[0], w = shape[1];
    const std::vector<float> boxes = values_of<float>(r.features.at("groundtruth_boxes"));
    const std::vector<float> areas = values_of<float>(r.features.at("groundtruth_area"));
    const ParsedFeature& masks = r.features.at("groundtruth_instance_masks");
    ASSERT_EQ(masks.shape, (std::vector<int64_t>{static_cast<int64_t>(areas.size()), h, w}));
    boxes_read += static_cast<int64_t>(areas.size());
    const std::vector<uint8_t> m = values_of<uint8_t>(masks);
    for (std::size_t k = 0; k < areas.size(); ++k) {
      int64_t count = 0, ymin = h, xmin = w, ymax = -1, xmax = -1;
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          if (m[k * static_cast<std::size_t>(h * w) + static_cast<std::size_t>(y * w + x)] == 0) {
            continue;
          }
          ++count;
          ymin = std::min(ymin, y), xmin = std::min(xmin, x);
          ymax = std::max(ymax, y), xmax = std::max(xmax, x);
        }
      }
      const float* b = boxes.data() + 4 * k;
      EXPECT_LE(count, static_cast<int64_t>(areas[k]));
      ASSERT_GT(count, 0) << "image " << index - 1 << " object " << k << " has an empty mask";
      EXPECT_GE(static_cast<float>(ymin) / static_cast<float>(h), b[0] - 1e-6f);
      EXPECT_GE(static_cast<float>(xmin) / static_cast<float>(w), b[1] - 1e-6f);
      EXPECT_LE(static_cast<float>(ymax + 1) / static_cast<float>(h), b[2] + 1e-6f);
      EXPECT_LE(static_cast<float>(xmax + 1) / static_cast<float>(w), b[3] + 1e-6f);
      if (count == static_cast<int64_t>(areas[k])) {
        ++exact;
        EXPECT_FLOAT_EQ(static_cast<float>(ymin) / static_cast<float>(h), b[0]);
        EXPECT_FLOAT_EQ(static_cast<float>(xmax + 1) / static_cast<float>(w), b[3]);
      } else {
        ++occluded;
      }
    }
  }
  EXPECT_EQ(index, 10);
  EXPECT_EQ(boxes_read, summary.boxes);
  EXPECT_GE(exact, 10);
  EXPECT_GE(occluded, 1);  // seed 0 overlaps some shapes; their masks lose the covered pixels

  // Without --masks the records have no mask and keep the hidden shapes' boxes; the images are
  // the same bytes, and a record without a hidden shape has the same features less the masks.
  o.masks = false;
  o.output_dir = (dir / "plain").string();
  const app::SynthShapesSummary plain_summary = app::synth_shapes(o);
  EXPECT_EQ(plain_summary.hidden_shapes, 0);
  EXPECT_EQ(plain_summary.boxes, summary.boxes + summary.hidden_shapes);
  TFRecordReader plain((dir / "plain" / "train-00000-of-00001.tfrecord").string());
  int64_t same_objects = 0, fewer_objects = 0;
  for (const std::string& masked : with_masks) {
    ASSERT_TRUE(plain.read_or_throw(&record));
    wire::tf::Example with, without;
    ASSERT_TRUE(with.ParseFromString(masked));
    ASSERT_TRUE(without.ParseFromString(record));
    EXPECT_EQ(without.features().feature().count("image/object/mask"), 0u);
    const auto& wf = with.features().feature();
    const auto& pf = without.features().feature();
    EXPECT_EQ(wf.at("image/encoded").SerializeAsString(),
              pf.at("image/encoded").SerializeAsString());
    const int n_with = wf.at("image/object/class/label").int64_list().value_size();
    const int n_without = pf.at("image/object/class/label").int64_list().value_size();
    EXPECT_EQ(wf.at("image/object/mask").bytes_list().value_size(), n_with);
    if (n_with < n_without) {
      ++fewer_objects;
      continue;
    }
    ++same_objects;
    EXPECT_EQ(n_with, n_without);
    with.mutable_features()->mutable_feature()->erase("image/object/mask");
    ASSERT_EQ(with.features().feature().size(), without.features().feature().size());
    for (const auto& [key, value] : without.features().feature()) {
      ASSERT_EQ(with.features().feature().count(key), 1u) << key;
      EXPECT_EQ(with.features().feature().at(key).SerializeAsString(), value.SerializeAsString())
          << key;
    }
  }
  EXPECT_GE(fewer_objects, 1);
  EXPECT_GE(same_objects, 5);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainyard
