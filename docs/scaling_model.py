#!/usr/bin/env python3
"""Scaling model of synchronous data parallelism (docs/scaling.md): predicted weak-scaling
efficiency of Trainyard's models at 8 to 512 GPUs, from ring all-reduce cost and bucket overlap.

    python3 docs/scaling_model.py            # the tables of docs/scaling.md
    python3 docs/scaling_model.py --check    # also the calibration against PyTorch DDP

Standard library only; every number below is either computed here or stated with its source.

Model (per step, per replica batch fixed):
  ring all-reduce of s bytes over N ranks:  t_ar(s) = 2(N-1)/N * s / B_bus + 2(N-1) * alpha
  step compute time T_c (single-GPU step), forward T_f = T_c / 3, backward T_b = 2 T_c / 3
  gradients are f32 (4 bytes a parameter), bucketed as GradientReducer does it: variables in
  reverse creation order, a bucket closed once it holds >= bucket bytes
  a variable's gradient is final at T_f + T_b * (bytes of the variables before it in backward
  order, itself included) / (all gradient bytes): backward time spread in proportion to bytes
  (exact for dense layers, whose backward GEMMs cost batch x parameters)
  buckets are reduced one after the other (one communication stream): bucket i starts at
  max(ready_i, end_{i-1}) and takes t_ar(bytes_i)
  step time T(N) = max(T_f + T_b, end_last) + (nothing else: the optimizer is in T_c)
  efficiency E(N) = T_c / T(N) (weak scaling: N x the examples in T(N) against one GPU's T_c)
"""

import argparse
import math

MIB = 1 << 20

# ---- Parameters of the project's models, counted from the model code ------------------------
# Each model is its variables in creation order, as (name, parameters).

YT8M_FEATURES = 1024 + 128  # mean_rgb + mean_audio (video level), rgb + audio (frame level)
YT8M_CLASSES = 3862


def moe_variables(d, classes=YT8M_CLASSES, mixtures=2, prefix=""):
    # video_level_models.cc MoeModel: gates [d, classes*(m+1)] without biases, experts
    # [d, classes*m] with biases.
    return [
        (prefix + "gates/weights", d * classes * (mixtures + 1)),
        (prefix + "experts/weights", d * classes * mixtures),
        (prefix + "experts/biases", classes * mixtures),
    ]


def logistic_variables():
    return [("weights", YT8M_FEATURES * YT8M_CLASSES), ("biases", YT8M_CLASSES)]


def dbof_variables(cluster=8192, hidden=1024):
    # frame_level_models.cc DbofModel with its defaults (batch norm on: beta and gamma, no
    # biases), then the video-level MoeModel (2 mixtures) on the hidden layer.
    d = YT8M_FEATURES
    return [
        ("input_bn/beta", d), ("input_bn/gamma", d),
        ("cluster_weights", d * cluster),
        ("cluster_bn/beta", cluster), ("cluster_bn/gamma", cluster),
        ("hidden1_weights", cluster * hidden),
        ("hidden1_bn/beta", hidden), ("hidden1_bn/gamma", hidden),
    ] + moe_variables(hidden, prefix="classifier/")


def conv_bn(name, k, cin, cout):
    # slim conv2d with batch norm (no bias; beta and gamma: batch_norm_scale is true).
    return [(name + "/weights", k * k * cin * cout), (name + "/BatchNorm/beta", cout),
            (name + "/BatchNorm/gamma", cout)]


def resnet20_variables(classes=10):
    # pkg/nets resnet_cifar_blocks(20): root 3x3x16, three blocks of 3 basic units (16, 32,
    # 64), a 1x1 projection shortcut where the depth changes, logits with biases.
    v = conv_bn("conv1", 3, 3, 16)
    cin = 16
    for b, depth in enumerate((16, 32, 64)):
        for u in range(3):
            name = "block%d/unit%d" % (b + 1, u + 1)
            if cin != depth:
                v += conv_bn(name + "/shortcut", 1, cin, depth)
            v += conv_bn(name + "/conv1", 3, cin, depth)
            v += conv_bn(name + "/conv2", 3, depth, depth)
            cin = depth
    return v + [("logits/weights", 64 * classes), ("logits/biases", classes)]


def resnet50_variables(classes=1000):
    # resnet_v1_50: 7x7 root, bottleneck blocks (64, 128, 256, 512 bottleneck depths; 3, 4, 6,
    # 3 units), projection shortcut at each block's first unit, logits with biases.
    v = conv_bn("conv1", 7, 3, 64)
    cin = 64
    for b, (depth_b, units) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        depth = 4 * depth_b
        for u in range(units):
            name = "block%d/unit%d" % (b + 1, u + 1)
            if cin != depth:
                v += conv_bn(name + "/shortcut", 1, cin, depth)
            v += conv_bn(name + "/conv1", 1, cin, depth_b)
            v += conv_bn(name + "/conv2", 3, depth_b, depth_b)
            v += conv_bn(name + "/conv3", 1, depth_b, depth)
            cin = depth
    return v + [("logits/weights", 2048 * classes), ("logits/biases", classes)]


# ---- Step times of one GPU (T_c) -------------------------------------------------------------
# Measured: BENCHMARKS.md "The CUDA backend on one H200" (Trainyard, f32, median of 30 steps).
# Assumed: scaled as stated; marked so in every table.

H200_LOGISTIC_MS = 0.84  # LogisticModel, batch 1024 (measured)
H200_GEMM_TFLOPS = 45.72  # 1024 x 1152 x 3862 matmul (measured), for the FLOP scaling below


def gemm_train_flops(rows, params_of_gemms):
    # forward + two backward GEMMs: 3 x 2 x rows x (in x out) per dense layer
    return 6 * rows * params_of_gemms


def flop_scaled_ms(flops):
    # The GEMM time at the measured rate, times LogisticModel's measured step over its own GEMM
    # time (the non-GEMM share of a step: loss, Adam, clipping, launches).
    logistic_gemm_ms = gemm_train_flops(1024, YT8M_FEATURES * YT8M_CLASSES) / H200_GEMM_TFLOPS / 1e9
    return flops / H200_GEMM_TFLOPS / 1e9 * (H200_LOGISTIC_MS / logistic_gemm_ms)


def models():
    moe_gemm = sum(p for n, p in moe_variables(YT8M_FEATURES) if n.endswith("weights"))
    dbof_frames = 1024 * 30  # batch 1024, 30 sampled frames a video
    dbof_flops = (gemm_train_flops(dbof_frames, YT8M_FEATURES * 8192) +
                  gemm_train_flops(1024, 8192 * 1024) +
                  gemm_train_flops(1024, sum(p for n, p in moe_variables(1024)
                                             if n.endswith("weights"))))
    return [
        # name, variables, batch per GPU, T_c ms, how T_c was obtained
        ("LogisticModel", logistic_variables(), 1024, H200_LOGISTIC_MS, "measured (H200)"),
        ("MoeModel", moe_variables(YT8M_FEATURES), 1024,
         flop_scaled_ms(gemm_train_flops(1024, moe_gemm)), "assumed: FLOP-scaled from Logistic"),
        ("DbofModel", dbof_variables(), 1024, flop_scaled_ms(dbof_flops),
         "assumed: FLOP-scaled from Logistic"),
        ("ResNet-20", resnet20_variables(), 128, 8.68, "measured (H200)"),
        ("ResNet-50", resnet50_variables(), 64, 64 / 329 * 1000 * 15.7 / 67,
         "assumed: V100's 329 img/s x FP32 peak 67/15.7"),
    ]


# ---- Interconnect ----------------------------------------------------------------------------
# B_bus is the bus bandwidth an all-reduce achieves (nccl-tests' busbw), alpha the latency of
# one ring step. Inside a node of 8 GPUs: NVLink; beyond 8 GPUs the ring crosses nodes and the
# slowest link (the NIC share of each GPU) sets B_bus.
GPUS_PER_NODE = 8
INTERCONNECTS = {
    # name: (intra B_bus GB/s, intra alpha us, inter B_bus GB/s, inter alpha us, description)
    "fast": (230.0, 3.0, 40.0, 8.0,
             "NVLink inside a node (busbw 230 GB/s, 8 x A100 measured in nccl-tests #149/#178; "
             "NVLink is 300 GB/s a direction); one 400 Gb/s InfiniBand NIC per GPU between nodes "
             "(50 GB/s line rate, 40 GB/s assumed achieved); alpha 3 us / 8 us a ring step"),
    "commodity": (230.0, 3.0, 10.0, 8.0,
                  "the same nodes with one 100 Gb/s InfiniBand NIC per node (12.5 GB/s line rate "
                  "shared by the node's 8 GPUs, 10 GB/s achieved); alpha 3 us / 8 us"),
}


def t_allreduce(nbytes, n, bus_gbs, alpha_us, tree_latency=False):
    # tree_latency: the latency term of a log-depth schedule (NCCL's trees, 2 ceil(log2 N)
    # steps) in place of the ring's 2(N-1), the bandwidth term unchanged.
    if n == 1:
        return 0.0
    steps = 2 * math.ceil(math.log2(n)) if tree_latency else 2 * (n - 1)
    return 2 * (n - 1) / n * nbytes / (bus_gbs * 1e9) + steps * alpha_us * 1e-6


def buckets(variables, bucket_bytes):
    # GradientReducer::make_plan: reverse creation order, close once >= bucket_bytes.
    plan, current, size = [], [], 0
    for name, params in reversed(variables):
        current.append((name, params))
        size += 4 * params
        if size >= bucket_bytes:
            plan.append(current)
            current, size = [], 0
    if current:
        plan.append(current)
    return plan


def step_time(variables, t_c, n, link, bucket_bytes, overlap=True, tree_latency=False):
    """Seconds of one step at n ranks (t_c seconds at one)."""
    if n == 1:
        return t_c
    intra_bw, intra_a, inter_bw, inter_a, _ = INTERCONNECTS[link] if isinstance(link, str) else link
    bw, alpha = (intra_bw, intra_a) if n <= GPUS_PER_NODE else (inter_bw, inter_a)
    t_f, t_b = t_c / 3, 2 * t_c / 3
    total = 4 * sum(p for _, p in variables)
    done_bytes, end = 0, 0.0
    for bucket in buckets(variables, bucket_bytes):
        nbytes = 4 * sum(p for _, p in bucket)
        done_bytes += nbytes
        ready = t_f + t_b * done_bytes / total if overlap else t_c
        end = max(ready, end) + t_allreduce(nbytes, n, bw, alpha, tree_latency)
    return max(t_c, end)


SIZES = (8, 16, 64, 256, 512)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket_mb", type=float, default=25.0)
    parser.add_argument("--step_scale", type=float, default=1.0,
                        help="multiply every T_c (and batch) by this: a bigger batch a GPU")
    parser.add_argument("--check", action="store_true",
                        help="also the calibration against PyTorch DDP's published ResNet-50 run")
    args = parser.parse_args()
    bucket = int(args.bucket_mb * MIB)

    scale = args.step_scale
    print("Parameters (from the model code) and one GPU's step time T_c%s:\n" %
          (" (batch and T_c x %g)" % scale if scale != 1 else ""))
    print("| model | parameters | gradient MB | buckets of %g MiB | batch/GPU | T_c ms | T_c |"
          % args.bucket_mb)
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, variables, batch, ms, how in models():
        batch, ms = int(batch * scale), ms * scale
        p = sum(q for _, q in variables)
        print("| %s | %s | %.1f | %d | %d | %.2f | %s |" % (
            name, format(p, ","), 4 * p / 1e6, len(buckets(variables, bucket)), batch, ms, how))

    for link, spec in INTERCONNECTS.items():
        print("\nPredicted efficiency, interconnect '%s': %s\n" % (link, spec[4]))
        print("| model | " + " | ".join("%d GPUs" % n for n in SIZES) +
              " | 512, no overlap | 512, log-depth latency |")
        print("|---|" + "---:|" * (len(SIZES) + 2))
        for name, variables, _, ms, _ in models():
            t_c = ms * scale / 1000
            cells = ["%.0f%%" % (100 * t_c / step_time(variables, t_c, n, link, bucket))
                     for n in SIZES]
            no_overlap = 100 * t_c / step_time(variables, t_c, 512, link, bucket, overlap=False)
            tree = 100 * t_c / step_time(variables, t_c, 512, link, bucket, tree_latency=True)
            print("| %s | %s | %.0f%% | %.0f%% |" % (name, " | ".join(cells), no_overlap, tree))

    if args.check:
        # PyTorch DDP's ResNet-50 benchmark (benchmarks/distributed/ddp/README.md, V100 DGX,
        # batch 32 a GPU): 329 img/s on one GPU without DDP, 306 a GPU at 16 GPUs (93%); DDP on one
        # GPU already costs 319/329. Interconnect of that run not stated: both of ours shown.
        t_c = 32 / 329
        print("\nCalibration: ResNet-50 at 16 V100s, batch 32 a GPU, T_c %.1f ms "
              "(published 93%%, 97%% of it DDP's one-GPU cost 319/329):" % (t_c * 1000))
        v100_intra = (130.0, 3.0)  # inside a DGX-1 (unused at 16 GPUs: the ring crosses nodes)
        for inter_gbs in (10.0, 40.0):
            link = (v100_intra[0], v100_intra[1], inter_gbs, 8.0, "")
            e = t_c / step_time(resnet50_variables(), t_c, 16, link, bucket)
            print("  inter-node B_bus %4.0f GB/s: predicted %.0f%%, x 319/329 = %.0f%%" %
                  (inter_gbs, 100 * e, 100 * e * 319 / 329))


if __name__ == "__main__":
    main()
