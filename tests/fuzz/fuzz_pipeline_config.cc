// libFuzzer target for the pipeline config parser, parse_pipeline_config
// (core/src/config/config.cc): protobuf's text-format parser over config::Pipeline
// (core/proto/pipeline.proto), its nesting, plugin_params of every plugin section it sets, and
// the detection task's config dialect (the Object Detection API's pipeline.config,
// plugins/tasks/detection/od_config.cc), registered here as its plugin registers it.
//
// The input is a pipeline config file. A rejection must be ConfigError naming the source. An
// accepted config must print (pipeline_config_to_text, with and without defaults) to text that
// parses back to the same message.
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "od_config.h"
#include "trainyard/config_dialect.h"
#include "trainyard/core/config.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

const NamedRegistration kOdDialect =
    config_dialects::add_dialect(detection::kOdDialectName, detection::od_dialect());

void check_params(const config::PluginSpec& spec) {
  try {
    plugin_params(spec, "section");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).starts_with("section: "), e.what());
  }
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  using google::protobuf::util::MessageDifferencer;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  config::Pipeline pipeline;
  try {
    pipeline = parse_pipeline_config(input, "fuzz.config");
  } catch (const ConfigError& e) {
    FUZZ_CHECK(std::string(e.what()).starts_with("fuzz.config:"),
               std::string("error without the source's name: ") + e.what());
    return 0;
  }
  check_params(pipeline.model());
  check_params(pipeline.train_config().optimizer());
  check_params(pipeline.train_config().label_loss());
  check_params(pipeline.train_input_reader().reader());
  for (const bool with_defaults : {false, true}) {
    const std::string text = pipeline_config_to_text(pipeline, with_defaults);
    config::Pipeline again;
    try {
      again = parse_pipeline_config(text, "printed");
    } catch (const ConfigError& e) {
      FUZZ_CHECK(false, std::string("the printed config does not parse: ") + e.what());
    }
    if (!with_defaults) {
      FUZZ_CHECK(MessageDifferencer::Equals(pipeline, again),
                 "the printed config parses to another message:\n" + text);
    }
  }
  return 0;
}
