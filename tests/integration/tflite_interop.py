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
models (LogisticModel, MoeModel, MoeModel with low-rank and probability gating) with the L2
normalization of their features, and the interpreter must take a float32 [1, D] input
"features" (shape_signature [-1, D]) and give Trainyard's "predictions" the same way; then
`trainyard export --format tflite` exports MoeModel from its train_dir (model_flags.json and a
checkpoint). Prints the operators each model uses and the largest difference per model.

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


def check(path, images, expected, label, names=("image", "probabilities")):
    ok = True
    for resolver in RESOLVERS:
        ok &= check_with(path, images, expected, f"{label} ({resolver} kernels)", resolver, names)
    return ok


def check_with(path, images, expected, label, resolver, names):
    interpreter = tf.lite.Interpreter(model_path=path, num_threads=1,
                                      experimental_op_resolver_type=RESOLVERS[resolver])
    interpreter.allocate_tensors()
    (input_detail,) = interpreter.get_input_details()
    (output_detail,) = interpreter.get_output_details()
    if (input_detail["name"], output_detail["name"]) != names:
        sys.exit(f"FAILED: {label}: input {input_detail['name']!r}, output "
                 f"{output_detail['name']!r}; expected {names}")
    if input_detail["dtype"] != np.float32 or list(input_detail["shape"]) != [1, *images.shape[1:]]:
        sys.exit(f"FAILED: {label}: input {input_detail['dtype']} {input_detail['shape']}")
    for detail in (input_detail, output_detail):
        if detail["shape_signature"][0] != -1 or list(detail["shape_signature"][1:]) != list(
                detail["shape"][1:]):
            sys.exit(f"FAILED: {label}: {detail['name']} has shape_signature "
                     f"{detail['shape_signature']}; expected a dynamic batch [-1, ...]")
    got = []
    for image in images:
        interpreter.set_tensor(input_detail["index"], image[np.newaxis])
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
    interpreter.resize_tensor_input(input_detail["index"], list(images.shape), strict=True)
    interpreter.allocate_tensors()
    interpreter.set_tensor(input_detail["index"], images)
    interpreter.invoke()
    whole = interpreter.get_tensor(output_detail["index"])
    if whole.shape != expected.shape:
        sys.exit(f"FAILED: {label}: a batch of {len(images)} gives {whole.shape}, "
                 f"Trainyard {expected.shape}")
    difference = max(difference, float(np.max(np.abs(whole - expected))))
    status = "ok" if difference <= TOLERANCE else "FAILED"
    print(f"{status}: {label}: {len(interpreter._get_ops_details())} operators ({', '.join(ops)}), "
          f"largest probability {float(expected.max()):.3f}, "
          f"max |tflite - trainyard| = {difference:.3g} (one by one and {len(images)} at once)")
    return difference <= TOLERANCE


def check_yt8m(args, out):
    """The YouTube-8M video-level models, from the writer and from a train_dir."""
    names = ("features", "predictions")
    run([args.yt8m_writer, "--output_dir", out, "--opset", "13", "--tflite", "1"])
    cases = {}
    with open(os.path.join(out, "manifest.txt")) as manifest:
        for line in manifest:
            name, max_frames, size, classes, batch = line.split()
            if int(max_frames) != 0:
                continue  # frame level: not exported to TFLite yet (the int32 num_frames input)
            features = np.fromfile(os.path.join(out, name + ".features.f32"), np.float32)
            expected = np.fromfile(os.path.join(out, name + ".predictions.f32"), np.float32)
            cases[name] = (features.reshape(int(batch), int(size)),
                           expected.reshape(int(batch), int(classes)))
    if sorted(cases) != ["logistic", "moe", "moe_low_rank_prob_gating"]:
        sys.exit(f"FAILED: the YouTube-8M writer exported {sorted(cases)}")
    ok = True
    for name, (features, expected) in cases.items():
        ok &= check(os.path.join(out, name + ".tflite"), features, expected, name, names)
    exported = os.path.join(out, "moe_from_train_dir.tflite")
    log = run([args.trainyard, "export", "--train_dir", os.path.join(out, "moe_train_dir"),
               "--format", "tflite", "--output", exported])
    print(log.strip())
    features, expected = cases["moe"]
    ok &= check(exported, features, expected, "trainyard export --format tflite (moe)", names)
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
