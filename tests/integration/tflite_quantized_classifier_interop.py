"""TF-Slim's quantization-aware training of a classifier (train_image_classifier.py's
--quantize_delay, the model option quantize_delay) exports to TensorFlow Lite as TensorFlow's
converter writes it, float with FAKE_QUANT and uint8.

Sixty 28 x 28 grayscale PNGs of ten classes (stripes of a class's own period, with noise) are
converted with `trainyard data convert-images`; configs/fashion_mnist_lenet.config on them, with
quantize_delay 0, batch 8 and 20 steps, trains LeNet with fake quantization, and the same config
with mobilenet_v1 (depth multiplier 0.25: its batch norms folded, depthwise convolutions, ReLU6,
the average pool and the 1x1 logits squeezed). Then, for each:
  1. `trainyard export --format tflite` writes the float model with each activation's fake
     quantization as FAKE_QUANT (LeNet's conv1, conv2, fc3 and the logits fc4: 4; MobileNet
     v1's 27 layers and its logits: 28), and TF 2.21's
     interpreter gives `trainyard predict`'s probabilities within 1e-4 (predict quantizes with
     the learned ranges too);
  2. with --inference_type QUANTIZED_UINT8 (input: the image's own pixels, LeNet's (x - 128) /
     128 as the default --mean_values 128 --std_values 128), every FAKE_QUANT's range must be
     the uint8 tensor's parameters as TOCO's ChooseQuantizationParams gives them, the softmax
     output scale 1/256;
  3. each integer operator's output must be its float operation (TF ops) on its dequantized
     inputs within one step, and the dequantized weights the float model's (on their grid);
  4. TensorFlow's converter, given the fake-quantized TF graph of the float export with
     inference_type uint8, must write the same operators (output parameters, filter and bias
     bytes and scales), and both files' probabilities must be equal bit for bit.
Prints the largest differences.

    python tflite_quantized_classifier_interop.py --trainyard BIN --configs SOURCE/configs \
        --work_dir D
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from tflite_quantized_common import (constants_checked, fake_quant_ranges,  # noqa: E402
                                     per_operator_steps, rewritten, signatures, tf_converted,
                                     toco_params)

TOLERANCE = 1e-4
CLASSES = 10
PER_CLASS = 6
# ResNet-20: conv1, per unit conv1 and the unit's relu, and conv2's conv_quant (identity
# shortcut) or the shortcut's conv_quant and conv2's act_quant (the two projection units), the
# logits: 1 + 9 * 3 + 2 + 1.
RESNET_20_FAKE_QUANTS = 1 + 9 * 3 + 2 + 1
# (name, the config's model, its FAKE_QUANT count: LeNet's conv1, conv2, fc3, fc4; MobileNet
# v1's 27 layers and its logits)
CASES = [("lenet", 'model { class: "lenet" params { key: "quantize_delay" int_value: 0 } }', 4),
         ("mobilenet_v1", 'model { class: "mobilenet_v1" '
          'params { key: "quantize_delay" int_value: 0 } '
          'params { key: "depth_multiplier" float_value: 0.25 } }', 28),
         ("resnet_20", 'model { class: "resnet_20" params { key: "quantize_delay" int_value: 0 } }',
          RESNET_20_FAKE_QUANTS)]
LIMITS = {"1.": TOLERANCE, "3. w": 1e-3, "3. b": 0.5 + 1e-3, "3. e": 1.0, "4.": 1.0}


def fail(message):
    sys.exit(f"FAILED: {message}")


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def images_written(image_dir):
    """The PNGs by class, and all images [N, 28, 28, 1] uint8 in a fixed order."""
    rng = np.random.default_rng(7)
    images = []
    for c in range(CLASSES):
        os.makedirs(os.path.join(image_dir, f"class_{c}"))
        for k in range(PER_CLASS):
            rows = np.arange(28)[:, None] + np.zeros((1, 28))
            stripes = 127 + 120 * np.sin(2 * np.pi * rows / (2 + c) + k)
            image = np.clip(stripes + rng.normal(0, 30, (28, 28)), 0, 255).astype(np.uint8)
            image = image[:, :, None]
            tf.io.write_file(os.path.join(image_dir, f"class_{c}", f"{k}.png"),
                             tf.io.encode_png(image))
            images.append(image)
    return np.stack(images)


def configured(source, path, data_prefix, train_dir, model):
    """The LeNet config on the converted images, with `model`, batch 8 and 20 steps."""
    rewritten(source, path, [
        (r'model \{ class: "lenet" \}', model),
        (r'train_dir: "[^"]*"', f'train_dir: "{train_dir}"'),
        (r"batch_size: 64", "batch_size: 8"),
        (r"max_steps: 9400", "max_steps: 20"),
        (r'data_pattern: "/tmp/fashion_mnist/train.tfrecord"',
         f'data_pattern: "{data_prefix}_train_*.tfrecord"'),
        (r'data_pattern: "/tmp/fashion_mnist/test.tfrecord"',
         f'data_pattern: "{data_prefix}_validation_*.tfrecord"')])


def interpreter(path):
    it = tf.lite.Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    return it


def invoked(it, image):
    it.set_tensor(it.get_input_details()[0]["index"], image)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def predicted(args, train_dir, prefix):
    """`trainyard predict`'s probabilities of every image (both splits), by image id
    ("class_C/K.png")."""
    csv = os.path.join(args.work_dir, "predictions.csv")
    run([args.trainyard, "predict", "--train_dir", train_dir, "--input_data_pattern",
         prefix + "_*.tfrecord", "--output_file", csv, "--top_k", str(CLASSES)])
    rows = {}
    with open(csv) as f:
        next(f)
        for line in f:
            image_id, pairs = line.strip().split(",", 1)
            values = pairs.split()
            probabilities = np.zeros(CLASSES)
            for label, p in zip(values[0::2], values[1::2]):
                probabilities[int(label)] = float(p)
            rows[image_id] = probabilities
    return rows


def checked(args, name, model, fake_quants, images, prefix):
    """Steps 1-4 for one classifier: its figures and its number of operators."""
    work = os.path.join(args.work_dir, name)
    train_dir = os.path.join(work, "train")
    config = os.path.join(work, "pipeline.config")
    os.makedirs(work)
    configured(os.path.join(args.configs, "fashion_mnist_lenet.config"), config, prefix,
               train_dir, model)
    run([args.trainyard, "train", "--pipeline_config_path", config])
    paths = {}
    for kind, flags in (("float", []), ("uint8", ["--inference_type", "QUANTIZED_UINT8"])):
        paths[kind] = os.path.join(work, f"{name}_{kind}.tflite")
        print(run([args.trainyard, "export", "--train_dir", train_dir, "--format", "tflite",
                   "--output", paths[kind], *flags]).strip())
    float_model, quantized = interpreter(paths["float"]), interpreter(paths["uint8"])
    figures = {}

    # 1. The float model with FAKE_QUANT against trainyard predict.
    ranges = fake_quant_ranges(paths["float"])
    if len(ranges) != fake_quants:
        fail(f"{paths['float']}: {len(ranges)} FAKE_QUANT, expected {fake_quants}")
    rows = predicted(args, train_dir, prefix)
    keys = [f"class_{c}/{k}.png" for c in range(CLASSES) for k in range(PER_CLASS)]
    if sorted(rows) != sorted(keys):
        fail(f"{name}: predict gave the images {sorted(rows)[:5]}...")
    expected = np.stack([rows[k] for k in keys])
    normalized = (images.astype(np.float32) - 128.0) / 128.0
    got = np.concatenate([invoked(float_model, normalized[i:i + 1]) for i in range(len(images))])
    # predict's CSV holds 6 significant digits
    figures["1. float (FAKE_QUANT) vs trainyard predict"] = float(np.max(np.abs(got - expected)))

    # 2. The parameters of the learned ranges.
    details = {d["name"]: d for d in quantized.get_tensor_details()}
    (input_detail,) = quantized.get_input_details()
    (output_detail,) = quantized.get_output_details()
    if input_detail["dtype"] != np.uint8 or input_detail["quantization"] != (1 / 128, 128):
        fail(f"{paths['uint8']}: input {input_detail}")
    if output_detail["dtype"] != np.uint8 or output_detail["quantization"] != (1 / 256, 0):
        fail(f"{paths['uint8']}: output {output_detail}")
    for tensor, (low, high) in ranges.items():
        want = toco_params(low, high)
        if details[tensor]["quantization"] != (float(want[0]), want[1]):
            fail(f"{name}: {tensor}: {details[tensor]['quantization']}, expected {want} of "
                 f"[{low}, {high}]")

    # 3 and 4. Each operator, the weights, TF's converter.
    converted = tf.lite.Interpreter(model_content=tf_converted(paths["float"], paths["uint8"]),
                                    experimental_preserve_all_tensors=True)
    converted.allocate_tensors()
    (mine, left_out), (theirs, tf_left_out) = signatures(quantized), signatures(converted)
    if mine != theirs:
        fail(f"{name}: {len(mine)} operators, TF's converter {len(theirs)}: "
             f"{[(a[:3], b[:3]) for a, b in zip(mine, theirs) if a != b][:3]}")
    invoked(float_model, normalized[:1])
    weights, others = constants_checked(name, paths["uint8"], quantized, float_model)
    figures["3. weights vs the float model's (steps)"] = weights
    figures["3. biases vs the float model's (steps)"] = others
    steps = apart = 0.0
    for i in range(len(images)):
        ours = invoked(quantized, images[i:i + 1]).astype(np.int32)
        steps = max(steps, per_operator_steps(paths["uint8"], quantized,
                                              quantized.get_tensor_details()))
        apart = max(apart, float(np.max(np.abs(ours - invoked(converted, images[i:i + 1])))))
    figures["3. each uint8 operator vs its float op (steps)"] = steps
    if left_out or tf_left_out:
        # TF's float mean and what follows it until a range: the same values up to rounding
        figures[f"4. TF's converter: outputs (steps; operators equal but {left_out} of ours, "
                f"{tf_left_out} of TF's around a MEAN)"] = apart
    else:
        figures["4. TF's converter: operators equal, outputs bit for bit (steps)"] = apart
        if apart != 0:
            fail(f"{name}: the probabilities differ from TF's converted model's")
    return figures, len(mine)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainyard", required=True)
    parser.add_argument("--configs", required=True)
    parser.add_argument("--work_dir", required=True)
    args = parser.parse_args()
    print(f"tensorflow {tf.__version__}")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    image_dir = os.path.join(args.work_dir, "images")
    images = images_written(image_dir)
    prefix = os.path.join(args.work_dir, "data", "shapes")
    run([args.trainyard, "data", "convert-images", "--image_dir", image_dir, "--output", prefix,
         "--num_shards", "1"])
    results = {}
    for name, model, fake_quants in CASES:
        results[name] = checked(args, name, model, fake_quants, images, prefix)
    for name, (figures, operators) in results.items():
        print(f"{name} ({operators} operators):")
        for figure, value in figures.items():
            print(f"  {figure}: {value:.3g}")
    for name, (figures, _) in results.items():
        for figure, value in figures.items():
            limit = next(v for k, v in LIMITS.items() if figure.startswith(k))
            if value > limit:
                fail(f"{name}: {figure}: {value} > {limit}")
    print(f"LeNet, MobileNet v1 and ResNet-20 trained with quantize_delay export to TFLite as "
          f"TF's converter writes them ({len(images)} images)")


if __name__ == "__main__":
    main()
