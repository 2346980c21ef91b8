#!/usr/bin/env bash
# A single-stage detector, Trainyard against torchvision's of the same shape: training and
# inference images/sec on the same batches, batch size and threads (issue 14's target for SSD
# MobileNet v1, issue 37's for the SSDLite and RetinaNet recipes: training at least 1.3x
# torchvision's images/sec). MODEL picks it:
#   ssd_mobilenet_v1 (the default)  bench_ssd's built-in ssd_mobilenet_v1_coco at 300 x 300, 90
#                                   classes, RMSProp; BATCH default 8.
#   ssdlite_mobilenet_v2            configs/ssdlite_mobilenet_v2_synth_shapes.config (bench_ssd
#                                   --config: 160 x 160, 4 classes, depth 0.25, Adam); BATCH
#                                   default 16, the recipe's.
#   retinanet_mobilenet_v1_fpn      configs/ssd_mobilenet_v1_fpn_synth_shapes.config, the same;
#                                   BATCH default 16.
# against ssd_torchvision.py --model MODEL (its header says what matches and what differs).
#
#   [MODEL=...] tests/bench/peers/run_ssd_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build; configured with Ninja, Release, if missing) gets bin/bench_ssd built
# (SKIP_BUILD=1 skips that; JOBS sets the build's parallelism, default nproc). The Python
# environment ($TRAINYARD_PEERS_VENV, default /work/venv-peers) is created or completed by
# setup_venv.sh. For each thread count (THREADS, default "1 2"), REPS (default 3) rounds,
# interleaved (round r runs every thread count and side before round r + 1), each a fresh
# process with WARMUP (default 2) untimed and STEPS (default 5) timed training steps, then as
# many inference steps, at batch BATCH (above), the threads set on both sides and each
# process pinned to the first N cores with taskset (PIN=0: no pinning). torchvision runs in each
# memory format of TORCH_FORMATS (default "channels_last contiguous"; the ratio is taken against
# the faster), with TORCH_ARGS added (e.g. "--topk_candidates 400 --head_kernel 3"). For
# ssd_mobilenet_v1, Trainyard's process in the first BOUND_ROUNDS rounds (default 1) also
# measures the bound of its step (bench_ssd's header: raw oneDNN convolutions of the net's
# shapes, the FMA peak at the widest vectors); the recipes' models have none.
#
# Output: one JSON line per run (RESULTS_FILE keeps them; the tables take that file's lines of
# MODEL only, so rounds of several models can share it), then markdown tables of the medians
# over rounds: images/sec of
# each side for training and inference and "Trainyard / torchvision" (above 1, Trainyard is
# faster; the target is 1.3 for training); the same by CPU time (images per CPU-second), which a
# busy machine disturbs less; Trainyard's step by phase; the bound (ssd_mobilenet_v1).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
MODEL=${MODEL:-ssd_mobilenet_v1}
case "$MODEL" in
  ssd_mobilenet_v1) BENCH_MODEL=() TY_WORKLOAD=ssd_mobilenet_v1 BATCH=${BATCH:-8} ;;
  ssdlite_mobilenet_v2) RECIPE=ssdlite_mobilenet_v2_synth_shapes ;;
  retinanet_mobilenet_v1_fpn) RECIPE=ssd_mobilenet_v1_fpn_synth_shapes ;;
  *)
    echo "run_ssd_bench: MODEL is ssd_mobilenet_v1, ssdlite_mobilenet_v2 or" \
      "retinanet_mobilenet_v1_fpn, got '$MODEL'" >&2
    exit 2
    ;;
esac
if [[ "$MODEL" != ssd_mobilenet_v1 ]]; then
  BENCH_MODEL=(--config "$ROOT/configs/$RECIPE.config")
  TY_WORKLOAD=$RECIPE
  BATCH=${BATCH:-16}
  BOUND_ROUNDS=0
fi
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
PIN=${PIN:-1}
BOUND_ROUNDS=${BOUND_ROUNDS:-1}
TORCH_FORMATS=${TORCH_FORMATS:-"channels_last contiguous"}
read -r -a TORCH_EXTRA <<<"${TORCH_ARGS:-}"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTRAINYARD_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >&2
  elif grep -q "^TRAINYARD_BUILD_TESTS:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
    cmake -B "$BUILD" -DTRAINYARD_BUILD_TESTS=ON >&2  # the benchmarks are built with the tests
  fi
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target bench_ssd >&2
fi
BENCH="$BUILD/bin/bench_ssd"
"$HERE/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"

{
  echo "model: $MODEL (Trainyard: bench_ssd" \
    "${BENCH_MODEL[*]:-(built-in ssd_mobilenet_v1_coco)}), batch $BATCH"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores," \
    "$(grep -o -w -E 'avx2|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  "$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "| torchvision",
    torchvision.__version__, "|", "; ".join(
    l.strip(" -") for l in torch.__config__.show().splitlines()
    if "Math Kernel" in l or "MKL-DNN" in l or "CPU capability" in l))'
  echo "oneDNN (Trainyard): $(dpkg-query -W -f '${Version}' libdnnl-dev 2>/dev/null || echo '?')"
} >&2

pinned() {  # THREADS COMMAND...: run with the thread variables set, pinned to THREADS cores
  local t=$1
  shift
  local pin=()
  if [[ "$PIN" == 1 ]] && command -v taskset >/dev/null; then pin=(taskset -c "0-$((t - 1))"); fi
  OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "${pin[@]}" "$@"
}

RESULTS=${RESULTS_FILE:-$(mktemp)}
: >>"$RESULTS"
echo "speed runs start: $(uptime)" >&2
for rep in $(seq "$REPS"); do
  bound=0
  if ((rep <= BOUND_ROUNDS)); then bound=1; fi
  for t in $THREADS; do
    pinned "$t" "$BENCH" ${BENCH_MODEL[@]+"${BENCH_MODEL[@]}"} --threads "$t" --batch "$BATCH" \
      --steps "$STEPS" --warmup "$WARMUP" --bound "$bound" | tee -a "$RESULTS"
    for format in $TORCH_FORMATS; do
      pinned "$t" "$PY" "$HERE/ssd_torchvision.py" --model "$MODEL" --threads "$t" \
        --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --memory_format "$format" \
        ${TORCH_EXTRA[@]+"${TORCH_EXTRA[@]}"} | tee -a "$RESULTS"
    done
  done
done
echo "speed runs end: $(uptime)" >&2

"$PY" - "$RESULTS" "$TY_WORKLOAD" "$MODEL" <<'EOF'
import json, statistics, sys
workloads = {"trainyard": sys.argv[2], "torchvision": sys.argv[3]}
rows = [r for r in (json.loads(line) for line in open(sys.argv[1]) if line.startswith("{"))
        if r.get("workload") == workloads.get(r["framework"])]
def side(r):
    return r["framework"] + ("/" + r["memory_format"] if "memory_format" in r else "")
def values(s, t, kind, key):
    out = []
    for r in rows:
        if (side(r), r["threads"]) != (s, t):
            continue
        v = r[kind][key] if kind else r.get(key)
        if v is not None:
            out.append(v)
    return out
def med(s, t, kind, key):
    v = values(s, t, kind, key)
    return statistics.median(v) if v else float("nan")
threads = sorted({r["threads"] for r in rows})
formats = sorted({r["memory_format"] for r in rows if r["framework"] == "torchvision"})
batch = rows[0]["batch_size"]
for title, key, per in (("images/sec (wall clock)", "images_per_sec", None),
                        ("images per CPU-second (batch / the step's CPU time, all threads; robust "
                         "to time lost to other processes, not to their cache traffic)", "cpu_ms",
                         lambda ms: batch / ms * 1e3)):
    print()
    print(f"Medians over rounds, {title}:")
    print()
    print("| step | threads | Trainyard | " +
          " | ".join(f"torchvision, {f}" for f in formats) + " | Trainyard / best torchvision |")
    print("|---|---|---|" + "---|" * len(formats) + "---|")
    for kind in ("train", "infer"):
        for t in threads:
            f = per or (lambda v: v)
            ty = f(med("trainyard", t, kind, key))
            tv = [f(med("torchvision/" + fm, t, kind, key)) for fm in formats]
            best = max((v for v in tv if v == v), default=float("nan"))
            print(f"| {kind} | {t} | {ty:.2f} | " + " | ".join(f"{v:.2f}" for v in tv) +
                  f" | {ty / best:.2f} |")
print()
print("Trainyard's step by phase (medians over rounds of each run's median, ms):")
print()
print("| threads | train step | forward | loss (targets, mining) | regularization | backward | "
      "update | infer step | infer forward | postprocess (NMS) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t in threads:
    tr = [med("trainyard", t, "train", k) for k in
          ("median_ms", "forward_ms", "loss_ms", "regularization_ms", "backward_ms", "update_ms")]
    inf = [med("trainyard", t, "infer", k) for k in ("median_ms", "forward_ms", "postprocess_ms")]
    print(f"| {t} | " + " | ".join(f"{v:.0f}" for v in tr + inf) + " |")
# The recipes' models measure no bound: no table.
bound_threads = sorted({r["threads"] for r in rows
                        if side(r) == "trainyard" and r.get("conv_bound_ms") is not None})
if bound_threads:
    print()
    print("Bound (Trainyard's process, raw oneDNN at the net's shapes; FMA peak):")
    print()
    print("| threads | conv bound ms NHWC (fwd / bwd data / bwd weights) | any layout | inference "
          "(fwd) | train step ms | step GFLOP | Trainyard GFLOP/s | FMA peak GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
for t in bound_threads:
    passes = [r["conv_bound_passes_ms"] for r in rows
              if side(r) == "trainyard" and r["threads"] == t and r["conv_bound_ms"] is not None]
    p = ([statistics.median(x[i] for x in passes) for i in range(3)] if passes
         else [float("nan")] * 3)
    print(f"| {t} | {med('trainyard', t, None, 'conv_bound_ms'):.0f} ({p[0]:.0f} / {p[1]:.0f} / "
          f"{p[2]:.0f}) | {med('trainyard', t, None, 'conv_bound_any_ms'):.0f} | "
          f"{med('trainyard', t, None, 'infer_conv_bound_ms'):.0f} | "
          f"{med('trainyard', t, 'train', 'median_ms'):.0f} | "
          f"{med('trainyard', t, None, 'step_gflop'):.1f} | "
          f"{med('trainyard', t, None, 'gflops'):.1f} | "
          f"{med('trainyard', t, None, 'fma_peak_gflops'):.0f} |")
print()
print("Per round, images/sec (Trainyard | torchvision " + " | ".join(formats) + "):")
for kind in ("train", "infer"):
    for t in threads:
        each = lambda s: " / ".join(f"{v:.2f}" for v in values(s, t, kind, "images_per_sec"))
        print(f"- {kind}, {t} thread(s): {each('trainyard')} | " +
              " | ".join(each("torchvision/" + f) for f in formats))
EOF
