// The input pipeline: files matched by glob patterns -> records (TFRecord) -> Reader plugin ->
// shuffle buffer -> batches -> a bounded prefetch queue, with its own threads.
//
// Semantics follow the YouTube-8M starter code's string_input_producer + shuffle_batch_join:
// the file list is shuffled each epoch (when shuffling), `num_readers` threads read files in
// parallel, examples pass through a shuffle buffer, and batches of `batch_size` come out until
// `num_epochs` epochs are done (0: forever); the last batch may be smaller when
// allow_smaller_final_batch. With `deterministic`, the order of examples depends only on the
// seed, not on thread timing.
//
// Per-example transforms (transform.h) run in the reader threads after Reader::parse(), in the
// order given, each with its own random stream keyed by the seed and the record's identity, so
// their draws do not depend on threads, shuffling or resume.
//
// Variable-length features: a feature whose first dimension is declared -1 (boxes per image,
// frames per video) is batched by padding it to `padding[name].pad_to` rows, optionally with a
// count feature ([batch]: each record's number of real rows) and a mask feature ([batch, pad_to]:
// 1 for a real row, 0 for padding). A feature named in `pad_to_largest` (an image of its own
// size) is zero-padded at the end of each dimension to the largest of its batch, as tf.data's
// padded_batch and tf.train.batch's dynamic_pad. Other features with a -1 dimension must have
// equal shapes within a batch. Features of different shapes sit side by side in one batch (an image
// [B, H, W, 3] beside boxes [B, N, 4] and classes [B, N]).
#ifndef TRAINYARD_CORE_INPUT_PIPELINE_H_
#define TRAINYARD_CORE_INPUT_PIPELINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/reader.h"
#include "trainyard/tensor.h"
#include "trainyard/transform.h"

namespace trainyard {

// The files matching comma-separated glob patterns, sorted; directories a wildcard matches are
// left out. Throws NotFound naming the first pattern that matches nothing, InvalidArgument
// naming a pattern that matches only directories or a matched file that is not a regular file
// (a FIFO, a device such as /dev/stdin or /dev/zero, a socket).
TRAINYARD_API std::vector<std::string> expand_file_patterns(const std::string& patterns);

// Throws InvalidArgument naming `path` and what it is unless it is a regular file (after
// symbolic links), NotFound when it cannot be stat()ed.
TRAINYARD_API void check_regular_data_file(const std::string& path);

// How a feature whose first dimension varies per record is padded in a batch.
struct FeaturePadding {
  int64_t pad_to = 0;      // rows in the batch (the feature becomes [batch, pad_to, ...])
  double pad_value = 0.0;  // converted to the feature's dtype
  // A record with more than pad_to rows is an InvalidArgument naming the file, record, feature
  // and both sizes; with `truncate` its first pad_to rows are kept, counted in
  // InputStats::truncated.
  bool truncate = false;
  std::string count_feature;        // when set, a [batch] feature of each record's row count
  DType count_dtype = DType::kI32;  // i32 or i64
  std::string mask_feature;         // when set, a [batch, pad_to] feature: 1 real row, 0 padding
  DType mask_dtype = DType::kF32;   // f32, u8, bool, i32 or i64
};

struct InputOptions {
  std::string data_pattern;  // comma-separated globs
  int64_t batch_size = 1024;
  int num_readers = 8;
  int64_t num_epochs = 1;  // 0: forever
  bool shuffle = true;
  int64_t shuffle_buffer_size = 0;  // 0: 5 x batch_size
  int64_t prefetch_batches = 2;
  bool allow_smaller_final_batch = true;
  bool deterministic = false;
  uint64_t seed = 0;
  bool skip_corrupt_records = false;  // else a corrupt record stops the pipeline with DataLoss
  // The most bytes of parsed records (their feature buffers, after the transforms) held between
  // the readers and the batches: half for the readers' chunks and queues (a reader waits before
  // reading on when they hold it), half for the shuffle buffer (which then draws from the
  // records it has, fewer than its capacity; InputStats::shuffle_buffer_limited_to says so).
  // Neither changes the order of a deterministic pipeline: it still depends only on the data and
  // the seed. A record larger than a half passes alone. Batches (prefetch_batches + 1 of them)
  // are not counted. 0: default_input_memory_budget().
  int64_t memory_budget_bytes = 0;
  // Data parallelism: this pipeline reads shard `shard_index` of `shard_count`, as tf.data's
  // AutoShardPolicy.AUTO splits the input between workers: by file (file i of the sorted list
  // when i % shard_count == shard_index) when there are at least as many files as shards, else
  // by record (record k of every file when k % shard_count == shard_index; the others are
  // skipped before they are parsed).
  int shard_count = 1;
  int shard_index = 0;
  // Keeps record k of each file when k % sample_1_of_n_examples == 0, before it is parsed (the
  // Object Detection API's sample_1_of_n_examples); 1 keeps every record.
  int64_t sample_1_of_n_examples = 1;
  // Run after parse() on every record, in this order; shared by the reader threads.
  std::vector<std::shared_ptr<const ExampleTransform>> transforms;
  std::map<std::string, FeaturePadding> padding;  // by feature name
  // Features zero-padded in each batch to the largest size of each dimension among its records
  // (the Object Detection API's batches of images of their own sizes); each needs a -1
  // dimension. A feature also in `padding` (instance masks [boxes, height, width]) has its first
  // dimension padded to pad_to as `padding` says (pad_value 0) and its others, which need a -1
  // among them, to the largest. A batch whose padded record would hold more than
  // kMaxPaddingGrowth times the elements of its largest record is an InvalidArgument naming
  // the feature and the records.
  std::set<std::string> pad_to_largest;
  static constexpr int64_t kMaxPaddingGrowth = 16;
};

// One batch on the host: every feature stacked along a new first dimension.
struct HostBatch {
  int64_t size = 0;
  std::vector<std::string> ids;
  std::map<std::string, ParsedFeature> features;  // shape [size, ...feature shape]
};

struct InputStats {
  std::string sharding;  // "" with one shard, else how the files were split ("by file: 3 of 6")
  int64_t records = 0;   // parsed and delivered into batches
  int64_t corrupt_skipped = 0;  // with skip_corrupt_records
  int64_t files_opened = 0;
  int64_t epochs_completed = 0;
  int64_t truncated = 0;  // feature values cut to pad_to (FeaturePadding::truncate)
  // The fewest records the shuffle buffer held when its share of memory_budget_bytes stopped
  // it filling to its capacity; 0 when that never happened.
  int64_t shuffle_buffer_limited_to = 0;
};

// A quarter of the machine's physical memory, at least 256 MiB.
TRAINYARD_API int64_t default_input_memory_budget();

class TRAINYARD_API InputPipeline {
 public:
  // Starts the threads. `reader` must outlive the pipeline. Throws NotFound for a pattern that
  // matches nothing and InvalidArgument for bad options (a padding for an undeclared feature or
  // one whose first dimension is not -1, a count or mask name that is already a feature) and
  // for a transform that refuses the features it would receive.
  InputPipeline(const Reader& reader, InputOptions options);
  ~InputPipeline();  // stops and joins every thread
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // The next batch; std::nullopt once num_epochs are done. Rethrows, on the caller's thread,
  // the first error a pipeline thread met (DataLoss naming the file and offset; the reader's
  // InvalidArgument naming file, record, key; a transform's error; a record longer than its
  // padding), after the batches completed before it. With
  // shuffling the seed fixes each epoch's file order even when not `deterministic`.
  std::optional<HostBatch> next();

  // Gives a batch that next() returned back, so that its buffers are reused for a later batch
  // (optional; a consumer that copies each batch to its device should). Recycled batches
  // keep their capacity: a steady-state pipeline then allocates and zero-fills no batch memory.
  void recycle(HostBatch batch);

  InputStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_INPUT_PIPELINE_H_
