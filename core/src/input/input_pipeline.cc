// The input pipeline (input_pipeline.h).
//
// Threads and queues:
//
//   reader thread r (num_readers of them): takes file tasks (epoch, position in that epoch's
//     file order), reads each file record by record, parses with the Reader, checks the
//     features against the declared ones, runs the transforms, cuts a padded feature longer
//     than its pad_to when asked to, and hands chunks of examples to a chunk queue.
//   batch thread: pulls examples from the chunk queues into the shuffle buffer, draws them at
//     random into a batch (memcpy into the batch's buffers, padding variable-length features
//     and writing their counts and masks) and pushes finished batches onto the prefetch queue.
//
// A transform's random stream is keyed by (seed, epoch, file index, record index, transform
// index): the record's identity, not its position in any thread's or buffer's order.
//   caller: next() pops the prefetch queue.
//
// The shuffle buffer is filled to its capacity (shuffle_buffer_size, or 5 x batch_size) before
// each draw, so it always holds at least min_after_dequeue = batch_size examples, as
// shuffle_batch_join requires, until the input ends; then it drains. Without shuffling its
// capacity is one example, so records keep their reading order.
//
// Deterministic mode: reader r reads tasks r, r + N, r + 2N, ... into its own queue, and the
// batch thread takes one chunk from each reader in turn; chunk boundaries depend only on the
// data (a chunk ends at a size limit or at the end of a file). Otherwise readers take the next
// task from a shared counter and share one queue. Either way one seeded generator drives the
// shuffle buffer, and the file order of epoch e is a shuffle seeded by (seed, e).
//
// Errors travel in band: a reader that fails puts the exception in its last chunk; the batch
// thread rethrows it when it reaches that chunk, and it ends the prefetch queue, so next()
// returns the batches already made and then rethrows it.
//
// Memory: the parsed records between a reader and their batch are bounded by
// InputOptions::memory_budget_bytes (their buffers' capacity, counted after the transforms),
// half for the readers' chunks and queues and half for the shuffle buffer:
// - a reader waits before reading its next record while the readers' half is spent, unless the
//   batch thread may be waiting for it (deterministic: its own queue is empty; otherwise: the
//   shared queue is empty, and it first hands over what it holds). Waiting changes timing only,
//   never a chunk's boundaries, so the deterministic order stays what the data and seed make it;
// - the shuffle buffer fills to its capacity or until its records hold its half, whichever
//   comes first, and always takes at least one record. That rule reads only the records' own
//   sizes, so the order is still fixed by the data and the seed (and resuming replays it).
// A record larger than a half still passes, alone; what one decode may allocate is bounded by
// the reader's own limits (max_image_pixels). After the transforms a feature buffer that holds
// far more than its values (a transform that shrank it in place) is reallocated to its size.
//
// First steps: the batch thread makes the second batch only once the first is taken, and the
// third once the second is, then fills the prefetch queue as usual. The batches it would
// otherwise make ahead, each a batch-sized buffer touched for the first time and its records
// copied in, ran on the cores the first training step needs. It changes when batches are made,
// never which records they hold.
//
// One mutex guards every queue and flag; the threads exchange chunks of records, not single
// records, so it is taken a few times per chunk and per batch (and per record only while a
// reader waits for memory).
#include "trainyard/core/input_pipeline.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "input/input_features.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// A chunk is handed over when it holds this many records or this many feature bytes.
constexpr std::size_t kChunkRecords = 32;
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
// Chunks a queue holds per reader feeding it.
constexpr std::size_t kChunksPerReader = 2;

// Batches made one at a time, each once the one before it is taken (see "First steps").
constexpr int64_t kHeldBatches = 3;

using input_internal::location_string;
using input_internal::ResolvedPadding;
using input_internal::shape_string;
using input_internal::validate_record;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// SplitMix64 (Steele, Lea, Flood 2014): the same numbers on every platform, unlike the
// distributions of <random>. One stream per (seed, stream).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : state_(splitmix64(seed) ^ splitmix64(~stream)) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit =
        std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

 private:
  uint64_t state_;
};

constexpr uint64_t kShuffleBufferStream = ~uint64_t{0};
constexpr uint64_t kTransformStream = 0x7472616e73666f72ull;  // "transfor"

// The Philox key of transform `t`'s stream for one record.
uint64_t transform_key(uint64_t seed, int64_t epoch, int32_t file, int64_t record, std::size_t t) {
  uint64_t h = splitmix64(seed ^ kTransformStream);
  h = splitmix64(h ^ static_cast<uint64_t>(epoch));
  h = splitmix64(h ^ static_cast<uint64_t>(file));
  h = splitmix64(h ^ static_cast<uint64_t>(record));
  return splitmix64(h ^ static_cast<uint64_t>(t));
}

// Thrown inside the pipeline's threads when the pipeline is being destroyed.
struct Stopped {};

struct Example {
  ParsedRecord record;
  int32_t file = 0;
  int64_t record_index = 0;
  std::size_t held = 0;  // its feature buffers' capacity, for the memory budget
};

// Reallocates feature buffers that hold far more than their values, and returns the bytes the
// record's features then hold: a feature with fewer rows than declared (`specs`, ordered as the
// record's features) counts as if it held them all, so the budget's decisions, and with them
// the shuffle order, are those of the record with its padding.
std::size_t trim_and_measure(ParsedRecord& record, const std::vector<FeatureSpec>& specs) {
  std::size_t held = 0;
  std::size_t spec = 0;
  for (auto& [name, feature] : record.features) {
    std::vector<std::byte>& bytes = feature.bytes;
    if (bytes.capacity() > bytes.size() + bytes.size() / 2 + 4096) {
      bytes = std::vector<std::byte>(bytes.begin(), bytes.end());
    }
    held += std::max(bytes.capacity(), input_internal::full_bytes(feature, specs[spec++]));
  }
  return held;
}

struct Chunk {
  std::vector<Example> examples;
  std::size_t bytes = 0;     // the features' values: where a chunk ends (kChunkBytes)
  std::size_t held = 0;      // the examples' Example::held
  bool reader_done = false;  // the reader's last chunk
  std::exception_ptr error;  // raised after this chunk's examples
};

struct ChunkQueue {
  std::deque<Chunk> chunks;
  std::size_t capacity = 0;
  std::condition_variable not_full;
};

void name_thread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace

struct InputPipeline::Impl {
  Impl(const Reader& r, InputOptions o) : reader(r), options(std::move(o)) {}
  ~Impl() { shutdown(); }

  void start();
  void shutdown();

  // Reader threads.
  void reader_loop(int r);
  std::vector<int32_t> epoch_order(int64_t epoch) const;
  bool read_file(int32_t file, int64_t epoch, Chunk& chunk, ChunkQueue& queue);
  void transform(ParsedRecord& record, const RecordLocation& where, int64_t epoch, int32_t file);
  bool push_chunk(Chunk& chunk, ChunkQueue& queue);
  bool wait_for_memory(Chunk& chunk, ChunkQueue& queue);
  void file_done(int64_t epoch, int64_t records);
  [[noreturn]] void rethrow_plugin_error(const std::string& who, const RecordLocation& where) const;

  // Batch thread.
  void batch_loop();
  Example* next_example();
  void start_batch(HostBatch& batch);
  void add_to_batch(HostBatch& batch, int64_t row, Example& example);
  void finish_padded();
  void push_batch(HostBatch&& batch);
  void finish(std::exception_ptr error);
  void note_buffer_limited(std::size_t examples);

  const Reader& reader;
  const InputOptions options;
  std::vector<std::string> files;
  int record_shard_count = 1;  // sharding by record: keep record k when k % count == index
  int record_shard_index = 0;
  std::string sharding;
  std::vector<FeatureSpec> reader_specs;  // as the reader declares them
  std::vector<FeatureSpec> specs;         // after the transforms, sorted by name
  std::vector<bool> spec_varies;          // a dimension is -1 and the feature is not padded
  std::vector<std::optional<ResolvedPadding>> paddings;  // by spec
  bool any_padding = false;
  std::vector<bool> pad_largest;  // by spec: padded to the largest of its batch
  bool any_pad_largest = false;
  std::size_t buffer_capacity = 1;
  std::size_t half_budget = 0;  // memory_budget_bytes / 2: the readers' and the buffer's share
  int64_t total_tasks = 0;      // num_epochs x files; "forever" when num_epochs is 0

  std::mutex mu;
  bool stopping = false;               // the destructor or an error ends the pipeline
  std::atomic<bool> stop_flag{false};  // the same, read without the mutex between records
  std::vector<std::unique_ptr<ChunkQueue>> queues;
  std::condition_variable chunk_ready;
  int64_t next_task = 0;  // shared task counter (not deterministic)
  // Bytes held by records in readers' chunks and in the queues; changed under `mu` when it
  // falls (a chunk taken), read without it on a reader's fast path.
  std::atomic<std::size_t> reader_held{0};
  std::condition_variable memory_freed;
  std::deque<HostBatch> batches;
  std::vector<HostBatch> spare;  // recycled by the consumer, reused by the batch thread
  std::condition_variable batch_ready;
  std::condition_variable batch_space;
  int64_t batches_made = 0;   // pushed onto the prefetch queue
  int64_t batches_taken = 0;  // popped by next()
  bool finished = false;
  std::exception_ptr error;

  // The batch thread's view of the batch being filled: its feature for each spec, and the count
  // and mask features of each padded spec (or nullptr).
  std::vector<ParsedFeature*> batch_out;
  std::vector<ParsedFeature*> count_out;
  // The rows of each pad_largest spec and where each record of the batch came from, until the
  // batch is complete and its largest sizes are known.
  std::vector<std::vector<ParsedFeature>> largest_rows;
  std::vector<std::string> row_locations;
  std::vector<ParsedFeature*> mask_out;

  // The batch thread's view of the reader queues.
  Chunk current;
  std::size_t current_pos = 0;
  std::vector<int> active_readers;  // deterministic: readers not done, in turn order
  std::size_t turn = 0;
  int readers_done = 0;  // not deterministic

  // Per-epoch progress, for epochs_completed and for spotting a file set with no records.
  std::mutex epoch_mu;
  std::map<int64_t, std::pair<int64_t, int64_t>> epoch_progress;  // files done, records

  std::atomic<int64_t> records{0};
  std::atomic<int64_t> corrupt_skipped{0};
  std::atomic<int64_t> files_opened{0};
  std::atomic<int64_t> epochs_completed{0};
  std::atomic<int64_t> truncated{0};
  std::atomic<int64_t> buffer_limited_to{0};

  std::vector<std::thread> threads;
};

void InputPipeline::Impl::start() {
  const int n = options.num_readers;
  const std::size_t queue_count = options.deterministic ? static_cast<std::size_t>(n) : 1;
  for (std::size_t q = 0; q < queue_count; ++q) {
    queues.push_back(std::make_unique<ChunkQueue>());
    queues.back()->capacity =
        kChunksPerReader * (options.deterministic ? 1 : static_cast<std::size_t>(n));
  }
  for (int r = 0; r < n; ++r) active_readers.push_back(r);
  threads.reserve(static_cast<std::size_t>(n) + 1);
  int started = 0;
  try {
    for (; started < n; ++started) threads.emplace_back([this, r = started] { reader_loop(r); });
    threads.emplace_back([this] { batch_loop(); });
  } catch (const std::system_error& e) {
    // Typically EAGAIN: the process or user is out of threads. ~Impl joins those started.
    throw Error("cannot start the input pipeline's " +
                (started < n ? "reader thread " + std::to_string(started + 1) + " of " +
                                   std::to_string(n) + " (num_readers)"
                             : std::string("batching thread")) +
                ": " + e.what());
  }
}

void InputPipeline::Impl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    stop_flag.store(true, std::memory_order_relaxed);
  }
  for (auto& q : queues) q->not_full.notify_all();
  chunk_ready.notify_all();
  memory_freed.notify_all();
  batch_space.notify_all();
  batch_ready.notify_all();
  for (std::thread& t : threads) {
    if (t.joinable()) t.join();
  }
  threads.clear();
}

// ---- reader threads ----

std::vector<int32_t> InputPipeline::Impl::epoch_order(int64_t epoch) const {
  std::vector<int32_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  if (options.shuffle) {
    Rng rng(options.seed, static_cast<uint64_t>(epoch));
    for (std::size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[rng.below(i)]);
    }
  }
  return order;
}

void InputPipeline::Impl::reader_loop(int r) {
  name_thread("ty-read-" + std::to_string(r));
  ChunkQueue& queue = *queues[options.deterministic ? static_cast<std::size_t>(r) : 0];
  const auto file_count = static_cast<int64_t>(files.size());
  Chunk chunk;
  chunk.examples.reserve(kChunkRecords);
  int64_t order_epoch = -1;
  std::vector<int32_t> order;
  try {
    for (int64_t j = 0;; ++j) {
      int64_t task;
      if (options.deterministic) {
        task = r + j * options.num_readers;
      } else {
        std::lock_guard<std::mutex> lock(mu);
        task = next_task < total_tasks ? next_task++ : total_tasks;
      }
      if (task >= total_tasks) break;
      const int64_t epoch = task / file_count;
      if (epoch != order_epoch) {
        order = epoch_order(epoch);
        order_epoch = epoch;
      }
      if (!read_file(order[static_cast<std::size_t>(task % file_count)], epoch, chunk, queue)) {
        return;  // stopping
      }
    }
  } catch (...) {
    chunk.error = std::current_exception();
  }
  chunk.reader_done = true;
  push_chunk(chunk, queue);
}

bool InputPipeline::Impl::read_file(int32_t file, int64_t epoch, Chunk& chunk, ChunkQueue& queue) {
  RecordLocation where{files[static_cast<std::size_t>(file)], 0};
  TFRecordReader in(where.file, Compression::kAuto);
  files_opened.fetch_add(1, std::memory_order_relaxed);
  std::string data;
  int64_t records_read = 0;
  for (int64_t index = 0;; ++index) {
    if (stop_flag.load(std::memory_order_relaxed)) return false;
    if (!wait_for_memory(chunk, queue)) return false;
    const TFRecordReader::Result result = in.read(&data);
    if (result.kind == TFRecordReader::Result::kEndOfFile) break;
    if (result.kind != TFRecordReader::Result::kRecord) {
      if (!options.skip_corrupt_records) throw DataLoss(result.message);
      corrupt_skipped.fetch_add(1, std::memory_order_relaxed);
      // After a truncation or a bad length the reader is at the end; after a bad data CRC it
      // has stepped over the record.
      if (result.kind == TFRecordReader::Result::kTruncated || in.offset() <= result.offset) {
        break;
      }
      continue;
    }
    // Sampling first; the replicas then split the records it keeps.
    const int64_t sample = options.sample_1_of_n_examples;
    if (sample > 1 && index % sample != 0) continue;
    if (record_shard_count > 1 && (index / sample) % record_shard_count != record_shard_index) {
      continue;
    }
    where.record_index = index;
    Example example;
    // A DataLoss from the reader is a corrupt record, skipped or not per the policy; anything
    // else it throws stops the run. Either way the message names the reader's plugin.
    bool corrupt = false;
    try {
      example.record = reader.parse(data, where);
    } catch (...) {
      // Readers name the record themselves (reader.h); say where only when this one did not.
      std::string call = "parse";
      const std::string at = location_string(where);
      try {
        throw;
      } catch (const std::exception& e) {
        if (std::string_view(e.what()).find(at) == std::string_view::npos) call += " of " + at;
      } catch (...) {
        call += " of " + at;
      }
      try {
        rethrow_plugin_exception(reader, call);
      } catch (const DataLoss&) {
        if (!options.skip_corrupt_records) throw;
        corrupt = true;
      }
    }
    if (corrupt) {
      corrupt_skipped.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    validate_record(example.record, where, reader_specs, "the reader", /*leading_rows=*/true);
    if (!options.transforms.empty()) {
      // A transform sees every declared row; without transforms add_to_batch writes the zeros.
      input_internal::fill_leading_rows(example.record, reader_specs);
      transform(example.record, where, epoch, file);
    }
    if (any_padding) {
      std::size_t spec = 0;
      for (auto& [name, feature] : example.record.features) {  // ordered as `specs`
        const std::optional<ResolvedPadding>& padding = paddings[spec++];
        if (padding &&
            input_internal::fit_to_padding(feature, name, *padding, location_string(where))) {
          truncated.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    example.file = file;
    example.record_index = index;
    example.held = trim_and_measure(example.record, specs);
    std::size_t spec = 0;
    for (const auto& [name, feature] : example.record.features) {  // ordered as `specs`
      chunk.bytes += input_internal::full_bytes(feature, specs[spec++]);
    }
    chunk.held += example.held;
    reader_held.fetch_add(example.held, std::memory_order_relaxed);
    chunk.examples.push_back(std::move(example));
    ++records_read;
    if (chunk.examples.size() >= kChunkRecords || chunk.bytes >= kChunkBytes) {
      if (!push_chunk(chunk, queue)) return false;
    }
  }
  file_done(epoch, records_read);
  // Hand over at every file's end, so a reader whose files are empty or small still takes its
  // turn in deterministic mode.
  return push_chunk(chunk, queue);
}

void InputPipeline::Impl::transform(ParsedRecord& record, const RecordLocation& where,
                                    int64_t epoch, int32_t file) {
  for (std::size_t t = 0; t < options.transforms.size(); ++t) {
    const ExampleTransform& step = *options.transforms[t];
    ExampleRandom random(transform_key(options.seed, epoch, file, where.record_index, t));
    try {
      step.apply(record, random, where);
    } catch (const Error&) {
      throw;
    } catch (...) {
      rethrow_plugin_error("transform '" + step.name() + "'", where);
    }
  }
  validate_record(record, where, specs,
                  "the transforms (last '" + options.transforms.back()->name() + "')");
}

void InputPipeline::Impl::rethrow_plugin_error(const std::string& who,
                                               const RecordLocation& where) const {
  try {
    throw;
  } catch (const std::exception& e) {
    throw PluginError(who + " failed on " + location_string(where) + ": " + e.what());
  } catch (...) {
    throw PluginError(who + " failed on " + location_string(where) +
                      ": an exception that is not a std::exception");
  }
}

// Returns false when stopping. See "Memory" at the top for why a reader whose records the batch
// thread may be waiting for never waits here.
bool InputPipeline::Impl::wait_for_memory(Chunk& chunk, ChunkQueue& queue) {
  if (reader_held.load(std::memory_order_relaxed) < half_budget) return true;
  std::unique_lock<std::mutex> lock(mu);
  if (!options.deterministic && !chunk.examples.empty() && !queue.chunks.empty()) {
    lock.unlock();
    if (!push_chunk(chunk, queue)) return false;
    lock.lock();
  }
  memory_freed.wait(lock, [&] {
    return stopping || reader_held.load(std::memory_order_relaxed) < half_budget ||
           queue.chunks.empty();
  });
  return !stopping;
}

bool InputPipeline::Impl::push_chunk(Chunk& chunk, ChunkQueue& queue) {
  {
    std::unique_lock<std::mutex> lock(mu);
    queue.not_full.wait(lock, [&] { return stopping || queue.chunks.size() < queue.capacity; });
    if (stopping) return false;
    queue.chunks.push_back(std::move(chunk));
  }
  chunk_ready.notify_one();
  chunk = Chunk{};
  chunk.examples.reserve(kChunkRecords);
  return true;
}

void InputPipeline::Impl::file_done(int64_t epoch, int64_t records_in_file) {
  std::lock_guard<std::mutex> lock(epoch_mu);
  auto& [files_done, epoch_records] = epoch_progress[epoch];
  ++files_done;
  epoch_records += records_in_file;
  if (files_done < static_cast<int64_t>(files.size())) return;
  const bool empty = epoch_records == 0;
  epoch_progress.erase(epoch);
  epochs_completed.fetch_add(1, std::memory_order_relaxed);
  if (empty && options.num_epochs == 0) {
    throw InvalidArgument("the " + std::to_string(files.size()) + " files matching '" +
                          options.data_pattern +
                          "' hold no records; with num_epochs 0 the input would never end");
  }
}

// ---- batch thread ----

// The next example from the readers, in turn order when deterministic; nullptr when every
// reader is done. Rethrows a reader's error once its earlier examples are taken.
Example* InputPipeline::Impl::next_example() {
  while (current_pos == current.examples.size()) {
    if (current.error) std::rethrow_exception(std::exchange(current.error, nullptr));
    ChunkQueue* queue;
    int reader_index = 0;
    if (options.deterministic) {
      if (active_readers.empty()) return nullptr;
      reader_index = active_readers[turn];
      queue = queues[static_cast<std::size_t>(reader_index)].get();
    } else {
      if (readers_done == options.num_readers) return nullptr;
      queue = queues[0].get();
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      chunk_ready.wait(lock, [&] { return stopping || !queue->chunks.empty(); });
      if (stopping) throw Stopped{};
      current = std::move(queue->chunks.front());
      queue->chunks.pop_front();
      reader_held.fetch_sub(current.held, std::memory_order_relaxed);
    }
    queue->not_full.notify_one();
    memory_freed.notify_all();
    current_pos = 0;
    if (options.deterministic) {
      if (current.reader_done) {
        active_readers.erase(active_readers.begin() + static_cast<std::ptrdiff_t>(turn));
      } else {
        ++turn;
      }
      if (turn >= active_readers.size()) turn = 0;
    } else if (current.reader_done) {
      ++readers_done;
    }
  }
  return &current.examples[current_pos++];
}

void InputPipeline::Impl::start_batch(HostBatch& batch) {
  const auto rows = static_cast<std::size_t>(options.batch_size);
  batch.size = 0;
  batch.ids.reserve(rows);
  batch.ids.clear();
  // A recycled batch keeps its byte buffers; resizing to the same size is free.
  auto shape = [&](ParsedFeature& f, DType dtype, const std::vector<int64_t>& row_shape) {
    f.dtype = dtype;
    f.shape.clear();
    f.shape.reserve(row_shape.size() + 1);
    f.shape.push_back(options.batch_size);
    f.shape.insert(f.shape.end(), row_shape.begin(), row_shape.end());
    int64_t elements = 1;
    for (int64_t d : row_shape) elements *= d;
    f.bytes.resize(rows * static_cast<std::size_t>(elements) * dtype_size(dtype));
  };
  batch_out.resize(specs.size());
  count_out.assign(specs.size(), nullptr);
  mask_out.assign(specs.size(), nullptr);
  largest_rows.resize(specs.size());
  row_locations.clear();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ParsedFeature& f = batch.features[specs[i].name];
    batch_out[i] = &f;
    if (const std::optional<ResolvedPadding>& padding = paddings[i]) {
      if (pad_largest[i]) {
        largest_rows[i].clear();  // written by finish_padded(), pad_to rows
      } else {
        shape(f, specs[i].dtype, input_internal::padded_shape(*padding));
      }
      const FeaturePadding& o = padding->options;
      if (!o.count_feature.empty()) {
        count_out[i] = &batch.features[o.count_feature];
        shape(*count_out[i], o.count_dtype, {});
      }
      if (!o.mask_feature.empty()) {
        mask_out[i] = &batch.features[o.mask_feature];
        shape(*mask_out[i], o.mask_dtype, {o.pad_to});
      }
    } else if (pad_largest[i]) {
      largest_rows[i].clear();  // written by finish_padded()
    } else if (spec_varies[i]) {
      f.dtype = specs[i].dtype;
      f.shape.clear();  // shaped by the batch's first example
    } else {
      shape(f, specs[i].dtype, specs[i].shape);
    }
  }
}

void InputPipeline::Impl::add_to_batch(HostBatch& batch, int64_t row, Example& example) {
  batch.ids.push_back(std::move(example.record.id));
  if (any_pad_largest) {
    row_locations.push_back(files[static_cast<std::size_t>(example.file)] + ", record " +
                            std::to_string(example.record_index));
  }
  std::size_t spec = 0;
  // The record's map and `specs` are ordered by name and hold the same names (validate()).
  for (auto in = example.record.features.begin(); in != example.record.features.end();
       ++in, ++spec) {
    const ParsedFeature& src = in->second;
    if (const std::optional<ResolvedPadding>& padding = paddings[spec]) {
      const int64_t pad_to = padding->options.pad_to;
      if (pad_largest[spec]) {
        // Padded to pad_to rows by finish_padded(); its other dimensions to the largest.
      } else {
        input_internal::write_padded_row(
            batch_out[spec]->bytes.data() +
                static_cast<std::size_t>(row * pad_to) * padding->row_bytes,
            src, *padding);
      }
      if (count_out[spec] != nullptr) {
        input_internal::write_integer(*count_out[spec], static_cast<std::size_t>(row),
                                      src.shape[0]);
      }
      if (mask_out[spec] != nullptr) {
        input_internal::write_mask_row(*mask_out[spec], row, src.shape[0], pad_to);
      }
      if (pad_largest[spec]) largest_rows[spec].push_back(std::move(in->second));
      continue;
    }
    if (pad_largest[spec]) {
      largest_rows[spec].push_back(std::move(in->second));
      continue;
    }
    ParsedFeature& dst = *batch_out[spec];
    if (!spec_varies[spec]) {
      // The declared rows' slot: the record's rows, then zeros for those it leaves out (a
      // recycled batch holds an earlier batch's values there).
      const std::size_t slot = dst.bytes.size() / static_cast<std::size_t>(options.batch_size);
      std::byte* out = dst.bytes.data() + static_cast<std::size_t>(row) * slot;
      if (!src.bytes.empty()) std::memcpy(out, src.bytes.data(), src.bytes.size());
      if (src.bytes.size() < slot) std::memset(out + src.bytes.size(), 0, slot - src.bytes.size());
      continue;
    }
    const std::size_t row_bytes = src.bytes.size();
    if (dst.shape.empty()) {  // a declared -1 dimension: the first example shapes the batch
      dst.shape.reserve(src.shape.size() + 1);
      dst.shape.push_back(options.batch_size);
      dst.shape.insert(dst.shape.end(), src.shape.begin(), src.shape.end());
      dst.bytes.resize(static_cast<std::size_t>(options.batch_size) * row_bytes);
    } else if (spec_varies[spec] && !std::equal(src.shape.begin(), src.shape.end(),
                                                dst.shape.begin() + 1, dst.shape.end())) {
      std::vector<int64_t> batch_shape(dst.shape.begin() + 1, dst.shape.end());
      throw InvalidArgument(
          "feature '" + in->first + "' of " + files[static_cast<std::size_t>(example.file)] +
          ", record " + std::to_string(example.record_index) + " has shape " +
          shape_string(src.shape) + " but earlier records of its batch have " +
          shape_string(batch_shape) + " (declared " + shape_string(specs[spec].shape) +
          "); records in one batch must have equal shapes (or pad the feature: "
          "InputOptions.padding)");
    }
    if (row_bytes > 0) {
      std::memcpy(dst.bytes.data() + static_cast<std::size_t>(row) * row_bytes, src.bytes.data(),
                  row_bytes);
    }
  }
}

void InputPipeline::Impl::finish_padded() {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!pad_largest[i]) continue;
    input_internal::write_padded_to_largest(*batch_out[i], options.batch_size, largest_rows[i],
                                            specs[i].name, row_locations,
                                            paddings[i] ? paddings[i]->options.pad_to : 0);
    largest_rows[i].clear();
  }
}

void InputPipeline::Impl::push_batch(HostBatch&& batch) {
  {
    std::unique_lock<std::mutex> lock(mu);
    batch_space.wait(lock, [&] {
      return stopping || static_cast<int64_t>(batches.size()) < options.prefetch_batches;
    });
    if (stopping) throw Stopped{};
    batches.push_back(std::move(batch));
    ++batches_made;
  }
  batch_ready.notify_one();
}

void InputPipeline::Impl::finish(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
    error = std::move(e);
    stopping = true;  // readers still running (after an error) stop
    stop_flag.store(true, std::memory_order_relaxed);
  }
  for (auto& q : queues) q->not_full.notify_all();
  memory_freed.notify_all();
  batch_ready.notify_all();
}

void InputPipeline::Impl::note_buffer_limited(std::size_t examples) {
  const auto n = static_cast<int64_t>(examples);
  int64_t seen = buffer_limited_to.load(std::memory_order_relaxed);
  while ((seen == 0 || n < seen) &&
         !buffer_limited_to.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
}

void InputPipeline::Impl::batch_loop() {
  name_thread("ty-batch");
  try {
    Rng rng(options.seed, kShuffleBufferStream);
    std::vector<Example> buffer;
    buffer.reserve(std::min<std::size_t>(buffer_capacity, 1 << 16));
    std::size_t buffer_held = 0;
    bool input_done = false;
    while (true) {
      HostBatch batch;
      {
        std::unique_lock<std::mutex> lock(mu);
        // The second and third batches wait for the one before them to be taken (see "First
        // steps").
        batch_space.wait(lock, [&] {
          return stopping || batches_made >= kHeldBatches || batches_taken >= batches_made;
        });
        if (stopping) throw Stopped{};
        if (!spare.empty()) {
          batch = std::move(spare.back());
          spare.pop_back();
        }
      }
      start_batch(batch);
      int64_t rows = 0;
      while (rows < options.batch_size) {
        while (!input_done && buffer.size() < buffer_capacity) {
          if (!buffer.empty() && buffer_held >= half_budget) {
            note_buffer_limited(buffer.size());
            break;
          }
          Example* example = next_example();
          if (example == nullptr) {
            input_done = true;
          } else {
            buffer_held += example->held;
            buffer.push_back(std::move(*example));
          }
        }
        if (buffer.empty()) break;
        const std::size_t pick = buffer.size() > 1 ? rng.below(buffer.size()) : 0;
        buffer_held -= buffer[pick].held;
        add_to_batch(batch, rows, buffer[pick]);
        if (pick + 1 != buffer.size()) buffer[pick] = std::move(buffer.back());
        buffer.pop_back();
        ++rows;
      }
      if (rows == 0 || (rows < options.batch_size && !options.allow_smaller_final_batch)) break;
      if (any_pad_largest) finish_padded();
      if (rows < options.batch_size) {
        batch.size = rows;
        for (auto& [name, f] : batch.features) {
          const std::size_t row_bytes = f.bytes.size() / static_cast<std::size_t>(f.shape[0]);
          f.shape[0] = rows;
          f.bytes.resize(static_cast<std::size_t>(rows) * row_bytes);
        }
      }
      batch.size = rows;
      records.fetch_add(rows, std::memory_order_relaxed);
      push_batch(std::move(batch));
      if (rows < options.batch_size) break;
    }
    finish(nullptr);
  } catch (const Stopped&) {
  } catch (...) {
    finish(std::current_exception());
  }
}

// ---- InputPipeline ----

int64_t default_input_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  constexpr int64_t kFloor = int64_t{256} << 20;
  if (pages <= 0 || page_size <= 0) return kFloor;
  const int64_t quarter = static_cast<int64_t>(pages) / 4 * static_cast<int64_t>(page_size);
  return std::max(quarter, kFloor);
}

InputPipeline::InputPipeline(const Reader& reader, InputOptions options) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument("InputOptions: " + what);
  };
  check(options.batch_size >= 1,
        "batch_size is " + std::to_string(options.batch_size) + "; it must be at least 1");
  check(options.num_readers >= 1,
        "num_readers is " + std::to_string(options.num_readers) + "; it must be at least 1");
  check(options.num_epochs >= 0, "num_epochs is " + std::to_string(options.num_epochs) +
                                     "; it must be at least 1, or 0 for no limit");
  check(options.shuffle_buffer_size >= 0, "shuffle_buffer_size is " +
                                              std::to_string(options.shuffle_buffer_size) +
                                              "; it must be at least 1, or 0 for 5 x batch_size");
  check(options.prefetch_batches >= 1, "prefetch_batches is " +
                                           std::to_string(options.prefetch_batches) +
                                           "; it must be at least 1");
  check(options.memory_budget_bytes >= 0,
        "memory_budget_bytes is " + std::to_string(options.memory_budget_bytes) +
            "; it must be at least 1, or 0 for the default (a quarter of physical memory)");
  check(options.sample_1_of_n_examples >= 1, "sample_1_of_n_examples is " +
                                                 std::to_string(options.sample_1_of_n_examples) +
                                                 "; it must be at least 1");
  check(options.shard_count >= 1 && options.shard_index >= 0 &&
            options.shard_index < options.shard_count,
        "shard_index " + std::to_string(options.shard_index) + " of shard_count " +
            std::to_string(options.shard_count) + " is out of range");

  auto impl = std::make_unique<Impl>(reader, std::move(options));
  const InputOptions& o = impl->options;
  impl->files = expand_file_patterns(o.data_pattern);
  if (impl->files.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    throw InvalidArgument("the pattern '" + o.data_pattern + "' matches too many files");
  }
  if (o.shard_count > 1) {
    const std::size_t all = impl->files.size();
    const auto count = static_cast<std::size_t>(o.shard_count);
    if (all >= count) {
      std::vector<std::string> mine;
      for (std::size_t i = static_cast<std::size_t>(o.shard_index); i < all; i += count) {
        mine.push_back(impl->files[i]);
      }
      impl->files = std::move(mine);
      impl->sharding = "by file: " + std::to_string(impl->files.size()) + " of the " +
                       std::to_string(all) + " files";
    } else {
      impl->record_shard_count = o.shard_count;
      impl->record_shard_index = o.shard_index;
      impl->sharding = "by record: record k of each of the " + std::to_string(all) +
                       " files when k % " + std::to_string(o.shard_count) +
                       " == " + std::to_string(o.shard_index) + " (fewer files than shards)";
    }
  }
  impl->reader_specs = guard_plugin_call(reader, "features", [&] { return reader.features(); });
  impl->specs = impl->reader_specs;
  for (std::size_t t = 0; t < o.transforms.size(); ++t) {
    if (o.transforms[t] == nullptr) {
      throw InvalidArgument("InputOptions.transforms[" + std::to_string(t) + "] is null");
    }
    impl->specs = o.transforms[t]->features(std::move(impl->specs));
  }
  std::set<std::string> names;
  for (const FeatureSpec& spec : impl->specs) {
    if (!names.insert(spec.name).second) {
      throw InvalidArgument("the reader (or a transform) declares feature '" + spec.name +
                            "' twice");
    }
    bool varies = false;
    for (int64_t d : spec.shape) {
      if (d < -1) {
        throw InvalidArgument("the reader declares feature '" + spec.name + "' with shape " +
                              shape_string(spec.shape) +
                              "; a dimension is a size or -1 (varies per record)");
      }
      varies = varies || d == -1;
    }
    impl->spec_varies.push_back(varies);
  }
  // std::map order, so add_to_batch can walk a record's features and the batch's together.
  std::vector<std::size_t> by_name(impl->specs.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(), [&](std::size_t a, std::size_t b) {
    return impl->specs[a].name < impl->specs[b].name;
  });
  std::vector<FeatureSpec> sorted_specs;
  std::vector<bool> sorted_varies;
  for (std::size_t i : by_name) {
    sorted_specs.push_back(impl->specs[i]);
    sorted_varies.push_back(impl->spec_varies[i]);
  }
  impl->specs = std::move(sorted_specs);
  impl->spec_varies = std::move(sorted_varies);
  impl->pad_largest =
      input_internal::resolve_pad_to_largest(impl->specs, o.pad_to_largest, o.padding);
  impl->paddings = input_internal::resolve_padding(impl->specs, o.padding, o.pad_to_largest);
  for (std::size_t i = 0; i < impl->specs.size(); ++i) {
    if (impl->paddings[i]) {
      impl->spec_varies[i] = false;
      impl->any_padding = true;
    }
    if (impl->pad_largest[i]) {
      impl->spec_varies[i] = false;
      impl->any_pad_largest = true;
    }
  }

  if (o.shuffle) {
    impl->buffer_capacity = static_cast<std::size_t>(
        o.shuffle_buffer_size > 0 ? o.shuffle_buffer_size : 5 * o.batch_size);
  }
  const int64_t budget =
      o.memory_budget_bytes > 0 ? o.memory_budget_bytes : default_input_memory_budget();
  impl->half_budget = static_cast<std::size_t>(std::max<int64_t>(budget / 2, 1));
  const auto file_count = static_cast<int64_t>(impl->files.size());
  impl->total_tasks =
      o.num_epochs == 0 || o.num_epochs > std::numeric_limits<int64_t>::max() / (2 * file_count)
          ? std::numeric_limits<int64_t>::max() / 2
          : o.num_epochs * file_count;
  impl->start();  // on failure ~Impl stops the threads already started
  impl_ = std::move(impl);
}

InputPipeline::~InputPipeline() = default;

void InputPipeline::recycle(HostBatch batch) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (static_cast<int64_t>(impl_->spare.size()) < impl_->options.prefetch_batches + 1) {
    impl_->spare.push_back(std::move(batch));
  }
}

std::optional<HostBatch> InputPipeline::next() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.batch_ready.wait(lock, [&] { return !s.batches.empty() || s.finished; });
  if (!s.batches.empty()) {
    HostBatch batch = std::move(s.batches.front());
    s.batches.pop_front();
    ++s.batches_taken;
    lock.unlock();
    s.batch_space.notify_one();
    return batch;
  }
  if (s.error) std::rethrow_exception(s.error);
  return std::nullopt;
}

InputStats InputPipeline::stats() const {
  const Impl& s = *impl_;
  InputStats out;
  out.records = s.records.load(std::memory_order_relaxed);
  out.corrupt_skipped = s.corrupt_skipped.load(std::memory_order_relaxed);
  out.files_opened = s.files_opened.load(std::memory_order_relaxed);
  out.epochs_completed = s.epochs_completed.load(std::memory_order_relaxed);
  out.truncated = s.truncated.load(std::memory_order_relaxed);
  out.shuffle_buffer_limited_to = s.buffer_limited_to.load(std::memory_order_relaxed);
  out.sharding = s.sharding;
  return out;
}

}  // namespace trainyard
