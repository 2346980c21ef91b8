#!/usr/bin/env python3
"""Golden predictions of the YouTube-8M frame-level models, computed by TensorFlow itself.

For each case below this script builds, in a TensorFlow 1.x graph (tf.compat.v1 with tf_slim
and the legacy Keras RNN cells, the ops the originals use), the model of the YouTube-8M starter
code (google/youtube-8m frame_level_models.py) or of the WILLOW fork (its LstmModel, GruModel
and aggregation models NetVLAD, NetRVLAD, NetVLAGD, NetFV, Soft-DBoW, Gated Soft-DBoW and DBoF,
"LF" with the video and audio streams pooled apart) at a tiny size, draws
every variable from a normal distribution (batch-norm variances positive), and writes:

  frame_models/<case>/model.ckpt.*   the variables, with the originals' names
                                     (tf.compat.v1.train.Saver, V2 format)
  frame_models/manifest.txt          per case: the Trainyard model class and options, the
                                     input [B, T, D] and num_frames, and the predictions the
                                     graph computed in inference mode (is_training=False)

tests/unit/frame_models_golden_test.cc loads each checkpoint into the Trainyard model of the same
class by variable name (every variable of the model must be in the checkpoint, and every model
variable of the checkpoint must be used) and compares its predictions, to 1e-4.

Frame sampling is random in the originals; the cases that sample use one random sequence of
`iterations` = T frames from videos of T frames, which is the identity in both.

Command (in a virtual environment outside the repository):

    python3 -m venv /work/venv-tf
    /work/venv-tf/bin/pip install tensorflow-cpu tf_keras tf-slim
    TF_USE_LEGACY_KERAS=1 /work/venv-tf/bin/python tests/golden/make_frame_models_golden.py

Generated with TensorFlow 2.21.0, tf_keras 2.21, tf-slim 1.1.0.
"""

import math
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
OUT = os.path.join(HERE, "frame_models")


def batch_norm(x, scope):
    return slim.batch_norm(x, center=True, scale=True, is_training=False, scope=scope)


def moe(x, num_classes, mixtures, prob_gating=False, l2=1e-8):
    """The starter code's MoeModel; WILLOW's probability gating when asked."""
    reg = slim.l2_regularizer(l2)
    gates = slim.fully_connected(x, num_classes * (mixtures + 1), activation_fn=None,
                                 biases_initializer=None, weights_regularizer=reg, scope="gates")
    experts = slim.fully_connected(x, num_classes * mixtures, activation_fn=None,
                                   weights_regularizer=reg, scope="experts")
    g = tf.nn.softmax(tf.reshape(gates, [-1, mixtures + 1]))
    e = tf.nn.sigmoid(tf.reshape(experts, [-1, mixtures]))
    p = tf.reshape(tf.reduce_sum(g[:, :mixtures] * e, 1), [-1, num_classes])
    if prob_gating:
        w = v1.get_variable("gating_prob_weights", [num_classes, num_classes],
                            initializer=v1.random_normal_initializer(
                                stddev=1 / math.sqrt(num_classes)))
        p = p * tf.sigmoid(batch_norm(tf.matmul(p, w), "gating_prob_bn"))
    return p


def frame_logistic(x, n, c):
    feature_size = x.shape.as_list()[2]
    denominators = tf.reshape(tf.tile(tf.cast(tf.expand_dims(n, 1), tf.float32),
                                      [1, feature_size]), [-1, feature_size])
    pooled = tf.reduce_sum(x, axis=[1]) / denominators
    return slim.fully_connected(pooled, c, activation_fn=tf.nn.sigmoid,
                                weights_regularizer=slim.l2_regularizer(1e-8))


def dbof(x, n, c, cluster, hidden, batch_norm_on, activation, pooling, mixtures):
    t, d = x.shape.as_list()[1:]
    act = {"sigmoid": tf.nn.sigmoid, "relu6": tf.nn.relu6}[activation]
    h = tf.reshape(x, [-1, d])  # one random sequence of T frames from T frames: the identity
    if batch_norm_on:
        h = batch_norm(h, "input_bn")
    w = v1.get_variable("cluster_weights", [d, cluster])
    a = tf.matmul(h, w)
    a = batch_norm(a, "cluster_bn") if batch_norm_on else a + v1.get_variable(
        "cluster_biases", [cluster])
    a = tf.reshape(act(a), [-1, t, cluster])
    a = tf.reduce_max(a, 1) if pooling == "max" else tf.reduce_mean(a, 1)
    a = tf.matmul(a, v1.get_variable("hidden1_weights", [cluster, hidden]))
    a = batch_norm(a, "hidden1_bn") if batch_norm_on else a + v1.get_variable(
        "hidden1_biases", [hidden])
    return moe(act(a), c, mixtures)


def lstm(x, n, c, cells, layers, concat_state, mixtures):
    cell = v1.nn.rnn_cell.MultiRNNCell(
        [v1.nn.rnn_cell.BasicLSTMCell(cells, forget_bias=1.0, state_is_tuple=not concat_state)
         for _ in range(layers)], state_is_tuple=not concat_state)
    if concat_state:  # WILLOW's LstmModel
        with v1.variable_scope("RNN"):
            _, state = v1.nn.dynamic_rnn(cell, x, sequence_length=n, dtype=tf.float32)
        return moe(state, c, mixtures)
    _, state = v1.nn.dynamic_rnn(cell, x, sequence_length=n, dtype=tf.float32)
    return moe(state[-1].h, c, mixtures)


def gru(x, n, c, cells, layers, mixtures, prob_gating):
    cell = v1.nn.rnn_cell.MultiRNNCell([v1.nn.rnn_cell.GRUCell(cells) for _ in range(layers)],
                                       state_is_tuple=False)
    with v1.variable_scope("RNN"):
        _, state = v1.nn.dynamic_rnn(cell, x, sequence_length=n, dtype=tf.float32)
    return moe(state, c, mixtures, prob_gating)


# ---- WILLOW's aggregation models (Youtube-8M-WILLOW frame_level_models.py), each pooling the
# video stream x[:, :split] with K clusters and the audio stream x[:, split:] with K / 2 (K / 8
# for the DBoF family). The original splits at 1024; Trainyard's video_feature_size option is
# that split, set small here.


def cluster_assignment(x, d, k):
    w = v1.get_variable("cluster_weights", [d, k])
    return tf.nn.softmax(batch_norm(tf.matmul(x, w), "cluster_bn"))


def vlad_block(x, t, d, k, kind):
    a = tf.reshape(cluster_assignment(x, d, k), [-1, t, k])
    frames = tf.reshape(x, [-1, t, d])
    v = tf.matmul(tf.transpose(a, [0, 2, 1]), frames)  # [B, k, d]
    if kind == "vlagd":
        v = v * tf.sigmoid(v1.get_variable("gate_weights", [1, k, d]))
    v = tf.transpose(v, [0, 2, 1])  # [B, d, k]
    if kind == "vlad":
        v = v - tf.reduce_sum(a, -2, keepdims=True) * v1.get_variable("cluster_weights2",
                                                                       [1, d, k])
    v = tf.nn.l2_normalize(v, 1)
    return tf.nn.l2_normalize(tf.reshape(v, [-1, k * d]), 1)


def fv_block(x, t, d, k, couple):
    w = v1.get_variable("cluster_weights", [d, k])
    covar = tf.square(v1.get_variable("covar_weights", [d, k])) + 1e-6
    a = tf.reshape(tf.nn.softmax(batch_norm(tf.matmul(x, w), "cluster_bn")), [-1, t, k])
    a_sum = tf.reduce_sum(a, -2, keepdims=True)
    mu = 0.01 * w if couple else v1.get_variable("cluster_weights2", [1, d, k])
    frames = tf.reshape(x, [-1, t, d])
    at = tf.transpose(a, [0, 2, 1])
    fv1 = tf.transpose(tf.matmul(at, frames), [0, 2, 1])
    fv2 = tf.transpose(tf.matmul(at, tf.square(frames)), [0, 2, 1])
    fv2 = (a_sum * tf.square(mu) + fv2 - 2.0 * fv1 * mu) / tf.square(covar) - a_sum
    fv2 = tf.nn.l2_normalize(tf.nn.l2_normalize(tf.reshape(fv2, [-1, k * d]), 1), 1)
    fv1 = tf.nn.l2_normalize((fv1 - a_sum * mu) / covar, 1)
    fv1 = tf.nn.l2_normalize(tf.reshape(fv1, [-1, k * d]), 1)
    return tf.concat([fv1, fv2], 1)


def soft_dbof_block(x, t, d, k, max_pool):
    a = tf.reshape(cluster_assignment(x, d, k), [-1, t, k])
    out = tf.nn.l2_normalize(tf.reduce_sum(a, 1), 1)
    if max_pool:
        out = tf.concat([out, tf.nn.l2_normalize(tf.reduce_max(a, 1), 1)], 1)
    return out


def gated_dbof_block(x, t, d, k):
    a = tf.reshape(cluster_assignment(x, d, k), [-1, t, k])
    total = tf.reduce_sum(a, 1)
    peak = tf.nn.l2_normalize(tf.reduce_max(a, 1), 1)
    gate = tf.matmul(tf.matmul(peak, v1.get_variable("dim_red", [k, d])),
                     v1.get_variable("cluster_weights_2", [d, k]))
    gate = tf.sigmoid(batch_norm(gate, "cluster_bn_2"))
    return tf.nn.l2_normalize(gate * total, 1)


def plain_dbof_block(x, t, d, k):
    # WILLOW's DBoF compares its activation tensor with 'glu' and 'relu': no activation.
    h = batch_norm(tf.matmul(x, v1.get_variable("cluster_weights", [d, k])), "cluster_bn")
    h = tf.reshape(h, [-1, t, k])
    return tf.concat([tf.nn.l2_normalize(tf.reduce_mean(h, 1), 1),
                      tf.nn.l2_normalize(tf.reduce_max(h, 1), 1)], 1)


def willow_lf(x, n, c, split, names, video_block, audio_block, hidden, relu, gating,
              prob_gating):
    t, d = x.shape.as_list()[1:]
    h = batch_norm(tf.reshape(x, [-1, d]), "input_bn")
    with v1.variable_scope("video_" + names):
        video = video_block(h[:, :split], t, split)
    with v1.variable_scope("audio_" + names):
        audio = audio_block(h[:, split:], t, d - split)
    pooled = tf.concat([video, audio], 1)
    a = tf.matmul(pooled, v1.get_variable("hidden1_weights", [pooled.shape[1], hidden]))
    if relu:
        a = tf.nn.relu6(batch_norm(a, "hidden1_bn"))
    else:
        a = a + v1.get_variable("hidden1_biases", [hidden])
    if gating:  # Context Gating
        g = tf.matmul(a, v1.get_variable("gating_weights_2", [hidden, hidden]))
        a = a * tf.sigmoid(batch_norm(g, "gating_bn"))
    return moe(a, c, 2, prob_gating)


def willow_options(extra):
    return [("iterations", "int", 5), ("sample_random_frames", "bool", "false"),
            ("video_feature_size", "int", 7)] + extra


# name, Trainyard class, options (name, type, value), B, T, D, classes, num_frames, builder
CASES = [
    ("frame_logistic", "FrameLevelLogisticModel", [], 3, 5, 6, 4, [5, 2, 3],
     lambda x, n, c: frame_logistic(x, n, c)),
    ("dbof", "DbofModel",
     [("iterations", "int", 5), ("sample_random_frames", "bool", "false"),
      ("dbof_cluster_size", "int", 7), ("dbof_hidden_size", "int", 5)],
     3, 5, 6, 4, [5, 5, 5],
     lambda x, n, c: dbof(x, n, c, 7, 5, True, "sigmoid", "max", 2)),
    ("dbof_plain_relu6_average", "DbofModel",
     [("iterations", "int", 4), ("sample_random_frames", "bool", "false"),
      ("dbof_cluster_size", "int", 6), ("dbof_hidden_size", "int", 3),
      ("dbof_add_batch_norm", "bool", "false"), ("dbof_activation", "string", "relu6"),
      ("dbof_pooling_method", "string", "average"), ("moe_num_mixtures", "int", 3)],
     2, 4, 5, 3, [4, 4],
     lambda x, n, c: dbof(x, n, c, 6, 3, False, "relu6", "average", 3)),
    ("lstm", "LstmModel", [("lstm_cells", "int", 4), ("lstm_layers", "int", 2)],
     3, 6, 5, 4, [6, 3, 1],
     lambda x, n, c: lstm(x, n, c, 4, 2, False, 2)),
    ("lstm_willow", "LstmModel",
     [("lstm_cells", "int", 3), ("lstm_layers", "int", 2), ("lstm_concat_state", "bool", "true")],
     2, 5, 4, 3, [5, 2],
     lambda x, n, c: lstm(x, n, c, 3, 2, True, 2)),
    ("gru_prob_gating", "GruModel",
     [("gru_cells", "int", 3), ("gru_layers", "int", 2), ("moe_prob_gating", "bool", "true")],
     3, 5, 4, 4, [5, 4, 2],
     lambda x, n, c: gru(x, n, c, 3, 2, 2, True)),
    ("willow_gated_netvlad", "NetVLADModelLF",
     willow_options([("netvlad_cluster_size", "int", 4), ("netvlad_hidden_size", "int", 5),
                     ("netvlad_relu", "bool", "false"), ("gating", "bool", "true"),
                     ("moe_prob_gating", "bool", "true")]),
     3, 5, 10, 4, [5, 5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "VLAD",
                               lambda h, t, d: vlad_block(h, t, d, 4, "vlad"),
                               lambda h, t, d: vlad_block(h, t, d, 2, "vlad"), 5, False, True,
                               True)),
    ("willow_netrvlad_relu", "NetVLADModelLF",
     willow_options([("netvlad_cluster_size", "int", 5), ("netvlad_hidden_size", "int", 4),
                     ("lightvlad", "bool", "true")]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "VLAD",
                               lambda h, t, d: vlad_block(h, t, d, 5, "light"),
                               lambda h, t, d: vlad_block(h, t, d, 2, "light"), 4, True, False,
                               False)),
    ("willow_netvlagd", "NetVLADModelLF",
     willow_options([("netvlad_cluster_size", "int", 4), ("netvlad_hidden_size", "int", 4),
                     ("vlagd", "bool", "true")]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "VLAD",
                               lambda h, t, d: vlad_block(h, t, d, 4, "vlagd"),
                               lambda h, t, d: vlad_block(h, t, d, 2, "vlagd"), 4, True, False,
                               False)),
    ("willow_gated_netfv", "NetFVModelLF",
     willow_options([("fv_cluster_size", "int", 4), ("fv_hidden_size", "int", 5),
                     ("fv_relu", "bool", "false"), ("gating", "bool", "true"),
                     ("fv_couple_weights", "bool", "false")]),
     3, 5, 10, 4, [5, 5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "FV", lambda h, t, d: fv_block(h, t, d, 4, False),
                               lambda h, t, d: fv_block(h, t, d, 2, False), 5, False, True,
                               False)),
    ("willow_netfv_coupled", "NetFVModelLF",
     willow_options([("fv_cluster_size", "int", 3), ("fv_hidden_size", "int", 4)]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "FV", lambda h, t, d: fv_block(h, t, d, 3, True),
                               lambda h, t, d: fv_block(h, t, d, 1, True), 4, True, False,
                               False)),
    ("willow_soft_dbow_maxpool", "SoftDbofModelLF",
     willow_options([("dbof_cluster_size", "int", 16), ("dbof_hidden_size", "int", 5),
                     ("dbof_relu", "bool", "false"), ("softdbof_maxpool", "bool", "true")]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "DBOF",
                               lambda h, t, d: soft_dbof_block(h, t, d, 16, True),
                               lambda h, t, d: soft_dbof_block(h, t, d, 2, True), 5, False,
                               False, False)),
    ("willow_gated_soft_dbow", "GatedDbofModelLF",
     willow_options([("dbof_cluster_size", "int", 16), ("dbof_hidden_size", "int", 5)]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "DBOF", lambda h, t, d: gated_dbof_block(h, t, d, 16),
                               lambda h, t, d: soft_dbof_block(h, t, d, 2, False), 5, True,
                               False, False)),
    ("willow_dbof_lf", "DbofModelLF",
     willow_options([("dbof_cluster_size", "int", 16), ("dbof_hidden_size", "int", 5)]),
     2, 5, 10, 3, [5, 5],
     lambda x, n, c: willow_lf(x, n, c, 7, "DBOF", lambda h, t, d: plain_dbof_block(h, t, d, 16),
                               lambda h, t, d: plain_dbof_block(h, t, d, 2), 5, True, False,
                               False)),
]


def floats(a):
    return " ".join(repr(float(v)) for v in np.asarray(a, np.float64).ravel())


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rng = np.random.RandomState(2017)
    manifest = ["# Written by make_frame_models_golden.py with TensorFlow " + tf.__version__]
    for name, cls, options, b, t, d, c, n, build in CASES:
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [b, t, d])
            frames = v1.placeholder(tf.int32, [b])
            predictions = build(x, frames, c)
            with v1.Session() as sess:
                sess.run(v1.global_variables_initializer())
                for var in v1.global_variables():
                    shape = var.shape.as_list()
                    value = rng.normal(0.0, 0.5, shape)
                    if var.op.name.endswith("moving_variance"):
                        value = rng.uniform(0.5, 2.0, shape)
                    var.load(value.astype(np.float32), sess)
                features = rng.normal(0.0, 1.0, (b, t, d)).astype(np.float32)
                for e in range(b):  # padding frames are zero, as the reader pads them
                    features[e, n[e]:, :] = 0.0
                # L2-normalized frames, as the trainer gives them.
                norms = np.sqrt((features ** 2).sum(-1, keepdims=True))
                features = np.where(norms > 0, features / np.maximum(norms, 1e-12), 0.0)
                features = features.astype(np.float32)
                out = sess.run(predictions, {x: features, frames: np.array(n, np.int32)})
                os.makedirs(os.path.join(OUT, name))
                v1.train.Saver(v1.global_variables()).save(
                    sess, os.path.join(OUT, name, "model.ckpt"), write_meta_graph=False,
                    write_state=False)
        manifest.append("case " + name)
        manifest.append("model " + cls)
        manifest.append("num_classes %d" % c)
        for key, kind, value in options:
            manifest.append("option %s %s %s" % (key, kind, value))
        manifest.append("shape %d %d %d" % (b, t, d))
        manifest.append("num_frames " + " ".join(str(v) for v in n))
        manifest.append("features " + floats(features))
        manifest.append("predictions " + floats(out))
        manifest.append("end")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
