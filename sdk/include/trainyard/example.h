// A parsed view of tf.Example and tf.SequenceExample records, for readers.
//
// parse_example() and parse_sequence_example() read TensorFlow's wire format (feature.proto,
// example.proto) without Protocol Buffers: a reader plugin needs neither Protobuf nor a header
// generated from the core's protos. They accept what protobuf's own parser accepts, with its
// merge rules: a key that occurs twice keeps its last entry, a Feature whose list field occurs
// twice concatenates the values, a Feature that sets a different list than before keeps the
// last, packed and unpacked numbers are both read, unknown fields are skipped. Anything else
// (a truncated field, a length past the end, an invalid wire type, a key that is not UTF-8)
// throws DataLoss naming the record and what is wrong at which byte.
//
// Views: keys and bytes values are std::string_views into the record passed to the parser,
// valid while it lives. Floats and int64s are decoded into the view.
#ifndef TRAINYARD_EXAMPLE_H_
#define TRAINYARD_EXAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/reader.h"

namespace trainyard {

// One tf.train.Feature: a bytes, float or int64 list, or none (an empty Feature).
class TRAINYARD_API ExampleFeature {
 public:
  enum class Kind { kNone, kBytes, kFloat, kInt64 };

  Kind kind() const { return kind_; }
  // The values of the list kind() names; the other two are empty.
  const std::vector<std::string_view>& bytes() const { return bytes_; }
  const std::vector<float>& floats() const { return floats_; }
  const std::vector<int64_t>& int64s() const { return int64s_; }
  // Number of values of the list kind() names (0 for kNone).
  std::size_t size() const;
  // "a float list of 512 values", "an empty Feature (no list set)": for error messages.
  std::string description() const;

 private:
  friend class ExampleParser;
  Kind kind_ = Kind::kNone;
  std::vector<std::string_view> bytes_;
  std::vector<float> floats_;
  std::vector<int64_t> int64s_;
};

// A map of named entries (tf.train.Features, tf.train.FeatureLists), sorted by key, each key
// once.
template <class Value>
class ExampleMap {
 public:
  using Entry = std::pair<std::string_view, Value>;

  // The entry named `key`, or nullptr.
  const Value* find(std::string_view key) const {
    std::size_t low = 0, high = entries_.size();
    while (low < high) {
      const std::size_t mid = (low + high) / 2;
      if (entries_[mid].first < key) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low < entries_.size() && entries_[low].first == key ? &entries_[low].second : nullptr;
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  // "features 'id', 'labels'" or "no features", with `what` the plural noun: for errors.
  std::string describe_keys(const char* what) const {
    if (entries_.empty()) return std::string("no ") + what;
    std::string out = std::string(what) + " ";
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (i > 0) out += ", ";
      out += "'" + std::string(entries_[i].first) + "'";
    }
    return out;
  }

 private:
  friend class ExampleParser;
  std::vector<Entry> entries_;
};

using ExampleFeatures = ExampleMap<ExampleFeature>;
// tf.train.FeatureList: one Feature per step (per frame).
using ExampleFeatureList = std::vector<ExampleFeature>;

// tf.train.Example.
struct ParsedExample {
  ExampleFeatures features;
};

// tf.train.SequenceExample.
struct ParsedSequenceExample {
  ExampleFeatures context;
  ExampleMap<ExampleFeatureList> feature_lists;
};

// Parse one serialized record; throw DataLoss naming `where` when it is not one.
TRAINYARD_API ParsedExample parse_example(std::string_view record, const RecordLocation& where);
TRAINYARD_API ParsedSequenceExample parse_sequence_example(std::string_view record,
                                                           const RecordLocation& where);

}  // namespace trainyard

#endif  // TRAINYARD_EXAMPLE_H_
