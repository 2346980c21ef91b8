// TensorFlow's V1 checkpoints: one file, a table (sstable.h) whose empty key holds a
// SavedTensorSliceMeta (every tensor's name, dtype, shape and slices) and whose other entries
// each hold one SavedSlice (a tensor's name, the slice, the values in a TensorProto). TF-Slim's
// published checkpoints are in this layout; tf.compat.v1.train.Saver still writes it with
// write_version=V1. A partitioned variable is one tensor saved as several slices.
//
// Internal to libtrainyard_core (checkpoint_reader.cc reads checkpoints of both layouts through
// CheckpointReader).
#ifndef TRAINYARD_CORE_CHECKPOINT_V1_H_
#define TRAINYARD_CORE_CHECKPOINT_V1_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/core/checkpoint.h"

namespace trainyard::checkpoint_internal {

// TensorFlow's DataType number to a Trainyard dtype (nullopt where there is none), and its name.
std::optional<DType> from_tf_dtype(int dtype);
std::string tf_dtype_name(int dtype);

struct V1Tensor {
  CheckpointTensorInfo info;
  std::string bytes;  // the whole tensor, row-major little-endian; empty when unsupported
};

// Every tensor of the V1 checkpoint in `contents` (the file `path`), sorted by name, assembled
// from its slices. Throws DataLoss naming the file and the tensor when the table is corrupt, a
// slice lies outside its tensor or holds the wrong number of values, slices overlap or leave
// part of a tensor uncovered, or a tensor has more elements than the file has bytes.
std::vector<V1Tensor> read_v1_checkpoint(std::string_view contents, const std::string& path);

}  // namespace trainyard::checkpoint_internal

#endif  // TRAINYARD_CORE_CHECKPOINT_V1_H_
