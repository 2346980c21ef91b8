#!/usr/bin/env python3
"""Golden TF-Slim image classifiers, written and run by TensorFlow itself: tests/golden/slim_nets/.

Three tiny networks with TF-Slim's variable names are built in a TensorFlow 1.x graph
(tf.compat.v1 + tf_slim), every variable is drawn at random from a fixed seed (He-normal
weights, gamma uniform, beta and biases normal), then calibrate() redraws, in graph order, each
batch norm's moving_mean / moving_variance around its input's statistics over the batch
(variance always positive) and scales and centres the logits layer, so activations stay O(1)
at every depth (with plain random statistics they grew layer by layer and MobileNet's softmax
was one-hot) and the probabilities are neither uniform nor one-hot. A fixed batch of 4 images is
run through them in inference mode:

  resnet_v1_small   tf_slim.nets.resnet_v1.resnet_v1() under resnet_arg_scope(), input
                    [4, 32, 32, 3], blocks [resnet_v1_block('block1', base_depth=4, num_units=2,
                    stride=2), resnet_v1_block('block2', base_depth=8, num_units=2, stride=1)],
                    num_classes=5, is_training=False, global_pool=True, include_root_block=True,
                    scope='resnet_v1_small'
  mobilenet_v1_025  MobileNet v1 of tensorflow/models research/slim/nets/mobilenet_v1.py (tf_slim
                    1.1.0 has no mobilenet_v1; mobilenet_v1() below re-states it with tf_slim
                    layers: same variable names, padding, depthwise multiplier, min_depth rule,
                    _reduced_kernel_size_for_small_input and Logits/Conv2d_1c_1x1 head) under
                    mobilenet_v1_arg_scope(is_training=False), input [4, 64, 64, 3],
                    depth_multiplier=0.25, num_classes=5, scope 'MobilenetV1', global_pool left
                    at the original's default (False: AvgPool_1a with the reduced kernel)
  inception_v2_01   inception_v2() of tensorflow/models research/slim/nets/inception_v2.py (the
                    one the Object Detection API's SSD extractor builds; tf_slim 1.1.0's copy
                    predates use_separable_conv) under inception_v2_arg_scope(), input
                    [4, 64, 64, 3], depth_multiplier=0.1 (min_depth 16 sets most depths, and
                    Conv2d_1a_7x7's depthwise multiplier int(16 / 3) = 5), num_classes=5,
                    is_training=False
  inception_v3_01   inception_v3() of research/slim/nets/inception_v3.py under
                    inception_v3_arg_scope(), input [4, 139, 139, 3] (the smallest for which
                    AuxLogits' 5x5 pool of Mixed_6e fits), depth_multiplier=0.1, num_classes=5,
                    is_training=False (AuxLogits built and saved, not in the probabilities)
  mobilenet_v3_small_025
                    the API's own research/slim/nets/mobilenet/mobilenet_v3.py (not in tf_slim:
                    set MOBILENET_V3_FILES to a folder holding its conv_blocks.py, mobilenet.py
                    and mobilenet_v3.py of 2020 or later, e.g. github.com/vmdhhh/MobileNetV2 at
                    b136df7, as its first commit took them from tensorflow/models), mobilenet_v3.small under
                    training_scope(is_training=False), input [4, 64, 64, 3],
                    depth_multiplier=0.25, num_classes=5, scope 'MobilenetV3'

For each net <net>/ holds:
  v2/model.ckpt.index, v2/model.ckpt.data-00000-of-00001, v2/checkpoint   (Saver, V2 layout)
  v1/model.ckpt, v1/checkpoint                   (Saver with write_version=SaverDef.V1)
  images.f32          the input, raw little-endian float32, NHWC [4, H, W, 3], values in [-1, 1)
  logits.f32          TensorFlow's logits, little-endian float32 [4, 5]
  probabilities.f32   TensorFlow's softmax of the logits (the net's own predictions end point),
                      little-endian float32 [4, 5]
  manifest.txt        shapes, every variable (name, dtype, shape) in checkpoint order, the
                      end points with their shapes and statistics, every op of the inference
                      graph (strides, padding, pads, epsilon), versions, the command
slim_nets/README.md states the architectures (hand-written from what this script checked).
Both layouts hold the same variables with the same values; meta graphs are not written.
Two runs on one machine write byte-identical files, V1 included; the calibration runs the graph,
so another CPU (other kernels) may change the low bits of the moving statistics.

Command (in a virtual environment outside the repository, with tensorflow-cpu 2.21; tf_slim's
layers need the legacy Keras of tf_keras, installed with --no-deps so that it does not pull the
`tensorflow` wheel over tensorflow-cpu):

    /work/venv-peers/bin/pip install tf-slim
    /work/venv-peers/bin/pip install --no-deps tf_keras==2.21.0
    TF_USE_LEGACY_KERAS=1 /work/venv-peers/bin/python tests/golden/make_slim_nets_golden.py

(the script sets TF_USE_LEGACY_KERAS=1 itself when it is unset). The Inception cases need
tensorflow/models' research/slim/nets: give its directory as the first argument, and optionally
the cases to write (the others are left as they are):

    make_slim_nets_golden.py [NETS_DIR [CASE ...]]

The Inception cases were written with the nets/ of telize-ai/tfold (commit b7e1a7e, a 2019 copy
of research/slim/nets) and tf_keras 2.21.0 installed with pip --target on PYTHONPATH.
mobilenet_v3_small_025 was added with MOBILENET_V3_FILES=<folder> (above) and the case named
(`make_slim_nets_golden.py NETS_DIR mobilenet_v3_small_025`) from a virtual environment with the
same versions. Each case's random values are seeded by its position in CASES (SEED_INDEX keeps
mobilenet_v3_small_025 at the position it was first written at).
Generated with TensorFlow 2.21.0 (tensorflow-cpu), tf-slim 1.1.0, tf_keras 2.21.0, numpy 2.4.6,
Python 3.11.7 on Linux x86_64.
Seeds: images from numpy RandomState(20240601 + net index); each variable from
RandomState(SEED ^ crc32(name)), so a value does not depend on creation order.
"""

import atexit
import collections
import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import ops as _ops  # noqa: E402

# tf-slim 1.1.0 refers to ops.Tensor, which TensorFlow 2.21 no longer defines; it is tf.Tensor.
if not hasattr(_ops, "Tensor"):
    _ops.Tensor = tf.Tensor
# slim.batch_norm (with the default updates_collections, as both arg scopes have) builds the
# legacy BatchNormalization layer, which TensorFlow 2.21 loads lazily from
# tf_keras.legacy_tf_layers.normalization; tf_keras 2.21 keeps that module under tf_keras.src.
try:
    import tf_keras.legacy_tf_layers.normalization  # noqa: E402,F401
except ImportError:
    import tf_keras.src.legacy_tf_layers as _legacy_layers  # noqa: E402
    import tf_keras.src.legacy_tf_layers.normalization  # noqa: E402,F401
    sys.modules["tf_keras.legacy_tf_layers"] = _legacy_layers
    sys.modules["tf_keras.legacy_tf_layers.normalization"] = _legacy_layers.normalization
import tf_slim as slim  # noqa: E402
from tf_slim.nets import resnet_v1  # noqa: E402

v1 = tf.compat.v1
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "slim_nets")
SEED = 0x51A1_2024
COMMAND = "TF_USE_LEGACY_KERAS=1 /work/venv-peers/bin/python tests/golden/make_slim_nets_golden.py"


# --------------------------------------------------------------------------------------------
# MobileNet v1, as tensorflow/models research/slim/nets/mobilenet_v1.py defines it (the
# tf_slim-era version: normalizer_fn comes from mobilenet_v1_arg_scope, use_explicit_padding
# False, global_pool False by default). Only what the classifier path uses is re-stated.
# --------------------------------------------------------------------------------------------
Conv = collections.namedtuple("Conv", ["kernel", "stride", "depth"])
DepthSepConv = collections.namedtuple("DepthSepConv", ["kernel", "stride", "depth"])

MOBILENETV1_CONV_DEFS = [
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
]


def mobilenet_v1_base(inputs, min_depth=8, depth_multiplier=1.0, scope=None):
    """mobilenet_v1_base up to Conv2d_13_pointwise, output_stride None, padding 'SAME'."""
    depth = lambda d: max(int(d * depth_multiplier), min_depth)  # noqa: E731
    end_points = {}
    with v1.variable_scope(scope, "MobilenetV1", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding="SAME"):
            net = inputs
            for i, conv_def in enumerate(MOBILENETV1_CONV_DEFS):
                base = "Conv2d_%d" % i
                if isinstance(conv_def, Conv):
                    net = slim.conv2d(net, depth(conv_def.depth), conv_def.kernel,
                                      stride=conv_def.stride, scope=base)
                    end_points[base] = net
                else:
                    # num_outputs=None: separable_conv2d makes only the depthwise convolution.
                    net = slim.separable_conv2d(net, None, conv_def.kernel, depth_multiplier=1,
                                                stride=conv_def.stride, rate=1,
                                                scope=base + "_depthwise")
                    end_points[base + "_depthwise"] = net
                    net = slim.conv2d(net, depth(conv_def.depth), [1, 1], stride=1,
                                      scope=base + "_pointwise")
                    end_points[base + "_pointwise"] = net
    return net, end_points


def _reduced_kernel_size_for_small_input(input_tensor, kernel_size):
    shape = input_tensor.get_shape().as_list()
    if shape[1] is None or shape[2] is None:
        return kernel_size
    return [min(shape[1], kernel_size[0]), min(shape[2], kernel_size[1])]


def mobilenet_v1(inputs, num_classes=1000, dropout_keep_prob=0.999, is_training=True,
                 min_depth=8, depth_multiplier=1.0, prediction_fn=slim.softmax,
                 spatial_squeeze=True, reuse=None, scope="MobilenetV1", global_pool=False):
    with v1.variable_scope(scope, "MobilenetV1", [inputs], reuse=reuse) as sc:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            net, end_points = mobilenet_v1_base(inputs, scope=sc, min_depth=min_depth,
                                                depth_multiplier=depth_multiplier)
            with v1.variable_scope("Logits"):
                if global_pool:
                    net = tf.reduce_mean(net, [1, 2], keepdims=True, name="global_pool")
                    end_points["global_pool"] = net
                else:
                    kernel_size = _reduced_kernel_size_for_small_input(net, [7, 7])
                    end_points["_avg_pool_kernel"] = kernel_size  # recorded, then removed
                    net = slim.avg_pool2d(net, kernel_size, padding="VALID", scope="AvgPool_1a")
                    end_points["AvgPool_1a"] = net
                net = slim.dropout(net, keep_prob=dropout_keep_prob, scope="Dropout_1b")
                logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                     normalizer_fn=None, scope="Conv2d_1c_1x1")
                if spatial_squeeze:
                    logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
            end_points["Logits"] = logits
            if prediction_fn:
                end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


def mobilenet_v1_arg_scope(is_training=True, weight_decay=0.00004, stddev=0.09,
                           regularize_depthwise=False, batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001,
                           batch_norm_updates_collections=v1.GraphKeys.UPDATE_OPS,
                           normalizer_fn=slim.batch_norm):
    batch_norm_params = {
        "center": True,
        "scale": True,
        "decay": batch_norm_decay,
        "epsilon": batch_norm_epsilon,
        "updates_collections": batch_norm_updates_collections,
    }
    if is_training is not None:
        batch_norm_params["is_training"] = is_training
    weights_init = v1.truncated_normal_initializer(stddev=stddev)
    regularizer = slim.l2_regularizer(weight_decay)
    depthwise_regularizer = regularizer if regularize_depthwise else None
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], weights_initializer=weights_init,
                        activation_fn=tf.nn.relu6, normalizer_fn=normalizer_fn):
        with slim.arg_scope([slim.batch_norm], **batch_norm_params):
            with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer):
                with slim.arg_scope([slim.separable_conv2d],
                                    weights_regularizer=depthwise_regularizer) as sc:
                    return sc


# --------------------------------------------------------------------------------------------
# The cases.
# --------------------------------------------------------------------------------------------
def build_resnet(images):
    blocks = [
        resnet_v1.resnet_v1_block("block1", base_depth=4, num_units=2, stride=2),
        resnet_v1.resnet_v1_block("block2", base_depth=8, num_units=2, stride=1),
    ]
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        # tf_slim's resnet_v1() has no spatial_squeeze argument: the logits are [N, 1, 1, 5].
        logits, end_points = resnet_v1.resnet_v1(
            images, blocks, num_classes=5, is_training=False, global_pool=True,
            include_root_block=True, scope="resnet_v1_small")
    pre_logits = tf.compat.v1.get_default_graph().get_tensor_by_name("resnet_v1_small/pool5:0")
    return logits, end_points["predictions"], end_points, pre_logits


def build_mobilenet(images):
    with slim.arg_scope(mobilenet_v1_arg_scope(is_training=False)):
        logits, end_points = mobilenet_v1(images, num_classes=5, is_training=False,
                                          depth_multiplier=0.25, scope="MobilenetV1")
    # Dropout_1b is the identity at inference: the logits layer sees AvgPool_1a.
    return logits, end_points["Predictions"], end_points, end_points["AvgPool_1a"]


# tensorflow/models' research/slim/nets, loaded by load_models_nets() from the first argument.
MODELS_NETS = {}


def load_models_nets(nets_dir):
    """Imports inception_utils, inception_v2 and inception_v3 of research/slim/nets from a copy in
    a temporary directory, with their imports rewritten to this TensorFlow (tf.compat.v1) and
    tf_slim; nothing else is changed."""
    import importlib
    import tempfile
    work = tempfile.mkdtemp()
    os.makedirs(os.path.join(work, "nets"))
    open(os.path.join(work, "nets", "__init__.py"), "w").close()
    for name in ("inception_utils", "inception_v2", "inception_v3"):
        with open(os.path.join(nets_dir, name + ".py")) as f:
            text = f.read()
        text = text.replace("from tfold.nets import", "from nets import")
        text = text.replace("import tensorflow as tf", "import tensorflow.compat.v1 as tf")
        text = text.replace("slim = tf.contrib.slim", "import tf_slim as slim")
        with open(os.path.join(work, "nets", name + ".py"), "w") as f:
            f.write(text)
    sys.path.insert(0, work)
    for name in ("inception_v2", "inception_v3"):
        MODELS_NETS[name] = importlib.import_module("nets." + name)


def build_inception_v2(images):
    net = MODELS_NETS["inception_v2"]
    with slim.arg_scope(net.inception_v2_arg_scope()):
        logits, end_points = net.inception_v2(images, num_classes=5, is_training=False,
                                              depth_multiplier=0.1)
    return logits, end_points["Predictions"], end_points, end_points["AvgPool_1a"]


def build_inception_v3(images):
    net = MODELS_NETS["inception_v3"]
    with slim.arg_scope(net.inception_v3_arg_scope()):
        logits, end_points = net.inception_v3(images, num_classes=5, is_training=False,
                                              depth_multiplier=0.1)
    return logits, end_points["Predictions"], end_points, end_points["AvgPool_1a"]


def import_mobilenet_v3():
    """The API's nets/mobilenet/mobilenet_v3.py (with its conv_blocks.py and mobilenet.py) from
    the folder MOBILENET_V3_FILES names, as package nets.mobilenet in a temporary folder;
    numpy 2 has no np.int, which mobilenet_v3's _reduce_consecutive_layers calls: it is int."""
    source = os.environ.get("MOBILENET_V3_FILES")
    if not source:
        sys.exit("mobilenet_v3_small_025 needs MOBILENET_V3_FILES (see the header)")
    work = tempfile.mkdtemp(prefix="slim-mobilenet-v3-")
    atexit.register(shutil.rmtree, work, True)
    package = os.path.join(work, "nets", "mobilenet")
    os.makedirs(package)
    for init in (os.path.join(work, "nets"), package):
        open(os.path.join(init, "__init__.py"), "w").close()
    for f in ("conv_blocks.py", "mobilenet.py", "mobilenet_v3.py"):
        shutil.copy(os.path.join(source, f), package)
    if not hasattr(np, "int"):
        np.int = int
    sys.path.insert(0, work)
    from nets.mobilenet import mobilenet_v3  # noqa: E402 pylint: disable=import-outside-toplevel
    return mobilenet_v3


def build_mobilenet_v3(images):
    mobilenet_v3 = import_mobilenet_v3()
    with slim.arg_scope(mobilenet_v3.training_scope(is_training=False)):
        logits, end_points = mobilenet_v3.small(images, num_classes=5, depth_multiplier=0.25)
    # Logits/Dropout is the identity at inference: the logits layer sees global_pool.
    return logits, end_points["Predictions"], end_points, end_points["global_pool"]


# name, input shape, builder, logits variable scope, random ranges.
CASES = [
    ("resnet_v1_small", [4, 32, 32, 3], build_resnet, "resnet_v1_small/logits",
     dict(gamma=(0.5, 1.5), beta=0.2)),
    ("mobilenet_v1_025", [4, 64, 64, 3], build_mobilenet, "MobilenetV1/Logits/Conv2d_1c_1x1",
     dict(gamma=(1.0, 4.0), beta=0.5)),
    ("inception_v2_01", [4, 64, 64, 3], build_inception_v2, "InceptionV2/Logits/Conv2d_1c_1x1",
     dict(gamma=(0.5, 1.5), beta=0.2)),
    ("inception_v3_01", [4, 139, 139, 3], build_inception_v3,
     "InceptionV3/Logits/Conv2d_1c_1x1", dict(gamma=(0.5, 1.5), beta=0.2)),
    ("mobilenet_v3_small_025", [4, 64, 64, 3], build_mobilenet_v3,
     "MobilenetV3/Logits/Conv2d_1c_1x1", dict(gamma=(1.0, 4.0), beta=0.5)),
]

# Cases written when CASES held them at another position (the position seeds the images).
SEED_INDEX = {"mobilenet_v3_small_025": 2}


def rng_for(name):
    return np.random.RandomState((SEED ^ zlib.crc32(name.encode())) & 0xFFFFFFFF)


def value_for(name, shape, ranges):
    """The first draw of every variable; moving statistics and the logits layer are redrawn
    from the activations by calibrate()."""
    rng = rng_for(name)
    base = name.rsplit("/", 1)[-1]
    if base == "weights":  # conv HWIO: He normal
        return rng.normal(0.0, np.sqrt(2.0 / (shape[0] * shape[1] * shape[2])), shape)
    if base == "pointwise_weights":  # separable_conv2d's 1x1 [1, 1, C * multiplier, out]
        return rng.normal(0.0, np.sqrt(2.0 / shape[2]), shape)
    if base == "depthwise_weights":  # [kh, kw, C, multiplier]
        return rng.normal(0.0, np.sqrt(2.0 / (shape[0] * shape[1])), shape)
    if base == "biases":
        return rng.normal(0.0, 0.3, shape)
    if base == "gamma":
        return rng.uniform(ranges["gamma"][0], ranges["gamma"][1], shape)
    if base == "beta":
        return rng.normal(0.0, ranges["beta"], shape)
    if base == "moving_mean":
        return rng.normal(0.0, 0.2, shape)
    if base == "moving_variance":
        return rng.uniform(0.5, 1.5, shape)
    raise ValueError("no initialization rule for " + name)


def variable_of(tensor):
    op = tensor.op
    while op.type not in ("VarHandleOp", "VariableV2"):
        op = op.inputs[0].op
    return op.name


def calibrate(sess, graph, variables, feed, pre_logits, logits_scope):
    """Keeps activations O(1) whatever the depth: in graph order, each batch norm's moving
    statistics become its input's statistics over this batch, perturbed at random
    (moving_mean = mean + 0.2 std N(0, 1), moving_variance = var U(0.5, 1.5)); then the logits
    weights are scaled so the logits vary by about 2 across the batch, and the biases centre
    them (plus N(0, 0.5)), so the softmax is neither uniform nor one-hot."""
    by_name = {v.op.name: v for v in variables}
    bn_ops = [op for op in graph.get_operations() if op.type.startswith("FusedBatchNorm")]
    assert len(bn_ops) == sum(n.endswith("/moving_mean") for n in by_name), len(bn_ops)
    for op in bn_ops:
        prefix = variable_of(op.inputs[3]).rsplit("/", 1)[0]
        assert variable_of(op.inputs[4]) == prefix + "/moving_variance"
        a = sess.run(op.inputs[0], feed).astype(np.float64)
        mean, std = a.mean(axis=(0, 1, 2)), a.std(axis=(0, 1, 2)) + 1e-3
        rng = rng_for(prefix + "/calibration")
        by_name[prefix + "/moving_mean"].load(
            (mean + 0.2 * std * rng.normal(size=mean.shape)).astype(np.float32), sess)
        by_name[prefix + "/moving_variance"].load(
            (std * std * rng.uniform(0.5, 1.5, size=std.shape)).astype(np.float32), sess)
    f = sess.run(pre_logits, feed).astype(np.float64)
    f = f.reshape(f.shape[0], -1)
    w_var, b_var = by_name[logits_scope + "/weights"], by_name[logits_scope + "/biases"]
    w = sess.run(w_var).astype(np.float64)
    z = f @ w.reshape(w.shape[2], w.shape[3])
    gain = 2.0 / (z - z.mean(axis=0)).std()
    rng = rng_for(logits_scope + "/calibration")
    w_var.load((w * gain).astype(np.float32), sess)
    b_var.load((-gain * z.mean(axis=0) + rng.normal(0.0, 0.5, z.shape[1])).astype(np.float32),
               sess)


OP_TYPES = ("Conv2D", "DepthwiseConv2dNative", "Pad", "MaxPool", "AvgPool", "FusedBatchNormV3",
            "Relu", "Relu6", "AddV2", "Add", "Mean", "BiasAdd", "Softmax", "Squeeze", "Identity")


def describe_ops(graph):
    lines = []
    for op in graph.get_operations():
        if op.type not in OP_TYPES or "/Initializer/" in op.name:
            continue
        if op.type == "Identity" and "ropout" not in op.name:
            continue  # variable reads; dropout at inference shows as an Identity
        attrs = []
        for key in ("strides", "ksize", "padding", "dilations", "epsilon", "is_training"):
            try:
                value = op.get_attr(key)
            except ValueError:
                continue
            if isinstance(value, bytes):
                value = value.decode()
            attrs.append("%s=%s" % (key, list(value) if isinstance(value, list) else value))
        if op.type == "Pad":
            attrs.append("paddings=%s" % tf.get_static_value(op.inputs[1]).tolist())
        if op.type == "Mean":
            attrs.append("axes=%s" % tf.get_static_value(op.inputs[1]).tolist())
        if op.type in ("Conv2D", "DepthwiseConv2dNative", "BiasAdd"):
            attrs.append("weights=%s" % variable_of(op.inputs[1]))
        shape = op.outputs[0].shape
        lines.append("  %-66s %-21s %-16s %s" % (op.name, op.type, shape_str(shape.as_list()),
                                                 " ".join(attrs)))
    return lines


def f32le(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def shape_str(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def write_state(directory):
    # Relative paths, as the other golden checkpoints' state files have.
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt"\n'
                'all_model_checkpoint_paths: "model.ckpt"\n')


def run_case(index, name, input_shape, build, logits_scope, ranges, versions):
    out = os.path.join(OUT, name)
    os.makedirs(os.path.join(out, "v1"))
    os.makedirs(os.path.join(out, "v2"))
    images = np.random.RandomState(20240601 + index).uniform(-1.0, 1.0, input_shape)
    images = images.astype(np.float32)
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(tf.float32, input_shape, name="images")
        logits, predictions, end_points, pre_logits = build(x)
        notes = []
        if "_avg_pool_kernel" in end_points:
            notes.append("Logits/AvgPool_1a kernel (from _reduced_kernel_size_for_small_input "
                         "of [7, 7]): %s, stride 2, VALID" % end_points.pop("_avg_pool_kernel"))
        variables = v1.global_variables()
        creation_order = [v.op.name for v in variables]
        fused = sorted({op.type for op in graph.get_operations() if "BatchNorm" in op.type})
        op_lines = describe_ops(graph)
        with v1.Session() as sess:
            for var in variables:
                shape = var.shape.as_list()
                var.load(value_for(var.op.name, shape, ranges).astype(np.float32), sess)
            calibrate(sess, graph, variables, {x: images}, pre_logits, logits_scope)
            ep_names = list(end_points)
            got = sess.run([logits, predictions] + [end_points[k] for k in ep_names],
                           {x: images})
            v2_saver = v1.train.Saver(variables, write_version=v1.train.SaverDef.V2)
            v2_saver.save(sess, os.path.join(out, "v2", "model.ckpt"), write_meta_graph=False,
                          write_state=False)
            v1_saver = v1.train.Saver(variables, write_version=v1.train.SaverDef.V1)
            v1_saver.save(sess, os.path.join(out, "v1", "model.ckpt"), write_meta_graph=False,
                          write_state=False)
    write_state(os.path.join(out, "v1"))
    write_state(os.path.join(out, "v2"))

    logits_v = np.asarray(got[0]).reshape(input_shape[0], -1)
    probs = np.asarray(got[1]).reshape(input_shape[0], -1)
    ep_values = dict(zip(ep_names, got[2:]))
    # The predictions end point is TensorFlow's softmax; check it against numpy's.
    e = np.exp(logits_v.astype(np.float64) - logits_v.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert np.abs(ref - probs).max() < 1e-6, np.abs(ref - probs).max()
    assert probs.max() < 0.97 and logits_v.std() > 0.5, (probs, logits_v)
    with open(os.path.join(out, "images.f32"), "wb") as f:
        f.write(f32le(images))
    with open(os.path.join(out, "logits.f32"), "wb") as f:
        f.write(f32le(logits_v))
    with open(os.path.join(out, "probabilities.f32"), "wb") as f:
        f.write(f32le(probs))

    # Both layouts must hold the same tensors.
    r1 = tf.train.load_checkpoint(os.path.join(out, "v1", "model.ckpt"))
    r2 = tf.train.load_checkpoint(os.path.join(out, "v2", "model.ckpt"))
    listed = tf.train.list_variables(os.path.join(out, "v2", "model.ckpt"))
    assert sorted(r1.get_variable_to_shape_map()) == [n for n, _ in listed]
    for n, _ in listed:
        assert np.array_equal(r1.get_tensor(n), r2.get_tensor(n)), n
    dtypes = r2.get_variable_to_dtype_map()

    lines = []
    lines.append("# %s: written by tests/golden/make_slim_nets_golden.py; do not edit." % name)
    lines.append("command: " + " ".join([COMMAND] + sys.argv[1:]))
    lines.append("versions: " + versions)
    lines.append("input: images.f32 float32 little-endian NHWC %s, uniform [-1, 1) from "
                 "numpy RandomState(%d)" % (shape_str(input_shape), 20240601 + index))
    lines.append("output: logits.f32 float32 %s; probabilities.f32 float32 %s (softmax)"
                 % (shape_str(logits_v.shape), shape_str(probs.shape)))
    lines.append("graph logits tensor shape: %s" % shape_str(np.asarray(got[0]).shape))
    lines.append("batch norm op types in the graph: %s" % ", ".join(fused))
    for note in notes:
        lines.append(note)
    lines.append("checkpoints: v2/model.ckpt (V2: .index + .data-00000-of-00001), "
                 "v1/model.ckpt (V1 single file); same %d tensors" % len(listed))
    lines.append("")
    lines.append("variables (checkpoint order = sorted by name; dtype, shape):")
    for n, shape in listed:
        lines.append("  %-58s %s %s" % (n, dtypes[n].name, shape_str(shape)))
    lines.append("")
    lines.append("variables in graph creation order:")
    for n in creation_order:
        lines.append("  " + n)
    lines.append("")
    lines.append("end points (dict order; shape; mean, std, min, max over the batch, float64 "
                 "from the float32 values; % of values == 0 and == 6):")
    for k in ep_names:
        a = np.asarray(ep_values[k], dtype=np.float64)
        lines.append("  %-52s %-16s mean %+.6f std %.6f min %+.6f max %+.6f =0 %5.1f%% =6 %5.1f%%"
                     % (k, shape_str(a.shape), a.mean(), a.std(), a.min(), a.max(),
                        100.0 * (a == 0).mean(), 100.0 * (a == 6).mean()))
    lines.append("")
    lines.append("inference graph ops in creation order (convolutions, pads, pools, batch norms, "
                 "activations, sums, means, biases, softmax; output shape):")
    lines.extend(op_lines)
    lines.append("")
    lines.append("logits:")
    for row in logits_v:
        lines.append("  " + " ".join("%+.7f" % v for v in row))
    lines.append("probabilities:")
    for row in probs:
        lines.append("  " + " ".join("%.7f" % v for v in row))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return ep_values


def main():
    tf.compat.v1.disable_eager_execution()
    versions = "tensorflow %s, tf-slim %s, tf_keras %s, numpy %s, python %s, %s %s" % (
        tf.__version__, importlib.metadata.version("tf-slim"),
        importlib.metadata.version("tf_keras"), np.__version__,
        sys.version.split()[0], platform.system(), platform.machine())
    os.makedirs(OUT, exist_ok=True)
    if len(sys.argv) > 1:
        load_models_nets(sys.argv[1])
    wanted = set(sys.argv[2:]) or {case[0] for case in CASES}
    for index, (name, input_shape, build, logits_scope, ranges) in enumerate(CASES):
        if name not in wanted:
            continue
        if name.startswith("inception") and not MODELS_NETS:
            print("skipped", name, "(no NETS_DIR given)")
            continue
        index = SEED_INDEX.get(name, index)
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)
        run_case(index, name, input_shape, build, logits_scope, ranges, versions)
        print("wrote", os.path.join(OUT, name))


if __name__ == "__main__":
    main()
