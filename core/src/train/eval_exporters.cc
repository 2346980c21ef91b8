#include "train/eval_exporters.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "trainyard/core/exporter.h"
#include "trainyard/core/saved_model_export.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/task.h"
#include "trainyard/error.h"
#include "trainyard/proto/event.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

bool is_timestamp(const std::string& name) {
  return !name.empty() &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// train_dir/export/<name>/<seconds>, the next free second when that one is taken.
fs::path timestamped_dir(const fs::path& base) {
  int64_t stamp = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  while (fs::exists(base / std::to_string(stamp))) ++stamp;
  return base / std::to_string(stamp);
}

// Deletes all but the newest `keep` timestamped exports in `base` (0 keeps all).
void garbage_collect(const fs::path& base, int keep, std::ostream& log) {
  if (keep <= 0 || !fs::is_directory(base)) return;
  std::vector<int64_t> stamps;
  for (const auto& entry : fs::directory_iterator(base)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && is_timestamp(name) && name.size() < 19) {
      stamps.push_back(std::stoll(name));
    }
  }
  std::sort(stamps.begin(), stamps.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < stamps.size(); ++i) {
    const fs::path old = base / std::to_string(stamps[i]);
    fs::remove_all(old);
    log << "removed the older export " << old.string() << "\n";
  }
}

}  // namespace

std::optional<double> best_recorded_metric(const std::string& dir, const std::string& tag,
                                           bool higher_is_better) {
  std::optional<double> best;
  if (!fs::is_directory(dir)) return best;
  for (const std::string& file : EventFileReader::list_event_files(dir)) {
    try {
      EventFileReader reader(file);
      tf::Event event;
      while (reader.next(&event)) {
        for (const auto& value : event.summary().value()) {
          if (value.tag() != tag || !value.has_simple_value()) continue;
          const double v = value.simple_value();
          if (std::isnan(v)) continue;
          if (!best || (higher_is_better ? v > *best : v < *best)) best = v;
        }
      }
    } catch (const DataLoss&) {
      // A damaged event file: the evaluations it held no longer count.
    }
  }
  return best;
}

EvalExporters::EvalExporters(const config::Pipeline& pipeline, const Task& task) {
  const std::string& format = pipeline.eval_config().export_format();
  if (format != "trainyard" && format != "saved_model") {
    throw ConfigError("eval_config.export_format (--export_format) is '" + format +
                      "'; expected trainyard (Trainyard's own export) or saved_model (a "
                      "TensorFlow SavedModel beside it)");
  }
  const std::vector<Metric> metrics = task.evaluation_metrics();
  for (int i = 0; i < pipeline.eval_config().exporters_size(); ++i) {
    const config::Exporter& e = pipeline.eval_config().exporters(i);
    const std::string where = "eval_config.exporters[" + std::to_string(i) + "]";
    if (e.name().empty() || e.name().find('/') != std::string::npos || e.name() == "." ||
        e.name() == "..") {
      throw ConfigError(where + ": name '" + e.name() + "' is not a plain directory name");
    }
    for (const Entry& other : entries_) {
      if (other.config.name() == e.name()) {
        throw ConfigError(where + ": a second exporter named '" + e.name() + "'");
      }
    }
    if (e.exports_to_keep() < 0) throw ConfigError(where + ": exports_to_keep is negative");
    Entry entry{e, {}, std::nullopt};
    if (e.kind() == config::Exporter::BEST) {
      std::string known;
      for (const Metric& m : metrics) {
        if (m.name == e.metric() && !m.tag.empty()) entry.tag = m.tag;
        if (!m.tag.empty()) known += (known.empty() ? "" : ", ") + m.name;
      }
      if (entry.tag.empty()) {
        throw ConfigError(where + ": metric '" + e.metric() + "' is not one the " +
                          pipeline.task() + " task reports (" + known + ")");
      }
      entry.best = best_recorded_metric(eval_dir(pipeline), entry.tag, e.higher_is_better());
    }
    entries_.push_back(std::move(entry));
  }
}

std::optional<double> EvalExporters::best(const std::string& name) const {
  for (const Entry& e : entries_) {
    if (e.config.name() == name) return e.best;
  }
  return std::nullopt;
}

void EvalExporters::after_evaluation(const PluginRegistry& registry,
                                     const config::Pipeline& pipeline,
                                     const std::string& checkpoint, const EvalResult& result,
                                     bool final, std::ostream& log, bool final_only) {
  const fs::path root = fs::path(pipeline.train_config().train_dir()) / "export";
  for (Entry& e : entries_) {
    const config::Exporter& c = e.config;
    if (final_only && c.kind() != config::Exporter::FINAL) continue;
    bool export_now = false;
    switch (c.kind()) {
      case config::Exporter::FINAL:
        export_now = final;
        break;
      case config::Exporter::LATEST:
        export_now = true;
        break;
      case config::Exporter::BEST: {
        const double v = result.metric(c.metric());
        // The evaluation just written to the event files is not "earlier": compare with the
        // best before it, then remember it.
        export_now =
            !std::isnan(v) && (!e.best || (c.higher_is_better() ? v > *e.best : v < *e.best));
        if (export_now) e.best = v;
        break;
      }
    }
    if (!export_now) continue;
    const fs::path base = root / c.name();
    fs::create_directories(base);
    const fs::path dir = timestamped_dir(base);
    if (pipeline.eval_config().export_format() == "saved_model") {
      // The estimator's exporters write a SavedModel (export_saved_model of the serving input
      // receiver); Trainyard's files, which predict and eval read, stay beside it.
      const SavedModelContents saved =
          pipeline_saved_model_contents(registry, pipeline, checkpoint, log);
      export_model(registry, pipeline, checkpoint, dir.string(),
                   [&](const std::string& staging) { write_saved_model_files(saved, staging); });
    } else {
      export_model(registry, pipeline, checkpoint, dir.string());
    }
    log << "exporter " << c.name() << ": exported step " << result.global_step << " to "
        << dir.string() << "\n";
    if (c.kind() != config::Exporter::FINAL) garbage_collect(base, c.exports_to_keep(), log);
  }
}

}  // namespace trainyard
