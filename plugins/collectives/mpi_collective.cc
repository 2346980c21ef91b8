// MpiCollective: the collective of a synchronous data-parallel job of several processes, one per
// rank, over MPI (OpenMPI from Debian): `mpirun -np N trainyard train ...`. Rank and world size
// come from the launcher.
//
// The collectives run on one communication thread that MpiProcess owns, in the order they were
// started, with MPI's blocking calls (its tuned shared-memory and network algorithms; the
// non-blocking ones are 1.5-4x slower in Open MPI 4.1, BENCHMARKS.md), so that collectives
// started by all_reduce_async progress while the caller computes. MPI runs with
// MPI_THREAD_MULTIPLE: a caller that finds the communication thread stuck talks to the other
// ranks itself. A collective the caller waits for at once (barrier, an all_reduce of up to
// 4 MiB) and a small all_reduce_async run on the calling thread instead, without the hand-off, when
// the communication thread has nothing queued or running (so the order stays the order they were
// started); the communication thread then watches them for the timeout below.
//
// Memory: MPI reads and writes the tensors' own bytes when their storage is host memory
// (Storage::native_memory() says DeviceKind::kHost, as the cpu backend's does): a tensor of at
// least kStageBelow bytes is reduced in place by its own MPI_Allreduce. The smaller tensors of
// one call, and every tensor whose memory the host cannot address (through its backend's
// copies), travel together through one pooled host buffer, so that a bucket of many small
// gradients is one MPI_Allreduce. Which tensors go which way depends only on their sizes, never
// on their addresses or devices, so every rank makes the same MPI calls. Each element's sum is
// MPI_Allreduce's own over the ranks (with 2 ranks one addition, the same whichever way the
// bytes travel; with more, MPI's order for a message of its piece's size: one MPI_Allreduce
// takes at most kPieceBytes). NcclCollective reduces CUDA tensors without leaving the device.
//
// Failure: when the communication thread has made no progress for `timeout_secs` while a caller
// waits, the job is stopped instead of hanging. The waiting rank tells every other rank which
// collective its thread is stuck in, listens a few seconds for the same from them, and throws an
// error naming the ranks it never heard from (hung, far slower, or dead) and those ahead or
// behind. From then on every call throws, and the process ends without MPI_Finalize (which would
// wait for the missing rank), so mpirun stops the whole job. A collective run on the calling
// thread cannot be interrupted: when one makes no progress for `timeout_secs`, the
// communication thread makes the same diagnosis, prints it ("error: MpiCollective: ...") and
// ends the process with status 1 (nothing of the caller's runs meanwhile: it waits inside MPI).
// A process that ends with an exception in flight does the same; one that ends normally
// finalizes MPI.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::collectives {
namespace {

using Clock = std::chrono::steady_clock;

// Tag of the messages ranks exchange on a timeout (on their own communicator).
constexpr int kWhereTag = 17;
// How long a rank that timed out listens for the others' positions.
constexpr double kDiagnoseSecs = 5.0;
// The most elements one MPI call moves (its count is an int).
constexpr int64_t kMaxCount = int64_t{1} << 30;
// Tensors smaller than this travel together through one host buffer (one MPI call for many
// small gradients); larger host tensors are reduced in place, one MPI call each.
constexpr std::size_t kStageBelow = std::size_t{64} << 10;
// An all_reduce_async of at most this many bytes runs on the calling thread when the
// communication thread is idle: the hand-off would cost more than the reduction overlaps.
constexpr std::size_t kInlineAsyncBytes = std::size_t{64} << 10;
// An all_reduce of at most this many bytes does the same. Larger ones go to the communication
// thread: here Open MPI's all-reduce of 16 MiB and more, made from the calling thread, took
// 5-20x as long as the same calls from the communication thread (BENCHMARKS.md; cause not
// found), and the ~20 us hand-off is under 5% of a larger reduction.
constexpr std::size_t kInlineBytes = std::size_t{4} << 20;
// One MPI_Allreduce reduces at most this many bytes: Open MPI's own all-reduce of 16 and 64 MiB
// in one call runs at a fraction of its speed on 4 MiB pieces here (its buffers outgrow the
// cache; BENCHMARKS.md), and each piece's mean is taken while it is still in the cache.
constexpr std::size_t kPieceBytes = std::size_t{4} << 20;
// How often the idle communication thread checks a collective running on a calling thread.
constexpr auto kWatchPeriod = std::chrono::milliseconds(100);

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

void check_mpi(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw Error("MpiCollective: " + what + ": " + mpi_error_text(code));
}

std::string seconds_text(double secs) {
  std::ostringstream out;
  out << secs;
  return out.str();
}

// Tells every other rank which collective this one is stuck in, listens for theirs, and says
// which ranks never answered or wait elsewhere.
std::string diagnose(MPI_Comm where, int me, int size, const char* what, uint64_t seq,
                     double timeout) {
  // The sends to silent ranks never complete, and the process will not finalize: their buffer
  // is never freed.
  auto* mine = new uint64_t(seq);
  std::vector<MPI_Request> sends;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    MPI_Request request;
    if (MPI_Isend(mine, 1, MPI_UINT64_T, peer, kWhereTag, where, &request) == MPI_SUCCESS) {
      sends.push_back(request);
    }
  }
  std::vector<int64_t> heard(static_cast<std::size_t>(size), -1);
  heard[static_cast<std::size_t>(me)] = static_cast<int64_t>(seq);
  const Clock::time_point until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::min(kDiagnoseSecs, timeout)));
  int missing = size - 1;
  while (missing > 0 && Clock::now() < until) {
    for (int peer = 0; peer < size; ++peer) {
      if (heard[static_cast<std::size_t>(peer)] >= 0) continue;
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(peer, kWhereTag, where, &flag, &status) != MPI_SUCCESS || !flag) {
        continue;
      }
      uint64_t theirs = 0;
      MPI_Recv(&theirs, 1, MPI_UINT64_T, peer, kWhereTag, where, MPI_STATUS_IGNORE);
      heard[static_cast<std::size_t>(peer)] = static_cast<int64_t>(theirs);
      --missing;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string silent;
  std::string elsewhere;
  for (int peer = 0; peer < size; ++peer) {
    const int64_t h = heard[static_cast<std::size_t>(peer)];
    if (h < 0) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(peer);
    } else if (h > static_cast<int64_t>(seq)) {
      elsewhere += (elsewhere.empty() ? "rank " : "; rank ") + std::to_string(peer) +
                   " has finished it and waits in collective #" + std::to_string(h) +
                   " (this rank was stopped or starved)";
    } else if (h < static_cast<int64_t>(seq)) {
      elsewhere += (elsewhere.empty() ? "rank " : "; rank ") + std::to_string(peer) +
                   " still waits in collective #" + std::to_string(h) +
                   " (it was stopped or starved)";
    }
  }
  std::string message = "MpiCollective: " + std::string(what) + " (collective #" +
                        std::to_string(seq) + " of rank " + std::to_string(me) + " of " +
                        std::to_string(size) + ") did not finish within timeout_secs " +
                        seconds_text(timeout) + "; ";
  if (!silent.empty()) {
    message += "rank " + silent + " never reached it (hung, far slower than the others, or dead)";
  }
  if (!elsewhere.empty()) message += (silent.empty() ? "" : "; ") + elsewhere;
  if (silent.empty() && elsewhere.empty()) {
    message += "every rank waits in it (the transport stalled)";
  }
  return message +
         ". The job is stopped; the last checkpoint is intact, and the same command resumes from "
         "it";
}

// The process's MPI, initialised on first use and kept until exit (the plugin is never
// unloaded: MPI cannot be initialised twice in one process).
class MpiProcess {
 public:
  static MpiProcess& get() {
    static MpiProcess process;
    return process;
  }

  // Runs `task` on the communication thread and waits for it; its exception comes back here.
  // With `timeout` > 0, throws (timed_out) when the thread makes no progress for that long.
  template <class F>
  auto call(F task, double timeout = 0) -> decltype(task()) {
    using R = decltype(task());
    auto done = std::make_shared<std::promise<R>>();
    std::future<R> result = done->get_future();
    post([done, task = std::move(task)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          task();
          done->set_value();
        } else {
          done->set_value(task());
        }
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
    while (timeout > 0 &&
           result.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      if (stalled(timeout)) timed_out(timeout);
    }
    return result.get();
  }

  // On the communication thread, around each collective: which one runs, and when the thread
  // last made progress.
  void begin(uint64_t seq, const char* what) {
    current_what_.store(what);
    current_seq_.store(seq);
    progress_ns_.store(now_ns());
    busy_.store(true);
  }
  void end() {
    busy_.store(false);
    progress_ns_.store(now_ns());
  }
  // Whether the communication thread has been inside one collective for more than `timeout`.
  bool stalled(double timeout) const {
    return busy_.load() && static_cast<double>(now_ns() - progress_ns_.load()) * 1e-9 > timeout;
  }
  // From a waiting caller: finds out where the other ranks are, stops this process's MPI use,
  // and throws.
  [[noreturn]] void timed_out(double timeout) {
    std::string message;
    {
      // One diagnosis a process: others waiting meanwhile get its result.
      std::lock_guard<std::mutex> lock(diagnose_mutex_);
      message = failure();
      if (message.empty()) {
        message =
            diagnose(where_, rank_, size_, current_what_.load(), current_seq_.load(), timeout);
        abandon(message);
      }
    }
    throw Error(message);
  }

  // Queues `task` on the communication thread; tasks run one at a time, in order.
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      start_thread();
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  // Runs `task` (which catches its own exceptions) on the calling thread when the
  // communication thread has nothing queued or running, so that collectives keep the order
  // they were started in; returns false, without running it, otherwise. The communication
  // thread watches it: after `timeout` seconds without progress it stops the process.
  template <class F>
  bool run_here(F& task, double timeout) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_ || !queue_.empty()) return false;
      start_thread();
      running_ = true;
      here_ = true;
      here_timeout_ = timeout;
    }
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      here_ = false;
      queued = !queue_.empty();
    }
    if (queued) wake_.notify_one();
    if (error) std::rethrow_exception(error);
    return true;
  }

  // Initialises MPI once (on the communication thread); later calls return at once.
  void ensure_initialized() {
    call([this] {
      if (initialized_) return;
      int already = 0;
      MPI_Initialized(&already);
      if (already) {
        throw Error("MpiCollective: MPI was initialised by someone else in this process");
      }
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                "MPI_Init_thread");
      initialized_ = true;
      if (provided < MPI_THREAD_MULTIPLE) {
        throw Error(
            "MpiCollective needs an MPI library with MPI_THREAD_MULTIPLE (Open MPI 3 and "
            "later, as Debian builds it); this one provides level " +
            std::to_string(provided));
      }
      check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
      check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &where_), "MPI_Comm_dup");
      // Errors come back as codes, to be thrown naming the collective.
      MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(where_, MPI_ERRORS_RETURN);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
    });
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm data() const { return data_; }
  MPI_Comm where() const { return where_; }

  // After a failure the process must not finalize: MPI_Finalize would wait for the rank that
  // failed. Every later collective throws `reason`.
  void abandon(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
    if (failure_.empty()) failure_ = reason;
  }
  std::string failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

 private:
  MpiProcess() = default;

  ~MpiProcess() {
    bool finalize = false;
    bool abandoned = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finalize = initialized_ && !abandoned_;
      abandoned = abandoned_;
    }
    if (finalize) {
      try {
        call([] { MPI_Finalize(); });
      } catch (...) {
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (!thread_.joinable()) return;
    // After a failure the thread may be inside an MPI call that never returns: the process
    // ends without it.
    if (abandoned) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }

  // Under mutex_.
  void start_thread() {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }

  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
          if (!running_ && !queue_.empty()) break;
          if (stopping_ && !running_) return;
          if (here_) {
            const double timeout = here_timeout_;
            wake_.wait_for(lock, kWatchPeriod);
            if (here_ && stalled(timeout)) {
              lock.unlock();
              stop_process(timeout);
            }
          } else {
            // Woken by post(); the periodic wake-up notices a collective that started on a
            // calling thread meanwhile (run_here does not wake this thread: that would be the
            // hand-off it avoids).
            wake_.wait_for(lock, kWatchPeriod);
          }
        }
        task = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      task();
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
  }

  // A collective on a calling thread made no progress for `timeout`: that thread waits inside
  // MPI for good, so this one says why and ends the process (without MPI_Finalize, which would
  // wait too); mpirun then stops the job.
  [[noreturn]] void stop_process(double timeout) {
    std::string message;
    {
      std::lock_guard<std::mutex> lock(diagnose_mutex_);
      message = failure();
      if (message.empty()) {
        message =
            diagnose(where_, rank_, size_, current_what_.load(), current_seq_.load(), timeout);
        abandon(message);
      }
    }
    std::fflush(nullptr);
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;
  bool stopping_ = false;
  bool running_ = false;  // a collective runs, on this thread or on a calling one
  bool here_ = false;     // ... on a calling thread (run_here), watched for here_timeout_
  double here_timeout_ = 0;
  bool initialized_ = false;  // written on the communication thread before call() returns
  bool abandoned_ = false;
  std::string failure_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm where_ = MPI_COMM_NULL;
  std::atomic<const char*> current_what_{""};
  std::atomic<uint64_t> current_seq_{0};
  std::atomic<int64_t> progress_ns_{0};
  std::atomic<bool> busy_{false};
  std::mutex diagnose_mutex_;
};

MPI_Datatype mpi_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    default:
      throw InvalidArgument(std::string("MpiCollective::") + op +
                            " reduces f32, f64, i32 and i64 tensors, not " + dtype_name(dtype) +
                            " (cast bf16 and f16 gradients to f32 first)");
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// The sum over `world` replicas in `values` to their mean: floats scaled by 1 / world, integers
// divided (truncating toward zero, as NCCL's ncclAvg does).
template <class T>
void divide(std::byte* bytes, std::size_t size, int world) {
  T* values = reinterpret_cast<T*>(bytes);
  const std::size_t n = size / sizeof(T);
  if constexpr (std::is_floating_point_v<T>) {
    const T scale = T(1) / static_cast<T>(world);
    for (std::size_t i = 0; i < n; ++i) values[i] *= scale;
  } else {
    for (std::size_t i = 0; i < n; ++i) values[i] /= static_cast<T>(world);
  }
}

void write_bytes(Tensor& tensor, const std::byte* src) {
  tensor.backend().copy_from_host(*tensor.storage(), tensor.byte_offset(), src,
                                  tensor.size_bytes());
}

// Host staging buffers, kept for reuse: a trainer reduces buckets of the same sizes every step,
// and a fresh buffer of tens of megabytes costs its page faults (and zeroing) each time.
class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
  };

  // A buffer of at least `bytes` (uninitialised): the smallest free one that fits, else new.
  Buffer take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].capacity >= bytes &&
          (best == free_.size() || free_[i].capacity < free_[best].capacity)) {
        best = i;
      }
    }
    if (best == free_.size()) {
      Buffer fresh;
      fresh.data.reset(new std::byte[std::max<std::size_t>(bytes, 1)]);
      fresh.capacity = bytes;
      return fresh;
    }
    Buffer found = std::move(free_[best]);
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
    return found;
  }

  void give(Buffer buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(buffer));
    // Keep the largest few: a trainer's buckets, not every odd size ever reduced.
    if (free_.size() > kKept) {
      auto smallest = std::min_element(
          free_.begin(), free_.end(),
          [](const Buffer& a, const Buffer& b) { return a.capacity < b.capacity; });
      free_.erase(smallest);
    }
  }

 private:
  static constexpr std::size_t kKept = 16;
  std::mutex mutex_;
  std::vector<Buffer> free_;
};

// A tensor's bytes where MPI may read and write them itself (its storage is host memory), else
// null.
std::byte* host_bytes(const Tensor& tensor) {
  const NativeMemory memory = tensor.native_memory();
  return memory.kind == DeviceKind::kHost ? static_cast<std::byte*>(memory.data) : nullptr;
}

// The state an all_reduce_async shares between its caller and the thread that reduces.
struct AsyncReduce {
  // Bytes one MPI_Allreduce (or several, past kMaxCount) reduces in place: a tensor's own, or a
  // part of `staging`.
  struct Segment {
    std::byte* data = nullptr;
    std::size_t bytes = 0;
  };
  // A tensor that travels through `staging`, at `at`: `host` is its own bytes when they are host
  // memory (copied back by the reducing thread), else null (copied back by wait(), through its
  // backend).
  struct Staged {
    std::size_t tensor = 0;
    std::size_t at = 0;
    std::byte* host = nullptr;
  };

  std::shared_ptr<BufferPool> pool;
  BufferPool::Buffer staging;
  std::vector<Tensor> tensors;
  std::vector<Segment> segments;
  std::vector<Staged> staged;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;
  bool written_back = false;

  std::byte* data() { return staging.data.get(); }
  ~AsyncReduce() {
    if (pool && staging.data) pool->give(std::move(staging));
  }
};

// Reduces `state`'s segments in place, takes the mean where asked, and copies the staged host
// tensors back.
void reduce(AsyncReduce& state, MPI_Datatype type, ReduceOp op, DType dtype, int world,
            MPI_Comm comm) {
  const std::size_t element = dtype_size(dtype);
  const int64_t piece = std::min(kMaxCount, static_cast<int64_t>(kPieceBytes / element));
  for (const AsyncReduce::Segment& segment : state.segments) {
    const int64_t count = static_cast<int64_t>(segment.bytes / element);
    for (int64_t start = 0; start < count; start += piece) {
      const int n = static_cast<int>(std::min(piece, count - start));
      std::byte* data = segment.data + start * static_cast<int64_t>(element);
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, n, type, mpi_op(op), comm), "MPI_Allreduce");
      if (op == ReduceOp::kMean) {
        const std::size_t bytes = static_cast<std::size_t>(n) * element;
        if (dtype == DType::kF32) divide<float>(data, bytes, world);
        if (dtype == DType::kF64) divide<double>(data, bytes, world);
        if (dtype == DType::kI32) divide<int32_t>(data, bytes, world);
        if (dtype == DType::kI64) divide<int64_t>(data, bytes, world);
      }
    }
  }
  for (const AsyncReduce::Staged& s : state.staged) {
    if (s.host != nullptr) {
      std::memcpy(s.host, state.data() + s.at, state.tensors[s.tensor].size_bytes());
    }
  }
}

class MpiCollective final : public Collective {
 public:
  static constexpr OptionSpec kOptions[] = {
      // PyTorch's default process-group timeout. The chief's checkpoints, exports and
      // evaluations happen between two steps, while the other ranks wait in the next one.
      {"timeout_secs", OptionType::kFloat, "1800",
       "seconds a collective may wait for the other ranks (the chief's checkpoints and "
       "evaluations included) before the job is stopped, naming the ranks that did not arrive"},
  };

  explicit MpiCollective(const Options& options)
      : process_(MpiProcess::get()), timeout_secs_(options.get_float("timeout_secs")) {
    if (!(timeout_secs_ > 0)) {
      throw InvalidArgument("MpiCollective.timeout_secs must be positive, got " +
                            seconds_text(timeout_secs_));
    }
    process_.ensure_initialized();
  }

  ~MpiCollective() override {
    // Leaving by an exception: the other ranks may be waiting in a collective this one will
    // never call, so MPI_Finalize would hang; mpirun stops them when this process ends.
    if (std::uncaught_exceptions() > 0)
      process_.abandon("an error on rank " + std::to_string(rank()));
  }

  int rank() const override { return process_.rank(); }
  int world_size() const override { return process_.size(); }

  void all_reduce(Tensor& tensor, ReduceOp op) override {
    check_defined(tensor, "all_reduce");
    start(std::span<Tensor>(&tensor, 1), op, tensor.size_bytes() <= kInlineBytes)->wait();
  }

  std::shared_ptr<CollectiveWork> all_reduce_async(std::span<Tensor> tensors,
                                                   ReduceOp op) override {
    std::size_t bytes = 0;
    for (const Tensor& t : tensors) bytes += t.defined() ? t.size_bytes() : 0;
    return start(tensors, op, bytes <= kInlineAsyncBytes);
  }

  void broadcast(Tensor& tensor, int root) override {
    check_defined(tensor, "broadcast");
    check_usable();
    if (root < 0 || root >= world_size()) {
      throw InvalidArgument("MpiCollective::broadcast: root " + std::to_string(root) +
                            " is out of range for a world of size " + std::to_string(world_size()));
    }
    std::vector<std::byte> buffer(tensor.size_bytes());
    if (rank() == root) tensor.to_host(buffer.data(), buffer.size());
    const uint64_t seq = ++sequence_;
    process_.call(
        [&] {
          process_.begin(seq, "broadcast");
          for (std::size_t start = 0; start < buffer.size(); start += kMaxCount) {
            const int n = static_cast<int>(std::min<std::size_t>(kMaxCount, buffer.size() - start));
            const int code = MPI_Bcast(buffer.data() + start, n, MPI_BYTE, root, process_.data());
            if (code != MPI_SUCCESS) process_.end();
            check_mpi(code, "MPI_Bcast");
          }
          process_.end();
        },
        timeout_secs_);
    if (rank() != root) write_bytes(tensor, buffer.data());
  }

  void all_gather(const Tensor& tensor, Tensor& out) override {
    check_defined(tensor, "all_gather");
    check_defined(out, "all_gather");
    check_usable();
    std::vector<int64_t> dims = {world_size()};
    for (int64_t d : tensor.shape().dims()) dims.push_back(d);
    if (out.shape() != Shape(dims) || out.dtype() != tensor.dtype()) {
      throw InvalidArgument("MpiCollective::all_gather: out must be " + Shape(dims).to_string() +
                            " of " + dtype_name(tensor.dtype()) + ", got " + out.description());
    }
    const std::size_t bytes = tensor.size_bytes();
    if (bytes > static_cast<std::size_t>(kMaxCount)) {
      throw InvalidArgument("MpiCollective::all_gather: " + tensor.description() +
                            " is over the 1 GiB one rank may contribute");
    }
    std::vector<std::byte> mine(bytes);
    std::vector<std::byte> all(bytes * static_cast<std::size_t>(world_size()));
    tensor.to_host(mine.data(), bytes);
    const uint64_t seq = ++sequence_;
    process_.call(
        [&] {
          process_.begin(seq, "all_gather");
          const int code = MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, all.data(),
                                         static_cast<int>(bytes), MPI_BYTE, process_.data());
          process_.end();
          check_mpi(code, "MPI_Allgather");
        },
        timeout_secs_);
    write_bytes(out, all.data());
  }

  void barrier() override {
    check_usable();
    const uint64_t seq = ++sequence_;
    auto task = [this, seq] {
      process_.begin(seq, "barrier");
      const int code = MPI_Barrier(process_.data());
      process_.end();
      check_mpi(code, "MPI_Barrier");
    };
    if (!process_.run_here(task, timeout_secs_)) process_.call(task, timeout_secs_);
  }

 private:
  // Starts reducing `tensors`: on the calling thread when `here` and the communication thread
  // is idle, else queued on it.
  std::shared_ptr<CollectiveWork> start(std::span<Tensor> tensors, ReduceOp op, bool here) {
    check_usable();
    if (tensors.empty()) return std::make_shared<Work>(nullptr, &process_, timeout_secs_);
    const DType dtype = tensors[0].dtype();
    const MPI_Datatype type = mpi_type(dtype, "all_reduce");
    auto state = std::make_shared<AsyncReduce>();
    for (Tensor& t : tensors) {
      check_defined(t, "all_reduce");
      if (t.dtype() != dtype) {
        throw InvalidArgument(
            "MpiCollective::all_reduce: one call reduces tensors of one dtype; got " +
            tensors[0].description() + " and " + t.description());
      }
      state->tensors.push_back(t);
    }
    // Where each tensor goes, by its size alone (every rank makes the same calls): the small
    // ones first, together, then each large one in place, or staged when the host cannot
    // address it.
    const std::size_t n = state->tensors.size();
    std::vector<std::byte*> hosts(n);
    const Backend* synchronized = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      const Tensor& t = state->tensors[i];
      hosts[i] = host_bytes(t);
      // Host memory may still be written by work queued on the backend's streams.
      if (hosts[i] != nullptr && &t.backend() != synchronized) {
        t.backend().synchronize();
        synchronized = &t.backend();
      }
    }
    std::size_t staged_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t size = state->tensors[i].size_bytes();
      if (size >= kStageBelow) continue;
      state->staged.push_back({i, staged_bytes, hosts[i]});
      staged_bytes += size;
    }
    const std::size_t small_bytes = staged_bytes;
    std::vector<std::size_t> large_at(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t size = state->tensors[i].size_bytes();
      if (size < kStageBelow || hosts[i] != nullptr) continue;
      state->staged.push_back({i, staged_bytes, nullptr});
      large_at[i] = staged_bytes;
      staged_bytes += size;
    }
    if (staged_bytes > 0) {
      state->pool = pool_;
      state->staging = pool_->take(staged_bytes);
    }
    if (small_bytes > 0) state->segments.push_back({state->data(), small_bytes});
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t size = state->tensors[i].size_bytes();
      if (size < kStageBelow) continue;
      state->segments.push_back(
          {hosts[i] != nullptr ? hosts[i] : state->data() + large_at[i], size});
    }
    for (const AsyncReduce::Staged& s : state->staged) {
      const Tensor& t = state->tensors[s.tensor];
      if (s.host != nullptr) {
        std::memcpy(state->data() + s.at, s.host, t.size_bytes());
      } else {
        t.to_host(state->data() + s.at, t.size_bytes());
      }
    }
    const uint64_t seq = ++sequence_;
    MpiProcess* process = &process_;
    const int world = world_size();
    auto task = [state, type, op, seq, process, dtype, world] {
      std::exception_ptr error;
      process->begin(seq, "all_reduce");
      try {
        reduce(*state, type, op, dtype, world, process->data());
      } catch (...) {
        error = std::current_exception();
      }
      process->end();
      std::lock_guard<std::mutex> lock(state->mutex);
      state->error = error;
      state->done = true;
      state->finished.notify_all();
    };
    if (!here || !process_.run_here(task, timeout_secs_)) process_.post(task);
    return std::make_shared<Work>(state, process, timeout_secs_);
  }

  class Work final : public CollectiveWork {
   public:
    Work(std::shared_ptr<AsyncReduce> state, MpiProcess* process, double timeout)
        : state_(std::move(state)), process_(process), timeout_(timeout) {}

    void wait() override {
      if (state_ == nullptr) return;
      std::unique_lock<std::mutex> lock(state_->mutex);
      while (!state_->finished.wait_for(lock, std::chrono::milliseconds(20),
                                        [&] { return state_->done; })) {
        if (process_->stalled(timeout_)) {
          lock.unlock();
          process_->timed_out(timeout_);
        }
      }
      if (state_->error) std::rethrow_exception(state_->error);
      if (state_->written_back) return;
      // The tensors the host cannot address come back through their backend.
      for (const AsyncReduce::Staged& s : state_->staged) {
        if (s.host == nullptr) write_bytes(state_->tensors[s.tensor], state_->data() + s.at);
      }
      state_->written_back = true;
    }

    bool is_completed() override {
      if (state_ == nullptr) return true;
      std::lock_guard<std::mutex> lock(state_->mutex);
      return state_->done;
    }

   private:
    std::shared_ptr<AsyncReduce> state_;
    MpiProcess* process_;
    double timeout_;
  };

  void check_usable() {
    const std::string failure = process_.failure();
    if (!failure.empty()) {
      throw Error("MpiCollective is stopped after an earlier failure: " + failure);
    }
  }

  static void check_defined(const Tensor& tensor, const char* what) {
    if (!tensor.defined()) {
      throw InvalidArgument(std::string("MpiCollective::") + what + ": undefined tensor");
    }
  }

  MpiProcess& process_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  double timeout_secs_;
  uint64_t sequence_ = 0;
};

}  // namespace
}  // namespace trainyard::collectives

#define TRAINYARD_MPI_CLASSES(X)                                      \
  X(collective, MpiCollective, trainyard::collectives::MpiCollective, \
    "One process per rank over MPI: mpirun -np N trainyard train ...")
TRAINYARD_PLUGIN_WITH_FLAGS(mpi, 0, 1, 0, trainyard::kPluginNeverUnload, TRAINYARD_MPI_CLASSES)
