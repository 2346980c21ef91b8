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
that directory the same way.

YouTube-8M (export_model.py's ModelExporter): `trainyard data synth-yt8m` writes video-level
tf.Examples and (--frame_level) tf.SequenceExamples of 3 to 12 frames; `trainyard train` trains
LogisticModel, MoeModel, FrameLevelLogisticModel and the recurrent LstmModel (2 layers of 8
units) and WILLOW's GruModel (8 units, per-step implementation), at max_frames 12 (their graphs
unroll the steps over max_frames with the frame mask), for 4 steps with export_model_steps 2, which
must leave train_dir/export/step_2 and step_4, each a SavedModel beside Trainyard's own export.
`trainyard predict` writes the top 20 of the validation records from step_4's Trainyard files;
both loaders run step_4's serving_default on the same serialized records (example_bytes) and
must give the CSV's video ids, class_indexes (int32) equal to its classes and predictions within
1e-4. `trainyard export --format saved_model` of each frame-level train_dir with --max_frames=5
(videos truncated) is checked the same way against predict --max_frames=5. Last,
`trainyard train_and_evaluate --export_format saved_model` of MoeModel with a FINAL exporter
(the estimator's FinalExporter('servo', ...)) must leave a SavedModel in export/servo/<timestamp>/
beside Trainyard's files, checked the same way against predict on that directory. Prints the
largest difference per model and loader.

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


YT8M_TOP_K = 20


def read_predictions_csv(path):
    """trainyard predict's CSV: VideoId,LabelConfidencePairs ("class score class score ...")."""
    rows = {}
    with open(path) as csv:
        header = csv.readline().strip()
        if header != "VideoId,LabelConfidencePairs":
            sys.exit(f"FAILED: {path} starts with {header!r}")
        for line in csv:
            video_id, pairs = line.strip().split(",")
            values = pairs.split()
            rows[video_id] = (np.array(values[0::2], np.int64), np.array(values[1::2], np.float64))
    return rows


def compare_top_k(label, video_ids, class_indexes, predictions, expected):
    video_ids = [v.decode() for v in np.asarray(video_ids)]
    class_indexes = np.asarray(class_indexes)
    predictions = np.asarray(predictions)
    if class_indexes.dtype != np.int32 or predictions.dtype != np.float32:
        sys.exit(f"FAILED: {label}: class_indexes {class_indexes.dtype}, predictions "
                 f"{predictions.dtype}; the starter's are int32 and float32")
    if sorted(video_ids) != sorted(expected):
        sys.exit(f"FAILED: {label}: video ids {video_ids[:3]}..., predict wrote "
                 f"{sorted(expected)[:3]}...")
    ok, difference = True, 0.0
    for i, video_id in enumerate(video_ids):
        classes, scores = expected[video_id]
        if predictions.shape[1] != len(scores) or not np.array_equal(class_indexes[i], classes):
            print(f"FAILED: {label}: {video_id}: class_indexes {class_indexes[i][:5].tolist()}..., "
                  f"predict's {classes[:5].tolist()}...")
            ok = False
            continue
        difference = max(difference, float(np.max(np.abs(predictions[i] - scores))))
    ok &= difference <= TOLERANCE
    print(f"{'ok' if ok else 'FAILED'}: {label}: {len(video_ids)} videos, "
          f"max |tensorflow - trainyard predict| = {difference:.3g}")
    return ok


def check_yt8m_signature(label, signature):
    def describe(info):
        return (tf.dtypes.as_dtype(info.dtype).name, [d.size for d in info.tensor_shape.dim])
    inputs = {k: describe(v) for k, v in signature.inputs.items()}
    outputs = {k: describe(v) for k, v in signature.outputs.items()}
    if inputs != {"example_bytes": ("string", [-1])}:
        sys.exit(f"FAILED: {label}: serving_default's inputs are {inputs}")
    if outputs != {"video_id": ("string", [-1]), "class_indexes": ("int32", [-1, YT8M_TOP_K]),
                   "predictions": ("float32", [-1, YT8M_TOP_K])}:
        sys.exit(f"FAILED: {label}: serving_default's outputs are {outputs}")
    if signature.method_name != "tensorflow/serving/predict":
        sys.exit(f"FAILED: {label}: method name {signature.method_name}")


def check_yt8m_export(path, records, expected, label):
    for name in ("saved_model.pb", "variables/variables.index",
                 "variables/variables.data-00000-of-00001"):
        if not os.path.isfile(os.path.join(path, name)):
            sys.exit(f"FAILED: {label}: {path} has no {name}")
    spread = float(np.std([scores[0] for _, scores in expected.values()]))
    if spread < 1e-4:
        sys.exit(f"FAILED: {label}: predict's top scores hardly differ between videos "
                 f"({spread:.3g}); the check would be blind")
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.Session(graph=graph) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
            signature = meta.signature_def["serving_default"]
            check_yt8m_signature(label, signature)
            names = [signature.outputs[k].name for k in ("video_id", "class_indexes",
                                                         "predictions")]
            values = session.run(names, {signature.inputs["example_bytes"].name: records})
    ok = compare_top_k(f"{label} (TF1 loader, serve)", *values, expected)
    serving = tf.saved_model.load(path).signatures["serving_default"]
    out = serving(example_bytes=tf.constant(records))
    ok &= compare_top_k(f"{label} (tf.saved_model.load)", out["video_id"].numpy(),
                        out["class_indexes"].numpy(), out["predictions"].numpy(), expected)
    return ok


def check_youtube8m(trainyard, out):
    """The starter's SavedModels of YouTube-8M models against trainyard predict."""
    work = os.path.join(out, "yt8m")
    os.makedirs(work)
    sizes = ["--feature_sizes", "16,8"]
    run([trainyard, "data", "synth-yt8m", "--output_dir", os.path.join(work, "video"),
         "--num_videos", "100", "--num_classes", "30", "--num_shards", "1", *sizes])
    run([trainyard, "data", "synth-yt8m", "--output_dir", os.path.join(work, "frame"),
         "--frame_level", "--num_videos", "60", "--num_classes", "30", "--num_shards", "1",
         "--min_frames", "3", "--max_frames", "12", *sizes])
    cases = [("LogisticModel", "video", ["mean_rgb,mean_audio"], []),
             ("MoeModel", "video", ["mean_rgb,mean_audio"], []),
             ("FrameLevelLogisticModel", "frame", ["rgb,audio"], ["--frame_features"]),
             ("LstmModel", "frame", ["rgb,audio"],
              ["--frame_features", "--max_frames=12", "--lstm_cells=8", "--lstm_layers=2"]),
             ("GruModel", "frame", ["rgb,audio"],
              ["--frame_features", "--max_frames=12", "--gru_cells=8",
               "--rnn_implementation=per_step"])]
    ok = True
    for model, level, names, flags in cases:
        train_dir = os.path.join(work, model)
        data = os.path.join(work, level)
        run([trainyard, "train", "--train_dir", train_dir, "--model", model, *flags,
             "--train_data_pattern", os.path.join(data, "train-*.tfrecord"),
             "--num_classes", "30", "--feature_names", *names, *sizes, "--batch_size", "8",
             "--max_steps", "4", "--export_model_steps", "2", "--seed", "3"])
        for step in (2, 4):
            step_dir = os.path.join(train_dir, "export", f"step_{step}")
            for name in ("saved_model.pb", "model_flags.json", "pipeline.config"):
                if not os.path.isfile(os.path.join(step_dir, name)):
                    sys.exit(f"FAILED: {model}: the periodic export {step_dir} has no {name}")
        pattern = os.path.join(data, "validate-*.tfrecord")
        records = np.array([r.numpy() for f in sorted(glob.glob(pattern))
                            for r in tf.data.TFRecordDataset(f)], dtype=object)
        exported = os.path.join(train_dir, "export", "step_4")
        csv = os.path.join(work, model + ".csv")
        run([trainyard, "predict", "--train_dir", exported, "--input_data_pattern", pattern,
             "--output_file", csv, "--top_k", str(YT8M_TOP_K)])
        ok &= check_yt8m_export(exported, records, read_predictions_csv(csv),
                                f"{model} export/step_4")
        if level == "frame":
            # The host command, with the reader's max_frames below most videos' frame counts.
            truncated = os.path.join(work, model + "_max_frames_5")
            print(run([trainyard, "export", "--train_dir", train_dir, "--format",
                       "saved_model", "--export_dir", truncated, "--max_frames=5"]).strip())
            csv = os.path.join(work, model + "_max_frames_5.csv")
            run([trainyard, "predict", "--train_dir", train_dir, "--input_data_pattern", pattern,
                 "--output_file", csv, "--top_k", str(YT8M_TOP_K), "--max_frames=5"])
            ok &= check_yt8m_export(truncated, records, read_predictions_csv(csv),
                                    f"trainyard export --format saved_model ({model}, "
                                    "max_frames 5)")
    return ok & check_exporter_saved_model(trainyard, work, sizes)


def check_exporter_saved_model(trainyard, work, sizes):
    """train_and_evaluate's FINAL exporter with --export_format saved_model."""
    train_dir = os.path.join(work, "train_and_evaluate")
    data = os.path.join(work, "video")
    config = run([trainyard, "train", "--train_dir", train_dir, "--model", "MoeModel",
                  "--train_data_pattern", os.path.join(data, "train-*.tfrecord"),
                  "--num_classes", "30", "--feature_names", "mean_rgb,mean_audio", *sizes,
                  "--batch_size", "8", "--max_steps", "4", "--seed", "5", "--print_config"])
    config_path = os.path.join(work, "train_and_evaluate.config")
    with open(config_path, "w") as f:
        f.write(config + '\neval_config {\n  exporters { name: "servo" kind: FINAL }\n}\n')
    pattern = os.path.join(data, "validate-*.tfrecord")
    run([trainyard, "train_and_evaluate", "--pipeline_config_path", config_path,
         "--eval_data_pattern", pattern, "--export_format", "saved_model"])
    exports = sorted(glob.glob(os.path.join(train_dir, "export", "servo", "*")))
    if len(exports) != 1:
        sys.exit(f"FAILED: train_and_evaluate's FINAL exporter left {exports}")
    for name in ("pipeline.config", "checkpoint"):
        if not os.path.isfile(os.path.join(exports[0], name)):
            sys.exit(f"FAILED: {exports[0]} has no {name} (Trainyard's export beside the "
                     "SavedModel)")
    records = np.array([r.numpy() for f in sorted(glob.glob(pattern))
                        for r in tf.data.TFRecordDataset(f)], dtype=object)
    csv = os.path.join(work, "train_and_evaluate.csv")
    run([trainyard, "predict", "--train_dir", exports[0], "--input_data_pattern", pattern,
         "--output_file", csv, "--top_k", str(YT8M_TOP_K)])
    return check_yt8m_export(exports[0], records, read_predictions_csv(csv),
                             "train_and_evaluate --export_format saved_model (MoeModel, servo)")


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
    ok &= check_youtube8m(args.trainyard, out)
    if not ok:
        sys.exit(f"FAILED: TensorFlow differs from Trainyard by more than {TOLERANCE}")
    print("all SavedModel exports agree with Trainyard")


if __name__ == "__main__":
    main()
