// libFuzzer target for the COCO JSON readers (pkg/detection/src/coco_json.cc): parse_coco_instances
// and parse_coco_results, their JSON reader (escapes, surrogates, numbers, nesting 64), the
// layout's required members and duplicate ids, and the results' image check.
//
// The first byte picks the reader (even: instances, odd: results, checked against a fixed
// groundtruth of images 1 to 3); the rest is the document. A rejection must be DataLoss naming
// the source. Accepted instances have unique image, annotation and category ids and finite
// numbers; accepted results name only images 1 to 3 and, written with coco_results_json, read
// back the same.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::detection;
  if (size == 0) return 0;
  const bool results_file = data[0] % 2 == 1;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!results_file) {
    CocoInstances gt;
    try {
      gt = parse_coco_instances(input, "instances.json");
    } catch (const DataLoss& e) {
      FUZZ_CHECK(std::string(e.what()).starts_with("instances.json: $"),
                 std::string("error without the source and path: ") + e.what());
      return 0;
    }
    std::set<int64_t> images, annotations, categories;
    for (const CocoImageInfo& image : gt.images) {
      FUZZ_CHECK(images.insert(image.id).second, "duplicate image id accepted");
    }
    for (const CocoAnnotation& ann : gt.annotations) {
      FUZZ_CHECK(annotations.insert(ann.id).second, "duplicate annotation id accepted");
      for (double v : ann.bbox) FUZZ_CHECK(std::isfinite(v), "a bbox value is not finite");
      FUZZ_CHECK(std::isfinite(ann.area), "an area is not finite");
    }
    for (const CocoCategory& category : gt.categories) {
      FUZZ_CHECK(categories.insert(category.id).second, "duplicate category id accepted");
    }
    return 0;
  }
  CocoInstances gt;
  gt.images = {{1, 0, 0, ""}, {2, 0, 0, ""}, {3, 0, 0, ""}};
  std::vector<CocoResult> results;
  try {
    results = parse_coco_results(input, "results.json", &gt);
  } catch (const DataLoss& e) {
    FUZZ_CHECK(std::string(e.what()).starts_with("results.json: $"),
               std::string("error without the source and path: ") + e.what());
    return 0;
  }
  for (const CocoResult& r : results) {
    FUZZ_CHECK(r.image_id >= 1 && r.image_id <= 3,
               "image_id " + std::to_string(r.image_id) + " accepted");
  }
  std::vector<CocoResult> again;
  try {
    again = parse_coco_results(coco_results_json(results), "written", &gt);
  } catch (const DataLoss& e) {
    FUZZ_CHECK(false, std::string("the written results do not read: ") + e.what());
  }
  FUZZ_CHECK(again.size() == results.size(), "the written results have another count");
  for (std::size_t i = 0; i < results.size(); ++i) {
    FUZZ_CHECK(again[i].image_id == results[i].image_id &&
                   again[i].category_id == results[i].category_id &&
                   again[i].bbox == results[i].bbox && again[i].score == results[i].score,
               "result " + std::to_string(i) + " reads back differently");
  }
  return 0;
}
