#!/usr/bin/env python3
"""Writes tests/golden/crop_and_resize/ with TensorFlow itself: tf.image.crop_and_resize and
its gradient with respect to the image (tf.raw_ops.CropAndResizeGradImage) on small inputs.

ops_image_test (tests/unit/) reads the files; they are committed, so the test needs no
TensorFlow. Rerun this script only to refresh them, with the test environment's TensorFlow:

    $(bash tests/interop/tf_env.sh python) tests/golden/make_crop_and_resize_golden.py

Files (raw arrays, row-major, little-endian, no header; shapes and settings in manifest.json):
  image.f32       [2, 6, 7, 3] the images
  boxes.f32       [8, 4] (y1, x1, y2, x2): inside, flipped, partly and wholly outside, a point
  box_ind.i32     [8]
  dcrops.f32      [8, 4, 5, 3] the output gradient of the 4 x 5 crops
  crops_<case>.f32  tf.image.crop_and_resize for each case of manifest.json
  dimage_<method>.f32  CropAndResizeGradImage of dcrops for the 4 x 5 crops
"""
import json
import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "crop_and_resize")

CASES = [  # name, method, crop size, extrapolation value
    ("bilinear_4x5", "bilinear", (4, 5), 0.0),
    ("nearest_4x5", "nearest", (4, 5), 0.0),
    ("bilinear_1x1", "bilinear", (1, 1), 0.5),
    ("bilinear_3x2_extrapolate", "bilinear", (3, 2), -1.5),
]


def write(name, array):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(array).tobytes())


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(15)
    image = rng.uniform(-1.0, 1.0, size=(2, 6, 7, 3)).astype(np.float32)
    boxes = np.array([[0.1, 0.15, 0.85, 0.9],     # inside
                      [0.8, 0.75, 0.2, 0.1],      # flipped in both axes
                      [-0.35, 0.3, 0.55, 1.3],    # partly outside: extrapolated samples
                      [0.31, 0.22, 0.47, 0.61],   # small
                      [0.6, 0.4, 0.6, 0.4],       # a single point
                      [1.2, -0.5, 1.6, -0.1],     # wholly outside
                      [0.05, -0.2, 0.95, 0.45],   # outside on the left
                      [0.7, 0.05, 0.0, 0.97]],    # flipped rows
                     dtype=np.float32)
    box_ind = np.array([0, 1, 1, 0, 1, 0, 1, 0], dtype=np.int32)
    dcrops = rng.uniform(-1.0, 1.0, size=(8, 4, 5, 3)).astype(np.float32)
    write("image.f32", image)
    write("boxes.f32", boxes)
    write("box_ind.i32", box_ind)
    write("dcrops.f32", dcrops)
    manifest = {"generator": "TensorFlow " + tf.__version__, "image_shape": list(image.shape),
                "num_boxes": len(boxes), "crops": [], "dimage": []}
    for name, method, size, extrapolation in CASES:
        crops = tf.image.crop_and_resize(image, boxes, box_ind, size, method=method,
                                         extrapolation_value=extrapolation).numpy()
        write("crops_%s.f32" % name, crops.astype(np.float32))
        manifest["crops"].append({"file": "crops_%s.f32" % name, "method": method,
                                  "crop_size": list(size), "extrapolation_value": extrapolation,
                                  "shape": list(crops.shape)})
    for method in ("bilinear", "nearest"):
        dimage = tf.raw_ops.CropAndResizeGradImage(
            grads=dcrops, boxes=boxes, box_ind=box_ind, image_size=list(image.shape),
            T=tf.float32, method=method).numpy()
        write("dimage_%s.f32" % method, dimage.astype(np.float32))
        manifest["dimage"].append({"file": "dimage_%s.f32" % method, "method": method,
                                   "dcrops": "dcrops.f32", "crop_size": [4, 5],
                                   "shape": list(dimage.shape)})
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
