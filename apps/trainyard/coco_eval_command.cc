// trainyard coco-eval GROUNDTRUTH.json DETECTIONS.json: pycocotools' COCOeval for bounding
// boxes (COCO(gt).loadRes(dt), evaluate, accumulate, summarize) computed natively, printing the
// 12 figures as summarize() prints them; --iou_type segm evaluates instance masks instead
// (COCOeval(gt, dt, 'segm')). --per_category adds each category's 12 figures, as COCOeval gives
// them with params.catIds = [that category].
#include <array>
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "trainyard/core/progress.h"
#include "trainyard/error.h"
#include "trainyard/pkg/detection/coco_evaluation.h"
#include "trainyard/pkg/detection/coco_json.h"
#include "trainyard/pkg/detection/coco_mask.h"

namespace po = boost::program_options;

namespace trainyard::app {
namespace {

// COCO.annToRLE of an annotation or result, its errors naming the file and the record.
detection::Rle mask_of(const detection::CocoSegmentation& segmentation,
                       const detection::CocoImageInfo& image, const std::string& where) {
  try {
    return detection::coco_segmentation_rle(segmentation, image.height, image.width);
  } catch (const InvalidArgument& e) {
    throw DataLoss(where + " (image " + std::to_string(image.id) + "): segmentation: " + e.what());
  }
}

}  // namespace

int run_coco_eval(const std::vector<std::string>& args) {
  po::options_description options("trainyard coco-eval GROUNDTRUTH.json DETECTIONS.json");
  options.add_options()("help,h", "this help")(
      "groundtruth", po::value<std::string>(),
      "COCO instances annotations (images, annotations, categories)")(
      "detections", po::value<std::string>(),
      "COCO results: [{image_id, category_id, bbox: [x, y, w, h], score}, ...] (for segm "
      "with segmentation: {size: [h, w], counts: RLE string})")(
      "iou_type", po::value<std::string>()->default_value("bbox"),
      "bbox (boxes) or segm (instance masks: the groundtruth's polygons or RLE and the "
      "results' RLE, as COCOeval(gt, dt, 'segm'))")(
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
  const std::string iou_name = vm["iou_type"].as<std::string>();
  if (iou_name != "bbox" && iou_name != "segm") {
    throw InvalidArgument("--iou_type " + iou_name + ": known types are bbox and segm" +
                          (iou_name == "keypoints" ? " (keypoints are not evaluated)" : ""));
  }
  const bool segm = iou_name == "segm";
  const detection::CocoInstances groundtruth = detection::read_coco_instances(gt_path, segm);
  const std::vector<detection::CocoResult> results =
      detection::read_coco_results(dt_path, &groundtruth, segm);

  std::vector<detection::Category> categories;
  std::map<int64_t, bool> evaluated_categories;
  for (const detection::CocoCategory& category : groundtruth.categories) {
    categories.push_back({category.id, category.name});
    evaluated_categories[category.id] = true;
  }
  const detection::CocoIouType iou_type =
      segm ? detection::CocoIouType::kSegm : detection::CocoIouType::kBbox;
  detection::CocoDetectionEvaluator evaluator(std::move(categories), false, iou_type);
  // pycocotools evaluates the images of `images` only (and converts the masks of those images'
  // annotations of known categories only).
  std::map<int64_t, const detection::CocoImageInfo*> image_info;
  std::map<int64_t, std::vector<detection::CocoGroundtruthBox>> boxes_of_image;
  for (const detection::CocoImageInfo& image : groundtruth.images) {
    boxes_of_image[image.id];
    image_info[image.id] = &image;
  }
  for (const detection::CocoAnnotation& ann : groundtruth.annotations) {
    const auto it = boxes_of_image.find(ann.image_id);
    if (it == boxes_of_image.end()) continue;
    detection::CocoGroundtruthBox box;
    box.x = ann.bbox[0];
    box.y = ann.bbox[1];
    box.width = ann.bbox[2];
    box.height = ann.bbox[3];
    box.category_id = ann.category_id;
    box.is_crowd = ann.iscrowd;
    box.area = ann.area;
    box.id = ann.id;
    if (segm && evaluated_categories.count(ann.category_id) != 0) {
      box.mask = mask_of(ann.segmentation, *image_info.at(ann.image_id),
                         gt_path + ": annotation id " + std::to_string(ann.id));
    }
    it->second.push_back(std::move(box));
  }
  for (const auto& [image_id, boxes] : boxes_of_image) {
    evaluator.add_coco_groundtruth(image_id, boxes);
  }
  // loadRes: when the first result has a bbox, every result's area is its box's (and one
  // without a segmentation gets its box's polygon); otherwise each area is its mask's and a
  // missing bbox is the mask's box.
  const bool areas_of_boxes = !results.empty() && results[0].has_bbox;
  std::map<int64_t, std::vector<detection::CocoDetectionBox>> detections_of_image;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const detection::CocoResult& r = results[i];
    detection::CocoDetectionBox box;
    box.category_id = r.category_id;
    box.score = r.score;
    std::array<double, 4> bbox = r.bbox;
    if (segm) {
      const std::string where = dt_path + ": result " + std::to_string(i);
      const detection::CocoImageInfo& image = *image_info.at(r.image_id);
      if (areas_of_boxes && !r.has_bbox) {
        throw DataLoss(where +
                       " has no bbox while the first result has one (pycocotools' "
                       "loadRes reads every result's bbox then)");
      }
      if (!areas_of_boxes && r.segmentation.kind == detection::CocoSegmentation::Kind::kNone) {
        throw DataLoss(where + " has no segmentation while the first result has one and no bbox");
      }
      if (r.segmentation.kind == detection::CocoSegmentation::Kind::kNone) {
        if (image.height <= 0 || image.width <= 0) {
          throw DataLoss(where + " (image " + std::to_string(image.id) +
                         "): a result without a segmentation is its box, which needs the "
                         "image's height and width");
        }
        box.mask = detection::rle_from_bbox(bbox, image.height, image.width);
      } else {
        box.mask = mask_of(r.segmentation, image, where);
      }
      if (areas_of_boxes) {
        box.area = bbox[2] * bbox[3];
      } else {
        box.area = static_cast<double>(detection::rle_area(box.mask));
        if (!r.has_bbox) bbox = detection::rle_to_bbox(box.mask);
      }
    }
    box.x = bbox[0];
    box.y = bbox[1];
    box.width = bbox[2];
    box.height = bbox[3];
    detections_of_image[r.image_id].push_back(std::move(box));
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
        std::cout << detection::coco_metric_tag(i, iou_type) << suffix << " " << value << "\n";
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
      std::cout << detection::coco_per_category_tag(category.name, iou_type) << " " << value
                << "\n";
      print(by_category[k], " ByCategory/" + category.name);
    } else {
      std::cout << "category " << category.id << " " << category.name << "\n";
      print(by_category[k], "");
    }
  }
  return 0;
}

}  // namespace trainyard::app
