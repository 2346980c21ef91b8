// Anchor generators of the Object Detection API (core/anchor_generator.py and
// anchor_generators/): GridAnchorGenerator (Faster R-CNN's first stage),
// MultipleGridAnchorGenerator with create_ssd_anchors (SSD's default boxes) and
// MultiscaleGridAnchorGenerator (FPN / RetinaNet levels).
//
// generate() returns the anchors of every feature map concatenated into one [A, 4] float array of
// [ymin, xmin, ymax, xmax] boxes, in the API's order: feature map by feature map, within one map
// row (y) by row, then column (x), then the box specs of a location (fastest). The anchors of
// layer k are the num_anchors_per_location()[k] * height_k * width_k rows after those of the
// layers before it. Anchors are not clipped (create_ssd_anchors sets no clip window).
//
// Errors: a feature map list of another length than num_anchors_per_location(), a non-positive
// grid size, strides or offsets of another length than the layers, or options the API rejects
// throw InvalidArgument naming the option and its value.
#ifndef TRAINYARD_PKG_DETECTION_ANCHOR_GENERATOR_H_
#define TRAINYARD_PKG_DETECTION_ANCHOR_GENERATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace trainyard::detection {

// The spatial size of one feature map, (height, width).
struct FeatureMapShape {
  int64_t height = 0;
  int64_t width = 0;
};

class AnchorGenerator {
 public:
  virtual ~AnchorGenerator() = default;

  // The number of anchors at each location of each feature map, one entry per feature map that
  // generate() expects (the box predictor's number of box codes per location).
  virtual std::vector<int64_t> num_anchors_per_location() const = 0;

  // The anchors [A, 4] for these feature maps (see the file comment for the order). im_height
  // and im_width are the input image's size: both 1 (the default) means "no image size", which
  // the SSD and grid generators accept (SSD anchors are then normalized to the unit square,
  // grid anchors are in the units of base_anchor_size); a square image gives the same SSD
  // anchors as 1 x 1, a non-square one keeps SSD's base anchors square in pixels.
  virtual std::vector<float> generate(std::span<const FeatureMapShape> feature_map_shapes,
                                      int64_t im_height = 1, int64_t im_width = 1) const = 0;

  // The number of anchors generate() returns for these feature maps.
  int64_t num_anchors(std::span<const FeatureMapShape> feature_map_shapes) const;
};

// One anchor shape of a location: its scale (relative to base_anchor_size) and aspect ratio
// (width / height): height = scale / sqrt(ar) * base_h, width = scale * sqrt(ar) * base_w.
struct BoxSpec {
  double scale = 1.0;
  double aspect_ratio = 1.0;
};

// tile_anchors of grid_anchor_generator.py: the box specs placed at every point of a
// grid_height x grid_width grid with centers y = i * stride[0] + offset[0], x = j * stride[1] +
// offset[1]. Appends [grid_height * grid_width * specs.size(), 4] boxes to `out`.
void tile_anchors(int64_t grid_height, int64_t grid_width, std::span<const BoxSpec> specs,
                  const std::array<double, 2>& base_anchor_size,
                  const std::array<double, 2>& anchor_stride,
                  const std::array<double, 2>& anchor_offset, std::vector<float>& out);

// GridAnchorGenerator: one feature map; every (scale, aspect ratio) pair at each location,
// aspect ratio outer and scale inner (the API's meshgrid order). Defaults as the API's and
// grid_anchor_generator.proto: base 256 x 256, stride 16, offset 0.
struct GridAnchorGeneratorOptions {
  std::vector<double> scales = {0.5, 1.0, 2.0};
  std::vector<double> aspect_ratios = {0.5, 1.0, 2.0};
  std::array<double, 2> base_anchor_size = {256.0, 256.0};  // height, width
  std::array<double, 2> anchor_stride = {16.0, 16.0};
  std::array<double, 2> anchor_offset = {0.0, 0.0};
};

class GridAnchorGenerator final : public AnchorGenerator {
 public:
  explicit GridAnchorGenerator(GridAnchorGeneratorOptions options = {});
  std::vector<int64_t> num_anchors_per_location() const override;
  // Exactly one feature map; im_height and im_width are not used (absolute coordinates).
  std::vector<float> generate(std::span<const FeatureMapShape> feature_map_shapes,
                              int64_t im_height = 1, int64_t im_width = 1) const override;
  const GridAnchorGeneratorOptions& options() const { return options_; }

 private:
  GridAnchorGeneratorOptions options_;
  std::vector<BoxSpec> specs_;
};

// MultipleGridAnchorGenerator: one list of box specs per feature map. Strides and offsets are
// in pixels (divided by the image size at generation); empty means stride 1 / map size and
// offset half a stride, in normalized coordinates.
class MultipleGridAnchorGenerator final : public AnchorGenerator {
 public:
  MultipleGridAnchorGenerator(std::vector<std::vector<BoxSpec>> box_specs_list,
                              std::array<double, 2> base_anchor_size = {1.0, 1.0},
                              std::vector<std::array<double, 2>> anchor_strides = {},
                              std::vector<std::array<double, 2>> anchor_offsets = {});
  std::vector<int64_t> num_anchors_per_location() const override;
  std::vector<float> generate(std::span<const FeatureMapShape> feature_map_shapes,
                              int64_t im_height = 1, int64_t im_width = 1) const override;
  const std::vector<std::vector<BoxSpec>>& box_specs() const { return box_specs_; }

 private:
  std::vector<std::vector<BoxSpec>> box_specs_;
  std::array<double, 2> base_anchor_size_;
  std::vector<std::array<double, 2>> anchor_strides_;
  std::vector<std::array<double, 2>> anchor_offsets_;
};

// create_ssd_anchors' arguments (ssd_anchor_generator.proto's fields). Scales are linear from
// min_scale to max_scale over num_layers unless `scales` is given; layer 0 gets (0.1, 1.0),
// (s0, 2.0), (s0, 0.5) when reduce_boxes_in_lowest_layer; every other layer gets each aspect
// ratio at its scale plus, when interpolated_scale_aspect_ratio > 0, one box of that aspect
// ratio at sqrt(s_k * s_{k+1}) (s_{num_layers} = 1). The default aspect ratios are
// create_ssd_anchors' (the sample configs list 1.0, 2.0, 0.5, 3.0, 0.3333).
struct SsdAnchorGeneratorOptions {
  int64_t num_layers = 6;
  double min_scale = 0.2;
  double max_scale = 0.95;
  std::vector<double> scales;  // explicit scales, one per layer; overrides min/max when given
  std::vector<double> aspect_ratios = {1.0, 2.0, 3.0, 1.0 / 2, 1.0 / 3};
  double interpolated_scale_aspect_ratio = 1.0;
  std::array<double, 2> base_anchor_size = {1.0, 1.0};  // height, width
  std::vector<std::array<double, 2>> anchor_strides;    // (y, x) pixels per layer, or empty
  std::vector<std::array<double, 2>> anchor_offsets;    // (y, x) pixels per layer, or empty
  bool reduce_boxes_in_lowest_layer = true;
};

// multiple_grid_anchor_generator.create_ssd_anchors.
MultipleGridAnchorGenerator create_ssd_anchors(const SsdAnchorGeneratorOptions& options = {});

// The box specs per layer create_ssd_anchors uses (what the box predictor needs:
// num_anchors_per_location is their sizes).
std::vector<std::vector<BoxSpec>> ssd_box_specs(const SsdAnchorGeneratorOptions& options);
std::vector<int64_t> ssd_num_anchors_per_location(const SsdAnchorGeneratorOptions& options);

// MultiscaleGridAnchorGenerator: levels min_level..max_level, level l with stride 2^l and base
// anchor size anchor_scale * 2^l, scales 2^(i / scales_per_octave) for i < scales_per_octave and
// every aspect ratio at each location (aspect ratio outer, scale inner). The offset of a level is
// half its stride along a dimension the image size divides by 2^l, else 0. With
// normalize_coordinates the anchors are divided by the image size, which generate() then needs
// (not 1 x 1). multiscale_anchor_generator.proto's defaults.
struct MultiscaleAnchorGeneratorOptions {
  int64_t min_level = 3;
  int64_t max_level = 7;
  double anchor_scale = 4.0;
  std::vector<double> aspect_ratios = {1.0, 2.0, 0.5};
  int64_t scales_per_octave = 2;
  bool normalize_coordinates = true;
};

class MultiscaleGridAnchorGenerator final : public AnchorGenerator {
 public:
  explicit MultiscaleGridAnchorGenerator(MultiscaleAnchorGeneratorOptions options = {});
  std::vector<int64_t> num_anchors_per_location() const override;
  std::vector<float> generate(std::span<const FeatureMapShape> feature_map_shapes,
                              int64_t im_height = 1, int64_t im_width = 1) const override;
  // generate() for the feature maps of a SAME-padded pyramid on an image of this size: level l
  // is ceil(height / 2^l) x ceil(width / 2^l).
  std::vector<float> generate_for_image(int64_t im_height, int64_t im_width) const;
  std::vector<FeatureMapShape> feature_map_shapes(int64_t im_height, int64_t im_width) const;
  const MultiscaleAnchorGeneratorOptions& options() const { return options_; }

 private:
  MultiscaleAnchorGeneratorOptions options_;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_ANCHOR_GENERATOR_H_
