// The TF Object Detection API's own pipeline.config (TrainEvalPipelineConfig, mirrored in
// proto/od_pipeline.proto) read natively: the detection task registers it as a config dialect
// (trainyard/config_dialect.h, od_dialect.cc), so the core's load_pipeline_config and
// parse_pipeline_config convert such a file into Trainyard's Pipeline, and `trainyard train`,
// `train_and_evaluate` (model_main's flags) and `eval` run the API's sample configs as they are.
//
// Telling the formats apart: a text that parses as Trainyard's Pipeline is one. Otherwise, when
// it parses as the API's TrainEvalPipelineConfig, it is converted. When neither parses, the
// error shown is the one of the format whose parse read further into the text (so
// `model { ssd { no_such_field: 1 } }` reports the API's "Message type "trainyard.od.Ssd" has no
// field named "no_such_field"" at its file:line:column); at a tie, the API's when the text names
// one of its own fields (ssd, faster_rcnn, tf_record_input_reader, rms_prop_optimizer,
// num_steps, ...), else Trainyard's. A field of the API that od_pipeline.proto leaves out
// (fpn, group_norm, Mask R-CNN's mask fields, ...) is such a parse error naming it.
//
// What the user sees: the converted Pipeline is what `trainyard config print` shows, what
// `config check` checks and what the run records as train_dir/pipeline.config (Trainyard's
// form, which reads back as itself); the API's text is not kept. The API's steps are in it as
// they are, `data_augmentation_options { [type.googleapis.com/trainyard.od.PreprocessingStep]
// { ssd_random_crop { } } }`. A pipeline.config Trainyard recorded before the detection task
// carried them (`data_augmentation_options { ssd_random_crop { } }`, the API's step itself) reads
// as today's form too, so that an earlier run's train_dir still evaluates and resumes.
//
// The conversion (API field -> Trainyard field):
//   model.ssd                  model { class: "SSDMetaArch" }, task "detection"
//   model.faster_rcnn          model { class: "FasterRCNNMetaArch" }, task "detection"
//   model.*.num_classes        num_classes
//   every other set field of ssd or faster_rcnn: a param of the model, flattened as below
//   train_config.batch_size    train_config.batch_size (the API's default 32)
//   .num_steps                 .max_steps (0, the default: unset, i.e. until stopped)
//   .optimizer.rms_prop_optimizer   optimizer RMSPropOptimizer {decay, momentum =
//                              momentum_optimizer_value, epsilon} (the API's defaults 0.9, 0.9, 1)
//   .optimizer.momentum_optimizer   MomentumOptimizer {momentum = momentum_optimizer_value}
//   .optimizer.adam_optimizer  AdamOptimizer {epsilon} (beta1 0.9, beta2 0.999 as the API's)
//   .optimizer.*.learning_rate the same schedule in train_config.learning_rate (its four
//                              kinds have the API's names and defaults there;
//                              constant_learning_rate
//                              -> constant)
//   .optimizer.use_moving_average / moving_average_decay   the same (the API's default: true)
//   .gradient_clipping_by_norm .clip_gradient_norm (0, the default, disables)
//   .fine_tune_checkpoint      .fine_tune_checkpoint, with .fine_tune_checkpoint_type (the
//                              API's rule: fine_tune_checkpoint_type, else "detection" when
//                              from_detection_checkpoint, else "classification") and
//                              .load_all_detection_checkpoint_vars recorded for the model's
//                              restore_map
//   .freeze_variables, .update_trainable_variables, .bias_grad_multiplier,
//   .keep_checkpoint_every_n_hours, .summarize_gradients   the same fields
//   .add_regularization_loss   .regularization_penalty 1 (true) or 0 (false)
//   .data_augmentation_options train_input_reader.data_augmentation_options, before the resize
//   .max_number_of_boxes       the padding, when the input reader does not set its own
//   .startup_delay_steps       accepted; no effect (one process starts no replicas late)
//   .sync_replicas, .replicas_to_aggregate   accepted: Trainyard's replicas (mpirun) always
//                              average every step; the app checks --sync_replicas flags
//   .batch_queue_capacity, .num_batch_queue_threads, .prefetch_queue_capacity,
//   .unpad_groundtruth_tensors, .retain_original_images   accepted; no effect on results
//   .merge_multiple_label_boxes, .use_multiclass_scores, .use_bfloat16 (true)   ConfigError
//   train_input_reader / eval_input_reader[0] (a second eval_input_reader is a ConfigError):
//   .tf_record_input_reader.input_path   .data_pattern, comma-joined (globs as the API's)
//   .label_map_path            reader { class: "DetectionReader" params num_classes (the
//                              model's) and label_map_path }
//   .use_display_name (true)   the reader's param use_display_name
//   .shuffle, .num_readers, .shuffle_buffer_size, .sample_1_of_n_examples   the same, where
//                              the text sets them (the API's 64 readers and 2048-record buffer
//                              of serialized records are not Trainyard's defaults)
//   .num_epochs                .num_epochs (train: the API's 0, forever; eval: 1, as model_lib
//                              overrides it)
//   .num_prefetch_batches      .prefetch_batches (when > 0)
//   .max_number_of_boxes       .padding: groundtruth_boxes (count_feature
//                              num_groundtruth_boxes), groundtruth_classes,
//                              groundtruth_difficult, groundtruth_is_crowd,
//                              groundtruth_group_of, groundtruth_area,
//                              each padded (or clipped, as the API's pad_or_clip) to it
//   model.*.image_resizer.fixed_shape_resizer   a last resize_image step (new_height,
//                              new_width, method) in .data_augmentation_options of both readers
//   model.*.image_resizer.keep_aspect_ratio_resizer   no step: each image keeps its size in
//                              the input (pad_to_largest "image": a batch pads its images to
//                              the largest, true_image_shape keeps each one's size) and the
//                              model's preprocess resizes each image at its own size
//   .load_instance_masks (true) with .mask_type   the reader's instance_masks: png for PNG_MASKS,
//                              numerical for NUMERICAL_MASKS and DEFAULT (as the API's decoder);
//                              groundtruth_instance_masks [N, height, width] padded to
//                              max_number_of_boxes as the boxes, and with
//                              keep_aspect_ratio_resizer also to the batch's largest image
//                              (pad_to_largest); the augmentations move them with the image
//   .num_additional_channels, .num_keypoints (> 0)   ConfigError
//   the others (queue and parallelism sizes; mask_type without masks)   accepted; no effect
//   eval_config.batch_size, .eval_interval_secs, .use_moving_averages   the same fields
//   .num_examples              .num_examples (where set)
//   .metrics_set               .metrics_set (coco_detection_metrics when none; a name the API
//                              does not know is a ConfigError)
//   .num_visualizations, .min_score_threshold, .max_num_boxes_to_visualize,
//   .include_metrics_per_category   the same fields
//   .export_path, .visualization_export_dir (set), .ignore_groundtruth (true),
//   .recall_lower_bound / .recall_upper_bound (other than 0 / 1)   ConfigError
//   .max_evals, .save_graph, .eval_master and the drawing options   accepted; no effect
//
// The model's params (the SSDMetaArch plugin declares these keys as its options, so a set field
// it does not support is refused when the model is created, naming the key; no plugin provides
// FasterRCNNMetaArch yet). Each field of the `ssd` or `faster_rcnn` message that the text sets,
// except num_classes, in field-number order, depth first (a field left unset gives no param:
// the model's option default is the API's default):
//   - the key is the dotted path of field names below `ssd` or `faster_rcnn`
//     ("feature_extractor.depth_multiplier", "loss.hard_example_miner.num_hard_examples",
//     "first_stage_anchor_generator.grid_anchor_generator.scales");
//   - a scalar gives its value: bool_value, int_value, float_value (a float field as the shortest
//     decimal that reads back as the same float, so 0.03 is 0.03, not 0.029999999329447746),
//     string_value; an enum its value's name as a string ("RELU_6", "SIGMOID");
//   - a repeated scalar a list: float_list, int_list, string_list (enums by name);
//   - a message field whose message is one of the API's oneof wrappers (all its fields members
//     of one oneof: BoxCoder, Matcher, ImageResizer, Initializer, Regularizer, ...) gives a
//     string param at the field's path whose value is the chosen member's name ("box_coder" =
//     "faster_rcnn_box_coder", "loss.classification_loss" = "weighted_sigmoid"), then the
//     chosen message's set fields below "<path>.<member>" ("box_coder.faster_rcnn_box_coder.
//     y_scale" = 10); an empty chosen message (iou_similarity {}) gives only the string;
//   - a oneof in a message that has other fields too (none in od_pipeline.proto today) gives
//     the string at "<path>.<oneof name>";
//   - any other message field gives bool true at its path when present
//     ("loss.hard_example_miner", "feature_extractor.conv_hyperparams.batch_norm"), then its
//     set fields.
// A repeated message field is a ConfigError naming it (SSD and Faster R-CNN have none). A choice
// that makes another architecture is a ConfigError naming it: mask_rcnn_box_predictor or
// rfcn_box_predictor in ssd; an SSD anchor generator or box predictor in faster_rcnn (its first
// stage takes grid_anchor_generator, its second stage mask_rcnn_box_predictor or
// rfcn_box_predictor, R-FCN); number_of_stages other than
// 1, 2 or 3. The one exception: ssd's feature_extractor.batch_norm_trainable, a field the API
// removed in 2018 that the published ssd_mobilenet_v2_coco.config still sets, gives no param:
// true is what training does anyway; false is a ConfigError pointing at freeze_batchnorm
// (faster_rcnn's feature_extractor.batch_norm_trainable is a live field of the API: a param).
#ifndef TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_H_
#define TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_H_

#include <string_view>

#include "trainyard/config_dialect.h"

namespace trainyard::detection {

// The dialect's parse (config_dialect.h): the converted pipeline when `text` parses as the API's
// TrainEvalPipelineConfig and names a model; otherwise where its parse stopped. Throws
// ConfigError "SOURCE: <api field path>: why" for what Trainyard cannot run as the API would.
ConfigDialectParse parse_od_dialect(std::string_view text, std::string_view source_name);

// The dialect itself: "object_detection_api", as od_dialect.cc registers it.
inline constexpr const char* kOdDialectName = "object_detection_api";
ConfigDialect od_dialect();

}  // namespace trainyard::detection

#endif  // TRAINYARD_PLUGINS_TASKS_DETECTION_OD_CONFIG_H_
