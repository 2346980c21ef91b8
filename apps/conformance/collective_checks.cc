// Collective checks that one process can make (collective.h): a consistent rank and world
// size and, for a world of one replica, every reduction and broadcast is the identity. A
// collective started as one of several replicas (under mpirun) is checked for consistency of
// rank and world size only; its reductions need the other replicas. The reductions run on the
// reference backend's tensors; a device collective (NCCL) refuses those with InvalidArgument,
// and is then checked on the tensors of the first other backend on the plugin path that is
// usable here and whose tensors it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "conformance.h"
#include "trainyard/collective.h"
#include "trainyard/error.h"

namespace trainyard::conformance {
namespace {

void check_rank(const ClassInfo& info) {
  std::shared_ptr<Collective> c = create_default<Collective>(info);
  EXPECT_GE(c->world_size(), 1) << info.class_name << ": world_size";
  EXPECT_GE(c->rank(), 0) << info.class_name << ": rank";
  EXPECT_LT(c->rank(), c->world_size())
      << info.class_name << ": rank " << c->rank() << " of a world of " << c->world_size();
}

// The backend whose tensors `c`, a world of one, takes: the reference backend, else the first
// other usable backend on the plugin path; a one-element all_reduce (an identity over one
// replica) probes each. Rethrows the reference backend's refusal when none is taken.
std::shared_ptr<Backend> backend_taken_by(Collective& c) {
  auto probe = [&c](Backend& b) {
    Tensor t = Tensor::from_vector(b, Shape{1}, std::vector<float>{1.0f});
    c.all_reduce(t, ReduceOp::kSum);
    b.synchronize();
  };
  try {
    probe(reference_backend());
    return std::shared_ptr<Backend>(std::shared_ptr<Backend>(), &reference_backend());
  } catch (const InvalidArgument&) {
    for (const ClassInfo& info : suite().registry->classes()) {
      if (info.kind != ClassKind::kBackend || info.class_name == "cpu") continue;
      try {
        auto backend = suite().registry->create<Backend>(ClassKind::kBackend, info.class_name);
        probe(*backend);
        return backend;
      } catch (const Error&) {
        // not usable here, or not taken: the next one
      }
    }
    throw;
  }
}

void check_single_replica_identity(const ClassInfo& info) {
  std::shared_ptr<Collective> c = create_default<Collective>(info);
  if (c->world_size() != 1) {
    GTEST_SKIP() << "a world of " << c->world_size()
                 << " replicas: reductions are not checked from one process";
  }
  std::shared_ptr<Backend> backend = backend_taken_by(*c);
  Backend& b = *backend;
  SCOPED_TRACE("on tensors of " + b.device_name());
  const ReduceOp reduce_ops[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};
  const char* names[] = {"sum", "mean", "max", "min"};
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI64}) {
    std::vector<double> values = uniform_values(suite().seed, 37, -50.0, 50.0);
    if (dtype == DType::kI64) {
      for (double& v : values) v = std::floor(v);
    }
    for (int i = 0; i < 4; ++i) {
      Tensor t = make_tensor(b, Shape{37}, dtype, values);
      std::vector<std::byte> before = host_bytes(t);
      c->all_reduce(t, reduce_ops[i]);
      EXPECT_TRUE(host_bytes(t) == before)
          << info.class_name << ": all_reduce(" << names[i] << ") of " << t.description()
          << " over one replica changed its values";
    }
    Tensor t = make_tensor(b, Shape{37}, dtype, values);
    std::vector<std::byte> before = host_bytes(t);
    c->broadcast(t, 0);
    EXPECT_TRUE(host_bytes(t) == before)
        << info.class_name << ": broadcast from rank 0 over one replica changed the values";
    // The asynchronous form over several tensors, and all_gather into [1, ...].
    std::vector<Tensor> bucket = {make_tensor(b, Shape{37}, dtype, values),
                                  make_tensor(b, Shape{37}, dtype, values)};
    std::shared_ptr<CollectiveWork> work = c->all_reduce_async(bucket, ReduceOp::kSum);
    ASSERT_NE(work, nullptr) << info.class_name << ": all_reduce_async returned no work";
    work->wait();
    EXPECT_TRUE(work->is_completed());
    for (const Tensor& r : bucket) {
      EXPECT_TRUE(host_bytes(r) == before)
          << info.class_name << ": all_reduce_async over one replica changed the values";
    }
    Tensor gathered = Tensor::empty(b, Shape{1, 37}, dtype);
    c->all_gather(t, gathered);
    EXPECT_TRUE(host_bytes(gathered) == before)
        << info.class_name << ": all_gather over one replica is not a copy";
  }
  c->barrier();
  b.synchronize();
}

}  // namespace

void register_collective_checks(const ClassInfo& info) {
  const std::string suite_name = "Collective/" + info.class_name;
  register_check(suite_name, "DeclaredOptionsValid", [info] { check_declared_options(info); });
  register_check(suite_name, "RankWithinWorld", [info] { check_rank(info); });
  register_check(suite_name, "SingleReplicaIsIdentity",
                 [info] { check_single_replica_identity(info); });
}

}  // namespace trainyard::conformance
