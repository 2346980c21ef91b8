// A record of the ops one thread launches: what the ONNX export (onnx_export.h) turns into a
// graph. While a GraphCapture is alive, every op the engine launches on the thread that made it
// (kernel launches through the core; views such as reshape launch nothing and are not recorded)
// is appended with its declaration, a copy of its attribute struct and handles to its input and
// output tensors. The handles keep every buffer alive, so no two recorded tensors of the capture
// share storage unless one is a view of the other: a tensor is identified by its storage, byte
// offset, shape and dtype. Ops launched on other threads (input pipeline, other tests) are not
// recorded. Copies to the host (Tensor::to_host, to_vector) on that thread are recorded too: a
// model that computes on the host from a tensor the graph computes would hold the result as a
// constant, so the export refuses a graph whose values were read so.
#ifndef TRAINYARD_CORE_GRAPH_CAPTURE_H_
#define TRAINYARD_CORE_GRAPH_CAPTURE_H_

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/op.h"
#include "trainyard/tensor.h"

namespace trainyard {

class TRAINYARD_API GraphCapture {
 public:
  struct Op {
    const OpInfo* op = nullptr;    // the declaration (name, family, attribute struct's name)
    std::vector<std::byte> attrs;  // a copy of the attribute struct, op->attrs_size bytes
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;  // as the kernel left them

    // The attribute struct; the caller names its type, which must be the one op->attrs names
    // and of op->attrs_size bytes (checked: InvalidArgument otherwise).
    template <class T>
    T attributes(const char* type_name) const {
      check_attributes(type_name, sizeof(T));
      T value{};
      std::memcpy(static_cast<void*>(&value), attrs.data(), sizeof(T));
      return value;
    }
    void check_attributes(const char* type_name, std::size_t size) const;
  };

  // Starts recording this thread's launches. One capture per thread: a second one on the same
  // thread throws Error.
  GraphCapture();
  ~GraphCapture();  // stops recording
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  const std::vector<Op>& ops() const { return ops_; }
  // The tensors copied to the host on this thread while capturing, in order.
  const std::vector<Tensor>& host_reads() const { return host_reads_; }

  // Called by the engine after each kernel launch while this thread captures.
  void record(const OpInfo& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
              const void* attrs);

  // Called by Tensor::to_host while this thread captures.
  void record_host_read(const Tensor& t);

  // This thread's capture, or null.
  static GraphCapture* active();

 private:
  std::vector<Op> ops_;
  std::vector<Tensor> host_reads_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_GRAPH_CAPTURE_H_
