// libFuzzer target for the safetensors reader, read_safetensors (core/src/formats/safetensors.cc):
// the header length, the header's JSON, dtypes, shapes and data_offsets against the body.
//
// The input is a .safetensors file (kept in memory, the same file for every input), read onto a
// host backend. A rejection must be DataLoss naming the file. Every tensor read must hold
// exactly its shape's bytes; the tensors read are written back with write_safetensors and must
// read back the same, metadata included.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_files.h"
#include "fuzz_host_backend.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

std::vector<char> bytes_of(const Tensor& t) {
  std::vector<char> out(static_cast<std::size_t>(t.shape().num_elements()) * dtype_size(t.dtype()));
  t.to_host(out.data(), out.size());
  return out;
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  static MemFile file("fuzz_safetensors");
  static ScratchDir dir("fuzz_safetensors");
  static HostBackend backend;
  file.assign(std::string_view(reinterpret_cast<const char*>(data), size));
  SafetensorsFile read;
  try {
    read = read_safetensors(file.path(), backend);
  } catch (const DataLoss& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.find(file.path()) != std::string::npos,
               "error without the file's name: " + what);
    return 0;
  }
  // write_safetensors refuses what the format cannot hold twice (a duplicate or empty name);
  // the reader keeps both, so only files without them go round.
  std::vector<std::string> names;
  for (const auto& [name, tensor] : read.tensors) names.push_back(name);
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end() ||
      (!names.empty() && names.front().empty())) {
    return 0;
  }
  const std::string path = dir.file("round_trip.safetensors");
  try {
    write_safetensors(path, read.tensors, read.metadata);
  } catch (const InvalidArgument&) {
    return 0;
  }
  const SafetensorsFile again = read_safetensors(path, backend);
  FUZZ_CHECK(again.metadata == read.metadata, "metadata changed on a round trip");
  FUZZ_CHECK(again.tensors.size() == read.tensors.size(), "tensor count changed on a round trip");
  for (std::size_t i = 0; i < read.tensors.size(); ++i) {
    const auto& [name, t] = read.tensors[i];
    const auto& [name2, t2] = again.tensors[i];
    FUZZ_CHECK(name == name2 && t.dtype() == t2.dtype() && t.shape() == t2.shape() &&
                   bytes_of(t) == bytes_of(t2),
               "tensor '" + name + "' changed on a round trip");
  }
  return 0;
}
