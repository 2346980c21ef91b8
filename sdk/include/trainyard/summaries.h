// Where plugins write what TensorBoard shows: the event file of a training run or of an
// evaluation. Implemented by the core's SummaryWriter.
#ifndef TRAINYARD_SUMMARIES_H_
#define TRAINYARD_SUMMARIES_H_

#include <cstdint>
#include <string_view>

#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API Summaries {
 public:
  virtual ~Summaries();
  // A scalar as Summary.Value.simple_value (a float, as in TensorFlow).
  virtual void add_scalar(std::string_view tag, double value, int64_t step) = 0;
  // A PNG-encoded Summary.Image of height * width * channels bytes, row-major and channels
  // interleaved; channels is 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA).
  virtual void add_image(std::string_view tag, int height, int width, int channels,
                         const uint8_t* pixels, int64_t step) = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_SUMMARIES_H_
