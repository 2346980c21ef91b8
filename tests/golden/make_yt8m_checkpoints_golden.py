#!/usr/bin/env python3
"""Checkpoints of the YouTube-8M video-level models as the originals' train.py writes them.

For LogisticModel and MoeModel, and for both originals' variable layouts, this script builds
the training graph of train.py in TensorFlow 1.x (tf.compat.v1 with tf_slim): the raw features
L2-normalized, the model created under train.py's variable scope (google/youtube-8m: "tower";
the WILLOW fork, of the TF 1.0 era: none), CrossEntropyLoss plus the L2 regularization, Adam,
and an int32 `global_step = tf.Variable(0, trainable=False)`. It draws the model's weights,
runs three training steps on a small batch, and saves with tf.compat.v1.train.Saver (V2 format,
relative paths in the `checkpoint` state file), as the originals' Supervisor does:

  yt8m_checkpoints/<case>/model.ckpt-3.*, checkpoint
  yt8m_checkpoints/examples.tfrecord   4 video-level tf.Examples (id, labels, mean_rgb[6],
                                       mean_audio[2])
  yt8m_checkpoints/manifest.txt        per case: the model class, its scope, and the
                                       predictions of the saved weights on the 4 examples

tests/integration/original_checkpoints_test.cc restores each for prediction, resumes training
from it and fine-tunes from it with Trainyard. The checkpoints hold no Trainyard entries (no
seed, no input position).

Command (in a virtual environment outside the repository):

    python3 -m venv /work/venv-tf
    /work/venv-tf/bin/pip install tensorflow-cpu tf_keras tf-slim
    TF_USE_LEGACY_KERAS=1 /work/venv-tf/bin/python tests/golden/make_yt8m_checkpoints_golden.py

Generated with TensorFlow 2.21.0 and tf-slim 1.1.0.
"""

import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import ops as _ops  # noqa: E402

# tf-slim 1.1.0 refers to ops.Tensor, which TensorFlow 2.21 no longer defines; it is tf.Tensor.
if not hasattr(_ops, "Tensor"):
    _ops.Tensor = tf.Tensor
import tf_slim as slim  # noqa: E402

v1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "yt8m_checkpoints")
RGB, AUDIO, CLASSES = 6, 2, 5


def logistic_model(x, c):
    return slim.fully_connected(x, c, activation_fn=tf.nn.sigmoid,
                                weights_regularizer=slim.l2_regularizer(1e-8))


def moe_model(x, c, m=2):
    reg = slim.l2_regularizer(1e-8)
    gates = slim.fully_connected(x, c * (m + 1), activation_fn=None, biases_initializer=None,
                                 weights_regularizer=reg, scope="gates")
    experts = slim.fully_connected(x, c * m, activation_fn=None, weights_regularizer=reg,
                                   scope="experts")
    g = tf.nn.softmax(tf.reshape(gates, [-1, m + 1]))
    e = tf.nn.sigmoid(tf.reshape(experts, [-1, m]))
    return tf.reshape(tf.reduce_sum(g[:, :m] * e, 1), [-1, c])


def cross_entropy_loss(predictions, labels):  # losses.CrossEntropyLoss
    epsilon = 1e-5
    loss = labels * tf.math.log(predictions + epsilon) + (1 - labels) * tf.math.log(
        1 - predictions + epsilon)
    return tf.reduce_mean(tf.reduce_sum(-loss, 1))


CASES = [  # name, Trainyard class, scope, builder
    ("starter_logistic", "LogisticModel", "tower", logistic_model),
    ("starter_moe", "MoeModel", "tower", moe_model),
    ("willow_logistic", "LogisticModel", None, logistic_model),
    ("willow_moe", "MoeModel", None, moe_model),
]


def example(video_id, labels, rgb, audio):
    feature = {
        "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[video_id.encode()])),
        "labels": tf.train.Feature(int64_list=tf.train.Int64List(value=labels)),
        "mean_rgb": tf.train.Feature(float_list=tf.train.FloatList(value=rgb)),
        "mean_audio": tf.train.Feature(float_list=tf.train.FloatList(value=audio)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def floats(a):
    return " ".join(repr(float(v)) for v in np.asarray(a, np.float64).ravel())


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = np.random.RandomState(8)
    raw = rng.normal(0, 1, (4, RGB + AUDIO)).astype(np.float32)
    labels = [[0, 3], [1], [2, 4], [0]]
    with tf.io.TFRecordWriter(os.path.join(OUT, "examples.tfrecord")) as w:
        for i in range(4):
            w.write(example("vid%d" % i, labels[i], raw[i, :RGB], raw[i, RGB:])
                    .SerializeToString())
    train_x = rng.normal(0, 1, (8, RGB + AUDIO)).astype(np.float32)
    train_y = (rng.uniform(size=(8, CLASSES)) < 0.4).astype(np.float32)

    manifest = ["# Written by make_yt8m_checkpoints_golden.py with TensorFlow " + tf.__version__]
    for name, cls, scope, build in CASES:
        graph = tf.Graph()
        with graph.as_default():
            global_step = tf.Variable(0, trainable=False, name="global_step")
            x_raw = v1.placeholder(tf.float32, [None, RGB + AUDIO])
            y = v1.placeholder(tf.float32, [None, CLASSES])
            x = tf.nn.l2_normalize(x_raw, 1)
            if scope:
                with v1.variable_scope(scope):
                    predictions = build(x, CLASSES)
            else:
                predictions = build(x, CLASSES)
            loss = cross_entropy_loss(predictions, y) + tf.add_n(v1.losses.get_regularization_losses())
            train_op = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
            with v1.Session() as sess:
                sess.run(v1.global_variables_initializer())
                for var in v1.model_variables():
                    var.load(rng.normal(0, 0.5, var.shape.as_list()).astype(np.float32), sess)
                for _ in range(3):
                    sess.run(train_op, {x_raw: train_x, y: train_y})
                out = sess.run(predictions, {x_raw: raw})
                case_dir = os.path.join(OUT, name)
                os.makedirs(case_dir)
                cwd = os.getcwd()
                os.chdir(case_dir)
                try:
                    v1.train.Saver().save(sess, "model.ckpt", global_step=global_step,
                                          write_meta_graph=False)
                finally:
                    os.chdir(cwd)
                names = sorted(v.op.name for v in v1.global_variables())
        manifest.append("case " + name)
        manifest.append("model " + cls)
        manifest.append("scope " + (scope or "-"))
        manifest.append("variables " + " ".join(names))
        manifest.append("predictions " + floats(out))
        manifest.append("end")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
