#include "trainyard/core/train_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <ostream>
#include <string>

#include "trainyard/error.h"

namespace trainyard {
namespace {

constexpr std::size_t kMaxHolderBytes = 4096;  // what is read back of another holder's record

std::string errno_text(int error) { return std::strerror(error); }

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown host";
  return name;
}

// The holder's record, one line: "pid 123, host h, started 2026-11-26T07:00:00Z, command train".
// Bounded and stripped of control characters: the file may be anyone's.
std::string read_holder(int fd) {
  char buffer[kMaxHolderBytes];
  ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  if (n <= 0) return "";
  std::string text;
  for (ssize_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(buffer[i]);
    if (c == '\n') break;
    if (c >= 0x20 && c < 0x7f) text.push_back(static_cast<char>(c));
  }
  return text;
}

}  // namespace

TrainDirLock::TrainDirLock(const std::string& train_dir, const std::string& command,
                           std::ostream& log)
    : path_((std::filesystem::path(train_dir) / kFileName).string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0) {
    throw ConfigError("cannot create the train_dir lock " + path_ + ": " + errno_text(errno) +
                      (errno == ELOOP ? " (it is a symbolic link)" : ""));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw ConfigError("the train_dir lock " + path_ + " is not a regular file");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      std::string holder = read_holder(fd_);
      ::close(fd_);
      fd_ = -1;
      throw ConfigError("train_dir " + train_dir + " is in use by another training run (" +
                        (holder.empty() ? std::string("holder unknown") : holder) + "; lock file " +
                        path_ +
                        "): two writers would interleave their checkpoints. Wait for it to end "
                        "or stop it, or use another train_dir");
    }
    if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS) {
      log << "warning: the file system of " << train_dir << " does not support locks ("
          << errno_text(error)
          << "); nothing stops a second run from writing to it at the same time\n";
      ::close(fd_);
      fd_ = -1;
      return;
    }
    ::close(fd_);
    fd_ = -1;
    throw ConfigError("cannot lock the train_dir lock " + path_ + ": " + errno_text(error));
  }
  // Ours now: record who holds it, for the error a second writer gets.
  const std::string record = "pid " + std::to_string(::getpid()) + ", host " + host_name() +
                             ", started " + now_utc() + ", command " + command + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    log << "warning: cannot record this run in " << path_ << ": " << errno_text(errno) << "\n";
  }
}

TrainDirLock::~TrainDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace trainyard
