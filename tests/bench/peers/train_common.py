"""What train_torch.py and train_tf.py share: flags, the inputs bench_train writes, measurements.

The inputs are those of `bench_train --write_inputs DIR`: DIR/init.safetensors (the model's
variables by Trainyard's names, glorot-uniform weights and zero biases) and DIR/data.safetensors
("features" [P, B, D] with L2-normalized rows, "labels" [P, B, C] multi-hot f32). They are read
with numpy alone (the safetensors layout: an 8-byte little-endian header length, a JSON header,
the raw row-major bytes).

The step both peers implement, as Trainyard's TrainStep runs it (YouTube-8M train.py with
TF-Slim's create_train_op):
  predictions  LogisticModel  sigmoid(x W + b)
               MoeModel       gates = softmax(reshape(x W_g, [-1, M + 1])) (no bias), experts =
                              sigmoid(reshape(x W_e + b_e, [-1, M])), p = reshape(sum over the
                              first M columns of gates * experts, [-1, C])
  label loss   CrossEntropyLoss: mean over the batch of -sum_c [y log(p + 1e-5) +
               (1 - y) log(1 - p + 1e-5)]
  total loss   label loss + 1.0 * sum over weight matrices of 1e-8 * sum(W^2) / 2
               (slim's l2_regularizer(1e-8), regularization_penalty 1)
  gradients    of the total loss, each clipped by its own norm: g * 1 / max(||g||, 1)
  update       TF1 Adam (lr 0.01 constant, beta1 0.9, beta2 0.999, epsilon hat 1e-8):
               m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
               w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps), t = step + 1
Batch i of a run is pool[i % P], at global step i.
"""

import argparse
import json
import os
import resource
import statistics
import time

import numpy as np

L2_PENALTY = 1e-8
EPSILON = 1e-5
CLIP_NORM = 1.0
BETA1, BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8


def parse_args(description, device=False):
    """The flags; `device`: also --device cpu|cuda (the PyTorch peer's)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--inputs", required=True,
                   help="directory written by bench_train --write_inputs")
    p.add_argument("--model", default="LogisticModel", choices=["LogisticModel", "MoeModel"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--losses", type=int, default=0,
                   help="run this many steps and print their label losses instead of timing")
    if device:
        p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                       help="where the weights, the pool and the step live")
        p.add_argument("--autocast", default="none", choices=["none", "bf16"],
                       help="bf16: the products under torch.autocast (bf16), the rest f32")
    args = p.parse_args()
    # Before the framework is imported: its thread pools read these once.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    return args


def read_safetensors(path):
    """{name: np.ndarray} of an F32 safetensors file (copies, so the arrays are writable)."""
    with open(path, "rb") as f:
        (length,) = np.frombuffer(f.read(8), dtype="<u8")
        header = json.loads(f.read(int(length)))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {info['dtype']}; expected F32")
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4,
                                  offset=begin).reshape(info["shape"]).copy()
    return out


def read_inputs(args):
    """(initial variables by name, features [P, B, D], labels [P, B, C], num_mixtures)."""
    init = read_safetensors(os.path.join(args.inputs, "init.safetensors"))
    data = read_safetensors(os.path.join(args.inputs, "data.safetensors"))
    num_mixtures = 0
    if args.model == "MoeModel":
        classes = data["labels"].shape[2]
        num_mixtures = init["experts/biases"].shape[0] // classes
    return init, data["features"], data["labels"], num_mixtures


def seconds_since_process_start():
    """From the process's start (/proc/self/stat, clock ticks after boot) to now, as bench_train."""
    with open("/proc/self/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the whole line
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def percentile(values, p):
    values = sorted(values)
    rank = p * (len(values) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (rank - lo) * (values[hi] - values[lo])


def step_gflop(init, batch_size):
    """Matmul FLOPs of a step, as bench_train counts them: 4 B D N per weight matrix [D, N]."""
    return sum(4.0 * batch_size * v.shape[0] * v.shape[1] for v in init.values()
               if v.ndim == 2) * 1e-9


def run(args, framework, step_fn, num_batches, init, batch_size, extra=None, sync=None):
    """Runs `step_fn(batch_index, global_step) -> label loss (float)` and prints one JSON line:
    the losses with --losses, else the timings. `sync`, when given, is called at the end of each
    step inside its timing (torch.cuda.synchronize: the step's work on a GPU is complete)."""
    if args.losses:
        losses = [float(step_fn(s % num_batches, s)) for s in range(args.losses)]
        print(json.dumps({"framework": framework, "workload": args.model,
                          "threads": args.threads, "losses": losses}), flush=True)
        return
    times = []
    time_to_first_step = -1.0
    loss = 0.0
    for s in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = float(step_fn(s % num_batches, s))
        if sync is not None:
            sync()
        elapsed = time.perf_counter() - start
        if s == 0:
            time_to_first_step = seconds_since_process_start()
        if s >= args.warmup:
            times.append(elapsed)
    median = statistics.median(times)
    gflop = step_gflop(init, batch_size)
    row = {"framework": framework, "workload": args.model, "threads": args.threads,
           "batch_size": batch_size, "steps": args.steps,
           "median_ms": median * 1e3, "p90_ms": percentile(times, 0.9) * 1e3,
           "examples_per_sec": batch_size / median, "step_gflop": gflop,
           "gflops": gflop / median, "peak_rss_mb": peak_rss_mb(),
           "time_to_first_step_s": time_to_first_step, "last_loss": loss}
    row.update(extra or {})
    print(json.dumps(row), flush=True)
