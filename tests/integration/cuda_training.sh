#!/bin/sh
# Training on the GPU computes what training on the CPU computes: the same runs (same seeds,
# one reader, so the same batches in the same order) with --backend=cpu and --backend=cuda
# reach the same loss, within a relative LOSS_RTOL (default 0.002): the YouTube-8M
# LogisticModel and MoeModel (matmul, sigmoid cross-entropy, Adam, gradient clipping), and the
# image classifiers lenet (conv, max pool, dropout's random draws) and resnet_20 (batch norm,
# strided conv2d_same, global average pool, momentum). Then the cuda run of lenet is resumed
# from its checkpoint.
#
# Then SSD (the detection task: SSDMetaArch with MobileNet v1, hard example mining, NMS) on a
# tiny synth-shapes set, from configs/ssd_mobilenet_v1_synth_shapes.config made tiny as
# ssd_synth_shapes.sh makes it (96x96 images, batch 4): 6 steps on each backend, then eval and
# predict on cuda. Its tolerances, per step of the log:
#   - step 1 (the same initial variables and batch, so only the forward pass's summation order
#     differs): relative SSD_FIRST_RTOL (default 1e-4, the log's 6 digits being 5e-6). Hard
#     example mining ranks the negatives by their loss, so two near-tied negatives may be
#     ranked the other way; swapping them changes the loss by their difference, far below that.
#   - every later step: relative SSD_LOSS_RTOL (default 0.05). Adam's first updates are about
#     the learning rate times the sign of each gradient, so a gradient near zero whose sign
#     differs between the backends' summation orders moves its weight by 2e-3 one way or the
#     other, and the mined negatives then differ too: the runs drift apart by more than the
#     classifiers' 0.2 %, but by less than most steps' change of the loss (3-16 % a step). On
#     an H100 steps 4-6 differed by 0.3-0.9 % in one run and by 0.8-1.9 % in another (the cuda
#     losses differ between runs from step 3 on; the cpu ones do not), so 2 % was too tight.
#   - the eval loss of the cpu run's checkpoint, evaluated on cpu and on cuda (forward only, no
#     augmentation): relative SSD_FIRST_RTOL.
# The cuda run's checkpoint is evaluated on cuda (the COCO and PASCAL tags must be there) and
# predicted on cuda (a COCO results list). Prints each pair and PASS; exits 77 (a skip) where no
# usable CUDA device is found.
#
# usage: cuda_training.sh TRAINYARD MAKE_IMAGE_DIR WORKDIR [SOURCE_DIR]
# (SOURCE_DIR, for configs/: by default the tree that holds this script)
set -eu
host=$1 make_images=$2 work=$3
source=${4:-$(cd "$(dirname "$0")/../.." && pwd)}
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

# SSD: the losses of every step on both backends.
first_rtol=${SSD_FIRST_RTOL:-1e-4} ssd_rtol=${SSD_LOSS_RTOL:-0.05}
"$host" data synth-shapes --output_dir "$work/shapes" --num_images 24 --num_val_images 8 \
  --image_size 96 --num_shards 1 >"$work/shapes.log" 2>&1 || { cat "$work/shapes.log"; fail "synth-shapes"; }
sed -e "s|/tmp/synth_shapes/|$work/shapes/|g" -e "s|height: 160|height: 96|" \
  -e "s|width: 160|width: 96|" -e "s|batch_size: 16|batch_size: 4|" \
  "$source/configs/ssd_mobilenet_v1_synth_shapes.config" >"$work/ssd.config"
grep -q "height: 96" "$work/ssd.config" || fail "the SSD config's image_resizer was not found"
# The loss of each step of a detection run's log, one a line.
step_losses() { sed -n 's/^global step [0-9]*: loss = \([0-9.e+-]*\).*/\1/p' "$1"; }
for backend in cpu cuda; do
  run ssd "$backend" --pipeline_config_path="$work/ssd.config" --max_steps=6 --log_every_n_steps=1 \
    --deterministic >/dev/null
  step_losses "$work/ssd-$backend.log" >"$work/ssd-$backend.losses"
done
paste -d ' ' "$work/ssd-cpu.losses" "$work/ssd-cuda.losses" | awk -v r1="$first_rtol" -v r="$ssd_rtol" '
  { d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; tol = (NR == 1 ? r1 : r) * m + 1e-6
    printf "ssd step %d: loss %s on cpu, %s on cuda (relative difference %.2g, tolerance %.2g)\n",
      NR, $1, $2, (m > 0 ? d / m : d), tol / (m > 0 ? m : 1)
    if ($2 == "" || d > tol) bad = 1; n = NR }
  END { if (n != 6) { print "FAIL: ssd: " n " steps logged, 6 expected"; exit 1 }
        if (bad) { print "FAIL: ssd: the cpu and cuda losses differ beyond the tolerance"; exit 1 } }' ||
  fail "ssd losses"
echo "ok ssd: the losses of its 6 steps agree"

# The cpu run's checkpoint evaluated on both backends: the same eval loss (forward only).
eval_loss() { sed -n 's/^Saving dict for global step [0-9]*: .*, loss = \([0-9.e+-]*\),.*/\1/p' "$1"; }
for backend in cpu cuda; do
  "$host" eval --backend="$backend" --pipeline_config_path="$work/ssd.config" \
    --train_dir="$work/ssd-cpu" --run_once >"$work/ssd-eval-cpu-ckpt-$backend.log" 2>&1 ||
    { cat "$work/ssd-eval-cpu-ckpt-$backend.log"; fail "ssd eval of the cpu checkpoint on $backend"; }
done
cpu=$(eval_loss "$work/ssd-eval-cpu-ckpt-cpu.log") gpu=$(eval_loss "$work/ssd-eval-cpu-ckpt-cuda.log")
if [ -z "$cpu" ] || [ -z "$gpu" ]; then
  cat "$work/ssd-eval-cpu-ckpt-cpu.log" "$work/ssd-eval-cpu-ckpt-cuda.log"
  fail "ssd eval: no loss"
fi
awk -v a="$cpu" -v b="$gpu" -v r="$first_rtol" \
  'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; exit !(d <= r * m + 1e-6) }' ||
  fail "ssd eval of one checkpoint: loss $cpu on cpu, $gpu on cuda (relative tolerance $first_rtol)"
echo "ok ssd eval of the cpu checkpoint: loss $cpu on cpu, $gpu on cuda"

# The cuda run's checkpoint evaluated and predicted on cuda.
"$host" eval --backend=cuda --pipeline_config_path="$work/ssd.config" --train_dir="$work/ssd-cuda" \
  --run_once >"$work/ssd-eval-cuda.log" 2>&1 || { cat "$work/ssd-eval-cuda.log"; fail "ssd eval on cuda"; }
line=$(grep "^Saving dict for global step 6: " "$work/ssd-eval-cuda.log") ||
  { cat "$work/ssd-eval-cuda.log"; fail "ssd eval on cuda: no metrics at step 6"; }
for tag in "DetectionBoxes_Precision/mAP = " "DetectionBoxes_Precision/mAP@.50IOU = " \
  "PascalBoxes_Precision/mAP@0.5IOU = " "PascalBoxes_PerformanceByCategory/AP@0.5IOU/circle = " \
  "loss = " "examples = 8"; do
  echo "$line" | grep -qF "$tag" || fail "ssd eval on cuda has no '$tag': $line"
done
echo "ok ssd eval on cuda:$(echo "${line#*: }" | tr ',' '\n' | grep -E 'Precision/mAP( =|@)|loss' | paste -sd ',')"
"$host" predict --backend=cuda --pipeline_config_path="$work/ssd.config" --train_dir="$work/ssd-cuda" \
  --input_data_pattern="$work/shapes/val-*.tfrecord" --output_file="$work/ssd-detections.json" \
  >"$work/ssd-predict.log" 2>&1 || { cat "$work/ssd-predict.log"; fail "ssd predict on cuda"; }
grep -q "^wrote predictions for 8 examples" "$work/ssd-predict.log" ||
  { cat "$work/ssd-predict.log"; fail "ssd predict on cuda did not write the 8 val images"; }
for key in '"image_id": "val-' '"category_id": ' '"bbox": \[' '"score": '; do
  grep -q "$key" "$work/ssd-detections.json" || fail "ssd-detections.json has no $key"
done
echo "ok ssd predict on cuda: $(grep -c '"image_id"' "$work/ssd-detections.json") detections"
echo "PASS"
