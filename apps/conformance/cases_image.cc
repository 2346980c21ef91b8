// Op cases of the image family (op_cases.h; the ops are declared in core/src/engine/ops/image.cc):
// crop_and_resize, bilinear and nearest, and its gradient with respect to the image.
#include <string>
#include <vector>

#include "op_cases.h"
#include "trainyard/ops.h"

namespace trainyard::conformance {

namespace {

// Boxes (y1, x1, y2, x2) of every kind: inside, flipped in both axes, partly outside the image
// (extrapolation), small, a single point, and outside on the left. No sample lands within
// rounding of a pixel edge, a half pixel (nearest) or the image's border, where f32 and the
// reference's f64 coordinates could round to different pixels.
const std::vector<double> kBoxes = {0.11,  0.21,  0.83, 0.93,  //
                                    0.91,  0.71,  0.13, 0.07,  //
                                    -0.31, 0.41,  0.63, 1.27,  //
                                    0.33,  0.27,  0.61, 0.52,  //
                                    0.47,  0.57,  0.47, 0.57,  //
                                    0.21,  -0.13, 1.09, 0.31};
const std::vector<double> kBoxInd = {1, 0, 1, 0, 1, 0};

}  // namespace

void add_image_cases(std::vector<OpCase>& c) {
  using namespace ops;
  struct Crop {
    const char* name;
    DType dtype;
    int64_t height, width;
    CropMethod method;
    double extrapolation_value;
  };
  for (const Crop& k :
       {Crop{"crop_and_resize_bilinear", DType::kF32, 3, 4, CropMethod::kBilinear, 0.25},
        Crop{"crop_and_resize_nearest", DType::kF32, 4, 3, CropMethod::kNearest, 0.0},
        Crop{"crop_and_resize_1x1_f64", DType::kF64, 1, 1, CropMethod::kBilinear, -1.0}}) {
    c.push_back({"crop_and_resize",
                 k.name,
                 {of(k.dtype, Shape{2, 5, 6, 3}), fixed(Shape{6, 4}, k.dtype, kBoxes),
                  fixed(Shape{6}, DType::kI32, kBoxInd)},
                 [k](Backend&, const Inputs& x) {
                   return Outputs{crop_and_resize(x[0], x[1], x[2], {k.height, k.width}, k.method,
                                                  k.extrapolation_value)};
                 },
                 kElementwise,
                 true});
  }
  // The gradient kernel alone, on an output gradient of its own.
  for (bool nearest : {false, true}) {
    CropAndResizeAttrs attrs;
    attrs.crop_height = 3;
    attrs.crop_width = 4;
    attrs.nearest = nearest;
    attrs.image_shape = {2, 5, 6, 3};
    c.push_back({"crop_and_resize_grad_image",
                 nearest ? "crop_and_resize_grad_image_nearest" : "crop_and_resize_grad_image",
                 {f32(Shape{6, 3, 4, 3}), fixed(Shape{6, 4}, DType::kF32, kBoxes),
                  fixed(Shape{6}, DType::kI32, kBoxInd)},
                 [attrs](Backend& b, const Inputs& x) {
                   return call_kernel(b, "crop_and_resize_grad_image", x,
                                      {{Shape{2, 5, 6, 3}, DType::kF32}}, &attrs);
                 },
                 kAccumulating});
  }
}

}  // namespace trainyard::conformance
