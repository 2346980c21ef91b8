// Readers turn one serialized record into named features.
//
// The core does files, threads, shuffling, batching and prefetch; a Reader only parses one
// record (a serialized tf.Example or tf.SequenceExample) and declares what it yields. parse()
// is called from several input threads at once and must not modify the reader.
#ifndef TRAINYARD_READER_H_
#define TRAINYARD_READER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/plugin.h"
#include "trainyard/tensor.h"

namespace trainyard {

// A declared feature. A dimension of -1 varies per record (e.g. frames before padding).
struct FeatureSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// Host-side values of one feature of one record, row-major, host-endian; write the bytes with
// memcpy (or through a buffer of the element type), never through a cast pointer. A feature whose
// declared first dimension is a size may hold fewer rows than that (its leading rows, e.g. a
// video's frames before max_frames): the rows after them are zeros, written by the core where
// the record is batched, so a reader need not allocate or fill its padding.
struct ParsedFeature {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

struct ParsedRecord {
  std::string id;
  std::map<std::string, ParsedFeature> features;
};

// Identifies a record in errors: "train-00.tfrecord, record 17".
struct RecordLocation {
  std::string file;
  int64_t record_index = 0;
};

class TRAINYARD_API Reader : public PluginObject {
 public:
  ~Reader() override;

  virtual std::vector<FeatureSpec> features() const = 0;
  // Throws DataLoss or InvalidArgument naming `where`, the key, what was expected and found.
  virtual ParsedRecord parse(std::string_view record, const RecordLocation& where) const = 0;
};

}  // namespace trainyard

#endif  // TRAINYARD_READER_H_
