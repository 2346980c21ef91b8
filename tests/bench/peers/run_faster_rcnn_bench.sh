#!/usr/bin/env bash
# Faster R-CNN, Trainyard against torchvision's FasterRCNN of the same shape (issue 15's target:
# training at least 1.3x torchvision's images/sec): the reduced configuration (MobileNet v1 at
# 160 x 160, batch 8, 100 proposals, 32 RoIs an image) and the sample's ResNet-50 at 600 x 600
# (batch 1, 300 proposals, 64 RoIs), training and inference on the same batches, batch size and
# threads; then the memory-growth check (RSS over a long training run of the reduced
# configuration).
#
#   tests/bench/peers/run_faster_rcnn_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build; configured with Ninja, Release, if missing) gets bin/bench_faster_rcnn
# built (SKIP_BUILD=1 skips that; JOBS sets the build's parallelism, default nproc). The Python
# environment ($TRAINYARD_PEERS_VENV, default /work/venv-peers) is created or completed by
# setup_venv.sh. For each configuration of CONFIGS (default "mobilenet resnet50") and thread
# count of THREADS (default "1 2"), REPS (default 3) rounds, interleaved (round r runs every
# configuration, thread count and side before round r + 1), each a fresh process with WARMUP
# (default 1) untimed steps of each kind, then STEPS_MOBILENET (default 5) or STEPS_RESNET
# (default 2) timed training steps and as many inference steps, the threads set on both sides and
# each process pinned to the first N cores with taskset (PIN=0: no pinning). torchvision runs in
# each memory format of TORCH_FORMATS (default "channels_last contiguous"; the ratio is taken
# against the faster), with TORCH_ARGS added. Trainyard's process in the first BOUND_ROUNDS
# rounds (default 1) also measures the bound of its step (bench_faster_rcnn's header: raw
# oneDNN convolutions of the net's shapes, the AVX2 and AVX-512 FMA peaks). Then, unless
# MEMORY_STEPS is 0, one Trainyard process trains the reduced configuration MEMORY_STEPS
# (default 1000) steps at batch MEMORY_BATCH (default 1) on MEMORY_THREADS (default 2) threads
# and reports its resident memory every MEMORY_STEPS / 20 steps.
#
# Output: one JSON line per run, then markdown tables of the medians over rounds: images/sec of
# each side for training and inference and "Trainyard / torchvision" (above 1, Trainyard is
# faster; the target is 1.3 for training); the same by CPU time; inference latency; peak RSS;
# Trainyard's step by phase; the bound; the memory check.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
CONFIGS=${CONFIGS:-"mobilenet resnet50"}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
STEPS_MOBILENET=${STEPS_MOBILENET:-5}
STEPS_RESNET=${STEPS_RESNET:-2}
WARMUP=${WARMUP:-1}
PIN=${PIN:-1}
BOUND_ROUNDS=${BOUND_ROUNDS:-1}
TORCH_FORMATS=${TORCH_FORMATS:-"channels_last contiguous"}
MEMORY_STEPS=${MEMORY_STEPS:-1000}
MEMORY_BATCH=${MEMORY_BATCH:-1}
MEMORY_THREADS=${MEMORY_THREADS:-2}
read -r -a TORCH_EXTRA <<<"${TORCH_ARGS:-}"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTRAINYARD_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >&2
  elif grep -q "^TRAINYARD_BUILD_TESTS:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
    cmake -B "$BUILD" -DTRAINYARD_BUILD_TESTS=ON >&2  # the benchmarks are built with the tests
  fi
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target bench_faster_rcnn >&2
fi
BENCH="$BUILD/bin/bench_faster_rcnn"
"$HERE/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"

{
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
  for config in $CONFIGS; do
    steps=$STEPS_MOBILENET
    if [[ "$config" == resnet50 ]]; then steps=$STEPS_RESNET; fi
    for t in $THREADS; do
      pinned "$t" "$BENCH" --config "$config" --threads "$t" --steps "$steps" \
        --warmup "$WARMUP" --bound "$bound" | tee -a "$RESULTS"
      for format in $TORCH_FORMATS; do
        pinned "$t" "$PY" "$HERE/faster_rcnn_torchvision.py" --config "$config" --threads "$t" \
          --steps "$steps" --warmup "$WARMUP" --memory_format "$format" \
          ${TORCH_EXTRA[@]+"${TORCH_EXTRA[@]}"} | tee -a "$RESULTS"
      done
    done
  done
done
echo "speed runs end: $(uptime)" >&2
if ((MEMORY_STEPS > 0)); then
  pinned "$MEMORY_THREADS" "$BENCH" --config mobilenet --threads "$MEMORY_THREADS" \
    --batch "$MEMORY_BATCH" --memory_steps "$MEMORY_STEPS" | tee -a "$RESULTS"
  echo "memory run end: $(uptime)" >&2
fi

"$PY" - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
speed = [r for r in rows if r.get("mode") != "memory"]
def side(r):
    return r["framework"] + ("/" + r["memory_format"] if "memory_format" in r else "")
def values(w, s, t, kind, key):
    out = []
    for r in speed:
        if (r["workload"], side(r), r["threads"]) != (w, s, t):
            continue
        v = r[kind][key] if kind else r.get(key)
        if v is not None:
            out.append(v)
    return out
def med(w, s, t, kind, key):
    v = values(w, s, t, kind, key)
    return statistics.median(v) if v else float("nan")
def spread(v):
    return f"{min(v):.2f}-{max(v):.2f}" if v else "-"
workloads = sorted({r["workload"] for r in speed})
threads = sorted({r["threads"] for r in speed})
formats = sorted({r["memory_format"] for r in speed if r["framework"] == "torchvision"})
for w in workloads:
    batch = next(r["batch_size"] for r in speed if r["workload"] == w)
    print()
    print(f"## {w}, batch {batch}")
    for title, key, per in (("images/sec (wall clock)", "images_per_sec", None),
                            ("images per CPU-second (batch / the step's CPU time, all threads)",
                             "cpu_ms", lambda ms: batch / ms * 1e3)):
        print()
        print(f"Medians over rounds, {title}:")
        print()
        print("| step | threads | Trainyard | " +
              " | ".join(f"torchvision, {f}" for f in formats) +
              " | Trainyard / best torchvision |")
        print("|---|---|---|" + "---|" * len(formats) + "---|")
        for kind in ("train", "infer"):
            for t in threads:
                f = per or (lambda v: v)
                ty = f(med(w, "trainyard", t, kind, key))
                tv = [f(med(w, "torchvision/" + fm, t, kind, key)) for fm in formats]
                best = max((v for v in tv if v == v), default=float("nan"))
                print(f"| {kind} | {t} | {ty:.3f} | " + " | ".join(f"{v:.3f}" for v in tv) +
                      f" | {ty / best:.2f} |")
    print()
    print("Latency and memory (medians over rounds; step ms, peak RSS MB):")
    print()
    print("| threads | side | train step ms | infer step ms | peak RSS MB |")
    print("|---|---|---|---|---|")
    for t in threads:
        for s in ["trainyard"] + ["torchvision/" + f for f in formats]:
            print(f"| {t} | {s} | {med(w, s, t, 'train', 'median_ms'):.0f} | "
                  f"{med(w, s, t, 'infer', 'median_ms'):.0f} | "
                  f"{med(w, s, t, None, 'peak_rss_mb'):.0f} |")
    print()
    print("Trainyard's step by phase (medians over rounds of each run's median, ms):")
    print()
    print("| threads | train step | forward | loss | backward | update | RoIs/image | "
          "infer step | infer forward | postprocess | RoIs/image |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        tr = [med(w, "trainyard", t, "train", k) for k in
              ("median_ms", "forward_ms", "loss_ms", "backward_ms", "update_ms")]
        inf = [med(w, "trainyard", t, "infer", k) for k in
               ("median_ms", "forward_ms", "postprocess_ms")]
        print(f"| {t} | " + " | ".join(f"{v:.0f}" for v in tr) +
              f" | {med(w, 'trainyard', t, 'train', 'rois'):.0f} | " +
              " | ".join(f"{v:.0f}" for v in inf) +
              f" | {med(w, 'trainyard', t, 'infer', 'rois'):.0f} |")
    print()
    print("Bound (Trainyard's process, raw oneDNN NHWC at the net's shapes; FMA peaks):")
    print()
    print("| threads | conv bound ms (fwd / bwd data / bwd weights) | inference conv bound ms | "
          "train step ms | step GFLOP | Trainyard GFLOP/s | AVX2 FMA peak | AVX-512 FMA peak |")
    print("|---|---|---|---|---|---|---|---|")
    for t in threads:
        passes = [r["conv_bound_passes_ms"] for r in speed
                  if (r["workload"], side(r), r["threads"]) == (w, "trainyard", t)
                  and r["conv_bound_ms"] is not None]
        p = ([statistics.median(x[i] for x in passes) for i in range(3)] if passes
             else [float("nan")] * 3)
        print(f"| {t} | {med(w, 'trainyard', t, None, 'conv_bound_ms'):.0f} ({p[0]:.0f} / "
              f"{p[1]:.0f} / {p[2]:.0f}) | {med(w, 'trainyard', t, None, 'infer_conv_bound_ms'):.0f}"
              f" | {med(w, 'trainyard', t, 'train', 'median_ms'):.0f} | "
              f"{med(w, 'trainyard', t, None, 'step_gflop'):.1f} | "
              f"{med(w, 'trainyard', t, None, 'gflops'):.1f} | "
              f"{med(w, 'trainyard', t, None, 'fma_peak_gflops'):.0f} | "
              f"{med(w, 'trainyard', t, None, 'fma512_peak_gflops'):.0f} |")
    print()
    print("Per round, images/sec (Trainyard | torchvision " + " | ".join(formats) + "):")
    for kind in ("train", "infer"):
        for t in threads:
            each = lambda s: " / ".join(f"{v:.2f}" for v in values(w, s, t, kind,
                                                                    "images_per_sec"))
            print(f"- {kind}, {t} thread(s): {each('trainyard')} | " +
                  " | ".join(each("torchvision/" + f) for f in formats))
for r in rows:
    if r.get("mode") != "memory":
        continue
    print()
    print(f"Memory check ({r['workload']}, batch {r['batch_size']}, {r['threads']} threads, "
          f"{r['steps']} training steps in {r['seconds']:.0f} s): RSS "
          f"{r['rss_mb'][0][1]:.0f} MB at step {r['rss_mb'][0][0]}, growth "
          f"{r['growth_mb']:+.1f} MB from step {r['base_step']} to {r['steps']}, slope over the "
          f"second half {r['slope_mb_per_1000_steps']:+.2f} MB per 1,000 steps, peak RSS "
          f"{r['peak_rss_mb']:.0f} MB; loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}")
    print("RSS samples (step, MB): " + ", ".join(f"{s}: {m:.0f}" for s, m in r["rss_mb"]))
EOF
