#!/bin/sh
# The Object Detection API's own SSD and Faster R-CNN sample configs (tests/fixtures/od_configs,
# as published in research/object_detection/samples/configs) train from scratch on synth-shapes through
# train_and_evaluate, changed only where a user must change them: the data and label map paths
# (PATH_TO_BE_CONFIGURED), no fine_tune_checkpoint (from scratch), and, for 2 cores, images of
# 96x96 (300x300 or 320x320 in the sample) or 160x160 (640x640 and 512x512; ResNet-50 needs at
# least 129), keep_aspect_ratio_resizer's 320 to 640 as 96 to 192, and batch 2 for 2 steps (the
# embedded SSD keeps its 256x256, the only size it takes). Each
# passes `config check` first. The configs: SSD MobileNet v1 and v2, SSDLite MobileNet v2 and v3
# (small and large), embedded SSD MobileNet v1, RetinaNet on MobileNet v1 FPN and on ResNet-50
# FPN, MobileNet v1 PPN, SSD Inception v2 (COCO) and v3 (pets and COCO), SSD MobileNet v1 at
# 300x300 (sync, depth 1 and 0.75), on pets (with and without focal loss, and focal loss with
# static-shape NMS for inference), SSDLite MobileNet v1,
# SSD MobileNet v2 with COCO's per-category mAP (include_metrics_per_category, checked in the log),
# SSD MobileNet v2 Keras (ssd_mobilenet_v2_keras, pets), SSD MobileNet v2 fully convolutional
# (keep_aspect_ratio_resizer, resized in the model) and the two Open Images ones (SSD MobileNet v2
# on OID v4 with open_images_V2_detection_metrics, RetinaNet on ResNet-101 FPN with its former name
# oid_V2_detection_metrics), whose final evaluation reports OpenImagesV2_Precision/mAP@0.5IOU
# instead of COCO's figures. The Faster R-CNN samples, named on the command line
# (Inception v2, ResNet-50, -101 and -152, Inception-ResNet v2 atrous, and R-FCN on ResNet-101,
# rfcn_resnet101_coco; NAME@stride8 for a sample's atrous variant, see below) take
# keep_aspect_ratio_resizer's 600 to 1024 as 64 to 96 and 64 first-stage proposals instead of
# 300 (the least their second_stage_batch_size of 64 allows). The Mask R-CNN samples (Inception
# v2, ResNet-50 atrous) take 800 to 1365 as 64 to 96 and data with instance masks.
# The quantized samples (graph_rewriter { quantization }: SSD MobileNet v1, v1 at depth 0.75, v2
# and SSDLite v2) take their quantization delay of 48000 steps (facessd's 500000) as 1, so that
# both training steps run the fake quantization (fake_quantization_step 1 and 2 >= 1; SSDLite's
# delay is 0, no step counter); their final evaluation quantizes as create_eval_graph does.
# Usage: od_sample_configs.sh HOST SOURCE_DIR WORK_DIR [CONFIG_NAME ...]
# (without names: the SSD configs above).
set -eu
host=$1
source_dir=$2
work=$3
shift 3
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*"
  exit 1
}

# Instance masks (PNG) for the Mask R-CNN samples.
masks=
case " $* " in *" mask_rcnn_"*) masks=--masks ;; esac
"$host" data synth-shapes --output_dir "$work/data" --num_images 8 --num_val_images 4 \
  --image_size 160 --num_shards 1 $masks > /dev/null
if [ $# -eq 0 ]; then
  set -- ssd_mobilenet_v1_coco ssd_mobilenet_v2_coco ssdlite_mobilenet_v2_coco \
  embedded_ssd_mobilenet_v1_coco \
  ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync \
  ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync \
  ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco14_sync \
  ssd_inception_v2_coco ssd_inception_v3_pets \
  ssdlite_mobilenet_v3_small_320x320_coco ssdlite_mobilenet_v3_large_320x320_coco \
  ssd_mobilenet_v1_300x300_coco14_sync ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync \
  ssd_mobilenet_v1_pets ssd_mobilenet_v1_focal_loss_pets ssdlite_mobilenet_v1_coco \
  ssd_mobilenet_v2_coco_per_class_metric ssd_mobilenet_v2_pets_keras ssd_mobilenet_v2_fullyconv_coco \
  ssd_mobilenet_v2_oid_v4 ssd_resnet101_v1_fpn_shared_box_predictor_oid_512x512_sync \
  ssd_inception_v3_coco ssd_mobilenet_v1_focal_loss_pets_inference
fi
# adapt SAMPLE [SED_EXPRESSION]: the sample as a user must change it (above: each reader's
# input_path, whatever the file is called, and every label map), on stdout.
# (faster_rcnn_resnet50_coco's copy, which od_config_faster_rcnn_test reads, has /data/mscoco for
# PATH_TO_BE_CONFIGURED.)
adapt() {
  sed -e 's|"/data/mscoco/|"PATH_TO_BE_CONFIGURED/|' -e "/^train_input_reader/,/^}/ s|input_path: \"PATH_TO_BE_CONFIGURED[^\"]*\"|input_path: \"$work/data/train-*\"|" \
    -e "/^eval_input_reader/,/^}/ s|input_path: \"PATH_TO_BE_CONFIGURED[^\"]*\"|input_path: \"$work/data/val-*\"|" \
    -e "s|label_map_path: \"PATH_TO_BE_CONFIGURED[^\"]*\"|label_map_path: \"$work/data/label_map.pbtxt\"|" \
    -e '/fine_tune_checkpoint:/d' -e 's/height: 300$/height: 96/' -e 's/width: 300$/width: 96/' \
    -e 's/height: 640$/height: 160/' -e 's/width: 640$/width: 160/' \
    -e 's/height: 512$/height: 160/' -e 's/width: 512$/width: 160/' \
    -e 's/height: 320$/height: 96/' -e 's/width: 320$/width: 96/' \
    -e 's/min_dimension: 320$/min_dimension: 96/' -e 's/max_dimension: 640$/max_dimension: 192/' \
    -e 's/min_dimension: 600$/min_dimension: 64/' -e 's/max_dimension: 1024$/max_dimension: 96/' \
    -e 's/min_dimension: 800$/min_dimension: 64/' -e 's/max_dimension: 1365$/max_dimension: 96/' \
    -e 's/first_stage_max_proposals: 300$/first_stage_max_proposals: 64/' \
    -e 's/batch_size: \(24\|32\|64\|128\|512\|1024\|2048\)$/batch_size: 2/' \
    -e 's/^\( *delay:\) \(48000\|500000\)$/\1 1/' \
    -e "${2:-}" "$source_dir/tests/fixtures/od_configs/$1.config"
}
# A manual_step_learning_rate schedule at step 0 (faster_rcnn_resnet101_coco's): the API's
# learning_schedules.manual_stepping raises "First step cannot be zero.", so config check must
# refuse it as written, and a user leaves that schedule out (its rate is initial_learning_rate).
zero_step='/^ *schedule {$/{N;/\n *step: 0$/{N;N;d}}'
for name in "$@"; do
  config=$work/$name.config
  # NAME@stride8: the sample at first_stage_features_stride 8 with anchors every 8 pixels, its
  # atrous variant (resnet_v1 at output_stride 8, as the API's extractors build it).
  sample=${name%@stride8}
  stride8=
  [ "$sample" != "$name" ] && stride8='s/\(first_stage_features_stride\|height_stride\|width_stride\): 16$/\1: 8/'
  adapt "$sample" "$stride8" > "$config"
  [ -z "$stride8" ] || grep -q '^ *first_stage_features_stride: 8$' "$config" ||
    fail "$name: $sample has no first_stage_features_stride of 16 to make 8"
  if grep -q '^ *step: 0$' "$config"; then
    "$host" config check "$config" > "$work/$name.check" 2>&1 &&
      fail "$name: config check took a schedule at step 0"
    grep -q 'First step cannot be zero' "$work/$name.check" ||
      { cat "$work/$name.check"; fail "$name: the schedule at step 0 refused without the API's reason"; }
    adapt "$sample" "$stride8" | sed -e "$zero_step" > "$config"
  fi
  # ssdlite_mobilenet_v2_coco_quantize sets train_config fields the API's train.proto does not
  # have (load_all_optimizer_checkpoint_vars, load_all_moving_average_checkpoint_vars,
  # include_global_step): config check must refuse it as written, naming the first, and a user
  # leaves them out.
  if grep -q '^ *load_all_optimizer_checkpoint_vars:' "$config"; then
    "$host" config check "$config" > "$work/$name.check" 2>&1 &&
      fail "$name: config check took load_all_optimizer_checkpoint_vars"
    grep -q 'no field named "load_all_optimizer_checkpoint_vars"' "$work/$name.check" ||
      { cat "$work/$name.check"; fail "$name: the unknown field refused without its name"; }
    sed -i '/^ *\(load_all_optimizer_checkpoint_vars\|load_all_moving_average_checkpoint_vars\|include_global_step\):/d' \
      "$config"
  fi
  grep -v "^#" "$config" | grep -q PATH_TO_BE_CONFIGURED && fail "$name: a path left to configure"
  # A Mask R-CNN sample whose readers do not load the masks (mask_rcnn_inception_v2_coco) trains
  # only with them, in the API as here: each reader gets load_instance_masks and PNG_MASKS.
  # A schedule entry at step 0 (mask_rcnn_inception_v2_coco) goes: the API's manual_stepping
  # refuses it ("First step cannot be zero."), as Trainyard does.
  sed -i '/^ *schedule {$/{N;/step: 0$/{N;N;d}}' "$config"
  case $name in
    mask_rcnn_*)
      grep -q "load_instance_masks: true" "$config" ||
        sed -i -e '/^\(train\|eval\)_input_reader/,/^}/ s|^\(  label_map_path: .*\)$|\1\n  load_instance_masks: true\n  mask_type: PNG_MASKS|' \
          "$config" ;;
  esac
  "$host" config check "$config" > "$work/$name.check" 2>&1 ||
    { cat "$work/$name.check"; fail "$name: config check"; }
  "$host" train_and_evaluate --pipeline_config_path="$config" --model_dir="$work/model_$name" \
    --num_train_steps=2 > "$work/$name.log" 2>&1 || { tail -n 20 "$work/$name.log"; fail "$name: train_and_evaluate"; }
  case $name in
    *_oid_*) metric='OpenImagesV2_Precision/mAP@0.5IOU' ;;
    *) metric='DetectionBoxes_Precision/mAP' ;;
  esac
  grep -q "^final evaluation at step 2:.*$metric" "$work/$name.log" ||
    { tail -n 20 "$work/$name.log"; fail "$name: no final evaluation"; }
  # Quantization-aware training: the checkpoint holds contrib.quantize's variables (the index
  # keeps the names as bytes; fake_quantization_step shares no prefix with its neighbours).
  if grep -q '^graph_rewriter' "$config"; then
    keys="act_quant weights_quant"
    # The step counter exists only with a delay (delay: 0 quantizes from the first step).
    grep -q '^ *delay: [1-9]' "$config" && keys="$keys fake_quantization_step"
    # MobileNet v2's residual sums (contrib.quantize's post-activation bypass).
    case $name in *mobilenet_v2*) keys="$keys post_activation_bypass_quant" ;; esac
    for key in $keys; do
      cat "$work/model_$name"/model.ckpt-2.index | grep -aq "$key" ||
        fail "$name: no $key in the checkpoint of step 2"
    done
  fi
  if grep -q '^ *include_metrics_per_category: true' "$config"; then
    grep -q '^final evaluation at step 2:.*DetectionBoxes_PerformanceByCategory/mAP/' "$work/$name.log" ||
      { tail -n 20 "$work/$name.log"; fail "$name: no per-category mAP"; }
  fi
  echo "ok: $name"
done
rm -rf "$work"
echo "od sample configs OK"
