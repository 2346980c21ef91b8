#!/usr/bin/env python3
"""`trainyard data convert-coco --include_masks` against pycocotools' COCO.annToMask.

Generates a COCO instances file with a fixed seed over JPEG images of odd sizes (1 to 61 pixels a
side, width and height different), whose annotations carry instance masks as
  - polygons, one to four parts per object, vertices on and between pixel centres and corners,
    some beyond the image's border, thin slivers among them;
  - compressed RLE (a `counts` string, from pycocotools.mask.encode of a random mask);
  - uncompressed RLE (a `counts` list) on crowd regions (iscrowd 1), empty and full masks among
    them;
runs `trainyard data convert-coco --include_masks` on it, reads the records back with
TensorFlow and requires each object's image/object/mask PNG (decoded with PIL) to be, bit for
bit, the mask pycocotools' COCO.annToMask gives for that annotation (as
create_coco_tf_record.py's frPyObjects + decode do), at the image's size, one per box.

Exit status: 0 when all agree, 1 on a difference, 77 (skip) when pycocotools, PIL, numpy or
tensorflow is missing, unless CI=true, where that is a failure (tests/interop/tf_env.sh
installs them).
"""
import argparse
import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys

SKIP = 77


def import_modules():
  try:
    # pylint: disable=import-outside-toplevel
    import numpy as np
    from PIL import Image
    from pycocotools import mask as mask_util
    from pycocotools.coco import COCO
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    import tensorflow as tf
    return np, Image, mask_util, COCO, tf
  except ImportError as e:
    message = (f'{sys.executable} cannot import numpy, PIL, pycocotools and tensorflow ({e}); '
               'create the environment with `tests/interop/tf_env.sh create`')
    if os.environ.get('CI') == 'true':
      print('FAILED: ' + message)
      sys.exit(1)
    print('skipped: ' + message)
    sys.exit(SKIP)


def random_polygon(rng, width, height):
  """A polygon of 3 to 9 vertices around a random centre; some reach beyond the image."""
  cx, cy = rng.uniform(-2, width + 2), rng.uniform(-2, height + 2)
  radius = rng.uniform(0.3, max(width, height) * 0.7)
  n = rng.randint(3, 9)
  xy = []
  for _ in range(n):
    kind = rng.random()
    if kind < 0.25:  # on pixel corners and centres: the rounding ties
      x = round(rng.uniform(cx - radius, cx + radius) * 2) / 2
      y = round(rng.uniform(cy - radius, cy + radius) * 2) / 2
    else:
      x = rng.uniform(cx - radius, cx + radius)
      y = rng.uniform(cy - radius, cy + radius)
    xy += [round(x, 3), round(y, 3)]
  return xy


def make_case(rng, np, mask_util, Image, image_dir):
  sizes = [(37, 23), (23, 37), (1, 7), (9, 1), (61, 45), (2, 2), (17, 31), (48, 33)]
  images, annotations = [], []
  ann_id = 100
  for index, (width, height) in enumerate(sizes):
    image_id = 1 + 3 * index
    name = f'{image_id:012d}.jpg'
    pixels = np.array([[[(x * 7 + y * 3) % 256, (x * y) % 256, 128] for x in range(width)]
                       for y in range(height)], dtype=np.uint8)
    Image.fromarray(pixels).save(os.path.join(image_dir, name), format='JPEG', quality=90)
    images.append({'id': image_id, 'file_name': name, 'width': width, 'height': height})
    for kind in ['polygons', 'polygons', 'polygons', 'compressed', 'uncompressed', 'empty', 'full']:
      crowd = 0
      if kind == 'polygons':
        segmentation = [random_polygon(rng, width, height) for _ in range(rng.randint(1, 4))]
      elif kind == 'compressed':
        density = rng.uniform(0.05, 0.95)
        m = (np.array([[rng.random() for _ in range(width)] for _ in range(height)]) < density)
        rle = mask_util.encode(np.asfortranarray(m.astype(np.uint8)))
        segmentation = {'size': [height, width], 'counts': rle['counts'].decode('ascii')}
      else:
        crowd = 1
        total = width * height
        if kind == 'empty':
          counts = [total]
        elif kind == 'full':
          counts = [0, total]
        else:
          counts, left = [], total
          while left > 0:
            run = min(left, rng.randint(0 if not counts else 1, max(1, total // 5)))
            counts.append(run)
            left -= run
        segmentation = {'size': [height, width], 'counts': counts}
      annotations.append({
          'id': ann_id, 'image_id': image_id, 'category_id': 1 + ann_id % 2,
          # Inside the image, so that the converter keeps every box (and its mask).
          'bbox': [0, 0, width, height], 'area': float(width * height), 'iscrowd': crowd,
          'segmentation': segmentation})
      ann_id += 1
  return {'images': images, 'annotations': annotations,
          'categories': [{'id': 1, 'name': 'a'}, {'id': 2, 'name': 'b'}]}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--trainyard', required=True)
  parser.add_argument('--work_dir', required=True)
  args = parser.parse_args()
  np, Image, mask_util, COCO, tf = import_modules()

  shutil.rmtree(args.work_dir, ignore_errors=True)
  image_dir = os.path.join(args.work_dir, 'images')
  os.makedirs(image_dir)
  rng = random.Random(38)
  instances = make_case(rng, np, mask_util, Image, image_dir)
  annotations_path = os.path.join(args.work_dir, 'instances.json')
  with open(annotations_path, 'w') as f:
    json.dump(instances, f)
  output = os.path.join(args.work_dir, 'masks')
  subprocess.run([args.trainyard, 'data', 'convert-coco', '--include_masks', '--image_dir',
                  image_dir, '--annotations', annotations_path, '--output', output],
                 check=True)

  with contextlib.redirect_stdout(io.StringIO()):
    coco = COCO(annotations_path)
  failures, compared, on_pixels = 0, 0, 0
  polygon_parts = 0
  records = 0
  for raw in tf.data.TFRecordDataset(output + '-00000-of-00001'):
    records += 1
    example = tf.train.Example.FromString(raw.numpy())
    feature = example.features.feature
    image_id = int(feature['image/source_id'].bytes_list.value[0])
    height = feature['image/height'].int64_list.value[0]
    width = feature['image/width'].int64_list.value[0]
    pngs = list(feature['image/object/mask'].bytes_list.value)
    boxes = len(feature['image/object/bbox/xmin'].float_list.value)
    anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
    anns.sort(key=lambda a: a['id'])  # file order
    if len(pngs) != boxes or len(pngs) != len(anns):
      print(f'FAIL image {image_id}: {len(pngs)} masks, {boxes} boxes, {len(anns)} annotations')
      failures += 1
      continue
    for ann, png in zip(anns, pngs):
      decoded = Image.open(io.BytesIO(png))
      ours = np.array(decoded)
      theirs = coco.annToMask(ann)
      compared += 1
      if isinstance(ann['segmentation'], list):
        polygon_parts += len(ann['segmentation'])
      if decoded.mode != 'L' or ours.shape != (height, width) or ours.dtype != np.uint8 or \
          theirs.shape != ours.shape or not np.array_equal(ours, theirs):
        failures += 1
        where = np.argwhere(ours != theirs) if theirs.shape == ours.shape else 'shapes differ'
        print(f'FAIL image {image_id} annotation {ann["id"]}: mode {decoded.mode}, ours '
              f'{ours.shape} {ours.dtype} sum {int(ours.sum())}, pycocotools {theirs.shape} sum '
              f'{int(theirs.sum())}; differing pixels (y, x): {where}')
      on_pixels += int(theirs.sum())
  if records != len(instances['images']):
    print(f'FAIL: {records} records for {len(instances["images"])} images')
    failures += 1
  print(f'{compared} masks ({polygon_parts} polygon parts, {on_pixels} mask pixels) over '
        f'{records} images compared with COCO.annToMask: {failures} differ')
  return 1 if failures else 0


if __name__ == '__main__':
  sys.exit(main())
