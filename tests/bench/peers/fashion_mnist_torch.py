"""PyTorch's time to 91% test accuracy on Fashion-MNIST with fashion_mnist_lenet.config's recipe.

    fashion_mnist_torch.py [--data_dir /usr/share/datasets/fashion-mnist] [--threads 2]
                           [--eval_every_secs 60 | --eval_every_steps N] [--target 0.91]

The peer of BENCHMARKS.md's "Fashion-MNIST: time to 91%" (Trainyard's train_and_evaluate on
that config). What it mirrors:
  data     Debian's dataset-fashion-mnist idx files (gzip), read directly: 60,000 training and
           10,000 test 28x28 images; LENET normalization (x - 128) / 128; in training a random
           left-right flip with probability 1/2 per example.
  order    Trainyard's input pipeline with shuffle on and num_epochs 0: the records in file
           order, epoch after epoch, through a shuffle buffer of 5 x batch = 320 examples, each
           draw a uniform pick swapped with the last (seeded, not Trainyard's generator).
  model    TF-Slim's lenet as train_image_torch.py builds it (conv 5x5 32 SAME + ReLU, max pool
           2x2/2, conv 5x5 64 SAME + ReLU, max pool 2x2/2, flatten, fc 1024 + ReLU, dropout 0.5,
           fc 10), weights truncated normal(0, 0.1) as lenet's, biases 0; softmax cross-entropy
           averaged over the batch, no weight decay.
  train    batch 64, 9,400 steps, Adam(beta1 0.9, beta2 0.999) at 1e-3, 3e-4 from step 5,000,
           1e-4 from 7,500 (the rate of step s, counted from 0, as ManualStepLearningRate);
           TF's epsilon hat 1e-8 added to sqrt(v) (Trainyard's AdamOptimizer default), which is
           PyTorch's eps = 1e-8 / sqrt(1 - beta2^t), set each step.
  eval     all 10,000 test images (batches of 500, dropout off) whenever --eval_every_secs of
           wall time have passed since the last evaluation began (Trainyard: a checkpoint every
           60 s, each evaluated, throttle 60 s), or every --eval_every_steps steps, and at the end.
Wall time counts from the start of training (data loading before it), evaluations included, as
Trainyard's figure does. Prints `step S: accuracy A (T s)` per evaluation, then one JSON line:
{"framework", "first_step_at_91", "seconds_to_91", "final_accuracy", "images_per_sec" (training
steps only, evaluations excluded), "threads", ...}.
"""

import argparse
import gzip
import json
import os
import random
import sys
import time
import types

import numpy as np


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=9400)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval_every_secs", type=float, default=60.0)
    p.add_argument("--eval_every_steps", type=int, default=0, help="> 0: instead of seconds")
    p.add_argument("--target", type=float, default=0.91)
    args = p.parse_args()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)  # before torch is imported
    return args


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return ((images.astype(np.float32) - 128.0) / 128.0)[:, None], labels.astype(np.int64)


def shuffled_order(n, total, capacity, seed):
    """Indices of `total` examples from a file of n read epoch after epoch through a buffer."""
    rng, buffer, out, next_record = random.Random(seed), [], [], 0
    while len(out) < total:
        while len(buffer) < capacity:
            buffer.append(next_record % n)
            next_record += 1
        pick = rng.randrange(len(buffer))
        out.append(buffer[pick])
        buffer[pick] = buffer[-1]
        buffer.pop()
    return out


def main():
    args = parse_args()
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_image_torch import build

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = (torch.from_numpy(a) for a in load(args.data_dir, "train"))
    test_x, test_y = (torch.from_numpy(a) for a in load(args.data_dir, "t10k"))

    model = build(types.SimpleNamespace(model="lenet", num_classes=10), torch)
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.trunc_normal_(m.weight, 0.0, 0.1, -0.2, 0.2)
            torch.nn.init.zeros_(m.bias)
    beta1, beta2, eps_hat = 0.9, 0.999, 1e-8
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(beta1, beta2))
    loss_fn = torch.nn.CrossEntropyLoss()

    def learning_rate(step):  # step counted from 0, before its update
        return 1e-3 if step < 5000 else 3e-4 if step < 7500 else 1e-4

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(test_y), 500):
                logits = model(test_x[i:i + 500])
                correct += (logits.argmax(1) == test_y[i:i + 500]).sum().item()
        model.train()
        return correct / len(test_y)

    start = time.perf_counter()
    b = args.batch_size
    order = torch.tensor(shuffled_order(len(train_y), args.steps * b, 5 * b, args.seed))
    flips = torch.from_numpy(np.random.default_rng(args.seed).random(args.steps * b) < 0.5)
    eval_secs, last_eval, first = 0.0, start, None
    model.train()
    for step in range(args.steps):
        idx = order[step * b:(step + 1) * b]
        images, labels, flip = train_x[idx], train_y[idx], flips[step * b:(step + 1) * b]
        images[flip] = images[flip].flip(-1)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
            group["eps"] = eps_hat / (1.0 - beta2 ** (step + 1)) ** 0.5
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()
        done = step + 1
        now = time.perf_counter()
        due = (done % args.eval_every_steps == 0 if args.eval_every_steps > 0
               else now - last_eval >= args.eval_every_secs)
        if due or done == args.steps:
            last_eval = now
            accuracy = evaluate()
            eval_secs += time.perf_counter() - now
            elapsed = time.perf_counter() - start
            print(f"step {done}: accuracy {accuracy:.4f} ({elapsed:.0f} s)", flush=True)
            if first is None and accuracy >= args.target:
                first = (done, elapsed)
    total = time.perf_counter() - start
    print(json.dumps({
        "framework": "pytorch", "first_step_at_91": first[0] if first else None,
        "seconds_to_91": round(first[1], 1) if first else None, "final_accuracy": accuracy,
        "images_per_sec": round(args.steps * b / (total - eval_secs), 1),
        "threads": args.threads, "steps": args.steps, "total_seconds": round(total, 1),
        "eval_seconds": round(eval_secs, 1), "target": args.target,
        "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
