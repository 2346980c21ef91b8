"""ONNX Runtime gives Trainyard's detections, from Trainyard's ONNX exports of detectors.

configs/ssd_mobilenet_v1_synth_shapes.config and configs/ssd_mobilenet_v1_fpn_synth_shapes.config
(RetinaNet: the FPN extractor, the weight-shared predictor), at 64 x 64 (image_resizer and the
inputs' resize_image) with a batch of 4, are each trained 3 steps on real synth-shapes images
(`trainyard data synth-shapes`, 64 x 64) from initializers wider than the samples' (stddev 0.3
instead of 0.03, 0.2 instead of 0.01), so that after a few steps the scores spread and depend on
the image (at the samples' they stay within about 1e-6 of each other and near-ties decide the
order). `trainyard export --format onnx` writes each model (SSD at opsets 13 and 17, FPN at 17);
each file must pass onnx.checker.check_model(full_check=True), have the Object Detection API's
input `image_tensor` uint8 [N, H, W, 3] (the graph resizes to 64 x 64) and outputs
`detection_boxes` [N, 100, 4], `detection_scores`, `detection_classes`, `num_detections`. The
validation images, decoded once
and re-encoded as PNG (lossless, so Trainyard's predict reads exactly the pixels ONNX Runtime
gets), go through `trainyard predict` (a COCO results JSON: 1-based category, bbox in pixels,
score) and through ONNX Runtime as one batch and one by one: per image the same number of
detections, the same classes in the same order (near-ties, scores within 1e-4 of each other, may
trade places), boxes (normalized) and scores within 1e-4, and
after num_detections zeros with classes 1 (as the API's graph: it adds label_id_offset to every
row). The SSD variables are exported and predicted again at a score_threshold that leaves fewer
detections than max_total_detections (padding), which is 400 there, more than classes x anchors
(4 x 96). The SSD export also runs an image of another size (96 x 80) and must give the
detections TensorFlow gives from Trainyard's SavedModel export of the same checkpoint (its graph
resizes with TensorFlow's ResizeBilinear). SSD with keep_aspect_ratio_resizer (pad_to_max_dimension)
is trained and predicted as saved_model_detection_interop.py does on images of four aspect
ratios; its export (the batch's size computed as the API's resize_to_range computes it, padded,
each image's detections clipped to its window) must give predict's detections for each image as
a batch of two. Then Faster R-CNN and Mask R-CNN, trained as
saved_model_detection_interop.py trains them (detection_interop_common.trained_two_stage),
exported at opsets 13 and 17 (Mask R-CNN at 17, with its fifth output detection_masks
[N, 100, 15, 15]), checked the same way with the two-stage tolerances (EDGE_TOLERANCE) and Mask
R-CNN's masks reframed as the API does against predict's (MASK_TOLERANCE). Prints the largest
differences.

    python onnx_detection_interop.py --trainyard BIN --configs SOURCE/configs --work_dir D
"""
import os
import re
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort

from detection_interop_common import (ASPECT_SIZES, EDGE_TOLERANCE, SIZE, TOLERANCE, compare,
                                      mask_stats, mask_summary, predicted, prepared, run,
                                      small_config, synth_shapes, trained_keep_aspect,
                                      trained_two_stage)


def dims(info):
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def check(path, opset, images, expected, m, two_stage=False, mask_size=None):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    versions = {o.domain: o.version for o in model.opset_import}
    if versions.get("", None) != opset:
        sys.exit(f"FAILED: {path}: opset_import is {versions}, expected {opset}")
    inputs = [(i.name, i.type.tensor_type.elem_type, dims(i)) for i in model.graph.input]
    if inputs != [("image_tensor", onnx.TensorProto.UINT8, ["N", "H", "W", 3])]:
        sys.exit(f"FAILED: {path}: the inputs are {inputs}")
    outputs = [(o.name, dims(o)) for o in model.graph.output]
    wanted = [("detection_boxes", ["N", m, 4]), ("detection_scores", ["N", m]),
              ("detection_classes", ["N", m]), ("num_detections", ["N"])]
    if mask_size:
        wanted.append(("detection_masks", ["N", m, *mask_size]))
    if outputs != wanted:
        sys.exit(f"FAILED: {path}: the outputs are {outputs}, expected {wanted}")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    loose = [] if two_stage else None
    stats = mask_stats() if mask_size else None
    box_error, score_error = compare(
        os.path.basename(path), lambda batch: session.run(None, {"image_tensor": batch}), images,
        expected, loose, stats)
    ok = box_error <= TOLERANCE and score_error <= TOLERANCE
    print(f"{'ok' if ok else 'FAILED'}: {os.path.basename(path)}: {len(model.graph.node)} nodes, "
          f"detections per image {[len(e[0]) for e in expected]}, max |onnxruntime - trainyard| "
          f"boxes {box_error:.3g}, scores {score_error:.3g}")
    if loose:
        print(f"{os.path.basename(path)}: in {len(loose)} comparisons of an image's detections, "
              f"{sum(loose)} detections (at most {max(loose)} of an image) within "
              f"{EDGE_TOLERANCE}, the rest within {TOLERANCE}")
    if stats:
        print(mask_summary(os.path.basename(path), stats))
    return ok


def exported_ok(args, train_dir, name, opsets, images, expected, m=100, two_stage=False,
                mask_size=None):
    ok = True
    for opset in opsets:
        exported = os.path.join(args.work_dir, f"{name}_opset{opset}.onnx")
        log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "onnx",
                   "--output", exported, "--opset", str(opset)])
        print(log.strip())
        if f"input image_tensor u8 [N, H, W, 3], resized to {SIZE} x {SIZE}" not in log:
            sys.exit(f"FAILED: the export log does not name the input: {log}")
        if mask_size and f"detection_masks [N, M, {mask_size[0]}, {mask_size[1]}]" not in log:
            sys.exit(f"FAILED: the export log does not name detection_masks: {log}")
        ok &= check(exported, opset, images, expected, m, two_stage, mask_size)
    return ok


def other_size_ok(args, train_dir, name, image):
    """An image of another size (96 x 80), which the graph resizes to SIZE x SIZE: ONNX Runtime's
    detections are TensorFlow's from Trainyard's SavedModel export of the same checkpoint, whose
    graph resizes with TensorFlow's own ResizeBilinear (the API's fixed_shape_resizer)."""
    import tensorflow as tf  # the reference resize

    saved = os.path.join(args.work_dir, name + "_saved_model")
    run([args.trainyard, "export", "--train_dir", train_dir, "--format", "saved_model",
         "--export_dir", saved])
    f = tf.saved_model.load(os.path.join(saved, "saved_model")).signatures["serving_default"]
    other = np.repeat(np.repeat(image[None], 2, axis=1), 2, axis=2)[:, :96, :80]
    out = f(inputs=tf.constant(other))
    n = int(out["num_detections"].numpy()[0])
    expected = [(out["detection_classes"].numpy()[0][:n], out["detection_boxes"].numpy()[0][:n],
                 out["detection_scores"].numpy()[0][:n])]
    session = ort.InferenceSession(os.path.join(args.work_dir, f"{name}_opset17.onnx"),
                                   providers=["CPUExecutionProvider"])
    box_error, score_error = compare(
        f"{name} on a 96 x 80 image", lambda batch: session.run(None, {"image_tensor": batch}),
        other, expected)
    ok = box_error <= TOLERANCE and score_error <= TOLERANCE
    print(f"{'ok' if ok else 'FAILED'}: {name}_opset17.onnx on a 96 x 80 image: {n} detections, "
          f"max |onnxruntime - tensorflow's SavedModel| boxes {box_error:.3g}, scores "
          f"{score_error:.3g}")
    return ok


def keep_aspect_ok(args, data, source_images):
    """SSD with keep_aspect_ratio_resizer (min 64, max 96, padded), trained and predicted as
    saved_model_detection_interop.py does on images of four aspect ratios: the export (opset 17)
    resizes each batch as the API's resize_to_range does, pads to 96 x 96 and clips each image's
    detections to its window; ONNX Runtime on each image as a batch of two gives Trainyard's
    detections."""
    name = "ssd_keep_aspect"
    train_dir, images, expected = trained_keep_aspect(args, data, source_images, name)
    path = os.path.join(args.work_dir, name + ".onnx")
    log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "onnx",
               "--output", path, "--opset", "17"])
    print(log.strip())
    if "input image_tensor u8 [N, H, W, 3], resized to range 64 .. 96 and padded to 96 x 96" \
            not in log:
        sys.exit(f"FAILED: the export log does not name the resize to range: {log}")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    box_error = score_error = 0.0
    for i, image in enumerate(images):
        e = compare(f"{name} {image.shape[:2]}",
                    lambda batch: session.run(None, {"image_tensor": batch}),
                    np.stack([image, image]), [expected[i], expected[i]])
        box_error, score_error = max(box_error, e[0]), max(score_error, e[1])
    ok = box_error <= TOLERANCE and score_error <= TOLERANCE
    print(f"{'ok' if ok else 'FAILED'}: {name}.onnx on {ASPECT_SIZES}: detections per image "
          f"{[len(e[0]) for e in expected]}, max |onnxruntime - trainyard| boxes {box_error:.3g}, "
          f"scores {score_error:.3g}")
    return ok


def main():
    args, data, val, images = prepared(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
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
        ok &= other_size_ok(args, train_dir, name, images[0])
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
    ok &= keep_aspect_ok(args, data, images)
    # Faster R-CNN and Mask R-CNN, trained as saved_model_detection_interop.py trains them.
    train_dir, images, expected = trained_two_stage(
        args, data, "faster_rcnn", "faster_rcnn_mobilenet_v1_synth_shapes.config")
    ok &= exported_ok(args, train_dir, "faster_rcnn", [13, 17], images, expected, two_stage=True)
    masks_data = synth_shapes(args, "data_masks", masks=True)
    train_dir, images, expected = trained_two_stage(
        args, masks_data, "mask_rcnn", "mask_rcnn_mobilenet_v1_synth_shapes.config", (15, 15))
    ok &= exported_ok(args, train_dir, "mask_rcnn", [17], images, expected, two_stage=True,
                      mask_size=(15, 15))
    if not ok:
        sys.exit(f"FAILED: ONNX Runtime differs from Trainyard by more than {TOLERANCE}")
    print("the ONNX exports of SSD, SSD FPN, Faster R-CNN and Mask R-CNN give Trainyard's "
          "detections (and masks)")


if __name__ == "__main__":
    main()
