"""ONNX Runtime gives Trainyard's detections, from Trainyard's ONNX exports of SSD detectors.

configs/ssd_mobilenet_v1_synth_shapes.config and configs/ssd_mobilenet_v1_fpn_synth_shapes.config
(RetinaNet: the FPN extractor, the weight-shared predictor), at 64 x 64 (image_resizer and the
inputs' resize_image) with a batch of 4, are each trained 3 steps on real synth-shapes images
(`trainyard data synth-shapes`, 64 x 64) from initializers wider than the samples' (stddev 0.3
instead of 0.03, 0.2 instead of 0.01), so that after a few steps the scores spread and depend on
the image (at the samples' they stay within about 1e-6 of each other and near-ties decide the
order). `trainyard export --format onnx` writes each model (SSD at opsets 13 and 17, FPN at 17);
each file must pass onnx.checker.check_model(full_check=True), have the Object Detection API's
input `image_tensor` uint8 [N, 64, 64, 3] and outputs `detection_boxes` [N, 100, 4],
`detection_scores`, `detection_classes`, `num_detections`. The validation images, decoded once
and re-encoded as PNG (lossless, so Trainyard's predict reads exactly the pixels ONNX Runtime
gets), go through `trainyard predict` (a COCO results JSON: 1-based category, bbox in pixels,
score) and through ONNX Runtime as one batch and one by one: per image the same number of
detections, the same classes in the same order (near-ties, scores within 1e-4 of each other, may
trade places), boxes (normalized) and scores within 1e-4, and
after num_detections zeros with classes 1 (as the API's graph: it adds label_id_offset to every
row). The SSD variables are exported and predicted again at a score_threshold that leaves fewer
detections than max_total_detections (padding), which is 400 there, more than classes x anchors
(4 x 96). Prints the largest differences.

    python onnx_detection_interop.py --trainyard BIN --configs SOURCE/configs --work_dir D
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-4
SIZE = 64
NUM_VAL = 4


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def dims(info):
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


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


def png_records(source, path):
    """The records of `source` with their images as PNG; returns the decoded images."""
    import tensorflow as tf  # only to decode the JPEGs and frame the records

    images = []
    with tf.io.TFRecordWriter(path) as writer:
        for record in tf.data.TFRecordDataset(source):
            example = tf.train.Example.FromString(record.numpy())
            feature = example.features.feature
            image = tf.io.decode_jpeg(feature["image/encoded"].bytes_list.value[0]).numpy()
            images.append(image)
            feature["image/encoded"].bytes_list.value[0] = tf.io.encode_png(image).numpy()
            feature["image/format"].bytes_list.value[0] = b"png"
            writer.write(example.SerializeToString())
    return np.stack(images)


def trainyard_detections(path, count):
    """Per image id val-00000i: (classes, boxes [ymin, xmin, ymax, xmax] normalized, scores)."""
    with open(path) as f:
        results = json.load(f)
    out = []
    for i in range(count):
        mine = [r for r in results if r["image_id"] == f"val-{i:06d}"]
        boxes = np.array([r["bbox"] for r in mine], np.float64).reshape(-1, 4)
        x, y, w, h = boxes.T
        normalized = np.stack([y / SIZE, x / SIZE, (y + h) / SIZE, (x + w) / SIZE], axis=1)
        out.append((np.array([r["category_id"] for r in mine]), normalized,
                    np.array([r["score"] for r in mine])))
    return out


def matching(classes, boxes, scores, want_classes, want_boxes, want_scores):
    """For each of ONNX Runtime's detections, the index of the same detection in Trainyard's
    list, or a message saying why there is none. The lists must be the same detections in the
    same order, except that detections whose scores differ by at most TOLERANCE (near-ties,
    where a rounding difference between the two runtimes decides the order, as it would between
    two TensorFlow builds) may trade places. ONNX Runtime's scores must not increase."""
    if np.any(scores[1:] > scores[:-1]):
        return "the scores are not in decreasing order"
    order = np.arange(len(classes))
    taken = np.zeros(len(classes), dtype=bool)
    for j in range(len(classes)):
        near = [k for k in range(len(classes)) if not taken[k] and
                abs(float(want_scores[k]) - float(scores[j])) <= TOLERANCE and
                want_classes[k] == classes[j] and
                np.max(np.abs(want_boxes[k] - boxes[j])) <= TOLERANCE]
        if not near:
            return (f"detection {j} (class {classes[j]:g}, score {scores[j]:.7g}) is none of "
                    f"Trainyard's within {TOLERANCE} of its score")
        k = j if j in near else near[0]
        taken[k] = True
        order[j] = k
    return order


def check(path, opset, images, expected, m):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    versions = {o.domain: o.version for o in model.opset_import}
    if versions.get("", None) != opset:
        sys.exit(f"FAILED: {path}: opset_import is {versions}, expected {opset}")
    inputs = [(i.name, i.type.tensor_type.elem_type, dims(i)) for i in model.graph.input]
    if inputs != [("image_tensor", onnx.TensorProto.UINT8, ["N", SIZE, SIZE, 3])]:
        sys.exit(f"FAILED: {path}: the inputs are {inputs}")
    outputs = [(o.name, dims(o)) for o in model.graph.output]
    wanted = [("detection_boxes", ["N", m, 4]), ("detection_scores", ["N", m]),
              ("detection_classes", ["N", m]), ("num_detections", ["N"])]
    if outputs != wanted:
        sys.exit(f"FAILED: {path}: the outputs are {outputs}, expected {wanted}")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    batch = session.run(None, {"image_tensor": images})
    singles = [session.run(None, {"image_tensor": images[i:i + 1]}) for i in range(len(images))]
    box_error = score_error = 0.0
    for label, got in [("batch", batch)] + [(f"image {i} alone", s) for i, s in enumerate(singles)]:
        for k in range(len(got[0])):
            i = k if label == "batch" else int(label.split()[1])
            boxes, scores, classes, num = (g[k] for g in got)
            want_classes, want_boxes, want_scores = expected[i]
            n = int(num)
            if num != len(want_classes) or n != len(want_classes):
                sys.exit(f"FAILED: {path} {label}: image {i} has {num} detections, Trainyard "
                         f"{len(want_classes)}")
            order = matching(classes[:n], boxes[:n], scores[:n], want_classes, want_boxes,
                             want_scores)
            if isinstance(order, str):
                sys.exit(f"FAILED: {path} {label}: image {i}: {order}; classes "
                         f"{classes[:n]}, Trainyard's {want_classes}")
            # Padding: zeros, classes 1 (exporter.py adds label_id_offset to every row).
            if np.any(boxes[n:]) or np.any(scores[n:]) or np.any(classes[n:] != 1):
                sys.exit(f"FAILED: {path} {label}: image {i}'s padding is not zeros (classes 1)")
            box_error = max(box_error,
                            float(np.max(np.abs(boxes[:n] - want_boxes[order]), initial=0)))
            score_error = max(score_error,
                              float(np.max(np.abs(scores[:n] - want_scores[order]), initial=0)))
    ok = box_error <= TOLERANCE and score_error <= TOLERANCE
    print(f"{'ok' if ok else 'FAILED'}: {os.path.basename(path)}: {len(model.graph.node)} nodes, "
          f"detections per image {[len(e[0]) for e in expected]}, max |onnxruntime - trainyard| "
          f"boxes {box_error:.3g}, scores {score_error:.3g}")
    return ok


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


def exported_ok(args, train_dir, name, opsets, images, expected, m=100):
    ok = True
    for opset in opsets:
        exported = os.path.join(args.work_dir, f"{name}_opset{opset}.onnx")
        log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "onnx",
                   "--output", exported, "--opset", str(opset)])
        print(log.strip())
        if f"input image_tensor u8 [N, {SIZE}, {SIZE}, 3]" not in log:
            sys.exit(f"FAILED: the export log does not name the input: {log}")
        ok &= check(exported, opset, images, expected, m)
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--configs", required=True, help="the source tree's configs/")
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    data = os.path.join(args.work_dir, "data")
    run([args.trainyard, "data", "synth-shapes", "--output_dir", data, "--num_images", "16",
         "--num_val_images", str(NUM_VAL), "--image_size", str(SIZE), "--num_shards", "1"])
    val = os.path.join(args.work_dir, "val_png.tfrecord")
    images = png_records(os.path.join(data, "val-00000-of-00001.tfrecord"), val)
    ok = True
    # (name, config, its initializers' stddev, the wider one, opsets, a padded variant)
    cases = [("ssd", "ssd_mobilenet_v1_synth_shapes.config", "0.03", "0.3", [13, 17], True),
             ("ssd_fpn", "ssd_mobilenet_v1_fpn_synth_shapes.config", "0.01", "0.2", [17], False)]
    for name, source, stddev, wider, opsets, padded in cases:
        train_dir = os.path.join(args.work_dir, name)
        os.makedirs(train_dir)
        config = os.path.join(train_dir, "pipeline.config")
        small_config(os.path.join(args.configs, source), data, config, stddev, wider)
        run([args.trainyard, "train", "--pipeline_config_path", config, "--train_dir", train_dir])
        expected = predicted(args, train_dir, val, train_dir + ".json", len(images))
        ok &= exported_ok(args, train_dir, name, opsets, images, expected)
        if not padded:
            continue
        # The same variables with a score_threshold that leaves fewer than max_total_detections
        # (padded): midway in the widest gap between image 0's scores ranked 20 to 60. predict
        # and export read the train_dir's pipeline.config: a copy of the train_dir.
        ranked = np.sort(expected[0][2])[::-1][20:61]
        gap = int(np.argmax(ranked[:-1] - ranked[1:]))
        threshold = float(ranked[gap] + ranked[gap + 1]) / 2
        threshold_dir = train_dir + "_threshold"
        shutil.copytree(train_dir, threshold_dir)
        # And max_total_detections 400, more than the 4 classes x 96 anchors: the composition
        # pads its TopK input.
        with open(config) as f:
            text = f.read()
        for pattern, value in [(r"score_threshold: 1e-8", f"score_threshold: {threshold:.7g}"),
                               (r"max_total_detections: 100", "max_total_detections: 400")]:
            text, n = re.subn(pattern, value, text)
            if n != 1:
                sys.exit(f"FAILED: {source} has no '{pattern}' to change")
        with open(os.path.join(threshold_dir, "pipeline.config"), "w") as f:
            f.write(text)
        expected = predicted(args, threshold_dir, val, threshold_dir + ".json", len(images),
                             threshold, 400)
        ok &= exported_ok(args, threshold_dir, name + "_threshold", opsets, images, expected, 400)
    if not ok:
        sys.exit(f"FAILED: ONNX Runtime differs from Trainyard by more than {TOLERANCE}")
    print("the ONNX exports of SSD and SSD FPN give Trainyard's detections")


if __name__ == "__main__":
    main()
