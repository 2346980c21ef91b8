#!/usr/bin/env python3
"""The reverse direction of golden_test: TensorFlow and TensorBoard read files Trainyard wrote.

    PYTHON tests/golden/check_ours.py --trainyard build/bin/trainyard \
        --golden_writer build/bin/golden_writer --work_dir /tmp/check_ours

PYTHON is a Python with tensorflow(-cpu) and tensorboard installed: the one every
interoperability test uses, `tests/interop/tf_env.sh python` (TensorFlow 2.21.0 and TensorBoard
2.21.0 in the virtual environment `tests/interop/tf_env.sh create` makes). ctest runs this as
interop.tensorflow_reads_trainyard_files (tests/integration/CMakeLists.txt), reported skipped
(exit code 77) where there is no such Python, failed where CI=true.

What is checked:
  1. `trainyard data synth-yt8m` (video level): tf.data.TFRecordDataset reads every record (CRCs
     checked) and tf.io.parse_single_example parses each as a YouTube-8M tf.Example.
  2. `trainyard data synth-yt8m --frame_level`: tf.io.parse_single_sequence_example parses each
     record; every frame has the declared byte count.
  3. `trainyard train` then `trainyard eval`: tf.train.latest_checkpoint finds the checkpoint;
     tf.train.load_checkpoint reads every tensor; tf.compat.v1.train.Saver restores it into
     graph variables of the same names; the event files (train and eval) parse with
     tf.compat.v1.train.summary_iterator and load in TensorBoard's EventAccumulator and
     plugin_event_accumulator (what the server uses), with the scalars the trainer logged.
  4. golden_writer's files: a GZIP TFRecord; a checkpoint with every Trainyard dtype (incl.
     bfloat16, half, bool, uint8, an empty tensor); an events file with scalars, histograms
     (compared field by field with what tf.compat.v1.summary.histogram makes of the same values),
     text and PNG images (decoded with tf.io.decode_png).
  5. `trainyard data synth-shapes --masks`: tf.io.parse_single_example parses each record with the
     Object Detection API decoder's keys; each image/object/mask decodes with tf.io.decode_image
     (one channel, as the decoder's PNG_MASKS path) to the image's height and width, 0 or 1, with
     its pixels (at least one) inside the object's box and no more of them than image/object/area.
Exits 0 when everything loads and matches, 1 with the reasons otherwise, 77 when TensorFlow is
missing (1 where CI=true).
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SKIP = 77

try:
    import numpy as np
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing import plugin_event_accumulator
    from tensorboard.util import tensor_util
except ImportError as e:  # pragma: no cover
    print(f"{'FAILED' if os.environ.get('CI') == 'true' else 'skipped'}: TensorFlow is not "
          f"installed for {sys.executable} ({e}); see tests/interop/tf_env.sh")
    sys.exit(1 if os.environ.get("CI") == "true" else SKIP)

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)
    return condition


def run(argv):
    print("$", " ".join(argv))
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, end="")
    if p.returncode != 0:
        raise SystemExit(f"command failed with status {p.returncode}: {' '.join(argv)}")
    return p.stdout


def records_of(pattern, compression=""):
    files = sorted(glob.glob(pattern))
    check(files, f"no files match {pattern}")
    return files, [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=compression)]


# --- 1, 2: synth-yt8m ----------------------------------------------------------------------------


def check_video_level(trainyard, work, num_classes):
    data = os.path.join(work, "video")
    out = run([trainyard, "data", "synth-yt8m", "--output_dir", data, "--num_videos", "64",
               "--num_classes", str(num_classes), "--num_shards", "2"])
    m = re.search(r"wrote (\d+) training and (\d+) validation videos", out)
    train, validate = int(m.group(1)), int(m.group(2))
    spec = {
        "id": tf.io.FixedLenFeature([], tf.string),
        "labels": tf.io.VarLenFeature(tf.int64),
        "mean_rgb": tf.io.FixedLenFeature([1024], tf.float32),
        "mean_audio": tf.io.FixedLenFeature([128], tf.float32),
    }
    ids = set()
    for split, count in (("train", train), ("validate", validate)):
        files, records = records_of(os.path.join(data, f"{split}-*.tfrecord"))
        check(len(records) == count, f"{split}: TF reads {len(records)} records, expected {count}")
        for i, raw in enumerate(records):
            p = tf.io.parse_single_example(raw, spec)
            labels = p["labels"].values.numpy()
            ids.add(p["id"].numpy())
            check(np.all((labels >= 0) & (labels < num_classes)),
                  f"{split} record {i}: labels {labels} outside [0, {num_classes})")
            check(np.all(np.isfinite(p["mean_rgb"].numpy())), f"{split} record {i}: mean_rgb")
            check(np.all(np.isfinite(p["mean_audio"].numpy())), f"{split} record {i}: mean_audio")
    check(len(ids) == train + validate, f"{len(ids)} distinct ids for {train + validate} videos")
    print(f"ok: TensorFlow parsed {train + validate} video-level tf.Examples from synth-yt8m")
    return data


def check_frame_level(trainyard, work):
    data = os.path.join(work, "frame")
    out = run([trainyard, "data", "synth-yt8m", "--output_dir", data, "--frame_level",
               "--num_videos", "10", "--num_classes", "30", "--num_shards", "1",
               "--feature_sizes", "16,8", "--min_frames", "2", "--max_frames", "5"])
    m = re.search(r"wrote (\d+) training and (\d+) validation videos", out)
    total = int(m.group(1)) + int(m.group(2))
    _, records = records_of(os.path.join(data, "*.tfrecord"))
    check(len(records) == total, f"frame level: TF reads {len(records)} records, expected {total}")
    for i, raw in enumerate(records):
        context, lists = tf.io.parse_single_sequence_example(
            raw,
            context_features={"id": tf.io.FixedLenFeature([], tf.string),
                              "labels": tf.io.VarLenFeature(tf.int64)},
            sequence_features={"rgb": tf.io.FixedLenSequenceFeature([], tf.string),
                               "audio": tf.io.FixedLenSequenceFeature([], tf.string)})
        rgb = tf.io.decode_raw(lists["rgb"], tf.uint8).numpy()
        audio = tf.io.decode_raw(lists["audio"], tf.uint8).numpy()
        check(rgb.shape[1:] == (16,) and audio.shape[1:] == (8,),
              f"frame record {i}: frame shapes {rgb.shape} {audio.shape}")
        check(2 <= rgb.shape[0] <= 5 and rgb.shape[0] == audio.shape[0],
              f"frame record {i}: {rgb.shape[0]} rgb and {audio.shape[0]} audio frames")
        check(context["id"].numpy() != b"", f"frame record {i}: empty id")
    print(f"ok: TensorFlow parsed {total} frame-level tf.SequenceExamples from synth-yt8m")


# --- 3: train and eval -----------------------------------------------------------------------


def check_checkpoint_dir(train_dir, want_step):
    prefix = tf.train.latest_checkpoint(train_dir)
    want = os.path.join(train_dir, f"model.ckpt-{want_step}")
    check(prefix == want, f"tf.train.latest_checkpoint({train_dir}) is {prefix}, expected {want}")
    if prefix is None:
        return
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    values = {name: reader.get_tensor(name) for name in sorted(shapes)}
    for name, value in values.items():
        print(f"  {name}: {dtypes[name].name}{list(shapes[name])}")
        check(list(value.shape) == list(shapes[name]), f"{name}: shape {value.shape}")
        if value.dtype.kind == "f":
            check(np.all(np.isfinite(value)), f"{name}: non-finite values")
    step_names = [n for n in values if n.split("/")[-1] == "global_step"]
    check(step_names, f"no global_step in {sorted(values)}")
    for n in step_names:
        check(int(values[n]) == want_step, f"{n} is {values[n]}, expected {want_step}")
    # Restore through the Saver / RestoreV2 op path into graph variables of the same names.
    with tf.Graph().as_default():
        variables = {
            name: tf.compat.v1.get_variable(
                name.replace(":", "_"), shape=shapes[name], dtype=dtypes[name],
                initializer=tf.compat.v1.zeros_initializer(), use_resource=True)
            for name in values
        }
        saver = tf.compat.v1.train.Saver(var_list=variables)
        with tf.compat.v1.Session() as sess:
            saver.restore(sess, prefix)
            for name, var in variables.items():
                got = sess.run(var)
                check(np.array_equal(got, values[name], equal_nan=True),
                      f"Saver.restore: {name} differs from load_checkpoint")
    print(f"ok: TensorFlow loaded and restored {len(values)} tensors of {prefix}")


def scalars_by_summary_iterator(path):
    events = list(tf.compat.v1.train.summary_iterator(path))
    check(events and events[0].file_version == "brain.Event:2",
          f"{path}: first event is not file_version brain.Event:2")
    out = {}
    for e in events[1:]:
        for v in e.summary.value:
            if v.HasField("simple_value"):
                out.setdefault(v.tag, []).append((e.step, v.simple_value))
    return events, out


def check_event_file(path, want_tags):
    events, by_iterator = scalars_by_summary_iterator(path)
    acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in want_tags:
        check(tag in tags, f"{path}: EventAccumulator has no scalar '{tag}' (it has {tags})")
    for tag in tags:
        got = [(s.step, s.value) for s in acc.Scalars(tag)]
        check(got == by_iterator.get(tag), f"{path}: {tag}: {got} vs {by_iterator.get(tag)}")
    # The server's accumulator, which migrates simple_value to tensors (data_compat).
    pacc = plugin_event_accumulator.EventAccumulator(path)
    pacc.Reload()
    ptags = pacc.Tags()["tensors"]
    for tag in tags:
        check(tag in ptags, f"{path}: plugin_event_accumulator lacks {tag}")
        got = [(t.step, float(tensor_util.make_ndarray(t.tensor_proto))) for t in pacc.Tensors(tag)]
        check(got == by_iterator.get(tag), f"{path}: plugin tensors of {tag}: {got}")
        check(pacc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars",
              f"{path}: {tag} is not a scalars-plugin series")
    print(f"ok: TensorBoard loaded {len(events)} events of {path}: {sorted(tags)}")
    return acc


def check_train_and_eval(trainyard, work, data, num_classes):
    train_dir = os.path.join(work, "model")
    steps = 6
    common = [f"--num_classes={num_classes}", "--feature_names=mean_rgb,mean_audio",
              "--feature_sizes=1024,128", f"--train_dir={train_dir}"]
    run([trainyard, "train", f"--train_data_pattern={data}/train-*.tfrecord", *common,
         "--batch_size=16", f"--max_steps={steps}", "--log_every_n_steps=2",
         "--start_new_model"])
    run([trainyard, "eval", "--run_once", f"--eval_data_pattern={data}/validate-*.tfrecord", *common,
         "--batch_size=16"])
    check_checkpoint_dir(train_dir, steps)
    train_events = sorted(glob.glob(os.path.join(train_dir, "*tfevents*")))
    check(len(train_events) == 1, f"train event files: {train_events}")
    for path in train_events:
        acc = check_event_file(path, ["model/Training_Loss", "model/Learning_Rate"])
        steps_logged = [s.step for s in acc.Scalars("model/Training_Loss")]
        check(steps_logged and steps_logged[-1] == steps, f"Training_Loss steps {steps_logged}")
    eval_events = sorted(glob.glob(os.path.join(train_dir, "eval", "*tfevents*")))
    check(len(eval_events) == 1, f"eval event files: {eval_events}")
    for path in eval_events:
        check_event_file(path, ["Epoch/Eval_GAP", "Epoch/Eval_MAP", "Epoch/Eval_Avg_Hit@1"])


# --- 4: golden_writer ----------------------------------------------------------------------------

RECORDS = [b"hello", b"", b"foo\x00bar", bytes(range(256)), b"x" * 1000]


def tf1_histogram(values):
    """The HistogramProto tf.compat.v1.summary.histogram makes of `values`."""
    with tf.Graph().as_default():
        op = tf.compat.v1.summary.histogram("h", tf.constant(values, dtype=tf.float64))
        with tf.compat.v1.Session() as sess:
            summary = tf.compat.v1.Summary.FromString(sess.run(op))
    return summary.value[0].histo


def check_golden_writer(golden_writer, work):
    out = os.path.join(work, "golden_writer")
    run([golden_writer, out])

    # GZIP and plain TFRecords.
    _, got = records_of(os.path.join(out, "records.tfrecord.gz"), "GZIP")
    check(got == RECORDS, "GZIP TFRecord: records differ")
    _, got = records_of(os.path.join(out, "records.tfrecord"))
    check(got == RECORDS, "plain TFRecord: records differ")
    print("ok: TensorFlow read Trainyard's GZIP and plain TFRecords")

    # A checkpoint with every dtype.
    prefix = os.path.join(out, "ckpt", "model.ckpt-9")
    reader = tf.train.load_checkpoint(prefix)
    bf16 = tf.bfloat16.as_numpy_dtype
    want = {
        "tower/dense/kernel": np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.25 - 1,
        "tower/dense/bias": np.array([1, -2, 0.1], dtype=np.float64),
        "global_step": np.array(9, dtype=np.int64),
        "counts": np.array([-4, 5, 2**31 - 1, -(2**31)], dtype=np.int32),
        "pixels": np.array([0, 128, 255], dtype=np.uint8),
        "mask": np.array([True, False, True]),
        "bf16": np.array([1.5, -2.5, 3.140625], dtype=bf16),
        "f16": np.array([1.5, -2.5, 65504], dtype=np.float16),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    shapes = reader.get_variable_to_shape_map()
    check(sorted(shapes) == sorted(want), f"checkpoint names {sorted(shapes)}")
    for name, w in want.items():
        if name not in shapes:
            continue
        got = reader.get_tensor(name)
        check(got.dtype == w.dtype and got.shape == w.shape and np.array_equal(got, w),
              f"checkpoint {name}: got {got.dtype}{got.shape} {got}, expected {w.dtype}{w.shape}")
    print(f"ok: TensorFlow read Trainyard's checkpoint with {len(want)} dtypes/shapes")

    # Events: scalars, histograms, text, images.
    (path,) = glob.glob(os.path.join(out, "events", "*tfevents*"))
    acc = event_accumulator.EventAccumulator(path, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
        event_accumulator.IMAGES: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    got = [(s.step, s.value) for s in acc.Scalars("ours/scalar")]
    check(got == [(5, float(np.float32(0.1))), (7, -2.5)], f"ours/scalar: {got}")

    values = [-3.5, -1, 0, 0, 1e-13, 0.5, 1, 2, 2, 100, 1e21]
    for tag, vals in (("ours/histogram", values), ("ours/empty_histogram", [])):
        check(tag in tags["histograms"], f"no histogram {tag} in {tags['histograms']}")
        if tag not in tags["histograms"]:
            continue
        events, _ = scalars_by_summary_iterator(path)
        ours = next(v.histo for e in events for v in e.summary.value if v.tag == tag)
        theirs = tf1_histogram(vals)
        for field in ("min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket"):
            a, b = getattr(ours, field), getattr(theirs, field)
            a = list(a) if field.startswith("bucket") else a
            b = list(b) if field.startswith("bucket") else b
            check(a == b, f"{tag}.{field}: ours {a}, TensorFlow's {b}")
        h = acc.Histograms(tag)[0].histogram_value
        check(h.num == len(vals), f"{tag}: EventAccumulator num {h.num}")
    print("ok: TensorBoard loaded the histograms; they equal tf.compat.v1.summary.histogram's")

    pacc = plugin_event_accumulator.EventAccumulator(path)
    pacc.Reload()
    check(pacc.SummaryMetadata("ours/text").plugin_data.plugin_name == "text",
          "ours/text: not a text-plugin series")
    text = tensor_util.make_ndarray(pacc.Tensors("ours/text")[0].tensor_proto)
    check(text.item() == "**bold** and \u2713".encode(), f"ours/text: {text!r}")
    print("ok: TensorBoard's text plugin data reads back")

    for channels in (1, 2, 3, 4):
        tag = f"ours/image_{channels}"
        check(tag in tags["images"], f"no image {tag} in {tags['images']}")
        if tag not in tags["images"]:
            continue
        image = acc.Images(tag)[0]
        check((image.height, image.width) == (3, 4), f"{tag}: {image.height}x{image.width}")
        decoded = tf.io.decode_png(image.encoded_image_string, channels=0).numpy()
        y, x, c = np.meshgrid(np.arange(3), np.arange(4), np.arange(channels), indexing="ij")
        want_pixels = ((y * 50 + x * 20 + c * 7) % 256).astype(np.uint8)
        check(decoded.shape == want_pixels.shape and np.array_equal(decoded, want_pixels),
              f"{tag}: decoded {decoded.shape} differs from the pixels written")
    print("ok: TensorBoard loaded the PNG images; tf.io.decode_png gives the pixels written")


# --- 5: synth-shapes --masks ----------------------------------------------------------------------


def check_synth_shapes_masks(trainyard, work):
    data = os.path.join(work, "shapes_masks")
    run([trainyard, "data", "synth-shapes", "--output_dir", data, "--num_images", "8",
         "--num_val_images", "0", "--image_size", "48", "--max_image_size", "72", "--num_shards",
         "1", "--masks"])
    keys = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/object/area": tf.io.VarLenFeature(tf.float32),
        "image/object/mask": tf.io.VarLenFeature(tf.string),
    }
    for c in ("ymin", "xmin", "ymax", "xmax"):
        keys["image/object/bbox/" + c] = tf.io.VarLenFeature(tf.float32)
    masks = nonempty = 0
    for record in records_of(os.path.join(data, "train-*.tfrecord"))[1]:
        f = tf.io.parse_single_example(record, keys)
        h, w = int(f["image/height"]), int(f["image/width"])
        pngs = tf.sparse.to_dense(f["image/object/mask"], default_value=b"").numpy()
        areas = tf.sparse.to_dense(f["image/object/area"]).numpy()
        box = [tf.sparse.to_dense(f["image/object/bbox/" + c]).numpy()
               for c in ("ymin", "xmin", "ymax", "xmax")]
        check(len(pngs) == len(areas), f"{len(pngs)} masks for {len(areas)} objects")
        for i, png in enumerate(pngs):
            mask = tf.squeeze(tf.io.decode_image(png, channels=1), axis=2).numpy()
            check(mask.shape == (h, w), f"mask {i} is {mask.shape}, the image {h} x {w}")
            check(set(np.unique(mask)) <= {0, 1}, f"mask {i} has values {np.unique(mask)}")
            ys, xs = np.nonzero(mask)
            masks += 1
            check(len(ys) <= areas[i], f"mask {i} has {len(ys)} pixels, area {areas[i]}")
            # A shape painted over whole is not labelled: every mask has pixels.
            check(len(ys) > 0, f"mask {i} is empty")
            if len(ys) == 0:
                continue
            nonempty += 1
            check(ys.min() >= box[0][i] * h - 1e-3 and (ys.max() + 1) <= box[2][i] * h + 1e-3 and
                  xs.min() >= box[1][i] * w - 1e-3 and (xs.max() + 1) <= box[3][i] * w + 1e-3,
                  f"mask {i}'s pixels leave its box")
    check(nonempty >= 8, f"only {nonempty} of {masks} masks have pixels")
    print(f"ok: TensorFlow decoded {masks} instance masks from synth-shapes --masks")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--golden_writer")
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    print(f"TensorFlow {tf.__version__} ({sys.executable})")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    num_classes = 30
    data = check_video_level(args.trainyard, args.work_dir, num_classes)
    check_frame_level(args.trainyard, args.work_dir)
    check_train_and_eval(args.trainyard, args.work_dir, data, num_classes)
    check_synth_shapes_masks(args.trainyard, args.work_dir)
    if args.golden_writer:
        check_golden_writer(args.golden_writer, args.work_dir)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s):")
        for f in FAILURES:
            print("  " + f)
        return 1
    print("all Trainyard files load in TensorFlow / TensorBoard")
    return 0


if __name__ == "__main__":
    sys.exit(main())
