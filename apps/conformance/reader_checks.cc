// Reader checks (reader.h): a sample record yields exactly the declared features, with their
// dtypes and shapes (and the values that were written, where the suite knows the layout), and
// corrupt records give a trainyard::Error naming the record, never a crash.
//
// A Reader declares what it yields, not what it reads, so the suite builds sample records in
// the formats it knows and uses the first one the reader accepts:
//   - a YouTube-8M video-level tf.Example, when the reader has the starter code's options
//     (feature_names, feature_sizes, num_classes, id_key);
//   - a YouTube-8M frame-level tf.SequenceExample, likewise;
//   - a tf.Example holding one feature per declared feature, under its name (float features as
//     float lists, integer ones as int64 lists, u8 as bytes; a -1 dimension becomes 3).
// Corrupt records are parsed in a child process, so that a crash is reported, not suffered.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "conformance.h"
#include "trainyard/error.h"
#include "trainyard/options.h"
#include "trainyard/reader.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::conformance {
namespace {

constexpr const char* kFile = "conformance-sample.tfrecord";

struct SampleRecord {
  std::string format;  // what it is, for messages
  std::string bytes;
  std::optional<std::string> id;                      // expected id, when known
  std::map<std::string, std::vector<double>> values;  // expected values by feature name
};

std::vector<int64_t> positive_classes(int64_t num_classes) {
  std::vector<int64_t> out = {0, num_classes / 2, num_classes - 1};
  if (num_classes < 3) out.resize(static_cast<std::size_t>(num_classes));
  return out;
}

std::vector<double> multi_hot(int64_t num_classes) {
  std::vector<double> y(static_cast<std::size_t>(num_classes), 0.0);
  for (int64_t c : positive_classes(num_classes)) y[static_cast<std::size_t>(c)] = 1.0;
  return y;
}

// The starter code's reader options, when the reader has them.
struct Yt8mLayout {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int64_t num_classes = 0;
  std::string id_key;
};

std::optional<Yt8mLayout> yt8m_layout(const ClassInfo& info) {
  Options options = suite().registry->resolve_options(info, {});
  for (const char* key : {"feature_names", "feature_sizes", "num_classes", "id_key"}) {
    if (!options.contains(key)) return std::nullopt;
  }
  Yt8mLayout l;
  l.names = options.get_string_list("feature_names");
  l.sizes = options.get_int_list("feature_sizes");
  l.num_classes = options.get_int("num_classes");
  l.id_key = options.get_string("id_key");
  if (l.names.size() != l.sizes.size() || l.num_classes <= 0) return std::nullopt;
  return l;
}

void set_labels(wire::tf::Features* features, int64_t num_classes) {
  auto* labels = (*features->mutable_feature())["labels"].mutable_int64_list();
  for (int64_t c : positive_classes(num_classes)) labels->add_value(c);
}

SampleRecord video_level_example(const Yt8mLayout& l) {
  SampleRecord r;
  r.format = "a YouTube-8M video-level tf.Example";
  wire::tf::Example example;
  auto* features = example.mutable_features();
  (*features->mutable_feature())[l.id_key].mutable_bytes_list()->add_value("conformance-video");
  set_labels(features, l.num_classes);
  std::vector<double> all;
  for (std::size_t i = 0; i < l.names.size(); ++i) {
    std::vector<double> v =
        uniform_values(suite().seed + i, static_cast<std::size_t>(l.sizes[i]), -1.0, 1.0);
    auto* list = (*features->mutable_feature())[l.names[i]].mutable_float_list();
    for (double x : v) {
      list->add_value(static_cast<float>(x));
      all.push_back(static_cast<float>(x));
    }
  }
  r.bytes = example.SerializeAsString();
  r.id = "conformance-video";
  r.values["features"] = all;
  r.values["labels"] = multi_hot(l.num_classes);
  return r;
}

SampleRecord frame_level_example(const Yt8mLayout& l) {
  constexpr int kFrames = 5;
  SampleRecord r;
  r.format = "a YouTube-8M frame-level tf.SequenceExample of 5 frames";
  wire::tf::SequenceExample sequence;
  auto* context = sequence.mutable_context();
  (*context->mutable_feature())[l.id_key].mutable_bytes_list()->add_value("conformance-frames");
  set_labels(context, l.num_classes);
  for (std::size_t i = 0; i < l.names.size(); ++i) {
    auto& list = (*sequence.mutable_feature_lists()->mutable_feature_list())[l.names[i]];
    for (int t = 0; t < kFrames; ++t) {
      std::string bytes(static_cast<std::size_t>(l.sizes[i]), '\0');
      for (std::size_t k = 0; k < bytes.size(); ++k)
        bytes[k] = static_cast<char>((k * 7 + t) & 0xff);
      list.add_feature()->mutable_bytes_list()->add_value(bytes);
    }
  }
  r.bytes = sequence.SerializeAsString();
  r.id = "conformance-frames";
  r.values["labels"] = multi_hot(l.num_classes);
  r.values["num_frames"] = {static_cast<double>(kFrames)};
  return r;
}

SampleRecord generic_example(const std::vector<FeatureSpec>& specs) {
  SampleRecord r;
  r.format = "a tf.Example with one feature per declared feature";
  wire::tf::Example example;
  auto* map = example.mutable_features()->mutable_feature();
  (*map)["id"].mutable_bytes_list()->add_value("conformance-example");
  uint64_t seed = suite().seed;
  for (const FeatureSpec& spec : specs) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d < 0 ? 3 : d;
    std::vector<double> v = uniform_values(seed++, static_cast<std::size_t>(n), 0.0, 100.0);
    wire::tf::Feature& feature = (*map)[spec.name];
    switch (spec.dtype) {
      case DType::kF32:
      case DType::kF64:
      case DType::kBF16:
      case DType::kF16:
        for (double& x : v) {
          x = static_cast<float>(x / 50.0 - 1.0);
          feature.mutable_float_list()->add_value(static_cast<float>(x));
        }
        break;
      case DType::kU8: {
        std::string bytes;
        for (double& x : v) {
          x = std::floor(x * 2.55);
          bytes.push_back(static_cast<char>(static_cast<uint8_t>(x)));
        }
        feature.mutable_bytes_list()->add_value(bytes);
        break;
      }
      case DType::kBool:
        for (double& x : v) {
          x = x < 50.0 ? 0.0 : 1.0;
          feature.mutable_int64_list()->add_value(static_cast<int64_t>(x));
        }
        break;
      case DType::kI32:
      case DType::kI64:
        for (double& x : v) {
          x = std::floor(x);
          feature.mutable_int64_list()->add_value(static_cast<int64_t>(x));
        }
        break;
    }
    r.values[spec.name] = v;
  }
  r.bytes = example.SerializeAsString();
  return r;
}

struct Accepted {
  SampleRecord record;
  ParsedRecord parsed;
};

// The first sample record the reader parses, or why none was accepted.
std::optional<Accepted> accepted_sample(const ClassInfo& info, const Reader& reader,
                                        std::string* errors) {
  std::vector<SampleRecord> candidates;
  if (std::optional<Yt8mLayout> l = yt8m_layout(info)) {
    candidates.push_back(video_level_example(*l));
    candidates.push_back(frame_level_example(*l));
  }
  candidates.push_back(generic_example(reader.features()));
  for (SampleRecord& c : candidates) {
    try {
      ParsedRecord parsed = guard_plugin_call(reader, "parse", [&] {
        return reader.parse(c.bytes, RecordLocation{kFile, 0});
      });
      return Accepted{std::move(c), std::move(parsed)};
    } catch (const Error& e) {
      *errors += "\n  " + c.format + ": " + e.what();
    }
  }
  return std::nullopt;
}

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

std::vector<double> parsed_values(const ParsedFeature& f) {
  Tensor t = Tensor::from_host(reference_backend(), Shape(f.shape), f.dtype, f.bytes.data(),
                               f.bytes.size());
  return host_values(t);
}

void check_features(const ClassInfo& info) {
  std::shared_ptr<Reader> reader = create_default<Reader>(info);
  std::vector<FeatureSpec> declared = reader->features();
  ASSERT_FALSE(declared.empty()) << info.class_name << " declares no feature";
  std::string errors;
  std::optional<Accepted> sample = accepted_sample(info, *reader, &errors);
  ASSERT_TRUE(sample.has_value()) << info.class_name
                                  << " accepted none of the sample records the suite can build:"
                                  << errors << "\n"
                                  << repro_line();
  const ParsedRecord& parsed = sample->parsed;
  std::cout << "    parsed " << sample->record.format << "\n";
  const std::string from = info.class_name + " parsing " + sample->record.format;
  for (const FeatureSpec& spec : declared) {
    auto it = parsed.features.find(spec.name);
    if (it == parsed.features.end()) {
      ADD_FAILURE() << from << ": declared feature '" << spec.name << "' " << dtype_name(spec.dtype)
                    << shape_string(spec.shape) << " is not yielded";
      continue;
    }
    const ParsedFeature& f = it->second;
    EXPECT_EQ(f.dtype, spec.dtype)
        << from << ": feature '" << spec.name << "' is " << dtype_name(f.dtype) << ", declared "
        << dtype_name(spec.dtype);
    // A declared first dimension that is a size may hold fewer rows (reader.h: the leading
    // rows; the core pads the rest with zeros).
    bool shape_matches = f.shape.size() == spec.shape.size();
    int64_t n = 1;
    int64_t padded = 1;  // the values with every declared row
    for (std::size_t d = 0; d < f.shape.size(); ++d) {
      n *= f.shape[d];
      const bool leading_rows = d == 0 && spec.shape[d] > f.shape[d];
      padded *= leading_rows ? spec.shape[d] : f.shape[d];
      if (shape_matches && spec.shape[d] != -1 && spec.shape[d] != f.shape[d] && !leading_rows) {
        shape_matches = false;
      }
    }
    EXPECT_TRUE(shape_matches) << from << ": feature '" << spec.name << "' has shape "
                               << shape_string(f.shape) << ", declared " << shape_string(spec.shape)
                               << " (a first dimension may be fewer)";
    EXPECT_EQ(f.bytes.size(), static_cast<std::size_t>(n) * dtype_size(f.dtype))
        << from << ": feature '" << spec.name << "' " << dtype_name(f.dtype)
        << shape_string(f.shape) << " holds " << f.bytes.size() << " bytes";
    auto expected = sample->record.values.find(spec.name);
    if (expected != sample->record.values.end() && shape_matches && f.dtype == spec.dtype &&
        f.bytes.size() == static_cast<std::size_t>(n) * dtype_size(f.dtype)) {
      std::vector<double> values = parsed_values(f);
      values.resize(static_cast<std::size_t>(padded), 0.0);
      std::string diff = compare_values(values, expected->second, 1e-6, 1e-6);
      EXPECT_EQ(diff, "") << from << ": feature '" << spec.name
                          << "' does not hold the values written:\n"
                          << diff;
    }
  }
  for (const auto& [name, feature] : parsed.features) {
    bool known = false;
    for (const FeatureSpec& spec : declared) known |= spec.name == name;
    EXPECT_TRUE(known) << from << ": yields feature '" << name << "' " << dtype_name(feature.dtype)
                       << shape_string(feature.shape) << ", which it does not declare";
  }
  if (sample->record.id) {
    EXPECT_EQ(parsed.id, *sample->record.id) << from << ": the record's id";
  }
}

// Parses `record` in a child process; returns "" for a clean trainyard::Error naming the file,
// or what went wrong instead.
std::string parse_in_child(const Reader& reader, const std::string& record) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe() failed";
  std::cout.flush();
  pid_t pid = ::fork();
  if (pid < 0) return "fork() failed";
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(60);
    std::string result;
    try {
      // Unguarded: this check judges the exception the reader itself throws.
      reader.parse(record, RecordLocation{"conformance-corrupt.tfrecord", 17});
      result = "returned normally, as if the record were valid";
    } catch (const DataLoss& e) {
      result = std::string("E") + e.what();
    } catch (const InvalidArgument& e) {
      result = std::string("E") + e.what();
    } catch (const Error& e) {
      result = std::string("E") + e.what();
    } catch (const std::exception& e) {
      result = std::string("threw an exception that is not a trainyard::Error: ") + e.what();
    } catch (...) {
      result = "threw something that is not a std::exception";
    }
    std::size_t written = 0;
    while (written < result.size()) {
      ssize_t n = ::write(fds[1], result.data() + written, result.size() - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0) result.append(buffer, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return "crashed with signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "exited abnormally";
  if (!result.empty() && result[0] == 'E') {
    std::string message = result.substr(1);
    if (message.find("conformance-corrupt.tfrecord") == std::string::npos) {
      return "threw a trainyard::Error that does not name the file (reader.h): " + message;
    }
    std::cout << "    clean error: " << message << "\n";
    return "";
  }
  return result;
}

void check_corrupt_input(const ClassInfo& info) {
  std::shared_ptr<Reader> reader = create_default<Reader>(info);
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<double> noise = uniform_values(suite().seed, 300, 0.0, 256.0);
  std::string garbage;
  for (double x : noise) garbage.push_back(static_cast<char>(static_cast<int>(x)));
  inputs.emplace_back("300 random bytes", garbage);
  inputs.emplace_back("an empty record (no features at all)", "");
  std::string errors;
  if (std::optional<Accepted> sample = accepted_sample(info, *reader, &errors)) {
    const std::string& bytes = sample->record.bytes;
    inputs.emplace_back(
        sample->record.format + " cut to half its " + std::to_string(bytes.size()) + " bytes",
        bytes.substr(0, bytes.size() / 2));
  }
  for (const auto& [what, record] : inputs) {
    std::string problem = parse_in_child(*reader, record);
    EXPECT_EQ(problem, "") << info.class_name << " given " << what
                           << " should throw a trainyard::Error naming the record; it " << problem
                           << "\n"
                           << repro_line();
  }
}

}  // namespace

void register_reader_checks(const ClassInfo& info) {
  const std::string suite_name = "Reader/" + info.class_name;
  register_check(suite_name, "DeclaredOptionsValid", [info] { check_declared_options(info); });
  register_check(suite_name, "DeclaredFeaturesMatchRecord", [info] { check_features(info); });
  register_check(suite_name, "CorruptInputGivesCleanError", [info] { check_corrupt_input(info); });
}

}  // namespace trainyard::conformance
