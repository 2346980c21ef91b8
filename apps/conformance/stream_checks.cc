// Stream checks (stream_checks.h). Each check creates the backend with its defaults; a backend
// whose device is absent here (Unimplemented at creation) is skipped, saying so. Values are
// compared with what the same work gives on the CPU reference backend.
#include "stream_checks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conformance.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/stream.h"

namespace trainyard::conformance {
namespace {

// The backend under test, or null after GTEST_SKIP when its device is not here.
std::shared_ptr<Backend> create_or_skip(const ClassInfo& info) {
  try {
    std::shared_ptr<Backend> backend = create_default<Backend>(info);
    backend->allocate(0);  // a backend created without its device says so here
    return backend;
  } catch (const Unimplemented& e) {
    return nullptr;
  }
}

#define TRAINYARD_BACKEND_OR_SKIP(var, info)           \
  std::shared_ptr<Backend> var = create_or_skip(info); \
  if (!var) GTEST_SKIP() << "device not available here: " << (info).class_name

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 17) * 0.25f - 1.0f;
  return v;
}

void check_default_stream(const ClassInfo& info) {
  TRAINYARD_BACKEND_OR_SKIP(backend, info);
  EXPECT_EQ(&backend->default_stream().backend(), backend.get())
      << "default_stream() belongs to another backend\n"
      << repro_line();
  EXPECT_EQ(&backend->current_stream(), &backend->default_stream())
      << "with no StreamGuard, work must go to the default stream\n"
      << repro_line();
  std::shared_ptr<Stream> stream = backend->create_stream();
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(&stream->backend(), backend.get());
  {
    StreamGuard guard(*stream);
    EXPECT_EQ(&backend->current_stream(), stream.get()) << "StreamGuard did not select the stream";
  }
  EXPECT_EQ(&backend->current_stream(), &backend->default_stream())
      << "the stream stayed selected after its StreamGuard ended";
}

// A chain of ops queued on one stream, an event recorded after it and waited for on a second
// stream that consumes the result: the second stream must see every op of the chain.
void check_event_orders_streams(const ClassInfo& info) {
  TRAINYARD_BACKEND_OR_SKIP(backend, info);
  Backend& cpu = reference_backend();
  const std::vector<float> v = ramp(4096);
  auto chain = [](Tensor x) {
    for (int i = 0; i < 20; ++i) x = ops::add(ops::mul(x, 1.5), 0.25);
    return x;
  };
  Tensor expected = ops::mul(chain(Tensor::from_vector<float>(cpu, Shape{64, 64}, v)), -1.0);
  std::shared_ptr<Stream> first = backend->create_stream();
  std::shared_ptr<Stream> second = backend->create_stream();
  std::shared_ptr<Event> done = backend->create_event();
  Tensor x = Tensor::from_vector<float>(*backend, Shape{64, 64}, v);
  Tensor y, z;
  {
    StreamGuard guard(*first);
    y = chain(x);
    done->record(*first);
  }
  {
    StreamGuard guard(*second);
    done->wait(*second);
    z = ops::mul(y, -1.0);
  }
  second->synchronize();
  EXPECT_TRUE(done->query()) << "an event waited for is still not reached";
  std::string diff = compare_values(host_values(z), host_values(expected), 1e-4, 1e-5);
  EXPECT_EQ(diff, "") << "work on the second stream did not see the first stream's results\n"
                      << repro_line();
}

void check_copies(const ClassInfo& info) {
  TRAINYARD_BACKEND_OR_SKIP(backend, info);
  constexpr std::size_t n = 1000;
  const std::vector<float> v = ramp(n);
  std::unique_ptr<HostBuffer> staging = backend->allocate_host_staging(n * sizeof(float));
  ASSERT_NE(staging, nullptr);
  ASSERT_GE(staging->size_bytes(), n * sizeof(float));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(staging->data()) % 64, 0u)
      << "host staging memory is not 64-byte aligned";
  std::memcpy(staging->data(), v.data(), n * sizeof(float));
  Tensor src = Tensor::empty(*backend, Shape{static_cast<int64_t>(n)}, DType::kF32);
  Tensor dst = ops::zeros(*backend, Shape{static_cast<int64_t>(n)});  // on the default stream
  std::shared_ptr<Stream> stream = backend->create_stream();
  // The zeros are queued on the default stream; the copies below on another one must wait.
  std::shared_ptr<Event> zeroed = backend->create_event();
  zeroed->record(backend->default_stream());
  zeroed->wait(*stream);
  backend->copy_from_host_async(*src.storage(), src.byte_offset(), staging->data(),
                                n * sizeof(float), *stream);
  // Elements [100, 600) of src to [300, 800) of dst.
  backend->copy_device_to_device(*src.storage(), src.byte_offset() + 100 * sizeof(float),
                                 *dst.storage(), dst.byte_offset() + 300 * sizeof(float),
                                 500 * sizeof(float), *stream);
  std::vector<float> back(n, -7.0f);
  backend->copy_to_host_async(*dst.storage(), dst.byte_offset(), back.data(), n * sizeof(float),
                              *stream);
  stream->synchronize();
  std::vector<float> expected(n, 0.0f);
  for (std::size_t i = 0; i < 500; ++i) expected[300 + i] = v[100 + i];
  EXPECT_EQ(back, expected) << "async host copies and a device copy on one stream\n"
                            << repro_line();
  EXPECT_THROW(backend->copy_device_to_device(*src.storage(), (n - 10) * sizeof(float),
                                              *dst.storage(), 0, 20 * sizeof(float), *stream),
               InvalidArgument)
      << "a device copy overrunning its source must be InvalidArgument";
}

void check_tensor_to(const ClassInfo& info) {
  TRAINYARD_BACKEND_OR_SKIP(backend, info);
  Backend& cpu = reference_backend();
  const std::vector<float> v = ramp(24);
  Tensor x = Tensor::from_vector<float>(cpu, Shape{4, 6}, v);
  Tensor there = x.to(*backend);
  EXPECT_EQ(&there.backend(), backend.get());
  EXPECT_EQ(there.to_vector<float>(), v) << "Tensor::to lost values\n" << repro_line();
  EXPECT_EQ(there.to(cpu).to_vector<float>(), v);
  x.set_requires_grad(true);
  Tensor loss = ops::reduce_sum(ops::mul(x.to(*backend), 3.0));
  std::vector<Tensor> g = gradients(loss, std::vector<Tensor>{x});
  ASSERT_TRUE(g[0].defined());
  EXPECT_EQ(&g[0].backend(), &cpu) << "the gradient of Tensor::to must come back to the source";
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(24, 3.0f));
}

}  // namespace

void register_stream_checks(const ClassInfo& info) {
  const std::string suite_name = "Backend/" + info.class_name;
  register_check(suite_name, "Streams/DefaultAndGuard", [info] { check_default_stream(info); });
  register_check(suite_name, "Streams/EventOrdersStreams",
                 [info] { check_event_orders_streams(info); });
  register_check(suite_name, "Streams/HostAndDeviceCopies", [info] { check_copies(info); });
  register_check(suite_name, "Streams/TensorTo", [info] { check_tensor_to(info); });
}

}  // namespace trainyard::conformance
