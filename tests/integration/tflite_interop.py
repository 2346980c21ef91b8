"""TensorFlow Lite's interpreter computes what Trainyard computes, from Trainyard's TFLite exports.

onnx_interop_writer (with --tflite 1) exports lenet, resnet_20, mobilenet_v1 (depth multiplier
0.25, 64x64; also with use_explicit_padding, for PAD) and a small resnet_v1 with Trainyard's
TFLite exporter and writes Trainyard's probabilities on a batch of fixed images. TensorFlow's
tf.lite.Interpreter must load each file (its flatbuffer verifier and op resolver accept it), with
its default kernels (the XNNPACK delegate) and with its builtin kernels alone, take
a float32 [1, H, W, C] input "image" whose shape_signature is [-1, H, W, C] (the batch is
dynamic) and give a float32 [1, classes] output "probabilities", and give Trainyard's
probabilities to 1e-4 (absolute), image by image and for the whole batch at once after
resize_tensor_input (strict: only a dynamic dimension may change). Then `trainyard export
--format tflite` exports lenet from a train_dir (pipeline.config and a checkpoint of the same
variables) and the interpreter checks that file the same way.

With --yt8m_writer, onnx_yt8m_interop_writer (--tflite 1) exports the YouTube-8M video-level
models (LogisticModel, MoeModel, MoeModel with low-rank and probability gating) and
FrameLevelLogisticModel (7 and 300 frames) with the L2 normalization of their features, and the
interpreter must take a float32 input "features" [1, D] or [1, frames, D] (and the frame-level
int32 "num_frames" [1]), every shape_signature [-1, ...], and give Trainyard's "predictions" the
same way (the frame-level batches mix 1, some and all frames, with random values past
num_frames); then `trainyard export --format tflite` exports MoeModel and the 300-frame model
from their train_dirs (model_flags.json and a checkpoint). Prints the operators each model uses and the largest difference per model.

    python tflite_interop.py --trainyard BIN --writer BIN --yt8m_writer BIN --work_dir D
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

TOLERANCE = 1e-4


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


# The interpreter's default kernels (with the XNNPACK delegate) and its builtin kernels alone.
RESOLVERS = {
    "default": tf.lite.experimental.OpResolverType.AUTO,
    "builtin": tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}


def check(path, feeds, expected, label, output="probabilities"):
    """feeds: {input name: the batch's values}; expected: Trainyard's outputs for the batch."""
    if not isinstance(feeds, dict):
        feeds = {"image": feeds}
    ok = True
    for resolver in RESOLVERS:
        ok &= check_with(path, feeds, expected, f"{label} ({resolver} kernels)", resolver, output)
    return ok


def check_with(path, feeds, expected, label, resolver, output):
    interpreter = tf.lite.Interpreter(model_path=path, num_threads=1,
                                      experimental_op_resolver_type=RESOLVERS[resolver])
    interpreter.allocate_tensors()
    inputs = {detail["name"]: detail for detail in interpreter.get_input_details()}
    (output_detail,) = interpreter.get_output_details()
    if sorted(inputs) != sorted(feeds) or output_detail["name"] != output:
        sys.exit(f"FAILED: {label}: inputs {sorted(inputs)}, output {output_detail['name']!r}; "
                 f"expected {sorted(feeds)} and {output!r}")
    for name, values in feeds.items():
        detail = inputs[name]
        if detail["dtype"] != values.dtype or list(detail["shape"]) != [1, *values.shape[1:]]:
            sys.exit(f"FAILED: {label}: input {name} {detail['dtype']} {detail['shape']}")
    for detail in (*inputs.values(), output_detail):
        if detail["shape_signature"][0] != -1 or list(detail["shape_signature"][1:]) != list(
                detail["shape"][1:]):
            sys.exit(f"FAILED: {label}: {detail['name']} has shape_signature "
                     f"{detail['shape_signature']}; expected a dynamic batch [-1, ...]")
    got = []
    for i in range(len(expected)):
        for name, values in feeds.items():
            interpreter.set_tensor(inputs[name]["index"], values[i:i + 1])
        interpreter.invoke()
        got.append(interpreter.get_tensor(output_detail["index"])[0].copy())
    got = np.stack(got)
    if got.shape != expected.shape:
        sys.exit(f"FAILED: {label}: the interpreter gives {got.shape}, Trainyard {expected.shape}")
    # Probabilities that do not change from example to example would hide the early layers.
    spread = float(np.max(np.std(expected, axis=0)))
    if spread < 1e-3:
        sys.exit(f"FAILED: {label}: Trainyard's probabilities hardly depend on the input "
                 f"(largest spread over the batch {spread:.3g}); the check would be blind")
    ops = sorted({op["op_name"] for op in interpreter._get_ops_details()})
    difference = float(np.max(np.abs(got - expected)))
    # The whole batch in one invocation.
    for name, values in feeds.items():
        interpreter.resize_tensor_input(inputs[name]["index"], list(values.shape), strict=True)
    interpreter.allocate_tensors()
    for name, values in feeds.items():
        interpreter.set_tensor(inputs[name]["index"], values)
    interpreter.invoke()
    whole = interpreter.get_tensor(output_detail["index"])
    if whole.shape != expected.shape:
        sys.exit(f"FAILED: {label}: a batch of {len(expected)} gives {whole.shape}, "
                 f"Trainyard {expected.shape}")
    difference = max(difference, float(np.max(np.abs(whole - expected))))
    status = "ok" if difference <= TOLERANCE else "FAILED"
    print(f"{status}: {label}: {len(interpreter._get_ops_details())} operators ({', '.join(ops)}), "
          f"largest probability {float(expected.max()):.3f}, "
          f"max |tflite - trainyard| = {difference:.3g} (one by one and {len(expected)} at once)")
    return difference <= TOLERANCE


def check_yt8m(args, out):
    """The YouTube-8M models the TFLite export takes, from the writer and from train_dirs."""
    run([args.yt8m_writer, "--output_dir", out, "--opset", "13", "--tflite", "1"])
    cases = {}
    with open(os.path.join(out, "manifest.txt")) as manifest:
        for line in manifest:
            name, max_frames, size, classes, batch = line.split()
            max_frames, size, classes, batch = map(int, (max_frames, size, classes, batch))
            if not os.path.exists(os.path.join(out, name + ".tflite")):
                continue  # the recurrent models: time-major steps, not exported to TFLite yet
            features = np.fromfile(os.path.join(out, name + ".features.f32"), np.float32)
            feeds = {"features": features.reshape(
                (batch, max_frames, size) if max_frames else (batch, size))}
            if max_frames:
                feeds["num_frames"] = np.fromfile(os.path.join(out, name + ".num_frames.i32"),
                                                  np.int32)
            expected = np.fromfile(os.path.join(out, name + ".predictions.f32"), np.float32)
            cases[name] = (feeds, expected.reshape(batch, classes))
    wanted = ["frame_logistic", "frame_logistic_300", "logistic", "moe", "moe_low_rank_prob_gating"]
    if sorted(cases) != wanted:
        sys.exit(f"FAILED: the YouTube-8M writer exported {sorted(cases)}, expected {wanted}")
    ok = True
    for name, (feeds, expected) in cases.items():
        ok &= check(os.path.join(out, name + ".tflite"), feeds, expected, name, "predictions")
    for name in ("moe", "frame_logistic_300"):
        exported = os.path.join(out, name + "_from_train_dir.tflite")
        log = run([args.trainyard, "export", "--train_dir", os.path.join(out, name + "_train_dir"),
                   "--format", "tflite", "--output", exported])
        print(log.strip())
        feeds, expected = cases[name]
        ok &= check(exported, feeds, expected, f"trainyard export --format tflite ({name})",
                    "predictions")
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--yt8m_writer", required=True)
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    print(f"tensorflow {tf.__version__}")
    out = args.work_dir
    shutil.rmtree(out, ignore_errors=True)
    run([args.writer, "--output_dir", out, "--opset", "13", "--tflite", "1"])
    cases = {}
    with open(os.path.join(out, "manifest.txt")) as manifest:
        for line in manifest:
            name, h, w, c, classes, batch = line.split()
            h, w, c, classes, batch = map(int, (h, w, c, classes, batch))
            images = np.fromfile(os.path.join(out, name + ".images.f32"), np.float32)
            expected = np.fromfile(os.path.join(out, name + ".probabilities.f32"), np.float32)
            cases[name] = (images.reshape(batch, h, w, c), expected.reshape(batch, classes))
    if len(cases) != 5:
        sys.exit(f"FAILED: the writer exported {sorted(cases)}")
    ok = True
    for name, (images, expected) in cases.items():
        ok &= check(os.path.join(out, name + ".tflite"), images, expected, name)
    # The host command, from a train_dir's pipeline.config and checkpoint.
    exported = os.path.join(out, "lenet_from_train_dir.tflite")
    log = run([args.trainyard, "export", "--train_dir", os.path.join(out, "lenet_train_dir"),
               "--format", "tflite", "--output", exported])
    print(log.strip())
    if os.path.exists(exported + ".tmp"):
        sys.exit(f"FAILED: {exported}.tmp was left behind")
    images, expected = cases["lenet"]
    ok &= check(exported, images, expected, "trainyard export --format tflite (lenet)")
    ok &= check_yt8m(args, os.path.join(out, "yt8m"))
    if not ok:
        sys.exit(f"FAILED: TFLite's interpreter differs from Trainyard by more than {TOLERANCE}")
    print("all TFLite exports agree with Trainyard")


if __name__ == "__main__":
    main()
