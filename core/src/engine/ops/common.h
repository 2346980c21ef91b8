// What the op families' files share: input checks, the kernel launch, broadcasting helpers.
// Internal to the core's op files (core/src/engine/ops/*.cc).
#ifndef TRAINYARD_CORE_SRC_OPS_COMMON_H_
#define TRAINYARD_CORE_SRC_OPS_COMMON_H_

#include <algorithm>
#include <array>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/autodiff_internal.h"
#include "engine/dispatch.h"
#include "engine/ops/op_def.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/graph_capture.h"
#include "trainyard/core/trace.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"

namespace trainyard::ops_internal {

using Grads = std::vector<Tensor>;
using GradOutputs = std::span<const Tensor>;

inline bool is_float(DType d) { return d == DType::kF32 || d == DType::kF64; }
inline bool is_int(DType d) { return d == DType::kI32 || d == DType::kI64; }
inline bool is_index(DType d) { return d == DType::kI32 || d == DType::kI64; }

[[noreturn]] inline void invalid(const char* op, const std::string& message) {
  throw InvalidArgument(std::string(op) + ": " + message);
}

inline void require_defined(const char* op, const Tensor& t, const char* role) {
  if (!t.defined()) invalid(op, std::string(role) + " is an undefined tensor");
}

inline Backend& common_backend(const char* op, std::initializer_list<const Tensor*> inputs) {
  Backend* backend = nullptr;
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs) {
    require_defined(op, *t, "an input");
    if (backend == nullptr) {
      backend = &t->backend();
      first = t;
    } else if (&t->backend() != backend) {
      invalid(op, "inputs are on different devices: " + first->description() + " and " +
                      t->description());
    }
  }
  return *backend;
}

inline void require_float(const char* op, const Tensor& t) {
  if (!is_float(t.dtype())) {
    invalid(op, "expects a float tensor (f32 or f64), got " + t.description());
  }
}

inline void require_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    invalid(op, "dtypes differ: " + a.description() + " and " + b.description());
  }
}

inline void require_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    invalid(op, "shapes differ: " + a.description() + " and " + b.description());
  }
}

inline int64_t normalize_axis(const char* op, int64_t axis, std::size_t rank, const Tensor& t) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    invalid(op, "axis " + std::to_string(axis) + " is out of range for " + t.description());
  }
  return axis < 0 ? axis + r : axis;
}

// The tensor's data without its autodiff history, for saving in a backward function (saving
// an output with its history would make the node own itself).
inline Tensor detached(const Tensor& t) { return t.with_shape(t.shape(), t.byte_offset()); }

inline void launch(Backend& backend, const OpDef& op, std::span<const Tensor> inputs,
                   std::span<Tensor> outputs, const void* attrs) {
  KernelFn fn = KernelDispatch::find(backend, op);
  if (StepTrace* trace = StepTrace::active(); trace != nullptr) [[unlikely]] {
    StepTrace::Event e;
    e.name = op.name();
    e.category = "op";
    auto shapes = [](std::span<const Tensor> ts) {
      std::string s = "[";
      for (std::size_t i = 0; i < ts.size(); ++i) {
        s += (i ? ", \"" : "\"") + ts[i].description() + "\"";
      }
      return s + "]";
    };
    e.args = "\"inputs\": " + shapes(inputs) +
             ", \"outputs\": " + shapes(std::span<const Tensor>(outputs.data(), outputs.size()));
    e.start_us = trace->now_us();
    fn(backend, KernelArgs{inputs, outputs, attrs, &backend.current_stream(), op.name(),
                           op.info.attrs_size});
    e.duration_us = trace->now_us() - e.start_us;
    trace->add(std::move(e));
  } else {
    fn(backend, KernelArgs{inputs, outputs, attrs, &backend.current_stream(), op.name(),
                           op.info.attrs_size});
  }
  if (GraphCapture* capture = GraphCapture::active(); capture != nullptr) [[unlikely]] {
    capture->record(op.info, inputs, std::span<const Tensor>(outputs.data(), outputs.size()),
                    attrs);
  }
}

template <std::size_t N>
Tensor run(Backend& backend, const OpDef& op, const std::array<Tensor, N>& inputs,
           const void* attrs, const Shape& shape, DType dtype) {
  Tensor out = Tensor::empty(backend, shape, dtype);
  launch(backend, op, inputs, std::span<Tensor>(&out, 1), attrs);
  return out;
}

// The NumPy broadcast of two shapes; false when they do not broadcast.
inline bool broadcast_dims(const Shape& x, const Shape& y, Shape* out) {
  std::size_t rank = std::max(x.rank(), y.rank());
  std::vector<int64_t> dims(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t dx = i < rank - x.rank() ? 1 : x[i - (rank - x.rank())];
    int64_t dy = i < rank - y.rank() ? 1 : y[i - (rank - y.rank())];
    if (dx != dy && dx != 1 && dy != 1) return false;
    dims[i] = dx == 1 ? dy : dx;
  }
  *out = Shape(dims);
  return true;
}

inline Shape broadcast_shapes(const char* op, const Tensor& a, const Tensor& b) {
  Shape out;
  if (!broadcast_dims(a.shape(), b.shape(), &out)) {
    invalid(op,
            "shapes cannot be broadcast together: " + a.description() + " and " + b.description());
  }
  return out;
}

// Sums `g` down to `shape`, undoing a broadcast.
inline Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int64_t> axes;
  std::size_t lead = g.shape().rank() - shape.rank();
  for (std::size_t i = 0; i < g.shape().rank(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) {
      axes.push_back(static_cast<int64_t>(i));
    }
  }
  Tensor summed = axes.empty() ? g : ops::reduce_sum(g, axes, /*keepdims=*/true);
  return ops::reshape(summed, shape);
}

inline Tensor broadcast_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  return ops::add(ops::zeros(t.backend(), shape, t.dtype()), t);
}

inline Tensor scalar_like(const Tensor& t, double value) {
  return ops::scalar(t.backend(), value, t.dtype());
}

// d activation(z) / dz times dy, from the activation's output y (math.cc; relu's gradient
// from its output equals that from its input).
Tensor activation_grad(Activation activation, const Tensor& y, const Tensor& dy);

}  // namespace trainyard::ops_internal

#endif  // TRAINYARD_CORE_SRC_OPS_COMMON_H_
