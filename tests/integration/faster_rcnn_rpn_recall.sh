#!/bin/sh
# Faster R-CNN's RPN on synth-shapes: configs/faster_rcnn_mobilenet_v1_synth_shapes.config with
# number_of_stages 1 (the RPN alone, as the API trains and evaluates it) and the API's 300
# proposals, at 128x128, trained for STEPS steps from scratch (batch norm decay 0.9 instead of 0.99:
# after a few hundred steps at 0.99 the moving variances still hold 5% of their initial 1, many
# times the small variances of a net from scratch, and the evaluation's features are off). Its proposals on 50 held-out
# images (`trainyard predict`, the RPN's own detections) must cover the groundtruth boxes
# (`trainyard data inspect`): recall at IoU 0.5 of the best 300 proposals at least MIN_300, and of
# the best 10 at least MIN_10 and above what the same model gave after its first step (the
# anchors' coverage alone).
#
# usage: faster_rcnn_rpn_recall.sh TRAINYARD SOURCE_DIR WORKDIR STEPS MIN_300 MIN_10
set -eu
host=$1 source=$2 work=$3 steps=$4 min300=$5 min10=$6
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work"
"$host" data synth-shapes --output_dir "$work/data" --num_images 800 --num_val_images 50 --max_shapes 5 \
  --image_size 128 --num_shards 2 >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
sed -e "s|/tmp/synth_shapes/|$work/data/|g" -e "s|min_dimension: 160|min_dimension: 128|" \
  -e "s|max_dimension: 160|max_dimension: 128|" -e "s|first_stage_max_proposals: 64|first_stage_max_proposals: 300|" \
  -e "s|^  faster_rcnn {|  faster_rcnn {\n    number_of_stages: 1|" -e "s|decay: 0.99|decay: 0.9|" \
  "$source/configs/faster_rcnn_mobilenet_v1_synth_shapes.config" >"$work/pipeline.config"
grep -q "number_of_stages: 1" "$work/pipeline.config" || fail "the config's faster_rcnn block was not found"
grep -q "first_stage_max_proposals: 300" "$work/pipeline.config" || fail "first_stage_max_proposals not found"
"$host" data inspect "$work/data/val-*.tfrecord" --show 50 >"$work/val.txt" 2>&1 || fail "inspect"

# STEP: train to STEP, then the proposals on the held-out images as detections.
proposals() {
  "$host" train --pipeline_config_path="$work/pipeline.config" --train_dir="$work/model" \
    --max_steps="$1" >"$work/train-$1.log" 2>&1 || { tail -n 30 "$work/train-$1.log"; fail "train to $1"; }
  "$host" predict --pipeline_config_path="$work/pipeline.config" --train_dir="$work/model" \
    --input_data_pattern="$work/data/val-*.tfrecord" --output_file="$work/proposals-$1.json" \
    >"$work/predict-$1.log" 2>&1 || { cat "$work/predict-$1.log"; fail "predict at $1"; }
}
proposals 1
proposals "$steps"

python3 - "$work/val.txt" "$work/proposals-1.json" "$work/proposals-$steps.json" "$min300" "$min10" <<'PY'
import json, re, sys
val, first, trained, min300, min10 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
# Groundtruth: the inspect listing's normalized boxes per image/source_id, in pixels of 128.
gt, current, fields = {}, None, {}
def flush():
    if current is not None:
        n = len(fields.get("ymin", []))
        gt[current] = [[fields[k][i] * 128 for k in ("ymin", "xmin", "ymax", "xmax")] for i in range(n)]
for line in open(val):
    if line.startswith("record "):
        flush(); current, fields = None, {}
    m = re.match(r"\s+image/object/bbox/(\w+): float\[\d+\] \{(.*)\}", line)
    if m:
        fields[m.group(1)] = [float(v) for v in m.group(2).split(",")]
    m = re.match(r'\s+image/source_id: bytes\[1\] "(.*)"', line)
    if m:
        current = m.group(1)
flush()
assert len(gt) == 50, f"{len(gt)} held-out images in the listing"
def iou(a, b):
    h = max(0.0, min(a[2], b[2]) - max(a[0], b[0])); w = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = h * w
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
def recall(path, k, threshold=0.5):
    boxes = {}
    for r in json.load(open(path)):
        x, y, w, h = r["bbox"]
        boxes.setdefault(r["image_id"], []).append((r["score"], [y, x, y + h, x + w]))
    found = total = 0
    for image, truth in gt.items():
        best = [b for _, b in sorted(boxes.get(image, []), key=lambda p: -p[0])[:k]]
        for t in truth:
            total += 1
            found += any(iou(t, b) >= threshold for b in best)
    return found / total
counts = [len([r for r in json.load(open(p)) if r["image_id"] == "val-000000"]) for p in (first, trained)]
r300, r10, r10_first = recall(trained, 300), recall(trained, 10), recall(first, 10)
print(f"proposals of val-000000: {counts[0]} after step 1, {counts[1]} trained")
print(f"recall@300 (IoU 0.5) {r300:.3f}, @300 (IoU 0.7) {recall(trained, 300, 0.7):.3f}, "
      f"@10 {r10:.3f} (after step 1: @300 {recall(first, 300):.3f}, @10 {r10_first:.3f})")
ok = r300 >= min300 and r10 >= min10 and r10 > r10_first
print(("PASS" if ok else "FAIL") + f": recall@300 {r300:.3f} >= {min300}, recall@10 {r10:.3f} >= {min10} and > {r10_first:.3f}")
sys.exit(0 if ok else 1)
PY
