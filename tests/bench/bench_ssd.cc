// Training and inference benchmark of the SSD detector: the detection_models plugin's
// SSDMetaArch configured as the Object Detection API's ssd_mobilenet_v1_coco.config, or as a
// pipeline config's model (--config: a recipe such as
// configs/ssdlite_mobilenet_v2_synth_shapes.config), driven through its DetectionModel calls on
// synthetic in-memory batches, for comparison with torchvision's detectors of the same shape
// (tests/bench/peers/ssd_torchvision.py; tests/bench/peers/run_ssd_bench.sh runs both).
//
//   bench_ssd [--threads N] [--batch B] [--steps N] [--warmup N] [--image_size S]
//             [--depth_multiplier D] [--num_classes C] [--pool P] [--optimizer rmsprop|momentum]
//             [--learning_rate LR] [--seed S] [--bound 0|1]
//   bench_ssd --config PIPELINE_CONFIG [--threads N] [--batch B] [--steps N] [--warmup N]
//             [--pool P] [--learning_rate LR] [--seed S] [--print_variables 0|1]
//
// With --config the model is built as `trainyard train` builds it from that file (its model
// section's class and params, read by the config dialect of the task plugins, the Object
// Detection API's pipeline.config included); the image size (fixed_shape_resizer's height and
// width) and the class count come from it, and so do the batch (train_config.batch_size unless
// --batch), the optimizer (train_config.optimizer's class and params) and the learning rate (the
// schedule's at step 0 unless --learning_rate). The data augmentation and the input pipeline
// are not run. --image_size, --depth_multiplier, --num_classes and --optimizer are refused
// with it (the config sets them), and so is --bound 1 (the bound below knows the convolutions
// of ssd_mobilenet_v1 only): the bound's fields are null. --print_variables 1 lists every
// trainable variable with its shape on stderr after the first step (to check a peer's model).
//
// The built-in model (ssd_mobilenet_v1_coco.config's `ssd` message): MobileNet v1 to
// Conv2d_13_pointwise (depth_multiplier 1.0, min_depth 16, batch norm with decay 0.9997 and
// scale, ReLU6, L2 4e-5 on every conv's weights), feature maps from Conv2d_11_pointwise and
// Conv2d_13_pointwise plus four extra layers (1x1 then 3x3 stride 2: 512, 256, 256, 128); SSD
// anchors (6 layers, scales 0.2 to 0.95, aspect ratios 1, 2, 1/2, 3, 1/3, 3 boxes in the lowest
// layer: 1,917 anchors at 300 x 300); a convolutional box predictor with 1x1 kernels, no
// dropout; faster_rcnn box coder, argmax matcher (0.5, 0.5, force_match_for_each_row), IoU
// similarity; weighted smooth L1 and weighted sigmoid losses, hard example mining (3,000
// examples, IoU 0.99, classification loss, 3 negatives per positive), losses normalized by the
// number of matches; sigmoid scores, batch multiclass NMS with score threshold 1e-8, IoU 0.6,
// 100 per class and 100 in all.
//
// Inputs: a pool of P batches (default 2), cycled: images [B, S, S, 3] uniform in [0, 255), and
// per image 1 to 6 boxes of uniform classes among C (default 90), from a fixed seed.
//
// A training step: provide_groundtruth, preprocess, predict(kTrain), loss, the regularization
// loss (slim's L2 of the weights), the gradients of their sum with respect to every trainable
// variable, and the optimizer's update of each: RMSPropOptimizer as the sample config (decay
// 0.9, momentum 0.9, epsilon 1.0) or MomentumOptimizer (0.9), at a constant learning rate
// (default 0.004). An inference step, under NoGradScope: preprocess, predict(kEval),
// postprocess. `warmup` untimed steps then `steps` timed ones of each kind, on the cpu backend
// with N threads; the step's phases are timed apart (the backend synchronized at each border):
//   train: forward_ms (preprocess + predict), loss_ms (loss(): target assignment and hard
//          example mining on the host, the per-anchor losses), regularization_ms (the L2 terms
//          and the sum), backward_ms (gradients()), update_ms (the optimizer on every variable);
//   infer: forward_ms (preprocess + predict), postprocess_ms (decoding, score conversion, NMS).
// Each phase is the median over the timed steps, as is the step; the phases of a step need not
// add up to the step's median.
// Then, with --bound 1 (the default), in the same process at the same thread count, the bound
// of the step's unavoidable work (bench_bound.h): raw oneDNN convolutions of every conv of the
// net (forward, backward data except on the images, backward weights; depthwise ones grouped)
// in NHWC and in the layout oneDNN prefers, and the FMA peak at the widest vectors. One JSON line:
//   {"framework": "trainyard", "workload": "ssd_mobilenet_v1" (with --config the config file's
//    name without .config), "config" (its path, or null), "threads", "batch_size",
//    "image_size", "image_width", "num_classes", "steps", "optimizer", "learning_rate", "train":
//    {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "forward_ms", "loss_ms",
//    "regularization_ms", "backward_ms", "update_ms", "first_loss", "last_loss"}, "infer":
//    {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "forward_ms", "postprocess_ms",
//    "detections"}, "conv_bound_ms", "conv_bound_passes_ms", "conv_bound_any_ms",
//    "infer_conv_bound_ms", "step_gflop", "gflops", "fma_peak_gflops", "fraction_of_fma_peak",
//    "peak_rss_mb"}
// step_gflop counts the training step's convolutions (2 FLOPs per multiply-add); null with
// --config, as the bound's fields.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bench_bound.h"
#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
#include "trainyard/core/config.h"
#include "trainyard/core/learning_rate_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/detection_model.h"
#include "trainyard/ops.h"
#include "trainyard/optimizer.h"
#include "trainyard/tensor.h"
#include "trainyard/testing.h"

namespace {

using trainyard::bench::Conv;
using trainyard::bench::json_number;
using trainyard::bench::now_seconds;
using trainyard::bench::percentile;
using trainyard::bench::process_cpu_seconds;
using trainyard::bench::SplitMix64;
using Opts = std::map<std::string, trainyard::OptionValue>;

struct Args {
  int threads = 1;
  int64_t batch = 8;
  int steps = 5;
  int warmup = 2;
  int64_t image_size = 300;   // the height: fixed_shape_resizer's with --config
  int64_t image_width = 300;  // image_size, or fixed_shape_resizer's width with --config
  double depth_multiplier = 1.0;
  int64_t num_classes = 90;
  int64_t pool = 2;
  std::string optimizer = "rmsprop";  // with --config, the optimizer's class
  double learning_rate = 0.004;
  uint64_t seed = 1;
  bool bound = true;
  std::string config;  // a pipeline config, or empty for the built-in ssd_mobilenet_v1
  bool print_variables = false;
  bool batch_given = false, learning_rate_given = false;
};

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_ssd: " << message
            << "\nusage: bench_ssd [--threads N] [--batch B] [--steps N] [--warmup N] "
               "[--image_size S] [--depth_multiplier D] [--num_classes C] [--pool P] "
               "[--optimizer rmsprop|momentum] [--learning_rate LR] [--seed S] [--bound 0|1]\n"
               "       bench_ssd --config PIPELINE_CONFIG [--threads N] [--batch B] [--steps N] "
               "[--warmup N] [--pool P] [--learning_rate LR] [--seed S] [--print_variables 0|1]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> recipe_sets;  // flags given that --config sets
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--threads") {
        a.threads = std::stoi(value);
      } else if (flag == "--batch") {
        a.batch = std::stoll(value);
        a.batch_given = true;
      } else if (flag == "--steps") {
        a.steps = std::stoi(value);
      } else if (flag == "--warmup") {
        a.warmup = std::stoi(value);
      } else if (flag == "--image_size") {
        a.image_size = a.image_width = std::stoll(value);
        recipe_sets.push_back(flag);
      } else if (flag == "--depth_multiplier") {
        a.depth_multiplier = std::stod(value);
        recipe_sets.push_back(flag);
      } else if (flag == "--num_classes") {
        a.num_classes = std::stoll(value);
        recipe_sets.push_back(flag);
      } else if (flag == "--pool") {
        a.pool = std::stoll(value);
      } else if (flag == "--optimizer") {
        a.optimizer = value;
        recipe_sets.push_back(flag);
      } else if (flag == "--learning_rate") {
        a.learning_rate = std::stod(value);
        a.learning_rate_given = true;
      } else if (flag == "--seed") {
        a.seed = std::stoull(value);
      } else if (flag == "--bound") {
        a.bound = std::stoi(value) != 0;
        if (a.bound) recipe_sets.push_back(flag + " 1");
      } else if (flag == "--config") {
        a.config = value;
      } else if (flag == "--print_variables") {
        a.print_variables = std::stoi(value) != 0;
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  if (!a.config.empty()) {
    if (!recipe_sets.empty()) {
      const std::string& flag = recipe_sets.front();
      usage(flag + " does not go with --config: " +
            (flag == "--bound 1"
                 ? std::string("the bound knows ssd_mobilenet_v1's convolutions only")
                 : "the pipeline config " + a.config + " sets it"));
    }
    a.bound = false;
  }
  if (a.threads < 1) usage("--threads must be >= 1");
  if (a.steps < 1 || a.warmup < 0) usage("bad step counts");
  if (a.batch < 1 || a.num_classes < 1 || a.pool < 1 || a.image_size < 33) {
    usage("--batch, --num_classes and --pool must be positive, --image_size at least 33");
  }
  if (a.optimizer != "rmsprop" && a.optimizer != "momentum") {
    usage("--optimizer is rmsprop or momentum, got " + a.optimizer);
  }
  return a;
}

// The `ssd` message of ssd_mobilenet_v1_coco.config, flattened to the plugin's dotted options.
Opts ssd_mobilenet_v1_coco(const Args& a) {
  Opts o;
  o["image_resizer"] = std::string("fixed_shape_resizer");
  o["image_resizer.fixed_shape_resizer.height"] = a.image_size;
  o["image_resizer.fixed_shape_resizer.width"] = a.image_size;
  o["box_coder"] = std::string("faster_rcnn_box_coder");
  o["matcher"] = std::string("argmax_matcher");
  o["matcher.argmax_matcher.matched_threshold"] = 0.5;
  o["matcher.argmax_matcher.unmatched_threshold"] = 0.5;
  o["matcher.argmax_matcher.force_match_for_each_row"] = true;
  o["similarity_calculator"] = std::string("iou_similarity");
  o["anchor_generator"] = std::string("ssd_anchor_generator");
  o["anchor_generator.ssd_anchor_generator.num_layers"] = int64_t{6};
  o["anchor_generator.ssd_anchor_generator.min_scale"] = 0.2;
  o["anchor_generator.ssd_anchor_generator.max_scale"] = 0.95;
  o["box_predictor"] = std::string("convolutional_box_predictor");
  for (const std::string prefix : {"feature_extractor.conv_hyperparams",
                                   "box_predictor.convolutional_box_predictor.conv_hyperparams"}) {
    o[prefix] = true;
    o[prefix + ".activation"] = std::string("RELU_6");
    o[prefix + ".regularizer"] = std::string("l2_regularizer");
    o[prefix + ".regularizer.l2_regularizer.weight"] = 0.00004;
    o[prefix + ".initializer"] = std::string("truncated_normal_initializer");
    o[prefix + ".initializer.truncated_normal_initializer.stddev"] = 0.03;
    o[prefix + ".batch_norm"] = true;
    o[prefix + ".batch_norm.scale"] = true;
    o[prefix + ".batch_norm.decay"] = 0.9997;
  }
  o["box_predictor.convolutional_box_predictor.use_dropout"] = false;
  o["box_predictor.convolutional_box_predictor.kernel_size"] = int64_t{1};
  o["feature_extractor"] = true;
  o["feature_extractor.type"] = std::string("ssd_mobilenet_v1");
  o["feature_extractor.depth_multiplier"] = a.depth_multiplier;
  o["feature_extractor.min_depth"] = int64_t{16};
  o["loss"] = true;
  o["loss.hard_example_miner"] = true;
  o["loss.hard_example_miner.num_hard_examples"] = int64_t{3000};
  o["loss.hard_example_miner.iou_threshold"] = 0.99;
  o["loss.hard_example_miner.loss_type"] = std::string("CLASSIFICATION");
  o["loss.hard_example_miner.max_negatives_per_positive"] = int64_t{3};
  o["post_processing"] = true;
  o["post_processing.batch_non_max_suppression"] = true;
  o["post_processing.batch_non_max_suppression.score_threshold"] = 1e-8;
  o["post_processing.batch_non_max_suppression.iou_threshold"] = 0.6;
  o["post_processing.batch_non_max_suppression.max_detections_per_class"] = int64_t{100};
  o["post_processing.batch_non_max_suppression.max_total_detections"] = int64_t{100};
  o["post_processing.score_converter"] = std::string("SIGMOID");
  return o;
}

// What the benchmark builds: the model, the optimizer, and `a` completed from the config.
struct Setup {
  std::shared_ptr<trainyard::DetectionModel> model;
  std::shared_ptr<trainyard::Optimizer> optimizer;
};

int64_t int_param(const Opts& params, const std::string& key, const std::string& config) {
  const auto it = params.find(key);
  if (it == params.end() || !std::holds_alternative<int64_t>(it->second)) {
    throw std::runtime_error(config + ": the model sets no integer " + key +
                             " (bench_ssd takes a fixed_shape_resizer)");
  }
  return std::get<int64_t>(it->second);
}

// The built-in ssd_mobilenet_v1_coco, or the model and optimizer of --config as the trainer
// builds them; fills in `a`'s image size, class count, batch, optimizer and learning rate from
// the config.
Setup make_setup(Args& a, const trainyard::PluginRegistry& registry) {
  Setup s;
  if (a.config.empty()) {
    s.model = registry.create<trainyard::DetectionModel>(trainyard::ClassKind::kDetectionModel,
                                                         "SSDMetaArch", ssd_mobilenet_v1_coco(a));
    s.optimizer =
        a.optimizer == "rmsprop"
            ? registry.create<trainyard::Optimizer>(
                  trainyard::ClassKind::kOptimizer, "RMSPropOptimizer",
                  {{"decay", 0.9}, {"momentum", 0.9}, {"epsilon", 1.0}})
            : registry.create<trainyard::Optimizer>(trainyard::ClassKind::kOptimizer,
                                                    "MomentumOptimizer", {{"momentum", 0.9}});
    return s;
  }
  trainyard::load_config_dialects(registry);
  const trainyard::config::Pipeline p = trainyard::load_pipeline_config(a.config);
  const Opts params = trainyard::plugin_params(p.model(), "model");
  if (p.model().class_().empty() || p.train_config().optimizer().class_().empty()) {
    throw std::runtime_error(a.config + ": bench_ssd needs the model's and the optimizer's class");
  }
  a.image_size = int_param(params, "image_resizer.fixed_shape_resizer.height", a.config);
  a.image_width = int_param(params, "image_resizer.fixed_shape_resizer.width", a.config);
  a.num_classes = p.num_classes();
  if (!a.batch_given) a.batch = p.train_config().batch_size();
  if (!a.learning_rate_given) {
    a.learning_rate = trainyard::learning_rate_from_config(p.train_config())->at(0);
  }
  a.optimizer = p.train_config().optimizer().class_();
  s.model = registry.create<trainyard::DetectionModel>(trainyard::ClassKind::kDetectionModel,
                                                       p.model().class_(), params);
  s.optimizer = registry.create<trainyard::Optimizer>(
      trainyard::ClassKind::kOptimizer, a.optimizer,
      trainyard::plugin_params(p.train_config().optimizer(), "train_config.optimizer"));
  return s;
}

struct Example {
  trainyard::Tensor images;                 // [B, S, S, 3] f32 in [0, 255)
  std::vector<std::vector<float>> boxes;    // per image N_i x 4, normalized
  std::vector<std::vector<float>> one_hot;  // per image N_i x C
};

std::vector<Example> make_pool(const Args& a, trainyard::Backend& backend) {
  SplitMix64 rng(a.seed * 1000003 + 41);
  const int64_t h = a.image_size, w = a.image_width;
  std::vector<Example> pool;
  for (int64_t p = 0; p < a.pool; ++p) {
    Example e;
    std::vector<float> pixels(static_cast<std::size_t>(a.batch * h * w * 3));
    for (float& v : pixels) v = rng.uniform(0.0f, 255.0f);
    e.images = trainyard::Tensor::from_vector(backend, trainyard::Shape{a.batch, h, w, 3}, pixels);
    for (int64_t i = 0; i < a.batch; ++i) {
      const int64_t n = 1 + static_cast<int64_t>(rng.next() % 6);
      std::vector<float> boxes, classes(static_cast<std::size_t>(n * a.num_classes), 0.0f);
      for (int64_t r = 0; r < n; ++r) {
        const float ymin = rng.uniform(0.0f, 0.8f), xmin = rng.uniform(0.0f, 0.8f);
        const float h = rng.uniform(0.05f, 1.0f - ymin), w = rng.uniform(0.05f, 1.0f - xmin);
        boxes.insert(boxes.end(), {ymin, xmin, ymin + h, xmin + w});
        classes[static_cast<std::size_t>(r * a.num_classes) +
                rng.next() % static_cast<uint64_t>(a.num_classes)] = 1.0f;
      }
      e.boxes.push_back(std::move(boxes));
      e.one_hot.push_back(std::move(classes));
    }
    pool.push_back(std::move(e));
  }
  return pool;
}

trainyard::Groundtruth groundtruth(const Example& e, trainyard::Backend& backend,
                                   int64_t num_classes) {
  trainyard::Groundtruth gt;
  for (std::size_t i = 0; i < e.boxes.size(); ++i) {
    const auto n = static_cast<int64_t>(e.boxes[i].size() / 4);
    gt.boxes.push_back(trainyard::Tensor::from_vector(backend, trainyard::Shape{n, 4}, e.boxes[i]));
    gt.classes.push_back(
        trainyard::Tensor::from_vector(backend, trainyard::Shape{n, num_classes}, e.one_hot[i]));
  }
  return gt;
}

double scalar(const trainyard::Tensor& t) {
  trainyard::NoGradScope no_grad;
  return trainyard::ops::cast(t, trainyard::DType::kF64).to_vector<double>()[0];
}

// Every convolution of the net at `a`'s shapes, as SAME pads them (one pixel each side for a
// 3x3 kernel gives SAME's output sizes here).
std::vector<Conv> net_convs(const Args& a) {
  const int64_t b = a.batch;
  auto depth = [&](int64_t d) {
    return std::max(static_cast<int64_t>(static_cast<double>(d) * a.depth_multiplier), int64_t{16});
  };
  std::vector<Conv> convs;
  int64_t size = a.image_size;
  convs.push_back({b, size, size, 3, 3, depth(32), 2, 1, false});  // Conv2d_0
  size = (size + 2 - 3) / 2 + 1;
  int64_t channels = depth(32);
  // Conv2d_1 .. Conv2d_13: depthwise 3x3 (stride), pointwise 1x1 (depth).
  const std::array<std::pair<int64_t, int64_t>, 13> blocks = {{{1, 64},
                                                               {2, 128},
                                                               {1, 128},
                                                               {2, 256},
                                                               {1, 256},
                                                               {2, 512},
                                                               {1, 512},
                                                               {1, 512},
                                                               {1, 512},
                                                               {1, 512},
                                                               {1, 512},
                                                               {2, 1024},
                                                               {1, 1024}}};
  std::vector<std::pair<int64_t, int64_t>> maps;  // (size, depth) of each feature map
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto [stride, d] = blocks[i];
    convs.push_back({b, size, size, channels, 3, channels, stride, 1, true, channels});
    size = (size + 2 - 3) / stride + 1;
    convs.push_back({b, size, size, channels, 1, depth(d), 1, 0});
    channels = depth(d);
    if (i == 10 || i == 12) maps.emplace_back(size, channels);  // Conv2d_11, Conv2d_13
  }
  for (const int64_t d : {512, 256, 256, 128}) {
    convs.push_back({b, size, size, channels, 1, depth(d / 2), 1, 0});
    convs.push_back({b, size, size, depth(d / 2), 3, depth(d), 2, 1});
    size = (size + 2 - 3) / 2 + 1;
    channels = depth(d);
    maps.emplace_back(size, channels);
  }
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const auto [s, d] = maps[i];
    const int64_t anchors = i == 0 ? 3 : 6;
    convs.push_back({b, s, s, d, 1, anchors * 4, 1, 0});                    // box encodings
    convs.push_back({b, s, s, d, 1, anchors * (a.num_classes + 1), 1, 0});  // class logits
  }
  return convs;
}

template <class T>
double median_of(const std::vector<T>& v) {
  return percentile(std::vector<double>(v.begin(), v.end()), 0.5);
}

int run(Args a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  const std::shared_ptr<trainyard::Backend> backend = registry.create<trainyard::Backend>(
      trainyard::ClassKind::kBackend, "cpu", {{"num_threads", int64_t{a.threads}}});
  const Setup setup = make_setup(a, registry);
  const std::shared_ptr<trainyard::DetectionModel>& model = setup.model;
  const std::shared_ptr<trainyard::Optimizer>& optimizer = setup.optimizer;
  trainyard::testing::FakeModelContext ctx(*backend, a.num_classes, a.seed, a.seed);
  const std::vector<Example> pool = make_pool(a, *backend);
  trainyard::Backend& be = *backend;

  // Training.
  std::vector<trainyard::Variable*> trainable;
  std::vector<std::vector<trainyard::Variable*>> slots;
  std::vector<double> step_s, cpu_s, forward_s, loss_s, reg_s, backward_s, update_s;
  double first_loss = 0, last_loss = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const Example& e = pool[static_cast<std::size_t>(s) % pool.size()];
    be.synchronize();
    const double t0 = now_seconds(), c0 = process_cpu_seconds();
    model->provide_groundtruth(groundtruth(e, be, a.num_classes));
    const trainyard::PreprocessedImages pre = model->preprocess(ctx, e.images);
    const trainyard::TensorDict prediction = model->predict(ctx, pre, trainyard::Mode::kTrain);
    be.synchronize();
    const double t1 = now_seconds();
    const trainyard::TensorDict losses = model->loss(ctx, prediction, pre.true_image_shapes);
    trainyard::Tensor total = trainyard::ops::add(losses.at("Loss/localization_loss"),
                                                  losses.at("Loss/classification_loss"));
    be.synchronize();
    const double t2 = now_seconds();
    const trainyard::Tensor regularization = ctx.store().regularization_loss();
    if (regularization.defined()) total = trainyard::ops::add(total, regularization);
    last_loss = scalar(total);
    const double t3 = now_seconds();
    if (trainable.empty()) {
      trainable = ctx.store().trainable();
      for (trainyard::Variable* v : trainable) {
        std::vector<trainyard::Variable*>& mine = slots.emplace_back();
        for (const trainyard::SlotSpec& slot : optimizer->slots()) {
          trainyard::VariableSpec spec;
          spec.name = v->name() + "/" + slot.name;
          spec.shape = v->spec().shape;
          spec.dtype = v->spec().dtype;
          spec.initializer = slot.initializer;
          spec.trainable = false;
          spec.collections = trainyard::kGlobalVariables;
          mine.push_back(&ctx.variable(spec));
        }
      }
      if (a.print_variables) {
        int64_t total_size = 0;
        for (const trainyard::Variable* v : trainable) {
          std::cerr << v->name() << " " << v->spec().shape.to_string() << "\n";
          total_size += v->spec().shape.num_elements();
        }
        std::cerr << trainable.size() << " trainable variables, " << total_size << " values\n";
      }
    }
    std::vector<trainyard::Tensor> sources;
    for (trainyard::Variable* v : trainable) sources.push_back(v->value());
    const std::vector<trainyard::Tensor> grads = trainyard::gradients(total, sources);
    be.synchronize();
    const double t4 = now_seconds();
    {
      trainyard::NoGradScope no_grad;
      for (std::size_t i = 0; i < trainable.size(); ++i) {
        optimizer->apply(*trainable[i], grads[i], slots[i], a.learning_rate, s);
      }
    }
    be.synchronize();
    const double t5 = now_seconds(), c5 = process_cpu_seconds();
    if (s == 0) first_loss = last_loss;
    if (s < a.warmup) continue;
    step_s.push_back(t5 - t0);
    cpu_s.push_back(c5 - c0);
    forward_s.push_back(t1 - t0);
    loss_s.push_back(t2 - t1);
    reg_s.push_back(t3 - t2);
    backward_s.push_back(t4 - t3);
    update_s.push_back(t5 - t4);
  }

  // Inference.
  std::vector<double> infer_s, infer_cpu_s, infer_forward_s, post_s, detections;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const Example& e = pool[static_cast<std::size_t>(s) % pool.size()];
    trainyard::NoGradScope no_grad;
    be.synchronize();
    const double t0 = now_seconds(), c0 = process_cpu_seconds();
    const trainyard::PreprocessedImages pre = model->preprocess(ctx, e.images);
    const trainyard::TensorDict prediction = model->predict(ctx, pre, trainyard::Mode::kEval);
    be.synchronize();
    const double t1 = now_seconds();
    const trainyard::TensorDict d = model->postprocess(ctx, prediction, pre.true_image_shapes);
    const std::vector<float> counts = d.at("num_detections").to_vector<float>();
    const double t2 = now_seconds(), c2 = process_cpu_seconds();
    if (s < a.warmup) continue;
    infer_s.push_back(t2 - t0);
    infer_cpu_s.push_back(c2 - c0);
    infer_forward_s.push_back(t1 - t0);
    post_s.push_back(t2 - t1);
    double sum = 0;
    for (float c : counts) sum += c;
    detections.push_back(sum / static_cast<double>(counts.size()));
  }
  const double rss = trainyard::bench::peak_rss_mb();  // before the bound's buffers

  double step_flop = 0;
  if (a.config.empty()) {
    for (const Conv& c : net_convs(a)) step_flop += c.flops() * (c.input_gradient ? 3 : 2);
  }
  double conv_bound = 0, conv_bound_any = 0, fma_peak = 0;
  std::array<double, 3> passes{};
  if (a.bound) {
    omp_set_num_threads(a.threads);
    for (const Conv& c : net_convs(a)) {
      const std::array<double, 3> nhwc = trainyard::bench::time_conv(c, false, 5);
      const std::array<double, 3> any = trainyard::bench::time_conv(c, true, 5);
      for (int i = 0; i < 3; ++i) {
        passes[static_cast<std::size_t>(i)] += nhwc[static_cast<std::size_t>(i)];
        conv_bound += nhwc[static_cast<std::size_t>(i)];
        conv_bound_any += any[static_cast<std::size_t>(i)];
      }
    }
    fma_peak = trainyard::bench::fma_peak_gflops(a.threads);
  }
  auto bound_number = [&](double v) { return a.bound ? json_number(v) : std::string("null"); };
  auto config_number = [&](double v) {
    return a.config.empty() ? json_number(v) : std::string("null");
  };
  const std::string workload =
      a.config.empty() ? "ssd_mobilenet_v1" : std::filesystem::path(a.config).stem().string();
  const std::string config_json = a.config.empty() ? "null" : "\"" + a.config + "\"";

  const double train_median = median_of(step_s), infer_median = median_of(infer_s);
  const double gflops = step_flop / train_median * 1e-9;
  const double images = static_cast<double>(a.batch);
  std::printf(
      "{\"framework\": \"trainyard\", \"workload\": \"%s\", \"config\": %s, \"threads\": %d, "
      "\"batch_size\": %lld, \"image_size\": %lld, \"image_width\": %lld, \"num_classes\": %lld, "
      "\"steps\": %d, \"optimizer\": \"%s\", \"learning_rate\": %s, "
      "\"train\": {\"median_ms\": %s, \"p90_ms\": %s, \"images_per_sec\": %s, \"cpu_ms\": %s, "
      "\"forward_ms\": %s, \"loss_ms\": %s, \"regularization_ms\": %s, \"backward_ms\": %s, "
      "\"update_ms\": %s, \"first_loss\": %s, \"last_loss\": %s}, "
      "\"infer\": {\"median_ms\": %s, \"p90_ms\": %s, \"images_per_sec\": %s, \"cpu_ms\": %s, "
      "\"forward_ms\": %s, \"postprocess_ms\": %s, \"detections\": %s}, "
      "\"conv_bound_ms\": %s, \"conv_bound_passes_ms\": [%s, %s, %s], \"conv_bound_any_ms\": %s, "
      "\"infer_conv_bound_ms\": %s, \"step_gflop\": %s, \"gflops\": %s, \"fma_peak_gflops\": %s, "
      "\"fraction_of_fma_peak\": %s, \"peak_rss_mb\": %s}\n",
      workload.c_str(), config_json.c_str(), a.threads, static_cast<long long>(a.batch),
      static_cast<long long>(a.image_size), static_cast<long long>(a.image_width),
      static_cast<long long>(a.num_classes), a.steps, a.optimizer.c_str(),
      json_number(a.learning_rate).c_str(), json_number(train_median * 1e3).c_str(),
      json_number(percentile(step_s, 0.9) * 1e3).c_str(),
      json_number(images / train_median).c_str(), json_number(median_of(cpu_s) * 1e3).c_str(),
      json_number(median_of(forward_s) * 1e3).c_str(), json_number(median_of(loss_s) * 1e3).c_str(),
      json_number(median_of(reg_s) * 1e3).c_str(), json_number(median_of(backward_s) * 1e3).c_str(),
      json_number(median_of(update_s) * 1e3).c_str(), json_number(first_loss).c_str(),
      json_number(last_loss).c_str(), json_number(infer_median * 1e3).c_str(),
      json_number(percentile(infer_s, 0.9) * 1e3).c_str(),
      json_number(images / infer_median).c_str(), json_number(median_of(infer_cpu_s) * 1e3).c_str(),
      json_number(median_of(infer_forward_s) * 1e3).c_str(),
      json_number(median_of(post_s) * 1e3).c_str(), json_number(median_of(detections)).c_str(),
      bound_number(conv_bound * 1e3).c_str(), bound_number(passes[0] * 1e3).c_str(),
      bound_number(passes[1] * 1e3).c_str(), bound_number(passes[2] * 1e3).c_str(),
      bound_number(conv_bound_any * 1e3).c_str(), bound_number(passes[0] * 1e3).c_str(),
      config_number(step_flop * 1e-9).c_str(), config_number(gflops).c_str(),
      bound_number(fma_peak).c_str(), bound_number(fma_peak > 0 ? gflops / fma_peak : 0).c_str(),
      json_number(rss).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_ssd: " << e.what() << "\n";
    return 1;
  }
}
