// The work behind `trainyard data`: synthetic YouTube-8M data, inspecting TFRecord files, and
// converting idx (MNIST, Fashion-MNIST) files to TFRecord image Examples.
#ifndef TRAINYARD_APPS_TRAINYARD_DATA_TOOLS_H_
#define TRAINYARD_APPS_TRAINYARD_DATA_TOOLS_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace trainyard::app {

struct SynthYt8mOptions {
  std::string output_dir;
  int64_t num_videos = 1000;  // training videos; validation gets a fifth as many
  int64_t num_classes = 3862;
  bool frame_level = false;
  int num_shards = 4;
  uint64_t seed = 0;
  std::vector<int64_t> feature_sizes = {1024, 128};  // rgb, audio
  int64_t min_frames = 30;  // frame level: frames per video drawn in [min_frames, max_frames]
  int64_t max_frames = 120;
  int64_t num_topics = 0;  // 0: num_classes / 8, at least 2
};

struct SynthYt8mSummary {
  std::vector<std::string> files;
  int64_t train_videos = 0;
  int64_t validate_videos = 0;
  double mean_labels_per_video = 0;
};

// Writes train-NNNN.tfrecord and validate-NNNN.tfrecord shards in the YouTube-8M layout:
// video level tf.Example {id, labels, mean_rgb, mean_audio}; frame level tf.SequenceExample
// {context: id, labels; feature_lists: rgb, audio as quantized bytes per frame}. Labels come
// from hidden topics; features are the labels' prototype vectors plus noise (video level), or
// noise frames with the evidence in a few of them (frame level).
SynthYt8mSummary synth_yt8m(const SynthYt8mOptions& options);

struct InspectSummary {
  int64_t files = 0;
  int64_t records = 0;
  int64_t bytes = 0;
  int64_t corrupt = 0;
};

// Counts the records of every file matching `pattern`, checking every CRC, and prints the
// features of the first `show` records to `out`. Problems (corrupt or truncated records) are
// printed with file and offset and counted.
InspectSummary inspect_records(const std::string& pattern, int64_t show, std::ostream& out);

// Reads idx3 images and idx1 labels (plain or gzip) and writes one tf.Example per image:
// image/encoded (PNG), image/format "png", image/class/label, image/height, image/width.
// Returns the number of examples. Errors name the file and what is wrong.
int64_t convert_mnist(const std::string& images, const std::string& labels,
                      const std::string& output);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_DATA_TOOLS_H_
