#include "formats/tflite_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::tflite_internal {
namespace {

namespace fb = trainyard::tflite;

// A tensor's parameters, the scale in double as the converter keeps it (the file holds it in
// f32; a bias's scale is the product of two double scales).
struct Params {
  double scale = 1.0;
  std::optional<QuantRange> range;  // the range chosen from, written as min and max
  int32_t zero_point = 0;
  bool narrow = false;
};

// TOCO's ChooseQuantizationParams for uint8.
Params choose(const QuantRange& r) {
  const double qmin = r.narrow ? 1.0 : 0.0, qmax = 255.0;
  Params p;
  const double min = std::min(r.min, 0.0), max = std::max(r.max, 0.0);
  p.narrow = r.narrow;
  p.range = QuantRange{min, max, r.narrow};
  if (max == min) return p;  // all zeros: any scale holds them
  const double scale = (max - min) / (qmax - qmin);
  const double from_min = qmin - min / scale, from_max = qmax - max / scale;
  const double error_min = std::abs(qmin) + std::abs(min / scale);
  const double error_max = std::abs(qmax) + std::abs(max / scale);
  const double zero_point = error_min < error_max ? from_min : from_max;
  p.scale = scale;
  p.zero_point = static_cast<int32_t>(std::round(std::clamp(zero_point, qmin, qmax)));
  return p;
}

class Quantizer {
 public:
  Quantizer(fb::ModelT& model, const std::map<int, QuantRange>& ranges, const std::string& name)
      : model_(model), graph_(*model.subgraphs.at(0)), ranges_(ranges), what_(name) {}

  void run(const Uint8Inference& input);

 private:
  fb::TensorT& tensor(int index) { return *graph_.tensors.at(static_cast<std::size_t>(index)); }
  std::vector<uint8_t>& data(int index) { return model_.buffers.at(tensor(index).buffer)->data; }
  bool is_constant(int index) { return tensor(index).buffer != 0 && !data(index).empty(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw Unimplemented("TFLite uint8 export of " + what_ + ": " + why);
  }
  std::string op_name(const fb::OperatorT& op) const {
    const fb::OperatorCodeT& code = *model_.operator_codes.at(op.opcode_index);
    return code.builtin_code == fb::BuiltinOperator_CUSTOM
               ? code.custom_code
               : fb::EnumNameBuiltinOperator(code.builtin_code);
  }
  fb::BuiltinOperator code(const fb::OperatorT& op) const {
    return model_.operator_codes.at(op.opcode_index)->builtin_code;
  }
  // The range of float tensor `index` read by `op`: recorded or derived, else of a constant's
  // values; an error for a computed value without one.
  QuantRange range_of(int index, const fb::OperatorT& op);
  // The parameters of the op's output (computed) from its range, else its inputs'.
  void derive_output_params(const fb::OperatorT& op);
  void set(int index, const Params& p, fb::TensorType type);
  void encode_uint8(int index, const Params& p);
  void encode_bias(int bias, double scale, const fb::OperatorT& op);

  fb::ModelT& model_;
  fb::SubGraphT& graph_;
  std::map<int, QuantRange> ranges_;
  std::string what_;
  std::map<int, Params> params_;
  std::set<int> biases_;
};

QuantRange Quantizer::range_of(int index, const fb::OperatorT& op) {
  if (auto it = ranges_.find(index); it != ranges_.end()) return it->second;
  if (!is_constant(index)) {
    fail("the value '" + tensor(index).name + "', an input of " + op_name(op) +
         ", has no quantization range: no fake quantization follows it in training (TOCO: "
         "\"lacking min/max data\"); a quantization-aware-trained model quantizes every value "
         "its integer operators read");
  }
  std::vector<uint8_t>& bytes = data(index);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  QuantRange r;
  for (float v : values) {
    r.min = std::min<double>(r.min, v);
    r.max = std::max<double>(r.max, v);
  }
  ranges_[index] = r;
  return r;
}

void Quantizer::derive_output_params(const fb::OperatorT& op) {
  const int out = op.outputs.at(0);
  switch (code(op)) {
    case fb::BuiltinOperator_LOGISTIC:
    case fb::BuiltinOperator_SOFTMAX:
      params_[out] = choose({0.0, 255.0 / 256.0, false});  // TFLite's kernels take 1/256 only
      return;
    case fb::BuiltinOperator_TANH:
      params_[out] = choose({-1.0, 127.0 / 128.0, false});
      return;
    default:
      break;
  }
  if (auto it = ranges_.find(out); it != ranges_.end()) {
    params_[out] = choose(it->second);
    return;
  }
  switch (code(op)) {
    case fb::BuiltinOperator_RESHAPE:
    case fb::BuiltinOperator_MAX_POOL_2D:
    case fb::BuiltinOperator_AVERAGE_POOL_2D:
    case fb::BuiltinOperator_PAD:
    case fb::BuiltinOperator_MEAN:
      params_[out] = params_.at(op.inputs.at(0));
      return;
    case fb::BuiltinOperator_CONCATENATION: {
      // The union of the inputs' representable ranges; the zero point truncated, as TensorFlow
      // 2.21's converter gives it (checked against its output in the interop test).
      double low = 0.0, high = 0.0;
      for (int in : op.inputs) {
        const Params& p = params_.at(in);
        low = std::min(low, p.scale * (0.0 - p.zero_point));
        high = std::max(high, p.scale * (255.0 - p.zero_point));
      }
      Params p;
      if (high > low) {
        const double scale = (high - low) / 255.0;
        p.scale = scale;
        p.zero_point = static_cast<int32_t>(std::floor(std::clamp(-low / scale, 0.0, 255.0)));
      }
      params_[out] = p;
      return;
    }
    default:
      fail("the value '" + tensor(out).name + "' computed by " + op_name(op) +
           " has no quantization range: no fake quantization follows it in training (TOCO: "
           "\"lacking min/max data\"); quantization-aware training (the pipeline's "
           "graph_rewriter { quantization }) learns the ranges");
  }
}

void Quantizer::set(int index, const Params& p, fb::TensorType type) {
  fb::TensorT& t = tensor(index);
  t.type = type;
  auto q = std::make_unique<fb::QuantizationParametersT>();
  if (p.range) {
    q->min = {static_cast<float>(p.range->min)};
    q->max = {static_cast<float>(p.range->max)};
  }
  q->scale = {static_cast<float>(p.scale)};
  q->zero_point = {p.zero_point};
  t.quantization = std::move(q);
}

// real = scale * (q - zero_point): q = round(real / scale + zero_point), clamped, as TOCO
// quantizes a constant buffer.
void Quantizer::encode_uint8(int index, const Params& p) {
  std::vector<uint8_t>& bytes = data(index);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  const double qmin = p.narrow ? 1.0 : 0.0;
  std::vector<uint8_t> q(values.size());
  for (std::size_t k = 0; k < values.size(); ++k) {
    const double v = std::round(static_cast<double>(values[k]) / p.scale + p.zero_point);
    q[k] = static_cast<uint8_t>(std::clamp(v, qmin, 255.0));
  }
  bytes = std::move(q);
  set(index, p, fb::TensorType_UINT8);
}

void Quantizer::encode_bias(int bias, double scale, const fb::OperatorT& op) {
  if (tensor(bias).type != fb::TensorType_FLOAT32 || !is_constant(bias)) {
    fail("the bias '" + tensor(bias).name + "' of " + op_name(op) + " is not a float constant");
  }
  if (!biases_.insert(bias).second) {
    fail("the bias '" + tensor(bias).name + "' is read by two operators");
  }
  std::vector<uint8_t>& bytes = data(bias);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  constexpr double kLow = std::numeric_limits<int32_t>::min();
  constexpr double kHigh = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> q(values.size());
  for (std::size_t k = 0; k < values.size(); ++k) {
    q[k] = static_cast<int32_t>(
        std::clamp(std::round(static_cast<double>(values[k]) / scale), kLow, kHigh));
  }
  std::memcpy(bytes.data(), q.data(), bytes.size());
  Params p;
  p.scale = scale;
  set(bias, p, fb::TensorType_INT32);
}

void Quantizer::run(const Uint8Inference& input) {
  for (int in : graph_.inputs) {
    if (tensor(in).type == fb::TensorType_FLOAT32) {
      ranges_[in] = {(0.0 - input.mean) / input.std, (255.0 - input.mean) / input.std, false};
    }
  }
  static const std::set<fb::BuiltinOperator> kUint8 = {fb::BuiltinOperator_CONV_2D,
                                                       fb::BuiltinOperator_DEPTHWISE_CONV_2D,
                                                       fb::BuiltinOperator_FULLY_CONNECTED,
                                                       fb::BuiltinOperator_ADD,
                                                       fb::BuiltinOperator_MUL,
                                                       fb::BuiltinOperator_CONCATENATION,
                                                       fb::BuiltinOperator_RESHAPE,
                                                       fb::BuiltinOperator_MAX_POOL_2D,
                                                       fb::BuiltinOperator_AVERAGE_POOL_2D,
                                                       fb::BuiltinOperator_PAD,
                                                       fb::BuiltinOperator_LOGISTIC,
                                                       fb::BuiltinOperator_SOFTMAX,
                                                       fb::BuiltinOperator_TANH,
                                                       fb::BuiltinOperator_MEAN};
  std::set<int> float_outputs;
  std::vector<const fb::OperatorT*> with_bias;
  for (const auto& op : graph_.operators) {
    if (code(*op) == fb::BuiltinOperator_CUSTOM) {
      if (op_name(*op) != "TFLite_Detection_PostProcess") fail(op_name(*op) + " has no uint8 form");
      float_outputs.insert(op->outputs.begin(), op->outputs.end());
    } else if (kUint8.count(code(*op)) == 0) {
      fail(op_name(*op) + " (output '" + tensor(op->outputs.at(0)).name +
           "') has no uint8 form here");
    }
    const bool biased = code(*op) == fb::BuiltinOperator_CONV_2D ||
                        code(*op) == fb::BuiltinOperator_DEPTHWISE_CONV_2D ||
                        code(*op) == fb::BuiltinOperator_FULLY_CONNECTED;
    if (biased) with_bias.push_back(op.get());
    for (std::size_t k = 0; k < op->inputs.size(); ++k) {
      const int in = op->inputs[k];
      if (in < 0 || tensor(in).type != fb::TensorType_FLOAT32 || (biased && k == 2)) continue;
      if (params_.count(in) == 0) params_[in] = choose(range_of(in, *op));
    }
    if (float_outputs.count(op->outputs.at(0)) > 0) continue;
    derive_output_params(*op);
  }
  for (const auto& [index, p] : params_) {
    if (is_constant(index)) {
      encode_uint8(index, p);
    } else {
      set(index, p, fb::TensorType_UINT8);
    }
  }
  for (const fb::OperatorT* op : with_bias) {
    // The product of the double scales, as TensorFlow's converter computes it (the f32
    // product differs in the last bit).
    const double scale = params_.at(op->inputs.at(0)).scale * params_.at(op->inputs.at(1)).scale;
    encode_bias(op->inputs.at(2), scale, *op);
  }
}

}  // namespace

void quantize_uint8(fb::ModelT& model, const std::map<int, QuantRange>& ranges,
                    const Uint8Inference& input, const std::string& model_name) {
  Quantizer(model, ranges, model_name).run(input);
}

}  // namespace trainyard::tflite_internal
