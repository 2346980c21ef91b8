#include "trainyard/pkg/detection/anchor_generator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::detection {

namespace {

void check_feature_maps(const char* generator, std::span<const FeatureMapShape> shapes,
                        std::size_t expected) {
  if (shapes.size() != expected) {
    throw InvalidArgument(std::string(generator) + ": " + std::to_string(shapes.size()) +
                          " feature maps given but the generator has " + std::to_string(expected) +
                          " layers");
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].height <= 0 || shapes[i].width <= 0) {
      throw InvalidArgument(std::string(generator) + ": feature map " + std::to_string(i) + " is " +
                            std::to_string(shapes[i].height) + " x " +
                            std::to_string(shapes[i].width) + "; sizes must be positive");
    }
  }
}

void check_image_size(const char* generator, int64_t im_height, int64_t im_width) {
  if (im_height <= 0 || im_width <= 0) {
    throw InvalidArgument(std::string(generator) + ": image size " + std::to_string(im_height) +
                          " x " + std::to_string(im_width) + " is not positive");
  }
}

}  // namespace

int64_t AnchorGenerator::num_anchors(std::span<const FeatureMapShape> feature_map_shapes) const {
  const std::vector<int64_t> per_location = num_anchors_per_location();
  int64_t total = 0;
  for (std::size_t i = 0; i < feature_map_shapes.size() && i < per_location.size(); ++i) {
    total += per_location[i] * feature_map_shapes[i].height * feature_map_shapes[i].width;
  }
  return total;
}

void tile_anchors(int64_t grid_height, int64_t grid_width, std::span<const BoxSpec> specs,
                  const std::array<double, 2>& base_anchor_size,
                  const std::array<double, 2>& anchor_stride,
                  const std::array<double, 2>& anchor_offset, std::vector<float>& out) {
  std::vector<double> heights(specs.size()), widths(specs.size());
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const double ratio_sqrt = std::sqrt(specs[k].aspect_ratio);
    heights[k] = specs[k].scale / ratio_sqrt * base_anchor_size[0];
    widths[k] = specs[k].scale * ratio_sqrt * base_anchor_size[1];
  }
  out.reserve(out.size() + static_cast<std::size_t>(grid_height * grid_width) * specs.size() * 4);
  for (int64_t i = 0; i < grid_height; ++i) {
    const double yc = static_cast<double>(i) * anchor_stride[0] + anchor_offset[0];
    for (int64_t j = 0; j < grid_width; ++j) {
      const double xc = static_cast<double>(j) * anchor_stride[1] + anchor_offset[1];
      for (std::size_t k = 0; k < specs.size(); ++k) {
        out.push_back(static_cast<float>(yc - 0.5 * heights[k]));
        out.push_back(static_cast<float>(xc - 0.5 * widths[k]));
        out.push_back(static_cast<float>(yc + 0.5 * heights[k]));
        out.push_back(static_cast<float>(xc + 0.5 * widths[k]));
      }
    }
  }
}

// ---- GridAnchorGenerator ----

GridAnchorGenerator::GridAnchorGenerator(GridAnchorGeneratorOptions options)
    : options_(std::move(options)) {
  // The API's meshgrid(scales, aspect_ratios): aspect ratio outer, scale inner.
  for (double ar : options_.aspect_ratios) {
    for (double s : options_.scales) specs_.push_back({s, ar});
  }
}

std::vector<int64_t> GridAnchorGenerator::num_anchors_per_location() const {
  return {static_cast<int64_t>(specs_.size())};
}

std::vector<float> GridAnchorGenerator::generate(
    std::span<const FeatureMapShape> feature_map_shapes, int64_t, int64_t) const {
  check_feature_maps("GridAnchorGenerator", feature_map_shapes, 1);
  std::vector<float> out;
  tile_anchors(feature_map_shapes[0].height, feature_map_shapes[0].width, specs_,
               options_.base_anchor_size, options_.anchor_stride, options_.anchor_offset, out);
  return out;
}

// ---- MultipleGridAnchorGenerator ----

MultipleGridAnchorGenerator::MultipleGridAnchorGenerator(
    std::vector<std::vector<BoxSpec>> box_specs_list, std::array<double, 2> base_anchor_size,
    std::vector<std::array<double, 2>> anchor_strides,
    std::vector<std::array<double, 2>> anchor_offsets)
    : box_specs_(std::move(box_specs_list)),
      base_anchor_size_(base_anchor_size),
      anchor_strides_(std::move(anchor_strides)),
      anchor_offsets_(std::move(anchor_offsets)) {
  if (!anchor_strides_.empty() && anchor_strides_.size() != box_specs_.size()) {
    throw InvalidArgument("MultipleGridAnchorGenerator: anchor_strides has " +
                          std::to_string(anchor_strides_.size()) + " entries for " +
                          std::to_string(box_specs_.size()) + " layers");
  }
  if (!anchor_offsets_.empty() && anchor_offsets_.size() != box_specs_.size()) {
    throw InvalidArgument("MultipleGridAnchorGenerator: anchor_offsets has " +
                          std::to_string(anchor_offsets_.size()) + " entries for " +
                          std::to_string(box_specs_.size()) + " layers");
  }
}

std::vector<int64_t> MultipleGridAnchorGenerator::num_anchors_per_location() const {
  std::vector<int64_t> out;
  for (const auto& specs : box_specs_) out.push_back(static_cast<int64_t>(specs.size()));
  return out;
}

std::vector<float> MultipleGridAnchorGenerator::generate(
    std::span<const FeatureMapShape> feature_map_shapes, int64_t im_height,
    int64_t im_width) const {
  check_feature_maps("MultipleGridAnchorGenerator", feature_map_shapes, box_specs_.size());
  check_image_size("MultipleGridAnchorGenerator", im_height, im_width);
  const double h = static_cast<double>(im_height), w = static_cast<double>(im_width);
  const double min_dim = std::min(h, w);
  // The base anchor is relative to the smaller image side, so square stays square in pixels.
  const std::array<double, 2> base = {min_dim / h * base_anchor_size_[0],
                                      min_dim / w * base_anchor_size_[1]};
  std::vector<float> out;
  for (std::size_t layer = 0; layer < box_specs_.size(); ++layer) {
    const FeatureMapShape& fm = feature_map_shapes[layer];
    std::array<double, 2> stride, offset;
    if (anchor_strides_.empty()) {
      stride = {1.0 / static_cast<double>(fm.height), 1.0 / static_cast<double>(fm.width)};
    } else {
      stride = {anchor_strides_[layer][0] / h, anchor_strides_[layer][1] / w};
    }
    if (anchor_offsets_.empty()) {
      offset = {0.5 * stride[0], 0.5 * stride[1]};
    } else {
      offset = {anchor_offsets_[layer][0] / h, anchor_offsets_[layer][1] / w};
    }
    tile_anchors(fm.height, fm.width, box_specs_[layer], base, stride, offset, out);
  }
  return out;
}

std::vector<std::vector<BoxSpec>> ssd_box_specs(const SsdAnchorGeneratorOptions& options) {
  if (options.num_layers <= 0) {
    throw InvalidArgument("create_ssd_anchors: num_layers " + std::to_string(options.num_layers) +
                          " is not positive");
  }
  std::vector<double> scales = options.scales;
  if (scales.empty()) {
    for (int64_t i = 0; i < options.num_layers; ++i) {
      // num_layers 1 divides by zero in the API; its one layer gets min_scale here.
      const double t = options.num_layers > 1
                           ? static_cast<double>(i) / static_cast<double>(options.num_layers - 1)
                           : 0.0;
      scales.push_back(options.min_scale + (options.max_scale - options.min_scale) * t);
    }
  } else if (static_cast<int64_t>(scales.size()) < options.num_layers) {
    throw InvalidArgument("create_ssd_anchors: " + std::to_string(scales.size()) + " scales for " +
                          std::to_string(options.num_layers) + " layers");
  }
  scales.resize(static_cast<std::size_t>(options.num_layers));
  scales.push_back(1.0);  // only the next scale of the last layer
  std::vector<std::vector<BoxSpec>> specs;
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    const double scale = scales[layer], scale_next = scales[layer + 1];
    std::vector<BoxSpec> layer_specs;
    if (layer == 0 && options.reduce_boxes_in_lowest_layer) {
      layer_specs = {{0.1, 1.0}, {scale, 2.0}, {scale, 0.5}};
    } else {
      for (double ar : options.aspect_ratios) layer_specs.push_back({scale, ar});
      if (options.interpolated_scale_aspect_ratio > 0.0) {
        layer_specs.push_back(
            {std::sqrt(scale * scale_next), options.interpolated_scale_aspect_ratio});
      }
    }
    specs.push_back(std::move(layer_specs));
  }
  return specs;
}

std::vector<int64_t> ssd_num_anchors_per_location(const SsdAnchorGeneratorOptions& options) {
  std::vector<int64_t> out;
  for (const auto& specs : ssd_box_specs(options))
    out.push_back(static_cast<int64_t>(specs.size()));
  return out;
}

MultipleGridAnchorGenerator create_ssd_anchors(const SsdAnchorGeneratorOptions& options) {
  return MultipleGridAnchorGenerator(ssd_box_specs(options), options.base_anchor_size,
                                     options.anchor_strides, options.anchor_offsets);
}

// ---- MultiscaleGridAnchorGenerator ----

MultiscaleGridAnchorGenerator::MultiscaleGridAnchorGenerator(
    MultiscaleAnchorGeneratorOptions options)
    : options_(std::move(options)) {
  if (options_.min_level > options_.max_level || options_.min_level < 0) {
    throw InvalidArgument("MultiscaleGridAnchorGenerator: levels " +
                          std::to_string(options_.min_level) + ".." +
                          std::to_string(options_.max_level) + " are not a valid range");
  }
  if (options_.scales_per_octave <= 0) {
    throw InvalidArgument("MultiscaleGridAnchorGenerator: scales_per_octave " +
                          std::to_string(options_.scales_per_octave) + " is not positive");
  }
}

std::vector<int64_t> MultiscaleGridAnchorGenerator::num_anchors_per_location() const {
  const int64_t levels = options_.max_level - options_.min_level + 1;
  return std::vector<int64_t>(
      static_cast<std::size_t>(levels),
      static_cast<int64_t>(options_.aspect_ratios.size()) * options_.scales_per_octave);
}

std::vector<float> MultiscaleGridAnchorGenerator::generate(
    std::span<const FeatureMapShape> feature_map_shapes, int64_t im_height,
    int64_t im_width) const {
  check_feature_maps("MultiscaleGridAnchorGenerator", feature_map_shapes,
                     static_cast<std::size_t>(options_.max_level - options_.min_level + 1));
  check_image_size("MultiscaleGridAnchorGenerator", im_height, im_width);
  if (options_.normalize_coordinates && (im_height == 1 || im_width == 1)) {
    throw InvalidArgument(
        "MultiscaleGridAnchorGenerator: normalize_coordinates needs the image size, but "
        "generate() was given " +
        std::to_string(im_height) + " x " + std::to_string(im_width));
  }
  std::vector<BoxSpec> specs;
  for (double ar : options_.aspect_ratios) {
    for (int64_t i = 0; i < options_.scales_per_octave; ++i) {
      specs.push_back(
          {std::pow(2.0, static_cast<double>(i) / static_cast<double>(options_.scales_per_octave)),
           ar});
    }
  }
  std::vector<float> out;
  for (int64_t level = options_.min_level; level <= options_.max_level; ++level) {
    const FeatureMapShape& fm = feature_map_shapes[level - options_.min_level];
    const double stride = std::ldexp(1.0, static_cast<int>(level));
    const int64_t istride = int64_t{1} << level;
    const std::array<double, 2> offset = {
        (im_height % istride == 0 || im_height == 1) ? stride / 2.0 : 0.0,
        (im_width % istride == 0 || im_width == 1) ? stride / 2.0 : 0.0};
    const double base = stride * options_.anchor_scale;
    const std::size_t begin = out.size();
    tile_anchors(fm.height, fm.width, specs, {base, base}, {stride, stride}, offset, out);
    if (options_.normalize_coordinates) {
      const float y_scale = 1.0f / static_cast<float>(im_height);
      const float x_scale = 1.0f / static_cast<float>(im_width);
      for (std::size_t i = begin; i < out.size(); i += 4) {
        out[i] *= y_scale;
        out[i + 1] *= x_scale;
        out[i + 2] *= y_scale;
        out[i + 3] *= x_scale;
      }
    }
  }
  return out;
}

std::vector<FeatureMapShape> MultiscaleGridAnchorGenerator::feature_map_shapes(
    int64_t im_height, int64_t im_width) const {
  check_image_size("MultiscaleGridAnchorGenerator", im_height, im_width);
  std::vector<FeatureMapShape> shapes;
  for (int64_t level = options_.min_level; level <= options_.max_level; ++level) {
    const int64_t s = int64_t{1} << level;
    shapes.push_back({(im_height + s - 1) / s, (im_width + s - 1) / s});
  }
  return shapes;
}

std::vector<float> MultiscaleGridAnchorGenerator::generate_for_image(int64_t im_height,
                                                                     int64_t im_width) const {
  const std::vector<FeatureMapShape> shapes = feature_map_shapes(im_height, im_width);
  return generate(shapes, im_height, im_width);
}

}  // namespace trainyard::detection
