#!/bin/sh
# What ctest -j2 does to the long recipes on a 2-core machine: PROCS training processes of one
# recipe started together, each with THREADS compute threads (OMP_NUM_THREADS), for STEPS steps
# of train_and_evaluate on 800 synth-shapes images (16 held out, so the final evaluation is
# short). Prints one line per process with its wall time from start to exit, start-up and the
# final evaluation included. CI's long recipes run with one thread each
# (tests/integration/CMakeLists.txt); compare `... 2 150 2` against `... 1 150 2` on an idle
# machine.
#
# usage: run_side_by_side_recipe_bench.sh TRAINYARD WORKDIR THREADS STEPS PROCS [RECIPE]
#        (RECIPE: a file in configs/, default ssdlite_mobilenet_v2_synth_shapes.config)
set -eu
host=$1 work=$2 threads=$3 steps=$4 procs=$5
recipe=${6:-ssdlite_mobilenet_v2_synth_shapes.config}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
if [ ! -d "$work/data" ]; then
  "$host" data synth-shapes --output_dir "$work/data" --num_images 800 --num_val_images 16 \
    >/dev/null
fi
sed -e "s|/tmp/synth_shapes/|$work/data/|" "$here/../../configs/$recipe" >"$work/pipeline.config"
i=1
while [ "$i" -le "$procs" ]; do
  rm -rf "$work/model$i"
  (
    start=$(date +%s.%N)
    status=ok
    OMP_NUM_THREADS=$threads "$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" \
      --model_dir="$work/model$i" --num_train_steps="$steps" >"$work/log$i" 2>&1 || status=FAILED
    end=$(date +%s.%N)
    echo "$recipe threads=$threads process=$i/$procs steps=$steps wall_s=$(awk "BEGIN { printf \"%.1f\", $end - $start }") $status"
  ) &
  i=$((i + 1))
done
wait
