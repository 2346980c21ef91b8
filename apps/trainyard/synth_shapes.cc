#include "synth_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numbers>
#include <span>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "trainyard/core/atomic_file.h"
#include "trainyard/core/progress.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {
namespace {

namespace fs = std::filesystem;

// SplitMix64 with our own floating-point draws, so the data set is the same on every platform
// and standard library (std:: distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [lo, hi].
  int64_t integer(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

uint64_t image_seed(uint64_t seed, int split, int64_t index) {
  Rng mix(seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(split + 1)));
  mix.next();
  Rng again(mix.next() ^ (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ULL));
  return again.next();
}

struct Rgb {
  double r, g, b;
};

Rgb hsv(double h, double s, double v) {
  const double c = v * s;
  const double hp = std::fmod(h, 1.0) * 6.0;
  const double x = c * (1.0 - std::fabs(std::fmod(hp, 2.0) - 1.0));
  Rgb rgb{0, 0, 0};
  if (hp < 1) {
    rgb = {c, x, 0};
  } else if (hp < 2) {
    rgb = {x, c, 0};
  } else if (hp < 3) {
    rgb = {0, c, x};
  } else if (hp < 4) {
    rgb = {0, x, c};
  } else if (hp < 5) {
    rgb = {x, 0, c};
  } else {
    rgb = {c, 0, x};
  }
  const double m = v - c;
  return {(rgb.r + m) * 255.0, (rgb.g + m) * 255.0, (rgb.b + m) * 255.0};
}

struct Canvas {
  int64_t height, width;
  std::vector<float> rgb;  // height x width x 3, HWC, 0..255

  void set(int64_t y, int64_t x, const Rgb& c) {
    float* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
    p[0] = static_cast<float>(c.r);
    p[1] = static_cast<float>(c.g);
    p[2] = static_cast<float>(c.b);
  }
};

Rgb mix(const Rgb& a, const Rgb& b, double t) {
  return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

// Muted colours for backgrounds, so that the vivid shapes stand out without being trivial.
Rgb background_colour(Rng& rng) {
  return hsv(rng.uniform(), rng.uniform(0.0, 0.35), rng.uniform(0.2, 0.85));
}

void paint_background(Canvas& canvas, Rng& rng) {
  const int64_t h = canvas.height, w = canvas.width;
  const Rgb a = background_colour(rng);
  const Rgb b = background_colour(rng);
  const int64_t kind = rng.integer(0, 2);
  const double angle = rng.uniform(0.0, std::numbers::pi);
  const double dx = std::cos(angle), dy = std::sin(angle);
  const double period = rng.uniform(6.0, 32.0);
  const double noise = rng.uniform(4.0, 30.0);
  // The range of `along` over the image, for the gradient.
  const double lo = static_cast<double>(w) * std::min(dx, 0.0);
  const double hi =
      (h == w ? static_cast<double>(w) * (std::max(dx, 0.0) + dy)
              : static_cast<double>(w) * std::max(dx, 0.0) + static_cast<double>(h) * dy) +
      1e-9;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const double along = (static_cast<double>(x) * dx + static_cast<double>(y) * dy);
      double t = 0.0;
      if (kind == 1) {  // stripes
        t = 0.5 + 0.5 * std::sin(2.0 * std::numbers::pi * along / period);
      } else if (kind == 2) {  // gradient
        t = (along - lo) / (hi - lo);
      }
      Rgb c = kind == 0 ? a : mix(a, b, t);
      const double n = (rng.uniform() + rng.uniform() - 1.0) * noise;
      canvas.set(y, x, {c.r + n, c.g + n, c.b + n});
    }
  }
}

enum ShapeClass { kCircle = 0, kSquare = 1, kTriangle = 2, kCross = 3 };

struct Shape {
  int cls;
  double cx, cy, radius, angle;

  // Whether the point (px, py) in pixels lies inside the shape.
  bool contains(double px, double py) const {
    const double ca = std::cos(angle), sa = std::sin(angle);
    const double ox = px - cx, oy = py - cy;
    const double u = (ca * ox + sa * oy) / radius;
    const double v = (-sa * ox + ca * oy) / radius;
    switch (cls) {
      case kCircle:
        return u * u + v * v <= 1.0;
      case kSquare:
        return std::fabs(u) <= 0.78 && std::fabs(v) <= 0.78;
      case kTriangle: {
        // Equilateral, circumradius 1.1: inside the three half-planes at distance 0.55.
        constexpr double kIn = 0.55;
        const double c30 = std::sqrt(3.0) / 2.0;
        return -v <= kIn && c30 * u + 0.5 * v <= kIn && -c30 * u + 0.5 * v <= kIn;
      }
      default:  // kCross
        return (std::fabs(u) <= 1.0 && std::fabs(v) <= 0.3) ||
               (std::fabs(u) <= 0.3 && std::fabs(v) <= 1.0);
    }
  }
};

struct PixelBox {
  int64_t xmin, ymin, xmax, ymax;  // inclusive pixel indices
  int64_t visible = 0;             // pixels inside the image
  int64_t total = 0;               // pixels of the whole shape, inside or outside the image
};

PixelBox measure(const Shape& shape, int64_t height, int64_t width) {
  PixelBox box{width, height, -1, -1};
  const double reach = shape.radius * 1.2;
  const auto lo_x = static_cast<int64_t>(std::floor(shape.cx - reach));
  const auto hi_x = static_cast<int64_t>(std::ceil(shape.cx + reach));
  const auto lo_y = static_cast<int64_t>(std::floor(shape.cy - reach));
  const auto hi_y = static_cast<int64_t>(std::ceil(shape.cy + reach));
  for (int64_t y = lo_y; y <= hi_y; ++y) {
    for (int64_t x = lo_x; x <= hi_x; ++x) {
      if (!shape.contains(static_cast<double>(x) + 0.5, static_cast<double>(y) + 0.5)) continue;
      ++box.total;
      if (x < 0 || y < 0 || x >= width || y >= height) continue;
      ++box.visible;
      box.xmin = std::min(box.xmin, x);
      box.xmax = std::max(box.xmax, x);
      box.ymin = std::min(box.ymin, y);
      box.ymax = std::max(box.ymax, y);
    }
  }
  return box;
}

double iou(const PixelBox& a, const PixelBox& b) {
  const int64_t w = std::min(a.xmax, b.xmax) - std::max(a.xmin, b.xmin) + 1;
  const int64_t h = std::min(a.ymax, b.ymax) - std::max(a.ymin, b.ymin) + 1;
  if (w <= 0 || h <= 0) return 0.0;
  const auto area = [](const PixelBox& p) {
    return static_cast<double>((p.xmax - p.xmin + 1) * (p.ymax - p.ymin + 1));
  };
  const double inter = static_cast<double>(w * h);
  return inter / (area(a) + area(b) - inter);
}

void paint_shape(Canvas& canvas, const Shape& shape, const PixelBox& box, Rng& rng) {
  const Rgb colour = hsv(rng.uniform(), rng.uniform(0.5, 1.0), rng.uniform(0.55, 1.0));
  const double shade = rng.uniform(-40.0, 40.0);  // a linear shading across the shape
  const double noise = rng.uniform(0.0, 12.0);
  for (int64_t y = box.ymin; y <= box.ymax; ++y) {
    for (int64_t x = box.xmin; x <= box.xmax; ++x) {
      const double px = static_cast<double>(x) + 0.5, py = static_cast<double>(y) + 0.5;
      if (!shape.contains(px, py)) continue;
      const double t =
          shade * (py - shape.cy) / shape.radius + (rng.uniform() + rng.uniform() - 1.0) * noise;
      canvas.set(y, x, {colour.r + t, colour.g + t, colour.b + t});
    }
  }
}

// Which shape is seen at each pixel of an h x w image: the index of the last of `placed` that
// contains the pixel's centre (it is painted over the earlier ones), -1 for the background.
std::vector<int32_t> visible_shape(const std::vector<std::pair<Shape, PixelBox>>& placed, int64_t h,
                                   int64_t w) {
  std::vector<int32_t> owner(static_cast<std::size_t>(h * w), -1);
  for (std::size_t i = 0; i < placed.size(); ++i) {
    const auto& [shape, box] = placed[i];
    for (int64_t y = box.ymin; y <= box.ymax; ++y) {
      for (int64_t x = box.xmin; x <= box.xmax; ++x) {
        if (shape.contains(static_cast<double>(x) + 0.5, static_cast<double>(y) + 0.5)) {
          owner[static_cast<std::size_t>(y * w + x)] = static_cast<int32_t>(i);
        }
      }
    }
  }
  return owner;
}

// The PNG of shape `index`'s visible pixels (1) in an h x w image.
std::string visible_mask_png(const std::vector<int32_t>& owner, std::size_t index, int64_t h,
                             int64_t w) {
  std::vector<uint8_t> mask(owner.size(), 0);
  for (std::size_t p = 0; p < owner.size(); ++p) {
    mask[p] = owner[p] == static_cast<int32_t>(index) ? 1 : 0;
  }
  return image::encode_png(mask, h, w, 1);
}

struct ImageRecord {
  std::string example;  // serialized tf.Example
  int64_t boxes = 0;
  int64_t cut = 0;
  int64_t hidden = 0;  // with masks: shapes painted over whole, not labelled
};

// Draws up to the wanted number of shapes on `canvas` (an h x w image), each painted as it is
// placed: enough of it visible to be learnable, and not hiding much of an earlier shape.
std::vector<std::pair<Shape, PixelBox>> place_shapes(const SynthShapesOptions& o, Canvas& canvas,
                                                     Rng& rng) {
  const int64_t h = canvas.height, w = canvas.width;
  std::vector<std::pair<Shape, PixelBox>> placed;
  const int64_t wanted = rng.integer(o.min_shapes, o.max_shapes);
  const double height = static_cast<double>(h), width = static_cast<double>(w);
  const double size = std::min(height, width);
  for (int attempt = 0; attempt < 30 * o.max_shapes && std::ssize(placed) < wanted; ++attempt) {
    Shape shape;
    shape.cls =
        static_cast<int>(rng.integer(0, static_cast<int64_t>(kSynthShapeClasses.size()) - 1));
    shape.radius = size * rng.uniform(0.06, 0.22);
    // A fifth of the shapes may be cut by the border; the others lie (nearly) inside.
    const double margin = rng.uniform() < 0.2 ? -0.3 * shape.radius : shape.radius;
    shape.cx = rng.uniform(margin, width - margin);
    shape.cy = rng.uniform(margin, height - margin);
    shape.angle = rng.uniform(0.0, 2.0 * std::numbers::pi);
    const PixelBox box = measure(shape, h, w);
    if (box.visible < 40 || box.visible * 5 < box.total * 2) continue;
    if (box.xmax - box.xmin < 3 || box.ymax - box.ymin < 3) continue;
    bool crowded = false;
    for (const auto& [other_shape, other] : placed) crowded = crowded || iou(box, other) > 0.3;
    if (crowded) continue;
    paint_shape(canvas, shape, box, rng);
    placed.emplace_back(shape, box);
  }
  return placed;
}

// The image's own features: the canvas as a JPEG, its size, id and file name.
void add_image_fields(const SynthShapesOptions& o, const Canvas& canvas, const std::string& id,
                      wire::tf::Features& features) {
  std::vector<uint8_t> pixels(canvas.rgb.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>(std::clamp(std::lround(canvas.rgb[i]), 0L, 255L));
  }
  auto& f = *features.mutable_feature();
  f["image/encoded"].mutable_bytes_list()->add_value(
      image::encode_jpeg(pixels, canvas.height, canvas.width, 3, o.jpeg_quality));
  f["image/format"].mutable_bytes_list()->add_value("jpeg");
  f["image/height"].mutable_int64_list()->add_value(canvas.height);
  f["image/width"].mutable_int64_list()->add_value(canvas.width);
  f["image/source_id"].mutable_bytes_list()->add_value(id);
  f["image/filename"].mutable_bytes_list()->add_value(id + ".jpg");
}

// The placed shapes' objects (boxes, classes, areas; with masks, the visible pixels' PNGs), their
// counts in `record`.
void add_shape_objects(const SynthShapesOptions& o,
                       const std::vector<std::pair<Shape, PixelBox>>& placed, int64_t h, int64_t w,
                       wire::tf::Features& features, ImageRecord& record) {
  const double height = static_cast<double>(h), width = static_cast<double>(w);
  auto& f = *features.mutable_feature();
  auto* xmin = f["image/object/bbox/xmin"].mutable_float_list();
  auto* ymin = f["image/object/bbox/ymin"].mutable_float_list();
  auto* xmax = f["image/object/bbox/xmax"].mutable_float_list();
  auto* ymax = f["image/object/bbox/ymax"].mutable_float_list();
  auto* label = f["image/object/class/label"].mutable_int64_list();
  auto* text = f["image/object/class/text"].mutable_bytes_list();
  auto* difficult = f["image/object/difficult"].mutable_int64_list();
  auto* is_crowd = f["image/object/is_crowd"].mutable_int64_list();
  auto* area = f["image/object/area"].mutable_float_list();
  // With masks, a shape that later ones paint over whole has an empty mask: it is not labelled
  // (the image is the same either way).
  std::vector<int64_t> visible_pixels(placed.size(), 1);
  std::vector<int32_t> owner;
  if (o.masks) {
    owner = visible_shape(placed, h, w);
    std::fill(visible_pixels.begin(), visible_pixels.end(), 0);
    for (const int32_t i : owner) {
      if (i >= 0) ++visible_pixels[static_cast<std::size_t>(i)];
    }
  }
  auto* masks = o.masks ? f["image/object/mask"].mutable_bytes_list() : nullptr;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    const auto& [shape, box] = placed[i];
    if (visible_pixels[i] == 0) {
      ++record.hidden;
      continue;
    }
    if (masks != nullptr) masks->add_value(visible_mask_png(owner, i, h, w));
    xmin->add_value(static_cast<float>(static_cast<double>(box.xmin) / width));
    ymin->add_value(static_cast<float>(static_cast<double>(box.ymin) / height));
    xmax->add_value(static_cast<float>(static_cast<double>(box.xmax + 1) / width));
    ymax->add_value(static_cast<float>(static_cast<double>(box.ymax + 1) / height));
    label->add_value(shape.cls + 1);
    text->add_value(kSynthShapeClasses[static_cast<std::size_t>(shape.cls)]);
    difficult->add_value(0);
    is_crowd->add_value(0);
    area->add_value(static_cast<float>(box.visible));
    ++record.boxes;
    if (box.visible < box.total) ++record.cut;
  }
}

// Deterministic serialization orders the feature map by key, so that the bytes of a record
// depend only on the seed.
std::string serialize_deterministic(const wire::tf::Example& example) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return bytes;
}

ImageRecord make_image(const SynthShapesOptions& o, const std::string& id, Rng rng) {
  // With max_image_size, each side is drawn on its own (the default draws nothing, so the
  // images of a seed stay as they were).
  const int64_t h =
      o.max_image_size > o.image_size ? rng.integer(o.image_size, o.max_image_size) : o.image_size;
  const int64_t w =
      o.max_image_size > o.image_size ? rng.integer(o.image_size, o.max_image_size) : o.image_size;
  Canvas canvas{h, w, std::vector<float>(static_cast<std::size_t>(h * w * 3))};
  paint_background(canvas, rng);
  const std::vector<std::pair<Shape, PixelBox>> placed = place_shapes(o, canvas, rng);

  wire::tf::Example example;
  add_image_fields(o, canvas, id, *example.mutable_features());
  ImageRecord record;
  add_shape_objects(o, placed, h, w, *example.mutable_features(), record);
  record.example = serialize_deterministic(example);
  return record;
}

// Files written under hidden temporary names, all published by commit().
class StagedFiles {
 public:
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

[[noreturn]] void bad_option(const std::string& message) {
  throw InvalidArgument("synth-shapes: " + message);
}

}  // namespace

SynthShapesSummary synth_shapes(const SynthShapesOptions& o) {
  if (o.output_dir.empty()) bad_option("--output_dir is required");
  if (o.num_images < 1)
    bad_option("--num_images is " + std::to_string(o.num_images) + "; expected at least 1");
  if (o.num_val_images < -1)
    bad_option("--num_val_images is " + std::to_string(o.num_val_images) + "; expected 0 or more");
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
    bad_option("--val_fraction is " + std::to_string(o.val_fraction) +
               "; expected a value in [0, 1)");
  }
  if (o.image_size < 32 || o.image_size > 4096) {
    bad_option("--image_size is " + std::to_string(o.image_size) + "; expected 32 to 4096 pixels");
  }
  if (o.max_image_size != 0 && (o.max_image_size < o.image_size || o.max_image_size > 4096)) {
    bad_option("--max_image_size is " + std::to_string(o.max_image_size) + "; expected 0 or " +
               std::to_string(o.image_size) + " (--image_size) to 4096 pixels");
  }
  if (o.num_shards < 1)
    bad_option("--num_shards is " + std::to_string(o.num_shards) + "; expected at least 1");
  if (o.min_shapes < 1 || o.max_shapes < o.min_shapes || o.max_shapes > 50) {
    bad_option("shapes per image are [" + std::to_string(o.min_shapes) + ", " +
               std::to_string(o.max_shapes) + "]; expected 1 <= min <= max <= 50");
  }
  if (o.jpeg_quality < 1 || o.jpeg_quality > 100) {
    bad_option("--jpeg_quality is " + std::to_string(o.jpeg_quality) + "; expected 1 to 100");
  }

  SynthShapesSummary summary;
  summary.train_images = o.num_images;
  summary.val_images =
      o.num_val_images >= 0
          ? o.num_val_images
          : std::max<int64_t>(1, std::llround(o.val_fraction * static_cast<double>(o.num_images)));
  fs::create_directories(o.output_dir);
  StagedFiles staged;
  Progress progress("data synth-shapes", "images", summary.train_images + summary.val_images,
                    std::cerr);
  auto write_split = [&](int split, const char* name, int64_t count, int64_t shards) {
    shards = std::clamp<int64_t>(shards, 1, std::max<int64_t>(count, 1));
    if (count == 0) return;
    const int64_t per_shard = (count + shards - 1) / shards;
    for (int64_t shard = 0; shard < shards; ++shard) {
      char file[64];
      std::snprintf(file, sizeof(file), "%s-%05lld-of-%05lld.tfrecord", name,
                    static_cast<long long>(shard), static_cast<long long>(shards));
      const std::string path = (fs::path(o.output_dir) / file).string();
      TFRecordWriter writer(staged.add(path));
      for (int64_t i = shard * per_shard; i < std::min(count, (shard + 1) * per_shard); ++i) {
        char id[64];
        std::snprintf(id, sizeof(id), "%s-%06lld", name, static_cast<long long>(i));
        const ImageRecord record = make_image(o, id, Rng(image_seed(o.seed, split, i)));
        writer.write(record.example);
        summary.boxes += record.boxes;
        summary.cut_by_border += record.cut;
        summary.hidden_shapes += record.hidden;
        progress.advance();
      }
      writer.close();
      summary.files.push_back(path);
    }
  };
  write_split(0, "train", summary.train_images, o.num_shards);
  const int64_t val_shards =
      (o.num_shards * summary.val_images + summary.train_images - 1) / summary.train_images;
  write_split(1, "val", summary.val_images, val_shards);
  progress.finish();

  const std::string label_map = (fs::path(o.output_dir) / "label_map.pbtxt").string();
  {
    std::ofstream out(staged.add(label_map));
    for (std::size_t i = 0; i < kSynthShapeClasses.size(); ++i) {
      std::string display = kSynthShapeClasses[i];
      display[0] = static_cast<char>(display[0] - 'a' + 'A');
      out << "item {\n  id: " << i + 1 << "\n  name: '" << kSynthShapeClasses[i]
          << "'\n  display_name: '" << display << "'\n}\n";
    }
    out.close();
    if (!out) throw Error("synth-shapes: cannot write " + label_map);
  }
  summary.files.push_back(label_map);
  staged.commit();
  return summary;
}

}  // namespace trainyard::app
