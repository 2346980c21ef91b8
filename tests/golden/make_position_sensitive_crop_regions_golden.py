#!/usr/bin/env python3
"""Writes tests/golden/position_sensitive_crop_regions/ with the Object Detection API's own
`ops.batch_position_sensitive_crop_regions` (utils/ops.py, which calls
`position_sensitive_crop_regions` per image, the function R-FCN's RfcnBoxPredictor uses) under
TensorFlow 2.21, and its gradient with respect to the image (tf.gradients).

ops_image_test (tests/unit/) reads the files; they are committed, so the test needs no
TensorFlow. Rerun this script only to refresh them:

    PYTHONPATH=TFOLD ~/.cache/trainyard/venv-tf/bin/python \
        tests/golden/make_position_sensitive_crop_regions_golden.py

where TFOLD holds tfold/object_detection (telize-ai/tfold, commit b7e1a7e, a 2019 copy of the
API). The API's utils/ops.py, shape_utils.py and static_shape.py are executed as they are but for
one rewrite, `import tensorflow as tf` to `import tensorflow.compat.v1 as tf` (the code is
TF 1.x), in a tf.compat.v1 graph.

Which crop: position_sensitive_crop_regions calls matmul_crop_and_resize when the split and the
boxes have static shapes and tf.image.crop_and_resize otherwise. The boxes are fed through a
placeholder of shape [batch, None, 4], so the goldens come from the tf.image.crop_and_resize path
(samples outside the image read 0). The matmul path weighs a sample less than one pixel outside
the image with the border pixel (a tent kernel) instead; R-FCN's proposals are clipped to the
image, where the two agree: the script asserts that (1e-5) on the boxes inside the image.

Files (raw arrays, row-major, little-endian, no header; shapes in manifest.json):
  image.f32   [2, 7, 9, 36] the feature maps
  boxes.f32   [2, 5, 4] (y1, x1, y2, x2) per image: inside, flipped in y and in both axes,
              partly outside, small
  <case>.f32        the op's output, [2, 5, K, K', 36 / (bins_y bins_x)]
  <case>_dout.f32   an output gradient of that shape
  <case>_dimage.f32 the gradient of sum(output * dout) with respect to the image
"""
import json
import os
import sys
import types

import numpy as np
import tensorflow.compat.v1 as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "position_sensitive_crop_regions")

CASES = [  # name, crop size, spatial bins, global_pool
    ("bins3x3_crop6x6_global", [6, 6], [3, 3], True),
    ("bins3x3_crop6x6_assembled", [6, 6], [3, 3], False),
    ("bins2x2_crop4x4_global", [4, 4], [2, 2], True),
    ("bins2x2_crop4x4_assembled", [4, 4], [2, 2], False),
    ("bins1x1_crop4x4_global", [4, 4], [1, 1], True),
    ("bins1x1_crop4x4_assembled", [4, 4], [1, 1], False),
    ("bins2x3_crop4x6_assembled", [4, 6], [2, 3], False),
    ("bins3x1_crop6x4_global", [6, 4], [3, 1], True),
]


def load_api_ops():
    """The API's utils/ops.py (and the two utils it needs) with the one import rewrite."""
    for entry in sys.path:
        base = os.path.join(entry, "tfold", "object_detection", "utils")
        if os.path.isfile(os.path.join(base, "ops.py")):
            break
    else:
        sys.exit("tfold/object_detection/utils/ops.py is not on PYTHONPATH")
    module = None
    for name in ("static_shape", "shape_utils", "ops"):
        path = os.path.join(base, name + ".py")
        with open(path) as f:
            text = f.read()
        text = text.replace("\nimport tensorflow as tf\n", "\nimport tensorflow.compat.v1 as tf\n")
        module = types.ModuleType("tfold.object_detection.utils." + name)
        module.__file__ = path
        sys.modules[module.__name__] = module
        exec(compile(text, path, "exec"), module.__dict__)  # pylint: disable=exec-used
    return module


def write(name, array):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(array, dtype=np.float32).tobytes())


def main():
    tf.disable_eager_execution()
    api_ops = load_api_ops()
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(38)
    image = rng.uniform(-1.0, 1.0, size=(2, 7, 9, 36)).astype(np.float32)
    boxes = np.array([[[0.12, 0.07, 0.83, 0.91],     # inside
                       [0.77, 0.18, 0.21, 0.64],     # flipped rows
                       [0.93, 0.86, 0.06, 0.11],     # flipped in both axes
                       [-0.27, 0.33, 0.58, 1.22],    # partly outside (top, right)
                       [0.41, 0.52, 0.57, 0.61]],    # small
                      [[0.03, 0.02, 0.97, 0.98],
                       [0.58, -0.31, 1.14, 0.47],    # partly outside (left, bottom)
                       [0.24, 0.69, 0.62, 0.13],     # flipped columns
                       [0.35, 0.35, 0.36, 0.37],     # tiny
                       [1.3, 0.2, 1.6, 0.8]]],       # wholly outside
                     dtype=np.float32)
    inside = [0, 1, 2, 4]  # the boxes of image 0 inside the image, for the matmul check
    write("image.f32", image)
    write("boxes.f32", boxes)
    manifest = {"generator": "TensorFlow %s, the Object Detection API's "
                             "ops.batch_position_sensitive_crop_regions" % tf.__version__,
                "image_shape": list(image.shape), "boxes_shape": list(boxes.shape), "cases": []}
    image_t = tf.constant(image)
    boxes_t = tf.placeholder(tf.float32, [2, None, 4])
    with tf.Session() as sess:
        for name, crop, bins, global_pool in CASES:
            out_t = api_ops.batch_position_sensitive_crop_regions(
                image_t, boxes_t, crop_size=crop, num_spatial_bins=bins, global_pool=global_pool)
            out = sess.run(out_t, {boxes_t: boxes})
            dout = rng.uniform(-1.0, 1.0, size=out.shape).astype(np.float32)
            (dimage_t,) = tf.gradients(tf.reduce_sum(out_t * dout), [image_t])
            dimage = sess.run(dimage_t, {boxes_t: boxes})
            # The matmul path (static shapes) on the boxes inside the image.
            static = api_ops.position_sensitive_crop_regions(
                image_t[0], tf.constant(boxes[0, inside]), crop_size=crop,
                num_spatial_bins=bins, global_pool=global_pool)
            gap = np.abs(sess.run(static) - out[0, inside]).max()
            assert gap < 1e-5, (name, gap)
            write(name + ".f32", out)
            write(name + "_dout.f32", dout)
            write(name + "_dimage.f32", dimage)
            manifest["cases"].append({"name": name, "crop_size": crop, "num_spatial_bins": bins,
                                      "global_pool": global_pool, "shape": list(out.shape),
                                      "matmul_path_gap_inside": float(gap)})
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
