// Whatever moment the host is killed at (SIGKILL, stepped over the length of an uninterrupted
// run with a random offset in each step), every file it writes is whole or absent under its
// final name: the shards of `data synth-yt8m`, `convert-mnist` and `convert-images`, an export
// directory (new or replacing an earlier one), and the event files through which `eval`
// records the steps it evaluated; a killed eval evaluates its checkpoint again. The checks are
// about files only: how many runs a kill actually interrupts depends on the machine's load.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "trainer_fixture.h"
#include "trainyard/core/summary_writer.h"
#include "trainyard/core/tfrecord.h"
#include "trainyard/error.h"
#include "trainyard/pkg/image/image_codec.h"
#include "trainyard/wire/event.pb.h"

#ifndef TRAINYARD_HOST_BINARY
#error "TRAINYARD_HOST_BINARY must name the trainyard executable"
#endif

namespace trainyard {
namespace {

// Relative path -> what makes the file whole: its bytes, or for a TFRecord file (whose
// tf.Example feature maps protobuf serializes in no fixed order) its size and record count
// with every CRC checked.
using Files = std::map<std::string, std::string>;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string whole_file_key(const fs::path& path) {
  if (path.extension() != ".tfrecord") return read_file(path);
  TFRecordReader reader(path.string());
  std::string record;
  int64_t records = 0;
  while (true) {
    TFRecordReader::Result r = reader.read(&record);
    if (r.kind == TFRecordReader::Result::kEndOfFile) break;
    if (r.kind != TFRecordReader::Result::kRecord) return "damaged: " + r.message;
    ++records;
  }
  return "TFRecord file of " + std::to_string(fs::file_size(path)) + " bytes, " +
         std::to_string(records) + " records";
}

bool hidden(const fs::path& path) {
  for (const fs::path& part : path) {
    if (part.string().size() > 1 && part.string()[0] == '.' && part != "..") return true;
  }
  return false;
}

// The files under `dir` whose path has no hidden component (the writers' temporaries are
// hidden), by path relative to `dir`.
Files visible_files(const fs::path& dir) {
  Files files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const fs::path relative = fs::relative(entry.path(), dir);
    if (hidden(relative) || !entry.is_regular_file()) continue;
    files[relative.string()] = whole_file_key(entry.path());
  }
  return files;
}

class CrashConsistencyTest : public TrainerTest {
 protected:
  // Starts the host with `args` (after the binary), its output appended to `log`.
  pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
    std::vector<std::string> all = {TRAINYARD_HOST_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }
  static int wait_for(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
  // Runs the host to its end; fails the test unless it exits 0. Returns how long it took.
  std::chrono::microseconds run(const std::vector<std::string>& args, const std::string& name) {
    const fs::path log = root_ / (name + ".log");
    const auto started = std::chrono::steady_clock::now();
    const int status = wait_for(spawn(args, log));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ":\n"
                                                               << read_file(log);
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 started);
  }
  // Runs the host and kills it with SIGKILL after `delay` unless it ended first (then it must
  // have succeeded). Returns whether the kill ended it.
  bool run_killed(const std::vector<std::string>& args, std::chrono::microseconds delay,
                  const std::string& name) {
    const fs::path log = root_ / (name + ".log");
    const pid_t pid = spawn(args, log);
    std::this_thread::sleep_for(delay);
    ::kill(pid, SIGKILL);
    const int status = wait_for(pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return true;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ":\n"
                                                               << read_file(log);
    return false;
  }
  // `count` kill delays, one in each of `count` equal slices of [0, 1.2 x length) at a random
  // place in the slice, so the kills fall from start-up to the last rename and after.
  std::vector<std::chrono::microseconds> kill_moments(std::chrono::microseconds length, int count) {
    std::uniform_real_distribution<double> within(0.0, 1.0);
    std::vector<std::chrono::microseconds> moments;
    const double span = 1.2 * static_cast<double>(length.count());
    for (int i = 0; i < count; ++i) {
      moments.emplace_back(static_cast<int64_t>(span * (i + within(rng_)) / count));
    }
    return moments;
  }
  // Fails unless every visible file under `dir` is byte for byte the same file in `reference`.
  void expect_whole_or_absent(const fs::path& dir, const Files& reference,
                              const std::string& when) {
    for (const auto& [name, bytes] : visible_files(dir)) {
      auto it = reference.find(name);
      if (it == reference.end()) {
        ADD_FAILURE() << when << ": " << (dir / name) << " is not a file the writer writes";
      } else {
        EXPECT_TRUE(it->second == bytes)
            << when << ": " << (dir / name) << " is not whole: "
            << (bytes.size() < 200 ? bytes : std::to_string(bytes.size()) + " bytes") << " where "
            << (it->second.size() < 200 ? it->second : std::to_string(it->second.size()) + " bytes")
            << " was expected";
      }
    }
  }
  // Kills the host at `count` moments over its run, every other time writing into `dir` afresh
  // and otherwise over the whole output of the previous attempt, and checks after each kill
  // that `dir` holds whole files or none (`all_or_nothing`: all of `reference` or nothing);
  // then one run to the end must write all of `reference`.
  void kill_repeatedly(const std::vector<std::string>& args, const fs::path& dir,
                       const Files& reference, std::chrono::microseconds length, int count,
                       const std::string& name, bool all_or_nothing = false) {
    int kills = 0;
    int attempt = 0;
    for (std::chrono::microseconds moment : kill_moments(length, count)) {
      const bool replace = attempt % 2 == 1;
      if (!replace) fs::remove_all(dir);
      if (run_killed(args, moment, name)) ++kills;
      const std::string when = name + " attempt " + std::to_string(attempt) + " killed after " +
                               std::to_string(moment.count()) + " us";
      expect_whole_or_absent(dir, reference, when);
      if (all_or_nothing) {
        const std::size_t left = visible_files(dir).size();
        EXPECT_TRUE(left == 0 || left == reference.size())
            << when << ": " << dir << " holds " << left << " of its " << reference.size()
            << " files";
      }
      if (replace) run(args, name);  // the next attempt starts from a whole output
      ++attempt;
      if (::testing::Test::HasFailure()) return;
    }
    run(args, name);
    EXPECT_EQ(visible_files(dir), reference) << name << ": the run to the end differs";
    std::cout << name << ": " << kills << " of " << count << " runs killed (the whole run takes "
              << length.count() / 1000 << " ms)\n";
  }

  std::mt19937 rng_{20270119};
};

TEST_F(CrashConsistencyTest, KilledSynthLeavesEachShardWholeOrAbsent) {
  auto args = [&](const fs::path& dir) {
    return std::vector<std::string>{"data",         "synth-yt8m", "--output_dir",    dir.string(),
                                    "--num_videos", "3000",       "--num_classes",   "100",
                                    "--num_shards", "4",          "--feature_sizes", "256,32",
                                    "--seed",       "3"};
  };
  auto length = run(args(root_ / "reference"), "synth_reference");
  const Files reference = visible_files(root_ / "reference");
  ASSERT_EQ(reference.size(), 8u);
  kill_repeatedly(args(root_ / "killed"), root_ / "killed", reference, length, 12, "synth");
}

TEST_F(CrashConsistencyTest, KilledConvertMnistLeavesTheFileWholeOrAbsent) {
  // An idx3 file of 3000 28x28 images (a gradient per class) and its idx1 labels.
  const int n = 3000, side = 28;
  auto be32 = [](std::ofstream& out, uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
    out.write(b, 4);
  };
  {
    std::ofstream images(root_ / "images.idx", std::ios::binary);
    std::ofstream labels(root_ / "labels.idx", std::ios::binary);
    be32(images, 0x803);
    be32(images, n);
    be32(images, side);
    be32(images, side);
    be32(labels, 0x801);
    be32(labels, n);
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < side * side; ++p) images.put(static_cast<char>((p * (i % 10 + 1)) % 256));
      labels.put(static_cast<char>(i % 10));
    }
  }
  auto args = [&](const fs::path& out) {
    return std::vector<std::string>{"data",     "convert-mnist",
                                    "--images", (root_ / "images.idx").string(),
                                    "--labels", (root_ / "labels.idx").string(),
                                    "--output", out.string()};
  };
  auto length = run(args(root_ / "reference/mnist.tfrecord"), "mnist_reference");
  const Files reference = visible_files(root_ / "reference");
  ASSERT_EQ(reference.size(), 1u);
  kill_repeatedly(args(root_ / "killed/mnist.tfrecord"), root_ / "killed", reference, length, 10,
                  "convert_mnist");
}

TEST_F(CrashConsistencyTest, KilledConvertImagesLeavesEachFileWholeOrAbsent) {
  // Three classes of 80 noisy 48x48 RGB PNGs.
  std::mt19937 pixels(7);
  for (int c = 0; c < 3; ++c) {
    const fs::path dir = root_ / "images" / ("class_" + std::string(1, static_cast<char>('a' + c)));
    fs::create_directories(dir);
    for (int i = 0; i < 80; ++i) {
      std::vector<uint8_t> rgb(48 * 48 * 3);
      for (uint8_t& v : rgb) v = static_cast<uint8_t>(pixels() % 256);
      std::ofstream(dir / (std::to_string(i) + ".png"), std::ios::binary)
          << image::encode_png(rgb, 48, 48, 3);
    }
  }
  auto args = [&](const fs::path& dir) {
    return std::vector<std::string>{
        "data",     "convert-images",          "--image_dir",  (root_ / "images").string(),
        "--output", (dir / "shapes").string(), "--num_shards", "3"};
  };
  auto length = run(args(root_ / "reference"), "images_reference");
  const Files reference = visible_files(root_ / "reference");
  ASSERT_EQ(reference.size(), 7u);  // 3 train shards, 3 validation shards, labels.txt
  kill_repeatedly(args(root_ / "killed"), root_ / "killed", reference, length, 10,
                  "convert_images");
}

TEST_F(CrashConsistencyTest, KilledExportLeavesTheDirectoryWholeOrAbsent) {
  run({"data", "synth-yt8m", "--output_dir", (root_ / "wide").string(), "--num_videos", "40",
       "--num_classes", "200", "--num_shards", "1", "--feature_sizes", "1024,128"},
      "synth");
  run({"train", "--train_dir=" + (root_ / "train").string(),
       "--train_data_pattern=" + (root_ / "wide/train-*").string(), "--model=MoeModel",
       "--moe_num_mixtures=4", "--feature_names=mean_rgb,mean_audio", "--feature_sizes=1024,128",
       "--num_classes=200", "--batch_size=10", "--max_steps=2", "--num_readers=1"},
      "train");
  ASSERT_FALSE(HasFailure());
  auto args = [&](const fs::path& dir) {
    return std::vector<std::string>{"export", "--train_dir=" + (root_ / "train").string(),
                                    "--export_dir=" + dir.string()};
  };
  auto length = run(args(root_ / "reference/model"), "export_reference");
  const Files reference = visible_files(root_ / "reference");
  ASSERT_GE(reference.size(), 6u);  // the checkpoint's two files, checkpoint, pipeline.config,
                                    // model_flags.json, model.safetensors
  kill_repeatedly(args(root_ / "killed/model"), root_ / "killed", reference, length, 14, "export",
                  /*all_or_nothing=*/true);
}

// The scalars of each step in the event files of `dir` (the record eval keeps of the steps it
// evaluated), with how many files hold each step; fails where a file is damaged or ends inside
// a record.
struct EvalRecord {
  std::map<int64_t, std::set<std::string>> tags;
  std::map<int64_t, int> files;
};
EvalRecord read_eval_record(const fs::path& dir, const std::string& when) {
  EvalRecord record;
  if (!fs::is_directory(dir)) return record;
  for (const std::string& file : EventFileReader::list_event_files(dir.string())) {
    EventFileReader reader(file);
    wire::tf::Event event;
    std::set<int64_t> steps;
    try {
      while (reader.next(&event)) {
        for (const auto& value : event.summary().value()) {
          record.tags[event.step()].insert(value.tag());
          steps.insert(event.step());
        }
      }
    } catch (const DataLoss& e) {
      ADD_FAILURE() << when << ": " << e.what();
    }
    EXPECT_FALSE(reader.partial_record()) << when << ": " << file << " ends inside a record";
    for (int64_t step : steps) ++record.files[step];
  }
  return record;
}

TEST_F(CrashConsistencyTest, KilledEvalRecordsWholeEvaluationsAndEvaluatesAgain) {
  run({"train", "--train_dir=" + (root_ / "train").string(),
       "--train_data_pattern=" + (root_ / "data/train-*").string(),
       "--feature_names=mean_rgb,mean_audio", "--feature_sizes=24,8", "--num_classes=30",
       "--batch_size=50", "--max_steps=3", "--num_readers=1"},
      "train");
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> args = {
      "eval",
      "--train_dir=" + (root_ / "train").string(),
      "--eval_data_pattern=" + (root_ / "data/validate-*").string(),
      "--batch_size=10",
      "--num_readers=1",
      "--eval_interval_secs=0.01",
      "--timeout_secs=0.01"};
  const fs::path eval = root_ / "train/eval";
  auto length = run(args, "eval_reference");
  const EvalRecord reference = read_eval_record(eval, "the reference evaluation");
  ASSERT_EQ(reference.tags.size(), 1u);
  ASSERT_EQ(reference.tags.begin()->first, 3);
  const std::set<std::string> all_tags = reference.tags.at(3);
  ASSERT_GE(all_tags.size(), 4u);

  int kills = 0, recorded_before_kill = 0;
  int attempt = 0;
  for (std::chrono::microseconds moment : kill_moments(length, 12)) {
    const std::string when = "attempt " + std::to_string(attempt++) + " killed after " +
                             std::to_string(moment.count()) + " us";
    fs::remove_all(eval);
    if (run_killed(args, moment, "eval")) ++kills;
    EvalRecord killed = read_eval_record(eval, when);
    for (const auto& [step, tags] : killed.tags) {
      EXPECT_EQ(tags, all_tags) << when << ": step " << step << " recorded in part";
      EXPECT_EQ(killed.files[step], 1) << when;
    }
    const bool recorded = killed.tags.count(3) != 0;
    recorded_before_kill += recorded ? 1 : 0;

    // The next evaluator evaluates step 3 unless a whole evaluation of it is recorded.
    const fs::path log = root_ / "eval_again.log";
    fs::remove(log);
    run(args, "eval_again");
    const std::string text = read_file(log);
    if (recorded) {
      EXPECT_NE(text.find("step 3 was evaluated by an earlier run"), std::string::npos)
          << when << ":\n"
          << text;
      EXPECT_EQ(text.find("epoch/eval number"), std::string::npos) << when << ":\n" << text;
    } else {
      EXPECT_NE(text.find("epoch/eval number 3 |"), std::string::npos) << when << ":\n" << text;
    }
    EvalRecord after = read_eval_record(eval, when + ", then run again");
    EXPECT_EQ(after.tags[3], all_tags) << when;
    EXPECT_EQ(after.files[3], 1) << when << ": step 3 evaluated twice";
    for (const auto& entry : fs::directory_iterator(eval)) {
      EXPECT_TRUE(entry.is_regular_file())
          << when << ": " << entry.path() << " (a killed evaluator's staging) is still there";
    }
    if (HasFailure()) return;
  }
  std::cout << "eval: " << kills << " of 12 runs killed, " << recorded_before_kill
            << " after recording the evaluation\n";
}

// What a killed evaluator leaves, a staging directory holding part of an event file, is not
// an evaluation: the next evaluator evaluates the checkpoint and removes it.
TEST_F(CrashConsistencyTest, AKilledEvaluatorsStagingIsNotAnEvaluation) {
  run({"train", "--train_dir=" + (root_ / "train").string(),
       "--train_data_pattern=" + (root_ / "data/train-*").string(),
       "--feature_names=mean_rgb,mean_audio", "--feature_sizes=24,8", "--num_classes=30",
       "--batch_size=50", "--max_steps=2", "--num_readers=1"},
      "train");
  ASSERT_FALSE(HasFailure());
  // A process that has exited: its pid names no running evaluator.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  wait_for(gone);
  const fs::path staging = root_ / "train/eval" / (".evaluating." + std::to_string(gone) + ".0");
  {
    SummaryWriter partial(staging.string(), ".partial");
    partial.add_scalar("Avg_Hit@1", 0.5, 2);
    partial.close();
  }
  run({"eval", "--train_dir=" + (root_ / "train").string(),
       "--eval_data_pattern=" + (root_ / "data/validate-*").string(), "--num_readers=1",
       "--eval_interval_secs=0.01", "--timeout_secs=0.01"},
      "eval");
  const std::string log = read_file(root_ / "eval.log");
  EXPECT_NE(log.find("epoch/eval number 2 |"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(staging));
}

}  // namespace
}  // namespace trainyard
