"""torchvision's SSD with a MobileNet v1 backbone, the shape bench_ssd times in Trainyard.

    ssd_torchvision.py [--threads N] [--batch B] [--steps N] [--warmup N] [--image_size S]
                       [--num_classes C] [--pool P] [--memory_format channels_last|contiguous]
                       [--head_kernel 1|3] [--topk_candidates K] [--optimizer rmsprop|momentum]

The model is torchvision.models.detection.ssd.SSD (its transform, matcher, box coder, loss and
post-processing) around the Object Detection API's ssd_mobilenet_v1 of bench_ssd's header:
  backbone  MobileNet v1 to Conv2d_13: Conv2d(3, 32, 3, stride 2) then 13 depthwise-separable
            blocks (3x3 depthwise + BatchNorm + ReLU6, 1x1 pointwise + BatchNorm + ReLU6;
            stride 2 on blocks 2, 4, 6 and 12), BatchNorm2d(eps 1e-3, momentum 3e-4 = 1 - the
            config's decay 0.9997); feature maps Conv2d_11 (512 ch, 19x19 at 300) and Conv2d_13
            (1024, 10x10), then the API's four extra layers, each a 1x1 conv to half the depth
            and a 3x3 stride-2 conv (256 -> 512, 128 -> 256, 128 -> 256, 64 -> 128), both with
            BatchNorm and ReLU6: maps of 5x5, 3x3, 2x2 and 1x1.
  anchors   the API's ssd_anchor_generator (a DefaultBoxGenerator whose width-height pairs are
            replaced): scales 0.2 to 0.95 over 6 layers; on the lowest layer (0.1, 1), (0.2, 2),
            (0.2, 1/2); on the others aspect ratios 1, 2, 1/2, 3, 1/3 and the interpolated
            scale at 1; 3 then 6 per location, 1,917 at 300 x 300; not clipped.
  head      torchvision's SSDHead with each 3x3 conv replaced by a 1x1 conv (the API sample's
            kernel_size 1; --head_kernel 3 keeps torchvision's 3x3), with bias, no BatchNorm.
  classes   C + 1 (background), C = 90.
What stays torchvision's own, against the API's config: softmax cross-entropy (not sigmoid)
with hard negative mining at 3 negatives per positive (positive_fraction 0.25, not the API's
3,000-example IoU-0.99 miner), smooth L1 on the (10, 10, 5, 5) box coder's codes, the loss
normalized by the number of matches; the transform resizes every image to S x S
(bilinear, a copy at the same size) and normalizes with mean 0.5, std 0.5 (images in [0, 1]:
[-1, 1] as the API's preprocess); post-processing takes per class the scores above 1e-8, the
--topk_candidates best (default 400, torchvision's own; 0: every anchor, the candidates of the
API's NMS, which torchvision's nms then suppresses in full where the API's greedy NMS stops at
max_detections_per_class 100 kept), batched NMS at IoU 0.6, 100 detections per image (the API's
max_total_detections).

A training step: model.train(), zero_grad, the loss dict from model(images, targets) summed,
backward, the optimizer's step: torch.optim.RMSprop(lr 0.004, alpha 0.9, eps 1.0, momentum
0.9) as the sample config (TF adds epsilon inside the square root, torch outside: the same
work), or SGD(momentum 0.9), with weight_decay 4e-5 on every conv's weights (the gradient of the
config's l2_regularizer(4e-5)). An inference step: model.eval() under torch.no_grad(). Data: a
pool of P batches of images uniform in [0, 255) (given as B tensors [3, S, S] divided by 255)
and per image 1 to 6 boxes of uniform classes, cycled. Weights: torchvision's initializers.
Layout: the model in channels_last by default, or contiguous; the transform's batch is
contiguous either way.

Prints one JSON line: {"framework": "torchvision", "workload": "ssd_mobilenet_v1", "threads",
"batch_size", "image_size", "steps", "memory_format", "head_kernel", "topk_candidates",
"train": {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "first_loss", "last_loss"},
"infer": {"median_ms", "p90_ms", "images_per_sec", "cpu_ms", "detections"}, "num_anchors",
"peak_rss_mb", "versions"}.
"""

import argparse
import json
import math
import os
import resource
import statistics
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5, help="timed steps of each kind")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image_size", type=int, default=300)
    p.add_argument("--num_classes", type=int, default=90)
    p.add_argument("--pool", type=int, default=2)
    p.add_argument("--memory_format", default="channels_last",
                   choices=["channels_last", "contiguous"])
    p.add_argument("--head_kernel", type=int, default=1, choices=[1, 3])
    p.add_argument("--topk_candidates", type=int, default=400,
                   help="per class before NMS; 0: every anchor")
    p.add_argument("--optimizer", default="rmsprop", choices=["rmsprop", "momentum"])
    p.add_argument("--learning_rate", type=float, default=0.004)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    # Before torch is imported: its thread pools read these once.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    return args


def build(args, torch, torchvision):
    from collections import OrderedDict

    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
    from torchvision.models.detection.ssd import SSD, SSDHead

    nn = torch.nn

    def conv_bn(cin, cout, kernel, stride=1, groups=1):
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout, eps=1e-3, momentum=3e-4), nn.ReLU6(inplace=True))

    class MobilenetV1Features(nn.Module):
        """MobileNet v1 to Conv2d_13 and the API's four extra layers; six feature maps."""

        def __init__(self):
            super().__init__()
            blocks = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512),
                      (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]
            layers, depth = [conv_bn(3, 32, 3, 2)], 32
            for stride, out in blocks:
                layers.append(nn.Sequential(conv_bn(depth, depth, 3, stride, groups=depth),
                                            conv_bn(depth, out, 1)))
                depth = out
            self.to_conv11 = nn.Sequential(*layers[:12])  # Conv2d_0 .. Conv2d_11
            self.to_conv13 = nn.Sequential(*layers[12:])  # Conv2d_12, Conv2d_13
            extras = []
            for out in (512, 256, 256, 128):
                extras.append(nn.Sequential(conv_bn(depth, out // 2, 1),
                                            conv_bn(out // 2, out, 3, 2)))
                depth = out
            self.extras = nn.ModuleList(extras)
            self.out_channels = [512, 1024, 512, 256, 256, 128]

        def forward(self, x):
            maps = [self.to_conv11(x)]
            maps.append(self.to_conv13(maps[-1]))
            for layer in self.extras:
                maps.append(layer(maps[-1]))
            return OrderedDict((str(i), m) for i, m in enumerate(maps))

    class ApiSsdAnchors(DefaultBoxGenerator):
        """The API's ssd_anchor_generator as DefaultBoxGenerator's (w, h) pairs."""

        def __init__(self, num_layers=6, min_scale=0.2, max_scale=0.95):
            super().__init__([[2]] * num_layers, clip=False)
            scales = [min_scale + (max_scale - min_scale) * i / (num_layers - 1)
                      for i in range(num_layers)] + [1.0]
            pairs = []
            for k in range(num_layers):
                if k == 0:
                    specs = [(0.1, 1.0), (scales[0], 2.0), (scales[0], 0.5)]
                else:
                    specs = [(scales[k], r) for r in (1.0, 2.0, 0.5, 3.0, 1 / 3)]
                    specs.append((math.sqrt(scales[k] * scales[k + 1]), 1.0))
                # The API's anchors are (height, width) = (s / sqrt(r), s sqrt(r)).
                pairs.append(torch.tensor([[s * math.sqrt(r), s / math.sqrt(r)] for s, r in specs]))
            self._wh_pairs = pairs

        def num_anchors_per_location(self):
            return [len(p) for p in self._wh_pairs]

    backbone = MobilenetV1Features()
    anchors = ApiSsdAnchors()
    classes = args.num_classes + 1
    head = SSDHead(backbone.out_channels, anchors.num_anchors_per_location(), classes)
    if args.head_kernel == 1:
        for scoring in (head.classification_head, head.regression_head):
            scoring.module_list = nn.ModuleList(
                nn.Conv2d(conv.in_channels, conv.out_channels, 1) for conv in scoring.module_list)
    num_anchors = sum(n * s * s for n, s in zip(anchors.num_anchors_per_location(),
                                                feature_sizes(args.image_size)))
    model = SSD(backbone, anchors, (args.image_size, args.image_size), classes,
                image_mean=[0.5] * 3, image_std=[0.5] * 3, head=head, score_thresh=1e-8,
                nms_thresh=0.6, detections_per_img=100,
                topk_candidates=args.topk_candidates or num_anchors)
    return model, num_anchors


def feature_sizes(size):
    """The six feature maps' sizes at image size `size` (SAME padding's ceil(n / 2))."""
    def down(n):
        return (n + 2 - 3) // 2 + 1
    for _ in range(4):  # Conv2d_0 and blocks 2, 4, 6: Conv2d_11's map
        size = down(size)
    sizes = [size]
    for _ in range(5):  # block 12 (Conv2d_13's map) and the four extra layers
        sizes.append(down(sizes[-1]))
    return sizes


def main():
    args = parse_args()
    import torch
    import torchvision

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, num_anchors = build(args, torch, torchvision)
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    decayed = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    ids = {id(p) for p in decayed}
    groups = [{"params": decayed, "weight_decay": 4e-5},
              {"params": [p for p in model.parameters() if id(p) not in ids]}]
    if args.optimizer == "rmsprop":
        optimizer = torch.optim.RMSprop(groups, lr=args.learning_rate, alpha=0.9, eps=1.0,
                                        momentum=0.9)
    else:
        optimizer = torch.optim.SGD(groups, lr=args.learning_rate, momentum=0.9)

    gen = torch.Generator().manual_seed(args.seed)
    s = args.image_size
    pool = []
    for _ in range(args.pool):
        images = [torch.rand(3, s, s, generator=gen) for _ in range(args.batch)]
        targets = []
        for _ in range(args.batch):
            n = int(torch.randint(1, 7, (1,), generator=gen))
            ymin, xmin = torch.rand(n, generator=gen) * 0.8, torch.rand(n, generator=gen) * 0.8
            h = 0.05 + torch.rand(n, generator=gen) * (0.95 - ymin)
            w = 0.05 + torch.rand(n, generator=gen) * (0.95 - xmin)
            boxes = torch.stack([xmin, ymin, xmin + w, ymin + h], 1) * s  # x1 y1 x2 y2, pixels
            labels = torch.randint(1, args.num_classes + 1, (n,), generator=gen)
            targets.append({"boxes": boxes, "labels": labels})
        pool.append((images, targets))

    def train_step(i):
        images, targets = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        losses = model(images, targets)
        loss = sum(losses.values())
        loss.backward()
        optimizer.step()
        return loss.item()

    def timed(fn):
        times, cpu_times, values = [], [], []
        for i in range(args.warmup + args.steps):
            start, cpu_start = time.perf_counter(), time.process_time()
            value = fn(i)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            values.append(value)
            if i >= args.warmup:
                times.append(elapsed)
                cpu_times.append(cpu)
        median = statistics.median(times)
        times.sort()
        return {"median_ms": median * 1e3,
                "p90_ms": times[min(len(times) - 1, round(0.9 * (len(times) - 1)))] * 1e3,
                "images_per_sec": args.batch / median,
                "cpu_ms": statistics.median(cpu_times) * 1e3}, values

    model.train()
    train, losses = timed(train_step)
    train.update(first_loss=losses[0], last_loss=losses[-1])

    def infer_step(i):
        images, _ = pool[i % len(pool)]
        with torch.no_grad():
            detections = model(images)
        return statistics.mean(len(d["boxes"]) for d in detections)

    model.eval()
    infer, counts = timed(infer_step)
    infer["detections"] = statistics.median(counts[args.warmup:])

    print(json.dumps({
        "framework": "torchvision", "workload": "ssd_mobilenet_v1", "threads": args.threads,
        "batch_size": args.batch, "image_size": s, "steps": args.steps,
        "memory_format": args.memory_format, "head_kernel": args.head_kernel,
        "topk_candidates": args.topk_candidates or num_anchors, "optimizer": args.optimizer,
        "train": train, "infer": infer, "num_anchors": num_anchors,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__}}),
        flush=True)


if __name__ == "__main__":
    main()
