// libFuzzer target for the V1 checkpoint reader, V1Checkpoint (core/src/formats/checkpoint_v1.cc):
// the table's footer and index (sstable.cc), the SavedTensorSlices metadata under the empty key,
// the slices' keys looked up in the index, and the assembly of every tensor from the blocks holding
// its SavedSlice entries.
//
// The input is a V1 checkpoint file, read in memory. A rejection, when it is opened or when a
// tensor is read, must be DataLoss or Unimplemented naming the file. An accepted checkpoint's
// tensors must be sorted by name, and each supported one must read back as exactly the bytes its
// dtype and shape need.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "formats/checkpoint_v1.h"
#include "formats/sstable.h"
#include "fuzz_check.h"
#include "trainyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  const std::string path = "fuzz/model.ckpt";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto check_rejection = [&](const Error& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.find(path) != std::string::npos, "error without the file's name: " + what);
    FUZZ_CHECK(dynamic_cast<const DataLoss*>(&e) != nullptr ||
                   dynamic_cast<const Unimplemented*>(&e) != nullptr,
               "neither DataLoss nor Unimplemented: " + what);
  };
  std::unique_ptr<checkpoint_internal::V1Checkpoint> checkpoint;
  try {
    // Every size the file claims is checked against its own before anything is allocated, so
    // no read of an input this small comes near the limit.
    checkpoint = std::make_unique<checkpoint_internal::V1Checkpoint>(
        sstable::memory_table_file(input, path), uint64_t{1} << 30);
  } catch (const Error& e) {
    check_rejection(e);
    return 0;
  }
  const auto& tensors = checkpoint->tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const CheckpointTensorInfo& info = tensors[i];
    FUZZ_CHECK(i == 0 || tensors[i - 1].name < info.name,
               "tensors out of order at '" + info.name + "'");
    if (!info.unsupported.empty()) continue;
    std::string bytes;
    try {
      bytes = checkpoint->read(i);
    } catch (const Error& e) {
      check_rejection(e);
      continue;
    }
    const uint64_t expected =
        static_cast<uint64_t>(info.shape.num_elements()) * dtype_size(info.dtype);
    FUZZ_CHECK(bytes.size() == expected, "tensor '" + info.name + "' " + info.shape.to_string() +
                                             " holds " + std::to_string(bytes.size()) +
                                             " bytes, not " + std::to_string(expected));
  }
  return 0;
}
