#!/usr/bin/env bash
# Input pipeline, Trainyard against TensorFlow's tf.data, side by side on the same files.
#
#   tests/bench/peers/run_input_bench.sh [VENV] [BUILD_DIR] [DATA_DIR]
#
# VENV (default /work/venv-tf) is a Python venv with TensorFlow for CPU; create it with
#   python3 -m venv DIR && DIR/bin/pip install tensorflow-cpu
# BUILD_DIR (default build) holds bin/trainyard and bin/bench_input:
#   cmake --build build -j2 --target trainyard bench_input
# DATA_DIR (default /tmp/trainyard-input-bench) gets the synthetic data once (about 1.4 GB):
#   frame level: 2,000 training videos of exactly 300 frames, 1024 + 128 bytes a frame
#                (tf.SequenceExample, about 350 KB each), 4 shards;
#   video level: 100,000 training videos (tf.Example, mean_rgb[1024] + mean_audio[128]), 4 shards.
# Only the train-*.tfrecord shards are read. The page cache is warmed by reading them once, then
# for each workload and thread count the two sides run interleaved (trainyard 1 thread, tf 1
# thread, trainyard 2, tf 2), REPS (default 3) times, each one epoch without shuffling (batch 64
# frame level, 1024 video level). Prints every JSON line, then a markdown table of medians.
set -euo pipefail

VENV=${1:-/work/venv-tf}
BUILD=${2:-build}
DATA=${3:-/tmp/trainyard-input-bench}
REPS=${REPS:-3}
THREADS=${THREADS:-"1 2"}
HERE=$(cd "$(dirname "$0")" && pwd)
PY="$VENV/bin/python"

[[ -x "$PY" ]] || { echo "no python in $VENV; see the header of $0" >&2; exit 1; }
[[ -x "$BUILD/bin/bench_input" && -x "$BUILD/bin/trainyard" ]] ||
  { echo "build $BUILD/bin/bench_input and $BUILD/bin/trainyard first" >&2; exit 1; }

gen() {  # DIR ARGS...: generate once, marked complete by DIR/.done
  local dir=$1; shift
  if [[ ! -f "$dir/.done" ]]; then
    rm -rf "$dir"
    echo "generating $dir" >&2
    /usr/bin/time -f "  %e s" "$BUILD/bin/trainyard" data synth-yt8m --output_dir "$dir" "$@" >&2
    touch "$dir/.done"
  fi
}
gen "$DATA/frame" --frame_level --num_videos 2000 --min_frames 300 --max_frames 300 \
  --feature_sizes 1024,128 --num_shards 4
gen "$DATA/video" --num_videos 100000 --feature_sizes 1024,128 --num_shards 4
du -sh "$DATA/frame" "$DATA/video" >&2
cat "$DATA"/frame/train-*.tfrecord "$DATA"/video/train-*.tfrecord > /dev/null  # warm the cache
echo "uptime: $(uptime)" >&2

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
for workload in frame video; do
  pattern="$DATA/$workload/train-*.tfrecord"
  for rep in $(seq "$REPS"); do
    for t in $THREADS; do
      "$BUILD/bin/bench_input" --pattern "$pattern" --reader "$workload" --threads "$t" |
        tee -a "$RESULTS"
      "$PY" "$HERE/input_tfdata.py" --pattern "$pattern" --reader "$workload" --threads "$t" |
        tee -a "$RESULTS"
    done
  done
done

"$PY" - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
def med(fw, wl, t, key):
    return statistics.median(r[key] for r in rows
                             if r["framework"] == fw and r["workload"] == wl and r["threads"] == t)
print()
print("| workload | threads | Trainyard rec/s | Trainyard MB/s | Trainyard CPU s | "
      "tf.data rec/s | tf.data MB/s | tf.data CPU s | Trainyard / tf.data |")
print("|---|---|---|---|---|---|---|---|---|")
names = {"frame": "frame level (300 x (1024+128) B)", "video": "video level"}
for wl in ["frame", "video"]:
    for t in sorted({r["threads"] for r in rows if r["workload"] == wl}):
        ty = {k: med("trainyard", wl, t, k) for k in ("records_per_sec", "mb_per_sec", "cpu_seconds")}
        tf = {k: med("tensorflow", wl, t, k) for k in ("records_per_sec", "mb_per_sec", "cpu_seconds")}
        print(f"| {names[wl]} | {t} | {ty['records_per_sec']:.0f} | {ty['mb_per_sec']:.0f} | "
              f"{ty['cpu_seconds']:.2f} | {tf['records_per_sec']:.0f} | {tf['mb_per_sec']:.0f} | "
              f"{tf['cpu_seconds']:.2f} | {ty['records_per_sec'] / tf['records_per_sec']:.2f} |")
EOF
