// trainyard train | eval: the YouTube-8M train.py and eval.py flags over a pipeline config.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "command_flags.h"
#include "commands.h"
#include "flag_tables.h"
#include "trainyard/core/checkpoint.h"
#include "trainyard/core/config.h"
#include "trainyard/core/config_validation.h"
#include "trainyard/core/evaluator.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/stop_signals.h"
#include "trainyard/core/task.h"
#include "trainyard/core/tf_config.h"
#include "trainyard/core/trainer.h"
#include "trainyard/error.h"
#include "trainyard/names.h"

namespace po = boost::program_options;

namespace trainyard::app {

namespace fs = std::filesystem;

namespace {

// train and train_and_evaluate: the same flags; train_and_evaluate adds the EvalSpec's and
// evaluates during training.
// A run resumed in a train_dir where its task keeps its own record (YouTube-8M's
// model_flags.json) keeps the recorded value of each model option this command does not set; a
// value it sets differently is refused by the task when the run starts (check_or_record_run),
// naming both values.
void resume_recorded_model_options(const PluginRegistry& registry, const Task& task,
                                   config::Pipeline& p) {
  const std::optional<RecordedRun> recorded = task.read_run_record(p.train_config().train_dir());
  if (!recorded) return;
  config::PluginSpec* model = p.mutable_model();
  if (recorded->model.class_name != model->class_()) return;  // the task names the change
  for (const auto& [key, text] : recorded->model.params) {
    bool set = false;
    for (const config::Param& param : model->params()) set |= param.key() == key;
    if (!set) set_typed_param(registry, ClassKind::kModel, model, key, text);
  }
}

// TF_CONFIG's evaluator: continuous evaluation of the chief's checkpoints in train_dir, as the
// estimator's evaluator task runs it, instead of training.
int run_as_evaluator(const PluginRegistry& registry, config::Pipeline p) {
  if (p.eval_input_reader().data_pattern().empty()) {
    throw ConfigError(
        "TF_CONFIG makes this process the evaluator, which evaluates the chief's checkpoints: it "
        "needs evaluation data (eval_input_reader.data_pattern in the config, or "
        "--eval_data_pattern with train_and_evaluate)");
  }
  p.mutable_eval_config()->set_evaluate_during_training(false);
  p.mutable_eval_config()->set_run_once(false);
  evaluate_checkpoints(registry, p, std::cout);
  return 0;
}

// The ranks of a TF_CONFIG job connect through MPI: the process must have been started by an
// MPI launcher with the job's size and this task's rank.
void check_launch_matches(const ClusterRole& role) {
  const int launched = launcher_world_size();
  if (role.world_size <= 1 && launched <= 1) return;
  if (launched == 0) {
    std::string hosts;
    for (const std::string& address : role.addresses) {
      hosts += (hosts.empty() ? "" : ",") + address.substr(0, address.rfind(':')) + ":1";
    }
    throw ConfigError("TF_CONFIG describes a job of " + std::to_string(role.world_size) +
                      " workers; Trainyard's workers reduce their gradients over MPI, so start "
                      "them together from one machine: mpirun -np " +
                      std::to_string(role.world_size) + " -H " + hosts +
                      " trainyard train ... (rank 0 is TF_CONFIG's chief)");
  }
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank_text == nullptr) rank_text = std::getenv("PMIX_RANK");
  if (rank_text == nullptr) rank_text = std::getenv("PMI_RANK");
  const int rank = rank_text != nullptr ? std::atoi(rank_text) : -1;
  if (launched != role.world_size || (rank >= 0 && rank != role.rank)) {
    throw ConfigError("TF_CONFIG makes this task rank " + std::to_string(role.rank) + " of " +
                      std::to_string(role.world_size) +
                      ", but the MPI launcher started it as rank " + std::to_string(rank) + " of " +
                      std::to_string(launched) +
                      "; give each rank its own TF_CONFIG, or leave TF_CONFIG unset under mpirun");
  }
}

// --collective and the seeds' towers: YouTube-8M's --num_gpu (summed
// tower gradients, towers = min(num_gpu, devices): one on the cpu backend, as train.py trains
// on CPU when it finds no GPU) and the OD API's --num_clones with --clone_on_cpu (averaged
// clone losses). Towers run one after another on the backend's device.
void apply_distributed_flags(const po::variables_map& vm, config::Pipeline& p) {
  config::TrainConfig* tc = p.mutable_train_config();
  if (vm.count("collective") != 0) {
    p.mutable_distributed()->mutable_collective()->set_class_(vm["collective"].as<std::string>());
  } else if (!p.distributed().has_collective() && launcher_world_size() > 1) {
    // So that --MpiCollective.option flags reach it.
    p.mutable_distributed()->mutable_collective()->set_class_("MpiCollective");
  }
  // The OD API's legacy train.py: --worker_replicas workers, synchronous with --sync_replicas
  // (SyncReplicasOptimizer), else asynchronous through parameter servers.
  if (vm.count("worker_replicas") != 0) {
    const int workers = vm["worker_replicas"].as<int>();
    const int launched = std::max(1, launcher_world_size());
    const bool sync = vm.count("sync_replicas") != 0 && vm["sync_replicas"].as<bool>();
    if (workers > 1 && !sync) {
      throw ConfigError("--worker_replicas " + std::to_string(workers) +
                        " without --sync_replicas asks for asynchronous training through "
                        "parameter servers, which Trainyard does not do: its replicas average "
                        "their gradients every step (--sync_replicas, as SyncReplicasOptimizer "
                        "with replicas_to_aggregate = worker_replicas)");
    }
    if (workers != launched) {
      throw ConfigError("--worker_replicas is " + std::to_string(workers) + " but " +
                        std::to_string(launched) +
                        " processes were started: launch them with mpirun -np " +
                        std::to_string(workers) + " trainyard train ...");
    }
  }
  const bool cpu = !p.backend().has_class_() || p.backend().class_() == "cpu";
  if (vm.count("num_gpu") != 0 && vm.count("num_clones") != 0) {
    throw ConfigError(
        "--num_gpu (train.py's towers) and --num_clones (model_main's clones) both ask for "
        "towers; give one");
  }
  if (vm.count("num_gpu") != 0) {
    const int n = vm["num_gpu"].as<int>();
    if (n < 0) throw ConfigError("--num_gpu is " + std::to_string(n) + "; it must be at least 0");
    tc->set_num_clones(cpu ? 1 : std::max(1, n));
    tc->set_clone_gradients(config::TrainConfig::SUM);
  }
  if (vm.count("num_clones") != 0) {
    const int n = vm["num_clones"].as<int>();
    if (n < 1)
      throw ConfigError("--num_clones is " + std::to_string(n) + "; it must be at least 1");
    const bool on_cpu = vm.count("clone_on_cpu") != 0 && vm["clone_on_cpu"].as<bool>();
    if (n > 1 && cpu && !on_cpu) {
      throw ConfigError("--num_clones " + std::to_string(n) +
                        " places the clones on GPUs and the backend is cpu: add --clone_on_cpu "
                        "(as the Object Detection API requires) or use --backend cuda");
    }
    tc->set_num_clones(n);
    tc->set_clone_gradients(config::TrainConfig::MEAN);
  }
  if (tc->num_clones() < 1 || tc->num_clones() > 4096) {
    throw ConfigError("train_config.num_clones is " + std::to_string(tc->num_clones()) +
                      "; it must be from 1 to 4096");
  }
}

// model_main's --eval_training_data: the evaluation reads the training files, with the
// evaluation's reader settings (no augmentation: only the steps a task keeps in evaluation, the
// Object Detection API's resize_image, when the config has no evaluation input), every n-th record
// (--sample_1_of_n_eval_on_train_examples).
void evaluate_training_data(const po::variables_map& vm, config::Pipeline& p) {
  const config::InputReader& train = p.train_input_reader();
  config::InputReader* eval = p.mutable_eval_input_reader();
  if (!eval->has_reader() && !eval->has_data_pattern()) {
    *eval = train;
    keep_only_evaluation_steps(eval, "train_input_reader");
    eval->set_num_epochs(1);
  }
  eval->set_data_pattern(train.data_pattern());
  *eval->mutable_reader() = train.reader();
  const int64_t n = vm["sample_1_of_n_eval_on_train_examples"].as<int64_t>();
  if (n < 1) {
    throw ConfigError("--sample_1_of_n_eval_on_train_examples is " + std::to_string(n) +
                      "; it must be at least 1");
  }
  eval->set_sample_1_of_n_examples(n);
}

// model_main's eval-only mode (--checkpoint_dir): the checkpoints of that directory are
// evaluated, the results written to train_dir's eval directory. With --run_once its latest
// checkpoint once; otherwise each new checkpoint as it appears (checked every
// eval_interval_secs), until one at train_config.max_steps or later (model_lib's
// continuous_eval), or eval_config.timeout_secs (> 0) without a new one.
int run_eval_only(const PluginRegistry& registry, const config::Pipeline& p,
                  const std::string& checkpoint_dir, bool run_once) {
  check_directory_argument(checkpoint_dir, "--checkpoint_dir");
  auto report = [](const EvalResult& r) {
    std::cout << std::defaultfloat << std::setprecision(6) << "evaluation at step " << r.global_step
              << ":";
    for (const Metric& m : r.metrics) std::cout << " " << m.name << " = " << m.value;
    std::cout << std::endl;
  };
  if (run_once) {
    const std::optional<std::string> latest = latest_checkpoint(checkpoint_dir);
    if (!latest) throw NotFound("--checkpoint_dir " + checkpoint_dir + " has no checkpoint");
    report(evaluate(registry, p, *latest, std::cout));
    return 0;
  }
  const config::EvalConfig& ec = p.eval_config();
  std::string last;
  auto last_new = std::chrono::steady_clock::now();
  while (true) {
    const std::optional<std::string> latest = latest_checkpoint(checkpoint_dir);
    if (latest && *latest != last) {
      const EvalResult r = evaluate(registry, p, *latest, std::cout);
      report(r);
      last = *latest;
      last_new = std::chrono::steady_clock::now();
      if (p.train_config().has_max_steps() && r.global_step >= p.train_config().max_steps()) {
        return 0;
      }
    }
    if (ec.timeout_secs() > 0 && std::chrono::steady_clock::now() - last_new >
                                     std::chrono::duration<double>(ec.timeout_secs())) {
      std::cout << "no new checkpoint in " << checkpoint_dir << " for " << ec.timeout_secs()
                << " s; stopping" << std::endl;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(ec.eval_interval_secs()));
  }
}

int run_training(const std::vector<std::string>& args, bool and_evaluate) {
  // A stop signal during start-up (loading plugins, reading the config and the checkpoint) is a
  // request the loop answers before its first step (exit 128 + the signal, the last line saying
  // so), not the end of the process: train()'s own scope nests in this one.
  StopSignals stop_signals;
  po::options_description model(kModelGroup);
  model.add_options()("model", po::value<std::string>(), "model class (default: the task's)")(
      "label_loss", po::value<std::string>(), "loss class (default: the task's)");
  add_config_flags(model, kTrainFlags, kModelGroup);

  po::options_description training(kTrainingGroup);
  training.add_options()("optimizer", po::value<std::string>(),
                         "optimizer class (default: the task's)")(
      "checkpoint_exclude_scopes", po::value<std::string>(),
      "comma-separated variable scopes not restored from --fine_tune_checkpoint")(
      "checkpoint_path", po::value<std::string>(),
      "same as --fine_tune_checkpoint: TF-Slim's name (train_image_classifier.py)")(
      "trainable_scopes", po::value<std::string>(),
      "comma-separated variable scopes to train, the others kept as restored (TF-Slim; "
      "update_trainable_variables in the config)");
  add_config_flags(training, kTrainFlags, kTrainingGroup);

  po::options_description outputs(kOutputsGroup);
  add_config_flags(outputs, kTrainFlags, kOutputsGroup);

  po::options_description distributed(kDistributedGroup);
  distributed.add_options()(
      "collective", po::value<std::string>(),
      "the Collective class connecting the replicas (default: MpiCollective when mpirun "
      "started several ranks, else none); its options as --CLASS.option, e.g. "
      "--MpiCollective.timeout_secs=60")(
      "num_gpu", po::value<int>(),
      "train.py's towers: batch_size per tower, their gradients summed; towers = "
      "min(num_gpu, devices), so 1 on the cpu backend")(
      "num_clones", po::value<int>(),
      "the Object Detection API's clones: batch_size per clone, their losses averaged")(
      "clone_on_cpu", po::value<bool>()->implicit_value(true),
      "run the clones on the cpu backend (the OD API's flag for testing without GPUs)")(
      "worker_replicas", po::value<int>(),
      "the OD API's legacy train.py: the number of workers, checked against the MPI launcher's")(
      "sync_replicas", po::value<bool>()->implicit_value(true),
      "the OD API's synchronous replicas (the only kind here: gradients all-reduced each step)");

  add_config_flags(distributed, kTrainFlags, kDistributedGroup);

  po::options_description input_flags(kInputGroup);
  add_input_flags(input_flags);
  add_config_flags(input_flags, kTrainFlags, kInputGroup);

  po::options_description evaluation(kEvaluationGroup);
  evaluation.add_options()("model_dir", po::value<std::string>(),
                           "same as --train_dir (the estimator's name)")(
      "num_train_steps", po::value<int64_t>(), "same as --max_steps (TrainSpec's max_steps)")(
      "checkpoint_dir", po::value<std::string>(),
      "model_main's eval-only mode: evaluate the checkpoints of this directory instead of "
      "training, into model_dir/eval_validation_data (eval_training_data)")(
      "run_once", po::value<bool>()->implicit_value(true),
      "with --checkpoint_dir: evaluate its latest checkpoint once")(
      "sample_1_of_n_eval_examples", po::value<int64_t>(),
      "keep every n-th evaluation record (default: the config's, else 1)")(
      "eval_training_data", po::value<bool>()->default_value(false)->implicit_value(true),
      "evaluate on the training input instead of the evaluation input")(
      "sample_1_of_n_eval_on_train_examples", po::value<int64_t>()->default_value(5),
      "with --eval_training_data: keep every n-th training record");
  add_config_flags(evaluation, kTrainFlags, kEvaluationGroup);

  po::options_description flags(and_evaluate
                                    ? "trainyard train_and_evaluate (tf.estimator's, over a "
                                      "pipeline config)"
                                    : "trainyard train (the originals' train.py flags)");
  flags.add_options()("help,h", "this help");
  flags.add(input_flags).add(model).add(training).add(outputs).add(distributed);
  if (and_evaluate) flags.add(evaluation);
  flags.add(plugin_path_options());
  po::variables_map vm;
  po::parsed_options parsed =
      po::command_line_parser(args).options(flags).style(kNoGuessing).allow_unregistered().run();
  apply_absl_conventions(parsed, flags);
  po::store(parsed, vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << flags
              << "\nOptions a model, loss or optimizer declares are accepted as "
                 "--name=value (trainyard plugins describe CLASS).\n";
    return 0;
  }
  PluginRegistry registry(registry_settings(vm));
  load_config_dialects(registry);  // before any config is read
  config::Pipeline p = base_pipeline(vm);
  // The classes the flags name, else the config's, else the task's defaults, so class flags
  // reach them. The starter code's flags for its learning rate and input layout apply with
  // their defaults where the task's flag dialect takes them; another task's pipeline keeps its
  // config and takes only the flags given.
  // The task the config names, or the one that runs unnamed pipelines (its train_dir fills in
  // below where neither the config nor a flag sets one).
  const std::shared_ptr<const Task> task = make_task(registry, p.task());
  p.set_task(task->plugin_origin().class_name);
  const TaskDefaults defaults = task->defaults();
  const TaskFlagDialect dialect = task->flag_dialect();
  config::TrainConfig* tc = p.mutable_train_config();
  auto set_class = [&](const char* flag, config::PluginSpec* spec, const std::string& fallback) {
    if (given(vm, flag)) {
      spec->set_class_(vm[flag].as<std::string>());
    } else if (!spec->has_class_()) {
      spec->set_class_(fallback);
    }
  };
  set_class("model", p.mutable_model(), defaults.model);
  set_class("label_loss", tc->mutable_label_loss(), defaults.loss);
  set_class("optimizer", tc->mutable_optimizer(), defaults.optimizer);
  if (!dialect.starter_flags) {
    for (config::InputReader* input :
         {p.mutable_train_input_reader(), p.mutable_eval_input_reader()}) {
      if (!input->reader().has_class_()) input->mutable_reader()->set_class_(defaults.reader);
    }
  }
  apply_config_flags(vm, kTrainFlags, p);
  if (vm.count("model_dir") != 0) {
    if (given(vm, "train_dir") &&
        vm["train_dir"].as<std::string>() != vm["model_dir"].as<std::string>()) {
      throw ConfigError("--model_dir and --train_dir name two directories; they are the same flag");
    }
    tc->set_train_dir(vm["model_dir"].as<std::string>());
  }
  resolve_task(registry, p);  // the task's train_dir where none is set
  if (given(vm, "batch_size") || !tc->has_batch_size())
    tc->set_batch_size(vm["batch_size"].as<int64_t>());
  if (vm.count("num_train_steps") != 0) {
    if (vm.count("max_steps") != 0 &&
        vm["max_steps"].as<int64_t>() != vm["num_train_steps"].as<int64_t>()) {
      throw ConfigError("--num_train_steps and --max_steps differ; they are the same flag");
    }
    tc->set_max_steps(vm["num_train_steps"].as<int64_t>());
  }
  if (vm.count("checkpoint_path") != 0) {
    const std::string& path = vm["checkpoint_path"].as<std::string>();
    if (given(vm, "fine_tune_checkpoint") && path != tc->fine_tune_checkpoint()) {
      throw ConfigError("--checkpoint_path=" + path +
                        " and --fine_tune_checkpoint=" + tc->fine_tune_checkpoint() +
                        " name two checkpoints; they are the same flag (TF-Slim's name and the "
                        "Object Detection API's)");
    }
    tc->set_fine_tune_checkpoint(path);
  }
  // Comma-separated scopes, spaces around each ignored (as TF-Slim strips them).
  auto scopes_of = [](const std::string& list) {
    std::vector<std::string> out;
    std::stringstream scopes(list);
    for (std::string scope; std::getline(scopes, scope, ',');) {
      const auto begin = scope.find_first_not_of(' ');
      const auto end = scope.find_last_not_of(' ');
      if (begin != std::string::npos) out.push_back(scope.substr(begin, end - begin + 1));
    }
    return out;
  };
  if (vm.count("checkpoint_exclude_scopes") != 0) {
    tc->clear_checkpoint_exclude_scopes();
    for (const std::string& scope : scopes_of(vm["checkpoint_exclude_scopes"].as<std::string>())) {
      tc->add_checkpoint_exclude_scopes(scope);
    }
  }
  if (vm.count("trainable_scopes") != 0) {
    tc->clear_update_trainable_variables();
    for (const std::string& scope : scopes_of(vm["trainable_scopes"].as<std::string>())) {
      tc->add_update_trainable_variables(scope);
    }
  }
  apply_distributed_flags(vm, p);
  // The starter code's flags set its schedule; a config's own schedule of another kind stays.
  auto* lr = tc->mutable_learning_rate();
  const bool flags_set_rate = given(vm, "base_learning_rate") || given(vm, "learning_rate_decay") ||
                              given(vm, "learning_rate_decay_examples");
  if ((dialect.starter_flags || flags_set_rate) &&
      (lr->schedule_case() == config::LearningRate::SCHEDULE_NOT_SET ||
       lr->has_exponential_decay_examples())) {
    auto* decay = lr->mutable_exponential_decay_examples();
    if (given(vm, "base_learning_rate"))
      decay->set_base_learning_rate(vm["base_learning_rate"].as<double>());
    if (given(vm, "learning_rate_decay"))
      decay->set_learning_rate_decay(vm["learning_rate_decay"].as<double>());
    if (given(vm, "learning_rate_decay_examples")) {
      decay->set_learning_rate_decay_examples(vm["learning_rate_decay_examples"].as<int64_t>());
    }
  }
  config::InputReader* input = p.mutable_train_input_reader();
  apply_input_flags(registry, vm, input, p.num_classes(), p.task(), defaults, dialect);
  std::vector<FlagTarget> targets = {
      {model_section_kind(registry, p.model().class_()), p.mutable_model()},
      {ClassKind::kLoss, p.mutable_train_config()->mutable_label_loss()},
      {ClassKind::kOptimizer, p.mutable_train_config()->mutable_optimizer()},
      {ClassKind::kReader, p.mutable_train_input_reader()->mutable_reader()}};
  // A config's evaluation during training reads with the same reader flags (--id_key, ...).
  if (p.eval_input_reader().reader().has_class_()) {
    targets.push_back({ClassKind::kReader, p.mutable_eval_input_reader()->mutable_reader()});
  }
  if (p.distributed().collective().has_class_()) {
    targets.push_back({ClassKind::kCollective, p.mutable_distributed()->mutable_collective()});
  }
  const std::vector<std::string> class_flags =
      po::collect_unrecognized(parsed.options, po::include_positional);
  route_unrecognized(registry, class_flags, targets, flags, std::cerr);
  if (!tc->start_new_model()) resume_recorded_model_options(registry, *task, p);
  const bool eval_only = and_evaluate && vm.count("checkpoint_dir") != 0;
  if (and_evaluate) {
    config::EvalConfig* ec = p.mutable_eval_config();
    ec->set_evaluate_during_training(true);
    // Without a reader of its own, the evaluation reads its files with the training's reader
    // and its flags (--feature_names, --feature_sizes, --frame_features), as the starter's eval.py
    // is given the same flags as train.py.
    if (!p.eval_input_reader().reader().has_class_()) {
      *p.mutable_eval_input_reader()->mutable_reader() = p.train_input_reader().reader();
    }
    if (vm["eval_training_data"].as<bool>()) evaluate_training_data(vm, p);
    if (vm.count("sample_1_of_n_eval_examples") != 0) {
      const int64_t n = vm["sample_1_of_n_eval_examples"].as<int64_t>();
      if (n < 1) {
        throw ConfigError("--sample_1_of_n_eval_examples is " + std::to_string(n) +
                          "; it must be at least 1");
      }
      if (!vm["eval_training_data"].as<bool>()) {
        p.mutable_eval_input_reader()->set_sample_1_of_n_examples(n);
      }
    }
    if (vm.count("run_once") != 0 && !eval_only) {
      throw ConfigError("--run_once applies to the eval-only mode (--checkpoint_dir)");
    }
    if (eval_only && vm.count("eval_name") == 0) {
      // model_main's evaluation names.
      ec->set_name(vm["eval_training_data"].as<bool>() ? "training_data" : "validation_data");
    }
    if (p.eval_input_reader().data_pattern().empty()) {
      throw ConfigError(
          "train_and_evaluate needs evaluation data: set eval_input_reader.data_pattern in the "
          "config or --eval_data_pattern");
    }
    if (!tc->has_max_steps() && !eval_only) {
      throw ConfigError(
          "train_and_evaluate needs train_config.max_steps or --num_train_steps (TrainSpec's "
          "max_steps: the only reliable stop)");
    }
  }
  check_pipeline_plugins(p, registry);
  validate_command_pipeline(
      p, vm, given_field_flags(vm, flag_fields(kTrainFlags, kTrainCodeFlagFields), class_flags));
  if (vm["print_config"].as<bool>()) {
    std::cout << pipeline_config_to_text(p, /*with_defaults=*/true);
    return 0;
  }
  check_directory_argument(tc->train_dir(), vm.count("model_dir")    ? "--model_dir"
                                            : given(vm, "train_dir") ? "--train_dir"
                                                                     : "train_config.train_dir");
  if (eval_only) {
    return run_eval_only(registry, p, vm["checkpoint_dir"].as<std::string>(),
                         vm.count("run_once") != 0 && vm["run_once"].as<bool>());
  }
  if (p.distributed().read_tf_config()) {
    if (std::optional<ClusterRole> role = tf_config_from_environment()) {
      std::cout << describe_cluster_role(*role) << "\n";
      if (role->role == ClusterRole::Role::kEvaluator) return run_as_evaluator(registry, p);
      check_launch_matches(*role);
    }
  }
  TrainResult r = train(registry, p, std::cout);
  // The tasks' log lines leave std::cout in their own number formats: this line has its own.
  if (!r.chief) return r.stop_signal != 0 ? 128 + r.stop_signal : 0;  // the chief reports
  std::cout << std::defaultfloat << std::setprecision(6) << "trained to step " << r.global_step
            << ", loss " << r.last_loss
            << (r.last_checkpoint.empty() ? "" : ", checkpoint " + r.last_checkpoint)
            << "; ended: " << r.end_reason << "\n";
  if (and_evaluate && !r.evaluations.empty() && r.stop_signal == 0) {
    const EvalResult& last = r.evaluations.back();
    std::cout << "final evaluation at step " << last.global_step << ":";
    for (const Metric& m : last.metrics) std::cout << " " << m.name << " = " << m.value;
    std::cout << "\n";
  }
  // Stopped by a signal: the status a shell gives a process that signal ended (stop_signals.h).
  return r.stop_signal != 0 ? 128 + r.stop_signal : 0;
}

}  // namespace

int run_train(const std::vector<std::string>& args) { return run_training(args, false); }

int run_train_and_evaluate(const std::vector<std::string>& args) {
  return run_training(args, true);
}

namespace {

// Parses `args` into `vm`; prints the help and returns true when --help was given.
// Class options (--moe_num_mixtures=2, --id_key=video_id) are left in *class_flags.
bool parse_or_help(const std::vector<std::string>& args, const po::options_description& flags,
                   po::variables_map* vm, std::vector<std::string>* class_flags) {
  po::parsed_options parsed =
      po::command_line_parser(args).options(flags).style(kNoGuessing).allow_unregistered().run();
  apply_absl_conventions(parsed, flags);
  po::store(parsed, *vm);
  po::notify(*vm);
  *class_flags = po::collect_unrecognized(parsed.options, po::include_positional);
  if (vm->count("help")) {
    std::cout << flags << "\n";
    return true;
  }
  return false;
}

// The task whose predict takes a model name and a checkpoint alone (TF-Slim's
// eval_image_classifier.py: --model, --checkpoint_path), and the input it gives that model.
std::pair<std::string, CheckpointInput> checkpoint_task(const PluginRegistry& registry,
                                                        const po::variables_map& vm) {
  const std::string model = vm["model"].as<std::string>();
  const std::string preprocessing =
      vm.count("preprocessing_name") != 0 ? vm["preprocessing_name"].as<std::string>() : "";
  const int64_t size = vm.count("eval_image_size") != 0 ? vm["eval_image_size"].as<int64_t>() : 0;
  std::vector<std::pair<std::string, CheckpointInput>> takers;
  for (const std::string& name : task_names(registry)) {
    if (auto in = make_task(registry, name)->checkpoint_input(model, preprocessing, size)) {
      takers.emplace_back(name, *in);
    }
  }
  if (takers.size() != 1) {
    std::string names;
    for (const auto& [name, in] : takers) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError("predict --model=" + model +
                      " without --train_dir or "
                      "--pipeline_config_path needs the one task that predicts from a model name "
                      "and a checkpoint alone; " +
                      (takers.empty() ? "no task plugin does" : "several do: " + names));
  }
  return takers.front();
}

// The pipeline of a checkpoint run as TF-Slim's eval_image_classifier.py runs it: the model,
// its number of classes, and the input the task gives that model (checkpoint_task), read by the
// task's default reader and scaled as that preprocessing scales it.
config::Pipeline checkpoint_pipeline(const PluginRegistry& registry, const po::variables_map& vm) {
  const auto [task_name, in] = checkpoint_task(registry, vm);
  config::Pipeline p = base_pipeline(vm);
  p.set_task(task_name);
  p.mutable_model()->set_class_(vm["model"].as<std::string>());
  config::InputReader* input = p.mutable_eval_input_reader();
  input->mutable_reader()->set_class_(make_task(registry, task_name)->defaults().reader);
  auto param = [&](const char* key, int64_t value) {
    config::Param* param = input->mutable_reader()->add_params();
    param->set_key(key);
    param->set_int_value(value);
  };
  param("channels", vm.count("channels") != 0 ? vm["channels"].as<int64_t>() : in.channels);
  param("labels_offset", vm["labels_offset"].as<int64_t>());
  input->set_data_pattern(vm["input_data_pattern"].as<std::string>());
  input->set_num_readers(vm["num_readers"].as<int>());
  auto* step = input->add_preprocessing_step()->mutable_image_classification_preprocessing();
  step->set_default_image_size(in.image_size);
  step->set_fixed_resize_side(in.resize_side);
  std::string upper = in.normalization;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  config::ImageClassificationPreprocessing::Normalization normalization;
  if (!config::ImageClassificationPreprocessing::Normalization_Parse(upper, &normalization)) {
    throw ConfigError("the " + task_name + " task gives --model=" + p.model().class_() +
                      " the normalization '" + in.normalization +
                      "', which ImageClassificationPreprocessing does not have");
  }
  step->set_normalization(normalization);
  p.mutable_eval_config()->set_batch_size(given(vm, "batch_size") ? vm["batch_size"].as<int64_t>()
                                                                  : 32);
  const std::string dir = fs::path(vm["checkpoint"].as<std::string>()).parent_path().string();
  p.mutable_train_config()->set_train_dir(dir.empty() ? "." : dir);
  return p;
}

// The pipeline of an eval, predict or export run of a train_dir or export that recorded its
// pipeline.config: the recorded model, classes and input (its eval_input_reader, with its
// preprocessing), data from `pattern_flag`, batch size and readers from the flags.
config::Pipeline pipeline_from_recorded_config(const po::variables_map& vm,
                                               config::Pipeline recorded, const std::string& dir,
                                               const char* pattern_flag) {
  const std::string source = dir + "/pipeline.config";
  for (const char* flag : {"feature_names", "feature_sizes", "frame_features", "reader"}) {
    if (given(vm, flag) || (std::string(flag) == "reader" && vm.count(flag) != 0)) {
      throw ConfigError("--" + std::string(flag) + " does not apply: " + source +
                        " records the model's input");
    }
  }
  if (given(vm, "num_classes") && vm["num_classes"].as<int64_t>() != recorded.num_classes()) {
    throw ConfigError("--num_classes is " + std::to_string(vm["num_classes"].as<int64_t>()) +
                      " but " + source + " records " + std::to_string(recorded.num_classes()));
  }
  recorded.mutable_train_config()->set_train_dir(dir);
  config::InputReader* input = recorded.mutable_eval_input_reader();
  if (!input->has_reader() && recorded.train_input_reader().has_reader()) {
    *input->mutable_reader() = recorded.train_input_reader().reader();
  }
  if (pattern_flag == nullptr) {
    input->clear_data_pattern();
  } else if (given(vm, pattern_flag) || !input->has_data_pattern()) {
    input->set_data_pattern(vm[pattern_flag].as<std::string>());
  }
  if (given(vm, "num_readers")) input->set_num_readers(vm["num_readers"].as<int>());
  if (given(vm, "batch_size")) {
    recorded.mutable_eval_config()->set_batch_size(vm["batch_size"].as<int64_t>());
  }
  apply_backend_flags(vm, recorded);
  // Evaluation outside training: no exporters, no evaluation schedule.
  recorded.mutable_eval_config()->clear_exporters();
  recorded.mutable_eval_config()->set_evaluate_during_training(false);
  return recorded;
}

// A flag of the command line that repeats a value a training run recorded (--feature_names)
// must agree with it: a string flag that `recorded` holds as a param, given with another value,
// is an error naming the flag, the record and both values.
void check_flags_agree(const po::variables_map& vm, const ConfiguredClass& recorded,
                       const std::string& source) {
  for (const auto& [key, value] : recorded.params) {
    if (!given(vm, key.c_str()) || vm[key].value().type() != typeid(std::string)) continue;
    const std::string& flag = vm[key].as<std::string>();
    if (flag != value) {
      throw ConfigError("--" + key + " is '" + flag + "' but " + source + " records '" + value +
                        "'");
    }
  }
}

// The pipeline of an eval, predict or export run: model, loss and input layout from the record
// the task keeps in train_dir (YouTube-8M's model_flags.json; flags may repeat it but not
// contradict it), or from train_dir/pipeline.config for a task that keeps none (an image
// classifier, a detector, an export); data from `pattern_flag` (none for an export). `source`
// gets the file the run was read from.
config::Pipeline pipeline_from_train_dir(const PluginRegistry& registry,
                                         const po::variables_map& vm, const char* pattern_flag,
                                         std::string* source) {
  config::Pipeline p = base_pipeline(vm);
  // --train_dir, else the config's, else the task's default.
  if (given(vm, "train_dir"))
    p.mutable_train_config()->set_train_dir(vm["train_dir"].as<std::string>());
  const std::shared_ptr<const Task> task = resolve_task(registry, p);
  const std::string train_dir = p.train_config().train_dir();
  const std::optional<RecordedRun> recorded = task->read_run_record(train_dir);
  const fs::path recorded_config = fs::path(train_dir) / "pipeline.config";
  if (!recorded) {
    if (!fs::exists(recorded_config)) {
      throw ConfigError("--train_dir " + train_dir + " holds no record of a training run: no " +
                        recorded_config.string() + ", and no record of the " + p.task() +
                        " task's own");
    }
    *source = recorded_config.string();
    return pipeline_from_recorded_config(vm, load_pipeline_config(recorded_config), train_dir,
                                         pattern_flag);
  }
  *source = recorded->source;
  check_flags_agree(vm, recorded->reader, recorded->source);
  // --frame_features chooses the task's frame-level reader (its flag dialect).
  if (given(vm, "frame_features") &&
      vm["frame_features"].as<bool>() !=
          (recorded->reader.class_name == task->flag_dialect().frame_reader)) {
    throw ConfigError("--frame_features disagrees with " + recorded->source);
  }
  if (!p.model().has_class_() || p.model().class_() != recorded->model.class_name) {
    p.mutable_model()->set_class_(recorded->model.class_name);
    p.mutable_model()->clear_params();
  }
  for (const auto& [key, text] : recorded->model.params) {
    set_typed_param(registry, ClassKind::kModel, p.mutable_model(), key, text);
  }
  if (recorded->num_classes > 0) {
    if (given(vm, "num_classes") && vm["num_classes"].as<int64_t>() != recorded->num_classes) {
      throw ConfigError("--num_classes is " + std::to_string(vm["num_classes"].as<int64_t>()) +
                        " but " + recorded->source + " records " +
                        std::to_string(recorded->num_classes));
    }
    p.set_num_classes(recorded->num_classes);
  }
  config::PluginSpec* loss = p.mutable_train_config()->mutable_label_loss();
  if (loss->class_() != recorded->label_loss.class_name) {
    loss->set_class_(recorded->label_loss.class_name);
    loss->clear_params();
  }
  for (const auto& [key, text] : recorded->label_loss.params) {
    set_typed_param(registry, ClassKind::kLoss, loss, key, text);
  }
  config::InputReader* input = p.mutable_eval_input_reader();
  if (pattern_flag == nullptr) {
    input->clear_data_pattern();
  } else if (given(vm, pattern_flag) || !input->has_data_pattern()) {
    input->set_data_pattern(vm[pattern_flag].as<std::string>());
  }
  config::PluginSpec* reader = input->mutable_reader();
  reader->set_class_(recorded->reader.class_name);
  for (const auto& [key, text] : recorded->reader.params) {
    set_typed_param(registry, ClassKind::kReader, reader, key, text);
  }
  for (const auto& option :
       registry.describe(registry.find(ClassKind::kReader, reader->class_())).options) {
    if (option.name == "num_classes") {
      set_typed_param(registry, ClassKind::kReader, reader, "num_classes",
                      std::to_string(p.num_classes()));
    }
  }
  if (given(vm, "num_readers") || !input->has_num_readers()) {
    input->set_num_readers(vm["num_readers"].as<int>());
  }
  if (given(vm, "batch_size") || !p.eval_config().has_batch_size()) {
    p.mutable_eval_config()->set_batch_size(vm["batch_size"].as<int64_t>());
  }
  return p;
}

// The class flags of eval, predict and export: the reader's apply (--id_key, --max_frames); the
// model's may repeat what it was trained with (WILLOW's inference command lines pass every
// model flag), and a different value is an error naming `source`, the record of the run.
void route_eval_flags(const PluginRegistry& registry, const std::vector<std::string>& class_flags,
                      config::Pipeline* p, const po::options_description& flags,
                      const std::string& source) {
  route_unrecognized(registry, class_flags,
                     {{ClassKind::kModel, p->mutable_model(), true, source},
                      {ClassKind::kLoss, p->mutable_train_config()->mutable_label_loss()},
                      {ClassKind::kReader, p->mutable_eval_input_reader()->mutable_reader()}},
                     flags, std::cerr);
}

}  // namespace

int run_eval(const std::vector<std::string>& args) {
  po::options_description flags("trainyard eval (the originals' eval.py flags)");
  flags.add_options()("help,h", "this help")(
      "train_dir", po::value<std::string>(),
      "where the checkpoints and the record of the training run are (default: the config's, "
      "else the task's)")("eval_data_pattern", po::value<std::string>()->default_value(""),
                          "comma-separated globs of evaluation TFRecords")(
      "checkpoint", po::value<std::string>()->default_value(""),
      "a checkpoint prefix (default: the latest in train_dir)");
  add_config_flags(flags, kEvalFlags, kEvalGroup);
  add_input_flags(flags);
  flags.add(plugin_path_options());
  po::variables_map vm;
  std::vector<std::string> class_flags;
  if (parse_or_help(args, flags, &vm, &class_flags)) return 0;
  PluginRegistry registry(registry_settings(vm));
  load_config_dialects(registry);  // before any config is read
  std::string source;
  config::Pipeline p = pipeline_from_train_dir(registry, vm, "eval_data_pattern", &source);
  route_eval_flags(registry, class_flags, &p, flags, source);
  apply_config_flags(vm, kEvalFlags, p);
  if (p.eval_input_reader().data_pattern().empty()) {
    throw ConfigError("no evaluation data: set --eval_data_pattern");
  }
  validate_command_pipeline(
      p, vm, given_field_flags(vm, flag_fields(kEvalFlags, kEvalCodeFlagFields), class_flags));
  if (!vm["checkpoint"].as<std::string>().empty()) {
    evaluate(registry, p, vm["checkpoint"].as<std::string>(), std::cout);
  } else {
    evaluate_checkpoints(registry, p, std::cout);
  }
  return 0;
}

int run_predict(const std::vector<std::string>& args) {
  po::options_description flags("trainyard predict (the originals' inference.py flags)");
  flags.add_options()("help,h", "this help")(
      "train_dir", po::value<std::string>()->default_value(""),
      "a train_dir or an export directory (trainyard export)")(
      "input_data_pattern", po::value<std::string>()->default_value(""),
      "comma-separated globs of TFRecords to predict")(
      "output_file", po::value<std::string>()->default_value(""), "the CSV to write")(
      "checkpoint", po::value<std::string>()->default_value(""),
      "a checkpoint prefix (default: the latest in train_dir)")(
      "top_k", po::value<int>()->default_value(20), "classes per video in the CSV");
  po::options_description slim_flags(
      "An image classifier's checkpoint without its run (TF-Slim's eval_image_classifier flags)");
  slim_flags.add_options()("checkpoint_path", po::value<std::string>(),
                           "same as --checkpoint (TF-Slim's name)")(
      "model", po::value<std::string>(), "the model class (TF-Slim's nets: resnet_v1_50, ...)")(
      "preprocessing_name", po::value<std::string>(),
      "the preprocessing (default: the model's, as slim's preprocessing_factory chooses it)")(
      "eval_image_size", po::value<int64_t>(),
      "the square crop the model sees (default: the model's default_image_size)")(
      "labels_offset", po::value<int64_t>()->default_value(0),
      "labels in the data minus this are the model's classes (1 for 1001-class checkpoints)")(
      "channels", po::value<int64_t>(), "image channels (default: the model's)");
  add_input_flags(flags);
  flags.add(slim_flags);
  flags.add(plugin_path_options());
  po::variables_map vm;
  std::vector<std::string> class_flags;
  if (parse_or_help(args, flags, &vm, &class_flags)) return 0;
  if (vm["output_file"].as<std::string>().empty()) throw ConfigError("--output_file is required");
  if (vm.count("checkpoint_path") != 0) {
    const std::string& path = vm["checkpoint_path"].as<std::string>();
    if (given(vm, "checkpoint") && vm["checkpoint"].as<std::string>() != path) {
      throw ConfigError("--checkpoint_path and --checkpoint name two checkpoints");
    }
    vm.at("checkpoint").value() = path;
  }
  PluginRegistry registry(registry_settings(vm));
  load_config_dialects(registry);  // before any config is read
  config::Pipeline p;
  if (vm["train_dir"].as<std::string>().empty() && vm.count("pipeline_config_path") == 0 &&
      vm.count("model") != 0) {
    if (vm["checkpoint"].as<std::string>().empty()) {
      throw ConfigError("predict --model=" + vm["model"].as<std::string>() +
                        " needs --checkpoint_path");
    }
    if (!given(vm, "num_classes")) {
      throw ConfigError("predict --model=" + vm["model"].as<std::string>() +
                        " needs --num_classes (the checkpoint's logits: 1001 for TF-Slim's "
                        "checkpoints trained with a background class, else 1000 for ImageNet)");
    }
    p = checkpoint_pipeline(registry, vm);
    route_unrecognized(registry, class_flags, {{ClassKind::kModel, p.mutable_model()}}, flags,
                       std::cerr);
  } else if (vm["train_dir"].as<std::string>().empty()) {
    // A checkpoint of another run (TF-Slim's published ones among them) with the pipeline
    // config that names its model, classes and input.
    if (vm.count("pipeline_config_path") == 0 || vm["checkpoint"].as<std::string>().empty()) {
      throw ConfigError(
          "predict needs --train_dir (a training run or an export), or --checkpoint with "
          "--pipeline_config_path naming the model, num_classes and input");
    }
    config::Pipeline from_config = base_pipeline(vm);
    const std::shared_ptr<const Task> from_task = make_task(registry, from_config.task());
    from_config.set_task(from_task->plugin_origin().class_name);
    if (!from_task->flag_dialect().predicts_from_pipeline_config) {
      throw ConfigError("predict from --checkpoint and --pipeline_config_path: a model of task '" +
                        from_config.task() +
                        "' needs the record of its training run; give its --train_dir");
    }
    const std::string dir = fs::path(vm["checkpoint"].as<std::string>()).parent_path().string();
    p = pipeline_from_recorded_config(vm, from_config, dir.empty() ? "." : dir,
                                      "input_data_pattern");
    route_unrecognized(registry, class_flags, {{ClassKind::kModel, p.mutable_model()}}, flags,
                       std::cerr);
  } else {
    std::string source;
    p = pipeline_from_train_dir(registry, vm, "input_data_pattern", &source);
    route_eval_flags(registry, class_flags, &p, flags, source);
  }
  const int64_t task_batch_size = make_task(registry, p.task())->flag_dialect().predict_batch_size;
  if (!given(vm, "batch_size") && task_batch_size > 0) {
    p.mutable_eval_config()->set_batch_size(task_batch_size);
  }
  validate_command_pipeline(
      p, vm, given_field_flags(vm, flag_fields({}, kEvalCodeFlagFields), class_flags));
  predict(registry, p, vm["checkpoint"].as<std::string>(), vm["output_file"].as<std::string>(),
          vm["top_k"].as<int>(), std::cout);
  return 0;
}

int run_export(const std::vector<std::string>& args) {
  po::options_description flags("trainyard export");
  flags.add_options()("help,h", "this help")(
      "train_dir", po::value<std::string>(),
      "the training run to export (default: the config's, else the task's)")(
      "export_dir", po::value<std::string>()->default_value(""),
      "the directory to write (replaced if it exists)")(
      "checkpoint", po::value<std::string>()->default_value(""),
      "a checkpoint prefix (default: the latest in train_dir)");
  add_input_flags(flags);
  flags.add(onnx_export_options());
  flags.add(plugin_path_options());
  po::variables_map vm;
  std::vector<std::string> class_flags;
  if (parse_or_help(args, flags, &vm, &class_flags)) return 0;
  const bool onnx = onnx_format_requested(vm);
  const bool tflite = tflite_format_requested(vm);
  if (!onnx && !tflite && vm["export_dir"].as<std::string>().empty()) {
    throw ConfigError("--export_dir is required");
  }
  PluginRegistry registry(registry_settings(vm));
  load_config_dialects(registry);  // before any config is read
  std::string source;
  config::Pipeline p = pipeline_from_train_dir(registry, vm, nullptr, &source);
  route_eval_flags(registry, class_flags, &p, flags, source);
  validate_command_pipeline(
      p, vm, given_field_flags(vm, flag_fields({}, kEvalCodeFlagFields), class_flags));
  if (onnx) return run_export_onnx(registry, p, vm);
  if (tflite) return run_export_tflite(registry, p, vm);
  if (saved_model_format_requested(vm)) return run_export_saved_model(registry, p, vm);
  std::string prefix = export_model(registry, p, vm["checkpoint"].as<std::string>(),
                                    vm["export_dir"].as<std::string>());
  std::cout << "exported " << prefix << "\n";
  return 0;
}

}  // namespace trainyard::app
