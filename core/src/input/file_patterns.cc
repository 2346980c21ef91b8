// expand_file_patterns (input_pipeline.h): comma-separated glob patterns to a sorted file list.
#include <glob.h>
#include <sys/stat.h>

#include <cerrno>
#include <system_error>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/core/input_pipeline.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// What a path that is not a regular file is, for the error ("a FIFO").
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void check_regular_data_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw NotFound(path + ": cannot read data file: " +
                   std::error_code(errno, std::generic_category()).message());
  }
  if (!S_ISREG(st.st_mode)) {
    throw InvalidArgument(path + ": data files must be regular files, and this is " +
                          file_kind(st.st_mode));
  }
}

std::vector<std::string> expand_file_patterns(const std::string& patterns) {
  std::vector<std::string> files;
  bool any_pattern = false;
  std::string_view rest = patterns;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string pattern(trim(rest.substr(0, comma)));
    if (!pattern.empty()) {
      any_pattern = true;
      glob_t g{};
      int rc = glob(pattern.c_str(), GLOB_MARK, nullptr, &g);
      std::size_t matched = 0;
      std::string directory;  // a directory the pattern matched
      if (rc == 0) {
        for (std::size_t i = 0; i < g.gl_pathc; ++i) {
          std::string path = g.gl_pathv[i];
          if (!path.empty() && path.back() == '/') {  // a directory (GLOB_MARK)
            if (directory.empty()) directory = path;
            continue;
          }
          files.push_back(std::move(path));
          ++matched;
        }
      }
      globfree(&g);
      if (matched == 0 && !directory.empty()) {
        throw InvalidArgument("file pattern '" + pattern + "' matches only directories (" +
                              directory + "): data files must be regular files");
      }
      if (rc != 0 && rc != GLOB_NOMATCH) {
        throw Error("cannot expand file pattern '" + pattern +
                    "': " + (rc == GLOB_NOSPACE ? "out of memory" : "read error"));
      }
      if (matched == 0) throw NotFound("no file matches pattern '" + pattern + "'");
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!any_pattern) {
    throw InvalidArgument("empty file pattern '" + patterns +
                          "': give comma-separated glob patterns");
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  // A FIFO would block the reader, a device (/dev/zero, /dev/stdin) would feed it without end or
  // end at once and make an empty run look like a finished one.
  for (const std::string& file : files) check_regular_data_file(file);
  return files;
}

}  // namespace trainyard
