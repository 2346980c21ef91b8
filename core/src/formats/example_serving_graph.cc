#include "formats/example_serving_graph.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "formats/tf_graph.h"
#include "trainyard/error.h"

namespace trainyard::tf_internal {
namespace {

using tf::NodeDef;

// An empty Const of `dtype` (shape [0]): a key list with no key, or the default of a required
// feature.
std::string empty_const(tf::GraphDef& graph, const std::string& name, tf::DataType dtype) {
  NodeDef* n = add_node(graph, name, "Const", {});
  set_type(n, "dtype", dtype);
  tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(dtype);
  t->mutable_tensor_shape()->add_dim()->set_size(0);
  return name;
}

std::string float_const(tf::GraphDef& graph, const std::string& name, float value) {
  NodeDef* n = add_node(graph, name, "Const", {});
  set_type(n, "dtype", tf::DT_FLOAT);
  tf::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(tf::DT_FLOAT);
  t->mutable_tensor_shape();
  t->add_float_val(value);
  return name;
}

void set_empty_list(NodeDef* node, const std::string& attr) {
  (*node->mutable_attr())[attr].mutable_list();
}

std::string output(const std::string& node, std::size_t k) {
  return k == 0 ? node : node + ":" + std::to_string(k);
}

// The keys in the order tf.io.parse_example and parse_sequence_example pass them: sorted.
std::vector<std::string> sorted(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::size_t index_of(const std::vector<std::string>& keys, const std::string& key) {
  return static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
}

void check_layout(const ExampleServingInput& input) {
  if (input.feature_names.empty()) {
    throw InvalidArgument("SavedModel export: the reader's feature_names is empty");
  }
  if (input.feature_names.size() != input.feature_sizes.size()) {
    throw InvalidArgument("SavedModel export: the reader has " +
                          std::to_string(input.feature_names.size()) + " feature_names but " +
                          std::to_string(input.feature_sizes.size()) + " feature_sizes");
  }
  std::set<std::string> keys{input.id_key};
  for (std::size_t i = 0; i < input.feature_names.size(); ++i) {
    if (input.feature_sizes[i] <= 0) {
      throw InvalidArgument("SavedModel export: feature_sizes[" + std::to_string(i) + "] (for '" +
                            input.feature_names[i] + "') is " +
                            std::to_string(input.feature_sizes[i]) + "; expected > 0");
    }
    if (!keys.insert(input.feature_names[i]).second) {
      throw InvalidArgument("SavedModel export: the feature '" + input.feature_names[i] +
                            "' is named twice (feature_names and id_key must be distinct)");
    }
  }
  if (input.frame_level && input.max_frames <= 0) {
    throw InvalidArgument("SavedModel export: max_frames is " + std::to_string(input.max_frames) +
                          "; expected > 0");
  }
  if (input.frame_level && !(input.max_quantized_value > input.min_quantized_value)) {
    throw InvalidArgument(
        "SavedModel export: max_quantized_value must exceed "
        "min_quantized_value");
  }
}

// ConcatV2 of `parts` along axis 1, or the one part.
std::string concat_features(tf::GraphDef& graph, const std::string& scope,
                            const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::vector<std::string> inputs = parts;
  inputs.push_back(add_int32_const(graph, scope + "/concat/axis", {1}, {})->name());
  NodeDef* n = add_node(graph, scope + "/concat", "ConcatV2", inputs);
  set_int(n, "N", static_cast<int64_t>(parts.size()));
  set_type(n, "T", tf::DT_FLOAT);
  set_type(n, "Tidx", tf::DT_INT32);
  return n->name();
}

ParsedExamples video_level(tf::GraphDef& graph, const ExampleServingInput& input,
                           const std::string& serialized) {
  const std::string scope = "ParseExample";
  std::vector<std::string> keys = input.feature_names;
  keys.push_back(input.id_key);
  keys = sorted(keys);
  std::vector<std::string> inputs{serialized, empty_const(graph, scope + "/names", tf::DT_STRING),
                                  empty_const(graph, scope + "/sparse_keys", tf::DT_STRING)};
  inputs.push_back(
      add_string_const(graph, scope + "/dense_keys", keys, {static_cast<int64_t>(keys.size())})
          ->name());
  inputs.push_back(empty_const(graph, scope + "/ragged_keys", tf::DT_STRING));
  std::vector<tf::DataType> types;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const tf::DataType type = keys[k] == input.id_key ? tf::DT_STRING : tf::DT_FLOAT;
    types.push_back(type);
    inputs.push_back(
        empty_const(graph, scope + "/default" + (k ? "_" + std::to_string(k) : ""), type));
  }
  NodeDef* parse = add_node(graph, scope + "/ParseExampleV2", "ParseExampleV2", inputs);
  set_int(parse, "num_sparse", 0);
  set_types(parse, "Tdense", types);
  for (const char* attr : {"sparse_types", "ragged_value_types", "ragged_split_types"}) {
    set_empty_list(parse, attr);
  }
  tf::AttrValue::ListValue* shapes = (*parse->mutable_attr())["dense_shapes"].mutable_list();
  for (const std::string& key : keys) {
    tf::TensorShapeProto* shape = shapes->add_shape();
    if (key == input.id_key) continue;
    const std::size_t i = index_of(input.feature_names, key);
    shape->add_dim()->set_size(input.feature_sizes[i]);
  }
  std::vector<std::string> parts;
  for (const std::string& name : input.feature_names) {
    parts.push_back(output(parse->name(), index_of(keys, name)));
  }
  ParsedExamples parsed;
  parsed.video_id = output(parse->name(), index_of(keys, input.id_key));
  parsed.features = concat_features(graph, scope, parts);
  return parsed;
}

ParsedExamples frame_level(tf::GraphDef& graph, const ExampleServingInput& input,
                           const std::string& serialized) {
  const std::string scope = "ParseSequenceExample";
  const std::vector<std::string> lists = sorted(input.feature_names);
  const int64_t n = static_cast<int64_t>(lists.size());
  std::vector<std::string> inputs{serialized};
  inputs.push_back(empty_const(graph, scope + "/debug_name", tf::DT_STRING));
  inputs.push_back(empty_const(graph, scope + "/context_sparse_keys", tf::DT_STRING));
  inputs.push_back(
      add_string_const(graph, scope + "/context_dense_keys", {input.id_key}, {1})->name());
  inputs.push_back(empty_const(graph, scope + "/context_ragged_keys", tf::DT_STRING));
  inputs.push_back(empty_const(graph, scope + "/feature_list_sparse_keys", tf::DT_STRING));
  inputs.push_back(empty_const(graph, scope + "/feature_list_dense_keys", tf::DT_STRING));
  inputs.push_back(
      add_string_const(graph, scope + "/feature_list_ragged_keys", lists, {n})->name());
  inputs.push_back(
      empty_const(graph, scope + "/feature_list_dense_missing_assumed_empty", tf::DT_BOOL));
  inputs.push_back(empty_const(graph, scope + "/context_dense_default", tf::DT_STRING));
  NodeDef* parse =
      add_node(graph, scope + "/ParseSequenceExampleV2", "ParseSequenceExampleV2", inputs);
  set_int(parse, "Ncontext_sparse", 0);
  set_int(parse, "Nfeature_list_sparse", 0);
  set_int(parse, "Nfeature_list_dense", 0);
  set_types(parse, "Tcontext_dense", {tf::DT_STRING});
  (*parse->mutable_attr())["context_dense_shapes"].mutable_list()->add_shape();
  for (const char* attr :
       {"context_sparse_types", "context_ragged_value_types", "context_ragged_split_types",
        "feature_list_dense_types", "feature_list_dense_shapes", "feature_list_sparse_types"}) {
    set_empty_list(parse, attr);
  }
  set_types(parse, "feature_list_ragged_value_types",
            std::vector<tf::DataType>(lists.size(), tf::DT_STRING));
  set_types(parse, "feature_list_ragged_split_types",
            std::vector<tf::DataType>(lists.size(), tf::DT_INT32));
  // Outputs: the context dense id (0), then per feature list in key order its ragged values
  // (1 + k), its outer splits (frames per example; 1 + n + k) and inner splits.
  const double range = input.max_quantized_value - input.min_quantized_value;
  const std::string scalar =
      float_const(graph, scope + "/Dequantize/scalar", static_cast<float>(range / 255.0));
  const std::string bias =
      float_const(graph, scope + "/Dequantize/bias",
                  static_cast<float>(range / 512.0 + input.min_quantized_value));
  std::vector<std::string> parts;
  for (const std::string& name : input.feature_names) {
    const std::size_t k = index_of(lists, name);
    const std::string at = scope + "/" + name;
    NodeDef* raw = add_node(graph, at + "/DecodeRaw", "DecodeRaw", {output(parse->name(), 1 + k)});
    set_type(raw, "out_type", tf::DT_UINT8);
    set_bool(raw, "little_endian", true);
    NodeDef* cast = add_node(graph, at + "/Cast", "Cast", {raw->name()});
    set_type(cast, "SrcT", tf::DT_UINT8);
    set_type(cast, "DstT", tf::DT_FLOAT);
    set_bool(cast, "Truncate", false);
    NodeDef* scaled = add_node(graph, at + "/Dequantize/mul", "Mul", {cast->name(), scalar});
    set_type(scaled, "T", tf::DT_FLOAT);
    NodeDef* shifted = add_node(graph, at + "/Dequantize/add", "AddV2", {scaled->name(), bias});
    set_type(shifted, "T", tf::DT_FLOAT);
    parts.push_back(shifted->name());
  }
  int64_t total = 0;
  for (int64_t size : input.feature_sizes) total += size;
  const std::string frames = concat_features(graph, scope, parts);
  const std::string splits =
      output(parse->name(), 1 + lists.size() + index_of(lists, input.feature_names[0]));
  NodeDef* padded = add_node(
      graph, scope + "/resize_axis", "RaggedTensorToTensor",
      {add_int32_const(graph, scope + "/resize_axis/shape", {-1, input.max_frames, total}, {3})
           ->name(),
       frames, float_const(graph, scope + "/resize_axis/default_value", 0.0f), splits});
  set_type(padded, "T", tf::DT_FLOAT);
  set_type(padded, "Tindex", tf::DT_INT32);
  set_type(padded, "Tshape", tf::DT_INT32);
  set_int(padded, "num_row_partition_tensors", 1);
  (*padded->mutable_attr())["row_partition_types"].mutable_list()->add_s("ROW_SPLITS");

  // num_frames = min(splits[1:] - splits[:-1], max_frames).
  auto strided = [&](const std::string& name, int64_t begin, int64_t end, int begin_mask,
                     int end_mask) {
    NodeDef* s = add_node(graph, name, "StridedSlice",
                          {splits, add_int32_const(graph, name + "/begin", {begin}, {1})->name(),
                           add_int32_const(graph, name + "/end", {end}, {1})->name(),
                           add_int32_const(graph, name + "/strides", {1}, {1})->name()});
    set_type(s, "T", tf::DT_INT32);
    set_type(s, "Index", tf::DT_INT32);
    set_int(s, "begin_mask", begin_mask);
    set_int(s, "end_mask", end_mask);
    set_int(s, "ellipsis_mask", 0);
    set_int(s, "new_axis_mask", 0);
    set_int(s, "shrink_axis_mask", 0);
    return s->name();
  };
  const std::string ends = strided(scope + "/frame_ends", 1, 0, 0, 1);
  const std::string starts = strided(scope + "/frame_starts", 0, -1, 1, 0);
  NodeDef* count = add_node(graph, scope + "/frame_count", "Sub", {ends, starts});
  set_type(count, "T", tf::DT_INT32);
  NodeDef* num_frames =
      add_node(graph, scope + "/num_frames", "Minimum",
               {count->name(),
                add_int32_const(graph, scope + "/max_frames", {input.max_frames}, {})->name()});
  set_type(num_frames, "T", tf::DT_INT32);

  ParsedExamples parsed;
  parsed.video_id = output(parse->name(), 0);
  parsed.features = padded->name();
  parsed.num_frames = num_frames->name();
  return parsed;
}

}  // namespace

ParsedExamples add_example_parsing(tf::GraphDef& graph, const ExampleServingInput& input,
                                   const std::string& serialized) {
  check_layout(input);
  return input.frame_level ? frame_level(graph, input, serialized)
                           : video_level(graph, input, serialized);
}

}  // namespace trainyard::tf_internal
