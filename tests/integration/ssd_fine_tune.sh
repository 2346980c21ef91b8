#!/bin/sh
# SSD fine-tuned from a classification checkpoint, as the Object Detection API does it with
# fine_tune_checkpoint_type "classification": a slim mobilenet_v1 (depth 0.25, min_depth 16, the
# SSD config's) trained for two steps on a directory of images gives a checkpoint whose
# "MobilenetV1/..." variables the SSD config's feature extractor "FeatureExtractor/MobilenetV1/..."
# restores; the extra layers are not in it and the box predictor is outside the restore map.
# Then type "detection" from the SSD's own checkpoint restores the feature extractor alone, and
# load_all_detection_checkpoint_vars every model variable. Counts are the API's for this net:
# 27 MobileNet layers x 5 variables (weights, BatchNorm beta/gamma/moving_mean/moving_variance).
#
# usage: ssd_fine_tune.sh TRAINYARD MAKE_IMAGE_DIR SOURCE_DIR WORKDIR
set -eu
host=$1 make_images=$2 source=$3 work=$4
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work"

sh "$(dirname "$0")/train_slim_classifier.sh" "$host" "$make_images" "$work" mobilenet_v1 \
  'params { key: "depth_multiplier" float_value: 0.25 } params { key: "min_depth" int_value: 16 }'

"$host" data synth-shapes --output_dir "$work/data" --num_images 8 --num_val_images 4 \
  --image_size 96 --num_shards 1 >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
# NAME CHECKPOINT TYPE [LOAD_ALL]: the SSD config made tiny, fine-tuned from CHECKPOINT, one step.
ssd() {
  name=$1 checkpoint=$2 type=$3 load_all=${4:-false}
  sed -e "s|/tmp/synth_shapes/|$work/data/|g" -e "s|height: 160|height: 96|" \
    -e "s|width: 160|width: 96|" -e "s|batch_size: 16|batch_size: 2|" \
    -e "s|^train_config: {|train_config: {\n  fine_tune_checkpoint: \"$checkpoint\"\n  fine_tune_checkpoint_type: \"$type\"\n  load_all_detection_checkpoint_vars: $load_all|" \
    "$source/configs/ssd_mobilenet_v1_synth_shapes.config" >"$work/$name.config"
  grep -q "fine_tune_checkpoint_type: \"$type\"" "$work/$name.config" || fail "$name: train_config not found"
  "$host" train --pipeline_config_path="$work/$name.config" --train_dir="$work/$name" \
    --max_steps=1 >"$work/$name.log" 2>&1 || { tail -n 30 "$work/$name.log"; fail "$name"; }
  grep "^fine_tune_checkpoint" "$work/$name.log" || { tail -n 30 "$work/$name.log"; fail "$name: no report"; }
}
expect() {  # NAME PATTERN: the run's report line matches PATTERN
  grep "^fine_tune_checkpoint" "$work/$1.log" | grep -q "$2" || fail "$1: the report is not '$2'"
}

ssd from_classifier "$work/classifier/model.ckpt-2" classification
expect from_classifier "restored 135 variables, skipped 40 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, [1-9][0-9]* outside the restore map of a 'classification' checkpoint"
grep -q "not in the checkpoint: FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_64/weights (as MobilenetV1/Conv2d_13_pointwise_1_Conv2d_2_1x1_64/weights)" \
  "$work/from_classifier.log" || fail "from_classifier: the extra layers are not named with their checkpoint names"

ssd from_detection "$work/from_classifier/model.ckpt-1" detection
expect from_detection "restored 175 variables, skipped 0 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, [1-9][0-9]* outside the restore map of a 'detection' checkpoint"
ssd load_all "$work/from_classifier/model.ckpt-1" detection true
expect load_all "restored [1-9][0-9]* variables, skipped 0 not in the checkpoint and 0 excluded by checkpoint_exclude_scopes, 0 mismatched, 0 outside the restore map"
echo "PASS"
