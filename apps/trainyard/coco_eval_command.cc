// trainyard coco-eval GROUNDTRUTH.json DETECTIONS.json: pycocotools' COCOeval for bounding
// boxes (COCO(gt).loadRes(dt), evaluate, accumulate, summarize) computed natively, printing the
// 12 figures as summarize() prints them. --per_category adds each category's 12 figures, as
// COCOeval gives them with params.catIds = [that category].
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "trainyard/core/progress.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_evaluation.h"
#include "trainyard/pkg/detection/coco_json.h"

namespace po = boost::program_options;

namespace trainyard::app {

int run_coco_eval(const std::vector<std::string>& args) {
  po::options_description options("trainyard coco-eval GROUNDTRUTH.json DETECTIONS.json");
  options.add_options()("help,h", "this help")(
      "groundtruth", po::value<std::string>(),
      "COCO instances annotations (images, annotations, categories)")(
      "detections", po::value<std::string>(),
      "COCO results: [{image_id, category_id, bbox: [x, y, w, h], score}, ...]")(
      "tags", po::bool_switch(),
      "print the Object Detection API's metric names (DetectionBoxes_Precision/mAP ...) with "
      "full-precision values instead of summarize()'s lines")(
      "per_category", po::bool_switch(),
      "also each category's 12 figures (COCOeval with params.catIds = [id]), in id order: "
      "a 'category ID NAME' line before its summary lines, or with --tags the API's "
      "'DetectionBoxes_PerformanceByCategory/mAP/NAME' and 'TAG ByCategory/NAME' lines");
  po::positional_options_description positional;
  positional.add("groundtruth", 1).add("detections", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  if (!vm.count("groundtruth") || !vm.count("detections")) {
    std::cerr << options << "\n";
    throw InvalidArgument("coco-eval needs a groundtruth file and a detections file");
  }
  const std::string gt_path = vm["groundtruth"].as<std::string>();
  const std::string dt_path = vm["detections"].as<std::string>();
  const detection::CocoInstances groundtruth = detection::read_coco_instances(gt_path);
  const std::vector<detection::CocoResult> results =
      detection::read_coco_results(dt_path, &groundtruth);

  std::vector<detection::Category> categories;
  for (const detection::CocoCategory& category : groundtruth.categories) {
    categories.push_back({category.id, category.name});
  }
  detection::CocoDetectionEvaluator evaluator(std::move(categories));
  // pycocotools evaluates the images of `images` only.
  std::map<int64_t, std::vector<detection::CocoGroundtruthBox>> boxes_of_image;
  for (const detection::CocoImageInfo& image : groundtruth.images) boxes_of_image[image.id];
  for (const detection::CocoAnnotation& ann : groundtruth.annotations) {
    const auto it = boxes_of_image.find(ann.image_id);
    if (it == boxes_of_image.end()) continue;
    it->second.push_back({ann.bbox[0], ann.bbox[1], ann.bbox[2], ann.bbox[3], ann.category_id,
                          ann.iscrowd, ann.area, ann.id});
  }
  for (const auto& [image_id, boxes] : boxes_of_image) {
    evaluator.add_coco_groundtruth(image_id, boxes);
  }
  std::map<int64_t, std::vector<detection::CocoDetectionBox>> detections_of_image;
  for (const detection::CocoResult& r : results) {
    detections_of_image[r.image_id].push_back(
        {r.bbox[0], r.bbox[1], r.bbox[2], r.bbox[3], r.category_id, r.score});
  }
  for (const auto& [image_id, boxes] : detections_of_image) {
    evaluator.add_coco_detections(image_id, boxes);
  }
  Progress progress("coco-eval", "images", static_cast<int64_t>(boxes_of_image.size()), std::cerr);
  const bool per_category = vm["per_category"].as<bool>();
  std::vector<detection::CocoSummary> by_category;
  const detection::CocoSummary summary = evaluator.summarize(
      [&](std::size_t done, std::size_t) { progress.set(static_cast<int64_t>(done)); },
      per_category ? &by_category : nullptr);
  progress.finish();
  const bool tags = vm["tags"].as<bool>();
  const auto print = [&](const detection::CocoSummary& figures, const std::string& suffix) {
    for (int i = 0; i < detection::kCocoSummaryCount; ++i) {
      if (tags) {
        char value[32];
        std::snprintf(value, sizeof value, "%.17g", figures[i]);
        std::cout << detection::coco_metric_tag(i) << suffix << " " << value << "\n";
      } else {
        std::cout << detection::coco_summary_line(i, figures[i]) << "\n";
      }
    }
  };
  print(summary, "");
  for (std::size_t k = 0; k < by_category.size(); ++k) {
    const detection::Category& category = evaluator.categories()[k];
    if (tags) {
      char value[32];
      std::snprintf(value, sizeof value, "%.17g", by_category[k][0]);
      std::cout << detection::coco_per_category_tag(category.name) << " " << value << "\n";
      print(by_category[k], " ByCategory/" + category.name);
    } else {
      std::cout << "category " << category.id << " " << category.name << "\n";
      print(by_category[k], "");
    }
  }
  return 0;
}

}  // namespace trainyard::app
