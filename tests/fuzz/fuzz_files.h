// Files for the targets whose parser takes a path: MemFile, one file kept in memory (memfd) and
// rewritten for each input, and ScratchDir, one directory per process whose files are rewritten
// for each input. Neither creates a file per input, so a target stays at thousands of inputs a
// second.
#ifndef TRAINYARD_TESTS_FUZZ_FUZZ_FILES_H_
#define TRAINYARD_TESTS_FUZZ_FUZZ_FILES_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "fuzz_check.h"

namespace trainyard::fuzz {

// A file whose path (/proc/self/fd/N) a parser opens like any other; assign() replaces its
// bytes. Falls back to a temporary file under $TMPDIR where there is no memfd or no /proc.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      const int probe = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (probe >= 0) {
        ::close(probe);
        return;
      }
      ::close(fd_);
    }
    // No memfd or no /proc: a temporary file.
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + name + "-XXXXXX";
    fd_ = ::mkstemp(templ.data());
    FUZZ_CHECK(fd_ >= 0, "cannot create a temporary file " + templ + ": " + std::strerror(errno));
    path_ = templ;
    unlink_ = true;
  }
  ~MemFile() {
    ::close(fd_);
    if (unlink_) ::unlink(path_.c_str());
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

  void assign(std::string_view bytes) {
    FUZZ_CHECK(::ftruncate(fd_, 0) == 0, "ftruncate " + path_ + ": " + std::strerror(errno));
    size_ = 0;
    append(bytes);
  }

  void append(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t put = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(size_));
      if (put < 0 && errno == EINTR) continue;
      FUZZ_CHECK(put > 0, "pwrite " + path_ + ": " + std::strerror(errno));
      bytes.remove_prefix(static_cast<std::size_t>(put));
      size_ += static_cast<uint64_t>(put);
    }
  }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
  bool unlink_ = false;
};

// A directory of its own under /dev/shm (else $TMPDIR, else /tmp), removed with everything in
// it when the process ends normally.
class ScratchDir {
 public:
  explicit ScratchDir(const char* name) {
    std::error_code error;
    std::string base = "/dev/shm";
    if (!std::filesystem::is_directory(base, error) || ::access(base.c_str(), W_OK) != 0) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string templ = base + "/" + name + "-XXXXXX";
    FUZZ_CHECK(::mkdtemp(templ.data()) != nullptr,
               "cannot create a directory " + templ + ": " + std::strerror(errno));
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

  // Replaces the file `name` in the directory with `bytes`.
  void write(std::string_view name, std::string_view bytes) const {
    const std::string path = file(name);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FUZZ_CHECK(fd >= 0, "cannot create " + path + ": " + std::strerror(errno));
    while (!bytes.empty()) {
      const ssize_t put = ::write(fd, bytes.data(), bytes.size());
      if (put < 0 && errno == EINTR) continue;
      FUZZ_CHECK(put > 0, "write " + path + ": " + std::strerror(errno));
      bytes.remove_prefix(static_cast<std::size_t>(put));
    }
    ::close(fd);
  }

  void remove(std::string_view name) const { ::unlink(file(name).c_str()); }

 private:
  std::string path_;
};

}  // namespace trainyard::fuzz

#endif  // TRAINYARD_TESTS_FUZZ_FUZZ_FILES_H_
