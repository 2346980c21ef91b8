// The `checkpoint` state file read as untrusted input, the checkpoint it names for readers
// (latest_checkpoint) and for a training run that resumes (recover_latest_checkpoint).
#include "formats/checkpoint_state.h"

#include <fcntl.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"
#include "trainyard/names.h"
#include "trainyard/user_file.h"

namespace trainyard {
namespace checkpoint_internal {
namespace {

namespace fs = std::filesystem;

std::string state_path(const std::string& directory) {
  return (fs::path(directory) / kStateFileName).string();
}

// The first error the text parser reports, with its position.
class FirstParseError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!message_.empty()) return;
    // The parser counts from 0.
    message_ = "line " + std::to_string(line + 1) + " column " + std::to_string(column + 1) + ": " +
               message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// The whole file when it is at most `limit` bytes, nullopt when it does not exist.
std::optional<std::string> read_bounded(const std::string& path, std::size_t limit) {
  const int fd = open_regular_file(path);
  if (fd < 0) return std::nullopt;
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw Error("cannot read " + path + ": " + std::strerror(error));
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<std::size_t>(n));
    if (contents.size() > limit) {
      ::close(fd);
      throw DataLoss(path + " is more than " + std::to_string(limit) +
                     " bytes, too large for a checkpoint state file (it names a few "
                     "checkpoints); it was not parsed");
    }
  }
  ::close(fd);
  return contents;
}

void sync_directory_of(const fs::path& path) {
  const fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open directory " + parent.string() + ": " + std::strerror(errno));
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0) throw Error("cannot fsync " + parent.string() + ": " + std::strerror(error));
}

// The checkpoints a state file lists inside its directory, newest first (model_checkpoint_path,
// then all_model_checkpoint_paths from the last), each once; and the entries outside it.
struct Listed {
  std::vector<std::string> newest_first;
  std::vector<std::string> outside;
};

Listed list_entries(const std::string& directory, const tf::CheckpointState& state) {
  Listed listed;
  auto add = [&](const std::string& entry) {
    if (entry.empty()) return;
    const std::optional<std::string> prefix = resolve_entry(directory, entry);
    if (!prefix) {
      if (std::find(listed.outside.begin(), listed.outside.end(), entry) == listed.outside.end()) {
        listed.outside.push_back(entry);
      }
      return;
    }
    // A directory (the train_dir itself, say) is no checkpoint: CheckpointReader would look
    // inside it for a state file again.
    std::error_code error;
    if (fs::is_directory(*prefix, error)) return;
    if (std::find(listed.newest_first.begin(), listed.newest_first.end(), *prefix) ==
        listed.newest_first.end()) {
      listed.newest_first.push_back(*prefix);
    }
  };
  add(state.model_checkpoint_path());
  for (int i = state.all_model_checkpoint_paths_size() - 1; i >= 0; --i) {
    add(state.all_model_checkpoint_paths(i));
  }
  return listed;
}

// Whether anything of the checkpoint is there to open: its index or, for V1, the file itself.
// A save, replacement or deletion interrupted by a crash leaves the index absent.
bool has_index(const std::string& prefix) {
  std::error_code error;
  return fs::exists(checkpoint_index_path(prefix), error) || fs::is_regular_file(prefix, error);
}

std::string describe_moved(const std::vector<std::string>& moved) {
  return moved.empty() ? std::string("none of its files is left to move aside")
                       : "moved aside to " + join_names(moved);
}

}  // namespace

int open_regular_file(const std::string& path) {
  try {
    return open_user_file(path, "");
  } catch (const NotFound&) {
    return -1;
  }
}

std::optional<tf::CheckpointState> read_state(const std::string& directory) {
  const std::string path = state_path(directory);
  const std::optional<std::string> text = read_bounded(path, kMaxCheckpointStateBytes);
  if (!text) return std::nullopt;
  tf::CheckpointState state;
  google::protobuf::TextFormat::Parser parser;
  FirstParseError error;
  parser.RecordErrorsTo(&error);
  parser.AllowUnknownField(true);
  parser.SetRecursionLimit(kMaxStateNesting);
  if (!parser.ParseFromString(*text, &state)) {
    throw DataLoss(path + " is not a checkpoint state file (text-format CheckpointState): " +
                   (error.message().empty() ? std::string("it does not parse") : error.message()));
  }
  return state;
}

std::optional<std::string> resolve_entry(const std::string& directory, const std::string& entry) {
  if (entry.empty()) return std::nullopt;
  const fs::path path(entry);
  for (const fs::path& part : path) {
    if (part == "..") return std::nullopt;
  }
  if (path.is_relative()) return (fs::path(directory) / path).string();
  std::error_code error;
  const fs::path base = fs::weakly_canonical(fs::absolute(directory, error), error);
  if (error) return std::nullopt;
  const fs::path target = fs::weakly_canonical(path, error);
  if (error) return std::nullopt;
  const fs::path relative = target.lexically_relative(base);
  if (relative.empty() || relative == "." || *relative.begin() == "..") return std::nullopt;
  return entry;
}

bool is_moved_aside(std::string_view file_name) {
  constexpr std::string_view kSuffix = ".damaged";
  if (file_name.ends_with(kSuffix)) return true;
  const std::size_t dot = file_name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == file_name.size()) return false;
  const std::string_view number = file_name.substr(dot + 1);
  if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return file_name.substr(0, dot).ends_with(kSuffix);
}

std::vector<std::string> move_aside(const std::string& prefix) {
  const fs::path prefix_path(prefix);
  const fs::path directory =
      prefix_path.parent_path().empty() ? fs::path(".") : prefix_path.parent_path();
  const std::string base = prefix_path.filename().string();
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const bool data = name.starts_with(base + ".data-") && !is_moved_aside(name) &&
                      name.find(".tempstate") == std::string::npos;
    if (name == base || name == base + ".index" || data) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> moved;
  for (const fs::path& file : files) {
    fs::path target = file.string() + ".damaged";
    for (int n = 2; fs::exists(target, error); ++n) {
      target = file.string() + ".damaged." + std::to_string(n);
    }
    if (::rename(file.c_str(), target.c_str()) != 0) {
      throw Error("cannot move the damaged " + file.string() + " aside to " + target.string() +
                  ": " + std::strerror(errno));
    }
    moved.push_back(target.string());
  }
  if (!moved.empty()) sync_directory_of(prefix_path);
  return moved;
}

}  // namespace checkpoint_internal

using checkpoint_internal::describe_moved;
using checkpoint_internal::list_entries;
using checkpoint_internal::Listed;

std::optional<std::string> latest_checkpoint(const std::string& directory) {
  const std::optional<tf::CheckpointState> state = checkpoint_internal::read_state(directory);
  if (!state) return std::nullopt;
  for (const std::string& prefix : list_entries(directory, *state).newest_first) {
    if (!checkpoint_internal::has_index(prefix)) continue;
    try {
      CheckpointReader reader(prefix);
      return prefix;
    } catch (const DataLoss& e) {
      throw DataLoss("checkpoint " + prefix + ", the newest that " +
                     checkpoint_internal::state_path(directory) + " lists, is damaged (" +
                     e.what() +
                     "); `trainyard train` on this train_dir moves it aside and resumes from the "
                     "newest intact one; or name an older checkpoint explicitly");
    }
  }
  return std::nullopt;
}

std::optional<std::string> checkpoint_damage(const std::string& prefix) {
  std::error_code error;
  if (std::filesystem::is_directory(prefix, error)) {
    return prefix + " is a directory, not a checkpoint";
  }
  try {
    CheckpointReader reader(prefix);
    reader.verify();
    return std::nullopt;
  } catch (const DataLoss& e) {
    return std::string(e.what());
  } catch (const NotFound& e) {
    return std::string(e.what());
  }
}

std::optional<std::string> recover_latest_checkpoint(const std::string& directory,
                                                     std::ostream& log) {
  const std::string state_file = checkpoint_internal::state_path(directory);
  const std::string start_over =
      "pass --start_new_model to start over (it deletes what " + directory + " holds)";
  std::optional<tf::CheckpointState> state;
  try {
    state = checkpoint_internal::read_state(directory);
  } catch (const DataLoss& e) {
    throw DataLoss(std::string(e.what()) +
                   "; cannot tell which checkpoint to resume from: " + start_over);
  }
  if (!state) return std::nullopt;
  const Listed listed = list_entries(directory, *state);
  for (const std::string& entry : listed.outside) {
    log << "warning: " << state_file << " lists \"" << entry << "\", which is outside " << directory
        << "; ignored (never restored, renamed or deleted)\n";
  }

  std::vector<std::pair<std::string, std::string>> damaged;  // prefix, why
  std::optional<std::string> intact;
  for (const std::string& prefix : listed.newest_first) {
    if (std::optional<std::string> why = checkpoint_damage(prefix)) {
      damaged.emplace_back(prefix, *why);
    } else {
      intact = prefix;
      break;
    }
  }
  if (!intact) {
    if (damaged.empty()) return std::nullopt;
    std::string each;
    for (const auto& [prefix, why] : damaged) {
      each += (each.empty() ? "" : "; ") + prefix + " (" + why + ")";
    }
    throw DataLoss("cannot resume the run in " + directory + ": no checkpoint that " + state_file +
                   " lists is intact: " + each + ". Nothing was changed; " + start_over +
                   ", or put intact copies of the checkpoint files back");
  }
  if (damaged.empty()) return intact;

  // A recovery: the older checkpoints are verified too, so that the state file lists only
  // intact ones.
  const auto newer = std::find(listed.newest_first.begin(), listed.newest_first.end(), *intact);
  for (auto it = newer + 1; it != listed.newest_first.end(); ++it) {
    if (std::optional<std::string> why = checkpoint_damage(*it)) damaged.emplace_back(*it, *why);
  }
  for (const auto& [prefix, why] : damaged) {
    const std::vector<std::string> moved = checkpoint_internal::move_aside(prefix);
    log << "warning: checkpoint " << prefix << " is damaged (" << why << "); "
        << describe_moved(moved) << "; restoring " << *intact << "\n";
  }
  auto is_damaged = [&](const std::string& prefix) {
    return std::any_of(damaged.begin(), damaged.end(),
                       [&](const auto& d) { return d.first == prefix; });
  };
  const bool dated =
      state->all_model_checkpoint_timestamps_size() == state->all_model_checkpoint_paths_size();
  std::vector<std::string> paths;
  std::vector<double> timestamps;
  for (int i = 0; i < state->all_model_checkpoint_paths_size(); ++i) {
    const std::optional<std::string> prefix =
        checkpoint_internal::resolve_entry(directory, state->all_model_checkpoint_paths(i));
    if (!prefix || is_damaged(*prefix) ||
        std::find(paths.begin(), paths.end(), *prefix) != paths.end()) {
      continue;
    }
    paths.push_back(*prefix);
    if (dated) timestamps.push_back(state->all_model_checkpoint_timestamps(i));
  }
  if (std::find(paths.begin(), paths.end(), *intact) == paths.end()) {
    // Listed only as model_checkpoint_path: kept, undated (so never deleted).
    paths.push_back(*intact);
    timestamps.clear();
  }
  checkpoint_internal::write_state(directory, *intact, paths, timestamps,
                                   state->last_preserved_timestamp());
  return intact;
}

}  // namespace trainyard
