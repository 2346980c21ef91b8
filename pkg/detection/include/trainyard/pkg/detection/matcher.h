// Matchers of the Object Detection API (core/matcher.py, matchers/): which groundtruth box
// (row) each anchor (column) of a similarity matrix is assigned to.
//
// A similarity matrix is a row-major float array [num_rows, num_cols] (rows: groundtruth boxes,
// columns: anchors; higher is more similar). valid_rows, when not empty, has one entry per row;
// a row whose entry is 0 (a groundtruth box of weight 0) is never matched. Size mismatches throw
// InvalidArgument naming the sizes.
#ifndef TRAINYARD_PKG_DETECTION_MATCHER_H_
#define TRAINYARD_PKG_DETECTION_MATCHER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace trainyard::detection {

// The result of a match, per column (anchor): >= 0 the matched row, kUnmatched (-1) a negative,
// kIgnored (-2) neither (it contributes no loss), as the API's Match.match_results.
class Match {
 public:
  static constexpr int32_t kUnmatched = -1;
  static constexpr int32_t kIgnored = -2;

  Match() = default;
  explicit Match(std::vector<int32_t> match_results);

  const std::vector<int32_t>& match_results() const { return match_results_; }
  int64_t num_columns() const { return static_cast<int64_t>(match_results_.size()); }
  bool is_matched(int64_t column) const { return match_results_[column] >= 0; }
  bool is_unmatched(int64_t column) const { return match_results_[column] == kUnmatched; }
  bool is_ignored(int64_t column) const { return match_results_[column] == kIgnored; }

  std::vector<int64_t> matched_column_indices() const;
  std::vector<int64_t> unmatched_column_indices() const;
  std::vector<int64_t> ignored_column_indices() const;
  // The row of each matched column, in the order of matched_column_indices().
  std::vector<int32_t> matched_row_indices() const;
  int64_t num_matched_columns() const;
  int64_t num_unmatched_columns() const;
  int64_t num_ignored_columns() const;

 private:
  std::vector<int32_t> match_results_;
};

class Matcher {
 public:
  virtual ~Matcher() = default;
  virtual Match match(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
                      std::span<const uint8_t> valid_rows = {}) const = 0;
};

// ArgMaxMatcher: each column goes to its most similar row (first row on ties), then by its
// maximum similarity s: s >= matched_threshold matched; unmatched_threshold <= s <
// matched_threshold ignored (-2) when negatives_lower_than_unmatched, else unmatched (-1);
// s < unmatched_threshold unmatched when negatives_lower_than_unmatched, else ignored.
// force_match_for_each_row then gives every valid row the column most similar to it (first
// column on ties; the first of several rows that pick one column wins it). With no rows every
// column is unmatched. Without matched_threshold every column is matched to its argmax row.
struct ArgMaxMatcherOptions {
  // argmax_matcher.proto's defaults. The Python constructor's unmatched default (None) means
  // "equal to matched_threshold".
  std::optional<double> matched_threshold = 0.5;
  std::optional<double> unmatched_threshold = 0.5;
  bool negatives_lower_than_unmatched = true;
  bool force_match_for_each_row = false;
};

class ArgMaxMatcher final : public Matcher {
 public:
  // Throws InvalidArgument as the API's constructor: unmatched_threshold without
  // matched_threshold, unmatched_threshold > matched_threshold, or equal thresholds with
  // negatives_lower_than_unmatched false.
  explicit ArgMaxMatcher(ArgMaxMatcherOptions options = {});
  Match match(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
              std::span<const uint8_t> valid_rows = {}) const override;
  const ArgMaxMatcherOptions& options() const { return options_; }

 private:
  ArgMaxMatcherOptions options_;
};

// BipartiteMatcher: greedy bipartite matching (tf.contrib.image.bipartite_match on -similarity):
// repeatedly the most similar (valid row, column) pair of rows and columns not yet used is
// matched, once per valid row (ties: lowest row, then lowest column); other columns are
// unmatched (-1).
class BipartiteMatcher final : public Matcher {
 public:
  Match match(std::span<const float> similarity, int64_t num_rows, int64_t num_cols,
              std::span<const uint8_t> valid_rows = {}) const override;
};

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_MATCHER_H_
