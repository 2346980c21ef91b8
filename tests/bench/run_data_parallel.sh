#!/usr/bin/env bash
# Distributed benchmarks of issue 16 (BENCHMARKS.md, "Distributed: all-reduce and data-parallel
# efficiency"): bench_allreduce's two modes (OpenMPI's MPI_Allreduce, then MpiCollective against
# it), then `trainyard train` on MoeModel at one process and under `mpirun -np 2` for each
# gradient bucket size, in interleaved rounds.
#
#   tests/bench/run_data_parallel.sh BUILD_DIR [OUT_DIR]
#
# Environment: ROUNDS (3), STEPS (25), BATCH (256 a rank), LOG_EVERY (5), BUCKETS ("1 5 25 100"),
# VIDEOS (8192), ALLREDUCE (1: run bench_allreduce; 0: skip), TRAIN (1: run the training part).
# A run's rate is the median of its logged Examples/sec windows after the first (the chief logs
# the global rate: examples of every replica since the last log line over the wall time).
set -euo pipefail

build=${1:?usage: run_data_parallel.sh BUILD_DIR [OUT_DIR]}
out=${2:-/tmp/trainyard_data_parallel}
rounds=${ROUNDS:-3}
steps=${STEPS:-25}
batch=${BATCH:-256}
log_every=${LOG_EVERY:-5}
bucket_list=${BUCKETS:-"1 5 25 100"}
videos=${VIDEOS:-8192}
host=$build/bin/trainyard
mkdir -p "$out"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), nproc $(nproc), $(date -u '+%F %T UTC')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Root may run mpirun here; one compute thread a process (set after nproc, which obeys it).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=${MPIRUN:-mpirun}

if [[ ${ALLREDUCE:-1} == 1 ]]; then
  $mpirun -np 2 "$build/bin/bench_allreduce" --mode raw --write "$out/raw.rows"
  $mpirun -np 2 "$build/bin/bench_allreduce" --mode collective --compare "$out/raw.rows"
fi

[[ ${TRAIN:-1} == 1 ]] || exit 0

data=$out/data
if [[ ! -f $data/train-0000.tfrecord ]]; then
  "$host" data synth-yt8m --output_dir "$data" --num_videos "$videos" --num_classes 3862
fi

# One training run; prints its rate (examples/s).
train() {
  local name=$1
  shift
  local dir=$out/train_$name
  "$@" "$host" train --train_data_pattern "$data/train-*.tfrecord" --train_dir "$dir" \
    --start_new_model --model MoeModel --feature_names mean_rgb,mean_audio \
    --feature_sizes 1024,128 --batch_size "$batch" --num_readers 1 --num_epochs 0 \
    --max_steps "$steps" --log_every_n_steps "$log_every" "${extra[@]}" >"$out/$name.log" 2>&1
  sed -n 's/.*Examples\/sec: \([0-9.]*\).*/\1/p' "$out/$name.log" | tail -n +2 | sort -g |
    awk '{v[NR] = $1}
         END {
           if (NR == 0) {print "nan"; exit}
           m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
           printf "%.1f\n", m
         }'
}

results=$out/rates.txt
: >"$results"
for round in $(seq "$rounds"); do
  extra=()
  rate=$(train "r${round}_1proc")
  echo "round $round 1proc $rate" | tee -a "$results"
  for mb in $bucket_list; do
    extra=(--gradient_bucket_mb "$mb")
    rate=$(train "r${round}_2rank_b$mb" "$mpirun" -np 2)
    echo "round $round 2rank_b$mb $rate" | tee -a "$results"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Per configuration: min / median / max rate; efficiency against the same round's one process.
awk '
  {rate[$3, $2] = $4; if (!($3 in seen)) {seen[$3] = 1; order[++n] = $3}; if ($2 > r) r = $2}
  END {
    printf "| configuration | examples/s (min / median / max of %d) | efficiency per round |\n", r
    printf "|---|---|---|\n"
    for (i = 1; i <= n; ++i) {
      c = order[i]; k = 0; eff = ""
      for (j = 1; j <= r; ++j) {
        v[++k] = rate[c, j]
        if (c != "1proc") eff = eff sprintf("%s%.0f%%", j > 1 ? ", " : "",
                                           100 * rate[c, j] / (2 * rate["1proc", j]))
      }
      for (a = 1; a <= k; ++a)
        for (b = a + 1; b <= k; ++b)
          if (v[b] < v[a]) {t = v[a]; v[a] = v[b]; v[b] = t}
      med = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "| %s | %.0f / %.0f / %.0f | %s |\n", c, v[1], med, v[k], c == "1proc" ? "-" : eff
    }
  }' "$results"
