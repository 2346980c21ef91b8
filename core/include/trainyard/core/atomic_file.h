// Files and directories that appear under their final name whole or not at all.
//
// A writer writes under a hidden temporary sibling name, ".<name>.tmp-<16 hex digits>" (hidden
// so that no glob such as "train-*", no event-file or checkpoint listing and no TensorBoard
// picks it up), fsyncs it, renames it over the final name and fsyncs the directory. A process
// killed at any moment therefore leaves the earlier file (or none) or the whole new one under
// the final name, never a part of it; once the call has returned the new file also survives a
// power loss. A killed writer's temporary stays behind under its hidden name.
//
// The checkpoint writer (checkpoint.h) follows the same protocol with TensorFlow's own
// temporary names.
#ifndef TRAINYARD_CORE_ATOMIC_FILE_H_
#define TRAINYARD_CORE_ATOMIC_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/user_file.h"

namespace trainyard {

// ".<filename>.tmp-<16 random hex digits>" in the directory of `path`: a name no other writer
// uses at the same time.
TRAINYARD_API std::string temporary_sibling(const std::string& path);

// A staging directory for `target` whose owner can be proven dead:
// ".<filename>.staging-<pid>@<host>.<16 random hex digits>" beside `target`. Creates nothing.
TRAINYARD_API std::string staging_sibling(const std::string& target);

// Removes the staging directories (staging_sibling) of `target` that processes of this host no
// longer running left behind (a killed export): their pid is gone. A staging directory of a
// live process, or of another host, stays. Returns the paths removed; errors are ignored (a
// directory that cannot be removed stays, as before).
TRAINYARD_API std::vector<std::string> remove_dead_staging(const std::string& target);

// write_file_atomically(), for plugins too, is declared in trainyard/user_file.h.

// One output file for writers that take a path (a TFRecordWriter, an std::ofstream): they write
// temporary_path(), close it, and commit() publishes it as path(). Not thread-safe.
class TRAINYARD_API AtomicFile {
 public:
  // Chooses the temporary name; creates nothing.
  explicit AtomicFile(std::string path);
  // Removes the temporary unless commit() succeeded (errors are ignored).
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }

  // fsyncs the temporary (which the writer must have closed), renames it to path() and fsyncs
  // the directory. Throws Error naming both files; the temporary is removed then.
  void commit();

 private:
  std::string path_;
  std::string temporary_;
  bool committed_ = false;
};

// fsyncs the directory, making the creations, renames and removals in it durable. Throws
// Error naming the directory.
TRAINYARD_API void sync_directory(const std::string& directory);

// Makes the directory `staging` (a sibling of `target`, written completely) appear as `target`:
// fsyncs every file and directory under `staging`, renames it to `target` and fsyncs the parent.
// An existing `target` is first renamed to a hidden temporary sibling and removed after the
// rename, so a kill leaves `target` whole (old or new) or absent, never mixed. Throws Error
// naming the directories.
TRAINYARD_API void publish_directory(const std::string& staging, const std::string& target);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_ATOMIC_FILE_H_
