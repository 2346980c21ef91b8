"""PyTorch's training step on the image classifiers bench_image_train times in Trainyard.

    train_image_torch.py [--model lenet|resnet_20] [--threads N] [--steps N] [--warmup N]
                         [--batch_size B] [--num_classes C] [--pool P]
                         [--memory_format channels_last|contiguous] [--profile FILE]
                         [--device cpu|cuda] [--tf32 0|1] [--cudnn_benchmark 0|1]

The same networks, shapes, batch and threads as bench_image_train (see its header):
  lenet      B 64, 1x28x28: Conv2d(1, 32, 5, padding=2) + ReLU, MaxPool2d(2), Conv2d(32, 64, 5,
             padding=2) + ReLU, MaxPool2d(2), flatten, Linear(3136, 1024) + ReLU, Dropout(0.5),
             Linear(1024, 10); no weight decay.
  resnet_20  B 128, 3x32x32: conv1 3x3 16 + BatchNorm2d + ReLU; three blocks of three basic units
             (16, 32, 64 channels; stride 2 on the last unit of blocks 1 and 2, where
             Conv2d(padding=1, stride=2) pads as slim's conv2d_same does; a 1x1 conv + BatchNorm
             shortcut on a depth change, a 1x1 max pool stride 2 on a strided unit of the same
             depth); global average pool; 1x1 conv logits with bias. BatchNorm2d(eps 1e-5,
             momentum 0.003 = 1 - slim's decay 0.997) in training mode; weight decay 1e-4 on
             every conv's weights (SGD's weight_decay adds 1e-4 w to their gradients, which is
             the gradient of slim's l2_regularizer(1e-4) = 1e-4 sum(w^2) / 2).
The step: zero_grad, forward, CrossEntropyLoss (softmax cross-entropy of the class, the same as
one-hot labels), backward, torch.optim.SGD(lr 0.01, momentum 0.9) (TF's MomentumOptimizer:
accum = 0.9 accum + g; w -= lr accum). Data: a pool of P batches of images uniform in [-1, 1)
and uniform classes, cycled. Weights: PyTorch's default initializers (speed does not depend on
them). Layout: channels_last (NHWC, Trainyard's) by default, or contiguous NCHW. On the 2-core
AMD EPYC of BENCHMARKS.md channels_last was faster for resnet_20 (about 1.2-1.3x) and the same
as contiguous for lenet; run_image_training_bench.sh runs both and compares with the faster.

--device cuda: the model and the pool on GPU 0 (bench_image_train --backend cuda is the Trainyard
side), each timed step ended by torch.cuda.synchronize(). There f32 stays f32 by default: TF32
off for cuDNN's convolutions (PyTorch's default turns it on) and for matmul, as Trainyard's cuda
backend computes f32 (--tf32 1: PyTorch's TF32 tensor cores allowed for both); cuDNN's
autotuner off as PyTorch's default (--cudnn_benchmark 1: torch.backends.cudnn.benchmark, the
fastest algorithm per shape found in the first (warmup) steps).

Prints one JSON line: {"framework": "pytorch", "device", "workload", "threads", "batch_size",
"steps", "median_ms", "p90_ms", "images_per_sec", "cpu_ms" (median CPU time of a step, all
threads), "memory_format", "peak_rss_mb", "first_loss", "last_loss"}, with "tf32" and
"cudnn_benchmark" on cuda. --profile FILE: one more step under torch.profiler, its Chrome trace
written to FILE, the ops' self CPU times printed to stderr and added to the line as
"profile_self_ms" ({op: ms}) with "profile_step_ms". --conv_bound 1: after the timed steps,
every convolution of the net alone (time_convs), added as "conv_bound_ms" and
"conv_bound_passes_ms" (forward, backward data, backward weights): PyTorch's counterpart of
bench_image_train's conv_bound_ms.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet_20", choices=["lenet", "resnet_20"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=0, help="0: 64 for lenet, 128 for resnet_20")
    p.add_argument("--num_classes", type=int, default=10)
    p.add_argument("--pool", type=int, default=4)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--memory_format", default="channels_last",
                   choices=["channels_last", "contiguous"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--autocast", default="none", choices=["none", "bf16"],
                   help="bf16: the forward pass and loss under torch.autocast(bfloat16)")
    p.add_argument("--profile", default="")
    p.add_argument("--conv_bound", type=int, default=0,
                   help="1: also time the net's convolutions alone (conv_bound_ms)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--tf32", type=int, default=0, choices=[0, 1],
                   help="cuda: 1 allows TF32 in convolutions and matmul")
    p.add_argument("--cudnn_benchmark", type=int, default=0, choices=[0, 1],
                   help="cuda: 1 sets torch.backends.cudnn.benchmark")
    args = p.parse_args()
    if args.batch_size <= 0:
        args.batch_size = 64 if args.model == "lenet" else 128
    # Before torch is imported: its thread pools read these once.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    return args


def build(args, torch):
    nn = torch.nn

    class Unit(nn.Module):
        """resnet_v1's basic unit, stride on conv1, as pkg/nets' basic_v1."""

        def __init__(self, depth_in, depth, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(depth_in, depth, 3, stride, 1, bias=False)
            self.bn1 = bn(depth)
            self.conv2 = nn.Conv2d(depth, depth, 3, 1, 1, bias=False)
            self.bn2 = bn(depth)
            if depth_in != depth:
                self.shortcut = nn.Sequential(nn.Conv2d(depth_in, depth, 1, stride, bias=False),
                                              bn(depth))
            elif stride != 1:
                self.shortcut = nn.MaxPool2d(1, stride)
            else:
                self.shortcut = nn.Identity()

        def forward(self, x):
            r = torch.relu(self.bn1(self.conv1(x)))
            r = self.bn2(self.conv2(r))
            return torch.relu(self.shortcut(x) + r)

    def bn(depth):
        return nn.BatchNorm2d(depth, eps=1e-5, momentum=1 - 0.997)

    if args.model == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(1024, args.num_classes))
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), bn(16), nn.ReLU()]
    depth_in = 16
    for depth in (16, 32, 64):
        for unit in range(3):
            stride = 2 if unit == 2 and depth != 64 else 1
            layers.append(Unit(depth_in, depth, stride))
            depth_in = depth
    layers += [nn.AdaptiveAvgPool2d(1), nn.Conv2d(64, args.num_classes, 1), nn.Flatten()]
    return nn.Sequential(*layers)


def time_convs(torch, model, images, fmt, reps=5, sync=lambda: None):
    """[forward, backward data, backward weights] ms of the net's convolutions, each alone.

    Every Conv2d's input is captured in one forward pass; then, per conv, median of `reps` after
    one untimed call: aten::convolution forward, aten::convolution_backward for the input
    gradient (skipped on the images, as autograd skips it) and for the weight gradient (its
    bias gradient too where the conv has a bias), as the step calls them.
    """
    convs, inputs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)], {}

    def capture(module, args, output):  # returns None: the output is left as it is
        inputs[module] = (args[0].detach(), output)

    hooks = [m.register_forward_hook(capture) for m in convs]
    with torch.no_grad():
        model(images)
    for h in hooks:
        h.remove()

    def median_ms(fn):
        fn()
        sync()
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    passes = [0.0, 0.0, 0.0]
    with torch.no_grad():
        for m in convs:
            x, y = inputs[m]
            dy = torch.randn_like(y).contiguous(memory_format=fmt)
            w, b = m.weight.detach(), m.bias
            args = (m.stride, m.padding, m.dilation, False, [0, 0], m.groups)
            bias_sizes = [b.shape[0]] if b is not None else None
            passes[0] += median_ms(lambda: torch.ops.aten.convolution(x, w, b, *args))
            if x.data_ptr() != images.data_ptr():
                passes[1] += median_ms(lambda: torch.ops.aten.convolution_backward(
                    dy, x, w, bias_sizes, *args, [True, False, False]))
            passes[2] += median_ms(lambda: torch.ops.aten.convolution_backward(
                dy, x, w, bias_sizes, *args, [False, True, b is not None]))
    return passes


def main():
    args = parse_args()
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cuda = args.device == "cuda"
    device = torch.device(args.device)
    if cuda:
        torch.backends.cudnn.allow_tf32 = bool(args.tf32)
        torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
        torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = build(args, torch)
    model.train()
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    if cuda:
        model = model.to(device)
    model = model.to(memory_format=fmt)
    if args.model == "lenet":
        groups = [{"params": list(model.parameters())}]
    else:  # weight decay on the conv weights only, as resnet_arg_scope's regularizer
        decayed = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        ids = {id(p) for p in decayed}
        groups = [{"params": decayed, "weight_decay": 1e-4},
                  {"params": [p for p in model.parameters() if id(p) not in ids]}]
    optimizer = torch.optim.SGD(groups, lr=args.learning_rate, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    c, hw = (1, 28) if args.model == "lenet" else (3, 32)
    gen = torch.Generator().manual_seed(args.seed)
    pool = [((torch.rand(args.batch_size, c, hw, hw, generator=gen) * 2 - 1)
             .to(device).contiguous(memory_format=fmt),
             torch.randint(0, args.num_classes, (args.batch_size,), generator=gen).to(device))
            for _ in range(args.pool)]

    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    def step(i):
        images, labels = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss.item()

    times, cpu_times, first_loss, last_loss = [], [], None, None
    for i in range(args.warmup + args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        last_loss = step(i)
        sync()  # every kernel of the step has finished on the GPU
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        if first_loss is None:
            first_loss = last_loss
        if i >= args.warmup:
            times.append(elapsed)
            cpu_times.append(cpu)

    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            step(args.warmup + args.steps)
            sync()
            elapsed = time.perf_counter() - start
        prof.export_chrome_trace(args.profile)
        print(f"train_image_torch: profiled step: {elapsed * 1e3:.1f} ms, written to "
              f"{args.profile}", file=sys.stderr)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30),
              file=sys.stderr)
        profile_ms = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()
                      if e.self_cpu_time_total > 0}

    conv_bound = (time_convs(torch, model, pool[0][0], fmt, sync=sync) if args.conv_bound
                  else None)

    times.sort()
    median = statistics.median(times)
    p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
    print(json.dumps({
        "framework": "pytorch", "device": args.device, "workload": args.model,
        "threads": args.threads,
        "batch_size": args.batch_size, "steps": args.steps, "median_ms": median * 1e3,
        "p90_ms": p90 * 1e3, "images_per_sec": args.batch_size / median,
        "cpu_ms": statistics.median(cpu_times) * 1e3,
        "memory_format": args.memory_format, "autocast": args.autocast,
        **({"tf32": bool(args.tf32), "cudnn_benchmark": bool(args.cudnn_benchmark)}
           if cuda else {}),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "first_loss": first_loss, "last_loss": last_loss,
        **({"profile_step_ms": elapsed * 1e3, "profile_self_ms": profile_ms}
           if args.profile else {}),
        **({"conv_bound_ms": sum(conv_bound), "conv_bound_passes_ms": conv_bound}
           if conv_bound else {})}), flush=True)


if __name__ == "__main__":
    main()
