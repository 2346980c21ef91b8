// The `checkpoint` state file as untrusted input, and damaged checkpoints moved aside: what
// checkpoint_manager.cc (CheckpointManager), checkpoint_reader.cc and checkpoint_state.cc
// (latest_checkpoint, recovery) share.
#ifndef TRAINYARD_CORE_SRC_CHECKPOINT_STATE_H_
#define TRAINYARD_CORE_SRC_CHECKPOINT_STATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/proto/checkpoint_state.pb.h"

namespace trainyard::checkpoint_internal {

inline constexpr const char* kStateFileName = "checkpoint";
// Deeper nesting (unknown fields only: CheckpointState has no message fields) is an error.
inline constexpr int kMaxStateNesting = 64;

// The most data shards a bundle header may claim: the shard table is allocated from this count
// before any data file is opened, so a forged .index cannot make a reader reserve gigabytes.
inline constexpr int kMaxCheckpointShards = 100000;

// Opens `path` for reading when it is a regular file: a FIFO is opened without waiting for a
// writer and refused, as are devices, sockets and directories (InvalidArgument naming `path` and
// what it is, since reading one would hang or never end). Returns -1 when `path` does not exist;
// throws Error naming `path` when it cannot be opened otherwise. The caller owns the descriptor.
int open_regular_file(const std::string& path);

// `directory`/checkpoint, parsed (unknown fields are skipped), or nullopt when it does not
// exist. Throws DataLoss naming the file when it is larger than kMaxCheckpointStateBytes or does
// not parse, nesting deeper than kMaxStateNesting included; Error when it cannot be read.
std::optional<tf::CheckpointState> read_state(const std::string& directory);

// The checkpoint prefix a state-file entry names (relative entries are taken relative to
// `directory`), or nullopt when it lies outside `directory`: a `..` component, or an absolute
// path that is not below `directory` once symbolic links are resolved.
std::optional<std::string> resolve_entry(const std::string& directory, const std::string& entry);

// Whether `file_name` is a file moved aside by move_aside: "<name>.damaged" or
// "<name>.damaged.<n>". No cleanup ever removes one.
bool is_moved_aside(std::string_view file_name);

// Renames every file of the checkpoint `prefix` (P.index, P.data-*, or the V1 file P) to
// "<file>.damaged" ("<file>.damaged.<n>" when that name is taken) and fsyncs the directory.
// Returns the new paths (none when no file is left). Throws Error naming the file that cannot
// be renamed.
std::vector<std::string> move_aside(const std::string& prefix);

// Rewrites `directory`/checkpoint atomically, as tf.train.CheckpointManager writes it: `latest`
// and `paths` (oldest first) relative to `directory` when they lie in it, `timestamps` (one per
// path, or none), `last_preserved_timestamp`. Defined in checkpoint_manager.cc.
void write_state(const std::string& directory, const std::string& latest,
                 const std::vector<std::string>& paths, const std::vector<double>& timestamps,
                 double last_preserved_timestamp);

}  // namespace trainyard::checkpoint_internal

#endif  // TRAINYARD_CORE_SRC_CHECKPOINT_STATE_H_
