#!/usr/bin/env bash
# Image classifiers' training steps, Trainyard against PyTorch, on the same networks, batches
# and threads (issue 13's target: at least 1.3x PyTorch's images/sec on lenet and resnet_20).
#
#   tests/bench/peers/run_image_training_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build; configured with Ninja, Release, if missing) gets bin/bench_image_train
# built (SKIP_BUILD=1 skips that; JOBS sets the build's parallelism, default nproc). The Python
# environment ($TRAINYARD_PEERS_VENV, default /work/venv-peers) is created by setup_venv.sh when
# it does not import torch. For each workload (MODELS, default "lenet resnet_20") and thread
# count (THREADS, default "1 2"), REPS (default 3) rounds, interleaved (round r runs every
# workload, thread count and side before round r + 1), each a fresh process with WARMUP (default
# 3) untimed and STEPS (default 10) timed steps, the threads set on both sides and each process
# pinned to the first N cores with taskset (PIN=0: no pinning). PyTorch runs in each memory
# format of TORCH_FORMATS (default "channels_last contiguous"); the ratio is taken against the
# faster one. Trainyard's process also measures the bound of its step after its timed steps
# (bench_image_train's header: raw oneDNN convolutions of the net's shapes, the fully
# connected products, the FMA peak at the widest vectors the CPU has).
#
# Output: one JSON line per run, then markdown tables of the medians over rounds:
# images/sec of each side, "Trainyard / PyTorch" (images/sec over images/sec: above 1,
# Trainyard is faster; the target is 1.3), the bound and Trainyard's fraction of it; the same
# ratio by CPU time (images per CPU-second), which a busy machine disturbs less. With
# TRACE=1, one more Trainyard step per workload and thread count is traced (Chrome traces
# under $DATA_DIR, default /tmp/trainyard-image-bench) and PyTorch's same step runs under
# torch.profiler (in the first of TORCH_FORMATS), each in TRACE_REPS (default
# 3) fresh processes; a table per workload and thread count gives the median time of each op
# group on both sides (PyTorch: self CPU time; its optimizer row is SGD.step's own time plus
# mul_, and its add row includes the optimizer's add_).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${1:-build}
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
DATA=${DATA_DIR:-/tmp/trainyard-image-bench}
MODELS=${MODELS:-"lenet resnet_20"}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}
PIN=${PIN:-1}
TORCH_FORMATS=${TORCH_FORMATS:-"channels_last contiguous"}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTRAINYARD_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >&2
  elif grep -q "^TRAINYARD_BUILD_TESTS:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
    cmake -B "$BUILD" -DTRAINYARD_BUILD_TESTS=ON >&2  # the benchmarks are built with the tests
  fi
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target bench_image_train >&2
fi
BENCH="$BUILD/bin/bench_image_train"
"$HERE/setup_venv.sh" "$VENV"
PY="$VENV/bin/python"
mkdir -p "$DATA"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; uptime: $(uptime)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "|", "; ".join(
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
  for model in $MODELS; do
    for t in $THREADS; do
      pinned "$t" "$BENCH" --model "$model" --threads "$t" --steps "$STEPS" --warmup "$WARMUP" |
        tee -a "$RESULTS"
      for format in $TORCH_FORMATS; do
        pinned "$t" "$PY" "$HERE/train_image_torch.py" --model "$model" --threads "$t" \
          --steps "$STEPS" --warmup "$WARMUP" --memory_format "$format" | tee -a "$RESULTS"
      done
    done
  done
done
echo "speed runs end: $(uptime)" >&2

PROFILES=$DATA/profiles.jsonl
if [[ "${TRACE:-0}" == 1 ]]; then
  : >"$PROFILES"
  for rep in $(seq "${TRACE_REPS:-3}"); do
    for model in $MODELS; do
      for t in $THREADS; do
        trace="$DATA/trainyard-$model-$t-$rep.json"
        pinned "$t" "$BENCH" --model "$model" --threads "$t" --steps 2 --warmup "$WARMUP" \
          --bound 0 --trace "$trace" >/dev/null 2>&1
        echo "{\"framework\": \"trainyard\", \"workload\": \"$model\", \"threads\": $t," \
          "\"trace\": \"$trace\"}" >>"$PROFILES"
        format=${TORCH_FORMATS%% *}
        pinned "$t" "$PY" "$HERE/train_image_torch.py" --model "$model" --threads "$t" \
          --steps 2 --warmup "$WARMUP" --memory_format "$format" \
          --profile "$DATA/pytorch-$model-$t-$format-$rep.json" 2>/dev/null >>"$PROFILES"
      done
    done
  done
fi

"$PY" - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "median_ms" in r]
if not rows:  # REPS=0: traces only
    sys.exit(0)
def side(r):
    return r["framework"] + ("/" + r["memory_format"] if "memory_format" in r else "")
def med(s, wl, t, key):
    values = [r[key] for r in rows if (side(r), r["workload"], r["threads"]) == (s, wl, t)]
    return statistics.median(values) if values else float("nan")
def each(s, wl, t, key):
    return " / ".join(f"{r[key]:.0f}" for r in rows
                      if (side(r), r["workload"], r["threads"]) == (s, wl, t))
print()
print("| workload | batch | threads | Trainyard img/s (p90 ms) | PyTorch img/s, channels_last | "
      "PyTorch img/s, contiguous | Trainyard / best PyTorch | bound ms (conv NHWC / any "
      "layout / fc) | step ms | fraction of bound | FMA peak GFLOP/s | Trainyard GFLOP/s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for wl in ("lenet", "resnet_20"):
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}):
        ty = med("trainyard", wl, t, "images_per_sec")
        peers = {f: med("pytorch/" + f, wl, t, "images_per_sec")
                 for f in ("channels_last", "contiguous")}
        best = max((v for v in peers.values() if v == v), default=float("nan"))
        batch = next(r["batch_size"] for r in rows if r["workload"] == wl)
        print(f"| {wl} | {batch} | {t} | {ty:.0f} ({med('trainyard', wl, t, 'p90_ms'):.0f}) | "
              f"{peers['channels_last']:.0f} | {peers['contiguous']:.0f} | {ty / best:.2f} | "
              f"{med('trainyard', wl, t, 'bound_ms'):.0f} "
              f"({med('trainyard', wl, t, 'conv_bound_ms'):.0f} / "
              f"{med('trainyard', wl, t, 'conv_bound_any_ms'):.0f} / "
              f"{med('trainyard', wl, t, 'gemm_bound_ms'):.1f}) | "
              f"{med('trainyard', wl, t, 'median_ms'):.0f} | "
              f"{med('trainyard', wl, t, 'fraction_of_bound'):.2f} | "
              f"{med('trainyard', wl, t, 'fma_peak_gflops'):.0f} | "
              f"{med('trainyard', wl, t, 'gflops'):.1f} |")
print()
print("Images per CPU-second (median over rounds of batch / the step's median CPU time, all "
      "threads; robust to time lost to other processes, not to their cache traffic):")
print()
print("| workload | threads | Trainyard | PyTorch, channels_last | PyTorch, contiguous | "
      "Trainyard / best PyTorch |")
print("|---|---|---|---|---|---|")
for wl in ("lenet", "resnet_20"):
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}):
        batch = next(r["batch_size"] for r in rows if r["workload"] == wl)
        per = {s: batch / med(s, wl, t, "cpu_ms") * 1e3
               for s in ("trainyard", "pytorch/channels_last", "pytorch/contiguous")}
        best = max((per[s] for s in per if s != "trainyard" and per[s] == per[s]),
                   default=float("nan"))
        print(f"| {wl} | {t} | {per['trainyard']:.0f} | {per['pytorch/channels_last']:.0f} | "
              f"{per['pytorch/contiguous']:.0f} | {per['trainyard'] / best:.2f} |")
print()
print("Per round, images/sec (Trainyard | PyTorch channels_last | contiguous):")
for wl in ("lenet", "resnet_20"):
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}):
        print(f"- {wl}, {t} thread(s): {each('trainyard', wl, t, 'images_per_sec')} | "
              f"{each('pytorch/channels_last', wl, t, 'images_per_sec')} | "
              f"{each('pytorch/contiguous', wl, t, 'images_per_sec')}")
EOF

if [[ "${TRACE:-0}" == 1 ]]; then
  "$PY" - "$PROFILES" <<'EOF'
import collections, json, statistics, sys
# Op groups of both sides: Trainyard's traced ops, PyTorch's profiler keys (self CPU time).
GROUPS = [
    ("conv forward", {"conv2d"},
     {"aten::mkldnn_convolution", "aten::_slow_conv2d_forward", "aten::thnn_conv2d"}),
    ("conv backward (data + filter)", {"conv2d_backward_input", "conv2d_backward_filter"},
     {"aten::convolution_backward", "aten::_slow_conv2d_backward",
      "aten::mkldnn_convolution_backward"}),
    ("fully connected (matmul)", {"matmul", "matmul_bias_act"}, {"aten::mm", "aten::addmm"}),
    ("batch norm forward", {"batch_norm_training"}, {"aten::native_batch_norm"}),
    ("batch norm backward", {"batch_norm_grad"}, {"aten::native_batch_norm_backward"}),
    ("relu forward", {"relu"}, {"aten::clamp_min", "aten::relu", "aten::relu_"}),
    ("relu backward", {"relu_grad"}, {"aten::threshold_backward"}),
    ("max pool forward", {"max_pool2d"}, {"aten::max_pool2d_with_indices"}),
    ("max pool backward", {"max_pool2d_grad"}, {"aten::max_pool2d_with_indices_backward"}),
    ("add (bias, residual, gradient sums)", {"add"}, {"aten::add", "aten::add_"}),
    ("optimizer update", {"apply_momentum"}, {"Optimizer.step#SGD.step", "aten::mul_"}),
    ("fill / zero", {"fill"}, {"aten::fill_", "aten::zero_", "aten::zeros"}),
    ("pad / slice (conv2d_same)", {"pad", "slice"}, {"aten::constant_pad_nd"}),
]
runs = collections.defaultdict(list)  # (framework, workload, threads) -> [(step_ms, {op: ms})]
for r in map(json.loads, open(sys.argv[1])):
    key = (r["framework"], r["workload"], r["threads"])
    if r["framework"] == "trainyard":
        ops = collections.Counter()
        step = 0.0
        for e in json.load(open(r["trace"]))["traceEvents"]:
            if e.get("cat") == "op":
                ops[e["name"]] += e["dur"] / 1e3
            elif e.get("name") in ("forward", "backward", "apply_gradients"):
                step += e["dur"] / 1e3
        runs[key].append((step, ops))
    elif "profile_self_ms" in r:
        runs[key].append((r["profile_step_ms"], r["profile_self_ms"]))
for wl in ("lenet", "resnet_20"):
    for t in sorted({k[2] for k in runs if k[1] == wl}):
        ty, pt = runs.get(("trainyard", wl, t), []), runs.get(("pytorch", wl, t), [])
        if not ty or not pt:
            continue
        def total(side, names):
            return statistics.median(sum(ops.get(n, 0.0) for n in names) for _, ops in side)
        ty_step = statistics.median(s for s, _ in ty)
        pt_step = statistics.median(s for s, _ in pt)
        print()
        print(f"Where a {wl} step goes, {t} thread(s): median over {len(ty)} traced Trainyard "
              f"steps ({ty_step:.0f} ms) and {len(pt)} profiled PyTorch steps ({pt_step:.0f} ms, "
              f"self CPU time)")
        print()
        print("| op group | Trainyard ms | share | PyTorch ms | share |")
        print("|---|---|---|---|---|")
        ty_seen, pt_seen = set(), set()
        for name, ty_ops, pt_ops in GROUPS:
            a, b = total(ty, ty_ops), total(pt, pt_ops)
            ty_seen |= ty_ops
            pt_seen |= pt_ops
            if a < 0.05 and b < 0.05:
                continue
            print(f"| {name} | {a:.1f} | {a / ty_step:.0%} | {b:.1f} | {b / pt_step:.0%} |")
        a = statistics.median(sum(v for n, v in ops.items() if n not in ty_seen) for _, ops in ty)
        b = statistics.median(sum(v for n, v in ops.items() if n not in pt_seen) for _, ops in pt)
        print(f"| everything else (other ops; PyTorch's framework overhead) | {a:.1f} | "
              f"{a / ty_step:.0%} | {b:.1f} | {b / pt_step:.0%} |")
EOF
fi
