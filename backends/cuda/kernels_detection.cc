// The detection family's kernels (core/src/engine/ops/detection.cc) on the CUDA backend.
//
// batch_multiclass_non_max_suppression runs on the host, as TensorFlow 1.x's NMS kernels and the
// Object Detection API's post-processing on GPU machines do: greedy NMS is sequential per class
// and its inputs are small (anchors x classes scores of one batch). It is the one kernel of this
// backend that synchronises: the inputs are copied to the host once the stream has computed
// them, pkg/detection's NMS (the CPU backend's) runs, and the outputs are copied back on the
// same stream, which is synchronised again before the host buffers go away.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels.cuh"
#include "trainyard/pkg/detection/non_max_suppression.h"

namespace trainyard::cuda {
namespace {

template <class T>
std::vector<T> to_host(Backend& backend, const Tensor& t, Stream& stream) {
  std::vector<T> host(static_cast<std::size_t>(t.num_elements()));
  backend.copy_to_host_async(*t.storage(), t.byte_offset(), host.data(), host.size() * sizeof(T),
                             stream);
  return host;
}

template <class T>
void from_host(Backend& backend, const std::vector<T>& host, const Tensor& t, Stream& stream) {
  backend.copy_from_host_async(*t.storage(), t.byte_offset(), host.data(), host.size() * sizeof(T),
                               stream);
}

void batch_multiclass_nms_kernel(Backend& backend, const KernelArgs& args) {
  Stream& stream = *args.stream;
  const Tensor& boxes = args.inputs[0];
  const Tensor& scores = args.inputs[1];
  const int64_t batch = boxes.shape()[0];
  const int64_t anchors = boxes.shape()[1];
  const int64_t q = boxes.shape()[2];
  const int64_t classes = scores.shape()[2];
  const int64_t m = args.get_attrs<MultiClassNmsAttrs>().max_total_detections;
  const std::vector<float> box_data = to_host<float>(backend, boxes, stream);
  const std::vector<float> score_data = to_host<float>(backend, scores, stream);
  const std::vector<int32_t> valid = args.inputs.size() > 2
                                         ? to_host<int32_t>(backend, args.inputs[2], stream)
                                         : std::vector<int32_t>();
  stream.synchronize();

  const detection::MultiClassNmsOptions options =
      detection::nms_options_from_attrs(args.get_attrs<MultiClassNmsAttrs>(), box_data);
  std::vector<float> out_boxes(static_cast<std::size_t>(batch * m * 4));
  std::vector<float> out_scores(static_cast<std::size_t>(batch * m));
  std::vector<float> out_classes(static_cast<std::size_t>(batch * m));
  std::vector<int32_t> out_counts(static_cast<std::size_t>(batch));
  std::vector<int64_t> out_anchors(static_cast<std::size_t>(batch * m));
  const auto image_boxes = static_cast<std::size_t>(anchors * q * 4);
  const auto image_scores = static_cast<std::size_t>(anchors * classes);
  for (int64_t b = 0; b < batch; ++b) {
    detection::multiclass_nms_image(
        b, std::span<const float>(box_data.data() + b * image_boxes, image_boxes),
        std::span<const float>(score_data.data() + b * image_scores, image_scores), anchors, q,
        classes, valid.empty() ? -1 : valid[static_cast<std::size_t>(b)], options,
        {out_boxes.data() + b * m * 4, out_scores.data() + b * m, out_classes.data() + b * m,
         out_counts.data() + b, out_anchors.data() + b * m});
  }
  from_host(backend, out_boxes, args.outputs[0], stream);
  from_host(backend, out_scores, args.outputs[1], stream);
  from_host(backend, out_classes, args.outputs[2], stream);
  from_host(backend, out_counts, args.outputs[3], stream);
  from_host(backend, out_anchors, args.outputs[4], stream);
  stream.synchronize();
}

}  // namespace

void add_detection_kernels(std::vector<KernelRegistration>& table) {
  table.push_back(
      cuda_kernel<&batch_multiclass_nms_kernel>("batch_multiclass_non_max_suppression"));
}

}  // namespace trainyard::cuda
