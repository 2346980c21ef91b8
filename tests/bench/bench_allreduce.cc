// All-reduce benchmark (issue 16): MpiCollective on this machine's MPI against OpenMPI's own
// blocking MPI_Allreduce on the same message sizes, run under mpirun, one process per rank:
//
//   mpirun -np 2 bench_allreduce --mode raw        [--write FILE]
//   mpirun -np 2 bench_allreduce --mode collective [--compare FILE] [--bucket_mb 1,5,25]
//
// Both modes reduce f32 sums in place for messages of 4 KiB, 16 KiB, ... 64 MiB (powers of 4;
// --min_bytes, --max_bytes). One process calls MPI through one path only: MpiCollective
// initialises MPI itself on its own communication thread, so `raw` and `collective` are separate
// runs of this binary. `raw` calls MPI_Init itself and times MPI_Allreduce(MPI_IN_PLACE) on a
// plain buffer, then MPI_Iallreduce driven by an MPI_Test loop (MpiCollective's calls, without
// its staging copies); `collective` times MpiCollective, made by the PluginRegistry, on
// cpu-backend tensors.
//
// Timing: each iteration starts after a barrier; an iteration's time is the slowest rank's
// (max over ranks), and the table gives the median over the iterations. Bus bandwidth is
// 2(N-1)/N x bytes / time (the bytes each rank sends and receives in a ring all-reduce, as
// nccl-tests report it); 1 GB = 1e9 bytes. In `collective` mode the rows `async` reduce the
// same bytes split into buckets of --bucket_mb MiB, one all_reduce_async per bucket, all
// started before the first wait (the gradient reducer's pattern), for each bucket size smaller
// than the message. --compare reads the rows `raw` wrote with --write and adds the ratio of
// the collective's time to MPI_Allreduce's.
//
// Rank 0 prints the table; rows are also printed as `row MODE BYTES BUCKET_BYTES ITERS
// MEDIAN_US BUSBW_GBPS` for scripts.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/core/registry.h"
#include "trainyard/tensor.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode;
  int64_t min_bytes = int64_t{4} << 10;
  int64_t max_bytes = int64_t{64} << 20;
  std::vector<double> bucket_mb = {1, 5, 25};
  int64_t budget_bytes = int64_t{1} << 30;  // iterations per size: budget / bytes, clamped
  int min_iters = 10;
  int max_iters = 200;
  int warmup = 3;
  std::string write;
  std::string compare;
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_allreduce: " << message
            << "\nusage: mpirun -np N bench_allreduce --mode raw|collective [--min_bytes B] "
               "[--max_bytes B] [--bucket_mb M,M,...] [--min_iters I] [--max_iters I] "
               "[--warmup W] [--write FILE] [--compare FILE]\n";
  std::exit(2);
}

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stod(item));
  }
  return out;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--mode") {
      args.mode = value;
    } else if (flag == "--min_bytes") {
      args.min_bytes = std::stoll(value);
    } else if (flag == "--max_bytes") {
      args.max_bytes = std::stoll(value);
    } else if (flag == "--bucket_mb") {
      args.bucket_mb = parse_list(value);
    } else if (flag == "--min_iters") {
      args.min_iters = std::stoi(value);
    } else if (flag == "--max_iters") {
      args.max_iters = std::stoi(value);
    } else if (flag == "--warmup") {
      args.warmup = std::stoi(value);
    } else if (flag == "--write") {
      args.write = value;
    } else if (flag == "--compare") {
      args.compare = value;
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (args.mode != "raw" && args.mode != "collective") usage("--mode is raw or collective");
  if (args.min_bytes < 4 || args.max_bytes < args.min_bytes) usage("bad --min_bytes/--max_bytes");
  if (args.min_iters < 1 || args.max_iters < args.min_iters || args.warmup < 0)
    usage("bad --min_iters/--max_iters/--warmup");
  for (double mb : args.bucket_mb) {
    if (!(mb > 0)) usage("--bucket_mb values must be positive");
  }
  return args;
}

std::vector<int64_t> message_sizes(const Args& args) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) sizes.push_back(bytes);
  return sizes;
}

int iterations(const Args& args, int64_t bytes) {
  const int64_t n = args.budget_bytes / bytes;
  return static_cast<int>(std::clamp<int64_t>(n, args.min_iters, args.max_iters));
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

struct Row {
  std::string mode;  // raw, collective or async
  int64_t bytes = 0;
  int64_t bucket_bytes = 0;  // async only
  int iters = 0;
  double median_us = 0;
  double busbw_gbps = 0;
};

Row make_row(std::string mode, int64_t bytes, int64_t bucket_bytes,
             const std::vector<double>& slowest_secs, int world) {
  Row row;
  row.mode = std::move(mode);
  row.bytes = bytes;
  row.bucket_bytes = bucket_bytes;
  row.iters = static_cast<int>(slowest_secs.size());
  const double secs = median(slowest_secs);
  row.median_us = secs * 1e6;
  row.busbw_gbps = 2.0 * (world - 1) / world * static_cast<double>(bytes) / secs * 1e-9;
  return row;
}

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// Rows `raw` wrote with --write, by message size.
std::map<int64_t, double> read_raw_rows(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  if (!in) usage("cannot read --compare file " + path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string tag;
    std::string mode;
    Row r;
    if (words >> tag >> mode >> r.bytes >> r.bucket_bytes >> r.iters >> r.median_us &&
        tag == "row" && mode == "raw") {
      out[r.bytes] = r.median_us;
    }
  }
  return out;
}

void print_table(const std::string& title, const std::vector<Row>& rows, int world,
                 const std::map<int64_t, double>& raw) {
  std::printf("%s (%d ranks; median of the slowest rank's time per iteration)\n", title.c_str(),
              world);
  std::printf("| %-9s | %-24s | %5s | %11s | %12s |%s\n", "size", "path", "iters", "median us",
              "busbw GB/s", raw.empty() ? "" : " vs MPI_Allreduce |");
  std::printf("|-----------|--------------------------|-------|-------------|--------------|%s\n",
              raw.empty() ? "" : "------------------|");
  for (const Row& r : rows) {
    std::string path = r.mode == "raw"      ? "MPI_Allreduce"
                       : r.mode == "raw_nb" ? "MPI_Iallreduce+MPI_Test"
                       : r.mode == "collective"
                           ? "all_reduce"
                           : "async, " + size_text(r.bucket_bytes) + " buckets";
    std::string ratio;
    if (!raw.empty()) {
      auto it = raw.find(r.bytes);
      char text[32] = "-";
      if (it != raw.end()) std::snprintf(text, sizeof text, "%.2fx", r.median_us / it->second);
      ratio =
          " " + std::string(16 - std::min<std::size_t>(16, std::strlen(text)), ' ') + text + " |";
    }
    std::printf("| %9s | %-24s | %5d | %11.1f | %12.3f |%s\n", size_text(r.bytes).c_str(),
                path.c_str(), r.iters, r.median_us, r.busbw_gbps, ratio.c_str());
  }
  for (const Row& r : rows) {
    std::printf("row %s %lld %lld %d %.3f %.4f\n", r.mode.c_str(), static_cast<long long>(r.bytes),
                static_cast<long long>(r.bucket_bytes), r.iters, r.median_us, r.busbw_gbps);
  }
  std::fflush(stdout);
}

void write_rows(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path);
  for (const Row& r : rows) {
    out << "row " << r.mode << " " << r.bytes << " " << r.bucket_bytes << " " << r.iters << " "
        << r.median_us << " " << r.busbw_gbps << "\n";
  }
  if (!out) usage("cannot write " + path);
}

// OpenMPI alone: MPI_Init in this thread, MPI_Allreduce(MPI_IN_PLACE) on a plain buffer.
int run_raw(const Args& args) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Row> rows;
  for (int64_t bytes : message_sizes(args)) {
    const int count = static_cast<int>(bytes / 4);
    std::vector<float> buffer(static_cast<std::size_t>(count), 1.0f / static_cast<float>(world));
    const int iters = iterations(args, bytes);
    std::vector<double> secs;
    for (int i = 0; i < args.warmup + iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const Clock::time_point start = Clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (i >= args.warmup) secs.push_back(elapsed);
    }
    MPI_Allreduce(MPI_IN_PLACE, secs.data(), static_cast<int>(secs.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    rows.push_back(make_row("raw", bytes, 0, secs, world));

    // The non-blocking form MpiCollective uses (OpenMPI's libnbc schedule, progressed by
    // MPI_Test), on the same buffer without staging: what the collective's path costs before
    // its copies.
    secs.clear();
    for (int i = 0; i < args.warmup + iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const Clock::time_point start = Clock::now();
      MPI_Request request;
      MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                     &request);
      int done = 0;
      while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (i >= args.warmup) secs.push_back(elapsed);
    }
    MPI_Allreduce(MPI_IN_PLACE, secs.data(), static_cast<int>(secs.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    rows.push_back(make_row("raw_nb", bytes, 0, secs, world));
  }
  if (rank == 0) {
    print_table("OpenMPI alone, f32 sum, in place", rows, world, {});
    if (!args.write.empty()) write_rows(args.write, rows);
  }
  MPI_Finalize();
  return 0;
}

// MpiCollective alone, through the plugin registry, on cpu-backend tensors.
int run_collective(const Args& args) {
  using namespace trainyard;
  PluginRegistry::Settings settings;
  settings.use_environment = false;
  PluginRegistry registry(settings);
  std::shared_ptr<Backend> cpu = registry.create<Backend>(ClassKind::kBackend, "cpu");
  std::shared_ptr<Collective> collective =
      registry.create<Collective>(ClassKind::kCollective, "MpiCollective");
  const int world = collective->world_size();
  const int rank = collective->rank();

  // The slowest rank's time of each iteration.
  auto slowest = [&](std::vector<double>& secs) {
    Tensor t = Tensor::from_vector(*cpu, Shape{static_cast<int64_t>(secs.size())}, secs);
    collective->all_reduce(t, ReduceOp::kMax);
    secs = t.to_vector<double>();
  };

  std::vector<Row> rows;
  for (int64_t bytes : message_sizes(args)) {
    const int64_t count = bytes / 4;
    const int iters = iterations(args, bytes);
    {
      Tensor t = Tensor::from_vector(
          *cpu, Shape{count},
          std::vector<float>(static_cast<std::size_t>(count), 1.0f / static_cast<float>(world)));
      std::vector<double> secs;
      for (int i = 0; i < args.warmup + iters; ++i) {
        collective->barrier();
        const Clock::time_point start = Clock::now();
        collective->all_reduce(t, ReduceOp::kSum);
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        if (i >= args.warmup) secs.push_back(elapsed);
      }
      slowest(secs);
      rows.push_back(make_row("collective", bytes, 0, secs, world));
    }
    for (double mb : args.bucket_mb) {
      const int64_t bucket_count = std::max<int64_t>(1, static_cast<int64_t>(mb * 1048576.0) / 4);
      if (bucket_count >= count) continue;  // one bucket: the all_reduce row above
      std::vector<Tensor> buckets;
      for (int64_t at = 0; at < count; at += bucket_count) {
        const int64_t n = std::min(bucket_count, count - at);
        buckets.push_back(Tensor::from_vector(
            *cpu, Shape{n},
            std::vector<float>(static_cast<std::size_t>(n), 1.0f / static_cast<float>(world))));
      }
      std::vector<double> secs;
      for (int i = 0; i < args.warmup + iters; ++i) {
        collective->barrier();
        const Clock::time_point start = Clock::now();
        std::vector<std::shared_ptr<CollectiveWork>> works;
        for (Tensor& b : buckets) {
          works.push_back(collective->all_reduce_async(std::span<Tensor>(&b, 1), ReduceOp::kSum));
        }
        for (auto& w : works) w->wait();
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        if (i >= args.warmup) secs.push_back(elapsed);
      }
      slowest(secs);
      rows.push_back(make_row("async", bytes, bucket_count * 4, secs, world));
    }
  }
  if (rank == 0) {
    std::map<int64_t, double> raw;
    if (!args.compare.empty()) raw = read_raw_rows(args.compare);
    print_table("MpiCollective (cpu tensors), f32 sum, in place", rows, world, raw);
    if (!args.write.empty()) write_rows(args.write, rows);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    return args.mode == "raw" ? run_raw(args) : run_collective(args);
  } catch (const std::exception& e) {
    std::cerr << "bench_allreduce: " << e.what() << "\n";
    return 1;
  }
}
