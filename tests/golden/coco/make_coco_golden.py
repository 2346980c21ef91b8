#!/usr/bin/env python3
"""pycocotools' COCOeval (iouType 'bbox', and 'segm' for segm_masks) outputs on fixed COCO cases,
checked in so that the test suite pins maxDets, the area-range bounds and mask evaluation without
pycocotools
(tests/integration/coco_golden.sh compares `trainyard coco-eval` with them).

The cases come from tests/interop/coco_eval_interop.py's generator with fixed seeds:
- max_dets: every fifth image has 101 to 160 detections (maxDets 1, 10, 100 cut them);
- area_bounds: areas drawn in the three ranges and exactly on 32^2 and 96^2 (small/medium and
  medium/large bounds), crowd regions, categories without groundtruth;
- segm_masks: instance masks as polygons (several per object), uncompressed and compressed RLE,
  empty masks, crowds, all three area ranges; results as compressed RLE without a bbox.

Writes NAME_instances.json, NAME_results.json and NAME_pycocotools.txt (the 12 stats, one a
line, with repr's precision, then summarize()'s lines) into the directory of this file.

Run with the interoperability environment's Python: `$(tests/interop/tf_env.sh python)
tests/golden/coco/make_coco_golden.py`.
"""
import json
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', 'interop'))
import coco_eval_interop  # pylint: disable=wrong-import-position

CASES = [
    ('max_dets', 31, dict(num_images=10, num_categories=3, crowd_fraction=0.1,
                          many_detections=True)),
    ('area_bounds', 32, dict(num_images=40, num_categories=4, crowd_fraction=0.2,
                             many_detections=False)),
]


SEGM_CASES = [
    ('segm_masks', 33, dict(num_images=12, num_categories=3, crowd_fraction=0.2, boxes=False)),
]


def main():
  coco_cls, cocoeval_cls = coco_eval_interop.import_pycocotools()
  from pycocotools import mask as mask_utils  # pylint: disable=import-outside-toplevel
  cases = [(name, seed, params, 'bbox') for name, seed, params in CASES]
  cases += [(name, seed, params, 'segm') for name, seed, params in SEGM_CASES]
  for name, seed, params, iou_type in cases:
    if iou_type == 'segm':
      instances, results = coco_eval_interop.make_segm_case(random.Random(seed), mask_utils,
                                                            **params)
    else:
      instances, results = coco_eval_interop.make_case(random.Random(seed), **params)
    gt_path = os.path.join(here, f'{name}_instances.json')
    dt_path = os.path.join(here, f'{name}_results.json')
    with open(gt_path, 'w') as f:
      json.dump(instances, f, separators=(',', ':'))
    with open(dt_path, 'w') as f:
      json.dump(results, f, separators=(',', ':'))
    stats, lines = coco_eval_interop.pycocotools_summary(coco_cls, cocoeval_cls, gt_path, dt_path,
                                                         iou_type=iou_type)
    with open(os.path.join(here, f'{name}_pycocotools.txt'), 'w') as f:
      for value in stats:
        f.write(f'{value!r}\n')
      for line in lines:
        f.write(line + '\n')
    print(f'{name}: {len(instances["images"])} images, {len(instances["annotations"])} '
          f'annotations, {len(results)} detections; stats {stats}')


if __name__ == '__main__':
  main()
