#!/bin/sh
# Faster R-CNN fine-tuned from a classification checkpoint, as the Object Detection API does it
# with fine_tune_checkpoint_type "classification": a slim mobilenet_v1 trained for two steps on a
# directory of images gives a checkpoint whose "MobilenetV1/..." variables both extractors of
# configs/faster_rcnn_mobilenet_v1_synth_shapes.config restore: the first stage's 23 layers x 5
# variables (weights, BatchNorm beta/gamma/moving_mean/moving_variance) and the batch norms of the
# second stage's Conv2d_12_pointwise and Conv2d_13_pointwise (2 x 4). Those two layers are
# separable convolutions whose depthwise_weights and pointwise_weights MobileNet's checkpoint does
# not have (it names them Conv2d_1x_depthwise/depthwise_weights and Conv2d_1x_pointwise/weights),
# so 4 variables are not in it, as in the API; the RPN and the box predictors are outside the
# restore map. Then type "detection" from the Faster R-CNN's own checkpoint restores both
# extractors (115 + 12 = 127 variables), and load_all_detection_checkpoint_vars every model variable.
#
# usage: faster_rcnn_fine_tune.sh TRAINYARD MAKE_IMAGE_DIR SOURCE_DIR WORKDIR
set -eu
host=$1 make_images=$2 source=$3 work=$4
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work"

sh "$(dirname "$0")/train_slim_classifier.sh" "$host" "$make_images" "$work" mobilenet_v1

"$host" data synth-shapes --output_dir "$work/data" --num_images 4 --num_val_images 2 \
  --image_size 64 --num_shards 1 >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
# NAME CHECKPOINT TYPE [LOAD_ALL]: the config made tiny, fine-tuned from CHECKPOINT, one step.
frcnn() {
  name=$1 checkpoint=$2 type=$3 load_all=${4:-false}
  sed -e "s|/tmp/synth_shapes/|$work/data/|g" -e "s|min_dimension: 160|min_dimension: 64|" \
    -e "s|max_dimension: 160|max_dimension: 64|" -e "s|batch_size: 8|batch_size: 2|" \
    -e "s|^train_config: {|train_config: {\n  fine_tune_checkpoint: \"$checkpoint\"\n  fine_tune_checkpoint_type: \"$type\"\n  load_all_detection_checkpoint_vars: $load_all|" \
    "$source/configs/faster_rcnn_mobilenet_v1_synth_shapes.config" >"$work/$name.config"
  grep -q "fine_tune_checkpoint_type: \"$type\"" "$work/$name.config" || fail "$name: train_config not found"
  "$host" train --pipeline_config_path="$work/$name.config" --train_dir="$work/$name" \
    --max_steps=1 >"$work/$name.log" 2>&1 || { tail -n 30 "$work/$name.log"; fail "$name"; }
  grep "^fine_tune_checkpoint" "$work/$name.log" || { tail -n 30 "$work/$name.log"; fail "$name: no report"; }
}
expect() {  # NAME PATTERN: the run's report line matches PATTERN
  grep "^fine_tune_checkpoint" "$work/$1.log" | grep -q "$2" || fail "$1: the report is not '$2'"
}

frcnn from_classifier "$work/classifier/model.ckpt-2" classification
expect from_classifier "restored 123 variables, skipped 4 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, [1-9][0-9]* outside the restore map of a 'classification' checkpoint"
grep -q "not in the checkpoint: SecondStageFeatureExtractor/MobilenetV1/Conv2d_12_pointwise/depthwise_weights (as MobilenetV1/Conv2d_12_pointwise/depthwise_weights)" \
  "$work/from_classifier.log" || fail "from_classifier: the second stage's separable weights are not named with their checkpoint names"

frcnn from_detection "$work/from_classifier/model.ckpt-1" detection
expect from_detection "restored 127 variables, skipped 0 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, [1-9][0-9]* outside the restore map of a 'detection' checkpoint"
frcnn load_all "$work/from_classifier/model.ckpt-1" detection true
expect load_all "restored [1-9][0-9]* variables, skipped 0 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, 0 outside the restore map"
echo "PASS"
