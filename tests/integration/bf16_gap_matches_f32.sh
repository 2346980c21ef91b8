#!/bin/sh
# Frame-level training with the bf16 policy in the recurrent cells reaches the GAP of f32
# training: tests/bench/run_bf16_frame_gap.sh trains each model given with --precision=f32 and
# --precision=bf16 on the same data, steps and seed; every bf16 GAP must be within TOLERANCE of
# its f32 GAP, and the f32 GAP at least MIN_GAP (the model learned, so the comparison says
# something). A CPU without bf16 makes the host say "no AVX-512 BF16 or AMX", which ctest's
# SKIP_REGULAR_EXPRESSION turns into a skip.
#
# usage: bf16_gap_matches_f32.sh RUN_BF16_FRAME_GAP TRAINYARD WORKDIR TOLERANCE MIN_GAP SEEDS \
#          "MODEL FLAGS..." ...
set -eu
script=$1 host=$2 work=$3 tolerance=$4 min_gap=$5 seeds=$6
shift 6
out=$(sh "$script" "$host" "$work" "$seeds" "$@")
echo "$out"
echo "$out" | awk -v t="$tolerance" -v m="$min_gap" '
  { f32 = $6; sub(",", "", f32); bf16 = $8; d = f32 - bf16; if (d < 0) d = -d
    if (f32 + 0 < m + 0) { print "FAIL " $1 " seed " $3 " f32 GAP " f32 " is under " m; bad = 1 }
    if (d > t + 0) { print "FAIL " $1 " seed " $3 " bf16 GAP " bf16 " is not within " t " of " f32; bad = 1 }
    n++ }
  END { if (n == 0) { print "FAIL no GAP line"; bad = 1 } exit bad }'
