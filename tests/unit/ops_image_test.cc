// The image ops (ops/image.h) on every test backend: crop_and_resize against values worked out
// by hand (flipped boxes, samples outside the image, one-sample crops, nearest), its gradient
// with respect to the image by hand and by central differences, and both against TensorFlow's
// own output on the golden inputs of tests/golden/make_crop_and_resize_golden.py;
// position_sensitive_crop_regions by hand, its errors, and it and its image gradient against the
// Object Detection API's own function under TensorFlow on the golden inputs of
// tests/golden/make_position_sensitive_crop_regions_golden.py. ops_test_util.h has what the
// ops_<family>_test.cc files share.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "reference_ops.h"
#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/ops.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using namespace test;  // NOLINT(build/namespaces): ops_test_util.h's helpers

TRAINYARD_BACKEND_SUITE(CropAndResizeTest);

// Two 3 x 4 one-channel images: image 0 holds 10 y + x^2, image 1 the same plus 100. Bilinear
// interpolation is exact on 10 y but not on x^2, so a sample at column 1.5 reads 2.5 (not 2.25).
Array two_images() {
  Array a = ref::filled({2, 3, 4, 1}, 0.0);
  for (int n = 0; n < 2; ++n) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 4; ++x) a.values[(n * 3 + y) * 4 + x] = 100.0 * n + 10.0 * y + x * x;
    }
  }
  return a;
}

Array boxes_of(std::vector<double> values) {
  const auto n = static_cast<int64_t>(values.size() / 4);
  return {{n, 4}, std::move(values)};
}

Array indices(std::vector<double> values) {
  const auto n = static_cast<int64_t>(values.size());
  return {{n}, std::move(values)};
}

TEST_P(CropAndResizeTest, BilinearSamplesTensorFlowsGrid) {
  // Crop rows sample y1 (H - 1) + y (y2 - y1) (H - 1) / (crop_h - 1), columns likewise.
  const Array boxes = boxes_of({
      0.25, 0.5, 0.75, 0.0,  // rows 0.5, 1.5; columns 1.5, 0.75, 0 (flipped)
      0.75, 0.0, 0.25, 1.0,  // rows 1.5, 0.5 (flipped); columns 0, 1.5, 3; image 1
      -0.5, -1.0, 0.5, 0.5,  // rows -1 (outside), 1; columns -3, -0.75 (outside), 1.5
      0.0, 1.0, 1.0, 0.0,    // rows 0, 2; columns 3, 1.5, 0; image 1
  });
  const Array expected = {{4, 2, 3, 1}, {7.5,   5.75,  5.0,   17.5,  15.75, 15.0,   //
                                         115.0, 117.5, 124.0, 105.0, 107.5, 114.0,  //
                                         -1.0,  -1.0,  -1.0,  -1.0,  -1.0,  12.5,   //
                                         109.0, 102.5, 100.0, 129.0, 122.5, 120.0}};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_TRUE(MatchesResultOf(
        [&] {
          return ops::crop_and_resize(tensor(two_images(), dtype), tensor(boxes, dtype),
                                      tensor(indices({0, 1, 0, 1}), DType::kI32), {2, 3},
                                      CropMethod::kBilinear, -1.0);
        },
        dtype, expected, kExact));
  }
}

TEST_P(CropAndResizeTest, OneSampleReadsTheBoxCenter) {
  // crop size 1: the sample is at (y1 + y2) (H - 1) / 2, (x1 + x2) (W - 1) / 2.
  const Array boxes = boxes_of({
      0.0, 0.0, 1.0, 1.0,  // (1, 1.5)
      1.0, 1.0, 0.0, 0.0,  // the same center, flipped, in image 1
      0.5, 0.9, 1.5, 1.9,  // column 4.2: outside
  });
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::crop_and_resize(tensor(two_images()), tensor(boxes),
                                    tensor(indices({0, 1, 0}), DType::kI32), {1, 1},
                                    CropMethod::kBilinear, 7.0);
      },
      DType::kF32, Array{{3, 1, 1, 1}, {12.5, 112.5, 7.0}}, kExact));
}

TEST_P(CropAndResizeTest, NearestRoundsHalfwaySamplesUp) {
  // Rows 0.5, 1.5 -> 1, 2; columns 1.5, 0.75, 0 -> 2, 1, 0.
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::crop_and_resize(tensor(two_images()), tensor(boxes_of({0.25, 0.5, 0.75, 0.0})),
                                    tensor(indices({0}), DType::kI32), {2, 3},
                                    CropMethod::kNearest);
      },
      DType::kF32, Array{{1, 2, 3, 1}, {14, 11, 10, 24, 21, 20}}, kExact));
}

TEST_P(CropAndResizeTest, NoBoxesGiveAnEmptyCropAndAZeroGradient) {
  Tensor image = tensor(two_images());
  image.set_requires_grad(true);
  Tensor crops = ops::crop_and_resize(image, tensor(Array{{0, 4}, {}}),
                                      tensor(Array{{0}, {}}, DType::kI32), {2, 2});
  EXPECT_EQ(crops.shape(), (Shape{0, 2, 2, 1}));
  const std::vector<Tensor> g = gradients(ops::reduce_sum(crops), std::vector<Tensor>{image});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(Matches(g[0], DType::kF32, ref::filled({2, 3, 4, 1}, 0), kExact));
}

// d crops / d image, as the gradient op computes it for output gradient `dcrops`.
Tensor image_gradient(Backend& backend, const Array& image, const Array& boxes,
                      const Array& box_ind, std::pair<int64_t, int64_t> size, CropMethod method,
                      const Array& dcrops) {
  Tensor x = to_device(backend, image, DType::kF32);
  x.set_requires_grad(true);
  Tensor crops = ops::crop_and_resize(x, to_device(backend, boxes, DType::kF32),
                                      to_device(backend, box_ind, DType::kI32), size, method);
  Tensor loss = ops::reduce_sum(ops::mul(crops, to_device(backend, dcrops, DType::kF32)));
  return gradients(loss, std::vector<Tensor>{x}).at(0);
}

TEST_P(CropAndResizeTest, GradientGoesToTheFourPixelsWithTheirWeights) {
  // Box (0.25, 0.5, 0.75, 0) on one image: sample (0, 0) at (0.5, 1.5) with gradient 1, sample
  // (1, 1) at (1.5, 0.75) with gradient 2.
  Array image = two_images();
  image.shape[0] = 1;
  image.values.resize(12);
  const Array boxes = boxes_of({0.25, 0.5, 0.75, 0.0});
  const Array dcrops = {{1, 2, 3, 1}, {1, 0, 0, 0, 2, 0}};
  EXPECT_TRUE(Matches(
      image_gradient(backend(), image, boxes, indices({0}), {2, 3}, CropMethod::kBilinear, dcrops),
      DType::kF32,
      Array{{1, 3, 4, 1},
            {0, 0.25, 0.25, 0,    //
             0.25, 1.0, 0.25, 0,  //
             0.25, 0.75, 0, 0}},
      kExact));
  // Nearest: all of it to the pixel read, (1, 2) and (2, 1).
  EXPECT_TRUE(Matches(
      image_gradient(backend(), image, boxes, indices({0}), {2, 3}, CropMethod::kNearest, dcrops),
      DType::kF32, Array{{1, 3, 4, 1}, {0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0}}, kExact));
}

TEST_P(CropAndResizeTest, SamplesOutsideTheImageGetNoGradient) {
  // Of box (-0.5, -1, 0.5, 0.5)'s six samples only (1, 1.5) is inside the image.
  const Array boxes = boxes_of({-0.5, -1.0, 0.5, 0.5});
  const Array dcrops = ref::filled({1, 2, 3, 1}, 1.0);
  Array expected = ref::filled({2, 3, 4, 1}, 0.0);
  expected.values[1 * 4 + 1] = expected.values[1 * 4 + 2] = 0.5;
  EXPECT_TRUE(Matches(image_gradient(backend(), two_images(), boxes, indices({0}), {2, 3},
                                     CropMethod::kBilinear, dcrops),
                      DType::kF32, expected, kExact));
}

TEST_P(CropAndResizeTest, ImageGradientMatchesCentralDifferences) {
  Backend& b = backend();
  const Array image = random_array({2, 5, 6, 2}, -1, 1, 1500);
  const Tensor boxes = to_device(b,
                                 boxes_of({0.1, 0.2, 0.8, 0.9,    //
                                           0.9, 0.7, 0.15, 0.05,  //
                                           -0.3, 0.4, 0.6, 1.25,  //
                                           0.45, 0.55, 0.45, 0.55}),
                                 DType::kF64);
  const Tensor box_ind = tensor(indices({1, 0, 1, 0}), DType::kI32);
  for (CropMethod method : {CropMethod::kBilinear, CropMethod::kNearest}) {
    SCOPED_TRACE(method == CropMethod::kBilinear ? "bilinear" : "nearest");
    // The crop is linear in the image: central differences are exact up to rounding.
    const testing::GradCheckResult r = testing::check_gradients(
        [&](const std::vector<Tensor>& x) {
          return ops::crop_and_resize(x[0], boxes, box_ind, {3, 4}, method, 0.5);
        },
        {tensor(image, DType::kF64)});
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_GT(r.checked, 0u);
  }
}

TEST_P(CropAndResizeTest, BoxesAndBoxIndGetNoGradient) {
  Tensor image = tensor(two_images());
  Tensor boxes = tensor(boxes_of({0.1, 0.2, 0.7, 0.9}));
  image.set_requires_grad(true);
  boxes.set_requires_grad(true);
  Tensor crops = ops::crop_and_resize(image, boxes, tensor(indices({1}), DType::kI32), {2, 2});
  const std::vector<Tensor> g =
      gradients(ops::reduce_sum(crops), std::vector<Tensor>{image, boxes});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(g[0].defined());
  EXPECT_FALSE(g[1].defined()) << "the boxes got a gradient";
}

TEST_P(CropAndResizeTest, BoxIndOutsideTheBatchIsInvalidArgumentNamingTheBox) {
  const std::string message = invalid_argument_of([&] {
    Tensor crops = ops::crop_and_resize(tensor(two_images()),
                                        tensor(boxes_of({0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1})),
                                        tensor(indices({1, 5, 0}), DType::kI32), {2, 2});
    crops.to_vector<float>();  // an asynchronous backend reports at its synchronisation
  });
  EXPECT_TRUE(Mentions(message, {"crop_and_resize", "5"}));
  EXPECT_TRUE(message.find("box 1") != std::string::npos ||
              message.find("position 1") != std::string::npos)
      << message;
}

TEST_P(CropAndResizeTest, ShapesAndDtypesThatDoNotFitAreInvalidArgument) {
  const Tensor image = tensor(two_images());
  const Tensor boxes = tensor(boxes_of({0, 0, 1, 1}));
  const Tensor box_ind = tensor(indices({0}), DType::kI32);
  auto crop = [&](const Tensor& i, const Tensor& b, const Tensor& k,
                  std::pair<int64_t, int64_t> size) {
    return invalid_argument_of([&] { ops::crop_and_resize(i, b, k, size); });
  };
  EXPECT_TRUE(
      Mentions(crop(tensor(Array{{3, 4, 1}, std::vector<double>(12)}), boxes, box_ind, {2, 2}),
               {"crop_and_resize", "rank 4", "f32[3, 4, 1]"}));
  EXPECT_TRUE(Mentions(crop(image, tensor(Array{{1, 3}, {0, 0, 1}}), box_ind, {2, 2}),
                       {"crop_and_resize", "boxes", "[1, 3]"}));
  EXPECT_TRUE(Mentions(crop(image, tensor(boxes_of({0, 0, 1, 1}), DType::kF64), box_ind, {2, 2}),
                       {"crop_and_resize", "dtype", "f64"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, tensor(indices({0}), DType::kI64), {2, 2}),
                       {"crop_and_resize", "box_ind", "i64"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, tensor(indices({0, 0}), DType::kI32), {2, 2}),
                       {"crop_and_resize", "box_ind", "[2]"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, box_ind, {0, 2}), {"crop_and_resize", "crop_size"}));
  EXPECT_TRUE(Mentions(crop(tensor(Array{{1, 3, 4, 1}, std::vector<double>(12)}, DType::kI32),
                            boxes, box_ind, {2, 2}),
                       {"crop_and_resize", "float"}));
}

// ---- TensorFlow's output on the golden inputs ----

const std::string kGolden = std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/crop_and_resize/";

template <class T>
std::vector<double> golden(const std::string& name, std::size_t count,
                           const std::string& dir = kGolden) {
  std::ifstream in(dir + name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + dir + name);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  if (bytes.size() != count * sizeof(T)) {
    throw std::runtime_error(dir + name + ": " + std::to_string(bytes.size()) +
                             " bytes, expected " + std::to_string(count * sizeof(T)));
  }
  std::vector<T> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return {values.begin(), values.end()};
}

struct Golden {
  Array image{{2, 6, 7, 3}, golden<float>("image.f32", 252)};
  Array boxes{{8, 4}, golden<float>("boxes.f32", 32)};
  Array box_ind{{8}, golden<int32_t>("box_ind.i32", 8)};
  Array dcrops{{8, 4, 5, 3}, golden<float>("dcrops.f32", 480)};
};

// The same f32 operations as TensorFlow's kernel: equal up to the order of the gradient's sums.
constexpr Tolerance kTensorFlow{1e-5, 1e-5};

TEST_P(CropAndResizeTest, CropsEqualTensorFlows) {
  const Golden g;
  struct Case {
    const char* file;
    CropMethod method;
    int64_t height, width;
    double extrapolation_value;
  };
  for (const Case& c :
       {Case{"crops_bilinear_4x5.f32", CropMethod::kBilinear, 4, 5, 0.0},
        Case{"crops_nearest_4x5.f32", CropMethod::kNearest, 4, 5, 0.0},
        Case{"crops_bilinear_1x1.f32", CropMethod::kBilinear, 1, 1, 0.5},
        Case{"crops_bilinear_3x2_extrapolate.f32", CropMethod::kBilinear, 3, 2, -1.5}}) {
    SCOPED_TRACE(c.file);
    const Dims shape = {8, c.height, c.width, 3};
    const Array expected{shape, golden<float>(c.file, static_cast<std::size_t>(ref::count(shape)))};
    EXPECT_TRUE(MatchesResultOf(
        [&] {
          return ops::crop_and_resize(tensor(g.image), tensor(g.boxes),
                                      tensor(g.box_ind, DType::kI32), {c.height, c.width}, c.method,
                                      c.extrapolation_value);
        },
        DType::kF32, expected, kTensorFlow));
  }
}

TEST_P(CropAndResizeTest, ImageGradientEqualsTensorFlows) {
  const Golden g;
  for (auto [file, method] : {std::pair{"dimage_bilinear.f32", CropMethod::kBilinear},
                              std::pair{"dimage_nearest.f32", CropMethod::kNearest}}) {
    SCOPED_TRACE(file);
    const Array expected{g.image.shape, golden<float>(file, 252)};
    EXPECT_TRUE(
        Matches(image_gradient(backend(), g.image, g.boxes, g.box_ind, {4, 5}, method, g.dcrops),
                DType::kF32, expected, kTensorFlow));
  }
}

// ---- position_sensitive_crop_regions ----

TRAINYARD_BACKEND_SUITE(PositionSensitiveCropRegionsTest);

// One 3 x 5 image of 4 channels, channel k holding 100 k + 10 y + x: bilinear sampling is exact.
Array linear_channels() {
  Array a = ref::filled({1, 3, 5, 4}, 0.0);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int k = 0; k < 4; ++k) a.values[(y * 5 + x) * 4 + k] = 100.0 * k + 10.0 * y + x;
    }
  }
  return a;
}

TEST_P(PositionSensitiveCropRegionsTest, BinKReadsChannelBlockKAtItsPlace) {
  // Box (0, 0, 1, 1), 2 x 2 bins of one sample each: bin (i, j) samples its center, rows 0.5 and
  // 1.5, columns 1 and 3, from channel i 2 + j. The second box is flipped in both axes.
  const Array boxes = {{1, 2, 4}, {0, 0, 1, 1, 1, 1, 0, 0}};
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::position_sensitive_crop_regions(tensor(linear_channels()), tensor(boxes),
                                                    {2, 2}, {2, 2}, false);
      },
      DType::kF32, Array{{1, 2, 2, 2, 1}, {6, 108, 216, 318, 18, 116, 208, 306}}, kExact));
  // global_pool: the mean over the bins (and positions).
  EXPECT_TRUE(MatchesResultOf(
      [&] {
        return ops::position_sensitive_crop_regions(tensor(linear_channels()), tensor(boxes),
                                                    {2, 2}, {2, 2}, true);
      },
      DType::kF32, Array{{1, 2, 1, 1, 1}, {162, 162}}, kExact));
}

TEST_P(PositionSensitiveCropRegionsTest, BoxesGetNoGradient) {
  Tensor image = tensor(linear_channels());
  Tensor boxes = tensor(Array{{1, 1, 4}, {0.1, 0.2, 0.7, 0.9}});
  image.set_requires_grad(true);
  boxes.set_requires_grad(true);
  Tensor out = ops::position_sensitive_crop_regions(image, boxes, {4, 4}, {2, 2}, true);
  const std::vector<Tensor> g = gradients(ops::reduce_sum(out), std::vector<Tensor>{image, boxes});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(g[0].defined());
  EXPECT_FALSE(g[1].defined()) << "the boxes got a gradient";
}

TEST_P(PositionSensitiveCropRegionsTest, ArgumentsTheApiRefusesAreInvalidArgument) {
  const Tensor image = tensor(linear_channels());
  const Tensor boxes = tensor(Array{{1, 1, 4}, {0, 0, 1, 1}});
  auto crop = [&](const Tensor& i, const Tensor& b, std::pair<int64_t, int64_t> size,
                  std::pair<int64_t, int64_t> bins, bool global_pool) {
    return invalid_argument_of(
        [&] { ops::position_sensitive_crop_regions(i, b, size, bins, global_pool); });
  };
  const char* op = "position_sensitive_crop_regions";
  // The API's four ValueErrors.
  EXPECT_TRUE(
      Mentions(crop(image, boxes, {2, 2}, {0, 2}, true), {op, "num_spatial_bins", "0 x 2"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, {3, 2}, {2, 2}, true), {op, "crop_size", "3 x 2"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, {3, 3}, {3, 3}, true), {op, "depth", "9 bins"}));
  EXPECT_TRUE(Mentions(crop(image, boxes, {4, 2}, {2, 2}, false), {op, "square", "4 x 2"}));
  EXPECT_EQ(crop(image, boxes, {4, 2}, {2, 2}, true), "(no error)")
      << "global_pool takes oblong bins";
  // Shapes and dtypes.
  EXPECT_TRUE(Mentions(crop(image, tensor(Array{{1, 4}, {0, 0, 1, 1}}), {2, 2}, {2, 2}, true),
                       {op, "boxes", "[1, 4]"}));
  EXPECT_TRUE(
      Mentions(crop(image, tensor(Array{{2, 1, 4}, std::vector<double>(8)}), {2, 2}, {2, 2}, true),
               {op, "boxes", "[2, 1, 4]"}));
  EXPECT_TRUE(Mentions(
      crop(image, tensor(Array{{1, 1, 4}, {0, 0, 1, 1}}, DType::kF64), {2, 2}, {2, 2}, true),
      {op, "boxes", "f64"}));
  EXPECT_TRUE(
      Mentions(crop(tensor(Array{{3, 5, 4}, std::vector<double>(60)}), boxes, {2, 2}, {2, 2}, true),
               {op, "rank 4"}));
}

const std::string kPsGolden =
    std::string(TRAINYARD_SOURCE_DIR) + "/tests/golden/position_sensitive_crop_regions/";

// The output and the image gradient of each case of the golden script (its CASES), against the
// API's batch_position_sensitive_crop_regions under TensorFlow 2.21 and tf.gradients.
TEST_P(PositionSensitiveCropRegionsTest, OutputAndImageGradientEqualTheApis) {
  const Array image{{2, 7, 9, 36}, golden<float>("image.f32", 2 * 7 * 9 * 36, kPsGolden)};
  const Array boxes{{2, 5, 4}, golden<float>("boxes.f32", 40, kPsGolden)};
  struct Case {
    const char* name;
    int64_t crop_h, crop_w, bins_y, bins_x;
    bool global_pool;
  };
  for (const Case& c : {Case{"bins3x3_crop6x6_global", 6, 6, 3, 3, true},
                        Case{"bins3x3_crop6x6_assembled", 6, 6, 3, 3, false},
                        Case{"bins2x2_crop4x4_global", 4, 4, 2, 2, true},
                        Case{"bins2x2_crop4x4_assembled", 4, 4, 2, 2, false},
                        Case{"bins1x1_crop4x4_global", 4, 4, 1, 1, true},
                        Case{"bins1x1_crop4x4_assembled", 4, 4, 1, 1, false},
                        Case{"bins2x3_crop4x6_assembled", 4, 6, 2, 3, false},
                        Case{"bins3x1_crop6x4_global", 6, 4, 3, 1, true}}) {
    SCOPED_TRACE(c.name);
    const std::string name = c.name;
    const Dims shape = {2, 5, c.global_pool ? 1 : c.crop_h, c.global_pool ? 1 : c.crop_w,
                        36 / (c.bins_y * c.bins_x)};
    const auto count = static_cast<std::size_t>(ref::count(shape));
    const Array expected{shape, golden<float>(name + ".f32", count, kPsGolden)};
    const Array dout{shape, golden<float>(name + "_dout.f32", count, kPsGolden)};
    const Array dimage{image.shape,
                       golden<float>(name + "_dimage.f32", image.values.size(), kPsGolden)};
    Tensor x = to_device(backend(), image, DType::kF32);
    x.set_requires_grad(true);
    Tensor out = ops::position_sensitive_crop_regions(x, to_device(backend(), boxes, DType::kF32),
                                                      {c.crop_h, c.crop_w}, {c.bins_y, c.bins_x},
                                                      c.global_pool);
    EXPECT_TRUE(Matches(out, DType::kF32, expected, kTensorFlow));
    Tensor loss = ops::reduce_sum(ops::mul(out, to_device(backend(), dout, DType::kF32)));
    EXPECT_TRUE(
        Matches(gradients(loss, std::vector<Tensor>{x}).at(0), DType::kF32, dimage, kTensorFlow));
  }
}

TEST_P(PositionSensitiveCropRegionsTest, ImageGradientMatchesCentralDifferences) {
  Backend& b = backend();
  const Array image = random_array({2, 5, 6, 12}, -1, 1, 3838);
  const Tensor boxes = to_device(b,
                                 Array{{2, 2, 4},
                                       {0.1, 0.2, 0.8, 0.9, 0.9, 0.7, 0.15, 0.05,  //
                                        -0.3, 0.4, 0.6, 1.25, 0.45, 0.55, 0.47, 0.58}},
                                 DType::kF64);
  for (bool global_pool : {true, false}) {
    SCOPED_TRACE(global_pool ? "global_pool" : "assembled");
    const testing::GradCheckResult r = testing::check_gradients(
        [&](const std::vector<Tensor>& x) {
          return ops::position_sensitive_crop_regions(x[0], boxes, {4, 6}, {2, 3}, global_pool);
        },
        {tensor(image, DType::kF64)});
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_GT(r.checked, 0u);
  }
}

}  // namespace
}  // namespace trainyard
