// TF_CONFIG read as TensorFlow reads it: chief (or master) and workers map to the ranks of the
// all-reduce job (the chief rank 0, or worker 0 when there is no chief), the evaluator stands
// outside it, an empty value or cluster is one local process, parameter servers are refused with
// the all-reduce alternative, and every malformed value is a ConfigError naming the key at fault.
#include "trainyard/core/tf_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "trainyard/error.h"

namespace trainyard {
namespace {

using Role = ClusterRole::Role;

ClusterRole read(const std::string& json) {
  const std::optional<ClusterRole> role = read_tf_config(json, "TF_CONFIG");
  if (!role) ADD_FAILURE() << "no role for " << json;
  return role.value_or(ClusterRole{});
}

// The message of the ConfigError that reading `json` throws, or "" when it reads.
std::string error_of(const std::string& json) {
  try {
    read_tf_config(json, "TF_CONFIG");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// A TF_CONFIG of `cluster` with this process as `type` `index`.
std::string with_task(const std::string& cluster, const std::string& type, int index) {
  return "{\"cluster\": " + cluster + ", \"task\": {\"type\": \"" + type +
         "\", \"index\": " + std::to_string(index) + "}}";
}

const std::string kChiefAndTwoWorkers =
    R"({"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]})";

TEST(TfConfigTest, ChiefIsRankZeroAndWorkerIIsRankIPlusOne) {
  const std::vector<std::string> addresses = {"host0:2222", "host1:2222", "host2:2222"};

  const ClusterRole chief = read(with_task(kChiefAndTwoWorkers, "chief", 0));
  EXPECT_EQ(chief.task_type, "chief");
  EXPECT_EQ(chief.task_index, 0);
  EXPECT_EQ(chief.role, Role::kChief);
  EXPECT_EQ(chief.rank, 0);
  EXPECT_EQ(chief.world_size, 3);
  EXPECT_TRUE(chief.is_chief);
  EXPECT_EQ(chief.addresses, addresses);
  EXPECT_EQ(chief.chief_address, "host0:2222");
  EXPECT_EQ(chief.task_address, "host0:2222");

  const ClusterRole worker0 = read(with_task(kChiefAndTwoWorkers, "worker", 0));
  EXPECT_EQ(worker0.role, Role::kWorker);
  EXPECT_EQ(worker0.rank, 1);
  EXPECT_EQ(worker0.world_size, 3);
  EXPECT_FALSE(worker0.is_chief);
  EXPECT_EQ(worker0.addresses, addresses);
  EXPECT_EQ(worker0.chief_address, "host0:2222");
  EXPECT_EQ(worker0.task_address, "host1:2222");

  const ClusterRole worker1 = read(with_task(kChiefAndTwoWorkers, "worker", 1));
  EXPECT_EQ(worker1.task_index, 1);
  EXPECT_EQ(worker1.role, Role::kWorker);
  EXPECT_EQ(worker1.rank, 2);
  EXPECT_EQ(worker1.world_size, 3);
  EXPECT_FALSE(worker1.is_chief);
  EXPECT_EQ(worker1.task_address, "host2:2222");
  EXPECT_EQ(describe_cluster_role(worker1), "TF_CONFIG worker 1: rank 2 of 3, chief host0:2222");
}

TEST(TfConfigTest, MasterIsTheChief) {
  const std::string cluster = R"({"master": ["m:1"], "worker": ["w0:1", "w1:1"]})";
  const ClusterRole master = read(with_task(cluster, "master", 0));
  EXPECT_EQ(master.task_type, "master");
  EXPECT_EQ(master.role, Role::kChief);
  EXPECT_EQ(master.rank, 0);
  EXPECT_EQ(master.world_size, 3);
  EXPECT_TRUE(master.is_chief);
  EXPECT_EQ(master.chief_address, "m:1");
  const ClusterRole worker = read(with_task(cluster, "worker", 1));
  EXPECT_EQ(worker.rank, 2);
  EXPECT_FALSE(worker.is_chief);
  EXPECT_EQ(worker.addresses, (std::vector<std::string>{"m:1", "w0:1", "w1:1"}));
}

// MultiWorkerMirroredStrategy's cluster of workers only: worker 0 does the chief's work.
TEST(TfConfigTest, WithoutAChiefWorkerZeroIsTheChief) {
  const std::string cluster = R"({"worker": ["localhost:12345", "localhost:23456"]})";
  const ClusterRole worker0 = read(with_task(cluster, "worker", 0));
  EXPECT_EQ(worker0.task_type, "worker");
  EXPECT_EQ(worker0.role, Role::kChief);
  EXPECT_EQ(worker0.rank, 0);
  EXPECT_EQ(worker0.world_size, 2);
  EXPECT_TRUE(worker0.is_chief);
  EXPECT_EQ(worker0.chief_address, "localhost:12345");
  const ClusterRole worker1 = read(with_task(cluster, "worker", 1));
  EXPECT_EQ(worker1.role, Role::kWorker);
  EXPECT_EQ(worker1.rank, 1);
  EXPECT_EQ(worker1.world_size, 2);
  EXPECT_FALSE(worker1.is_chief);
  EXPECT_EQ(worker1.task_address, "localhost:23456");
}

TEST(TfConfigTest, EvaluatorHasNoRankAndWatchesTheTrainingJob) {
  const ClusterRole listed = read(with_task(
      R"({"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "evaluator": ["e:1"]})", "evaluator", 0));
  EXPECT_EQ(listed.role, Role::kEvaluator);
  EXPECT_EQ(listed.rank, -1);
  EXPECT_EQ(listed.world_size, 3);
  EXPECT_FALSE(listed.is_chief);
  EXPECT_EQ(listed.chief_address, "c:1");
  EXPECT_EQ(listed.task_address, "e:1");
  EXPECT_EQ(describe_cluster_role(listed),
            "TF_CONFIG evaluator 0: watching a training job of 3, chief c:1");

  // TensorFlow lets the evaluator stand outside the cluster.
  const ClusterRole outside = read(with_task(kChiefAndTwoWorkers, "evaluator", 0));
  EXPECT_EQ(outside.role, Role::kEvaluator);
  EXPECT_EQ(outside.rank, -1);
  EXPECT_EQ(outside.world_size, 3);
  EXPECT_EQ(outside.task_address, "");
  EXPECT_EQ(outside.chief_address, "host0:2222");
}

TEST(TfConfigTest, EnvironmentAndRpcLayerAreReadOrIgnored) {
  const ClusterRole role = read(
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0, "trial": "3"},
          "environment": "cloud", "rpc_layer": "grpc"})");
  EXPECT_EQ(role.rpc_layer, "grpc");
  EXPECT_EQ(role.world_size, 1);
  EXPECT_TRUE(role.is_chief);
  EXPECT_NE(error_of(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0},
                         "rpc_layer": 5})")
                .find("TF_CONFIG: rpc_layer must be a string"),
            std::string::npos);
}

// As TensorFlow: no value, an empty object or an empty cluster is one local process.
TEST(TfConfigTest, EmptyValueOrClusterIsOneLocalProcess) {
  EXPECT_FALSE(read_tf_config("", "TF_CONFIG"));
  EXPECT_FALSE(read_tf_config("  \n", "TF_CONFIG"));
  EXPECT_FALSE(read_tf_config("{}", "TF_CONFIG"));
  EXPECT_FALSE(read_tf_config(R"({"cluster": {}})", "TF_CONFIG"));
  EXPECT_FALSE(
      read_tf_config(R"({"cluster": {}, "task": {"type": "worker", "index": 0}})", "TF_CONFIG"));
  EXPECT_FALSE(read_tf_config(R"({"task": {"type": "worker", "index": 0}, "environment": "cloud"})",
                              "TF_CONFIG"));
  // RunConfig refuses any other task without a cluster.
  const std::string error = error_of(R"({"cluster": {}, "task": {"type": "chief", "index": 0}})");
  EXPECT_NE(error.find("TF_CONFIG: task.type \"chief\", task.index 0 is given without a cluster"),
            std::string::npos)
      << error;
  EXPECT_NE(error_of(R"({"task": {"type": "worker", "index": 1}})").find("without a cluster"),
            std::string::npos);
}

TEST(TfConfigTest, FromEnvironmentReadsTfConfig) {
  ASSERT_EQ(setenv("TF_CONFIG", with_task(kChiefAndTwoWorkers, "worker", 1).c_str(), 1), 0);
  const std::optional<ClusterRole> role = tf_config_from_environment();
  ASSERT_TRUE(role);
  EXPECT_EQ(role->rank, 2);
  ASSERT_EQ(setenv("TF_CONFIG", "{\"cluster\": [", 1), 0);
  try {
    tf_config_from_environment();
    ADD_FAILURE() << "a broken TF_CONFIG was read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("TF_CONFIG: ", 0), 0u) << e.what();
  }
  ASSERT_EQ(unsetenv("TF_CONFIG"), 0);
  EXPECT_FALSE(tf_config_from_environment());
}

// Each malformed value and the fragment of its message that names what is wrong.
struct BadValue {
  std::string json;
  std::string fragment;
};

TEST(TfConfigTest, MalformedValuesNameTheKeyAtFault) {
  const std::vector<BadValue> cases = {
      {R"({"cluster": {"worker": ["a:1"]}, "task": )", "TF_CONFIG: invalid JSON"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": )", "at byte 41"},
      {R"(["a:1"])", "TF_CONFIG: the value must be a JSON object"},
      {R"({"cluster": ["a:1", "b:1"], "task": {"type": "worker", "index": 0}})",
       "TF_CONFIG: cluster must be an object mapping each job to its \"host:port\" addresses, "
       "not a list"},
      {with_task(R"({"worker": "a:1"})", "worker", 0),
       "TF_CONFIG: cluster.worker must be a list of \"host:port\" strings, not \"a:1\""},
      {with_task(R"({"worker": ["a:1", 7]})", "worker", 0),
       "TF_CONFIG: cluster.worker[1] must be a \"host:port\" string, not 7"},
      {with_task(R"({"worker": ["a:1", "hostonly"]})", "worker", 0),
       "cluster.worker[1] \"hostonly\" is not \"host:port\" (no port)"},
      {with_task(R"({"worker": [":2222"]})", "worker", 0),
       "cluster.worker[0] \":2222\" is not \"host:port\" (the host is empty)"},
      {with_task(R"({"worker": ["a:0"]})", "worker", 0),
       "cluster.worker[0] \"a:0\" has port \"0\"; a port is a number from 1 to 65535"},
      {with_task(R"({"worker": ["a:65536"]})", "worker", 0), "has port \"65536\""},
      {with_task(R"({"worker": ["a:http"]})", "worker", 0), "has port \"http\""},
      {with_task(R"({"worker": ["a b:1"]})", "worker", 0), "contains a blank or control character"},
      {with_task(R"({"workers": ["a:1"]})", "worker", 0),
       "TF_CONFIG: cluster.workers is not a job TF_CONFIG defines (valid jobs: chief, master, "
       "worker, evaluator, ps)"},
      {with_task(R"({"chief": ["a:1"], "master": ["b:1"]})", "chief", 0),
       "TF_CONFIG: cluster has both chief and master"},
      {with_task(R"({"chief": ["a:1", "b:1"], "worker": ["c:1"]})", "chief", 0),
       "TF_CONFIG: cluster.chief lists 2 addresses; there is at most one chief"},
      {with_task(R"({"master": ["a:1", "b:1"]})", "master", 0),
       "cluster.master lists 2 addresses; there is at most one master"},
      {with_task(R"({"worker": ["a:1"], "evaluator": ["e:1", "f:1"]})", "evaluator", 0),
       "cluster.evaluator lists 2 addresses; there is at most one evaluator"},
      {R"({"cluster": {"worker": ["a:1"]}})", "TF_CONFIG: task is missing"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": "worker"})",
       "TF_CONFIG: task must be an object"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})",
       "TF_CONFIG: task.type is missing (valid types: chief, master, worker, evaluator, ps)"},
      {with_task(R"({"worker": ["a:1"]})", "controller", 0),
       "TF_CONFIG: task.type \"controller\" is not a task type (valid types: chief, master, "
       "worker, evaluator, ps)"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})",
       "TF_CONFIG: task.index is missing"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})",
       "TF_CONFIG: task.index must be a non-negative integer, not -1"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0.5}})",
       "task.index must be a non-negative integer, not 0.5"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}})",
       "task.index must be a non-negative integer, not \"0\""},
      {with_task(R"({"worker": ["a:1", "b:1"]})", "worker", 3),
       "TF_CONFIG: task.index 3 but cluster.worker has 2 addresses"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 99999999999999}})",
       "task.index 99999999999999 but cluster.worker has 1 address"},
      {with_task(R"({"chief": ["c:1"]})", "chief", 1),
       "task.index 1 but cluster.chief has 1 address"},
      {with_task(R"({"worker": ["a:1"]})", "chief", 0),
       "TF_CONFIG: task.type \"chief\" is not a job of the cluster (it has worker)"},
      {with_task(R"({"chief": ["c:1"], "worker": ["a:1", "b:1", "a:1"]})", "worker", 0),
       "TF_CONFIG: cluster.worker[2] and cluster.worker[0] are both \"a:1\""},
      {with_task(R"({"chief": ["a:1"], "worker": ["a:1"]})", "worker", 0),
       "cluster.worker[0] and cluster.chief[0] are both \"a:1\""},
  };
  for (const BadValue& c : cases) {
    const std::string error = error_of(c.json);
    EXPECT_NE(error.find(c.fragment), std::string::npos)
        << "TF_CONFIG " << c.json << "\n  error: " << error << "\n  expected: " << c.fragment;
  }
}

TEST(TfConfigTest, ParameterServersAreRefusedWithTheAllReduceAlternative) {
  const std::string explanation =
      "are not supported: Trainyard trains synchronously with all-reduce (every worker holds all "
      "the variables and gradients are averaged over workers each step, as "
      "MultiWorkerMirroredStrategy and Horovod do); remove the ps job and launch the workers "
      "with mpirun -np N trainyard train ..., or list them under cluster.worker";
  const std::string in_cluster = error_of(
      with_task(R"({"chief": ["c:1"], "worker": ["w:1"], "ps": ["p0:1", "p1:1"]})", "worker", 0));
  EXPECT_NE(in_cluster.find("TF_CONFIG: parameter servers (cluster.ps, 2 tasks) " + explanation),
            std::string::npos)
      << in_cluster;
  const std::string as_task =
      error_of(with_task(R"({"worker": ["w:1"], "ps": ["p0:1"]})", "ps", 0));
  EXPECT_NE(as_task.find("TF_CONFIG: "), std::string::npos) << as_task;
  EXPECT_NE(as_task.find(explanation), std::string::npos) << as_task;
  const std::string ps_task_only =
      error_of(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}})");
  EXPECT_NE(ps_task_only.find("TF_CONFIG: task.type \"ps\": parameter servers " + explanation),
            std::string::npos)
      << ps_task_only;
  // An empty ps job asks for no parameter server.
  EXPECT_EQ(read(with_task(R"({"worker": ["w:1"], "ps": []})", "worker", 0)).world_size, 1);
}

TEST(TfConfigTest, SizesAreCapped) {
  std::string many = "[";
  for (int i = 0; i <= 65536; ++i)
    many += (i == 0 ? "\"h:" : ",\"h:") + std::to_string(i % 9 + 1) + "\"";
  many += "]";
  const std::string too_many = error_of(with_task("{\"worker\": " + many + "}", "worker", 0));
  EXPECT_NE(too_many.find("TF_CONFIG: cluster.worker lists 65537 addresses, more than the 65,536 "
                          "allowed per job"),
            std::string::npos)
      << too_many.substr(0, 300);

  const std::string long_address = std::string(1100, 'h') + ":1";
  const std::string too_long =
      error_of(with_task("{\"worker\": [\"" + long_address + "\"]}", "worker", 0));
  EXPECT_NE(too_long.find("TF_CONFIG: cluster.worker[0] is 1102 bytes long, more than the 1,024 "
                          "allowed for an address"),
            std::string::npos)
      << too_long.substr(0, 300);

  const std::string huge = "{\"environment\": \"" + std::string(1 << 20, 'x') + "\"}";
  const std::string too_big = error_of(huge);
  EXPECT_NE(too_big.find("TF_CONFIG: the value is " + std::to_string(huge.size()) +
                         " bytes, more than the 1 MiB"),
            std::string::npos)
      << too_big.substr(0, 300);
}

}  // namespace
}  // namespace trainyard
