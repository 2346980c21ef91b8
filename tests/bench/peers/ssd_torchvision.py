"""torchvision's detectors of the shapes bench_ssd times in Trainyard: SSD MobileNet v1, SSDLite
MobileNet v2 and RetinaNet MobileNet v1 FPN.

    ssd_torchvision.py [--model ssd_mobilenet_v1|ssdlite_mobilenet_v2|retinanet_mobilenet_v1_fpn]
                       [--threads N] [--batch B] [--steps N] [--warmup N] [--image_size S]
                       [--num_classes C] [--pool P] [--memory_format channels_last|contiguous]
                       [--head_kernel 1|3] [--topk_candidates K]
                       [--optimizer rmsprop|momentum|adam] [--learning_rate LR]

--model ssd_mobilenet_v1 (the default) is torchvision.models.detection.ssd.SSD (its transform,
matcher, box coder, loss and post-processing) around the Object Detection API's
ssd_mobilenet_v1 of bench_ssd's header:
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
  classes   C + 1 (background), C = 90; 300 x 300, batch 8, RMSprop at 0.004.

--model ssdlite_mobilenet_v2 is configs/ssdlite_mobilenet_v2_synth_shapes.config's model (what
`bench_ssd --config` on that file trains), as torchvision's SSD class with its SSDLiteHead:
  backbone  MobileNet v2 from torchvision's InvertedResidual blocks at the recipe's
            depth_multiplier 0.25 with slim's rounding (a multiple of 8, at least min_depth 16:
            Conv 16, the blocks 16, 16 x 2, 16 x 3, 16 x 4, 24 x 3, 40 x 3, 80, expansion 6 times
            the input), Conv_1 320; BatchNorm2d(eps 1e-3, momentum 0.01 = 1 - decay 0.99),
            ReLU6. Feature maps: layer_15/expansion_output (expanded_conv_13's 1x1 expansion,
            144 ch, 10x10 at 160, split as torchvision's SSDLite splits its C4 block) and
            layer_19 (Conv_1, 320, 5x5), then torchvision's SSDLite extra blocks, which are the
            API's with use_depthwise (1x1 to half, 3x3 depthwise stride 2, 1x1; BatchNorm and
            ReLU6 on each) at max(int(d x 0.25), 16): 128, 64, 64, 32 deep, maps 3x3, 2x2, 1x1,
            1x1. 273,641 parameters, as Trainyard's (bench_ssd --print_variables 1).
  anchors   the API's ssd_anchor_generator above (the recipe's): 3 then 6 per location, 540.
  head      SSDLiteHead: per map a 3x3 depthwise conv + BatchNorm + ReLU6 and a 1x1 conv with
            bias, for the box codes and for the C + 1 class scores (the API's
            convolutional_box_predictor with use_depthwise, kernel_size 3).
  classes   C + 1, C = 4; 160 x 160, batch 16 (the recipe's), Adam at 0.002.

--model retinanet_mobilenet_v1_fpn is configs/ssd_mobilenet_v1_fpn_synth_shapes.config's model,
as torchvision's RetinaNet class (its transform, matcher, focal loss and post-processing):
  backbone  MobileNet v1 as above at depth_multiplier 0.25, min_depth 16 (16 ... 256 deep),
            BatchNorm momentum 0.01; torchvision's FeaturePyramidNetwork on Conv2d_5 (64 ch,
            level 3, 20x20 at 160), Conv2d_11 (128, level 4) and Conv2d_13 (256, level 5), 64
            deep (additional_layer_depth 256 x 0.25), with its blocks replaced to be the API's
            fpn_top_down_feature_maps: 1x1 projections with bias, no BatchNorm or activation;
            3x3 smoothings with BatchNorm and ReLU6 on levels 3 and 4, none on level 5; levels 6
            and 7 (3x3, 2x2) by an ExtraFPNBlock of two 3x3 stride-2 convs with BatchNorm and
            ReLU6 (bottom_up_Conv2d_14, _15).
  anchors   the API's multiscale_anchor_generator as torchvision's AnchorGenerator: levels 3
            to 7, anchor_scale 4 (sizes 4 x 2^level), scales_per_octave 2 (x 1, x sqrt 2),
            aspect ratios 1, 2, 1/2: 6 per location, 3,228 at 160 x 160.
  head      RetinaNetHead with each tower (torchvision's 4 convs) replaced by the recipe's
            weight-shared tower: 2 convs 3x3, 64 deep, BatchNorm and ReLU6; 3x3 box and class
            convs shared over the levels, the class bias at the prior 0.01 (the API's -4.6);
            the box coder (10, 10, 5, 5) and smooth L1 (delta 1) as the API's.
  loss      torchvision's sigmoid focal loss (alpha 0.25, gamma 2) as the recipe's; matcher at
            IoU 0.5 / 0.5 with low-quality matches (the API's force_match_for_each_row).
  classes   C + 1 columns as the API's predictor (its background column encoded as zeros;
            labels 1 to C, column 0 never positive), C = 4; 160 x 160, batch 16, Adam at 0.002.
  569,478 parameters against Trainyard's 571,526: the API keeps a BatchNorm per level in the
  shared towers (2,048 more scale and offset values), torchvision's shared BatchNorm module
  normalizes each level by its own batch statistics in training all the same.

What stays torchvision's own, against the API's configs:
  SSD, SSDLite  softmax cross-entropy (not sigmoid) with hard negative mining at 3 negatives per
                positive (positive_fraction 0.25, not the API's 3,000-example IoU-0.99 miner),
                smooth L1 on the (10, 10, 5, 5) box coder's codes, the loss normalized by the
                number of matches.
  RetinaNet     the focal loss over every anchor that is not between the thresholds, normalized
                by the foreground count per image (the API: by the matches over the batch, and
                the box loss also by the code size); torchvision's anchor centers at the grid's
                corners (the API's at its cells' centers); no separate BatchNorm per level.
  all           SAME padding in the API against symmetric padding (the same map sizes); the
                transform resizes every image to S x S (bilinear, a copy at the same size) and
                normalizes with mean 0.5, std 0.5 (images in [0, 1]: [-1, 1] as the API's
                preprocess); post-processing takes the scores above 1e-8, then SSD per class the
                --topk_candidates best (default 400, torchvision's own) and RetinaNet per level
                the best (default 1000, its own) of the anchor-class pairs (0: every anchor,
                the candidates of the API's NMS, which torchvision's nms then suppresses in full
                where the API's greedy NMS stops at max_detections_per_class 100 kept), batched
                NMS at IoU 0.6, 100 detections per image (the API's max_total_detections); the
                weights' initializers; data augmentation is not run on either side.

A training step: model.train(), zero_grad, the loss dict from model(images, targets) summed,
backward, the optimizer's step: torch.optim.RMSprop(lr 0.004, alpha 0.9, eps 1.0, momentum
0.9) as the sample config (TF adds epsilon inside the square root, torch outside: the same
work), SGD(momentum 0.9), or Adam(betas 0.9, 0.999, eps 1e-8: tf.train.AdamOptimizer's) as the
recipes (their learning rate at step 0; the schedule's steps are not reached), with
weight_decay 4e-5 on every conv's weights (the gradient of the configs' l2_regularizer(4e-5)).
An inference step: model.eval() under torch.no_grad(). Data: a pool of P batches of images
uniform in [0, 255) (given as B tensors [3, S, S] divided by 255) and per image 1 to 6 boxes of
uniform classes, cycled. Layout: the model in channels_last by default, or contiguous; the
transform's batch is contiguous either way.

Prints one JSON line: {"framework": "torchvision", "workload" (the --model), "threads",
"batch_size", "image_size", "num_classes", "steps", "memory_format", "head_kernel" (null but for
ssd_mobilenet_v1), "topk_candidates", "optimizer", "learning_rate", "train": {"median_ms",
"p90_ms", "images_per_sec", "cpu_ms", "first_loss", "last_loss"}, "infer": {"median_ms",
"p90_ms", "images_per_sec", "cpu_ms", "detections"}, "num_anchors", "peak_rss_mb", "versions"}.
"""

import argparse
import json
import math
import os
import resource
import statistics
import time


MODELS = ("ssd_mobilenet_v1", "ssdlite_mobilenet_v2", "retinanet_mobilenet_v1_fpn")
# Per model: image size, classes, batch, optimizer, learning rate, batch norm momentum
# (1 - the config's decay), depth multiplier.
DEFAULTS = {
    "ssd_mobilenet_v1": dict(image_size=300, num_classes=90, batch=8, optimizer="rmsprop",
                             learning_rate=0.004, bn_momentum=3e-4, depth_multiplier=1.0),
    "ssdlite_mobilenet_v2": dict(image_size=160, num_classes=4, batch=16, optimizer="adam",
                                 learning_rate=0.002, bn_momentum=0.01, depth_multiplier=0.25),
    "retinanet_mobilenet_v1_fpn": dict(image_size=160, num_classes=4, batch=16,
                                       optimizer="adam", learning_rate=0.002, bn_momentum=0.01,
                                       depth_multiplier=0.25),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="ssd_mobilenet_v1", choices=MODELS)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, help="default: the model's (8; the recipes' 16)")
    p.add_argument("--steps", type=int, default=5, help="timed steps of each kind")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image_size", type=int, help="default: the model's (300; the recipes' 160)")
    p.add_argument("--num_classes", type=int, help="default: the model's (90; the recipes' 4)")
    p.add_argument("--pool", type=int, default=2)
    p.add_argument("--memory_format", default="channels_last",
                   choices=["channels_last", "contiguous"])
    p.add_argument("--head_kernel", type=int, default=1, choices=[1, 3],
                   help="ssd_mobilenet_v1's box predictor")
    p.add_argument("--topk_candidates", type=int,
                   help="SSD: per class before NMS (default 400); RetinaNet: per level (default "
                        "1000); 0: every anchor")
    p.add_argument("--optimizer", choices=["rmsprop", "momentum", "adam"],
                   help="default: the model's (rmsprop; the recipes' adam)")
    p.add_argument("--learning_rate", type=float)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    for key, value in DEFAULTS[args.model].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.topk_candidates is None:
        args.topk_candidates = 1000 if args.model.startswith("retinanet") else 400
    # Before torch is imported: its thread pools read these once.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    return args


def build(args, torch, torchvision):
    """The model of args.model and its anchor count at args.image_size."""
    from collections import OrderedDict
    from functools import partial

    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator

    nn = torch.nn
    bn = partial(nn.BatchNorm2d, eps=1e-3, momentum=args.bn_momentum)
    classes = args.num_classes + 1  # the background (SSD) or the unused column 0 (RetinaNet)
    size = args.image_size

    def depth(d):  # the API's depth_fn: max(int(d * depth_multiplier), min_depth 16)
        return max(int(d * args.depth_multiplier), 16)

    def conv_bn(cin, cout, kernel, stride=1, groups=1):
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            bn(cout), nn.ReLU6(inplace=True))

    def mobilenet_v1():
        """Conv2d_0 .. Conv2d_13 of MobileNet v1, one module each, and their depths."""
        blocks = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512),
                  (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024), (1, 1024)]
        layers, depths = [conv_bn(3, depth(32), 3, 2)], [depth(32)]
        for stride, out in blocks:
            layers.append(nn.Sequential(conv_bn(depths[-1], depths[-1], 3, stride,
                                                groups=depths[-1]),
                                        conv_bn(depths[-1], depth(out), 1)))
            depths.append(depth(out))
        return layers, depths

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

    def count_anchors(backbone, per_location):
        with torch.no_grad():
            backbone.eval()
            maps = backbone(torch.zeros(1, 3, size, size)).values()
            backbone.train()
        return sum(n * m.shape[-2] * m.shape[-1] for n, m in zip(per_location, maps))

    def ssd(backbone, head, anchors, num_anchors):
        from torchvision.models.detection.ssd import SSD
        return SSD(backbone, anchors, (size, size), classes, image_mean=[0.5] * 3,
                   image_std=[0.5] * 3, head=head, score_thresh=1e-8, nms_thresh=0.6,
                   detections_per_img=100, topk_candidates=args.topk_candidates or num_anchors)

    if args.model == "ssd_mobilenet_v1":
        from torchvision.models.detection.ssd import SSDHead

        class MobilenetV1Features(nn.Module):
            """MobileNet v1 to Conv2d_13 and the API's four extra layers; six feature maps."""

            def __init__(self):
                super().__init__()
                layers, depths = mobilenet_v1()
                self.to_conv11 = nn.Sequential(*layers[:12])  # Conv2d_0 .. Conv2d_11
                self.to_conv13 = nn.Sequential(*layers[12:])  # Conv2d_12, Conv2d_13
                extras, d = [], depths[-1]
                for out in (512, 256, 256, 128):
                    extras.append(nn.Sequential(conv_bn(d, depth(out // 2), 1),
                                                conv_bn(depth(out // 2), depth(out), 3, 2)))
                    d = depth(out)
                self.extras = nn.ModuleList(extras)
                self.out_channels = [depths[11], depths[13]] + [depth(o) for o in
                                                                 (512, 256, 256, 128)]

            def forward(self, x):
                maps = [self.to_conv11(x)]
                maps.append(self.to_conv13(maps[-1]))
                for layer in self.extras:
                    maps.append(layer(maps[-1]))
                return OrderedDict((str(i), m) for i, m in enumerate(maps))

        backbone = MobilenetV1Features()
        anchors = ApiSsdAnchors()
        head = SSDHead(backbone.out_channels, anchors.num_anchors_per_location(), classes)
        if args.head_kernel == 1:
            for scoring in (head.classification_head, head.regression_head):
                scoring.module_list = nn.ModuleList(
                    nn.Conv2d(conv.in_channels, conv.out_channels, 1)
                    for conv in scoring.module_list)
        num_anchors = count_anchors(backbone, anchors.num_anchors_per_location())
        return ssd(backbone, head, anchors, num_anchors), num_anchors

    if args.model == "ssdlite_mobilenet_v2":
        from torchvision.models._utils import _make_divisible
        from torchvision.models.detection.ssdlite import SSDLiteHead, _extra_block
        from torchvision.models.mobilenetv2 import InvertedResidual
        from torchvision.ops.misc import Conv2dNormActivation

        def v2_depth(d):  # slim mobilenet's depth_multiplier op: divisible by 8, min_depth 16
            return _make_divisible(d * args.depth_multiplier, 8, 16)

        class MobilenetV2Features(nn.Module):
            """MobileNet v2 to layer_19 (Conv_1), maps at layer_15/expansion_output and
            layer_19, and the API's four extra layers with use_depthwise: six feature maps."""

            def __init__(self):
                super().__init__()
                # expanded_conv .. expanded_conv_16: (expansion, depth, repeats, first stride)
                spec = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
                d = v2_depth(32)
                layers = [Conv2dNormActivation(3, d, 3, 2, norm_layer=bn,
                                               activation_layer=nn.ReLU6)]
                for t, c, n, s in spec:
                    for i in range(n):
                        layers.append(InvertedResidual(d, v2_depth(c), s if i == 0 else 1, t,
                                                       norm_layer=bn))
                        d = v2_depth(c)
                conv_1 = Conv2dNormActivation(d, v2_depth(1280), 1, norm_layer=bn,
                                              activation_layer=nn.ReLU6)
                c4 = 1 + 13  # expanded_conv_13 (the first of the 160s, stride 2)
                self.features = nn.ModuleList([
                    nn.Sequential(*layers[:c4], layers[c4].conv[0]),  # to its expansion output
                    nn.Sequential(layers[c4].conv[1:], *layers[c4 + 1:], conv_1),
                ])
                top = v2_depth(1280)
                extra, d = [], top
                for out in (512, 256, 256, 128):
                    extra.append(_extra_block(d, depth(out), bn))
                    d = depth(out)
                self.extra = nn.ModuleList(extra)
                self.out_channels = ([layers[c4].conv[0].out_channels, top] +
                                     [depth(o) for o in (512, 256, 256, 128)])

            def forward(self, x):
                maps = []
                for block in list(self.features) + list(self.extra):
                    x = block(x)
                    maps.append(x)
                return OrderedDict((str(i), m) for i, m in enumerate(maps))

        backbone = MobilenetV2Features()
        anchors = ApiSsdAnchors()
        head = SSDLiteHead(backbone.out_channels, anchors.num_anchors_per_location(), classes,
                           bn)
        num_anchors = count_anchors(backbone, anchors.num_anchors_per_location())
        return ssd(backbone, head, anchors, num_anchors), num_anchors

    # retinanet_mobilenet_v1_fpn
    from torchvision.models.detection._utils import BoxCoder
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead
    from torchvision.ops.feature_pyramid_network import ExtraFPNBlock, FeaturePyramidNetwork
    from torchvision.ops.misc import Conv2dNormActivation

    fpn_depth = depth(256)  # additional_layer_depth 256 times the depth multiplier
    tower_depth, tower_layers = 64, 2  # weight_shared_convolutional_box_predictor's depth, layers

    class BottomUp(ExtraFPNBlock):
        """Levels 6 and 7: bottom_up_Conv2d_14, _15, 3x3 stride 2 with BatchNorm and ReLU6,
        each on the level below."""

        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList(conv_bn(fpn_depth, fpn_depth, 3, 2) for _ in range(2))

        def forward(self, results, x, names):
            for i, conv in enumerate(self.convs):
                results.append(conv(results[-1]))
                names.append(f"p{6 + i}")
            return results, names

    class MobilenetV1Fpn(nn.Module):
        """MobileNet v1 to Conv2d_13; the pyramid on Conv2d_5, _11 and _13 (levels 3 to 5), then
        levels 6 and 7."""

        def __init__(self):
            super().__init__()
            layers, depths = mobilenet_v1()
            self.stages = nn.ModuleList([nn.Sequential(*layers[:6]),  # Conv2d_0 .. Conv2d_5
                                         nn.Sequential(*layers[6:12]),  # .. Conv2d_11
                                         nn.Sequential(*layers[12:])])  # .. Conv2d_13
            self.fpn = FeaturePyramidNetwork([depths[5], depths[11], depths[13]], fpn_depth,
                                             extra_blocks=BottomUp(), norm_layer=bn)
            # As the API's fpn_top_down_feature_maps: 1x1 projections with biases and neither
            # batch norm nor activation; 3x3 smoothings with batch norm and ReLU6, none on the
            # top level.
            for i, cin in enumerate((depths[5], depths[11], depths[13])):
                self.fpn.inner_blocks[i] = Conv2dNormActivation(
                    cin, fpn_depth, 1, norm_layer=None, activation_layer=None)
                self.fpn.layer_blocks[i] = (
                    nn.Identity() if i == 2 else
                    Conv2dNormActivation(fpn_depth, fpn_depth, 3, norm_layer=bn,
                                         activation_layer=nn.ReLU6))
            self.out_channels = fpn_depth

        def forward(self, x):
            maps = OrderedDict()
            for i, stage in enumerate(self.stages):
                x = stage(x)
                maps[f"c{3 + i}"] = x
            return self.fpn(maps)

    backbone = MobilenetV1Fpn()
    # multiscale_anchor_generator: levels 3 to 7, anchor_scale 4, 2 scales per octave, aspect
    # ratios 1, 2, 1/2: 6 per location.
    sizes = tuple((4.0 * 2 ** level, 4.0 * 2 ** level * 2 ** 0.5) for level in range(3, 8))
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))
    per_location = anchors.num_anchors_per_location()[0]
    head = RetinaNetHead(fpn_depth, per_location, classes)
    # The weight-shared predictor's towers: 2 layers of 64 (torchvision's: 4 of in_channels),
    # 3x3 with batch norm and ReLU6.
    for sub in (head.classification_head, head.regression_head):
        sub.conv = nn.Sequential(*[
            Conv2dNormActivation(fpn_depth if i == 0 else tower_depth, tower_depth, 3,
                                 norm_layer=bn, activation_layer=nn.ReLU6)
            for i in range(tower_layers)])
        for layer in sub.conv.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
    if tower_depth != fpn_depth:
        head.classification_head.cls_logits = nn.Conv2d(tower_depth, per_location * classes, 3,
                                                        padding=1)
        head.regression_head.bbox_reg = nn.Conv2d(tower_depth, per_location * 4, 3, padding=1)
    head.regression_head._loss_type = "smooth_l1"  # weighted_smooth_l1, delta 1
    head.regression_head.box_coder = BoxCoder((10.0, 10.0, 5.0, 5.0))
    num_anchors = count_anchors(backbone, [per_location] * 5)
    model = RetinaNet(backbone, classes, min_size=size, max_size=size, image_mean=[0.5] * 3,
                      image_std=[0.5] * 3, anchor_generator=anchors, head=head,
                      score_thresh=1e-8, nms_thresh=0.6, detections_per_img=100,
                      fg_iou_thresh=0.5, bg_iou_thresh=0.5,
                      topk_candidates=args.topk_candidates or num_anchors * classes)
    model.box_coder = head.regression_head.box_coder
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
    decayed = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    ids = {id(p) for p in decayed}
    groups = [{"params": decayed, "weight_decay": 4e-5},
              {"params": [p for p in model.parameters() if id(p) not in ids]}]
    if args.optimizer == "rmsprop":
        optimizer = torch.optim.RMSprop(groups, lr=args.learning_rate, alpha=0.9, eps=1.0,
                                        momentum=0.9)
    elif args.optimizer == "adam":  # tf.train.AdamOptimizer's defaults: 0.9, 0.999, 1e-8
        optimizer = torch.optim.Adam(groups, lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-8)
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
        "framework": "torchvision", "workload": args.model, "threads": args.threads,
        "batch_size": args.batch, "image_size": s, "num_classes": args.num_classes,
        "steps": args.steps, "memory_format": args.memory_format,
        "head_kernel": args.head_kernel if args.model == "ssd_mobilenet_v1" else None,
        "topk_candidates": args.topk_candidates or num_anchors, "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "train": train, "infer": infer, "num_anchors": num_anchors,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__}}),
        flush=True)


if __name__ == "__main__":
    main()
