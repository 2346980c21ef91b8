#!/bin/sh
# What the host does when plugin code throws (the boundary guard, registry.h): the run stops
# with status 1 (never 134, std::terminate's abort) and one line naming the plugin, its
# version, its library file, the class and the call; an SDK error keeps its text; a reader's
# corrupt record (DataLoss) is skipped under --skip_corrupt_records. Fixture classes:
# tests/fixtures/faulty_plugin.cc.
#
# usage: plugin_faults.sh TRAINYARD FIXTURE_DIR WORKDIR CASE
#   CASE: train_forward_int | train_forward_runtime_error | train_forward_sdk_error |
#         train_loss_throws | eval_forward_throws | predict_forward_throws |
#         reader_parse_throws | reader_corrupt_record_follows_policy |
#         variable_without_gradient_warns | variable_without_gradient_fails_when_asked
# (the last two: a trained variable without gradient is named at the first step)
set -eu
host=$1 fixtures=$2 work=$3 case=$4
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL ($case): $*"
  for f in "$work"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
}

"$host" data synth-yt8m --output_dir "$work/data" --num_videos 40 --num_classes 5 \
  --num_shards 1 --feature_sizes 4,2 >"$work/synth.log" 2>&1 || fail "synth"
plugins="--plugin_path=$fixtures/faulty"
common="$plugins --train_data_pattern=$work/data/train-* --feature_names=mean_rgb,mean_audio --feature_sizes=4,2 --num_classes=5 --batch_size=10 --num_readers=1 --model=FaultyModel"
# FaultyReader reads no named features: one value and one class per record.
reader="$plugins --train_data_pattern=$work/data/train-* --num_classes=1 --batch_size=10 --num_readers=1 --model=FaultyModel --reader=FaultyReader"
lib="$fixtures/faulty/libfixture_faulty.so"
origin="plugin 'fixture_faulty' 1.2.0 ($lib)"

# expect_failure LOG STATUS PATTERN: the command's status was 1 and LOG has PATTERN (fixed).
expect_failure() {
  [ "$2" -eq 1 ] || fail "exit status $2, expected 1"
  grep -qF -- "$3" "$1" || fail "no '$3' in $1"
  if grep -q "internal error" "$1"; then fail "reported as an internal error"; fi
}

run() {  # run LOG ARGS...: runs the host, records its status in $status
  log=$1
  shift
  status=0
  # shellcheck disable=SC2068
  "$host" $@ >"$log" 2>&1 || status=$?
}

# A good run to evaluate and predict from, and a config whose model throws.
trained() {
  # shellcheck disable=SC2086
  run "$work/good.log" train $common --train_dir=$work/train --max_steps=2
  [ "$status" -eq 0 ] || fail "the fault-free run failed ($status)"
  # shellcheck disable=SC2086
  "$host" train $common --train_dir=$work/train --forward_fault=int --print_config \
    >"$work/faulty.config" 2>"$work/print_config.log" || fail "print_config"
}

case $case in
  train_forward_int)
    run "$work/run.log" train $common --train_dir=$work/train --max_steps=2 --forward_fault=int
    expect_failure "$work/run.log" $status \
      "$origin, model 'FaultyModel', forward threw an exception of type int, which is not a std::exception"
    ;;
  train_forward_runtime_error)
    run "$work/run.log" train $common --train_dir=$work/train --max_steps=2 \
      --forward_fault=runtime_error
    expect_failure "$work/run.log" $status \
      "trainyard: error: $origin, model 'FaultyModel', forward threw std::runtime_error: boom in forward"
    ;;
  train_forward_sdk_error)
    run "$work/run.log" train $common --train_dir=$work/train --max_steps=2 \
      --forward_fault=invalid_argument
    expect_failure "$work/run.log" $status \
      "trainyard: error: $origin, model 'FaultyModel', forward: boom in forward"
    [ "$(grep -c "plugin 'fixture_faulty'" "$work/run.log")" -eq 1 ] || fail "prefixed twice"
    ;;
  train_loss_throws)
    run "$work/run.log" train $common --train_dir=$work/train --max_steps=2 \
      --label_loss=FaultyLoss --loss_fault=runtime_error
    expect_failure "$work/run.log" $status \
      "$origin, loss 'FaultyLoss', calculate_loss threw std::runtime_error: boom in calculate_loss"
    ;;
  eval_forward_throws)
    trained
    run "$work/run.log" eval --pipeline_config_path=$work/faulty.config $plugins \
      --train_dir=$work/train --eval_data_pattern=$work/data/validate-* --run_once
    expect_failure "$work/run.log" $status \
      "$origin, model 'FaultyModel', forward threw an exception of type int"
    ;;
  predict_forward_throws)
    trained
    run "$work/run.log" predict --pipeline_config_path=$work/faulty.config $plugins \
      --train_dir=$work/train --input_data_pattern=$work/data/validate-* \
      --output_file=$work/predictions.csv
    expect_failure "$work/run.log" $status \
      "$origin, model 'FaultyModel', forward threw an exception of type int"
    ;;
  reader_parse_throws)
    run "$work/run.log" train $reader --train_dir=$work/train --max_steps=2 --parse_fault=int
    expect_failure "$work/run.log" $status \
      "$origin, reader 'FaultyReader', parse of $work/data/train-"
    grep -qF "threw an exception of type int" "$work/run.log" || fail "the type is not named"
    ;;
  reader_corrupt_record_follows_policy)
    run "$work/run.log" train $reader --train_dir=$work/train --max_steps=2 --parse_fault=data_loss
    expect_failure "$work/run.log" $status \
      "$origin, reader 'FaultyReader', parse of $work/data/train-"
    grep -qF "bad record in parse" "$work/run.log" || fail "the reader's message is lost"
    # Skipped and counted, the run ends for want of data rather than at the first record.
    run "$work/skip.log" train $reader --train_dir=$work/train2 --max_steps=2 \
      --parse_fault=data_loss --skip_corrupt_records
    [ "$status" -ne 134 ] || fail "aborted"
    if grep -qF "parse of" "$work/skip.log"; then fail "a skipped record stopped the run"; fi
    ;;
  variable_without_gradient_warns)
    run "$work/run.log" train $common --train_dir=$work/train --max_steps=2 --unused_variable=true
    [ "$status" -eq 0 ] || fail "exit status $status, expected 0"
    grep -qF "warning: 1 of the 2 trained variables got no gradient from the loss, so training never changes them: 'faulty/unused' (the model FaultyModel" \
      "$work/run.log" || fail "no warning naming faulty/unused"
    ;;
  variable_without_gradient_fails_when_asked)
    echo "train_config { fail_on_variables_without_gradient: true }" >"$work/strict.config"
    run "$work/run.log" train --pipeline_config_path=$work/strict.config $common \
      --train_dir=$work/train --max_steps=2 --unused_variable=true
    expect_failure "$work/run.log" $status \
      "'faulty/unused' (the model FaultyModel"
    grep -qF "train_config.fail_on_variables_without_gradient is set" "$work/run.log" ||
      fail "the error does not say which setting made it one"
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "PASS ($case)"
