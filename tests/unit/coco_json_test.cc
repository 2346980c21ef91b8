// pkg/detection coco_json: the instances layout and the results list pycocotools reads (members in
// any order, unknown members and segmentations skipped, defaults for area and iscrowd), the checks
// loadRes makes (results of unknown images), the writer's round trip, and errors that name the
// file and the JSON path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_json.h"

namespace trainyard::detection {
namespace {

using ::testing::HasSubstr;

const char kInstances[] = R"({
  "info": {"description": "test", "nested": [[1, 2], {"a": null}]},
  "images": [{"file_name": "a.jpg", "id": 10, "width": 640, "height": 480},
             {"id": 11}],
  "annotations": [
    {"segmentation": [[1.5, 2, 3, 4]], "area": 50.25, "iscrowd": 0, "image_id": 10,
     "bbox": [1, 2.5, 10, 20], "category_id": 3, "id": 1},
    {"id": 2, "image_id": 11, "category_id": 1, "bbox": [0, 0, 4e1, 5.0], "iscrowd": 1},
    {"id": 3, "image_id": 99, "category_id": 1, "bbox": [0, 0, 1, 1], "iscrowd": true}
  ],
  "categories": [{"id": 1, "name": "person", "supercategory": "human"},
                 {"id": 3, "name": "caf\u00e9"}]
})";

TEST(CocoJsonTest, ReadsTheInstancesLayout) {
  const CocoInstances gt = parse_coco_instances(kInstances, "gt.json");
  ASSERT_EQ(gt.images.size(), 2u);
  EXPECT_EQ(gt.images[0].id, 10);
  EXPECT_EQ(gt.images[0].width, 640);
  EXPECT_EQ(gt.images[0].file_name, "a.jpg");
  ASSERT_EQ(gt.annotations.size(), 3u);
  EXPECT_EQ(gt.annotations[0].category_id, 3);
  EXPECT_EQ(gt.annotations[0].bbox[1], 2.5);
  EXPECT_EQ(gt.annotations[0].area, 50.25);
  EXPECT_FALSE(gt.annotations[0].iscrowd);
  EXPECT_EQ(gt.annotations[1].area, 200.0);  // absent: w * h
  EXPECT_TRUE(gt.annotations[1].iscrowd);
  EXPECT_TRUE(gt.annotations[2].iscrowd);
  EXPECT_EQ(gt.categories[1].name, "caf\xC3\xA9");
}

TEST(CocoJsonTest, ReadsResultsAndChecksTheirImages) {
  const CocoInstances gt = parse_coco_instances(kInstances, "gt.json");
  const std::vector<CocoResult> results = parse_coco_results(
      R"([{"score": 0.5, "bbox": [1, 2, 3, 4], "category_id": 1, "image_id": 11,
           "segmentation": {"counts": "abc", "size": [2, 2]}}])",
      "dt.json", &gt);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].image_id, 11);
  EXPECT_EQ(results[0].bbox[3], 4.0);
  EXPECT_EQ(results[0].score, 0.5);
  EXPECT_TRUE(parse_coco_results("[]", "dt.json", &gt).empty());
  try {
    parse_coco_results(R"([{"image_id": 11, "category_id": 1, "bbox": [0, 0, 1, 1],
                            "score": 1},
                           {"image_id": 12, "category_id": 1, "bbox": [0, 0, 1, 1],
                            "score": 1}])",
                       "dt.json", &gt);
    ADD_FAILURE() << "no DataLoss";
  } catch (const DataLoss& e) {
    EXPECT_THAT(e.what(), HasSubstr("dt.json: $[1]: image_id 12 is not an image of the "
                                    "groundtruth"));
  }
}

TEST(CocoJsonTest, ReadsSegmentationsWhenAskedFor) {
  const CocoInstances skipped = parse_coco_instances(kInstances, "gt.json");
  EXPECT_EQ(skipped.annotations[0].segmentation.kind, CocoSegmentation::Kind::kNone);
  const CocoInstances gt = parse_coco_instances(R"({"images": [{"id": 1}], "categories": [],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
       "segmentation": [[1.5, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12, 13, 14]]},
      {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "iscrowd": 1,
       "segmentation": {"size": [2, 3], "counts": [1, 4, 1]}},
      {"id": 3, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
       "segmentation": {"counts": "a\\b", "size": [4, 5]}}]})",
                                                "gt.json", true);
  const CocoSegmentation& polygons = gt.annotations[0].segmentation;
  EXPECT_EQ(polygons.kind, CocoSegmentation::Kind::kPolygons);
  ASSERT_EQ(polygons.polygons.size(), 2u);
  EXPECT_EQ(polygons.polygons[0], (std::vector<double>{1.5, 2, 3, 4, 5, 6}));
  EXPECT_EQ(polygons.polygons[1].size(), 8u);
  const CocoSegmentation& counts = gt.annotations[1].segmentation;
  EXPECT_EQ(counts.kind, CocoSegmentation::Kind::kUncompressedRle);
  EXPECT_EQ(counts.height, 2);
  EXPECT_EQ(counts.width, 3);
  EXPECT_EQ(counts.counts, (std::vector<uint32_t>{1, 4, 1}));
  const CocoSegmentation& compressed = gt.annotations[2].segmentation;
  EXPECT_EQ(compressed.kind, CocoSegmentation::Kind::kCompressedRle);
  EXPECT_EQ(compressed.compressed, "a\\b");
  EXPECT_EQ(compressed.height, 4);
  // A result with a segmentation needs no bbox.
  const std::vector<CocoResult> results = parse_coco_results(
      R"([{"image_id": 1, "category_id": 1, "score": 0.5,
           "segmentation": {"size": [2, 2], "counts": "04"}}])",
      "dt.json", &gt, true);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].has_bbox);
  EXPECT_EQ(results[0].segmentation.compressed, "04");
  const struct {
    const char* segmentation;
    const char* error;
  } kBad[] = {
      {R"({"size": [2, 2], "counts": [1, -3]})",
       "$.annotations[0].segmentation.counts[1]: RLE "
       "count -3 is not in 0..2^32-1"},
      {R"({"size": [2], "counts": "0"})", "size has 1 numbers, not 2"},
      {R"({"counts": "0"})", "RLE segmentation without \"size\""},
      {R"("abc")", "a segmentation must be a list of polygons or an RLE object, found a string"},
      {R"([[1, "2"]])", "segmentation[0][1]: expected a number"},
  };
  for (const auto& bad : kBad) {
    const std::string text =
        std::string(R"({"images": [], "categories": [], "annotations": [{"id": 1, "image_id": 1,
        "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": )") +
        bad.segmentation + "}]}";
    try {
      parse_coco_instances(text, "gt.json", true);
      ADD_FAILURE() << "no DataLoss for " << bad.segmentation;
    } catch (const DataLoss& e) {
      EXPECT_THAT(e.what(), HasSubstr(bad.error));
      EXPECT_THAT(e.what(), HasSubstr("gt.json: "));
    }
  }
}

TEST(CocoJsonTest, ErrorsNameTheFileAndPath) {
  const struct {
    const char* text;
    const char* error;
  } instance_cases[] = {
      {R"({"images": [], "annotations": [], "categories": [{"id": 1}, {"id": 1}]})",
       "gt.json: $.categories[1]: duplicate category id 1"},
      {R"({"images": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
          "bbox": [0, 0, 1]}], "categories": []})",
       "gt.json: $.annotations[0].bbox: bbox has 3 numbers, not 4"},
      {R"({"images": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
          "bbox": [0, 0, 1, "2"]}], "categories": []})",
       "$.annotations[0].bbox[3]: expected a number, found a string"},
      {R"({"images": [{"id": 1.5}], "annotations": [], "categories": []})",
       "$.images[0].id: expected an integer, found 1.5"},
      {R"({"images": [{"id": 99999999999999999999}], "annotations": [], "categories": []})",
       "integer 99999999999999999999 is out of the 64-bit range"},
      {R"({"images": [{"width": 3}], "annotations": [], "categories": []})",
       "$.images[0]: missing member \"id\""},
      {R"({"images": [], "categories": []})", "gt.json: $: missing member \"annotations\""},
      {R"({"images": [], "annotations": [], "categories": []} x)",
       "unexpected text after the JSON value"},
      {R"({"info": 1e999, "images": []})", "$.info: number 1e999 is out of range"},
      {R"({"images": [], "annotations": [], "categories": [)", "expected an object"},
      {R"({"info": "a\x"})", "invalid escape \\x"},
      {R"({"info": "\ud800", "images": []})", "unpaired surrogate"},
      {R"([1, 2])", "gt.json: $: expected an object, found an array"},
      {"", "expected an object, found the end of the file"},
  };
  for (const auto& c : instance_cases) {
    try {
      parse_coco_instances(c.text, "gt.json");
      ADD_FAILURE() << "no DataLoss for " << c.text;
    } catch (const DataLoss& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.error)) << c.text;
    }
  }
  std::string deep(100, '[');
  try {
    parse_coco_instances("{\"info\": " + deep, "gt.json");
    ADD_FAILURE() << "no DataLoss";
  } catch (const DataLoss& e) {
    EXPECT_THAT(e.what(), HasSubstr("nesting deeper than 64"));
  }
  try {
    parse_coco_results(R"({"image_id": 1})", "dt.json", nullptr);
    ADD_FAILURE() << "no DataLoss";
  } catch (const DataLoss& e) {
    EXPECT_THAT(e.what(), HasSubstr("dt.json: $: the results must be an array of objects"));
  }
  try {
    parse_coco_results(R"([{"image_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])", "dt.json",
                       nullptr);
    ADD_FAILURE() << "no DataLoss";
  } catch (const DataLoss& e) {
    EXPECT_THAT(e.what(), HasSubstr("dt.json: $[0]: missing member \"category_id\""));
  }
}

TEST(CocoJsonTest, WrittenResultsReadBackTheSame) {
  const std::vector<CocoResult> results = {{1, 2, {0.1, 1.0 / 3, 1e-7, 12345.678}, 0.123456789},
                                           {-4, 90, {0, 0, 0, 0}, 1}};
  const std::string json = coco_results_json(results);
  const std::vector<CocoResult> back = parse_coco_results(json, "x", nullptr);
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].image_id, results[i].image_id);
    EXPECT_EQ(back[i].category_id, results[i].category_id);
    EXPECT_EQ(back[i].bbox, results[i].bbox);
    EXPECT_EQ(back[i].score, results[i].score);
  }
  EXPECT_EQ(coco_results_json({}), "[]\n");

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("coco_json_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "results.json").string();
  write_coco_results(path, results);
  EXPECT_EQ(read_coco_results(path, nullptr).size(), 2u);
  EXPECT_THROW(write_coco_results(path, {{1, 1, {0, 0, NAN, 1}, 1}}), InvalidArgument);
  try {
    read_coco_instances((dir / "missing.json").string());
    ADD_FAILURE() << "no NotFound";
  } catch (const NotFound& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("cannot open COCO annotations " + (dir / "missing.json").string()));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainyard::detection
