// Files a user names (configs, label maps, COCO JSON, safetensors, images and their directories'
// files, checkpoints and state files): the one way the product opens them for reading. Opening
// never blocks (O_NONBLOCK, then fstat on the descriptor): a FIFO, a directory, a device or a
// socket is refused before a byte is read, so a FIFO named as a label map cannot hang a run
// that ignores SIGTERM while it waits for a writer. What is read whole is bounded. Every error
// names the path and what the file was for; no other code opens such files
// (tests/tree/check_file_opens.sh).
#ifndef TRAINYARD_USER_FILE_H_
#define TRAINYARD_USER_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "trainyard/error.h"
#include "trainyard/export.h"

namespace trainyard {

// Opens the regular file `path` for reading (blocking reads, close-on-exec): a descriptor the
// caller owns and closes. `what` says what the file is for ("label map"; empty: the path alone
// names it). Throws NotFound when
// nothing is at `path`, InvalidArgument when it is not a regular file (saying what it is), Error
// for any other failure, each naming `what` and `path`.
TRAINYARD_API int open_user_file(const std::string& path, std::string_view what);

// The whole of the regular file `path`, opened as open_user_file does. Throws InvalidArgument,
// naming the size and the limit, when the file holds more than `max_bytes`, before reading it;
// a file that grows while it is read is cut at max_bytes + 1 and refused the same way.
TRAINYARD_API std::string read_user_file(const std::string& path, std::string_view what,
                                         uint64_t max_bytes);

// Writes `bytes` to `path` (replacing a file of that name) whole or not at all: through a hidden
// temporary sibling, fsync, rename and an fsync of the directory (the core's atomic_file.h).
// Throws Error naming the file when any step fails; the temporary is removed then and `path` is
// untouched.
TRAINYARD_API void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace trainyard

#endif  // TRAINYARD_USER_FILE_H_
