#!/usr/bin/env bash
# Frame-level training steps, Trainyard against PyTorch, side by side on the same work.
#
#   tests/bench/peers/run_frame_training_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build; configured with Ninja if missing) gets bin/bench_frame_train built
# (SKIP_BUILD=1 skips that). The Python environment ($TRAINYARD_PEERS_VENV, default
# /work/venv-peers) is created by setup_venv.sh when it does not import torch and tensorflow.
# For each workload (MODELS, default "DbofModel LstmModel NetVLADModelLF GruModel"; the shapes
# are bench_frame_train's: DbofModel B 128, 30 frames, 8192 clusters, 1024 hidden;
# NetVLADModelLF B 80, 300 frames, 64 clusters; LstmModel and GruModel B 32, 300 frames, one
# layer of 512; every one 1152 features, a MoE of 2 mixtures over 3862 classes, CrossEntropyLoss,
# TF1 Adam at 0.001, clipping by norm 1) bench_frame_train writes the initial weights and a pool
# of batches once under DATA_DIR (default /tmp/trainyard-frame-bench), and both sides start from
# those files.
#
# 1. Equivalence, before speed: each side runs EQUIV_STEPS (default 10) steps from the same state
#    and data order; the label losses must agree to TOLERANCE (default 1e-3) relative at every
#    step. LstmModel is checked with both PyTorch cells (torch ops, and torch.nn.LSTM's kernel
#    with re-ordered weights). One JSON line per check, PASS or FAIL.
# 2. Speed: for each workload and thread count (THREADS, default "2 1"), REPS (default 3) rounds
#    of trainyard and pytorch (and pytorch with torch.nn.LSTM for LstmModel), interleaved, each a
#    fresh process with WARMUP (default 2) untimed and STEPS (default 8) timed steps; threads set
#    on both sides and each process pinned to the first N cores with taskset (PIN=0: no
#    pinning). One JSON line per run, then a markdown table of the medians over rounds; "PyTorch /
#    Trainyard" is the peer's step time over Trainyard's (above 1: Trainyard is faster), one row
#    per PyTorch variant. torch.nn.LSTM's packed-sequence CPU kernel
#    takes about 6x the torch-ops cell's time here (its backward zero-fills a full-size gradient
#    per time step), so its speed rounds run only with LSTM_NN=1.
# The exit status is 1 when an equivalence check fails (the speed runs still happen).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
DATA=${DATA_DIR:-/tmp/trainyard-frame-bench}
MODELS=${MODELS:-"DbofModel LstmModel NetVLADModelLF GruModel"}
THREADS=${THREADS:-"2 1"}
REPS=${REPS:-3}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-2}
EQUIV_STEPS=${EQUIV_STEPS:-10}
EQUIV=${EQUIV:-1}
TOLERANCE=${TOLERANCE:-1e-3}
PIN=${PIN:-1}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTRAINYARD_BUILD_TESTS=ON >&2
  elif grep -q "^TRAINYARD_BUILD_TESTS:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
    cmake -B "$BUILD" -DTRAINYARD_BUILD_TESTS=ON >&2  # the benchmarks are built with the tests
  fi
  cmake --build "$BUILD" -j "$(nproc)" --target bench_frame_train >&2
fi
BENCH="$BUILD/bin/bench_frame_train"
"$HERE/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; uptime: $(uptime)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "|", "; ".join(
    l.strip(" -") for l in torch.__config__.show().splitlines()
    if "Math Kernel" in l or "MKL-DNN" in l or "CPU capability" in l))'
  echo "oneDNN (Trainyard): $(dpkg-query -W -f '${Version}' libdnnl-dev 2>/dev/null || echo '?')"
} >&2

for model in $MODELS; do
  if [[ ! -f "$DATA/$model/.done" ]]; then
    "$BENCH" --model "$model" --threads "${THREADS%% *}" --write_inputs "$DATA/$model" >&2
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
    pytorch) pinned "$t" "$PY" "$HERE/train_frame_torch.py" --model "$model" \
      --inputs "$DATA/$model" --threads "$t" "$@" ;;
    pytorch-nn) pinned "$t" "$PY" "$HERE/train_frame_torch.py" --model "$model" \
      --inputs "$DATA/$model" --threads "$t" --lstm_impl nn "$@" ;;
  esac
}

frameworks() {  # MODEL [speed]: torch.nn.LSTM's speed rounds only with LSTM_NN=1 (slow)
  if [[ "$1" == LstmModel && ( -z "${2:-}" || "${LSTM_NN:-0}" == 1 ) ]]; then
    echo "trainyard pytorch pytorch-nn"
  else
    echo "trainyard pytorch"
  fi
}

RESULTS=${RESULTS_FILE:-$(mktemp)}
status=0
EQUIV_THREADS=${THREADS%% *}
if [[ "$EQUIV" == 1 ]]; then
  for model in $MODELS; do
    for framework in $(frameworks "$model"); do
      side "$framework" "$model" "$EQUIV_THREADS" --losses "$EQUIV_STEPS" |
        sed "s/\"framework\": \"pytorch\", \"workload\"/\"framework\": \"$framework\", \"workload\"/" \
          >>"$RESULTS"
    done
    "$PY" - "$RESULTS" "$model" "$TOLERANCE" <<'EOF' || status=1
import json, sys
rows = {r["framework"]: r["losses"] for r in map(json.loads, open(sys.argv[1]))
        if r.get("workload") == sys.argv[2] and "losses" in r}
tolerance = float(sys.argv[3])
ty = rows.pop("trainyard")
ok = True
for peer, losses in rows.items():
    diffs = [abs(x - y) / max(abs(y), 1e-30) for x, y in zip(ty, losses)]
    passed = len(ty) == len(losses) and max(diffs) <= tolerance
    ok = ok and passed
    print(json.dumps({"check": "equivalence", "workload": sys.argv[2], "peer": peer,
                      "steps": len(ty), "result": "PASS" if passed else "FAIL",
                      "tolerance": tolerance, "max_rel_diff": max(diffs),
                      "rel_diff_step_1": diffs[0], "first_loss": ty[0], "last_loss": ty[-1]}),
          flush=True)
sys.exit(0 if ok else 1)
EOF
  done
fi

echo "speed runs start: $(uptime)" >&2
for rep in $(seq "$REPS"); do
  for model in $MODELS; do
    for t in $THREADS; do
      for framework in $(frameworks "$model" speed); do
        side "$framework" "$model" "$t" --steps "$STEPS" --warmup "$WARMUP" |
          sed "s/\"framework\": \"pytorch\", \"workload\"/\"framework\": \"$framework\", \"workload\"/" |
          tee -a "$RESULTS"
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
print("| workload | threads | Trainyard ms (p90) | PyTorch ms (p90) | PyTorch / Trainyard | "
      "Trainyard ex/s | PyTorch ex/s | Trainyard GFLOP/s | GEMM bound ms | fraction of GEMM "
      "bound | peak RSS MB (Ty / PT) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
order = ["DbofModel", "LstmModel", "NetVLADModelLF", "GruModel"]
for wl in sorted({r["workload"] for r in rows}, key=order.index):
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}, reverse=True):
        ty = med("trainyard", wl, t, "median_ms")
        peers = [fw for fw in ("pytorch", "pytorch-nn") if med(fw, wl, t, "median_ms") > 0]
        for fw in peers:
            pt = med(fw, wl, t, "median_ms")
            name = " (torch.nn.LSTM)" if fw == "pytorch-nn" else (
                " (torch ops cell)" if wl == "LstmModel" else "")
            print(f"| {wl}{name} | {t} | {ty:.1f} ({med('trainyard', wl, t, 'p90_ms'):.1f}) | "
                  f"{pt:.1f} ({med(fw, wl, t, 'p90_ms'):.1f}) | {pt / ty:.2f} | "
                  f"{med('trainyard', wl, t, 'examples_per_sec'):.1f} | "
                  f"{med(fw, wl, t, 'examples_per_sec'):.1f} | "
                  f"{med('trainyard', wl, t, 'gflops'):.0f} | "
                  f"{med('trainyard', wl, t, 'gemm_bound_ms'):.1f} | "
                  f"{med('trainyard', wl, t, 'fraction_of_gemm_bound'):.2f} | "
                  f"{med('trainyard', wl, t, 'peak_rss_mb'):.0f} / "
                  f"{med(fw, wl, t, 'peak_rss_mb'):.0f} |")
EOF
exit $status
