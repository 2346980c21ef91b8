// The tasks the core knows, in one explicit table.
#include "trainyard/core/task.h"

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

}  // namespace

TaskEvaluation::~TaskEvaluation() = default;
PredictionWriter::~PredictionWriter() = default;
Task::~Task() = default;

const Task& find_task(const std::string& name) {
  for (const TaskEntry& t : kTasks) {
    if (name == t.name) return t.get();
  }
  std::string known;
  for (const TaskEntry& t : kTasks) known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw ConfigError("unknown task '" + name + "'. Known tasks: " + known);
}

const Task& task_of(const config::Pipeline& pipeline) { return find_task(pipeline.task()); }

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const TaskEntry& t : kTasks) names.emplace_back(t.name);
  return names;
}

}  // namespace trainyard
