// The output of the Object Detection API's dataset scripts: one TFRecord file, or N shards named
// as tf_record_creation_util.open_sharded_output_tfrecords names them ("<output>-00003-of-00010")
// with record i going to shard i % N. Every shard is written under a hidden temporary name and
// all are renamed into place together by commit() (atomic_file.h): a converter that throws
// before commit() leaves no output file behind, and a kill no part of one under its name.
#ifndef TRAINYARD_APPS_TRAINYARD_RECORD_SHARDS_H_
#define TRAINYARD_APPS_TRAINYARD_RECORD_SHARDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/core/atomic_file.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/wire/example.pb.h"

namespace trainyard::app {

// More shards than this is an option mistake (each is an open file while converting).
inline constexpr int kMaxRecordShards = 1000;

// "<output>-%05d-of-%05d", as tf_record_creation_util names shard `shard` of `num_shards`.
std::string record_shard_name(const std::string& output, int shard, int num_shards);

class RecordShards {
 public:
  // `what` names the command in errors ("convert-voc"). With `plain_name_when_one` and
  // num_shards 1 the one file is named `output` itself (create_pascal_tf_record writes one
  // file so); otherwise record_shard_name(). Creates the directory of `output`. Throws
  // InvalidArgument when num_shards is not in [1, kMaxRecordShards], Error when a file cannot
  // be created.
  RecordShards(const std::string& what, const std::string& output, int num_shards,
               bool plain_name_when_one);
  RecordShards(const RecordShards&) = delete;
  RecordShards& operator=(const RecordShards&) = delete;
  ~RecordShards();  // without commit(): closes and removes the temporaries

  // Serializes `example` deterministically (the feature map ordered by key, so a record's bytes
  // depend only on its content) and appends it to shard written() % num_shards.
  void write(const wire::tf::Example& example);
  int64_t written() const { return written_; }

  // Closes every shard and renames each into place. Returns the final paths, in shard order.
  std::vector<std::string> commit();

 private:
  std::vector<std::unique_ptr<AtomicFile>> files_;
  std::vector<std::unique_ptr<TFRecordWriter>> writers_;
  int64_t written_ = 0;
};

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_RECORD_SHARDS_H_
