// CheckpointManager (checkpoint.h) and the `checkpoint` state file it writes
// (checkpoint_state.h: write_state).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "formats/checkpoint_io.h"
#include "formats/checkpoint_state.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"
#include "trainyard/names.h"
#include "trainyard/proto/checkpoint_state.pb.h"

namespace trainyard {

namespace {

using checkpoint_internal::create_file;
using checkpoint_internal::FileDescriptor;
using checkpoint_internal::is_moved_aside;
using checkpoint_internal::kCheckpointBaseName;
using checkpoint_internal::kStateFileName;
using checkpoint_internal::read_state;
using checkpoint_internal::rename_file;
using checkpoint_internal::resolve_entry;
using checkpoint_internal::sync_directory;
using checkpoint_internal::temp_suffix;

namespace fs = std::filesystem;

// Python's str(float), which TensorFlow's text_format.MessageToString uses for doubles.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const double magnitude = std::fabs(value);
  const bool fixed = magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e16);
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value,
                    fixed ? std::chars_format::fixed : std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  if (fixed && text.find('.') == std::string::npos) text += ".0";
  return text;
}

// A text-format string literal, escaped as protobuf's CEscape does.
std::string quoted(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (byte < 0x20 || byte >= 0x7f) {
          char octal[5];
          std::snprintf(octal, sizeof(octal), "\\%03o", byte);
          out += octal;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

namespace checkpoint_internal {

void write_state(const std::string& directory, const std::string& latest,
                 const std::vector<std::string>& paths, const std::vector<double>& timestamps,
                 double last_preserved_timestamp) {
  const fs::path dir(directory);
  // Paths inside the directory are written relative to it, as TF2's CheckpointManager does.
  auto relative = [&](const std::string& prefix) {
    const fs::path path(prefix);
    return path.parent_path() == dir ? path.filename().string() : prefix;
  };
  std::string text = "model_checkpoint_path: " + quoted(relative(latest)) + "\n";
  for (const std::string& prefix : paths) {
    text += "all_model_checkpoint_paths: " + quoted(relative(prefix)) + "\n";
  }
  for (const double timestamp : timestamps) {
    text += "all_model_checkpoint_timestamps: " + python_float(timestamp) + "\n";
  }
  text += "last_preserved_timestamp: " + python_float(last_preserved_timestamp) + "\n";

  const std::string path = (dir / kStateFileName).string();
  const std::string temp = path + ".tmp" + temp_suffix().substr(std::strlen(".tempstate"));
  try {
    FileDescriptor file = create_file(temp);
    file.write_all(text.data(), text.size());
    file.sync();
    file.close();
    rename_file(temp, path);
    sync_directory(directory);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
}

}  // namespace checkpoint_internal

CheckpointManager::CheckpointManager(std::string directory, int max_to_keep,
                                     double keep_checkpoint_every_n_hours, Clock clock)
    : directory_(std::move(directory)),
      max_to_keep_(max_to_keep),
      keep_checkpoint_every_n_hours_(keep_checkpoint_every_n_hours),
      clock_(std::move(clock)) {
  if (directory_.empty()) throw InvalidArgument("CheckpointManager: empty directory");
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error) throw Error("cannot create directory " + directory_ + ": " + error.message());

  // As tf.train.CheckpointManager recovers its state.
  const double now = clock_();
  const std::optional<tf::CheckpointState> state = read_state(directory_);
  if (!state) {
    last_preserved_timestamp_ = now - 1.0;
    return;
  }
  if (std::optional<std::string> latest =
          resolve_entry(directory_, state->model_checkpoint_path())) {
    latest_ = *latest;
  }
  last_preserved_timestamp_ = std::min(state->last_preserved_timestamp(), now);
  const bool have_timestamps =
      state->all_model_checkpoint_timestamps_size() == state->all_model_checkpoint_paths_size();
  for (int i = 0; i < state->all_model_checkpoint_paths_size(); ++i) {
    // Undated checkpoints count as preserved: they are never deleted.
    const double timestamp = std::min(
        have_timestamps ? state->all_model_checkpoint_timestamps(i) : last_preserved_timestamp_,
        now);
    // An entry outside the directory is never managed, so never deleted.
    const std::optional<std::string> prefix =
        resolve_entry(directory_, state->all_model_checkpoint_paths(i));
    if (prefix && timestamp > last_preserved_timestamp_) {
      checkpoints_.push_back(*prefix);
      timestamps_.push_back(timestamp);
    }
  }
}

CheckpointManager::~CheckpointManager() = default;

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  return trainyard::latest_checkpoint(directory_);
}

void CheckpointManager::remove_leftovers() const {
  const std::string base = std::string(kCheckpointBaseName) + "-";
  std::error_code error;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (starts_with(name, std::string(kStateFileName) + ".tmp")) {
      remove_quietly(it->path());
      continue;
    }
    if (!starts_with(name, base) || is_moved_aside(name)) continue;
    if (name.find(".tempstate") != std::string::npos) {
      remove_quietly(it->path());
      continue;
    }
    // A data file whose index never appeared: a save interrupted between the two renames.
    const std::size_t data = name.find(".data-");
    if (data != std::string::npos && name.find(".index") == std::string::npos) {
      const fs::path index = it->path().parent_path() / (name.substr(0, data) + ".index");
      if (!fs::exists(index, error)) remove_quietly(it->path());
      error.clear();
    }
  }
}

void CheckpointManager::write_state() const {
  checkpoint_internal::write_state(directory_, latest_, checkpoints_, timestamps_,
                                   last_preserved_timestamp_);
}

std::string CheckpointManager::save(int64_t step,
                                    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  remove_leftovers();
  const std::string prefix =
      (fs::path(directory_) / (std::string(kCheckpointBaseName) + "-" + std::to_string(step)))
          .string();
  write_checkpoint(prefix, tensors);
  const double timestamp = clock_();
  if (const std::optional<std::string> damage = checkpoint_damage(prefix)) {
    std::vector<std::string> moved;
    try {
      moved = checkpoint_internal::move_aside(prefix);
    } catch (const Error&) {
      // Reported below; the state file does not name it either way.
    }
    throw DataLoss("checkpoint " + prefix + " is damaged right after it was written (" + *damage +
                   "); moved aside to " + (moved.empty() ? "nothing" : join_names(moved)) +
                   "; the state file and every older checkpoint are left as they were");
  }

  const auto existing = std::find(checkpoints_.begin(), checkpoints_.end(), prefix);
  if (existing != checkpoints_.end()) {
    timestamps_.erase(timestamps_.begin() + (existing - checkpoints_.begin()));
    checkpoints_.erase(existing);
  }
  checkpoints_.push_back(prefix);
  timestamps_.push_back(timestamp);
  latest_ = prefix;

  std::vector<std::string> doomed;
  while (max_to_keep_ > 0 && checkpoints_.size() > static_cast<std::size_t>(max_to_keep_)) {
    const std::string oldest = checkpoints_.front();
    const double oldest_timestamp = timestamps_.front();
    checkpoints_.erase(checkpoints_.begin());
    timestamps_.erase(timestamps_.begin());
    if (keep_checkpoint_every_n_hours_ > 0 &&
        oldest_timestamp - keep_checkpoint_every_n_hours_ * 3600.0 >= last_preserved_timestamp_) {
      last_preserved_timestamp_ = oldest_timestamp;
      continue;
    }
    doomed.push_back(oldest);
  }

  write_state();

  // The index goes first, so that a checkpoint half deleted is never complete.
  for (const std::string& old : doomed) {
    remove_quietly(checkpoint_index_path(old));
    const fs::path old_path(old);
    const std::string data_prefix = old_path.filename().string() + ".data-";
    std::error_code error;
    for (fs::directory_iterator
             it(old_path.parent_path().empty() ? fs::path(".") : old_path.parent_path(), error),
         end;
         !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (starts_with(name, data_prefix) && !is_moved_aside(name)) remove_quietly(it->path());
    }
  }
  return prefix;
}

}  // namespace trainyard
