// TF_CONFIG, read as TensorFlow reads it (tf.estimator.RunConfig and the TFConfigClusterResolver
// of MultiWorkerMirroredStrategy), mapped onto the ranks of Trainyard's synchronous all-reduce.
//
// The value is one JSON object:
//   {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...], "evaluator": [...]},
//    "task": {"type": "worker", "index": 1}, "environment": "cloud", "rpc_layer": "grpc"}
// `cluster` maps each job to its addresses, `task` names this process's job and its index in
// that job's list. `master` is the older name of `chief` (RunConfig); a cluster has at most one
// of the two and it has one task. The training job is the chief (or master) followed by the
// workers: the chief is rank 0 and worker i is rank i + 1; without a chief, worker 0 is the
// chief and worker i is rank i, as MultiWorkerMirroredStrategy does. An evaluator is not part of
// the training job (TensorFlow lets it stand outside the cluster): it watches the chief's
// checkpoints. Parameter servers (`ps`) are refused: Trainyard has no asynchronous training.
// `environment`, and any other key TensorFlow ignores, is ignored.
#ifndef TRAINYARD_CORE_TF_CONFIG_H_
#define TRAINYARD_CORE_TF_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

// What one process of a TF_CONFIG cluster is and where the rest of its training job lives.
struct ClusterRole {
  enum class Role {
    kChief,      // rank 0: trains, and writes checkpoints, summaries and exports
    kWorker,     // rank 1 and above: trains
    kEvaluator,  // no rank: evaluates the chief's checkpoints as they appear
  };

  std::string task_type;  // task.type as written: "chief", "master", "worker" or "evaluator"
  int task_index = 0;     // task.index
  Role role = Role::kWorker;
  // The rank in the training job, 0 .. world_size - 1; -1 for an evaluator.
  int rank = 0;
  // The number of processes of the training job (chief or master, and workers). For an
  // evaluator, that of the job it watches (0 when the cluster lists no training job).
  int world_size = 1;
  bool is_chief = false;  // role == kChief: a chief/master task, or worker 0 without one
  // The training job's addresses in rank order (the chief's first), "host:port" as written.
  std::vector<std::string> addresses;
  std::string chief_address;  // addresses[0]; empty when the cluster lists no training job
  std::string task_address;   // this task's own address; empty for an evaluator not listed
  std::string rpc_layer;      // `rpc_layer` as written ("grpc", ...); empty when absent
};

// Reads one TF_CONFIG value. Returns nullopt where TensorFlow runs a single local process: an
// empty (or all-blank) value, "{}", no cluster or an empty one (with no task, or task worker 0).
// Throws ConfigError, its message starting with "SOURCE: " and naming the key and value at
// fault, where the value is not a JSON object (with the byte offset), or is over 1 MiB; the
// cluster is not an object, names a job other than chief, master, worker, evaluator and ps, or
// a job is not a list of "host:port" strings (non-empty host, port 1-65535); a job lists more
// than 65,536 addresses or an address is over 1,024 bytes; an address appears twice; both chief
// and master are given, either has more than one task, or there is more than one evaluator;
// task is missing, task.type is not one of chief, master, worker, evaluator, ps, or task.index is
// not a non-negative integer; the task's job is not in the cluster (an evaluator may be
// absent from it), or task.index is past the end of its job; a task other than worker 0 is
// given without a cluster. Parameter servers (a non-empty cluster.ps, or task.type ps) are
// refused with a message explaining Trainyard's all-reduce alternative.
TRAINYARD_API std::optional<ClusterRole> read_tf_config(std::string_view json,
                                                        const std::string& source);

// read_tf_config on the environment variable TF_CONFIG (source "TF_CONFIG"); nullopt when it is
// unset.
TRAINYARD_API std::optional<ClusterRole> tf_config_from_environment();

// One line for the log, e.g. "TF_CONFIG worker 1: rank 2 of 3, chief host0:2222" or
// "TF_CONFIG evaluator 0: watching a training job of 3, chief host0:2222".
TRAINYARD_API std::string describe_cluster_role(const ClusterRole& role);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TF_CONFIG_H_
