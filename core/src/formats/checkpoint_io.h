// What the checkpoint writer, reader and manager (checkpoint_writer.cc, checkpoint_reader.cc,
// checkpoint_manager.cc) share: the bundle version written and accepted, the base name of
// managed checkpoints, and file descriptors whose every error names their file. The functions
// are defined in checkpoint_writer.cc. Internal to libtrainyard_core.
#ifndef TRAINYARD_CORE_SRC_CHECKPOINT_IO_H_
#define TRAINYARD_CORE_SRC_CHECKPOINT_IO_H_

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::checkpoint_internal {

// tensor_bundle.cc: kTensorBundleVersion (also the minimum consumer we accept bundles for).
inline constexpr int kTensorBundleVersion = 1;
inline constexpr const char* kCheckpointBaseName = "model.ckpt";
inline constexpr std::size_t kWriteBufferSize = 4 << 20;

inline std::string errno_text(int error) { return std::strerror(error); }

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  FileDescriptor(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
      path_ = std::move(other.path_);
    }
    return *this;
  }

  int get() const { return fd_; }
  const std::string& path() const { return path_; }

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
    if (::fsync(fd_) != 0) throw Error("cannot fsync " + path_ + ": " + errno_text(errno));
  }
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) {
      throw Error("cannot close " + path_ + ": " + errno_text(errno));
    }
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Creates (or truncates) `path` for writing. Throws Error naming it.
FileDescriptor create_file(const std::string& path);
// The directory holding `path` ("." when it names none).
std::string parent_directory(const std::string& path);
// Makes renames and unlinks in `directory` durable. Throws Error naming it.
void sync_directory(const std::string& directory);
// Throws Error naming both paths.
void rename_file(const std::string& from, const std::string& to);
// ".tempstate<16 hex digits>", as TensorFlow's BundleWriter names its temporary files.
std::string temp_suffix();

}  // namespace trainyard::checkpoint_internal

#endif  // TRAINYARD_CORE_SRC_CHECKPOINT_IO_H_
