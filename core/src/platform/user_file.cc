#include "trainyard/user_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainyard {
namespace {

std::string named(std::string_view what, const std::string& path) {
  return what.empty() ? path : std::string(what) + " " + path;
}

const char* kind_of(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "a special file";
}

// Closes the descriptor unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

int open_user_file(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused below.
  FdGuard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) throw NotFound("cannot open " + named(what, path) + ": no such file");
    // A socket cannot be opened at all (ENXIO): say what is there instead.
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode)) {
      throw InvalidArgument(named(what, path) + " is " + kind_of(status.st_mode) +
                            ", not a regular file; it was not read");
    }
    throw Error("cannot open " + named(what, path) + ": " + std::strerror(error));
  }
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) {
    throw Error("cannot stat " + named(what, path) + ": " + std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) {
    throw InvalidArgument(named(what, path) + " is " + kind_of(status.st_mode) +
                          ", not a regular file; it was not read");
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw Error("cannot open " + named(what, path) + ": " + std::strerror(errno));
  }
  return fd.release();
}

std::string read_user_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  FdGuard fd(open_user_file(path, what));
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) {
    throw Error("cannot stat " + named(what, path) + ": " + std::strerror(errno));
  }
  auto too_large = [&](uint64_t bytes, const char* at_least) {
    return InvalidArgument(named(what, path) + " holds " + at_least + std::to_string(bytes) +
                           " bytes, more than the limit of " + std::to_string(max_bytes) +
                           "; it was not read");
  };
  const auto size = static_cast<uint64_t>(status.st_size);
  if (size > max_bytes) throw too_large(size, "");
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  std::size_t filled = 0;
  for (;;) {
    if (filled == text.size()) {
      // The size was a snapshot: look for more, bounded by the limit.
      if (text.size() > max_bytes) throw too_large(text.size(), "at least ");
      text.resize(std::min<uint64_t>(max_bytes + 1, std::max<uint64_t>(2 * text.size(), 4096)));
    }
    const ssize_t n = ::read(fd.get(), text.data() + filled, text.size() - filled);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read " + named(what, path) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  text.resize(filled);
  if (text.size() > max_bytes) throw too_large(text.size(), "at least ");
  return text;
}

}  // namespace trainyard
