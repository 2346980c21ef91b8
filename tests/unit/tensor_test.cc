// Tensors on the CPU backend plugin: round trips through backend memory, the caching
// allocator, the errors that name shapes and dtypes, and the native accessors (a storage's
// memory, a stream's queue) that collectives use instead of a backend's classes.
#include "trainyard/tensor.h"

#include <gtest/gtest.h>

#include <cstring>

#include "trainyard/backend.h"
#include "trainyard/core/registry.h"
#include "trainyard/variable.h"

namespace trainyard {
namespace {

class TensorTest : public ::testing::Test {
 protected:
  TensorTest() : registry_(settings()) {
    backend_ = registry_.create<Backend>(ClassKind::kBackend, "cpu");
  }
  static PluginRegistry::Settings settings() {
    PluginRegistry::Settings s;
    s.use_environment = false;
    return s;
  }
  PluginRegistry registry_;
  std::shared_ptr<Backend> backend_;
};

TEST_F(TensorTest, RoundTripThroughBackendMemory) {
  std::vector<float> values = {1.5f, -2.0f, 0.0f, 3.25f, 7.0f, -1e-30f};
  Tensor t = Tensor::from_vector(*backend_, Shape{2, 3}, values);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.size_bytes(), 24u);
  EXPECT_EQ(t.to_vector<float>(), values);
  EXPECT_EQ(t.description(), "f32[2, 3] on cpu");
  std::vector<int64_t> ints = {1, 2, 3};
  EXPECT_EQ(Tensor::from_vector(*backend_, Shape{3}, ints).to_vector<int64_t>(), ints);
}

TEST_F(TensorTest, EmptyAndScalarTensors) {
  Tensor empty = Tensor::empty(*backend_, Shape{0, 5}, DType::kF32);
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_TRUE(empty.to_vector<float>().empty());
  Tensor scalar = Tensor::from_vector(*backend_, Shape{}, std::vector<double>{2.5});
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(scalar.to_vector<double>(), std::vector<double>{2.5});
}

TEST_F(TensorTest, MismatchesNameBothSides) {
  Tensor t = Tensor::from_vector(*backend_, Shape{2}, std::vector<float>{1, 2});
  try {
    t.to_vector<int32_t>();
    FAIL() << "reading f32 as i32 did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2] on cpu is f32, requested i32"), std::string::npos)
        << e.what();
  }
  std::vector<float> three = {1, 2, 3};
  try {
    Tensor::from_host(*backend_, Shape{2, 2}, DType::kF32, three.data(), 12);
    FAIL() << "wrong byte count did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 2] needs 16 bytes, got 12"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Shape({2, -1}).num_elements(), InvalidArgument);
  EXPECT_THROW(Tensor().backend(), InvalidArgument);
}

TEST_F(TensorTest, BackendRefusesOverrunningCopies) {
  auto storage = backend_->allocate(16);
  std::vector<std::byte> buffer(32);
  EXPECT_THROW(backend_->copy_from_host(*storage, 8, buffer.data(), 16), InvalidArgument);
  EXPECT_THROW(backend_->copy_to_host(*storage, 17, buffer.data(), 0), InvalidArgument);
  EXPECT_NO_THROW(backend_->copy_to_host(*storage, 0, buffer.data(), 16));
}

TEST_F(TensorTest, SteadyStateAllocatesNothingFromTheSystem) {
  auto step = [&] {
    for (int64_t n : {1, 1000, 4096, 1 << 20}) {
      Tensor t = Tensor::empty(*backend_, Shape{n}, DType::kF32);
      (void)t;
    }
  };
  step();
  std::size_t after_first = backend_->allocator_stats().system_allocations;
  for (int i = 0; i < 10; ++i) step();
  AllocatorStats stats = backend_->allocator_stats();
  EXPECT_EQ(stats.system_allocations, after_first);
  EXPECT_GE(stats.cache_hits, 40u);
  EXPECT_EQ(stats.bytes_in_use, 0u);
}

TEST_F(TensorTest, StorageKeepsBackendAlive) {
  std::weak_ptr<Backend> weak = backend_;
  Tensor t = Tensor::from_vector(*backend_, Shape{4}, std::vector<float>{1, 2, 3, 4});
  backend_.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST_F(TensorTest, VariableAssignChecksShapeAndDtype) {
  VariableSpec spec;
  spec.name = "tower/fc1/weights";
  spec.shape = Shape{2, 2};
  Variable v(spec, Tensor::empty(*backend_, Shape{2, 2}, DType::kF32));
  try {
    v.assign(Tensor::empty(*backend_, Shape{2, 3}, DType::kF32));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "variable 'tower/fc1/weights' is f32[2, 2], cannot assign f32[2, 3]");
  }
}

// The cpu backend's storage is host memory: the native pointer is where the bytes are, and a
// tensor's pointer is its storage's advanced by the tensor's byte offset.
TEST_F(TensorTest, NativeMemoryOfACpuTensorIsItsHostBytes) {
  std::vector<float> values = {1.5f, -2.0f, 0.0f, 3.25f, 7.0f, -1e-30f};
  Tensor t = Tensor::from_vector(*backend_, Shape{2, 3}, values);
  backend_->synchronize();
  NativeMemory memory = t.native_memory();
  EXPECT_EQ(memory.kind, DeviceKind::kHost);
  EXPECT_STREQ(device_kind_name(memory.kind), "host");
  EXPECT_EQ(memory.device_index, 0);
  ASSERT_NE(memory.data, nullptr);
  EXPECT_EQ(memory.data, t.storage()->native_memory().data);
  std::vector<float> seen(values.size());
  std::memcpy(seen.data(), memory.data, t.size_bytes());
  EXPECT_EQ(seen, values);

  // A view two elements in: the pointer moves by the byte offset, and writing through it is
  // what the backend then reads.
  Tensor view(t.storage(), Shape{4}, DType::kF32, 2 * sizeof(float));
  NativeMemory at = view.native_memory();
  EXPECT_EQ(static_cast<std::byte*>(at.data), static_cast<std::byte*>(memory.data) + 8);
  const float nine = 9.0f;
  std::memcpy(at.data, &nine, sizeof(nine));
  EXPECT_EQ(t.to_vector<float>()[2], 9.0f);
}

// The cpu backend's streams run work before the call returns: host, no native queue.
TEST_F(TensorTest, NativeStreamOfTheCpuBackendIsHostWithoutAQueue) {
  NativeStream stream = backend_->current_stream().native_stream();
  EXPECT_EQ(stream.kind, DeviceKind::kHost);
  EXPECT_EQ(stream.handle, nullptr);
  std::shared_ptr<Stream> created = backend_->create_stream();
  EXPECT_EQ(created->native_stream().kind, DeviceKind::kHost);
  EXPECT_EQ(created->native_stream().handle, nullptr);
}

// An undefined tensor, and a backend that says nothing (the opaque fixture, whose memory the
// host cannot read), give kOpaque and no pointer: a collective refuses them by kind.
TEST(NativeAccessorTest, OpaqueWhereNothingIsSaid) {
  NativeMemory none = Tensor().native_memory();
  EXPECT_EQ(none.kind, DeviceKind::kOpaque);
  EXPECT_EQ(none.data, nullptr);
  EXPECT_STREQ(device_kind_name(none.kind), "opaque");

  PluginRegistry::Settings s;
  s.use_environment = false;
  s.plugin_path = {std::string(TRAINYARD_FIXTURE_DIR) + "/opaque"};
  PluginRegistry registry(s);
  std::shared_ptr<Backend> opaque = registry.create<Backend>(ClassKind::kBackend, "opaque");
  Tensor t = Tensor::from_vector(*opaque, Shape{3}, std::vector<float>{1, 2, 3});
  EXPECT_EQ(t.native_memory().kind, DeviceKind::kOpaque);
  EXPECT_EQ(t.native_memory().data, nullptr);
  EXPECT_EQ(opaque->current_stream().native_stream().kind, DeviceKind::kOpaque);
  EXPECT_EQ(opaque->current_stream().native_stream().handle, nullptr);
  opaque->synchronize();
}

// The cuda backend of `registry` and, where it cannot run, why: not built (null backend), or
// built without a usable GPU (its first allocation's message).
struct CudaOnThisMachine {
  std::shared_ptr<Backend> backend;
  std::string unusable;
};

CudaOnThisMachine cuda_on_this_machine(const PluginRegistry& registry) {
  CudaOnThisMachine out;
  bool built = false;
  for (const ClassInfo& c : registry.classes()) built |= c.class_name == "cuda";
  if (!built) return out;
  out.backend = registry.create<Backend>(ClassKind::kBackend, "cuda");
  try {
    out.backend->allocate(0);
  } catch (const Unimplemented& e) {
    out.unusable = e.what();
  }
  return out;
}

PluginRegistry build_tree_registry() {
  PluginRegistry::Settings s;
  s.use_environment = false;
  return PluginRegistry(s);
}

TEST(CudaBackendTest, RoundTripOnDeviceOrSkip) {
  PluginRegistry registry = build_tree_registry();
  const CudaOnThisMachine cuda_here = cuda_on_this_machine(registry);
  if (!cuda_here.backend) GTEST_SKIP() << "the CUDA backend was not built (no CUDA toolkit)";
  // Without a GPU the backend is created (it lists its kernels) and its first allocation
  // says why it cannot run.
  const std::shared_ptr<Backend>& cuda = cuda_here.backend;
  EXPECT_FALSE(cuda->kernels().empty());
  if (!cuda_here.unusable.empty()) {
    EXPECT_NE(cuda_here.unusable.find("no usable CUDA device"), std::string::npos)
        << cuda_here.unusable;
    GTEST_SKIP() << "no usable CUDA device on this machine: " << cuda_here.unusable;
  }
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  Tensor t = Tensor::from_vector(*cuda, Shape{10, 100}, values);
  EXPECT_EQ(t.to_vector<float>(), values);
  EXPECT_EQ(t.description(), "f32[10, 100] on cuda:0");
}

// On a GPU the cuda backend's storage says CUDA device memory of its GPU and its streams give
// their cudaStream_t: what NcclCollective hands to NCCL.
TEST(CudaBackendTest, NativeMemoryAndStreamOnDeviceOrSkip) {
  PluginRegistry registry = build_tree_registry();
  const CudaOnThisMachine cuda_here = cuda_on_this_machine(registry);
  if (!cuda_here.backend) GTEST_SKIP() << "the CUDA backend was not built (no CUDA toolkit)";
  if (!cuda_here.unusable.empty()) {
    GTEST_SKIP() << "no usable CUDA device on this machine: " << cuda_here.unusable;
  }
  const std::shared_ptr<Backend>& cuda = cuda_here.backend;
  Tensor t = Tensor::from_vector(*cuda, Shape{4}, std::vector<float>{1, 2, 3, 4});
  NativeMemory memory = t.native_memory();
  EXPECT_EQ(memory.kind, DeviceKind::kCuda);
  EXPECT_EQ(memory.device_index, 0);
  EXPECT_NE(memory.data, nullptr);
  Tensor view(t.storage(), Shape{2}, DType::kF32, 2 * sizeof(float));
  EXPECT_EQ(static_cast<std::byte*>(view.native_memory().data),
            static_cast<std::byte*>(memory.data) + 8);
  NativeStream stream = cuda->current_stream().native_stream();
  EXPECT_EQ(stream.kind, DeviceKind::kCuda);
  EXPECT_NE(stream.handle, nullptr);  // the backend's own non-blocking stream
  std::shared_ptr<Stream> created = cuda->create_stream();
  EXPECT_EQ(created->native_stream().kind, DeviceKind::kCuda);
  EXPECT_NE(created->native_stream().handle, stream.handle);
  cuda->synchronize();
}

}  // namespace
}  // namespace trainyard
