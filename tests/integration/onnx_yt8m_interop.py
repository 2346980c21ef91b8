"""ONNX Runtime computes what Trainyard computes, from Trainyard's ONNX exports of YouTube-8M models.

For each opset given, onnx_yt8m_interop_writer exports the video-level LogisticModel and MoeModel
(also with WILLOW's low-rank and probability gating) and the frame-level FrameLevelLogisticModel
LstmModel (the sequence and per-step implementations, the starter's top-layer h and WILLOW's
concatenated state) and WILLOW's GruModel with Trainyard's ONNX exporter, and writes Trainyard's predictions on random
features (frame-level: num_frames 1, max_frames and between in one batch, random values past
num_frames). Each file must pass onnx.checker.check_model(full_check=True), declare the opset,
have the inputs `features` f32 [N, D] (video level) or `features` f32 [N, max_frames, D] and
`num_frames` int32 [N] (frame level) and the output `predictions` [N, classes], and give in ONNX
Runtime the same predictions to 1e-4 (absolute) on the batch, and on its first example alone
(the batch dimension is dynamic). Then `trainyard export --format onnx` exports MoeModel and
FrameLevelLogisticModel from train_dirs (model_flags.json and a checkpoint of the same
variables) and ONNX Runtime checks those files the same way. Prints the largest difference per
model and opset.

    python onnx_yt8m_interop.py --trainyard BIN --writer BIN --work_dir D [--opsets 13,17]
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


def dims(info):
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def check(path, case, opset, label):
    features, num_frames, expected, max_frames = case
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    versions = {o.domain: o.version for o in model.opset_import}
    if versions.get("", None) != opset:
        sys.exit(f"FAILED: {label}: opset_import is {versions}, expected {opset}")
    inputs = {i.name: i for i in model.graph.input}
    wanted = {"features": (onnx.TensorProto.FLOAT, ["N"] + list(features.shape[1:]))}
    if max_frames > 0:
        wanted["num_frames"] = (onnx.TensorProto.INT32, ["N"])
    got_inputs = {name: (i.type.tensor_type.elem_type, dims(i)) for name, i in inputs.items()}
    if got_inputs != wanted:
        sys.exit(f"FAILED: {label}: the inputs are {got_inputs}, expected {wanted}")
    outputs = [(o.name, dims(o)) for o in model.graph.output]
    if outputs != [("predictions", ["N", expected.shape[1]])]:
        sys.exit(f"FAILED: {label}: the outputs are {outputs}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {"features": features}
    if max_frames > 0:
        feeds["num_frames"] = num_frames
    (got,) = session.run(["predictions"], feeds)
    if got.shape != expected.shape:
        sys.exit(f"FAILED: {label}: ONNX Runtime gives {got.shape}, Trainyard {expected.shape}")
    (first,) = session.run(["predictions"], {k: v[:1] for k, v in feeds.items()})
    # Predictions that do not change from video to video would hide the inputs.
    spread = float(np.max(np.std(expected, axis=0)))
    if spread < 1e-3:
        sys.exit(f"FAILED: {label}: Trainyard's predictions hardly depend on the features "
                 f"(largest spread over the batch {spread:.3g}); the check would be blind")
    difference = max(float(np.max(np.abs(got - expected))),
                     float(np.max(np.abs(first - expected[:1]))))
    status = "ok" if difference <= TOLERANCE else "FAILED"
    print(f"{status}: {label}: {len(model.graph.node)} nodes, num_frames "
          f"{num_frames.tolist() if max_frames else '-'}, max |onnxruntime - trainyard| = "
          f"{difference:.3g}")
    return difference <= TOLERANCE


def load_case(out, name, max_frames, feature_size, classes, batch):
    shape = (batch, max_frames, feature_size) if max_frames else (batch, feature_size)
    features = np.fromfile(os.path.join(out, name + ".features.f32"), np.float32).reshape(shape)
    num_frames = np.fromfile(os.path.join(out, name + ".num_frames.i32"), np.int32)
    expected = np.fromfile(os.path.join(out, name + ".predictions.f32"), np.float32)
    return features, num_frames, expected.reshape(batch, classes), max_frames


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
                name, *sizes = line.split()
                cases[name] = load_case(out, name, *map(int, sizes))
        if len(cases) != 9:
            sys.exit(f"FAILED: the writer exported {sorted(cases)}")
        for name, case in cases.items():
            ok &= check(os.path.join(out, name + ".onnx"), case, opset, f"{name} opset {opset}")
        # The host command, from train_dirs' model_flags.json and checkpoints.
        with open(os.path.join(out, "train_dirs.txt")) as listed:
            train_dirs = listed.read().split()
        if len(train_dirs) != 2:
            sys.exit(f"FAILED: the writer made the train_dirs {train_dirs}")
        for name in train_dirs:
            exported = os.path.join(out, name + "_from_train_dir.onnx")
            log = run([args.trainyard, "export", "--train_dir",
                       os.path.join(out, name + "_train_dir"), "--format", "onnx", "--output",
                       exported, "--opset", str(opset)])
            print(log.strip())
            wanted = "inputs features f32 [N, "
            if wanted not in log or ("num_frames i32 [N]" in log) != (cases[name][3] > 0):
                sys.exit(f"FAILED: the export log does not name the inputs: {log}")
            if os.path.exists(exported + ".tmp"):
                sys.exit(f"FAILED: {exported}.tmp was left behind")
            ok &= check(exported, cases[name], opset,
                        f"trainyard export --format onnx ({name}) opset {opset}")
    if not ok:
        sys.exit(f"FAILED: ONNX Runtime differs from Trainyard by more than {TOLERANCE}")
    print("all ONNX exports of the YouTube-8M models agree with Trainyard")


if __name__ == "__main__":
    main()
