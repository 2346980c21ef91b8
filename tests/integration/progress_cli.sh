#!/bin/sh
# Progress on every long command (docs/commands.md, "Progress"): with TRAINYARD_PROGRESS_SECS=0
# data synth-yt8m, synth-shapes, inspect, eval, predict, export, coco-eval and plugins check
# each write "progress: H:MM:SS elapsed, LABEL: ..." lines; with the default interval (10 s)
# the same short commands write none. Their output is not a terminal here, so no bar is drawn.
#
# usage: progress_cli.sh TRAINYARD WORKDIR
set -eu
host=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; [ -f "$work/log" ] && cat "$work/log"; exit 1; }
# has LOG REGEX: the log holds a line matching REGEX.
has() { grep -q "$2" "$1" || fail "no line matching '$2' in $1: $(cat "$1")"; }

quick() { TRAINYARD_PROGRESS_SECS=0 "$host" "$@"; }

quick data synth-yt8m --output_dir "$work/data" --num_videos 20 --num_classes 5 --num_shards 1 \
  --feature_sizes 8,4 >"$work/synth.log" 2>&1 || fail "synth-yt8m: $(cat "$work/synth.log")"
has "$work/synth.log" \
  '^progress: 0:00:0[0-9] elapsed, data synth-yt8m: [0-9]* of 24 videos ([0-9]*%), [0-9.]* videos/s'
has "$work/synth.log" '^progress: .* data synth-yt8m: 24 of 24 videos (100%)'
grep -q "$(printf '\r')" "$work/synth.log" && fail "a bar redrawn with CR off a terminal"

quick data synth-shapes --output_dir "$work/shapes" --num_images 3 --num_val_images 1 \
  --image_size 32 >"$work/shapes.log" 2>&1 || fail "synth-shapes: $(cat "$work/shapes.log")"
has "$work/shapes.log" '^progress: .* data synth-shapes: [0-9]* of 4 images'

quick data inspect "$work/data/*.tfrecord" >"$work/inspect.log" 2>&1 || fail "inspect"
has "$work/inspect.log" '^progress: .* data inspect: [0-9]* records, [0-9.]* records/s$'

"$host" train --train_dir "$work/train" --train_data_pattern "$work/data/train-*" \
  --feature_names mean_rgb,mean_audio --feature_sizes 8,4 --num_classes 5 --model LogisticModel \
  --batch_size 5 --max_steps 2 --num_readers 1 >"$work/log" 2>&1 || fail "train"

quick eval --train_dir "$work/train" --eval_data_pattern "$work/data/validate-*" --run_once \
  --batch_size 2 --num_readers 1 >"$work/eval.log" 2>&1 || fail "eval: $(cat "$work/eval.log")"
has "$work/eval.log" '^progress: .* evaluating step 2: [0-9]* batches, [0-9.]* batches/s$'

quick predict --train_dir "$work/train" --input_data_pattern "$work/data/validate-*" \
  --output_file "$work/predictions.csv" --batch_size 2 --num_readers 1 \
  >"$work/predict.log" 2>&1 || fail "predict: $(cat "$work/predict.log")"
has "$work/predict.log" '^progress: .* predict: [0-9]* examples, [0-9.]* examples/s$'

quick export --train_dir "$work/train" --export_dir "$work/export" >"$work/export.log" 2>&1 ||
  fail "export: $(cat "$work/export.log")"
has "$work/export.log" '^progress: .* export: 4 of 4 steps (100%)'

cat >"$work/gt.json" <<'JSON'
{"images": [{"id": 1, "width": 10, "height": 10}, {"id": 2, "width": 10, "height": 10}],
 "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25,
                  "iscrowd": 0}],
 "categories": [{"id": 1, "name": "square"}]}
JSON
echo '[{"image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "score": 0.9}]' >"$work/dt.json"
quick coco-eval "$work/gt.json" "$work/dt.json" >"$work/coco.log" 2>&1 ||
  fail "coco-eval: $(cat "$work/coco.log")"
has "$work/coco.log" '^progress: .* coco-eval: [0-9] of 2 images'

# Its exit status says whether every class passed; here only its progress matters.
quick plugins check >"$work/plugins.log" 2>&1 || true
has "$work/plugins.log" '^progress: .* plugins check: [0-9]* of [0-9]* classes'

# The default interval: the same short commands say nothing of their progress.
rm -rf "$work/data"
"$host" data synth-yt8m --output_dir "$work/data" --num_videos 20 --num_classes 5 \
  --num_shards 1 --feature_sizes 8,4 >"$work/quiet.log" 2>&1 || fail "synth-yt8m"
"$host" eval --train_dir "$work/train" --eval_data_pattern "$work/data/validate-*" --run_once \
  --batch_size 2 --num_readers 1 >>"$work/quiet.log" 2>&1 || fail "eval"
"$host" predict --train_dir "$work/train" --input_data_pattern "$work/data/validate-*" \
  --output_file "$work/predictions.csv" --num_readers 1 >>"$work/quiet.log" 2>&1 ||
  fail "predict"
grep -q "^progress:" "$work/quiet.log" && fail "progress within the interval: $(cat "$work/quiet.log")"

TRAINYARD_PROGRESS_SECS=soon "$host" data synth-yt8m --output_dir "$work/soon" \
  --num_videos 2 >"$work/soon.log" 2>&1 && fail "TRAINYARD_PROGRESS_SECS=soon accepted"
has "$work/soon.log" "TRAINYARD_PROGRESS_SECS is 'soon'"

echo "PASS: progress on every long command"
