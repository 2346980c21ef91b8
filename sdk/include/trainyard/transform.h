// Per-example transforms: decode, resize, augment one parsed record in the input threads.
//
// The input pipeline runs a chain of ExampleTransforms on every record right after
// Reader::parse(), in the reader threads, before shuffling and batching. A transform changes
// the features of one ParsedRecord in place (it may replace, add or remove features) and
// declares what it yields through features(), as a Reader does.
//
// Randomness: apply() receives an ExampleRandom, a counter-based Philox-4x32-10 stream
// (random.h) keyed by the pipeline's seed and the record's identity in the data (epoch, file,
// record index in that file) and by the transform's position in the chain. The same record
// therefore gets the same draws whatever the number of reader threads, the shuffle order or
// thread timing, and again when a run resumes by skipping the batches it had consumed. A
// transform must take all its randomness from that stream.
//
// apply() is called from several threads at once and must not modify the transform. It throws
// InvalidArgument (or DataLoss for undecodable data) naming `where` and the feature.
#ifndef TRAINYARD_TRANSFORM_H_
#define TRAINYARD_TRANSFORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/random.h"
#include "trainyard/reader.h"

namespace trainyard {

// A stream of random numbers private to one record and one transform. Draw i uses Philox
// block i / 4, lane i % 4, under the 64-bit key given by the pipeline.
class ExampleRandom {
 public:
  explicit ExampleRandom(uint64_t key) : key_(key) {}

  uint64_t key() const { return key_; }

  // The next 32 random bits.
  uint32_t bits() {
    if (lane_ == 4) {
      block_ = random::philox4x32_10(key_, counter_++);
      lane_ = 0;
    }
    return block_[lane_++];
  }

  // Uniform in [0, 1), with 24 random bits (as random.h's uniform f32).
  float uniform() { return random::uniform_f32(bits()); }

  // True with probability p (p <= 0: never, p >= 1: always).
  bool bernoulli(float p) { return uniform() < p; }

  // Uniform in [low, high).
  float uniform(float low, float high) { return low + (high - low) * uniform(); }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  random::Block block_{};
  int lane_ = 4;
};

class TRAINYARD_API ExampleTransform : public PluginObject {
 public:
  ~ExampleTransform() override;

  // A short name for errors ("RandomHorizontalFlip").
  virtual std::string name() const = 0;

  // The features this transform yields given those it receives (the reader's, or the previous
  // transform's). Throws InvalidArgument when a feature it needs is missing or has the wrong
  // dtype or rank, naming the feature. The default keeps `input`.
  virtual std::vector<FeatureSpec> features(std::vector<FeatureSpec> input) const { return input; }

  // Transforms one record in place. `record` holds the features given to features(), with
  // shapes that match their declarations.
  virtual void apply(ParsedRecord& record, ExampleRandom& random,
                     const RecordLocation& where) const = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_TRANSFORM_H_
