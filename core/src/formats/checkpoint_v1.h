// TensorFlow's V1 checkpoints: one file, a table (sstable.h) whose empty key holds a
// SavedTensorSliceMeta (every tensor's name, dtype, shape and slices) and whose other entries
// each hold one SavedSlice (a tensor's name, the slice, the values in a TensorProto) under the
// key encode_tensor_name_slice gives. TF-Slim's published checkpoints are in this layout;
// tf.compat.v1.train.Saver still writes it with write_version=V1. A partitioned variable is one
// tensor saved as several slices.
//
// Read by slice, as TensorFlow's TensorSliceReader does: opening reads the table's footer, its
// index block and the block holding the metadata (the first); reading a tensor reads only the
// blocks that hold its slices, found through the index by their keys, and assembles it. What a
// read holds at once is the tensor, one block and the slices parsed from it; nothing else of the
// file stays in memory.
//
// Internal to libtrainyard_core (checkpoint_reader.cc reads checkpoints of both layouts through
// CheckpointReader).
#ifndef TRAINYARD_CORE_CHECKPOINT_V1_H_
#define TRAINYARD_CORE_CHECKPOINT_V1_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/sstable.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/proto/tensor_bundle.pb.h"

namespace trainyard::checkpoint_internal {

// TensorFlow's DataType number to a Trainyard dtype (nullopt where there is none), and its name.
std::optional<DType> from_tf_dtype(int dtype);
std::string tf_dtype_name(int dtype);

// The table key of a tensor's slice (saved_tensor_slice_util.cc's EncodeTensorNameSlice): in
// TensorFlow's OrderedCode, the number 0, the name, the number of extents, then each extent's
// start and length (-1 where the extent has none: the whole dimension).
std::string encode_tensor_name_slice(std::string_view name, const tf::TensorSliceProto& slice);

class V1Checkpoint {
 public:
  // Opens the V1 checkpoint in `file` (its name() names it in every error). `max_read_bytes`
  // bounds a tensor read() returns and each block it reads. Throws DataLoss naming the file when
  // the table or the metadata is corrupt: a tensor listed twice or with an unusable shape, a
  // slice outside its tensor or with no block to hold it, more elements than the file has bytes;
  // Unimplemented when the file needs a newer reader; Error naming the file when the metadata's
  // block is larger than max_read_bytes or cannot be allocated.
  V1Checkpoint(std::unique_ptr<sstable::TableFile> file, uint64_t max_read_bytes);
  ~V1Checkpoint();
  V1Checkpoint(const V1Checkpoint&) = delete;
  V1Checkpoint& operator=(const V1Checkpoint&) = delete;

  const std::string& path() const { return file_->name(); }
  // Every tensor, sorted by name.
  const std::vector<CheckpointTensorInfo>& tensors() const { return infos_; }

  // Tensor i of tensors(), which must be supported, whole: row-major little-endian bytes
  // assembled from its slices, read from the blocks that hold them. Throws DataLoss naming the
  // file and the tensor when a block is corrupt, a slice is not in the table, holds another
  // slice or another number of values, or slices overlap or leave part of the tensor uncovered;
  // Error naming the file and the tensor when the tensor or a block holding it is larger than
  // max_read_bytes or cannot be allocated.
  std::string read(std::size_t i) const;

 private:
  struct Slice {
    tf::TensorSliceProto extents;
    std::string key;
    sstable::BlockHandle block;
  };

  std::unique_ptr<sstable::TableFile> file_;
  std::unique_ptr<sstable::Table> table_;
  uint64_t max_read_bytes_;
  std::vector<CheckpointTensorInfo> infos_;
  std::vector<std::vector<Slice>> slices_;  // parallel to infos_
};

}  // namespace trainyard::checkpoint_internal

#endif  // TRAINYARD_CORE_CHECKPOINT_V1_H_
