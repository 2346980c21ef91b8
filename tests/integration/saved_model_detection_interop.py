"""TensorFlow runs Trainyard's SavedModel exports of SSD detectors and gives Trainyard's detections.

As onnx_detection_interop.py (detection_interop_common.py): configs/ssd_mobilenet_v1_synth_shapes
.config and configs/ssd_mobilenet_v1_fpn_synth_shapes.config at 64 x 64, batch 4, trained 3 steps
on synth-shapes images from wider initializers; `trainyard predict` on the validation images
(re-encoded as PNG) gives the expected detections. `trainyard export --format saved_model` must
write the Object Detection API's export directory: saved_model/ (saved_model.pb, variables/),
frozen_inference_graph.pb, model.ckpt.{index,data-00000-of-00001}, checkpoint, pipeline.config.
TensorFlow then
  - loads saved_model/ with tf.saved_model.load: signature serving_default has the input `inputs`
    uint8 [None, None, None, 3] and the outputs detection_boxes [None, M, 4], detection_scores,
    detection_classes [None, M] (float) and num_detections [None];
  - loads it with the TF1 loader (tf.compat.v1.saved_model.loader.load, tag serve) and runs the
    signature's tensors in a Session;
  - imports frozen_inference_graph.pb with tf.compat.v1.import_graph_def and runs image_tensor:0
    to the four outputs;
  - reads model.ckpt and finds the SavedModel's variables with the same values;
and each run, on the images as one batch and one by one, must give per image the same number of
detections, the same classes in the same order (near-ties, scores within 1e-4, may trade places),
boxes and scores within 1e-4, and after num_detections zeros with classes 1. The SSD export is
repeated at a score_threshold that leaves fewer detections than max_total_detections (400, more
than the 4 classes x 96 anchors: padded). Each export is repeated with --input_type
encoded_image_string_tensor and tf_example and run (tf.saved_model.load) on the images encoded as
PNG, and on tf.Example protos of those PNGs. An image
of another size (96 x 80) must run too (the graph resizes it to 64 x 64).

keep_aspect_ratio_resizer: the SSD config with keep_aspect_ratio_resizer { min_dimension 64
max_dimension 96 pad_to_max_dimension true } instead, trained as above; `trainyard predict` on
images of four aspect ratios (64 x 64, 80 x 48, 40 x 100 and 95 x 320, the last resized to
29 x 96 by the API's f32 _compute_new_dynamic_size, 28 x 96 in doubles) and the export run by
TensorFlow on each image alone and on a batch of two of it (tf.saved_model.load, the TF1 loader,
the frozen graph) must give the same detections, boxes normalized to each image. The test also
runs the API's _compute_new_dynamic_size, its TF ops as preprocessor.py has them, on those
shapes, and checks that the exported graph's ResizeToRange gives those sizes.

Faster R-CNN: configs/faster_rcnn_mobilenet_v1_synth_shapes.config with a fixed_shape_resizer
of 64 x 64 (its keep_aspect_ratio_resizer has no pad_to_max_dimension, which an export of one
graph size needs), batch norm decay 0, 16-pixel anchors inside the image, the proposals' NMS at
IoU 1 and 20 proposal slots, trained 100 steps and checked as the SSD above (every
runner, every input type) on the validation images with noise added (flat backgrounds make
exactly tied RPN scores, which rounding turns into near-ties that pick different proposals): the
graph holds both stages, the proposals' NMS, CropAndResize of every proposal slot and the second
stage's NMS over a box per class. There a few detections of an image (at most a tenth, or 2) may
differ by up to 1e-2 (EDGE_TOLERANCE: the crop of a proposal clipped to the image's edge
samples its last row inside or outside the feature map by an ulp, and TensorFlow at batch 1 and
batch 4 disagrees there too); the rest must be within 1e-4. Prints the largest differences and
how many detections needed the wider tolerance.

Mask R-CNN: configs/mask_rcnn_mobilenet_v1_synth_shapes.config changed as the Faster R-CNN one,
trained on synth-shapes with masks (--masks), checked as Faster R-CNN; the signature has a fifth
output, detection_masks [None, M, 15, 15] (each box's mask in the box's frame, as exporter.py
writes it). Each runner's masks of the detections within 1e-4 are pasted into the image as the
API's reframe_box_masks_to_image_masks does and thresholded at 0.5 as its eval_util does, and must
equal the masks of `trainyard predict`'s results (their compressed RLE decoded with pycocotools)
but for pixels where TensorFlow's value is within 1e-2 of 0.5, or on the image's last row or
column when the box reaches it (MASK_TOLERANCE); the test prints how many pixels differ.

    python saved_model_detection_interop.py --trainyard BIN --configs SOURCE/configs --work_dir D
"""
import os
import re
import shutil
import sys

import numpy as np
import tensorflow as tf

from detection_interop_common import (ASPECT_SIZES, EDGE_TOLERANCE, TOLERANCE, compare,
                                      mask_stats, mask_summary, predicted, prepared, run,
                                      small_config, synth_shapes, trained_keep_aspect,
                                      trained_two_stage)

OUTPUTS = ["detection_boxes", "detection_scores", "detection_classes", "num_detections"]
FILES = ["saved_model/saved_model.pb", "saved_model/variables/variables.index",
         "saved_model/variables/variables.data-00000-of-00001", "frozen_inference_graph.pb",
         "model.ckpt.index", "model.ckpt.data-00000-of-00001", "checkpoint", "pipeline.config"]


def fail(message):
    sys.exit(f"FAILED: {message}")


def tf_example(image):
    png = tf.io.encode_png(image).numpy()
    feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
               "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"png"]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def outputs(mask_size):
    """The outputs a runner gives, in this order: OUTPUTS, and detection_masks where the model
    predicts masks of mask_size (height, width)."""
    return OUTPUTS + (["detection_masks"] if mask_size else [])


def v2_runner(export_dir, m, input_type="image_tensor", mask_size=None):
    """serving_default of tf.saved_model.load, after checking its signature; it feeds the images
    as --input_type takes them: uint8, PNG-encoded (encoded_image_string_tensor) or as
    tf.Example protos of the PNGs (tf_example)."""
    loaded = tf.saved_model.load(os.path.join(export_dir, "saved_model"))
    if list(loaded.signatures.keys()) != ["serving_default"]:
        fail(f"{export_dir}: the signatures are {list(loaded.signatures.keys())}")
    f = loaded.signatures["serving_default"]
    spec = f.structured_input_signature[1]
    want = (tf.uint8, [None, None, None, 3]) if input_type == "image_tensor" else (tf.string, [None])
    if list(spec) != ["inputs"] or (spec["inputs"].dtype, spec["inputs"].shape.as_list()) != want:
        fail(f"{export_dir}: the signature's input is {spec}")
    shapes = {k: (v.dtype, v.shape.as_list()) for k, v in f.structured_outputs.items()}
    wanted = {"detection_boxes": (tf.float32, [None, m, 4]),
              "detection_scores": (tf.float32, [None, m]),
              "detection_classes": (tf.float32, [None, m]),
              "num_detections": (tf.float32, [None])}
    if mask_size:
        wanted["detection_masks"] = (tf.float32, [None, m, *mask_size])
    if shapes != wanted:
        fail(f"{export_dir}: the signature's outputs are {shapes}, expected {wanted}")

    def run_v2(images):
        if input_type == "encoded_image_string_tensor":
            images = [tf.io.encode_png(image).numpy() for image in images]
        elif input_type == "tf_example":
            images = [tf_example(image) for image in images]
        out = f(inputs=tf.constant(images))
        return [out[k].numpy() for k in outputs(mask_size)]
    return run_v2


def v1_runner(export_dir, mask_size=None):
    """The signature's tensors, run in a Session of the TF1 loader's graph."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    os.path.join(export_dir, "saved_model"))
    signature = meta.signature_def["serving_default"]
    feed = signature.inputs["inputs"].name
    fetches = [signature.outputs[k].name for k in outputs(mask_size)]
    return lambda images: session.run(fetches, {feed: images})


def frozen_runner(export_dir, mask_size=None):
    graph_def = tf.compat.v1.GraphDef()
    with open(os.path.join(export_dir, "frozen_inference_graph.pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    ops = {n.op for n in graph_def.node}
    if "VariableV2" in ops or "RestoreV2" in ops:
        fail(f"{export_dir}: frozen_inference_graph.pb still holds variables or a saver")
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    session = tf.compat.v1.Session(graph=graph)
    fetches = [k + ":0" for k in outputs(mask_size)]
    return lambda images: session.run(fetches, {"image_tensor:0": images})


def check_checkpoint(export_dir):
    """model.ckpt holds the SavedModel's variables, with the same values."""
    ckpt = tf.train.load_checkpoint(os.path.join(export_dir, "model.ckpt"))
    saved = tf.train.load_checkpoint(os.path.join(export_dir, "saved_model", "variables",
                                                  "variables"))
    names = sorted(ckpt.get_variable_to_shape_map())
    if not names or names != sorted(saved.get_variable_to_shape_map()):
        fail(f"{export_dir}: model.ckpt's variables differ from the SavedModel's")
    for name in names:
        if not np.array_equal(ckpt.get_tensor(name), saved.get_tensor(name)):
            fail(f"{export_dir}: model.ckpt's {name} differs from the SavedModel's")
    return len(names)


def check_missing_image_encoded(export_dir):
    """The API's TfExampleDecoder reads image/encoded with default_value='': an Example without
    it parses (to '') and fails in the decoding, not in ParseExample as a required feature."""
    f = tf.saved_model.load(os.path.join(export_dir, "saved_model")).signatures["serving_default"]
    try:
        f(inputs=tf.constant([tf.train.Example().SerializeToString()]))
    except tf.errors.InvalidArgumentError as e:
        if "required" in str(e) or "ParseExample" in str(e):
            fail(f"{export_dir}: image/encoded is required by the parse: {e}")
        print(f"ok: an Example without image/encoded parses to '' and fails decoding: "
              f"{' '.join(str(e).split())[:200]}")
        return
    fail(f"{export_dir}: an Example without image/encoded was decoded")


def exported_ok(args, train_dir, name, images, expected, m=100, two_stage=False,
                mask_size=None):
    export_dir = os.path.join(args.work_dir, name + "_export")
    log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "saved_model",
               "--export_dir", export_dir])
    print(log.strip())
    if mask_size and f"detection_masks [-1, M, {mask_size[0]}, {mask_size[1]}]" not in log:
        fail(f"the export log does not name detection_masks of {mask_size}: {log}")
    for path in FILES:
        if not os.path.isfile(os.path.join(export_dir, path)):
            fail(f"{export_dir}: no {path}")
    variables = check_checkpoint(export_dir)
    ok = True
    v2 = v2_runner(export_dir, m, mask_size=mask_size)
    loose = [] if two_stage else None
    for label, runner in [("tf.saved_model.load", v2),
                          ("TF1 loader", v1_runner(export_dir, mask_size)),
                          ("frozen graph", frozen_runner(export_dir, mask_size))]:
        stats = mask_stats() if mask_size else None
        box_error, score_error = compare(f"{name} ({label})", runner, images, expected, loose,
                                         stats)
        good = box_error <= TOLERANCE and score_error <= TOLERANCE
        ok &= good
        print(f"{'ok' if good else 'FAILED'}: {name} ({label}, {variables} variables): "
              f"detections per image {[len(e[0]) for e in expected]}, max |tensorflow - "
              f"trainyard| boxes {box_error:.3g}, scores {score_error:.3g}")
        if stats:
            print(mask_summary(f"{name} ({label})", stats))
    # The other input types: the images as PNG strings, or tf.Example protos of them, parsed and
    # decoded in the graph.
    for input_type in ["encoded_image_string_tensor", "tf_example"]:
        other_dir = os.path.join(args.work_dir, f"{name}_{input_type}_export")
        log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "saved_model",
                   "--export_dir", other_dir, "--input_type", input_type])
        if f"inputs ({input_type} string [-1]" not in log:
            fail(f"the export log does not name the input {input_type}: {log}")
        box_error, score_error = compare(f"{name} ({input_type})",
                                         v2_runner(other_dir, m, input_type, mask_size), images,
                                         expected, loose)
        good = box_error <= TOLERANCE and score_error <= TOLERANCE
        ok &= good
        print(f"{'ok' if good else 'FAILED'}: {name} ({input_type}, PNG): max "
              f"|tensorflow - trainyard| boxes {box_error:.3g}, scores {score_error:.3g}")
        if input_type == "tf_example":
            check_missing_image_encoded(other_dir)
    # Another size: the graph resizes it (the fixed_shape_resizer's ResizeBilinear).
    other = np.repeat(np.repeat(images[:1], 2, axis=1), 2, axis=2)[:, :96, :80]
    boxes, scores, classes, num = v2(other)[:4]
    if boxes.shape != (1, m, 4) or not 0 < num[0] <= m:
        fail(f"{name}: a 96 x 80 image gives boxes {boxes.shape}, num_detections {num}")
    if loose:
        print(f"{name}: in {len(loose)} comparisons of an image's detections, {sum(loose)} "
              f"detections (at most {max(loose)} of an image) within {EDGE_TOLERANCE}, "
              f"the rest within {TOLERANCE}")
    return ok


def api_new_size(height, width, min_dimension=64, max_dimension=96):
    """The Object Detection API's preprocessor._compute_new_dynamic_size (TF ops, as its graphs
    run it on images of unknown shape)."""
    image_shape = tf.shape(tf.zeros([height, width, 3]))
    orig_height = tf.cast(image_shape[0], tf.float32)
    orig_width = tf.cast(image_shape[1], tf.float32)
    orig_min_dim = tf.minimum(orig_height, orig_width)
    large_scale_factor = tf.constant(min_dimension, dtype=tf.float32) / orig_min_dim
    large_height = tf.cast(tf.round(orig_height * large_scale_factor), tf.int32)
    large_width = tf.cast(tf.round(orig_width * large_scale_factor), tf.int32)
    large_size = tf.stack([large_height, large_width])
    orig_max_dim = tf.maximum(orig_height, orig_width)
    max_dim = tf.constant(max_dimension, dtype=tf.float32)
    small_scale_factor = max_dim / orig_max_dim
    small_height = tf.cast(tf.round(orig_height * small_scale_factor), tf.int32)
    small_width = tf.cast(tf.round(orig_width * small_scale_factor), tf.int32)
    small_size = tf.stack([small_height, small_width])
    new_size = tf.cond(tf.cast(tf.reduce_max(large_size), tf.float32) > max_dim,
                       lambda: small_size, lambda: large_size)
    return tuple(int(v) for v in new_size.numpy())


def keep_aspect_ok(args, data, source_images):
    """The keep_aspect_ratio_resizer case of the module's docstring."""
    name = "ssd_keep_aspect"
    train_dir, images, expected = trained_keep_aspect(args, data, source_images, name)
    export_dir = os.path.join(args.work_dir, name + "_export")
    log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "saved_model",
               "--export_dir", export_dir])
    print(log.strip())
    if "resized to range 64 .. 96 and padded to 96 x 96" not in log:
        fail(f"the export log does not name the resize to range: {log}")
    # The graph's sizes are the API's (its ResizeToRange's SelectV2 gives the resized size).
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    os.path.join(export_dir, "saved_model"))
    sizes = [n.name for n in meta.graph_def.node if n.op == "SelectV2" and
             n.name.startswith("Preprocessor/ResizeToRange/")]
    if len(sizes) != 1:
        fail(f"{export_dir}: expected one ResizeToRange SelectV2 node, found {sizes}")
    for image in images:
        got = tuple(session.run(sizes[0] + ":0", {"image_tensor:0": image[None]}))
        want = api_new_size(*image.shape[:2])
        if got != want:
            fail(f"{export_dir}: the graph resizes {image.shape[:2]} to {got}, the API to {want}")
    if api_new_size(95, 320) != (29, 96):
        fail(f"the API's size of 95 x 320 is {api_new_size(95, 320)}; the case is not the "
             "f32-rounding one it should be")
    ok = True
    for label, runner in [("tf.saved_model.load", v2_runner(export_dir, 100)),
                          ("TF1 loader", v1_runner(export_dir)),
                          ("frozen graph", frozen_runner(export_dir))]:
        box_error = score_error = 0.0
        for i, image in enumerate(images):
            e = compare(f"{name} ({label}) {image.shape[:2]}", runner,
                        np.stack([image, image]), [expected[i], expected[i]])
            box_error, score_error = max(box_error, e[0]), max(score_error, e[1])
        good = box_error <= TOLERANCE and score_error <= TOLERANCE
        ok &= good
        print(f"{'ok' if good else 'FAILED'}: {name} ({label}) on {ASPECT_SIZES}: detections "
              f"per image {[len(e[0]) for e in expected]}, max |tensorflow - trainyard| boxes "
              f"{box_error:.3g}, scores {score_error:.3g}")
    return ok


def two_stage_ok(args, data, name, source_config, mask_size=None):
    """The Faster R-CNN and Mask R-CNN cases of the module's docstring: source_config, in
    args.configs, trained on `data` (synth-shapes, with masks for Mask R-CNN) as
    trained_two_stage trains it."""
    train_dir, images, expected = trained_two_stage(args, data, name, source_config, mask_size)
    return exported_ok(args, train_dir, name, images, expected, two_stage=True,
                       mask_size=mask_size)


def main():
    args, data, val, images = prepared(f"tensorflow {tf.__version__}")
    ok = True
    # (name, config, its initializers' stddev, the wider one, a padded variant)
    cases = [("ssd", "ssd_mobilenet_v1_synth_shapes.config", "0.03", "0.3", True),
             ("ssd_fpn", "ssd_mobilenet_v1_fpn_synth_shapes.config", "0.01", "0.2", False)]
    for name, source, stddev, wider, padded in cases:
        train_dir = os.path.join(args.work_dir, name)
        os.makedirs(train_dir)
        config = os.path.join(train_dir, "pipeline.config")
        small_config(os.path.join(args.configs, source), data, config, stddev, wider)
        run([args.trainyard, "train", "--pipeline_config_path", config, "--train_dir", train_dir])
        expected = predicted(args, train_dir, val, train_dir + ".json", len(images))
        ok &= exported_ok(args, train_dir, name, images, expected)
        if not padded:
            continue
        # A score_threshold midway in the widest gap between image 0's scores ranked 20 to 60,
        # and max_total_detections 400 (more than classes x anchors): padded rows.
        ranked = np.sort(expected[0][2])[::-1][20:61]
        gap = int(np.argmax(ranked[:-1] - ranked[1:]))
        threshold = float(ranked[gap] + ranked[gap + 1]) / 2
        threshold_dir = train_dir + "_threshold"
        shutil.copytree(train_dir, threshold_dir)
        with open(config) as f:
            text = f.read()
        for pattern, value in [(r"score_threshold: 1e-8", f"score_threshold: {threshold:.7g}"),
                               (r"max_total_detections: 100", "max_total_detections: 400")]:
            text, n = re.subn(pattern, value, text)
            if n != 1:
                fail(f"{source} has no '{pattern}' to change")
        with open(os.path.join(threshold_dir, "pipeline.config"), "w") as f:
            f.write(text)
        expected = predicted(args, threshold_dir, val, threshold_dir + ".json", len(images),
                             threshold, 400)
        ok &= exported_ok(args, threshold_dir, name + "_threshold", images, expected, 400)
    ok &= keep_aspect_ok(args, data, images)
    ok &= two_stage_ok(args, data, "faster_rcnn", "faster_rcnn_mobilenet_v1_synth_shapes.config")
    masks_data = synth_shapes(args, "data_masks", masks=True)
    ok &= two_stage_ok(args, masks_data, "mask_rcnn", "mask_rcnn_mobilenet_v1_synth_shapes.config",
                       (15, 15))
    if not ok:
        fail(f"TensorFlow differs from Trainyard by more than {TOLERANCE}")
    print("TensorFlow's runs of the SavedModel exports of SSD, SSD FPN, SSD with "
          "keep_aspect_ratio_resizer, Faster R-CNN and Mask R-CNN give Trainyard's detections "
          "(and masks)")


if __name__ == "__main__":
    main()
