#!/bin/sh
# The Object Detection API's own pipeline.config through the host, as model_main runs it
# (plugins/tasks/detection/od_config.h): configs/ssd_mobilenet_v1_synth_shapes.config, shrunk
# to 64x64 images, batch 2 and 2 steps, on a few synth-shapes images. Checks that it prints and
# checks, trains and evaluates (train_and_evaluate), that the run records Trainyard's form as
# pipeline.config, model_main's eval-only mode (--checkpoint_dir, --run_once,
# --sample_1_of_n_eval_examples, --eval_training_data) and the errors naming an unknown field
# and a bad flag value.
# Usage: od_config_cli.sh HOST SOURCE_DIR WORK_DIR
set -eu
host=$1
source_dir=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*"
  exit 1
}

"$host" data synth-shapes --output_dir "$work/data" --num_images 8 --num_val_images 4 \
  --image_size 64 --num_shards 1 > /dev/null
sed -e "s|/tmp/synth_shapes|$work/data|g" -e 's|height: 160|height: 64|' \
  -e 's|width: 160|width: 64|' -e 's|batch_size: 16|batch_size: 2|' \
  "$source_dir/configs/ssd_mobilenet_v1_synth_shapes.config" > "$work/pipeline.config"

"$host" config check "$work/pipeline.config" | grep -q ': OK' || fail "config check"
"$host" config print "$work/pipeline.config" > "$work/printed.config"
grep -q 'class: "SSDMetaArch"' "$work/printed.config" || fail "config print: no SSDMetaArch"
grep -q 'resize_image' "$work/printed.config" || fail "config print: no resize_image"

"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --model_dir="$work/model" --num_train_steps=2 > "$work/train.log" 2>&1 ||
  { cat "$work/train.log"; fail "train_and_evaluate"; }
grep -q '^final evaluation at step 2:.*PascalBoxes_Precision/mAP@0.5IOU' "$work/train.log" ||
  { cat "$work/train.log"; fail "no final evaluation"; }
grep -q 'class: "SSDMetaArch"' "$work/model/pipeline.config" ||
  fail "model_dir/pipeline.config is not Trainyard's form"

# Eval-only: every second of the 4 validation images, into model_dir/eval_validation_data.
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --model_dir="$work/eval" --checkpoint_dir="$work/model" --run_once \
  --sample_1_of_n_eval_examples=2 > "$work/eval.log" 2>&1 ||
  { cat "$work/eval.log"; fail "eval-only"; }
grep -q '^evaluation at step 2:.* examples = 2$' "$work/eval.log" ||
  { cat "$work/eval.log"; fail "eval-only: not 2 of 4 examples at step 2"; }
[ -d "$work/eval/eval_validation_data" ] || fail "no eval_validation_data"
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --model_dir="$work/eval" --checkpoint_dir="$work/model" --run_once --eval_training_data \
  --sample_1_of_n_eval_on_train_examples=1 > "$work/eval_train.log" 2>&1 ||
  { cat "$work/eval_train.log"; fail "eval-only on training data"; }
grep -q ' examples = 8$' "$work/eval_train.log" ||
  { cat "$work/eval_train.log"; fail "eval_training_data: not the 8 training examples"; }
[ -d "$work/eval/eval_training_data" ] || fail "no eval_training_data"

if "$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --model_dir="$work/eval" --checkpoint_dir="$work/model" --sample_1_of_n_eval_examples=0 \
  > "$work/bad.log" 2>&1; then fail "--sample_1_of_n_eval_examples=0 accepted"; fi
grep -q 'sample_1_of_n_eval_examples is 0; it must be at least 1' "$work/bad.log" ||
  { cat "$work/bad.log"; fail "no error naming the flag"; }

printf 'model {\n  ssd {\n    no_such_field: 1\n  }\n}\n' > "$work/unknown.config"
if "$host" config check "$work/unknown.config" > "$work/unknown.log" 2>&1; then
  fail "an unknown field accepted"
fi
grep -q 'unknown.config:3:.*no field named "no_such_field"' "$work/unknown.log" ||
  { cat "$work/unknown.log"; fail "no error naming the field and line"; }
rm -rf "$work"
echo "od config CLI OK"
