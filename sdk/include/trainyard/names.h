// Helpers for error messages that name what exists (implemented by the core, for plugins too):
// "Known model classes: A, B. Did you mean 'A'?"
#ifndef TRAINYARD_NAMES_H_
#define TRAINYARD_NAMES_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "trainyard/export.h"

namespace trainyard {

// Levenshtein distance, ignoring ASCII case.
TRAINYARD_API std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, or "" when none is close enough to be a likely typo.
TRAINYARD_API std::string nearest_name(std::string_view name,
                                       const std::vector<std::string>& candidates);

// "a, b, c"
TRAINYARD_API std::string join_names(const std::vector<std::string>& names,
                                     std::string_view separator = ", ");

}  // namespace trainyard

#endif  // TRAINYARD_NAMES_H_
