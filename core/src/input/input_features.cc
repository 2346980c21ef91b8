#include "input/input_features.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "trainyard/error.h"

namespace trainyard::input_internal {
namespace {

uint16_t to_bf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (a < 0x1.0p-14f) {                                             // subnormal: multiples of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 0x1.0p24f)));
  }
  const uint32_t abits = std::bit_cast<uint32_t>(a);
  uint32_t mantissa = abits & 0x7fffffu;
  auto exponent = static_cast<uint32_t>((abits >> 23) - 127 + 15);
  const uint32_t rest = mantissa & 0x1fffu;
  mantissa >>= 13;
  if (rest > 0x1000u || (rest == 0x1000u && (mantissa & 1u))) ++mantissa;
  if (mantissa == 0x400u) {
    mantissa = 0;
    ++exponent;
  }
  return static_cast<uint16_t>(sign | (exponent << 10) | mantissa);
}

template <class T>
std::vector<std::byte> bytes_of(T value) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

std::vector<std::byte> encode(double value, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return bytes_of(static_cast<float>(value));
    case DType::kF64:
      return bytes_of(value);
    case DType::kBF16:
      return bytes_of(to_bf16(static_cast<float>(value)));
    case DType::kF16:
      return bytes_of(to_f16(static_cast<float>(value)));
    case DType::kI32:
      return bytes_of(static_cast<int32_t>(value));
    case DType::kI64:
      return bytes_of(static_cast<int64_t>(value));
    case DType::kU8:
      return bytes_of(static_cast<uint8_t>(value));
    case DType::kBool:
      return bytes_of(static_cast<uint8_t>(value != 0.0 ? 1 : 0));
  }
  return {};
}

// Whether `value` is exactly representable in an integer `dtype` (always true for floats).
bool fits(double value, DType dtype) {
  switch (dtype) {
    case DType::kI32:
      return value == std::trunc(value) && value >= -2147483648.0 && value <= 2147483647.0;
    case DType::kI64:
      return value == std::trunc(value) && std::fabs(value) <= 9007199254740992.0;
    case DType::kU8:
      return value == std::trunc(value) && value >= 0 && value <= 255;
    case DType::kBool:
      return value == 0.0 || value == 1.0;
    default:
      return true;
  }
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string location_string(const RecordLocation& where) {
  return where.file + ", record " + std::to_string(where.record_index);
}

void validate_record(const ParsedRecord& record, const RecordLocation& where,
                     const std::vector<FeatureSpec>& declared, const std::string& declarer,
                     bool leading_rows) {
  for (const FeatureSpec& spec : declared) {
    auto it = record.features.find(spec.name);
    if (it == record.features.end()) {
      throw InvalidArgument(declarer + " gave no feature '" + spec.name + "' for " +
                            location_string(where) + ", though it declares it");
    }
    const ParsedFeature& f = it->second;
    if (f.dtype != spec.dtype) {
      throw InvalidArgument("feature '" + spec.name + "' of " + location_string(where) +
                            " has dtype " + dtype_name(f.dtype) + " but " + declarer +
                            " declares " + dtype_name(spec.dtype));
    }
    bool ok = f.shape.size() == spec.shape.size();
    int64_t elements = 1;
    for (std::size_t d = 0; ok && d < f.shape.size(); ++d) {
      ok = f.shape[d] >= 0 && (spec.shape[d] == -1 || spec.shape[d] == f.shape[d] ||
                               (leading_rows && d == 0 && f.shape[d] < spec.shape[d]));
      elements *= f.shape[d];
    }
    if (!ok) {
      throw InvalidArgument("feature '" + spec.name + "' of " + location_string(where) +
                            " has shape " + shape_string(f.shape) + " but " + declarer +
                            " declares " + shape_string(spec.shape));
    }
    const auto expected = static_cast<std::size_t>(elements) * dtype_size(f.dtype);
    if (f.bytes.size() != expected) {
      throw InvalidArgument("feature '" + spec.name + "' of " + location_string(where) + " holds " +
                            std::to_string(f.bytes.size()) + " bytes but shape " +
                            shape_string(f.shape) + " of " + dtype_name(f.dtype) + " needs " +
                            std::to_string(expected));
    }
  }
  if (record.features.size() != declared.size()) {
    for (const auto& [name, feature] : record.features) {
      bool known = std::any_of(declared.begin(), declared.end(),
                               [&](const FeatureSpec& s) { return s.name == name; });
      if (!known) {
        throw InvalidArgument(declarer + " gave feature '" + name + "' for " +
                              location_string(where) + ", which it does not declare");
      }
    }
  }
}

std::size_t full_bytes(const ParsedFeature& feature, const FeatureSpec& spec) {
  if (feature.shape.empty() || spec.shape.empty() || spec.shape[0] <= feature.shape[0]) {
    return feature.bytes.size();
  }
  if (feature.shape[0] == 0) {  // no rows to measure one by: the other dimensions are fixed
    auto elements = static_cast<std::size_t>(spec.shape[0]);
    for (std::size_t d = 1; d < feature.shape.size(); ++d) {
      elements *= static_cast<std::size_t>(feature.shape[d]);
    }
    return elements * dtype_size(feature.dtype);
  }
  return feature.bytes.size() / static_cast<std::size_t>(feature.shape[0]) *
         static_cast<std::size_t>(spec.shape[0]);
}

void fill_leading_rows(ParsedRecord& record, const std::vector<FeatureSpec>& declared) {
  for (const FeatureSpec& spec : declared) {
    auto it = record.features.find(spec.name);
    if (it == record.features.end()) continue;
    ParsedFeature& f = it->second;
    if (f.shape.empty() || spec.shape.empty() || f.shape[0] >= spec.shape[0]) continue;
    f.bytes.resize(full_bytes(f, spec));
    f.shape[0] = spec.shape[0];
  }
}

namespace {

// The declaration of feature `name` among `specs`; an InvalidArgument naming the option `what`
// and listing the declared features when there is none.
std::vector<FeatureSpec>::const_iterator declared_feature(const std::vector<FeatureSpec>& specs,
                                                          const std::string& name,
                                                          const std::string& what) {
  auto it = std::find_if(specs.begin(), specs.end(),
                         [&](const FeatureSpec& s) { return s.name == name; });
  if (it == specs.end()) {
    std::string known;
    for (const FeatureSpec& s : specs) known += (known.empty() ? "" : ", ") + s.name;
    throw InvalidArgument(what + ": no feature '" + name + "' (the features are " + known + ")");
  }
  return it;
}

}  // namespace

std::vector<std::optional<ResolvedPadding>> resolve_padding(
    const std::vector<FeatureSpec>& specs, const std::map<std::string, FeaturePadding>& padding,
    const std::set<std::string>& pad_to_largest) {
  std::vector<std::optional<ResolvedPadding>> out(specs.size());
  std::set<std::string> names;
  for (const FeatureSpec& spec : specs) names.insert(spec.name);
  for (const auto& [name, options] : padding) {
    const std::string what = "InputOptions.padding['" + name + "']";
    auto it = declared_feature(specs, name, what);
    const FeatureSpec& spec = *it;
    if (spec.shape.empty() || spec.shape[0] != -1) {
      throw InvalidArgument(what + ": feature '" + name + "' is declared with shape " +
                            shape_string(spec.shape) +
                            "; only a feature whose first dimension is -1 can be padded");
    }
    const bool also_largest = pad_to_largest.count(name) != 0;
    if (!also_largest &&
        std::any_of(spec.shape.begin() + 1, spec.shape.end(), [](int64_t d) { return d < 0; })) {
      throw InvalidArgument(what + ": feature '" + name + "' is declared with shape " +
                            shape_string(spec.shape) +
                            "; a padded feature may vary only in its first dimension (or be "
                            "also in pad_to_largest, which pads the others)");
    }
    if (also_largest && options.pad_value != 0.0) {
      throw InvalidArgument(what + ".pad_value is " + std::to_string(options.pad_value) +
                            "; feature '" + name +
                            "' is also in pad_to_largest, which pads with zeros only");
    }
    if (options.pad_to < 1) {
      throw InvalidArgument(what + ".pad_to is " + std::to_string(options.pad_to) +
                            "; it must be at least 1");
    }
    if (!fits(options.pad_value, spec.dtype)) {
      throw InvalidArgument(what + ".pad_value " + std::to_string(options.pad_value) +
                            " is not a value of feature '" + name + "''s dtype " +
                            dtype_name(spec.dtype));
    }
    for (const auto& [extra, dtype, allowed, option] :
         {std::tuple{options.count_feature, options.count_dtype,
                     std::vector<DType>{DType::kI32, DType::kI64}, "count"},
          std::tuple{
              options.mask_feature, options.mask_dtype,
              std::vector<DType>{DType::kF32, DType::kU8, DType::kBool, DType::kI32, DType::kI64},
              "mask"}}) {
      if (extra.empty()) continue;
      if (!names.insert(extra).second) {
        throw InvalidArgument(what + "." + option + "_feature '" + extra +
                              "' is already the name of a feature");
      }
      if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end()) {
        std::string list;
        for (DType d : allowed) list += std::string(list.empty() ? "" : ", ") + dtype_name(d);
        throw InvalidArgument(what + "." + option + "_dtype is " + dtype_name(dtype) +
                              "; it must be one of " + list);
      }
    }
    ResolvedPadding r;
    r.options = options;
    r.row_shape.assign(spec.shape.begin() + 1, spec.shape.end());
    int64_t elements = 1;
    for (int64_t d : r.row_shape) elements *= d;
    r.row_bytes = also_largest ? 0 : static_cast<std::size_t>(elements) * dtype_size(spec.dtype);
    r.pad_element = encode(options.pad_value, spec.dtype);
    r.pad_is_zero = std::all_of(r.pad_element.begin(), r.pad_element.end(),
                                [](std::byte b) { return b == std::byte{0}; });
    out[static_cast<std::size_t>(it - specs.begin())] = std::move(r);
  }
  return out;
}

std::vector<int64_t> padded_shape(const ResolvedPadding& padding) {
  std::vector<int64_t> shape{padding.options.pad_to};
  shape.insert(shape.end(), padding.row_shape.begin(), padding.row_shape.end());
  return shape;
}

bool fit_to_padding(ParsedFeature& feature, const std::string& name, const ResolvedPadding& padding,
                    const std::string& location) {
  const int64_t rows = feature.shape[0];
  const int64_t pad_to = padding.options.pad_to;
  if (rows <= pad_to) return false;
  if (!padding.options.truncate) {
    throw InvalidArgument(
        "feature '" + name + "' of " + location + " has " + std::to_string(rows) + " rows (shape " +
        shape_string(feature.shape) + ") but padding.pad_to is " + std::to_string(pad_to) +
        "; raise pad_to, or set truncate to keep the first " + std::to_string(pad_to));
  }
  // A row's bytes from the record itself: with pad_to_largest its later dimensions vary.
  const std::size_t row_bytes = feature.bytes.size() / static_cast<std::size_t>(rows);
  feature.shape[0] = pad_to;
  feature.bytes.resize(static_cast<std::size_t>(pad_to) * row_bytes);
  return true;
}

void write_padded_row(std::byte* dst, const ParsedFeature& src, const ResolvedPadding& padding) {
  const std::size_t used = src.bytes.size();
  if (used > 0) std::memcpy(dst, src.bytes.data(), used);
  const std::size_t total = static_cast<std::size_t>(padding.options.pad_to) * padding.row_bytes;
  if (used == total) return;
  if (padding.pad_is_zero) {
    std::memset(dst + used, 0, total - used);
    return;
  }
  const std::size_t element = padding.pad_element.size();
  for (std::size_t at = used; at < total; at += element) {
    std::memcpy(dst + at, padding.pad_element.data(), element);
  }
}

void write_integer(ParsedFeature& feature, std::size_t index, int64_t value) {
  const std::size_t size = dtype_size(feature.dtype);
  std::byte* at = feature.bytes.data() + index * size;
  switch (feature.dtype) {
    case DType::kI64:
      std::memcpy(at, &value, sizeof(value));
      return;
    case DType::kI32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(at, &v, sizeof(v));
      return;
    }
    case DType::kF32: {
      const auto v = static_cast<float>(value);
      std::memcpy(at, &v, sizeof(v));
      return;
    }
    default: {  // u8, bool
      const auto v = static_cast<uint8_t>(value);
      std::memcpy(at, &v, sizeof(v));
      return;
    }
  }
}

void write_mask_row(ParsedFeature& mask, int64_t row, int64_t rows, int64_t pad_to) {
  const auto base = static_cast<std::size_t>(row * pad_to);
  for (int64_t i = 0; i < pad_to; ++i) {
    write_integer(mask, base + static_cast<std::size_t>(i), i < rows ? 1 : 0);
  }
}

std::vector<bool> resolve_pad_to_largest(const std::vector<FeatureSpec>& specs,
                                         const std::set<std::string>& pad_to_largest,
                                         const std::map<std::string, FeaturePadding>& padding) {
  std::vector<bool> out(specs.size(), false);
  for (const std::string& name : pad_to_largest) {
    const std::string what = "InputOptions.pad_to_largest '" + name + "'";
    auto it = declared_feature(specs, name, what);
    if (std::none_of(it->shape.begin(), it->shape.end(), [](int64_t d) { return d == -1; })) {
      throw InvalidArgument(what + ": feature '" + name + "' is declared with shape " +
                            shape_string(it->shape) + "; it has no dimension (-1) to pad");
    }
    if (padding.count(name) != 0 &&
        std::none_of(it->shape.begin() + 1, it->shape.end(), [](int64_t d) { return d == -1; })) {
      throw InvalidArgument(what + ": feature '" + name + "' is declared with shape " +
                            shape_string(it->shape) +
                            " and is also in InputOptions.padding, which pads its first "
                            "dimension; it has no other dimension (-1) to pad to the largest");
    }
    out[static_cast<std::size_t>(it - specs.begin())] = true;
  }
  return out;
}

void write_padded_to_largest(ParsedFeature& dst, int64_t batch_size,
                             const std::vector<ParsedFeature>& rows, const std::string& name,
                             const std::vector<std::string>& locations, int64_t first_dimension) {
  const std::size_t rank = rows.front().shape.size();
  std::vector<int64_t> largest(rank, 0);
  int64_t most = 0;  // elements of the largest record (after the first dimension when fixed)
  std::size_t most_at = 0;
  const std::size_t measured_from = first_dimension > 0 ? 1 : 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    int64_t elements = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      largest[d] = std::max(largest[d], rows[r].shape[d]);
      if (d >= measured_from) elements *= rows[r].shape[d];
    }
    if (elements > most) {
      most = elements;
      most_at = r;
    }
  }
  // Each size is bounded by the reader, so the product of the largest fits in 128 bits only;
  // compare in long double to refuse before allocating.
  if (first_dimension > 0) largest[0] = std::max(largest[0], first_dimension);
  long double padded_elements = 1.0L;
  for (std::size_t d = measured_from; d < rank; ++d) {
    padded_elements *= static_cast<long double>(largest[d]);
  }
  const auto limit =
      static_cast<long double>(InputOptions::kMaxPaddingGrowth) * static_cast<long double>(most);
  if (padded_elements >
      std::max(limit, static_cast<long double>(InputOptions::kMaxPaddingGrowth))) {
    std::string shapes;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      shapes += (r == 0 ? "" : "; ") + locations[r] + " " + shape_string(rows[r].shape);
    }
    throw InvalidArgument("feature '" + name + "': padding the records of a batch to their " +
                          "largest sizes " + shape_string(largest) + " would make each more " +
                          "than " + std::to_string(InputOptions::kMaxPaddingGrowth) +
                          " times the largest record (" + locations[most_at] + " " +
                          shape_string(rows[most_at].shape) + "); batch records of similar " +
                          "shapes or use a batch size of 1 (records: " + shapes + ")");
  }
  const std::size_t element = dtype_size(rows.front().dtype);
  if (first_dimension > 0) padded_elements *= static_cast<long double>(largest[0]);
  const auto padded = static_cast<std::size_t>(padded_elements);
  dst.dtype = rows.front().dtype;
  dst.shape.resize(rank + 1);
  dst.shape[0] = batch_size;
  std::copy(largest.begin(), largest.end(), dst.shape.begin() + 1);
  dst.bytes.assign(static_cast<std::size_t>(batch_size) * padded * element, std::byte{0});
  // Each record is copied in runs: its trailing dimensions that equal the largest, and the one
  // before them, are contiguous in both (an image [h, w, 3] in [H, W, 3] runs row by row).
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const ParsedFeature& row = rows[r];
    std::size_t split = rank - 1;
    while (split > 0 && row.shape[split] == largest[split]) --split;
    std::size_t run = element;  // bytes
    for (std::size_t d = split; d < rank; ++d) run *= static_cast<std::size_t>(row.shape[d]);
    int64_t outer = 1;
    for (std::size_t d = 0; d < split; ++d) outer *= row.shape[d];
    if (run == 0 || outer == 0) continue;
    std::byte* base = dst.bytes.data() + r * padded * element;
    for (int64_t k = 0; k < outer; ++k) {
      // k's index in the record's outer dimensions, placed by the padded strides.
      std::size_t at = 0, stride = run / static_cast<std::size_t>(row.shape[split]) *
                                   static_cast<std::size_t>(largest[split]);
      int64_t rest = k;
      for (std::size_t d = split; d-- > 0;) {
        at += static_cast<std::size_t>(rest % row.shape[d]) * stride;
        rest /= row.shape[d];
        stride *= static_cast<std::size_t>(largest[d]);
      }
      std::memcpy(base + at, row.bytes.data() + static_cast<std::size_t>(k) * run, run);
    }
  }
}

}  // namespace trainyard::input_internal
