// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}} padded with spaces to a multiple of 8, then the tensors'
// row-major little-endian bytes, offsets relative to the end of the header. Trainyard exports
// weights in it for users who load them with other frameworks (safetensors.torch.load_file).
#ifndef TRAINYARD_CORE_SAFETENSORS_H_
#define TRAINYARD_CORE_SAFETENSORS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainyard/export.h"
#include "trainyard/tensor.h"

namespace trainyard {

class Backend;

// Writes `tensors` (in this order) to `path` through a temporary file, fsync and rename, so a
// crash leaves either the old file or the whole new one. Throws InvalidArgument for a duplicate
// or empty name, Error naming the file when writing fails.
TRAINYARD_API void write_safetensors(const std::string& path,
                                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                                     const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in data order
  std::map<std::string, std::string> metadata;
};

// The largest safetensors file read (it is read whole before its tensors are made).
inline constexpr uint64_t kMaxSafetensorsBytes = uint64_t{16} << 30;

// Reads a safetensors file onto `backend`. Throws DataLoss naming the file and what is wrong
// (truncated, bad header JSON, offsets out of range or overlapping, unknown dtype);
// InvalidArgument for a path that is not a regular file or holds more than kMaxSafetensorsBytes.
TRAINYARD_API SafetensorsFile read_safetensors(const std::string& path, Backend& backend);

}  // namespace trainyard

#endif  // TRAINYARD_CORE_SAFETENSORS_H_
