"""tf.data side of the input-pipeline benchmark (bench_input is the Trainyard side).

    python input_tfdata.py --pattern 'DIR/train-*.tfrecord' --reader frame|video --threads N
                           [--batch_size B] [--seconds S] [--num_classes K]

TFRecordDataset(files, num_parallel_reads=threads) -> batch -> map(parse) -> prefetch(2), with
the YouTube-8M starter code's feature spec and the same output as Trainyard's YT8M readers:
  video: parse_example {id, labels VarLen int64, mean_rgb [1024] f32, mean_audio [128] f32}
         -> features [B, 1152] f32, labels [B, num_classes] f32 multi-hot, num_frames [B] i32
  frame: parse_sequence_example {context: id, labels; sequence: rgb, audio bytes per frame}
         -> decode_raw uint8 -> f32 -> dequantize to [-2, 2] -> pad/truncate to 300 frames
         (as readers.py's resize_axis does) -> features [B, 300, 1152] f32, labels as above,
         num_frames [B] i32 (frames before padding)
One epoch without shuffling (or epochs for --seconds), then one JSON line like bench_input's.
"""

import argparse
import glob
import json
import os
import resource
import struct
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

MAX_FRAMES = 300
MAX_QUANTIZED = 2.0
MIN_QUANTIZED = -2.0
FEATURES = {"video": (["mean_rgb", "mean_audio"], [1024, 128]),
            "frame": (["rgb", "audio"], [1024, 128])}


def census(files):
    """Records and payload bytes of TFRecord files, from the length headers alone."""
    records = payload = 0
    for name in files:
        with open(name, "rb") as f:
            while True:
                header = f.read(12)
                if len(header) < 12:
                    break
                (length,) = struct.unpack("<Q", header[:8])
                records += 1
                payload += length
                f.seek(length + 4, os.SEEK_CUR)
    return records, payload


def multi_hot(labels, batch, num_classes):
    """SparseTensor of int64 class indices [B, ?] -> f32 [B, num_classes] (sparse_to_dense)."""
    rows = labels.indices[:, 0]
    indices = tf.stack([rows, labels.values], axis=1)
    return tf.scatter_nd(indices, tf.ones_like(labels.values, dtype=tf.float32),
                         tf.stack([tf.cast(batch, tf.int64), num_classes]))


def video_parser(num_classes):
    names, sizes = FEATURES["video"]
    spec = {"id": tf.io.FixedLenFeature([], tf.string),
            "labels": tf.io.VarLenFeature(tf.int64)}
    for name, size in zip(names, sizes):
        spec[name] = tf.io.FixedLenFeature([size], tf.float32)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        batch = tf.shape(serialized)[0]
        features = tf.concat([parsed[name] for name in names], axis=1)
        labels = multi_hot(parsed["labels"], batch, num_classes)
        num_frames = tf.ones([batch], tf.int32)
        return parsed["id"], features, labels, num_frames

    return parse


def frame_parser(num_classes):
    names, sizes = FEATURES["frame"]
    context = {"id": tf.io.FixedLenFeature([], tf.string),
               "labels": tf.io.VarLenFeature(tf.int64)}
    sequence = {name: tf.io.FixedLenSequenceFeature([], dtype=tf.string) for name in names}
    scalar = (MAX_QUANTIZED - MIN_QUANTIZED) / 255.0
    bias = (MAX_QUANTIZED - MIN_QUANTIZED) / 512.0 + MIN_QUANTIZED

    def parse(serialized):
        ctx, seq, lengths = tf.io.parse_sequence_example(
            serialized, context_features=context, sequence_features=sequence)
        batch = tf.shape(serialized)[0]
        matrices = []
        for name, size in zip(names, sizes):
            # [B, T] strings of `size` bytes -> [B, T, size] uint8 -> f32, dequantized.
            decoded = tf.reshape(tf.io.decode_raw(seq[name], tf.uint8), [batch, -1, size])
            values = tf.cast(decoded, tf.float32) * scalar + bias
            # resize_axis: truncate or zero-pad the frame axis to MAX_FRAMES.
            values = values[:, :MAX_FRAMES, :]
            pad = MAX_FRAMES - tf.shape(values)[1]
            values = tf.pad(values, [[0, 0], [0, pad], [0, 0]])
            matrices.append(tf.reshape(values, [batch, MAX_FRAMES, size]))
        features = tf.concat(matrices, axis=2)
        num_frames = tf.cast(tf.minimum(lengths[names[0]], MAX_FRAMES), tf.int32)
        labels = multi_hot(ctx["labels"], batch, num_classes)
        return ctx["id"], features, labels, num_frames

    return parse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pattern", required=True, help="comma-separated globs")
    p.add_argument("--reader", choices=["frame", "video"], default="video")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=0, help="0: 1024 video, 64 frame level")
    p.add_argument("--seconds", type=float, default=0, help="0: one epoch")
    p.add_argument("--num_classes", type=int, default=3862)
    a = p.parse_args()
    batch_size = a.batch_size or (64 if a.reader == "frame" else 1024)

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    files = sorted(f for pat in a.pattern.split(",") for f in glob.glob(pat))
    if not files:
        raise SystemExit("input_tfdata.py: no files match " + a.pattern)
    records_in_files, payload = census(files)
    bytes_per_record = payload / records_in_files

    parse = (frame_parser if a.reader == "frame" else video_parser)(a.num_classes)
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=a.threads)
    if a.seconds > 0:
        ds = ds.repeat()
    ds = ds.batch(batch_size).map(parse, num_parallel_calls=a.threads, deterministic=False)
    ds = ds.prefetch(2)
    options = tf.data.Options()
    options.threading.private_threadpool_size = a.threads
    ds = ds.with_options(options)

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    # Build the iterator before timing (graph tracing is a one-off cost Trainyard lacks).
    iterator = iter(ds)
    cpu_start = cpu()
    start = time.perf_counter()
    records = 0
    checksum = 0
    for _, features, _, _ in iterator:
        records += int(features.shape[0])
        checksum += int(features.shape[1])
        if a.seconds > 0 and time.perf_counter() - start >= a.seconds:
            break
    elapsed = time.perf_counter() - start
    cpu_used = cpu() - cpu_start
    assert checksum > 0
    rps = records / elapsed
    print(json.dumps({"framework": "tensorflow", "workload": a.reader, "threads": a.threads,
                      "batch_size": batch_size, "records": records,
                      "seconds": round(elapsed, 3), "records_per_sec": round(rps, 1),
                      "mb_per_sec": round(rps * bytes_per_record * 1e-6, 1),
                      "cpu_seconds": round(cpu_used, 3)}))


if __name__ == "__main__":
    main()
