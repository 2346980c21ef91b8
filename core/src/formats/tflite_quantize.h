// The uint8 rewrite of a float TFLite model built from a quantization-aware-trained forward pass
// (tflite_graph.h, GraphSpec::uint8), as TensorFlow's converter writes such a graph with
// inference_type uint8 (TOCO's --inference_type=QUANTIZED_UINT8). Internal to the core.
//
// Parameters (scale and zero_point per tensor; real = scale * (q - zero_point); with min and max,
// as TOCO wrote them, where chosen from a range). A value a fake quantization followed takes
// TOCO's ChooseQuantizationParams of its range: the range widened to
// hold 0, scale = (max - min) / (255 - qmin), the zero point qmin - min / scale (or 255 - max /
// scale, whichever is nearer exact), rounded and clamped to [qmin, 255]; qmin is 1 for a
// narrow-range weight quantization, else 0. A graph input takes the range [(0 - mean) / std,
// (255 - mean) / std]. A value without a range takes its parameters as the converter gives them:
// RESHAPE, MAX_POOL_2D, AVERAGE_POOL_2D, PAD and MEAN their input's; CONCATENATION the union of its
// inputs' representable ranges, scale = width / 255 and the zero point truncated (TensorFlow
// 2.21's converter; its inputs keep theirs); LOGISTIC and SOFTMAX scale 1/256 and zero point 0,
// TANH [-1, 127/128] (what TFLite's uint8 kernels require). Any other value without a range is an
// error naming it and the operator that computes it (TOCO's "lacking min/max data").
//
// Tensors. Computed values become UINT8. A constant with a recorded range (a weight's fake
// quantization, folded into the constant) is encoded with that range's parameters, which its
// values lie on exactly; another float constant (the anchors, a constant operand) with the range
// of its values. The biases of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED become INT32 with
// scale input scale x weight scale and zero point 0, as TFLite's kernels take them. The outputs of
// TFLite_Detection_PostProcess stay FLOAT32 (the kernel dequantizes its inputs). An operator
// with no uint8 form here is an error naming it. TensorFlow 2.21's converter, given the same
// fake-quantized graph, writes the same parameters, weights and biases (the interop test
// tflite_detection_interop.py compares the two files).
#ifndef TRAINYARD_CORE_SRC_TFLITE_QUANTIZE_H_
#define TRAINYARD_CORE_SRC_TFLITE_QUANTIZE_H_

#include <map>
#include <string>

#include "formats/tflite_graph.h"
#include "tflite_schema_generated.h"

namespace trainyard::tflite_internal {

// A fake quantization's range: [min, max] onto [narrow ? 1 : 0, 255].
struct QuantRange {
  double min = 0.0;
  double max = 0.0;
  bool narrow = false;
};

// Rewrites the model's one subgraph in place. `ranges` holds the recorded ranges by tensor index
// (computed values and weight constants). Throws Unimplemented naming `model_name` and the
// tensor or operator.
void quantize_uint8(tflite::ModelT& model, const std::map<int, QuantRange>& ranges,
                    const Uint8Inference& input, const std::string& model_name);

}  // namespace trainyard::tflite_internal

#endif  // TRAINYARD_CORE_SRC_TFLITE_QUANTIZE_H_
