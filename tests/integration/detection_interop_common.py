"""What the detector interop tests share (onnx_detection_interop.py,
saved_model_detection_interop.py): small SSD configs trained a few steps on synth-shapes
images, the validation images as PNG records, Trainyard's detections from `trainyard predict`,
and the matching of another runtime's detections with them (near-ties may trade places)."""
import json
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
