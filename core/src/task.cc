// The tasks the core knows, in one explicit table, and those registered beside it.
#include "trainyard/core/task.h"

#include <mutex>

#include "trainyard/core/tasks/classification_task.h"
#include "trainyard/core/tasks/yt8m_task.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

struct TaskEntry {
  const char* name;
  const Task& (*get)();
};

constexpr TaskEntry kTasks[] = {
    {"yt8m", &yt8m_task},
    {"classification", &classification_task},
};

struct Registered {
  std::string name;
  const Task& (*get)();
};

std::mutex& registered_mutex() {
  static std::mutex m;
  return m;
}

std::vector<Registered>& registered() {
  static std::vector<Registered> tasks;
  return tasks;
}

std::vector<Registered> all_tasks() {
  std::vector<Registered> all;
  for (const TaskEntry& t : kTasks) all.push_back({t.name, t.get});
  std::lock_guard<std::mutex> lock(registered_mutex());
  all.insert(all.end(), registered().begin(), registered().end());
  return all;
}

}  // namespace

void register_task(const std::string& name, const Task& (*get)()) {
  for (const TaskEntry& t : kTasks) {
    if (name == t.name) return;
  }
  std::lock_guard<std::mutex> lock(registered_mutex());
  for (const Registered& r : registered()) {
    if (r.name == name) return;
  }
  registered().push_back({name, get});
}

TaskEvaluation::~TaskEvaluation() = default;
void TaskEvaluation::write_summaries(int64_t, SummaryWriter&) const {}
PredictionWriter::~PredictionWriter() = default;
Task::~Task() = default;

const Task& find_task(const std::string& name) {
  const std::vector<Registered> tasks = all_tasks();
  for (const Registered& t : tasks) {
    if (name == t.name) return t.get();
  }
  std::string known;
  for (const Registered& t : tasks) known += (known.empty() ? "" : ", ") + t.name;
  throw ConfigError("unknown task '" + name + "'. Known tasks: " + known);
}

const Task& task_of(const config::Pipeline& pipeline) { return find_task(pipeline.task()); }

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const Registered& t : all_tasks()) names.push_back(t.name);
  return names;
}

}  // namespace trainyard
