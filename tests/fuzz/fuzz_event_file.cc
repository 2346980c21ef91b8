// libFuzzer target for EventFileReader (core/src/formats/summary_writer.cc): TFRecord framing
// (tfrecord.cc) and each record parsed as a tf.Event, as `trainyard` reads TensorBoard logs.
//
// The input is an event file (kept in memory, the same file for every input). The harness reads
// it to the end, continuing after each DataLoss as the reader allows: a rejection must be
// DataLoss naming the file; the offset never goes back except to the start of a record the
// file ends inside (partial_record); every call returns within a bounded number of steps. Then
// it reads the file again while it grows: the first part, then the rest appended, and must see
// the same events.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_files.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/error.h"
#include "trainyard/proto/event.pb.h"

namespace trainyard::fuzz {
namespace {

// Reads events from `reader` until it reports none yet; appends each one's serialization.
void read_available(EventFileReader& reader, std::vector<std::string>* events, std::size_t size) {
  // Each call moves past at least one record of at least 16 bytes, or stops.
  for (std::size_t steps = 0;; ++steps) {
    FUZZ_CHECK(steps <= size / 16 + 2, "more than " + std::to_string(steps) + " results from " +
                                           std::to_string(size) + " bytes");
    const uint64_t before = reader.offset();
    tf::Event event;
    try {
      if (!reader.next(&event)) {
        FUZZ_CHECK(reader.offset() == before, "offset moved from " + std::to_string(before) +
                                                  " to " + std::to_string(reader.offset()) +
                                                  " without an event");
        return;
      }
      events->push_back(event.SerializeAsString());
    } catch (const DataLoss& e) {
      const std::string what = e.what();
      FUZZ_CHECK(what.find(reader.path()) != std::string::npos,
                 "error without the file's name: " + what);
      if (reader.offset() == before) return;  // it stays at a record it cannot step over
      events->push_back("<DataLoss>");
    }
    FUZZ_CHECK(reader.offset() > before, "offset went from " + std::to_string(before) + " to " +
                                             std::to_string(reader.offset()));
  }
}

}  // namespace
}  // namespace trainyard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  static MemFile file("fuzz_event_file");
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  file.assign(input);
  std::vector<std::string> whole;
  {
    EventFileReader reader(file.path());
    read_available(reader, &whole, size);
  }

  // The same file written in two parts; the split point comes from the input's length.
  const std::size_t split = size == 0 ? 0 : (size * 7 + 3) % (size + 1);
  file.assign(input.substr(0, split));
  EventFileReader reader(file.path());
  std::vector<std::string> growing;
  read_available(reader, &growing, size);
  file.append(input.substr(split));
  read_available(reader, &growing, size);
  FUZZ_CHECK(growing == whole, "read while growing: " + std::to_string(growing.size()) +
                                   " results, " + std::to_string(whole.size()) + " at once");
  return 0;
}
