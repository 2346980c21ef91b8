#!/bin/sh
# SSD end to end as a user of the Object Detection API runs it: `trainyard data synth-shapes`,
# then configs/ssd_mobilenet_v1_synth_shapes.config (the API's own pipeline.config format) made
# tiny (96x96 images, batch 4, 6 steps) and run with train_and_evaluate; the final evaluation
# reports the COCO and PASCAL metrics under the API's tags, the eval event file is written
# under model_dir/eval, the run's config is recorded; a second run resumes from the checkpoint;
# predict writes the val images' detections as a COCO results list.
#
# usage: ssd_synth_shapes.sh TRAINYARD SOURCE_DIR WORKDIR
set -eu
host=$1 source=$2 work=$3
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work"
"$host" data synth-shapes --output_dir "$work/data" --num_images 24 --num_val_images 8 \
  --image_size 96 --num_shards 2 >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
sed -e "s|/tmp/synth_shapes/|$work/data/|g" -e "s|height: 160|height: 96|" \
  -e "s|width: 160|width: 96|" -e "s|batch_size: 16|batch_size: 4|" \
  "$source/configs/ssd_mobilenet_v1_synth_shapes.config" >"$work/pipeline.config"
grep -q "height: 96" "$work/pipeline.config" || fail "the config's image_resizer was not found"

"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" --model_dir="$work/model" \
  --num_train_steps=6 >"$work/train.log" 2>&1 || { tail -n 30 "$work/train.log"; fail "train_and_evaluate"; }
line=$(grep "^final evaluation at step 6" "$work/train.log") || { tail -n 20 "$work/train.log"; fail "no final evaluation"; }
for tag in "DetectionBoxes_Precision/mAP = " "DetectionBoxes_Precision/mAP@.50IOU" \
  "DetectionBoxes_Recall/AR@100 (small)" "PascalBoxes_Precision/mAP@0.5IOU" \
  "PascalBoxes_PerformanceByCategory/AP@0.5IOU/triangle" "loss = "; do
  echo "$line" | grep -qF "$tag" || fail "the final evaluation has no '$tag': $line"
done
ls "$work/model"/eval*/events.out.tfevents.* >/dev/null 2>&1 || fail "no eval event file under model_dir"
grep -q "SSDMetaArch" "$work/model/pipeline.config" || fail "model_dir/pipeline.config does not record SSDMetaArch"

# A second run with more steps resumes at step 6.
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" --model_dir="$work/model" \
  --num_train_steps=8 >"$work/resume.log" 2>&1 || { tail -n 30 "$work/resume.log"; fail "resumed train_and_evaluate"; }
grep -q "^final evaluation at step 8" "$work/resume.log" || { tail -n 20 "$work/resume.log"; fail "the resumed run did not end at step 8"; }
grep -qi "restor.*model.ckpt-6\|model.ckpt-6.*restor" "$work/resume.log" || { head -n 20 "$work/resume.log"; fail "the resumed run did not restore model.ckpt-6"; }

# Detections as a COCO results list.
"$host" predict --pipeline_config_path="$work/pipeline.config" --train_dir="$work/model" \
  --input_data_pattern="$work/data/val-*.tfrecord" --output_file="$work/detections.json" \
  >"$work/predict.log" 2>&1 || { cat "$work/predict.log"; fail "predict"; }
python3 - "$work/detections.json" <<'EOF' || fail "detections.json is not a COCO results list"
import json, sys
results = json.load(open(sys.argv[1]))
assert isinstance(results, list) and results, "empty"
for r in results:
    assert set(r) == {"image_id", "category_id", "bbox", "score"}, r
    assert 1 <= r["category_id"] <= 4 and len(r["bbox"]) == 4 and 0 <= r["score"] <= 1, r
print(len(results), "detections of", len({r["image_id"] for r in results}), "images")
EOF
echo "PASS"
