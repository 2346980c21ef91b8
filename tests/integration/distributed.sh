#!/bin/bash
# `mpirun -np 2 trainyard train ...` (issue 16): the replicas train the model one process trains
# on the concatenated batches; only the chief writes to train_dir; all ranks stopped and started
# again resume bitwise; a rank killed mid-run stops the job with the last checkpoint whole, and
# the same command resumes from it; a hung rank makes the chief stop within the collective
# timeout, naming the rank; TF_CONFIG's parameter servers are refused.
#
# usage: distributed.sh TRAINYARD MPIRUN WORKDIR MAKE_IMAGE_DIR
set -u
host=$1 mpirun=$2 work=$3 make_images=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
unset TF_CONFIG
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$host" data synth-yt8m --output_dir data --num_videos 640 --num_classes 10 >synth.log 2>&1 ||
  fail "synth-yt8m: $(tail -n 3 synth.log)"
# One file: two replicas split it by record (record k to rank k % 2), so their batches of 8 at
# step i hold exactly the 16 records one process's batch i holds.
mkdir -p one
cat data/train-*.tfrecord >one/train.tfrecord
cat >input.config <<'EOF'
train_input_reader { shuffle: false deterministic: true num_readers: 1 num_epochs: 0 }
EOF
common=(--pipeline_config_path input.config --train_data_pattern one/train.tfrecord
  --num_classes 10 --feature_names mean_rgb --feature_sizes 1024 --seed 7
  --log_every_n_steps 5 --export_model_steps 1000000 --model MoeModel)

# eval_line DIR: the evaluation of DIR's latest checkpoint on the validation files.
eval_line() {
  "$host" eval --train_dir "$1" --eval_data_pattern 'data/validate-*.tfrecord' --run_once \
    --num_readers 1 --batch_size 64 2>&1 | grep -E "GAP|gap" | tail -n 1
}
# number NAME LINE: the value after "NAME" (":" or "=") in LINE.
number() { echo "$2" | sed -E "s/.*$1[^0-9-]*(-?[0-9.e+-]+).*/\1/"; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# --- 2 replicas of 8 == 1 process of 16 ---
timeout 120 "$mpirun" -np 2 "$host" train "${common[@]}" --train_dir two --batch_size 8 \
  --max_steps 20 >two.log 2>&1 || fail "mpirun -np 2 train: $(tail -n 5 two.log)"
grep -q "data parallel: 2 replicas of batch_size 8 (16 examples a step)" two.log ||
  fail "the chief does not log the replicas: $(head -n 5 two.log)"
grep -q "input split by record" two.log || fail "one file is not split by record"
[ "$(grep -c "trained to step 20" two.log)" = 1 ] ||
  fail "the run's end is not reported once, by the chief: $(grep "trained to" two.log)"
[ "$(ls two/events.out.tfevents.* 2>/dev/null | wc -l)" = 1 ] ||
  fail "train_dir holds other than the chief's one event file: $(ls two)"
timeout 120 "$host" train "${common[@]}" --train_dir single --batch_size 16 --max_steps 20 \
  >single.log 2>&1 || fail "single process train: $(tail -n 5 single.log)"
two_eval=$(eval_line two)
single_eval=$(eval_line single)
echo "2 replicas: $two_eval"
echo "1 process:  $single_eval"
for metric in GAP Loss; do
  a=$(number "$metric" "$two_eval") b=$(number "$metric" "$single_eval")
  if [ -z "$a" ] || [ -z "$b" ] || ! close "$a" "$b" 1e-4; then
    fail "$metric of 2 replicas ($a) differs from one process on the concatenated batch ($b)"
  fi
done

# --- a classifier (train_and_evaluate from a pipeline config): the same ---
"$make_images" images 3 32 28 >images.log 2>&1 || fail "make_image_dir: $(cat images.log)"
"$host" data convert-images --image_dir images --output img/shapes --validation_fraction 0.25 \
  --num_shards 1 >convert.log 2>&1 || fail "convert-images: $(tail -n 3 convert.log)"
classifier_config() { # TRAIN_DIR BATCH
  cat <<CONFIG
task: "classification"
num_classes: 3
model { class: "lenet" params { key: "dropout_keep_prob" float_value: 1.0 } }
train_config { train_dir: "$1" batch_size: $2 seed: 3 clip_gradient_norm: 0
  optimizer { class: "AdamOptimizer" } learning_rate { constant { learning_rate: 0.0003 } }
  save_interval_secs: 1000 log_every_n_steps: 5 }
train_input_reader { data_pattern: "img/shapes_train_*" num_epochs: 0 num_readers: 1
  shuffle: false deterministic: true
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 normalization: LENET } } }
eval_input_reader { data_pattern: "img/shapes_validation_*" num_readers: 1
  preprocessing_step { image_classification_preprocessing {
    fixed_resize_side: 0 default_image_size: 28 normalization: LENET } } }
eval_config { batch_size: 8 throttle_secs: 1000 }
CONFIG
}
classifier_config cls_two 8 >cls_two.config
classifier_config cls_one 16 >cls_one.config
timeout 120 "$mpirun" -np 2 "$host" train_and_evaluate --pipeline_config_path cls_two.config \
  --num_train_steps 4 >cls_two.log 2>&1 || fail "mpirun classifier: $(tail -n 5 cls_two.log)"
timeout 120 "$host" train_and_evaluate --pipeline_config_path cls_one.config \
  --num_train_steps 4 >cls_one.log 2>&1 || fail "classifier: $(tail -n 5 cls_one.log)"
cls_two=$(grep "final evaluation at step 4" cls_two.log)
cls_one=$(grep "final evaluation at step 4" cls_one.log)
echo "classifier, 2 replicas: $cls_two"
echo "classifier, 1 process:  $cls_one"
a=$(number "loss =" "$cls_two") b=$(number "loss =" "$cls_one")
if [ -z "$a" ] || [ -z "$b" ] || ! close "$a" "$b" 1e-4; then
  fail "the classifier's eval loss at 2 replicas ($a) differs from one process's ($b)"
fi

# TF_CONFIG's evaluator evaluates the chief's checkpoints instead of training.
classifier_config cls_two 8 | sed 's/eval_config { /eval_config { timeout_secs: 1 eval_interval_secs: 0.2 /' \
  >cls_eval.config
rm -rf cls_two/eval # so that its last checkpoint is new to the evaluator
before=$(ls cls_two/model.ckpt-*)
TF_CONFIG='{"cluster": {"chief": ["c0:2222"]}, "task": {"type": "evaluator", "index": 0}}' \
  timeout 120 "$host" train_and_evaluate --pipeline_config_path cls_eval.config \
  --num_train_steps 4 >evaluator.log 2>&1 || fail "the evaluator: $(tail -n 5 evaluator.log)"
grep -q "TF_CONFIG evaluator" evaluator.log || fail "the evaluator's role: $(head -n 3 evaluator.log)"
grep -Eq "step 4.*loss" evaluator.log || fail "the evaluator did not evaluate step 4: $(cat evaluator.log)"
[ "$(ls cls_two/model.ckpt-*)" = "$before" ] || fail "the evaluator trained: $(ls cls_two)"

# --- every rank stopped, the same command goes on: bitwise the run that never stopped ---
timeout 120 "$mpirun" -np 2 "$host" train "${common[@]}" --train_dir two --batch_size 8 \
  --max_steps 30 >resumed.log 2>&1 || fail "resumed mpirun: $(tail -n 5 resumed.log)"
grep -q "restoring from two/model.ckpt-20 at step 20" resumed.log ||
  fail "the resumed job did not restore step 20: $(head -n 5 resumed.log)"
timeout 120 "$mpirun" -np 2 "$host" train "${common[@]}" --train_dir straight --batch_size 8 \
  --max_steps 30 >straight.log 2>&1 || fail "straight mpirun: $(tail -n 5 straight.log)"
[ "$(eval_line two)" = "$(eval_line straight)" ] ||
  fail "resumed ($(eval_line two)) and uninterrupted ($(eval_line straight)) runs differ"

# --- a rank killed mid-run ---
# start_ranked DIR LOG [FLAGS...]: the job in the background, each rank's pid in DIR.pid.RANK.
start_ranked() {
  local dir=$1 log=$2
  shift 2
  rm -f "$dir".pid.*
  timeout 300 "$mpirun" -np 2 bash -c \
    'echo $$ >"$0.pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$dir" "$host" train "${common[@]}" \
    --train_dir "$dir" --batch_size 8 --max_steps 6000 --save_interval_secs 0.2 "$@" \
    >"$log" 2>&1 &
  job=$!
}
# wait_for_checkpoint DIR: until DIR has a checkpoint (60 s at most).
wait_for_checkpoint() {
  for _ in $(seq 600); do
    ls "$1"/model.ckpt-*.index >/dev/null 2>&1 && [ -s "$1.pid.1" ] && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
start_ranked killed killed.log
if wait_for_checkpoint killed; then
  sleep 0.2
  kill -9 "$(cat killed.pid.1)"
  start=$SECONDS
  wait "$job"
  status=$?
  [ "$status" -ne 0 ] || fail "the job whose rank 1 was killed exited 0"
  [ $((SECONDS - start)) -le 60 ] || fail "the job took $((SECONDS - start)) s to stop"
  grep -Eq "rank 1 .*(signal 9|Killed)|process rank 1" killed.log ||
    fail "the job's end does not name rank 1: $(tail -n 12 killed.log)"
  # The last checkpoint is whole, and the same command resumes from it and finishes.
  latest=$(sed -nE 's/^model_checkpoint_path: "(.*)"/\1/p' killed/checkpoint)
  timeout 300 "$mpirun" -np 2 "$host" train "${common[@]}" --train_dir killed --batch_size 8 \
    --max_steps 6000 --save_interval_secs 0.2 >killed_resume.log 2>&1 ||
    fail "the same command after the kill: $(tail -n 5 killed_resume.log)"
  grep -q "restoring from killed/${latest##*/}" killed_resume.log ||
    fail "the restart did not restore the last checkpoint ${latest}: $(head -n 3 killed_resume.log)"
  grep -q "trained to step 6000" killed_resume.log || fail "the restart did not finish"
else
  fail "no checkpoint before the kill: $(tail -n 5 killed.log)"
  kill -9 "$job" 2>/dev/null
fi

# --- a hung rank: the chief stops within the timeout, naming it ---
start_ranked hung hung.log --MpiCollective.timeout_secs=3
if wait_for_checkpoint hung; then
  kill -STOP "$(cat hung.pid.1)"
  start=$SECONDS
  wait "$job"
  status=$?
  [ "$status" -ne 0 ] || fail "the job with a hung rank exited 0"
  [ $((SECONDS - start)) -le 40 ] || fail "the hung job took $((SECONDS - start)) s to stop"
  grep -q "rank 1 never reached it" hung.log ||
    fail "the chief's error does not name rank 1: $(grep -i error hung.log | head -n 3)"
  kill -9 "$(cat hung.pid.1)" 2>/dev/null
  latest=$(sed -nE 's/^model_checkpoint_path: "(.*)"/\1/p' hung/checkpoint)
  "$host" eval --train_dir hung --eval_data_pattern 'data/validate-*.tfrecord' --run_once \
    --num_readers 1 >hung_eval.log 2>&1 || fail "the hung job's last checkpoint ($latest) does not evaluate"
else
  fail "no checkpoint before the hang: $(tail -n 5 hung.log)"
  kill -9 "$job" 2>/dev/null
fi

# --- the OD API's legacy flags: synchronous replicas only, as many as were launched ---
"$host" train "${common[@]}" --train_dir odapi --batch_size 8 --max_steps 1 \
  --worker_replicas 2 >async.log 2>&1 && fail "asynchronous --worker_replicas 2 was accepted"
grep -q "parameter servers" async.log || fail "async refusal: $(cat async.log)"
"$host" train "${common[@]}" --train_dir odapi --batch_size 8 --max_steps 1 \
  --worker_replicas 2 --sync_replicas >unlaunched.log 2>&1 && fail "2 replicas ran as 1 process"
grep -q "mpirun -np 2" unlaunched.log || fail "unlaunched replicas: $(cat unlaunched.log)"
timeout 120 "$mpirun" -np 2 "$host" train "${common[@]}" --train_dir odapi --batch_size 8 \
  --max_steps 2 --worker_replicas 2 --sync_replicas >odapi.log 2>&1 ||
  fail "mpirun with --worker_replicas 2 --sync_replicas: $(tail -n 3 odapi.log)"

# --- TF_CONFIG ---
TF_CONFIG='{"cluster": {"ps": ["p0:2222"], "worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 0}}' \
  "$host" train "${common[@]}" --train_dir tfps --batch_size 8 --max_steps 1 >tfps.log 2>&1 &&
  fail "a TF_CONFIG with parameter servers was accepted"
grep -q "parameter servers.*all-reduce" tfps.log || fail "ps refusal: $(cat tfps.log)"
TF_CONFIG='{"cluster": {"chief": ["c:1"], "worker": ["w0:2222"]}, "task": {"type": "chief", "index": 0}}' \
  "$host" train "${common[@]}" --train_dir tfchief --batch_size 8 --max_steps 1 >tfchief.log 2>&1 &&
  fail "a 2-worker TF_CONFIG without mpirun was accepted"
grep -q "mpirun -np 2 -H c:1,w0:1" tfchief.log || fail "TF_CONFIG without mpirun: $(cat tfchief.log)"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "distributed: all checks passed"
