"""PyTorch side of the frame-level training benchmark (bench_frame_train is Trainyard's side).

    python train_frame_torch.py --inputs DIR --model DbofModel|LstmModel|GruModel|NetVLADModelLF
                                --threads N [--steps N] [--warmup N] [--losses N]
                                [--lstm_impl ops|nn] [--autocast none|bf16]

DIR is what `bench_frame_train --write_inputs DIR` wrote: init.safetensors (the trained variables
and batch-norm moving statistics by TensorFlow's names; metadata "trained" lists the trained
ones in order, "l2" the regularized ones with their penalty) and data.safetensors ("features"
[P, B, T, D], "num_frames" [P, B] as f32, "labels" [P, B, C]). The sizes come from the shapes.

The step, in eager PyTorch, fp32, autograd, as TensorFlow 1.x runs the originals in training:
  DbofModel       input_bn, x cluster_weights, cluster_bn, sigmoid, max over the T frames,
                  x hidden1_weights, hidden1_bn, sigmoid, MoE. The frames are the input as they
                  are: every video has T = iterations valid frames and bench_frame_train runs
                  SampleRandomSequence, which then is the identity.
  NetVLADModelLF  input_bn on [B T, D]; per stream (rgb: the first 1024 features, K clusters;
                  audio: the rest, K / 2): a = softmax(BN(x W)), V = x^T a - (sum_t a) c2 per
                  video, L2 over the feature axis, flatten, L2; concatenate, x hidden1_weights,
                  hidden1_bn, ReLU6, MoE. Frames as they are (identity sample, as DbofModel).
  LstmModel       tf.nn.dynamic_rnn over BasicLSTMCell(U, forget_bias 1): [i, j, f, o] =
                  [x, h] K + b; c' = c sigmoid(f + 1) + sigmoid(i) tanh(j); h' = tanh(c')
                  sigmoid(o); past a video's num_frames the state is carried unchanged; the
                  final h into the MoE. --lstm_impl ops writes the cell with torch ops (the input
                  half of K applied to all steps at once, as Trainyard does); --lstm_impl nn runs
                  torch.nn.LSTM's kernel (torch.func.functional_call on a packed sequence, which
                  stops each video at its length) with weights re-ordered from TensorFlow's
                  kernel on every step (columns i, j, f, o -> torch's i, f, g = j, o; the forget
                  bias a constant b_hh), so gradients and Adam still act on TensorFlow's kernel.
  GruModel        TensorFlow's GRUCell (torch.nn.GRU applies the reset gate after the recurrent
                  product, a different model, so it is written with torch ops): [r, u] =
                  sigmoid([x, h] K_g + b_g); c = tanh([x, r h] K_c + b_c); h' = u h + (1 - u) c;
                  masked as the LSTM; the final h into the MoE.
Batch norm (slim, center and scale, epsilon 1e-3) normalizes with the batch's mean and biased
variance (F.batch_norm in training mode; the moving averages do not enter the loss). The MoE,
CrossEntropyLoss, the L2 terms, clipping per tensor and TF1 Adam are train_common.py's. Threads:
torch.set_num_threads(N), one inter-op thread, OMP_NUM_THREADS / MKL_NUM_THREADS = N.
"""

import argparse
import json
import os
import statistics
import time

import train_common

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
p.add_argument("--inputs", required=True)
p.add_argument("--model", default="DbofModel",
               choices=["DbofModel", "LstmModel", "GruModel", "NetVLADModelLF"])
p.add_argument("--threads", type=int, default=1)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--learning_rate", type=float, default=0.001)
p.add_argument("--losses", type=int, default=0)
p.add_argument("--lstm_impl", default="ops", choices=["ops", "nn"])
# bf16: the model under torch.autocast(cpu, bfloat16) (its products in bf16, PyTorch's own
# policy for the rest), the loss in f32, against Trainyard's --precision=bf16.
p.add_argument("--autocast", default="none", choices=["none", "bf16"])
args = p.parse_args()
for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[name] = str(args.threads)

import torch  # noqa: E402  (after the thread variables are set)

import torch_adam  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)


def read_metadata(path):
    with open(path, "rb") as f:
        length = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(length)).get("__metadata__", {})


def l2_normalize(x, dim):
    """tf.nn.l2_normalize: x * rsqrt(max(sum(x^2), 1e-12))."""
    return x * torch.rsqrt(torch.clamp((x * x).sum(dim=dim, keepdim=True), min=1e-12))


def main():
    init_path = os.path.join(args.inputs, "init.safetensors")
    meta = read_metadata(init_path)
    init = train_common.read_safetensors(init_path)
    data = train_common.read_safetensors(os.path.join(args.inputs, "data.safetensors"))
    names = meta["trained"].split(",")
    l2 = {k: float(v) for k, v in (e.split("=") for e in meta["l2"].split(",") if e)}
    params = {n: torch.from_numpy(init[n]).requires_grad_(True) for n in names}
    slots = {n: (torch.zeros_like(params[n]), torch.zeros_like(params[n])) for n in names}
    features, labels = data.pop("features"), data.pop("labels")
    num_frames = data.pop("num_frames").astype("int64")
    batches = [(torch.from_numpy(features[i]), torch.from_numpy(num_frames[i]),
                torch.from_numpy(labels[i])) for i in range(features.shape[0])]
    del data
    batch_size, frames, feature_size = features.shape[1:]
    num_classes = labels.shape[2]
    num_mixtures = params["experts/biases"].shape[0] // num_classes

    def bn(x, scope):
        return F.batch_norm(x, None, None, params[scope + "/gamma"], params[scope + "/beta"],
                            training=True, eps=1e-3)

    def moe(x):
        m = num_mixtures
        gate_activations = x @ params["gates/weights"]
        expert_activations = torch.addmm(params["experts/biases"], x, params["experts/weights"])
        gating = torch.softmax(gate_activations.reshape(-1, m + 1), dim=1)
        experts = torch.sigmoid(expert_activations.reshape(-1, m))
        return (gating[:, :m] * experts).sum(dim=1).reshape(-1, num_classes)

    def dbof(x, n):
        h = bn(x.reshape(-1, feature_size), "input_bn")
        a = torch.sigmoid(bn(h @ params["cluster_weights"], "cluster_bn"))
        a = a.reshape(batch_size, frames, -1).amax(dim=1)
        a = torch.sigmoid(bn(a @ params["hidden1_weights"], "hidden1_bn"))
        return moe(a)

    def vlad(x, scope):
        d = x.shape[1]
        weights = params[scope + "/cluster_weights"]
        a = torch.softmax(bn(x @ weights, scope + "/cluster_bn"), dim=1)
        a = a.reshape(batch_size, frames, -1)
        v = torch.matmul(x.reshape(batch_size, frames, d).transpose(1, 2), a)  # [B, d, k]
        v = v - a.sum(dim=1, keepdim=True) * params[scope + "/cluster_weights2"]
        return l2_normalize(l2_normalize(v, 1).reshape(batch_size, -1), 1)

    def netvlad(x, n):
        h = bn(x.reshape(-1, feature_size), "input_bn")
        pooled = torch.cat([vlad(h[:, :1024], "video_VLAD"), vlad(h[:, 1024:], "audio_VLAD")], 1)
        return moe(F.relu6(bn(pooled @ params["hidden1_weights"], "hidden1_bn")))

    def alive_masks(n, steps):
        return (torch.arange(steps).reshape(steps, 1) < n.reshape(1, -1)).unsqueeze(-1)

    def lstm_ops(x, n):
        kernel = params["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel"]
        bias = params["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias"]
        u = bias.shape[0] // 4
        steps = int(n.max())
        w_x, w_h = kernel[:feature_size], kernel[feature_size:]
        xt = x.transpose(0, 1)[:steps].reshape(steps * batch_size, feature_size)
        # unbind, whose gradient is one stack: indexing projected[t] would give each step's
        # gradient as a zero-filled [T, B, 4U] tensor (300x the work of the whole RNN).
        projected = torch.addmm(bias, xt, w_x).reshape(steps, batch_size, 4 * u).unbind(0)
        alive = alive_masks(n, steps).unbind(0)
        h = c = x.new_zeros(batch_size, u)
        for t in range(steps):
            i, j, f, o = (projected[t] + h @ w_h).chunk(4, dim=1)
            new_c = c * torch.sigmoid(f + 1.0) + torch.sigmoid(i) * torch.tanh(j)
            new_h = torch.tanh(new_c) * torch.sigmoid(o)
            c = torch.where(alive[t], new_c, c)
            h = torch.where(alive[t], new_h, h)
        return moe(h)

    lstm_module = None

    def lstm_nn(x, n):
        nonlocal lstm_module
        kernel = params["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel"]
        bias = params["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias"]
        u = bias.shape[0] // 4
        if lstm_module is None:
            lstm_module = torch.nn.LSTM(feature_size, u, batch_first=True)
        perm = torch.cat([torch.arange(0, u), torch.arange(2 * u, 3 * u), torch.arange(u, 2 * u),
                          torch.arange(3 * u, 4 * u)])  # TF i, j, f, o -> torch i, f, g, o
        w = kernel[:, perm]
        forget = torch.zeros(4 * u)
        forget[u:2 * u] = 1.0
        weights = {"weight_ih_l0": w[:feature_size].t(), "weight_hh_l0": w[feature_size:].t(),
                   "bias_ih_l0": bias[perm], "bias_hh_l0": forget}
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, n, batch_first=True,
                                                         enforce_sorted=False)
        _, (h, _) = torch.func.functional_call(lstm_module, weights, (packed,))
        return moe(h[0])

    def gru(x, n):
        scope = "RNN/rnn/multi_rnn_cell/cell_0/gru_cell/"
        gate_kernel, gate_bias = params[scope + "gates/kernel"], params[scope + "gates/bias"]
        cand_kernel = params[scope + "candidate/kernel"]
        cand_bias = params[scope + "candidate/bias"]
        u = cand_bias.shape[0]
        steps = int(n.max())
        xt = x.transpose(0, 1)[:steps].reshape(steps * batch_size, feature_size)
        gate_x = torch.addmm(gate_bias, xt, gate_kernel[:feature_size])
        gate_x = gate_x.reshape(steps, batch_size, 2 * u).unbind(0)  # as the LSTM's
        cand_x = torch.addmm(cand_bias, xt, cand_kernel[:feature_size])
        cand_x = cand_x.reshape(steps, batch_size, u).unbind(0)
        gate_h, cand_h = gate_kernel[feature_size:], cand_kernel[feature_size:]
        alive = alive_masks(n, steps).unbind(0)
        h = x.new_zeros(batch_size, u)
        for t in range(steps):
            r, z = torch.sigmoid(gate_x[t] + h @ gate_h).chunk(2, dim=1)
            candidate = torch.tanh(cand_x[t] + (r * h) @ cand_h)
            new_h = candidate + z * (h - candidate)
            h = torch.where(alive[t], new_h, h)
        return moe(h)

    predictions = {"DbofModel": dbof, "NetVLADModelLF": netvlad, "GruModel": gru,
                   "LstmModel": lstm_ops if args.lstm_impl == "ops" else lstm_nn}[args.model]

    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    def step(index, global_step):
        x, n, y = batches[index]
        with autocast:
            p = predictions(x, n)
        p = p.float()
        eps = train_common.EPSILON
        cross_entropy = -(y * torch.log(p + eps) + (1 - y) * torch.log(1 - p + eps))
        label_loss = cross_entropy.sum(dim=1).mean()
        reg = sum(penalty * params[name].square().sum() / 2 for name, penalty in l2.items())
        grads = torch.autograd.grad(label_loss + reg, [params[n] for n in names])
        torch_adam.clip_and_adam_(params, names, grads, slots, args.learning_rate, global_step)
        return label_loss.item()

    workload = args.model
    if args.losses:
        losses = [step(s % len(batches), s) for s in range(args.losses)]
        print(json.dumps({"framework": "pytorch", "workload": workload, "threads": args.threads,
                          "impl": args.lstm_impl, "losses": losses}), flush=True)
        return
    times = []
    time_to_first_step = -1.0
    loss = 0.0
    for s in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = step(s % len(batches), s)
        elapsed = time.perf_counter() - start
        if s == 0:
            time_to_first_step = train_common.seconds_since_process_start()
        if s >= args.warmup:
            times.append(elapsed)
    median = statistics.median(times)
    print(json.dumps({"framework": "pytorch", "workload": workload, "threads": args.threads,
                      "impl": args.lstm_impl if args.model == "LstmModel" else "ops",
                      "autocast": args.autocast, "batch_size": int(batch_size), "steps": args.steps,
                      "median_ms": median * 1e3,
                      "p90_ms": train_common.percentile(times, 0.9) * 1e3,
                      "examples_per_sec": batch_size / median,
                      "peak_rss_mb": train_common.peak_rss_mb(),
                      "time_to_first_step_s": time_to_first_step, "last_loss": loss,
                      "version": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
