#!/usr/bin/env python3
"""`trainyard coco-eval` against pycocotools' COCOeval (iouType 'bbox' and 'segm') on the same
files.

Generates COCO instances and results files with a fixed seed, covering crowd regions, objects
of all three area ranges (and areas on the range bounds), images without detections,
categories without groundtruth, images with more than 100 detections, equal scores, boxes
partly outside the image and detections of unknown categories. For each case it requires the
12 figures of summarize() to agree to 1e-4 (both sides printed on failure) and the printed
summary lines to be identical; then the same of each category's 12 figures (`coco-eval
--per_category`, the API's include_metrics_per_category mAP among them) against COCOeval run
with params.catIds = [that category].

The segm cases (`coco-eval --iou_type segm`) have instance masks as polygons (one to three per
object, vertices beyond the image among them), uncompressed RLE and compressed RLE, empty masks,
crowd regions, `area` fields that are the mask's, not the mask's, or on the range bounds, objects
of all three area ranges, and detections that are the objects' polygons moved and scaled (some not
at all), with results carrying a bbox (loadRes then takes the box's area, and a result without a
segmentation is its box's polygon) or only the mask.

Exit status: 0 when all agree, 1 on a difference, 77 (skip) when pycocotools is missing, unless
CI=true, where that is a failure (tests/interop/tf_env.sh installs it).
"""
import argparse
import contextlib
import io
import json
import math
import os
import random
import subprocess
import sys

SKIP = 77


def import_pycocotools():
  try:
    from pycocotools.coco import COCO  # pylint: disable=import-outside-toplevel
    from pycocotools.cocoeval import COCOeval  # pylint: disable=import-outside-toplevel
    return COCO, COCOeval
  except ImportError as e:
    message = (f'pycocotools is not importable by {sys.executable} ({e}); '
               'create the environment with `tests/interop/tf_env.sh create`')
    if os.environ.get('CI') == 'true':
      print('FAILED: ' + message)
      sys.exit(1)
    print('skipped: ' + message)
    sys.exit(SKIP)


def make_case(rng, num_images, num_categories, crowd_fraction, many_detections):
  categories = [{'id': c, 'name': f'class{c}', 'supercategory': 'thing'}
                for c in range(1, num_categories + 1)]
  # The last category never has groundtruth (but may have detections).
  gt_categories = list(range(1, num_categories))
  images, annotations, results = [], [], []
  ann_id = 1
  image_ids = rng.sample(range(1, 10 * num_images), num_images)
  for index, image_id in enumerate(image_ids):
    width, height = rng.randint(200, 640), rng.randint(200, 640)
    images.append({'id': image_id, 'width': width, 'height': height,
                   'file_name': f'{image_id}.jpg'})
    objects = []
    for _ in range(rng.randint(0, 8)):
      kind = rng.random()
      if kind < 0.35:
        side = rng.uniform(4, 31)       # small
      elif kind < 0.7:
        side = rng.uniform(33, 95)      # medium
      else:
        side = rng.uniform(97, 250)     # large
      w = side * rng.uniform(0.6, 1.4)
      h = side * side / w
      x = rng.uniform(-20, width - w / 2)   # may leave the image
      y = rng.uniform(-20, height - h / 2)
      crowd = 1 if rng.random() < crowd_fraction else 0
      area = w * h * rng.uniform(0.5, 1.0)  # a segmentation's area, below the box's
      bound = rng.random()
      if bound < 0.05:
        area = 32.0 ** 2
      elif bound < 0.1:
        area = 96.0 ** 2
      category = rng.choice(gt_categories)
      annotations.append({'id': ann_id, 'image_id': image_id, 'category_id': category,
                          'bbox': [round(x, 2), round(y, 2), round(w, 2), round(h, 2)],
                          'area': area, 'iscrowd': crowd, 'segmentation': [[x, y, x + w, y]]})
      ann_id += 1
      objects.append((x, y, w, h, category))
    if index % 7 == 3:
      continue  # no detections on this image
    detections = []
    for (x, y, w, h, category) in objects:
      for _ in range(rng.randint(0, 3)):
        jitter = rng.uniform(0.0, 0.4)
        dx, dy = rng.uniform(-jitter, jitter) * w, rng.uniform(-jitter, jitter) * h
        sw, sh = rng.uniform(1 - jitter, 1 + jitter), rng.uniform(1 - jitter, 1 + jitter)
        label = category if rng.random() < 0.85 else rng.randint(1, num_categories)
        detections.append((x + dx, y + dy, w * sw, h * sh, label))
    extra = rng.randint(0, 5)
    if many_detections and index % 5 == 0:
      extra = rng.randint(101, 160)
    for _ in range(extra):
      w, h = rng.uniform(2, 200), rng.uniform(2, 200)
      detections.append((rng.uniform(-30, width), rng.uniform(-30, height), w, h,
                         rng.randint(1, num_categories + 1)))  # +1: unknown category
    for (x, y, w, h, label) in detections:
      # Two decimals: many equal scores, within and across images.
      score = round(rng.choice([rng.random(), 0.5, 0.75, 0.9]), 2)
      results.append({'image_id': image_id, 'category_id': label,
                      'bbox': [round(x, 3), round(y, 3), round(w, 3), round(h, 3)],
                      'score': score})
  rng.shuffle(results)
  instances = {'info': {'description': 'coco_eval_interop'}, 'licenses': [],
               'images': images, 'annotations': annotations, 'categories': categories}
  return instances, results


def uncompressed_rle(mask):
  """COCO's uncompressed RLE of a binary mask: column-major runs, zeros first."""
  flat = mask.flatten(order='F')
  counts, value, run = [], 0, 0
  for pixel in flat:
    if pixel != value:
      counts.append(run)
      value, run = pixel, 0
    run += 1
  counts.append(run)
  return {'size': [int(mask.shape[0]), int(mask.shape[1])], 'counts': [int(c) for c in counts]}


def random_polygon(rng, cx, cy, radius):
  """A star-shaped polygon around (cx, cy): [x0, y0, x1, y1, ...], 3 to 12 vertices."""
  n = rng.randint(3, 12)
  angles = sorted(rng.uniform(0, 2 * math.pi) for _ in range(n))
  out = []
  for a in angles:
    r = radius * rng.uniform(0.4, 1.0)
    out += [round(cx + r * math.cos(a), 2), round(cy + r * math.sin(a), 2)]
  return out


def random_object(rng, width, height, kind):
  radius = {'small': rng.uniform(1.5, 12), 'medium': rng.uniform(22, 45),
            'large': rng.uniform(62, 110)}[kind]
  cx, cy = rng.uniform(-10, width + 10), rng.uniform(-10, height + 10)
  polygons = [random_polygon(rng, cx, cy, radius)]
  for _ in range(rng.choice([0, 0, 1, 2])):  # more parts, as COCO's occluded objects
    polygons.append(random_polygon(rng, cx + rng.uniform(-radius, radius),
                                   cy + rng.uniform(-radius, radius), radius / 2))
  return polygons


def make_segm_case(rng, mask_utils, num_images, num_categories, crowd_fraction, boxes):
  """Instances with polygon, uncompressed and compressed RLE masks (empty ones among them) and
  results with compressed RLE masks, with a bbox (loadRes then takes the box's area, and a result
  without a segmentation is its box) or without (the mask's area)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  categories = [{'id': c, 'name': f'class{c}', 'supercategory': 'thing'}
                for c in range(1, num_categories + 1)]
  gt_categories = list(range(1, num_categories))
  images, annotations, results = [], [], []
  ann_id = 1
  for index, image_id in enumerate(rng.sample(range(1, 10 * num_images), num_images)):
    width, height = rng.randint(60, 260), rng.randint(60, 260)
    images.append({'id': image_id, 'width': width, 'height': height,
                   'file_name': f'{image_id}.jpg'})
    objects = []
    for _ in range(rng.randint(0, 6)):
      kind = rng.choice(['small', 'small', 'medium', 'large'])
      polygons = random_object(rng, width, height, kind)
      rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
      mask = mask_utils.decode(rle)
      form = rng.random()
      if form < 0.05:  # an empty mask
        mask = np.zeros((height, width), dtype=np.uint8)
        rle = mask_utils.encode(np.asfortranarray(mask))
        segmentation = uncompressed_rle(mask) if rng.random() < 0.5 else {
            'size': [height, width], 'counts': rle['counts'].decode()}
      elif form < 0.6:
        segmentation = polygons
      elif form < 0.8:
        segmentation = uncompressed_rle(mask)
      else:
        segmentation = {'size': [height, width], 'counts': rle['counts'].decode()}
      area = float(mask_utils.area(rle))
      bound = rng.random()
      if bound < 0.1:
        area *= rng.uniform(0.8, 1.2)  # an area field that is not the mask's
      elif bound < 0.15:
        area = rng.choice([32.0 ** 2, 96.0 ** 2])
      category = rng.choice(gt_categories)
      annotations.append({'id': ann_id, 'image_id': image_id, 'category_id': category,
                          'bbox': [float(v) for v in mask_utils.toBbox(rle)], 'area': area,
                          'iscrowd': 1 if rng.random() < crowd_fraction else 0,
                          'segmentation': segmentation})
      ann_id += 1
      objects.append((polygons, category))
    if index % 7 == 3:
      continue  # no detections on this image
    detections = []
    for polygons, category in objects:
      for _ in range(rng.randint(0, 3)):
        jitter = rng.choice([0.0, 0.02, 0.05, rng.uniform(0.0, 0.3)])
        xs = [v for p in polygons for v in p[0::2]]
        ys = [v for p in polygons for v in p[1::2]]
        size = max(max(xs) - min(xs), max(ys) - min(ys), 1.0)
        dx, dy = rng.uniform(-jitter, jitter) * size, rng.uniform(-jitter, jitter) * size
        scale = rng.uniform(1 - jitter, 1 + jitter)
        cx, cy = sum(xs) / len(xs), sum(ys) / len(ys)
        moved = [[(v - (cx if i % 2 == 0 else cy)) * scale + (cx + dx if i % 2 == 0 else cy + dy)
                  for i, v in enumerate(p)] for p in polygons]
        label = category if rng.random() < 0.85 else rng.randint(1, num_categories)
        detections.append((moved, label))
    for _ in range(rng.randint(0, 4)):
      detections.append((random_object(rng, width, height, rng.choice(['small', 'medium'])),
                         rng.randint(1, num_categories + 1)))  # +1: an unknown category
    for polygons, label in detections:
      rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
      if rng.random() < 0.04:
        rle = mask_utils.encode(np.zeros((height, width), dtype=np.uint8, order='F'))
      result = {'image_id': image_id, 'category_id': label,
                'segmentation': {'size': [height, width], 'counts': rle['counts'].decode()},
                'score': round(rng.choice([rng.random(), 0.5, 0.75, 0.9]), 2)}
      if boxes:
        result['bbox'] = [float(v) for v in mask_utils.toBbox(rle)]
        if rng.random() < 0.1:
          del result['segmentation']  # loadRes makes the box's polygon its mask
      results.append(result)
  rng.shuffle(results)
  instances = {'info': {'description': 'coco_eval_interop segm'}, 'licenses': [],
               'images': images, 'annotations': annotations, 'categories': categories}
  return instances, results


def pycocotools_summary(coco_cls, cocoeval_cls, gt_path, dt_path, category_id=None,
                        iou_type='bbox'):
  with contextlib.redirect_stdout(io.StringIO()):
    gt = coco_cls(gt_path)
    dt = gt.loadRes(dt_path)
    evaluator = cocoeval_cls(gt, dt, iou_type)
    if category_id is not None:
      evaluator.params.catIds = [category_id]
    evaluator.evaluate()
    evaluator.accumulate()
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    evaluator.summarize()
  return [float(v) for v in evaluator.stats], printed.getvalue().splitlines()


def trainyard_summary(trainyard, gt_path, dt_path, iou_type='bbox'):
  command = [trainyard, 'coco-eval', '--iou_type', iou_type, gt_path, dt_path]
  tagged = subprocess.run(command + ['--tags'], capture_output=True, text=True, check=False)
  if tagged.returncode != 0:
    raise RuntimeError(f'trainyard coco-eval failed ({tagged.returncode}): {tagged.stderr}')
  values = [float(line.rsplit(' ', 1)[1]) for line in tagged.stdout.splitlines()]
  prefix = 'DetectionMasks_' if iou_type == 'segm' else 'DetectionBoxes_'
  assert all(line.startswith(prefix) for line in tagged.stdout.splitlines()), tagged.stdout
  lines = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()
  return values, tagged.stdout.splitlines(), lines


def trainyard_per_category(trainyard, gt_path, dt_path, iou_type='bbox'):
  """{category name: (mAP tag's value, [12 figures], [12 printed lines])}."""
  command = [trainyard, 'coco-eval', '--iou_type', iou_type, '--per_category', gt_path, dt_path]
  tagged = subprocess.run(command + ['--tags'], capture_output=True, text=True,
                          check=True).stdout.splitlines()[12:]
  printed = subprocess.run(command, capture_output=True, text=True,
                           check=True).stdout.splitlines()[12:]
  prefix = ('DetectionMasks_' if iou_type == 'segm' else
            'DetectionBoxes_') + 'PerformanceByCategory/mAP/'
  out = {}
  for block in range(len(tagged) // 13):
    head, *figures = tagged[13 * block:13 * (block + 1)]
    tag, value = head.rsplit(' ', 1)
    assert tag.startswith(prefix), tag
    name = tag[len(prefix):]
    assert all(line.rsplit(' ', 1)[0].endswith(' ByCategory/' + name) for line in figures), figures
    lines = printed[13 * block + 1:13 * (block + 1)]
    assert printed[13 * block].split(' ', 2)[2] == name, printed[13 * block]
    out[name] = (float(value), [float(line.rsplit(' ', 1)[1]) for line in figures], lines)
  return out


def compare_per_category(name, instances, coco_cls, cocoeval_cls, trainyard, gt_path, dt_path,
                         iou_type='bbox'):
  """The number of categories whose figures differ from COCOeval's on that category alone."""
  ours = trainyard_per_category(trainyard, gt_path, dt_path, iou_type)
  failures = 0
  if sorted(ours) != sorted(c['name'] for c in instances['categories']):
    print(f'{name}: per-category blocks for {sorted(ours)}, categories '
          f'{[c["name"] for c in instances["categories"]]}')
    return 1
  for category in instances['categories']:
    theirs, their_lines = pycocotools_summary(coco_cls, cocoeval_cls, gt_path, dt_path,
                                              category['id'], iou_type)
    m_ap, figures, lines = ours[category['name']]
    bad = (abs(m_ap - theirs[0]) > 1e-4 or
           any(abs(a - b) > 1e-4 for a, b in zip(figures, theirs)) or lines != their_lines)
    if bad:
      failures += 1
      print(f'{name}: category {category["name"]} DIFFERENT: mAP tag {m_ap!r}')
      for a, b in zip(lines, their_lines):
        print(f'  trainyard   {a}\n  pycocotools {b}')
  print(f'{name}: {len(instances["categories"])} categories alone: '
        f'{"DIFFERENT" if failures else "equal"}')
  return failures


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--trainyard', required=True)
  parser.add_argument('--work_dir', required=True)
  args = parser.parse_args()
  coco_cls, cocoeval_cls = import_pycocotools()
  os.makedirs(args.work_dir, exist_ok=True)
  rng = random.Random(20260614)
  cases = [
      ('small', dict(num_images=6, num_categories=3, crowd_fraction=0.2, many_detections=False)),
      ('crowded', dict(num_images=30, num_categories=4, crowd_fraction=0.4,
                       many_detections=False)),
      ('many_detections', dict(num_images=25, num_categories=5, crowd_fraction=0.1,
                               many_detections=True)),
      ('wide', dict(num_images=120, num_categories=8, crowd_fraction=0.1,
                    many_detections=True)),
  ]
  failures = 0
  for name, params in cases:
    instances, results = make_case(rng, **params)
    failures += compare_case(name, instances, results, coco_cls, cocoeval_cls, args, 'bbox')
  from pycocotools import mask as mask_utils  # pylint: disable=import-outside-toplevel
  rng = random.Random(20261206)
  segm_cases = [
      ('segm_small', dict(num_images=5, num_categories=3, crowd_fraction=0.2, boxes=True)),
      ('segm_boxes', dict(num_images=30, num_categories=4, crowd_fraction=0.2, boxes=True)),
      ('segm_masks_only', dict(num_images=30, num_categories=4, crowd_fraction=0.3,
                               boxes=False)),
  ]
  for name, params in segm_cases:
    instances, results = make_segm_case(rng, mask_utils, **params)
    failures += compare_case(name, instances, results, coco_cls, cocoeval_cls, args, 'segm')
  return 1 if failures else 0


def compare_case(name, instances, results, coco_cls, cocoeval_cls, args, iou_type):
  """The number of differences between trainyard's figures and COCOeval's on one case."""
  failures = 0
  gt_path = os.path.join(args.work_dir, f'{name}_instances.json')
  dt_path = os.path.join(args.work_dir, f'{name}_results.json')
  with open(gt_path, 'w') as f:
    json.dump(instances, f)
  with open(dt_path, 'w') as f:
    json.dump(results, f)
  theirs, their_lines = pycocotools_summary(coco_cls, cocoeval_cls, gt_path, dt_path,
                                            iou_type=iou_type)
  ours, tagged, our_lines = trainyard_summary(args.trainyard, gt_path, dt_path, iou_type)
  bad = len(ours) != 12 or any(abs(a - b) > 1e-4 for a, b in zip(ours, theirs))
  print(f'{name} ({iou_type}): {len(instances["images"])} images, '
        f'{len(instances["annotations"])} annotations, {len(results)} detections: '
        f'{"DIFFERENT" if bad else "equal"} (largest difference '
        f'{max((abs(a - b) for a, b in zip(ours, theirs)), default=float("nan")):.3g}; '
        f'mAP {theirs[0]:.3f})')
  if bad:
    failures += 1
    for line, value in zip(tagged, theirs):
      print(f'  trainyard {line}   pycocotools {value!r}')
  if our_lines != their_lines:
    failures += 1
    print(f'{name}: the printed summaries differ:')
    for a, b in zip(our_lines, their_lines):
      print(f'  trainyard   {a}\n  pycocotools {b}')
  failures += compare_per_category(name, instances, coco_cls, cocoeval_cls, args.trainyard,
                                   gt_path, dt_path, iou_type)
  return failures


if __name__ == '__main__':
  sys.exit(main())
