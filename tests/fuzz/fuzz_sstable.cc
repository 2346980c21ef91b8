// libFuzzer target for the TensorFlow table reader and the snappy decoder
// (core/src/formats/sstable.cc), which every checkpoint .index file and V1 checkpoint goes through.
//
// The input is the bytes of a table file. It is read with read_table and decoded as a raw snappy
// stream with snappy_uncompress; either may reject it only with DataLoss naming the file. A
// table that reads is rebuilt with TableBuilder from its entries (read_table guarantees strictly
// increasing keys), and the rebuilt table must read back to the same entries. Snappy output must
// be no longer than the length its preamble declares bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/sstable.h"
#include "fuzz_check.h"
#include "trainyard/error.h"

namespace trainyard::fuzz {
namespace {

const std::string kName = "fuzz.index";

void check_names_file(const DataLoss& e, const std::string& name) {
  const std::string what = e.what();
  FUZZ_CHECK(what.find(name) != std::string::npos, "error without the file's name: " + what);
}

void check_table(std::string_view input) {
  std::vector<std::pair<std::string, std::string>> entries;
  try {
    entries = sstable::read_table(input, kName);
  } catch (const DataLoss& e) {
    check_names_file(e, kName);
    return;
  }
  // Small blocks and restarts, so that the rebuilt table has several of each.
  sstable::TableBuilder builder(/*block_size=*/64, /*restart_interval=*/2);
  for (const auto& [key, value] : entries) builder.add(key, value);
  const std::string rebuilt = builder.finish();
  const auto again = sstable::read_table(rebuilt, "rebuilt");
  FUZZ_CHECK(again == entries, "the rebuilt table of " + std::to_string(entries.size()) +
                                   " entries reads back as " + std::to_string(again.size()) +
                                   " different entries");
}

void check_snappy(std::string_view input) {
  try {
    const std::string out = sstable::snappy_uncompress(input, kName);
    FUZZ_CHECK(out.size() <= 64 * input.size(), "snappy output of " + std::to_string(out.size()) +
                                                    " bytes from " + std::to_string(input.size()));
  } catch (const DataLoss& e) {
    check_names_file(e, kName);
  }
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  trainyard::fuzz::check_table(input);
  trainyard::fuzz::check_snappy(input);
  return 0;
}
