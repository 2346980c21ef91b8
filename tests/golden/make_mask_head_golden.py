#!/usr/bin/env python3
"""Writes tests/golden/mask_head/ with the Object Detection API's Mask R-CNN mask branch under
TensorFlow 2.21 and tf_slim: MaskRCNNMaskHead (predictors/heads/mask_head.py) as
MaskRCNNBoxPredictor's third stage builds it, and the mask targets and loss of
FasterRCNNMetaArch._loss_box_classifier.

tests/unit/mask_rcnn_box_predictor_test.cc (built into the detection_parts_test binary: its
MaskRcnnMaskHead, MaskRcnnMaskLoss and ReframeBoxMasksToImageMasks cases) reads the files; they
are committed, so the test needs no TensorFlow. (The meta-architecture's own mask_loss and
detection_masks are compared with the API's FasterRCNNMetaArch by
tests/unit/faster_rcnn_meta_arch_golden_test.cc, from tests/fixtures/detection/
make_mask_rcnn_goldens.py.) Rerun this script only to refresh them:

    PYTHONPATH=TFOLD ~/.cache/trainyard/venv-tf/bin/python tests/golden/make_mask_head_golden.py

where TFOLD holds tfold/object_detection (telize-ai/tfold, a 2019 copy of the API). The API's
utils/{static_shape,shape_utils,ops}.py and predictors/heads/{head,mask_head}.py are executed as
they are but for two rewrites: `import tensorflow as tf` to `import tensorflow.compat.v1 as tf`
and `slim = tf.contrib.slim` to `import tf_slim as slim`. That copy's mask_head calls
ops.nearest_neighbor_upsampling(features, height_scale=, width_scale=) while its ops.py takes one
`scale`; the later API's function (reshape to [b, h, 1, w, 1, c] times ones [1, 1, sy, 1, sx, 1])
is put in its place, with the scales made integers (Python 3's `/` makes them floats).

Cases (features [4, 3, 3, 6] uniform in [-1, 1], 3 classes, conv_hyperparams slim.conv2d with
ReLU, biases and no normalizer; the variables set to the values in the files, in the order the
head creates them, under the scope SecondStageBoxPredictor):
  resize/   mask 5 x 6, 3 layers, mask_prediction_conv_depth 0 (computed: 4), per class
  upsample/ mask 6 x 6, 2 layers, depth 5, convolve_then_upsample, class agnostic
Each: features.f32, <variable name with / as __>.f32, masks.f32 [4, num_masks, h, w]; shapes in
manifest.json. Raw float32, row-major, little-endian.

loss/: _loss_box_classifier's mask targets and loss, its statements in raw tf.compat.v1 ops on a
batch of 2 images padded to 4 proposals (max_num_proposals), 3 classes, masks 4 x 5:
groundtruth boxes and 0/1 instance masks [N_i, 8, 10] per image, the proposals (normalized), the
detector target assigner's matches (IoU, ArgMaxMatcher 0.5/0.5: each proposal's most similar
box when the IoU is at least 0.5), the mask targets as batch_assign_targets makes them (the
matched groundtruth mask, zeros unmatched; weights the regression weights: 1 matched, 0 not),
the prediction masks padded with a zero background mask and the target class's picked
(boolean_mask by the one-hot argmax of the class targets), the groundtruth masks cropped with
crop_and_resize on each proposal to 4 x 5, WeightedSigmoidClassificationLoss, summed and divided
by max(sum(weights * 4 * 5), 1). Files: gt_boxes_<i>.f32 [N_i, 4], gt_masks_<i>.f32 [N_i, 8, 10],
gt_classes_<i>.f32 [N_i] (0-based), proposals.f32 [2, 4, 4], num_proposals [2],
prediction_masks.f32 [8, 3, 4, 5], matches.f32 [2, 4] (-1 none), targets.f32 [8, 4, 5],
loss.f32 [1] (before second_stage_mask_prediction_loss_weight); the per-case values and
shapes in manifest.json.

reframe/: the API's own utils/ops.py reframe_box_masks_to_image_masks on box_masks.f32
[3, 4, 5] (sigmoid of uniform logits) and boxes.f32 [3, 4] into image_masks.f32 [3, 9, 11].
"""
import json
import os
import sys
import types

import numpy as np
import tensorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "mask_head")


def load_api():
    for entry in sys.path:
        base = os.path.join(entry, "tfold", "object_detection")
        if os.path.isfile(os.path.join(base, "predictors", "heads", "mask_head.py")):
            break
    else:
        sys.exit("tfold/object_detection/predictors/heads/mask_head.py is not on PYTHONPATH")
    modules = {}
    for name in ("utils/static_shape", "utils/shape_utils", "utils/ops", "predictors/heads/head",
                 "predictors/heads/mask_head"):
        path = os.path.join(base, name + ".py")
        with open(path) as f:
            text = f.read()
        text = text.replace("\nimport tensorflow as tf\n", "\nimport tensorflow.compat.v1 as tf\n")
        text = text.replace("\nslim = tf.contrib.slim\n", "\nimport tf_slim as slim\n")
        module = types.ModuleType("tfold.object_detection." + name.replace("/", "."))
        module.__file__ = path
        sys.modules[module.__name__] = module
        exec(compile(text, path, "exec"), module.__dict__)  # pylint: disable=exec-used
        modules[name] = module

    def nearest_neighbor_upsampling(input_tensor, scale=None, height_scale=None,
                                    width_scale=None):
        sy = int(height_scale if height_scale is not None else scale)
        sx = int(width_scale if width_scale is not None else scale)
        b, h, w, c = input_tensor.shape.as_list()
        out = tf.reshape(input_tensor, [b, h, 1, w, 1, c]) * tf.ones(
            [1, 1, sy, 1, sx, 1], dtype=input_tensor.dtype)
        return tf.reshape(out, [b, h * sy, w * sx, c])

    mask_head = modules["predictors/heads/mask_head"]
    mask_head.ops.nearest_neighbor_upsampling = nearest_neighbor_upsampling
    return mask_head


def write(folder, name, array):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(np.ascontiguousarray(array, dtype=np.float32).tobytes())


def head_case(mask_head, slim, rng, name, **head_args):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        features = rng.uniform(-1.0, 1.0, size=(4, 3, 3, 6)).astype(np.float32)

        def conv_hyperparams_fn():
            with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                                weights_initializer=tf.truncated_normal_initializer(stddev=0.01),
                                normalizer_fn=None) as sc:
                return sc

        head = mask_head.MaskRCNNMaskHead(num_classes=3, conv_hyperparams_fn=conv_hyperparams_fn,
                                          **head_args)
        with tf.variable_scope("SecondStageBoxPredictor"):
            masks = tf.squeeze(head.predict(tf.constant(features), 1), axis=1)
        manifest = {"generator": "TensorFlow %s, the Object Detection API's MaskRCNNMaskHead"
                                 % tf.__version__, "head": head_args, "variables": []}
        assigns = []
        for v in tf.global_variables():
            shape = v.shape.as_list()
            value = rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)
            assigns.append(v.assign(value))
            fname = v.op.name.replace("/", "__") + ".f32"
            write(folder, fname, value)
            manifest["variables"].append({"name": v.op.name, "shape": shape, "file": fname})
        with tf.Session() as sess:
            sess.run(assigns)
            got = sess.run(masks)
    write(folder, "features.f32", features)
    write(folder, "masks.f32", got)
    manifest["masks"] = list(got.shape)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def iou(boxes_a, boxes_b):
    """IouSimilarity: [N, M] of normalized boxes (y1, x1, y2, x2)."""
    ya1, xa1, ya2, xa2 = tf.split(boxes_a, 4, axis=1)
    yb1, xb1, yb2, xb2 = tf.split(boxes_b, 4, axis=1)
    h = tf.maximum(0.0, tf.minimum(ya2, tf.transpose(yb2)) - tf.maximum(ya1, tf.transpose(yb1)))
    w = tf.maximum(0.0, tf.minimum(xa2, tf.transpose(xb2)) - tf.maximum(xa1, tf.transpose(xb1)))
    inter = h * w
    area_a = (ya2 - ya1) * (xa2 - xa1)
    area_b = (yb2 - yb1) * (xb2 - xb1)
    union = area_a + tf.transpose(area_b) - inter
    return tf.where(tf.equal(inter, 0.0), tf.zeros_like(inter), inter / union)


def loss_case(rng):
    folder = os.path.join(OUT, "loss")
    os.makedirs(folder, exist_ok=True)
    num_classes, mask_height, mask_width, max_proposals, batch = 3, 4, 5, 4, 2
    gt_boxes = [np.array([[0.1, 0.1, 0.6, 0.5], [0.4, 0.5, 0.95, 0.9]], np.float32),
                np.array([[0.2, 0.3, 0.8, 0.7]], np.float32)]
    gt_classes = [np.array([2, 0]), np.array([1])]
    gt_masks = []
    for boxes in gt_boxes:
        masks = rng.uniform(size=(len(boxes), 8, 10)) > 0.5
        gt_masks.append(masks.astype(np.float32))
    proposals = np.array(
        [[[0.12, 0.08, 0.62, 0.52], [0.45, 0.55, 0.9, 0.92], [0.0, 0.0, 0.2, 0.2],
          [0.1, 0.15, 0.55, 0.45]],
         [[0.25, 0.3, 0.85, 0.72], [0.6, 0.0, 0.9, 0.3], [0.0, 0.0, 0.0, 0.0],
          [0.0, 0.0, 0.0, 0.0]]], np.float32)
    num_proposals = np.array([4, 2], np.int32)
    prediction_masks = rng.uniform(-3.0, 3.0, size=(batch * max_proposals, num_classes,
                                                    mask_height, mask_width)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        mask_targets, mask_weights, cls_targets, matches = [], [], [], []
        for i in range(batch):
            # The detector target assigner: IoU, ArgMaxMatcher(0.5, 0.5), FasterRCNN coder.
            similarity = iou(tf.constant(gt_boxes[i]), tf.constant(proposals[i]))
            best = tf.argmax(similarity, axis=0, output_type=tf.int32)
            matched = tf.reduce_max(similarity, axis=0) >= 0.5
            match = tf.where(matched, best, -tf.ones_like(best))
            matches.append(match)
            # gather_based_on_match: the matched row, else the unmatched value.
            safe = tf.maximum(match, 0)
            masks = tf.gather(tf.constant(gt_masks[i]), safe)
            mask_targets.append(tf.where(matched, masks, tf.zeros_like(masks)))
            mask_weights.append(tf.cast(matched, tf.float32))  # reg weights: gt weight 1
            labels = tf.one_hot(tf.constant(gt_classes[i]) + 1, num_classes + 1)
            unmatched = tf.constant([1.0] + num_classes * [0.0])
            cls_targets.append(tf.where(matched, tf.gather(labels, safe),
                                        tf.tile(unmatched[None], [max_proposals, 1])))
        batch_mask_targets = tf.stack(mask_targets)
        batch_mask_target_weights = tf.stack(mask_weights)
        flat_cls_targets_with_background = tf.reshape(tf.stack(cls_targets),
                                                      [batch * max_proposals, -1])
        one_hot_flat_cls_targets_with_background = tf.one_hot(
            tf.argmax(flat_cls_targets_with_background, axis=1), num_classes + 1)
        paddings_indicator = tf.sequence_mask(num_proposals, max_proposals)

        prediction = tf.constant(prediction_masks)
        prediction_masks_with_background = tf.pad(prediction, [[0, 0], [1, 0], [0, 0], [0, 0]])
        prediction_masks_masked_by_class_targets = tf.boolean_mask(
            prediction_masks_with_background,
            tf.greater(one_hot_flat_cls_targets_with_background, 0))
        reshaped_prediction_masks = tf.reshape(prediction_masks_masked_by_class_targets,
                                               [batch, -1, mask_height * mask_width])
        batch_mask_targets_shape = tf.shape(batch_mask_targets)
        flat_gt_masks = tf.reshape(batch_mask_targets,
                                   [-1, batch_mask_targets_shape[2], batch_mask_targets_shape[3]])
        flat_normalized_proposals = tf.reshape(tf.constant(proposals), [-1, 4])
        # ops.native_crop_and_resize: one box per image.
        flat_cropped_gt_mask = tf.image.crop_and_resize(
            tf.expand_dims(flat_gt_masks, -1), flat_normalized_proposals,
            tf.range(batch * max_proposals), [mask_height, mask_width])
        batch_cropped_gt_mask = tf.reshape(flat_cropped_gt_mask,
                                           [batch, -1, mask_height * mask_width])
        mask_losses_weights = batch_mask_target_weights * tf.to_float(paddings_indicator)
        mask_losses = tf.nn.sigmoid_cross_entropy_with_logits(
            labels=batch_cropped_gt_mask,
            logits=reshaped_prediction_masks) * tf.expand_dims(mask_losses_weights, axis=-1)
        total_mask_loss = tf.reduce_sum(mask_losses)
        normalizer = tf.maximum(
            tf.reduce_sum(mask_losses_weights * mask_height * mask_width), 1.0)
        second_stage_mask_loss = total_mask_loss / normalizer
        with tf.Session() as sess:
            got_matches, targets, loss = sess.run(
                [tf.stack(matches), flat_cropped_gt_mask, second_stage_mask_loss])
    for i in range(batch):
        write(folder, "gt_boxes_%d.f32" % i, gt_boxes[i])
        write(folder, "gt_masks_%d.f32" % i, gt_masks[i])
        write(folder, "gt_classes_%d.f32" % i, gt_classes[i])
    write(folder, "proposals.f32", proposals)
    write(folder, "num_proposals.f32", num_proposals)
    write(folder, "prediction_masks.f32", prediction_masks)
    write(folder, "matches.f32", got_matches)
    write(folder, "targets.f32", targets[..., 0])
    write(folder, "loss.f32", np.array([loss]))
    manifest = {"generator": "TensorFlow %s, _loss_box_classifier's mask targets and loss"
                             % tf.__version__, "matches": got_matches.tolist(),
                "loss": float(loss)}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def reframe_case(ops, rng):
    folder = os.path.join(OUT, "reframe")
    os.makedirs(folder, exist_ok=True)
    box_masks = (1.0 / (1.0 + np.exp(-rng.uniform(-4.0, 4.0, size=(3, 4, 5))))).astype(np.float32)
    boxes = np.array([[0.1, 0.2, 0.7, 0.9], [0.0, 0.0, 1.0, 1.0], [0.45, 0.05, 0.8, 0.35]],
                     np.float32)
    graph = tf.Graph()
    with graph.as_default():
        image_masks = ops.reframe_box_masks_to_image_masks(tf.constant(box_masks),
                                                           tf.constant(boxes), 9, 11)
        with tf.Session() as sess:
            got = sess.run(image_masks)
    write(folder, "box_masks.f32", box_masks)
    write(folder, "boxes.f32", boxes)
    write(folder, "image_masks.f32", got)


def main():
    tf.disable_v2_behavior()
    mask_head = load_api()
    import tf_slim as slim  # pylint: disable=g-import-not-at-top
    rng = np.random.RandomState(3839)
    head_case(mask_head, slim, rng, "resize", mask_height=5, mask_width=6,
              mask_prediction_num_conv_layers=3, mask_prediction_conv_depth=0)
    head_case(mask_head, slim, rng, "upsample", mask_height=6, mask_width=6,
              mask_prediction_num_conv_layers=2, mask_prediction_conv_depth=5,
              masks_are_class_agnostic=True, convolve_then_upsample=True)
    loss_case(rng)
    reframe_case(mask_head.ops, rng)


if __name__ == "__main__":
    main()
