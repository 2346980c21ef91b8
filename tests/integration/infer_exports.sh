#!/bin/sh
# The exports the C inference library's tests load (ctest fixture infer_exports), made as a user
# makes them with the host: a LeNet image classifier on a converted image directory, a YouTube-8M
# video-level LogisticModel and a frame-level FrameLevelLogisticModel on synthetic data, each
# trained a few steps and exported with `trainyard export`; then `trainyard predict` of each
# export on its validation records with every class (--top_k = num_classes), the reference the
# tests compare the library's outputs with. Each checkpoint is also exported with --format
# saved_model (NAME_saved_model), and a LeNet trained with use_moving_average in both formats
# (lenet_ema_export, lenet_ema_saved_model), for infer_saved_model_test.
#
# usage: infer_exports.sh TRAINYARD MAKE_IMAGE_DIR WORKDIR
set -eu
host=$1 make_images=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; [ -f "$work/log" ] && cat "$work/log"; exit 1; }

# --- LeNet on 28x28 RGB images of 3 classes ---
"$make_images" "$work/images" 3 12 28
"$host" data convert-images --image_dir "$work/images" --output "$work/data/shapes" \
  --validation_fraction 0.25 --num_shards 1 >"$work/log" 2>&1 || fail "convert-images"
cat >"$work/lenet.config" <<CONFIG
task: "classification"
num_classes: 3
model { class: "lenet" }
train_config {
  train_dir: "$work/lenet_train"
  batch_size: 8
  optimizer { class: "AdamOptimizer" }
  learning_rate { constant { learning_rate: 0.001 } }
  save_interval_secs: 0
}
train_input_reader {
  data_pattern: "$work/data/shapes_train_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 normalization: LENET } }
}
eval_input_reader {
  data_pattern: "$work/data/shapes_validation_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 normalization: LENET } }
}
eval_config { batch_size: 4 }
CONFIG
"$host" train --pipeline_config_path="$work/lenet.config" --max_steps=4 >"$work/log" 2>&1 ||
  fail "train lenet"
"$host" export --train_dir="$work/lenet_train" --export_dir="$work/lenet_export" \
  >"$work/log" 2>&1 || fail "export lenet"
"$host" predict --train_dir="$work/lenet_export" \
  --input_data_pattern="$work/data/shapes_validation_*" --output_file="$work/lenet.csv" \
  --top_k=3 >"$work/log" 2>&1 || fail "predict lenet"

# The same checkpoint as a SavedModel (`--format saved_model`), which the library also loads.
"$host" export --train_dir="$work/lenet_train" --format=saved_model \
  --export_dir="$work/lenet_saved_model" >"$work/log" 2>&1 || fail "export lenet saved_model"
# LeNet with moving averages of its weights: both exports serve the averages.
sed -e "s|lenet_train|lenet_ema_train|" -e "s|save_interval_secs: 0|save_interval_secs: 0\
  use_moving_average: true|" "$work/lenet.config" >"$work/lenet_ema.config"
grep -q "use_moving_average: true" "$work/lenet_ema.config" || fail "lenet_ema.config"
"$host" train --pipeline_config_path="$work/lenet_ema.config" --max_steps=4 >"$work/log" 2>&1 ||
  fail "train lenet with moving averages"
"$host" export --train_dir="$work/lenet_ema_train" --export_dir="$work/lenet_ema_export" \
  >"$work/log" 2>&1 || fail "export lenet_ema"
"$host" export --train_dir="$work/lenet_ema_train" --format=saved_model \
  --export_dir="$work/lenet_ema_saved_model" >"$work/log" 2>&1 || fail "export lenet_ema saved_model"

# --- YouTube-8M: video-level LogisticModel, frame-level FrameLevelLogisticModel ---
"$host" data synth-yt8m --output_dir "$work/yt8m" --num_videos 100 --num_classes 10 \
  --num_shards 1 --feature_sizes 24,8 --seed 3 >"$work/log" 2>&1 || fail "synth-yt8m"
"$host" data synth-yt8m --output_dir "$work/yt8m_frames" --frame_level --num_videos 40 \
  --num_classes 10 --num_shards 1 --feature_sizes 24,8 --min_frames 3 --max_frames 8 --seed 4 \
  >"$work/log" 2>&1 || fail "synth-yt8m --frame_level"
"$host" train --model=LogisticModel --train_data_pattern="$work/yt8m/train-*" \
  --train_dir="$work/logistic_train" --num_classes=10 --feature_names=mean_rgb,mean_audio \
  --feature_sizes=24,8 --batch_size=16 --max_steps=5 >"$work/log" 2>&1 || fail "train logistic"
"$host" export --train_dir="$work/logistic_train" --export_dir="$work/logistic_export" \
  >"$work/log" 2>&1 || fail "export logistic"
"$host" export --train_dir="$work/logistic_train" --format=saved_model \
  --export_dir="$work/logistic_saved_model" >"$work/log" 2>&1 || fail "export logistic saved_model"
"$host" predict --train_dir="$work/logistic_export" \
  --input_data_pattern="$work/yt8m/validate-*" --output_file="$work/logistic.csv" --top_k=10 \
  >"$work/log" 2>&1 || fail "predict logistic"
"$host" train --model=FrameLevelLogisticModel --frame_features \
  --train_data_pattern="$work/yt8m_frames/train-*" --train_dir="$work/frames_train" \
  --num_classes=10 --feature_names=rgb,audio --feature_sizes=24,8 --max_frames=8 \
  --batch_size=8 --max_steps=3 >"$work/log" 2>&1 || fail "train frame-level"
"$host" export --train_dir="$work/frames_train" --export_dir="$work/frames_export" \
  >"$work/log" 2>&1 || fail "export frame-level"
"$host" export --train_dir="$work/frames_train" --format=saved_model \
  --export_dir="$work/frames_saved_model" >"$work/log" 2>&1 || fail "export frame-level saved_model"
"$host" predict --train_dir="$work/frames_export" \
  --input_data_pattern="$work/yt8m_frames/validate-*" --output_file="$work/frames.csv" --top_k=10 \
  >"$work/log" 2>&1 || fail "predict frame-level"
echo "PASS: exports and predictions in $work"
