// libFuzzer target for CheckpointReader on a V2 checkpoint (core/src/formats/checkpoint_reader.cc):
// the .index table (sstable.cc), the BundleHeaderProto and BundleEntryProtos in it, the data file's
// extents, read() of every tensor through its CRC-32C, and verify().
//
// The input is the .index file followed by the data file: it is split after the last table
// magic number (the end of a table's footer); without one, all of it is the index and the data
// file is empty. Both are written under a scratch directory (the same two files for every
// input) as P.index and P.data-00000-of-00001. Every rejection must be a trainyard::Error naming
// the checkpoint; a tensor read() returns must have the dtype and shape its info states.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "fuzz_files.h"
#include "fuzz_host_backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

// The table magic number's little-endian bytes (sstable.h's kTableMagicNumber).
constexpr char kMagic[] = "\x57\xfb\x80\x8b\x24\x75\x47\xdb";

// Every error names the checkpoint: its prefix, or one of its files (which begin with it).
void check_names_checkpoint(const Error& e, const std::string& prefix) {
  const std::string what = e.what();
  FUZZ_CHECK(what.find(prefix) != std::string::npos, "error without the checkpoint: " + what);
}

void check_reader(const std::string& prefix, HostBackend& backend) {
  std::unique_ptr<CheckpointReader> reader;
  try {
    reader = std::make_unique<CheckpointReader>(prefix);
  } catch (const Error& e) {
    check_names_checkpoint(e, prefix);
    return;
  }
  for (const CheckpointTensorInfo& info : reader->tensors()) {
    FUZZ_CHECK(reader->contains(info.name), "tensors() lists '" + info.name + "'");
    try {
      const Tensor t = reader->read(info.name, backend);
      FUZZ_CHECK(info.unsupported.empty(), "read an unsupported tensor '" + info.name + "'");
      FUZZ_CHECK(t.dtype() == info.dtype && t.shape() == info.shape,
                 "tensor '" + info.name + "' read as " + t.shape().to_string() +
                     ", its info says " + info.shape.to_string());
    } catch (const Error& e) {
      check_names_checkpoint(e, prefix);
    }
  }
  try {
    reader->verify();
  } catch (const Error& e) {
    check_names_checkpoint(e, prefix);
  }
  try {
    reader->read("\x01not a tensor", backend);
    FUZZ_CHECK(false, "read() of an absent name returned");
  } catch (const NotFound&) {
  }
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard::fuzz;
  static ScratchDir dir("fuzz_checkpoint_v2");
  static HostBackend backend;
  static const std::string prefix = dir.file("model.ckpt");
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t magic = input.rfind(std::string_view(kMagic, 8));
  const std::size_t split = magic == std::string_view::npos ? input.size() : magic + 8;
  dir.write("model.ckpt.index", input.substr(0, split));
  dir.write("model.ckpt.data-00000-of-00001", input.substr(split));
  check_reader(prefix, backend);
  return 0;
}
