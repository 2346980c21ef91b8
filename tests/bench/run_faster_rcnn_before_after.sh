#!/bin/bash
# bench_faster_rcnn of two builds, interleaved, as JSON lines on stdout: ROUNDS (default 3)
# rounds of the reduced configuration (mobilenet: 10 training and 10 inference steps after 2
# warmup) and one of ResNet-50 (2 and 2 after 1), each line {"side": "before"|"after", "round",
# "config", "result": bench_faster_rcnn's JSON}. Both at THREADS (default 2).
#
#   tests/bench/run_faster_rcnn_before_after.sh OLD/bin/bench_faster_rcnn NEW/bin/bench_faster_rcnn
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BEFORE_BENCH_FASTER_RCNN AFTER_BENCH_FASTER_RCNN" >&2
  exit 2
fi
declare -A bin=([before]="$1" [after]="$2")
threads="${THREADS:-2}"
run() {  # side round config steps infer_steps warmup
  local result
  result=$("${bin[$1]}" --config "$3" --threads "$threads" --steps "$4" --infer_steps "$5" \
    --warmup "$6" | tail -1)
  echo "{\"side\": \"$1\", \"round\": $2, \"config\": \"$3\", \"result\": $result}"
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for side in before after; do run "$side" "$round" mobilenet 10 10 2; done
done
for side in before after; do run "$side" 1 resnet50 2 2 1; done
