#include "trainyard/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>

#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int error) { return std::strerror(error); }

// A descriptor closed on destruction.
class Descriptor {
 public:
  Descriptor(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  void write_all(const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot write " + path_ + ": " + errno_text(errno));
      }
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  void sync() {
    // fsync is meaningless for pipes and character devices, which report EINVAL.
    if (::fsync(fd_) != 0 && errno != EINVAL) {
      throw Error("cannot fsync " + path_ + ": " + errno_text(errno));
    }
  }
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) {
      throw Error("cannot close " + path_ + ": " + errno_text(errno));
    }
  }

 private:
  int fd_;
  std::string path_;
};

Descriptor open_or_throw(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(std::string("cannot ") + what + " " + path + ": " + errno_text(errno));
  return Descriptor(fd, path);
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

void sync_file(const std::string& path) {
  Descriptor file = open_or_throw(path, O_RDONLY, "open");
  file.sync();
  file.close();
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw Error("cannot rename " + from + " to " + to + ": " + errno_text(errno));
  }
}

}  // namespace

std::string temporary_sibling(const std::string& path) {
  thread_local std::mt19937_64 generator([] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device() ^ static_cast<uint64_t>(::getpid()) ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }());
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(generator()));
  const fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp-" + hex)).string();
}

namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string staging_prefix(const fs::path& target) {
  return "." + target.filename().string() + ".staging-";
}

}  // namespace

std::string staging_sibling(const std::string& target) {
  const fs::path t(target);
  const std::string random = fs::path(temporary_sibling(target)).filename().string();
  const std::string hex = random.substr(random.size() - 16);
  return (t.parent_path() /
          (staging_prefix(t) + std::to_string(::getpid()) + "@" + this_host() + "." + hex))
      .string();
}

std::vector<std::string> remove_dead_staging(const std::string& target) {
  const fs::path t(target);
  const std::string prefix = staging_prefix(t);
  const std::string host = "@" + this_host() + ".";
  std::vector<std::string> removed;
  std::error_code error;
  const fs::path parent = t.parent_path().empty() ? fs::path(".") : t.parent_path();
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    // <pid>@<host>.<hex>: this host's only, the pid all digits.
    const std::size_t at = name.find('@', prefix.size());
    if (at == std::string::npos || at == prefix.size() ||
        name.compare(at, host.size(), host) != 0 || name.size() != at + host.size() + 16) {
      continue;
    }
    const std::string digits = name.substr(prefix.size(), at - prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    if (fs::remove_all(entry.path(), ignored) != static_cast<std::uintmax_t>(-1) && !ignored) {
      removed.push_back(entry.path().string());
    }
  }
  return removed;
}

void sync_directory(const std::string& directory) {
  Descriptor dir = open_or_throw(directory, O_RDONLY | O_DIRECTORY, "open directory");
  dir.sync();
  dir.close();
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  {
    Descriptor out = open_or_throw(file.temporary_path(), O_WRONLY | O_CREAT | O_TRUNC, "create");
    out.write_all(bytes.data(), bytes.size());
    out.close();
  }
  file.commit();
}

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temporary_(temporary_sibling(path_)) {}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove(temporary_, ignored);
}

void AtomicFile::commit() {
  sync_file(temporary_);
  rename_or_throw(temporary_, path_);
  committed_ = true;
  sync_directory(parent_of(path_));
}

void publish_directory(const std::string& staging, const std::string& target) {
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(staging, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_directory()) {
      sync_directory(it->path().string());
    } else if (it->is_regular_file()) {
      sync_file(it->path().string());
    }
  }
  if (error) throw Error("cannot list " + staging + ": " + error.message());
  sync_directory(staging);

  std::string old;
  if (fs::exists(fs::symlink_status(target))) {
    old = temporary_sibling(target);
    rename_or_throw(target, old);
  }
  rename_or_throw(staging, target);
  sync_directory(parent_of(target));
  if (!old.empty()) {
    fs::remove_all(old, error);
    if (error) throw Error("cannot remove the replaced " + old + ": " + error.message());
  }
}

}  // namespace trainyard
