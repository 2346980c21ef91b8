#include "trainyard/names.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace trainyard {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitution = previous[j - 1] + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::string best_name;
  for (const std::string& candidate : candidates) {
    std::size_t d = edit_distance(name, candidate);
    if (d < best) {
      best = d;
      best_name = candidate;
    }
  }
  // A likely typo: a few edits, relative to the length of the longer name.
  std::size_t limit = std::max<std::size_t>(2, std::max(name.size(), best_name.size()) / 3);
  return best <= limit ? best_name : std::string();
}

std::string join_names(const std::vector<std::string>& names, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += separator;
    out += names[i];
  }
  return out;
}

}  // namespace trainyard
