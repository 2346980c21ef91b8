#!/usr/bin/env python3
"""Writes tests/golden/fake_quant/ with TensorFlow 2.21's own fake quantization ops:
tf.quantization.fake_quant_with_min_max_vars and fake_quant_with_min_max_vars_per_channel, and
their gradient ops tf.raw_ops.FakeQuantWithMinMaxVarsGradient and
FakeQuantWithMinMaxVarsPerChannelGradient (the ops TensorFlow registers as the forward ops'
gradients; the script asserts that tf.GradientTape gives the same bits).

ops_quantization_test (tests/unit/) reads the files and demands the same bits; they are
committed, so the test needs no TensorFlow. Rerun this script only to refresh them:

    ~/.cache/trainyard/venv-tf/bin/python tests/golden/make_fake_quant_goldens.py

The inputs of each case: values drawn around and beyond the range, the nudged range's two ends
exactly, values just inside and outside them, every representable level, and the exact
half-steps between levels (the ties of TensorFlow's floor(x / scale - zero + 0.5)). The ranges
include ones TensorFlow nudges: a zero point that is not an integer, min > 0 (nudged to 0), max
< 0 (nudged to 0), and (per channel) a channel with min = max = 0, which gives zeros. The output
gradients are multiples of 1/16 below 4 in magnitude, so the sums that make the gradients for
min and max are exact in any order of addition: TensorFlow's Eigen reductions sum in an order of
their own, and bit-for-bit equality must not depend on it.

Files (raw arrays, row-major, little-endian f32, no header; shapes in manifest.json), per case:
  <case>_x.f32    the inputs                 <case>_min.f32, <case>_max.f32  the range ([] or [C])
  <case>_y.f32    the op's output            <case>_dy.f32   an output gradient
  <case>_dx.f32, <case>_dmin.f32, <case>_dmax.f32  the gradient op's three outputs
"""
import json
import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fake_quant")

# name, per_channel, input shape, mins, maxs, num_bits, narrow_range. A per-tensor case has one
# min and one max.
CASES = [
    ("vars_b8_sym", False, [6, 40], [-1.0], [1.0], 8, False),
    ("vars_b8_sym_narrow", False, [6, 40], [-1.0], [1.0], 8, True),
    ("vars_b8_offset", False, [5, 48], [-0.37], [5.91], 8, False),
    ("vars_b8_min_positive", False, [5, 48], [0.1], [2.3], 8, False),
    ("vars_b8_max_negative", False, [5, 48], [-3.7], [-0.2], 8, True),
    ("vars_b4_offset", False, [4, 30], [-2.3], [0.7], 4, False),
    ("vars_b4_narrow", False, [4, 30], [-0.6], [6.2], 4, True),
    ("vars_b2_wide", False, [3, 20], [-10.0], [3.0], 2, False),
    ("vars_b16_offset", False, [3, 40], [-0.77], [1.3], 16, False),
    ("vars_b8_zero_range", False, [2, 10], [0.0], [0.0], 8, False),
    ("per_channel_b8", True, [3, 2, 5, 6], [-1.0, -0.37, 0.1, -3.7, 0.0, -6.0],
     [1.0, 5.91, 2.3, -0.2, 0.0, 6.0], 8, False),
    ("per_channel_b8_narrow", True, [4, 9, 6], [-1.0, -0.37, 0.1, -3.7, -0.05, -6.0],
     [1.0, 5.91, 2.3, -0.2, 0.05, 6.0], 8, True),
    ("per_channel_b4", True, [60, 4], [-2.3, 0.25, -0.6, -1.5], [0.7, 3.0, 6.2, -0.5], 4, False),
    ("per_channel_b4_narrow", True, [2, 30, 4], [-2.3, 0.25, -0.6, 0.0],
     [0.7, 3.0, 6.2, 0.0], 4, True),
    ("per_channel_1d", True, [3], [-1.0, 0.3, -0.9], [1.0, 0.9, -0.3], 8, False),
    # Ranges whose scale ((max - min) / levels) or inv_scale (levels / (max - min)) is subnormal
    # in f32, with min and max normal: TensorFlow's kernels run with denormals flushed to zero,
    # so the scale is 0 (the nudged range [0, 0], NaN outputs where it divides by it).
    ("vars_b8_subnormal_scale", False, [4, 10], [-1e-36], [1e-36], 8, False),
    ("vars_b2_subnormal_inv_scale", False, [4, 10], [-1.5e38], [1.5e38], 2, False),
    ("per_channel_b8_subnormal_scale", True, [10, 3], [-1e-36, 0.0, -1e-37], [1e-36, 1e-36, 2e-37],
     8, False),
    ("per_channel_b2_subnormal", True, [12, 3], [-1.5e-38, -1.5e38, -1.0], [1.5e-38, 1.5e38, 1.0],
     2, False),
]


def write(name, array):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


def forward(x, lo, hi, per_channel, num_bits, narrow):
    if per_channel:
        return tf.quantization.fake_quant_with_min_max_vars_per_channel(
            x, lo, hi, num_bits=num_bits, narrow_range=narrow)
    return tf.quantization.fake_quant_with_min_max_vars(
        x, lo, hi, num_bits=num_bits, narrow_range=narrow)


def interesting_values(lo, hi, num_bits, narrow, per_channel, rng, count):
    """`count` f32 inputs for one range: its nudged ends (as TensorFlow's op gives them), their
    neighbours, the levels and half-steps between them, and random values around the range."""
    f32 = np.float32
    far = [[-1e30], [1e30]] if per_channel else [-1e30, 1e30]
    ends = forward(tf.constant(far, tf.float32), [f32(lo)] if per_channel else f32(lo),
                   [f32(hi)] if per_channel else f32(hi), per_channel, num_bits, narrow)
    nmin, nmax = (f32(v) for v in np.asarray(ends).reshape(-1))
    levels = (1 << num_bits) - (2 if narrow else 1)
    scale = (f32(hi) - f32(lo)) / f32(levels)
    special = [nmin, nmax, np.nextafter(nmin, f32(-np.inf)), np.nextafter(nmin, f32(np.inf)),
               np.nextafter(nmax, f32(-np.inf)), np.nextafter(nmax, f32(np.inf)),
               nmin - f32(1.5), nmax + f32(2.25), f32(0.0), f32(-0.0)]
    if scale > 0:
        steps = rng.choice(levels, size=min(levels, count // 3), replace=False).astype(np.float32)
        special += list(nmin + steps * scale)                      # levels
        special += list(nmin + (steps + f32(0.5)) * scale)         # half-steps (ties)
    values = np.array(special, dtype=np.float32)
    width = max(abs(hi - lo), 1.0)
    if 0 < abs(hi - lo) < 1e-30:  # a range near FLT_MIN: values at its scale
        width = 10 * abs(hi - lo)
    extra = rng.uniform(lo - 0.3 * width, hi + 0.3 * width, size=count).astype(np.float32)
    values = np.concatenate([values, extra])[:count]
    rng.shuffle(values)
    return values


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261206)
    manifest = {"generator": "TensorFlow %s: tf.quantization.fake_quant_with_min_max_vars, "
                             "fake_quant_with_min_max_vars_per_channel and "
                             "tf.raw_ops.FakeQuantWithMinMaxVars(PerChannel)Gradient"
                             % tf.__version__, "cases": []}
    for name, per_channel, shape, mins, maxs, num_bits, narrow in CASES:
        shape = list(shape)
        channels = shape[-1] if per_channel else 1
        rows = int(np.prod(shape)) // channels
        x = np.zeros([rows, channels], np.float32)
        for c in range(channels):
            x[:, c] = interesting_values(mins[c], maxs[c], num_bits, narrow, per_channel, rng, rows)
        x = x.reshape(shape)
        lo = np.array(mins if per_channel else mins[0], np.float32)
        hi = np.array(maxs if per_channel else maxs[0], np.float32)
        dy = (rng.integers(-63, 64, size=shape) / 16.0).astype(np.float32)
        xt, lot, hit = tf.constant(x), tf.constant(lo), tf.constant(hi)
        y = forward(xt, lot, hit, per_channel, num_bits, narrow).numpy()
        grad_op = (tf.raw_ops.FakeQuantWithMinMaxVarsPerChannelGradient if per_channel else
                   tf.raw_ops.FakeQuantWithMinMaxVarsGradient)
        dx, dmin, dmax = (t.numpy() for t in grad_op(
            gradients=tf.constant(dy), inputs=xt, min=lot, max=hit, num_bits=num_bits,
            narrow_range=narrow))
        with tf.GradientTape() as tape:
            tape.watch([xt, lot, hit])
            loss = tf.reduce_sum(forward(xt, lot, hit, per_channel, num_bits, narrow) * dy)
        taped = [t.numpy() for t in tape.gradient(loss, [xt, lot, hit])]
        for a, b in zip(taped, (dx, dmin, dmax)):
            assert a.tobytes() == b.tobytes(), name + ": the tape's gradient differs"
        for suffix, array in (("x", x), ("min", lo), ("max", hi), ("y", y), ("dy", dy),
                              ("dx", dx), ("dmin", dmin), ("dmax", dmax)):
            write("%s_%s.f32" % (name, suffix), array)
        manifest["cases"].append({"name": name, "per_channel": per_channel, "shape": shape,
                                  "min": [float(v) for v in mins],
                                  "max": [float(v) for v in maxs], "num_bits": num_bits,
                                  "narrow_range": narrow})
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
