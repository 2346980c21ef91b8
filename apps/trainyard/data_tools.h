// The work behind `trainyard data`: synthetic YouTube-8M data, inspecting TFRecord files, and
// converting idx (MNIST, Fashion-MNIST) files and image directories to TFRecord image Examples.
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
// noise frames with the evidence in a few of them (frame level). Each file is written under a
// hidden temporary name and renamed into place once whole (atomic_file.h), so a killed run
// leaves no part of a file under a shard's name.
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
// Returns the number of examples. Errors name the file and what is wrong. Creates the
// directory of `output`; the file appears under `output` only once whole (atomic_file.h).
int64_t convert_mnist(const std::string& images, const std::string& labels,
                      const std::string& output);

struct ConvertImagesOptions {
  std::string image_dir;  // one subdirectory per class, holding that class's JPEG/PNG files
  std::string output;     // prefix of the files: <output>_<split>_<shard>-of-<shards>.tfrecord
  double validation_fraction = 0.1;  // of the images, after shuffling, to the validation split
  int num_shards = 5;                // files per split
  uint64_t seed = 0;                 // of the shuffle
};

struct ConvertImagesSummary {
  std::vector<std::string> class_names;  // label i is class_names[i]
  int64_t train_images = 0;
  int64_t validation_images = 0;
  std::vector<std::string> files;  // the TFRecord files, then labels.txt
};

// TF-Slim's download_and_convert_flowers.py for any directory of class subdirectories: class
// names sorted give labels 0..K-1; the images, shuffled with `seed`, are split into validation
// (the first round(validation_fraction x N)) and train, each written in num_shards files named
// as slim's _get_dataset_filename does (<output>_train_00000-of-00005.tfrecord), with one
// tf.Example per image in dataset_utils.image_to_tfexample's layout: image/encoded (the file's
// bytes), image/format ("jpeg" or "png", from the content), image/class/label, image/height,
// image/width, plus image/filename and image/source_id (the path relative to image_dir).
// labels.txt ("0:daisy" lines, dataset_utils.write_label_file) goes beside the files. Every
// image is decoded (a file that does not decode is DataLoss naming it); files are written under
// hidden temporary names and each renamed into place (atomic_file.h) only when all are
// complete, so an error leaves none behind and a kill no part of a file under its name.
ConvertImagesSummary convert_images(const ConvertImagesOptions& options);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_DATA_TOOLS_H_
