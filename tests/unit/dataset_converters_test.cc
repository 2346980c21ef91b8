// `trainyard data convert-voc` and `convert-coco` (apps/trainyard/convert_voc.h, convert_coco.h)
// on the small hand-written data sets of tests/fixtures/dataset_tools: every record compared,
// feature by feature, with the goldens that the Object Detection API's own create_pascal_tf_record
// and create_coco_tf_record wrote from the same files (make_goldens.py), and with values worked
// out by hand; the flags; sharding; and bad input, each an error naming the file and the line or
// element, with nothing left in the output directory. Also the SHA-256 behind image/key/sha256.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "convert_coco.h"
#include "convert_voc.h"
#include "sha256.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(TRAINYARD_SOURCE_DIR) / "tests/fixtures/dataset_tools";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Replaces the first `from` in the file `path` by `to`.
void edit_file(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = read_file(path);
  const std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  write_file(path, text.replace(at, from.size(), to));
}

std::vector<wire::tf::Example> read_examples(const std::string& path) {
  std::vector<wire::tf::Example> examples;
  TFRecordReader reader(path);
  std::string record;
  while (reader.read_or_throw(&record)) {
    examples.emplace_back();
    EXPECT_TRUE(examples.back().ParseFromString(record)) << path;
  }
  return examples;
}

// A bytes value as make_goldens.py's quote() writes it.
std::string quoted(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 32 && byte < 127 && c != '"' && c != '\\') {
      out += c;
    } else {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", byte);
      out += escape;
    }
  }
  return out + "\"";
}

// The records of `paths` in the goldens' text form (make_goldens.py's dump_records).
std::vector<std::string> dump_records(const std::vector<std::string>& paths) {
  std::vector<std::string> lines;
  for (const std::string& path : paths) {
    lines.push_back("file " + fs::path(path).filename().string());
    const std::vector<wire::tf::Example> examples = read_examples(path);
    for (std::size_t i = 0; i < examples.size(); ++i) {
      lines.push_back("record " + std::to_string(i));
      std::vector<std::string> keys;
      for (const auto& [key, feature] : examples[i].features().feature()) keys.push_back(key);
      std::sort(keys.begin(), keys.end());
      for (const std::string& key : keys) {
        const wire::tf::Feature& feature = examples[i].features().feature().at(key);
        std::string line = key;
        if (feature.has_int64_list()) {
          line += " int64 " + std::to_string(feature.int64_list().value_size());
          for (const int64_t v : feature.int64_list().value()) line += " " + std::to_string(v);
        } else if (feature.has_float_list()) {
          line += " float " + std::to_string(feature.float_list().value_size());
          for (const float v : feature.float_list().value()) {
            char text[32];
            std::snprintf(text, sizeof(text), " %.9g", static_cast<double>(v));
            line += text;
          }
        } else {
          line += " bytes " + std::to_string(feature.bytes_list().value_size());
          for (const std::string& v : feature.bytes_list().value()) {
            line += key == "image/encoded"
                        ? " len=" + std::to_string(v.size()) + " sha256=" + sha256_hex(v)
                        : " " + quoted(v);
          }
        }
        lines.push_back(line);
      }
    }
  }
  return lines;
}

// The golden's lines, its '#' comments left out.
std::vector<std::string> golden(const std::string& name) {
  std::istringstream text(read_file(kFixtures / "goldens" / name));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(text, line)) {
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  return lines;
}

// Each line of the golden, in order: a file, a record, or one feature of it.
void expect_golden(const std::vector<std::string>& paths, const std::string& name) {
  const std::vector<std::string> ours = dump_records(paths);
  const std::vector<std::string> theirs = golden(name);
  ASSERT_FALSE(theirs.empty()) << name;
  for (std::size_t i = 0; i < std::max(ours.size(), theirs.size()); ++i) {
    EXPECT_EQ(i < ours.size() ? ours[i] : "(no more lines)",
              i < theirs.size() ? theirs[i] : "(no more lines)")
        << "line " << i << " of the records, against goldens/" << name;
  }
}

const wire::tf::Feature& feature(const wire::tf::Example& example, const std::string& key) {
  return example.features().feature().at(key);
}
std::vector<int64_t> ints(const wire::tf::Example& example, const std::string& key) {
  const auto& v = feature(example, key).int64_list().value();
  return {v.begin(), v.end()};
}
std::vector<float> floats(const wire::tf::Example& example, const std::string& key) {
  const auto& v = feature(example, key).float_list().value();
  return {v.begin(), v.end()};
}
std::vector<std::string> strings(const wire::tf::Example& example, const std::string& key) {
  const auto& v = feature(example, key).bytes_list().value();
  return {v.begin(), v.end()};
}

class ConverterTest : public testing::Test {
 protected:
  void SetUp() override {
    const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) / ("trainyard_converters_" + std::to_string(getpid()) +
                                           "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A copy of a fixture directory that a test may spoil.
  fs::path copy_fixture(const std::string& name) {
    fs::copy(kFixtures / name, dir_ / name, fs::copy_options::recursive);
    return dir_ / name;
  }

  std::string output(const std::string& name) const { return (dir_ / "out" / name).string(); }

  // Nothing at all in the output directory: no record file, no hidden temporary.
  void expect_nothing_written() const {
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_ / "out")) {
      ADD_FAILURE() << "left behind: " << entry.path();
    }
  }

  fs::path dir_;
};

// Runs `convert` expecting an error of type E whose message holds each of `parts`.
template <typename E, typename F>
void expect_error(F convert, const std::vector<std::string>& parts) {
  try {
    convert();
    ADD_FAILURE() << "no error; expected one saying " << parts.front();
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "an error of another type: " << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// SHA-256

TEST(Sha256, GivesPythonHashlibsDigests) {
  // hashlib.sha256(data).hexdigest(): FIPS 180-2's examples, then messages whose padding ends a
  // block exactly or spills into a second one (55, 56, 64 and 119 bytes).
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(std::string(55, 'x')),
            "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  EXPECT_EQ(sha256_hex(std::string(56, 'x')),
            "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  EXPECT_EQ(sha256_hex(std::string(64, 'x')),
            "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  EXPECT_EQ(sha256_hex(std::string(119, 'y')),
            "0ee964660d4956e34132b7b0f5bdc15fd0d365e26186ac9fd97a090d8d5e5508");
}

// ---------------------------------------------------------------------------------------------
// convert-voc

ConvertVocOptions voc_options(const fs::path& data_dir, const std::string& output) {
  ConvertVocOptions o;
  o.data_dir = data_dir.string();
  o.label_map_path = (kFixtures / "pascal_label_map.pbtxt").string();
  o.output = output;
  return o;
}

using ConvertVoc = ConverterTest;

TEST_F(ConvertVoc, Voc2007TrainGivesTheApisRecords) {
  const ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("voc2007_train.record"));
  const ConvertVocSummary s = convert_voc(o);
  EXPECT_EQ(s.images, 3);
  EXPECT_EQ(s.objects, 5);
  EXPECT_EQ(s.difficult_ignored, 0);
  ASSERT_EQ(s.files, std::vector<std::string>{o.output});
  expect_golden(s.files, "voc2007_train.txt");
  // image/encoded is the file itself, not only a file of the same digest.
  const std::vector<wire::tf::Example> records = read_examples(o.output);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(strings(records[1], "image/encoded")[0],
            read_file(kFixtures / "VOCdevkit/VOC2007/JPEGImages/000002.jpg"));
}

TEST_F(ConvertVoc, IgnoreDifficultInstancesGivesTheApisRecords) {
  ConvertVocOptions o =
      voc_options(kFixtures / "VOCdevkit", output("voc2007_train_ignore_difficult.record"));
  o.ignore_difficult_instances = true;
  const ConvertVocSummary s = convert_voc(o);
  EXPECT_EQ(s.images, 3);
  EXPECT_EQ(s.objects, 3);
  EXPECT_EQ(s.difficult_ignored, 2);
  expect_golden(s.files, "voc2007_train_ignore_difficult.txt");
}

TEST_F(ConvertVoc, MergedReadsVoc2007ThenVoc2012) {
  ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("voc_merged_train.record"));
  o.year = "merged";
  const ConvertVocSummary s = convert_voc(o);
  EXPECT_EQ(s.images, 4);
  expect_golden(s.files, "voc_merged_train.txt");
}

TEST_F(ConvertVoc, RecordsHoldTheAnnotationsValues) {
  // 000001.xml by hand: a 40 x 30 image, a truncated dog and a difficult person; the boxes are
  // VOC's pixel coordinates over the size, not shifted.
  ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  convert_voc(o);
  const std::vector<wire::tf::Example> records = read_examples(o.output);
  ASSERT_EQ(records.size(), 3u);
  const wire::tf::Example& r = records[0];
  EXPECT_EQ(ints(r, "image/height"), std::vector<int64_t>{30});
  EXPECT_EQ(ints(r, "image/width"), std::vector<int64_t>{40});
  EXPECT_EQ(strings(r, "image/filename"), std::vector<std::string>{"000001.jpg"});
  EXPECT_EQ(strings(r, "image/source_id"), std::vector<std::string>{"000001.jpg"});
  EXPECT_EQ(strings(r, "image/format"), std::vector<std::string>{"jpeg"});
  EXPECT_EQ(strings(r, "image/key/sha256"),
            std::vector<std::string>{
                sha256_hex(read_file(kFixtures / "VOCdevkit/VOC2007/JPEGImages/000001.jpg"))});
  EXPECT_EQ(floats(r, "image/object/bbox/xmin"), (std::vector<float>{3.0f / 40, 11.0f / 40}));
  EXPECT_EQ(floats(r, "image/object/bbox/ymin"), (std::vector<float>{5.0f / 30, 2.0f / 30}));
  EXPECT_EQ(floats(r, "image/object/bbox/xmax"), (std::vector<float>{1.0f, 19.0f / 40}));
  EXPECT_EQ(floats(r, "image/object/bbox/ymax"), (std::vector<float>{27.0f / 30, 1.0f}));
  EXPECT_EQ(strings(r, "image/object/class/text"), (std::vector<std::string>{"dog", "person"}));
  EXPECT_EQ(ints(r, "image/object/class/label"), (std::vector<int64_t>{12, 15}));
  EXPECT_EQ(ints(r, "image/object/difficult"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(r, "image/object/truncated"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(strings(r, "image/object/view"), (std::vector<std::string>{"Left", "Unspecified"}));
  // 000003.xml has no object: a record with empty object lists.
  EXPECT_EQ(feature(records[2], "image/object/bbox/xmin").float_list().value_size(), 0);
  EXPECT_EQ(feature(records[2], "image/object/class/label").int64_list().value_size(), 0);
}

TEST_F(ConvertVoc, ShardsGoRoundRobinUnderTheApisNames) {
  ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  o.num_shards = 2;
  const ConvertVocSummary s = convert_voc(o);
  ASSERT_EQ(s.files, (std::vector<std::string>{output("voc.record-00000-of-00002"),
                                               output("voc.record-00001-of-00002")}));
  const std::vector<wire::tf::Example> first = read_examples(s.files[0]);
  const std::vector<wire::tf::Example> second = read_examples(s.files[1]);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(strings(first[0], "image/filename")[0], "000001.jpg");
  EXPECT_EQ(strings(second[0], "image/filename")[0], "000002.jpg");
  EXPECT_EQ(strings(first[1], "image/filename")[0], "000003.jpg");
  EXPECT_FALSE(fs::exists(o.output));
}

TEST_F(ConvertVoc, SetListChoosesTheIds) {
  ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("val.record"));
  o.set = "val";
  EXPECT_EQ(convert_voc(o).images, 1);
  const std::vector<wire::tf::Example> records = read_examples(o.output);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(strings(records[0], "image/filename")[0], "000003.jpg");
}

TEST_F(ConvertVoc, MalformedXmlNamesTheFileAndLine) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000002.xml";
  edit_file(xml, "<name>cat</name>", "<name>cat</nam>");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ":12: invalid closing tag name", "not well-formed XML"});
  // Cut off inside an element.
  write_file(xml, read_file(kFixtures / "VOCdevkit/VOC2007/Annotations/000002.xml").substr(0, 300));
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ":8: expected >"});
  write_file(xml, std::string("<annotation>\n<folder>VOC2007</folder>\0</annotation>", 50));
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ":2: a NUL byte (offset 37"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, MissingElementNamesTheFileAndElement) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000001.xml";
  edit_file(xml, "<difficult>1</difficult>", "");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": annotation/object[2]: missing element <difficult>"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, ElementGivenTwiceIsAnError) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000001.xml";
  edit_file(xml, "<xmin>3</xmin>", "<xmin>3</xmin><xmin>4</xmin>");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": annotation/object[1]/bndbox/xmin: appears 2 times"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, NumberThatDoesNotReadNamesTheElement) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000002.xml";
  edit_file(xml, "<ymin>10</ymin>", "<ymin>10px</ymin>");
  expect_error<DataLoss>(
      [&] { convert_voc(voc_options(voc, output("voc.record"))); },
      {xml.string() + ": annotation/object[2]/bndbox/ymin: '10px' is not a finite number"});
  edit_file(xml, "<height>48</height>", "<height>4.8e1</height>");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": annotation/size/height: '4.8e1' is not an integer"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, FileThatIsNotAVocAnnotationIsRefused) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000003.xml";
  write_file(xml, "<?xml version=\"1.0\"?>\n<html><body>404</body></html>\n");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": /: found <html>; a VOC annotation is one "
                                         "<annotation> element"});
  write_file(xml, "");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": /: found no element"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, AnnotationOverItsBoundIsRefusedUnread) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000003.xml";
  write_file(xml, "<annotation>" + std::string(kMaxVocAnnotationBytes, ' ') + "</annotation>");
  expect_error<InvalidArgument>(
      [&] { convert_voc(voc_options(voc, output("voc.record"))); },
      {"convert-voc: annotation", xml.string(), std::to_string(kMaxVocAnnotationBytes)});
  expect_nothing_written();
}

TEST_F(ConvertVoc, ImageThatIsNotAJpegIsRefused) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path image = voc / "VOC2007/JPEGImages/000002.jpg";
  write_file(image, std::string("\x89PNG\r\n\x1a\n", 8) + "rest of a PNG file");
  expect_error<DataLoss>(
      [&] { convert_voc(voc_options(voc, output("voc.record"))); },
      {"VOC2007/Annotations/000002.xml: image " + image.string() + " is a png file, not a JPEG"});
  write_file(image, "GIF89a");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {image.string() + " is neither a JPEG nor a PNG file, not a JPEG"});
  // JPEG's magic bytes, then nothing that decodes.
  write_file(image, std::string("\xff\xd8\xff\xe0", 4) + "not JPEG data");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {"VOC2007/Annotations/000002.xml: image " + image.string()});
  expect_nothing_written();
}

TEST_F(ConvertVoc, SizeThatIsNotTheImagesIsRefused) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000001.xml";
  edit_file(xml, "<width>40</width>", "<width>400</width>");
  expect_error<DataLoss>([&] { convert_voc(voc_options(voc, output("voc.record"))); },
                         {xml.string() + ": the annotation says 400 x 30 pixels but the image",
                          "000001.jpg is 40 x 30"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, UnknownClassNamesItTheFileAndTheLabelMap) {
  const fs::path voc = copy_fixture("VOCdevkit");
  const fs::path xml = voc / "VOC2007/Annotations/000002.xml";
  edit_file(xml, "<name>dog</name>", "<name>dgo</name>");
  expect_error<InvalidArgument>(
      [&] { convert_voc(voc_options(voc, output("voc.record"))); },
      {xml.string() + ": annotation/object[3]/name: class 'dgo' is not in the label map " +
           (kFixtures / "pascal_label_map.pbtxt").string(),
       "its classes: cat, dog, person", "did you mean 'dog'?"});
  expect_nothing_written();
}

TEST_F(ConvertVoc, DifficultObjectsLeftOutNeedNoLabel) {
  // As the script: an ignored difficult object is skipped before its class is looked up.
  const fs::path voc = copy_fixture("VOCdevkit");
  edit_file(voc / "VOC2007/Annotations/000001.xml", "<name>person</name>", "<name>ghost</name>");
  ConvertVocOptions o = voc_options(voc, output("voc.record"));
  o.ignore_difficult_instances = true;
  EXPECT_EQ(convert_voc(o).difficult_ignored, 2);
}

TEST_F(ConvertVoc, OptionsAreChecked) {
  ConvertVocOptions o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  o.year = "VOC2010";
  expect_error<InvalidArgument>([&] { convert_voc(o); },
                                {"--year is 'VOC2010'; expected VOC2007, VOC2012 or merged"});
  o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  o.set = "training";
  expect_error<InvalidArgument>([&] { convert_voc(o); }, {"--set is 'training'"});
  o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  o.num_shards = 0;
  expect_error<InvalidArgument>([&] { convert_voc(o); }, {"--num_shards is 0"});
  o = voc_options(kFixtures / "VOCdevkit", output("voc.record"));
  o.set = "test";  // the fixture has no test list
  expect_error<NotFound>([&] { convert_voc(o); }, {"aeroplane_test.txt"});
  expect_nothing_written();
}

// ---------------------------------------------------------------------------------------------
// convert-coco

ConvertCocoOptions coco_options(const fs::path& coco_dir, const std::string& output) {
  ConvertCocoOptions o;
  o.image_dir = (coco_dir / "images").string();
  o.annotations = (coco_dir / "instances.json").string();
  o.output = output;
  return o;
}

using ConvertCoco = ConverterTest;

TEST_F(ConvertCoco, TwoShardsGiveTheApisRecords) {
  ConvertCocoOptions o = coco_options(kFixtures / "coco", output("coco_2_shards"));
  o.num_shards = 2;
  const ConvertCocoSummary s = convert_coco(o);
  EXPECT_EQ(s.images, 3);
  EXPECT_EQ(s.boxes, 4);
  EXPECT_EQ(s.crowd_boxes, 1);
  EXPECT_EQ(s.images_without_boxes, 1);
  EXPECT_EQ(s.dropped_images, 0);
  EXPECT_EQ(s.skipped_annotations, 2);  // a zero width, a box past the right edge
  EXPECT_EQ(s.annotations_without_image, 1);
  ASSERT_EQ(s.files, (std::vector<std::string>{output("coco_2_shards-00000-of-00002"),
                                               output("coco_2_shards-00001-of-00002")}));
  expect_golden(s.files, "coco_2_shards.txt");
}

TEST_F(ConvertCoco, LabelMapGivesTheDecodersLabels) {
  ConvertCocoOptions o = coco_options(kFixtures / "coco", output("coco_label_map"));
  o.label_map_path = (kFixtures / "coco/label_map.pbtxt").string();
  const ConvertCocoSummary s = convert_coco(o);
  ASSERT_EQ(s.files, std::vector<std::string>{output("coco_label_map-00000-of-00001")});
  expect_golden(s.files, "coco_label_map.txt");
}

TEST_F(ConvertCoco, RecordsHoldTheAnnotationsValues) {
  // Image 1 by hand (40 x 30): a person [4, 3.5, 20, 12.25], a crowd of dogs over the whole
  // image, a box of zero width (skipped) and a dog [1.5, 2, 30, 20], in file order.
  const ConvertCocoOptions o = coco_options(kFixtures / "coco", output("coco"));
  convert_coco(o);
  const std::vector<wire::tf::Example> records = read_examples(output("coco-00000-of-00001"));
  ASSERT_EQ(records.size(), 3u);
  const wire::tf::Example& r = records[0];
  EXPECT_EQ(ints(r, "image/height"), std::vector<int64_t>{30});
  EXPECT_EQ(ints(r, "image/width"), std::vector<int64_t>{40});
  EXPECT_EQ(strings(r, "image/filename"), std::vector<std::string>{"000000000001.jpg"});
  EXPECT_EQ(strings(r, "image/source_id"), std::vector<std::string>{"1"});
  EXPECT_EQ(
      strings(r, "image/key/sha256"),
      std::vector<std::string>{sha256_hex(read_file(kFixtures / "coco/images/000000000001.jpg"))});
  EXPECT_EQ(strings(r, "image/encoded")[0], read_file(kFixtures / "coco/images/000000000001.jpg"));
  EXPECT_EQ(floats(r, "image/object/bbox/xmin"),
            (std::vector<float>{static_cast<float>(4.0 / 40), 0.0f, static_cast<float>(1.5 / 40)}));
  EXPECT_EQ(
      floats(r, "image/object/bbox/xmax"),
      (std::vector<float>{static_cast<float>(24.0 / 40), 1.0f, static_cast<float>(31.5 / 40)}));
  EXPECT_EQ(floats(r, "image/object/bbox/ymin"),
            (std::vector<float>{static_cast<float>(3.5 / 30), 0.0f, static_cast<float>(2.0 / 30)}));
  EXPECT_EQ(
      floats(r, "image/object/bbox/ymax"),
      (std::vector<float>{static_cast<float>(15.75 / 30), 1.0f, static_cast<float>(22.0 / 30)}));
  EXPECT_EQ(strings(r, "image/object/class/text"),
            (std::vector<std::string>{"person", "dog", "dog"}));
  EXPECT_EQ(ints(r, "image/object/class/label"), (std::vector<int64_t>{1, 18, 18}));
  EXPECT_EQ(ints(r, "image/object/is_crowd"), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(floats(r, "image/object/area"), (std::vector<float>{201.5f, 900.0f, 512.75f}));
  // Image 2 has no annotation: written, with empty object lists.
  EXPECT_EQ(strings(records[1], "image/source_id"), std::vector<std::string>{"2"});
  EXPECT_EQ(feature(records[1], "image/object/bbox/xmin").float_list().value_size(), 0);
}

TEST_F(ConvertCoco, DropImagesWithoutBoxesLeavesThemOut) {
  ConvertCocoOptions o = coco_options(kFixtures / "coco", output("coco"));
  o.drop_images_without_boxes = true;
  const ConvertCocoSummary s = convert_coco(o);
  EXPECT_EQ(s.images, 2);
  EXPECT_EQ(s.images_without_boxes, 1);
  EXPECT_EQ(s.dropped_images, 1);
  const std::vector<wire::tf::Example> records = read_examples(s.files.at(0));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(strings(records[0], "image/source_id")[0], "1");
  EXPECT_EQ(strings(records[1], "image/source_id")[0], "3");
}

TEST_F(ConvertCoco, ImageWhoseBoxesAreAllSkippedCountsAsWithoutBoxes) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"bbox\": [30, 2, 18, 30]", "\"bbox\": [30, 2, 18, 31]");
  ConvertCocoOptions o = coco_options(coco, output("coco"));
  o.drop_images_without_boxes = true;
  const ConvertCocoSummary s = convert_coco(o);
  EXPECT_EQ(s.images, 1);
  EXPECT_EQ(s.images_without_boxes, 2);
  EXPECT_EQ(s.skipped_annotations, 3);
}

TEST_F(ConvertCoco, BoxStartingOutsideTheImageIsSkipped) {
  // The script writes it (it checks only the far edges); DetectionReader would refuse it.
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"bbox\": [1.5, 2, 30, 20]", "\"bbox\": [-1.5, 2, 30, 20]");
  const ConvertCocoSummary s = convert_coco(coco_options(coco, output("coco")));
  EXPECT_EQ(s.boxes, 3);
  EXPECT_EQ(s.skipped_annotations, 3);
}

TEST_F(ConvertCoco, WrongTypeNamesTheFileAndTheJsonPath) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"bbox\": [4, 3.5, 20, 12.25]",
            "\"bbox\": [\"4\", 3.5, 20, 12.25]");
  expect_error<DataLoss>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {(coco / "instances.json").string() +
                          ": $.annotations[0].bbox[0]: expected a number, found a string"});
  expect_nothing_written();
}

TEST_F(ConvertCoco, MalformedJsonNamesTheFileAndByte) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"iscrowd\": 1,", "\"iscrowd\": 1");
  expect_error<DataLoss>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {(coco / "instances.json").string() + ": $.annotations[1]",
                          "expected ',' or '}' in an object (at byte "});
  expect_nothing_written();
}

TEST_F(ConvertCoco, CategoryIdNotInCategoriesIsAnError) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"category_id\": 2,", "\"category_id\": 7,");
  expect_error<DataLoss>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {(coco / "instances.json").string() +
                          ": annotations[3] (id 13): category_id 7 is not the id of an entry of "
                          "\"categories\""});
  expect_nothing_written();
}

TEST_F(ConvertCoco, CategoryMissingFromTheLabelMapIsAnError) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "label_map.pbtxt", "display_name: \"dog\"", "display_name: \"puppy\"");
  ConvertCocoOptions o = coco_options(coco, output("coco"));
  o.label_map_path = (coco / "label_map.pbtxt").string();
  expect_error<InvalidArgument>([&] { convert_coco(o); },
                                {(coco / "instances.json").string() +
                                     ": annotations[1] (id 11): class 'dog' is not in the label "
                                     "map " +
                                     o.label_map_path,
                                 "/m/0bt9lr, puppy"});
  expect_nothing_written();
}

// --include_masks. Image 1 of the fixture (40 x 30) with three masked objects: a rectangle and a
// triangle as two polygons of one object, an uncompressed crowd RLE and the same mask as
// compressed RLE ("o02_T1", pycocotools.mask.encode's), with an annotation of an empty box and
// no segmentation, which is skipped and so needs none. interop.convert_coco_masks_match_pycocotools
// compares many more with pycocotools itself.
std::string masks_json(const std::string& annotations) {
  return R"({"images": [{"id": 1, "file_name": "000000000001.jpg", "width": 40, "height": 30}],
"categories": [{"id": 1, "name": "person"}], "annotations": [)" +
         annotations + "]}";
}

const std::string kMaskedAnnotations =
    R"({"id": 5, "image_id": 1, "category_id": 1, "bbox": [10, 5, 23, 17],
  "segmentation": [[10, 5, 20, 5, 20, 8, 10, 8], [30, 20, 33, 20, 33, 22]]},
{"id": 6, "image_id": 1, "category_id": 1, "bbox": [1, 1, 1, 2], "iscrowd": 1,
  "segmentation": {"size": [30, 40], "counts": [31, 2, 1167]}},
{"id": 7, "image_id": 1, "category_id": 1, "bbox": [10, 10, 0, 5]},
{"id": 8, "image_id": 1, "category_id": 1, "bbox": [1, 1, 1, 2],
  "segmentation": {"size": [30, 40], "counts": "o02_T1"}})";

// The (y, x) of the ones of a PNG mask, after checking it is 30 x 40, one channel, of 0 and 1.
std::vector<std::pair<int64_t, int64_t>> mask_ones(const std::string& png) {
  const image::DecodedImage decoded =
      image::decode_image(std::as_bytes(std::span<const char>(png.data(), png.size())), 0, "mask");
  EXPECT_EQ(decoded.height, 30);
  EXPECT_EQ(decoded.width, 40);
  EXPECT_EQ(decoded.channels, 1);
  std::vector<std::pair<int64_t, int64_t>> ones;
  for (std::size_t i = 0; i < decoded.pixels.size(); ++i) {
    EXPECT_LE(decoded.pixels[i], 1) << "pixel " << i;
    if (decoded.pixels[i] != 0) {
      ones.emplace_back(static_cast<int64_t>(i) / 40, static_cast<int64_t>(i) % 40);
    }
  }
  return ones;
}

TEST_F(ConvertCoco, IncludeMasksWritesEachBoxsMaskAsAPng) {
  const fs::path coco = copy_fixture("coco");
  write_file(coco / "instances.json", masks_json(kMaskedAnnotations));
  ConvertCocoOptions o = coco_options(coco, output("coco"));
  o.include_masks = true;
  const ConvertCocoSummary s = convert_coco(o);
  EXPECT_EQ(s.boxes, 3);
  EXPECT_EQ(s.skipped_annotations, 1);
  const std::vector<wire::tf::Example> records = read_examples(s.files.at(0));
  ASSERT_EQ(records.size(), 1u);
  const std::vector<std::string> masks = strings(records[0], "image/object/mask");
  ASSERT_EQ(masks.size(), 3u);
  // pycocotools' frPyObjects + decode: the rectangle covers columns 10..19 of rows 5..7, the
  // triangle (30, 20), (33, 20), (33, 22) the pixels (20, 31), (20, 32) and (21, 32).
  std::vector<std::pair<int64_t, int64_t>> polygons;
  for (int64_t y = 5; y <= 7; ++y) {
    for (int64_t x = 10; x <= 19; ++x) polygons.emplace_back(y, x);
  }
  polygons.insert(polygons.end(), {{20, 31}, {20, 32}, {21, 32}});
  EXPECT_EQ(mask_ones(masks[0]), polygons);
  // Column-major runs: 31 zeros, then 2 ones, are pixels (1, 1) and (2, 1).
  const std::vector<std::pair<int64_t, int64_t>> runs{{1, 1}, {2, 1}};
  EXPECT_EQ(mask_ones(masks[1]), runs);
  EXPECT_EQ(mask_ones(masks[2]), runs);
}

TEST_F(ConvertCoco, WithoutIncludeMasksNoMaskIsWrittenNorSegmentationRead) {
  const fs::path coco = copy_fixture("coco");
  // A segmentation that --include_masks would refuse is not even read without it.
  write_file(coco / "instances.json",
             masks_json(R"({"id": 5, "image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2],
  "segmentation": {"size": [30, 40], "counts": "!!"}})"));
  const ConvertCocoSummary s = convert_coco(coco_options(coco, output("coco")));
  const std::vector<wire::tf::Example> records = read_examples(s.files.at(0));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].features().feature().count("image/object/mask"), 0u);
}

// Each bad segmentation: a DataLoss naming the file, the annotation and its segmentation, and
// nothing written.
struct BadSegmentation {
  const char* name;
  std::string segmentation;
  std::vector<std::string> message;
};

TEST_F(ConvertCoco, IncludeMasksRefusesBadSegmentationsNamingTheAnnotation) {
  const std::vector<BadSegmentation> cases = {
      {"missing", "", {"segmentation: missing (--include_masks"}},
      {"box_as_polygon", R"([[1, 1, 5, 1]])", {"the first polygon has 4 coordinates"}},
      {"odd_coordinates", R"([[1, 1, 5, 1, 5, 5, 1]])", {"polygon 0: polygon has 7 coordinates"}},
      {"huge_coordinate", R"([[1, 1, 5, 1, 5, 1e12]])", {"coordinate 5", "within +-1e7"}},
      {"empty_polygons", R"([])", {"empty list of polygons"}},
      {"counts_short", R"({"size": [30, 40], "counts": [31, 2, 1166]})", {"sum to 1199, not"}},
      {"bad_character", R"({"size": [30, 40], "counts": "o0~_T1"})", {"the character '~'"}},
      {"wrong_size",
       R"({"size": [40, 30], "counts": [1200]})",
       {"the RLE's size is [40, 30] but the image is [30, 40] (height, width)"}},
      {"huge_size",
       R"({"size": [1048577, 1], "counts": [1048577]})",
       {"1048577 x 1 is not within"}},
  };
  for (const BadSegmentation& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path coco = copy_fixture("coco");
    const std::string segmentation =
        c.segmentation.empty() ? "" : ", \"segmentation\": " + c.segmentation;
    // The first annotation is good, so the error is the second's.
    write_file(coco / "instances.json",
               masks_json(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2],
  "segmentation": {"size": [30, 40], "counts": [1200]}},
{"id": 9, "image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2])" +
                          segmentation + "}"));
    ConvertCocoOptions o = coco_options(coco, output("coco"));
    o.include_masks = true;
    std::vector<std::string> parts{(coco / "instances.json").string() +
                                   ": annotations[1] (id 9): segmentation"};
    parts.insert(parts.end(), c.message.begin(), c.message.end());
    expect_error<DataLoss>([&] { convert_coco(o); }, parts);
    expect_nothing_written();
    fs::remove_all(coco);
  }
}

TEST_F(ConvertCoco, ImageWithoutASizeIsAnError) {
  const fs::path coco = copy_fixture("coco");
  edit_file(coco / "instances.json", "\"width\": 32, \"height\": 48", "\"width\": 32");
  expect_error<DataLoss>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {(coco / "instances.json").string() +
                          ": images[1] (id 2): width and height must be given and positive"});
  expect_nothing_written();
}

TEST_F(ConvertCoco, ImageThatIsNotAJpegIsAnError) {
  const fs::path coco = copy_fixture("coco");
  const fs::path image = coco / "images/000000000003.jpg";
  write_file(image, "<html>not found</html>");
  expect_error<DataLoss>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {"images[2] (id 3): image " + image.string() +
                          " is neither a JPEG nor a PNG file, not a JPEG"});
  expect_nothing_written();
}

TEST_F(ConvertCoco, MissingImageFileIsNotFound) {
  const fs::path coco = copy_fixture("coco");
  fs::remove(coco / "images/000000000002.jpg");
  expect_error<NotFound>([&] { convert_coco(coco_options(coco, output("coco"))); },
                         {"000000000002.jpg"});
  expect_nothing_written();
}

}  // namespace
}  // namespace trainyard::app
