// The uint8 rewrite of a float TFLite model built from a quantization-aware-trained forward pass
// (tflite_graph.h, GraphSpec::uint8), as TOCO's --inference_type=QUANTIZED_UINT8 writes such a
// graph. Internal to the core.
//
// Ranges. A computed value's range is its fake quantization's (the builder records it instead of
// writing a FAKE_QUANT); a graph input's is [(0 - mean) / std, (255 - mean) / std]; a value
// without one takes it as TOCO's HardcodeMinMax does: RESHAPE, MAX_POOL_2D, AVERAGE_POOL_2D and
// PAD their first input's, CONCATENATION the union of its inputs' (TOCO's default
// --change_concat_input_ranges=false: the inputs keep theirs), LOGISTIC and SOFTMAX [0, 255/256]
// and TANH [-1, 127/128], the ranges TFLite's uint8 kernels require. Any other value without a
// range is an error naming it and the operator that computes it (TOCO's "lacking min/max data").
//
// Parameters. TOCO's ChooseQuantizationParams: the range widened to hold 0, scale = (max - min)
// / (255 - qmin), the zero point qmin - min / scale (or 255 - max / scale, whichever is nearer
// exact), rounded and clamped to [qmin, 255]; qmin is 1 for a narrow-range weight quantization,
// else 0. Each tensor carries min, max, scale and zero_point.
//
// Tensors. Computed values become UINT8. A constant with a recorded range (a weight's fake
// quantization, folded into the constant) is encoded with that range's parameters, which its
// values lie on exactly; another float constant (the anchors, a constant operand) with the range
// of its values. The biases of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED become INT32 with
// scale input scale x weight scale and zero point 0, as TFLite's kernels take them. The outputs of
// TFLite_Detection_PostProcess stay FLOAT32 (the kernel dequantizes its inputs). An operator
// with no uint8 form here is an error naming it.
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
