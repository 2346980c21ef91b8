#!/usr/bin/env bash
# The cpu backend's bf16 precision policy against f32 (issue 18's target: bf16 at least 1.6x f32
# per training step), in one run on one machine:
#
#   tests/bench/run_bf16_bench.sh [BUILD_DIR]
#
# BUILD_DIR (default build) must hold bin/bench_bf16, bin/bench_train, bin/bench_frame_train and
# bin/bench_image_train. First bench_bf16 (the machine's f32 FMA and bf16 dot-product peaks; the
# YouTube-8M products and ResNet-20's convolutions op by op, f32 against bf16, beside raw
# oneDNN), then the training steps of LogisticModel and MoeModel (bench_train), DbofModel
# (bench_frame_train) and resnet_20 (bench_image_train) at --precision f32 and bf16, REPS
# (default 3) rounds interleaved (round r runs every workload at both precisions before round
# r + 1), THREADS (default 2) threads, each a fresh process with the benchmark's own warmup and
# timed steps (STEPS, default 10). MODELS (default "LogisticModel MoeModel DbofModel resnet_20")
# picks the workloads. Where the Python environment $TRAINYARD_PEERS_VENV (default
# /work/venv-peers) imports torch, LogisticModel and MoeModel also run PyTorch's eager step on
# the same weights and batches (peers/train_torch.py, inputs written by bench_train
# --write_inputs), f32 and under torch.autocast(bfloat16), in the same rounds. Output: each run's JSON line, then a table of the median ms per step
# over rounds and f32 / bf16, by wall time and by CPU time (all threads; at one thread it does
# not count the time other processes hold the core, so a busy machine disturbs it less).
set -euo pipefail

BUILD=${1:-build}
BIN=$BUILD/bin
THREADS=${THREADS:-2}
REPS=${REPS:-3}
STEPS=${STEPS:-10}
MODELS=${MODELS:-"LogisticModel MoeModel DbofModel resnet_20"}
OUT=$(mktemp -d /tmp/trainyard-bf16-bench.XXXXXX)

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "avx512_bf16: $(grep -qw avx512_bf16 /proc/cpuinfo && echo yes || echo no)," \
     "amx_bf16: $(grep -qw amx_bf16 /proc/cpuinfo && echo yes || echo no), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/bench_bf16" --threads "$THREADS"

run_one() {  # model precision -> one JSON line
  local model=$1 precision=$2
  case $model in
    LogisticModel | MoeModel)
      "$BIN/bench_train" --model "$model" --threads "$THREADS" --precision "$precision" \
        --steps "$STEPS" ;;
    DbofModel)
      "$BIN/bench_frame_train" --model "$model" --threads "$THREADS" --precision "$precision" \
        --steps "$STEPS" ;;
    resnet_20)
      "$BIN/bench_image_train" --model "$model" --threads "$THREADS" --precision "$precision" \
        --steps "$STEPS" --bound 0 ;;
  esac
}

# PyTorch's eager step of the same model, weights and batches (tests/bench/peers/train_torch.py),
# f32 and under torch.autocast bf16, for LogisticModel and MoeModel when $VENV imports torch.
VENV=${TRAINYARD_PEERS_VENV:-/work/venv-peers}
PEERS=$(cd "$(dirname "$0")" && pwd)/peers
TORCH=0
if "$VENV/bin/python3" -c "import torch" 2>/dev/null; then TORCH=1; fi
run_torch() {  # model precision -> one JSON line
  local autocast=none
  [ "$2" = bf16 ] && autocast=bf16
  (cd "$PEERS" && "$VENV/bin/python3" train_torch.py --inputs "$OUT/inputs/$1" --model "$1" \
    --threads "$THREADS" --steps "$STEPS" --warmup 3 --autocast "$autocast")
}

for round in $(seq "$REPS"); do
  for model in $MODELS; do
    torch_model=0
    if [ "$TORCH" = 1 ] && { [ "$model" = LogisticModel ] || [ "$model" = MoeModel ]; }; then
      torch_model=1
      [ -d "$OUT/inputs/$model" ] || "$BIN/bench_train" --model "$model" \
        --write_inputs "$OUT/inputs/$model" > /dev/null
    fi
    for precision in f32 bf16; do
      line=$(run_one "$model" "$precision" 2>/dev/null | grep '^{' | tail -1)
      echo "round $round $model $precision $line"
      echo "$line" | sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p' >> "$OUT/$model.$precision"
      echo "$line" | sed -n 's/.*"cpu_ms": \([0-9.]*\).*/\1/p' >> "$OUT/$model.$precision.cpu"
      if [ "$torch_model" = 1 ]; then
        line=$(run_torch "$model" "$precision" 2>/dev/null | grep '^{' | tail -1)
        echo "round $round $model pytorch $precision $line"
        echo "$line" | sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p' >> "$OUT/$model.torch.$precision"
      fi
    done
  done
done

echo
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| workload | threads | f32 ms/step | bf16 ms/step | f32 / bf16 | f32 / bf16 by CPU time |"
echo "|---|---|---|---|---|---|"
for model in $MODELS; do
  f32=$(median "$OUT/$model.f32")
  bf16=$(median "$OUT/$model.bf16")
  f32_cpu=$(median "$OUT/$model.f32.cpu")
  bf16_cpu=$(median "$OUT/$model.bf16.cpu")
  echo "| $model | $THREADS | $f32 | $bf16 | $(awk -v a="$f32" -v b="$bf16" 'BEGIN {printf "%.2f", a / b}') |" \
       "$(awk -v a="$f32_cpu" -v b="$bf16_cpu" 'BEGIN {printf "%.2f", a / b}') |"
done
if [ "$TORCH" = 1 ]; then
  echo
  echo "| workload | threads | PyTorch f32 ms/step | PyTorch autocast bf16 ms/step | PyTorch f32 / bf16 |" \
       "Trainyard bf16 speed / PyTorch autocast bf16 |"
  echo "|---|---|---|---|---|---|"
  for model in $MODELS; do
    [ -s "$OUT/$model.torch.f32" ] || continue
    tf32=$(median "$OUT/$model.torch.f32")
    tbf16=$(median "$OUT/$model.torch.bf16")
    bf16=$(median "$OUT/$model.bf16")
    echo "| $model | $THREADS | $tf32 | $tbf16 | $(awk -v a="$tf32" -v b="$tbf16" 'BEGIN {printf "%.2f", a / b}') |" \
         "$(awk -v a="$tbf16" -v b="$bf16" 'BEGIN {printf "%.2f", a / b}') |"
  done
fi
rm -rf "$OUT"
