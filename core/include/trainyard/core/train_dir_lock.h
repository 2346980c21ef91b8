// One writer per train_dir. `train` and `train_and_evaluate` hold an exclusive lock on
// train_dir/.trainyard.lock (flock(2)) for their whole run: a second writer started on the same
// train_dir gets an error naming the holder (its pid, host, start time and command) instead of
// interleaving checkpoints and state-file entries with it. The kernel releases the lock when
// the holder's process ends, however it ends, so a run killed with SIGKILL never leaves a stale
// lock; the file itself stays (removing it would race with the next writer) and only records
// who held the lock last. Readers (eval, predict, export) take no lock: every file a writer
// replaces is renamed into place whole.
#ifndef TRAINYARD_CORE_TRAIN_DIR_LOCK_H_
#define TRAINYARD_CORE_TRAIN_DIR_LOCK_H_

#include <iosfwd>
#include <string>

#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API TrainDirLock {
 public:
  static constexpr const char* kFileName = ".trainyard.lock";

  // Locks `train_dir` (which must exist) for `command` ("train", "train_and_evaluate"). Throws
  // ConfigError naming the train_dir and the holder when another process (or another lock in
  // this one) holds it, and naming the lock file when it cannot be created or is not a regular
  // file. On a file system without flock support, warns on `log` and goes on unlocked.
  TrainDirLock(const std::string& train_dir, const std::string& command, std::ostream& log);
  ~TrainDirLock();  // releases the lock
  TrainDirLock(const TrainDirLock&) = delete;
  TrainDirLock& operator=(const TrainDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace trainyard

#endif  // TRAINYARD_CORE_TRAIN_DIR_LOCK_H_
