#!/bin/sh
# What a scheduler's signals and a second writer do to a running `trainyard train`:
# - a second `train` on the same train_dir is refused, naming the running one's pid, and
#   touches nothing;
# - SIGTERM, SIGINT and SIGHUP each make the run finish its step, write a checkpoint of it and
#   exit with 128 + the signal's number, the last line saying why; each restart resumes from the
#   step the stopped run reached (so every stop made progress), and the run that reaches
#   max_steps says so and exits 0;
# - a waiting `trainyard eval` stops on SIGTERM with status 143.
# Every wait is for a line in a log (bounded at 120 s), never a fixed delay.
#
# usage: stop_and_lock.sh TRAINYARD WORKDIR
set -eu
host=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
}

"$host" data synth-yt8m --output_dir "$work/data" --num_videos 400 --num_classes 10 \
  --num_shards 2 --feature_sizes 8,4 >"$work/synth.log" 2>&1 || fail "synth"
train_dir="$work/train"
common="--train_dir=$train_dir --train_data_pattern=$work/data/train-* --feature_names=mean_rgb,mean_audio --feature_sizes=8,4 --num_classes=10 --batch_size=10 --num_readers=1 --num_epochs=0 --log_every_n_steps=1 --save_interval_secs=100000"

# wait_for FILE PATTERN PID: until FILE has a line matching PATTERN (or PID ended).
wait_for() {
  i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || fail "process $3 ended before '$2' appeared in $1"
    i=$((i + 1))
    [ $i -le 1200 ] || fail "no '$2' in $1 after 120 s"
    sleep 0.1
  done
}

# The step of the newest checkpoint the state file names.
newest_step() { sed -n 's/^model_checkpoint_path: ".*model\.ckpt-\([0-9]*\)"$/\1/p' "$train_dir/checkpoint"; }

last=0
n=0
for sig in TERM INT HUP; do
  n=$((n + 1))
  log="$work/run$n.log"
  # shellcheck disable=SC2086
  # env: a shell starts background jobs with SIGINT ignored, and an ignored signal stays so.
  env --default-signal=INT "$host" train $common --max_steps=1000000 >"$log" 2>&1 &
  pid=$!
  # Two log windows after this run's start: it trains, holding the lock.
  wait_for "$log" "^progress: .*step $((last + 2)) of 1000000" "$pid"
  if [ $n -eq 1 ]; then
    # shellcheck disable=SC2086
    if "$host" train $common --max_steps=5 >"$work/second.log" 2>&1; then
      fail "a second writer on the same train_dir ran"
    fi
    grep -q "is in use by another training run (pid $pid, host .*command train; lock file" \
      "$work/second.log" || fail "the second writer's error does not name the running one"
  fi
  kill -"$sig" "$pid"
  status=0
  wait "$pid" || status=$?
  case $sig in TERM) want=143 ;; INT) want=130 ;; HUP) want=129 ;; esac
  [ "$status" -eq "$want" ] || fail "SIG$sig: exit status $status, expected $want"
  grep -q "; ended: stopped by SIG$sig\$" "$log" || fail "SIG$sig: no final line saying why"
  step=$(sed -n 's/^trained to step \([0-9]*\),.*/\1/p' "$log")
  [ -n "$step" ] || fail "SIG$sig: no 'trained to step' line"
  [ "$(newest_step)" = "$step" ] || fail "SIG$sig: newest checkpoint $(newest_step), not step $step"
  [ "$step" -gt "$last" ] || fail "SIG$sig: stopped at step $step, not past $last"
  if [ $n -gt 1 ]; then
    grep -q "^restoring from .*model.ckpt-$last at step $last\$" "$log" ||
      fail "SIG$sig: the run did not resume from step $last"
  fi
  echo "SIG$sig: exit $status at step $step (checkpoint written)"
  last=$step
done

# The run that reaches max_steps says so and exits 0.
# shellcheck disable=SC2086
"$host" train $common --max_steps=$((last + 3)) >"$work/final.log" 2>&1 || fail "final run"
grep -q "; ended: max_steps $((last + 3)) reached\$" "$work/final.log" || fail "final line"
grep -q "^progress: [0-9]*:[0-9][0-9]:[0-9][0-9] elapsed, step $((last + 3)) of $((last + 3)), about 0:00:00 left\$" \
  "$work/final.log" || fail "no progress line"

# eval waiting for a newer checkpoint stops on SIGTERM.
"$host" eval --train_dir="$train_dir" --eval_data_pattern="$work/data/validate-*" \
  --batch_size=10 --num_readers=1 --eval_interval_secs=1 >"$work/eval.log" 2>&1 &
pid=$!
wait_for "$work/eval.log" "waiting for a newer checkpoint" "$pid"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 143 ] || fail "eval after SIGTERM: exit status $status, expected 143"
grep -q "stopped by SIGTERM while waiting for a new checkpoint" "$work/eval.log" ||
  fail "eval's stop message"
echo "PASS"
