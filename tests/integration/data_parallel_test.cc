// Synchronous data parallelism over MpiCollective (issue 16), run by ctest under
// `mpirun -np 2` and `-np 3`: every rank runs every test, in the same order. The replicas of a
// TrainStep stay bitwise equal, equal one process that takes the same steps on the
// concatenated batches, and every collective of MpiCollective gives each rank the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/core/config.h"
#include "trainyard/core/registry.h"
#include "trainyard/core/train_step.h"
#include "trainyard/ops.h"

namespace trainyard {
namespace {

constexpr int kDim = 6;
constexpr int kClasses = 5;
constexpr int kBatch = 4;  // per replica

class DataParallelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PluginRegistry::Settings s;
    s.use_environment = false;
    s.plugin_path = {TRAINYARD_FIXTURE_DIR "/shared_gradient"};  // SharedGradientModel
    registry_ = new PluginRegistry(s);
    collective_ = new std::shared_ptr<Collective>(registry_->create<Collective>(
        ClassKind::kCollective, "MpiCollective", {{"timeout_secs", OptionValue(60.0)}}));
    cpu_ = new std::shared_ptr<Backend>(registry_->create<Backend>(ClassKind::kBackend, "cpu"));
  }
  // Kept to the end of the process: MPI is finalized at exit.
  static Collective& collective() { return **collective_; }
  static Backend& cpu() { return **cpu_; }
  static int rank() { return collective().rank(); }
  static int world() { return collective().world_size(); }

  // LogisticModel with Adam, L2 regularization and clipping: every part of the update the
  // replicas must agree on.
  static config::Pipeline pipeline(int clones = 1) {
    config::Pipeline p = parse_pipeline_config(
        "model { class: \"LogisticModel\" params { key: \"l2_penalty\" float_value: 0.01 } }\n"
        "num_classes: 5\n"
        "train_config { batch_size: 4 seed: 3 clip_gradient_norm: 0.5\n"
        "  optimizer { class: \"AdamOptimizer\" }\n"
        "  learning_rate { constant { learning_rate: 0.05 } } }\n",
        "test");
    p.mutable_train_config()->set_num_clones(clones);
    return p;
  }

  // Replica `r`'s batch of step `k`: deterministic, different for every (r, k).
  static Batch batch(Backend& device, int r, int k, int size = kBatch) {
    std::vector<float> x(static_cast<std::size_t>(size) * kDim);
    std::vector<float> y(static_cast<std::size_t>(size) * kClasses, 0.0f);
    for (int i = 0; i < size; ++i) {
      const int e = (k * 97 + r * 31 + i * 7) % 53;
      for (int d = 0; d < kDim; ++d) {
        x[static_cast<std::size_t>(i * kDim + d)] =
            static_cast<float>(((e * (d + 3)) % 17) - 8) / 8.0f;
      }
      y[static_cast<std::size_t>(i * kClasses + e % kClasses)] = 1.0f;
      y[static_cast<std::size_t>(i * kClasses + (e / 3) % kClasses)] = 1.0f;
    }
    Batch b;
    b.features["features"] = Tensor::from_vector(device, Shape{size, kDim}, x);
    b.labels = Tensor::from_vector(device, Shape{size, kClasses}, y);
    return b;
  }

  // The batches of every replica at step `k`, one after another.
  static Batch concatenated(Backend& device, int k) {
    std::vector<Tensor> xs;
    std::vector<Tensor> ys;
    for (int r = 0; r < world(); ++r) {
      Batch b = batch(device, r, k);
      xs.push_back(b.features["features"]);
      ys.push_back(b.labels);
    }
    Batch all;
    all.features["features"] = ops::concat(xs, 0);
    all.labels = ops::concat(ys, 0);
    return all;
  }

  static std::vector<std::pair<std::string, std::vector<float>>> floats(TrainStep& step,
                                                                        int64_t global_step) {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    for (const auto& [name, value] : step.state(global_step)) {
      if (value.dtype() == DType::kF32) out.emplace_back(name, value.to_vector<float>());
    }
    return out;
  }

  static PluginRegistry* registry_;
  static std::shared_ptr<Collective>* collective_;
  static std::shared_ptr<Backend>* cpu_;
};

PluginRegistry* DataParallelTest::registry_ = nullptr;
std::shared_ptr<Collective>* DataParallelTest::collective_ = nullptr;
std::shared_ptr<Backend>* DataParallelTest::cpu_ = nullptr;

TEST_F(DataParallelTest, CollectivesGiveEveryRankTheSameValues) {
  ASSERT_GE(world(), 2) << "run under mpirun -np 2 or more";
  // all_reduce: sum, mean, max, min of rank-dependent values, in one f32 and one f64 call.
  Tensor t =
      Tensor::from_vector(cpu(), Shape{3}, std::vector<float>{1.0f * rank(), 2.0f, -1.0f * rank()});
  collective().all_reduce(t, ReduceOp::kSum);
  const float n = static_cast<float>(world());
  const float ranks = n * (n - 1) / 2;
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{ranks, 2 * n, -ranks}));
  Tensor m = Tensor::from_vector(cpu(), Shape{1}, std::vector<double>{1.0 * rank()});
  collective().all_reduce(m, ReduceOp::kMean);
  EXPECT_DOUBLE_EQ(m.to_vector<double>()[0], (n - 1) / 2.0);
  // An integer mean truncates toward zero, as NCCL's ncclAvg.
  Tensor ints = Tensor::from_vector(cpu(), Shape{2}, std::vector<int64_t>{10 * rank(), -rank()});
  collective().all_reduce(ints, ReduceOp::kMean);
  const int64_t tens = 10 * world() * (world() - 1) / 2;
  EXPECT_EQ(ints.to_vector<int64_t>(),
            (std::vector<int64_t>{tens / world(), -(world() * (world() - 1) / 2) / world()}));
  Tensor hi = Tensor::from_vector(cpu(), Shape{1}, std::vector<int64_t>{rank()});
  collective().all_reduce(hi, ReduceOp::kMax);
  EXPECT_EQ(hi.to_vector<int64_t>()[0], world() - 1);
  Tensor lo = Tensor::from_vector(cpu(), Shape{1}, std::vector<int32_t>{rank() + 5});
  collective().all_reduce(lo, ReduceOp::kMin);
  EXPECT_EQ(lo.to_vector<int32_t>()[0], 5);
  // broadcast from the last rank, all_gather in rank order, barrier.
  Tensor b = Tensor::from_vector(cpu(), Shape{2}, std::vector<int32_t>{rank(), 7 * rank()});
  collective().broadcast(b, world() - 1);
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{world() - 1, 7 * (world() - 1)}));
  Tensor mine = Tensor::from_vector(cpu(), Shape{2}, std::vector<float>{1.0f * rank(), 0.5f});
  Tensor all = Tensor::empty(cpu(), Shape{world(), 2}, DType::kF32);
  collective().all_gather(mine, all);
  std::vector<float> expected;
  for (int r = 0; r < world(); ++r) expected.insert(expected.end(), {1.0f * r, 0.5f});
  EXPECT_EQ(all.to_vector<float>(), expected);
  collective().barrier();
  // Asynchronous: several tensors in one reduction, finished by wait().
  std::vector<Tensor> many = {
      Tensor::from_vector(cpu(), Shape{2}, std::vector<float>{1, 2}),
      Tensor::from_vector(cpu(), Shape{1}, std::vector<float>{1.0f * rank()})};
  std::shared_ptr<CollectiveWork> work = collective().all_reduce_async(many, ReduceOp::kSum);
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(many[0].to_vector<float>(), (std::vector<float>{n, 2 * n}));
  EXPECT_EQ(many[1].to_vector<float>(), (std::vector<float>{ranks}));
}

TEST_F(DataParallelTest, AllReduceReadsAndWritesTheTensorsThemselves) {
  ASSERT_GE(world(), 2) << "run under mpirun -np 2 or more";
  const float n = static_cast<float>(world());
  // Integer-valued floats: every sum is exact, and the mean is that sum times 1 / n.
  auto values = [](int64_t count, int r, int salt) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = float(r + (i + salt) % 7);
    return v;
  };
  auto expected_mean = [&](int64_t count, int salt) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < world(); ++r) sum += float(r + (i + salt) % 7);
      v[static_cast<std::size_t>(i)] = sum * (1.0f / n);
    }
    return v;
  };
  // One bucket mixing tensors above and below the 64 KiB that are reduced in place, two of them
  // views of one storage at different offsets.
  constexpr int64_t kLarge = 20000;  // 80,000 bytes
  Tensor whole = Tensor::empty(cpu(), Shape{2 * kLarge}, DType::kF32);
  std::vector<float> both = values(kLarge, rank(), 0);
  const std::vector<float> second = values(kLarge, rank(), 3);
  both.insert(both.end(), second.begin(), second.end());
  whole.backend().copy_from_host(*whole.storage(), 0, both.data(), both.size() * sizeof(float));
  std::vector<Tensor> bucket = {
      Tensor::from_vector(cpu(), Shape{3}, values(3, rank(), 1)),
      Tensor(whole.storage(), Shape{kLarge}, DType::kF32, 0),
      Tensor::from_vector(cpu(), Shape{17000}, values(17000, rank(), 2)),
      Tensor(whole.storage(), Shape{kLarge}, DType::kF32, kLarge * sizeof(float)),
      Tensor::from_vector(cpu(), Shape{1}, values(1, rank(), 4))};
  const void* before = bucket[2].native_memory().data;
  collective().all_reduce_async(bucket, ReduceOp::kMean)->wait();
  EXPECT_EQ(bucket[0].to_vector<float>(), expected_mean(3, 1));
  EXPECT_EQ(bucket[1].to_vector<float>(), expected_mean(kLarge, 0));
  EXPECT_EQ(bucket[2].to_vector<float>(), expected_mean(17000, 2));
  EXPECT_EQ(bucket[3].to_vector<float>(), expected_mean(kLarge, 3));
  EXPECT_EQ(bucket[4].to_vector<float>(), expected_mean(1, 4));
  EXPECT_EQ(bucket[2].native_memory().data, before);

  // A large reduction still queued or running when a small one starts on the calling thread's
  // path: the small one waits its turn (every rank makes the calls in the same order). The
  // large one is over one MPI call's 4 MiB: its pieces' means are taken one by one.
  constexpr int64_t kBig = (int64_t{1} << 20) + 1000;
  std::vector<Tensor> big = {Tensor::from_vector(cpu(), Shape{kBig}, values(kBig, rank(), 5))};
  std::shared_ptr<CollectiveWork> pending = collective().all_reduce_async(big, ReduceOp::kMean);
  Tensor small = Tensor::from_vector(cpu(), Shape{4}, values(4, rank(), 6));
  collective().all_reduce(small, ReduceOp::kMax);
  std::vector<float> top(4);
  for (int i = 0; i < 4; ++i) top[static_cast<std::size_t>(i)] = float(world() - 1 + (i + 6) % 7);
  EXPECT_EQ(small.to_vector<float>(), top);
  pending->wait();
  EXPECT_EQ(big[0].to_vector<float>(), expected_mean(kBig, 5));
}

TEST_F(DataParallelTest, MpiCollectiveRefusesWhatItCannotReduce) {
  const uint16_t one = 0x3f80;  // 1.0 in bfloat16
  Tensor half = Tensor::from_host(cpu(), Shape{1}, DType::kBF16, &one, sizeof(one));
  try {
    collective().all_reduce(half, ReduceOp::kSum);
    FAIL() << "bf16 was reduced";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
  Tensor t = Tensor::from_vector(cpu(), Shape{1}, std::vector<float>{1.0f});
  EXPECT_THROW(collective().broadcast(t, world()), InvalidArgument);
  collective().barrier();  // every rank refused the same calls and is here
}

// The replicas of a step stay bitwise equal, and equal (to 1e-5) one process that takes the
// same steps on the replicas' batches concatenated; with buckets small enough that the
// gradients are reduced in several pieces while the backward pass runs.
TEST_F(DataParallelTest, ReplicasStayEqualAndMatchOneProcessOnTheConcatenatedBatch) {
  ASSERT_GE(world(), 2);
  for (int64_t bucket_bytes : {int64_t{25} << 20, int64_t{64}}) {
    SCOPED_TRACE("bucket_bytes " + std::to_string(bucket_bytes));
    std::ostringstream log;
    TrainStep replica(*registry_, pipeline(), nullptr, log);
    replica.set_replicas(collective(), bucket_bytes);
    constexpr int kSteps = 5;
    double replica_loss = 0;
    for (int k = 0; k < kSteps; ++k)
      replica_loss = replica.run(batch(replica.backend(), rank(), k), k).loss;
    const auto mine = floats(replica, kSteps);
    ASSERT_FALSE(mine.empty());
    // Bitwise: every rank's bytes of every variable (weights and Adam's slots) gathered.
    for (const auto& [name, values] : mine) {
      Tensor t = Tensor::from_vector(cpu(), Shape{static_cast<int64_t>(values.size())}, values);
      Tensor all =
          Tensor::empty(cpu(), Shape{world(), static_cast<int64_t>(values.size())}, DType::kF32);
      collective().all_gather(t, all);
      const std::vector<float> gathered = all.to_vector<float>();
      for (int r = 0; r < world(); ++r) {
        EXPECT_EQ(std::memcmp(gathered.data() + r * values.size(), values.data(),
                              values.size() * sizeof(float)),
                  0)
            << name << " differs between this rank (" << rank() << ") and rank " << r;
      }
    }
    // One process, batch world x 4.
    TrainStep single(*registry_, pipeline(), nullptr, log);
    double single_loss = 0;
    for (int k = 0; k < kSteps; ++k)
      single_loss = single.run(concatenated(single.backend(), k), k).loss;
    const auto one = floats(single, kSteps);
    ASSERT_EQ(one.size(), mine.size());
    for (std::size_t v = 0; v < one.size(); ++v) {
      ASSERT_EQ(one[v].first, mine[v].first);
      ASSERT_EQ(one[v].second.size(), mine[v].second.size());
      for (std::size_t i = 0; i < one[v].second.size(); ++i) {
        EXPECT_NEAR(mine[v].second[i], one[v].second[i], 1e-5) << one[v].first << "[" << i << "]";
      }
    }
    // The logged loss is the mean over all replicas' examples.
    EXPECT_NEAR(replica_loss, single_loss, 1e-5);
  }
}

// A gradient reduced while the backward pass goes on (one bucket per variable, each launched
// as soon as its gradient is final) may be the very tensor that the pass still reads: an add
// hands its one output gradient to both its inputs, in SharedGradientModel
// (tests/fixtures/shared_gradient_plugin.cc) the variable V and the pending matmul G U, and U's
// gradient, G^T times that tensor, depends on each replica's batch. The reduction must leave the
// pass its own values, so the replicas' steps equal those of replicas that reduce everything in
// one bucket, after the pass has read all it needs.
TEST_F(DataParallelTest, AGradientReducedDuringTheBackwardPassLeavesTheTensorItSharesAlone) {
  ASSERT_GE(world(), 2);
  const config::Pipeline p = parse_pipeline_config(
      "model { class: \"SharedGradientModel\" }\n"
      "num_classes: 5\n"
      "train_config { batch_size: 4 seed: 3\n"
      "  optimizer { class: \"GradientDescentOptimizer\" }\n"
      "  learning_rate { constant { learning_rate: 0.5 } } }\n",
      "test");
  constexpr int kSteps = 4;  // the first step plans the buckets and reduces after its pass
  std::vector<std::vector<std::pair<std::string, std::vector<float>>>> variables;
  for (int64_t bucket_bytes : {int64_t{64}, int64_t{25} << 20}) {
    std::ostringstream log;
    TrainStep replica(*registry_, p, nullptr, log);
    replica.set_replicas(collective(), bucket_bytes);
    for (int k = 0; k < kSteps; ++k) replica.run(batch(replica.backend(), rank(), k), k);
    variables.push_back(floats(replica, kSteps));
  }
  const auto& each = variables[0];
  const auto& together = variables[1];
  ASSERT_EQ(each.size(), together.size());
  ASSERT_FALSE(each.empty());
  for (std::size_t v = 0; v < each.size(); ++v) {
    ASSERT_EQ(each[v].first, together[v].first);
    ASSERT_EQ(each[v].second.size(), together[v].second.size());
    for (std::size_t i = 0; i < each[v].second.size(); ++i) {
      EXPECT_NEAR(each[v].second[i], together[v].second[i], 1e-6)
          << each[v].first << "[" << i << "] on rank " << rank();
    }
  }
}

// DDP's no_sync accumulation: each replica runs its batch as two clones (num_clones 2, the OD
// API's averaged clone losses), accumulates their gradients locally and reduces once; the
// result is one process's step on every replica's examples.
TEST_F(DataParallelTest, ClonesAccumulateLocallyAndReduceOnce) {
  ASSERT_GE(world(), 2);
  config::Pipeline p = pipeline(2);
  p.mutable_train_config()->set_clone_gradients(config::TrainConfig::MEAN);
  std::ostringstream log;
  TrainStep replica(*registry_, p, nullptr, log);
  replica.set_replicas(collective(), int64_t{25} << 20);
  TrainStep single(*registry_, pipeline(), nullptr, log);
  constexpr int kSteps = 3;
  for (int k = 0; k < kSteps; ++k) {
    // Replica r's 8 examples are the batches of "replicas" 2r and 2r + 1 of one process's step.
    std::vector<Tensor> xs;
    std::vector<Tensor> ys;
    for (int half = 0; half < 2; ++half) {
      Batch b = batch(replica.backend(), 2 * rank() + half, k);
      xs.push_back(b.features["features"]);
      ys.push_back(b.labels);
    }
    Batch mine;
    mine.features["features"] = ops::concat(xs, 0);
    mine.labels = ops::concat(ys, 0);
    replica.run(mine, k);
    std::vector<Tensor> all_x;
    std::vector<Tensor> all_y;
    for (int r = 0; r < 2 * world(); ++r) {
      Batch b = batch(single.backend(), r, k);
      all_x.push_back(b.features["features"]);
      all_y.push_back(b.labels);
    }
    Batch all;
    all.features["features"] = ops::concat(all_x, 0);
    all.labels = ops::concat(all_y, 0);
    single.run(all, k);
  }
  const auto mine = floats(replica, kSteps);
  const auto one = floats(single, kSteps);
  ASSERT_EQ(one.size(), mine.size());
  for (std::size_t v = 0; v < one.size(); ++v) {
    for (std::size_t i = 0; i < one[v].second.size(); ++i) {
      EXPECT_NEAR(mine[v].second[i], one[v].second[i], 1e-5) << one[v].first << "[" << i << "]";
    }
  }
}

// The variables a replica starts from are rank 0's, whatever its own seed made them.
TEST_F(DataParallelTest, ReplicasStartFromTheChiefsVariables) {
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_seed(100 + static_cast<uint64_t>(rank()));
  std::ostringstream log;
  TrainStep replica(*registry_, p, nullptr, log);
  replica.set_replicas(collective(), int64_t{25} << 20);
  replica.run(batch(replica.backend(), rank(), 0), 0);
  for (const auto& [name, values] : floats(replica, 1)) {
    Tensor sum = Tensor::from_vector(cpu(), Shape{static_cast<int64_t>(values.size())}, values);
    Tensor first = ops::copy(sum);
    collective().broadcast(first, 0);
    EXPECT_EQ(first.to_vector<float>(), values) << name << " on rank " << rank();
  }
}

}  // namespace
}  // namespace trainyard
