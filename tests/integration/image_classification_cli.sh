#!/bin/sh
# An image classifier through the host as a user drives it: a directory of class
# subdirectories converted to TF-Slim's TFRecords, trained and evaluated together
# (train_and_evaluate: evaluations after checkpoints under eval_<name>, BEST and FINAL exports),
# then evaluated, predicted from the train_dir and from an export, resumed, and refused without
# evaluation data; then a slim-named ResNet fine-tuned from a V1 checkpoint TensorFlow wrote
# (TF-Slim's flags: its 5-class logits excluded, only the head and block2 trained). Fails with the log on any step that does not do what it should.
#
# usage: image_classification_cli.sh TRAINYARD MAKE_IMAGE_DIR WORKDIR GOLDEN_DIR
set -eu
host=$1 make_images=$2 work=$3 golden=$4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; [ -f "$work/log" ] && cat "$work/log"; exit 1; }

"$make_images" "$work/images" 3 40 28
"$host" data convert-images --image_dir "$work/images" --output "$work/data/shapes" \
  --validation_fraction 0.25 --num_shards 2 >"$work/log" 2>&1 || fail "convert-images"
[ -f "$work/data/labels.txt" ] || fail "no labels.txt"
grep -q "^2:class_c$" "$work/data/labels.txt" || fail "labels.txt: $(cat "$work/data/labels.txt")"

cat >"$work/pipeline.config" <<CONFIG
task: "classification"
num_classes: 3
model { class: "lenet" }
train_config {
  train_dir: "$work/train"
  batch_size: 16
  optimizer { class: "AdamOptimizer" }
  learning_rate { constant { learning_rate: 0.001 } }
  clip_gradient_norm: 0
  save_interval_secs: 0
  log_every_n_steps: 10
}
train_input_reader {
  data_pattern: "$work/data/shapes_train_*"
  num_epochs: 0
  num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 random_flip: true normalization: LENET } }
}
eval_input_reader {
  data_pattern: "$work/data/shapes_validation_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 normalization: LENET } }
}
eval_config {
  batch_size: 10
  name: "holdout"
  throttle_secs: 0
  exporters { name: "best" kind: BEST }
  exporters { name: "final" kind: FINAL }
}
CONFIG

"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --num_train_steps=30 >"$work/log" 2>&1 || fail "train_and_evaluate"
grep -q "^global step 10: loss = [0-9.]*, accuracy = [0-9.]* (" "$work/log" ||
  fail "no training line"
line=$(grep "^Saving dict for global step 30: " "$work/log") || fail "no evaluation of step 30"
accuracy=$(echo "$line" | sed -n 's/.* accuracy = \([0-9.]*\),.*/\1/p')
echo "$line"
awk "BEGIN { exit !($accuracy >= 0.9) }" || fail "accuracy $accuracy after 30 steps"
echo "$line" | grep -q "examples = 30, global_step = 30" || fail "not the 30 validation images"
[ -d "$work/train/eval_holdout" ] || fail "no train/eval_holdout"
[ ! -d "$work/train/eval" ] || fail "evaluations went to train/eval"
[ "$(ls "$work/train/export/final" | wc -l)" -eq 1 ] || fail "not one final export"
[ "$(ls "$work/train/export/best" | wc -l)" -ge 1 ] || fail "no best export"
[ -f "$work/train/pipeline.config" ] || fail "the run's pipeline.config was not recorded"

"$host" eval --train_dir="$work/train" --eval_data_pattern="$work/data/shapes_validation_*" \
  --run_once >"$work/log" 2>&1 || fail "eval"
grep -q "^Saving dict for global step 30: accuracy = " "$work/log" || fail "eval line"

final=$(ls -d "$work"/train/export/final/* | head -n 1)
"$host" predict --train_dir="$final" --input_data_pattern="$work/data/shapes_validation_*" \
  --output_file="$work/predictions.csv" --top_k=2 >"$work/log" 2>&1 || fail "predict"
[ "$(head -n 1 "$work/predictions.csv")" = "ImageId,LabelConfidencePairs" ] || fail "CSV header"
[ "$(wc -l <"$work/predictions.csv")" -eq 31 ] || fail "CSV rows: $(wc -l <"$work/predictions.csv")"
grep -Eq "^class_[abc]/img_[0-9]+\.png,[012] [0-9.e-]+ [012] [0-9.e-]+$" "$work/predictions.csv" ||
  fail "CSV rows: $(sed -n 2p "$work/predictions.csv")"

# TF-Slim's checkpoint without its run, with eval_image_classifier's flags and the model's own.
"$host" predict --model=resnet_v1 --base_depths=4,8 --num_units=2,2 --strides=2,1 \
  --scope=resnet_v1_small --num_classes=5 --preprocessing_name=inception --eval_image_size=32 \
  --checkpoint_path="$golden/slim_nets/resnet_v1_small/v1/model.ckpt" \
  --input_data_pattern="$work/data/shapes_validation_*" --output_file="$work/slim.csv" \
  --top_k=5 >"$work/log" 2>&1 || fail "predict from a TF-Slim checkpoint"
[ "$(wc -l <"$work/slim.csv")" -eq 31 ] || fail "TF-Slim CSV rows"
grep -Eq "^class_[abc]/img_[0-9]+\.png,([0-4] [0-9.e-]+ ){4}[0-4] [0-9.e-]+$" "$work/slim.csv" ||
  fail "TF-Slim CSV rows: $(sed -n 2p "$work/slim.csv")"

# A second run resumes (the recorded config agrees) and evaluates its last step.
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --num_train_steps=32 >"$work/log" 2>&1 || fail "resumed train_and_evaluate"
grep -q "at step 30" "$work/log" || fail "did not resume from step 30"
grep -q "^Saving dict for global step 32: " "$work/log" || fail "no evaluation of step 32"
[ "$(ls "$work/train/export/final" | wc -l)" -eq 2 ] || fail "not a second final export"

# Without evaluation data, train_and_evaluate refuses before training.
grep -v "shapes_validation_" "$work/pipeline.config" >"$work/no_eval.config"
if "$host" train_and_evaluate --pipeline_config_path="$work/no_eval.config" \
  --num_train_steps=40 >"$work/log" 2>&1; then
  fail "trained without evaluation data"
fi
grep -q "train_and_evaluate needs evaluation data" "$work/log" || fail "the refusal's message"
# Fine-tuning from TF-Slim's V1 checkpoint (tests/golden/slim_nets) with TF-Slim's flags.
sed -e 's|model { class: "lenet" }|model { class: "resnet_v1" params { key: "base_depths" int_list { value: [4, 8] } } params { key: "num_units" int_list { value: [2, 2] } } params { key: "strides" int_list { value: [2, 1] } } params { key: "scope" string_value: "resnet_v1_small" } }|' \
  -e "s|$work/train|$work/fine_tuned|" \
  -e 's|fixed_resize_side: 0 default_image_size: 28|fixed_resize_side: 32 default_image_size: 32|' \
  -e 's|normalization: LENET|normalization: INCEPTION|' "$work/pipeline.config" >"$work/fine_tune.config"
"$host" train_and_evaluate --pipeline_config_path="$work/fine_tune.config" --num_train_steps=4 \
  --checkpoint_path="$golden/slim_nets/resnet_v1_small/v1/model.ckpt" \
  --checkpoint_exclude_scopes=resnet_v1_small/logits \
  --trainable_scopes=resnet_v1_small/logits,resnet_v1_small/block2 >"$work/log" 2>&1 ||
  fail "fine-tuning train_and_evaluate"
grep -q "model.ckpt: restored 75 variables, skipped 0 not in the checkpoint and 2 excluded by checkpoint_exclude_scopes, 0 mismatched" "$work/log" ||
  fail "the fine-tuning report"
grep -q "excluded: resnet_v1_small/logits/weights" "$work/log" || fail "the excluded variables"
grep -q "^Saving dict for global step 4: " "$work/log" || fail "no evaluation of the fine-tuned step 4"
echo "PASS"
