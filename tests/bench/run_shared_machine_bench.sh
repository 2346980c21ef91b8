#!/usr/bin/env bash
# Training rates on a shared machine (issue 41): quiet, then with another process keeping one
# core busy, Trainyard beside PyTorch under the same load.
#
#   tests/bench/run_shared_machine_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build) gets bin/bench_frame_train and bin/bench_image_train built
# (SKIP_BUILD=1 skips that). The PyTorch side runs the peers' scripts (tests/bench/peers/
# train_frame_torch.py, train_image_torch.py) from $TRAINYARD_PEERS_VENV (default
# /work/venv-peers), which peers/setup_venv.sh creates when it does not import torch.
#
# Workloads: GruModel and LstmModel at the small shape of a quick training run (FRAME_SHAPE,
# default B 32, 30 frames, 128 features, 200 classes, 64 cells; both sides start from the
# weights and batches bench_frame_train --write_inputs writes under DATA_DIR, default
# /tmp/trainyard-shared-bench), and ResNet-20 (B RESNET_BATCH, default 32, 32x32x3 images).
# Every process runs THREADS (default 2) threads pinned to the first THREADS cores with taskset;
# "loaded" runs start a busy loop (`while :; do :; done`) pinned to core BUSY_CORE (default the
# last of them) first and stop it after. Trainyard runs with the host's compute-thread wait
# (compute_threads.h; the benchmarks apply it as the host does) and, with BEFORE=1 (default),
# once more with libgomp's own default (GOMP_SPINCOUNT=300000), the wait before issue 41;
# PyTorch runs with its own defaults. OMP_WAIT_POLICY and GOMP_SPINCOUNT are unset for every
# run. REPS (default 3) rounds, interleaved (quiet and loaded alternate within each round), each
# run a fresh process with WARMUP (default 5) untimed and STEPS (default 30) timed steps.
#
# Output: one JSON line per run (with "condition" and "side" added), then a markdown table of
# the medians over rounds: examples/s quiet and loaded for each side, loaded / quiet (the
# issue's target for Trainyard: at least 0.4), and Trainyard's loaded rate over PyTorch's
# (target: at least 1).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
DATA=${DATA_DIR:-/tmp/trainyard-shared-bench}
THREADS=${THREADS:-2}
BUSY_CORE=${BUSY_CORE:-$((THREADS - 1))}
REPS=${REPS:-3}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
BEFORE=${BEFORE:-1}
FRAME_SHAPE=${FRAME_SHAPE:-"--batch_size 32 --frames 30 --feature_size 128 --num_classes 200 --cells 64"}
RESNET_BATCH=${RESNET_BATCH:-32}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
unset OMP_WAIT_POLICY GOMP_SPINCOUNT

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target bench_frame_train bench_image_train >&2
fi
"$HERE/peers/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"
read -r -a shape <<<"$FRAME_SHAPE"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; uptime: $(uptime)"
  "$PY" -c 'import torch; print("torch", torch.__version__)'
} >&2

for model in GruModel LstmModel; do
  if [[ ! -f "$DATA/$model/.done" ]]; then
    "$BUILD/bin/bench_frame_train" --model "$model" "${shape[@]}" --threads "$THREADS" \
      --write_inputs "$DATA/$model" >&2
    touch "$DATA/$model/.done"
  fi
done

BUSY=""
stop_busy() {
  if [[ -n "$BUSY" ]]; then
    kill "$BUSY" 2>/dev/null || true
    wait "$BUSY" 2>/dev/null || true
    BUSY=""
  fi
}
trap stop_busy EXIT

run() {  # CONDITION SIDE WORKLOAD: one process, its JSON line tagged
  local condition=$1 side=$2 workload=$3 cmd=()
  local pin=(taskset -c "0-$((THREADS - 1))" env OMP_NUM_THREADS="$THREADS")
  case $side in
    trainyard) ;;
    trainyard-before) pin+=(GOMP_SPINCOUNT=300000) ;;
  esac
  case $side/$workload in
    trainyard*/resnet_20)
      cmd=("$BUILD/bin/bench_image_train" --model resnet_20 --threads "$THREADS" --bound 0
        --batch_size "$RESNET_BATCH") ;;
    trainyard*/*)
      cmd=("$BUILD/bin/bench_frame_train" --model "$workload" "${shape[@]}" --inputs
        "$DATA/$workload" --threads "$THREADS") ;;
    pytorch/resnet_20)
      cmd=("$PY" "$HERE/peers/train_image_torch.py" --model resnet_20 --threads "$THREADS"
        --batch_size "$RESNET_BATCH") ;;
    pytorch/*)
      cmd=("$PY" "$HERE/peers/train_frame_torch.py" --model "$workload" --inputs
        "$DATA/$workload" --threads "$THREADS") ;;
  esac
  "${pin[@]}" "${cmd[@]}" --steps "$STEPS" --warmup "$WARMUP" |
    "$PY" -c 'import json, sys
r = json.loads(sys.stdin.read())
r.update(condition=sys.argv[1], side=sys.argv[2], workload=sys.argv[3])
r["rate"] = r.get("examples_per_sec", r.get("images_per_sec"))
print(json.dumps(r), flush=True)' "$condition" "$side" "$workload"
}

SIDES="trainyard pytorch"
if [[ "$BEFORE" == 1 ]]; then SIDES="trainyard trainyard-before pytorch"; fi
RESULTS=${RESULTS_FILE:-$(mktemp)}
echo "runs start: $(uptime)" >&2
for rep in $(seq "$REPS"); do
  for condition in quiet loaded; do
    if [[ "$condition" == loaded ]]; then
      taskset -c "$BUSY_CORE" sh -c 'while :; do :; done' &
      BUSY=$!
    fi
    for workload in GruModel LstmModel resnet_20; do
      for side in $SIDES; do
        run "$condition" "$side" "$workload" | tee -a "$RESULTS"
      done
    done
    stop_busy
  done
done
echo "runs end: $(uptime)" >&2

"$PY" - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def rate(side, workload, condition):
    values = [r["rate"] for r in rows
              if (r["side"], r["workload"], r["condition"]) == (side, workload, condition)]
    return statistics.median(values) if values else float("nan")
sides = [s for s in ("trainyard", "trainyard-before", "pytorch") if any(r["side"] == s for r in rows)]
names = {"trainyard": "Trainyard", "trainyard-before": "Trainyard, libgomp's default wait",
         "pytorch": "PyTorch"}
print()
print("| workload | side | quiet ex/s | loaded ex/s | loaded / quiet | loaded / PyTorch loaded |")
print("|---|---|---|---|---|---|")
for workload in ("GruModel", "LstmModel", "resnet_20"):
    peer = rate("pytorch", workload, "loaded")
    for side in sides:
        quiet, loaded = rate(side, workload, "quiet"), rate(side, workload, "loaded")
        print(f"| {workload} | {names[side]} | {quiet:.0f} | {loaded:.0f} | {loaded / quiet:.2f} | "
              f"{loaded / peer:.2f} |")
EOF
