// The serving input of the YouTube-8M starter code's export (export_model.py, readers.py) as
// TensorFlow ops: serialized examples parsed into the reader's "features" and "num_frames", and
// the video ids. Internal to the core; saved_model_export.cc builds on it.
//
// Video level (YT8MAggregatedFeatureReader.prepare_serialized_examples): ParseExampleV2 of the
// dense features `id_key` (tf.string []) and each feature name (tf.float32 [size]), in sorted key
// order as tf.io.parse_example passes them, then ConcatV2 of the features in feature_names order
// along axis 1 (an Identity for a single feature). num_frames is not made (the video-level
// models do not read it).
//
// Frame level (YT8MFrameFeatureReader): ParseSequenceExampleV2 of the context feature `id_key`
// and each feature name as a feature list of bytes (tf.io.RaggedFeature(tf.string)); per feature,
// DecodeRaw (uint8) of the frames' bytes, Cast to float, then utils.Dequantize's Mul by
// (max - min) / 255 and AddV2 of (max - min) / 512 + min (two float32 roundings, as TensorFlow and
// the reader compute them); ConcatV2 of the features per frame; RaggedTensorToTensor pads or
// truncates each video to max_frames frames with zeros (resize_axis after dequantization), and
// num_frames = Minimum(frames, max_frames) (int32). The starter maps ParseSingleSequenceExample
// over the batch with tf.map_fn; the batched op computes the same rows.
#ifndef TRAINYARD_CORE_SRC_EXAMPLE_SERVING_GRAPH_H_
#define TRAINYARD_CORE_SRC_EXAMPLE_SERVING_GRAPH_H_

#include <string>

#include "trainyard/core/saved_model_export.h"
#include "trainyard/proto/saved_model.pb.h"

namespace trainyard::tf_internal {

// Tensor names ("node:k") of the parsed batch.
struct ParsedExamples {
  std::string video_id;    // DT_STRING [-1]
  std::string features;    // DT_FLOAT [-1, D] or [-1, max_frames, D]
  std::string num_frames;  // DT_INT32 [-1]; empty at video level
};

// Adds the parsing of the DT_STRING [-1] tensor `serialized` to `graph`, its nodes under the
// name scope "ParseExample" / "ParseSequenceExample". Throws InvalidArgument for a layout that
// cannot be parsed (no feature, sizes that do not match the names, a duplicate key).
ParsedExamples add_example_parsing(tf::GraphDef& graph, const ExampleServingInput& input,
                                   const std::string& serialized);

}  // namespace trainyard::tf_internal

#endif  // TRAINYARD_CORE_SRC_EXAMPLE_SERVING_GRAPH_H_
