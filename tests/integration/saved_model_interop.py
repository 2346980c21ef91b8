"""TensorFlow computes what Trainyard computes, from Trainyard's SavedModel exports.

saved_model_interop_writer exports lenet, resnet_20, mobilenet_v1 (depth multiplier 0.25,
64x64; also with use_explicit_padding, for Pad), a small resnet_v1 and ops_coverage (the writer's
model of the op uses the classifiers do not make: odd pads, depthwise multiplier 2, a grouped
filter, a rank-2 batch norm, slices, clips, concat) with Trainyard's SavedModel exporter and
writes Trainyard's probabilities on a batch of fixed images. For each export, TensorFlow loads
it twice: with tf.saved_model.load (TF2) and with the TF1 loader
(tf.compat.v1.saved_model.loader.load, tag serve, which restores the variables through the
SaverDef), runs the serving_default signature on the images and must give the same
probabilities to 1e-4 (absolute) and classes equal to their argmax (int64). The signature must
declare image float32 [-1, H, W, C], probabilities and classes. tf.lite.TFLiteConverter
converts mobilenet_v1's export and the TFLite interpreter must give the same probabilities to
1e-4 too. Then `trainyard export --format saved_model` exports lenet from a train_dir
(pipeline.config and a checkpoint the writer made of the same variables) and both loaders check
that directory the same way. Prints the largest difference per model and loader.

    python saved_model_interop.py --trainyard BIN --writer BIN --work_dir D
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

TOLERANCE = 1e-4
TFLITE_CASE = "mobilenet_v1"


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def compare(label, probabilities, classes, expected):
    probabilities = np.asarray(probabilities)
    if probabilities.shape != expected.shape:
        sys.exit(f"FAILED: {label}: TensorFlow gives {probabilities.shape}, Trainyard "
                 f"{expected.shape}")
    difference = float(np.max(np.abs(probabilities - expected)))
    ok = difference <= TOLERANCE
    if classes is not None:
        classes = np.asarray(classes)
        if classes.dtype != np.int64:
            sys.exit(f"FAILED: {label}: classes are {classes.dtype}, expected int64")
        if not np.array_equal(classes, np.argmax(expected, axis=1)):
            print(f"FAILED: {label}: classes {classes.tolist()}, Trainyard's argmax "
                  f"{np.argmax(expected, axis=1).tolist()}")
            ok = False
    print(f"{'ok' if ok else 'FAILED'}: {label}: largest probability {float(expected.max()):.3f}, "
          f"max |tensorflow - trainyard| = {difference:.3g}")
    return ok


def check_signature(label, signature, shape):
    image = signature.inputs["image"]
    dims = [d.size for d in image.tensor_shape.dim]
    if image.dtype != tf.float32.as_datatype_enum or dims != [-1, *shape]:
        sys.exit(f"FAILED: {label}: serving_default's input image is {image}")
    if sorted(signature.outputs) != ["classes", "probabilities"]:
        sys.exit(f"FAILED: {label}: serving_default's outputs are {sorted(signature.outputs)}")
    if signature.method_name != "tensorflow/serving/predict":
        sys.exit(f"FAILED: {label}: method name {signature.method_name}")


def check_tf2(path, images, expected, label):
    loaded = tf.saved_model.load(path)
    serving = loaded.signatures["serving_default"]
    out = serving(image=tf.constant(images))
    return compare(f"{label} (tf.saved_model.load)", out["probabilities"].numpy(),
                   out["classes"].numpy(), expected)


def check_tf1(path, images, expected, label):
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.Session(graph=graph) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
            signature = meta.signature_def["serving_default"]
            check_signature(label, signature, images.shape[1:])
            probabilities, classes = session.run(
                [signature.outputs["probabilities"].name, signature.outputs["classes"].name],
                {signature.inputs["image"].name: images})
    return compare(f"{label} (TF1 loader, serve)", probabilities, classes, expected)


def check_tflite(path, images, expected, label):
    converter = tf.lite.TFLiteConverter.from_saved_model(path)
    model = converter.convert()
    interpreter = tf.lite.Interpreter(model_content=model, num_threads=1)
    runner = interpreter.get_signature_runner("serving_default")
    out = runner(image=images)
    return compare(f"{label} (TFLite, {len(model)} bytes)", out["probabilities"], out["classes"],
                   expected)


def check_directory(path, images, expected, label):
    spread = float(np.max(np.std(expected, axis=0)))
    if spread < 1e-3:
        sys.exit(f"FAILED: {label}: Trainyard's probabilities hardly depend on the image "
                 f"(largest spread over the batch {spread:.3g}); the check would be blind")
    for name in ("saved_model.pb", "variables/variables.index",
                 "variables/variables.data-00000-of-00001"):
        if not os.path.isfile(os.path.join(path, name)):
            sys.exit(f"FAILED: {label}: {path} has no {name}")
    ok = check_tf1(path, images, expected, label)
    ok &= check_tf2(path, images, expected, label)
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(f"tensorflow {tf.__version__}")
    out = args.work_dir
    shutil.rmtree(out, ignore_errors=True)
    run([args.writer, "--output_dir", out])
    cases = {}
    with open(os.path.join(out, "manifest.txt")) as manifest:
        for line in manifest:
            name, h, w, c, classes, batch = line.split()
            h, w, c, classes, batch = map(int, (h, w, c, classes, batch))
            images = np.fromfile(os.path.join(out, name + ".images.f32"), np.float32)
            expected = np.fromfile(os.path.join(out, name + ".probabilities.f32"), np.float32)
            cases[name] = (images.reshape(batch, h, w, c), expected.reshape(batch, classes))
    if len(cases) != 6:
        sys.exit(f"FAILED: the writer exported {sorted(cases)}")
    ok = True
    for name, (images, expected) in cases.items():
        ok &= check_directory(os.path.join(out, name), images, expected, name)
    images, expected = cases[TFLITE_CASE]
    ok &= check_tflite(os.path.join(out, TFLITE_CASE), images, expected, TFLITE_CASE)

    # The host command, from a train_dir's pipeline.config and checkpoint.
    exported = os.path.join(out, "lenet_from_train_dir")
    log = run([args.trainyard, "export", "--train_dir", os.path.join(out, "lenet_train_dir"),
               "--format", "saved_model", "--export_dir", exported])
    print(log.strip())
    leftovers = glob.glob(os.path.join(out, ".lenet_from_train_dir*"))
    if leftovers:
        sys.exit(f"FAILED: {leftovers} were left behind")
    images, expected = cases["lenet"]
    ok &= check_directory(exported, images, expected,
                          "trainyard export --format saved_model (lenet)")
    if not ok:
        sys.exit(f"FAILED: TensorFlow differs from Trainyard by more than {TOLERANCE}")
    print("all SavedModel exports agree with Trainyard")


if __name__ == "__main__":
    main()
