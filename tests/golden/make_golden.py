#!/usr/bin/env python3
"""Writes the golden files in this directory with TensorFlow itself.

golden_test (tests/unit/golden_test.cc) reads every file written here with Trainyard's C++ APIs
and checks it against manifest.json, which this script also writes. The files are committed, so
the test needs no TensorFlow; rerun this script only to refresh them.

Command used (in a virtual environment outside the repository):

    python3 -m venv /work/venv-tf
    /work/venv-tf/bin/pip install tensorflow-cpu tensorboard
    /work/venv-tf/bin/python tests/golden/make_golden.py

Generated with TensorFlow 2.21.0 (tensorflow-cpu), TensorBoard 2.21.0 on Linux x86_64; the
versions actually used are also recorded in manifest.json ("generator").

What is written (all small; total well under 100 KB):
  records.tfrecord              tf.io.TFRecordWriter, uncompressed: 5 records incl. an empty one
  records.tfrecord.gz           the same records, compression_type "GZIP"
  video.tfrecord                3 YouTube-8M video-level tf.Examples (id, labels, mean_rgb[1024],
                                mean_audio[128]); all full size
  frame.tfrecord                2 YouTube-8M frame-level tf.SequenceExamples (context id, labels;
                                feature_lists rgb[1024] and audio[128] uint8 bytes per frame)
  tf1_checkpoint/               tf.compat.v1.train.Saver (V2 format), steps 3 and 7, with its
                                `checkpoint` state file (relative paths)
  tf2_checkpoint/               tf.train.CheckpointManager (object-based names, a DT_STRING
                                _CHECKPOINTABLE_OBJECT_GRAPH tensor), with its `checkpoint` file
  events/tf2/events.out.tfevents.golden.v2
                                tf.summary.scalar: scalars as rank-0 DT_FLOAT tensors
  events/tf1/events.out.tfevents.golden.tf1
                                tf.compat.v1.summary.FileWriter: Summary.Value.simple_value
  manifest.json                 the expected values

Float features follow formula_value(i, seed) below, computed in float64 and rounded once to
float32 (golden_test recomputes it the same way); frame bytes follow frame_byte(). The manifest
also records, for every such vector, its float64 sum and a few sampled values taken from the
numpy arrays actually written, so a wrong formula in either place is caught.
"""

import glob
import json
import math
import os
import platform
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

try:
    import tensorboard

    TENSORBOARD_VERSION = tensorboard.__version__
except ImportError:  # pragma: no cover
    TENSORBOARD_VERSION = None

HERE = os.path.dirname(os.path.abspath(__file__))


def formula_value(i, seed):
    """float32(((i * 37 + seed * 11) % 1000) / 1000 - 0.5), in [-0.5, 0.5)."""
    return np.float32(((i * 37 + seed * 11) % 1000) / 1000.0 - 0.5)


def formula_vector(n, seed):
    return np.array([formula_value(i, seed) for i in range(n)], dtype=np.float32)


def frame_byte(t, i, seed):
    """Byte i of frame t of a feature list with this seed."""
    return (t * 31 + i * 7 + seed * 13) % 256


def frame_bytes(t, n, seed):
    return bytes(frame_byte(t, i, seed) for i in range(n))


def samples(values, indices):
    return {str(i): float(values[i]) for i in indices}


def clean(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


# --- (a) TFRecord, plain and GZIP -----------------------------------------------------------------

RECORDS = [b"hello", b"", b"foo\x00bar", bytes(range(256)), b"x" * 1000]


def write_tfrecords(manifest):
    plain = os.path.join(HERE, "records.tfrecord")
    gz = os.path.join(HERE, "records.tfrecord.gz")
    with tf.io.TFRecordWriter(plain) as w:
        for r in RECORDS:
            w.write(r)
    with tf.io.TFRecordWriter(gz, options=tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for r in RECORDS:
            w.write(r)
    # Sanity: TF reads back what it wrote.
    for path, compression in ((plain, ""), (gz, "GZIP")):
        got = [x.numpy() for x in tf.data.TFRecordDataset(path, compression_type=compression)]
        assert got == RECORDS, path
    with open(plain, "rb") as f:
        plain_bytes = f.read()
    manifest["tfrecord"] = {
        "plain_file": "records.tfrecord",
        "gzip_file": "records.tfrecord.gz",
        "records_hex": [r.hex() for r in RECORDS],
        # The uncompressed stream: the first record's 21 framed bytes, and the stream's length.
        "plain_first_record_hex": plain_bytes[: 12 + len(RECORDS[0]) + 4].hex(),
        "plain_size": len(plain_bytes),
    }


# --- (b) YouTube-8M video level ---------------------------------------------------------------

VIDEOS = [
    {"id": "vid0", "labels": [3, 7], "seed": 0},
    {"id": "Xy_9-aBcDeF", "labels": [3861, 0, 17], "seed": 1},
    {"id": "empty_labels", "labels": [], "seed": 2},
]
# Bit patterns the reader must carry through unchanged: (feature, index, value).
VIDEO_OVERRIDES = {
    2: [
        ("mean_audio", 0, np.float32(1e-40)),  # subnormal
        ("mean_audio", 1, np.float32(-0.0)),
        ("mean_audio", 2, np.float32(3.4e38)),
        ("mean_audio", 3, np.float32(0.1)),
        ("mean_rgb", 1023, np.float32(-7.25)),
    ]
}


def video_vectors(index, video):
    rgb = formula_vector(1024, video["seed"])
    audio = formula_vector(128, video["seed"] + 100)
    for feature, i, value in VIDEO_OVERRIDES.get(index, []):
        (rgb if feature == "mean_rgb" else audio)[i] = value
    return rgb, audio


def write_video(manifest):
    path = os.path.join(HERE, "video.tfrecord")
    entries = []
    with tf.io.TFRecordWriter(path) as w:
        for index, video in enumerate(VIDEOS):
            rgb, audio = video_vectors(index, video)
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "id": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[video["id"].encode()])
                        ),
                        "labels": tf.train.Feature(
                            int64_list=tf.train.Int64List(value=video["labels"])
                        ),
                        "mean_rgb": tf.train.Feature(float_list=tf.train.FloatList(value=rgb)),
                        "mean_audio": tf.train.Feature(
                            float_list=tf.train.FloatList(value=audio)
                        ),
                    }
                )
            )
            w.write(example.SerializeToString())
            entries.append(
                {
                    "id": video["id"],
                    "labels": video["labels"],
                    "mean_rgb": {
                        "size": 1024,
                        "seed": video["seed"],
                        "sum": math.fsum(float(v) for v in rgb),
                        "samples": samples(rgb, [0, 1, 511, 1023]),
                    },
                    "mean_audio": {
                        "size": 128,
                        "seed": video["seed"] + 100,
                        "sum": math.fsum(float(v) for v in audio),
                        "samples": samples(audio, [0, 1, 2, 3, 127]),
                    },
                    "overrides": [
                        {"feature": f, "index": i, "value": float(v)}
                        for f, i, v in VIDEO_OVERRIDES.get(index, [])
                    ],
                }
            )
    # Sanity: TF's own parser reads the records.
    spec = {
        "id": tf.io.FixedLenFeature([], tf.string),
        "labels": tf.io.VarLenFeature(tf.int64),
        "mean_rgb": tf.io.FixedLenFeature([1024], tf.float32),
        "mean_audio": tf.io.FixedLenFeature([128], tf.float32),
    }
    for index, raw in enumerate(tf.data.TFRecordDataset(path)):
        parsed = tf.io.parse_single_example(raw, spec)
        assert parsed["id"].numpy().decode() == VIDEOS[index]["id"]
        rgb, audio = video_vectors(index, VIDEOS[index])
        assert np.array_equal(parsed["mean_rgb"].numpy().view(np.uint32), rgb.view(np.uint32))
        assert np.array_equal(parsed["mean_audio"].numpy().view(np.uint32), audio.view(np.uint32))
    manifest["video"] = {
        "file": "video.tfrecord",
        "formula": "float32(((i * 37 + seed * 11) % 1000) / 1000.0 - 0.5), in float64 then "
        "rounded once; then overrides",
        "videos": entries,
    }


# --- (c) YouTube-8M frame level ---------------------------------------------------------------

SEQUENCES = [
    {"id": "seqA", "labels": [5, 1000], "frames": 3, "rgb_seed": 1, "audio_seed": 2},
    {"id": "seqB", "labels": [3861], "frames": 5, "rgb_seed": 3, "audio_seed": 4},
]


def write_frame(manifest):
    path = os.path.join(HERE, "frame.tfrecord")
    entries = []
    with tf.io.TFRecordWriter(path) as w:
        for seq in SEQUENCES:
            rgb = [frame_bytes(t, 1024, seq["rgb_seed"]) for t in range(seq["frames"])]
            audio = [frame_bytes(t, 128, seq["audio_seed"]) for t in range(seq["frames"])]
            example = tf.train.SequenceExample(
                context=tf.train.Features(
                    feature={
                        "id": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[seq["id"].encode()])
                        ),
                        "labels": tf.train.Feature(
                            int64_list=tf.train.Int64List(value=seq["labels"])
                        ),
                    }
                ),
                feature_lists=tf.train.FeatureLists(
                    feature_list={
                        name: tf.train.FeatureList(
                            feature=[
                                tf.train.Feature(bytes_list=tf.train.BytesList(value=[b]))
                                for b in frames
                            ]
                        )
                        for name, frames in (("rgb", rgb), ("audio", audio))
                    }
                ),
            )
            w.write(example.SerializeToString())
            entries.append(
                {
                    "id": seq["id"],
                    "labels": seq["labels"],
                    "num_frames": seq["frames"],
                    "rgb": {
                        "size": 1024,
                        "seed": seq["rgb_seed"],
                        "byte_sum": int(sum(sum(f) for f in rgb)),
                        "last_frame_first_bytes": list(rgb[-1][:4]),
                    },
                    "audio": {
                        "size": 128,
                        "seed": seq["audio_seed"],
                        "byte_sum": int(sum(sum(f) for f in audio)),
                        "last_frame_first_bytes": list(audio[-1][:4]),
                    },
                }
            )
    # Sanity: TF parses and dequantizes as the starter code does (utils.Dequantize).
    for index, raw in enumerate(tf.data.TFRecordDataset(path)):
        context, lists = tf.io.parse_single_sequence_example(
            raw,
            context_features={
                "id": tf.io.FixedLenFeature([], tf.string),
                "labels": tf.io.VarLenFeature(tf.int64),
            },
            sequence_features={
                "rgb": tf.io.FixedLenSequenceFeature([], dtype=tf.string),
                "audio": tf.io.FixedLenSequenceFeature([], dtype=tf.string),
            },
        )
        assert context["id"].numpy().decode() == SEQUENCES[index]["id"]
        decoded = tf.reshape(tf.cast(tf.io.decode_raw(lists["rgb"], tf.uint8), tf.float32),
                             [-1, 1024])
        assert decoded.shape[0] == SEQUENCES[index]["frames"]
    manifest["frame"] = {
        "file": "frame.tfrecord",
        "formula": "byte i of frame t = (t * 31 + i * 7 + seed * 13) % 256",
        "dequantize": "q * float32(4/255) + float32(-2 + 4/512), each step in float32 "
        "(utils.Dequantize(q, 2, -2))",
        "sequences": entries,
    }


# --- (d) checkpoints ----------------------------------------------------------------------------

TF1_VARIABLES = {
    # name: (dtype, value at step 3, value at step 7)
    "model/weights": (np.float32, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0),
    "model/bias": (np.float64, np.array([1.0, -2.0, 0.1], dtype=np.float64)),
    "global_step": (np.int64, np.array(7, dtype=np.int64)),
    "counts": (np.int32, np.array([-4, 5, 2147483647, -2147483648], dtype=np.int32)),
    "big": (np.int64, np.array([[-(2**62), 2**40 + 3]], dtype=np.int64)),
}


def write_tf1_checkpoint(manifest):
    directory = os.path.join(HERE, "tf1_checkpoint")
    clean(directory)
    os.makedirs(directory)
    with tf.Graph().as_default():
        variables = {}
        for name, (dtype, value) in TF1_VARIABLES.items():
            variables[name] = tf.compat.v1.get_variable(
                name, initializer=tf.constant(value, dtype=tf.as_dtype(dtype)), use_resource=True
            )
        saver = tf.compat.v1.train.Saver(
            var_list=variables, save_relative_paths=True, write_version=tf.compat.v1.train.SaverDef.V2
        )
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            # Step 3: every float is the step-7 value plus 100, global_step 3.
            sess.run(variables["model/weights"].assign(TF1_VARIABLES["model/weights"][1] + 100))
            sess.run(variables["global_step"].assign(3))
            saver.save(sess, os.path.join(directory, "model.ckpt"), global_step=3,
                       write_meta_graph=False)
            sess.run(variables["model/weights"].assign(TF1_VARIABLES["model/weights"][1]))
            sess.run(variables["global_step"].assign(7))
            saver.save(sess, os.path.join(directory, "model.ckpt"), global_step=7,
                       write_meta_graph=False)
    assert tf.train.latest_checkpoint(directory).endswith("model.ckpt-7")
    reader = tf.train.load_checkpoint(os.path.join(directory, "model.ckpt-7"))
    tensors = {}
    for name, (dtype, value) in TF1_VARIABLES.items():
        got = reader.get_tensor(name)
        assert got.dtype == dtype and np.array_equal(got, value), name
        tensors[name] = {
            "dtype": np.dtype(dtype).name,
            "shape": list(value.shape),
            # int64 values travel as strings: JSON numbers are doubles.
            "values": [str(int(v)) if np.issubdtype(dtype, np.integer) else float(v)
                       for v in value.reshape(-1)],
        }
    with open(os.path.join(directory, "checkpoint")) as f:
        state = f.read()
    manifest["tf1_checkpoint"] = {
        "directory": "tf1_checkpoint",
        "latest": "model.ckpt-7",
        "older": "model.ckpt-3",
        "older_weights_offset": 100.0,
        "checkpoint_state_file": state,
        "tensors": tensors,
    }


def write_tf2_checkpoint(manifest):
    directory = os.path.join(HERE, "tf2_checkpoint")
    clean(directory)
    kernel = np.array([[1.5, -2.5, 0.125]], dtype=np.float32)
    step = np.int64(42)
    ckpt = tf.train.Checkpoint(kernel=tf.Variable(kernel), step=tf.Variable(step))
    manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=1)
    prefix = manager.save()
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    manifest["tf2_checkpoint"] = {
        "directory": "tf2_checkpoint",
        "latest": os.path.basename(prefix),
        "names": sorted(shapes),
        "dtypes": {k: dtypes[k].name for k in sorted(dtypes)},
        "kernel_name": "kernel/.ATTRIBUTES/VARIABLE_VALUE",
        "kernel": [float(v) for v in kernel.reshape(-1)],
        "kernel_shape": list(kernel.shape),
        "step_name": "step/.ATTRIBUTES/VARIABLE_VALUE",
        "step": str(int(step)),
        "save_counter_name": "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "save_counter": "1",
        "object_graph_name": "_CHECKPOINTABLE_OBJECT_GRAPH",
    }


# --- (e) event files ----------------------------------------------------------------------------

TF2_SCALARS = [("loss", 0, 1.5), ("loss", 1, 0.75), ("loss", 2, 0.375), ("accuracy", 2, 0.1)]
TF1_SCALARS = [("loss", 10, 2.5), ("loss", 20, 1.25), ("learning_rate", 20, 0.001)]


def write_events(manifest):
    events_dir = os.path.join(HERE, "events")
    clean(events_dir)
    tf2_dir = os.path.join(events_dir, "tf2")
    writer = tf.summary.create_file_writer(tf2_dir)
    with writer.as_default():
        for tag, step, value in TF2_SCALARS:
            tf.summary.scalar(tag, value, step=step)
    writer.close()
    (tf2_file,) = glob.glob(os.path.join(tf2_dir, "*tfevents*"))
    # A fixed name: the generated one holds the host name, pid and time.
    tf2_name = "events.out.tfevents.golden.v2"
    os.rename(tf2_file, os.path.join(tf2_dir, tf2_name))

    tf1_dir = os.path.join(events_dir, "tf1")
    with tf.Graph().as_default():
        fw = tf.compat.v1.summary.FileWriter(tf1_dir)
        for tag, step, value in TF1_SCALARS:
            summary = tf.compat.v1.Summary(
                value=[tf.compat.v1.Summary.Value(tag=tag, simple_value=value)]
            )
            fw.add_summary(summary, global_step=step)
        fw.close()
    (tf1_file,) = glob.glob(os.path.join(tf1_dir, "*tfevents*"))
    tf1_name = "events.out.tfevents.golden.tf1"
    os.rename(tf1_file, os.path.join(tf1_dir, tf1_name))

    def entry(tag, step, value):
        return {"tag": tag, "step": step, "value": float(np.float32(value))}

    manifest["events"] = {
        "tf2": {
            "file": "events/tf2/" + tf2_name,
            "form": "tensor",
            "plugin_name": "scalars",
            "scalars": [entry(*s) for s in TF2_SCALARS],
        },
        "tf1": {
            "file": "events/tf1/" + tf1_name,
            "form": "simple_value",
            "scalars": [entry(*s) for s in TF1_SCALARS],
        },
    }


def main():
    manifest = {
        "generator": {
            "script": "tests/golden/make_golden.py",
            "command": "/work/venv-tf/bin/python tests/golden/make_golden.py",
            "tensorflow_version": tf.__version__,
            "tensorboard_version": TENSORBOARD_VERSION,
            "numpy_version": np.__version__,
            "python_version": platform.python_version(),
            "platform": platform.platform(),
        }
    }
    write_tfrecords(manifest)
    write_video(manifest)
    write_frame(manifest)
    write_tf1_checkpoint(manifest)
    write_tf2_checkpoint(manifest)
    write_events(manifest)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = 0
    for root, _, files in os.walk(HERE):
        for name in files:
            if not name.endswith(".py"):
                total += os.path.getsize(os.path.join(root, name))
    print(f"wrote golden files with TensorFlow {tf.__version__} into {HERE} ({total} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
