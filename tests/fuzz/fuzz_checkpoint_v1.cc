// libFuzzer target for the V1 checkpoint reader, read_v1_checkpoint (core/src/checkpoint_v1.cc):
// the table (sstable.cc), the SavedTensorSlices metadata under the empty key, and the assembly
// of every tensor from its SavedSlice entries.
//
// The input is a V1 checkpoint file, read in memory. A rejection must be DataLoss or
// Unimplemented naming the file. An accepted checkpoint's tensors must be sorted by name, and
// each supported one must hold exactly the bytes its dtype and shape need.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint_v1.h"
#include "fuzz_check.h"
#include "trainyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  const std::string path = "fuzz/model.ckpt";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<checkpoint_internal::V1Tensor> tensors;
  try {
    tensors = checkpoint_internal::read_v1_checkpoint(input, path);
  } catch (const Error& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.find(path) != std::string::npos, "error without the file's name: " + what);
    FUZZ_CHECK(dynamic_cast<const DataLoss*>(&e) != nullptr ||
                   dynamic_cast<const Unimplemented*>(&e) != nullptr,
               "neither DataLoss nor Unimplemented: " + what);
    return 0;
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const CheckpointTensorInfo& info = tensors[i].info;
    FUZZ_CHECK(i == 0 || tensors[i - 1].info.name < info.name,
               "tensors out of order at '" + info.name + "'");
    if (!info.unsupported.empty()) continue;
    const uint64_t expected =
        static_cast<uint64_t>(info.shape.num_elements()) * dtype_size(info.dtype);
    FUZZ_CHECK(tensors[i].bytes.size() == expected, "tensor '" + info.name + "' " +
                                                        info.shape.to_string() + " holds " +
                                                        std::to_string(tensors[i].bytes.size()) +
                                                        " bytes, not " + std::to_string(expected));
  }
  return 0;
}
