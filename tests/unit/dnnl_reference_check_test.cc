// The cpu backend's refusal of oneDNN's reference implementations (dnnl_reference_check.h): with
// TRAINYARD_DNNL_REFUSE_REF=1 a primitive descriptor that resolved to "ref:..." throws an Error
// naming the op, the implementation and the shapes; without the variable, or for an optimized
// implementation, nothing happens.
#include "dnnl_reference_check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "oneapi/dnnl/dnnl.hpp"
#include "trainyard/error.h"

namespace trainyard::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

// Sets (or, with nullopt, unsets) TRAINYARD_DNNL_REFUSE_REF for one test; restores it after.
class ScopedRefuseVariable {
 public:
  explicit ScopedRefuseVariable(std::optional<std::string> value) {
    if (const char* old = std::getenv(kRefuseReferenceVariable)) old_ = old;
    if (value) {
      setenv(kRefuseReferenceVariable, value->c_str(), 1);
    } else {
      unsetenv(kRefuseReferenceVariable);
    }
  }
  ~ScopedRefuseVariable() {
    if (old_) {
      setenv(kRefuseReferenceVariable, old_->c_str(), 1);
    } else {
      unsetenv(kRefuseReferenceVariable);
    }
  }

 private:
  std::optional<std::string> old_;
};

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Dilated max pooling: none of oneDNN 2.6's x64 pooling kernels (jit, nchw, nhwc) takes a
// dilation, so it resolves to "ref:any" on every x86 CPU.
dnnl::pooling_v2_forward::primitive_desc dilated_pooling_pd() {
  const memory::desc src({2, 16, 14, 14}, kF32, Tag::nhwc), dst({2, 16, 5, 5}, kF32, Tag::nhwc);
  const dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference,
                                            dnnl::algorithm::pooling_max, src, dst, {2, 2}, {3, 3},
                                            {1, 1}, {0, 0}, {0, 0});
  return {desc, engine()};
}

// An f32 matmul: the gemm-based or brgemm implementation on every x86 CPU oneDNN supports.
dnnl::matmul::primitive_desc plain_matmul_pd() {
  const memory::desc a({64, 48}, kF32, Tag::ab), b({48, 32}, kF32, Tag::ab),
      c({64, 32}, kF32, Tag::ab);
  return {dnnl::matmul::desc(a, b, c), engine()};
}

std::string refusal_message(const dnnl::primitive_desc_base& pd, const std::string& problem) {
  try {
    check_not_reference(pd, [&] { return problem; });
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DnnlReferenceCheckTest, NamesReferenceImplementationsOnly) {
  EXPECT_TRUE(is_reference_implementation("ref:any"));
  EXPECT_FALSE(is_reference_implementation("gemm:jit"));
  EXPECT_FALSE(is_reference_implementation("jit:avx2"));
  EXPECT_FALSE(is_reference_implementation("brg:avx512_core"));
  EXPECT_FALSE(is_reference_implementation("simple_nchw:any"));
}

TEST(DnnlReferenceCheckTest, OnlyTheValueOneRefuses) {
  {
    ScopedRefuseVariable set("1");
    EXPECT_TRUE(refuses_reference_implementations());
  }
  for (const char* value : {"0", "", "yes"}) {
    ScopedRefuseVariable set(std::string{value});
    EXPECT_FALSE(refuses_reference_implementations()) << "TRAINYARD_DNNL_REFUSE_REF=" << value;
  }
  ScopedRefuseVariable unset(std::nullopt);
  EXPECT_FALSE(refuses_reference_implementations());
}

TEST(DnnlReferenceCheckTest, ReferenceImplementationThrowsWhenRefused) {
  const auto pd = dilated_pooling_pd();
  const std::string implementation = pd.impl_info_str();
  std::cout << "dilated max pooling resolved to '" << implementation << "'\n";
  ASSERT_TRUE(is_reference_implementation(implementation))
      << "oneDNN now has an optimized dilated pooling ('" << implementation
      << "'): pick another problem that only its reference implementation takes";
  ScopedRefuseVariable set("1");
  const std::string problem = "max_pool2d input [2, 14, 14, 16] window [3, 3]";
  EXPECT_EQ(refusal_message(pd, problem),
            "cpu backend: " + problem + " resolved to oneDNN's reference implementation '" +
                implementation +
                "' (TRAINYARD_DNNL_REFUSE_REF=1): none of oneDNN's optimized kernels takes this "
                "problem on this CPU, and the reference one runs many times slower; "
                "ONEDNN_VERBOSE=1 shows the primitive, and running without "
                "TRAINYARD_DNNL_REFUSE_REF accepts it");
}

TEST(DnnlReferenceCheckTest, ReferenceImplementationPassesSilentlyWithoutTheVariable) {
  const auto pd = dilated_pooling_pd();
  ASSERT_TRUE(is_reference_implementation(pd.impl_info_str()));
  for (std::optional<std::string> value :
       {std::optional<std::string>(), std::optional<std::string>("0")}) {
    ScopedRefuseVariable set(value);
    bool described = false;
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    EXPECT_NO_THROW(check_not_reference(pd, [&] {
      described = true;
      return std::string("max_pool2d");
    }));
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_FALSE(described) << "the problem is described only for the error message";
  }
}

TEST(DnnlReferenceCheckTest, OptimizedImplementationPassesWhenRefused) {
  const auto pd = plain_matmul_pd();
  const std::string implementation = pd.impl_info_str();
  std::cout << "f32 matmul [64, 48] x [48, 32] resolved to '" << implementation << "'\n";
  EXPECT_FALSE(is_reference_implementation(implementation));
  ScopedRefuseVariable set("1");
  EXPECT_EQ(refusal_message(pd, "matmul [64, 48] x [48, 32]"), "");
}

}  // namespace
}  // namespace trainyard::cpu
