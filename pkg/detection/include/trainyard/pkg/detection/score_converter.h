// The post-processing score converters of the Object Detection API
// (builders/post_processing_builder.py): class logits divided by logit_scale, then IDENTITY,
// SIGMOID or SOFTMAX (over each row of num_classes).
#ifndef TRAINYARD_PKG_DETECTION_SCORE_CONVERTER_H_
#define TRAINYARD_PKG_DETECTION_SCORE_CONVERTER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace trainyard::detection {

enum class ScoreConverter { kIdentity, kSigmoid, kSoftmax };

// logits: row-major [N, num_classes] (size a multiple of num_classes, InvalidArgument otherwise;
// logit_scale must not be 0). Returns scores of the same shape.
std::vector<float> convert_scores(std::span<const float> logits, int64_t num_classes,
                                  ScoreConverter converter, double logit_scale = 1.0);

// "IDENTITY", "SIGMOID", "SOFTMAX" (post_processing.proto's names); InvalidArgument listing them
// otherwise.
ScoreConverter score_converter_from_name(const std::string& name);

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_SCORE_CONVERTER_H_
