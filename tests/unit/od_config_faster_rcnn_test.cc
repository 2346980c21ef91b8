// The Object Detection API's `model { faster_rcnn { ... } }` read natively (the detection task's
// config dialect, plugins/tasks/detection/od_config.h): the published
// faster_rcnn_resnet50_coco.config parses and converts into FasterRCNNMetaArch with the sample's
// values as params, a field left unset keeps the API's default, and what Trainyard does not mirror
// or cannot run is an error naming it.
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "od_config_test_util.h"
#include "trainyard/core/config.h"
#include "trainyard/error.h"
#include "trainyard/wire/od_pipeline.pb.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

const fs::path kSample =
    fs::path(TRAINYARD_SOURCE_DIR) / "tests/fixtures/od_configs/faster_rcnn_resnet50_coco.config";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

using test::describe;
using test::error_of;
using test::od_step;

const bool kDialectsLoaded = test::load_task_dialects();

// The smallest faster_rcnn config the conversion accepts, with `model_extra` inside faster_rcnn
// and `extra` at the top level.
std::string minimal(const std::string& model_extra = "", const std::string& extra = "") {
  return "model { faster_rcnn { num_classes: 3 image_resizer { keep_aspect_ratio_resizer { } } " +
         model_extra +
         " } }\n"
         "train_config { optimizer { momentum_optimizer { learning_rate { "
         "constant_learning_rate { learning_rate: 0.01 } } } } }\n" +
         extra;
}

TEST(OdConfigFasterRcnnTest, FasterRcnnResnet50CocoFlattensIntoTheseModelParams) {
  const config::Pipeline p = load_pipeline_config(kSample);
  EXPECT_EQ(p.task(), "detection");
  EXPECT_EQ(p.num_classes(), 90);
  EXPECT_EQ(p.model().class_(), "FasterRCNNMetaArch");
  const std::string fc = "second_stage_box_predictor.mask_rcnn_box_predictor.fc_hyperparams";
  const std::string nms = "second_stage_post_processing.batch_non_max_suppression";
  const std::vector<std::string> expected = {
      "image_resizer = 'keep_aspect_ratio_resizer'",
      "image_resizer.keep_aspect_ratio_resizer.min_dimension = 600",
      "image_resizer.keep_aspect_ratio_resizer.max_dimension = 1024",
      "feature_extractor = true",
      "feature_extractor.type = 'faster_rcnn_resnet50'",
      "feature_extractor.first_stage_features_stride = 16",
      "first_stage_anchor_generator = 'grid_anchor_generator'",
      "first_stage_anchor_generator.grid_anchor_generator.height_stride = 16",
      "first_stage_anchor_generator.grid_anchor_generator.width_stride = 16",
      "first_stage_anchor_generator.grid_anchor_generator.scales = [0.25, 0.5, 1, 2]",
      "first_stage_anchor_generator.grid_anchor_generator.aspect_ratios = [0.5, 1, 2]",
      "first_stage_box_predictor_conv_hyperparams = true",
      "first_stage_box_predictor_conv_hyperparams.op = 'CONV'",
      "first_stage_box_predictor_conv_hyperparams.regularizer = 'l2_regularizer'",
      "first_stage_box_predictor_conv_hyperparams.regularizer.l2_regularizer.weight = 0f",
      "first_stage_box_predictor_conv_hyperparams.initializer = 'truncated_normal_initializer'",
      "first_stage_box_predictor_conv_hyperparams.initializer.truncated_normal_initializer."
      "stddev = 0.01f",
      "first_stage_nms_score_threshold = 0f",
      "first_stage_nms_iou_threshold = 0.7f",
      "first_stage_max_proposals = 300",
      "first_stage_localization_loss_weight = 2f",
      "first_stage_objectness_loss_weight = 1f",
      "initial_crop_size = 14",
      "maxpool_kernel_size = 2",
      "maxpool_stride = 2",
      "second_stage_box_predictor = 'mask_rcnn_box_predictor'",
      fc + " = true",
      fc + ".op = 'FC'",
      fc + ".regularizer = 'l2_regularizer'",
      fc + ".regularizer.l2_regularizer.weight = 0f",
      fc + ".initializer = 'variance_scaling_initializer'",
      fc + ".initializer.variance_scaling_initializer.factor = 1f",
      fc + ".initializer.variance_scaling_initializer.uniform = true",
      fc + ".initializer.variance_scaling_initializer.mode = 'FAN_AVG'",
      "second_stage_box_predictor.mask_rcnn_box_predictor.use_dropout = false",
      "second_stage_box_predictor.mask_rcnn_box_predictor.dropout_keep_probability = 1f",
      "second_stage_post_processing = true",
      nms + " = true",
      nms + ".score_threshold = 0f",
      nms + ".iou_threshold = 0.6f",
      nms + ".max_detections_per_class = 100",
      nms + ".max_total_detections = 300",
      "second_stage_post_processing.score_converter = 'SOFTMAX'",
      "second_stage_localization_loss_weight = 2f",
      "second_stage_classification_loss_weight = 1f",
  };
  EXPECT_EQ(describe(p.model()), expected);
}

TEST(OdConfigFasterRcnnTest, FasterRcnnResnet50CocoTrainInputAndEvalMappings) {
  const config::Pipeline p = load_pipeline_config(kSample);
  const config::TrainConfig& t = p.train_config();
  EXPECT_EQ(t.batch_size(), 1);
  EXPECT_EQ(t.max_steps(), 200000);
  EXPECT_EQ(t.optimizer().class_(), "MomentumOptimizer");
  EXPECT_EQ(describe(t.optimizer()), std::vector<std::string>{"momentum = 0.9f"});
  const auto& lr = t.learning_rate().manual_step_learning_rate();
  EXPECT_EQ(lr.initial_learning_rate(), 0.0003);
  ASSERT_EQ(lr.schedule_size(), 2);
  EXPECT_EQ(lr.schedule(0).step(), 900000u);
  EXPECT_EQ(lr.schedule(0).learning_rate(), 0.00003);
  EXPECT_EQ(lr.schedule(1).step(), 1200000u);
  EXPECT_EQ(lr.schedule(1).learning_rate(), 0.000003);
  EXPECT_FALSE(t.use_moving_average());
  EXPECT_EQ(t.clip_gradient_norm(), 10.0);
  EXPECT_EQ(t.fine_tune_checkpoint(), "/data/mscoco/model.ckpt");
  EXPECT_EQ(t.fine_tune_checkpoint_type(), "detection");  // from_detection_checkpoint: true

  // keep_aspect_ratio_resizer: no resize in the input, each image keeps its size, and a batch
  // pads its images to the largest (the API's dynamic_pad).
  const config::InputReader& train = p.train_input_reader();
  EXPECT_EQ(train.data_pattern(),
            "/data/mscoco/mscoco_train.record-?????"
            "-of-00100");
  EXPECT_EQ(describe(train.reader()),
            (std::vector<std::string>{"num_classes = 90",
                                      "label_map_path = '/data/mscoco/mscoco_label_map.pbtxt'"}));
  ASSERT_EQ(train.data_augmentation_options_size(), 1);
  EXPECT_TRUE(od_step(train.data_augmentation_options(0)).has_random_horizontal_flip());
  ASSERT_EQ(train.padding_size(), 6);  // od_config.cc's kPaddedFeatures
  EXPECT_EQ(train.padding(0).pad_to(), 100);
  EXPECT_THAT(train.pad_to_largest(), ::testing::ElementsAre("image"));

  const config::InputReader& eval = p.eval_input_reader();
  EXPECT_EQ(eval.data_pattern(),
            "/data/mscoco/mscoco_val.record-?????"
            "-of-00010");
  EXPECT_EQ(eval.data_augmentation_options_size(), 0);
  EXPECT_THAT(eval.pad_to_largest(), ::testing::ElementsAre("image"));
  EXPECT_FALSE(eval.shuffle());
  EXPECT_EQ(eval.num_readers(), 1);
  EXPECT_EQ(p.eval_config().num_examples(), 8000);

  // The form recorded as train_dir/pipeline.config reads back as itself.
  const config::Pipeline again = parse_pipeline_config(pipeline_config_to_text(p, false), "r");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again, p));
}

TEST(OdConfigFasterRcnnTest, AFieldLeftUnsetHasTheApisDefaultAndGivesNoParam) {
  // The core's od messages are internal: the sample is read with the tests' copy of
  // od_pipeline.proto, whose defaults are the core's.
  wire::od::TrainEvalPipelineConfig od;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(read_text(kSample), &od));
  const wire::od::FasterRcnn& f = od.model().faster_rcnn();
  // faster_rcnn.proto's defaults, for the fields the sample leaves out.
  EXPECT_EQ(f.number_of_stages(), 2);
  EXPECT_EQ(f.first_stage_atrous_rate(), 1);
  EXPECT_EQ(f.first_stage_box_predictor_kernel_size(), 3);
  EXPECT_EQ(f.first_stage_box_predictor_depth(), 512);
  EXPECT_EQ(f.first_stage_minibatch_size(), 256);
  EXPECT_EQ(f.first_stage_positive_balance_fraction(), 0.5f);
  EXPECT_EQ(f.second_stage_batch_size(), 64);
  EXPECT_EQ(f.second_stage_balance_fraction(), 0.25f);
  EXPECT_FALSE(f.has_hard_example_miner());
  EXPECT_FALSE(f.inplace_batchnorm_update());
  EXPECT_FALSE(f.use_static_shapes());
  EXPECT_TRUE(f.use_partitioned_nms_in_first_stage());
  EXPECT_FALSE(f.clip_anchors_to_image());
  EXPECT_EQ(f.feature_extractor().pad_to_multiple(), 32);
  EXPECT_FALSE(f.feature_extractor().batch_norm_trainable());
  const wire::od::GridAnchorGenerator& grid =
      f.first_stage_anchor_generator().grid_anchor_generator();
  EXPECT_EQ(grid.height(), 256);
  EXPECT_EQ(grid.width(), 256);
  EXPECT_EQ(grid.height_offset(), 0);
  EXPECT_EQ(f.image_resizer().keep_aspect_ratio_resizer().resize_method(), wire::od::BILINEAR);
  EXPECT_FALSE(f.image_resizer().keep_aspect_ratio_resizer().pad_to_max_dimension());
  EXPECT_EQ(f.second_stage_box_predictor().mask_rcnn_box_predictor().box_code_size(), 4);
  EXPECT_FALSE(f.second_stage_box_predictor().mask_rcnn_box_predictor().share_box_across_classes());
  // Unset fields give no param (the model's option default is the API's) ...
  const config::PluginSpec spec =
      parse_pipeline_config(read_text(kSample), kSample.string()).model();
  for (const config::Param& param : spec.params()) {
    EXPECT_NE(param.key(), "second_stage_batch_size");
    EXPECT_NE(param.key(), "number_of_stages");
    EXPECT_NE(param.key(), "first_stage_anchor_generator.grid_anchor_generator.height");
  }
  // ... and set ones give theirs, the defaulted values included.
  const config::Pipeline set = parse_pipeline_config(
      minimal("second_stage_batch_size: 64 number_of_stages: 1 hard_example_miner { "
              "num_hard_examples: 32 } second_stage_classification_loss { weighted_softmax { } }"),
      "set.config");
  EXPECT_EQ(describe(set.model()), (std::vector<std::string>{
                                       "number_of_stages = 1",
                                       "image_resizer = 'keep_aspect_ratio_resizer'",
                                       "second_stage_batch_size = 64",
                                       "hard_example_miner = true",
                                       "hard_example_miner.num_hard_examples = 32",
                                       "second_stage_classification_loss = 'weighted_softmax'",
                                   }));
}

TEST(OdConfigFasterRcnnTest, RfcnBoxPredictorFlattensIntoItsParams) {
  // rfcn_resnet101_coco.config's second_stage_box_predictor.
  const config::Pipeline p = parse_pipeline_config(
      minimal("second_stage_box_predictor { rfcn_box_predictor { conv_hyperparams { op: CONV "
              "regularizer { l2_regularizer { weight: 0.0 } } initializer { "
              "truncated_normal_initializer { stddev: 0.01 } } } crop_height: 18 crop_width: 18 "
              "num_spatial_bins_height: 3 num_spatial_bins_width: 3 } }"),
      "rfcn.config");
  const std::vector<std::string> params = describe(p.model());
  const std::string r = "second_stage_box_predictor.rfcn_box_predictor";
  for (const std::string& want :
       {std::string("second_stage_box_predictor = 'rfcn_box_predictor'"),
        r + ".conv_hyperparams = true", r + ".crop_height = 18", r + ".crop_width = 18",
        r + ".num_spatial_bins_height = 3", r + ".num_spatial_bins_width = 3"}) {
    EXPECT_NE(std::find(params.begin(), params.end(), want), params.end())
        << want << " is not among the params";
  }
}

TEST(OdConfigFasterRcnnTest, MaskRcnnResnet50AtrousCocoFlattensItsMaskHead) {
  const fs::path sample = fs::path(TRAINYARD_SOURCE_DIR) /
                          "tests/fixtures/od_configs/mask_rcnn_resnet50_atrous_coco.config";
  const config::Pipeline p = parse_pipeline_config(read_text(sample), sample.string());
  const std::vector<std::string> params = describe(p.model());
  const std::string r = "second_stage_box_predictor.mask_rcnn_box_predictor";
  for (const std::string& want :
       {std::string("number_of_stages = 3"),
        std::string("second_stage_mask_prediction_loss_weight = 4f"),
        r + ".predict_instance_masks = true", r + ".mask_height = 33", r + ".mask_width = 33",
        r + ".mask_prediction_conv_depth = 0", r + ".mask_prediction_num_conv_layers = 4",
        r + ".conv_hyperparams = true"}) {
    EXPECT_NE(std::find(params.begin(), params.end(), want), params.end())
        << want << " is not among the params";
  }
}

TEST(OdConfigFasterRcnnTest, AFixedShapeResizerResizesInTheInput) {
  const config::Pipeline p = parse_pipeline_config(
      "model { faster_rcnn { num_classes: 3 image_resizer { fixed_shape_resizer { height: 640 "
      "width: 512 } } } }\n"
      "train_config { optimizer { momentum_optimizer { learning_rate { constant_learning_rate { "
      "} } } } }\n"
      "train_input_reader { }\neval_input_reader { }\n",
      "fixed.config");
  for (const config::InputReader* input : {&p.train_input_reader(), &p.eval_input_reader()}) {
    ASSERT_EQ(input->data_augmentation_options_size(), 1);
    const wire::od::PreprocessingStep step = od_step(input->data_augmentation_options(0));
    ASSERT_TRUE(step.has_resize_image());
    EXPECT_EQ(step.resize_image().new_height(), 640);
    EXPECT_EQ(step.resize_image().new_width(), 512);
  }
}

TEST(OdConfigFasterRcnnTest, WhatIsNotMirroredOrNotRunIsAnErrorNamingIt) {
  struct Case {
    std::string text;
    std::string names;
  };
  const Case cases[] = {
      // Left out of the mirror (Mask R-CNN's keypoints and resize_masks, Context R-CNN, FPN):
      // parse errors.
      {minimal("second_stage_box_predictor { mask_rcnn_box_predictor { predict_keypoints: "
               "true } }"),
       "no field named \"predict_keypoints\""},
      {minimal("resize_masks: false"), "no field named \"resize_masks\""},
      {minimal("context_config { }"), "no field named \"context_config\""},
      {minimal("feature_extractor { fpn { } }"), "no field named \"fpn\""},
      // In the mirror, refused by the conversion.
      {minimal("first_stage_anchor_generator { ssd_anchor_generator { } }"),
       "model.faster_rcnn.first_stage_anchor_generator: ssd_anchor_generator"},
      {minimal("second_stage_box_predictor { convolutional_box_predictor { } }"),
       "model.faster_rcnn.second_stage_box_predictor: convolutional_box_predictor"},
      {minimal("number_of_stages: 4"), "model.faster_rcnn.number_of_stages is 4"},
      {minimal("first_stage_box_predictor_conv_hyperparams { initializer { } }"),
       "model.faster_rcnn.first_stage_box_predictor_conv_hyperparams.initializer is empty"},
      {"model { faster_rcnn { num_classes: 3 } }", "model.faster_rcnn.image_resizer is not set"},
      {"model { faster_rcnn { image_resizer { keep_aspect_ratio_resizer { } } } }",
       "model.faster_rcnn.num_classes is 0"},
      {"model { ssd { num_classes: 3 image_resizer { fixed_shape_resizer { } } box_predictor { "
       "mask_rcnn_box_predictor { } } } }",
       "model.ssd.box_predictor.mask_rcnn_box_predictor"},
  };
  for (const Case& c : cases) {
    const std::string m = error_of([&] { parse_pipeline_config(c.text, "u.config"); });
    EXPECT_EQ(m.rfind("u.config:", 0), 0u) << m;
    EXPECT_NE(m.find(c.names), std::string::npos) << c.text << "\n -> " << m;
  }
  // A parse error names the file:line and the API's message.
  const std::string m = error_of([] {
    parse_pipeline_config("model {\n  faster_rcnn {\n    context_config { }\n  }\n}\n",
                          "ctx.config");
  });
  EXPECT_EQ(m.rfind("ctx.config:3:", 0), 0u) << m;
  EXPECT_NE(m.find("trainyard.od.FasterRcnn"), std::string::npos) << m;
}

}  // namespace
}  // namespace trainyard
