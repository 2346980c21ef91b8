#!/bin/bash
# Every command on hostile and damaged files (issue 21) ends in a clear error naming the file,
# or goes on with a warning where the file only loses its say, within 60 s and an 8 GiB address
# space each, touching nothing outside the places it was given.
#
# The crafted files are checked in under tests/fixtures/hostile/files, made by
# tests/fixtures/hostile/make_hostile_files.py (this test runs it again and compares); FIFOs,
# links, sparse files and paths outside the train_dir are made here, where they are used.
#
# usage: hostile_files.sh TRAINYARD SOURCE_DIR WORKDIR
set -u
host=$1 src=$2 work=$3
files=$src/tests/fixtures/hostile/files
rm -rf "$work"
mkdir -p "$work"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The checked-in files are what the script makes.
python3 "$src/tests/fixtures/hostile/make_hostile_files.py" "$work/regenerated" ||
  fail "make_hostile_files.py did not run"
diff -r "$files" "$work/regenerated" >"$work/regenerated.diff" 2>&1 ||
  fail "the checked-in files differ from what make_hostile_files.py writes: $(head -n 5 "$work/regenerated.diff")"

# check NAME EXPECTED_STATUS MESSAGE_REGEX COMMAND...: runs COMMAND in a fresh copy of the files
# ($work/NAME), bounded, and checks its exit status and that its output matches the regex.
# $setup (shell) runs first in that copy; $address_space_kb (8 GiB unless set) bounds the command.
# Both apply to the next check only.
case_dir=
check() {
  local name=$1 expected=$2 pattern=$3
  shift 3
  case_dir=$work/$name
  rm -rf "$case_dir"
  cp -a "$files" "$case_dir"
  [ -z "${setup:-}" ] || (cd "$case_dir" && eval "$setup") || fail "$name: setup failed"
  (cd "$case_dir" && ulimit -v "${address_space_kb:-8388608}" && timeout 60 "$@") >"$case_dir.log" 2>&1 </dev/null
  local status=$?
  if [ "$status" -ne "$expected" ]; then
    fail "$name: exit status $status, expected $expected ($*)"
    tail -n 5 "$case_dir.log"
  elif ! grep -Eq -- "$pattern" "$case_dir.log"; then
    fail "$name: no line matches /$pattern/ ($*)"
    tail -n 5 "$case_dir.log"
  else
    echo "ok: $name"
  fi
  setup= address_space_kb=
}

model="--feature_names=mean_rgb,mean_audio --feature_sizes=8,4 --num_classes=4 --batch_size=4"
train_on="$host train $model --max_steps=1 --train_data_pattern"
train="$train_on=data/train-0000.tfrecord"
eval_once="$host eval --eval_data_pattern=data/validate-0000.tfrecord --batch_size=4 --run_once"

# --- data files ---
check flipped_length 1 'ERROR flipped_length.tfrecord: corrupt record at byte offset 276' \
  "$host" data inspect flipped_length.tfrecord
[ "$(grep -c '^ERROR' "$case_dir.log")" -eq 1 ] || fail "flipped_length: the error is not reported exactly once"
check huge_gzip_record 1 'huge_record.tfrecord.gz: corrupt record at byte offset 0: record length 3000000000 is larger than the maximum' \
  "$host" data inspect huge_record.tfrecord.gz
setup='mkfifo fifo.tfrecord'
check fifo_as_data 1 'fifo.tfrecord.*FIFO' $train_on=fifo.tfrecord --train_dir=run
check dev_stdin_as_data 1 '/dev/stdin' $train_on=/dev/stdin --train_dir=run
check dev_zero_as_data 1 '/dev/zero.*(device|regular)' "$host" data inspect /dev/zero

# --- the checkpoint state file ---
setup='mkdir -p outside /tmp/trainyard-hostile-outside &&
  cp eval_event_2e62/model.ckpt-5.index outside/model.ckpt-7.index &&
  cp eval_event_2e62/model.ckpt-5.data-00000-of-00001 outside/model.ckpt-7.data-00000-of-00001'
check state_outside 0 'state_outside/checkpoint lists "\.\./outside/model\.ckpt-7", which is outside state_outside; ignored' \
  $train --train_dir=state_outside
[ -f "$case_dir/outside/model.ckpt-7.index" ] && [ -f "$case_dir/outside/model.ckpt-7.data-00000-of-00001" ] ||
  fail "state_outside: a checkpoint outside the train_dir was deleted"
grep -q outside "$case_dir/state_outside/checkpoint" &&
  fail "state_outside: the outside entries were written back to the state file"
grep -q 'trained to step 1,' "$case_dir.log" || fail "state_outside: did not train from scratch"
check state_nested_train 1 'state_nested/checkpoint is not a checkpoint state file.*recursion limit of 64' \
  $train --train_dir=state_nested
check state_nested_eval 1 'state_nested/checkpoint is not a checkpoint state file' \
  $eval_once --train_dir=state_nested
check state_nested_predict 1 'state_nested/checkpoint is not a checkpoint state file' \
  "$host" predict --train_dir=state_nested --input_data_pattern=data/validate-0000.tfrecord --output_file=p.csv
setup='mkdir fifo_state && cp eval_event_2e62/model_flags.json fifo_state/ && mkfifo fifo_state/checkpoint'
check fifo_as_state_file 1 'fifo_state/checkpoint.*FIFO' $eval_once --train_dir=fifo_state
check start_new_model_not_a_run 1 'start_new_model: not_a_run holds no training run.*nothing in it is deleted' \
  $train --train_dir=not_a_run --start_new_model
[ -f "$case_dir/not_a_run/notes.txt" ] && [ -f "$case_dir/not_a_run/results/table.csv" ] ||
  fail "start_new_model_not_a_run: the user's files were deleted"

# --- forged checkpoints ---
check index_claims_2e31_shards 1 'index_shards/model\.ckpt-3\.index: the bundle header claims 2147483647 data shards' \
  $eval_once --train_dir=index_shards
check shape_2e62 1 "shape_2e62/model\.ckpt-3\.index: tensor 'fully_connected/weights': shape \[4611686018427387904, 4\]" \
  $eval_once --train_dir=shape_2e62
check shape_wraps_export 1 'shape_wraps/model\.ckpt-3\..*(needs|bytes)' \
  "$host" export --train_dir=shape_wraps --export_dir=exported
[ -e "$case_dir/exported" ] && fail "shape_wraps_export: an export was written"
check step_2e60_run_once 1 'step_2e60/model\.ckpt-5 holds global_step 1\.152921504606847e\+18, not an integer in \[0, 2\^53\]' \
  $eval_once --train_dir=step_2e60
setup='truncate -s 1G eval_event_2e62/model.ckpt-5.data-00000-of-00001'
check export_sparse_data_file 0 'exported exported/model\.ckpt-5' \
  "$host" export --train_dir=eval_event_2e62 --export_dir=exported
[ "$(stat -c %s "$case_dir/exported/model.ckpt-5.data-00000-of-00001" 2>/dev/null)" = 216 ] ||
  fail "export_sparse_data_file: the export's data file is not the 216 bytes the index refers to"

# A V1 checkpoint of 12 GiB, sparse, with a table footer: refused at once by its index (zeros),
# naming the file (read whole, it reached 4.4 GB and a bare bad_alloc). Opening reads the footer,
# index and metadata only (CheckpointV1Test.OpeningReadsTheIndexAndMetadataNotTheData).
v1=eval_event_2e62/model.ckpt-9
setup="truncate -s 12G $v1 && printf '\\x57\\xfb\\x80\\x8b\\x24\\x75\\x47\\xdb' | dd of=$v1 bs=1 seek=\$((12 * 1024 * 1024 * 1024 - 8)) conv=notrunc status=none"
check v1_checkpoint_12g_sparse 1 "$v1: block checksum mismatch at byte offset 0" \
  "$host" export --checkpoint=$v1 --train_dir=eval_event_2e62 --export_dir=exported

# --- eval's record of evaluated steps ---
check eval_event_2e62 0 'records an evaluation at step 4611686018427387904, outside \[0, 2\^53\]; ignored' \
  "$host" eval --train_dir=eval_event_2e62 --eval_data_pattern=data/validate-0000.tfrecord \
  --batch_size=4 --timeout_secs=1 --eval_interval_secs=0.5
grep -q 'epoch/eval number 5 ' "$case_dir.log" || fail "eval_event_2e62: step 5 was not evaluated"

# --- model_flags.json ---
check model_flags_invalid 1 'model_flags_invalid/model_flags.json: invalid JSON' \
  $eval_once --train_dir=model_flags_invalid
setup='mkdir dangling && ln -s ../elsewhere/model_flags.json dangling/model_flags.json'
check model_flags_dangling_link 1 'dangling/model_flags.json is a symbolic link' $train --train_dir=dangling
[ -e "$case_dir/elsewhere" ] && fail "model_flags_dangling_link: the link's target was created"
setup='mkdir fifo_flags && cp eval_event_2e62/checkpoint eval_event_2e62/model.ckpt-5.* fifo_flags/ &&
  mkfifo fifo_flags/model_flags.json'
check model_flags_fifo 1 'fifo_flags/model_flags.json.*FIFO' $eval_once --train_dir=fifo_flags

# --- configs ---
check config_batch_size_negative 1 'batch_size_negative.config: train_config.batch_size is -5; it must be at least 1 \(batch_size_negative.config line 1\)' \
  "$host" config check batch_size_negative.config
check config_100000_readers 1 'train_input_reader.num_readers is 100000; it must be at most 1024' \
  "$host" config check readers_100000.config
check freeze_regex_backtracking 0 'trained to step 1,' \
  "$host" train --pipeline_config_path=freeze_backtracking.config --train_dir=run \
  --train_data_pattern=data/train-0000.tfrecord --feature_names=mean_rgb,mean_audio \
  --feature_sizes=8,4 --num_classes=4

# --- config check builds what train builds (issue 35) ---
# ssd_config LABEL_MAP [SED_EXPRESSION...]: c.config, the shipped SSD config reading LABEL_MAP,
# changed by the expressions (run in the case directory, through `setup`).
ssd_config() {
  local label_map=$1
  shift
  local exprs=(-e "s|/tmp/synth_shapes/label_map.pbtxt|$label_map|")
  for e in "$@"; do exprs+=(-e "$e"); done
  sed "${exprs[@]}" "$src/configs/ssd_mobilenet_v1_synth_shapes.config" >c.config
}
one_item="printf 'item { id: 1 name: \"a\" }\n' > lm.pbtxt"
setup="sed \"s|type: 'ssd_mobilenet_v2'|type: 'ssd_pnasnet'|\" \"\$src/tests/fixtures/od_configs/ssd_mobilenet_v2_coco.config\" >c.config"
check config_unsupported_feature_extractor 1 "feature_extractor.type is 'ssd_pnasnet'" \
  "$host" config check c.config
setup="mkfifo lm.pbtxt && ssd_config lm.pbtxt"
check config_label_map_fifo 1 'label map lm.pbtxt is a FIFO, not a regular file' \
  "$host" config check c.config
setup="ssd_config missing.pbtxt"
check config_label_map_missing 1 'cannot open label map missing.pbtxt: no such file' \
  "$host" config check c.config
setup="printf 'item { id: 1 name: \"a\" }\nitem {' > lm.pbtxt && ssd_config lm.pbtxt"
check config_label_map_unparsable 1 'lm.pbtxt:2' "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt 's|num_hard_examples: 3000|num_hard_examples: -5|'"
check config_num_hard_examples_negative 1 "loss.hard_example_miner.num_hard_examples is '-5'; expected >= 0.* \\(c.config line 147\\)$" \
  "$host" config check c.config

# Sizes that would exhaust memory later are refused when the model is built, naming the option.
setup="$one_item && ssd_config lm.pbtxt 's|depth_multiplier: 0.25|depth_multiplier: 1e6|'"
check config_depth_multiplier_1e6 1 "feature_extractor.depth_multiplier is '1000000'; expected > 0 and <= 16.* \\(c.config line 113\\)$" \
  "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt 's|aspect_ratios: 3.0|aspect_ratios: 0|'"
check config_aspect_ratio_0 1 "anchor_generator.ssd_anchor_generator.aspect_ratios\\[3\\] is '0'; every value must be finite and > 0 \\(c.config line 67\\)$" \
  "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt 's|max_detections_per_class: 100|max_detections_per_class: 2000000000|'"
check config_nms_size_2e9 1 "max_detections_per_class is '2000000000'; expected >= 1 and <= 100000" \
  "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt 's|        height: 160|        height: 100000|'"
check config_fixed_resizer_100000 1 'model.ssd.image_resizer.fixed_shape_resizer.height is 100000; expected 1 to 16384 pixels \(c.config line 73\)' \
  "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt '0,/max_number_of_boxes: 10/s//max_number_of_boxes: 2000000000/'"
check config_max_boxes_2e9 1 'train_input_reader.max_number_of_boxes is 2000000000; expected 1 to 100000 boxes per image \(c.config line 205\)' \
  "$host" config check c.config
setup="$one_item && ssd_config lm.pbtxt 's|    num_classes: 4|    num_classes: 2000000000|'"
check config_num_classes_2e9 1 'num_classes is 2000000000; it must be at most 1000000' \
  "$host" config check c.config

# --- files that block, and filesystem errors ---
setup='mkfifo gt.json && printf "[]" > dt.json'
check coco_eval_fifo 1 'COCO annotations gt.json is a FIFO, not a regular file' \
  "$host" coco-eval gt.json dt.json
# 100,000 images, each with one box of its own category among 100,000, found exactly: coco-eval's
# memory follows the boxes (140 MB here), not images x categories or categories x thresholds x
# recall points (the per-figure value lists took 1.3 GB and ended in bad_alloc under 1 GiB).
setup='python3 -c "
import json
n = 100000
box = [10, 10, 50, 40]
json.dump({\"images\": [{\"id\": i} for i in range(1, n + 1)],
           \"categories\": [{\"id\": i, \"name\": \"c%d\" % i} for i in range(1, n + 1)],
           \"annotations\": [{\"id\": i, \"image_id\": i, \"category_id\": i, \"bbox\": box,
                             \"area\": 2000, \"iscrowd\": 0} for i in range(1, n + 1)]},
          open(\"gt.json\", \"w\"))
json.dump([{\"image_id\": i, \"category_id\": i, \"bbox\": box, \"score\": 0.9}
           for i in range(1, n + 1)], open(\"dt.json\", \"w\"))
"'
address_space_kb=1048576
check coco_eval_100k_categories_in_1g 0 'IoU=0\.50:0\.95 \| area=   all \| maxDets=100 \] = 1\.000' \
  "$host" coco-eval gt.json dt.json
setup='touch a_file'
check filesystem_error_is_the_users 1 '^trainyard: error: a_file/out: cannot create directories: Not a directory$' \
  "$host" data synth-yt8m --output_dir a_file/out --num_videos 10 --num_classes 3

# --- plugin directories ---
setup='mkdir plugins && truncate -s 2G plugins/libsparse.so'
check sparse_file_in_plugin_path 0 'libsparse.so is not a Trainyard plugin: it is not an ELF shared library' "$host" plugins list --plugin_path=plugins

rm -rf /tmp/trainyard-hostile-outside
if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "every hostile file ended in a clear error or a warning"
