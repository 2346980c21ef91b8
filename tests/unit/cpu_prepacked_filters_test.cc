// The cpu backend's prepack_filters option (backends/cpu/prepacked_filters.h), which the
// inference library sets: a convolution keeps its filter in the layout it computes with after
// the first call, giving the same bits as a backend that converts the filter every call; a new
// filter, even one that takes the freed memory of an old one, is packed afresh, and one filter
// used by convolutions of two shapes is right in both.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <random>
#include <vector>

#include "test_registry.h"
#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

PluginRegistry& registry() { return test::plugin_registry(); }

std::vector<float> random_values(std::size_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(generator);
  return v;
}

class PrepackedFiltersTest : public ::testing::Test {
 protected:
  std::shared_ptr<Backend> packing_ = registry().create<Backend>(
      ClassKind::kBackend, "cpu", {{"prepack_filters", true}, {"num_threads", int64_t{1}}});
  std::shared_ptr<Backend> plain_ =
      registry().create<Backend>(ClassKind::kBackend, "cpu", {{"num_threads", int64_t{1}}});

  // conv2d of `input` values by `filter` values on `backend` (SAME, stride 1), as host values.
  static std::vector<float> conv(Backend& backend, const Shape& input_shape,
                                 const std::vector<float>& input, const Tensor& filter) {
    const Tensor x = Tensor::from_vector(backend, input_shape, input);
    return ops::conv2d(x, filter, {1, 1}, Padding2D::same()).to_vector<float>();
  }
};

const Shape kInput{1, 14, 14, 32};
const Shape kFilter{3, 3, 32, 64};

TEST_F(PrepackedFiltersTest, GivesThePlainBackendsBitsAndKeepsThePackedFilter) {
  const std::vector<float> x = random_values(14 * 14 * 32, 1);
  const std::vector<float> a = random_values(3 * 3 * 32 * 64, 2);
  const Tensor filter = Tensor::from_vector(*packing_, kFilter, a);
  const std::vector<float> want =
      conv(*plain_, kInput, x, Tensor::from_vector(*plain_, kFilter, a));
  EXPECT_EQ(conv(*packing_, kInput, x, filter), want);
  EXPECT_EQ(conv(*packing_, kInput, x, filter), want);  // from the packed copy
  // The packed copy is what the second call used: values written into the filter's memory
  // afterwards are not seen (the option's contract: filters never change).
  const std::vector<float> b = random_values(a.size(), 3);
  packing_->copy_from_host(*filter.storage(), filter.byte_offset(), b.data(),
                           b.size() * sizeof(float));
  EXPECT_EQ(conv(*packing_, kInput, x, filter), want);
}

TEST_F(PrepackedFiltersTest, ANewFilterInTheMemoryOfAFreedOneIsPackedAfresh) {
  const std::vector<float> x = random_values(14 * 14 * 32, 4);
  for (uint32_t round = 0; round < 4; ++round) {
    const std::vector<float> values = random_values(3 * 3 * 32 * 64, 10 + round);
    const Tensor filter = Tensor::from_vector(*packing_, kFilter, values);
    EXPECT_EQ(conv(*packing_, kInput, x, filter),
              conv(*plain_, kInput, x, Tensor::from_vector(*plain_, kFilter, values)))
        << "round " << round;
  }  // each round's filter is freed; the allocator may give its block to the next
}

TEST_F(PrepackedFiltersTest, OneFilterServesConvolutionsOfTwoShapes) {
  const std::vector<float> a = random_values(3 * 3 * 32 * 64, 5);
  const Tensor filter = Tensor::from_vector(*packing_, kFilter, a);
  const Tensor reference = Tensor::from_vector(*plain_, kFilter, a);
  for (const Shape& shape : {Shape{1, 14, 14, 32}, Shape{8, 7, 7, 32}, Shape{1, 14, 14, 32}}) {
    const std::vector<float> x = random_values(static_cast<std::size_t>(shape.num_elements()), 6);
    EXPECT_EQ(conv(*packing_, shape, x, filter), conv(*plain_, shape, x, reference));
  }
}

}  // namespace
}  // namespace trainyard
