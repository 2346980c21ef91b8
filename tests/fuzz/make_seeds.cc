// Writes the seed corpora of the fuzz targets: make_seeds <dir> fills <dir>/fuzz_tfrecord with
// small TFRecord files (written by TFRecordWriter, some then cut or damaged) and
// <dir>/fuzz_yt8m_parse with serialized tf.Example / tf.SequenceExample records in the
// configurations fuzz_yt8m_parse.cc uses. The checked-in tests/fuzz/corpus was made with it,
// except the regress_* files (README.md).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/proto/example.pb.h"
#include "trainyard/core/tfrecord.h"

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

}  // namespace
}  // namespace trainyard::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <corpus dir>\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  trainyard::fuzz::write_tfrecord_seeds(dir / "fuzz_tfrecord");
  trainyard::fuzz::write_yt8m_seeds(dir / "fuzz_yt8m_parse");
  return 0;
}
