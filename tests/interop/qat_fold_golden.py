# The goldens of tests/unit/pkg_layers_quantize_test.cc (BatchNormFolding...): a conv2d with a
# fused batch norm (scale, epsilon 0.001, decay 0.999) and relu6, rewritten as TensorFlow 1.15's
# contrib.quantize does it in training: fold_batch_norms.py's _FoldFusedBatchNorms and
# _ComputeBatchNormCorrections (FusedBatchNorm's batch mean and Bessel-undone variance,
# correction_scale / correction_recip / correction_offset, mul_fold, add_fold, the
# FoldFusedBatchNormGrad gradient of the batch statistics), then quantize.py's LastValueQuantize
# on the folded weights (narrow range) and MovingAvgQuantize after the relu6, written here with
# TensorFlow 2.21's raw ops. Two training passes (the moving averages updated after each pass's
# forward), then one evaluation pass (folded with the moving statistics, stored ranges); with
# --frozen, freeze_bn_delay reached (correction_recip 1, correction_offset, moving mean frozen).
# gamma is large enough for relu6 to saturate. Run: bash tests/interop/tf_env.sh python tests/interop/qat_fold_golden.py > \
#        tests/unit/pkg_layers_quantize_fold_golden.inc
import math, sys
import numpy as np, tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.training import moving_averages as m

tf.compat.v1.disable_eager_execution()
EPS, DECAY, C = 0.001, 0.999, 4


@tf_ops.RegisterGradient('FoldFusedBatchNormGrad')
def _fold_grad(op, unused_grad_y, grad_mean, grad_var, *unused):
    # contrib.quantize's gradient of FusedBatchNorm's batch mean and (Bessel) variance outputs.
    x = op.inputs[0]
    n = tf.cast(tf.size(x) / tf.size(grad_mean), tf.float32)
    dmean_dx = grad_mean / n
    dvar_dx = 2 * grad_var * (x - op.outputs[1]) / (n - 1)
    return (dmean_dx + dvar_dx), None, None, None, None


def seq(n, f):
    return np.array([f(i) for i in range(n)], np.float32)


def images(offset):
    return seq(2 * 5 * 5 * 3, lambda i: math.sin((i + offset) * 0.37) * 2.0).reshape(2, 5, 5, 3)


W0 = seq(3 * 3 * 3 * C, lambda i: math.sin(i * 0.11 + 0.5) * 0.4).reshape(3, 3, 3, C)
GAMMA0 = np.array([2.5, 3.0, 3.5, 2.8], np.float32)
BETA0 = np.array([0.1, -0.2, 0.05, 0.3], np.float32)
MM0 = np.array([0.2, -0.1, 0.05, 0.4], np.float32)
MV0 = np.array([1.5, 0.8, 2.0, 1.2], np.float32)
COEF = seq(2 * 5 * 5 * C, lambda i: math.cos(i * 0.13)).reshape(2, 5, 5, C)


def var(name, value, trainable=True):
    return tf.compat.v1.get_variable(name, initializer=tf.constant(value), trainable=trainable)


def main(frozen):
    g = tf.compat.v1.get_default_graph()
    x = tf.compat.v1.placeholder(tf.float32, [2, 5, 5, 3])
    with tf.compat.v1.variable_scope('Conv2d_0'):
        w = var('weights', W0)
        with tf.compat.v1.variable_scope('BatchNorm'):
            gamma, beta = var('gamma', GAMMA0), var('beta', BETA0)
            mm, mv = var('moving_mean', MM0, False), var('moving_variance', MV0, False)
        with tf.compat.v1.variable_scope('weights_quant'):
            wmin = var('min', np.float32(-6.0), False)
            wmax = var('max', np.float32(6.0), False)
        with tf.compat.v1.variable_scope('act_quant'):
            amin = var('min', np.float32(0.0), False)
            amax = var('max', np.float32(6.0), False)

    def forward(training):
        if training:
            conv = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')
            with g.gradient_override_map({'FusedBatchNormV3': 'FoldFusedBatchNormGrad'}):
                _, mean, bessel_var = tf.compat.v1.nn.fused_batch_norm(
                    conv, gamma, beta, epsilon=EPS, is_training=True)[:3]
            n = tf.cast(tf.size(conv) / tf.size(mean), tf.float32)
            variance = tf.multiply(bessel_var, (n - 1) / n)
        else:
            mean, variance = mm, mv
        multiplier = gamma * tf.math.rsqrt(variance + EPS)
        bias = tf.subtract(beta, mean * multiplier)
        weights = w
        if training:
            recip_sigma_mv = tf.math.rsqrt(mv + EPS)
            recip_sigma = tf.math.rsqrt(variance + EPS)
            scale = tf.divide(recip_sigma_mv, recip_sigma)
            recip = tf.math.reciprocal(scale)
            offset = tf.multiply(gamma, mean * recip_sigma - mm * recip_sigma_mv)
            recip = tf.ones(scale.shape) if frozen else recip
            offset = offset if frozen else tf.zeros(offset.shape)
            weights = tf.multiply(scale, weights)
        folded = tf.multiply(weights, multiplier)
        if training:  # LastValueQuantize
            qmin = tf.compat.v1.assign(wmin, tf.minimum(tf.reduce_min(folded), 0.0))
            qmax = tf.compat.v1.assign(wmax, tf.maximum(tf.reduce_max(folded), 0.0))
        else:
            qmin, qmax = wmin, wmax
        qw = tf.quantization.fake_quant_with_min_max_vars(folded, qmin, qmax, num_bits=8,
                                                          narrow_range=True)
        y = tf.nn.conv2d(x, qw, [1, 1, 1, 1], 'SAME')
        if training:
            y = tf.add(tf.multiply(recip, y), offset)
        y = tf.nn.relu6(tf.add(y, bias))
        if training:  # MovingAvgQuantize
            with tf.compat.v1.variable_scope('Conv2d_0/act_quant'):
                lo = m.assign_moving_average(amin, tf.minimum(tf.reduce_min(y), 0.0), DECAY)
                hi = m.assign_moving_average(amax, tf.maximum(tf.reduce_max(y), 0.0), DECAY)
        else:
            lo, hi = amin, amax
        out = tf.quantization.fake_quant_with_min_max_vars(y, lo, hi, num_bits=8,
                                                           narrow_range=False)
        result = {'out': out, 'wmin': qmin, 'wmax': qmax, 'amin': lo, 'amax': hi}
        if training:
            loss = tf.reduce_sum(out * COEF)
            result.update(zip(['dx', 'dw', 'dgamma', 'dbeta'],
                              tf.gradients(loss, [x, w, gamma, beta])))
            result['mean'], result['bessel_var'] = mean, bessel_var
        return result

    train, evaluate = forward(True), forward(False)
    # The batch norm's update ops (slim's fused path, zero_debias=False); TF 1.15's fold reroutes
    # only the moving mean's decay to 0 once frozen.
    bmean = tf.compat.v1.placeholder(tf.float32, [C])
    bvar = tf.compat.v1.placeholder(tf.float32, [C])
    updates = [tf.compat.v1.assign_sub(mv, (mv - bvar) * (1.0 - DECAY))]
    if not frozen:
        updates.append(tf.compat.v1.assign_sub(mm, (mm - bmean) * (1.0 - DECAY)))
    s = tf.compat.v1.Session()
    s.run(tf.compat.v1.global_variables_initializer())
    name = 'kFoldFrozen' if frozen else 'kFold'
    print('// %s: %s' % (name, 'freeze_bn_delay reached' if frozen else 'before any freeze'))
    print('const FoldGolden %s = {' % name)
    for offset in (0, 7):
        r = s.run(train, {x: images(offset)})
        s.run(updates, {bmean: r['mean'], bvar: r['bessel_var']})
        mmv, mvv = s.run([mm, mv])
        # relu6 saturates: the activations' range is [0, 6] in the first pass, so no output sits
        # within rounding of the range's end (where the straight-through gradient is cut).
        assert float(r['amin']) <= 0.0 and r['out'].max() > 5.9, r['out'].max()
        fields = [r['out'], r['dx'], r['dw'], r['dgamma'], r['dbeta'], mmv, mvv]
        scalars = [r['wmin'], r['wmax'], r['amin'], r['amax']]
        print('  FoldPass{%s, %s},' % (', '.join(lst(f) for f in fields),
                                      ', '.join(repr(float(v)) + 'f' for v in scalars)))
    r = s.run(evaluate, {x: images(0)})
    print('  %s};' % lst(r['out']))


def lst(a):
    return '{' + ', '.join(repr(float(v)) + 'f' for v in np.asarray(a).ravel()) + '}'


if __name__ == '__main__':
    for frozen in (False, True):
        with tf.Graph().as_default():
            main(frozen)
