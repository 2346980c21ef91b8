// pkg/detection's per-anchor losses on every test backend: values against goldens of the TF
// Object Detection API's core/losses.py (tests/fixtures/detection/make_goldens.py), shapes,
// errors, and gradients by central differences (smooth L1 across its kink-free regions, focal,
// the bootstrapped soft target, IoU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "pkg_detection_goldens.h"
#include "test_backends.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/pkg/detection/losses.h"
#include "trainyard/testing.h"

namespace trainyard {
namespace {

using test::Goldens;

class PkgDetectionLossesTest : public ::testing::TestWithParam<std::string> {
 protected:
  Backend& backend() const { return *test::backend(GetParam()); }

  Tensor golden(const Goldens& goldens, const std::string& name, DType dtype = DType::kF32) const {
    const test::GoldenTensor& g = goldens.get(name);
    Tensor t = Tensor::from_vector(backend(), Shape(g.shape), g.values);
    return dtype == DType::kF64 ? t : ops::cast(t, dtype);
  }
  Tensor values(const Shape& shape, const std::vector<double>& v) const {
    return Tensor::from_vector(backend(), shape, v);
  }
};

std::string backend_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Backends, PkgDetectionLossesTest,
                         ::testing::ValuesIn(test::backend_names()), backend_test_name);

void expect_matches(const Tensor& actual, const test::GoldenTensor& expected,
                    const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(actual.shape().to_vector(), expected.shape);
  const std::vector<double> got = ops::cast(actual, DType::kF64).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected.values[i], 2e-6 + 2e-5 * std::fabs(expected.values[i]))
        << "element " << i;
  }
}

TEST_P(PkgDetectionLossesTest, MatchTheApisLosses) {
  Goldens g("losses.txt");
  const Tensor loc_p = golden(g, "loc_prediction"), loc_t = golden(g, "loc_target");
  const Tensor loc_w = golden(g, "loc_weights");
  const Tensor box_p = golden(g, "box_prediction"), box_t = golden(g, "box_target");
  const Tensor logits = golden(g, "logits"), onehot = golden(g, "onehot");
  const Tensor cls_w = golden(g, "cls_weights");
  const Tensor cls_w3 = ops::reshape(cls_w, Shape{2, 6, 1});
  expect_matches(detection::WeightedL2LocalizationLoss()(loc_p, loc_t, loc_w), g.get("weighted_l2"),
                 "l2");
  expect_matches(detection::WeightedSmoothL1LocalizationLoss()(loc_p, loc_t, loc_w),
                 g.get("weighted_smooth_l1"), "smooth_l1");
  expect_matches(detection::WeightedSmoothL1LocalizationLoss(0.5)(loc_p, loc_t, loc_w),
                 g.get("weighted_smooth_l1_delta_0.5"), "smooth_l1 delta 0.5");
  expect_matches(detection::WeightedIOULocalizationLoss()(box_p, box_t, loc_w),
                 g.get("weighted_iou"), "iou");
  expect_matches(detection::WeightedSigmoidClassificationLoss()(logits, onehot, cls_w),
                 g.get("weighted_sigmoid"), "sigmoid, [B, A] weights");
  expect_matches(detection::WeightedSigmoidClassificationLoss()(logits, onehot, cls_w3),
                 g.get("weighted_sigmoid"), "sigmoid, [B, A, 1] weights");
  expect_matches(detection::SigmoidFocalClassificationLoss(2.0, 0.25)(logits, onehot, cls_w),
                 g.get("focal_2_0.25"), "focal");
  expect_matches(
      detection::SigmoidFocalClassificationLoss(1.5, std::nullopt)(logits, onehot, cls_w3),
      g.get("focal_1.5_none"), "focal without alpha");
  expect_matches(detection::WeightedSoftmaxClassificationLoss()(logits, onehot, cls_w3),
                 g.get("weighted_softmax"), "softmax");
  expect_matches(detection::WeightedSoftmaxClassificationLoss(2.0)(logits, onehot, cls_w),
                 g.get("weighted_softmax_scale_2"), "softmax logit_scale 2");
  expect_matches(
      detection::BootstrappedSigmoidClassificationLoss(0.3, "soft")(logits, onehot, cls_w3),
      g.get("bootstrapped_soft_0.3"), "bootstrapped soft");
  expect_matches(
      detection::BootstrappedSigmoidClassificationLoss(0.3, "hard")(logits, onehot, cls_w3),
      g.get("bootstrapped_hard_0.3"), "bootstrapped hard");
  // per_anchor sums the classes of the sigmoid losses and leaves softmax's [B, A] alone.
  const Tensor per_anchor =
      detection::WeightedSigmoidClassificationLoss().per_anchor(logits, onehot, cls_w);
  EXPECT_EQ(per_anchor.shape(), (Shape{2, 6}));
  EXPECT_EQ(
      detection::WeightedSoftmaxClassificationLoss().per_anchor(logits, onehot, cls_w).shape(),
      (Shape{2, 6}));
}

TEST_P(PkgDetectionLossesTest, HandComputedSmoothL1AndIou) {
  // Differences 0.5 (quadratic: 0.125) and 3 (linear: 2.5), weight 2.
  const Tensor p = values(Shape{1, 1, 2}, {0.5, 3.0});
  const Tensor t = values(Shape{1, 1, 2}, {0.0, 0.0});
  const Tensor w = values(Shape{1, 1}, {2.0});
  EXPECT_NEAR(detection::WeightedSmoothL1LocalizationLoss()(p, t, w).to_vector<double>()[0],
              2.0 * (0.125 + 2.5), 1e-12);
  // L2 weights the difference before squaring: 0.5 (2 * 0.5)^2 + 0.5 (2 * 3)^2.
  EXPECT_NEAR(detection::WeightedL2LocalizationLoss()(p, t, w).to_vector<double>()[0],
              0.5 * 1.0 + 0.5 * 36.0, 1e-12);
  // IoU 1/3 (two unit boxes sharing half), and disjoint boxes: loss = weight.
  const Tensor a = values(Shape{1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  const Tensor b = values(Shape{1, 2, 4}, {0, 0.5, 1, 1.5, 2, 2, 3, 3});
  const std::vector<double> iou_loss =
      detection::WeightedIOULocalizationLoss()(a, b, values(Shape{1, 2}, {1.0, 0.5}))
          .to_vector<double>();
  EXPECT_NEAR(iou_loss[0], 1.0 - 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(iou_loss[1], 0.5, 1e-12);
  EXPECT_THROW(detection::WeightedSmoothL1LocalizationLoss()(p, t, values(Shape{1}, {1.0})),
               InvalidArgument);
  EXPECT_THROW(detection::WeightedIOULocalizationLoss()(p, t, w), InvalidArgument);
  EXPECT_THROW(
      detection::WeightedSigmoidClassificationLoss()(p, t, values(Shape{1, 1, 3}, {1, 1, 1})),
      InvalidArgument);
  EXPECT_THROW(detection::BootstrappedSigmoidClassificationLoss(0.5, "medium"), InvalidArgument);
}

TEST_P(PkgDetectionLossesTest, GradientsMatchCentralDifferences) {
  // Differences kept away from the smooth L1 kinks at +-delta; logits away from nothing in
  // particular (the sigmoid losses are smooth).
  const Tensor pred = values(
      Shape{2, 3, 4}, {0.3,  -0.2, 1.7, -2.4, 0.05, 0.6,  -0.7, 2.2,  -1.3, 0.45,  0.2, 3.1,
                       -0.4, 1.25, 0.7, -0.1, 0.9,  -1.8, 0.1,  0.35, 2.6,  -0.55, 0.0, 1.4});
  const Tensor target = values(Shape{2, 3, 4}, std::vector<double>(24, 0.1));
  const Tensor weights = values(Shape{2, 3}, {1.0, 0.5, 0.0, 2.0, 1.0, 0.25});
  const testing::GradCheckOptions options;
  auto check = [&](const char* what, const testing::TensorFunction& f,
                   const std::vector<Tensor>& inputs) {
    const testing::GradCheckResult r = testing::check_gradients(f, inputs, options);
    EXPECT_TRUE(r.ok) << what << ": " << r.report;
    EXPECT_GT(r.checked, 0u) << what;
  };
  check("smooth L1",
        [&](const std::vector<Tensor>& x) {
          return detection::WeightedSmoothL1LocalizationLoss()(x[0], x[1], weights);
        },
        {pred, target});
  check("l2",
        [&](const std::vector<Tensor>& x) {
          return detection::WeightedL2LocalizationLoss()(x[0], target, x[1]);
        },
        {pred, weights});
  const Tensor labels = values(
      Shape{2, 3, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0.5, 0.5, 0, 0});
  check("focal",
        [&](const std::vector<Tensor>& x) {
          return detection::SigmoidFocalClassificationLoss(2.0, 0.25)(x[0], labels, weights);
        },
        {pred});
  check("focal gamma 1.5",
        [&](const std::vector<Tensor>& x) {
          return detection::SigmoidFocalClassificationLoss(1.5, std::nullopt)(x[0], labels,
                                                                              weights);
        },
        {pred});
  check("softmax",
        [&](const std::vector<Tensor>& x) {
          return detection::WeightedSoftmaxClassificationLoss(1.5)(x[0], labels, weights);
        },
        {pred});
  check("bootstrapped soft",
        [&](const std::vector<Tensor>& x) {
          return detection::BootstrappedSigmoidClassificationLoss(0.4, "soft")(x[0], labels,
                                                                               weights);
        },
        {pred});
  // IoU on overlapping boxes (away from the max/min switch points).
  const Tensor boxes_a = values(Shape{1, 2, 4}, {0.1, 0.1, 0.6, 0.7, 0.2, 0.3, 0.9, 0.8});
  const Tensor boxes_b = values(Shape{1, 2, 4}, {0.2, 0.15, 0.7, 0.65, 0.1, 0.35, 0.8, 0.95});
  check("iou",
        [&](const std::vector<Tensor>& x) {
          return detection::WeightedIOULocalizationLoss()(x[0], boxes_b,
                                                          values(Shape{1, 2}, {1.0, 0.5}));
        },
        {boxes_a});
}

}  // namespace
}  // namespace trainyard
