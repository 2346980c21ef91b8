// libFuzzer target for parse() of the YouTube-8M readers (plugins/readers/yt8m_readers.cc).
//
// The plugin source is compiled into this program, and the readers are created from its
// descriptor (trainyard_plugin_entry) the way the host creates them, in the small
// configurations of kConfigs. The input is one serialized record; every configuration parses
// it. parse() may reject it: it must then throw a trainyard::Error whose message starts with
// "<file>, record <n>: " (reader.h, yt8m_readers.cc). A crash, an ASan or UBSan report or any
// other exception is a failure.
//
// A record that parse() accepts is checked against the reader's features() (dtype, shape, byte
// count) and against the record as the generated tf.Example / tf.SequenceExample classes read
// it: the id, the float features in feature_names order, the multi-hot labels, num_frames and
// every dequantized frame value (uint8 * scalar, then + bias, in float32) with zero padding.
// Parsing the same record twice must give the same result.
#include <google/protobuf/stubs/logging.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "trainyard/error.h"
#include "trainyard/example.h"
#include "trainyard/options.h"
#include "trainyard/plugin.h"
#include "trainyard/proto/example.pb.h"
#include "trainyard/reader.h"

// Defined by TRAINYARD_PLUGIN in yt8m_readers.cc.
extern "C" const void* trainyard_plugin_entry;

namespace trainyard::fuzz {
namespace {

struct Config {
  const char* class_name;
  std::map<std::string, std::string> options;
};

const Config kConfigs[] = {
    {"YT8MAggregatedFeatureReader",
     {{"feature_names", "mean_rgb,mean_audio"}, {"feature_sizes", "4,2"}, {"num_classes", "8"}}},
    {"YT8MAggregatedFeatureReader",
     {{"feature_names", "rgb"},
      {"feature_sizes", "1"},
      {"num_classes", "1"},
      {"id_key", "video_id"}}},
    {"YT8MFrameFeatureReader",
     {{"feature_names", "rgb,audio"},
      {"feature_sizes", "4,2"},
      {"num_classes", "8"},
      {"max_frames", "3"}}},
    {"YT8MFrameFeatureReader",
     {{"feature_names", "rgb"},
      {"feature_sizes", "2"},
      {"num_classes", "3"},
      {"max_frames", "1"},
      {"id_key", "video_id"},
      {"max_quantized_value", "1"},
      {"min_quantized_value", "-1"}}},
};

const RecordLocation kWhere{"fuzz-input.tfrecord", 7};
const std::string kWherePrefix = "fuzz-input.tfrecord, record 7: ";

struct ConfiguredReader {
  const Config* config;
  bool frames;  // YT8MFrameFeatureReader
  Options options;
  std::unique_ptr<Reader> reader;
};

std::vector<ConfiguredReader>& readers() {
  static std::vector<ConfiguredReader> instance;
  return instance;
}

// Creates the readers of kConfigs through the plugin's descriptor.
void create_readers() {
  const auto entry =
      reinterpret_cast<PluginEntryFn*>(reinterpret_cast<std::intptr_t>(trainyard_plugin_entry));
  const PluginDescriptor* descriptor = entry();
  FUZZ_CHECK(descriptor->abi_version == kSdkAbiVersion &&
                 descriptor->struct_size == sizeof(PluginDescriptor),
             "the plugin descriptor does not match the SDK");
  for (const Config& config : kConfigs) {
    const ClassEntry* found = nullptr;
    for (uint32_t i = 0; i < descriptor->num_classes; ++i) {
      const ClassEntry& c = descriptor->classes[i];
      if (c.kind == ClassKind::kReader && std::string_view(c.class_name) == config.class_name) {
        found = &c;
      }
    }
    FUZZ_CHECK(found != nullptr, std::string("the plugin has no reader ") + config.class_name);
    Options options = Options::resolve_text(
        config.class_name, std::span<const OptionSpec>(found->options, found->num_options),
        config.options);
    FactoryError error;
    PluginObject* object = found->create(options, &error);
    FUZZ_CHECK(object != nullptr,
               std::string("creating ") + config.class_name + " failed: " + error.message);
    auto* reader = dynamic_cast<Reader*>(object);
    FUZZ_CHECK(reader != nullptr, std::string(config.class_name) + " is not a Reader");
    readers().push_back({&config, std::string_view(config.class_name) == "YT8MFrameFeatureReader",
                         std::move(options), std::unique_ptr<Reader>(reader)});
  }
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float load_float(const std::vector<std::byte>& bytes, std::size_t index) {
  float v;
  std::memcpy(&v, bytes.data() + index * sizeof(float), sizeof(float));
  return v;
}

bool same_record(const ParsedRecord& a, const ParsedRecord& b) {
  if (a.id != b.id || a.features.size() != b.features.size()) return false;
  for (const auto& [name, fa] : a.features) {
    auto it = b.features.find(name);
    if (it == b.features.end()) return false;
    const ParsedFeature& fb = it->second;
    if (fa.dtype != fb.dtype || fa.shape != fb.shape || fa.bytes != fb.bytes) return false;
  }
  return true;
}

// The labels the record holds, as tf.Example gives them.
std::set<int64_t> record_labels(const tf::Features& features) {
  std::set<int64_t> labels;
  auto it = features.feature().find("labels");
  if (it != features.feature().end()) {
    for (int64_t label : it->second.int64_list().value()) labels.insert(label);
  }
  return labels;
}

// Checks an accepted record against features() and against `record` itself.
void check_parsed(const ConfiguredReader& cr, std::string_view record, const ParsedRecord& parsed) {
  const std::string what = std::string(cr.config->class_name) + " (" +
                           cr.config->options.at("feature_names") + ") accepted the record but ";
  const std::vector<FeatureSpec> specs = cr.reader->features();
  FUZZ_CHECK(parsed.features.size() == specs.size(),
             what + "gave " + std::to_string(parsed.features.size()) + " features, declared " +
                 std::to_string(specs.size()));
  for (const FeatureSpec& spec : specs) {
    auto it = parsed.features.find(spec.name);
    FUZZ_CHECK(it != parsed.features.end(), what + "did not give feature " + spec.name);
    const ParsedFeature& f = it->second;
    // The frame reader's "features" holds the kept frames, at most the declared max_frames
    // rows (reader.h: the core pads the rest).
    std::vector<int64_t> shape = spec.shape;
    if (cr.frames && spec.name == "features" && !f.shape.empty() && f.shape[0] <= shape[0]) {
      shape[0] = f.shape[0];
    }
    FUZZ_CHECK(f.dtype == spec.dtype && f.shape == shape,
               what + "feature " + spec.name + " does not have the declared dtype and shape");
    FUZZ_CHECK(f.bytes.size() == static_cast<std::size_t>(elements(f.shape)) * 4,
               what + "feature " + spec.name + " has " + std::to_string(f.bytes.size()) +
                   " bytes for " + std::to_string(elements(f.shape)) + " elements");
  }
  const std::vector<std::byte>& features = parsed.features.at("features").bytes;
  const std::vector<std::byte>& labels = parsed.features.at("labels").bytes;
  int32_t num_frames;
  std::memcpy(&num_frames, parsed.features.at("num_frames").bytes.data(), sizeof(num_frames));

  const std::vector<std::string>& names = cr.options.get_string_list("feature_names");
  const std::vector<int64_t>& sizes = cr.options.get_int_list("feature_sizes");
  const std::string& id_key = cr.options.get_string("id_key");
  const tf::Features* context = nullptr;
  tf::Example example;
  tf::SequenceExample sequence;
  if (!cr.frames) {
    FUZZ_CHECK(example.ParseFromArray(record.data(), static_cast<int>(record.size())),
               what + "it does not parse as a tf.Example");
    context = &example.features();
    FUZZ_CHECK(num_frames == 1, what + "num_frames is " + std::to_string(num_frames));
    std::size_t at = 0;
    for (const std::string& name : names) {
      const auto& values = context->feature().at(name).float_list().value();
      const std::size_t n = static_cast<std::size_t>(values.size()) * sizeof(float);
      FUZZ_CHECK(n > 0 && at + n <= features.size() &&
                     std::memcmp(features.data() + at, values.data(), n) == 0,
                 what + "feature " + name + " is not the record's floats");
      at += n;
    }
    FUZZ_CHECK(at == features.size(), what + "the features have extra bytes");
  } else {
    FUZZ_CHECK(sequence.ParseFromArray(record.data(), static_cast<int>(record.size())),
               what + "it does not parse as a tf.SequenceExample");
    context = &sequence.context();
    const int64_t max_frames = cr.options.get_int("max_frames");
    const auto& lists = sequence.feature_lists().feature_list();
    const int64_t total_frames = lists.at(names[0]).feature_size();
    FUZZ_CHECK(num_frames == std::min(total_frames, max_frames),
               what + "num_frames is " + std::to_string(num_frames) + " for " +
                   std::to_string(total_frames) + " frames");
    FUZZ_CHECK(parsed.features.at("features").shape[0] == num_frames,
               what + "features holds " + std::to_string(parsed.features.at("features").shape[0]) +
                   " frames, not " + std::to_string(num_frames));
    const double max_value = cr.options.get_float("max_quantized_value");
    const double min_value = cr.options.get_float("min_quantized_value");
    const float scalar = static_cast<float>((max_value - min_value) / 255.0);
    const float bias = static_cast<float>((max_value - min_value) / 512.0 + min_value);
    std::size_t index = 0;
    for (int64_t t = 0; t < num_frames; ++t) {
      for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string* bytes =
            t < num_frames ? &lists.at(names[i]).feature(static_cast<int>(t)).bytes_list().value(0)
                           : nullptr;
        FUZZ_CHECK(bytes == nullptr || static_cast<int64_t>(bytes->size()) == sizes[i],
                   what + "frame " + std::to_string(t) + " of " + names[i] + " has " +
                       std::to_string(bytes->size()) + " bytes");
        for (int64_t k = 0; k < sizes[i]; ++k, ++index) {
          float want = 0.0f;
          if (bytes != nullptr) {
            want = static_cast<float>(static_cast<unsigned char>((*bytes)[k])) * scalar;
            want += bias;
          }
          const float got = load_float(features, index);
          FUZZ_CHECK(std::memcmp(&got, &want, sizeof(float)) == 0,
                     what + "frame " + std::to_string(t) + " of " + names[i] + " value " +
                         std::to_string(k) + " is " + std::to_string(got) + ", expected " +
                         std::to_string(want));
        }
      }
    }
    FUZZ_CHECK(index * sizeof(float) == features.size(), what + "the features have extra bytes");
  }

  FUZZ_CHECK(parsed.id == context->feature().at(id_key).bytes_list().value(0),
             what + "the id is not the record's " + id_key);
  const std::set<int64_t> want_labels = record_labels(*context);
  for (std::size_t c = 0; c * sizeof(float) < labels.size(); ++c) {
    const float got = load_float(labels, c);
    const float want = want_labels.contains(static_cast<int64_t>(c)) ? 1.0f : 0.0f;
    FUZZ_CHECK(got == want, what + "label " + std::to_string(c) + " is " + std::to_string(got));
  }
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Proto3 strings that are not UTF-8 make protobuf log an error; the readers reject them.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  trainyard::fuzz::create_readers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  const std::string_view record(reinterpret_cast<const char*>(data), size);
  // The SDK's tf.Example view accepts exactly what protobuf's parser accepts.
  {
    tf::Example example;
    tf::SequenceExample sequence;
    const bool example_ok = example.ParseFromArray(data, static_cast<int>(size));
    const bool sequence_ok = sequence.ParseFromArray(data, static_cast<int>(size));
    bool view_example_ok = true, view_sequence_ok = true;
    try {
      const ParsedExample parsed = parse_example(record, kWhere);
      FUZZ_CHECK(!example_ok || parsed.features.size() ==
                                    static_cast<std::size_t>(example.features().feature_size()),
                 "parse_example read a different number of features than protobuf");
    } catch (const DataLoss&) {
      view_example_ok = false;
    }
    try {
      const ParsedSequenceExample parsed = parse_sequence_example(record, kWhere);
      FUZZ_CHECK(!sequence_ok ||
                     parsed.feature_lists.size() ==
                         static_cast<std::size_t>(sequence.feature_lists().feature_list_size()),
                 "parse_sequence_example read a different number of lists than protobuf");
    } catch (const DataLoss&) {
      view_sequence_ok = false;
    }
    FUZZ_CHECK(view_example_ok == example_ok,
               std::string("parse_example ") + (view_example_ok ? "accepts" : "rejects") +
                   " a record protobuf " + (example_ok ? "accepts" : "rejects"));
    FUZZ_CHECK(view_sequence_ok == sequence_ok,
               std::string("parse_sequence_example ") + (view_sequence_ok ? "accepts" : "rejects") +
                   " a record protobuf " + (sequence_ok ? "accepts" : "rejects"));
  }
  for (const ConfiguredReader& cr : readers()) {
    const std::string who =
        std::string(cr.config->class_name) + " (" + cr.config->options.at("feature_names") + ")";
    try {
      const ParsedRecord parsed = cr.reader->parse(record, kWhere);
      check_parsed(cr, record, parsed);
      const ParsedRecord again = cr.reader->parse(record, kWhere);
      FUZZ_CHECK(same_record(parsed, again), who + " parsed the same record differently twice");
    } catch (const Error& e) {
      const std::string message = e.what();
      FUZZ_CHECK(message.starts_with(kWherePrefix) && message.size() > kWherePrefix.size(),
                 who + " rejected the record with a message that does not start with '" +
                     kWherePrefix + "': " + message);
    } catch (const std::exception& e) {
      FUZZ_CHECK(false, who + " threw an exception that is not a trainyard::Error: " + e.what());
    } catch (...) {
      FUZZ_CHECK(false, who + " threw something that is not a std::exception");
    }
  }
  return 0;
}
