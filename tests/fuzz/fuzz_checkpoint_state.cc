// libFuzzer target for the `checkpoint` state file (core/src/formats/checkpoint_state.cc):
// read_state, protobuf's text-format parser with unknown fields allowed and the nesting limit of
// 64, the 1 MiB bound, and resolve_entry of every path the file names; then latest_checkpoint over
// the directory, which opens nothing outside it.
//
// The input is the state file, written as `checkpoint` in a scratch directory that holds
// nothing else (the same file for every input). A rejection must be DataLoss naming the file.
// An entry resolve_entry keeps must lie inside the directory.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "formats/checkpoint_state.h"
#include "fuzz_check.h"
#include "fuzz_files.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

void check_entry(const std::string& directory, const std::string& entry) {
  const std::optional<std::string> resolved = checkpoint_internal::resolve_entry(directory, entry);
  if (!resolved) return;
  // The directory holds no symbolic link, so lexically inside is inside.
  const std::string normal = std::filesystem::path(*resolved).lexically_normal().string();
  FUZZ_CHECK(normal.starts_with(directory + "/"),
             "entry '" + entry + "' resolves to " + *resolved + ", outside " + directory);
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  static ScratchDir dir("fuzz_checkpoint_state");
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  dir.write(checkpoint_internal::kStateFileName, input);
  std::optional<tf::CheckpointState> state;
  try {
    state = checkpoint_internal::read_state(dir.path());
  } catch (const DataLoss& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.find(dir.file("checkpoint")) != std::string::npos,
               "error without the file's name: " + what);
    return 0;
  }
  FUZZ_CHECK(state.has_value(), "no state read from an existing file");
  check_entry(dir.path(), state->model_checkpoint_path());
  for (const std::string& entry : state->all_model_checkpoint_paths()) {
    check_entry(dir.path(), entry);
  }
  try {
    const std::optional<std::string> latest = latest_checkpoint(dir.path());
    FUZZ_CHECK(!latest.has_value(),
               "a checkpoint found in a directory that holds none: " + *latest);
  } catch (const Error&) {
  }
  return 0;
}
