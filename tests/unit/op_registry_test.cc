// The op registry and kernel binding by name: every op declared once per family, backends
// built against another op list, kernels for unknown ops refused, composites with their own
// gradient and fused kernels, streams, events and device copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "test_backends.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/composite.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/trace.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/ops/families.h"

namespace trainyard {
namespace {

std::shared_ptr<PluginRegistry> fixture_registry(const std::string& fixture) {
  PluginRegistry::Settings settings;
  settings.plugin_path = {std::string(TRAINYARD_FIXTURE_DIR) + "/" + fixture};
  settings.use_environment = false;
  return std::make_shared<PluginRegistry>(settings);
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

TEST(OpRegistryTest, EveryOpIsDeclaredOnceWithItsFamilyAndSummary) {
  std::set<std::string> names;
  std::map<std::string, int> per_family;
  for (const OpInfo& op : declared_ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << "declared twice: " << op.name;
    EXPECT_NE(std::string(op.summary), "") << op.name << " has no summary";
    ++per_family[op.family];
    const OpInfo* found = find_op(op.name);
    ASSERT_NE(found, nullptr) << op.name;
    EXPECT_EQ(std::string(found->family), op.family);
  }
  for (const char* family :
       {"math", "reduce", "linalg", "nn", "loss", "array", "random", "training", "composite"}) {
    EXPECT_GT(per_family[family], 0) << "no op of family " << family;
  }
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  // The attribute metadata comes from the declaration: sizes of the structs op.h defines.
  EXPECT_EQ(find_op("conv2d")->attrs_size, sizeof(Conv2DAttrs));
  EXPECT_EQ(std::string(find_op("conv2d")->attrs), "Conv2DAttrs");
  EXPECT_EQ(find_op("add")->attrs_size, 0u);
  EXPECT_TRUE(find_op("binary_cross_entropy")->composite);
  EXPECT_FALSE(find_op("matmul")->composite);
}

// The one list of op families (trainyard/ops/families.h) is the registry's: every family whose
// row declares ops has its ops numbered together, family after family in the list's order, and
// no op comes from a family the list does not name.
TEST(OpRegistryTest, OpsAreNumberedFamilyByFamilyInTheOrderOfTheFamilyList) {
  std::vector<std::string> listed;
#define TRAINYARD_TEST_ROW_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF_OPS(core, listed.push_back(#family);)
  TRAINYARD_OP_FAMILIES(TRAINYARD_TEST_ROW_)
#undef TRAINYARD_TEST_ROW_
  ASSERT_FALSE(listed.empty());
  std::vector<std::string> numbered;  // the families of the declared ops, runs collapsed
  for (const OpInfo& op : declared_ops()) {
    if (op.composite) continue;
    if (numbered.empty() || numbered.back() != op.family) numbered.push_back(op.family);
  }
  EXPECT_EQ(numbered, listed);
}

// Each backend registers a kernel for every op of the families whose row gives it kernels.
void expect_kernels_for_listed_families(Backend& backend, const std::set<std::string>& families) {
  std::set<std::string> registered;
  for (const KernelRegistration& k : backend.kernels()) registered.insert(k.op);
  int checked = 0;
  for (const OpInfo& op : declared_ops()) {
    if (op.composite || families.count(op.family) == 0) continue;
    ++checked;
    EXPECT_TRUE(registered.count(op.name))
        << backend.device_name() << " has no kernel for op " << op.name << " of family "
        << op.family << ", which the family list gives it";
  }
  EXPECT_GT(checked, 0);
}

TEST(OpRegistryTest, BackendsHaveKernelsForEveryOpOfTheFamiliesTheListGivesThem) {
  std::set<std::string> cpu_families, cuda_families;
#define TRAINYARD_TEST_ROW_(family, core, cpu, cuda, reference, conformance) \
  TRAINYARD_OP_FAMILY_IF(cpu, cpu_families.insert(#family);)                 \
  TRAINYARD_OP_FAMILY_IF(cuda, cuda_families.insert(#family);)
  TRAINYARD_OP_FAMILIES(TRAINYARD_TEST_ROW_)
#undef TRAINYARD_TEST_ROW_
  expect_kernels_for_listed_families(*test::backend("cpu"), cpu_families);
  const auto& names = test::backend_names();
  if (std::find(names.begin(), names.end(), "cuda") != names.end()) {
    expect_kernels_for_listed_families(*test::backend("cuda"), cuda_families);
  }
}

TEST(OpRegistryTest, KernelForAnOpTheCoreDoesNotDeclareIsRefusedNamingOpPluginAndVersion) {
  auto registry = fixture_registry("unknown_op");
  try {
    registry->create<Backend>(ClassKind::kBackend, "newer");
    FAIL() << "a backend registering a kernel for an unknown op was created";
  } catch (const PluginError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("'frobnicate'"), std::string::npos) << message;
    EXPECT_NE(message.find("fixture_unknown_op"), std::string::npos) << message;
    EXPECT_NE(message.find("Trainyard " TRAINYARD_VERSION_STRING), std::string::npos) << message;
  }
}

class OlderOpListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = fixture_registry("older_ops");
    older_ = registry_->create<Backend>(ClassKind::kBackend, "older");
  }
  std::shared_ptr<PluginRegistry> registry_;
  std::shared_ptr<Backend> older_;
};

TEST_F(OlderOpListTest, BackendBuiltBeforeNewerOpsLoadsAndRunsTheOpsItHas) {
  Tensor a = Tensor::from_vector<float>(*older_, Shape{2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::from_vector<float>(*older_, Shape{2, 2}, {10, 20, 30, 40});
  EXPECT_EQ(values(ops::add(a, b)), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(values(ops::matmul(a, b)), (std::vector<float>{70, 100, 150, 220}));
}

TEST_F(OlderOpListTest, AnOpItLacksIsUnimplementedNamingOpAndDevice) {
  Tensor x = Tensor::from_vector<float>(*older_, Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  try {
    ops::top_k(x, 1);
    FAIL() << "top_k ran on a backend without its kernel";
  } catch (const Unimplemented& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("top_k"), std::string::npos) << message;
    EXPECT_NE(message.find("older"), std::string::npos) << message;
  }
}

TEST_F(OlderOpListTest, CompositesWithoutAFusedKernelRunTheirComposition) {
  std::vector<float> v = {3, 4, 0, 0};
  Tensor x = Tensor::from_vector<float>(*older_, Shape{4}, v);
  // clip_by_norm, l2_loss and binary_cross_entropy have fused kernels on cpu; here they are
  // composed from ops the older list has.
  EXPECT_EQ(values(ops::clip_by_norm(x, 1.0)), (std::vector<float>{0.6f, 0.8f, 0, 0}));
  EXPECT_FLOAT_EQ(values(ops::l2_loss(x))[0], 12.5f);
  Tensor p = Tensor::from_vector<float>(*older_, Shape{1, 2}, {0.25f, 0.5f});
  Tensor y = Tensor::from_vector<float>(*older_, Shape{1, 2}, {1, 0});
  float expected = -(std::log(0.25f + 1e-5f) + std::log(0.5f + 1e-5f));
  EXPECT_NEAR(values(ops::binary_cross_entropy(p, y, 1e-5))[0], expected, 1e-5);
}

// A composite with its own gradient (x -> x^3 with d/dx = 3x^2), whose fused kernel only the
// opaque fixture has.
const Composite& cube() {
  static const CompositeDeclaration composite = Composite::declare({
      .name = "fixture.cube",
      .num_inputs = 1,
      .num_outputs = 1,
      .attrs_size = 0,
      .summary = "x -> x^3 (a test composite)",
      .compose =
          [](const CompositeCall& c) {
            return std::vector<Tensor>{ops::mul(ops::mul(c.inputs[0], c.inputs[0]), c.inputs[0])};
          },
      .infer =
          [](const CompositeCall& c) {
            return std::vector<TensorType>{{c.inputs[0].shape(), c.inputs[0].dtype()}};
          },
      .gradient =
          [](const CompositeGrad& g) {
            const Tensor& x = g.call.inputs[0];
            return std::vector<Tensor>{ops::mul(ops::mul(ops::mul(x, x), 3.0), g.grad_outputs[0])};
          },
  });
  return *composite;
}

std::vector<std::string> traced_ops(const std::function<void()>& body) {
  StepTrace trace;  // records every op launched while it lives
  body();
  std::vector<std::string> names;
  for (const StepTrace::Event& e : trace.events()) {
    if (e.category == "op") names.push_back(e.name);
  }
  return names;
}

TEST(CompositeTest, UsesTheFusedKernelWhereTheBackendHasOneAndTheCompositionElsewhere) {
  auto registry = fixture_registry("opaque");
  auto opaque = registry->create<Backend>(ClassKind::kBackend, "opaque");
  auto cpu = registry->create<Backend>(ClassKind::kBackend, "cpu");
  EXPECT_TRUE(cube().has_fused_kernel(*opaque));
  EXPECT_FALSE(cube().has_fused_kernel(*cpu));
  for (Backend* b : {opaque.get(), cpu.get()}) {
    Tensor x = Tensor::from_vector<float>(*b, Shape{3}, {1, -2, 3});
    Tensor y;
    std::vector<std::string> launched = traced_ops([&] { y = cube()({x})[0]; });
    EXPECT_EQ(values(y), (std::vector<float>{1, -8, 27})) << b->device_name();
    if (b == opaque.get()) {
      EXPECT_EQ(launched, (std::vector<std::string>{"fixture.cube"}));
    } else {
      EXPECT_EQ(launched, (std::vector<std::string>{"mul", "mul"}));
    }
  }
  const OpInfo* info = find_op("fixture.cube");
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->composite);
}

TEST(CompositeTest, ItsOwnGradientIsRecordedOnBothPaths) {
  auto registry = fixture_registry("opaque");
  for (const char* name : {"opaque", "cpu"}) {
    auto b = registry->create<Backend>(ClassKind::kBackend, name);
    Tensor x = Tensor::from_vector<float>(*b, Shape{3}, {1, -2, 3});
    x.set_requires_grad(true);
    Tensor loss = ops::reduce_sum(cube()({x})[0]);
    std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{x});
    EXPECT_EQ(values(g[0]), (std::vector<float>{3, 12, 27})) << name;
  }
}

// A name held with another signature (fixture.cube has a summary, infer and gradient) or an
// op's name is refused.
TEST(CompositeTest, DeclaringATakenNameIsAnErrorNamingIt) {
  cube();
  try {
    (void)Composite::declare(
        {.name = "fixture.cube",
         .num_inputs = 1,
         .num_outputs = 1,
         .attrs_size = 0,
         .summary = "",
         .compose = [](const CompositeCall& c) { return std::vector<Tensor>{c.inputs[0]}; },
         .infer = {},
         .gradient = {}});
    FAIL() << "a second composite named fixture.cube was declared";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fixture.cube"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      (void)Composite::declare(
          {.name = "matmul",
           .num_inputs = 2,
           .num_outputs = 1,
           .attrs_size = 0,
           .summary = "",
           .compose = [](const CompositeCall& c) { return std::vector<Tensor>{c.inputs[0]}; },
           .infer = {},
           .gradient = {}}),
      InvalidArgument);
}

CompositeSpec identity_spec(const char* name, const char* summary = "x -> x") {
  return CompositeSpec{
      .name = name,
      .num_inputs = 1,
      .num_outputs = 1,
      .attrs_size = 0,
      .summary = summary,
      .compose = [](const CompositeCall& c) { return std::vector<Tensor>{c.inputs[0]}; },
      .infer = {},
      .gradient = {}};
}

// Two owners (two copies of a static library) declaring one name alike share it: the name stays
// while either holds it, goes with the last, and can then be declared afresh.
TEST(CompositeTest, OwnersOfOneNameShareItUntilTheLastWithdraws) {
  auto registry = fixture_registry("opaque");
  auto cpu = registry->create<Backend>(ClassKind::kBackend, "cpu");
  Tensor x = Tensor::from_vector<float>(*cpu, Shape{2}, {1, 2});
  std::optional<CompositeDeclaration> a = Composite::declare(identity_spec("fixture.shared"));
  std::optional<CompositeDeclaration> b = Composite::declare(identity_spec("fixture.shared"));
  ASSERT_NE(find_op("fixture.shared"), nullptr);
  a.reset();
  ASSERT_NE(find_op("fixture.shared"), nullptr) << "withdrawn while another owner holds it";
  EXPECT_EQ(values((**b)({x})[0]), (std::vector<float>{1, 2}));
  b.reset();
  EXPECT_EQ(find_op("fixture.shared"), nullptr) << "still declared after its last owner went";
  for (const OpInfo& op : declared_ops()) EXPECT_STRNE(op.name, "fixture.shared");
  CompositeDeclaration again = Composite::declare(identity_spec("fixture.shared"));
  EXPECT_EQ(values(again({x})[0]), (std::vector<float>{1, 2}));
  EXPECT_NE(find_op("fixture.shared"), nullptr);
}

TEST(CompositeTest, OwnersThatDisagreeOnANameAreRefusedNamingIt) {
  CompositeDeclaration first = Composite::declare(identity_spec("fixture.disagreed"));
  try {
    CompositeDeclaration second =
        Composite::declare(identity_spec("fixture.disagreed", "another summary"));
    FAIL() << "a second, different declaration of fixture.disagreed was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'fixture.disagreed'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("another summary"), std::string::npos) << e.what();
  }
  CompositeSpec no_compose = identity_spec("fixture.without_compose");
  no_compose.compose = {};
  EXPECT_THROW((void)Composite::declare(std::move(no_compose)), InvalidArgument);
  EXPECT_EQ(find_op("fixture.without_compose"), nullptr);
}

TEST(CompositeTest, WrongInputCountOrDevicesAreErrorsNamingTheComposite) {
  auto registry = fixture_registry("opaque");
  auto opaque = registry->create<Backend>(ClassKind::kBackend, "opaque");
  auto cpu = registry->create<Backend>(ClassKind::kBackend, "cpu");
  Tensor a = Tensor::from_vector<float>(*cpu, Shape{1}, {1});
  Tensor b = Tensor::from_vector<float>(*opaque, Shape{1}, {1});
  try {
    cube()({a, b});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fixture.cube"), std::string::npos) << e.what();
  }
  try {
    ops::add(a, b);
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("on opaque"), std::string::npos) << message;
  }
}

TEST(TensorToTest, CopiesBetweenDevicesAndTheGradientGoesBack) {
  auto registry = fixture_registry("opaque");
  auto opaque = registry->create<Backend>(ClassKind::kBackend, "opaque");
  auto cpu = registry->create<Backend>(ClassKind::kBackend, "cpu");
  Tensor x = Tensor::from_vector<float>(*cpu, Shape{2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(&x.to(*cpu).backend(), cpu.get());
  Tensor on_opaque = x.to(*opaque);
  EXPECT_EQ(&on_opaque.backend(), opaque.get());
  EXPECT_EQ(values(on_opaque), values(x));
  x.set_requires_grad(true);
  Tensor loss = ops::reduce_sum(ops::mul(x.to(*opaque), 2.0));
  std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{x});
  EXPECT_EQ(&g[0].backend(), cpu.get());
  EXPECT_EQ(values(g[0]), (std::vector<float>{2, 2, 2, 2}));
}

TEST(StreamTest, EventsOrderWorkAcrossStreamsOfAnAsynchronousBackend) {
  auto registry = fixture_registry("opaque");
  auto opaque = registry->create<Backend>(ClassKind::kBackend, "opaque");
  std::shared_ptr<Stream> first = opaque->create_stream();
  std::shared_ptr<Stream> second = opaque->create_stream();
  std::shared_ptr<Event> done = opaque->create_event();
  Tensor x = Tensor::from_vector<float>(*opaque, Shape{64}, std::vector<float>(64, 1.0f));
  Tensor y;
  {
    StreamGuard on_first(*first);
    EXPECT_EQ(&opaque->current_stream(), first.get());
    y = x;
    for (int i = 0; i < 50; ++i) y = ops::add(y, 1.0);  // queued on `first`
    done->record(*first);
  }
  EXPECT_EQ(&opaque->current_stream(), &opaque->default_stream());
  Tensor z;
  {
    StreamGuard on_second(*second);
    done->wait(*second);
    z = ops::mul(y, 2.0);  // must see all 50 additions
  }
  second->synchronize();
  EXPECT_TRUE(done->query());
  EXPECT_EQ(values(z), std::vector<float>(64, 102.0f));
}

TEST(StreamTest, DeviceCopiesAndAsyncHostCopiesLandWhereAsked) {
  auto registry = fixture_registry("opaque");
  for (const char* name : {"opaque", "cpu"}) {
    auto b = registry->create<Backend>(ClassKind::kBackend, name);
    std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
    auto staging = b->allocate_host_staging(v.size() * sizeof(float));
    ASSERT_GE(staging->size_bytes(), v.size() * sizeof(float));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(staging->data()) % 64, 0u);
    std::memcpy(staging->data(), v.data(), v.size() * sizeof(float));
    Tensor src = Tensor::empty(*b, Shape{8}, DType::kF32);
    Tensor dst = ops::zeros(*b, Shape{8});  // queued on the default stream, as the copies are
    Stream& stream = b->default_stream();
    b->copy_from_host_async(*src.storage(), 0, staging->data(), 8 * sizeof(float), stream);
    // Elements 2..5 of src to 4..7 of dst.
    b->copy_device_to_device(*src.storage(), 2 * sizeof(float), *dst.storage(), 4 * sizeof(float),
                             4 * sizeof(float), stream);
    std::vector<float> back(8);
    b->copy_to_host_async(*dst.storage(), 0, back.data(), 8 * sizeof(float), stream);
    stream.synchronize();
    EXPECT_EQ(back, (std::vector<float>{0, 0, 0, 0, 3, 4, 5, 6})) << name;
    EXPECT_THROW(b->copy_device_to_device(*src.storage(), 6 * sizeof(float), *dst.storage(), 0,
                                          4 * sizeof(float), stream),
                 InvalidArgument)
        << name;
  }
}

TEST(StreamTest, AKernelErrorOnAnAsynchronousBackendSurfacesAtTheNextSynchronization) {
  auto registry = fixture_registry("opaque");
  auto opaque = registry->create<Backend>(ClassKind::kBackend, "opaque");
  Tensor params = Tensor::from_vector<float>(*opaque, Shape{3}, {1, 2, 3});
  Tensor bad = Tensor::from_vector<int64_t>(*opaque, Shape{1}, {7});
  try {
    Tensor g = ops::gather(params, bad, 0);  // queued; the kernel finds the bad index later
    g.to_vector<float>();
    FAIL() << "an out-of-range gather index went unreported";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
  }
  // The error is reported once; the stream goes on.
  EXPECT_EQ(values(ops::add(params, 1.0)), (std::vector<float>{2, 3, 4}));
}

}  // namespace
}  // namespace trainyard
