#!/usr/bin/env python3
"""Writes tests/golden/tf1_v1_checkpoint/ with TensorFlow itself: a V1 checkpoint (the single
file TF-Slim's published checkpoints are), as tf.compat.v1.train.Saver writes it with
write_version=SaverDef.V1, and its `checkpoint` state file.

checkpoint_v1_test (tests/unit/checkpoint_v1_test.cc) reads it through CheckpointReader and
checks every tensor against the formula below, which the test repeats: the values of a
tensor of n elements are (i * 0.25 - 3) for i in 0..n-1 (cast to the dtype), row-major, except
where noted. The files are committed, so the test needs no TensorFlow; rerun this script only to
refresh them:

    tests/bench/peers/setup_venv.sh            # or any venv with tensorflow-cpu
    /work/venv-peers/bin/python tests/golden/make_v1_checkpoint_golden.py

Generated with TensorFlow 2.21.0 on Linux x86_64 (recorded in tf1_v1_checkpoint/generator.txt).

Tensors (slim names where slim has them):
  resnet_v1_50/conv1/weights                   f32 [3, 3, 2, 4]   HWIO, as slim's conv2d
  resnet_v1_50/conv1/BatchNorm/moving_mean     f32 [4]
  resnet_v1_50/logits/biases                   f64 [2, 3]
  global_step                                  i64 []             7
  counts                                       i32 [5]
  flags                                        bool [3]           i % 2 == 0
  half                                         f16 [4]
  partitioned                                  f32 [6, 4]         3 partitions on axis 0: saved
                                                                  as 3 slices of one tensor

partitioned_axes.ckpt, written by the SaveSlices op that V1 savers run (tf.raw_ops.SaveSlices):
  partitioned_cols                             f32 [4, 6]         3 slices on axis 1 (columns
                                                                  0-1, 2-3, 4-5), saved last first
  partitioned_grid                             f32 [4, 6]         6 slices on both axes (rows
                                                                  0-1 / 2-3 by columns 0-2 / 3-5)

and starter_logistic.ckpt: yt8m_checkpoints/starter_logistic/model.ckpt-3 (the starter code's
LogisticModel after 3 steps of its train.py, V2) saved again in V1, for fine-tuning from V1.
"""
import os
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tf1_v1_checkpoint")


def ramp(shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n) * 0.25 - 3).astype(dtype).reshape(shape)


def write_partitioned_axes():
    """partitioned_axes.ckpt: tensors saved as slices along axis 1 and along both axes."""
    full = ramp([4, 6], np.float32)
    names, specs, data = [], [], []
    for start in (4, 2, 0):  # out of order: the reader must place each slice by its extent
        names.append("partitioned_cols")
        specs.append("4 6 -:%d,2" % start)
        data.append(full[:, start:start + 2])
    for row in (0, 2):
        for col in (0, 3):
            names.append("partitioned_grid")
            specs.append("4 6 %d,2:%d,3" % (row, col))
            data.append(full[row:row + 2, col:col + 3])
    tf.raw_ops.SaveSlices(filename=os.path.join(OUT, "partitioned_axes.ckpt"),
                          tensor_names=names, shapes_and_slices=specs,
                          data=[tf.constant(d) for d in data])


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        os.remove(os.path.join(OUT, name))
    tf.compat.v1.disable_eager_execution()
    with tf.Graph().as_default():
        v1 = tf.compat.v1
        v1.get_variable("resnet_v1_50/conv1/weights", initializer=ramp([3, 3, 2, 4], np.float32))
        v1.get_variable("resnet_v1_50/conv1/BatchNorm/moving_mean",
                        initializer=ramp([4], np.float32))
        v1.get_variable("resnet_v1_50/logits/biases", initializer=ramp([2, 3], np.float64))
        v1.get_variable("global_step", initializer=np.int64(7))
        v1.get_variable("counts", initializer=np.arange(5, dtype=np.int32) * 3 - 4)
        v1.get_variable("flags", initializer=np.array([True, False, True]))
        v1.get_variable("half", initializer=ramp([4], np.float16))
        def partition_of_ramp(shape, dtype=None, partition_info=None):
            offset = partition_info.var_offset[0] if partition_info is not None else 0
            return tf.constant(ramp([6, 4], np.float32)[offset:offset + shape[0]])

        v1.get_variable("partitioned", shape=[6, 4], dtype=tf.float32,
                        initializer=partition_of_ramp, partitioner=v1.fixed_size_partitioner(3))
        saver = v1.train.Saver(write_version=v1.train.SaverDef.V1)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            saver.save(session, os.path.join(OUT, "model.ckpt"), write_meta_graph=False)
    # The starter code's LogisticModel checkpoint of yt8m_checkpoints/ (V2, written by
    # make_yt8m_checkpoints_golden.py) saved again as V1: the same names, dtypes and values.
    source = os.path.join(HERE, "yt8m_checkpoints", "starter_logistic", "model.ckpt-3")
    reader = tf.train.load_checkpoint(source)
    with tf.Graph().as_default():
        for name in sorted(reader.get_variable_to_shape_map()):
            tf.compat.v1.get_variable(name, initializer=reader.get_tensor(name))
        saver = tf.compat.v1.train.Saver(write_version=tf.compat.v1.train.SaverDef.V1)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(OUT, "starter_logistic.ckpt"),
                       write_meta_graph=False, write_state=False)
    write_partitioned_axes()
    # Relative paths in the state file, as the V2 golden checkpoints have.
    with open(os.path.join(OUT, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n')
    with open(os.path.join(OUT, "generator.txt"), "w") as f:
        f.write("tensorflow %s, numpy %s, python %s\n" %
                (tf.__version__, np.__version__, sys.version.split()[0]))


if __name__ == "__main__":
    main()
