# The goldens of tests/unit/pkg_layers_quantize_test.cc (ActivationRangesAreTensorFlowsZero-
# DebiasedMovingAverages): contrib.quantize's MovingAvgQuantize (quant_ops.py) as TensorFlow builds
# it, act_quant/min and max kept by moving_averages.assign_moving_average(decay 0.999, zero
# debiasing) and fake_quant_with_min_max_vars with the updated range, over three batches.
# Run: bash tests/interop/tf_env.sh python tests/interop/qat_ema_golden.py
import numpy as np, tensorflow as tf
from tensorflow.python.training import moving_averages as m
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float32, [4])
with tf.compat.v1.variable_scope('layer/act_quant'):
    mn = tf.compat.v1.get_variable('min', [], initializer=tf.compat.v1.constant_initializer(0.0), trainable=False, use_resource=False)
    mx = tf.compat.v1.get_variable('max', [], initializer=tf.compat.v1.constant_initializer(6.0), trainable=False, use_resource=False)
    bmin = tf.minimum(tf.reduce_min(x), 0.0)
    bmax = tf.maximum(tf.reduce_max(x), 0.0)
    amin = m.assign_moving_average(mn, bmin, 0.999, name='AssignMinEma')
    amax = m.assign_moving_average(mx, bmax, 0.999, name='AssignMaxEma')
    q = tf.quantization.fake_quant_with_min_max_vars(x, amin, amax, num_bits=8, narrow_range=False)
print([(v.name, v.dtype.name) for v in tf.compat.v1.global_variables()])
s = tf.compat.v1.Session(); s.run(tf.compat.v1.global_variables_initializer())
for xs in [[-0.5, 0.25, 3.0, 1.7], [0.1, 2.0, 5.5, -1.25], [0.3, 0.2, 0.9, 0.4]]:
    a, b, out = s.run([amin, amax, q], {x: np.array(xs, np.float32)})
    print('{%r, %r, {%s}},' % (float(a), float(b), ', '.join(repr(float(v)) for v in out)))
