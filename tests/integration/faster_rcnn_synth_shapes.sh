#!/bin/sh
# Faster R-CNN end to end as a user of the Object Detection API runs it: `trainyard data
# synth-shapes`, then configs/faster_rcnn_mobilenet_v1_synth_shapes.config (the API's own
# pipeline.config format) made tiny (images of their own sizes, 64 to 112 pixels a side, that
# the model's keep_aspect_ratio_resizer takes to a longer side of 128; batches of 2 in training
# and evaluation, so the input pads each batch to its largest image, 6 steps) and run with
# train_and_evaluate: the final evaluation reports the COCO and PASCAL metrics, the eval event
# file is written, the run's config records FasterRCNNMetaArch; a second run resumes from the
# checkpoint; predict writes the val images' detections as a COCO results list, each inside its
# own image.
#
# usage: faster_rcnn_synth_shapes.sh TRAINYARD SOURCE_DIR WORKDIR
set -eu
host=$1 source=$2 work=$3
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work"
"$host" data synth-shapes --output_dir "$work/data" --num_images 12 --num_val_images 4 \
  --image_size 64 --max_image_size 112 --num_shards 2 >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
sed -e "s|/tmp/synth_shapes/|$work/data/|g" -e "s|min_dimension: 160|min_dimension: 128|" \
  -e "s|max_dimension: 160|max_dimension: 128|" -e "s|batch_size: 8|batch_size: 2|" \
  -e "s|^eval_config: {|eval_config: {\n  batch_size: 2|" \
  "$source/configs/faster_rcnn_mobilenet_v1_synth_shapes.config" >"$work/pipeline.config"
grep -q "min_dimension: 128" "$work/pipeline.config" || fail "the config's image_resizer was not found"
grep -q "^  batch_size: 2" "$work/pipeline.config" || fail "the config's eval batch_size was not set"

"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" --model_dir="$work/model" \
  --num_train_steps=6 >"$work/train.log" 2>&1 || { tail -n 30 "$work/train.log"; fail "train_and_evaluate"; }
line=$(grep "^final evaluation at step 6" "$work/train.log") || { tail -n 20 "$work/train.log"; fail "no final evaluation"; }
for tag in "DetectionBoxes_Precision/mAP = " "DetectionBoxes_Precision/mAP@.50IOU" \
  "PascalBoxes_Precision/mAP@0.5IOU" "loss = "; do
  echo "$line" | grep -qF "$tag" || fail "the final evaluation has no '$tag': $line"
done
ls "$work/model"/eval*/events.out.tfevents.* >/dev/null 2>&1 || fail "no eval event file under model_dir"
grep -q "FasterRCNNMetaArch" "$work/model/pipeline.config" || fail "model_dir/pipeline.config does not record FasterRCNNMetaArch"

# A second run with more steps resumes at step 6.
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" --model_dir="$work/model" \
  --num_train_steps=8 >"$work/resume.log" 2>&1 || { tail -n 30 "$work/resume.log"; fail "resumed train_and_evaluate"; }
grep -q "^final evaluation at step 8" "$work/resume.log" || { tail -n 20 "$work/resume.log"; fail "the resumed run did not end at step 8"; }
grep -qi "restor.*model.ckpt-6\|model.ckpt-6.*restor" "$work/resume.log" || { head -n 20 "$work/resume.log"; fail "the resumed run did not restore model.ckpt-6"; }

# Detections as a COCO results list.
"$host" predict --pipeline_config_path="$work/pipeline.config" --train_dir="$work/model" \
  --input_data_pattern="$work/data/val-*.tfrecord" --output_file="$work/detections.json" \
  >"$work/predict.log" 2>&1 || { cat "$work/predict.log"; fail "predict"; }
"$host" data inspect "$work/data/val-*.tfrecord" --show 4 >"$work/inspect.txt" 2>&1 || { cat "$work/inspect.txt"; fail "data inspect"; }
python3 - "$work/detections.json" "$work/inspect.txt" <<'PY' || fail "detections.json is not a COCO results list"
import json, re, sys
# Each val image's height and width, from `trainyard data inspect`.
sizes, size = {}, {}
for line in open(sys.argv[2]):
    m = re.match(r'\s+image/(height|width): int64\[1\] \{(\d+)\}', line)
    if m:
        size[m.group(1)] = int(m.group(2))
    m = re.match(r'\s+image/source_id: bytes\[1\] "(.*)"', line)
    if m:
        size["id"] = m.group(1)
    if len(size) == 3:
        sizes[size["id"]] = (size["height"], size["width"])
        size = {}
assert len(sizes) == 4 and len(set(sizes.values())) > 1, sizes
results = json.load(open(sys.argv[1]))
assert isinstance(results, list) and results, "empty"
for r in results:
    assert set(r) == {"image_id", "category_id", "bbox", "score"}, r
    assert 1 <= r["category_id"] <= 4 and len(r["bbox"]) == 4 and 0 <= r["score"] <= 1, r
    x, y, w, h = r["bbox"]
    height, width = sizes[r["image_id"]]
    assert w >= 0 and h >= 0 and x >= 0 and y >= 0 and x + w <= width + 0.01 and y + h <= height + 0.01, (r, height, width)
print(len(results), "detections of", len({r["image_id"] for r in results}), "images")
PY
echo "PASS"
