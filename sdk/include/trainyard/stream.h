// Execution streams and events: how a backend orders work on its device.
//
// A Stream is an in-order queue of work on one backend's device: kernels and copies queued on
// it run one after another, and may run after the call that queued them returned (a CUDA
// stream). Work on different streams may overlap; an Event recorded on one stream and waited
// for on another orders them. A host-synchronous backend (the CPU) runs every piece of work
// before the call returns, so its streams and events are trivially complete; the core
// provides that implementation (SynchronousStream, SynchronousEvent) for such backends.
//
// Ownership: a backend owns its default stream; streams and events from create_stream() and
// create_event() are owned by the caller and keep their backend alive.
// Thread safety: a stream may be used from one thread at a time; events may be queried and
// waited for from any thread.
#ifndef TRAINYARD_STREAM_H_
#define TRAINYARD_STREAM_H_

#include <memory>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;

// What a Stream runs on, for code that hands it to a native library. kCuda: `handle` is the
// cudaStream_t (as void*). kHost: there is no queue; work is complete when the call that queued
// it returns, and `handle` is null. kOpaque: nothing a library can use.
struct NativeStream {
  DeviceKind kind = DeviceKind::kOpaque;
  void* handle = nullptr;
};

class TRAINYARD_API Stream {
 public:
  virtual ~Stream();
  virtual Backend& backend() const = 0;
  // Blocks the calling thread until all work queued so far on this stream has finished.
  // Throws the error of a failed piece of work, naming the op when a kernel failed.
  virtual void synchronize() = 0;
  // The native queue under this stream, for a library that queues its own work in order with
  // the backend's (NCCL): see NativeStream. The default says kOpaque.
  virtual NativeStream native_stream() const { return {}; }
};

class TRAINYARD_API Event {
 public:
  virtual ~Event();
  // Marks the point after all work queued so far on `stream` (a stream of the same backend).
  virtual void record(Stream& stream) = 0;
  // Makes work queued on `stream` after this call wait until the recorded point is reached.
  // Returns at once; the host does not wait.
  virtual void wait(Stream& stream) = 0;
  // Blocks the calling thread until the recorded point is reached (at once if never recorded).
  virtual void synchronize() = 0;
  // True when the recorded point has been reached (or nothing was recorded).
  virtual bool query() = 0;
};

// For backends whose work is complete when the call that queued it returns.
class TRAINYARD_API SynchronousStream final : public Stream {
 public:
  explicit SynchronousStream(Backend& backend) : backend_(&backend) {}
  Backend& backend() const override { return *backend_; }
  void synchronize() override {}
  NativeStream native_stream() const override { return {DeviceKind::kHost, nullptr}; }

 private:
  Backend* backend_;
};

class TRAINYARD_API SynchronousEvent final : public Event {
 public:
  void record(Stream&) override {}
  void wait(Stream&) override {}
  void synchronize() override {}
  bool query() override { return true; }
};

// Host memory for staging transfers (pinned, on a device that has such memory). Owned by the
// caller; keeps its backend alive.
class TRAINYARD_API HostBuffer {
 public:
  virtual ~HostBuffer();
  virtual void* data() const = 0;
  virtual std::size_t size_bytes() const = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_STREAM_H_
