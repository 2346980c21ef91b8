// FUZZ_CHECK for the libFuzzer targets: a broken invariant prints what was expected and what
// was found, then aborts, which libFuzzer reports as a crash and saves the input that caused it.
#ifndef TRAINYARD_TESTS_FUZZ_FUZZ_CHECK_H_
#define TRAINYARD_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

namespace trainyard::fuzz {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition,
                                      const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", file, line, condition, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace trainyard::fuzz

// `detail` is only evaluated when `condition` is false.
#define FUZZ_CHECK(condition, detail)                                                            \
  do {                                                                                           \
    if (!(condition)) ::trainyard::fuzz::check_failed(__FILE__, __LINE__, #condition, (detail)); \
  } while (false)

#endif  // TRAINYARD_TESTS_FUZZ_FUZZ_CHECK_H_
