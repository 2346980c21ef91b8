// The Object Detection API's pipeline.config read natively (the detection task's config
// dialect, plugins/tasks/detection/od_config.h): the published SSD sample configs parse and
// convert, the model's params are flattened by the documented rule, and fields of the API that
// Trainyard does not have or cannot honour are errors naming them.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "od_config_test_util.h"
#include "trainyard/core/config.h"
#include "trainyard/core/input_config.h"
#include "trainyard/core/registry.h"
#include "trainyard/error.h"
#include "trainyard/wire/od_preprocessor.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

fs::path sample(const std::string& name) {
  return fs::path(TRAINYARD_SOURCE_DIR) / "tests/fixtures/od_configs" / name;
}

using test::describe;
using test::error_of;
using test::od_step;

const bool kDialectsLoaded = test::load_task_dialects();

// The smallest config the conversion accepts, with `model_extra` inside ssd, `train_extra`
// inside train_config and `extra` at the top level.
std::string minimal(const std::string& model_extra = "", const std::string& extra = "",
                    const std::string& train_extra = "") {
  return "model { ssd { num_classes: 4 image_resizer { fixed_shape_resizer { height: 64 width: "
         "64 } } " +
         model_extra +
         " } }\n"
         "train_config { optimizer { adam_optimizer { learning_rate { constant_learning_rate "
         "{ learning_rate: 0.01 } } } } " +
         train_extra + " }\n" + extra;
}

TEST(OdConfigTest, SsdMobilenetV1CocoFlattensIntoTheseModelParams) {
  const config::Pipeline p = load_pipeline_config(sample("ssd_mobilenet_v1_coco.config"));
  EXPECT_EQ(p.task(), "detection");
  EXPECT_EQ(p.num_classes(), 90);
  EXPECT_EQ(p.model().class_(), "SSDMetaArch");
  const std::vector<std::string> expected = {
      "image_resizer = 'fixed_shape_resizer'",
      "image_resizer.fixed_shape_resizer.height = 300",
      "image_resizer.fixed_shape_resizer.width = 300",
      "feature_extractor = true",
      "feature_extractor.type = 'ssd_mobilenet_v1'",
      "feature_extractor.depth_multiplier = 1f",
      "feature_extractor.min_depth = 16",
      "feature_extractor.conv_hyperparams = true",
      "feature_extractor.conv_hyperparams.regularizer = 'l2_regularizer'",
      "feature_extractor.conv_hyperparams.regularizer.l2_regularizer.weight = 4e-05f",
      "feature_extractor.conv_hyperparams.initializer = 'truncated_normal_initializer'",
      "feature_extractor.conv_hyperparams.initializer.truncated_normal_initializer.mean = 0f",
      "feature_extractor.conv_hyperparams.initializer.truncated_normal_initializer.stddev = "
      "0.03f",
      "feature_extractor.conv_hyperparams.activation = 'RELU_6'",
      "feature_extractor.conv_hyperparams.batch_norm = true",
      "feature_extractor.conv_hyperparams.batch_norm.decay = 0.9997f",
      "feature_extractor.conv_hyperparams.batch_norm.center = true",
      "feature_extractor.conv_hyperparams.batch_norm.scale = true",
      "feature_extractor.conv_hyperparams.batch_norm.epsilon = 0.001f",
      "feature_extractor.conv_hyperparams.batch_norm.train = true",
      "box_coder = 'faster_rcnn_box_coder'",
      "box_coder.faster_rcnn_box_coder.y_scale = 10f",
      "box_coder.faster_rcnn_box_coder.x_scale = 10f",
      "box_coder.faster_rcnn_box_coder.height_scale = 5f",
      "box_coder.faster_rcnn_box_coder.width_scale = 5f",
      "matcher = 'argmax_matcher'",
      "matcher.argmax_matcher.matched_threshold = 0.5f",
      "matcher.argmax_matcher.unmatched_threshold = 0.5f",
      "matcher.argmax_matcher.ignore_thresholds = false",
      "matcher.argmax_matcher.negatives_lower_than_unmatched = true",
      "matcher.argmax_matcher.force_match_for_each_row = true",
      "similarity_calculator = 'iou_similarity'",
      "box_predictor = 'convolutional_box_predictor'",
      "box_predictor.convolutional_box_predictor.conv_hyperparams = true",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.regularizer = "
      "'l2_regularizer'",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.regularizer.l2_regularizer."
      "weight = 4e-05f",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.initializer = "
      "'truncated_normal_initializer'",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.initializer."
      "truncated_normal_initializer.mean = 0f",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.initializer."
      "truncated_normal_initializer.stddev = 0.03f",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.activation = 'RELU_6'",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm = true",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm.decay = 0.9997f",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm.center = true",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm.scale = true",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm.epsilon = 0.001f",
      "box_predictor.convolutional_box_predictor.conv_hyperparams.batch_norm.train = true",
      "box_predictor.convolutional_box_predictor.min_depth = 0",
      "box_predictor.convolutional_box_predictor.max_depth = 0",
      "box_predictor.convolutional_box_predictor.num_layers_before_predictor = 0",
      "box_predictor.convolutional_box_predictor.use_dropout = false",
      "box_predictor.convolutional_box_predictor.dropout_keep_probability = 0.8f",
      "box_predictor.convolutional_box_predictor.kernel_size = 1",
      "box_predictor.convolutional_box_predictor.box_code_size = 4",
      "box_predictor.convolutional_box_predictor.apply_sigmoid_to_scores = false",
      "anchor_generator = 'ssd_anchor_generator'",
      "anchor_generator.ssd_anchor_generator.num_layers = 6",
      "anchor_generator.ssd_anchor_generator.min_scale = 0.2f",
      "anchor_generator.ssd_anchor_generator.max_scale = 0.95f",
      "anchor_generator.ssd_anchor_generator.aspect_ratios = [1, 2, 0.5, 3, 0.3333]",
      "post_processing = true",
      "post_processing.batch_non_max_suppression = true",
      "post_processing.batch_non_max_suppression.score_threshold = 1e-08f",
      "post_processing.batch_non_max_suppression.iou_threshold = 0.6f",
      "post_processing.batch_non_max_suppression.max_detections_per_class = 100",
      "post_processing.batch_non_max_suppression.max_total_detections = 100",
      "post_processing.score_converter = 'SIGMOID'",
      "normalize_loss_by_num_matches = true",
      "loss = true",
      "loss.localization_loss = 'weighted_smooth_l1'",
      "loss.classification_loss = 'weighted_sigmoid'",
      "loss.hard_example_miner = true",
      "loss.hard_example_miner.num_hard_examples = 3000",
      "loss.hard_example_miner.iou_threshold = 0.99f",
      "loss.hard_example_miner.loss_type = 'CLASSIFICATION'",
      "loss.hard_example_miner.max_negatives_per_positive = 3",
      "loss.hard_example_miner.min_negatives_per_image = 0",
      "loss.classification_weight = 1f",
      "loss.localization_weight = 1f",
  };
  EXPECT_EQ(describe(p.model()), expected);
}

TEST(OdConfigTest, SsdMobilenetV1CocoTrainInputAndEvalMappings) {
  const config::Pipeline p = load_pipeline_config(sample("ssd_mobilenet_v1_coco.config"));
  const config::TrainConfig& t = p.train_config();
  EXPECT_EQ(t.batch_size(), 24);
  EXPECT_EQ(t.max_steps(), 200000);
  EXPECT_EQ(t.optimizer().class_(), "RMSPropOptimizer");
  EXPECT_EQ(describe(t.optimizer()),
            (std::vector<std::string>{"decay = 0.9f", "momentum = 0.9f", "epsilon = 1f"}));
  const auto& lr = t.learning_rate().exponential_decay_learning_rate();
  EXPECT_EQ(lr.initial_learning_rate(), 0.004);
  EXPECT_EQ(lr.decay_steps(), 800720u);
  EXPECT_EQ(lr.decay_factor(), 0.95);
  EXPECT_TRUE(lr.staircase());
  EXPECT_TRUE(t.use_moving_average());  // the API's Optimizer default
  EXPECT_EQ(t.moving_average_decay(), 0.9999);
  EXPECT_EQ(t.clip_gradient_norm(), 0.0);
  EXPECT_EQ(t.regularization_penalty(), 1.0);
  EXPECT_EQ(t.fine_tune_checkpoint(), "PATH_TO_BE_CONFIGURED/model.ckpt");
  EXPECT_EQ(t.fine_tune_checkpoint_type(), "detection");  // from_detection_checkpoint: true
  EXPECT_FALSE(t.has_label_loss());                       // the detection task's

  const config::InputReader& train = p.train_input_reader();
  EXPECT_EQ(train.data_pattern(), "PATH_TO_BE_CONFIGURED/mscoco_train.record");
  EXPECT_EQ(train.reader().class_(), "DetectionReader");
  EXPECT_EQ(
      describe(train.reader()),
      (std::vector<std::string>{
          "num_classes = 90", "label_map_path = 'PATH_TO_BE_CONFIGURED/mscoco_label_map.pbtxt'"}));
  EXPECT_EQ(train.num_epochs(), 0);  // the API's: forever
  EXPECT_TRUE(train.shuffle());
  EXPECT_FALSE(train.has_num_readers());

  const config::InputReader& eval = p.eval_input_reader();
  EXPECT_EQ(eval.data_pattern(), "PATH_TO_BE_CONFIGURED/mscoco_val.record");
  EXPECT_FALSE(eval.shuffle());
  EXPECT_EQ(eval.num_readers(), 1);
  EXPECT_EQ(eval.num_epochs(), 1);  // model_lib's override

  const config::EvalConfig& e = p.eval_config();
  EXPECT_EQ(e.batch_size(), 1);
  EXPECT_EQ(e.num_examples(), 8000);
  EXPECT_EQ(e.eval_interval_secs(), 300);
  EXPECT_EQ(std::vector<std::string>(e.metrics_set().begin(), e.metrics_set().end()),
            std::vector<std::string>{"coco_detection_metrics"});
  EXPECT_EQ(e.num_visualizations(), 10);
  EXPECT_EQ(e.min_score_threshold(), 0.5);
  EXPECT_EQ(e.max_num_boxes_to_visualize(), 20);
  EXPECT_FALSE(e.include_metrics_per_category());
  EXPECT_FALSE(e.use_moving_averages());
}

TEST(OdConfigTest, AugmentationThenResizeAndGroundtruthPaddingInTheInputReaders) {
  const config::Pipeline p = load_pipeline_config(sample("ssd_mobilenet_v1_coco.config"));
  const auto& steps = p.train_input_reader().data_augmentation_options();
  ASSERT_EQ(steps.size(), 3);
  EXPECT_TRUE(od_step(steps[0]).has_random_horizontal_flip());
  EXPECT_TRUE(od_step(steps[1]).has_ssd_random_crop());
  const wire::od::PreprocessingStep resize = od_step(steps[2]);
  ASSERT_TRUE(resize.has_resize_image());
  EXPECT_EQ(resize.resize_image().new_height(), 300);
  EXPECT_EQ(resize.resize_image().new_width(), 300);
  EXPECT_EQ(resize.resize_image().method(), wire::od::ResizeImage::BILINEAR);
  EXPECT_EQ(p.train_input_reader().preprocessing_step_size(), 0);
  const auto& eval_steps = p.eval_input_reader().data_augmentation_options();
  ASSERT_EQ(eval_steps.size(), 1);  // no augmentation in evaluation
  EXPECT_TRUE(od_step(eval_steps[0]).has_resize_image());

  for (const config::InputReader* input : {&p.train_input_reader(), &p.eval_input_reader()}) {
    EXPECT_EQ(input->pad_to_largest_size(), 0);  // fixed_shape_resizer: one size already
    ASSERT_EQ(input->padding_size(), 6);
    const char* features[] = {"groundtruth_boxes",     "groundtruth_classes",
                              "groundtruth_difficult", "groundtruth_is_crowd",
                              "groundtruth_group_of",  "groundtruth_area"};
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(input->padding(i).feature(), features[i]);
      EXPECT_EQ(input->padding(i).pad_to(), 100);
      EXPECT_TRUE(input->padding(i).truncate());
      EXPECT_EQ(input->padding(i).count_feature(), i == 0 ? "num_groundtruth_boxes" : "");
    }
  }
}

// eval_util's EVAL_METRICS_CLASS_DICT: open_images_V2_detection_metrics and its former name
// oid_V2_detection_metrics (the two Open Images sample configs name one each) are computed.
TEST(OdConfigTest, BothOpenImagesV2MetricsSetNamesAreAccepted) {
  const config::Pipeline p =
      parse_pipeline_config(minimal("",
                                    "eval_config { metrics_set: 'open_images_V2_detection_metrics' "
                                    "metrics_set: 'oid_V2_detection_metrics' "
                                    "metrics_set: 'pascal_voc_detection_metrics' }"),
                            "oid.config");
  EXPECT_EQ(std::vector<std::string>(p.eval_config().metrics_set().begin(),
                                     p.eval_config().metrics_set().end()),
            (std::vector<std::string>{"open_images_V2_detection_metrics",
                                      "oid_V2_detection_metrics", "pascal_voc_detection_metrics"}));
}

TEST(OdConfigTest, CocoMaskMetricsAreComputedBesideTheBoxMetrics) {
  const config::Pipeline p =
      parse_pipeline_config(minimal("",
                                    "eval_config { metrics_set: 'coco_detection_metrics' "
                                    "metrics_set: 'coco_mask_metrics' }\n"
                                    "eval_input_reader { load_instance_masks: true }"),
                            "masks.config");
  EXPECT_EQ(std::vector<std::string>(p.eval_config().metrics_set().begin(),
                                     p.eval_config().metrics_set().end()),
            (std::vector<std::string>{"coco_detection_metrics", "coco_mask_metrics"}));
}

TEST(OdConfigTest, MaxNumberOfBoxesFromTheInputReaderElseTheTrainConfig) {
  config::Pipeline p = parse_pipeline_config(
      minimal("", "train_input_reader { max_number_of_boxes: 7 }\neval_input_reader { }\n"),
      "boxes.config");
  EXPECT_EQ(p.train_input_reader().padding(0).pad_to(), 7);
  EXPECT_EQ(p.eval_input_reader().padding(0).pad_to(), 100);
  p = parse_pipeline_config(
      minimal("", "train_input_reader { }\neval_input_reader { }\n", "max_number_of_boxes: 9"),
      "boxes.config");
  EXPECT_EQ(p.train_input_reader().padding(0).pad_to(), 9);
  EXPECT_EQ(p.eval_input_reader().padding(0).pad_to(), 9);
}

// load_instance_masks: the reader's instance_masks as the API's decoder reads mask_type (PNG
// strings for PNG_MASKS, a dense float list for NUMERICAL_MASKS and DEFAULT); the masks padded
// to max_number_of_boxes as the boxes, and, where images keep their own sizes
// (keep_aspect_ratio_resizer), also to the batch's largest image.
TEST(OdConfigTest, InstanceMasksAreReadAndPaddedWithTheBoxes) {
  auto instance_masks = [](const config::InputReader& input) {
    for (const config::Param& param : input.reader().params()) {
      if (param.key() == "instance_masks") return param.string_value();
    }
    return std::string("(unset)");
  };
  auto padded = [](const config::InputReader& input, const std::string& feature) {
    for (const config::FeaturePadding& padding : input.padding()) {
      if (padding.feature() == feature) return padding.pad_to();
    }
    return int64_t{-1};
  };
  const std::string readers =
      "train_input_reader { load_instance_masks: true mask_type: PNG_MASKS "
      "max_number_of_boxes: 7 }\n"
      "eval_input_reader { load_instance_masks: true }\n";
  config::Pipeline p = parse_pipeline_config(minimal("", readers), "masks.config");
  EXPECT_EQ(instance_masks(p.train_input_reader()), "png");
  EXPECT_EQ(instance_masks(p.eval_input_reader()), "numerical");  // the API's default
  EXPECT_EQ(padded(p.train_input_reader(), "groundtruth_instance_masks"), 7);
  EXPECT_EQ(padded(p.eval_input_reader(), "groundtruth_instance_masks"), 100);
  EXPECT_EQ(p.train_input_reader().pad_to_largest_size(), 0);  // fixed_shape_resizer

  std::string keep = minimal("", readers);
  keep.replace(keep.find("fixed_shape_resizer { height: 64 width: 64 }"),
               std::string("fixed_shape_resizer { height: 64 width: 64 }").size(),
               "keep_aspect_ratio_resizer { }");
  p = parse_pipeline_config(keep, "masks.config");
  for (const config::InputReader* input : {&p.train_input_reader(), &p.eval_input_reader()}) {
    EXPECT_EQ(
        std::vector<std::string>(input->pad_to_largest().begin(), input->pad_to_largest().end()),
        (std::vector<std::string>{"image", "groundtruth_instance_masks"}));
  }

  p = parse_pipeline_config(minimal("", "train_input_reader { mask_type: PNG_MASKS }\n"),
                            "no_masks.config");
  EXPECT_EQ(instance_masks(p.train_input_reader()), "(unset)");
  EXPECT_EQ(padded(p.train_input_reader(), "groundtruth_instance_masks"), -1);
}

TEST(OdConfigTest, TheThreePublishedSsdSamplesParseAndConvert) {
  for (const char* name : {"ssd_mobilenet_v1_coco.config", "ssd_mobilenet_v2_coco.config",
                           "ssdlite_mobilenet_v2_coco.config"}) {
    SCOPED_TRACE(name);
    const config::Pipeline p = load_pipeline_config(sample(name));
    EXPECT_EQ(p.model().class_(), "SSDMetaArch");
    EXPECT_EQ(p.num_classes(), 90);
    EXPECT_EQ(p.train_config().fine_tune_checkpoint_type(), "detection");
    // The form recorded as train_dir/pipeline.config reads back as itself.
    const config::Pipeline again = parse_pipeline_config(pipeline_config_to_text(p, false), "r");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again, p));
    const config::Pipeline shown = parse_pipeline_config(pipeline_config_to_text(p, true), "r");
    EXPECT_EQ(shown.model().params_size(), p.model().params_size());
    // The API's steps print as the task's message, by its type.
    EXPECT_NE(pipeline_config_to_text(p, false).find(
                  "[type.googleapis.com/trainyard.od.PreprocessingStep] {"),
              std::string::npos);
  }
  // v2 sets the API's removed batch_norm_trainable (no param) and use_depthwise (a param).
  const config::Pipeline v2 = load_pipeline_config(sample("ssd_mobilenet_v2_coco.config"));
  bool depthwise = false;
  for (const config::Param& param : v2.model().params()) {
    EXPECT_EQ(param.key().find("batch_norm_trainable"), std::string::npos);
    depthwise |= param.key() == "feature_extractor.use_depthwise" && param.bool_value();
  }
  EXPECT_TRUE(depthwise);
  EXPECT_EQ(load_pipeline_config(sample("ssdlite_mobilenet_v2_coco.config"))
                .train_input_reader()
                .data_pattern(),
            "PATH_TO_BE_CONFIGURED/mscoco_train.record-?????"
            "-of-00100");
}

// The API's quantized samples: graph_rewriter { quantization } becomes SSDMetaArch's
// graph_rewriter.quantization params; a graph_rewriter without its quantization message
// quantizes with the proto's defaults, as the API's builder reads them.
TEST(OdConfigTest, GraphRewriterQuantizationBecomesTheModelsParams) {
  auto params = [](const config::Pipeline& p) {
    std::vector<std::string> out;
    for (const config::Param& param : p.model().params()) {
      if (param.key().rfind("graph_rewriter", 0) != 0) continue;
      out.push_back(param.key() + "=" +
                    (param.has_int_value() ? std::to_string(param.int_value())
                                           : std::string(param.bool_value() ? "true" : "false")));
    }
    return out;
  };
  const std::vector<std::string> sample_params = {
      "graph_rewriter.quantization=true", "graph_rewriter.quantization.delay=48000",
      "graph_rewriter.quantization.weight_bits=8", "graph_rewriter.quantization.activation_bits=8"};
  for (const char* name : {"ssd_mobilenet_v1_quantized_300x300_coco14_sync.config",
                           "ssd_mobilenet_v1_0.75_depth_quantized_300x300_coco14_sync.config",
                           "ssd_mobilenet_v2_quantized_300x300_coco.config"}) {
    EXPECT_EQ(params(load_pipeline_config(sample(name))), sample_params) << name;
  }
  EXPECT_EQ(params(parse_pipeline_config(minimal("", "graph_rewriter { }"), "g.config"))[1],
            "graph_rewriter.quantization.delay=500000");
  EXPECT_TRUE(params(parse_pipeline_config(minimal(), "g.config")).empty());
}

// ssd_mobilenet_v2_fullyconv_coco.config: SSD with keep_aspect_ratio_resizer. The model resizes
// each image (its params carry the resizer), so the input has no resize step and keeps each
// image's size, a batch padding its images to the largest, as for Faster R-CNN.
TEST(OdConfigTest, SsdKeepAspectRatioResizerResizesInTheModel) {
  const config::Pipeline p = load_pipeline_config(sample("ssd_mobilenet_v2_fullyconv_coco.config"));
  EXPECT_EQ(p.model().class_(), "SSDMetaArch");
  const std::vector<std::string> params = describe(p.model());
  for (const char* expected : {"image_resizer = 'keep_aspect_ratio_resizer'",
                               "image_resizer.keep_aspect_ratio_resizer.min_dimension = 320",
                               "image_resizer.keep_aspect_ratio_resizer.max_dimension = 640",
                               "anchor_generator.ssd_anchor_generator.height_stride = "
                               "[16, 32, 64, 128, 256, 512]"}) {
    EXPECT_NE(std::find(params.begin(), params.end(), expected), params.end()) << expected;
  }
  const config::InputReader& train = p.train_input_reader();
  ASSERT_EQ(train.data_augmentation_options_size(), 2);
  EXPECT_TRUE(od_step(train.data_augmentation_options(0)).has_random_horizontal_flip());
  EXPECT_TRUE(od_step(train.data_augmentation_options(1)).has_ssd_random_crop_fixed_aspect_ratio());
  for (const config::InputReader* input : {&train, &p.eval_input_reader()}) {
    EXPECT_EQ(
        std::vector<std::string>(input->pad_to_largest().begin(), input->pad_to_largest().end()),
        std::vector<std::string>{"image"});
  }
  EXPECT_EQ(p.eval_input_reader().data_augmentation_options_size(), 0);
}

TEST(OdConfigTest, AnUnknownFieldIsAnErrorNamingItAndItsLine) {
  const std::string m = error_of([] {
    parse_pipeline_config("model {\n  ssd {\n    no_such_field: 1\n  }\n}\n", "bad.config");
  });
  EXPECT_EQ(m.rfind("bad.config:3:", 0), 0u) << m;
  EXPECT_NE(m.find("trainyard.od.Ssd"), std::string::npos) << m;
  EXPECT_NE(m.find("no_such_field"), std::string::npos) << m;
}

TEST(OdConfigTest, ATrainyardConfigKeepsTrainyardsError) {
  const std::string m = error_of([] {
    parse_pipeline_config("model {\n  class: \"MoeModel\"\n  parms { key: \"x\" }\n}\n",
                          "t.config");
  });
  EXPECT_EQ(m.rfind("t.config:3:", 0), 0u) << m;
  EXPECT_NE(m.find("trainyard.config.PluginSpec"), std::string::npos) << m;
}

TEST(OdConfigTest, UnsupportedChoicesAreErrorsNamingThem) {
  struct Case {
    std::string text;
    std::string names;
  };
  const Case cases[] = {
      // Left out of the mirror: parse errors.
      {minimal("feature_extractor { conv_hyperparams { group_norm { } } }"), "group_norm"},
      {minimal("feature_extractor { bifpn { } }"), "bifpn"},
      // graph_rewriter: what graph_rewriter_builder refuses, and what Trainyard does not do.
      {minimal("", "graph_rewriter { quantization { weight_bits: 4 } }"),
       "graph_rewriter.quantization: weight_bits 4 and activation_bits 8: only 8bit"},
      {minimal("", "graph_rewriter { quantization { symmetric: true } }"),
       "graph_rewriter.quantization.symmetric"},
      {minimal("", "graph_rewriter { quantization { delay: 1 } extra: 1 }"), "extra"},
      // In the mirror, refused by the conversion.
      {minimal("box_predictor { mask_rcnn_box_predictor { } }"),
       "model.ssd.box_predictor.mask_rcnn_box_predictor: is Faster R-CNN's"},
      {minimal("").replace(minimal("").find("image_resizer { fixed_shape_resizer { height: 64 "
                                            "width: 64 } }"),
                           62, "image_resizer { }"),
       "model.ssd.image_resizer is empty; it must set one of keep_aspect_ratio_resizer, "
       "fixed_shape_resizer"},
      {minimal("feature_extractor { batch_norm_trainable: false }"),
       "model.ssd.feature_extractor.batch_norm_trainable"},
      {minimal("similarity_calculator { }"), "model.ssd.similarity_calculator is empty"},
      {minimal("", "", "merge_multiple_label_boxes: true"),
       "train_config.merge_multiple_label_boxes"},
      {minimal("", "", "use_bfloat16: true"), "train_config.use_bfloat16"},
      {minimal("", "eval_config { metrics_set: 'coco_detection_metric' }"),
       "did you mean 'coco_detection_metrics'?"},
      {minimal("", "eval_config { export_path: '/tmp/d.json' }"), "eval_config.export_path"},
      // The API's, but not computed: refused before a run trains, not when it evaluates.
      {minimal("", "eval_config { metrics_set: 'oid_challenge_detection_metrics' }"),
       "'oid_challenge_detection_metrics' is a metrics set of the API that Trainyard does not "
       "compute"},
      {minimal("",
               "eval_config { metrics_set: 'coco_detection_metrics' "
               "metrics_set: 'weighted_pascal_voc_detection_metrics' }"),
       "eval_config.metrics_set[1]: 'weighted_pascal_voc_detection_metrics' is a metrics set"},
      {minimal("", "eval_input_reader { } eval_input_reader { }"),
       "eval_input_reader is given 2 times"},
      // coco_mask_metrics compares masks: the eval input must read them.
      {minimal("", "eval_config { metrics_set: 'coco_mask_metrics' }\neval_input_reader { }"),
       "coco_mask_metrics compares the detection masks with the groundtruth masks; set "
       "load_instance_masks: true in eval_input_reader"},
      {"model { ssd { num_classes: 3 image_resizer { fixed_shape_resizer { } } } }",
       "train_config.optimizer is not set"},
  };
  for (const Case& c : cases) {
    const std::string m = error_of([&] { parse_pipeline_config(c.text, "u.config"); });
    EXPECT_EQ(m.rfind("u.config:", 0), 0u) << m;
    EXPECT_NE(m.find(c.names), std::string::npos) << c.text << "\n -> " << m;
  }
}

TEST(OdConfigTest, SampleOneOfNReachesTheInputOptionsAndZeroIsRefused) {
  config::InputReader reader;
  reader.set_sample_1_of_n_examples(5);
  EXPECT_EQ(input_options_from_config(reader, 1, 0, "eval_input_reader").sample_1_of_n_examples, 5);
  reader.set_sample_1_of_n_examples(0);
  const std::string m =
      error_of([&] { input_options_from_config(reader, 1, 0, "eval_input_reader"); });
  EXPECT_NE(m.find("eval_input_reader.sample_1_of_n_examples is 0"), std::string::npos) << m;
}

TEST(OdConfigTest, AnEvaluationOfTheTrainingInputKeepsOnlyTheResize) {
  // model_main's --eval_training_data with no eval_input_reader: the training reader's steps,
  // without augmentation.
  config::InputReader reader =
      load_pipeline_config(sample("ssd_mobilenet_v1_coco.config")).train_input_reader();
  ASSERT_EQ(reader.data_augmentation_options_size(), 3);
  keep_only_evaluation_steps(&reader, "train_input_reader");
  ASSERT_EQ(reader.data_augmentation_options_size(), 1);
  EXPECT_TRUE(od_step(reader.data_augmentation_options(0)).has_resize_image());
}

TEST(OdConfigTest, AConfigAnEarlierTrainyardRecordedReadsWithItsStepsInTodaysForm) {
  // Before the detection task, Trainyard's own form held the API's steps themselves (a
  // train_dir/pipeline.config of an earlier run); comments and strings with braces are no steps.
  const config::Pipeline p = parse_pipeline_config(
      "task: \"detection\"  # data_augmentation_options { }\n"
      "model { class: \"SSDMetaArch\" params { key: \"a{\" string_value: \"}\" } }\n"
      "train_input_reader {\n"
      "  data_augmentation_options {\n    random_horizontal_flip {\n    }\n  }\n"
      "  data_augmentation_options { resize_image { new_height: 8 new_width: 8 } }\n"
      "}\n",
      "old/pipeline.config");
  EXPECT_EQ(p.model().params(0).key(), "a{");
  const auto& steps = p.train_input_reader().data_augmentation_options();
  ASSERT_EQ(steps.size(), 2);
  EXPECT_TRUE(od_step(steps[0]).has_random_horizontal_flip());
  EXPECT_EQ(od_step(steps[1]).resize_image().new_height(), 8);
  // Today's form is read as it is.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      parse_pipeline_config(pipeline_config_to_text(p, false), "new/pipeline.config"), p));
}

TEST(OdConfigTest, AnOldFormConfigWithAnotherMistakeSaysThatMistake) {
  // The steps are read in today's form, so the error is the typo's, in Trainyard's names.
  const std::string m = error_of([] {
    parse_pipeline_config(
        "task: \"detection\"\n"
        "train_input_reader {\n  data_augmentation_options { random_horizontal_flip { } }\n"
        "  shuffel: false\n}\n",
        "old/pipeline.config");
  });
  EXPECT_NE(m.find("old/pipeline.config:4:"), std::string::npos) << m;
  EXPECT_NE(m.find("\"trainyard.config.InputReader\" has no field named \"shuffel\""),
            std::string::npos)
      << m;
}

TEST(OdConfigTest, ATextNoFormatReadsNamesThePluginsThatCouldNotBeLoaded) {
  PluginRegistry::Settings settings;
  settings.plugin_path = {TRAINYARD_PLUGIN_DIR,
                          std::filesystem::path(TRAINYARD_FIXTURE_DIR) / "other_sdk"};
  settings.use_environment = false;
  settings.use_default_dirs = false;
  const PluginRegistry registry(settings);
  load_config_dialects(registry);
  const std::string m =
      error_of([] { parse_pipeline_config("model { no_such_field: 1 }\n", "typo.config"); });
  EXPECT_NE(m.find("typo.config:1:"), std::string::npos) << m;
  EXPECT_NE(m.find("not tried: the config dialects, if any, of plugins that could not be loaded"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("libfixture_other_sdk.so"), std::string::npos) << m;
}

TEST(OdConfigTest, AStepOfATypeNoTaskBuildsIsAConfigErrorNamingItAndTheKnownTypes) {
  config::InputReader reader;
  reader.add_data_augmentation_options()->set_type_url("type.googleapis.com/acme.Warp");
  const std::string m =
      error_of([&] { input_options_from_config(reader, 1, 0, "train_input_reader"); });
  EXPECT_NE(m.find("train_input_reader.data_augmentation_options[0]: no loaded task plugin "
                   "builds steps of type 'acme.Warp'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("trainyard.od.PreprocessingStep"), std::string::npos) << m;
}

}  // namespace
}  // namespace trainyard
