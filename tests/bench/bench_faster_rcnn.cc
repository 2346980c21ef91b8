// Training and inference benchmark of the Faster R-CNN detector: the detection_models plugin's
// FasterRCNNMetaArch driven through its DetectionModel calls on synthetic in-memory batches, for
// comparison with torchvision's FasterRCNN of the same shape
// (tests/bench/peers/faster_rcnn_torchvision.py; tests/bench/peers/run_faster_rcnn_bench.sh
// runs both), and a check that a long training run's memory does not grow.
//
//   bench_faster_rcnn [--config mobilenet|resnet50|resnet101|rfcn_resnet50|rfcn_resnet101]
//                     [--threads N] [--batch B] [--steps N]
//                     [--infer_steps N] [--warmup N] [--image_size S] [--num_classes C]
//                     [--max_proposals P] [--second_stage_batch_size R] [--pool P]
//                     [--learning_rate LR] [--clip_gradient_norm G] [--seed S] [--bound 0|1]
//                     [--memory_steps N] [--memory_every K]
//
// The two configurations (defaults in brackets; the flags override them):
//   resnet50   faster_rcnn_resnet50_coco.config's `faster_rcnn` message as it is: images
//              [600 x 600] (keep_aspect_ratio_resizer 600 / 1024 leaves them as they are),
//              ResNet v1 50 to block3 at first_stage_features_stride 16 (batch norm frozen, as
//              batch_norm_trainable false), grid anchors 256 x 256 at stride 16 with scales
//              0.25, 0.5, 1, 2 and aspect ratios 0.5, 1, 2 (12 a location: 38 x 38 x 12 =
//              17,328 at 600, those inside the image kept in training), the RPN's 3x3 512
//              convolution, first-stage NMS at 0.7 keeping [300] proposals, a minibatch of 256 at
//              0.5, crop_and_resize 14 then max pool 2 / 2, block4 (stride 1) and average pool,
//              the Mask R-CNN box predictor, second_stage_batch_size [64] at 0.25, softmax
//              post-processing with NMS 0.6, 100 per class, 300 in all; loss weights 2 / 1 / 2 /
//              1; [90] classes, batch [1].
//   resnet101  the same on ResNet v1 101 (block3 of 23 units): faster_rcnn_resnet101_coco.config.
//   rfcn_resnet101, rfcn_resnet50
//              R-FCN, rfcn_resnet101_coco.config's `faster_rcnn` message (the ResNet configuration
//              with its second stage replaced): block4 (stride 1) on the whole first-stage
//              feature map, then the rfcn_box_predictor: a 1x1 convolution to 1024, 1x1
//              convolutions to 3 x 3 x 4 x C location maps and 3 x 3 x (C + 1) class maps, each
//              pooled per proposal by position_sensitive_crop_regions (crop 18 x 18, 3 x 3 bins,
//              global pool); no crop_and_resize. rfcn_resnet50 on ResNet v1 50, to set beside
//              resnet50.
//   mobilenet  the reduced configuration, configs/faster_rcnn_mobilenet_v1_synth_shapes.config's
//              model: the same with faster_rcnn_mobilenet_v1 (MobileNet v1 to
//              Conv2d_11_pointwise, batch norm in training mode as batch_norm_trainable true;
//              Conv2d_12 and Conv2d_13 separable convolutions of 1024 on the 7 x 7 crops),
//              images [160 x 160] (keep_aspect_ratio_resizer 160 / 160; a 10 x 10 map, 1,200
//              anchors), base anchor 64 x 64 (16 to 128 pixels), [100] proposals,
//              second_stage_batch_size [32], 100 detections in all; [4] classes, batch [8].
//
// Inputs: a pool of P batches (default 2), cycled: images [B, S, S, 3] uniform in [0, 255), and
// per image 1 to 6 boxes of uniform classes among C, from a fixed seed.
//
// A training step (the sample config's train step): the step's seed (the samplers' draws),
// provide_groundtruth, preprocess, predict(kTrain), loss (the four losses, weighted), the
// regularization loss if any (none in these configurations: their weight decays are 0), the
// gradients of the sum with respect to every trainable variable, each clipped to norm 10 on its
// own (the sample's gradient_clipping_by_norm; --clip_gradient_norm, 0: none), and
// MomentumOptimizer's update (momentum 0.9) of each at a constant learning rate (default 0.0003,
// the sample's initial rate). Without the clipping the ResNet-50 configuration's first update
// (from random weights and frozen batch norm: a first classification loss near 1e5) makes the
// losses NaN and the second stage then gets no proposals. An inference step, under NoGradScope:
// preprocess, predict(kEval), postprocess. `warmup` untimed steps then `steps` timed training steps
// and `infer_steps` (default `steps`) timed inference steps, on the cpu backend with N threads;
// phases timed apart (the backend synchronized at each border):
//   train: forward_ms (preprocess + predict: the extractor, the RPN, proposal decoding and NMS,
//          the second stage's sampling, crop_and_resize, pooling, the box classifier),
//          loss_ms (target assignment, the first stage's minibatch, the losses), backward_ms
//          (gradients()), update_ms (the optimizer on every variable);
//   infer: forward_ms (preprocess + predict), postprocess_ms (decoding, softmax, NMS).
// Medians over the timed steps, as is the step's; rois is the median number of proposals the
// second stage ran on per image.
//
// With --bound 1 (the default), in the same process at the same thread count: raw oneDNN
// convolutions of every conv of the net at the step's shapes (the second stage's at the ROIs of
// the last step; forward, backward data except on the images, backward weights; depthwise ones
// grouped) in NHWC, and the AVX2 and AVX-512 FMA peaks.
//
// With --memory_steps N > 0, instead of the timing: N training steps of the configuration, the
// process's resident memory (VmRSS) read every K steps (default N / 20), and a JSON line with
// the samples, the growth from the sample at 10% of the run to the last, and the least-squares
// slope over the second half in MB per 1,000 steps.
//
// One JSON line (the timing):
//   {"framework": "trainyard", "workload": "faster_rcnn_<config>", "threads", "batch_size",
//    "image_size", "num_classes", "max_proposals", "second_stage_batch_size", "steps",
//    "train": {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "forward_ms", "loss_ms",
//    "backward_ms", "update_ms", "rois", "first_loss", "last_loss", "first_losses"},
//    "infer": {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "forward_ms",
//    "postprocess_ms", "rois", "detections"}, "conv_bound_ms", "conv_bound_passes_ms",
//    "infer_conv_bound_ms", "step_gflop", "infer_gflop", "gflops", "fma_peak_gflops",
//    "fma512_peak_gflops", "peak_rss_mb"}
// step_gflop counts the training step's convolutions (2 FLOPs per multiply-add).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_bound.h"
#include "bench_util.h"
#include "trainyard/autodiff.h"
#include "trainyard/backend.h"
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
  std::string config = "mobilenet";
  int threads = 1;
  int64_t batch = -1;  // -1: the configuration's
  int steps = 5;
  int infer_steps = -1;  // -1: steps
  int warmup = 2;
  int64_t image_size = -1;
  int64_t num_classes = -1;
  int64_t max_proposals = -1;
  int64_t second_stage_batch_size = -1;
  int64_t pool = 2;
  double learning_rate = 0.0003;
  double clip_gradient_norm = 10.0;
  uint64_t seed = 1;
  bool bound = true;
  int memory_steps = 0;
  int memory_every = 0;
};

// The ResNet configurations' depth (50, 101), 0 for any other; rfcn: R-FCN's second stage.
int resnet_depth(const Args& a) {
  for (const int depth : {50, 101}) {
    const std::string name = "resnet" + std::to_string(depth);
    if (a.config == name || a.config == "rfcn_" + name) return depth;
  }
  return 0;
}
bool rfcn(const Args& a) { return a.config.rfind("rfcn_", 0) == 0; }

[[noreturn]] void usage(const std::string& message) {
  std::cerr << "bench_faster_rcnn: " << message
            << "\nusage: bench_faster_rcnn [--config mobilenet|resnet50|resnet101|rfcn_resnet50|"
               "rfcn_resnet101] [--threads N] [--batch B] "
               "[--steps N] [--infer_steps N] [--warmup N] [--image_size S] [--num_classes C] "
               "[--max_proposals P] [--second_stage_batch_size R] [--pool P] "
               "[--learning_rate LR] [--clip_gradient_norm G] [--seed S] [--bound 0|1] "
               "[--memory_steps N] "
               "[--memory_every K]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--config") {
        a.config = value;
      } else if (flag == "--threads") {
        a.threads = std::stoi(value);
      } else if (flag == "--batch") {
        a.batch = std::stoll(value);
      } else if (flag == "--steps") {
        a.steps = std::stoi(value);
      } else if (flag == "--infer_steps") {
        a.infer_steps = std::stoi(value);
      } else if (flag == "--warmup") {
        a.warmup = std::stoi(value);
      } else if (flag == "--image_size") {
        a.image_size = std::stoll(value);
      } else if (flag == "--num_classes") {
        a.num_classes = std::stoll(value);
      } else if (flag == "--max_proposals") {
        a.max_proposals = std::stoll(value);
      } else if (flag == "--second_stage_batch_size") {
        a.second_stage_batch_size = std::stoll(value);
      } else if (flag == "--pool") {
        a.pool = std::stoll(value);
      } else if (flag == "--learning_rate") {
        a.learning_rate = std::stod(value);
      } else if (flag == "--clip_gradient_norm") {
        a.clip_gradient_norm = std::stod(value);
      } else if (flag == "--seed") {
        a.seed = std::stoull(value);
      } else if (flag == "--bound") {
        a.bound = std::stoi(value) != 0;
      } else if (flag == "--memory_steps") {
        a.memory_steps = std::stoi(value);
      } else if (flag == "--memory_every") {
        a.memory_every = std::stoi(value);
      } else {
        usage("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      usage("bad value '" + value + "' for " + flag);
    }
  }
  const bool resnet = a.config != "mobilenet";
  if (resnet && resnet_depth(a) == 0) {
    usage("--config is mobilenet, resnet50, resnet101, rfcn_resnet50 or rfcn_resnet101, got " +
          a.config);
  }
  if (a.batch < 0) a.batch = resnet ? 1 : 8;
  if (a.image_size < 0) a.image_size = resnet ? 600 : 160;
  if (a.num_classes < 0) a.num_classes = resnet ? 90 : 4;
  if (a.max_proposals < 0) a.max_proposals = resnet ? 300 : 100;
  if (a.second_stage_batch_size < 0) a.second_stage_batch_size = resnet ? 64 : 32;
  if (a.infer_steps < 0) a.infer_steps = a.steps;
  if (a.threads < 1) usage("--threads must be >= 1");
  if (a.clip_gradient_norm < 0) usage("--clip_gradient_norm must be >= 0 (0: no clipping)");
  if (a.steps < 1 || a.infer_steps < 1 || a.warmup < 0 || a.memory_steps < 0 ||
      a.memory_every < 0) {
    usage("bad step counts");
  }
  if (a.batch < 1 || a.num_classes < 1 || a.pool < 1 || a.image_size < 33 || a.max_proposals < 1 ||
      a.second_stage_batch_size < 1) {
    usage(
        "--batch, --num_classes, --pool, --max_proposals and --second_stage_batch_size must be "
        "positive, --image_size at least 33");
  }
  return a;
}

// The process's resident memory now (VmRSS of /proc/self/status), MB; -1 without /proc.
double current_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return -1;
}

// The `faster_rcnn` message of faster_rcnn_resnet50_coco.config flattened to the plugin's
// dotted options (as the converter writes them), with `a`'s sizes; for --config mobilenet the
// reduced configuration's changes (configs/faster_rcnn_mobilenet_v1_synth_shapes.config), for
// resnet101 faster_rcnn_resnet101_coco.config's extractor, for rfcn_* rfcn_resnet101_coco.config's
// second stage.
Opts faster_rcnn_options(const Args& a) {
  const bool resnet = a.config != "mobilenet";
  Opts o;
  o["image_resizer"] = std::string("keep_aspect_ratio_resizer");
  o["image_resizer.keep_aspect_ratio_resizer.min_dimension"] = a.image_size;
  o["image_resizer.keep_aspect_ratio_resizer.max_dimension"] =
      resnet ? std::max<int64_t>(1024, a.image_size) : a.image_size;
  o["feature_extractor"] = true;
  o["feature_extractor.type"] =
      resnet ? "faster_rcnn_resnet" + std::to_string(resnet_depth(a)) : "faster_rcnn_mobilenet_v1";
  o["feature_extractor.first_stage_features_stride"] = int64_t{16};
  if (!resnet) o["feature_extractor.batch_norm_trainable"] = true;
  const std::string g = "first_stage_anchor_generator.grid_anchor_generator";
  o["first_stage_anchor_generator"] = std::string("grid_anchor_generator");
  if (!resnet) {
    o[g + ".height"] = int64_t{64};
    o[g + ".width"] = int64_t{64};
  }
  o[g + ".height_stride"] = int64_t{16};
  o[g + ".width_stride"] = int64_t{16};
  o[g + ".scales"] = std::vector<double>{0.25, 0.5, 1.0, 2.0};
  o[g + ".aspect_ratios"] = std::vector<double>{0.5, 1.0, 2.0};
  const std::string rpn = "first_stage_box_predictor_conv_hyperparams";
  o[rpn] = true;
  o[rpn + ".op"] = std::string("CONV");
  o[rpn + ".regularizer"] = std::string("l2_regularizer");
  o[rpn + ".regularizer.l2_regularizer.weight"] = 0.0;
  o[rpn + ".initializer"] = std::string("truncated_normal_initializer");
  o[rpn + ".initializer.truncated_normal_initializer.stddev"] = 0.01;
  o["first_stage_nms_score_threshold"] = 0.0;
  o["first_stage_nms_iou_threshold"] = 0.7;
  o["first_stage_max_proposals"] = a.max_proposals;
  o["first_stage_localization_loss_weight"] = 2.0;
  o["first_stage_objectness_loss_weight"] = 1.0;
  o["second_stage_batch_size"] = a.second_stage_batch_size;
  if (rfcn(a)) {
    const std::string p = "second_stage_box_predictor.rfcn_box_predictor";
    o["second_stage_box_predictor"] = std::string("rfcn_box_predictor");
    o[p + ".conv_hyperparams"] = true;
    o[p + ".conv_hyperparams.op"] = std::string("CONV");
    o[p + ".conv_hyperparams.regularizer"] = std::string("l2_regularizer");
    o[p + ".conv_hyperparams.regularizer.l2_regularizer.weight"] = 0.0;
    o[p + ".conv_hyperparams.initializer"] = std::string("truncated_normal_initializer");
    o[p + ".conv_hyperparams.initializer.truncated_normal_initializer.stddev"] = 0.01;
    o[p + ".crop_height"] = int64_t{18};
    o[p + ".crop_width"] = int64_t{18};
    o[p + ".num_spatial_bins_height"] = int64_t{3};
    o[p + ".num_spatial_bins_width"] = int64_t{3};
  } else {
    o["initial_crop_size"] = int64_t{14};
    o["maxpool_kernel_size"] = int64_t{2};
    o["maxpool_stride"] = int64_t{2};
    const std::string p = "second_stage_box_predictor.mask_rcnn_box_predictor";
    o["second_stage_box_predictor"] = std::string("mask_rcnn_box_predictor");
    const std::string fc = p + ".fc_hyperparams";
    o[fc] = true;
    o[fc + ".op"] = std::string("FC");
    o[fc + ".regularizer"] = std::string("l2_regularizer");
    o[fc + ".regularizer.l2_regularizer.weight"] = 0.0;
    o[fc + ".initializer"] = std::string("variance_scaling_initializer");
    o[fc + ".initializer.variance_scaling_initializer.factor"] = 1.0;
    o[fc + ".initializer.variance_scaling_initializer.uniform"] = true;
    o[fc + ".initializer.variance_scaling_initializer.mode"] = std::string("FAN_AVG");
    o[p + ".use_dropout"] = false;
    o[p + ".dropout_keep_probability"] = 1.0;
  }
  const std::string nms = "second_stage_post_processing.batch_non_max_suppression";
  o["second_stage_post_processing"] = true;
  o[nms] = true;
  o[nms + ".score_threshold"] = 0.0;
  o[nms + ".iou_threshold"] = 0.6;
  o[nms + ".max_detections_per_class"] = int64_t{100};
  o[nms + ".max_total_detections"] = int64_t{resnet ? 300 : 100};
  o["second_stage_post_processing.score_converter"] = std::string("SOFTMAX");
  o["second_stage_localization_loss_weight"] = 2.0;
  o["second_stage_classification_loss_weight"] = 1.0;
  return o;
}

struct Example {
  trainyard::Tensor images;                 // [B, S, S, 3] f32 in [0, 255)
  std::vector<std::vector<float>> boxes;    // per image N_i x 4, normalized
  std::vector<std::vector<float>> one_hot;  // per image N_i x C
};

std::vector<Example> make_pool(const Args& a, trainyard::Backend& backend) {
  SplitMix64 rng(a.seed * 1000003 + 43);
  const int64_t s = a.image_size;
  std::vector<Example> pool;
  for (int64_t p = 0; p < a.pool; ++p) {
    Example e;
    std::vector<float> pixels(static_cast<std::size_t>(a.batch * s * s * 3));
    for (float& v : pixels) v = rng.uniform(0.0f, 255.0f);
    e.images = trainyard::Tensor::from_vector(backend, trainyard::Shape{a.batch, s, s, 3}, pixels);
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

// SAME's output size of a stride-s convolution (ceil(n / s)); the Conv structs below pick the
// symmetric padding that gives it.
int64_t same(int64_t n, int64_t s) { return (n + s - 1) / s; }

// Every convolution of the first stage (extractor and RPN) at `a`'s shapes, and of the second
// stage on `rois` crops in all.
std::vector<Conv> net_convs(const Args& a, int64_t rois) {
  const int64_t b = a.batch;
  const int64_t anchors = 12;
  std::vector<Conv> convs;
  int64_t size = a.image_size;
  int64_t channels = 0;
  if (a.config == "mobilenet") {
    convs.push_back({b, size, size, 3, 3, 32, 2, 1, false});  // Conv2d_0
    size = same(size, 2);
    channels = 32;
    const std::array<std::pair<int64_t, int64_t>, 11> blocks = {{{1, 64},
                                                                 {2, 128},
                                                                 {1, 128},
                                                                 {2, 256},
                                                                 {1, 256},
                                                                 {2, 512},
                                                                 {1, 512},
                                                                 {1, 512},
                                                                 {1, 512},
                                                                 {1, 512},
                                                                 {1, 512}}};
    for (const auto& [stride, d] : blocks) {
      convs.push_back({b, size, size, channels, 3, channels, stride, 1, true, channels});
      size = same(size, stride);
      convs.push_back({b, size, size, channels, 1, d, 1, 0});
      channels = d;
    }
  } else {
    convs.push_back({b, size, size, 3, 7, 64, 2, 3, false});  // conv1
    size = same(same(size, 2), 2);                            // conv1, pool1
    channels = 64;
    // slim's bottleneck v1: the shortcut (a strided 1x1 when the depth changes), conv1 1x1,
    // conv2 3x3 with the unit's stride, conv3 1x1; the stride in each block's last unit, none
    // in block3's at output stride 16.
    struct Block {
      int64_t units, depth, stride;
    };
    const int64_t block3 = resnet_depth(a) == 101 ? 23 : 6;
    for (const Block& block : {Block{3, 256, 2}, Block{4, 512, 2}, Block{block3, 1024, 1}}) {
      for (int64_t u = 0; u < block.units; ++u) {
        const int64_t stride = u + 1 == block.units ? block.stride : 1;
        const int64_t bottleneck = block.depth / 4;
        const int64_t out = same(size, stride);
        if (channels != block.depth) {
          convs.push_back({b, size, size, channels, 1, block.depth, stride, 0});
        }
        convs.push_back({b, size, size, channels, 1, bottleneck, 1, 0});
        convs.push_back({b, size, size, bottleneck, 3, bottleneck, stride, 1});
        convs.push_back({b, out, out, bottleneck, 1, block.depth, 1, 0});
        channels = block.depth;
        size = out;
      }
    }
  }
  // The RPN: 3x3 to 512, then the 1x1 box and objectness predictors.
  convs.push_back({b, size, size, channels, 3, 512, 1, 1});
  convs.push_back({b, size, size, 512, 1, anchors * 4, 1, 0});
  convs.push_back({b, size, size, 512, 1, anchors * 2, 1, 0});
  if (rois < 1) return convs;
  const int64_t n = rois;
  if (a.config == "mobilenet") {
    // Conv2d_12_pointwise, Conv2d_13_pointwise: separable 3x3 (stride 2, then 1) to 1024 on the
    // 7 x 7 pooled crops.
    convs.push_back({n, 7, 7, channels, 3, channels, 2, 1, true, channels});
    convs.push_back({n, 4, 4, channels, 1, 1024, 1, 0});
    convs.push_back({n, 4, 4, 1024, 3, 1024, 1, 1, true, 1024});
    convs.push_back({n, 4, 4, 1024, 1, 1024, 1, 0});
  } else if (rfcn(a)) {
    // block4 at stride 1 on the whole feature map, then the predictor's three 1x1 convolutions.
    for (int64_t u = 0; u < 3; ++u) {
      if (u == 0) convs.push_back({b, size, size, channels, 1, 2048, 1, 0});
      convs.push_back({b, size, size, channels, 1, 512, 1, 0});
      convs.push_back({b, size, size, 512, 3, 512, 1, 1});
      convs.push_back({b, size, size, 512, 1, 2048, 1, 0});
      channels = 2048;
    }
    convs.push_back({b, size, size, 2048, 1, 1024, 1, 0});
    convs.push_back({b, size, size, 1024, 1, 9 * 4 * a.num_classes, 1, 0});
    convs.push_back({b, size, size, 1024, 1, 9 * (a.num_classes + 1), 1, 0});
  } else {
    for (int64_t u = 0; u < 3; ++u) {  // block4 at stride 1 on the 7 x 7 crops
      if (u == 0) convs.push_back({n, 7, 7, channels, 1, 2048, 1, 0});
      convs.push_back({n, 7, 7, channels, 1, 512, 1, 0});
      convs.push_back({n, 7, 7, 512, 3, 512, 1, 1});
      convs.push_back({n, 7, 7, 512, 1, 2048, 1, 0});
      channels = 2048;
    }
  }
  return convs;
}

double median_of(const std::vector<double>& v) { return percentile(v, 0.5); }

struct Trainer {
  const Args& a;
  trainyard::Backend& be;
  trainyard::testing::FakeModelContext& ctx;
  trainyard::DetectionModel& model;
  trainyard::Optimizer& optimizer;
  std::vector<trainyard::Variable*> trainable;
  std::vector<std::vector<trainyard::Variable*>> slots;

  // Phase times of one step, seconds: forward, loss, backward, update; and its figures.
  struct Step {
    double t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, cpu = 0;
    double loss = 0, rois = 0;
    std::map<std::string, double> losses;
  };

  Step step(const Example& e, int s) {
    Step r;
    ctx.set_seed(a.seed * 7919 + static_cast<uint64_t>(s));
    be.synchronize();
    r.t0 = now_seconds();
    const double c0 = process_cpu_seconds();
    model.provide_groundtruth(groundtruth(e, be, a.num_classes));
    const trainyard::PreprocessedImages pre = model.preprocess(ctx, e.images);
    const trainyard::TensorDict prediction = model.predict(ctx, pre, trainyard::Mode::kTrain);
    be.synchronize();
    r.t1 = now_seconds();
    const trainyard::TensorDict losses = model.loss(ctx, prediction, pre.true_image_shapes);
    trainyard::Tensor total;
    for (const auto& [name, loss] : losses) {
      total = total.defined() ? trainyard::ops::add(total, loss) : loss;
      if (s == 0) r.losses[name] = scalar(loss);
    }
    const trainyard::Tensor regularization = ctx.store().regularization_loss();
    if (regularization.defined()) total = trainyard::ops::add(total, regularization);
    r.loss = scalar(total);
    r.t2 = now_seconds();
    if (trainable.empty()) {
      trainable = ctx.store().trainable();
      for (trainyard::Variable* v : trainable) {
        std::vector<trainyard::Variable*>& mine = slots.emplace_back();
        for (const trainyard::SlotSpec& slot : optimizer.slots()) {
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
    }
    std::vector<trainyard::Tensor> sources;
    for (trainyard::Variable* v : trainable) sources.push_back(v->value());
    const std::vector<trainyard::Tensor> grads = trainyard::gradients(total, sources);
    be.synchronize();
    r.t3 = now_seconds();
    {
      trainyard::NoGradScope no_grad;
      for (std::size_t i = 0; i < trainable.size(); ++i) {
        if (!grads[i].defined()) continue;
        // train_config.gradient_clipping_by_norm: slim's clip_gradient_norms, each gradient
        // clipped to the norm on its own (as core/src/train/train_step.cc does).
        const trainyard::Tensor g =
            a.clip_gradient_norm > 0 ? trainyard::ops::clip_by_norm(grads[i], a.clip_gradient_norm)
                                     : grads[i];
        optimizer.apply(*trainable[i], g, slots[i], a.learning_rate, s);
      }
    }
    be.synchronize();
    r.t4 = now_seconds();
    r.cpu = process_cpu_seconds() - c0;
    {
      trainyard::NoGradScope no_grad;
      for (int32_t n : prediction.at("num_proposals").to_vector<int32_t>()) r.rois += n;
      r.rois /= static_cast<double>(a.batch);
    }
    return r;
  }
};

int run(const Args& a) {
  trainyard::PluginRegistry::Settings settings;
  settings.use_environment = false;
  trainyard::PluginRegistry registry(settings);
  const std::shared_ptr<trainyard::Backend> backend = registry.create<trainyard::Backend>(
      trainyard::ClassKind::kBackend, "cpu", {{"num_threads", int64_t{a.threads}}});
  trainyard::testing::FakeModelContext ctx(*backend, a.num_classes, a.seed, a.seed);
  const std::shared_ptr<trainyard::DetectionModel> model =
      registry.create<trainyard::DetectionModel>(trainyard::ClassKind::kDetectionModel,
                                                 "FasterRCNNMetaArch", faster_rcnn_options(a));
  const std::shared_ptr<trainyard::Optimizer> optimizer = registry.create<trainyard::Optimizer>(
      trainyard::ClassKind::kOptimizer, "MomentumOptimizer", {{"momentum", 0.9}});
  const std::vector<Example> pool = make_pool(a, *backend);
  trainyard::Backend& be = *backend;
  Trainer trainer{a, be, ctx, *model, *optimizer, {}, {}};
  const std::string workload = "faster_rcnn_" + a.config;

  if (a.memory_steps > 0) {
    const int every = a.memory_every > 0 ? a.memory_every : std::max(1, a.memory_steps / 20);
    std::vector<std::pair<int, double>> samples;
    const double start = now_seconds();
    double first_loss = 0, last_loss = 0;
    for (int s = 0; s < a.memory_steps; ++s) {
      const Trainer::Step r = trainer.step(pool[static_cast<std::size_t>(s) % pool.size()], s);
      if (s == 0) first_loss = r.loss;
      last_loss = r.loss;
      if ((s + 1) % every == 0 || s + 1 == a.memory_steps) {
        samples.emplace_back(s + 1, current_rss_mb());
      }
    }
    const double seconds = now_seconds() - start;
    // Growth from the first sample at or after 10% of the run; the slope over the second half.
    std::size_t base = 0;
    while (base + 1 < samples.size() && samples[base].first < a.memory_steps / 10) ++base;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (const auto& [step, rss] : samples) {
      if (step * 2 < a.memory_steps) continue;
      sx += step;
      sy += rss;
      sxx += static_cast<double>(step) * step;
      sxy += step * rss;
      n += 1;
    }
    const double slope = n >= 2 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 1000.0 : 0.0;
    std::string list;
    for (const auto& [step, rss] : samples) {
      list += (list.empty() ? "" : ", ") + std::string("[") + std::to_string(step) + ", " +
              json_number(rss) + "]";
    }
    double peak_sample = 0;
    for (const auto& sample : samples) peak_sample = std::max(peak_sample, sample.second);
    std::printf(
        "{\"framework\": \"trainyard\", \"workload\": \"%s\", \"mode\": \"memory\", \"threads\": "
        "%d, \"batch_size\": %lld, \"image_size\": %lld, \"steps\": %d, \"seconds\": %s, "
        "\"rss_mb\": [%s], \"base_step\": %d, \"growth_mb\": %s, \"slope_mb_per_1000_steps\": %s, "
        "\"max_sample_mb\": %s, \"first_loss\": %s, \"last_loss\": %s, \"peak_rss_mb\": %s}\n",
        workload.c_str(), a.threads, static_cast<long long>(a.batch),
        static_cast<long long>(a.image_size), a.memory_steps, json_number(seconds).c_str(),
        list.c_str(), samples[base].first,
        json_number(samples.back().second - samples[base].second).c_str(),
        json_number(slope).c_str(), json_number(peak_sample).c_str(),
        json_number(first_loss).c_str(), json_number(last_loss).c_str(),
        json_number(trainyard::bench::peak_rss_mb()).c_str());
    return 0;
  }

  // Training.
  std::vector<double> step_s, cpu_s, forward_s, loss_s, backward_s, update_s, rois;
  double first_loss = 0, last_loss = 0;
  std::string first_losses;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const Trainer::Step r = trainer.step(pool[static_cast<std::size_t>(s) % pool.size()], s);
    if (s == 0) {
      first_loss = r.loss;
      for (const auto& [name, value] : r.losses) {
        first_losses += (first_losses.empty() ? "\"" : ", \"") + name + "\": " + json_number(value);
      }
    }
    last_loss = r.loss;
    if (s < a.warmup) continue;
    step_s.push_back(r.t4 - r.t0);
    cpu_s.push_back(r.cpu);
    forward_s.push_back(r.t1 - r.t0);
    loss_s.push_back(r.t2 - r.t1);
    backward_s.push_back(r.t3 - r.t2);
    update_s.push_back(r.t4 - r.t3);
    rois.push_back(r.rois);
  }

  // Inference.
  std::vector<double> infer_s, infer_cpu_s, infer_forward_s, post_s, detections, infer_rois;
  for (int s = 0; s < a.warmup + a.infer_steps; ++s) {
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
    double proposals = 0;
    for (int32_t n : prediction.at("num_proposals").to_vector<int32_t>()) proposals += n;
    infer_rois.push_back(proposals / static_cast<double>(a.batch));
  }
  const double rss = trainyard::bench::peak_rss_mb();  // before the bound's buffers

  const auto train_rois = static_cast<int64_t>(median_of(rois) * static_cast<double>(a.batch));
  const auto eval_rois = static_cast<int64_t>(median_of(infer_rois) * static_cast<double>(a.batch));
  double step_flop = 0, infer_flop = 0;
  for (const Conv& c : net_convs(a, train_rois)) {
    step_flop += c.flops() * (c.input_gradient ? 3 : 2);
  }
  for (const Conv& c : net_convs(a, eval_rois)) infer_flop += c.flops();
  double conv_bound = 0, infer_bound = 0, fma_peak = 0, fma512_peak = 0;
  std::array<double, 3> passes{};
  if (a.bound) {
    omp_set_num_threads(a.threads);
    for (const Conv& c : net_convs(a, train_rois)) {
      const std::array<double, 3> nhwc = trainyard::bench::time_conv(c, false, 3);
      for (std::size_t i = 0; i < 3; ++i) {
        passes[i] += nhwc[i];
        conv_bound += nhwc[i];
      }
    }
    for (const Conv& c : net_convs(a, eval_rois)) {
      Conv forward_only = c;
      forward_only.input_gradient = false;
      infer_bound += trainyard::bench::time_conv(forward_only, false, 3)[0];
    }
    fma_peak = trainyard::bench::fma256_peak_gflops(a.threads);
    if (__builtin_cpu_supports("avx512f")) {
      fma512_peak = trainyard::bench::fma512_peak_gflops(a.threads);
    }
  }
  auto bound_number = [&](double v) { return a.bound ? json_number(v) : std::string("null"); };

  const double train_median = median_of(step_s), infer_median = median_of(infer_s);
  const double images = static_cast<double>(a.batch);
  std::printf(
      "{\"framework\": \"trainyard\", \"workload\": \"%s\", \"threads\": %d, \"batch_size\": "
      "%lld, \"image_size\": %lld, \"num_classes\": %lld, \"max_proposals\": %lld, "
      "\"second_stage_batch_size\": %lld, \"steps\": %d, \"infer_steps\": %d, "
      "\"train\": {\"median_ms\": %s, \"p90_ms\": %s, \"images_per_sec\": %s, \"cpu_ms\": %s, "
      "\"forward_ms\": %s, \"loss_ms\": %s, \"backward_ms\": %s, \"update_ms\": %s, \"rois\": %s, "
      "\"first_loss\": %s, \"last_loss\": %s, \"first_losses\": {%s}}, "
      "\"infer\": {\"median_ms\": %s, \"p90_ms\": %s, \"images_per_sec\": %s, \"cpu_ms\": %s, "
      "\"forward_ms\": %s, \"postprocess_ms\": %s, \"rois\": %s, \"detections\": %s}, "
      "\"conv_bound_ms\": %s, \"conv_bound_passes_ms\": [%s, %s, %s], \"infer_conv_bound_ms\": "
      "%s, \"step_gflop\": %s, \"infer_gflop\": %s, \"gflops\": %s, \"fma_peak_gflops\": %s, "
      "\"fma512_peak_gflops\": %s, \"peak_rss_mb\": %s}\n",
      workload.c_str(), a.threads, static_cast<long long>(a.batch),
      static_cast<long long>(a.image_size), static_cast<long long>(a.num_classes),
      static_cast<long long>(a.max_proposals), static_cast<long long>(a.second_stage_batch_size),
      a.steps, a.infer_steps, json_number(train_median * 1e3).c_str(),
      json_number(percentile(step_s, 0.9) * 1e3).c_str(),
      json_number(images / train_median).c_str(), json_number(median_of(cpu_s) * 1e3).c_str(),
      json_number(median_of(forward_s) * 1e3).c_str(), json_number(median_of(loss_s) * 1e3).c_str(),
      json_number(median_of(backward_s) * 1e3).c_str(),
      json_number(median_of(update_s) * 1e3).c_str(), json_number(median_of(rois)).c_str(),
      json_number(first_loss).c_str(), json_number(last_loss).c_str(), first_losses.c_str(),
      json_number(infer_median * 1e3).c_str(), json_number(percentile(infer_s, 0.9) * 1e3).c_str(),
      json_number(images / infer_median).c_str(), json_number(median_of(infer_cpu_s) * 1e3).c_str(),
      json_number(median_of(infer_forward_s) * 1e3).c_str(),
      json_number(median_of(post_s) * 1e3).c_str(), json_number(median_of(infer_rois)).c_str(),
      json_number(median_of(detections)).c_str(), bound_number(conv_bound * 1e3).c_str(),
      bound_number(passes[0] * 1e3).c_str(), bound_number(passes[1] * 1e3).c_str(),
      bound_number(passes[2] * 1e3).c_str(), bound_number(infer_bound * 1e3).c_str(),
      json_number(step_flop * 1e-9).c_str(), json_number(infer_flop * 1e-9).c_str(),
      json_number(step_flop / train_median * 1e-9).c_str(), bound_number(fma_peak).c_str(),
      bound_number(fma512_peak).c_str(), json_number(rss).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainyard::bench::refuse_dnnl_reference_implementations();
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "bench_faster_rcnn: " << e.what() << "\n";
    return 1;
  }
}
