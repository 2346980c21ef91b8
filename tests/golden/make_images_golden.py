#!/usr/bin/env python3
"""Writes tests/golden/images/ with TensorFlow itself: small encoded images and what
tf.io.decode_image makes of them, tf.compat.v1.image.resize_bilinear (align_corners=False,
half_pixel_centers=False, as TF-Slim's vgg_preprocessing calls it) on a float and a uint8
image, and TF-Slim's vgg_preprocessing.preprocess_for_eval on one image.

image_codec_test and image_ops_test (tests/unit/) and image_transforms_test read the files
through manifest.json. The files are committed, so the tests need no TensorFlow; rerun this
script only to refresh them:

    /work/venv-peers/bin/python tests/golden/make_images_golden.py

Files (all raw arrays are row-major, little-endian, without a header; shapes in manifest.json):
  <name>.png / <name>.jpg          the encoded image
  <name>.c<k>.u8                   tf.io.decode_image(bytes, channels=k), k in 0, 1, 3
  resize_in_f32.f32, resize_in_u8.u8, resize_<src>_<h>x<w>.f32
                                   resize_bilinear of the f32 (or u8) input to h x w (f32 out)
  vgg_eval_in.u8, vgg_eval_out.f32 slim's preprocess_for_eval(image, 24, 24, resize_side=32)
"""
import json
import os

import numpy as np
from PIL import Image
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "images")

H, W = 13, 17


def pattern(channels, dtype=np.uint8, maxval=255):
    y, x = np.mgrid[0:H, 0:W]
    planes = []
    for c in range(channels):
        v = (x * (37 + 11 * c) + y * (23 + 7 * c) + (x * y) % (5 + c) * 9) % (maxval + 1)
        planes.append(v)
    return np.stack(planes, axis=-1).astype(dtype)


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"generator": "TensorFlow " + tf.__version__, "decode": [], "resize": []}
    encoded = {}
    encoded["rgb.png"] = tf.io.encode_png(pattern(3)).numpy()
    encoded["gray.png"] = tf.io.encode_png(pattern(1)).numpy()
    encoded["rgba.png"] = tf.io.encode_png(pattern(4)).numpy()
    # 16 bits: low bytes 0x00..0xff, so that stripping and scaling to 8 bits differ.
    encoded["rgb16.png"] = tf.io.encode_png(pattern(3, np.uint16, 65535)).numpy()
    # Palette with a transparent entry (tRNS), written by Pillow (TensorFlow writes no palettes).
    palette_image = Image.fromarray(pattern(1)[:, :, 0] % 16, mode="L").convert("P")
    palette_image.putpalette(
        [v for i in range(16) for v in (i * 16, 255 - i * 16, (i * 77) % 256)])
    path = os.path.join(OUT, "palette.png")
    palette_image.save(path, transparency=3)
    with open(path, "rb") as f:
        encoded["palette.png"] = f.read()
    encoded["rgb.jpg"] = tf.io.encode_jpeg(pattern(3), quality=90).numpy()
    encoded["gray.jpg"] = tf.io.encode_jpeg(pattern(1), quality=90).numpy()
    encoded["progressive.jpg"] = tf.io.encode_jpeg(pattern(3), quality=75,
                                                   progressive=True).numpy()
    for name, data in encoded.items():
        write(name, data)
        for channels in (0, 1, 3):
            image = tf.io.decode_image(data, channels=channels, expand_animations=False).numpy()
            out = "%s.c%d.u8" % (name, channels)
            write(out, image.astype(np.uint8).tobytes())
            manifest["decode"].append({"file": name, "channels": channels, "output": out,
                                       "shape": list(image.shape)})

    rng = np.random.RandomState(13)
    f32_in = (rng.rand(7, 9, 3) * 255).astype(np.float32)
    u8_in = rng.randint(0, 256, size=(7, 9, 2)).astype(np.uint8)
    write("resize_in_f32.f32", f32_in.tobytes())
    write("resize_in_u8.u8", u8_in.tobytes())
    manifest["resize_inputs"] = {"f32": {"file": "resize_in_f32.f32", "shape": [7, 9, 3]},
                                 "u8": {"file": "resize_in_u8.u8", "shape": [7, 9, 2]}}
    for src, image in (("f32", f32_in), ("u8", u8_in)):
        for h, w in ((4, 5), (13, 11), (7, 9), (3, 20), (1, 1)):
            out = tf.compat.v1.image.resize_bilinear(image[np.newaxis], [h, w],
                                                     align_corners=False,
                                                     half_pixel_centers=False)[0].numpy()
            name = "resize_%s_%dx%d.f32" % (src, h, w)
            write(name, out.astype(np.float32).tobytes())
            manifest["resize"].append({"input": src, "height": h, "width": w, "output": name})

    # TF-Slim vgg_preprocessing.preprocess_for_eval, written out with its functions' steps.
    vgg_in = rng.randint(0, 256, size=(30, 41, 3)).astype(np.uint8)
    side = 32
    height, width = tf.cast(30, tf.float32), tf.cast(41, tf.float32)
    scale = side / width if 30 > 41 else side / height
    new_h, new_w = int(tf.cast(height * scale, tf.int32)), int(tf.cast(width * scale, tf.int32))
    resized = tf.compat.v1.image.resize_bilinear(vgg_in[np.newaxis], [new_h, new_w],
                                                 align_corners=False)[0]
    off_h, off_w = (new_h - 24) // 2, (new_w - 24) // 2
    cropped = tf.slice(resized, [off_h, off_w, 0], [24, 24, 3])
    vgg_out = (tf.cast(cropped, tf.float32) - [123.68, 116.78, 103.94]).numpy()
    write("vgg_eval_in.u8", vgg_in.tobytes())
    write("vgg_eval_out.f32", vgg_out.astype(np.float32).tobytes())
    manifest["vgg_eval"] = {"input": "vgg_eval_in.u8", "input_shape": [30, 41, 3],
                            "resize_side": side, "resized_shape": [new_h, new_w, 3],
                            "output": "vgg_eval_out.f32", "output_shape": [24, 24, 3]}

    sizes = []
    for h, w, s in ((480, 640, 256), (333, 500, 256), (500, 333, 224), (100, 100, 256),
                    (375, 500, 256), (7, 1000, 3)):
        hf, wf = tf.cast(h, tf.float32), tf.cast(w, tf.float32)
        sf = tf.cast(s, tf.float32)
        scale = tf.cond(hf > wf, lambda: sf / wf, lambda: sf / hf)
        sizes.append([h, w, s, int(tf.cast(hf * scale, tf.int32)),
                      int(tf.cast(wf * scale, tf.int32))])
    manifest["smallest_size_at_least"] = sizes
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
