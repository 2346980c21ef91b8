// Writes the seed corpora of the fuzz targets: make_seeds <dir> <source dir> fills <dir>/<target>
// for every target but fuzz_decode_image with a few small valid inputs, each written by the
// Trainyard code that writes such files (TFRecordWriter, TableBuilder, write_checkpoint,
// write_safetensors) or built here field by field (V1 checkpoints, ELF files), and damaged
// copies of some (cut short, a byte flipped). fuzz_pipeline_config's seeds are configs from
// <source dir>/configs. The checked-in tests/fuzz/corpus was made with it, except the regress_*
// files (README.md).
#include <elf.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "formats/checkpoint_v1.h"
#include "formats/sstable.h"
#include "fuzz_host_backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/proto/event.pb.h"
#include "trainyard/proto/example.pb.h"
#include "trainyard/proto/tensor_bundle.pb.h"

namespace trainyard::fuzz {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

// The bytes of a TFRecord file holding `records`.
std::string tfrecord(const fs::path& scratch, const std::vector<std::string>& records,
                     Compression compression = Compression::kNone) {
  {
    TFRecordWriter writer(scratch.string(), compression);
    for (const std::string& r : records) writer.write(r);
    writer.close();
  }
  std::string bytes = read_file(scratch);
  fs::remove(scratch);
  return bytes;
}

// Map entries in key order, so that the seeds are the same on every run.
std::string serialize(const google::protobuf::MessageLite& message) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return s;
}

void set_bytes(tf::Features* f, const std::string& key, const std::string& value) {
  (*f->mutable_feature())[key].mutable_bytes_list()->add_value(value);
}
void set_floats(tf::Features* f, const std::string& key, std::initializer_list<float> values) {
  auto* list = (*f->mutable_feature())[key].mutable_float_list();
  for (float v : values) list->add_value(v);
}
void set_int64s(tf::Features* f, const std::string& key, std::initializer_list<int64_t> values) {
  auto* list = (*f->mutable_feature())[key].mutable_int64_list();
  for (int64_t v : values) list->add_value(v);
}
void add_frames(tf::SequenceExample* s, const std::string& key, int frames, int size) {
  auto& list = (*s->mutable_feature_lists()->mutable_feature_list())[key];
  for (int t = 0; t < frames; ++t) {
    std::string frame(static_cast<std::size_t>(size), '\0');
    for (int k = 0; k < size; ++k) {
      frame[static_cast<std::size_t>(k)] = static_cast<char>(t * 40 + k * 17);
    }
    list.add_feature()->mutable_bytes_list()->add_value(frame);
  }
}

// Video-level record for the first aggregated configuration: mean_rgb[4], mean_audio[2].
tf::Example video(bool with_labels) {
  tf::Example e;
  set_bytes(e.mutable_features(), "id", "vid0");
  if (with_labels) set_int64s(e.mutable_features(), "labels", {1, 5});
  set_floats(e.mutable_features(), "mean_rgb", {0.5f, -1.0f, 2.0f, 0.0f});
  set_floats(e.mutable_features(), "mean_audio", {0.25f, 3.0f});
  return e;
}

// Frame-level record for the first frame configuration: rgb[4], audio[2] per frame.
tf::SequenceExample frames(int n, int audio_frames) {
  tf::SequenceExample s;
  set_bytes(s.mutable_context(), "id", "vid1");
  set_int64s(s.mutable_context(), "labels", {0, 7});
  add_frames(&s, "rgb", n, 4);
  add_frames(&s, "audio", audio_frames, 2);
  return s;
}

void write_tfrecord_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path scratch = dir / ".scratch";
  const std::string three = tfrecord(scratch, {"", "x", pattern(37)});
  write_file(dir / "empty", "");
  write_file(dir / "one_record", tfrecord(scratch, {"foo"}));
  write_file(dir / "three_records", three);
  std::string flipped = three;
  flipped[16 + 12] ^= 0x01;  // the data byte of the second record ("x")
  write_file(dir / "data_crc_mismatch", flipped);
  std::string bad_length = three;
  bad_length[16] ^= 0x40;  // the second record's length
  write_file(dir / "length_crc_mismatch", bad_length);
  write_file(dir / "truncated_in_header", three.substr(0, 16 + 5));
  write_file(dir / "truncated_in_data", three.substr(0, three.size() - 20));
  write_file(dir / "crc_lanes", tfrecord(scratch, {pattern(1000)}));
  // A length of 0x088b1f (559903) begins with the gzip magic 1f 8b 08: kAuto must read it
  // uncompressed (here cut after 40 bytes of data).
  write_file(dir / "length_like_gzip_magic",
             tfrecord(scratch, {pattern(559903)}).substr(0, 12 + 40));
  const std::string gz = tfrecord(scratch, {"foo", pattern(300), "bar"}, Compression::kGzip);
  write_file(dir / "gzip_three_records", gz);
  write_file(dir / "gzip_truncated", gz.substr(0, gz.size() - 9));
  write_file(dir / "gzip_two_members", gz + tfrecord(scratch, {"baz"}, Compression::kGzip));
  // Larger than the reader's 256 KiB buffer once decompressed, a few hundred bytes compressed.
  write_file(dir / "gzip_large_record",
             tfrecord(scratch, {std::string(300000, '\0'), "tail"}, Compression::kGzip));
  write_file(dir / "video_record", tfrecord(scratch, {serialize(video(true))}));
}

void write_yt8m_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "video", serialize(video(true)));
  write_file(dir / "video_no_labels", serialize(video(false)));
  tf::Example out_of_range = video(true);
  set_int64s(out_of_range.mutable_features(), "labels", {8});
  write_file(dir / "video_label_out_of_range", serialize(out_of_range));
  tf::Example video_id;  // second aggregated configuration: video_id, rgb[1], 1 class
  set_bytes(video_id.mutable_features(), "video_id", "v");
  set_int64s(video_id.mutable_features(), "labels", {0});
  set_floats(video_id.mutable_features(), "rgb", {1.5f});
  write_file(dir / "video_id_rgb", serialize(video_id));
  write_file(dir / "frames_2", serialize(frames(2, 2)));
  write_file(dir / "frames_5_truncated_to_3", serialize(frames(5, 5)));
  write_file(dir / "frames_0", serialize(frames(0, 0)));
  write_file(dir / "frames_count_mismatch", serialize(frames(2, 1)));
  tf::SequenceExample frames_b;  // second frame configuration: video_id, rgb[2], 3 classes
  set_bytes(frames_b.mutable_context(), "video_id", "w");
  set_int64s(frames_b.mutable_context(), "labels", {2});
  add_frames(&frames_b, "rgb", 2, 2);
  write_file(dir / "frames_video_id", serialize(frames_b));
}

// `bytes` with byte `at` (from the end when negative) XORed with `mask`.
std::string flip(std::string bytes, long at, unsigned char mask = 0x01) {
  const std::size_t i =
      at >= 0 ? static_cast<std::size_t>(at) : bytes.size() - static_cast<std::size_t>(-at);
  bytes[i] = static_cast<char>(bytes[i] ^ mask);
  return bytes;
}

void write_sstable_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "empty_table", sstable::TableBuilder().finish());
  sstable::TableBuilder one;
  one.add("", "header");
  one.add("weights", pattern(20));
  const std::string two_entries = one.finish();
  write_file(dir / "two_entries", two_entries);
  // Several data blocks, restarts and shared key prefixes.
  sstable::TableBuilder many(/*block_size=*/96, /*restart_interval=*/3);
  for (int i = 0; i < 12; ++i) {
    many.add("layer_" + std::to_string(10 + i) + "/kernel", pattern(static_cast<std::size_t>(i)));
  }
  const std::string blocks = many.finish();
  write_file(dir / "many_blocks", blocks);
  write_file(dir / "block_crc_mismatch", flip(blocks, 3));
  write_file(dir / "bad_magic", flip(blocks, -1));
  write_file(dir / "cut_footer", blocks.substr(0, blocks.size() - 20));
  // Raw snappy streams: a literal; a literal and an overlapping copy (1-byte and 2-byte
  // offsets); a preamble longer than the data.
  write_file(dir / "snappy_literal", std::string("\x05\x10"
                                                 "hello",
                                                 7));
  write_file(dir / "snappy_copies", std::string("\x17\x0c"
                                                "abcd\x1d\x04\x1e\x08\x00",
                                                11));
  write_file(dir / "snappy_short", std::string("\x40\x0c"
                                               "abcd",
                                               6));
}

// A V2 checkpoint's .index followed by its data file, as fuzz_checkpoint_v2 reads its input.
std::string checkpoint_v2(const fs::path& scratch,
                          const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const std::string prefix = (scratch / "model.ckpt").string();
  write_checkpoint(prefix, tensors);
  std::string bytes =
      read_file(checkpoint_index_path(prefix)) + read_file(checkpoint_data_path(prefix));
  fs::remove_all(scratch);
  return bytes;
}

void write_checkpoint_v2_seeds(const fs::path& dir, HostBackend& backend) {
  fs::create_directories(dir);
  const fs::path scratch = dir / ".scratch";
  write_file(dir / "no_tensors", checkpoint_v2(scratch, {}));
  const Tensor weights = Tensor::from_vector<float>(backend, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  const Tensor step = Tensor::from_vector<int64_t>(backend, Shape({}), {42});
  const Tensor flags = Tensor::from_vector<uint8_t>(backend, Shape({3}), {1, 0, 7});
  const std::string three =
      checkpoint_v2(scratch, {{"dense/kernel", weights}, {"global_step", step}, {"flags", flags}});
  write_file(dir / "three_tensors", three);
  write_file(dir / "data_crc_mismatch", flip(three, -1));
  write_file(dir / "data_cut_short", three.substr(0, three.size() - 5));

  // Indexes written entry by entry, with what write_checkpoint never writes: a shape of 2^62
  // floats whose byte size wraps to 0 in 64 bits, a second shard, a partitioned variable.
  auto index = [](int num_shards,
                  const std::vector<std::pair<std::string, tf::BundleEntryProto>>& entries) {
    tf::BundleHeaderProto header;
    header.set_num_shards(num_shards);
    header.mutable_version()->set_producer(1);
    sstable::TableBuilder table;
    table.add("", serialize(header));
    for (const auto& [name, entry] : entries) table.add(name, serialize(entry));
    return table.finish();
  };
  tf::BundleEntryProto huge;
  huge.set_dtype(tf::DT_FLOAT);
  huge.mutable_shape()->add_dim()->set_size(int64_t{1} << 31);
  huge.mutable_shape()->add_dim()->set_size(int64_t{1} << 31);
  huge.set_crc32c(mask_crc32c(crc32c("", 0)));  // of the 0 bytes it holds
  write_file(dir / "forged_size_wraps", index(1, {{"huge", huge}}) + "data");
  tf::BundleEntryProto second;
  second.set_dtype(tf::DT_INT32);
  second.mutable_shape()->add_dim()->set_size(1);
  second.set_shard_id(1);
  second.set_size(4);
  tf::BundleEntryProto sliced = second;
  sliced.set_shard_id(0);
  sliced.add_slices()->add_extent()->set_start(0);
  write_file(dir / "forged_two_shards", index(2, {{"a", sliced}, {"b", second}}) + "abcd");
}

std::string serialize_message(const google::protobuf::MessageLite& m) { return serialize(m); }

// A V1 checkpoint: the metadata under "", then one SavedSlice per entry of `slices` (tensor
// name, its extents as (start, length) pairs, its float values).
struct V1Slice {
  std::string name;
  std::vector<std::pair<int64_t, int64_t>> extents;
  std::vector<float> values;
};

std::string checkpoint_v1(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                          const std::vector<V1Slice>& slices) {
  tf::SavedTensorSlices head;
  head.mutable_meta()->mutable_versions()->set_producer(1);
  for (const auto& [name, dims] : tensors) {
    tf::SavedSliceMeta* meta = head.mutable_meta()->add_tensor();
    meta->set_name(name);
    meta->set_type(tf::DT_FLOAT);
    for (int64_t d : dims) meta->mutable_shape()->add_dim()->set_size(d);
    for (const V1Slice& s : slices) {
      if (s.name != name) continue;
      tf::TensorSliceProto* slice = meta->add_slice();
      for (const auto& [start, length] : s.extents) {
        auto* e = slice->add_extent();
        e->set_start(start);
        e->set_length(length);
      }
    }
  }
  // Each slice under TensorFlow's key for it, in key order after the metadata's empty key.
  std::vector<std::pair<std::string, std::string>> entries;
  for (const V1Slice& s : slices) {
    tf::SavedTensorSlices entry;
    tf::SavedSlice* data = entry.mutable_data();
    data->set_name(s.name);
    for (const auto& [start, length] : s.extents) {
      auto* e = data->mutable_slice()->add_extent();
      e->set_start(start);
      e->set_length(length);
    }
    data->mutable_data()->set_dtype(tf::DT_FLOAT);
    for (float v : s.values) data->mutable_data()->add_float_val(v);
    entries.emplace_back(checkpoint_internal::encode_tensor_name_slice(s.name, data->slice()),
                         serialize_message(entry));
  }
  std::sort(entries.begin(), entries.end());
  sstable::TableBuilder table;
  table.add("", serialize_message(head));
  for (const auto& [key, value] : entries) table.add(key, value);
  return table.finish();
}

void write_checkpoint_v1_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "one_tensor", checkpoint_v1({{"w", {2}}}, {{"w", {{0, 2}}, {1.5f, -2.0f}}}));
  // A partitioned variable: rows 0-1 and row 2 of a 3x2 tensor, saved as two slices.
  const std::string partitioned =
      checkpoint_v1({{"bias", {2}}, {"w", {3, 2}}}, {{"bias", {{0, 2}}, {0.5f, 0.25f}},
                                                     {"w", {{0, 2}, {0, 2}}, {1, 2, 3, 4}},
                                                     {"w", {{2, 1}, {0, 2}}, {5, 6}}});
  write_file(dir / "partitioned", partitioned);
  write_file(dir / "overlapping_slices",
             checkpoint_v1({{"w", {2}}}, {{"w", {{0, 2}}, {1, 2}}, {"w", {{1, 1}}, {3}}}));
  write_file(dir / "uncovered", checkpoint_v1({{"w", {3}}}, {{"w", {{0, 2}}, {1, 2}}}));
  write_file(dir / "wrong_value_count", checkpoint_v1({{"w", {2}}}, {{"w", {{0, 2}}, {1}}}));
}

void write_checkpoint_state_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "two_checkpoints",
             "model_checkpoint_path: \"model.ckpt-200\"\n"
             "all_model_checkpoint_paths: \"model.ckpt-100\"\n"
             "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
             "all_model_checkpoint_timestamps: 1700000000.5\n"
             "all_model_checkpoint_timestamps: 1700000100.25\n"
             "last_preserved_timestamp: 1699999999.0\n");
  write_file(dir / "outside_entries",
             "model_checkpoint_path: \"/etc/passwd\"\n"
             "all_model_checkpoint_paths: \"../other/model.ckpt-1\"\n"
             "all_model_checkpoint_paths: \"sub/./model.ckpt-2\"\n");
  write_file(dir / "unknown_nested_fields",
             "model_checkpoint_path: 'model.ckpt-1'\n"
             "future_field { a { b { c: 1 } } list: [1, 2] }\n"
             "future_scalar: \"x\"\n");
  write_file(dir / "unterminated", "model_checkpoint_path: \"model.ckpt-1\n");
}

void write_safetensors_seeds(const fs::path& dir, HostBackend& backend) {
  fs::create_directories(dir);
  const fs::path scratch = dir / ".scratch.safetensors";
  auto write = [&](const char* name, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata) {
    write_safetensors(scratch.string(), tensors, metadata);
    const std::string bytes = read_file(scratch);
    fs::remove(scratch);
    write_file(dir / name, bytes);
    return bytes;
  };
  write("empty", {}, {});
  const std::string two =
      write("two_tensors",
            {{"dense/kernel", Tensor::from_vector<float>(backend, Shape({2, 2}), {1, 2, 3, 4})},
             {"step", Tensor::from_vector<int64_t>(backend, Shape({}), {7})}},
            {{"format", "pt"}, {"note", "a \"quoted\" \\ value\n"}});
  write("dtypes",
        {{"i32", Tensor::from_vector<int32_t>(backend, Shape({2}), {-1, 1})},
         {"u8", Tensor::from_vector<uint8_t>(backend, Shape({3}), {1, 2, 3})},
         {"f64", Tensor::from_vector<double>(backend, Shape({1, 1}), {0.5})},
         {"zero", Tensor::from_vector<float>(backend, Shape({0, 4}), {})}},
        {});
  write_file(dir / "cut_short", two.substr(0, two.size() - 3));
}

void write_event_file_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path scratch = dir / ".scratch";
  tf::Event version;
  version.set_wall_time(1700000000.5);
  version.set_file_version("brain.Event:2");
  tf::Event scalar;
  scalar.set_wall_time(1700000001.0);
  scalar.set_step(10);
  auto* value = scalar.mutable_summary()->add_value();
  value->set_tag("loss");
  value->set_simple_value(0.25f);
  const std::string events = tfrecord(scratch, {serialize(version), serialize(scalar)});
  write_file(dir / "two_events", events);
  write_file(dir / "partial_record", events.substr(0, events.size() - 7));
  write_file(dir / "data_crc_mismatch", flip(events, -6));
  write_file(dir / "not_an_event", tfrecord(scratch, {"\xff\xff\xff", serialize(version)}));
}

void write_pipeline_config_seeds(const fs::path& dir, const fs::path& source) {
  fs::create_directories(dir);
  // The last, the Object Detection API's format: the detection task's config dialect.
  for (const char* name : {"smoke.config", "yt8m_logistic.config", "fashion_mnist_lenet.config",
                           "ssd_mobilenet_v1_synth_shapes.config"}) {
    const fs::path from = source / "configs" / name;
    if (!fs::is_regular_file(from)) {
      std::fprintf(stderr, "make_seeds: no %s\n", from.c_str());
      std::exit(1);
    }
    write_file(dir / name, read_file(from));
  }
  write_file(dir / "syntax_error", "model { class: \"LogisticModel\" params { key: \"l2\" ");
  // Trainyard's own form as recorded before the detection task carried the API's steps.
  write_file(dir / "detection_recorded_before_dialect",
             "task: \"detection\"\nmodel { class: \"SSDMetaArch\" }\n"
             "train_input_reader {\n  data_augmentation_options { random_horizontal_flip { } }\n"
             "  data_augmentation_options { resize_image { new_height: 8 new_width: 8 } }\n}\n");
}

void write_json_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "model_flags.json",
             "{\"model\": \"FrameLevelLogisticModel\", \"feature_names\": \"rgb,audio\", "
             "\"feature_sizes\": \"1024,128\", \"frame_features\": true, "
             "\"label_loss\": \"CrossEntropyLoss\", \"num_classes\": 3862, "
             "\"model_params\": {\"iterations\": 30, \"l2\": 1e-08, \"flags\": [true, null]}}\n");
  write_file(dir / "escapes", "[\"a\\u00e9\\ud83d\\ude00\\n\\\"\", -0.5e+3, {}, []]");
  write_file(dir / "deep", std::string(64, '[') + std::string(64, ']'));
  write_file(dir / "too_deep", std::string(65, '[') + std::string(65, ']'));
  write_file(dir / "trailing_garbage", "{\"a\": 1} x");
}

void write_label_map_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "coco_items",
             "# COCO's first classes\n"
             "item {\n  name: \"/m/01g317\"\n  id: 1\n  display_name: \"person\"\n}\n"
             "item { id: 2 display_name: 'bicycle' name: '/m/0199g' }\n"
             "item: { name: \"background\", id: 0; }\n");
  write_file(dir / "escapes_and_lvis",
             "item < name: \"a\\\"b\\x41\\101\\u00e9\" 'c' id: 0x7 ancestor_ids: [1, 2]\n"
             "  descendant_ids: 3 frequency: RARE instance_count: 12 >\n");
  write_file(dir / "duplicate_id", "item { name: \"a\" id: 1 }\nitem { name: \"b\" id: 1 }\n");
  write_file(dir / "keypoints", "item { name: \"p\" id: 1 keypoints { id: 0 label: \"nose\" } }\n");
}

// The first byte picks the reader: '0' (even) instances, '1' (odd) results.
void write_coco_json_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  write_file(dir / "instances",
             "0{\"info\": {\"year\": 2017}, \"images\": [{\"id\": 1, \"width\": 640, "
             "\"height\": 480, \"file_name\": \"a.jpg\"}], \"annotations\": [{\"id\": 1, "
             "\"image_id\": 1, \"category_id\": 18, \"bbox\": [10.5, 20, 30, 4e1], "
             "\"area\": 1035.5, \"iscrowd\": 0, \"segmentation\": [[1, 2, 3, 4]]}], "
             "\"categories\": [{\"id\": 18, \"name\": \"dog\", \"supercategory\": "
             "\"animal\"}]}");
  write_file(dir / "results",
             "1[{\"image_id\": 1, \"category_id\": 18, \"bbox\": [10, 20.25, 30, 40], "
             "\"score\": 0.9}, {\"score\": 1e-3, \"bbox\": [0, 0, 1, 1], \"image_id\": 3, "
             "\"category_id\": 1}]");
  write_file(dir / "results_unknown_image",
             "1[{\"image_id\": 7, \"category_id\": 1, \"bbox\": [0, 0, 1, 1], \"score\": 1}]");
}

// A little-endian ELF shared object with the sections the reader uses: .dynsym with its
// .dynstr, a "trainyard_plugin" section the symbols are defined in, and .shstrtab.
template <typename Ehdr, typename Shdr, typename Sym>
std::string elf_file(unsigned char elf_class) {
  const std::string shstrtab = std::string("\0.dynsym\0.dynstr\0trainyard_plugin\0.shstrtab\0", 45);
  const std::string dynstr = std::string("\0trainyard_plugin_classes\0helper\0", 34);
  std::vector<Sym> syms(3);
  std::memset(syms.data(), 0, sizeof(Sym) * syms.size());
  syms[1].st_name = 1;
  syms[1].st_info = static_cast<unsigned char>((STB_GLOBAL << 4) | STT_OBJECT);
  syms[1].st_shndx = 3;
  syms[1].st_size = 16;
  syms[2].st_name = 27;
  syms[2].st_info = static_cast<unsigned char>((STB_LOCAL << 4) | STT_FUNC);
  syms[2].st_shndx = 3;
  syms[2].st_size = 4;
  const std::string section(16, '\x2a');

  std::string body;
  auto place = [&](std::string_view bytes) {
    const std::size_t at = sizeof(Ehdr) + body.size();
    body.append(bytes);
    return at;
  };
  const std::size_t dynsym_at = place(
      std::string_view(reinterpret_cast<const char*>(syms.data()), sizeof(Sym) * syms.size()));
  const std::size_t dynstr_at = place(dynstr);
  const std::size_t section_at = place(section);
  const std::size_t shstrtab_at = place(shstrtab);
  while ((sizeof(Ehdr) + body.size()) % 8 != 0) body.push_back('\0');

  std::vector<Shdr> shdrs(5);
  std::memset(shdrs.data(), 0, sizeof(Shdr) * shdrs.size());
  shdrs[1] = {};
  shdrs[1].sh_name = 1;
  shdrs[1].sh_type = SHT_DYNSYM;
  shdrs[1].sh_offset = dynsym_at;
  shdrs[1].sh_size = sizeof(Sym) * syms.size();
  shdrs[1].sh_link = 2;
  shdrs[1].sh_entsize = sizeof(Sym);
  shdrs[2].sh_name = 9;
  shdrs[2].sh_type = SHT_STRTAB;
  shdrs[2].sh_offset = dynstr_at;
  shdrs[2].sh_size = dynstr.size();
  shdrs[3].sh_name = 17;
  shdrs[3].sh_type = SHT_PROGBITS;
  shdrs[3].sh_offset = section_at;
  shdrs[3].sh_size = section.size();
  shdrs[4].sh_name = 34;
  shdrs[4].sh_type = SHT_STRTAB;
  shdrs[4].sh_offset = shstrtab_at;
  shdrs[4].sh_size = shstrtab.size();

  Ehdr ehdr;
  std::memset(&ehdr, 0, sizeof ehdr);
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = elf_class;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_ident[EI_VERSION] = EV_CURRENT;
  ehdr.e_type = ET_DYN;
  ehdr.e_machine = elf_class == ELFCLASS64 ? EM_X86_64 : EM_386;
  ehdr.e_version = EV_CURRENT;
  ehdr.e_ehsize = sizeof(Ehdr);
  ehdr.e_shoff = sizeof(Ehdr) + body.size();
  ehdr.e_shentsize = sizeof(Shdr);
  ehdr.e_shnum = static_cast<uint16_t>(shdrs.size());
  ehdr.e_shstrndx = 4;
  return std::string(reinterpret_cast<const char*>(&ehdr), sizeof ehdr) + body +
         std::string(reinterpret_cast<const char*>(shdrs.data()), sizeof(Shdr) * shdrs.size());
}

void write_elf_symbols_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string elf64 = elf_file<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>(ELFCLASS64);
  write_file(dir / "plugin64", elf64);
  write_file(dir / "plugin32", elf_file<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym>(ELFCLASS32));
  write_file(dir / "cut_in_section_headers", elf64.substr(0, elf64.size() - 10));
  write_file(dir / "big_endian", flip(elf64, EI_DATA, ELFDATA2LSB ^ ELFDATA2MSB));
  write_file(dir / "not_elf", "#!/bin/sh\n");
}

}  // namespace
}  // namespace trainyard::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds <corpus dir> <Trainyard source dir>\n");
    return 2;
  }
  using namespace trainyard::fuzz;
  const std::filesystem::path dir = argv[1];
  HostBackend backend;
  write_tfrecord_seeds(dir / "fuzz_tfrecord");
  write_yt8m_seeds(dir / "fuzz_yt8m_parse");
  write_sstable_seeds(dir / "fuzz_sstable");
  write_checkpoint_v1_seeds(dir / "fuzz_checkpoint_v1");
  write_checkpoint_v2_seeds(dir / "fuzz_checkpoint_v2", backend);
  write_checkpoint_state_seeds(dir / "fuzz_checkpoint_state");
  write_safetensors_seeds(dir / "fuzz_safetensors", backend);
  write_event_file_seeds(dir / "fuzz_event_file");
  write_pipeline_config_seeds(dir / "fuzz_pipeline_config", argv[2]);
  write_json_seeds(dir / "fuzz_json");
  write_elf_symbols_seeds(dir / "fuzz_elf_symbols");
  write_label_map_seeds(dir / "fuzz_label_map");
  write_coco_json_seeds(dir / "fuzz_coco_json");
  return 0;
}
