#include "trainyard/pkg/yt8m/model_flags.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "trainyard/error.h"
#include "trainyard/json.h"

namespace trainyard::yt8m {

ModelFlags model_flags_of(const TaskPipeline& pipeline) {
  ModelFlags f;
  f.model = pipeline.model.class_name;
  f.frame_features = pipeline.train_reader.class_name == kFrameReader;
  f.feature_names =
      pipeline.train_reader.param("feature_names", f.frame_features ? "rgb" : "mean_rgb");
  f.feature_sizes = pipeline.train_reader.param("feature_sizes", "1024");
  f.label_loss = pipeline.label_loss.class_name;
  f.num_classes = pipeline.num_classes;
  f.model_params = pipeline.model.params;
  f.label_loss_params = pipeline.label_loss.params;
  return f;
}

std::string model_flags_to_json(const ModelFlags& f) {
  std::ostringstream out;
  out << "{\"model\": " << json_quoted(f.model)
      << ", \"feature_sizes\": " << json_quoted(f.feature_sizes)
      << ", \"feature_names\": " << json_quoted(f.feature_names)
      << ", \"frame_features\": " << (f.frame_features ? "true" : "false")
      << ", \"label_loss\": " << json_quoted(f.label_loss);
  if (f.num_classes > 0) out << ", \"num_classes\": " << f.num_classes;
  auto params = [&](const char* name, const std::vector<std::pair<std::string, std::string>>& p) {
    out << ", " << json_quoted(name) << ": {";
    for (std::size_t i = 0; i < p.size(); ++i) {
      out << (i ? ", " : "") << json_quoted(p[i].first) << ": " << json_quoted(p[i].second);
    }
    out << "}";
  };
  params("model_params", f.model_params);
  if (!f.label_loss_params.empty()) params("label_loss_params", f.label_loss_params);
  out << "}\n";
  return out.str();
}

ModelFlags read_model_flags(const std::string& path) {
  // O_NONBLOCK: a FIFO must be refused below, not waited on for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConfigError("cannot read " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    throw ConfigError(path + " is not a regular file (a FIFO, device or directory); not read");
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (1u << 20)) throw ConfigError(path + ": larger than 1 MiB");
  }
  const JsonValue json = parse_json(text, path);
  if (json.kind != JsonValue::Kind::kObject) throw ConfigError(path + ": not a JSON object");
  auto member = [&](const char* key, JsonValue::Kind kind, const char* what) -> const JsonValue* {
    const JsonValue* v = json.find(key);
    if (v != nullptr && v->kind != kind) {
      throw ConfigError(path + ": \"" + key + "\" is not " + what);
    }
    return v;
  };
  auto required = [&](const char* key, JsonValue::Kind kind, const char* what) {
    const JsonValue* v = member(key, kind, what);
    if (v == nullptr) throw ConfigError(path + ": no \"" + key + "\"");
    return v;
  };
  ModelFlags f;
  f.model = required("model", JsonValue::Kind::kString, "a string")->text;
  f.feature_names = required("feature_names", JsonValue::Kind::kString, "a string")->text;
  f.feature_sizes = required("feature_sizes", JsonValue::Kind::kString, "a string")->text;
  f.frame_features = required("frame_features", JsonValue::Kind::kBool, "true or false")->boolean;
  f.label_loss = required("label_loss", JsonValue::Kind::kString, "a string")->text;
  if (const JsonValue* n = member("num_classes", JsonValue::Kind::kNumber, "a number")) {
    try {
      std::size_t used = 0;
      f.num_classes = std::stoll(n->text, &used);
      if (used != n->text.size() || f.num_classes <= 0) throw std::invalid_argument(n->text);
    } catch (const std::exception&) {
      throw ConfigError(path + ": \"num_classes\" is " + n->text + ", not a positive integer");
    }
  }
  auto read_params = [&](const char* name, std::vector<std::pair<std::string, std::string>>& out) {
    const JsonValue* params = member(name, JsonValue::Kind::kObject, "an object");
    if (params == nullptr) return;
    for (const auto& [key, value] : params->object) {
      std::string text;
      switch (value.kind) {
        case JsonValue::Kind::kString:
        case JsonValue::Kind::kNumber:
          text = value.text;
          break;
        case JsonValue::Kind::kBool:
          text = value.boolean ? "true" : "false";
          break;
        case JsonValue::Kind::kArray:
          for (const JsonValue& item : value.array) {
            text += (text.empty() ? "" : ",") + (item.kind == JsonValue::Kind::kBool
                                                     ? std::string(item.boolean ? "true" : "false")
                                                     : item.text);
          }
          break;
        case JsonValue::Kind::kNull:
        case JsonValue::Kind::kObject:
          throw ConfigError(path + ": " + name + " \"" + key + "\" is not a value");
      }
      out.emplace_back(key, text);
    }
  };
  read_params("model_params", f.model_params);
  read_params("label_loss_params", f.label_loss_params);
  return f;
}

}  // namespace trainyard::yt8m
