// Checkpoints in TensorFlow's V2 layout ("tensor bundle"), readable by tf.train.load_checkpoint
// and tf.train.latest_checkpoint, and able to read theirs.
//
// A checkpoint with prefix P is two files:
//   P.data-00000-of-00001  the tensors' raw little-endian, row-major bytes, one after another;
//   P.index                a TensorFlow table (LevelDB SSTable format) mapping "" to a
//                          BundleHeaderProto and each tensor name, in bytewise order, to a
//                          BundleEntryProto {dtype, shape, offset, size, masked CRC-32C}.
// A directory managed by CheckpointManager also holds `checkpoint`, a text-format
// CheckpointState naming the newest checkpoint and those still kept.
//
// Crash safety: every file is written under a temporary name, fsynced and renamed into place,
// the .index last, and the directory is fsynced; the `checkpoint` file is rewritten the same
// way only after the checkpoint it names is complete, and old checkpoints are deleted only after
// that (their .index first). A process killed at any instant therefore leaves the checkpoint
// that latest_checkpoint() reports whole. Leftover temporary files are removed by the next
// CheckpointManager::save.
//
// Tensor dtypes map to TensorFlow's DataType: f32 DT_FLOAT, f64 DT_DOUBLE, i32 DT_INT32,
// u8 DT_UINT8, i64 DT_INT64, bool DT_BOOL (one byte each), bf16 DT_BFLOAT16, f16 DT_HALF.
//
// Thread safety: a CheckpointReader may be read from concurrently. A CheckpointManager must be
// used by one thread at a time, and one directory by one manager at a time.
#ifndef TRAINYARD_CORE_CHECKPOINT_H_
#define TRAINYARD_CORE_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;

// "P.index" and "P.data-00000-of-00001" (shard 0 of 1) for prefix P.
TRAINYARD_API std::string checkpoint_index_path(const std::string& prefix);
TRAINYARD_API std::string checkpoint_data_path(const std::string& prefix, int shard = 0,
                                               int num_shards = 1);

// Writes the checkpoint `prefix` (creating its directory), replacing any checkpoint with that
// prefix. Tensors are copied to the host through their backends. Names must be non-empty and
// unique; they may contain '/'. Throws InvalidArgument naming the offending tensor, or Error
// naming the file when the file system fails (temporary files are then removed).
TRAINYARD_API void write_checkpoint(const std::string& prefix,
                                    const std::vector<std::pair<std::string, Tensor>>& tensors);

struct CheckpointTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  int tf_dtype = 0;  // TensorFlow's DataType number, as stored
  // Empty when read() can return the tensor; otherwise why it cannot ("DT_STRING has no
  // Trainyard dtype", "rank 9 exceeds ...", "partitioned variable ..."); dtype and shape are
  // then unspecified.
  std::string unsupported;
};

// Reads a checkpoint written by write_checkpoint or by TensorFlow: V2 (any number of shards,
// uncompressed or snappy-compressed index) or V1, the single file TF-Slim's published
// checkpoints are (checkpoint_v1.h; opened by its index and metadata, each tensor read from the
// blocks holding its slices, and partitioned ones assembled, when read() asks for it).
class TRAINYARD_API CheckpointReader {
 public:
  // `path` is a prefix P (P.index and P.data-* for V2, the file P for V1), P.index, one of P's
  // data files, or a directory (its newest complete checkpoint, as latest_checkpoint). Reads
  // and checks the index (footer, block CRCs, header version) and that every data shard is long
  // enough for its tensors; of a V1 file, the footer, the index block and the metadata. Throws NotFound naming the .index file and listing what the
  // directory holds when there is no checkpoint, DataLoss naming the file when the index or V1
  // file is truncated or corrupt or a data shard is missing or short, Unimplemented for a
  // big-endian bundle.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // The resolved prefix (for V1, the file).
  const std::string& prefix() const;
  // Every tensor, sorted by name.
  const std::vector<CheckpointTensorInfo>& tensors() const;
  bool contains(const std::string& name) const;
  // Throws NotFound as read() does.
  const CheckpointTensorInfo& info(const std::string& name) const;

  // Reads the tensor `name` into a new tensor on `backend`. Throws NotFound naming the
  // checkpoint and listing the most similar names when it is absent, DataLoss naming the data
  // file and the tensor when its CRC-32C does not match (V1: a block's, or its slices do not
  // assemble), Unimplemented when it is unsupported, Error naming the checkpoint and the tensor
  // when it cannot be allocated (V1: or is larger than 8 GiB or half the machine's memory).
  Tensor read(const std::string& name, Backend& backend) const;

  // Checks every tensor against the CRC-32C its entry stores (and, for a Trainyard dtype, its
  // byte size against its shape) in one pass over the data files, without a backend. Entries
  // whose checksum covers an encoding rather than the raw bytes (DT_STRING, DT_VARIANT,
  // DT_RESOURCE) and the entries of partitioned variables, which hold no bytes, are checked for
  // their bounds only, as the constructor did. A V1 checkpoint's tensors are each read (the CRCs
  // of the blocks holding them checked, their slices assembled) and dropped in turn. Throws
  // DataLoss naming the data file and the first damaged tensor.
  void verify() const;

  // Writes a copy of this V2 checkpoint as `to_prefix` (its index, and of each data shard the
  // bytes its index refers to: a data file longer than that, by a hole or by trailing bytes,
  // is not copied past them), each file fsynced; the caller publishes the directory. Throws
  // InvalidArgument for a V1 checkpoint, Error naming the file when writing fails.
  void copy_to(const std::string& to_prefix) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `checkpoint` state file is untrusted input: it is read only when at most
// kMaxCheckpointStateBytes long and parsed with a nesting limit, and an entry naming a path outside
// its directory (an absolute path elsewhere, a `..` component) is ignored: never restored,
// renamed or deleted. Relative entries are taken relative to the directory.
inline constexpr std::size_t kMaxCheckpointStateBytes = 1 << 20;

// The newest checkpoint `directory`/checkpoint names (its model_checkpoint_path, else the last of
// all_model_checkpoint_paths), when its files open (CheckpointReader's checks; the tensors' CRCs
// are checked as they are read). nullopt when the state file is absent or names no checkpoint
// inside `directory`. Throws DataLoss naming the checkpoint and why when its files are missing,
// truncated or corrupt (an older one is not silently taken instead; `trainyard train` moves a
// damaged one aside), and DataLoss naming the state file when it is too large or does not parse.
TRAINYARD_API std::optional<std::string> latest_checkpoint(const std::string& directory);

// Why the checkpoint `prefix` is damaged (a file missing, truncated or corrupt, a tensor whose
// bytes do not match its CRC-32C: CheckpointReader's constructor and verify()), or nullopt when it
// is intact.
TRAINYARD_API std::optional<std::string> checkpoint_damage(const std::string& prefix);

// For the one process that writes `directory` (a training run, before it makes its
// CheckpointManager): the checkpoint to restore, the newest intact one its state file lists.
// Each listed checkpoint found damaged is reported on `log` ("warning: checkpoint P is damaged
// (why); moved aside to P.index.damaged, ...; restoring Q"), its files renamed with a `.damaged`
// suffix (kept for inspection, never restored or garbage-collected), and the state file is
// rewritten to list only intact checkpoints; when one is damaged, the older ones are verified
// too. Entries outside the directory are reported and ignored. nullopt when the state file is
// absent or lists no checkpoint inside `directory`. Throws DataLoss naming every listed
// checkpoint and why it is damaged when none is intact (nothing is renamed then), or naming the
// state file when it is too large or does not parse; both tell the user to pass
// --start_new_model to start over.
TRAINYARD_API std::optional<std::string> recover_latest_checkpoint(const std::string& directory,
                                                                   std::ostream& log);

// Saves numbered checkpoints `directory`/model.ckpt-<step> and keeps the `checkpoint` state file
// as tf.train.CheckpointManager / tf.compat.v1.train.Saver do.
class TRAINYARD_API CheckpointManager {
 public:
  // Seconds since the Unix epoch.
  using Clock = std::function<double()>;

  // max_to_keep <= 0 keeps every checkpoint. Of the checkpoints that max_to_keep would delete,
  // one is kept (and no longer managed) whenever at least keep_checkpoint_every_n_hours have
  // passed since the last one so kept. Recovers the managed list from an existing `checkpoint`
  // file, leaving out entries outside the directory; throws DataLoss as latest_checkpoint()
  // when that file is too large or does not parse. `clock` defaults to the system clock.
  explicit CheckpointManager(std::string directory, int max_to_keep = 5,
                             double keep_checkpoint_every_n_hours = 10000.0, Clock clock = {});
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Removes leftovers of interrupted saves, writes model.ckpt-<step> and verifies it
  // (checkpoint_damage), rewrites the `checkpoint` file atomically, then deletes the checkpoints
  // beyond max_to_keep. Returns the new prefix. Saving an existing step replaces that
  // checkpoint. When the new checkpoint does not verify, its files are moved aside with a
  // `.damaged` suffix and DataLoss is thrown: the state file and every older checkpoint are left
  // as they were, so the newest intact checkpoint is never deleted. Files named *.damaged are
  // never removed.
  std::string save(int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors);

  // latest_checkpoint(directory()).
  std::optional<std::string> latest_checkpoint() const;
  // The managed checkpoint prefixes, oldest first (the newest is last).
  const std::vector<std::string>& all_checkpoints() const { return checkpoints_; }
  const std::string& directory() const { return directory_; }

 private:
  void remove_leftovers() const;
  void write_state() const;

  std::string directory_;
  int max_to_keep_;
  double keep_checkpoint_every_n_hours_;
  Clock clock_;
  std::vector<std::string> checkpoints_;
  std::vector<double> timestamps_;
  double last_preserved_timestamp_ = 0;
  std::string latest_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_CHECKPOINT_H_
