#!/bin/sh
# A fourth task needs no core or host edit (issue 36, section 1): the regression task of
# tests/fixtures/regression_task, built outside the tree against this build installed as an SDK
# (find_package(Trainyard)), is listed as a task, trains, evaluates and predicts through the
# host as it is, with its own reader, model, loss, metrics, log lines and predictions file.
#
# usage: fixture_task.sh TRAINYARD SOURCE_DIR BUILD_DIR WORKDIR
set -u
host=$1 src=$2 build=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect STATUS REGEX LOG COMMAND...: runs COMMAND, its output in LOG.
expect() {
  expected=$1 pattern=$2 log=$3
  shift 3
  "$@" >"$log" 2>&1 </dev/null
  status=$?
  if [ "$status" -ne "$expected" ]; then
    fail "$log: exit status $status, expected $expected: $*"
    tail -n 5 "$log"
  elif ! grep -Eq -- "$pattern" "$log"; then
    fail "$log: no line matches /$pattern/: $*"
    tail -n 5 "$log"
  fi
}

# The SDK as a third party has it: this build installed into a prefix.
expect 0 "" install.log cmake --install "$build" --prefix "$work/prefix"
expect 0 "" configure.log cmake -S "$src/tests/fixtures/regression_task" -B "$work/fixture" \
  -DCMAKE_PREFIX_PATH="$work/prefix"
expect 0 "" build.log cmake --build "$work/fixture"
plugin=$work/fixture/libregression_task.so
[ -f "$plugin" ] || fail "the fixture build made no $plugin"
grep -q "Trainyard_DIR:PATH=$work/prefix" "$work/fixture/CMakeCache.txt" ||
  fail "the fixture did not build against the installed SDK in $work/prefix"

expect 0 "^task +regression +regression_task +0\.1\.0" list.log \
  "$host" plugins list --plugin_path="$work/fixture"
expect 0 "^task +yt8m " list.log "$host" plugins list --plugin_path="$work/fixture"

expect 0 "" data.log "$host" data synth-yt8m --output_dir "$work/data" --num_videos 600 \
  --num_classes 20
cat >regression.config <<CONFIG
task: "regression"
num_classes: 1
train_config { train_dir: "$work/run" batch_size: 32 max_steps: 60 }
train_input_reader { data_pattern: "$work/data/train-*.tfrecord" }
eval_input_reader { data_pattern: "$work/data/validate-*.tfrecord" }
CONFIG
expect 0 "^regression step 60: loss = " train.log "$host" train \
  --pipeline_config_path=regression.config --plugin_path="$work/fixture" --start_new_model
expect 0 "^regression eval at step 60 \| mse = [0-9.e+-]+ \| mae = [0-9.e+-]+ \| loss = " \
  eval.log "$host" eval --pipeline_config_path=regression.config --train_dir="$work/run" \
  --run_once --plugin_path="$work/fixture"
expect 0 "" predict.log "$host" predict --train_dir="$work/run" \
  --input_data_pattern="$work/data/validate-*.tfrecord" --output_file="$work/predictions.csv" \
  --plugin_path="$work/fixture"
head -n 1 predictions.csv | grep -qx "id,prediction" ||
  fail "predictions.csv does not start with the task's header: $(head -n 2 predictions.csv)"
rows=$(($(wc -l <predictions.csv) - 1))
[ "$rows" -gt 0 ] || fail "predictions.csv has no rows"
grep -Eq "^[^,]+,-?[0-9]" predictions.csv || fail "predictions.csv has no prediction rows"

# The host asks a task's flag dialect, not its name: the regression task takes none of the
# starter code's input-layout flags, so --feature_names is refused naming it; a yt8m pipeline
# needs its training run's record, so predict from --checkpoint and a config is refused naming
# that task.
expect 1 "--feature_names is an input-layout flag of the starter code's dialect, which the task 'regression'" \
  layout.log "$host" train --pipeline_config_path=regression.config --feature_names=rgb \
  --plugin_path="$work/fixture" --train_dir="$work/refused"
[ -e "$work/refused" ] && fail "the refused run left $work/refused"
printf 'task: "yt8m"\nnum_classes: 20\n' >yt8m.config
expect 1 "a model of task 'yt8m' needs the record of its training run; give its --train_dir" \
  yt8m_predict.log "$host" predict --pipeline_config_path=yt8m.config \
  --checkpoint="$work/run/model.ckpt-60" --input_data_pattern="$work/data/validate-*.tfrecord" \
  --output_file="$work/yt8m.csv" --train_dir ""
[ -e "$work/yt8m.csv" ] && fail "the refused predict wrote $work/yt8m.csv"

if [ "$failures" -eq 0 ]; then
  echo "PASS: a task built outside the tree trains, evaluates and predicts"
  exit 0
fi
echo "$failures failure(s)"
exit 1
