// The detection family's kernels (core/src/engine/ops/detection.cc): batched multi-class non-max
// suppression with pkg/detection's NMS (per class a heap of candidates, each compared with the
// boxes kept eight at a time with TensorFlow's IoU arithmetic), the images of a batch in
// parallel.
#include <algorithm>
#include <exception>
#include <span>

#include "kernels.h"
#include "trainyard/pkg/detection/non_max_suppression.h"

namespace trainyard::cpu {
namespace {

void batch_multiclass_nms_kernel(Backend&, const KernelArgs& args) {
  const Tensor& boxes = args.inputs[0];
  const Tensor& scores = args.inputs[1];
  const int64_t batch = boxes.shape()[0];
  const int64_t anchors = boxes.shape()[1];
  const int64_t q = boxes.shape()[2];
  const int64_t classes = scores.shape()[2];
  const int64_t m = args.get_attrs<MultiClassNmsAttrs>().max_total_detections;
  const auto image_boxes = static_cast<std::size_t>(anchors * q * 4);
  const auto image_scores = static_cast<std::size_t>(anchors * classes);
  const float* box_data = data<float>(boxes);
  const float* score_data = data<float>(scores);
  const int32_t* valid = args.inputs.size() > 2 ? data<int32_t>(args.inputs[2]) : nullptr;
  const detection::MultiClassNmsOptions options = detection::nms_options_from_attrs(
      args.get_attrs<MultiClassNmsAttrs>(),
      std::span<const float>(box_data, image_boxes * static_cast<std::size_t>(batch)));
  float* out_boxes = data<float>(args.outputs[0]);
  float* out_scores = data<float>(args.outputs[1]);
  float* out_classes = data<float>(args.outputs[2]);
  int32_t* out_counts = data<int32_t>(args.outputs[3]);
  int64_t* out_anchors = data<int64_t>(args.outputs[4]);
  // An exception must not leave an OpenMP region: the first is kept and rethrown after it.
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) if (batch > 1)
  for (int64_t b = 0; b < batch; ++b) {
    try {
      detection::multiclass_nms_image(
          b, std::span<const float>(box_data + b * image_boxes, image_boxes),
          std::span<const float>(score_data + b * image_scores, image_scores), anchors, q, classes,
          valid != nullptr ? valid[b] : -1, options,
          {out_boxes + b * m * 4, out_scores + b * m, out_classes + b * m, out_counts + b,
           out_anchors + b * m});
    } catch (...) {
#pragma omp critical(trainyard_nms_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

void add_detection_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(cpu_kernel<&batch_multiclass_nms_kernel>("batch_multiclass_non_max_suppression"));
}

}  // namespace trainyard::cpu
