"""ONNX Runtime computes what Trainyard computes, from Trainyard's ONNX exports.

For each opset given, onnx_interop_writer exports lenet, resnet_20, mobilenet_v1 (depth
multiplier 0.25, 64x64; also with use_explicit_padding, for Pad) and a small resnet_v1 with
Trainyard's ONNX exporter and writes
Trainyard's probabilities on a batch of fixed images. Each file must pass
onnx.checker.check_model(full_check=True) (which runs ONNX's shape inference), declare the
opset, and give, in ONNX Runtime on the same images, the same probabilities to 1e-4 (absolute).
Then `trainyard export --format onnx` exports lenet from a train_dir (pipeline.config and a
checkpoint the writer made of the same variables) and ONNX Runtime checks that file the same
way. Prints the largest difference per model and opset.

    python onnx_interop.py --trainyard BIN --writer BIN --work_dir D [--opsets 13,17]
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-4


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def check(path, images, expected, opset, label):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    versions = {o.domain: o.version for o in model.opset_import}
    if versions.get("", None) != opset:
        sys.exit(f"FAILED: {label}: opset_import is {versions}, expected {opset}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    (got,) = session.run(["probabilities"], {"image": images})
    if got.shape != expected.shape:
        sys.exit(f"FAILED: {label}: ONNX Runtime gives {got.shape}, Trainyard {expected.shape}")
    # Probabilities that do not change from image to image would hide the early layers.
    spread = float(np.max(np.std(expected, axis=0)))
    if spread < 1e-3:
        sys.exit(f"FAILED: {label}: Trainyard's probabilities hardly depend on the image "
                 f"(largest spread over the batch {spread:.3g}); the check would be blind")
    difference = float(np.max(np.abs(got - expected)))
    status = "ok" if difference <= TOLERANCE else "FAILED"
    print(f"{status}: {label}: {len(model.graph.node)} nodes, largest probability "
          f"{float(expected.max()):.3f}, max |onnxruntime - trainyard| = {difference:.3g}")
    return difference <= TOLERANCE


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--opsets", default="13,17")
    args = parser.parse_args()
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    ok = True
    for opset in [int(o) for o in args.opsets.split(",")]:
        out = os.path.join(args.work_dir, f"opset{opset}")
        shutil.rmtree(out, ignore_errors=True)
        run([args.writer, "--output_dir", out, "--opset", str(opset)])
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
        for name, (images, expected) in cases.items():
            path = os.path.join(out, name + ".onnx")
            ok &= check(path, images, expected, opset, f"{name} opset {opset}")
        # The host command, from a train_dir's pipeline.config and checkpoint.
        exported = os.path.join(out, "lenet_from_train_dir.onnx")
        log = run([args.trainyard, "export", "--train_dir", os.path.join(out, "lenet_train_dir"),
                   "--format", "onnx", "--output", exported, "--opset", str(opset)])
        print(log.strip())
        if os.path.exists(exported + ".tmp"):
            sys.exit(f"FAILED: {exported}.tmp was left behind")
        images, expected = cases["lenet"]
        ok &= check(exported, images, expected, opset,
                    f"trainyard export --format onnx (lenet) opset {opset}")
    if not ok:
        sys.exit(f"FAILED: ONNX Runtime differs from Trainyard by more than {TOLERANCE}")
    print("all ONNX exports agree with Trainyard")


if __name__ == "__main__":
    main()
