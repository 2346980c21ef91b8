#!/bin/sh
# Frame-level models learn what a frame average cannot see: on `trainyard data synth-yt8m
# --frame_level` data, whose evidence sits in a few frames with a sign drawn per frame, each
# model given after the host reaches a validation GAP at least MARGIN above
# FrameLevelLogisticModel's after the same number of steps, trained and evaluated through the
# CLI with the originals' flags.
#
# usage: frame_models_learn.sh TRAINYARD WORKDIR MARGIN "MODEL FLAGS..." ["MODEL FLAGS..." ...]
set -eu
host=$1 work=$2 margin=$3
shift 3
rm -rf "$work"
"$host" data synth-yt8m --output_dir "$work/data" --frame_level --num_videos 1000 \
  --num_classes 20 --feature_sizes 32,8 --min_frames 20 --max_frames 40 --num_shards 2 >/dev/null

gap_of() {  # MODEL_DIR FLAGS... -> prints the validation GAP
  dir=$1
  shift
  "$host" train --frame_features --reader=YT8MFrameFeatureReader --feature_names=rgb,audio \
    --feature_sizes=32,8 --num_classes=20 --train_dir="$work/$dir" \
    --train_data_pattern="$work/data/train-*" --batch_size=50 --max_steps=200 --num_epochs=20 \
    --base_learning_rate=0.01 --num_readers=1 --start_new_model "$@" >"$work/$dir.log" 2>&1 ||
    { cat "$work/$dir.log"; exit 1; }
  "$host" eval --train_dir="$work/$dir" --eval_data_pattern="$work/data/validate-*" --run_once \
    --num_readers=1 2>&1 | tee -a "$work/$dir.log" | sed -n 's/.*| GAP: \([0-9.]*\) .*/\1/p' |
    tail -n 1
}

base=$(gap_of logistic --model=FrameLevelLogisticModel)
echo "FrameLevelLogisticModel GAP $base"
status=0
for spec in "$@"; do
  # shellcheck disable=SC2086
  set -- $spec
  name=$1
  shift
  gap=$(gap_of "$name" "$@") || true
  if [ -z "$gap" ]; then
    echo "$name: no eval line"; cat "$work/$name.log"; exit 1
  fi
  if awk -v g="$gap" -v b="$base" -v m="$margin" 'BEGIN { exit !(g >= b + m) }'; then
    echo "ok $name GAP $gap (FrameLevelLogisticModel $base)"
  else
    echo "FAIL $name GAP $gap is not $margin above FrameLevelLogisticModel's $base"
    status=1
  fi
done
exit $status
