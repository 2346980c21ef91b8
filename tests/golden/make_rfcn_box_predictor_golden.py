#!/usr/bin/env python3
"""Writes tests/golden/rfcn_box_predictor/ with the Object Detection API's own RfcnBoxPredictor
(predictors/rfcn_box_predictor.py, R-FCN's second stage) under TensorFlow 2.21 and tf_slim.

detection_parts_test (tests/unit/) reads the files; they are committed, so the test needs no
TensorFlow. Rerun this script only to refresh them:

    PYTHONPATH=TFOLD ~/.cache/trainyard/venv-tf/bin/python \
        tests/golden/make_rfcn_box_predictor_golden.py

where TFOLD holds tfold/object_detection (telize-ai/tfold, commit b7e1a7e, a 2019 copy of the
API); tf_slim must be installed in that Python. The API's core/box_predictor.py,
predictors/rfcn_box_predictor.py, utils/{static_shape,shape_utils,ops}.py are executed as they
are but for two rewrites: `import tensorflow as tf` to `import tensorflow.compat.v1 as tf` (the
code is TF 1.x) and `slim = tf.contrib.slim` to `import tf_slim as slim`.

What runs: RfcnBoxPredictor(is_training=True, num_classes=2, num_spatial_bins=[2, 2], depth=8,
crop_size=[4, 4], box_code_size=4) with the conv_hyperparams that hyperparams_builder makes of
`op: CONV, activation: RELU (the default), no batch_norm` (slim.conv2d with ReLU and biases), its
predict([features], [1], scope='SecondStageBoxPredictor', proposal_boxes=boxes) on fixed
features and proposals inside the image (where the API's matmul_crop_and_resize path, taken here
as the shapes are static, equals tf.image.crop_and_resize). The variables are set to the values
in the files below, written in the order the predictor creates them.

Files (raw float32, row-major, little-endian; shapes in manifest.json):
  features.f32  [2, 5, 6, 6] box classifier features
  boxes.f32     [2, 3, 4] normalized proposals
  <variable name with / as __>.f32  each variable's value
  box_encodings.f32  [6, 1, 2, 4]; class_predictions.f32 [6, 1, 3]
"""
import json
import os
import sys
import types

import numpy as np
import tensorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "rfcn_box_predictor")


def load_api():
    for entry in sys.path:
        base = os.path.join(entry, "tfold", "object_detection")
        if os.path.isfile(os.path.join(base, "predictors", "rfcn_box_predictor.py")):
            break
    else:
        sys.exit("tfold/object_detection/predictors/rfcn_box_predictor.py is not on PYTHONPATH")
    module = None
    for name in ("utils/static_shape", "utils/shape_utils", "utils/ops", "core/box_predictor",
                 "predictors/rfcn_box_predictor"):
        path = os.path.join(base, name + ".py")
        with open(path) as f:
            text = f.read()
        text = text.replace("\nimport tensorflow as tf\n", "\nimport tensorflow.compat.v1 as tf\n")
        text = text.replace("\nslim = tf.contrib.slim\n", "\nimport tf_slim as slim\n")
        module = types.ModuleType("tfold.object_detection." + name.replace("/", "."))
        module.__file__ = path
        sys.modules[module.__name__] = module
        exec(compile(text, path, "exec"), module.__dict__)  # pylint: disable=exec-used
    return module


def write(name, array):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(array, dtype=np.float32).tobytes())


def main():
    tf.disable_eager_execution()
    rfcn = load_api()
    import tf_slim as slim  # pylint: disable=g-import-not-at-top
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(3838)
    features = rng.uniform(-1.0, 1.0, size=(2, 5, 6, 6)).astype(np.float32)
    boxes = np.array([[[0.1, 0.05, 0.8, 0.9], [0.37, 0.21, 0.62, 0.48], [0.0, 0.5, 1.0, 1.0]],
                      [[0.22, 0.11, 0.93, 0.71], [0.55, 0.6, 0.95, 0.97], [0.03, 0.02, 0.3, 0.4]]],
                     dtype=np.float32)

    def conv_hyperparams_fn():
        with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                            weights_initializer=tf.truncated_normal_initializer(stddev=0.01),
                            normalizer_fn=None) as sc:
            return sc

    predictor = rfcn.RfcnBoxPredictor(is_training=True, num_classes=2,
                                      conv_hyperparams_fn=conv_hyperparams_fn,
                                      num_spatial_bins=[2, 2], depth=8, crop_size=[4, 4],
                                      box_code_size=4)
    out = predictor.predict([tf.constant(features)], num_predictions_per_location=[1],
                            scope="SecondStageBoxPredictor", proposal_boxes=tf.constant(boxes))
    manifest = {"generator": "TensorFlow %s, the Object Detection API's RfcnBoxPredictor"
                             % tf.__version__, "variables": []}
    assigns = []
    for v in tf.global_variables():
        shape = v.shape.as_list()
        value = rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)
        assigns.append(v.assign(value))
        fname = v.op.name.replace("/", "__") + ".f32"
        write(fname, value)
        manifest["variables"].append({"name": v.op.name, "shape": shape, "file": fname})
    with tf.Session() as sess:
        sess.run(assigns)
        box_encodings, class_predictions = sess.run(
            [out["box_encodings"][0], out["class_predictions_with_background"][0]])
    write("features.f32", features)
    write("boxes.f32", boxes)
    write("box_encodings.f32", box_encodings)
    write("class_predictions.f32", class_predictions)
    manifest["box_encodings"] = list(box_encodings.shape)
    manifest["class_predictions"] = list(class_predictions.shape)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
