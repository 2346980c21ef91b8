#!/bin/sh
# The validation GAP of frame-level models trained with --precision=f32 and --precision=bf16 on
# the same `trainyard data synth-yt8m --frame_level` data, steps and seed, through the CLI with
# the originals' flags (as tests/integration/frame_models_learn.sh trains them): one line per
# model and seed, "MODEL seed S: GAP f32 X, bf16 Y". BENCHMARKS.md's bf16 section has the
# figures; a CPU without bf16 stops it with the host's error.
#
# usage: run_bf16_frame_gap.sh TRAINYARD WORKDIR "SEEDS" "MODEL FLAGS..." ["MODEL FLAGS..." ...]
#   e.g. run_bf16_frame_gap.sh build/bin/trainyard /tmp/bf16gap "0 1 2" \
#          "LstmModel --lstm_cells=32 --lstm_layers=1" "GruModel --gru_cells=32 --gru_layers=1"
# STEPS (default 200) sets --max_steps; 20 epochs of the 1,000 videos are 400 steps.
set -eu
host=$1 work=$2 seeds=$3
shift 3
rm -rf "$work"
"$host" data synth-yt8m --output_dir "$work/data" --frame_level --num_videos 1000 \
  --num_classes 20 --feature_sizes 32,8 --min_frames 20 --max_frames 40 --num_shards 2 >/dev/null

gap_of() {  # RUN_DIR PRECISION FLAGS... -> prints the validation GAP
  dir=$1 precision=$2
  shift 2
  "$host" train --frame_features --reader=YT8MFrameFeatureReader --feature_names=rgb,audio \
    --feature_sizes=32,8 --num_classes=20 --train_dir="$work/$dir" \
    --train_data_pattern="$work/data/train-*" --batch_size=50 --max_steps="${STEPS:-200}" \
    --num_epochs=20 --base_learning_rate=0.01 --num_readers=1 --start_new_model \
    --precision="$precision" "$@" >"$work/$dir.log" 2>&1 || { cat "$work/$dir.log" >&2; exit 1; }
  "$host" eval --train_dir="$work/$dir" --eval_data_pattern="$work/data/validate-*" --run_once \
    --num_readers=1 2>&1 | tee -a "$work/$dir.log" | sed -n 's/.*| GAP: \([0-9.]*\) .*/\1/p' |
    tail -n 1
}

for spec in "$@"; do
  for seed in $seeds; do
    # shellcheck disable=SC2086
    set -- $spec
    model=$1
    shift
    f32=$(gap_of "$model.$seed.f32" f32 --model="$model" --seed="$seed" "$@")
    bf16=$(gap_of "$model.$seed.bf16" bf16 --model="$model" --seed="$seed" "$@")
    echo "$model seed $seed: GAP f32 $f32, bf16 $bf16"
  done
done
