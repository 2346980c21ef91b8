"""TensorFlow Lite's interpreter runs Trainyard's TFLite export of an SSD detector, written as the
Object Detection API's export_tflite_ssd_graph.py writes it, and gives Trainyard's detections.

configs/ssd_mobilenet_v1_synth_shapes.config at 64 x 64, batch 4, trained 3 steps on synth-shapes
images from wider initializers (detection_interop_common.small_config), with box coder scales
that differ from each other and from the defaults (y 8, x 12, height 4, width 6) and an NMS IoU
of 0.5, so that a scale or threshold taken from the wrong place shows. `trainyard predict` on the
validation images (re-encoded as PNG) gives the expected detections.

`trainyard export --format tflite` must write a file that TF 2.21's tf.lite.Interpreter loads,
with the input "normalized_input_image_tensor" f32 [1, 64, 64, 3] and the four outputs
"TFLite_Detection_PostProcess" (boxes [1, D, 4]), ":1" (classes [1, D]), ":2" (scores [1, D])
and ":3" (num_detections [1]) of the custom op TFLite_Detection_PostProcess, which TFLite's own
kernel runs. Each validation image, normalized as SSD MobileNet's preprocess does ((2 / 255) x - 1,
TF ops), is run alone, and:
  1. the op's inputs, the tensors "raw_outputs/box_encodings" [1, A, 4],
     "raw_outputs/class_predictions" [1, A, 5] (sigmoid scores, background first) and the
     constant "anchors" [A, 4] (ycenter, xcenter, height, width), are read from the interpreter;
     decoded as the API's faster_rcnn_box_coder decodes (TF ops), suppressed class by class
     (tf.image.non_max_suppression, 100 per class), sorted by score, then clipped to the image
     with the boxes left with no area dropped and cut to 100, as the API's
     multiclass_non_max_suppression does, they must give `trainyard predict`'s detections
     (classes, boxes and scores within 1e-4; ties and near-ties may trade places): the exported
     graph computes Trainyard's predictions and anchors;
  2. the op's outputs (fast NMS, the default: max_detections 10, max_classes_per_detection 1)
     must be the detections that TensorFlow's NonMaxSuppressionV3 (tf.image.non_max_suppression)
     keeps from the decoded, unclipped boxes ranked by their best class's score: the op has the
     box scales, IoU and score thresholds and class count of the config;
  3. exported again with --max_classes_per_detection 2 --max_detections 7, each kept box must
     come with its two best classes, in order, num_detections counting boxes;
  4. exported with --use_regular_nms true --detections_per_class 3 --max_detections 12, the
     outputs must be the best 12 of each class's tf.image.non_max_suppression (3) on the
     unclipped boxes (equal scores at the cut may be any of them: the kernel's sort is not
     stable);
  5. exported with --add_postprocessing_op false, the outputs must be the two raw tensors of 1.
The same config with the quantized samples' graph_rewriter { quantization } (delay 0) trains with
fake quantization, and its export, a float model as TensorFlow's converter writes one from a
quantization-aware graph (the activations' fake quantization as FAKE_QUANT operators, at least
20, with the learned ranges; the weights' folded into the constants), must pass steps 1-5 too;
the float model must have no FAKE_QUANT. Exported again with --inference_type QUANTIZED_UINT8
(TOCO's uint8 model; input uint8 (q - 128) / 128) and run on the images' own pixels, step 6:
every FAKE_QUANT's range of the float model must be the uint8 tensor's parameters as TOCO's
ChooseQuantizationParams gives them, the class scores take 1/256, the outputs stay float; (6a)
each integer operator's output must be its float operation (TF ops) on its dequantized inputs
within one step; (6b) the op's outputs must be TF's NonMaxSuppressionV3 of its dequantized
inputs; (6d) the dequantized weights must be the float model's (on their grid), the biases and
anchors within half a step; (6c) the raw outputs' distance from the float model's, end to end,
is reported only (see docs/export_and_deployment.md). Step 7: TensorFlow's converter, given the
fake-quantized TF graph of the float raw export with inference_type uint8, must write the same
operators (output parameters, filter and bias bytes and scales), and both files' raw outputs
must be equal bit for bit.
configs/ssd_mobilenet_v1_fpn_synth_shapes.config, changed the same way (its stddev 0.01 made
0.2), must pass steps 1-5 too, with no FAKE_QUANT (its top-down sums and upsampling in
TFLite). Prints the largest differences.

    python tflite_detection_interop.py --trainyard BIN --configs SOURCE/configs --work_dir D
"""
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from detection_interop_common import (SIZE, TOLERANCE, predicted, prepared, run,  # noqa: E402
                                      small_config, tolerant_matching)
from tflite_quantized_common import (constants_checked, dequantized,  # noqa: E402
                                     fake_quant_ranges, per_operator_steps, rewritten,
                                     signatures, tf_converted, toco_params)

SCALES = {"y_scale": 8.0, "x_scale": 12.0, "height_scale": 4.0, "width_scale": 6.0}
IOU = 0.5
SCORE_THRESHOLD = 1e-8
NUM_CLASSES = 4
OUTPUT = "TFLite_Detection_PostProcess"
# How far a uint8 operator's output may be from its float operation on the same inputs, in its
# quantization steps: TFLite's fixed-point rescaling and the biases rounded to int32 may put a
# value next to a rounding boundary on the other side.
UINT8_STEPS = 1
# The quantized samples' graph_rewriter, quantized from the first step (the samples' delay of
# 48000 steps as 0).
QUANTIZATION = """
graph_rewriter {
  quantization {
    delay: 0
    weight_bits: 8
    activation_bits: 8
  }
}
"""


def fail(message):
    sys.exit(f"FAILED: {message}")


def configured(path):
    """The trained config: the box coder scales and NMS IoU above."""
    rewritten(path, path, [
        (r"y_scale: 10.0", f"y_scale: {SCALES['y_scale']}"),
        (r"x_scale: 10.0", f"x_scale: {SCALES['x_scale']}"),
        (r"height_scale: 5.0", f"height_scale: {SCALES['height_scale']}"),
        (r"width_scale: 5.0", f"width_scale: {SCALES['width_scale']}"),
        (r"iou_threshold: 0.6", f"iou_threshold: {IOU}")])


def exported(args, train_dir, name, flags=()):
    path = os.path.join(args.work_dir, name + ".tflite")
    log = run([args.trainyard, "export", "--train_dir", train_dir, "--format", "tflite",
               "--output", path, *flags])
    print(log.strip())
    interpreter = tf.lite.Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    inputs = interpreter.get_input_details()
    if [(d["name"], list(d["shape"]), d["dtype"]) for d in inputs] != [
            ("normalized_input_image_tensor", [1, SIZE, SIZE, 3], np.float32)]:
        fail(f"{path}: inputs {inputs}")
    return interpreter


def invoke(interpreter, image):
    """The outputs by name, and every tensor of the run by name."""
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
    interpreter.invoke()
    outputs = {d["name"]: interpreter.get_tensor(d["index"])
               for d in interpreter.get_output_details()}
    tensors = {d["name"]: d["index"] for d in interpreter.get_tensor_details()}
    return outputs, lambda name: interpreter.get_tensor(tensors[name])


def decoded(encodings, anchors):
    """The API's FasterRcnnBoxCoder._decode of [A, 4] codes against center-size anchors (TF ops)."""
    ycenter_a, xcenter_a, ha, wa = tf.unstack(tf.constant(anchors), axis=1)
    ty, tx, th, tw = tf.unstack(tf.constant(encodings), axis=1)
    ty /= SCALES["y_scale"]
    tx /= SCALES["x_scale"]
    th /= SCALES["height_scale"]
    tw /= SCALES["width_scale"]
    w = tf.exp(tw) * wa
    h = tf.exp(th) * ha
    ycenter = ty * ha + ycenter_a
    xcenter = tx * wa + xcenter_a
    return tf.stack([ycenter - h / 2., xcenter - w / 2., ycenter + h / 2., xcenter + w / 2.],
                    axis=1)


def class_by_class(boxes, scores, per_class):
    """Each class's NMS (tf.image.non_max_suppression: of equal scores the lower anchor first)
    of one image's [A, 4] boxes and [A, C] scores, up to `per_class`, the classes' selections
    concatenated and sorted by score (top_k, which keeps the order of equal scores): (classes
    0-based, boxes, scores)."""
    classes, kept_boxes, kept_scores = [], [], []
    for c in range(scores.shape[1]):
        class_scores = tf.constant(scores[:, c])
        selected = tf.image.non_max_suppression(boxes, class_scores, per_class, IOU,
                                                SCORE_THRESHOLD)
        classes.append(np.full(len(selected), c))
        kept_boxes.append(tf.gather(boxes, selected).numpy())
        kept_scores.append(tf.gather(class_scores, selected).numpy())
    kept_scores = np.concatenate(kept_scores)
    order = tf.math.top_k(kept_scores, len(kept_scores)).indices.numpy()
    return np.concatenate(classes)[order], np.concatenate(kept_boxes)[order], kept_scores[order]


def api_detections(raw):
    """Step 1: the API's SSD post-processing of the op's inputs (multiclass_non_max_suppression),
    with TF's ops: class_by_class (100 per class) on the decoded boxes, then clipped to the image
    with the boxes left with no area dropped (_clip_window_prune_boxes), the first 100."""
    classes, boxes, scores = class_by_class(decoded(raw["encodings"], raw["anchors"]),
                                            raw["scores"][:, 1:], 100)
    boxes = np.clip(boxes, 0.0, 1.0)
    kept = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) > 0
    return classes[kept][:100] + 1, boxes[kept][:100], scores[kept][:100]  # 1-based ids


def fast_detections(raw, max_detections, classes_per_box):
    """Step 2 and 3: TFLite's fast NMS as TF's NonMaxSuppressionV3 on the best class's score,
    each kept box with its best classes: ((classes, boxes, scores), the number of boxes, and per
    row the classes of its box whose score equals the row's, any of which the kernel's unstable
    partial sort may give there)."""
    boxes = decoded(raw["encodings"], raw["anchors"])
    scores = raw["scores"][:, 1:]
    selected = tf.image.non_max_suppression(boxes, tf.reduce_max(scores, axis=1),
                                            max_detections, IOU, SCORE_THRESHOLD).numpy()
    best_scores, best_classes = tf.math.top_k(tf.gather(scores, selected), classes_per_box)
    best_scores = best_scores.numpy().reshape(-1)
    anchors = np.repeat(selected, classes_per_box)
    ties = [set(np.flatnonzero(np.abs(scores[a] - v) <= TOLERANCE))
            for a, v in zip(anchors, best_scores)]
    return (best_classes.numpy().reshape(-1),
            np.repeat(tf.gather(boxes, selected).numpy(), classes_per_box, axis=0),
            best_scores), len(selected), ties


def compared(label, got, want, per_box=1, ties=None):
    """The largest box and score differences of `got` (classes, boxes, scores) from `want`, both
    `per_box` rows per box (its best classes, best first): the boxes are matched by their box and
    best score (tolerant_matching: ties and near-ties may trade places), and each of a box's rows
    must be one of its counterpart's of the same score and class, or of a class in that row's
    `ties` (classes of equal scores)."""
    classes, boxes, scores = got
    want_classes, want_boxes, want_scores = want
    if len(classes) != len(want_classes):
        fail(f"{label}: {len(classes)} detections, expected {len(want_classes)}")
    firsts = slice(0, None, per_box)
    # Boxes are told apart by their box and score; by class too where no class may vary.
    keys = (lambda c: np.asarray(c, np.float64)) if ties is None else np.zeros_like
    order = tolerant_matching(keys(classes[firsts]), boxes[firsts], scores[firsts],
                              keys(want_classes[firsts]), want_boxes[firsts],
                              want_scores[firsts], (TOLERANCE,))
    if isinstance(order, str):
        fail(f"{label}: {order}; classes {classes}, expected {want_classes}")
    rows = []
    for box, k in enumerate(order[0]):
        free = list(range(k * per_box, (k + 1) * per_box))
        for r in range(box * per_box, (box + 1) * per_box):
            same = [w for w in free if abs(float(want_scores[w]) - float(scores[r])) <= TOLERANCE
                    and (want_classes[w] == classes[r] or
                         (ties is not None and int(classes[r]) in ties[w]))]
            if not same:
                fail(f"{label}: row {r} (class {classes[r]:g}, score {scores[r]:.7g}) is none "
                     f"of its box's {want_classes[free]} {want_scores[free]}")
            rows.append(same[0])
            free.remove(same[0])
    return (float(np.max(np.abs(boxes - want_boxes[rows]), initial=0)),
            float(np.max(np.abs(scores - want_scores[rows]), initial=0)))


def compared_cut(label, got, candidates, total):
    """compared() for the first `total` of the sorted `candidates` (TFLite's regular NMS): where
    the cut falls among equal scores (a quantized model's), any of them may be kept (the kernel's
    partial sort is not stable), but every candidate above the last kept score must be kept."""
    classes, boxes, scores = got
    if len(classes) < total:
        return compared(label, got, candidates)
    cut = float(scores[-1])
    pool = candidates[2] >= cut - TOLERANCE
    want = tuple(c[pool] for c in candidates)
    order = tolerant_matching(np.asarray(classes, np.float64), boxes, scores, want[0], want[1],
                              want[2], (TOLERANCE,))
    if isinstance(order, str):
        fail(f"{label}: {order}; classes {classes}, expected {want[0]}")
    required = np.flatnonzero(want[2] > cut + TOLERANCE)
    if not set(required) <= set(order[0]):
        fail(f"{label}: a detection above the last kept score {cut:.7g} is missing")
    return compared(label, got, tuple(w[order[0]] for w in want))


def postprocessed(outputs, label, rows):
    """The op's outputs: (classes, boxes, scores) of its `rows` first rows and num_detections."""
    shapes = {name: list(value.shape) for name, value in outputs.items()}
    width = len(outputs[OUTPUT][0])
    want = {OUTPUT: [1, width, 4], OUTPUT + ":1": [1, width], OUTPUT + ":2": [1, width],
            OUTPUT + ":3": [1]}
    if shapes != want:
        fail(f"{label}: outputs {shapes}, expected {want}")
    num = int(outputs[OUTPUT + ":3"][0])
    n = rows(num)
    return (outputs[OUTPUT + ":1"][0, :n], outputs[OUTPUT][0, :n],
            outputs[OUTPUT + ":2"][0, :n]), num


def fast_nms_compared(label, outputs, raw):
    """Step 2: the op's outputs with the default fast NMS against fast_detections of its inputs
    `raw` (compared())."""
    got, num = postprocessed(outputs, f"{label} (fast NMS)", lambda n: n)
    want, want_num, ties = fast_detections(raw, 10, 1)
    if num != want_num:
        fail(f"{label} (fast NMS): {num} detections, TensorFlow's NMS {want_num}")
    return compared(f"{label} (fast NMS)", got, want, 1, ties)


def fake_quant_count(interpreter):
    return sum(op["op_name"] == "FAKE_QUANT" for op in interpreter._get_ops_details())


def checked(args, train_dir, name, normalized, expected):
    """Steps 1-5 on the model of train_dir: the largest differences, by step."""
    fast = exported(args, train_dir, name)
    two = exported(args, train_dir, name + "_two_classes",
                   ["--max_classes_per_detection", "2", "--max_detections", "7"])
    regular = exported(args, train_dir, name + "_regular",
                       ["--use_regular_nms", "true", "--detections_per_class", "3",
                        "--max_detections", "12"])
    raw_only = exported(args, train_dir, name + "_raw", ["--add_postprocessing_op", "false"])
    errors = {"fake quantizations": fake_quant_count(fast)}

    def note(step, difference):
        errors[step] = tuple(max(a, b) for a, b in zip(errors.get(step, (0, 0)), difference))

    for i in range(len(normalized)):
        label = f"{name}: image {i}"
        image = normalized[i:i + 1]
        outputs, tensor = invoke(fast, image)
        raw = {"encodings": tensor("raw_outputs/box_encodings")[0],
               "scores": tensor("raw_outputs/class_predictions")[0],
               "anchors": tensor("anchors")}
        if raw["encodings"].shape[1] != 4 or raw["scores"].shape[1] != NUM_CLASSES + 1 or \
                raw["anchors"].shape != raw["encodings"].shape:
            fail(f"{label}: raw outputs {raw['encodings'].shape}, {raw['scores'].shape}, "
                 f"anchors {raw['anchors'].shape}")
        note("1. raw outputs vs trainyard predict",
             compared(f"{label}: the API's post-processing of the raw outputs",
                      api_detections(raw), expected[i][:3]))
        note("2. fast NMS vs TF NonMaxSuppressionV3", fast_nms_compared(label, outputs, raw))
        outputs, _ = invoke(two, image)
        got, num = postprocessed(outputs, f"{label} (two classes)", lambda n: 2 * n)
        want, want_num, ties = fast_detections(raw, 7, 2)
        if num != want_num:
            fail(f"{label} (two classes): {num} boxes, TensorFlow's NMS {want_num}")
        note("3. two classes per box", compared(f"{label} (two classes)", got, want, 2, ties))
        outputs, _ = invoke(regular, image)
        got, num = postprocessed(outputs, f"{label} (regular NMS)", lambda n: n)
        candidates = class_by_class(decoded(raw["encodings"], raw["anchors"]),
                                    raw["scores"][:, 1:], 3)
        note("4. regular NMS vs TF NonMaxSuppressionV3 class by class",
             compared_cut(f"{label} (regular NMS)", got, candidates, 12))
        outputs, _ = invoke(raw_only, image)
        names = sorted(outputs)
        if names != ["raw_outputs/box_encodings", "raw_outputs/class_predictions"]:
            fail(f"{label}: --add_postprocessing_op false gives the outputs {names}")
        note("5. raw outputs without the op",
             (float(np.max(np.abs(outputs["raw_outputs/box_encodings"][0] - raw["encodings"]))),
              float(np.max(np.abs(outputs["raw_outputs/class_predictions"][0] -
                                  raw["scores"])))))
    return errors


def uint8_checked(args, train_dir, name, images):
    """Step 6, the quantization-aware-trained SSD exported with --inference_type
    QUANTIZED_UINT8 (TOCO's): uint8 tensors with TOCO's parameters of the learned ranges, run by
    TFLite's integer kernels on the images' own uint8 pixels, against the float export (FAKE_QUANT)
    run on the same pixels as (p - 128) / 128. Returns the largest differences of the raw
    outputs in their quantization steps and of the post-processing from TF's NMS."""
    uint8_flags = ["--inference_type", "QUANTIZED_UINT8"]
    path = os.path.join(args.work_dir, name + "_uint8.tflite")
    print(run([args.trainyard, "export", "--train_dir", train_dir, "--format", "tflite",
               "--output", path, *uint8_flags]).strip())
    quantized = tf.lite.Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    quantized.allocate_tensors()
    by_index = quantized.get_tensor_details()
    details = {d["name"]: d for d in by_index}
    reference = tf.lite.Interpreter(model_path=os.path.join(args.work_dir, name + ".tflite"),
                                    experimental_preserve_all_tensors=True)
    reference.allocate_tensors()
    (input_detail,) = quantized.get_input_details()
    if input_detail["dtype"] != np.uint8 or input_detail["quantization"] != (1 / 128, 128):
        fail(f"{path}: input {input_detail}")
    if fake_quant_count(quantized) != 0:
        fail(f"{path}: FAKE_QUANT operators in a uint8 model")
    if details["raw_outputs/class_predictions"]["quantization"] != (1 / 256, 0):
        fail(f"{path}: class predictions {details['raw_outputs/class_predictions']}")
    for output in quantized.get_output_details():
        if output["dtype"] != np.float32:
            fail(f"{path}: output {output['name']} is {output['dtype']}")
    # Every fake quantization's range as TOCO's parameters of the value it quantized.
    ranges = fake_quant_ranges(os.path.join(args.work_dir, name + ".tflite"))
    for tensor, (low, high) in ranges.items():
        got = details[tensor]
        want = toco_params(low, high)
        if got["dtype"] != np.uint8 or got["quantization"] != (float(want[0]), want[1]):
            fail(f"{path}: {tensor} {got['dtype'].__name__} {got['quantization']}, expected "
                 f"uint8 {want} for the range [{low}, {high}]")
    raw_path = os.path.join(args.work_dir, name + "_uint8_raw.tflite")
    run([args.trainyard, "export", "--train_dir", train_dir, "--format", "tflite",
         "--output", raw_path, "--add_postprocessing_op", "false", *uint8_flags])
    raw_only = tf.lite.Interpreter(model_path=raw_path, experimental_preserve_all_tensors=True)
    raw_only.allocate_tensors()
    converted = tf.lite.Interpreter(
        model_content=tf_converted(os.path.join(args.work_dir, name + "_raw.tflite"), raw_path),
        experimental_preserve_all_tensors=True)
    converted.allocate_tensors()
    (mine, left_out), (theirs, tf_left_out) = signatures(raw_only), signatures(converted)
    if mine != theirs or left_out or tf_left_out:
        differing = [(a[:3] + a[3::2], b[:3] + b[3::2], [x == y for x, y in zip(a, b)])
                     for a, b in zip(mine, theirs) if a != b]
        fail(f"{raw_path}: {len(mine)} operators, TF's converter {len(theirs)}; first "
             f"differences (ours, TF's): {differing[:3]}")
    errors = {"parameters checked": len(ranges)}

    def note(step, difference):
        errors[step] = tuple(max(a, b) for a, b in zip(errors.get(step, (0, 0)), difference))

    invoke(reference, np.zeros((1, SIZE, SIZE, 3), np.float32))
    note("6d. weights ('boxes'), biases and anchors ('scores') vs the float model's "
         "(quantization steps)", constants_checked(name, path, quantized, reference))
    for i in range(len(images)):
        label = f"{name} uint8: image {i}"
        outputs, tensor = invoke(quantized, images[i:i + 1])
        raw = {key: dequantized(details[tensor_name], tensor(tensor_name))
               for key, tensor_name in (("encodings", "raw_outputs/box_encodings"),
                                        ("scores", "raw_outputs/class_predictions"),
                                        ("anchors", "anchors"))}
        raw["encodings"], raw["scores"] = raw["encodings"][0], raw["scores"][0]
        note("6a. each uint8 operator vs its float op on its inputs (quantization steps)",
             (per_operator_steps(path, quantized, by_index), 0))
        _, float_tensor = invoke(reference, (images[i:i + 1].astype(np.float32) - 128) / 128)
        steps = []
        for key, tensor_name in (("encodings", "raw_outputs/box_encodings"),
                                 ("scores", "raw_outputs/class_predictions")):
            difference = np.abs(raw[key] - float_tensor(tensor_name)[0])
            steps.append(float(np.max(difference)) / details[tensor_name]["quantization"][0])
        note("6c. uint8 raw outputs vs the float model, end to end (quantization steps; "
             "reported)", steps)
        note("6b. uint8 fast NMS vs TF NonMaxSuppressionV3",
             fast_nms_compared(label, outputs, raw))
        raw_outputs, _ = invoke(raw_only, images[i:i + 1])
        tf_outputs, _ = invoke(converted, images[i:i + 1])
        for tensor_name in ("raw_outputs/box_encodings", "raw_outputs/class_predictions"):
            if not np.array_equal(raw_outputs[tensor_name], tensor(tensor_name)):
                fail(f"{label}: --add_postprocessing_op false gives other {tensor_name}")
            if not np.array_equal(raw_outputs[tensor_name], tf_outputs[tensor_name]):
                fail(f"{label}: {tensor_name} differs from TF's converted model's")
    errors["7. TF's converter: operators and raw outputs bit for bit (differences)"] = (0, 0)
    return errors


def main():
    args, data, val, images = prepared(f"tensorflow {tf.__version__}")
    normalized = ((2.0 / 255.0) * tf.cast(images, tf.float32) - 1.0).numpy()
    # (name, config, its initializers' stddev, the wider one, quantization-aware)
    cases = [("ssd", "ssd_mobilenet_v1_synth_shapes.config", "0.03", "0.3", False),
             ("ssd_quantized", "ssd_mobilenet_v1_synth_shapes.config", "0.03", "0.3", True),
             ("ssd_fpn", "ssd_mobilenet_v1_fpn_synth_shapes.config", "0.01", "0.2", False)]
    results = {}
    for name, source, stddev, wider, quantized in cases:
        train_dir = os.path.join(args.work_dir, name)
        os.makedirs(train_dir)
        config = os.path.join(train_dir, "pipeline.config")
        small_config(os.path.join(args.configs, source), data, config, stddev, wider)
        configured(config)
        if quantized:
            with open(config, "a") as f:
                f.write(QUANTIZATION)
        run([args.trainyard, "train", "--pipeline_config_path", config, "--train_dir", train_dir])
        expected = predicted(args, train_dir, val, train_dir + ".json", len(images))
        errors = checked(args, train_dir, name, normalized, expected)
        count = errors.pop("fake quantizations")
        if (count >= 20) != quantized:
            fail(f"{name}: {count} FAKE_QUANT operators")
        results[name] = (errors, [len(e[0]) for e in expected], count)
        if quantized:
            uint8 = uint8_checked(args, train_dir, name, np.asarray(images, np.uint8))
            checked_ranges = uint8.pop("parameters checked")
            if checked_ranges != count:
                fail(f"{name}: {checked_ranges} ranges checked of {count} FAKE_QUANT")
            results[name + " uint8"] = (uint8, [], checked_ranges)
    for name, (errors, counts, count) in results.items():
        print(f"{name}: detections per image {counts}, {count} FAKE_QUANT operators")
        for step, (box_error, score_error) in sorted(errors.items()):
            print(f"  {step}: max |difference| boxes {box_error:.3g}, scores {score_error:.3g}")
            limit = {"6a": UINT8_STEPS, "6c": np.inf}.get(step[:2], TOLERANCE)
            if step.startswith("6d."):
                box_error -= 1e-3  # weights: on their grid, up to f32 rounding
                score_error -= 0.5 + 1e-3  # others: rounded to the nearest step
            if box_error > limit or score_error > limit:
                fail(f"{name}: {step}: more than {limit}")
    print(f"TensorFlow Lite runs the TFLite exports of SSD, a quantization-aware-trained SSD and "
          f"SSD FPN ({len(images)} images) and gives Trainyard's detections")


if __name__ == "__main__":
    main()
