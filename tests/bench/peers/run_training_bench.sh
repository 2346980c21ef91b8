#!/usr/bin/env bash
# Training steps, Trainyard against PyTorch and TensorFlow, side by side on the same work.
#
#   tests/bench/peers/run_training_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build, relative to the current directory; configured with Ninja if missing)
# gets bin/bench_train built. The
# Python environment ($TRAINYARD_PEERS_VENV, default /work/venv-peers) is created by
# setup_venv.sh when it does not import torch and tensorflow. For each workload (MODELS,
# default "LogisticModel MoeModel": YouTube-8M video level, batch 1024, 1152 features, 3862
# classes, CrossEntropyLoss, Adam at 0.01, clipping by norm 1, L2 1e-8; MoeModel with 2
# mixtures) bench_train writes the initial weights and a pool of 4 batches once under DATA_DIR
# (default /tmp/trainyard-train-bench), and every side starts from those files.
#
# 1. Equivalence, before speed: each side runs EQUIV_STEPS (default 100) steps from the same
#    state and data order; Trainyard's label losses must agree with PyTorch's to 1e-4 relative
#    at every step (TensorFlow's difference is reported too). One JSON line per workload with
#    "check": "equivalence", PASS or FAIL and the largest relative difference.
# 2. Speed: for each workload and thread count (THREADS, default "1 2"), REPS (default 3)
#    rounds of trainyard, pytorch, tensorflow, interleaved, each a fresh process with WARMUP
#    (default 5) untimed and STEPS (default 20) timed steps; threads set on every side
#    (bench_train --threads; torch.set_num_threads; tf.config.threading; OMP_NUM_THREADS,
#    MKL_NUM_THREADS) and the process pinned to the first N cores with taskset (PIN=0 turns
#    pinning off). One JSON line per run, then a markdown table of the medians over rounds and
#    the ratios (peer time / Trainyard time: above 1 means Trainyard is faster).
# 3. Then the input pipeline against tf.data (run_input_bench.sh), unless INPUT=0.
# The exit status is 1 when an equivalence check fails (the speed runs still happen).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
DATA=${DATA_DIR:-/tmp/trainyard-train-bench}
MODELS=${MODELS:-"LogisticModel MoeModel"}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
EQUIV_STEPS=${EQUIV_STEPS:-100}
PIN=${PIN:-1}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTRAINYARD_BUILD_TESTS=ON >&2
elif grep -q "^TRAINYARD_BUILD_TESTS:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
  cmake -B "$BUILD" -DTRAINYARD_BUILD_TESTS=ON >&2  # the benchmarks are built with the tests
fi
cmake --build "$BUILD" -j "$(nproc)" --target bench_train >&2
BENCH="$BUILD/bin/bench_train"
"$HERE/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"

# Versions and what the machine is, for BENCHMARKS.md.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; uptime: $(uptime)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "|", "; ".join(
    l.strip(" -") for l in torch.__config__.show().splitlines()
    if "Math Kernel" in l or "MKL-DNN" in l or "CPU capability" in l))'
  "$PY" -c 'import tensorflow as tf; print("tensorflow", tf.__version__)' 2>/dev/null
  echo "oneDNN (Trainyard): $(dpkg-query -W -f '${Version}' libdnnl-dev 2>/dev/null || echo '?')"
} >&2

for model in $MODELS; do
  if [[ ! -f "$DATA/$model/.done" ]]; then
    "$BENCH" --model "$model" --write_inputs "$DATA/$model" >&2
    touch "$DATA/$model/.done"
  fi
done

pinned() {  # THREADS COMMAND...: run with the thread variables set, pinned to THREADS cores
  local t=$1
  shift
  local pin=()
  if [[ "$PIN" == 1 ]] && command -v taskset >/dev/null; then pin=(taskset -c "0-$((t - 1))"); fi
  OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "${pin[@]}" "$@"
}

side() {  # FRAMEWORK MODEL THREADS ARGS...
  local framework=$1 model=$2 t=$3
  shift 3
  case $framework in
    trainyard) pinned "$t" "$BENCH" --model "$model" --inputs "$DATA/$model" --threads "$t" "$@" ;;
    pytorch) pinned "$t" "$PY" "$HERE/train_torch.py" --model "$model" --inputs "$DATA/$model" \
      --threads "$t" "$@" ;;
    tensorflow) pinned "$t" "$PY" "$HERE/train_tf.py" --model "$model" --inputs "$DATA/$model" \
      --threads "$t" "$@" ;;
  esac
}

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
status=0
EQUIV_THREADS=${THREADS##* }
for model in $MODELS; do
  for framework in trainyard pytorch tensorflow; do
    side "$framework" "$model" "$EQUIV_THREADS" --losses "$EQUIV_STEPS" >>"$RESULTS"
  done
  "$PY" - "$RESULTS" "$model" <<'EOF' || status=1
import json, sys
rows = {r["framework"]: r["losses"] for r in map(json.loads, open(sys.argv[1]))
        if r.get("workload") == sys.argv[2] and "losses" in r}
def max_rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))
ty, pt, tf = rows["trainyard"], rows["pytorch"], rows["tensorflow"]
diff = max_rel(ty, pt)
ok = len(ty) == len(pt) and diff <= 1e-4
print(json.dumps({"check": "equivalence", "workload": sys.argv[2], "steps": len(ty),
                  "result": "PASS" if ok else "FAIL", "tolerance": 1e-4,
                  "max_rel_diff_trainyard_pytorch": diff,
                  "max_rel_diff_tensorflow_pytorch": max_rel(tf, pt),
                  "first_loss": ty[0], "last_loss": ty[-1]}), flush=True)
sys.exit(0 if ok else 1)
EOF
done

echo "speed runs start: $(uptime)" >&2
for rep in $(seq "$REPS"); do
  for model in $MODELS; do
    for t in $THREADS; do
      for framework in trainyard pytorch tensorflow; do
        side "$framework" "$model" "$t" --steps "$STEPS" --warmup "$WARMUP" | tee -a "$RESULTS"
      done
    done
  done
done
echo "speed runs end: $(uptime)" >&2

"$PY" - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "median_ms" in r]
def med(fw, wl, t, key):
    values = [r[key] for r in rows if (r["framework"], r["workload"], r["threads"]) == (fw, wl, t)]
    return statistics.median(values) if values else float("nan")
print()
print("| workload | threads | Trainyard ms (p90) | PyTorch ms (p90) | TensorFlow ms (p90) | "
      "PyTorch / Trainyard | TensorFlow / Trainyard | Trainyard ex/s | Trainyard GFLOP/s | "
      "fraction of GEMM peak | step / matmul bound | peak RSS MB (Ty / PT / TF) | "
      "first step s (Ty / PT / TF) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for wl in sorted({r["workload"] for r in rows}, key=lambda w: w != "LogisticModel"):
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}):
        ty, pt, tf = (med(fw, wl, t, "median_ms") for fw in ("trainyard", "pytorch", "tensorflow"))
        p90 = [med(fw, wl, t, "p90_ms") for fw in ("trainyard", "pytorch", "tensorflow")]
        rss = [med(fw, wl, t, "peak_rss_mb") for fw in ("trainyard", "pytorch", "tensorflow")]
        first = [med(fw, wl, t, "time_to_first_step_s")
                 for fw in ("trainyard", "pytorch", "tensorflow")]
        print(f"| {wl} | {t} | {ty:.1f} ({p90[0]:.1f}) | {pt:.1f} ({p90[1]:.1f}) | "
              f"{tf:.1f} ({p90[2]:.1f}) | {pt / ty:.2f} | {tf / ty:.2f} | "
              f"{med('trainyard', wl, t, 'examples_per_sec'):.0f} | "
              f"{med('trainyard', wl, t, 'gflops'):.0f} | "
              f"{med('trainyard', wl, t, 'fraction_of_peak'):.2f} | "
              f"{med('trainyard', wl, t, 'step_over_matmul_bound'):.2f} | "
              f"{rss[0]:.0f} / {rss[1]:.0f} / {rss[2]:.0f} | "
              f"{first[0]:.2f} / {first[1]:.2f} / {first[2]:.2f} |")
EOF
# 3. The input pipeline against tf.data (run_input_bench.sh, same venv and build), unless
#    INPUT=0: the other workload of issue 7's protocol.
if [[ "${INPUT:-1}" == 1 ]]; then
  cmake --build "$BUILD" -j "$(nproc)" --target trainyard bench_input >&2
  "$HERE/run_input_bench.sh" "$VENV" "$BUILD" || status=1
fi
exit $status
