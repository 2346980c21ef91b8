// Crash safety of CheckpointManager::save, with its file-system calls recorded and broken by the
// LD_PRELOAD shim tests/fixtures/fs_faults.cc (this binary re-executes itself with the shim
// preloaded; the shim stays dormant except in the forked children that save). A directory holding
// model.ckpt-1 and model.ckpt-2 (max_to_keep 2) saves model.ckpt-3: the order of that save's
// calls is checked, then the save is crashed, torn, shortened or failed at each of its calls in
// turn, and after each the directory must still name a whole checkpoint, its `checkpoint` file
// must be the old or the new one and never partial, and the next save must succeed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"

#ifndef TRAINYARD_FS_FAULTS_LIBRARY
#error "TRAINYARD_FS_FAULTS_LIBRARY must name the fs_faults shim"
#endif

namespace trainyard {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxToKeep = 2;
// Fixed timestamps make the `checkpoint` file the same bytes on every save of a step.
double fixed_clock() { return 1700000000.0; }

const std::string kData3 = "model.ckpt-3.data-00000-of-00001";
const std::string kIndex3 = "model.ckpt-3.index";
const std::string kData1 = "model.ckpt-1.data-00000-of-00001";
const std::string kIndex1 = "model.ckpt-1.index";

// One call the shim recorded: "open NAME", "write NAME BYTES", "rename FROM TO", ...
struct Call {
  std::string op;
  std::string path;
  std::string detail;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The calls of a shim log, less its "fault ..." lines.
std::vector<Call> read_calls(const fs::path& log) {
  std::vector<Call> calls;
  std::istringstream in(read_file(log));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Call c;
    fields >> c.op >> c.path >> c.detail;
    if (c.op != "fault") calls.push_back(c);
  }
  return calls;
}

std::string describe(const std::vector<Call>& calls) {
  std::string out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    out += "  " + std::to_string(i + 1) + " " + calls[i].op + " " + calls[i].path +
           (calls[i].detail.empty() ? "" : " " + calls[i].detail) + "\n";
  }
  return out;
}

bool is_temporary(const std::string& name) {
  return name.find(".tempstate") != std::string::npos || name.rfind("checkpoint.tmp", 0) == 0;
}

class CheckpointFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("trainyard_checkpoint_faults_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    PluginRegistry::Settings s;
    s.use_environment = false;
    registry_ = std::make_unique<PluginRegistry>(s);
    cpu_ = registry_->create<Backend>(ClassKind::kBackend, "cpu");
    base_ = root_ / "base";
    CheckpointManager manager(base_.string(), kMaxToKeep, 10000.0, fixed_clock);
    manager.save(1, tensors(1));
    manager.save(2, tensors(2));
    old_state_ = read_file(base_ / "checkpoint");
    ASSERT_NE(old_state_.find("model.ckpt-2"), std::string::npos) << old_state_;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  // What model.ckpt-<step> holds: values that differ from step to step.
  std::vector<std::pair<std::string, Tensor>> tensors(int64_t step) {
    std::vector<float> weights(16 * 8), biases(8);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 1000.0f * step + i;
    for (std::size_t i = 0; i < biases.size(); ++i) biases[i] = -0.5f * step - i;
    return {{"dense/weights", Tensor::from_vector(*cpu_, Shape{16, 8}, weights)},
            {"dense/biases", Tensor::from_vector(*cpu_, Shape{8}, biases)},
            {"global_step", Tensor::from_vector(*cpu_, Shape{}, std::vector<int64_t>{step})}};
  }

  // Runs CheckpointManager(dir).save(3) in a forked child under the shim, logging its calls to
  // `log`, with the fault `mode` at call `at` (none when at is 0). Returns the wait status; the
  // child exits 0 when the save returned, 3 when it threw Error.
  int save_in_child(const fs::path& dir, const fs::path& log, long at, const std::string& mode) {
    const std::vector<std::pair<std::string, Tensor>> step3 = tensors(3);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TRAINYARD_FS_FAULTS_DIR", dir.c_str(), 1);
      ::setenv("TRAINYARD_FS_FAULTS_LOG", log.c_str(), 1);
      ::setenv("TRAINYARD_FS_FAULTS_AT", std::to_string(at).c_str(), 1);
      ::setenv("TRAINYARD_FS_FAULTS_MODE", mode.c_str(), 1);
      int code = 0;
      try {
        CheckpointManager manager(dir.string(), kMaxToKeep, 10000.0, fixed_clock);
        manager.save(3, step3);
      } catch (const Error&) {
        code = 3;
      } catch (...) {
        code = 4;
      }
      ::_exit(code);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  // A fresh copy of the directory with model.ckpt-1 and -2.
  fs::path fresh(const std::string& name) {
    const fs::path dir = root_ / name;
    fs::remove_all(dir);
    fs::copy(base_, dir, fs::copy_options::recursive);
    return dir;
  }

  // Reads every tensor of `prefix` (each read checks its CRC-32C) and compares it with what
  // model.ckpt-<step> was saved with.
  void expect_whole(const std::string& prefix, int64_t step) {
    SCOPED_TRACE(prefix);
    try {
      CheckpointReader reader(prefix);
      const auto expected = tensors(step);
      ASSERT_EQ(reader.tensors().size(), expected.size());
      for (const auto& [name, tensor] : expected) {
        const Tensor got = reader.read(name, *cpu_);
        std::vector<char> a(tensor.size_bytes()), b(got.size_bytes());
        tensor.to_host(a.data(), a.size());
        got.to_host(b.data(), b.size());
        EXPECT_EQ(a, b) << name;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }

  // The invariant after any fault: `checkpoint` is the old or the new state file, byte for
  // byte; latest_checkpoint() is the checkpoint it names first (no fallback to an older one);
  // every checkpoint it lists reads back whole.
  void expect_consistent(const fs::path& dir) {
    const std::string state = read_file(dir / "checkpoint");
    ASSERT_TRUE(state == old_state_ || state == new_state_)
        << "the checkpoint file is neither the old nor the new one:\n"
        << state;
    const bool saved = state == new_state_;
    EXPECT_EQ(latest_checkpoint(dir.string()),
              (dir / (saved ? "model.ckpt-3" : "model.ckpt-2")).string());
    static const std::regex listed("all_model_checkpoint_paths: \"model\\.ckpt-([0-9]+)\"");
    for (std::sregex_iterator it(state.begin(), state.end(), listed), end; it != end; ++it) {
      const int64_t step = std::stoll((*it)[1]);
      expect_whole((dir / ("model.ckpt-" + std::to_string(step))).string(), step);
    }
  }

  fs::path root_;
  fs::path base_;
  std::string old_state_;
  std::string new_state_;
  std::unique_ptr<PluginRegistry> registry_;
  std::shared_ptr<Backend> cpu_;
};

// Index of the first call at or after `from` that `match` accepts; calls.size() when none.
template <class Match>
std::size_t find_call(const std::vector<Call>& calls, Match match, std::size_t from = 0) {
  for (std::size_t i = from; i < calls.size(); ++i) {
    if (match(calls[i])) return i;
  }
  return calls.size();
}

TEST_F(CheckpointFaultsTest, SaveWritesTemporaryFilesSyncsThemAndRenamesTheIndexLast) {
  const fs::path dir = fresh("record");
  const fs::path log = root_ / "record.log";
  const int status = save_in_child(dir, log, 0, "");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  const std::vector<Call> calls = read_calls(log);
  const std::string trace = "the save's calls:\n" + describe(calls);
  const std::size_t n = calls.size();
  auto op_on = [](const std::string& op, const std::string& path) {
    return [op, path](const Call& c) { return c.op == op && c.path == path; };
  };
  auto rename_to = [](const std::string& to) {
    return [to](const Call& c) { return c.op == "rename" && c.detail == to; };
  };

  // Data, index and state file are each written under a temporary name, synced before they are
  // renamed into place, and renamed to the name without the suffix.
  for (std::size_t i = 0; i < n; ++i) {
    const Call& c = calls[i];
    if (c.op == "open") {
      EXPECT_TRUE(is_temporary(c.path)) << c.path << " written in place\n" << trace;
    }
    if (c.op != "rename") continue;
    EXPECT_TRUE(is_temporary(c.path)) << trace;
    std::size_t last_write = n;
    for (std::size_t j = 0; j < i; ++j) {
      if (calls[j].op == "write" && calls[j].path == c.path) last_write = j;
    }
    ASSERT_LT(last_write, i) << c.path << " renamed but never written\n" << trace;
    EXPECT_LT(find_call(calls, op_on("fsync", c.path), last_write), i)
        << c.path << " renamed before it was synced\n"
        << trace;
    const std::size_t suffix = c.path.find(".tempstate");
    EXPECT_EQ(c.detail, suffix != std::string::npos ? c.path.substr(0, suffix) : "checkpoint")
        << trace;
  }

  // The data file, then the index, then the state file, each rename made durable by a sync of
  // the directory before the next step depends on it.
  const std::size_t data = find_call(calls, rename_to(kData3));
  const std::size_t index = find_call(calls, rename_to(kIndex3));
  const std::size_t state = find_call(calls, rename_to("checkpoint"));
  ASSERT_LT(data, n) << trace;
  ASSERT_LT(index, n) << trace;
  ASSERT_LT(state, n) << trace;
  EXPECT_LT(data, index) << trace;
  EXPECT_LT(index, state) << trace;
  EXPECT_LT(find_call(calls, op_on("fsync", "."), data), index) << trace;
  const std::size_t index_synced = find_call(calls, op_on("fsync", "."), index);
  EXPECT_LT(index_synced, state) << trace;
  const std::size_t state_synced = find_call(calls, op_on("fsync", "."), state);
  ASSERT_LT(state_synced, n) << "the state file's rename is never synced\n" << trace;
  // Nothing of model.ckpt-3 changes once its index is in place.
  EXPECT_EQ(
      find_call(
          calls, [](const Call& c) { return c.path.rfind("model.ckpt-3", 0) == 0; }, index + 1),
      n)
      << trace;

  // model.ckpt-1 (beyond max_to_keep) is deleted only after the new state file is durable,
  // its index first; nothing else is deleted after the save began writing.
  const std::size_t index1 = find_call(calls, op_on("unlink", kIndex1));
  const std::size_t data1 = find_call(calls, op_on("unlink", kData1));
  ASSERT_LT(index1, n) << trace;
  ASSERT_LT(data1, n) << trace;
  EXPECT_GT(index1, state_synced) << trace;
  EXPECT_LT(index1, data1) << trace;
  for (std::size_t i = 0; i < n; ++i) {
    if (calls[i].op != "unlink" || i == index1 || i == data1) continue;
    // Replacing an existing model.ckpt-3 takes its index away before the new data is renamed.
    EXPECT_TRUE(calls[i].path == kIndex3 && i < data) << calls[i].path << " deleted\n" << trace;
  }
  std::cout << trace;
}

TEST_F(CheckpointFaultsTest, SaveCrashedTornShortenedOrFailedAtAnyCallLeavesAWholeCheckpoint) {
  // The save undisturbed: its calls, and the state file it leaves.
  const fs::path clean = fresh("clean");
  const int clean_status = save_in_child(clean, root_ / "clean.log", 0, "");
  ASSERT_TRUE(WIFEXITED(clean_status) && WEXITSTATUS(clean_status) == 0);
  const std::vector<Call> calls = read_calls(root_ / "clean.log");
  new_state_ = read_file(clean / "checkpoint");
  ASSERT_NE(new_state_, old_state_);
  ASSERT_GE(calls.size(), 15u) << describe(calls);

  int crashes = 0;
  for (std::size_t at = 1; at <= calls.size(); ++at) {
    const Call& call = calls[at - 1];
    std::vector<std::string> modes = {"crash", "error"};
    if (call.op == "write") modes.insert(modes.end(), {"torn", "short"});
    for (const std::string& mode : modes) {
      SCOPED_TRACE(mode + " at call " + std::to_string(at) + " (" + call.op + " " + call.path +
                   ")");
      const fs::path dir = fresh("case");
      const fs::path log = root_ / "case.log";
      fs::remove(log);
      const int status = save_in_child(dir, log, static_cast<long>(at), mode);
      const std::string fault = read_file(log);
      ASSERT_NE(fault.find("\nfault " + (mode == "torn" ? std::string("torn") : mode)),
                std::string::npos)
          << "the fault did not fire; the calls:\n"
          << fault;
      if (mode == "crash" || mode == "torn") {
        ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
        ++crashes;
      } else if (mode == "short") {
        // A short write is legal; the save writes the rest.
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
      } else {
        // A failed call either throws Error or, in the deletion of old checkpoints, is ignored.
        ASSERT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3))
            << "status " << status;
        if (WEXITSTATUS(status) == 0) {
          EXPECT_EQ(read_file(dir / "checkpoint"), new_state_);
        }
      }
      expect_consistent(dir);
      if (mode == "short") {
        EXPECT_EQ(read_file(dir / "checkpoint"), new_state_);
      }

      // The next save removes what the interrupted one left and succeeds.
      {
        CheckpointManager manager(dir.string(), kMaxToKeep, 10000.0, fixed_clock);
        ASSERT_NO_THROW(manager.save(3, tensors(3)));
      }
      EXPECT_EQ(read_file(dir / "checkpoint"), new_state_);
      expect_consistent(dir);
      for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        EXPECT_FALSE(is_temporary(name)) << name << " left behind";
        const std::size_t data = name.find(".data-");
        if (data != std::string::npos) {
          EXPECT_TRUE(fs::exists(dir / (name.substr(0, data) + ".index"))) << name << " orphaned";
        }
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GE(crashes, static_cast<int>(calls.size()));
}

}  // namespace
}  // namespace trainyard

// The shim must be preloaded: without it, this binary runs itself again with it.
int main(int argc, char** argv) {
  if (dlsym(RTLD_DEFAULT, "trainyard_fs_faults_preloaded") == nullptr) {
    if (std::getenv("TRAINYARD_FS_FAULTS_REEXECUTED") != nullptr) {
      std::fprintf(stderr, "error: %s is preloaded but not found\n", TRAINYARD_FS_FAULTS_LIBRARY);
      return 1;
    }
    const char* preload = std::getenv("LD_PRELOAD");
    std::string value = TRAINYARD_FS_FAULTS_LIBRARY;
    if (preload != nullptr && preload[0] != '\0') value += std::string(":") + preload;
    ::setenv("LD_PRELOAD", value.c_str(), 1);
    ::setenv("TRAINYARD_FS_FAULTS_REEXECUTED", "1", 1);
    ::execv("/proc/self/exe", argv);
    std::perror("error: cannot execute /proc/self/exe");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
