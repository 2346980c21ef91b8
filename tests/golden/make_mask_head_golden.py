#!/usr/bin/env python3
"""Writes tests/golden/mask_head/ with the Object Detection API's Mask R-CNN mask branch under
TensorFlow 2.21 and tf_slim: MaskRCNNMaskHead (predictors/heads/mask_head.py) as
MaskRCNNBoxPredictor's third stage builds it, and the mask targets and loss of
FasterRCNNMetaArch._loss_box_classifier.

detection_parts_test (tests/unit/) reads the files; they are committed, so the test needs no
TensorFlow. Rerun this script only to refresh them:

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


if __name__ == "__main__":
    main()
