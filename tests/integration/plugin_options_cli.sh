#!/bin/sh
# Class options travel with the run (issue 20): a run's model and loss options are recorded in
# the train_dir (model_flags.json), so eval, predict, export and a resumed train use them without
# being told again; a model option given again with another value is refused naming both values;
# an option may be qualified by its class (--MoeModel.moe_num_mixtures=3), and must be when two
# classes of the run declare it; a misspelt option gets the nearest name and the class's options;
# absl's and gflags' forms (--flag, --noflag, --flag value) are accepted.
#
# usage: plugin_options_cli.sh TRAINYARD WORKDIR FIXTURE_PLUGIN_DIR
set -u
host=$1 work=$2 fixture_plugins=$3
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

"$host" data synth-yt8m --output_dir data --num_videos 200 --num_classes 8 --num_shards 1 \
  --feature_sizes 8,4 >synth.log 2>&1 || fail "synth-yt8m"
input="--feature_names=mean_rgb,mean_audio --feature_sizes=8,4 --num_classes=8 --batch_size=10 --num_readers=1"
train="$host train --train_data_pattern=data/train-0000.tfrecord $input --model=MoeModel --label_loss=HingeLoss"
eval="$host eval --eval_data_pattern=data/validate-0000.tfrecord --batch_size=10 --run_once"

# Qualified options go to their class; both are recorded.
expect 0 'trained to step 4,' train1.log $train --train_dir=run --max_steps=4 \
  --MoeModel.moe_num_mixtures=3 --HingeLoss.b=0.5
grep -q '"model_params": {"moe_num_mixtures": "3"}' run/model_flags.json ||
  fail "model_flags.json does not record moe_num_mixtures 3: $(cat run/model_flags.json)"
grep -q '"label_loss_params": {"b": "0.5"}' run/model_flags.json ||
  fail "model_flags.json does not record the loss's b 0.5: $(cat run/model_flags.json)"

# eval without the options evaluates the recorded model with the recorded loss: the same
# Avg_Loss as with --b=0.5 given, another with --b=1.
expect 0 'Avg_Loss' eval_recorded.log $eval --train_dir=run
expect 0 'Avg_Loss' eval_given.log $eval --train_dir=run --b=0.5 --moe_num_mixtures=3
expect 0 'Avg_Loss' eval_other_b.log $eval --train_dir=run --HingeLoss.b=1
loss_of() { sed -n 's/.*Avg_Loss: \([0-9.]*\).*/\1/p' "$1"; }
[ -n "$(loss_of eval_recorded.log)" ] && [ "$(loss_of eval_recorded.log)" = "$(loss_of eval_given.log)" ] ||
  fail "eval without options ($(loss_of eval_recorded.log)) is not eval with them ($(loss_of eval_given.log))"
[ "$(loss_of eval_recorded.log)" != "$(loss_of eval_other_b.log)" ] ||
  fail "the loss's b does not reach eval's loss"

# A model option that differs from the recorded one names both values.
expect 1 'moe_num_mixtures=2 disagrees with run/model_flags.json, where MoeModel was trained with moe_num_mixtures 3' \
  eval_changed.log $eval --train_dir=run --moe_num_mixtures=2
expect 0 'wrote predictions for 40 examples' predict.log "$host" predict --train_dir=run \
  --input_data_pattern=data/validate-0000.tfrecord --output_file=predictions.csv
[ "$(wc -l <predictions.csv)" -eq 41 ] || fail "predict wrote $(wc -l <predictions.csv) lines, not 41"
expect 0 'export' export.log sh -c "\"$host\" export --train_dir=run --export_dir=exported && echo export"
grep -q '"moe_num_mixtures": "3"' exported/model_flags.json || fail "the export lost moe_num_mixtures"

# Resuming without the option keeps the recorded value; with another value it is refused.
expect 0 'trained to step 6,' resume.log $train --train_dir=run --max_steps=6
expect 1 'moe_num_mixtures.* was .3. when this train_dir was created but is .2. now' resume_changed.log \
  $train --train_dir=run --max_steps=8 --moe_num_mixtures=2

# Misspelt options: the nearest name and the classes' options.
expect 1 "unknown flag --moe_num_mixture: a prefix of a flag is not accepted; did you mean --moe_num_mixtures\\?" \
  typo_prefix.log $train --train_dir=run2 --max_steps=1 --moe_num_mixture=2
expect 1 "unknown flag --moe_num_mixtrues: did you mean --moe_num_mixtures\\?.*MoeModel's options: .*moe_num_mixtures" \
  typo.log $train --train_dir=run2 --max_steps=1 --moe_num_mixtrues=2
expect 1 "unknown flag --MoeModel.moe_num_mixtrues: MoeModel has no option 'moe_num_mixtrues'; did you mean --MoeModel.moe_num_mixtures\\?" \
  typo_qualified.log $train --train_dir=run2 --max_steps=1 --MoeModel.moe_num_mixtrues=2
# An option of a class this run does not use is ignored with a warning, qualified or not.
expect 0 'warning: ignoring --LogisticModel.l2_penalty: LogisticModel is not a class of this run' \
  other_class.log $train --train_dir=run3 --max_steps=1 --LogisticModel.l2_penalty=0.1

# An option two classes of the run declare (FixtureModel's and FixtureLoss's l2_penalty) must be
# qualified; qualified, it reaches only its class.
fixture="$host train --plugin_path=$fixture_plugins --train_data_pattern=data/train-0000.tfrecord $input --model=FixtureModel --label_loss=FixtureLoss --train_dir=run4"
expect 1 "--l2_penalty is an option of 2 classes of this run \(FixtureModel, FixtureLoss\); say which: --FixtureModel.l2_penalty=0.5 or --FixtureLoss.l2_penalty=0.5" \
  ambiguous.log $fixture --l2_penalty=0.5
expect 0 'class: "FixtureModel"' qualified.log $fixture --FixtureModel.l2_penalty=0.5 --print_config
tr -d '\n' <qualified.log | grep -Eq 'class: "FixtureModel" *params \{ *key: "l2_penalty" *float_value: 0.5' ||
  fail "--FixtureModel.l2_penalty=0.5 did not reach FixtureModel: $(grep -A3 FixtureModel qualified.log)"
tr -d '\n' <qualified.log | grep -Eq 'class: "FixtureLoss" *params \{ *key: "l2_penalty" *float_value: 0.5' &&
  fail "--FixtureModel.l2_penalty=0.5 reached FixtureLoss: $(grep -A3 FixtureLoss qualified.log)"

# absl's conventions (issue 36): a bare boolean class option is true, --noNAME false, for the
# host's boolean flags too; a flag given twice takes its last value.
frame="$host train --train_data_pattern=data/train-0000.tfrecord --frame_features --feature_names=rgb --feature_sizes=8 --num_classes=8 --train_dir=run5"
expect 0 'class: "DbofModel"' nobool.log $frame --model=DbofModel --nodbof_add_batch_norm \
  --print_config
tr -d '\n' <nobool.log | grep -Eq 'key: "dbof_add_batch_norm" *bool_value: false' ||
  fail "--nodbof_add_batch_norm did not set dbof_add_batch_norm false: $(grep -A1 dbof_add nobool.log)"
expect 0 'class: "LstmModel"' barebool.log $frame --model=LstmModel --lstm_backward --print_config
tr -d '\n' <barebool.log | grep -Eq 'key: "lstm_backward" *bool_value: true' ||
  fail "a bare --lstm_backward did not set lstm_backward true: $(grep -A1 lstm_backward barebool.log)"
# gflags: an option that is not boolean takes the next argument as its value (--lstm_cells 8),
# qualified too; without one it is an error saying how to give it.
expect 0 'class: "LstmModel"' spaced.log $frame --model=LstmModel --lstm_cells 8 \
  --LstmModel.lstm_layers 3 --print_config
tr -d '\n' <spaced.log | grep -Eq 'key: "lstm_cells" *int_value: 8' ||
  fail "--lstm_cells 8 did not set lstm_cells 8: $(grep -A1 lstm_cells spaced.log)"
tr -d '\n' <spaced.log | grep -Eq 'key: "lstm_layers" *int_value: 3' ||
  fail "--LstmModel.lstm_layers 3 did not set lstm_layers 3: $(grep -A1 lstm_layers spaced.log)"
# The run's classes decide what a bare flag is: a loaded class outside the run (FixtureLoss) with
# a boolean option of the same name does not leave the value stray.
expect 0 'class: "MoeModel"' loaded_bool.log $train --plugin_path=$fixture_plugins \
  --train_dir=run6 --moe_num_mixtures 3 --print_config
tr -d '\n' <loaded_bool.log | grep -Eq 'key: "moe_num_mixtures" *int_value: 3' ||
  fail "--moe_num_mixtures 3 beside FixtureLoss's boolean did not set 3: $(grep -A1 moe_num loaded_bool.log)"
expect 1 'flag --lstm_cells needs a value: --lstm_cells=VALUE or --lstm_cells VALUE' \
  spaced_missing.log $frame --model=LstmModel --print_config --lstm_cells
expect 0 'batch_size: 7' twice.log $train --train_dir=run5 --batch_size=10 --batch_size=7 \
  --start_new_model --nostart_new_model --print_config
grep -q 'start_new_model: true' twice.log &&
  fail "--nostart_new_model after --start_new_model left it true"
expect 1 'unknown flag --nomoe_num_mixtures' nonbool.log $train --train_dir=run5 \
  --nomoe_num_mixtures --print_config

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS: class options travel with the run"
