#include "trainyard/core/tf_config.h"

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/error.h"
#include "trainyard/json.h"

namespace trainyard {
namespace {

constexpr std::size_t kMaxValueBytes = 1 << 20;
constexpr std::size_t kMaxAddressesPerJob = 65536;
constexpr std::size_t kMaxAddressBytes = 1024;

constexpr const char* kValidTaskTypes = "chief, master, worker, evaluator, ps";

// The value as a message shows it: numbers and (shortened) strings as written, containers by
// their kind.
std::string kind_name(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return v.boolean ? "true" : "false";
    case JsonValue::Kind::kNumber:
      return v.text;
    case JsonValue::Kind::kString:
      return json_quoted(v.text.size() > 64 ? v.text.substr(0, 64) + "..." : v.text);
    case JsonValue::Kind::kArray:
      return "a list";
    case JsonValue::Kind::kObject:
      return "an object";
  }
  return "a JSON value";
}

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  }
  return true;
}

class TfConfigReader {
 public:
  TfConfigReader(std::string_view json, const std::string& source) : json_(json), source_(source) {}

  std::optional<ClusterRole> read() {
    if (json_.size() > kMaxValueBytes) {
      fail("the value is " + std::to_string(json_.size()) + " bytes, more than the 1 MiB (" +
           std::to_string(kMaxValueBytes) + " bytes) allowed");
    }
    if (is_blank(json_)) return std::nullopt;
    const JsonValue root = parse_json(json_, source_);
    if (root.kind != JsonValue::Kind::kObject) {
      fail("the value must be a JSON object with \"cluster\" and \"task\", not " + kind_name(root));
    }
    read_rpc_layer(root);
    const JsonValue* cluster = root.find("cluster");
    const JsonValue* task = root.find("task");
    if (cluster != nullptr && cluster->kind != JsonValue::Kind::kNull &&
        cluster->kind != JsonValue::Kind::kObject) {
      fail("cluster must be an object mapping each job to its \"host:port\" addresses, not " +
           kind_name(*cluster));
    }
    if (cluster != nullptr) refuse_parameter_servers(*cluster);
    if (task != nullptr && task->kind == JsonValue::Kind::kObject) {
      const JsonValue* type = task->find("type");
      if (type != nullptr && type->kind == JsonValue::Kind::kString && type->text == "ps") {
        fail("task.type \"ps\": " + ps_alternative("parameter servers are not supported"));
      }
    }
    if (cluster == nullptr || cluster->kind == JsonValue::Kind::kNull || cluster->object.empty()) {
      return without_cluster(task);
    }
    read_cluster(*cluster);
    read_task(task);
    return role();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(source_ + ": " + what);
  }

  std::string ps_alternative(const std::string& what) const {
    return what +
           ": Trainyard trains synchronously with all-reduce (every worker holds all the "
           "variables and gradients are averaged over workers each step, as "
           "MultiWorkerMirroredStrategy and Horovod do); remove the ps job and launch the "
           "workers with mpirun -np N trainyard train ..., or list them under cluster.worker";
  }

  void read_rpc_layer(const JsonValue& root) {
    const JsonValue* rpc = root.find("rpc_layer");
    if (rpc == nullptr || rpc->kind == JsonValue::Kind::kNull) return;
    if (rpc->kind != JsonValue::Kind::kString) {
      fail("rpc_layer must be a string such as \"grpc\", not " + kind_name(*rpc));
    }
    rpc_layer_ = rpc->text;
  }

  void refuse_parameter_servers(const JsonValue& cluster) const {
    const JsonValue* ps = cluster.find("ps");
    if (ps == nullptr || ps->kind == JsonValue::Kind::kNull) return;
    if (ps->kind == JsonValue::Kind::kArray && ps->array.empty()) return;
    const std::string tasks =
        ps->kind == JsonValue::Kind::kArray
            ? std::to_string(ps->array.size()) + (ps->array.size() == 1 ? " task" : " tasks")
            : kind_name(*ps);
    fail(ps_alternative("parameter servers (cluster.ps, " + tasks + ") are not supported"));
  }

  // TensorFlow without a cluster runs one local process, and RunConfig then accepts only
  // worker 0 (or no task) as the task.
  std::optional<ClusterRole> without_cluster(const JsonValue* task) const {
    if (task == nullptr || task->kind == JsonValue::Kind::kNull) return std::nullopt;
    if (task->kind != JsonValue::Kind::kObject) {
      fail("task must be an object {\"type\": ..., \"index\": ...}, not " + kind_name(*task));
    }
    const JsonValue* type = task->find("type");
    const JsonValue* index = task->find("index");
    const bool worker =
        type == nullptr || (type->kind == JsonValue::Kind::kString && type->text == "worker");
    const bool zero =
        index == nullptr || (index->kind == JsonValue::Kind::kNumber && index->text == "0");
    if (worker && zero) return std::nullopt;
    fail("task.type " + (type == nullptr ? std::string("\"worker\"") : kind_name(*type)) +
         ", task.index " + (index == nullptr ? std::string("0") : kind_name(*index)) +
         " is given without a cluster: with no cluster (or an empty one) TensorFlow runs a "
         "single process, worker 0; list the jobs' addresses under \"cluster\"");
  }

  void read_cluster(const JsonValue& cluster) {
    std::map<std::string, std::string> seen;  // address -> where it was first listed
    for (const auto& [job, addresses] : cluster.object) {
      if (job != "chief" && job != "master" && job != "worker" && job != "evaluator" &&
          job != "ps") {
        fail("cluster." + job + " is not a job TF_CONFIG defines (valid jobs: " + kValidTaskTypes +
             ")");
      }
      if (jobs_.count(job) != 0) fail("cluster." + job + " is given twice");
      if (addresses.kind != JsonValue::Kind::kArray) {
        fail("cluster." + job + " must be a list of \"host:port\" strings, not " +
             kind_name(addresses));
      }
      if (addresses.array.size() > kMaxAddressesPerJob) {
        fail("cluster." + job + " lists " + std::to_string(addresses.array.size()) +
             " addresses, more than the 65,536 allowed per job");
      }
      std::vector<std::string>& list = jobs_[job];
      for (std::size_t i = 0; i < addresses.array.size(); ++i) {
        const std::string where = "cluster." + job + "[" + std::to_string(i) + "]";
        const JsonValue& a = addresses.array[i];
        if (a.kind != JsonValue::Kind::kString) {
          fail(where + " must be a \"host:port\" string, not " + kind_name(a));
        }
        check_address(where, a.text);
        const auto [it, inserted] = seen.emplace(a.text, where);
        if (!inserted) {
          fail(where + " and " + it->second + " are both " + json_quoted(a.text) +
               ": each task needs its own address");
        }
        list.push_back(a.text);
      }
    }
    if (jobs_.count("chief") != 0 && jobs_.count("master") != 0) {
      fail("cluster has both chief and master: master is the older name of chief, give one");
    }
    for (const char* job : {"chief", "master", "evaluator"}) {
      const auto it = jobs_.find(job);
      if (it != jobs_.end() && it->second.size() > 1) {
        fail(std::string("cluster.") + job + " lists " + std::to_string(it->second.size()) +
             " addresses; there is at most one " + job);
      }
    }
  }

  void check_address(const std::string& where, const std::string& address) const {
    if (address.size() > kMaxAddressBytes) {
      fail(where + " is " + std::to_string(address.size()) +
           " bytes long, more than the 1,024 allowed for an address");
    }
    for (char c : address) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u == 0x7f) {
        fail(where + " " + json_quoted(address) +
             " contains a blank or control character; an address is \"host:port\"");
      }
    }
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      fail(where + " " + json_quoted(address) + " is not \"host:port\"" +
           (colon == 0 ? " (the host is empty)" : " (no port)"));
    }
    const std::string port = address.substr(colon + 1);
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) digits = digits && c >= '0' && c <= '9';
    const long number = digits ? std::strtol(port.c_str(), nullptr, 10) : 0;
    if (!digits || number < 1 || number > 65535) {
      fail(where + " " + json_quoted(address) + " has port " + json_quoted(port) +
           "; a port is a number from 1 to 65535");
    }
  }

  void read_task(const JsonValue* task) {
    if (task == nullptr || task->kind == JsonValue::Kind::kNull) {
      fail(
          "task is missing: with a cluster, TF_CONFIG must say which task this process is, "
          "e.g. \"task\": {\"type\": \"worker\", \"index\": 0}");
    }
    if (task->kind != JsonValue::Kind::kObject) {
      fail("task must be an object {\"type\": ..., \"index\": ...}, not " + kind_name(*task));
    }
    const JsonValue* type = task->find("type");
    if (type == nullptr) {
      fail(std::string("task.type is missing (valid types: ") + kValidTaskTypes + ")");
    }
    if (type->kind != JsonValue::Kind::kString ||
        (type->text != "chief" && type->text != "master" && type->text != "worker" &&
         type->text != "evaluator")) {
      fail("task.type " + kind_name(*type) +
           " is not a task type (valid types: " + kValidTaskTypes + ")");
    }
    type_ = type->text;
    const JsonValue* index = task->find("index");
    if (index == nullptr) {
      fail("task.index is missing: with a cluster, the task's index in cluster." + type_ +
           " must be given");
    }
    bool integer = index->kind == JsonValue::Kind::kNumber && !index->text.empty();
    for (char c : index->text) integer = integer && c >= '0' && c <= '9';
    if (!integer) {
      fail("task.index must be a non-negative integer, not " + kind_name(*index));
    }
    const auto job = jobs_.find(type_);
    if (job == jobs_.end()) {
      if (type_ != "evaluator") {
        std::string jobs;
        for (const auto& [name, addresses] : jobs_) jobs += (jobs.empty() ? "" : ", ") + name;
        fail("task.type \"" + type_ + "\" is not a job of the cluster (it has " + jobs + ")");
      }
      // TensorFlow lets the evaluator stand outside the cluster, whatever its index.
      index_ = index->text.size() > 9 ? -1 : std::atoi(index->text.c_str());
      if (index_ < 0) fail("task.index " + index->text + " is out of range (at most 999999999)");
      return;
    }
    const std::size_t size = job->second.size();
    if (index->text.size() > 9 || std::strtoul(index->text.c_str(), nullptr, 10) >= size) {
      fail("task.index " + index->text + " but cluster." + type_ + " has " + std::to_string(size) +
           (size == 1 ? " address" : " addresses"));
    }
    index_ = std::atoi(index->text.c_str());
  }

  ClusterRole role() const {
    ClusterRole r;
    r.task_type = type_;
    r.task_index = index_;
    r.rpc_layer = rpc_layer_;
    bool has_chief = false;
    for (const char* job : {"chief", "master"}) {
      const auto it = jobs_.find(job);
      if (it != jobs_.end() && !it->second.empty()) {
        r.addresses = it->second;
        has_chief = true;
      }
    }
    if (const auto it = jobs_.find("worker"); it != jobs_.end()) {
      r.addresses.insert(r.addresses.end(), it->second.begin(), it->second.end());
    }
    r.world_size = static_cast<int>(r.addresses.size());
    if (!r.addresses.empty()) r.chief_address = r.addresses.front();
    if (type_ == "evaluator") {
      r.role = ClusterRole::Role::kEvaluator;
      r.rank = -1;
      r.is_chief = false;
      if (const auto it = jobs_.find("evaluator"); it != jobs_.end() && !it->second.empty()) {
        r.task_address = it->second.front();
      }
      return r;
    }
    if (type_ == "chief" || type_ == "master") {
      r.rank = 0;
    } else {
      r.rank = has_chief ? index_ + 1 : index_;
    }
    r.is_chief = r.rank == 0;
    r.role = r.is_chief ? ClusterRole::Role::kChief : ClusterRole::Role::kWorker;
    r.task_address = r.addresses[static_cast<std::size_t>(r.rank)];
    return r;
  }

  std::string_view json_;
  const std::string& source_;
  std::map<std::string, std::vector<std::string>> jobs_;
  std::string type_;
  int index_ = 0;
  std::string rpc_layer_;
};

}  // namespace

std::optional<ClusterRole> read_tf_config(std::string_view json, const std::string& source) {
  return TfConfigReader(json, source).read();
}

std::optional<ClusterRole> tf_config_from_environment() {
  const char* value = std::getenv("TF_CONFIG");
  if (value == nullptr) return std::nullopt;
  return read_tf_config(value, "TF_CONFIG");
}

std::string describe_cluster_role(const ClusterRole& role) {
  std::string line = "TF_CONFIG " + role.task_type + " " + std::to_string(role.task_index) + ": ";
  if (role.role == ClusterRole::Role::kEvaluator) {
    line += "watching a training job of " + std::to_string(role.world_size);
  } else {
    line += "rank " + std::to_string(role.rank) + " of " + std::to_string(role.world_size);
  }
  if (!role.chief_address.empty()) line += ", chief " + role.chief_address;
  return line;
}

}  // namespace trainyard
