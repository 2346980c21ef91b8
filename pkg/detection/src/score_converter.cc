#include "trainyard/pkg/detection/score_converter.h"

#include <algorithm>
#include <cmath>

#include "trainyard/error.h"

namespace trainyard::detection {

std::vector<float> convert_scores(std::span<const float> logits, int64_t num_classes,
                                  ScoreConverter converter, double logit_scale) {
  if (num_classes <= 0 || logits.size() % static_cast<std::size_t>(num_classes) != 0) {
    throw InvalidArgument("convert_scores: " + std::to_string(logits.size()) +
                          " logits are not rows of " + std::to_string(num_classes) + " classes");
  }
  if (logit_scale == 0.0) throw InvalidArgument("convert_scores: logit_scale is 0");
  const float scale = static_cast<float>(logit_scale);
  std::vector<float> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] / scale;
  switch (converter) {
    case ScoreConverter::kIdentity:
      break;
    case ScoreConverter::kSigmoid:
      for (float& v : out) v = 1.0f / (1.0f + std::exp(-v));
      break;
    case ScoreConverter::kSoftmax:
      for (std::size_t r = 0; r < out.size(); r += static_cast<std::size_t>(num_classes)) {
        float* row = &out[r];
        const float m = *std::max_element(row, row + num_classes);
        float sum = 0.0f;
        for (int64_t c = 0; c < num_classes; ++c) {
          row[c] = std::exp(row[c] - m);
          sum += row[c];
        }
        for (int64_t c = 0; c < num_classes; ++c) row[c] /= sum;
      }
      break;
  }
  return out;
}

ScoreConverter score_converter_from_name(const std::string& name) {
  if (name == "IDENTITY") return ScoreConverter::kIdentity;
  if (name == "SIGMOID") return ScoreConverter::kSigmoid;
  if (name == "SOFTMAX") return ScoreConverter::kSoftmax;
  throw InvalidArgument("unknown score converter '" + name +
                        "' (known: IDENTITY, SIGMOID, SOFTMAX)");
}

}  // namespace trainyard::detection
