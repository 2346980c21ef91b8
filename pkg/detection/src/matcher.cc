#include "trainyard/pkg/detection/matcher.h"

#include <limits>
#include <string>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::detection {

Match::Match(std::vector<int32_t> match_results) : match_results_(std::move(match_results)) {
  for (std::size_t i = 0; i < match_results_.size(); ++i) {
    if (match_results_[i] < kIgnored) {
      throw InvalidArgument("Match: column " + std::to_string(i) + " has match result " +
                            std::to_string(match_results_[i]) +
                            "; results are a row (>= 0), -1 (unmatched) or -2 (ignored)");
    }
  }
}

namespace {

template <class Pred>
std::vector<int64_t> columns_where(const std::vector<int32_t>& results, Pred pred) {
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (pred(results[i])) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

template <class Pred>
int64_t count_where(const std::vector<int32_t>& results, Pred pred) {
  int64_t n = 0;
  for (int32_t r : results) n += pred(r) ? 1 : 0;
  return n;
}

void check_matrix(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
                  std::span<const uint8_t> valid_rows) {
  if (num_rows < 0 || num_cols < 0 ||
      similarity.size() != static_cast<std::size_t>(num_rows * num_cols)) {
    throw InvalidArgument("Matcher: the similarity matrix holds " +
                          std::to_string(similarity.size()) + " values but is said to be [" +
                          std::to_string(num_rows) + ", " + std::to_string(num_cols) + "]");
  }
  if (!valid_rows.empty() && valid_rows.size() != static_cast<std::size_t>(num_rows)) {
    throw InvalidArgument("Matcher: valid_rows has " + std::to_string(valid_rows.size()) +
                          " entries for " + std::to_string(num_rows) + " rows");
  }
}

}  // namespace

std::vector<int64_t> Match::matched_column_indices() const {
  return columns_where(match_results_, [](int32_t r) { return r >= 0; });
}
std::vector<int64_t> Match::unmatched_column_indices() const {
  return columns_where(match_results_, [](int32_t r) { return r == kUnmatched; });
}
std::vector<int64_t> Match::ignored_column_indices() const {
  return columns_where(match_results_, [](int32_t r) { return r == kIgnored; });
}
std::vector<int32_t> Match::matched_row_indices() const {
  std::vector<int32_t> out;
  for (int32_t r : match_results_) {
    if (r >= 0) out.push_back(r);
  }
  return out;
}
int64_t Match::num_matched_columns() const {
  return count_where(match_results_, [](int32_t r) { return r >= 0; });
}
int64_t Match::num_unmatched_columns() const {
  return count_where(match_results_, [](int32_t r) { return r == kUnmatched; });
}
int64_t Match::num_ignored_columns() const {
  return count_where(match_results_, [](int32_t r) { return r == kIgnored; });
}

ArgMaxMatcher::ArgMaxMatcher(ArgMaxMatcherOptions options) : options_(std::move(options)) {
  if (!options_.matched_threshold && options_.unmatched_threshold) {
    throw InvalidArgument(
        "ArgMaxMatcher: unmatched_threshold is set but matched_threshold is not; set both or "
        "neither");
  }
  if (!options_.unmatched_threshold) options_.unmatched_threshold = options_.matched_threshold;
  if (options_.matched_threshold && *options_.unmatched_threshold > *options_.matched_threshold) {
    throw InvalidArgument(
        "ArgMaxMatcher: unmatched_threshold " + std::to_string(*options_.unmatched_threshold) +
        " is above matched_threshold " + std::to_string(*options_.matched_threshold));
  }
  if (options_.matched_threshold && !options_.negatives_lower_than_unmatched &&
      *options_.unmatched_threshold == *options_.matched_threshold) {
    throw InvalidArgument(
        "ArgMaxMatcher: with negatives_lower_than_unmatched false the negatives lie between "
        "the thresholds, so they cannot be equal (both " +
        std::to_string(*options_.matched_threshold) + ")");
  }
}

// O(num_rows * num_cols): one pass over the matrix row by row for the column maxima (and, with
// force_match_for_each_row, the row maxima).
Match ArgMaxMatcher::match(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
                           std::span<const uint8_t> valid_rows) const {
  check_matrix(similarity, num_rows, num_cols, valid_rows);
  std::vector<int32_t> results(static_cast<std::size_t>(num_cols), Match::kUnmatched);
  if (num_rows == 0) return Match(std::move(results));

  // Column argmax (first row on ties, as tf.argmax), over all rows as the API's.
  std::vector<float> best(similarity.begin(), similarity.begin() + num_cols);
  std::vector<int32_t> best_row(static_cast<std::size_t>(num_cols), 0);
  for (int64_t i = 1; i < num_rows; ++i) {
    const float* row = &similarity[static_cast<std::size_t>(i * num_cols)];
    for (int64_t j = 0; j < num_cols; ++j) {
      if (row[j] > best[j]) {
        best[j] = row[j];
        best_row[j] = static_cast<int32_t>(i);
      }
    }
  }
  const bool lower_is_negative = options_.negatives_lower_than_unmatched;
  // The thresholds compared in f32, as the API's graph compares them with f32 similarities.
  const float matched = static_cast<float>(options_.matched_threshold.value_or(0.0));
  const float unmatched = static_cast<float>(options_.unmatched_threshold.value_or(0.0));
  for (int64_t j = 0; j < num_cols; ++j) {
    int32_t r = best_row[j];
    if (options_.matched_threshold) {
      const float s = best[j];
      if (unmatched > s) {
        r = lower_is_negative ? Match::kUnmatched : Match::kIgnored;
      } else if (matched > s) {
        r = lower_is_negative ? Match::kIgnored : Match::kUnmatched;
      }
    }
    results[j] = r;
  }
  if (options_.force_match_for_each_row) {
    // Each valid row claims its most similar column (first on ties); a column claimed by several
    // rows goes to the first of them.
    std::vector<int32_t> forced(static_cast<std::size_t>(num_cols), -1);
    for (int64_t i = 0; i < num_rows; ++i) {
      if (!valid_rows.empty() && valid_rows[i] == 0) continue;
      const float* row = &similarity[static_cast<std::size_t>(i * num_cols)];
      int64_t arg = 0;
      for (int64_t j = 1; j < num_cols; ++j) {
        if (row[j] > row[arg]) arg = j;
      }
      if (num_cols > 0 && forced[arg] < 0) forced[arg] = static_cast<int32_t>(i);
    }
    for (int64_t j = 0; j < num_cols; ++j) {
      if (forced[j] >= 0) results[j] = forced[j];
    }
  }
  return Match(std::move(results));
}

// O(valid_rows * num_rows * num_cols) as the greedy kernel: each round scans the unused pairs.
Match BipartiteMatcher::match(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
                              std::span<const uint8_t> valid_rows) const {
  check_matrix(similarity, num_rows, num_cols, valid_rows);
  std::vector<int32_t> results(static_cast<std::size_t>(num_cols), Match::kUnmatched);
  std::vector<uint8_t> row_used(static_cast<std::size_t>(num_rows), 0);
  int64_t rounds = 0;
  for (int64_t i = 0; i < num_rows; ++i) {
    if (valid_rows.empty() || valid_rows[i] != 0) {
      ++rounds;
    } else {
      row_used[i] = 1;
    }
  }
  for (int64_t round = 0; round < rounds; ++round) {
    int64_t best_i = -1, best_j = -1;
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < num_rows; ++i) {
      if (row_used[i]) continue;
      const float* row = &similarity[static_cast<std::size_t>(i * num_cols)];
      for (int64_t j = 0; j < num_cols; ++j) {
        if (results[j] != Match::kUnmatched) continue;
        if (best_i < 0 || row[j] > best) {
          best = row[j];
          best_i = i;
          best_j = j;
        }
      }
    }
    if (best_i < 0) break;
    row_used[best_i] = 1;
    results[best_j] = static_cast<int32_t>(best_i);
  }
  return Match(std::move(results));
}

}  // namespace trainyard::detection
