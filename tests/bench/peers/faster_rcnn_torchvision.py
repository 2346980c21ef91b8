"""torchvision's Faster R-CNN built like the Object Detection API's, the shapes bench_faster_rcnn
times in Trainyard.

    faster_rcnn_torchvision.py [--config mobilenet|resnet50] [--threads N] [--batch B]
                               [--steps N] [--infer_steps N] [--warmup N] [--image_size S]
                               [--num_classes C] [--max_proposals P]
                               [--second_stage_batch_size R] [--pool P]
                               [--memory_format channels_last|contiguous] [--sampling_ratio K]

The model is torchvision.models.detection.FasterRCNN (its transform, RPN, anchor matching and
sampling, proposal NMS, MultiScaleRoIAlign, RoIHeads' sampling, losses and post-processing)
with the API's shapes put into it (bench_faster_rcnn.cc's header states the API's side):
  resnet50   A C4 backbone: torchvision's resnet50 (random init, no download) conv1 to layer3
             (1024 channels, stride 16), its BatchNorm2d kept in eval mode in training (the
             sample's batch_norm_trainable false: moving statistics, scale and offset trained).
             One feature map, AnchorGenerator sizes 64, 128, 256, 512 (the API's 256 x 256 base
             at scales 0.25 to 2) x aspect ratios 0.5, 1, 2: 12 anchors a location on the
             stride-16 map. The RPN head is the API's: a 3x3 conv to 512 with ReLU6 (torchvision's
             RPNHead would keep the input's 1,024), then 1x1 convs to 12 objectness logits
             (torchvision's one sigmoid logit per anchor, the API's two softmax ones) and 48 box
             codes. RPN: no pre-NMS top-n (set to every anchor), NMS 0.7, 300 kept after it in
             training and test (max_proposals), IoU 0.7 / 0.3, 256 anchors at 0.5 positive.
             RoI pooling: MultiScaleRoIAlign to 14 x 14 with sampling_ratio 1 (one bilinear
             sample a bin, as crop_and_resize; torchvision's default is 2), then the box head:
             max pool 2 / 2 to 7 x 7, layer4 with its stride set to 1 (the API's block4 at stride
             1), average pool; FastRCNNPredictor (C + 1 scores, (C + 1) x 4 box codes; the API
             has C x 4). RoIHeads: 64 RoIs an image (second_stage_batch_size) at 0.25 positive,
             IoU 0.5, score threshold 0, NMS 0.6, 300 detections an image.
  mobilenet  The reduced configuration: MobileNet v1 written here (torchvision has none; as in
             ssd_torchvision.py) to Conv2d_11 (512 channels, stride 16, BatchNorm2d eps 1e-3
             in training mode, as batch_norm_trainable true), anchor sizes 16, 32, 64, 128 (a 64
             base at scales 0.25 to 2), 100 proposals, 32 RoIs an image, and a box head of the
             API's faster_rcnn_mobilenet_v1 second stage: two separable convolutions (a 3x3
             depthwise conv without normalization, then a 1x1 to 1,024 with BatchNorm and ReLU6;
             stride 2 then 1) on the 7 x 7 pooled crops, average pool; 100 detections an image.
The transform takes images of S x S, resizes them to S (min_size = max_size = S: the same size)
and normalizes; its padding to a multiple of 32 is turned off (size_divisible 1), so the
feature map is the API's (38 x 38 at 600, 10 x 10 at 160).
What stays torchvision's own: the groundtruth boxes added to the proposals before the RoI
sampling; the RPN's box coder weights (1, 1, 1, 1) and its removal of small boxes; its matcher's
low-quality matches (all anchors tied at a groundtruth's best IoU); smooth L1 with beta 1/9 and
the losses' normalization; the bottleneck's stride in the first block's 3x3 of each stage where
slim's is in the last unit's 3x3 (the same sizes, slightly different FLOPs); symmetric padding
for SAME.

A training step: model.train() (then the ResNet's BatchNorm2d back to eval), zero_grad, the loss
dict from model(images, targets) summed, backward, each gradient clipped to norm 10 on its own
(the sample's gradient_clipping_by_norm), SGD(lr 0.0003, momentum 0.9), the sample config's
momentum optimizer at its initial rate, no weight decay (the sample's is 0). An
inference step: model.eval() under torch.no_grad(). Data: a pool of P batches of images uniform
in [0, 255) (given as B tensors [3, S, S] divided by 255) and per image 1 to 6 boxes of uniform
classes, cycled.

Prints one JSON line: {"framework": "torchvision", "workload": "faster_rcnn_<config>",
"threads", "batch_size", "image_size", "num_classes", "max_proposals",
"second_stage_batch_size", "steps", "memory_format", "sampling_ratio", "train": {"median_ms",
"p90_ms", "images_per_sec", "cpu_ms", "first_loss", "last_loss", "first_losses"}, "infer": {"median_ms",
"p90_ms", "images_per_sec", "cpu_ms", "detections"}, "num_anchors", "peak_rss_mb",
"versions"}.
"""

import argparse
import json
import os
import resource
import statistics
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="mobilenet", choices=["mobilenet", "resnet50"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--steps", type=int, default=5, help="timed training steps")
    p.add_argument("--infer_steps", type=int, default=None, help="timed inference steps")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image_size", type=int, default=None)
    p.add_argument("--num_classes", type=int, default=None)
    p.add_argument("--max_proposals", type=int, default=None)
    p.add_argument("--second_stage_batch_size", type=int, default=None)
    p.add_argument("--pool", type=int, default=2)
    p.add_argument("--memory_format", default="channels_last",
                   choices=["channels_last", "contiguous"])
    p.add_argument("--sampling_ratio", type=int, default=1)
    p.add_argument("--learning_rate", type=float, default=0.0003)
    p.add_argument("--clip_gradient_norm", type=float, default=10.0,
                   help="each gradient clipped to this norm on its own; 0: no clipping")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    resnet = args.config == "resnet50"
    defaults = dict(batch=1 if resnet else 8, image_size=600 if resnet else 160,
                    num_classes=90 if resnet else 4, max_proposals=300 if resnet else 100,
                    second_stage_batch_size=64 if resnet else 32)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.infer_steps is None:
        args.infer_steps = args.steps
    # Before torch is imported: its thread pools read these once.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    return args


def build(args, torch, torchvision):
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    nn = torch.nn
    anchors_per_location = 12

    class ApiRpnHead(nn.Module):
        """The API's RPN: 3x3 conv to 512 + ReLU6, 1x1 objectness and box-code convs."""

        def __init__(self, channels, depth=512):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(channels, depth, 3, padding=1),
                                      nn.ReLU6(inplace=True))
            self.cls_logits = nn.Conv2d(depth, anchors_per_location, 1)
            self.bbox_pred = nn.Conv2d(depth, anchors_per_location * 4, 1)
            for layer in (self.conv[0], self.cls_logits, self.bbox_pred):
                nn.init.trunc_normal_(layer.weight, std=0.01)
                nn.init.zeros_(layer.bias)

        def forward(self, features):
            logits, codes = [], []
            for f in features:
                t = self.conv(f)
                logits.append(self.cls_logits(t))
                codes.append(self.bbox_pred(t))
            return logits, codes

    def conv_bn(cin, cout, kernel, stride=1, groups=1):
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout, eps=1e-3), nn.ReLU6(inplace=True))

    def separable(cin, cout, stride):
        """slim.separable_conv2d with a normalizer: depthwise (nothing after it), pointwise,
        then batch norm and ReLU6."""
        return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                             nn.Conv2d(cin, cout, 1, bias=False),
                             nn.BatchNorm2d(cout, eps=1e-3), nn.ReLU6(inplace=True))

    class BoxHead(nn.Module):
        """Max pool 2 / 2 on the 14 x 14 crops, the second-stage extractor, average pool."""

        def __init__(self, body):
            super().__init__()
            self.pool = nn.MaxPool2d(2, 2)
            self.body = body

        def forward(self, x):
            return torch.flatten(self.body(self.pool(x)).mean((2, 3)), 1)

    if args.config == "resnet50":
        try:
            net = torchvision.models.resnet50(weights=None)
        except TypeError:  # torchvision before 0.13
            net = torchvision.models.resnet50(pretrained=False)
        backbone = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1,
                                 net.layer2, net.layer3)
        backbone.out_channels = 1024
        layer4 = net.layer4
        layer4[0].conv2.stride = (1, 1)
        layer4[0].downsample[0].stride = (1, 1)
        head_body, representation = layer4, 2048
        sizes = (64, 128, 256, 512)
        # The API's ResNet preprocess: [0, 255] minus the channel means (123.68, 116.779,
        # 103.939), from torchvision's [0, 1] images.
        mean, std = [123.68 / 255, 116.779 / 255, 103.939 / 255], [1 / 255] * 3
    else:
        blocks = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512),
                  (1, 512), (1, 512), (1, 512), (1, 512)]
        layers, depth = [conv_bn(3, 32, 3, 2)], 32
        for stride, out in blocks:  # Conv2d_1 .. Conv2d_11
            layers.append(nn.Sequential(conv_bn(depth, depth, 3, stride, groups=depth),
                                        conv_bn(depth, out, 1)))
            depth = out
        backbone = nn.Sequential(*layers)
        backbone.out_channels = 512
        head_body = nn.Sequential(separable(512, 1024, 2), separable(1024, 1024, 1))
        representation = 1024
        sizes = (16, 32, 64, 128)
        mean, std = [0.5] * 3, [0.5] * 3

    feature = -(-args.image_size // 16)  # ceil: SAME's stride-16 map
    num_anchors = feature * feature * anchors_per_location
    anchor_generator = AnchorGenerator(sizes=(sizes,), aspect_ratios=((0.5, 1.0, 2.0),))
    roi_pool = MultiScaleRoIAlign(featmap_names=["0"], output_size=14,
                                  sampling_ratio=args.sampling_ratio)
    s = args.image_size
    model = FasterRCNN(
        backbone, num_classes=None, min_size=s, max_size=s, image_mean=mean, image_std=std,
        rpn_anchor_generator=anchor_generator, rpn_head=ApiRpnHead(backbone.out_channels),
        rpn_pre_nms_top_n_train=num_anchors, rpn_pre_nms_top_n_test=num_anchors,
        rpn_post_nms_top_n_train=args.max_proposals, rpn_post_nms_top_n_test=args.max_proposals,
        rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3,
        rpn_batch_size_per_image=256, rpn_positive_fraction=0.5,
        box_roi_pool=roi_pool, box_head=BoxHead(head_body),
        box_predictor=FastRCNNPredictor(representation, args.num_classes + 1),
        box_score_thresh=0.0, box_nms_thresh=0.6,
        box_detections_per_img=300 if args.config == "resnet50" else 100,
        box_fg_iou_thresh=0.5, box_bg_iou_thresh=0.5,
        box_batch_size_per_image=args.second_stage_batch_size, box_positive_fraction=0.25)
    # The Mask R-CNN box predictor's fc_hyperparams: variance_scaling FAN_AVG, uniform, factor
    # 1 (Glorot's uniform), zero biases.
    for layer in (model.roi_heads.box_predictor.cls_score, model.roi_heads.box_predictor.bbox_pred):
        nn.init.xavier_uniform_(layer.weight)
        nn.init.zeros_(layer.bias)
    model.transform.size_divisible = 1
    return model, num_anchors


def main():
    args = parse_args()
    import torch
    import torchvision

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, num_anchors = build(args, torch, torchvision)
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=args.learning_rate, momentum=0.9)
    first_losses = {}
    frozen_bn = args.config == "resnet50"

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
        if i == 0:
            first_losses.update({k: v.item() for k, v in losses.items()})
        loss.backward()
        if args.clip_gradient_norm > 0:
            # The sample's gradient_clipping_by_norm: slim's clip_gradient_norms, each gradient
            # clipped to the norm on its own.
            grads = [p.grad for p in params if p.grad is not None]
            norms = torch._foreach_norm(grads)
            scales = [torch.clamp(args.clip_gradient_norm / torch.clamp(n, min=1e-30), max=1.0)
                      for n in norms]
            torch._foreach_mul_(grads, scales)
        optimizer.step()
        return loss.item()

    def timed(fn, steps):
        times, cpu_times, values = [], [], []
        for i in range(args.warmup + steps):
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
    if frozen_bn:
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eval()
    train, losses = timed(train_step, args.steps)
    train.update(first_loss=losses[0], last_loss=losses[-1], first_losses=first_losses)

    def infer_step(i):
        images, _ = pool[i % len(pool)]
        with torch.no_grad():
            detections = model(images)
        return statistics.mean(len(d["boxes"]) for d in detections)

    model.eval()
    infer, counts = timed(infer_step, args.infer_steps)
    infer["detections"] = statistics.median(counts[args.warmup:])

    print(json.dumps({
        "framework": "torchvision", "workload": "faster_rcnn_" + args.config,
        "threads": args.threads, "batch_size": args.batch, "image_size": s,
        "num_classes": args.num_classes, "max_proposals": args.max_proposals,
        "second_stage_batch_size": args.second_stage_batch_size, "steps": args.steps,
        "infer_steps": args.infer_steps, "memory_format": args.memory_format,
        "sampling_ratio": args.sampling_ratio, "train": train, "infer": infer,
        "num_anchors": num_anchors,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__}}),
        flush=True)


if __name__ == "__main__":
    main()
