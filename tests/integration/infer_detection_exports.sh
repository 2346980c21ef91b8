#!/bin/sh
# The detector exports the C inference library's detection tests load (ctest fixture
# infer_detection_exports), made as a user makes them with the host: `trainyard data
# synth-shapes`, then configs/ssd_mobilenet_v1_synth_shapes.config (fixed_shape_resizer, made
# 96x96) and configs/faster_rcnn_mobilenet_v1_synth_shapes.config (keep_aspect_ratio_resizer to
# 128, images of their own sizes 64 to 112 pixels a side) trained two steps each and exported
# with `trainyard export`; then `trainyard predict` of each export on the val records (a COCO
# results list; for Faster R-CNN also with batches of one image), the reference the tests
# compare the library's detections with. The SSD checkpoint is also exported with --format
# saved_model (ssd_saved_model, the Object Detection API's layout) for infer_saved_model_test.
#
# usage: infer_detection_exports.sh TRAINYARD SOURCE_DIR WORKDIR
set -eu
host=$1 source=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; [ -f "$work/log" ] && tail -n 30 "$work/log"; exit 1; }

"$host" data synth-shapes --output_dir "$work/ssd_data" --num_images 8 --num_val_images 4 \
  --image_size 96 --num_shards 1 >"$work/log" 2>&1 || fail "synth-shapes"
sed -e "s|/tmp/synth_shapes/|$work/ssd_data/|g" -e "s|height: 160|height: 96|" \
  -e "s|width: 160|width: 96|" -e "s|batch_size: 16|batch_size: 4|" \
  "$source/configs/ssd_mobilenet_v1_synth_shapes.config" >"$work/ssd.config"
grep -q "height: 96" "$work/ssd.config" || fail "the SSD config's image_resizer was not found"
"$host" train --pipeline_config_path="$work/ssd.config" --train_dir="$work/ssd_train" \
  --max_steps=2 >"$work/log" 2>&1 || fail "train SSD"
"$host" export --train_dir="$work/ssd_train" --export_dir="$work/ssd_export" \
  >"$work/log" 2>&1 || fail "export SSD"
"$host" export --train_dir="$work/ssd_train" --format=saved_model \
  --export_dir="$work/ssd_saved_model" >"$work/log" 2>&1 || fail "export SSD saved_model"
"$host" predict --train_dir="$work/ssd_export" \
  --input_data_pattern="$work/ssd_data/val-*.tfrecord" --output_file="$work/ssd.json" \
  >"$work/log" 2>&1 || fail "predict SSD"

"$host" data synth-shapes --output_dir "$work/frcnn_data" --num_images 4 --num_val_images 3 \
  --image_size 64 --max_image_size 112 --num_shards 1 >"$work/log" 2>&1 || fail "synth-shapes"
sed -e "s|/tmp/synth_shapes/|$work/frcnn_data/|g" -e "s|min_dimension: 160|min_dimension: 128|" \
  -e "s|max_dimension: 160|max_dimension: 128|" -e "s|batch_size: 8|batch_size: 2|" \
  -e "s|^eval_config: {|eval_config: {\n  batch_size: 3|" \
  "$source/configs/faster_rcnn_mobilenet_v1_synth_shapes.config" >"$work/frcnn.config"
grep -q "min_dimension: 128" "$work/frcnn.config" || fail "the Faster R-CNN config's resizer was not found"
"$host" train --pipeline_config_path="$work/frcnn.config" --train_dir="$work/frcnn_train" \
  --max_steps=2 >"$work/log" 2>&1 || fail "train Faster R-CNN"
"$host" export --train_dir="$work/frcnn_train" --export_dir="$work/frcnn_export" \
  >"$work/log" 2>&1 || fail "export Faster R-CNN"
"$host" predict --train_dir="$work/frcnn_export" \
  --input_data_pattern="$work/frcnn_data/val-*.tfrecord" --output_file="$work/frcnn.json" \
  >"$work/log" 2>&1 || fail "predict Faster R-CNN"
# One image per batch: Faster R-CNN's detections depend on the batch's padded size (its anchors
# cover the padded feature map), as in the API.
"$host" predict --train_dir="$work/frcnn_export" --batch_size=1 \
  --input_data_pattern="$work/frcnn_data/val-*.tfrecord" --output_file="$work/frcnn_single.json" \
  >"$work/log" 2>&1 || fail "predict Faster R-CNN, batches of 1"
echo "PASS: detector exports and predictions in $work"
