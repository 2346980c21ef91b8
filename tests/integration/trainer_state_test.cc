// What a training run keeps and restores: bitwise resume in deterministic mode, a trainer
// killed with SIGKILL at random moments, fine-tuning from another checkpoint, moving averages,
// the export's safetensors, TF1's Adam powers, gradient summaries, step traces, and eval
// waiting for new checkpoints.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "trainer_fixture.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/safetensors.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/error.h"
#include "trainyard/ops.h"
#include "trainyard/wire/event.pb.h"

namespace trainyard {
namespace {

class TrainerStateTest : public TrainerTest {
 protected:
  std::shared_ptr<Backend> cpu() { return registry_->create<Backend>(ClassKind::kBackend, "cpu"); }

  // Every tensor of a checkpoint as raw bytes, by name.
  std::map<std::string, std::vector<char>> contents(const std::string& prefix) {
    NoGradScope no_grad;
    auto backend = cpu();
    CheckpointReader reader(prefix);
    std::map<std::string, std::vector<char>> out;
    for (const CheckpointTensorInfo& info : reader.tensors()) {
      Tensor t = reader.read(info.name, *backend);
      std::vector<char> bytes(static_cast<std::size_t>(t.num_elements()) * dtype_size(t.dtype()));
      t.to_host(bytes.data(), bytes.size());
      out[info.name] = std::move(bytes);
    }
    return out;
  }
  std::vector<float> floats(const std::string& prefix, const std::string& name) {
    NoGradScope no_grad;
    auto backend = cpu();
    return CheckpointReader(prefix).read(name, *backend).to_vector<float>();
  }
  int64_t integer(const std::string& prefix, const std::string& name) {
    auto backend = cpu();
    return CheckpointReader(prefix).read(name, *backend).to_vector<int64_t>().at(0);
  }
  config::Pipeline deterministic(const std::string& dir, const std::string& model) {
    config::Pipeline p = pipeline(model);
    p.mutable_train_config()->set_train_dir((root_ / dir).string());
    p.mutable_train_input_reader()->set_deterministic(true);
    return p;
  }
  std::set<std::string> event_tags(const fs::path& dir) {
    std::set<std::string> tags;
    for (const std::string& file : EventFileReader::list_event_files(dir.string())) {
      EventFileReader reader(file);
      wire::tf::Event event;
      while (reader.next(&event)) {
        for (const auto& value : event.summary().value()) {
          tags.insert(value.tag() + (value.has_histo() ? " (histogram)" : ""));
        }
      }
    }
    return tags;
  }
};

// N steps straight equal N/2 steps, a stop, and N/2 more, bit for bit: weights, Adam's slots,
// the step and the input position (the resumed run skips the batches already read, across
// the epoch boundary at step 12).
TEST_F(TrainerStateTest, ResumedRunIsBitwiseTheUninterruptedOne) {
  for (const char* model : {"LogisticModel", "MoeModel"}) {
    SCOPED_TRACE(model);
    std::ostringstream log;
    config::Pipeline straight = deterministic(std::string("straight_") + model, model);
    straight.mutable_train_config()->set_max_steps(16);
    std::string a = train(*registry_, straight, log).last_checkpoint;

    config::Pipeline halves = deterministic(std::string("halves_") + model, model);
    halves.mutable_train_config()->set_max_steps(8);
    train(*registry_, halves, log);
    halves.mutable_train_config()->set_max_steps(16);
    std::ostringstream resumed;
    std::string b = train(*registry_, halves, resumed).last_checkpoint;
    EXPECT_NE(resumed.str().find("skipping the 8 batches"), std::string::npos) << resumed.str();

    auto x = contents(a), y = contents(b);
    ASSERT_EQ(x.size(), y.size());
    for (const auto& [name, bytes] : x) {
      ASSERT_TRUE(y.count(name)) << name;
      EXPECT_TRUE(bytes == y[name]) << name << " differs after the resume";
    }
    EXPECT_EQ(integer(b, "trainyard/input_batches"), 16);
    EXPECT_EQ(integer(b, "global_step"), 16);
  }
}

// The same resume, with a different seed in the second half, is not bitwise the straight run:
// the comparison above can fail.
TEST_F(TrainerStateTest, ResumeComparisonDetectsADifferentDataOrder) {
  std::ostringstream log;
  config::Pipeline straight = deterministic("straight", "LogisticModel");
  straight.mutable_train_config()->set_max_steps(8);
  std::string a = train(*registry_, straight, log).last_checkpoint;
  config::Pipeline halves = deterministic("halves", "LogisticModel");
  halves.mutable_train_config()->set_max_steps(4);
  train(*registry_, halves, log);
  halves.mutable_train_config()->set_max_steps(8);
  halves.mutable_train_config()->set_seed(2);
  std::string b = train(*registry_, halves, log).last_checkpoint;
  EXPECT_NE(floats(a, "fully_connected/weights"), floats(b, "fully_connected/weights"));
}

#ifndef TRAINYARD_HOST_BINARY
#error "TRAINYARD_HOST_BINARY must name the trainyard executable"
#endif

// The host killed with SIGKILL at random moments and restarted each time finishes with the
// right step count, and every listed checkpoint it left along the way was whole. Killed runs
// keep their progress: the saved step never goes back, each restart restores the newest
// checkpoint ("restoring from P at step N" names the step the last run left), and some restart
// resumes from a step past 0. In deterministic mode the end state is bitwise the state of a run
// never killed.
TEST_F(TrainerStateTest, TrainerKilledAtRandomMomentsFinishesWithTheRightCheckpoint) {
  auto run_host = [&](const std::string& dir) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string out = (root_ / (dir + ".log")).string();
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<std::string> args = {TRAINYARD_HOST_BINARY,
                                       "train",
                                       "--train_dir=" + (root_ / dir).string(),
                                       "--train_data_pattern=" + (root_ / "data/train-*").string(),
                                       "--feature_names=mean_rgb,mean_audio",
                                       "--feature_sizes=24,8",
                                       "--num_classes=30",
                                       "--batch_size=50",
                                       "--max_steps=60",
                                       "--num_epochs=0",
                                       "--num_readers=2",
                                       "--save_interval_secs=0",
                                       "--log_every_n_steps=1000",
                                       "--deterministic",
                                       "--seed=5",
                                       "--num_threads=1"};
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  };
  auto wait_exit = [](pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  // A run never killed, timed.
  auto started = std::chrono::steady_clock::now();
  int status = wait_exit(run_host("straight"));
  int run_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - started)
                                    .count());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  std::string reference = *latest_checkpoint((root_ / "straight").string());

  std::mt19937 rng(20261122);
  // Each run is killed within a quarter of the uninterrupted run's time (it saves every step)
  // and before it has saved 15 of the 60 steps past its start, so finishing takes at least three
  // kills, at moments that fall anywhere: starting up, stepping, writing a checkpoint, renaming
  // it.
  std::uniform_int_distribution<int> delay_ms(2, std::max(4, run_ms / 4));
  constexpr int64_t kMaxStepsPerKilledRun = 15;
  const fs::path killed_dir = root_ / "killed";
  const fs::path killed_log = root_ / "killed.log";
  // The step of the newest checkpoint the `checkpoint` file names, -1 before the first; read
  // while the trainer runs, so without opening the checkpoint.
  auto named_step = [&] {
    std::ifstream in(killed_dir / "checkpoint");
    std::stringstream text;
    text << in.rdbuf();
    std::smatch match;
    const std::string state = text.str();
    static const std::regex named("model_checkpoint_path: \"[^\"]*model\\.ckpt-([0-9]+)\"");
    return std::regex_search(state, match, named) ? std::stoll(match[1]) : int64_t{-1};
  };
  auto log_size = [&] {
    std::error_code error;
    const auto size = fs::file_size(killed_log, error);
    return error ? std::uintmax_t{0} : size;
  };
  static const std::regex restoring("restoring from ([^\n]*) at step ([0-9]+)\n");
  int kills = 0;
  int64_t saved_step = -1;     // what the last run left: the step it saved last
  int64_t restored_step = -1;  // the last "restoring from ... at step N" seen
  int resumed_past_zero = 0;
  bool finished = false;
  for (int attempt = 0; attempt < 60 && !finished; ++attempt) {
    const std::uintmax_t log_before = log_size();
    pid_t pid = run_host("killed");
    bool kill_now = attempt < 15;
    if (kill_now) {
      // Every third run is killed only once it has saved past where it started: a trainer that
      // restarted from scratch each time would then be seen going back.
      if (attempt % 3 == 2) {
        for (int polls = 0; polls < 60000 && named_step() <= saved_step; ++polls) {
          if (::waitpid(pid, &status, WNOHANG) == pid) {
            pid = -1;  // exited (or died) before saving past its start
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      // The random moment, or sooner once the run has saved a quarter of the steps past where
      // it started: a run never gets far enough to finish, however much faster it goes than the
      // timed one (which also paid for loading the plugins from a cold disk).
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms(rng));
      const int64_t start = std::max<int64_t>(saved_step, 0);
      while (pid > 0 && std::chrono::steady_clock::now() < deadline &&
             named_step() < start + kMaxStepsPerKilledRun) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (pid > 0) ::kill(pid, SIGKILL);
    }
    if (pid > 0) status = wait_exit(pid);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "the trainer failed; see " << killed_log;
      finished = true;
    } else {
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
      ++kills;
    }
    // Whatever the moment, the listed checkpoint opens and reads whole.
    const int64_t before = saved_step;
    if (std::optional<std::string> latest = latest_checkpoint(killed_dir.string())) {
      EXPECT_NO_THROW(contents(*latest)) << *latest << " after kill " << kills;
      saved_step = integer(*latest, "global_step");
    }
    EXPECT_GE(saved_step, before) << "run " << attempt << " went back from step " << before;
    // The run's restore line, when it reached the log (a killed run's buffered output may not):
    // the checkpoint the previous run left.
    std::ifstream in(killed_log, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(log_before));
    const std::string output((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    std::smatch match;
    if (std::regex_search(output, match, restoring)) {
      const int64_t step = std::stoll(match[2]);
      EXPECT_EQ(step, before) << "run " << attempt << ": " << match[0];
      EXPECT_GE(step, restored_step) << "run " << attempt << ": " << match[0];
      restored_step = step;
      resumed_past_zero += step > 0;
    } else {
      EXPECT_TRUE(before < 0 || !WIFEXITED(status))
          << "run " << attempt << " finished without restoring step " << before << ":\n"
          << output;
    }
  }
  ASSERT_TRUE(finished);
  EXPECT_GE(kills, 3);
  EXPECT_GE(resumed_past_zero, 1) << "no run resumed from a checkpoint past step 0";
  std::string last = *latest_checkpoint((root_ / "killed").string());
  EXPECT_EQ(integer(last, "global_step"), 60);
  EXPECT_EQ(integer(last, "trainyard/input_batches"), 60);
  auto x = contents(reference), y = contents(last);
  for (const auto& [name, bytes] : x) {
    EXPECT_TRUE(bytes == y[name]) << name << " differs from the run never killed";
  }
}

// SIGTERM in the middle of an in-process run (the stop signals routed to their own thread, as
// the host does): train() finishes its step, writes a checkpoint of it (the run's only one) and
// returns the signal; the checkpoint holds that step. In a child process, so that the signal
// reaches no other test.
TEST_F(TrainerStateTest, ASigtermMidRunWritesTheStepItReachedAndReturnsTheSignal) {
  config::Pipeline p = pipeline();
  p.mutable_train_input_reader()->set_num_epochs(0);  // forever: only the signal ends it
  // No periodic checkpoint: the only one is the stop's. A step trace every 3 steps tells the
  // sender that the run is training.
  p.mutable_train_config()->set_save_interval_secs(100000);
  p.mutable_train_config()->set_trace_every_n_steps(3);
  const fs::path train_dir = p.train_config().train_dir();
  pid_t child = ::fork();
  if (child == 0) {
    route_stop_signals_to_a_thread();
    std::thread sender([&] {
      // Once the run has traced step 3, while it goes on training.
      for (int i = 0; i < 6000 && !fs::exists(train_dir / "tf_trace-3.json"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(::getpid(), SIGTERM);
    });
    std::ostringstream log;
    TrainResult r = train(*registry_, p, log);
    sender.join();
    if (r.stop_signal != SIGTERM) ::_exit(10);
    if (r.global_step < 3) ::_exit(11);
    for (const auto& entry : fs::directory_iterator(train_dir)) {  // the stop's checkpoint only
      const std::string name = entry.path().filename().string();
      if (name.rfind("model.ckpt-", 0) == 0 &&
          name.rfind("model.ckpt-" + std::to_string(r.global_step) + ".", 0) != 0) {
        ::_exit(15);
      }
    }
    if (r.last_checkpoint != (train_dir / ("model.ckpt-" + std::to_string(r.global_step))).string())
      ::_exit(12);
    std::shared_ptr<Backend> host = cpu();
    CheckpointReader saved(r.last_checkpoint);
    if (ops::cast(saved.read("global_step", *host), DType::kI64).to_vector<int64_t>().at(0) !=
        r.global_step) {
      ::_exit(13);
    }
    if (r.end_reason != "stopped by SIGTERM") ::_exit(14);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: not stopped by SIGTERM, 11: before step 3, 12: the last checkpoint is not of the "
         "step reached, 13: it holds another global_step, 14: another end reason, 15: a "
         "checkpoint of another step";
}

TEST_F(TrainerStateTest, FineTuneRestoresMatchingVariablesAndReportsTheRest) {
  std::ostringstream log;
  config::Pipeline source = pipeline();
  source.mutable_train_config()->set_max_steps(4);
  std::string checkpoint = train(*registry_, source, log).last_checkpoint;

  // Learning rate 0: after one step the weights are what fine-tuning restored.
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_train_dir((root_ / "tuned").string());
  p.mutable_train_config()->set_max_steps(1);
  p.mutable_train_config()->mutable_optimizer()->set_class_("GradientDescentOptimizer");
  p.mutable_train_config()->mutable_learning_rate()->mutable_constant()->set_learning_rate(0);
  p.mutable_train_config()->set_fine_tune_checkpoint(checkpoint);
  p.mutable_train_config()->add_checkpoint_exclude_scopes("fully_connected/bias");
  std::ostringstream tuned;
  std::string out = train(*registry_, p, tuned).last_checkpoint;
  EXPECT_NE(tuned.str().find("restored 1 variables"), std::string::npos) << tuned.str();
  EXPECT_NE(tuned.str().find("excluded: fully_connected/biases"), std::string::npos) << tuned.str();
  EXPECT_EQ(floats(out, "fully_connected/weights"), floats(checkpoint, "fully_connected/weights"));
  EXPECT_NE(floats(out, "fully_connected/biases"), floats(checkpoint, "fully_connected/biases"));

  // Another input size: the weights do not match and are reported with both shapes.
  config::Pipeline other = p;
  other.mutable_train_config()->set_train_dir((root_ / "other").string());
  other.mutable_train_config()->clear_checkpoint_exclude_scopes();
  for (config::Param& param :
       *other.mutable_train_input_reader()->mutable_reader()->mutable_params()) {
    if (param.key() == "feature_names") param.mutable_string_list()->mutable_value()->RemoveLast();
    if (param.key() == "feature_sizes") param.mutable_int_list()->mutable_value()->RemoveLast();
  }
  std::ostringstream mismatched;
  train(*registry_, other, mismatched);
  EXPECT_NE(mismatched.str().find(
                "mismatched: fully_connected/weights: checkpoint f32[32, 30], model f32[24, 30]"),
            std::string::npos)
      << mismatched.str();

  config::Pipeline missing = p;
  missing.mutable_train_config()->set_train_dir((root_ / "missing").string());
  missing.mutable_train_config()->set_fine_tune_checkpoint(
      (root_ / "nowhere/model.ckpt-1").string());
  try {
    train(*registry_, missing, log);
    FAIL() << "a missing fine_tune_checkpoint was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fine_tune_checkpoint: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nowhere/model.ckpt-1"), std::string::npos) << e.what();
  }
}

// MovingAverageOptimizer: average <- decay * average + (1 - decay) * weights after each
// update; the export carries the averages in place of the weights, without slots or the step.
TEST_F(TrainerStateTest, MovingAveragesFollowTheWeightsAndAreExported) {
  std::ostringstream log;
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_use_moving_average(true);
  p.mutable_train_config()->set_moving_average_decay(0.75);
  p.mutable_train_config()->set_save_interval_secs(0);
  p.mutable_train_config()->set_max_steps(2);
  train(*registry_, p, log);
  std::string dir = (root_ / "train").string();
  std::string first = dir + "/model.ckpt-1", second = dir + "/model.ckpt-2";
  std::vector<float> w1 = floats(first, "fully_connected/weights");
  std::vector<float> a1 = floats(first, "fully_connected/weights/ExponentialMovingAverage");
  std::vector<float> w2 = floats(second, "fully_connected/weights");
  std::vector<float> a2 = floats(second, "fully_connected/weights/ExponentialMovingAverage");
  ASSERT_EQ(a2.size(), w2.size());
  EXPECT_NE(a1, w1);
  for (std::size_t i = 0; i < a2.size(); ++i) {
    ASSERT_NEAR(a2[i], 0.75f * a1[i] + 0.25f * w2[i], 1e-6f) << i;
  }

  std::string exported = export_model(*registry_, p, "", (root_ / "export").string());
  auto backend = cpu();
  SafetensorsFile file = read_safetensors((root_ / "export/model.safetensors").string(), *backend);
  std::map<std::string, Tensor> weights(file.tensors.begin(), file.tensors.end());
  EXPECT_EQ(weights.size(), 2u);  // fully_connected/weights and fully_connected/biases only
  ASSERT_TRUE(weights.count("fully_connected/weights"));
  EXPECT_EQ(weights["fully_connected/weights"].shape(), (Shape{32, 30}));
  EXPECT_EQ(weights["fully_connected/weights"].to_vector<float>(), a2);
  EXPECT_EQ(file.metadata["source"], "model.ckpt-2");

  // eval reads the averages too.
  std::ostringstream with, without;
  EvalResult averaged = evaluate(*registry_, p, second, with);
  config::Pipeline plain = p;
  plain.mutable_train_config()->set_use_moving_average(false);
  EvalResult raw = evaluate(*registry_, plain, second, without);
  EXPECT_NE(averaged.metric("Avg_Loss"), raw.metric("Avg_Loss"));
}

TEST_F(TrainerStateTest, AdamPowersAreSavedForTensorFlow1) {
  std::ostringstream log;
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_max_steps(3);
  std::string prefix = train(*registry_, p, log).last_checkpoint;
  // TF1 starts beta1_power at beta1 and multiplies once per update: beta1^(steps + 1).
  EXPECT_FLOAT_EQ(floats(prefix, "beta1_power").at(0), std::pow(0.9f, 4.0f));
  EXPECT_FLOAT_EQ(floats(prefix, "beta2_power").at(0), std::pow(0.999f, 4.0f));
}

TEST_F(TrainerStateTest, GradientSummariesAndStepTracesAreWritten) {
  std::ostringstream log;
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_max_steps(4);
  p.mutable_train_config()->set_summarize_gradients(true);
  p.mutable_train_config()->set_save_summaries_secs(0);
  p.mutable_train_config()->set_trace_every_n_steps(3);
  train(*registry_, p, log);
  std::set<std::string> tags = event_tags(root_ / "train");
  EXPECT_TRUE(tags.count("fully_connected/weights/gradient (histogram)")) << tags.size();
  EXPECT_TRUE(tags.count("fully_connected/weights/gradient_norm"));
  EXPECT_TRUE(tags.count("fully_connected/biases/gradient (histogram)"));
  // tf_trace-<step>.json at steps 0 and 3, with the ops and the step's phases.
  for (const char* name : {"tf_trace-0.json", "tf_trace-3.json"}) {
    std::ifstream in(root_ / "train" / name);
    ASSERT_TRUE(in) << name;
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str().rfind("{\"traceEvents\": [", 0), 0u) << name;
    EXPECT_NE(text.str().find("\"name\": \"matmul\""), std::string::npos) << name;
    EXPECT_NE(text.str().find("\"name\": \"backward\""), std::string::npos) << name;
    EXPECT_NE(text.str().find("\"ph\": \"X\""), std::string::npos) << name;
  }
  EXPECT_FALSE(fs::exists(root_ / "train" / "tf_trace-1.json"));
}

// eval.py's loop: each new checkpoint once, in order, then a stop after the timeout.
TEST_F(TrainerStateTest, EvalWaitsForNewCheckpointsAndSkipsEvaluatedOnes) {
  std::ostringstream log;
  config::Pipeline p = pipeline();
  p.mutable_eval_config()->set_run_once(true);
  EXPECT_THROW(evaluate_checkpoints(*registry_, p, log), NotFound);

  p.mutable_train_config()->set_max_steps(2);
  train(*registry_, p, log);
  config::Pipeline waiting = p;
  waiting.mutable_eval_config()->set_run_once(false);
  waiting.mutable_eval_config()->set_eval_interval_secs(0.1);
  waiting.mutable_eval_config()->set_timeout_secs(4);
  std::ostringstream eval_log;
  std::vector<EvalResult> results;
  std::thread evaluator([&] { results = evaluate_checkpoints(*registry_, waiting, eval_log); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  p.mutable_train_config()->set_max_steps(4);
  std::ostringstream train_log;
  train(*registry_, p, train_log);
  evaluator.join();
  ASSERT_EQ(results.size(), 2u) << eval_log.str();
  EXPECT_EQ(results[0].global_step, 2);
  EXPECT_EQ(results[1].global_step, 4);
  EXPECT_NE(eval_log.str().find("step 2 is evaluated; waiting"), std::string::npos)
      << eval_log.str();
  EXPECT_NE(eval_log.str().find("no new checkpoint for 4 s; stopping"), std::string::npos);

  // A restarted evaluator starts after the steps the first one recorded in train_dir/eval.
  waiting.mutable_eval_config()->set_timeout_secs(0.5);
  std::ostringstream restarted;
  EXPECT_TRUE(evaluate_checkpoints(*registry_, waiting, restarted).empty()) << restarted.str();
  EXPECT_NE(restarted.str().find("step 4 was evaluated by an earlier run"), std::string::npos)
      << restarted.str();
}

// A forged event file in train_dir/eval recording step 2^62, or a step above every checkpoint,
// used to make eval wait for a newer checkpoint forever; such records are ignored with a warning
// naming the file. A checkpoint whose global_step is out of range made --run_once exit 0
// without evaluating; it is an error naming the checkpoint.
TEST_F(TrainerStateTest, ForgedEvalRecordsAndOutOfRangeStepsAreRefusedByName) {
  std::ostringstream log;
  config::Pipeline p = pipeline();
  p.mutable_train_config()->set_max_steps(2);
  train(*registry_, p, log);
  const fs::path eval = eval_dir(p);
  for (const int64_t forged : {int64_t{1} << 62, int64_t{1000000}}) {
    SCOPED_TRACE(forged);
    fs::remove_all(eval);
    std::string file;
    {
      SummaryWriter forgery(eval.string());
      forgery.add_scalar("loss", 1.0, forged);
      forgery.close();
      file = forgery.path();
    }
    config::Pipeline waiting = p;
    waiting.mutable_eval_config()->set_run_once(false);
    waiting.mutable_eval_config()->set_eval_interval_secs(0.1);
    waiting.mutable_eval_config()->set_timeout_secs(0.5);
    std::ostringstream eval_log;
    const std::vector<EvalResult> results = evaluate_checkpoints(*registry_, waiting, eval_log);
    ASSERT_EQ(results.size(), 1u) << eval_log.str();
    EXPECT_EQ(results[0].global_step, 2);
    EXPECT_NE(eval_log.str().find("warning: " + file + " records an evaluation at step " +
                                  std::to_string(forged)),
              std::string::npos)
        << eval_log.str();
  }

  const std::string prefix = latest_checkpoint(p.train_config().train_dir()).value();
  auto backend = cpu();
  std::vector<std::pair<std::string, Tensor>> tensors;
  {
    CheckpointReader reader(prefix);
    ASSERT_EQ(reader.info("global_step").dtype, DType::kI64);
    for (const CheckpointTensorInfo& info : reader.tensors()) {
      tensors.emplace_back(info.name,
                           info.name == "global_step"
                               ? Tensor::from_vector(*backend, Shape{}, std::vector<int64_t>{-3})
                               : reader.read(info.name, *backend));
    }
  }
  write_checkpoint(prefix, tensors);
  p.mutable_eval_config()->set_run_once(true);
  try {
    evaluate_checkpoints(*registry_, p, log);
    ADD_FAILURE() << "a checkpoint at step -3 was accepted";
  } catch (const DataLoss& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + prefix +
                                         " holds global_step -3, not an integer in [0, 2^53]; "
                                         "it is not evaluated");
  }
}

}  // namespace
}  // namespace trainyard
