// `trainyard export --format onnx`: the model of a train_dir as an ONNX file (onnx_export.h).
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "trainyard/core/onnx_export.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {

std::vector<int64_t> parse_image_shape(const std::string& text) {
  std::vector<int64_t> dims;
  if (text.empty()) return dims;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    std::size_t used = 0;
    int64_t d = 0;
    try {
      d = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || d <= 0) {
      throw ConfigError("--image_shape is '" + text + "'; expected H,W,C of positive integers");
    }
    dims.push_back(d);
  }
  if (dims.size() != 3) {
    throw ConfigError("--image_shape is '" + text + "'; expected three sizes H,W,C");
  }
  return dims;
}

po::options_description onnx_export_options() {
  po::options_description options("Export format");
  options.add_options()("format", po::value<std::string>()->default_value("trainyard"),
                        "trainyard: a directory that predict loads (--export_dir); onnx: an ONNX "
                        "model file (--output); saved_model: a TensorFlow SavedModel directory "
                        "(--export_dir); tflite: a TensorFlow Lite file (--output)")(
      "output", po::value<std::string>()->default_value(""),
      "with --format onnx or tflite: the .onnx or .tflite file to write (whole or not at all)")(
      "opset", po::value<int>()->default_value(kOnnxMinOpset),
      "with --format onnx: the ONNX opset, 13 to 17")(
      "image_shape", po::value<std::string>()->default_value(""),
      "with --format onnx, saved_model or tflite: H,W,C of the input image (default: the "
      "pipeline's "
      "preprocessed "
      "image)")("input_type", po::value<std::string>()->default_value("image_tensor"),
                "with --format saved_model of a detector: export_inference_graph.py's "
                "--input_type, image_tensor (uint8 images), encoded_image_string_tensor "
                "(encoded JPEG or PNG strings) or tf_example (serialized tf.Example protos)")(
      "add_postprocessing_op", po::value<bool>()->default_value(true),
      "with --format tflite of an SSD: export_tflite_ssd_graph.py's flag, end the graph with "
      "TFLite_Detection_PostProcess (else its outputs are the raw box encodings and class "
      "predictions)")("max_detections", po::value<int64_t>()->default_value(10),
                      "with --format tflite of an SSD: the post-processing's detections")(
      "max_classes_per_detection", po::value<int64_t>()->default_value(1),
      "with --format tflite of an SSD: classes kept per detection by the fast NMS")(
      "detections_per_class", po::value<int64_t>()->default_value(100),
      "with --format tflite of an SSD: detections kept per class by the regular NMS")(
      "use_regular_nms", po::value<bool>()->default_value(false),
      "with --format tflite of an SSD: NMS class by class (else one NMS over each anchor's "
      "best classes)")(
      "inference_type", po::value<std::string>()->default_value("FLOAT"),
      "with --format tflite: TOCO's flag, FLOAT (float32 tensors; a quantization-aware-trained "
      "model's fake quantization as FAKE_QUANT) or QUANTIZED_UINT8 (a quantization-aware-trained "
      "model with uint8 tensors, the learned ranges' scales and zero points)")(
      "mean_values", po::value<double>()->default_value(128.0),
      "with --inference_type QUANTIZED_UINT8: TOCO's flag, the uint8 input q means (q - mean) / "
      "std")("std_values", po::value<double>()->default_value(128.0),
             "with --inference_type QUANTIZED_UINT8: TOCO's flag, see --mean_values");
  return options;
}

bool onnx_format_requested(const po::variables_map& vm) {
  const std::string& format = vm["format"].as<std::string>();
  if (format != "saved_model" && vm["input_type"].as<std::string>() != "image_tensor") {
    throw ConfigError(
        "--input_type is taken by --format saved_model only (a detector's "
        "SavedModel); --format is '" +
        format + "'");
  }
  if (format != "tflite") {
    for (const char* flag : {"add_postprocessing_op", "max_detections", "max_classes_per_detection",
                             "detections_per_class", "use_regular_nms", "inference_type",
                             "mean_values", "std_values"}) {
      if (!vm[flag].defaulted()) {
        throw ConfigError(std::string("--") + flag +
                          " is taken by --format tflite only; --format is '" + format + "'");
      }
    }
  }
  if (format == "onnx") return true;
  if (format == "trainyard" || format == "saved_model" || format == "tflite") return false;
  throw ConfigError("--format is '" + format +
                    "'; expected trainyard (an export directory), onnx (an ONNX file), "
                    "saved_model (a TensorFlow SavedModel directory) or tflite (a TensorFlow "
                    "Lite file)");
}

int run_export_onnx(const PluginRegistry& registry, const config::Pipeline& pipeline,
                    const po::variables_map& vm) {
  const std::string& output = vm["output"].as<std::string>();
  if (output.empty()) throw ConfigError("--format onnx needs --output, the .onnx file to write");
  export_onnx(registry, pipeline, vm["checkpoint"].as<std::string>(), output, vm["opset"].as<int>(),
              std::cout, parse_image_shape(vm["image_shape"].as<std::string>()));
  return 0;
}

}  // namespace trainyard::app
