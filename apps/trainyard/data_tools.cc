#include "data_tools.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <sstream>
#include <system_error>
#include <utility>

#include "trainyard/core/atomic_file.h"
#include "trainyard/core/input_pipeline.h"
#include "trainyard/core/progress.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/user_file.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {
namespace {

namespace fs = std::filesystem;

// Dequantization of the starter code (max 2, min -2): x = q * 4/255 + 4/512 - 2.
uint8_t quantize(float x) {
  double q = std::round((x + 2.0 - 4.0 / 512.0) * 255.0 / 4.0);
  return static_cast<uint8_t>(std::clamp(q, 0.0, 255.0));
}

struct TopicModel {
  std::vector<std::vector<int64_t>> topic_classes;
  std::vector<std::vector<float>> prototypes;  // per class, sum(feature_sizes)
};

TopicModel make_topics(const SynthYt8mOptions& o, std::mt19937_64& rng) {
  TopicModel model;
  int64_t topics = o.num_topics > 0 ? o.num_topics : std::max<int64_t>(2, o.num_classes / 8);
  std::uniform_int_distribution<int64_t> any_class(0, o.num_classes - 1);
  for (int64_t t = 0; t < topics; ++t) {
    std::vector<int64_t> classes;
    int64_t n = std::min<int64_t>(o.num_classes, 6);
    while (static_cast<int64_t>(classes.size()) < n) {
      int64_t c = any_class(rng);
      if (std::find(classes.begin(), classes.end(), c) == classes.end()) classes.push_back(c);
    }
    model.topic_classes.push_back(classes);
  }
  int64_t dim = 0;
  for (int64_t s : o.feature_sizes) dim += s;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  model.prototypes.resize(static_cast<std::size_t>(o.num_classes));
  for (auto& p : model.prototypes) {
    p.resize(static_cast<std::size_t>(dim));
    for (float& v : p) v = normal(rng) * 0.5f;
  }
  return model;
}

// Labels of one video: one or two topics, each of their classes with probability 0.5, and at
// least one label.
std::vector<int64_t> draw_labels(const TopicModel& model, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> topic(0, model.topic_classes.size() - 1);
  std::bernoulli_distribution coin(0.5);
  std::vector<int64_t> labels;
  int n_topics = coin(rng) ? 2 : 1;
  for (int i = 0; i < n_topics; ++i) {
    const auto& classes = model.topic_classes[topic(rng)];
    for (int64_t c : classes) {
      if (coin(rng) && std::find(labels.begin(), labels.end(), c) == labels.end()) {
        labels.push_back(c);
      }
    }
    if (labels.empty()) labels.push_back(classes[0]);
  }
  std::sort(labels.begin(), labels.end());
  return labels;
}

std::vector<float> evidence(const TopicModel& model, const std::vector<int64_t>& labels) {
  std::vector<float> v(model.prototypes[0].size(), 0.0f);
  for (int64_t c : labels) {
    const auto& p = model.prototypes[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += p[i];
  }
  return v;
}

void set_labels(wire::tf::Features* features, const std::string& id,
                const std::vector<int64_t>& labels) {
  auto& map = *features->mutable_feature();
  map["id"].mutable_bytes_list()->add_value(id);
  auto* l = map["labels"].mutable_int64_list();
  for (int64_t c : labels) l->add_value(c);
}

std::string video_record(const SynthYt8mOptions& o, const TopicModel& model, const std::string& id,
                         std::mt19937_64& rng, int64_t* n_labels) {
  std::vector<int64_t> labels = draw_labels(model, rng);
  *n_labels = static_cast<int64_t>(labels.size());
  std::vector<float> signal = evidence(model, labels);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  static const char* kVideoNames[] = {"mean_rgb", "mean_audio"};
  static const char* kFrameNames[] = {"rgb", "audio"};
  if (!o.frame_level) {
    wire::tf::Example example;
    set_labels(example.mutable_features(), id, labels);
    std::size_t offset = 0;
    for (std::size_t f = 0; f < o.feature_sizes.size(); ++f) {
      std::string name = f < 2 ? kVideoNames[f] : "mean_feature" + std::to_string(f);
      auto* values = (*example.mutable_features()->mutable_feature())[name].mutable_float_list();
      for (int64_t i = 0; i < o.feature_sizes[f]; ++i) {
        values->add_value(signal[offset++] + noise(rng));
      }
    }
    return example.SerializeAsString();
  }
  wire::tf::SequenceExample example;
  set_labels(example.mutable_context(), id, labels);
  std::uniform_int_distribution<int64_t> frames_dist(o.min_frames, o.max_frames);
  int64_t frames = frames_dist(rng);
  // The evidence sits in a few frames (about one in eight), strongly, and with a sign drawn per
  // frame (positive 70% of the time); the rest is noise. The frames' mean keeps only a weak
  // trace of it, so a model that looks at frames (clusters, pooling, recurrence) beats one that
  // averages them.
  std::bernoulli_distribution carries(0.125);
  std::bernoulli_distribution positive(0.7);
  std::vector<std::vector<std::string>> per_feature(o.feature_sizes.size());
  for (int64_t t = 0; t < frames; ++t) {
    bool strong = carries(rng) || t == frames / 2;
    const float sign = positive(rng) ? 1.5f : -1.5f;
    std::size_t offset = 0;
    for (std::size_t f = 0; f < o.feature_sizes.size(); ++f) {
      std::string bytes(static_cast<std::size_t>(o.feature_sizes[f]), '\0');
      for (int64_t i = 0; i < o.feature_sizes[f]; ++i) {
        float x = 0.5f * noise(rng) + (strong ? sign * signal[offset] : 0.0f);
        bytes[static_cast<std::size_t>(i)] = static_cast<char>(quantize(x));
        ++offset;
      }
      per_feature[f].push_back(std::move(bytes));
    }
  }
  auto& lists = *example.mutable_feature_lists()->mutable_feature_list();
  for (std::size_t f = 0; f < o.feature_sizes.size(); ++f) {
    std::string name = f < 2 ? kFrameNames[f] : "feature" + std::to_string(f);
    auto& list = lists[name];
    for (std::string& bytes : per_feature[f]) {
      list.add_feature()->mutable_bytes_list()->add_value(std::move(bytes));
    }
  }
  return example.SerializeAsString();
}

std::string describe_feature(const wire::tf::Feature& f) {
  std::ostringstream out;
  auto head = [&out](const auto& values, const char* type) {
    out << type << "[" << values.size() << "]";
    if (values.size() > 0) {
      out << " {";
      for (int i = 0; i < std::min(values.size(), 5); ++i) out << (i ? ", " : "") << values[i];
      out << (values.size() > 5 ? ", ...}" : "}");
    }
  };
  switch (f.kind_case()) {
    case wire::tf::Feature::kFloatList:
      head(f.float_list().value(), "float");
      break;
    case wire::tf::Feature::kInt64List:
      head(f.int64_list().value(), "int64");
      break;
    case wire::tf::Feature::kBytesList: {
      const auto& v = f.bytes_list().value();
      out << "bytes[" << v.size() << "]";
      if (v.size() == 1) {
        bool printable =
            std::all_of(v[0].begin(), v[0].end(), [](char c) { return c >= 32 && c < 127; });
        if (printable && v[0].size() <= 64) {
          out << " \"" << v[0] << "\"";
        } else {
          out << " (" << v[0].size() << " bytes)";
        }
      }
      break;
    }
    case wire::tf::Feature::KIND_NOT_SET:
      out << "(empty)";
      break;
  }
  return out.str();
}

void print_features(const wire::tf::Features& features, const std::string& indent,
                    std::ostream& out) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : features.feature()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    out << indent << key << ": " << describe_feature(features.feature().at(key)) << "\n";
  }
}

void print_record(const std::string& record, std::ostream& out) {
  wire::tf::SequenceExample sequence;
  if (sequence.ParseFromString(record) && sequence.has_feature_lists() &&
      sequence.feature_lists().feature_list_size() > 0) {
    out << "  tf.SequenceExample\n  context:\n";
    print_features(sequence.context(), "    ", out);
    out << "  feature_lists:\n";
    std::vector<std::string> keys;
    for (const auto& [key, value] : sequence.feature_lists().feature_list()) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (const std::string& key : keys) {
      const auto& list = sequence.feature_lists().feature_list().at(key);
      out << "    " << key << ": " << list.feature_size() << " frames";
      if (list.feature_size() > 0) out << " of " << describe_feature(list.feature(0));
      out << "\n";
    }
    return;
  }
  wire::tf::Example example;
  if (example.ParseFromString(record)) {
    out << "  tf.Example\n";
    print_features(example.features(), "    ", out);
    return;
  }
  out << "  (" << record.size() << " bytes, not a tf.Example)\n";
}

// An idx file: big-endian header, then unsigned bytes. gzopen reads plain files too.
std::vector<uint8_t> read_idx(const std::string& path, int dims, std::vector<int64_t>* shape) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw NotFound("cannot open idx file " + path);
  auto read_u32 = [&](uint32_t* v) {
    unsigned char b[4];
    if (gzread(file, b, 4) != 4) return false;
    *v = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    return true;
  };
  uint32_t magic = 0;
  uint32_t expected_magic = 0x0800u | static_cast<uint32_t>(dims);
  if (!read_u32(&magic) || magic != expected_magic) {
    gzclose(file);
    throw DataLoss(path + ": not an idx file of " + std::to_string(dims) +
                   " dimension(s) of unsigned bytes (magic " + std::to_string(magic) +
                   ", expected " + std::to_string(expected_magic) + ")");
  }
  shape->clear();
  std::size_t total = 1;
  for (int d = 0; d < dims; ++d) {
    uint32_t n = 0;
    if (!read_u32(&n)) {
      gzclose(file);
      throw DataLoss(path + ": truncated idx header");
    }
    shape->push_back(n);
    total *= n;
  }
  std::vector<uint8_t> data(total);
  std::size_t done = 0;
  while (done < total) {
    int chunk = static_cast<int>(std::min<std::size_t>(total - done, 1 << 24));
    int got = gzread(file, data.data() + done, static_cast<unsigned>(chunk));
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  gzclose(file);
  if (done != total) {
    throw DataLoss(path + ": truncated idx data (" + std::to_string(done) + " of " +
                   std::to_string(total) + " bytes)");
  }
  return data;
}

}  // namespace

SynthYt8mSummary synth_yt8m(const SynthYt8mOptions& o) {
  if (o.output_dir.empty()) throw InvalidArgument("synth-yt8m: --output_dir is required");
  if (o.num_videos < 1) throw InvalidArgument("synth-yt8m: --num_videos must be >= 1");
  if (o.num_classes < 2) throw InvalidArgument("synth-yt8m: --num_classes must be >= 2");
  if (o.num_shards < 1) throw InvalidArgument("synth-yt8m: --num_shards must be >= 1");
  if (o.feature_sizes.empty()) throw InvalidArgument("synth-yt8m: --feature_sizes is empty");
  if (o.min_frames < 1 || o.max_frames < o.min_frames) {
    throw InvalidArgument("synth-yt8m: need 1 <= min_frames <= max_frames");
  }
  fs::create_directories(o.output_dir);
  std::mt19937_64 rng(o.seed);
  TopicModel model = make_topics(o, rng);
  SynthYt8mSummary summary;
  summary.train_videos = o.num_videos;
  summary.validate_videos = std::max<int64_t>(1, o.num_videos / 5);
  int64_t total_labels = 0;
  int64_t next_id = 0;
  Progress progress("data synth-yt8m", "videos", summary.train_videos + summary.validate_videos,
                    std::cerr);
  for (const char* split : {"train", "validate"}) {
    int64_t videos = std::string(split) == "train" ? summary.train_videos : summary.validate_videos;
    int shards = static_cast<int>(std::min<int64_t>(o.num_shards, videos));
    for (int s = 0; s < shards; ++s) {
      char name[64];
      std::snprintf(name, sizeof(name), "%s-%04d.tfrecord", split, s);
      std::string path = (fs::path(o.output_dir) / name).string();
      AtomicFile file(path);
      TFRecordWriter writer(file.temporary_path());
      for (int64_t v = s; v < videos; v += shards) {
        char id[32];
        std::snprintf(id, sizeof(id), "v%07lld", static_cast<long long>(next_id++));
        int64_t n_labels = 0;
        writer.write(video_record(o, model, id, rng, &n_labels));
        total_labels += n_labels;
        progress.advance();
      }
      writer.close();
      file.commit();
      summary.files.push_back(path);
    }
  }
  progress.finish();
  summary.mean_labels_per_video =
      static_cast<double>(total_labels) /
      static_cast<double>(summary.train_videos + summary.validate_videos);
  return summary;
}

InspectSummary inspect_records(const std::string& pattern, int64_t show, std::ostream& out) {
  InspectSummary summary;
  // On standard error: `out` holds the records themselves.
  Progress progress("data inspect", "records", std::nullopt, std::cerr);
  for (const std::string& path : expand_file_patterns(pattern)) {
    TFRecordReader reader(path);
    int64_t count = 0;
    std::string record;
    while (true) {
      TFRecordReader::Result r = reader.read(&record);
      if (r.kind == TFRecordReader::Result::kEndOfFile) break;
      if (r.kind != TFRecordReader::Result::kRecord) {
        out << "ERROR " << r.message << "\n";
        ++summary.corrupt;
        if (r.kind == TFRecordReader::Result::kTruncated) break;
        continue;
      }
      if (summary.records < show) {
        out << "record " << summary.records << " (" << path << ", offset " << r.offset << ", "
            << record.size() << " bytes)\n";
        print_record(record, out);
      }
      ++count;
      ++summary.records;
      summary.bytes += static_cast<int64_t>(record.size());
      progress.advance();
    }
    out << path << ": " << count << " records\n";
    ++summary.files;
  }
  progress.finish();
  out << summary.files << " files, " << summary.records << " records, " << summary.bytes
      << " bytes of records, " << summary.corrupt << " corrupt\n";
  return summary;
}

int64_t convert_mnist(const std::string& images, const std::string& labels,
                      const std::string& output) {
  std::vector<int64_t> image_shape, label_shape;
  std::vector<uint8_t> pixels = read_idx(images, 3, &image_shape);
  std::vector<uint8_t> classes = read_idx(labels, 1, &label_shape);
  if (image_shape[0] != label_shape[0]) {
    throw InvalidArgument("convert-mnist: " + images + " has " + std::to_string(image_shape[0]) +
                          " images but " + labels + " has " + std::to_string(label_shape[0]) +
                          " labels");
  }
  int64_t n = image_shape[0], h = image_shape[1], w = image_shape[2];
  if (fs::path(output).has_parent_path()) fs::create_directories(fs::path(output).parent_path());
  AtomicFile file(output);
  TFRecordWriter writer(file.temporary_path());
  Progress progress("data convert-mnist", "images", n, std::cerr);
  for (int64_t i = 0; i < n; ++i) {
    wire::tf::Example example;
    auto& f = *example.mutable_features()->mutable_feature();
    f["image/encoded"].mutable_bytes_list()->add_value(image::encode_png(
        std::span<const uint8_t>(pixels.data() + i * h * w, static_cast<std::size_t>(h * w)), h, w,
        1));
    f["image/format"].mutable_bytes_list()->add_value("png");
    f["image/class/label"].mutable_int64_list()->add_value(classes[static_cast<std::size_t>(i)]);
    f["image/height"].mutable_int64_list()->add_value(h);
    f["image/width"].mutable_int64_list()->add_value(w);
    writer.write(example.SerializeAsString());
    progress.advance();
  }
  progress.finish();
  writer.close();
  file.commit();
  return n;
}

namespace {

// Files written under hidden temporary names (AtomicFile), each published whole when commit()
// is called; the temporaries are removed if it never is.
class StagedFiles {
 public:
  // The temporary path to write `final_path` to.
  std::string add(const std::string& final_path) {
    files_.push_back(std::make_unique<AtomicFile>(final_path));
    return files_.back()->temporary_path();
  }

  void commit() {
    for (const std::unique_ptr<AtomicFile>& file : files_) file->commit();
  }

 private:
  std::vector<std::unique_ptr<AtomicFile>> files_;
};

struct ImageFile {
  std::string relative;  // "daisy/1.jpg", also the id
  int64_t label = 0;
};

// An encoded image larger than this is not one convert-images takes (a 64-megapixel PNG of
// noise is about 200 MiB).
constexpr uint64_t kMaxImageFileBytes = uint64_t{256} << 20;

std::string read_whole_file(const fs::path& path) {
  return read_user_file(path.string(), "convert-images: image", kMaxImageFileBytes);
}

}  // namespace

ConvertImagesSummary convert_images(const ConvertImagesOptions& o) {
  if (o.image_dir.empty()) throw InvalidArgument("convert-images: --image_dir is required");
  if (o.output.empty()) throw InvalidArgument("convert-images: --output is required");
  if (o.num_shards < 1) {
    throw InvalidArgument("convert-images: --num_shards is " + std::to_string(o.num_shards) +
                          "; expected at least 1");
  }
  if (!(o.validation_fraction >= 0.0 && o.validation_fraction < 1.0)) {
    throw InvalidArgument("convert-images: --validation_fraction is " +
                          std::to_string(o.validation_fraction) + "; expected a value in [0, 1)");
  }
  const fs::path root(o.image_dir);
  if (!fs::is_directory(root)) {
    throw NotFound("convert-images: --image_dir " + o.image_dir + " is not a directory");
  }

  // Classes: the subdirectories, sorted by name; their files, sorted.
  ConvertImagesSummary summary;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name[0] == '.') continue;
    // labels.txt holds one "label:name" line a class: a newline in a name would forge lines.
    for (const char c : name) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        throw InvalidArgument("convert-images: class directory " + entry.path().string() +
                              " has a control character in its name (byte " +
                              std::to_string(static_cast<unsigned char>(c)) +
                              "); labels.txt holds one class name a line: rename it");
      }
    }
    summary.class_names.push_back(name);
  }
  std::sort(summary.class_names.begin(), summary.class_names.end());
  if (summary.class_names.empty()) {
    throw InvalidArgument("convert-images: " + o.image_dir +
                          " has no subdirectories; expected one directory of images per class");
  }
  std::vector<ImageFile> images;
  for (std::size_t label = 0; label < summary.class_names.size(); ++label) {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry :
         fs::directory_iterator(root / summary.class_names[label])) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && name[0] != '.') names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      images.push_back({summary.class_names[label] + "/" + name, static_cast<int64_t>(label)});
    }
  }
  if (images.empty()) {
    throw InvalidArgument("convert-images: the class directories of " + o.image_dir +
                          " hold no files");
  }

  // Shuffle (Fisher-Yates with our own draws, the same on every platform), then split.
  std::mt19937_64 rng(o.seed);
  for (std::size_t i = images.size() - 1; i > 0; --i) {
    std::swap(images[i], images[static_cast<std::size_t>(rng() % (i + 1))]);
  }
  const auto num_validation = static_cast<std::size_t>(
      std::llround(o.validation_fraction * static_cast<double>(images.size())));
  summary.validation_images = static_cast<int64_t>(num_validation);
  summary.train_images = static_cast<int64_t>(images.size() - num_validation);

  const fs::path prefix(o.output);
  if (prefix.has_parent_path()) fs::create_directories(prefix.parent_path());
  StagedFiles staged;
  Progress progress("data convert-images", "images", static_cast<int64_t>(images.size()),
                    std::cerr);
  auto write_split = [&](const char* split, std::size_t begin, std::size_t end) {
    const std::size_t count = end - begin;
    if (count == 0) return;
    const std::size_t shards = static_cast<std::size_t>(o.num_shards);
    const std::size_t per_shard = (count + shards - 1) / shards;  // slim's ceil(N / shards)
    for (std::size_t shard = 0; shard < shards; ++shard) {
      char suffix[64];
      std::snprintf(suffix, sizeof(suffix), "_%s_%05zu-of-%05zu.tfrecord", split, shard, shards);
      const std::string path = o.output + suffix;
      TFRecordWriter writer(staged.add(path));
      const std::size_t first = begin + std::min(count, shard * per_shard);
      const std::size_t last = begin + std::min(count, (shard + 1) * per_shard);
      for (std::size_t i = first; i < last; ++i) {
        const ImageFile& file = images[i];
        const fs::path full = root / file.relative;
        const std::string bytes = read_whole_file(full);
        const image::DecodedImage decoded =
            image::decode_image(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), 0,
                                "convert-images: " + full.string());
        wire::tf::Example example;
        auto& f = *example.mutable_features()->mutable_feature();
        f["image/encoded"].mutable_bytes_list()->add_value(bytes);
        f["image/format"].mutable_bytes_list()->add_value(image::image_format_name(decoded.format));
        f["image/class/label"].mutable_int64_list()->add_value(file.label);
        f["image/height"].mutable_int64_list()->add_value(decoded.height);
        f["image/width"].mutable_int64_list()->add_value(decoded.width);
        f["image/filename"].mutable_bytes_list()->add_value(file.relative);
        f["image/source_id"].mutable_bytes_list()->add_value(file.relative);
        writer.write(example.SerializeAsString());
        progress.advance();
      }
      writer.close();
      summary.files.push_back(path);
    }
  };
  write_split("train", num_validation, images.size());
  write_split("validation", 0, num_validation);
  progress.finish();

  const std::string labels_path =
      ((prefix.has_parent_path() ? prefix.parent_path() : fs::path(".")) / "labels.txt").string();
  {
    std::ofstream labels(staged.add(labels_path));
    for (std::size_t i = 0; i < summary.class_names.size(); ++i) {
      labels << i << ":" << summary.class_names[i] << "\n";
    }
    labels.close();
    if (!labels) throw Error("convert-images: cannot write " + labels_path);
  }
  summary.files.push_back(labels_path);
  staged.commit();
  return summary;
}

}  // namespace trainyard::app
