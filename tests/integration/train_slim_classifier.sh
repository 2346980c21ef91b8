#!/bin/sh
# A slim classification checkpoint for the detection fine-tuning tests: a directory of images
# (MAKE_IMAGE_DIR: 2 classes of 8 images, 32x32) converted to TF-Slim's TFRecords, then the
# image classifier MODEL (with the model params PARAMS, text-format `params { ... }` lines)
# trained for two steps into WORKDIR/classifier, so that WORKDIR/classifier/model.ckpt-2 holds
# its slim-named variables.
#
# usage: train_slim_classifier.sh TRAINYARD MAKE_IMAGE_DIR WORKDIR MODEL [PARAMS]
set -eu
host=$1 make_images=$2 work=$3 model=$4 params=${5:-}
fail() {
  echo "FAIL: $*"
  exit 1
}
"$make_images" "$work/images" 2 8 32
"$host" data convert-images --image_dir "$work/images" --output "$work/cls/images" \
  --num_shards 1 >"$work/convert.log" 2>&1 || { cat "$work/convert.log"; fail "convert-images"; }
cat >"$work/classifier.config" <<CONFIG
task: "classification"
num_classes: 2
model { class: "$model" $params }
train_config {
  train_dir: "$work/classifier"
  batch_size: 4
  max_steps: 2
  optimizer { class: "AdamOptimizer" }
  learning_rate { constant { learning_rate: 0.001 } }
  save_interval_secs: 0
}
train_input_reader {
  data_pattern: "$work/cls/images_train_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 32 random_flip: false normalization: INCEPTION } }
}
CONFIG
"$host" train --pipeline_config_path="$work/classifier.config" >"$work/classifier.log" 2>&1 ||
  { tail -n 30 "$work/classifier.log"; fail "training the classifier"; }
[ -f "$work/classifier/model.ckpt-2.index" ] || { ls "$work/classifier"; fail "no model.ckpt-2"; }
