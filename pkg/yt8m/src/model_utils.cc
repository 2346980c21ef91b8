#include "trainyard/pkg/yt8m/model_utils.h"

#include <string>
#include <vector>

#include "trainyard/error.h"

namespace trainyard::yt8m {
namespace {

void check_inputs(const char* function, const Tensor& model_input, const Tensor& num_frames,
                  int64_t num_samples) {
  const Shape& s = model_input.shape();
  if (s.rank() != 3) {
    throw InvalidArgument(std::string(function) + ": model_input is " + model_input.description() +
                          "; expected [batch, max_frames, features]");
  }
  const Shape& n = num_frames.shape();
  const bool counts = (n.rank() == 1 || (n.rank() == 2 && n[1] == 1)) && n[0] == s[0];
  const bool integer = num_frames.dtype() == DType::kI32 || num_frames.dtype() == DType::kI64;
  if (!counts || !integer) {
    throw InvalidArgument(std::string(function) + ": num_frames is " + num_frames.description() +
                          "; expected i32 or i64 [" + std::to_string(s[0]) + "] or [" +
                          std::to_string(s[0]) + ", 1] for model_input " +
                          model_input.description());
  }
  if (num_samples <= 0) {
    throw InvalidArgument(std::string(function) + ": num_samples is " +
                          std::to_string(num_samples) + "; expected > 0");
  }
}

// num_frames as f32 [B, 1].
Tensor frame_counts(const Tensor& num_frames) {
  return ops::cast(ops::reshape(num_frames, Shape{num_frames.shape()[0], 1}), DType::kF32);
}

// Gathers model_input[b, frame_index[b, s], :] -> [B, S, D], with frame_index i32 [B, S]
// clamped to [0, max(num_frames - 1, 0)].
Tensor gather_frames(const Tensor& model_input, const Tensor& counts, Tensor frame_index) {
  const int64_t b = model_input.shape()[0], t = model_input.shape()[1];
  const int64_t d = model_input.shape()[2], s = frame_index.shape()[1];
  Backend& backend = model_input.backend();
  Tensor last =
      ops::cast(ops::maximum(ops::add(counts, -1.0), ops::zeros(backend, Shape{1})), DType::kI32);
  frame_index =
      ops::maximum(ops::minimum(frame_index, last), ops::zeros(backend, Shape{1}, DType::kI32));
  std::vector<int32_t> offsets(static_cast<std::size_t>(b));
  for (int64_t i = 0; i < b; ++i)
    offsets[static_cast<std::size_t>(i)] = static_cast<int32_t>(i * t);
  Tensor flat = ops::add(frame_index, Tensor::from_vector(backend, Shape{b, 1}, offsets));
  Tensor rows =
      ops::gather(ops::reshape(model_input, Shape{b * t, d}), ops::reshape(flat, Shape{b * s}), 0);
  return ops::reshape(rows, Shape{b, s, d});
}

}  // namespace

Tensor sample_random_frames(const Tensor& model_input, const Tensor& num_frames,
                            int64_t num_samples, Generator& generator) {
  check_inputs("sample_random_frames", model_input, num_frames, num_samples);
  const int64_t b = model_input.shape()[0];
  Tensor counts = frame_counts(num_frames);
  Tensor u = ops::random_uniform(model_input.backend(), Shape{b, num_samples}, generator);
  Tensor frame_index = ops::cast(ops::mul(u, counts), DType::kI32);
  return gather_frames(model_input, counts, frame_index);
}

Tensor sample_random_sequence(const Tensor& model_input, const Tensor& num_frames,
                              int64_t num_samples, Generator& generator) {
  check_inputs("sample_random_sequence", model_input, num_frames, num_samples);
  Backend& backend = model_input.backend();
  const int64_t b = model_input.shape()[0];
  Tensor counts = frame_counts(num_frames);
  Tensor max_start = ops::maximum(ops::add(counts, -static_cast<double>(num_samples)),
                                  ops::zeros(backend, Shape{1}));
  Tensor u = ops::random_uniform(backend, Shape{b, 1}, generator);
  Tensor start = ops::cast(ops::mul(u, ops::add(max_start, 1.0)), DType::kI32);
  std::vector<int32_t> range(static_cast<std::size_t>(num_samples));
  for (int64_t i = 0; i < num_samples; ++i)
    range[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
  Tensor frame_index = ops::add(start, Tensor::from_vector(backend, Shape{1, num_samples}, range));
  return gather_frames(model_input, counts, frame_index);
}

FramePoolingMethod frame_pooling_method(std::string_view name) {
  if (name == "average") return FramePoolingMethod::kAverage;
  if (name == "max") return FramePoolingMethod::kMax;
  if (name == "none") return FramePoolingMethod::kNone;
  throw InvalidArgument("frame pooling method '" + std::string(name) +
                        "' is not known; known methods: average, max, none");
}

Tensor frame_pooling(const Tensor& frames, FramePoolingMethod method) {
  if (frames.shape().rank() != 3) {
    throw InvalidArgument("frame_pooling: frames is " + frames.description() +
                          "; expected [batch, frames, features]");
  }
  switch (method) {
    case FramePoolingMethod::kAverage:
      return ops::reduce_mean(frames, {1});
    case FramePoolingMethod::kMax:
      return ops::reduce_max(frames, {1});
    case FramePoolingMethod::kNone:
      return ops::reshape(frames, Shape{-1, frames.shape()[2]});
  }
  throw InvalidArgument("frame_pooling: unknown method");
}

}  // namespace trainyard::yt8m
