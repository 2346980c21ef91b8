"""What the detector interop tests share (onnx_detection_interop.py,
saved_model_detection_interop.py): small SSD configs trained a few steps on synth-shapes
images, Faster R-CNN and Mask R-CNN configs trained 100 steps (trained_two_stage), the
validation images as PNG records, Trainyard's detections (and masks) from `trainyard predict`,
and the comparison of another runtime's detections with them (compare: near-ties may trade
places; a few two-stage detections at the image's edge may differ more, EDGE_TOLERANCE; masks
reframed as the Object Detection API does, MASK_TOLERANCE)."""
import json
import os
import re
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4
SIZE = 64
NUM_VAL = 4


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def prepared(versions):
    """The arguments (--trainyard, --configs: the source tree's configs/, --work_dir), after
    printing `versions` and emptying work_dir, and synth_shapes(args, "data") with its
    validation images as PNG records: (args, data_dir, the records' path, the images)."""
    import argparse
    import shutil

    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--configs", required=True, help="the source tree's configs/")
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    print(versions)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    data = synth_shapes(args, "data")
    val = os.path.join(args.work_dir, "val_png.tfrecord")
    return args, data, val, png_records(os.path.join(data, "val-00000-of-00001.tfrecord"), val)


def synth_shapes(args, name, masks=False):
    """16 training and NUM_VAL validation images of `trainyard data synth-shapes` at SIZE (with
    their masks where asked) in work_dir/name, one shard each; returns that directory."""
    data = os.path.join(args.work_dir, name)
    run([args.trainyard, "data", "synth-shapes", "--output_dir", data, "--num_images", "16",
         "--num_val_images", str(NUM_VAL), "--image_size", str(SIZE), "--num_shards", "1"] +
        (["--masks"] if masks else []))
    return data


def small_config(source, data_dir, path, stddev, wider):
    """The synth-shapes config at SIZE x SIZE, batch 4, 3 steps, on data_dir, its initializers'
    stddev `stddev` made `wider`."""
    with open(source) as f:
        text = f.read()
    replacements = [
        (r"/tmp/synth_shapes", data_dir),
        (r"height: 160", f"height: {SIZE}"),
        (r"width: 160", f"width: {SIZE}"),
        (r"num_steps: \d+", "num_steps: 3"),
        (r"batch_size: 16", "batch_size: 4"),
        (r"stddev: " + re.escape(stddev) + r"\b", "stddev: " + wider),
    ]
    for pattern, value in replacements:
        text, n = re.subn(pattern, value, text)
        if n == 0:
            sys.exit(f"FAILED: {source} has no '{pattern}' to change")
    with open(path, "w") as f:
        f.write(text)


def png_records(source, path, noise=0):
    """The records of `source` with their images as PNG, uniform noise of +-`noise` added to their
    pixels (seeded) where given; returns the images as written."""
    import tensorflow as tf  # only to decode the JPEGs and frame the records

    images = []
    rng = np.random.default_rng(7)
    with tf.io.TFRecordWriter(path) as writer:
        for record in tf.data.TFRecordDataset(source):
            example = tf.train.Example.FromString(record.numpy())
            feature = example.features.feature
            image = tf.io.decode_jpeg(feature["image/encoded"].bytes_list.value[0]).numpy()
            if noise:
                image = np.clip(image.astype(np.int32) + rng.integers(-noise, noise + 1,
                                                                       size=image.shape),
                                0, 255).astype(np.uint8)
            images.append(image)
            feature["image/encoded"].bytes_list.value[0] = tf.io.encode_png(image).numpy()
            feature["image/format"].bytes_list.value[0] = b"png"
            writer.write(example.SerializeToString())
    return np.stack(images)


def trainyard_detections(path, count):
    """Per image id val-00000i: (classes, boxes [ymin, xmin, ymax, xmax] normalized, scores), and
    where the results carry a `segmentation` (a mask model's), a fourth element: the masks
    [n, height, width] (uint8 0/1, pycocotools' mask.decode of each compressed RLE)."""
    with open(path) as f:
        results = json.load(f)
    out = []
    for i in range(count):
        mine = [r for r in results if r["image_id"] == f"val-{i:06d}"]
        boxes = np.array([r["bbox"] for r in mine], np.float64).reshape(-1, 4)
        x, y, w, h = boxes.T
        normalized = np.stack([y / SIZE, x / SIZE, (y + h) / SIZE, (x + w) / SIZE], axis=1)
        detections = (np.array([r["category_id"] for r in mine]), normalized,
                      np.array([r["score"] for r in mine]))
        if any("segmentation" in r for r in mine):
            from pycocotools import mask as mask_api  # only the mask models' tests need it

            if not all("segmentation" in r for r in mine):
                sys.exit(f"FAILED: {path}: some detections of val-{i:06d} have no segmentation")
            rles = [dict(r["segmentation"], counts=r["segmentation"]["counts"].encode())
                    for r in mine]
            detections += (np.stack([mask_api.decode(rle) for rle in rles]).astype(np.uint8),)
        out.append(detections)
    return out


def matching(classes, boxes, scores, want_classes, want_boxes, want_scores):
    """For each of ONNX Runtime's detections, the index of the same detection in Trainyard's
    list, or a message saying why there is none. The lists must be the same detections in the
    same order, except that detections whose scores differ by at most TOLERANCE (near-ties,
    where a rounding difference between the two runtimes decides the order, as it would between
    two TensorFlow builds) may trade places. ONNX Runtime's scores must not increase."""
    result = tolerant_matching(classes, boxes, scores, want_classes, want_boxes, want_scores,
                               (TOLERANCE,))
    return result if isinstance(result, str) else result[0]


def tolerant_matching(classes, boxes, scores, want_classes, want_boxes, want_scores, tolerances):
    """matching() at the first of `tolerances` that finds each detection a counterpart (the same
    class, score and box within it): (order, how many needed more than the first), or a message
    naming a detection that none finds."""
    if np.any(scores[1:] > scores[:-1]):
        return "the scores are not in decreasing order"
    order = np.zeros(len(classes), dtype=int)
    taken = np.zeros(len(want_classes), dtype=bool)
    wider = 0
    for j in range(len(classes)):
        near = []
        for tolerance in tolerances:
            near = [k for k in range(len(want_classes)) if not taken[k] and
                    abs(float(want_scores[k]) - float(scores[j])) <= tolerance and
                    want_classes[k] == classes[j] and
                    np.max(np.abs(want_boxes[k] - boxes[j])) <= tolerance]
            if near:
                wider += tolerance != tolerances[0]
                break
        if not near:
            return (f"detection {j} (class {classes[j]:g}, score {scores[j]:.7g}) is none of "
                    f"Trainyard's within {tolerances[-1]} of its score")
        k = j if j in near else near[0]
        taken[k] = True
        order[j] = k
    return order, wider


def predicted(args, train_dir, val, path, count, threshold=None, m=100):
    run([args.trainyard, "predict", "--train_dir", train_dir, "--input_data_pattern", val,
         "--output_file", path, "--batch_size", "4"])
    expected = trainyard_detections(path, count)
    # Scores that hardly differ from image to image would hide the inputs: the 20 best of each
    # image against image 0's, rank by rank.
    spread = max(float(np.max(np.abs(e[2][:20] - expected[0][2][:20]))) for e in expected[1:])
    if spread < 1e-2:
        sys.exit(f"FAILED: {path}: Trainyard's best scores hardly depend on the image (spread "
                 f"{spread:.3g}); the check would be blind")
    if threshold is not None and not all(0 < len(e[0]) < m for e in expected):
        sys.exit(f"FAILED: at score_threshold {threshold:.7g} Trainyard gives "
                 f"{[len(e[0]) for e in expected]} detections; the check wants some, padded")
    return expected


# Faster R-CNN's crops (compare's edge_tolerant): the few detections allowed to differ by more
# than TOLERANCE, and by how much. A proposal clipped to the image's bottom or right edge (y2 or
# x2 exactly 1) puts the last row or column of its CropAndResize samples at the feature map's
# edge, in or out of the image (extrapolated to 0) by an ulp of y1 or x1; two runtimes (and
# TensorFlow itself at batch 1 and 4) round that ulp differently, and the proposal's second-stage
# box and scores move by up to about 1e-2.
EDGE_TOLERANCE = 1e-2

# Mask R-CNN's masks: a pixel of a detection's mask may differ from Trainyard's only where
# TensorFlow's reframed value is within MASK_TOLERANCE of the threshold 0.5 (the box masks differ
# by the runtimes' rounding, and the boxes that place them by up to TOLERANCE: 6e-3 pixels at 64),
# with two exceptions at the image's bottom and right edges, where the runtimes' crops differ by
# an ulp as EDGE_TOLERANCE says:
#   - on the image's last row (column) under a box that reaches its bottom (right) edge, the
#     reframe's CropAndResize samples exactly at the box mask's last row, inside it or out
#     (extrapolated to 0), and any value may flip;
#   - the mask head's input is a crop of the features at the detection's box, whose last row or
#     column falls inside or outside the feature map when the box reaches that edge, and the
#     mask's convolutions spread the change: such a detection's pixels may differ within
#     EDGE_MASK_TOLERANCE of 0.5 (at most 0.040 in four runs).
MASK_TOLERANCE = 1e-2
EDGE_MASK_TOLERANCE = 0.15


def reframed(box_masks, boxes, height, width):
    """The API's utils/ops.py reframe_box_masks_to_image_masks, its TF ops: each box's mask
    [mask_height, mask_width] pasted into the image by CropAndResize of the unit box taken
    relative to the box (transform_boxes_relative_to_boxes), 0 outside the box."""
    import tensorflow as tf  # the API's own ops, as TensorFlow runs them

    boxes = tf.constant(boxes, tf.float32)
    min_corner = boxes[:, None, 0:2]
    denom = tf.maximum(boxes[:, None, 2:4] - min_corner, 1e-4)
    unit = tf.concat([tf.zeros([len(box_masks), 2]), tf.ones([len(box_masks), 2])], axis=1)
    reverse = tf.reshape((tf.reshape(unit, [-1, 2, 2]) - min_corner) / denom, [-1, 4])
    crops = tf.image.crop_and_resize(tf.constant(box_masks)[..., None], reverse,
                                     tf.range(len(box_masks)), [height, width],
                                     extrapolation_value=0.0)
    return crops[..., 0].numpy()


def mask_differences(label, box_masks, boxes, want_masks, strict, stats):
    """TensorFlow's box masks of an image's detections, reframed and thresholded at 0.5 as the
    API's eval_util does, against Trainyard's masks of the matched detections (want_masks, in
    TensorFlow's order); only the `strict` detections (boxes within TOLERANCE). Adds to stats:
    compared pixels, pixels set, pixels that differ near the threshold (within MASK_TOLERANCE:
    "differ", the largest distance "worst"; in a box at the image's edge, within
    EDGE_MASK_TOLERANCE: "edge_box", "edge_worst") and on the image's last row or column
    ("edge")."""
    if not np.any(strict):
        return
    height, width = want_masks.shape[1:]
    boxes = boxes[strict]
    values = reframed(box_masks[strict], boxes, height, width)
    want = want_masks[strict].astype(bool)
    differ = (values > 0.5) != want
    last_row = np.zeros_like(differ)
    last_row[boxes[:, 2] >= 1 - TOLERANCE, -1, :] = True
    last_row[boxes[:, 3] >= 1 - TOLERANCE, :, -1] = True
    at_edge = ((boxes[:, 2] >= 1 - TOLERANCE) | (boxes[:, 3] >= 1 - TOLERANCE))[:, None, None]
    distance = np.abs(values - 0.5)
    for key, worst_key, pixels, bound in [
            ("differ", "worst", differ & ~last_row & ~at_edge, MASK_TOLERANCE),
            ("edge_box", "edge_worst", differ & ~last_row & at_edge, EDGE_MASK_TOLERANCE)]:
        if not np.any(pixels):
            continue
        worst = float(np.max(distance[pixels]))
        if worst > bound:
            sys.exit(f"FAILED: {label}: {int(np.sum(pixels))} mask pixels "
                     f"{'of boxes at the image edge ' if key == 'edge_box' else ''}differ from "
                     f"Trainyard's, one where the reframed mask is {worst:.3g} from the "
                     "threshold 0.5")
        stats[worst_key] = max(stats[worst_key], worst)
        stats[key] += int(np.sum(pixels))
    stats["pixels"] += want.size
    stats["set"] += int(np.sum(want))
    stats["edge"] += int(np.sum(differ & last_row))


def mask_stats():
    """The counters mask_differences adds to."""
    return {"pixels": 0, "set": 0, "differ": 0, "worst": 0.0, "edge_box": 0, "edge_worst": 0.0,
            "edge": 0}


def mask_summary(label, stats):
    """Fails when the masks are all empty or mostly full (the check would be blind); else the
    line that reports stats."""
    if not 0 < stats["set"] < stats["pixels"] / 2:
        sys.exit(f"FAILED: {label}: {stats['set']} of {stats['pixels']} mask pixels set; the "
                 "masks check would be blind")
    return (f"ok: {label} detection_masks reframed and thresholded: of {stats['pixels']} pixels "
            f"({stats['set']} set), {stats['differ']} differ from Trainyard's, each within "
            f"{stats['worst']:.3g} of 0.5; in boxes at the image's edge {stats['edge_box']}, each "
            f"within {stats['edge_worst']:.3g}; {stats['edge']} on the image's last row or column")


def compare(label, runner, images, expected, edge_tolerant=None, masks=None):
    """The largest box and score differences of the runner's detections from Trainyard's. With
    `edge_tolerant` (a list), a few detections of each image (at most a tenth, or 2) may differ
    by up to EDGE_TOLERANCE (see there); their count is appended to the list and
    the differences are the other detections'. With `masks` (mask_stats(), see mask_differences)
    the runner gives detection_masks too, checked against Trainyard's masks."""
    batch = runner(images)
    singles = [runner(images[i:i + 1]) for i in range(len(images))]
    box_error = score_error = 0.0
    for what, got in [("batch", batch)] + [(f"image {i} alone", s) for i, s in enumerate(singles)]:
        for k in range(len(got[0])):
            i = k if what == "batch" else int(what.split()[1])
            boxes, scores, classes, num = (g[k] for g in got[:4])
            want_classes, want_boxes, want_scores = expected[i][:3]
            n = int(num)
            if num != len(want_classes):
                sys.exit(f"FAILED: {label} {what}: image {i} has {num} detections, Trainyard "
                         f"{len(want_classes)}")
            strict = np.ones(n, dtype=bool)
            if edge_tolerant is None:
                order = matching(classes[:n], boxes[:n], scores[:n], want_classes, want_boxes,
                                 want_scores)
            else:
                order = tolerant_matching(classes[:n], boxes[:n], scores[:n], want_classes,
                                          want_boxes, want_scores, (TOLERANCE, EDGE_TOLERANCE))
            if isinstance(order, str):
                sys.exit(f"FAILED: {label} {what}: image {i}: {order}; classes {classes[:n]}, "
                         f"Trainyard's {want_classes}")
            if edge_tolerant is not None:
                order, loose = order
                if loose > max(2, n // 10):
                    sys.exit(f"FAILED: {label} {what}: image {i}: {loose} of {n} detections "
                             f"differ from Trainyard's by more than {TOLERANCE}")
                edge_tolerant.append(loose)
                strict = np.array([float(np.max(np.abs(boxes[j] - want_boxes[order[j]]))) <=
                                   TOLERANCE and abs(float(scores[j]) -
                                                     float(want_scores[order[j]])) <= TOLERANCE
                                   for j in range(n)], dtype=bool)
            if np.any(boxes[n:]) or np.any(scores[n:]) or np.any(classes[n:] != 1):
                sys.exit(f"FAILED: {label} {what}: image {i}'s padding is not zeros (classes 1)")
            if masks is not None and n:
                box_masks = got[4][k]
                if np.any(box_masks[n:]):
                    sys.exit(f"FAILED: {label} {what}: image {i}'s padding masks are not zeros")
                mask_differences(f"{label} {what}: image {i}", box_masks[:n], boxes[:n],
                                 expected[i][3][order], strict, masks)
            box_error = max(box_error, float(np.max(
                np.abs(boxes[:n] - want_boxes[order])[strict], initial=0)))
            score_error = max(score_error, float(np.max(
                np.abs(scores[:n] - want_scores[order])[strict], initial=0)))
    return box_error, score_error


FIXED_160 = "fixed_shape_resizer {\n        height: 160\n        width: 160\n      }"


def trained_two_stage(args, data, name, source_config, mask_size=None):
    """source_config (Faster R-CNN or Mask R-CNN, in args.configs) with a fixed_shape_resizer of
    SIZE x SIZE and the changes below, trained 100 steps on `data` (synth-shapes, with masks for
    Mask R-CNN) in args.work_dir/name: (train_dir, the validation images with noise, Trainyard's
    detections of them as trainyard_detections gives them)."""
    train_dir = os.path.join(args.work_dir, name)
    os.makedirs(train_dir)
    with open(os.path.join(args.configs, source_config)) as f:
        # The Mask R-CNN recipe's data is /tmp/synth_shapes_masks; small_config puts `data`
        # where /tmp/synth_shapes is.
        text = f.read().replace("/tmp/synth_shapes_masks/", "/tmp/synth_shapes/")
    # Batch norm's moving statistics from the last batch (decay 0): after 3 steps from the
    # config's 0.99 they are still the initial ones, and the second stage's features saturate to
    # the same values for every image.
    for pattern, value in [(r"keep_aspect_ratio_resizer \{[^}]*\}", FIXED_160),
                           (r"batch_size: 8\b", "batch_size: 16"),
                           (r"decay: 0\.99\b", "decay: 0.0")]:
        text, n = re.subn(pattern, value, text)
        if n != 1:
            sys.exit(f"FAILED: {source_config} has no '{pattern}' to replace")
    source = os.path.join(args.work_dir, name + "_fixed_shape.config")
    with open(source, "w") as f:
        f.write(text)
    config = os.path.join(train_dir, "pipeline.config")
    small_config(source, data, config, "0.01", "0.1")
    with open(config) as f:
        text = f.read()
    # The two stages are discontinuous where the runtimes' rounding differs, so the test keeps
    # away from those places: 100 steps, for scores that depend on the image; the proposals' NMS
    # at IoU 1 (no suppression: rounding could swap two overlapping anchors of nearly equal
    # scores, and NMS then keeps the other one), 20 slots for the 16 anchors (padding); and
    # anchors of 16 x 16 pixels on the 4 x 4 grid, inside the image, so that few proposals reach
    # its bottom or right edge (EDGE_TOLERANCE).
    for pattern, value in [(r"num_steps: 3\b", "num_steps: 100"),
                           (r"first_stage_max_proposals: 64\b", "first_stage_max_proposals: 20"),
                           (r"first_stage_nms_iou_threshold: 0\.7\b",
                            "first_stage_nms_iou_threshold: 1.0"),
                           (r"scales: \[0\.25, 0\.375, 0\.5, 0\.75, 1\.0\]", "scales: [0.25]"),
                           (r"aspect_ratios: \[0\.5, 1\.0, 2\.0\]", "aspect_ratios: [1.0]")]:
        text, n = re.subn(pattern, value, text)
        if n != 1:
            sys.exit(f"FAILED: {source_config} has no '{pattern}' to replace")
    with open(config, "w") as f:
        f.write(text)
    run([args.trainyard, "train", "--pipeline_config_path", config, "--train_dir", train_dir])
    # Noise of +-8: synth-shapes' flat backgrounds give many anchors exactly equal RPN scores,
    # which two runtimes' rounding turns into near-ties that pick different proposals.
    noisy = os.path.join(args.work_dir, name + "_val_png_noisy.tfrecord")
    images = png_records(os.path.join(data, "val-00000-of-00001.tfrecord"), noisy, noise=8)
    expected = predicted(args, train_dir, noisy, train_dir + ".json", len(images))
    if mask_size and not all(len(e) == 4 for e in expected if len(e[0])):
        sys.exit(f"FAILED: {train_dir}.json: Mask R-CNN's detections carry no segmentation")
    return train_dir, images, expected


KEEP_ASPECT = ("keep_aspect_ratio_resizer {\n        min_dimension: 64\n"
               "        max_dimension: 96\n        pad_to_max_dimension: true\n      }")
ASPECT_SIZES = [(64, 64), (80, 48), (40, 100), (95, 320)]


def trained_keep_aspect(args, data, source_images, name="ssd_keep_aspect"):
    """The SSD config with keep_aspect_ratio_resizer (KEEP_ASPECT) trained 3 steps in
    args.work_dir/name on `data`, and `trainyard predict` on the first four source images resized
    to ASPECT_SIZES (as PNG records): (train_dir, the images, per image Trainyard's (classes,
    boxes normalized to the image, scores))."""
    import tensorflow as tf  # to resize the images and frame the records

    train_dir = os.path.join(args.work_dir, name)
    os.makedirs(train_dir)
    config = os.path.join(train_dir, "pipeline.config")
    small_config(os.path.join(args.configs, "ssd_mobilenet_v1_synth_shapes.config"), data,
                 config, "0.03", "0.3")
    with open(config) as f:
        text = f.read()
    text, n = re.subn(r"fixed_shape_resizer \{[^}]*\}", KEEP_ASPECT, text)
    if n != 1:
        sys.exit("FAILED: the SSD config has no fixed_shape_resizer to replace")
    with open(config, "w") as f:
        f.write(text)
    run([args.trainyard, "train", "--pipeline_config_path", config, "--train_dir", train_dir])
    images = [tf.cast(tf.clip_by_value(tf.round(tf.image.resize(
        source_images[i].astype(np.float32), size)), 0, 255), tf.uint8).numpy()
        for i, size in enumerate(ASPECT_SIZES)]
    # The images as PNG records, for `trainyard predict`.
    records = os.path.join(args.work_dir, "aspect_png.tfrecord")
    with tf.io.TFRecordWriter(records) as writer:
        for i, image in enumerate(images):
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[tf.io.encode_png(image).numpy()])),
                "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"png"])),
                "image/height": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[image.shape[0]])),
                "image/width": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[image.shape[1]])),
                "image/source_id": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[f"val-{i:06d}".encode()])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    path = train_dir + ".json"
    run([args.trainyard, "predict", "--train_dir", train_dir, "--input_data_pattern", records,
         "--output_file", path, "--batch_size", "1"])
    with open(path) as f:
        results = json.load(f)
    expected = []
    for i, image in enumerate(images):
        mine = [r for r in results if r["image_id"] == f"val-{i:06d}"]
        if not mine:
            sys.exit(f"FAILED: {path}: no detections of val-{i:06d} (image ids "
                 f"{sorted({r['image_id'] for r in results})})")
        h, w = image.shape[:2]
        x, y, bw, bh = np.array([r["bbox"] for r in mine], np.float64).reshape(-1, 4).T
        expected.append((np.array([r["category_id"] for r in mine]),
                         np.stack([y / h, x / w, (y + bh) / h, (x + bw) / w], axis=1),
                         np.array([r["score"] for r in mine])))
    spread = max(float(np.max(np.abs(e[2][:20] - expected[0][2][:20]))) for e in expected[1:])
    if spread < 1e-2:
        sys.exit(f"FAILED: {path}: Trainyard's best scores hardly depend on the image "
                 f"({spread:.3g})")
    return train_dir, images, expected
