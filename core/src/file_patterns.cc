// expand_file_patterns (input_pipeline.h): comma-separated glob patterns to a sorted file list.
#include <glob.h>

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

}  // namespace

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
      if (rc == 0) {
        for (std::size_t i = 0; i < g.gl_pathc; ++i) {
          std::string path = g.gl_pathv[i];
          if (!path.empty() && path.back() == '/') continue;  // a directory (GLOB_MARK)
          files.push_back(std::move(path));
          ++matched;
        }
      }
      globfree(&g);
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
  return files;
}

}  // namespace trainyard
