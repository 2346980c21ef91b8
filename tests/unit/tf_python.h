// The Python with TensorFlow and TensorBoard that the interoperability tests run, as
// tests/interop/tf_env.sh resolves it for every such test ($TRAINYARD_TF_PYTHON, else the
// environment `tests/interop/tf_env.sh create` makes outside the checkout, else python3). A
// test skips when the status is kSkip and fails on any other status but 0 (CI=true, where the
// environment must exist), with the reason either way:
//
//   const test::TensorFlowPython python = test::tensorflow_python();
//   if (python.status == test::TensorFlowPython::kSkip) GTEST_SKIP() << python.reason;
//   ASSERT_EQ(python.status, 0) << python.reason;
//
// Needs TRAINYARD_SOURCE_DIR (trainyard_unit_test defines it) and bash.
#ifndef TRAINYARD_TESTS_UNIT_TF_PYTHON_H_
#define TRAINYARD_TESTS_UNIT_TF_PYTHON_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace trainyard::test {

struct TensorFlowPython {
  static constexpr int kSkip = 77;
  int status = -1;          // 0: found; kSkip: none here; otherwise none where CI requires one
  std::string interpreter;  // when status is 0
  std::string reason;       // what is missing and how to create it, otherwise
};

inline TensorFlowPython tensorflow_python() {
  const std::string command = "bash '" TRAINYARD_SOURCE_DIR "/tests/interop/tf_env.sh' python 2>&1";
  TensorFlowPython result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    result.reason = "could not run " + command;
    return result;
  }
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  (result.status == 0 ? result.interpreter : result.reason) = output;
  if (result.status != 0 && output.empty()) result.reason = command + " failed";
  return result;
}

}  // namespace trainyard::test

#endif  // TRAINYARD_TESTS_UNIT_TF_PYTHON_H_
