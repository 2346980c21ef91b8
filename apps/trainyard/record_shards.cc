#include "record_shards.h"

#include <cstdio>
#include <filesystem>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "trainyard/error.h"

namespace trainyard::app {

std::string record_shard_name(const std::string& output, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d", shard, num_shards);
  return output + suffix;
}

RecordShards::RecordShards(const std::string& what, const std::string& output, int num_shards,
                           bool plain_name_when_one) {
  if (output.empty()) throw InvalidArgument(what + ": --output is required");
  if (num_shards < 1 || num_shards > kMaxRecordShards) {
    throw InvalidArgument(what + ": --num_shards is " + std::to_string(num_shards) +
                          "; expected 1 to " + std::to_string(kMaxRecordShards));
  }
  const std::filesystem::path path(output);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  for (int shard = 0; shard < num_shards; ++shard) {
    const std::string name = num_shards == 1 && plain_name_when_one
                                 ? output
                                 : record_shard_name(output, shard, num_shards);
    files_.push_back(std::make_unique<AtomicFile>(name));
    writers_.push_back(std::make_unique<TFRecordWriter>(files_.back()->temporary_path()));
  }
}

// The writers close before their AtomicFiles remove the temporaries.
RecordShards::~RecordShards() { writers_.clear(); }

void RecordShards::write(const wire::tf::Example& example) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  writers_[static_cast<std::size_t>(written_ % static_cast<int64_t>(writers_.size()))]->write(
      bytes);
  ++written_;
}

std::vector<std::string> RecordShards::commit() {
  for (const std::unique_ptr<TFRecordWriter>& writer : writers_) writer->close();
  std::vector<std::string> paths;
  for (const std::unique_ptr<AtomicFile>& file : files_) {
    file->commit();
    paths.push_back(file->path());
  }
  return paths;
}

}  // namespace trainyard::app
