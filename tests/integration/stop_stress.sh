#!/usr/bin/env bash
# Stops at random moments: a MoeModel run (the model whose early stops corrupted the heap, issue
# 35) is stopped STOPS times with SIGINT, SIGTERM or SIGHUP, each at a random moment of its first
# steps (before the first step, inside a step, between two), and the last stops land inside the
# evaluations of a train_and_evaluate run. Every stop must:
# - exit with 128 + the signal's number (never 134 for an abort, never a crash), its last line
#   saying why;
# - leave whole checkpoints: the state file names the step the run reached, whose .index and
#   .data files are there;
# - be resumed by the next run from exactly that step.
# The runs chain in one train_dir, each resuming the one before. Waits are for lines in a log,
# bounded at 120 s; the random moments are a seeded sequence (STRESS_SEED), printed on failure.
#
# usage: stop_stress.sh TRAINYARD WORKDIR [STOPS]
set -u
host=$1 work=$2 stops=${3:-30}
seed=${STRESS_SEED:-$(date +%s)}
RANDOM=$seed
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $* (STRESS_SEED=$seed)"
  for f in "$work"/*.log; do
    [ -f "$f" ] || continue
    echo "--- $f"
    tail -n 15 "$f"
  done
  exit 1
}

"$host" data synth-yt8m --output_dir "$work/data" --num_videos 3000 --num_classes 200 \
  --num_shards 2 >"$work/synth.log" 2>&1 || fail "synth-yt8m"
train_dir="$work/train"
common=(--train_dir="$train_dir" --train_data_pattern="$work/data/train-*"
  --model=MoeModel --feature_names=mean_rgb,mean_audio --feature_sizes=1024,128
  --num_classes=200 --batch_size=1024 --num_readers=2 --num_epochs=0 --log_every_n_steps=1)

# wait_for FILE PATTERN PID: until FILE has a line matching PATTERN; 1 when PID ended first.
wait_for() {
  local i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || return 1
    i=$((i + 1))
    [ $i -le 12000 ] || fail "no '$2' in $1 after 120 s"
    sleep 0.01
  done
}

# wait_for_routed PID: until PID's signal thread ("ty-signals") runs: main has blocked the stop
# signals and routed them to it (before that, as in any program, their default action ends the
# process); 1 when PID ended first.
wait_for_routed() {
  local i=0
  while ! grep -qx ty-signals /proc/"$1"/task/*/comm 2>/dev/null; do
    kill -0 "$1" 2>/dev/null || return 1
    i=$((i + 1))
    [ $i -le 12000 ] || fail "process $1 started no ty-signals thread in 120 s"
    sleep 0.01
  done
}

# The step of the newest checkpoint the state file names (0 when there is none).
newest_step() {
  local s
  s=$(sed -n 's/^model_checkpoint_path: ".*model\.ckpt-\([0-9]*\)"$/\1/p' "$train_dir/checkpoint" \
    2>/dev/null)
  echo "${s:-0}"
}

signals=(INT TERM HUP)
last=0
evaluations=0
for n in $(seq 1 "$stops"); do
  sig=${signals[$((RANDOM % 3))]}
  case $sig in TERM) want=143 ;; INT) want=130 ;; HUP) want=129 ;; esac
  log="$work/run$n.log"
  # The last sixth of the stops: train_and_evaluate, stopped while it evaluates.
  in_eval=$((n > stops - stops / 6))
  # env: a shell starts background jobs with SIGINT ignored, and an ignored signal stays so.
  if [ $in_eval -eq 1 ]; then
    env --default-signal=INT "$host" train_and_evaluate "${common[@]}" \
      --eval_data_pattern="$work/data/validate-*" --num_train_steps=1000000 \
      --save_interval_secs=0 --throttle_secs=0 >"$log" 2>&1 &
  else
    env --default-signal=INT "$host" train "${common[@]}" --max_steps=1000000 \
      --save_interval_secs=100000 >"$log" 2>&1 &
  fi
  pid=$!
  moment=""
  if [ $in_eval -eq 1 ]; then
    # Each step saves a checkpoint and evaluates it: 0 to 90 ms after a save.
    if wait_for "$log" "^saved checkpoint .*model.ckpt-$((last + 1))\$" "$pid"; then
      sleep "0.0$((RANDOM % 10))"
      moment="in train_and_evaluate"
    fi
  else
    case $((RANDOM % 4)) in
      0) # Early: while the run starts, restores and fills its input pipeline, once main has
        # routed the signals and the command taken them as stop requests (microseconds later;
        # 50 ms and more here).
        if wait_for_routed "$pid"; then
          sleep "0.$((RANDOM % 7 + 1))"
          moment="at start-up"
        fi ;;
      *) # After 1 to 3 logged steps, then 0 to 90 ms into the next.
        k=$((RANDOM % 3 + 1))
        if wait_for "$log" "^training step $((last + k)) " "$pid"; then
          sleep "0.0$((RANDOM % 10))"
          moment="after step $((last + k))"
        fi ;;
    esac
  fi
  [ -n "$moment" ] || { wait "$pid"; fail "run $n ended before it could be stopped (status $?)"; }
  kill -"$sig" "$pid"
  status=0
  wait "$pid" || status=$?
  [ "$status" -eq "$want" ] || fail "run $n, SIG$sig $moment: exit status $status, expected $want"
  if grep -q "^trainyard: stopped by SIG$sig during the evaluation of .*model.ckpt-[0-9]* (after [0-9]* batches); nothing was written for it\$" "$log"; then
    # Stopped inside an evaluation: the checkpoint it evaluated is the run's last.
    moment="during the evaluation of a checkpoint"
    evaluations=$((evaluations + 1))
    step=$(newest_step)
  else
    grep -q "; ended: stopped by SIG$sig\$" "$log" || fail "run $n, SIG$sig $moment: no final line"
    step=$(sed -n 's/^trained to step \([0-9]*\),.*/\1/p' "$log")
    [ -n "$step" ] || fail "run $n: no 'trained to step' line"
  fi
  [ "$step" -ge "$last" ] || fail "run $n: stopped at step $step, before the $last it resumed"
  if [ "$step" -gt 0 ]; then
    [ "$(newest_step)" = "$step" ] || fail "run $n: newest checkpoint $(newest_step), not $step"
    prefix="$train_dir/model.ckpt-$step"
    [ -s "$prefix.index" ] && [ -s "$prefix.data-00000-of-00001" ] ||
      fail "run $n: checkpoint $prefix is not whole"
  fi
  if [ $last -gt 0 ]; then
    grep -q "^restoring from .*model.ckpt-$last at step $last\$" "$log" ||
      fail "run $n did not resume from step $last"
  fi
  echo "run $n: SIG$sig $moment: exit $status at step $step"
  last=$step
done
[ $evaluations -gt 0 ] || fail "no stop landed in an evaluation"

# The last checkpoint resumes into a run that ends normally.
"$host" train "${common[@]}" --max_steps=$((last + 2)) --save_interval_secs=100000 \
  >"$work/final.log" 2>&1 || fail "the final run (status $?)"
grep -q "^restoring from .*model.ckpt-$last at step $last\$" "$work/final.log" ||
  fail "the final run did not resume from step $last"
echo "PASS: $stops stops (STRESS_SEED=$seed)"
