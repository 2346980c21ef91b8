"""TensorFlow side of the training benchmark (bench_train is the Trainyard side).

    python train_tf.py --inputs DIR --model LogisticModel|MoeModel --threads N
                       [--steps N] [--warmup N] [--losses N]

The step of train_common.py as one tf.function (a graph, as TF1's session ran the train op):
the forward pass and loss as YouTube-8M's video_level_models.py and losses.py write them,
tf.nn.l2_loss regularization, tf.clip_by_norm per gradient, and TF1's Adam as its own kernel
(ResourceApplyAdam, which tf.compat.v1.train.AdamOptimizer runs). Threads:
tf.config.threading intra-op and inter-op pools of N (TensorFlow's default on an N-core
machine), OMP_NUM_THREADS = N.
"""

import os

import train_common

args = train_common.parse_args(__doc__)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402  (after the thread variables are set)

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(args.threads)


def main():
    init, features, labels, num_mixtures = train_common.read_inputs(args)
    batches = [(tf.constant(features[i]), tf.constant(labels[i]))
               for i in range(features.shape[0])]
    batch_size, num_classes, feature_size = labels.shape[1], labels.shape[2], features.shape[2]
    names = list(init)
    params = {n: tf.Variable(init[n], name=n.replace("/", "_")) for n in names}
    slots = {n: (tf.Variable(tf.zeros_like(init[n])), tf.Variable(tf.zeros_like(init[n])))
             for n in names}
    weights = [params[n] for n in names if len(init[n].shape) == 2]

    def predictions(x):
        if args.model == "LogisticModel":
            return tf.nn.sigmoid(tf.matmul(x, params["fully_connected/weights"]) +
                                 params["fully_connected/biases"])
        m = num_mixtures
        gate_activations = tf.matmul(x, params["gates/weights"])
        expert_activations = tf.matmul(x, params["experts/weights"]) + params["experts/biases"]
        gating_distribution = tf.nn.softmax(tf.reshape(gate_activations, [-1, m + 1]))
        expert_distribution = tf.nn.sigmoid(tf.reshape(expert_activations, [-1, m]))
        probabilities = tf.reduce_sum(gating_distribution[:, :m] * expert_distribution, 1)
        return tf.reshape(probabilities, [-1, num_classes])

    @tf.function(input_signature=[
        tf.TensorSpec([batch_size, feature_size], tf.float32),
        tf.TensorSpec([batch_size, num_classes], tf.float32),
        tf.TensorSpec([], tf.float32)])
    def train_op(x, y, t):
        with tf.GradientTape() as tape:
            p = predictions(x)
            eps = train_common.EPSILON
            cross_entropy = -(y * tf.math.log(p + eps) + (1 - y) * tf.math.log(1 - p + eps))
            label_loss = tf.reduce_mean(tf.reduce_sum(cross_entropy, 1))
            reg = tf.add_n([train_common.L2_PENALTY * tf.nn.l2_loss(w) for w in weights])
            total = label_loss + 1.0 * reg
        grads = tape.gradient(total, [params[n] for n in names])
        b1, b2 = train_common.BETA1, train_common.BETA2
        for n, g in zip(names, grads):
            g = tf.clip_by_norm(g, train_common.CLIP_NORM)
            m, v = slots[n]
            tf.raw_ops.ResourceApplyAdam(
                var=params[n].handle, m=m.handle, v=v.handle, beta1_power=tf.pow(b1, t),
                beta2_power=tf.pow(b2, t), lr=tf.constant(args.learning_rate, tf.float32),
                beta1=tf.constant(b1, tf.float32), beta2=tf.constant(b2, tf.float32),
                epsilon=tf.constant(train_common.ADAM_EPSILON, tf.float32), grad=g)
        return label_loss

    def step(index, global_step):
        x, y = batches[index]
        return train_op(x, y, tf.constant(global_step + 1, tf.float32)).numpy()

    train_common.run(args, "tensorflow", step, len(batches), init, batch_size,
                     {"version": tf.__version__})


if __name__ == "__main__":
    main()
