#!/usr/bin/env python3
"""Golden YouTube-8M metrics, computed by the starter code's own Python metric code.

Runs the ORIGINAL eval_util.py, average_precision_calculator.py and
mean_average_precision_calculator.py of google/youtube-8m on deterministic pseudo-random
continuous scores (no two scores anywhere in the file are equal) at 3,862 classes and top_k 20,
and writes the inputs and the values the original computed to metrics_original.txt beside this
script. tests/unit/metrics_test.cc ("...MatchesTheOriginalOnContinuousScores") rebuilds the
same float32 matrices and checks Trainyard's metrics (trainyard/core/metrics.h) against them.

The originals are not copied into the repository: they are extracted from a local git mirror
of google/youtube-8m into a temporary directory at run time and imported from there. eval_util
imports `from tensorflow.python.platform import gfile`, which none of the code used here
touches; that one import is stubbed with empty modules, so only numpy is needed.

Inputs. Three batches (50, 120 and 200 videos) of 1 to 6 labels each. Every score of a batch is
a float32 k / 2**24 for an integer k < 2**24, so it is exact in float32 and in decimal:
  * background: every (video, class) gets k = mix23(g), g the position of the entry in the
    concatenation of all batches (row-major), and mix23 a bijection of [0, 2**23) (see
    `background_code`; the C++ test has the same function). These scores lie in [0, 0.5)
    and are all different.
  * overrides: each positive is raised with probability 3/4, and 0 to 8 negatives per video
    are raised too, to scores in [0.5, 1) drawn without replacement; they are written out.
So no two scores are equal, within a video or across batches, and no result depends on how
ties are broken (numpy.argpartition's order among equal scores, which differs between numpy
versions). A positive that is not raised usually falls outside its video's top 20, so GAP's
N includes positives that are never ranked.

Expected values: per batch, calculate_hit_at_one, calculate_precision_at_equal_recall_rate and
calculate_gap(top_k=20); and EvaluationMetrics(3862, 20, None) (as eval.py builds it) fed the
three batches in order, each with one scalar loss as eval.py passes it: the dicts accumulate()
returned, then get()'s avg_hit_at_one, avg_perr, avg_loss, gap, aps (with the class of each,
the classes whose calculator counted a positive) and numpy.mean(aps) (utils.AddEpochSummary's
mean_ap).

Command (in a virtual environment outside the repository):

    python3 -m venv /work/venv-metrics
    /work/venv-metrics/bin/pip install numpy==1.26.4
    /work/venv-metrics/bin/python tests/golden/make_metrics_golden.py \
        [--mirror /work/.mirror/google+youtube-8m/repo] [--rev HEAD]

Generated with Python 3.11.7, numpy 1.26.4, google/youtube-8m at
e6f6bf682d20bb21904ea9c081c15e070809d914. The inputs come from Python's random.Random, so they
do not depend on the numpy version; the expected values do, slightly: under numpy 2's
promotion rules (NEP 50) `0.0 + numpy.float32` stays float32, so PERR and every AP are summed in
float32 there, while numpy 1.26 sums them in float64 as Trainyard does.
"""

import argparse
import fractions
import math
import os
import random
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "metrics_original.txt")
DEFAULT_MIRROR = "/work/.mirror/google+youtube-8m/repo"
ORIGINALS = ("eval_util.py", "average_precision_calculator.py",
             "mean_average_precision_calculator.py")

NUM_CLASSES = 3862
TOP_K = 20
BATCH_SIZES = (50, 120, 200)
SEED = 8  # random.Random seed for the inputs
SCALE = 2**24  # every score is k / SCALE


def background_code(g):
    """A bijection of [0, 2**23): odd multiplies and xor-shifts modulo 2**23."""
    mask = (1 << 23) - 1
    x = (g * 0x5BD1E995 + 0x1B873593) & mask
    x ^= x >> 11
    x = (x * 0x27D4EB2F) & mask
    x ^= x >> 13
    return x


def background_codes(first, count):
    """background_code of first, first + 1, ..., vectorized (uint64, no overflow below 2**23)."""
    mask = np.uint64((1 << 23) - 1)
    x = np.arange(first, first + count, dtype=np.uint64)
    x = (x * np.uint64(0x5BD1E995) + np.uint64(0x1B873593)) & mask
    x ^= x >> np.uint64(11)
    x = (x * np.uint64(0x27D4EB2F)) & mask
    x ^= x >> np.uint64(13)
    return x


def checksum(predictions):
    """sum over the row-major entries j of float32_bits(p[j]) * (j + 1), modulo 2**64."""
    bits = predictions.reshape(-1).view(np.uint32).astype(np.uint64)
    weights = np.arange(1, bits.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int((bits * weights).sum(dtype=np.uint64))


def float32_text(value):
    """The shortest decimal that any correctly rounding parser (strtof) reads back as value."""
    value = np.float32(value)
    text = np.format_float_positional(value, unique=True, trim="-")
    # Exact check, independent of how numpy parses: the decimal lies strictly within half a
    # float32 ulp of the value.
    ulp = fractions.Fraction(float(np.spacing(value)))
    if not abs(fractions.Fraction(text) - fractions.Fraction(float(value))) < ulp / 2:
        raise AssertionError(f"{text} does not round to {value!r}")
    return text


def double_text(value):
    value = float(value)
    if not math.isfinite(value):
        raise AssertionError(f"non-finite expected value {value}")
    return repr(value)


def import_originals(mirror, rev, directory):
    """Writes the originals at `rev` into directory and imports them (gfile stubbed)."""
    commit = subprocess.run(["git", "-C", mirror, "rev-parse", rev], check=True,
                            capture_output=True, text=True).stdout.strip()
    for name in ORIGINALS:
        source = subprocess.run(["git", "-C", mirror, "show", f"{commit}:{name}"], check=True,
                                capture_output=True).stdout
        with open(os.path.join(directory, name), "wb") as f:
            f.write(source)
    # eval_util's only TensorFlow import; nothing used here calls gfile.
    for name in ("tensorflow", "tensorflow.python", "tensorflow.python.platform",
                 "tensorflow.python.platform.gfile"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["tensorflow.python.platform"].gfile = sys.modules[
        "tensorflow.python.platform.gfile"]
    sys.path.insert(0, directory)
    import eval_util  # noqa: E402  pylint: disable=import-outside-toplevel
    return eval_util, commit


def make_batches():
    """The inputs: per batch its videos' labels and raised scores, and the dense matrices."""
    rng = random.Random(SEED)
    num_videos = sum(BATCH_SIZES)
    if num_videos * NUM_CLASSES > 1 << 23:
        raise AssertionError("background_code is a bijection of [0, 2**23) only")
    # Scores in [0.5, 1): codes drawn without replacement, handed out in order.
    raised_codes = iter(rng.sample(range(SCALE // 2, SCALE), 14 * num_videos))
    batches = []
    first = 0
    for batch_index, batch_size in enumerate(BATCH_SIZES):
        codes = background_codes(first, batch_size * NUM_CLASSES).reshape(batch_size,
                                                                           NUM_CLASSES)
        labels = np.zeros((batch_size, NUM_CLASSES), dtype=np.float32)
        videos = []
        for v in range(batch_size):
            positives = sorted(rng.sample(range(NUM_CLASSES), rng.randint(1, 6)))
            negatives = [c for c in range(NUM_CLASSES) if c not in positives]
            raised = [c for c in positives if rng.random() < 0.75]
            raised += rng.sample(negatives, rng.randint(0, 8))
            overrides = []
            for c in sorted(raised):
                codes[v, c] = next(raised_codes)
                overrides.append(c)
            labels[v, positives] = 1.0
            videos.append((positives, overrides))
        predictions = (codes.astype(np.float64) / SCALE).astype(np.float32)
        if not np.array_equal(predictions.astype(np.float64) * SCALE, codes.astype(np.float64)):
            raise AssertionError("a score is not exact in float32")
        loss = round(rng.uniform(2.0, 12.0), 6)
        batches.append({"index": batch_index, "predictions": predictions, "labels": labels,
                        "videos": videos, "loss": loss, "checksum": checksum(predictions)})
        first += batch_size * NUM_CLASSES
    everything = np.concatenate([b["predictions"].reshape(-1) for b in batches])
    if np.unique(everything).size != everything.size:
        raise AssertionError("two scores are equal")
    return batches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=DEFAULT_MIRROR,
                        help="git directory of a google/youtube-8m mirror")
    parser.add_argument("--rev", default="HEAD", help="revision of the originals")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="yt8m-originals-") as directory:
        eval_util, commit = import_originals(args.mirror, args.rev, directory)
        batches = make_batches()

        for batch in batches:
            p, l = batch["predictions"], batch["labels"]
            batch["expect_batch"] = (
                eval_util.calculate_hit_at_one(p, l),
                eval_util.calculate_precision_at_equal_recall_rate(p, l),
                eval_util.calculate_gap(p, l, top_k=TOP_K))

        metrics = eval_util.EvaluationMetrics(NUM_CLASSES, TOP_K, None)
        for batch in batches:
            info = metrics.accumulate(batch["predictions"], batch["labels"], batch["loss"])
            batch["expect_accumulate"] = (info["hit_at_one"], info["perr"], info["loss"])
        epoch = metrics.get()
        ap_classes = [c for c, calculator in enumerate(metrics.map_calculator._ap_calculators)
                      if calculator.num_accumulated_positives > 0]
        aps = epoch["aps"]
        if len(aps) != len(ap_classes):
            raise AssertionError("aps and the classes with positives differ in number")
        mean_ap = np.mean(aps)

    lines = [
        "# YouTube-8M metrics computed by the original Python code; do not edit.",
        "# Written by tests/golden/make_metrics_golden.py (its docstring describes the inputs);",
        "# read by tests/unit/metrics_test.cc.",
        f"# Python {sys.version.split()[0]}, numpy {np.__version__}, google/youtube-8m {commit}.",
        "#",
        "# batch <index> videos <n> loss <loss> checksum <sum of float32 bits * (j + 1) mod 2^64>",
        "# video <v> labels <n> <class>... raised <m> (<class> <score>)...",
        "#   every other score of the video is background_code(g) / 2^24, g the entry's position",
        "#   in all batches concatenated (row-major)",
        "# expect_batch: calculate_hit_at_one, calculate_precision_at_equal_recall_rate,",
        "#   calculate_gap(top_k) of the batch alone",
        "# expect_accumulate: what EvaluationMetrics.accumulate returned for the batch",
        "# expect_epoch: EvaluationMetrics.get() after all batches; mean_ap = numpy.mean(aps)",
        "# ap <class> <value>: get()'s aps, one per class that has a positive",
        "format trainyard-metrics-golden 1",
        f"numpy {np.__version__}",
        f"youtube8m_commit {commit}",
        f"num_classes {NUM_CLASSES}",
        f"top_k {TOP_K}",
        f"batches {len(batches)}",
    ]
    for batch in batches:
        p = batch["predictions"]
        lines.append(f"batch {batch['index']} videos {p.shape[0]} loss "
                     f"{double_text(batch['loss'])} checksum {batch['checksum']}")
        for v, (positives, raised) in enumerate(batch["videos"]):
            fields = [f"video {v} labels {len(positives)}"]
            fields += [str(c) for c in positives]
            fields.append(f"raised {len(raised)}")
            fields += [f"{c} {float32_text(p[v, c])}" for c in raised]
            lines.append(" ".join(fields))
        hit, perr, gap = batch["expect_batch"]
        lines.append(f"expect_batch hit_at_one {double_text(hit)} perr {double_text(perr)} "
                     f"gap {double_text(gap)}")
        hit, perr, loss = batch["expect_accumulate"]
        lines.append(f"expect_accumulate hit_at_one {double_text(hit)} perr "
                     f"{double_text(perr)} loss {double_text(loss)}")
    lines.append(f"expect_epoch avg_hit_at_one {double_text(epoch['avg_hit_at_one'])} "
                 f"avg_perr {double_text(epoch['avg_perr'])} "
                 f"avg_loss {double_text(epoch['avg_loss'])} gap {double_text(epoch['gap'])} "
                 f"mean_ap {double_text(mean_ap)} aps {len(aps)}")
    lines += [f"ap {c} {double_text(ap)}" for c, ap in zip(ap_classes, aps)]
    lines.append("end")
    with open(OUT, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes): {sum(BATCH_SIZES)} videos, "
          f"{len(aps)} classes with positives, GAP {float(epoch['gap']):.6f}, "
          f"mAP {float(mean_ap):.6f}")


if __name__ == "__main__":
    main()
