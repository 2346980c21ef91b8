#!/usr/bin/env python3
"""Mask R-CNN's detection masks, from the model to the user, against pycocotools.

Trains the Object Detection API's own mask_rcnn_inception_v2_coco sample (tests/fixtures/
od_configs, reduced as tests/integration/od_sample_configs.sh reduces it: images resized to 64
to 96, 64 first-stage proposals) for 2 steps on synth-shapes with masks through
`trainyard train_and_evaluate` with eval_config metrics_set coco_detection_metrics and
coco_mask_metrics, then runs `trainyard predict` on the val images and requires:
  - the final evaluation to report the box and the mask figures under the API's names
    (DetectionBoxes_Precision/mAP, DetectionMasks_Precision/mAP, ... mAP@.50IOU, AR@100, ...);
  - every detection of predict's COCO results to carry a `segmentation` (compressed RLE) of the
    image's size that pycocotools' mask.decode reads, whose pixels lie within the detection's
    bbox, and that mask.encode(np.asfortranarray(decoded)) writes back to the same counts;
  - the 12 DetectionMasks_ figures of the evaluation to equal pycocotools' COCOeval (iouType
    'segm') within 1e-4, on the val records' groundtruth (boxes in pixels; the area as the
    API's ExportSingleImageGroundtruthToCoco gives it: the record's image/object/area, else the
    box's; each PNG mask encoded) and predict's results loaded as the API's COCOWrapper.LoadAnnotations loads mask results (no bbox: the
    mask's area and box).

Exit status: 0 when all agree, 1 on a difference, 77 (skip) when numpy, pycocotools or
tensorflow is missing, unless CI=true, where that is a failure.
"""
import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
FIGURES = [
    'Precision/mAP', 'Precision/mAP@.50IOU', 'Precision/mAP@.75IOU', 'Precision/mAP (small)',
    'Precision/mAP (medium)', 'Precision/mAP (large)', 'Recall/AR@1', 'Recall/AR@10',
    'Recall/AR@100', 'Recall/AR@100 (small)', 'Recall/AR@100 (medium)', 'Recall/AR@100 (large)'
]


def import_modules():
  try:
    # pylint: disable=import-outside-toplevel
    import numpy as np
    from PIL import Image
    from pycocotools import mask as mask_util
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    import tensorflow as tf
    return np, Image, mask_util, COCO, COCOeval, tf
  except ImportError as e:
    message = (f'{sys.executable} cannot import numpy, PIL, pycocotools and tensorflow ({e}); '
               'create the environment with `tests/interop/tf_env.sh create`')
    if os.environ.get('CI') == 'true':
      print('FAILED: ' + message)
      sys.exit(1)
    print('skipped: ' + message)
    sys.exit(SKIP)


def fail(message):
  print('FAILED: ' + message)
  sys.exit(1)


def run(command, log):
  with open(log, 'w') as out:
    status = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT)
  text = open(log).read()
  if status != 0:
    print(text[-4000:])
    fail(' '.join(command[:2]) + f' exited with {status}')
  return text


def adapted_config(source, work):
  """The sample as a user must change it, reduced for 2 cores (od_sample_configs.sh)."""
  text = open(source).read()
  text = re.sub(r'(train_input_reader: \{.*?input_path: ")PATH_TO_BE_CONFIGURED[^"]*"',
                r'\g<1>' + work + '/data/train-*"', text, flags=re.S)
  text = re.sub(r'(eval_input_reader: \{.*?input_path: ")PATH_TO_BE_CONFIGURED[^"]*"',
                r'\g<1>' + work + '/data/val-*"', text, flags=re.S)
  text = re.sub(r'label_map_path: "PATH_TO_BE_CONFIGURED[^"]*"',
                'label_map_path: "' + work + '/data/label_map.pbtxt"\n  load_instance_masks: true\n'
                '  mask_type: PNG_MASKS', text)
  text = re.sub(r'.*fine_tune_checkpoint:.*\n', '', text)
  text = re.sub(r'min_dimension: 800\n', 'min_dimension: 64\n', text)
  text = re.sub(r'max_dimension: 1365\n', 'max_dimension: 96\n', text)
  text = re.sub(r'first_stage_max_proposals: 300\n', 'first_stage_max_proposals: 64\n', text)
  # manual_stepping refuses a schedule entry at step 0, in the API as here.
  text = re.sub(r'\s*schedule \{\s*step: 0\s*learning_rate: [^\n]*\s*\}', '', text)
  text = text.replace('eval_config: {', 'eval_config: {\n  metrics_set: "coco_detection_metrics"\n'
                      '  metrics_set: "coco_mask_metrics"', 1)
  if 'PATH_TO_BE_CONFIGURED' in re.sub(r'#.*', '', text):
    fail('a path left to configure in the adapted sample')
  return text


def groundtruth(np, Image, mask_util, tf, pattern):
  """The val records' groundtruth as the API's evaluator exports it, in a COCO dataset."""
  images, annotations = [], []
  for path in sorted(tf.io.gfile.glob(pattern)):
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      f = example.features.feature
      image_id = f['image/source_id'].bytes_list.value[0].decode()
      h = f['image/height'].int64_list.value[0]
      w = f['image/width'].int64_list.value[0]
      images.append({'id': image_id, 'height': h, 'width': w})
      ymin, xmin, ymax, xmax = (np.array(f['image/object/bbox/' + k].float_list.value,
                                         dtype=np.float32) for k in ('ymin', 'xmin', 'ymax', 'xmax'))
      labels = f['image/object/class/label'].int64_list.value
      areas = f['image/object/area'].float_list.value if 'image/object/area' in f else []
      masks = f['image/object/mask'].bytes_list.value
      if len(masks) != len(labels):
        fail(f'{image_id}: {len(masks)} masks for {len(labels)} boxes')
      for i, label in enumerate(labels):
        # Pixels in float32 as the task computes them; the record's area where it is > 0 (the
        # API's CocoMaskEvaluator passes groundtruth_area), else the box's, in float32.
        y0, x0 = ymin[i] * np.float32(h), xmin[i] * np.float32(w)
        y1, x1 = ymax[i] * np.float32(h), xmax[i] * np.float32(w)
        mask = (np.array(Image.open(io.BytesIO(masks[i]))) > 0).astype(np.uint8)
        rle = mask_util.encode(np.asfortranarray(mask))
        rle['counts'] = rle['counts'].decode()
        annotations.append({
            'id': len(annotations) + 1, 'image_id': image_id, 'category_id': int(label),
            'bbox': [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
            'area': float(areas[i]) if i < len(areas) and areas[i] > 0 else float(
                (y1 - y0) * (x1 - x0)), 'iscrowd': 0, 'segmentation': rle})
  return images, annotations


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--trainyard', required=True)
  parser.add_argument('--source_dir', required=True)
  parser.add_argument('--work_dir', required=True)
  args = parser.parse_args()
  np, Image, mask_util, COCO, COCOeval, tf = import_modules()
  work = os.path.abspath(args.work_dir)
  shutil.rmtree(work, ignore_errors=True)
  os.makedirs(work)
  ty = args.trainyard
  run([ty, 'data', 'synth-shapes', '--output_dir', work + '/data', '--num_images', '4',
       '--num_val_images', '4', '--image_size', '96', '--num_shards', '1', '--masks'],
      work + '/synth.log')
  config = work + '/mask_rcnn.config'
  with open(config, 'w') as out:
    out.write(adapted_config(
        os.path.join(args.source_dir, 'tests/fixtures/od_configs/mask_rcnn_inception_v2_coco.config'),
        work))
  log = run([ty, 'train_and_evaluate', '--pipeline_config_path=' + config,
             '--model_dir=' + work + '/model', '--num_train_steps=2'], work + '/train.log')
  final = [line for line in log.splitlines() if line.startswith('final evaluation at step 2:')]
  if not final:
    print(log[-3000:])
    fail('no final evaluation')
  figures = dict(re.findall(r' (Detection\w+_[^=]+?) = (\S+)', final[0]))
  for prefix in ('DetectionBoxes_', 'DetectionMasks_'):
    for name in FIGURES:
      if prefix + name not in figures:
        fail(f'the final evaluation has no {prefix + name}: {final[0]}')
  print('final evaluation: ' + ', '.join(
      f'{k} = {v}' for k, v in figures.items() if k.endswith(('mAP', 'mAP@.50IOU'))))

  results = work + '/detections.json'
  run([ty, 'predict', '--pipeline_config_path=' + config, '--train_dir=' + work + '/model',
       '--input_data_pattern=' + work + '/data/val-*', '--output_file=' + results],
      work + '/predict.log')
  detections = json.load(open(results))
  images, annotations = groundtruth(np, Image, mask_util, tf, work + '/data/val-*')
  sizes = {image['id']: (image['height'], image['width']) for image in images}
  if not detections:
    fail('predict wrote no detections')
  pixels_on = 0
  for d in detections:
    seg = d.get('segmentation')
    if seg is None:
      fail(f'a detection without segmentation: {d}')
    if tuple(seg['size']) != sizes[str(d['image_id'])]:
      fail(f'segmentation size {seg["size"]} for image {d["image_id"]} of {sizes[d["image_id"]]}')
    decoded = mask_util.decode({'size': seg['size'], 'counts': seg['counts'].encode()})
    again = mask_util.encode(np.asfortranarray(decoded))['counts'].decode()
    if again != seg['counts']:
      fail(f'the RLE does not round-trip: {seg["counts"]} -> {again}')
    ys, xs = np.nonzero(decoded)
    pixels_on += len(ys)
    if len(ys):
      x, y, w, h = d['bbox']
      if xs.min() < x - 1 or xs.max() > x + w + 1 or ys.min() < y - 1 or ys.max() > y + h + 1:
        fail(f'mask pixels x {xs.min()}..{xs.max()}, y {ys.min()}..{ys.max()} outside bbox '
             f'{d["bbox"]}')
  print(f'{len(detections)} detections, each with an RLE mask inside its box '
        f'({pixels_on} mask pixels in all)')

  # pycocotools on the same groundtruth and masks, loaded as the API loads mask results.
  gt = COCO()
  gt.dataset = {'images': images, 'annotations': annotations,
                'categories': [{'id': int(i)} for i in re.findall(
                    r'id: (\d+)', open(work + '/data/label_map.pbtxt').read())]}
  gt.createIndex()
  mask_results = [{'image_id': str(d['image_id']), 'category_id': d['category_id'],
                   'segmentation': d['segmentation'], 'score': d['score']} for d in detections]
  evaluation = COCOeval(gt, gt.loadRes(mask_results), 'segm')
  evaluation.evaluate()
  evaluation.accumulate()
  evaluation.summarize()
  for i, name in enumerate(FIGURES):
    ours = float(figures['DetectionMasks_' + name])
    if abs(ours - evaluation.stats[i]) > 1e-4:
      fail(f'DetectionMasks_{name}: Trainyard {ours}, pycocotools {evaluation.stats[i]}')
  print('mask figures equal pycocotools: ' + ', '.join(f'{s:.6g}' for s in evaluation.stats))
  shutil.rmtree(work)
  print('mask rcnn outputs OK')


if __name__ == '__main__':
  main()
