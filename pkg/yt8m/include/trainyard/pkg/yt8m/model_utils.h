// The YouTube-8M starter code's model utilities (model_utils.py), which the frame-level models
// use to sample and pool frames:
//
//   sample_random_frames    SampleRandomFrames: num_samples frames per video, each index drawn
//                           uniformly from [0, num_frames), with replacement, in draw order.
//   sample_random_sequence  SampleRandomSequence: num_samples consecutive frames from a start
//                           drawn uniformly from [0, max(num_frames - num_samples, 0)]; a video
//                           shorter than num_samples repeats its last frame.
//   frame_pooling           FramePooling: "average" or "max" over the frame axis of
//                           [B, T, D] -> [B, D], or "none" -> [B * T, D].
//
// Inputs are model_input [B, T, D] (T = max_frames; frames past num_frames are padding) and
// num_frames, i32 or i64 [B] or [B, 1], as the batch gives them. The indices are computed as the
// original computes them: floor(u * num_frames) with u ~ U[0, 1) in f32, drawn from `generator`
// (the model seeds it from ModelContext::seed(), so a step draws the same frames on a rerun), and
// are clamped to num_frames - 1, which the original's f32 product can reach for long videos. A
// video with num_frames 0 gets frame 0. Sampling is a gather, so gradients flow to the sampled
// frames. Like the original, average pooling divides by T, padding included.
//
// Errors: InvalidArgument naming the function and the shapes, for a model_input that is not
// [B, T, D], a num_frames that does not hold B counts, num_samples <= 0, or an unknown pooling
// method (naming the known ones).
#ifndef TRAINYARD_PKG_YT8M_MODEL_UTILS_H_
#define TRAINYARD_PKG_YT8M_MODEL_UTILS_H_

#include <cstdint>
#include <string_view>

#include "trainyard/ops.h"
#include "trainyard/tensor.h"

namespace trainyard::yt8m {

// [B, T, D] -> [B, num_samples, D].
Tensor sample_random_frames(const Tensor& model_input, const Tensor& num_frames,
                            int64_t num_samples, Generator& generator);

// [B, T, D] -> [B, num_samples, D].
Tensor sample_random_sequence(const Tensor& model_input, const Tensor& num_frames,
                              int64_t num_samples, Generator& generator);

enum class FramePoolingMethod { kAverage, kMax, kNone };

// "average", "max" or "none", as the dbof_pooling_method flag spells them.
FramePoolingMethod frame_pooling_method(std::string_view name);

Tensor frame_pooling(const Tensor& frames, FramePoolingMethod method);

}  // namespace trainyard::yt8m

#endif  // TRAINYARD_PKG_YT8M_MODEL_UTILS_H_
