#!/bin/sh
# docs/object_detection.md's SSD recipes, as a user runs them: `trainyard data synth-shapes` with
# 8,000 training and 500 held-out images, then configs/$RECIPE (default
# ssd_mobilenet_v1_synth_shapes.config: the Object Detection API's ssd_mobilenet_v1_coco.config
# adapted, in the API's own format; also ssdlite_mobilenet_v2_synth_shapes.config and
# ssd_mobilenet_v1_fpn_synth_shapes.config) trained and evaluated with train_and_evaluate,
# model_main's flags; the final evaluation's mAP@0.5 on the held-out images (COCO's
# DetectionBoxes_Precision/mAP@.50IOU and PASCAL VOC's PascalBoxes_Precision/mAP@0.5IOU) must
# both reach MIN_MAP.
#
# usage: [RECIPE=NAME.config] ssd_synth_shapes_recipe.sh TRAINYARD SOURCE_DIR WORKDIR MIN_MAP [FLAGS...]
set -eu
host=$1 source=$2 work=$3 min=$4
shift 4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$host" data synth-shapes --output_dir "$work/data" --num_images 8000 --num_val_images 500 \
  >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; fail "synth-shapes"; }
sed -e "s|/tmp/synth_shapes/|$work/data/|" \
  "$source/configs/${RECIPE:-ssd_mobilenet_v1_synth_shapes.config}" >"$work/pipeline.config"
grep -q "$work/data/val-" "$work/pipeline.config" || fail "the config's data paths were not found"
start=$(date +%s)
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
  --model_dir="$work/model" "$@" >"$work/log" 2>&1 ||
  { tail -n 30 "$work/log"; fail "train_and_evaluate"; }
end=$(date +%s)
line=$(grep "^final evaluation at step" "$work/log") || { tail -n 20 "$work/log"; fail "no final evaluation"; }
echo "$line ($((end - start)) s)"
# The value after "TAG = " in the final evaluation's line.
value() { echo "$line" | sed -n "s|.* $1 = \([0-9.e+-]*\).*|\1|p"; }
status=0
for tag in "DetectionBoxes_Precision/mAP@.50IOU" "PascalBoxes_Precision/mAP@0.5IOU"; do
  v=$(value "$tag")
  [ -n "$v" ] || fail "the final evaluation has no $tag"
  if awk "BEGIN { exit !($v >= $min) }"; then
    echo "PASS: $tag $v >= $min"
  else
    echo "FAIL: $tag $v < $min"
    status=1
  fi
done
exit $status
