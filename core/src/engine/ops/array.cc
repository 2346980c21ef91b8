// The array ops. Shapes and data movement: reshape and views, slice, concat, split, transpose, pad,
// gather, scatter_add, one_hot, top_k, cast, copy.
#include <algorithm>
#include <array>
#include <numeric>

#include "engine/ops/common.h"

namespace trainyard {

// clang-format off
#define TRAINYARD_ARRAY_OPS(X) \
  X(kConcat, "concat", -1, 1, AxisAttrs, "(inputs...) -> joined along the axis; any dtype") \
  X(kSlice, "slice", 1, 1, SliceAttrs, "x -> x[begin : begin + size] per dim; any dtype") \
  X(kTranspose, "transpose", 1, 1, PermAttrs, "x -> dims permuted: output dim i is input dim perm[i]; any dtype") \
  X(kPad, "pad", 1, 1, PadAttrs, "x -> padded before/after each dim with value (cast to x's dtype); any dtype") \
  X(kGather, "gather", 2, 1, AxisAttrs, "(params, indices i32/i64) -> params[:axis] + indices.shape + params[axis+1:]; an index outside [0, dim) is InvalidArgument naming it") \
  X(kScatterAdd, "scatter_add", 2, 1, ScatterAttrs, "(updates, indices) -> zeros of output_shape with updates added at indices along axis (gather's gradient)") \
  X(kOneHot, "one_hot", 1, 1, OneHotAttrs, "(indices i32/i64) -> [..., depth] of dtype: on or off") \
  X(kTopK, "top_k", 1, 2, TopKAttrs, "x [..., N] -> (values [..., k], indices i64 [..., k]), descending, stable") \
  X(kCast, "cast", 1, 1, CastAttrs, "x -> dtype (float -> int truncates toward zero; -> bool is != 0)") \
  X(kCopy, "copy", 1, 1, NoAttrs, "x -> a contiguous copy; any dtype")
// clang-format on
TRAINYARD_DEFINE_OP_FAMILY(array, TRAINYARD_ARRAY_OPS)

namespace {
using namespace ops_internal;

Shape reshape_target(const Tensor& x, const Shape& shape) {
  int64_t known = 1;
  int unknown = -1;
  std::vector<int64_t> dims = shape.to_vector();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) invalid("reshape", "more than one -1 in " + shape.to_string());
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      invalid("reshape", "negative dimension in " + shape.to_string());
    } else {
      known *= dims[i];
    }
  }
  int64_t total = x.num_elements();
  if (unknown >= 0) {
    if (known == 0 || total % known != 0) {
      invalid("reshape", "cannot reshape " + x.description() + " to " + shape.to_string());
    }
    dims[static_cast<std::size_t>(unknown)] = total / known;
  } else if (known != total) {
    invalid("reshape", "cannot reshape " + x.description() + " (" + std::to_string(total) +
                           " elements) to " + shape.to_string());
  }
  return Shape(dims);
}

}  // namespace

namespace ops {
using namespace ops_internal;

// ---- Shapes and data movement ----

Tensor reshape(const Tensor& x, const Shape& shape) {
  require_defined("reshape", x, "the input");
  Shape target = reshape_target(x, shape);
  Tensor y = x.with_shape(target, x.byte_offset());
  if (should_record({&x})) {
    Shape original = x.shape();
    record(kCopy.name(), {&x}, std::span<Tensor>(&y, 1),
           [original](GradOutputs g) -> Grads { return {reshape(g[0], original)}; });
  }
  return y;
}

Tensor slice_outer(const Tensor& x, int64_t begin, int64_t size) {
  require_defined("slice_outer", x, "the input");
  if (x.shape().rank() == 0) invalid("slice_outer", "cannot slice a scalar");
  int64_t n = x.shape()[0];
  if (begin < 0 || size < 0 || begin + size > n) {
    invalid("slice_outer", "rows [" + std::to_string(begin) + ", " + std::to_string(begin + size) +
                               ") are out of range for " + x.description());
  }
  Shape shape = x.shape();
  shape[0] = size;
  std::size_t row_bytes = n == 0 ? 0 : x.size_bytes() / static_cast<std::size_t>(n);
  Tensor y = x.with_shape(shape, x.byte_offset() + static_cast<std::size_t>(begin) * row_bytes);
  if (should_record({&x})) {
    std::vector<std::pair<int64_t, int64_t>> pads(x.shape().rank(), {0, 0});
    pads[0] = {begin, n - begin - size};
    record(kSlice.name(), {&x}, std::span<Tensor>(&y, 1),
           [pads](GradOutputs g) -> Grads { return {pad(g[0], pads)}; });
  }
  return y;
}

Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  Backend& backend = common_backend("slice", {&x});
  std::size_t rank = x.shape().rank();
  if (begin.size() != rank || size.size() != rank) {
    invalid("slice",
            "begin and size need " + std::to_string(rank) + " entries for " + x.description());
  }
  SliceAttrs attrs;
  std::vector<int64_t> dims(rank);
  bool outer_only = true;
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t d = x.shape()[i];
    int64_t s = size[i] == -1 ? d - begin[i] : size[i];
    if (begin[i] < 0 || s < 0 || begin[i] + s > d) {
      invalid("slice", "dimension " + std::to_string(i) + ": [" + std::to_string(begin[i]) + ", " +
                           std::to_string(begin[i] + s) + ") is out of range for " +
                           x.description());
    }
    attrs.begin[i] = begin[i];
    attrs.size[i] = s;
    dims[i] = s;
    if (i > 0 && (begin[i] != 0 || s != d)) outer_only = false;
  }
  if (rank > 0 && outer_only) return slice_outer(x, begin[0], dims[0]);
  Tensor y = run<1>(backend, kSlice, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    std::vector<std::pair<int64_t, int64_t>> pads(rank);
    for (std::size_t i = 0; i < rank; ++i) pads[i] = {begin[i], x.shape()[i] - begin[i] - dims[i]};
    record(kSlice.name(), {&x}, std::span<Tensor>(&y, 1),
           [pads](GradOutputs g) -> Grads { return {pad(g[0], pads)}; });
  }
  return y;
}

Tensor concat(std::span<const Tensor> inputs, int64_t axis) {
  if (inputs.empty()) invalid("concat", "needs at least one input");
  Backend* backend = nullptr;
  for (const Tensor& t : inputs) {
    require_defined("concat", t, "an input");
    if (backend == nullptr) backend = &t.backend();
    if (&t.backend() != backend) {
      invalid("concat", "inputs are on different devices: " + inputs[0].description() + " and " +
                            t.description());
    }
  }
  const Tensor& first = inputs[0];
  std::size_t rank = first.shape().rank();
  if (rank == 0) invalid("concat", "cannot concatenate scalars");
  AxisAttrs attrs{normalize_axis("concat", axis, rank, first)};
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  Shape out = first.shape();
  out[a] = 0;
  for (const Tensor& t : inputs) {
    require_same_dtype("concat", first, t);
    bool fits = t.shape().rank() == rank;
    for (std::size_t i = 0; fits && i < rank; ++i)
      fits = i == a || t.shape()[i] == first.shape()[i];
    if (!fits) {
      invalid("concat", "shapes differ outside axis " + std::to_string(attrs.axis) + ": " +
                            first.description() + " and " + t.description());
    }
    out[a] += t.shape()[a];
  }
  Tensor y = Tensor::empty(*backend, out, first.dtype());
  launch(*backend, kConcat, inputs, std::span<Tensor>(&y, 1), &attrs);
  if (is_float(first.dtype()) && should_record(inputs)) {
    std::vector<int64_t> sizes;
    for (const Tensor& t : inputs) sizes.push_back(t.shape()[a]);
    record(kConcat.name(), inputs, std::span<Tensor>(&y, 1),
           [sizes, attrs](GradOutputs g) -> Grads { return split(g[0], sizes, attrs.axis); });
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis) {
  require_defined("split", x, "the input");
  std::size_t rank = x.shape().rank();
  std::size_t a = static_cast<std::size_t>(normalize_axis("split", axis, rank, x));
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.shape()[a]) {
    invalid("split", "sizes add up to " + std::to_string(total) + " but axis " + std::to_string(a) +
                         " of " + x.description() + " has " + std::to_string(x.shape()[a]));
  }
  std::vector<Tensor> parts;
  {
    // One tape node for all the parts, below: recording each slice would give each part's
    // gradient its own pad to the whole input, O(parts^2) work for a sequence split by step.
    NoGradScope unrecorded;
    int64_t offset = 0;
    for (int64_t s : sizes) {
      std::vector<int64_t> begin(rank, 0), size = x.shape().to_vector();
      begin[a] = offset;
      size[a] = s;
      parts.push_back(slice(x, begin, size));
      offset += s;
    }
  }
  if (should_record({&x})) {
    const int64_t axis_index = static_cast<int64_t>(a);
    record("split", {&x}, std::span<Tensor>(parts),
           [axis_index](GradOutputs g) -> Grads { return {concat(g, axis_index)}; });
  }
  return parts;
}

Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  Backend& backend = common_backend("transpose", {&x});
  std::size_t rank = x.shape().rank();
  if (perm.size() != rank) {
    invalid("transpose",
            "perm has " + std::to_string(perm.size()) + " entries for " + x.description());
  }
  PermAttrs attrs;
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> dims(rank), inverse(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t p = normalize_axis("transpose", perm[i], rank, x);
    if (seen[static_cast<std::size_t>(p)])
      invalid("transpose", "perm repeats axis " + std::to_string(p));
    seen[static_cast<std::size_t>(p)] = true;
    attrs.perm[i] = p;
    dims[i] = x.shape()[static_cast<std::size_t>(p)];
    inverse[static_cast<std::size_t>(p)] = static_cast<int64_t>(i);
  }
  Tensor y = run<1>(backend, kTranspose, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(kTranspose.name(), {&x}, std::span<Tensor>(&y, 1),
           [inverse](GradOutputs g) -> Grads { return {transpose(g[0], inverse)}; });
  }
  return y;
}

Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> paddings, double value) {
  Backend& backend = common_backend("pad", {&x});
  std::size_t rank = x.shape().rank();
  if (paddings.size() != rank) {
    invalid("pad",
            "needs " + std::to_string(rank) + " (before, after) pairs for " + x.description());
  }
  PadAttrs attrs;
  attrs.value = value;
  std::vector<int64_t> dims(rank), begin(rank), size(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    if (paddings[i].first < 0 || paddings[i].second < 0) {
      invalid("pad", "negative padding on dimension " + std::to_string(i));
    }
    attrs.before[i] = paddings[i].first;
    attrs.after[i] = paddings[i].second;
    dims[i] = x.shape()[i] + paddings[i].first + paddings[i].second;
    begin[i] = paddings[i].first;
    size[i] = x.shape()[i];
  }
  Tensor y = run<1>(backend, kPad, {x}, &attrs, Shape(dims), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(kPad.name(), {&x}, std::span<Tensor>(&y, 1),
           [begin, size](GradOutputs g) -> Grads { return {slice(g[0], begin, size)}; });
  }
  return y;
}

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis) {
  Backend& backend = common_backend("gather", {&params, &indices});
  if (!is_index(indices.dtype())) {
    invalid("gather", "indices must be i32 or i64, got " + indices.description());
  }
  std::size_t rank = params.shape().rank();
  if (rank == 0) invalid("gather", "cannot gather from a scalar");
  AxisAttrs attrs{normalize_axis("gather", axis, rank, params)};
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + a);
  for (int64_t d : indices.shape().dims()) dims.push_back(d);
  for (std::size_t i = a + 1; i < rank; ++i) dims.push_back(params.shape()[i]);
  Tensor y = run<2>(backend, kGather, {params, indices}, &attrs, Shape(dims), params.dtype());
  if (is_float(params.dtype()) && should_record({&params})) {
    Tensor is = detached(indices);
    Shape shape = params.shape();
    record(kGather.name(), {&params, nullptr}, std::span<Tensor>(&y, 1),
           [is, shape, attrs](GradOutputs g) -> Grads {
             return {scatter_add(g[0], is, attrs.axis, shape), Tensor()};
           });
  }
  return y;
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis,
                   const Shape& output_shape) {
  Backend& backend = common_backend("scatter_add", {&updates, &indices});
  require_float("scatter_add", updates);
  if (!is_index(indices.dtype())) {
    invalid("scatter_add", "indices must be i32 or i64, got " + indices.description());
  }
  std::size_t rank = output_shape.rank();
  if (rank == 0) invalid("scatter_add", "the output cannot be a scalar");
  ScatterAttrs attrs;
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    invalid("scatter_add", "axis " + std::to_string(axis) + " is out of range for the output " +
                               output_shape.to_string());
  }
  attrs.axis = axis < 0 ? axis + r : axis;
  attrs.output_rank = rank;
  for (std::size_t i = 0; i < rank; ++i) attrs.output_shape[i] = output_shape[i];
  // updates must be output[:axis] + indices.shape + output[axis+1:]
  std::size_t a = static_cast<std::size_t>(attrs.axis);
  std::vector<int64_t> expected(output_shape.dims().begin(), output_shape.dims().begin() + a);
  for (int64_t d : indices.shape().dims()) expected.push_back(d);
  for (std::size_t i = a + 1; i < rank; ++i) expected.push_back(output_shape[i]);
  if (updates.shape() != Shape(expected)) {
    invalid("scatter_add", "updates " + updates.description() + " must have shape " +
                               Shape(expected).to_string() + " for indices " +
                               indices.description() + " into " + output_shape.to_string());
  }
  Tensor y =
      run<2>(backend, kScatterAdd, {updates, indices}, &attrs, output_shape, updates.dtype());
  if (should_record({&updates})) {
    Tensor is = detached(indices);
    record(kScatterAdd.name(), {&updates, nullptr}, std::span<Tensor>(&y, 1),
           [is, attrs](GradOutputs g) -> Grads {
             return {gather(g[0], is, attrs.axis), Tensor()};
           });
  }
  return y;
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DType dtype) {
  Backend& backend = common_backend("one_hot", {&indices});
  if (!is_index(indices.dtype())) {
    invalid("one_hot", "indices must be i32 or i64, got " + indices.description());
  }
  if (depth < 0) invalid("one_hot", "depth must be >= 0, got " + std::to_string(depth));
  OneHotAttrs attrs{depth, on_value, off_value, dtype};
  std::vector<int64_t> dims = indices.shape().to_vector();
  dims.push_back(depth);
  return run<1>(backend, kOneHot, {indices}, &attrs, Shape(dims), dtype);
}

std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k) {
  Backend& backend = common_backend("top_k", {&x});
  if (!is_float(x.dtype()) && !is_int(x.dtype())) {
    invalid("top_k", "expects a float or integer tensor, got " + x.description());
  }
  if (x.shape().rank() == 0) invalid("top_k", "needs rank >= 1, got " + x.description());
  int64_t n = x.shape()[x.shape().rank() - 1];
  if (k < 0 || k > n) {
    invalid("top_k", "k = " + std::to_string(k) + " is out of range for " + x.description());
  }
  TopKAttrs attrs{k};
  Shape out = x.shape();
  out[out.rank() - 1] = k;
  std::array<Tensor, 2> outputs = {Tensor::empty(backend, out, x.dtype()),
                                   Tensor::empty(backend, out, DType::kI64)};
  std::array<Tensor, 1> inputs = {x};
  launch(backend, kTopK, inputs, outputs, &attrs);
  return {outputs[0], outputs[1]};
}

Tensor cast(const Tensor& x, DType dtype) {
  Backend& backend = common_backend("cast", {&x});
  if (x.dtype() == dtype) return x;
  CastAttrs attrs{dtype};
  Tensor y = run<1>(backend, kCast, {x}, &attrs, x.shape(), dtype);
  if (is_float(x.dtype()) && is_float(dtype) && should_record({&x})) {
    DType original = x.dtype();
    record(kCast.name(), {&x}, std::span<Tensor>(&y, 1),
           [original](GradOutputs g) -> Grads { return {cast(g[0], original)}; });
  }
  return y;
}

Tensor copy(const Tensor& x) {
  Backend& backend = common_backend("copy", {&x});
  Tensor y = run<1>(backend, kCopy, {x}, nullptr, x.shape(), x.dtype());
  if (is_float(x.dtype()) && should_record({&x})) {
    record(kCopy.name(), {&x}, std::span<Tensor>(&y, 1),
           [](GradOutputs g) -> Grads { return {g[0]}; });
  }
  return y;
}

void assign(Tensor& target, const Tensor& value) {
  Backend& backend = common_backend("assign", {&target, &value});
  require_same_dtype("assign", target, value);
  require_same_shape("assign", target, value);
  std::array<Tensor, 1> in = {value};
  launch(backend, kCopy, in, std::span<Tensor>(&target, 1), nullptr);
}

}  // namespace ops
}  // namespace trainyard
