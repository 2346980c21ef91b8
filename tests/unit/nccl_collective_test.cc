// NcclCollective (plugins/collectives/nccl_collective.cc) and the TCP rendezvous that hands out its
// NCCL unique id (nccl_rendezvous.h, built into this test). The rendezvous is checked on
// loopback on any machine; the collectives need a GPU and skip, saying "no CUDA device",
// without one, where the test checks instead that constructing the class says so.
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "nccl_rendezvous.h"
#include "trainyard/backend.h"
#include "trainyard/collective.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

using collectives::fetch_rendezvous_id;
using collectives::parse_rendezvous_address;
using collectives::RendezvousAddress;
using collectives::RendezvousServer;
using Clock = std::chrono::steady_clock;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::byte> sample_id() {
  std::vector<std::byte> id(128);
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = std::byte(static_cast<uint8_t>(i * 7 + 3));
  return id;
}

RendezvousAddress loopback(int port) {
  return parse_rendezvous_address("127.0.0.1:" + std::to_string(port));
}

TEST(NcclRendezvousTest, ParsesHostColonPortAndRefusesMalformedAddresses) {
  RendezvousAddress a = parse_rendezvous_address("node0:29500");
  EXPECT_EQ(a.host, "node0");
  EXPECT_EQ(a.port, "29500");
  RendezvousAddress v6 = parse_rendezvous_address("[::1]:80");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, "80");
  for (const char* bad : {"node0", ":29500", "node0:", "::1:29500", "node0:70000", "node0:2x"}) {
    std::string e = error_of([&] { parse_rendezvous_address(bad); });
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("host:port"), std::string::npos) << e;
  }
}

TEST(NcclRendezvousTest, EveryRankReceivesRankZerosId) {
  RendezvousServer server(parse_rendezvous_address("127.0.0.1:0"));
  ASSERT_GT(server.port(), 0);
  const std::vector<std::byte> id = sample_id();
  const auto deadline = Clock::now() + std::chrono::seconds(25);
  std::vector<std::future<std::vector<std::byte>>> ranks;
  for (int rank = 1; rank < 4; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      return fetch_rendezvous_id(loopback(server.port()), rank, 4, id.size(), deadline);
    }));
  }
  server.serve(id, 4, deadline);
  for (auto& r : ranks) EXPECT_EQ(r.get(), id);
}

TEST(NcclRendezvousTest, ARankStartedBeforeRankZeroRetriesUntilItListens) {
  // Reserve a free port, then let it go: rank 1 finds nothing there at first.
  int port = RendezvousServer(parse_rendezvous_address("127.0.0.1:0")).port();
  const std::vector<std::byte> id = sample_id();
  const auto deadline = Clock::now() + std::chrono::seconds(25);
  auto rank1 = std::async(std::launch::async, [&] {
    return fetch_rendezvous_id(loopback(port), 1, 2, id.size(), deadline);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RendezvousServer server(loopback(port));
  server.serve(id, 2, deadline);
  EXPECT_EQ(rank1.get(), id);
}

TEST(NcclRendezvousTest, AConnectionThatIsNotARankIsDropped) {
  RendezvousServer server(parse_rendezvous_address("127.0.0.1:0"));
  const std::vector<std::byte> id = sample_id();
  const auto deadline = Clock::now() + std::chrono::seconds(25);
  // A stray client: connects, writes something else, stays open.
  int stray = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(stray, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::write(stray, "GET / HTTP/1.0\r\n", 16), 16);
  auto rank1 = std::async(std::launch::async, [&] {
    return fetch_rendezvous_id(loopback(server.port()), 1, 2, id.size(), deadline);
  });
  server.serve(id, 2, deadline);
  EXPECT_EQ(rank1.get(), id);
  ::close(stray);
}

TEST(NcclRendezvousTest, RankZeroGivesUpNamingTheRanksThatNeverCame) {
  RendezvousServer server(parse_rendezvous_address("127.0.0.1:0"));
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  auto rank2 = std::async(std::launch::async, [&] {
    return error_of([&] { fetch_rendezvous_id(loopback(server.port()), 2, 4, 128, deadline); });
  });
  std::string e = error_of([&] { server.serve(sample_id(), 4, deadline); });
  EXPECT_NE(e.find("127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("heard from 1 of 3 other ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("missing rank(s) 1, 3"), std::string::npos) << e;
  std::string r = rank2.get();
  EXPECT_NE(r.find("rank 2 of 4 got no unique id"), std::string::npos) << r;
}

TEST(NcclRendezvousTest, ARankWithNoRankZeroFailsNamingTheAddressAndItself) {
  int port = RendezvousServer(parse_rendezvous_address("127.0.0.1:0")).port();
  std::string e = error_of([&] {
    fetch_rendezvous_id(loopback(port), 3, 8, 128, Clock::now() + std::chrono::seconds(1));
  });
  EXPECT_NE(e.find("rank 3 of 8"), std::string::npos) << e;
  EXPECT_NE(e.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
  EXPECT_NE(e.find("last error: connect"), std::string::npos) << e;
}

TEST(NcclRendezvousTest, AnotherWorldSizeIsRefusedOnBothSides) {
  RendezvousServer server(parse_rendezvous_address("127.0.0.1:0"));
  const auto deadline = Clock::now() + std::chrono::seconds(25);
  auto rank1 = std::async(std::launch::async, [&] {
    return error_of([&] { fetch_rendezvous_id(loopback(server.port()), 1, 3, 128, deadline); });
  });
  std::string e = error_of([&] { server.serve(sample_id(), 2, deadline); });
  EXPECT_NE(e.find("rank 0 at 127.0.0.1:" + std::to_string(server.port()) +
                   ": rank 1 (from "
                   "127.0.0.1:"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("world size 3, rank 0 with 2"), std::string::npos) << e;
  std::string r = rank1.get();
  EXPECT_NE(r.find("refused rank 1 of 3: rank 0 was started with another world size"),
            std::string::npos)
      << r;
}

// ---- NcclCollective through the registry ----

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

class NcclCollectiveTest : public ::testing::Test {
 protected:
  NcclCollectiveTest() : registry_(settings()) {}
  static PluginRegistry::Settings settings() {
    PluginRegistry::Settings s;
    s.plugin_path = {TRAINYARD_PLUGIN_DIR};
    s.use_environment = false;
    s.use_default_dirs = false;
    return s;
  }
  std::shared_ptr<Collective> create(std::map<std::string, OptionValue> options = {}) {
    options.emplace("rank", int64_t{0});
    options.emplace("world_size", int64_t{1});
    return registry_.create<Collective>(ClassKind::kCollective, "NcclCollective", options);
  }
  // Skips the test without a GPU; else the cuda backend and a world of one.
  void SetUp() override {
    if (cuda_device_count() == 0) return;
    cuda_ = registry_.create<Backend>(ClassKind::kBackend, "cuda");
    cpu_ = registry_.create<Backend>(ClassKind::kBackend, "cpu");
  }
  bool have_gpu() const { return cuda_ != nullptr; }

  PluginRegistry registry_;
  std::shared_ptr<Backend> cuda_;
  std::shared_ptr<Backend> cpu_;
};

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount found none)"

TEST_F(NcclCollectiveTest, IsListedAsACollectiveOnEveryMachine) {
  const ClassInfo& info = registry_.find(ClassKind::kCollective, "NcclCollective");
  EXPECT_EQ(info.plugin_name, "nccl");
}

TEST_F(NcclCollectiveTest, ConstructingWithoutAGpuSaysNoCudaDeviceWasFound) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is present: construction succeeds";
  std::string e = error_of([&] { create(); });
  EXPECT_NE(e.find("NcclCollective: no CUDA device found"), std::string::npos) << e;
  GTEST_SKIP() << "no CUDA device: constructing NcclCollective says so (" << e
               << "); the collectives are not checked here";
}

TEST_F(NcclCollectiveTest, RankAndWorldSizeComeFromOptionsAndAreChecked) {
  SKIP_WITHOUT_GPU();
  std::shared_ptr<Collective> c = create();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  std::string e = error_of([&] { create({{"rank", int64_t{2}}, {"world_size", int64_t{2}}}); });
  EXPECT_NE(e.find("rank 2 (option rank) is not within a world of size 2"), std::string::npos) << e;
  e = error_of([&] { create({{"rank", int64_t{1}}, {"world_size", int64_t{2}}}); });
  EXPECT_NE(e.find("needs a rendezvous address"), std::string::npos) << e;
}

TEST_F(NcclCollectiveTest, OverOneRankEveryReductionKeepsTheValues) {
  SKIP_WITHOUT_GPU();
  std::shared_ptr<Collective> c = create();
  const std::vector<float> values = {1.5f, -2.0f, 0.0f, 3.25f, 7.0f};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    Tensor t = Tensor::from_vector(*cuda_, Shape{5}, values);
    c->all_reduce(t, op);
    EXPECT_EQ(t.to_vector<float>(), values) << "op " << static_cast<int>(op);
  }
  const std::vector<int64_t> ints = {-3, 0, 1LL << 40};
  Tensor i = Tensor::from_vector(*cuda_, Shape{3}, ints);
  c->all_reduce(i, ReduceOp::kMean);
  EXPECT_EQ(i.to_vector<int64_t>(), ints);
  const std::vector<double> doubles = {0.1, -1e300};
  Tensor d = Tensor::from_vector(*cuda_, Shape{2}, doubles);
  c->all_reduce(d, ReduceOp::kSum);
  EXPECT_EQ(d.to_vector<double>(), doubles);
}

TEST_F(NcclCollectiveTest, BroadcastAllGatherAsyncAndBarrierOverOneRank) {
  SKIP_WITHOUT_GPU();
  std::shared_ptr<Collective> c = create();
  const std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  Tensor t = Tensor::from_vector(*cuda_, Shape{2, 3}, values);
  c->broadcast(t, 0);
  EXPECT_EQ(t.to_vector<float>(), values);
  EXPECT_NE(error_of([&] { c->broadcast(t, 1); }).find("root 1 is out of range"),
            std::string::npos);

  Tensor gathered = Tensor::empty(*cuda_, Shape{1, 2, 3}, DType::kF32);
  c->all_gather(t, gathered);
  EXPECT_EQ(gathered.to_vector<float>(), values);
  Tensor wrong = Tensor::empty(*cuda_, Shape{2, 3}, DType::kF32);
  std::string e = error_of([&] { c->all_gather(t, wrong); });
  EXPECT_NE(e.find("NcclCollective::all_gather: out is f32[2, 3] on cuda:0"), std::string::npos)
      << e;

  std::vector<Tensor> bucket = {Tensor::from_vector(*cuda_, Shape{6}, values),
                                Tensor::from_vector(*cuda_, Shape{2}, std::vector<float>{9, 8})};
  std::shared_ptr<CollectiveWork> work = c->all_reduce_async(bucket, ReduceOp::kSum);
  ASSERT_NE(work, nullptr);
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(bucket[0].to_vector<float>(), values);
  EXPECT_EQ(bucket[1].to_vector<float>(), (std::vector<float>{9, 8}));
  c->barrier();
}

TEST_F(NcclCollectiveTest, AHostTensorOrAnUnsupportedDtypeIsAnInvalidArgument) {
  SKIP_WITHOUT_GPU();
  std::shared_ptr<Collective> c = create();
  Tensor host = Tensor::from_vector(*cpu_, Shape{2}, std::vector<float>{1, 2});
  try {
    c->all_reduce(host, ReduceOp::kSum);
    FAIL() << "a host tensor was reduced";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("NcclCollective::all_reduce(sum): f32[2] on cpu is not "
                                         "on a CUDA device (its storage is host memory)"),
              std::string::npos)
        << e.what();
  }
  Tensor bytes = Tensor::from_vector(*cuda_, Shape{2}, std::vector<uint8_t>{1, 2});
  try {
    c->broadcast(bytes, 0);
    FAIL() << "a u8 tensor was broadcast";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("take f32, f64, f16, bf16, i32 or i64, not u8"),
              std::string::npos)
        << e.what();
  }
}

// Two ranks in one process, one GPU each (NCCL refuses two ranks on one GPU).
TEST_F(NcclCollectiveTest, TwoRanksOnTwoGpusSumAndAverage) {
  SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  const int port = RendezvousServer(parse_rendezvous_address("127.0.0.1:0")).port();
  auto run_rank = [&](int rank) {
    std::shared_ptr<Collective> c = create({{"rank", int64_t{rank}},
                                            {"world_size", int64_t{2}},
                                            {"device_index", int64_t{rank}},
                                            {"rendezvous", "127.0.0.1:" + std::to_string(port)},
                                            {"timeout_secs", int64_t{60}}});
    auto gpu =
        registry_.create<Backend>(ClassKind::kBackend, "cuda", {{"device_index", int64_t{rank}}});
    Tensor sum = Tensor::from_vector(*gpu, Shape{3}, std::vector<float>{1.0f + rank, 2, 3});
    c->all_reduce(sum, ReduceOp::kSum);
    Tensor mean = Tensor::from_vector(*gpu, Shape{2}, std::vector<float>{2.0f * rank, 4});
    c->all_reduce(mean, ReduceOp::kMean);
    Tensor gathered = Tensor::empty(*gpu, Shape{2, 1}, DType::kF32);
    c->all_gather(Tensor::from_vector(*gpu, Shape{1}, std::vector<float>{10.0f + rank}), gathered);
    c->barrier();
    return std::vector<std::vector<float>>{sum.to_vector<float>(), mean.to_vector<float>(),
                                           gathered.to_vector<float>()};
  };
  auto rank1 = std::async(std::launch::async, run_rank, 1);
  auto rank0 = run_rank(0);
  for (const auto& result : {rank0, rank1.get()}) {
    EXPECT_EQ(result[0], (std::vector<float>{3, 4, 6}));
    EXPECT_EQ(result[1], (std::vector<float>{1, 4}));
    EXPECT_EQ(result[2], (std::vector<float>{10, 11}));
  }
}

}  // namespace
}  // namespace trainyard
