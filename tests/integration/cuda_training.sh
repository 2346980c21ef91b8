#!/bin/sh
# Training on the GPU computes what training on the CPU computes: the same runs (same seeds,
# one reader, so the same batches in the same order) with --backend=cpu and --backend=cuda
# reach the same loss, within a relative LOSS_RTOL (default 0.002): the YouTube-8M
# LogisticModel and MoeModel (matmul, sigmoid cross-entropy, Adam, gradient clipping), and the
# image classifiers lenet (conv, max pool, dropout's random draws) and resnet_20 (batch norm,
# strided conv2d_same, global average pool, momentum). Then the cuda run of lenet is resumed
# from its checkpoint. Prints each pair and PASS; exits 77 (a skip) where no usable CUDA device
# is found.
#
# usage: cuda_training.sh TRAINYARD MAKE_IMAGE_DIR WORKDIR
set -eu
host=$1 make_images=$2 work=$3
rtol=${LOSS_RTOL:-0.002}
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$host" plugins check >"$work/check.log" 2>&1 || true
if grep -q "^skip  backend  *cuda" "$work/check.log"; then
  grep "^skip  backend  *cuda" "$work/check.log"
  exit 77
fi
grep -q "^ok    backend  *cuda" "$work/check.log" || { cat "$work/check.log"; fail "plugins check"; }

# The loss of the last step of a run's log.
final_loss() { sed -n 's/^trained to step [0-9]*, loss \([0-9.e+-]*\),.*/\1/p' "$1"; }

# NAME BACKEND ARGS...: trains, prints the final loss.
run() {
  name=$1 backend=$2
  shift 2
  log="$work/$name-$backend.log"
  "$host" train --backend="$backend" --train_dir="$work/$name-$backend" --num_readers=1 \
    "$@" >"$log" 2>&1 || { cat "$log"; fail "$name on $backend"; }
  loss=$(final_loss "$log")
  [ -n "$loss" ] || { cat "$log"; fail "$name on $backend: no final loss"; }
  echo "$loss"
}

# NAME ARGS...: the run on both backends; their losses must agree.
compare() {
  name=$1
  shift
  cpu=$(run "$name" cpu "$@")
  gpu=$(run "$name" cuda "$@")
  if awk -v a="$cpu" -v b="$gpu" -v r="$rtol" \
      'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; exit !(d <= r * m + 1e-6) }'; then
    echo "ok $name: loss $cpu on cpu, $gpu on cuda"
  else
    fail "$name: loss $cpu on cpu, $gpu on cuda (relative tolerance $rtol)"
  fi
}

"$host" data synth-yt8m --output_dir "$work/yt8m" --num_videos 500 --num_classes 20 \
  --feature_sizes 32,8 --num_shards 1 >/dev/null
for model in LogisticModel MoeModel; do
  compare "$model" --model="$model" --feature_names=mean_rgb,mean_audio --feature_sizes=32,8 \
    --num_classes=20 --train_data_pattern="$work/yt8m/train-*" --batch_size=50 --max_steps=40 \
    --num_epochs=10 --start_new_model
done

for spec in "lenet 28 AdamOptimizer LENET 0.0001" "resnet_20 32 MomentumOptimizer VGG 0.001"; do
  # shellcheck disable=SC2086
  set -- $spec
  model=$1 size=$2 optimizer=$3 normalization=$4 rate=$5
  "$make_images" "$work/images_$size" 3 40 "$size" >/dev/null
  "$host" data convert-images --image_dir "$work/images_$size" --output "$work/data_$size/shapes" \
    --validation_fraction 0 --num_shards 1 >/dev/null
  cat >"$work/$model.config" <<CONFIG
task: "classification"
num_classes: 3
model { class: "$model" }
train_config {
  batch_size: 16
  optimizer { class: "$optimizer" }
  learning_rate { constant { learning_rate: $rate } }
  clip_gradient_norm: 0
}
train_input_reader {
  data_pattern: "$work/data_$size/shapes_train_*"
  num_epochs: 0
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: $size normalization: $normalization } }
}
CONFIG
  compare "$model" --pipeline_config_path="$work/$model.config" --max_steps=8
done

# A resumed GPU run continues from its checkpoint.
run lenet cuda --pipeline_config_path="$work/lenet.config" --max_steps=12 >/dev/null
grep -q "trained to step 12" "$work/lenet-cuda.log" || { cat "$work/lenet-cuda.log"; fail "resume"; }
echo "PASS"
