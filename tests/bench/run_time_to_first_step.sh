#!/bin/sh
# Time to first step of every configs/*.config, through `trainyard train` as a user runs it, at
# the config's own batch and the machine's default thread count: seconds from the host's start
# to its first step's log line ("training step 1 |", or TF-Slim's "global step 1:"), and the
# steady step (the median time between the log lines of steps 2 to 5) beside it. Synthetic data
# in the configs' layouts: YouTube-8M video and frame level from `trainyard data synth-yt8m`
# with the config's num_classes (frames 30-120; the configs' patterns are replaced with
# --train_data_pattern, and the 2017 configs' id_key "video_id" with synth-yt8m's "id" in a copy),
# synth-shapes for the detection configs, and random 28x28 images through `trainyard data
# convert-mnist` for Fashion-MNIST (written to the paths the configs name: /tmp/synth_shapes,
# /tmp/fashion_mnist). Prints one line per config:
#   CONFIG first_step_s STEADY_STEP_s
# A run that takes longer than TIMEOUT seconds (default 300) prints "timeout".
#
# usage: run_time_to_first_step.sh TRAINYARD WORKDIR [CONFIG...]   (default: configs/*.config)
set -eu
host=$1 work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
configs=${*:-$(ls "$here"/../../configs/*.config)}
mkdir -p "$work"
# YouTube-8M data of LEVEL (video or frame) and CLASSES classes, made on first use.
yt8m_data() {
  dir="$work/$1-$2"
  if [ ! -d "$dir" ]; then
    if [ "$1" = frame ]; then
      "$host" data synth-yt8m --output_dir "$dir" --frame_level --num_videos 2048 \
        --num_classes "$2" >/dev/null
    else
      "$host" data synth-yt8m --output_dir "$dir" --num_videos 4096 --num_classes "$2" >/dev/null
    fi
  fi
  echo "$dir/train-*.tfrecord"
}
[ -d /tmp/synth_shapes ] || "$host" data synth-shapes --output_dir /tmp/synth_shapes >/dev/null
if [ ! -f /tmp/fashion_mnist/train.tfrecord ]; then
  python3 - "$work/mnist" <<'PY'
import os, random, struct, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True); r = random.Random(0)
for name, n in (("train", 2048), ("t10k", 512)):
    with open(f"{d}/{name}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28)); f.write(bytes(r.randrange(256) for _ in range(n * 784)))
    with open(f"{d}/{name}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 2049, n)); f.write(bytes(r.randrange(10) for _ in range(n)))
PY
  mkdir -p /tmp/fashion_mnist
  "$host" data convert-mnist --images "$work/mnist/train-images-idx3-ubyte" \
    --labels "$work/mnist/train-labels-idx1-ubyte" --output /tmp/fashion_mnist/train.tfrecord >/dev/null
  "$host" data convert-mnist --images "$work/mnist/t10k-images-idx3-ubyte" \
    --labels "$work/mnist/t10k-labels-idx1-ubyte" --output /tmp/fashion_mnist/test.tfrecord >/dev/null
fi

for config in $configs; do
  name=$(basename "$config" .config)
  grep -q "^model {" "$config" || continue  # smoke.config: no model to train
  if grep -q 'string_value: "video_id"' "$config"; then
    # The 2017 data's ids are "video_id"; synth-yt8m writes "id" (the id is not read for
    # training, only checked).
    sed 's/string_value: "video_id"/string_value: "id"/' "$config" >"$work/$name.config"
    config="$work/$name.config"
  fi
  set -- --pipeline_config_path="$config" --train_dir="$work/run" --start_new_model \
    --max_steps=5 --log_every_n_steps=1
  classes=$(sed -n 's/^num_classes: \([0-9]*\).*/\1/p' "$config")
  if grep -q "YT8MFrameFeatureReader" "$config"; then
    set -- "$@" --train_data_pattern="$(yt8m_data frame "$classes")"
  elif grep -q "YT8MAggregatedFeatureReader" "$config"; then
    set -- "$@" --train_data_pattern="$(yt8m_data video "$classes")"
  fi
  rm -rf "$work/run"
  python3 - "${TIMEOUT:-300}" "$name" "$host" train "$@" <<'PY'
import re, subprocess, sys, time
timeout, name, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
start = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
at, log = {}, []
for line in p.stdout:
    log.append(line)
    m = re.search(r"training step (\d+) \||global step (\d+):", line)  # YT-8M's, TF-Slim's
    if m: at.setdefault(int(m.group(1) or m.group(2)), time.monotonic() - start)
    if time.monotonic() - start > timeout: p.kill(); break
p.wait()
if 1 not in at:
    print(f"{name} {'timeout' if p.returncode == -9 else 'failed'}"); sys.stderr.write("".join(log[-20:]))
else:
    gaps = sorted(at[k + 1] - at[k] for k in range(2, 5) if k in at and k + 1 in at)
    steady = gaps[len(gaps) // 2] if gaps else float("nan")
    print(f"{name} {at[1]:.2f} {steady:.2f}")
PY
done
