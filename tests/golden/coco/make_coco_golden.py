#!/usr/bin/env python3
"""pycocotools' COCOeval (iouType 'bbox') outputs on fixed COCO cases, checked in so that the
test suite pins maxDets and the area-range bounds without pycocotools
(tests/integration/coco_golden.sh compares `trainyard coco-eval` with them).

The cases come from tests/interop/coco_eval_interop.py's generator with fixed seeds:
- max_dets: every fifth image has 101 to 160 detections (maxDets 1, 10, 100 cut them);
- area_bounds: areas drawn in the three ranges and exactly on 32^2 and 96^2 (small/medium and
  medium/large bounds), crowd regions, categories without groundtruth.

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


def main():
  coco_cls, cocoeval_cls = coco_eval_interop.import_pycocotools()
  for name, seed, params in CASES:
    instances, results = coco_eval_interop.make_case(random.Random(seed), **params)
    gt_path = os.path.join(here, f'{name}_instances.json')
    dt_path = os.path.join(here, f'{name}_results.json')
    with open(gt_path, 'w') as f:
      json.dump(instances, f, separators=(',', ':'))
    with open(dt_path, 'w') as f:
      json.dump(results, f, separators=(',', ':'))
    stats, lines = coco_eval_interop.pycocotools_summary(coco_cls, cocoeval_cls, gt_path, dt_path)
    with open(os.path.join(here, f'{name}_pycocotools.txt'), 'w') as f:
      for value in stats:
        f.write(f'{value!r}\n')
      for line in lines:
        f.write(line + '\n')
    print(f'{name}: {len(instances["images"])} images, {len(instances["annotations"])} '
          f'annotations, {len(results)} detections; stats {stats}')


if __name__ == '__main__':
  main()
