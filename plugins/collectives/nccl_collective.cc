// NcclCollective: the collectives of a data-parallel job with one GPU per process, over NCCL.
//
// Rank and world size come from the options `rank` and `world_size`, else from the MPI
// launcher's environment (OMPI_COMM_WORLD_RANK/SIZE, PMIX_RANK, PMI_RANK/SIZE), else rank 0 of
// one. Rank 0 makes the NCCL unique id and hands it to the other ranks through a TCP rendezvous
// (nccl_rendezvous.h) at the option `rendezvous` or $TRAINYARD_RENDEZVOUS ("host:port"); MPI is
// not used for it, so a job needs no MPI library, only a launcher or explicit ranks.
//
// Tensors must live in CUDA device memory of this rank's GPU (option `device_index`, else the
// launcher's local rank modulo the GPUs present). Every collective is queued on the tensors'
// backend's current stream (collective.h) and returns without waiting; its result is there for
// work queued after it on that stream. The device pointer and the stream come from the SDK's
// native accessors (Tensor::native_memory, Stream::native_stream), which say their kind: a
// tensor or stream that is not CUDA is refused by name; no backend's class is named here.
//
// Bounded failure: the communicator is created non-blocking (NCCL 2.14 and later) and waited
// for up to `timeout_secs`; a watchdog thread records an event after every collective and, when
// one has not finished `timeout_secs` after it was queued or NCCL reports an asynchronous error
// (a peer died), aborts the communicator (ncclCommAbort), which ends the NCCL kernels so that
// stream synchronisations return; every later call, and CollectiveWork::wait(), then throws an
// Error naming the collective, this rank and the cause.
//
// Created on a machine without a GPU the class is still listed (`trainyard plugins describe
// NcclCollective`); constructing it throws Error saying that no CUDA device was found.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nccl_rendezvous.h"
#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/error.h"
#include "trainyard/plugin.h"
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#include "trainyard/ops.h"
#endif

namespace trainyard::collectives {
namespace {

using Clock = std::chrono::steady_clock;

std::string where(int rank, int world_size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size);
}

std::string cuda_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

// An integer from the environment variable `name`, or nullopt when it is unset. Throws
// InvalidArgument naming the variable when it is not a non-negative integer.
std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (1 << 30)) {
    throw InvalidArgument(std::string("NcclCollective: environment variable ") + name + "='" +
                          text + "' is not a non-negative integer");
  }
  return static_cast<int>(value);
}

// The first of `names` that is set, with its name.
std::optional<std::pair<int, const char*>> first_env(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (std::optional<int> v = env_int(name)) return std::make_pair(*v, name);
  }
  return std::nullopt;
}

// Makes `device` current on the calling thread while it lives, then restores the previous one
// (the CUDA backend remembers the current device per thread).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      cudaError_t status = cudaSetDevice(device);
      if (status != cudaSuccess) {
        throw Error("NcclCollective: cudaSetDevice(" + std::to_string(device) +
                    "): " + cuda_text(status));
      }
      restore_ = previous_ >= 0;
    }
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool restore_ = false;
};

// A collective queued on a stream, with the event recorded after it.
struct InFlight {
  InFlight(std::string op, cudaEvent_t event) : op(std::move(op)), event(event) {}
  ~InFlight() { cudaEventDestroy(event); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::string op;  // "all_reduce(sum) of f32[1024] on cuda:0"
  cudaEvent_t event;
  Clock::time_point queued = Clock::now();
};

// The NCCL communicator, shared by the collective, its works and its watchdog. Every member
// but the constants is guarded by `mu`; NCCL calls on `comm` are made with `mu` held.
class Communicator {
 public:
  Communicator(int rank, int world_size, int device, std::chrono::seconds timeout,
               std::string rendezvous)
      : rank(rank),
        world_size(world_size),
        device(device),
        timeout(timeout),
        rendezvous(std::move(rendezvous)) {}

  const int rank;
  const int world_size;
  const int device;
  const std::chrono::seconds timeout;
  const std::string rendezvous;  // the address used, for errors; "(none)" for a world of one

  std::mutex mu;
  ncclComm_t comm = nullptr;
  std::string failure;  // why the communicator was aborted; empty while it is usable
  std::deque<std::shared_ptr<InFlight>> in_flight;

  std::string timeout_text() const { return std::to_string(timeout.count()) + " s"; }

  // Requires `mu`. Throws the recorded failure, if any, for a call to `what`.
  void check_usable(const std::string& what) const {
    if (!failure.empty()) {
      throw Error("NcclCollective::" + what + " on " + where(rank, world_size) +
                  ": the communicator was aborted earlier: " + failure);
    }
  }

  // Requires `mu`. Aborts the communicator (once), records `why` and returns the Error for
  // `what` to throw.
  Error abort(const std::string& what, const std::string& why) {
    if (failure.empty()) {
      failure = why;
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
      in_flight.clear();
    }
    return Error("NcclCollective::" + what + " on " + where(rank, world_size) + ": " + why +
                 "; the communicator was aborted");
  }

  // Requires `mu`. The asynchronous state of the communicator (ncclInProgress while a
  // non-blocking call is still being carried out).
  ncclResult_t async_state() {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    return r != ncclSuccess ? r : state;
  }

  // "<call>: <NCCL's name for r> (<NCCL's last error message>)".
  std::string nccl_error(const std::string& call, ncclResult_t r) const {
    std::string text = call + ": " + ncclGetErrorString(r);
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') text += " (" + std::string(last) + ")";
    return text;
  }

  // Requires `mu`. Finishes the NCCL call `call` of collective `what` that returned `r`: waits
  // out ncclInProgress for up to the timeout; throws (after aborting) on an error.
  void finish(ncclResult_t r, const char* call, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    auto pause = std::chrono::microseconds(10);
    while (r == ncclInProgress) {
      if (Clock::now() >= deadline) {
        throw abort(what, std::string(call) + " was still in progress after " + timeout_text());
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
      r = async_state();
    }
    if (r != ncclSuccess) throw abort(what, nccl_error(call, r));
  }

  // Requires `mu`. Checks for an asynchronous error that a peer's failure left behind.
  void check_async(const std::string& what) {
    ncclResult_t r = async_state();
    if (r != ncclSuccess && r != ncclInProgress) {
      throw abort(what, nccl_error("asynchronous NCCL error", r));
    }
  }
};

// The CUDA view of a tensor: device pointer, element count and type, stream.
struct DeviceTensor {
  void* data = nullptr;
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  cudaStream_t stream = nullptr;
  Backend* backend = nullptr;
};

class NcclWork final : public CollectiveWork {
 public:
  NcclWork(std::shared_ptr<Communicator> comm, std::shared_ptr<InFlight> op)
      : comm_(std::move(comm)), op_(std::move(op)) {}

  void wait() override {
    if (done_) return;
    auto pause = std::chrono::microseconds(5);
    for (;;) {
      const cudaError_t status = cudaEventQuery(op_->event);
      {
        std::lock_guard<std::mutex> lock(comm_->mu);
        // An aborted communicator ends its kernels early: the event completes, the data is
        // not the reduction.
        comm_->check_usable(op_->op);
        if (status == cudaSuccess) break;
        if (status != cudaErrorNotReady) {
          throw comm_->abort(op_->op, "cudaEventQuery: " + cuda_text(status));
        }
        comm_->check_async(op_->op);
        if (Clock::now() - op_->queued >= comm_->timeout) {
          throw comm_->abort(op_->op, "not finished " + comm_->timeout_text() +
                                          " after it was queued (a peer rank is dead or hung, "
                                          "or option timeout_secs is too short)");
        }
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    done_ = true;
  }

  bool is_completed() override {
    if (done_) return true;
    const cudaError_t status = cudaEventQuery(op_->event);
    if (status == cudaErrorNotReady) return false;
    if (status != cudaSuccess) {
      std::lock_guard<std::mutex> lock(comm_->mu);
      throw comm_->abort(op_->op, "cudaEventQuery: " + cuda_text(status));
    }
    return true;
  }

 private:
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<InFlight> op_;
  bool done_ = false;
};

class NcclCollective final : public Collective {
 public:
  static constexpr OptionSpec kOptions[] = {
      {"rank", OptionType::kInt, "-1",
       "this process's rank; -1: OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK, else 0"},
      {"world_size", OptionType::kInt, "-1",
       "number of ranks; -1: OMPI_COMM_WORLD_SIZE or PMI_SIZE, else 1"},
      {"device_index", OptionType::kInt, "-1",
       "this rank's GPU (cuda:N); -1: the launcher's local rank (OMPI_COMM_WORLD_LOCAL_RANK, "
       "MPI_LOCALRANKID, LOCAL_RANK) modulo the GPUs present, else 0"},
      {"rendezvous", OptionType::kString, "",
       "host:port where rank 0 hands out the NCCL unique id over TCP; empty: "
       "$TRAINYARD_RENDEZVOUS (not needed for a world of one)"},
      {"timeout_secs", OptionType::kInt, "300",
       "bound on the rendezvous, on creating the communicator and on each collective; when it "
       "passes the communicator is aborted and the collective named in the error"},
  };

  explicit NcclCollective(const Options& options) {
    const int64_t timeout_secs = options.get_int("timeout_secs");
    if (timeout_secs <= 0) {
      throw InvalidArgument("NcclCollective: timeout_secs must be positive, got " +
                            std::to_string(timeout_secs));
    }
    const auto [rank, world_size] = rank_and_world(options);

    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
      // Unimplemented, as the cuda backend says it: `plugins check` skips the class here.
      throw Unimplemented(
          "NcclCollective: no CUDA device found (cudaGetDeviceCount: " +
          (status == cudaSuccess ? std::string("0 devices") : cuda_text(status)) +
          "); NCCL needs a GPU per rank: use LocalCollective or MpiCollective on CPUs");
    }
    int device = static_cast<int>(options.get_int("device_index"));
    if (device < 0) {
      auto local = first_env({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"});
      device = local ? local->first % devices : 0;
    } else if (device >= devices) {
      throw InvalidArgument("NcclCollective: device_index " + std::to_string(device) +
                            " is out of range; " + std::to_string(devices) + " device(s) present");
    }

    std::string address = options.get_string("rendezvous");
    if (address.empty()) {
      const char* env = std::getenv("TRAINYARD_RENDEZVOUS");
      if (env != nullptr) address = env;
    }
    if (world_size > 1 && address.empty()) {
      throw InvalidArgument("NcclCollective: " + where(rank, world_size) +
                            " needs a rendezvous address to exchange the NCCL unique id: set "
                            "the option rendezvous or TRAINYARD_RENDEZVOUS to host:port, where "
                            "rank 0 listens");
    }
    comm_ =
        std::make_shared<Communicator>(rank, world_size, device, std::chrono::seconds(timeout_secs),
                                       world_size > 1 ? address : std::string("(none)"));
    DeviceGuard guard(device);
    const auto deadline = Clock::now() + comm_->timeout;
    ncclUniqueId id{};
    if (world_size == 1) {
      check_nccl_setup(ncclGetUniqueId(&id), "ncclGetUniqueId");
    } else {
      RendezvousAddress parsed = parse_rendezvous_address(address);
      if (rank == 0) {
        RendezvousServer server(parsed);
        check_nccl_setup(ncclGetUniqueId(&id), "ncclGetUniqueId");
        server.serve(std::as_bytes(std::span(id.internal)), world_size, deadline);
      } else {
        std::vector<std::byte> bytes =
            fetch_rendezvous_id(parsed, rank, world_size, sizeof(id.internal), deadline);
        std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
      }
    }
    init_communicator(id, deadline);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCollective() override {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      stop_ = true;
    }
    watchdog_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    try {
      DeviceGuard guard(comm_->device);
      std::lock_guard<std::mutex> lock(comm_->mu);
      if (comm_->comm != nullptr) {
        // Flushes what is queued, bounded by the timeout; a peer that is gone makes it an
        // abort.
        ncclResult_t r = ncclCommFinalize(comm_->comm);
        const auto deadline = Clock::now() + comm_->timeout;
        while (r == ncclInProgress && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          r = comm_->async_state();
        }
        if (r == ncclSuccess) {
          ncclCommDestroy(comm_->comm);
        } else {
          ncclCommAbort(comm_->comm);
        }
        comm_->comm = nullptr;
      }
      if (barrier_stream_ != nullptr) cudaStreamDestroy(barrier_stream_);
      if (barrier_buffer_ != nullptr) cudaFree(barrier_buffer_);
    } catch (const Error& e) {
      std::fprintf(stderr, "NcclCollective: while closing: %s\n", e.what());
    }
  }

  int rank() const override { return comm_->rank; }
  int world_size() const override { return comm_->world_size; }

  void all_reduce(Tensor& tensor, ReduceOp op) override {
    const std::string what = std::string("all_reduce(") + op_name(op) + ")";
    DeviceTensor t = device_tensor(tensor, what);
    DeviceGuard guard(comm_->device);
    std::lock_guard<std::mutex> lock(comm_->mu);
    comm_->check_usable(what);
    comm_->check_async(what);
    if (t.count == 0) return;
    comm_->finish(
        ncclAllReduce(t.data, t.data, t.count, t.type, nccl_op(op), comm_->comm, t.stream),
        "ncclAllReduce", what);
    scale_for_mean(tensor, op, what);
    track(what + " of " + tensor.description(), t.stream);
  }

  void broadcast(Tensor& tensor, int root) override {
    if (root < 0 || root >= comm_->world_size) {
      throw InvalidArgument("NcclCollective::broadcast: root " + std::to_string(root) +
                            " is out of range for a world of size " +
                            std::to_string(comm_->world_size));
    }
    const std::string what = "broadcast(root " + std::to_string(root) + ")";
    DeviceTensor t = device_tensor(tensor, "broadcast");
    DeviceGuard guard(comm_->device);
    std::lock_guard<std::mutex> lock(comm_->mu);
    comm_->check_usable(what);
    comm_->check_async(what);
    if (t.count == 0) return;
    comm_->finish(ncclBroadcast(t.data, t.data, t.count, t.type, root, comm_->comm, t.stream),
                  "ncclBroadcast", what);
    track(what + " of " + tensor.description(), t.stream);
  }

  void all_gather(const Tensor& tensor, Tensor& out) override {
    DeviceTensor in = device_tensor(tensor, "all_gather");
    DeviceTensor to = device_tensor(out, "all_gather");
    std::vector<int64_t> expected = {comm_->world_size};
    for (int64_t d : tensor.shape().dims()) expected.push_back(d);
    if (expected.size() > kMaxTensorRank || out.shape() != Shape(expected) ||
        out.dtype() != tensor.dtype()) {
      throw InvalidArgument(
          "NcclCollective::all_gather: out is " + out.description() + ", expected " +
          dtype_name(tensor.dtype()) + "[" + std::to_string(comm_->world_size) + ", ...] of " +
          tensor.description() + " for a world of " + std::to_string(comm_->world_size));
    }
    if (in.backend != to.backend) {
      throw InvalidArgument(
          "NcclCollective::all_gather: tensor and out are on different cuda backend instances "
          "(their streams are not ordered)");
    }
    DeviceGuard guard(comm_->device);
    std::lock_guard<std::mutex> lock(comm_->mu);
    comm_->check_usable("all_gather");
    comm_->check_async("all_gather");
    if (in.count == 0) return;
    comm_->finish(ncclAllGather(in.data, to.data, in.count, in.type, comm_->comm, in.stream),
                  "ncclAllGather", "all_gather");
    track("all_gather of " + tensor.description(), in.stream);
  }

  // An all-reduce of one element on a stream of this collective's own, then a wait for it:
  // every rank has reached the barrier when it returns.
  void barrier() override {
    DeviceGuard guard(comm_->device);
    if (barrier_stream_ == nullptr) {
      check_cuda_setup(cudaStreamCreateWithFlags(&barrier_stream_, cudaStreamNonBlocking),
                       "cudaStreamCreate");
    }
    if (barrier_buffer_ == nullptr) {
      check_cuda_setup(cudaMalloc(&barrier_buffer_, sizeof(float)), "cudaMalloc");
    }
    std::shared_ptr<InFlight> op;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      comm_->check_usable("barrier");
      comm_->check_async("barrier");
      comm_->finish(ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32, ncclSum,
                                  comm_->comm, barrier_stream_),
                    "ncclAllReduce", "barrier");
      op = track("barrier", barrier_stream_);
    }
    NcclWork(comm_, op).wait();
  }

  std::shared_ptr<CollectiveWork> all_reduce_async(std::span<Tensor> tensors,
                                                   ReduceOp op) override {
    const std::string what = std::string("all_reduce_async(") + op_name(op) + ")";
    std::vector<DeviceTensor> views;
    views.reserve(tensors.size());
    for (const Tensor& tensor : tensors) {
      views.push_back(device_tensor(tensor, what));
      if (views.back().backend != views.front().backend) {
        throw InvalidArgument("NcclCollective::" + what + ": " + tensor.description() +
                              " is on another cuda backend instance than " +
                              tensors[0].description() + " (their streams are not ordered)");
      }
    }
    DeviceGuard guard(comm_->device);
    std::lock_guard<std::mutex> lock(comm_->mu);
    comm_->check_usable(what);
    comm_->check_async(what);
    if (views.empty()) return std::make_shared<DoneWork>();
    cudaStream_t stream = views.front().stream;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) throw comm_->abort(what, comm_->nccl_error("ncclGroupStart", r));
    for (const DeviceTensor& t : views) {
      if (t.count == 0) continue;
      r = ncclAllReduce(t.data, t.data, t.count, t.type, nccl_op(op), comm_->comm, stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        ncclGroupEnd();
        throw comm_->abort(what, comm_->nccl_error("ncclAllReduce", r));
      }
    }
    comm_->finish(ncclGroupEnd(), "ncclGroupEnd", what);
    for (Tensor& tensor : tensors) scale_for_mean(tensor, op, what);
    std::string description = what + " of " + std::to_string(tensors.size()) + " tensor(s)";
    return std::make_shared<NcclWork>(comm_, track(description, stream));
  }

 private:
  class DoneWork final : public CollectiveWork {
   public:
    void wait() override {}
    bool is_completed() override { return true; }
  };

  static const char* op_name(ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum:
        return "sum";
      case ReduceOp::kMean:
        return "mean";
      case ReduceOp::kMax:
        return "max";
      case ReduceOp::kMin:
        return "min";
    }
    return "?";
  }

  static ncclRedOp_t nccl_op(ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum:
        return ncclSum;
      case ReduceOp::kMean:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
        return ncclAvg;
#else
        return ncclSum;  // then divided by the world size (scale_for_mean)
#endif
      case ReduceOp::kMax:
        return ncclMax;
      case ReduceOp::kMin:
        return ncclMin;
    }
    throw InvalidArgument("NcclCollective: unknown reduction");
  }

  // Without ncclAvg (NCCL before 2.10) a mean is a sum divided on the stream afterwards.
  void scale_for_mean([[maybe_unused]] Tensor& tensor, [[maybe_unused]] ReduceOp op,
                      [[maybe_unused]] const std::string& what) {
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
    if (op != ReduceOp::kMean || comm_->world_size == 1) return;
    Backend& backend = tensor.backend();
    Tensor mean = ops::div(tensor, ops::scalar(backend, comm_->world_size, tensor.dtype()));
    backend.copy_device_to_device(*mean.storage(), mean.byte_offset(), *tensor.storage(),
                                  tensor.byte_offset(), tensor.size_bytes(),
                                  backend.current_stream());
#endif
  }

  static std::pair<int, int> rank_and_world(const Options& options) {
    int64_t rank = options.get_int("rank");
    int64_t world_size = options.get_int("world_size");
    std::string rank_from = "option rank";
    std::string world_from = "option world_size";
    if (rank < 0) {
      auto env = first_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
      rank = env ? env->first : 0;
      rank_from = env ? env->second : "the default";
    }
    if (world_size < 0) {
      auto env = first_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
      world_size = env ? env->first : 1;
      world_from = env ? env->second : "the default";
    }
    if (world_size < 1 || rank >= world_size) {
      throw InvalidArgument("NcclCollective: rank " + std::to_string(rank) + " (" + rank_from +
                            ") is not within a world of size " + std::to_string(world_size) + " (" +
                            world_from + ")");
    }
    return {static_cast<int>(rank), static_cast<int>(world_size)};
  }

  void check_nccl_setup(ncclResult_t r, const char* call) const {
    if (r != ncclSuccess) {
      throw Error("NcclCollective: " + std::string(call) + " on " +
                  where(comm_->rank, comm_->world_size) + ": " + ncclGetErrorString(r));
    }
  }

  static void check_cuda_setup(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
      throw Error(std::string("NcclCollective: ") + call + ": " + cuda_text(status));
    }
  }

  // Creates the communicator, bounded by `deadline` where NCCL can create it non-blocking.
  void init_communicator(const ncclUniqueId& id, Clock::time_point deadline) {
    const std::string context = "ncclCommInitRank for " + where(comm_->rank, comm_->world_size) +
                                " on cuda:" + std::to_string(comm_->device) + " (rendezvous " +
                                comm_->rendezvous + ")";
    std::lock_guard<std::mutex> lock(comm_->mu);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r =
        ncclCommInitRankConfig(&comm_->comm, comm_->world_size, id, comm_->rank, &config);
    while (r == ncclInProgress && comm_->comm != nullptr) {
      if (Clock::now() >= deadline) {
        ncclCommAbort(comm_->comm);
        comm_->comm = nullptr;
        throw Error("NcclCollective: " + context + " did not finish within " +
                    comm_->timeout_text() + " (a rank did not join: is every rank running?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      r = comm_->async_state();
    }
#else
    (void)deadline;      // a blocking creation: bounded only by NCCL's own socket timeouts
    ncclResult_t r = ncclCommInitRank(&comm_->comm, comm_->world_size, id, comm_->rank);
#endif
    if (r != ncclSuccess) {
      std::string detail = comm_->nccl_error("NCCL", r);
      if (comm_->comm != nullptr) ncclCommAbort(comm_->comm);
      comm_->comm = nullptr;
      throw Error("NcclCollective: " + context + " failed: " + detail);
    }
  }

  // The CUDA view of `tensor` for collective `what`. Throws InvalidArgument when the tensor is
  // undefined, not in CUDA device memory of this rank's GPU, of a dtype NCCL lacks, or when its
  // backend's current stream is not a CUDA stream.
  DeviceTensor device_tensor(const Tensor& tensor, const std::string& what) const {
    const std::string call = "NcclCollective::" + what + ": ";
    if (!tensor.defined()) throw InvalidArgument(call + "undefined tensor");
    const std::string device = tensor.backend().device_name();
    const std::string mine = "cuda:" + std::to_string(comm_->device);
    const NativeMemory memory = tensor.native_memory();
    if (memory.kind != DeviceKind::kCuda) {
      throw InvalidArgument(call + tensor.description() +
                            " is not on a CUDA device (its storage is " +
                            device_kind_name(memory.kind) +
                            " memory): NCCL works on tensors of the cuda backend (Tensor::to "
                            "moves one there)");
    }
    if (memory.device_index != comm_->device) {
      throw InvalidArgument(call + tensor.description() +
                            " is on cuda:" + std::to_string(memory.device_index) +
                            ", another GPU than " + where(comm_->rank, comm_->world_size) +
                            "'s communicator (" + mine + ", option device_index)");
    }
    DeviceTensor t;
    switch (tensor.dtype()) {
      case DType::kF32:
        t.type = ncclFloat32;
        break;
      case DType::kF64:
        t.type = ncclFloat64;
        break;
      case DType::kF16:
        t.type = ncclFloat16;
        break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      case DType::kBF16:
        t.type = ncclBfloat16;
        break;
#endif
      case DType::kI32:
        t.type = ncclInt32;
        break;
      case DType::kI64:
        t.type = ncclInt64;
        break;
      default:
        throw InvalidArgument(call + tensor.description() +
                              ": NCCL collectives take f32, f64, f16, bf16, i32 or i64, not " +
                              dtype_name(tensor.dtype()));
    }
    const NativeStream stream = tensor.backend().current_stream().native_stream();
    if (stream.kind != DeviceKind::kCuda) {
      throw InvalidArgument(call + "the current stream of " + device + " (the backend of " +
                            tensor.description() + ") is not a CUDA stream (its backend says " +
                            device_kind_name(stream.kind) + ")");
    }
    t.data = memory.data;
    t.count = static_cast<std::size_t>(tensor.num_elements());
    t.stream = static_cast<cudaStream_t>(stream.handle);
    t.backend = &tensor.backend();
    return t;
  }

  // Requires comm_->mu. Records an event after the collective `op` queued on `stream` and hands
  // it to the watchdog.
  std::shared_ptr<InFlight> track(const std::string& op, cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (status != cudaSuccess) throw comm_->abort(op, "cudaEventCreate: " + cuda_text(status));
    auto in_flight = std::make_shared<InFlight>(op, event);
    status = cudaEventRecord(event, stream);
    if (status != cudaSuccess) throw comm_->abort(op, "cudaEventRecord: " + cuda_text(status));
    comm_->in_flight.push_back(in_flight);
    return in_flight;
  }

  // Every 100 ms: drops the collectives that have finished and aborts the communicator when the
  // oldest has run past the timeout or NCCL reports an asynchronous error.
  void watch() {
    std::unique_lock<std::mutex> wake(watchdog_mu_);
    while (!watchdog_cv_.wait_for(wake, std::chrono::milliseconds(100), [this] { return stop_; })) {
      std::lock_guard<std::mutex> lock(comm_->mu);
      if (!comm_->failure.empty()) continue;
      auto& queue = comm_->in_flight;
      while (!queue.empty() && cudaEventQuery(queue.front()->event) == cudaSuccess) {
        queue.pop_front();
      }
      ncclResult_t r = comm_->async_state();
      std::optional<Error> error;
      const std::string oldest = queue.empty() ? "a collective" : queue.front()->op;
      if (r != ncclSuccess && r != ncclInProgress) {
        error = comm_->abort(oldest, comm_->nccl_error("asynchronous NCCL error", r));
      } else if (!queue.empty() && Clock::now() - queue.front()->queued >= comm_->timeout) {
        error = comm_->abort(oldest, "not finished " + comm_->timeout_text() +
                                         " after it was queued (a peer rank is dead or hung, or "
                                         "option timeout_secs is too short)");
      }
      if (error) std::fprintf(stderr, "%s\n", error->what());
    }
  }

  std::shared_ptr<Communicator> comm_;
  void* barrier_buffer_ = nullptr;
  cudaStream_t barrier_stream_ = nullptr;
  std::thread watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool stop_ = false;
};

}  // namespace
}  // namespace trainyard::collectives

#define TRAINYARD_NCCL_CLASSES(X)                                       \
  X(collective, NcclCollective, trainyard::collectives::NcclCollective, \
    "NCCL between GPUs, one per process; the unique id over a TCP rendezvous")
TRAINYARD_PLUGIN(nccl, 0, 1, 0, TRAINYARD_NCCL_CLASSES)
