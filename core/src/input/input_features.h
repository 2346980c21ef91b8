// A record's features in the input pipeline: checking them against their declarations, and
// padding variable-length features (FeaturePadding in input_pipeline.h): checking the options
// against the declared features, fitting one record's feature to its padded size, and writing
// padded rows, counts and masks into a batch.
#ifndef TRAINYARD_CORE_SRC_INPUT_FEATURES_H_
#define TRAINYARD_CORE_SRC_INPUT_FEATURES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainyard/core/input_pipeline.h"
#include "trainyard/reader.h"

namespace trainyard::input_internal {

// "[2, 3]".
std::string shape_string(const std::vector<int64_t>& shape);

// "train-00.tfrecord, record 17".
std::string location_string(const RecordLocation& where);

// Checks that `record` holds exactly the features `declared`, each of its declared dtype and
// shape (a -1 dimension matches any size) and byte count. With `leading_rows` a feature whose
// declared first dimension is a size may hold fewer rows (reader.h: the rest are zeros). Throws
// InvalidArgument naming `where`, the feature, what `declarer` ("the reader") declares and what
// was found.
void validate_record(const ParsedRecord& record, const RecordLocation& where,
                     const std::vector<FeatureSpec>& declared, const std::string& declarer,
                     bool leading_rows = false);

// The bytes of `feature` (validated against `spec`) with all its declared rows: its own size,
// or, when it holds fewer rows than a declared first dimension, the size with them all.
std::size_t full_bytes(const ParsedFeature& feature, const FeatureSpec& spec);

// Zero-pads each feature of `record` (validated against `declared` with leading_rows) that holds
// fewer rows than its declared first dimension to that many rows.
void fill_leading_rows(ParsedRecord& record, const std::vector<FeatureSpec>& declared);

// The padding of one declared feature, resolved once when the pipeline starts.
struct ResolvedPadding {
  FeaturePadding options;
  std::vector<int64_t> row_shape;      // the declared shape after the first dimension
  std::size_t row_bytes = 0;           // bytes of one row (0: rows vary, padded to the largest)
  std::vector<std::byte> pad_element;  // the pad value in the feature's dtype
  bool pad_is_zero = true;             // every byte of pad_element is 0
};

// Checks `padding` against `specs` (the features the transforms yield): every padded feature is
// declared, its first dimension is -1 and its others are fixed (or, for a feature also in
// `pad_to_largest`, any: those are padded to the largest of the batch, with a pad_value of 0),
// pad_to >= 1, count and mask names are new and distinct, their dtypes allowed. Returns, for each
// spec, its padding or nullopt. Throws InvalidArgument naming the feature and the option.
std::vector<std::optional<ResolvedPadding>> resolve_padding(
    const std::vector<FeatureSpec>& specs, const std::map<std::string, FeaturePadding>& padding,
    const std::set<std::string>& pad_to_largest = {});

// The batch shape of a padded feature without the batch dimension: [pad_to, row_shape...].
std::vector<int64_t> padded_shape(const ResolvedPadding& padding);

// Makes `feature` (of a record at `location`) fit `padding`: a record with more than pad_to
// rows is cut when padding.options.truncate (returns true) and an InvalidArgument naming
// `name`, `location` and both sizes otherwise.
bool fit_to_padding(ParsedFeature& feature, const std::string& name, const ResolvedPadding& padding,
                    const std::string& location);

// Writes `src` (at most pad_to rows) into `dst`, pad_to rows, padding the rest.
void write_padded_row(std::byte* dst, const ParsedFeature& src, const ResolvedPadding& padding);

// Which of `specs` are padded to the largest of their batch: checks that every name in
// `pad_to_largest` is declared with a -1 dimension, and, when it is also in `padding` (its first
// dimension padded to pad_to, as instance masks [boxes, height, width]), with a -1 dimension after
// the first. Throws InvalidArgument naming the feature.
std::vector<bool> resolve_pad_to_largest(const std::vector<FeatureSpec>& specs,
                                         const std::set<std::string>& pad_to_largest,
                                         const std::map<std::string, FeaturePadding>& padding);

// Makes `dst` the batch [batch_size, largest...] of `rows` (one record's feature each, all of
// one rank), each zero-padded at the end of every dimension to the largest size among them;
// rows past rows.size() are zeros. With `first_dimension` (> 0: the feature is also in
// InputOptions.padding) the first dimension is that size instead (no row has more) and the
// growth below is measured on the other dimensions. Throws InvalidArgument naming `name` and the
// records (`locations`, one per row) when the padded record would exceed
// InputOptions::kMaxPaddingGrowth times the elements of the largest.
void write_padded_to_largest(ParsedFeature& dst, int64_t batch_size,
                             const std::vector<ParsedFeature>& rows, const std::string& name,
                             const std::vector<std::string>& locations,
                             int64_t first_dimension = 0);

// Element `index` of a count or mask feature holding `value`, in the feature's dtype.
void write_integer(ParsedFeature& feature, std::size_t index, int64_t value);

// Row `row` of a [batch, pad_to] mask: `rows` ones then zeros.
void write_mask_row(ParsedFeature& mask, int64_t row, int64_t rows, int64_t pad_to);

}  // namespace trainyard::input_internal

#endif  // TRAINYARD_CORE_SRC_INPUT_FEATURES_H_
