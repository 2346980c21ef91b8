#!/bin/sh
# Inference latency of an exported ResNet-50 (TF-Slim's resnet_v1_50, 224x224, 1000 classes)
# through libtrainyard_infer (bench_infer_latency) beside ONNX Runtime (the interop venv's
# onnxruntime) running Trainyard's ONNX export of the same checkpoint, at 1 and 2 threads
# (OMP_NUM_THREADS for Trainyard's CPU backend; intra_op_num_threads with one inter-op thread and
# sequential execution for ONNX Runtime), batches of 1 and 32. The model is trained one step on
# a few generated images so that the export has a checkpoint; latency does not depend on the
# weights. Prints one line per side, threads and batch, then the ratios (Trainyard / ONNX
# Runtime: below 1 is faster), and the library's figures with the cpu backend's prepack_filters
# off (the filters reordered on every call, as before the library turned it on).
#
# usage: run_infer_latency.sh BUILD_DIR WORKDIR [REPEATS]
set -eu
build=$1 work=$2 repeats=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
python=$(bash "$here/../interop/tf_env.sh" python)
host=$build/bin/trainyard
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; [ -f "$work/log" ] && tail -n 20 "$work/log"; exit 1; }

"$build/bin/make_image_dir" "$work/images" 2 2 224
"$host" data convert-images --image_dir "$work/images" --output "$work/data/img" \
  --validation_fraction 0.5 --num_shards 1 >"$work/log" 2>&1 || fail "convert-images"
cat >"$work/resnet.config" <<CONFIG
task: "classification"
num_classes: 1000
model { class: "resnet_v1_50" }
train_config {
  train_dir: "$work/train"
  batch_size: 1
  optimizer { class: "GradientDescentOptimizer" }
  learning_rate { constant { learning_rate: 0.0001 } }
  save_interval_secs: 0
}
train_input_reader {
  data_pattern: "$work/data/img_train_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing { default_image_size: 224 } }
}
eval_input_reader {
  data_pattern: "$work/data/img_validation_*"
  num_readers: 1
  preprocessing_step { image_classification_preprocessing { default_image_size: 224 } }
}
CONFIG
OMP_NUM_THREADS=2 "$host" train --pipeline_config_path="$work/resnet.config" --max_steps=1 \
  >"$work/log" 2>&1 || fail "train resnet_v1_50"
"$host" export --train_dir="$work/train" --export_dir="$work/export" >"$work/log" 2>&1 ||
  fail "export"
cp -r "$work/export" "$work/export_unpacked"
sed -i 's/^backend {$/backend {\n  params { key: "prepack_filters" bool_value: false }/' \
  "$work/export_unpacked/pipeline.config"
grep -q prepack_filters "$work/export_unpacked/pipeline.config" || fail "no backend section"
"$host" export --train_dir="$work/train" --format onnx --output "$work/resnet.onnx" \
  >"$work/log" 2>&1 || fail "export --format onnx"

cat >"$work/ort_latency.py" <<'PYTHON'
import sys, time
import numpy as np
import onnxruntime as ort
model, batch, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
feeds = {}
for i in session.get_inputs():
    shape = [batch if not isinstance(d, int) else d for d in i.shape]
    feeds[i.name] = np.sin(0.001 * np.arange(np.prod(shape))).reshape(shape).astype(np.float32)
session.run(None, feeds)  # warm-up
times = []
for _ in range(repeats):
    start = time.perf_counter()
    session.run(None, feeds)
    times.append((time.perf_counter() - start) * 1000.0)
times.sort()
print("onnxruntime-%s batch=%d threads=%d median_ms=%.2f min_ms=%.2f runs=%d"
      % (ort.__version__, batch, threads, times[len(times) // 2], times[0], repeats))
PYTHON

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for threads in 1 2; do
  for batch in 1 32; do
    n=$repeats
    [ "$batch" -gt 1 ] && n=$(( (repeats + 1) / 2 ))
    ours=$(OMP_NUM_THREADS=$threads "$build/bin/bench_infer_latency" "$work/export" \
      --batch "$batch" --repeats "$n") || fail "bench_infer_latency"
    theirs=$(OMP_NUM_THREADS=$threads "$python" "$work/ort_latency.py" "$work/resnet.onnx" \
      "$batch" "$threads" "$n") || fail "onnxruntime"
    echo "$ours"
    echo "$theirs"
    a=$(echo "$ours" | sed 's/.*median_ms=\([0-9.]*\).*/\1/')
    b=$(echo "$theirs" | sed 's/.*median_ms=\([0-9.]*\).*/\1/')
    echo "ratio threads=$threads batch=$batch trainyard/onnxruntime=$(awk "BEGIN {printf \"%.2f\", $a / $b}")"
    # The same export with the cpu backend's prepack_filters off (the library turns it on unless
    # the pipeline says): every convolution reorders its filter on every call.
    unpacked=$(OMP_NUM_THREADS=$threads "$build/bin/bench_infer_latency" "$work/export_unpacked" \
      --batch "$batch" --repeats "$n") || fail "bench_infer_latency (unpacked)"
    echo "$unpacked (prepack_filters false)"
    c=$(echo "$unpacked" | sed 's/.*median_ms=\([0-9.]*\).*/\1/')
    echo "ratio threads=$threads batch=$batch unpacked/onnxruntime=$(awk "BEGIN {printf \"%.2f\", $c / $b}")"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
