#!/usr/bin/env bash
# `trainyard coco-eval` on a checked-in COCO case gives pycocotools' 12 figures (within 1e-4)
# and its printed summary lines, as tests/golden/coco/make_coco_golden.py recorded them from
# pycocotools itself: maxDets and the area-range bounds are pinned without pycocotools.
# usage: coco_golden.sh TRAINYARD GOLDEN_DIR NAME [IOU_TYPE (bbox, the default, or segm)]
set -u
host=$1 dir=$2 name=$3 iou_type=${4:-bbox}
golden="$dir/${name}_pycocotools.txt"
tagged=$("$host" coco-eval --iou_type "$iou_type" --tags "$dir/${name}_instances.json" "$dir/${name}_results.json") ||
  { echo "FAIL: coco-eval --tags exited $?"; exit 1; }
lines=$("$host" coco-eval --iou_type "$iou_type" "$dir/${name}_instances.json" "$dir/${name}_results.json") ||
  { echo "FAIL: coco-eval exited $?"; exit 1; }
ours=$(awk '{print $NF}' <<<"$tagged")
theirs=$(head -n 12 "$golden")
[ "$(wc -l <<<"$ours")" -eq 12 ] || { echo "FAIL: coco-eval --tags printed $(wc -l <<<"$ours") values"; exit 1; }
bad=$(paste <(echo "$ours") <(echo "$theirs") <(head -n 12 <<<"$tagged" | awk '{print $1}') |
  awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4) printf "  %s: trainyard %s, pycocotools %s\n", $3, $1, $2}')
[ -z "$bad" ] || { echo "FAIL: $name: figures differ from pycocotools':"; echo "$bad"; exit 1; }
if [ "$lines" != "$(tail -n +13 "$golden")" ]; then
  echo "FAIL: $name: the printed summary differs from pycocotools':"
  diff <(echo "$lines") <(tail -n +13 "$golden")
  exit 1
fi
echo "PASS: $name: the 12 figures and the summary lines are pycocotools'"
