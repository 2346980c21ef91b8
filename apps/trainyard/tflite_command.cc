// `trainyard export --format tflite`: the model of a train_dir as a TensorFlow Lite flatbuffer
// (tflite_export.h).
#include <iostream>
#include <string>

#include "commands.h"
#include "trainyard/core/tflite_export.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {

bool tflite_format_requested(const po::variables_map& vm) {
  return vm["format"].as<std::string>() == "tflite";
}

int run_export_tflite(const PluginRegistry& registry, const config::Pipeline& pipeline,
                      const po::variables_map& vm) {
  const std::string& output = vm["output"].as<std::string>();
  if (output.empty()) {
    throw ConfigError("--format tflite needs --output, the .tflite file to write");
  }
  TfliteSsdOptions ssd;
  ssd.add_postprocessing_op = vm["add_postprocessing_op"].as<bool>();
  ssd.max_detections = vm["max_detections"].as<int64_t>();
  ssd.max_classes_per_detection = vm["max_classes_per_detection"].as<int64_t>();
  ssd.detections_per_class = vm["detections_per_class"].as<int64_t>();
  ssd.use_regular_nms = vm["use_regular_nms"].as<bool>();
  TfliteQuantization quantization;
  const std::string& type = vm["inference_type"].as<std::string>();
  if (type == "QUANTIZED_UINT8") {
    quantization.uint8 = true;
  } else if (type != "FLOAT") {
    throw ConfigError("--inference_type is '" + type + "'; expected FLOAT or QUANTIZED_UINT8");
  }
  if (!quantization.uint8 && (!vm["mean_values"].defaulted() || !vm["std_values"].defaulted())) {
    throw ConfigError(
        "--mean_values and --std_values are taken with --inference_type "
        "QUANTIZED_UINT8 only");
  }
  quantization.mean_value = vm["mean_values"].as<double>();
  quantization.std_value = vm["std_values"].as<double>();
  export_tflite(registry, pipeline, vm["checkpoint"].as<std::string>(), output, std::cout,
                parse_image_shape(vm["image_shape"].as<std::string>()), ssd, quantization);
  return 0;
}

}  // namespace trainyard::app
