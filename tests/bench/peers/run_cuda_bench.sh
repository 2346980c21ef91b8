#!/usr/bin/env bash
# Trainyard's cuda backend on one GPU: its ops against raw cuBLAS / cuDNN, then its training
# steps against PyTorch's on the same GPU, networks and batches.
#
#   tests/bench/peers/run_cuda_bench.sh BUILD_OR_KIT_DIR OUTDIR
#
# BUILD_OR_KIT_DIR holds bin/bench_cuda_ops, bin/bench_image_train and bin/bench_train: a build
# tree, or a kit with the same layout (bin/, lib/libtrainyard_core.so, lib/trainyard/plugins/,
# where the benches find their plugins by themselves; LD_LIBRARY_PATH must reach the CUDA
# libraries). Nothing is built. $PYTHON (default python3) must import torch with CUDA. GPU 0.
#
# 1. bench_cuda_ops: matmul and conv2d against cublasSgemm and cuDNN, the cost of one op;
#    its JSON lines go to OUTDIR/ops.jsonl, its table to OUTDIR/ops.txt and stdout.
# 2. Image classifiers (IMAGE_RUNS, default "lenet:64 lenet:128 resnet_20:64 resnet_20:128
#    resnet_20:512", model:batch): bench_image_train --backend cuda, then train_image_torch.py
#    --device cuda --memory_format channels_last (NHWC, as Trainyard) with TORCH_IMAGE_FLAGS
#    (default "--tf32 0 --cudnn_benchmark 1": f32 math as Trainyard's, cuDNN's autotuner on,
#    PyTorch at its fastest for fixed shapes), each WARMUP (default 5) untimed and STEPS (default
#    30) timed steps, each step timed to the end of its GPU work -> OUTDIR/image_train.jsonl.
# 3. YouTube-8M video level, LogisticModel (batch 1024, 1152 features, 3862 classes, Adam,
#    clipping; run_training_bench.sh's workload): bench_train --write_inputs on the CPU into
#    DATA_DIR (default a temporary directory, removed at the end), then bench_train --backend
#    cuda and train_torch.py --device cuda from those same weights and batches, same steps ->
#    OUTDIR/train.jsonl. Both start from the same state, so their last_loss should agree.
# Then a table: images (examples) per second of each side and Trainyard / PyTorch (above 1,
# Trainyard is faster). Each run has RUN_TIMEOUT seconds (default 120; bench_cuda_ops 240); a
# run that fails is recorded in OUTDIR/failures.jsonl (its stderr in OUTDIR/logs/) and the
# others go on. Exit status: 1 when a run failed, else 0.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_OR_KIT_DIR OUTDIR" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd)/bin
mkdir -p "$2/logs"
OUT=$(cd "$2" && pwd)
PY=${PYTHON:-python3}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
IMAGE_RUNS=${IMAGE_RUNS:-"lenet:64 lenet:128 resnet_20:64 resnet_20:128 resnet_20:512"}
TORCH_IMAGE_FLAGS=${TORCH_IMAGE_FLAGS:-"--tf32 0 --cudnn_benchmark 1"}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
DATA=${DATA_DIR:-}
if [[ -z "$DATA" ]]; then
  DATA=$(mktemp -d /tmp/trainyard-cuda-bench.XXXXXX)
  trap 'rm -rf "$DATA"' EXIT
fi
: >"$OUT/ops.jsonl"
: >"$OUT/image_train.jsonl"
: >"$OUT/train.jsonl"
: >"$OUT/failures.jsonl"
status=0
T0=$SECONDS

# NAME JSONL TIMEOUT COMMAND...: runs COMMAND; its JSON lines are appended to JSONL, its stdout
# kept in logs/NAME.out and its stderr in logs/NAME.log.
run() {
  local name=$1 jsonl=$2 limit=$3
  shift 3
  local start=$SECONDS rc=0
  echo "== [$((SECONDS - T0)) s] $name: $*" >&2
  timeout "$limit" "$@" >"$OUT/logs/$name.out" 2>"$OUT/logs/$name.log" || rc=$?
  grep '^{' "$OUT/logs/$name.out" >>"$jsonl"
  if ((rc != 0)); then
    status=1
    echo "   FAILED (exit $rc$( ((rc == 124)) && echo ', timed out')) after" \
      "$((SECONDS - start)) s; the end of logs/$name.log:" >&2
    tail -n 8 "$OUT/logs/$name.log" | sed 's/^/   | /' >&2
    printf '{"run": "%s", "exit": %d, "seconds": %d, "log": "logs/%s.log"}\n' "$name" "$rc" \
      "$((SECONDS - start))" "$name" >>"$OUT/failures.jsonl"
  else
    echo "   done in $((SECONDS - start)) s" >&2
  fi
  return 0
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "host: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'), $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
  timeout 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cudnn", torch.backends.cudnn.version(), "|", torch.cuda.get_device_name(0)
    if torch.cuda.is_available() else "no CUDA device for torch")' 2>&1 | tail -n 1
} | tee "$OUT/env.txt" >&2

# 1. Ops against the raw libraries.
run ops "$OUT/ops.jsonl" "$((RUN_TIMEOUT * 2))" "$BIN/bench_cuda_ops"
grep -v '^{' "$OUT/logs/ops.out" >"$OUT/ops.txt"

# 2. Image classifiers.
for spec in $IMAGE_RUNS; do
  model=${spec%%:*}
  batch=${spec##*:}
  run "trainyard-$model-$batch" "$OUT/image_train.jsonl" "$RUN_TIMEOUT" \
    "$BIN/bench_image_train" --backend cuda --model "$model" --batch_size "$batch" \
    --steps "$STEPS" --warmup "$WARMUP" --bound 0
  # shellcheck disable=SC2086  # TORCH_IMAGE_FLAGS is a list of flags
  run "pytorch-$model-$batch" "$OUT/image_train.jsonl" "$RUN_TIMEOUT" \
    "$PY" "$HERE/train_image_torch.py" --device cuda --model "$model" --batch_size "$batch" \
    --steps "$STEPS" --warmup "$WARMUP" --memory_format channels_last $TORCH_IMAGE_FLAGS
done

# 3. YouTube-8M LogisticModel, both sides from the same inputs.
run write-inputs "$OUT/train.jsonl" "$RUN_TIMEOUT" \
  "$BIN/bench_train" --model LogisticModel --write_inputs "$DATA/LogisticModel"
run trainyard-LogisticModel "$OUT/train.jsonl" "$RUN_TIMEOUT" \
  "$BIN/bench_train" --backend cuda --model LogisticModel --inputs "$DATA/LogisticModel" \
  --steps "$STEPS" --warmup "$WARMUP"
run pytorch-LogisticModel "$OUT/train.jsonl" "$RUN_TIMEOUT" \
  "$PY" "$HERE/train_torch.py" --device cuda --model LogisticModel \
  --inputs "$DATA/LogisticModel" --steps "$STEPS" --warmup "$WARMUP"
echo "== [$((SECONDS - T0)) s] all runs done" >&2

echo
cat "$OUT/ops.txt"
"$PY" - "$OUT" <<'EOF'
import json, os, sys

out = sys.argv[1]


def rows(name):
    path = os.path.join(out, name)
    return [json.loads(line) for line in open(path) if line.strip()] if os.path.exists(path) else []


def fmt(v, digits=0):
    return "-" if v is None else f"{v:.{digits}f}"


print()
print("Training steps on the GPU, Trainyard (--backend cuda) against PyTorch (--device cuda; "
      "median over the timed steps, each to the end of its GPU work):")
print()
print("| workload | batch | Trainyard img/s (median ms) | PyTorch img/s (median ms) | "
      "Trainyard / PyTorch |")
print("|---|---|---|---|---|")
image = rows("image_train.jsonl")
seen = []
for r in image:
    key = (r["workload"], r["batch_size"])
    if key not in seen:
        seen.append(key)
for workload, batch in seen:
    side = {r["framework"]: r for r in image if (r["workload"], r["batch_size"]) == (workload, batch)}
    ty, pt = side.get("trainyard"), side.get("pytorch")
    ratio = ty["images_per_sec"] / pt["images_per_sec"] if ty and pt else None
    print(f"| {workload} | {batch} | "
          f"{fmt(ty and ty['images_per_sec'])} ({fmt(ty and ty['median_ms'], 2)}) | "
          f"{fmt(pt and pt['images_per_sec'])} ({fmt(pt and pt['median_ms'], 2)}) | "
          f"{fmt(ratio, 2)} |")
train = [r for r in rows("train.jsonl") if "median_ms" in r]
side = {r["framework"]: r for r in train}
ty, pt = side.get("trainyard"), side.get("pytorch")
if ty or pt:
    ratio = ty["examples_per_sec"] / pt["examples_per_sec"] if ty and pt else None
    batch = (ty or pt)["batch_size"]
    print()
    print("| workload | batch | Trainyard ex/s (median ms) | PyTorch ex/s (median ms) | "
          "Trainyard / PyTorch | last loss (Ty / PT) |")
    print("|---|---|---|---|---|---|")
    print(f"| LogisticModel | {batch} | "
          f"{fmt(ty and ty['examples_per_sec'])} ({fmt(ty and ty['median_ms'], 2)}) | "
          f"{fmt(pt and pt['examples_per_sec'])} ({fmt(pt and pt['median_ms'], 2)}) | "
          f"{fmt(ratio, 2)} | {fmt(ty and ty['last_loss'], 5)} / "
          f"{fmt(pt and pt['last_loss'], 5)} |")
failures = rows("failures.jsonl")
if failures:
    print()
    print("Failed runs (stderr in OUTDIR/logs/):", ", ".join(
        f"{f['run']} (exit {f['exit']})" for f in failures))
EOF
exit $status
