"""What the TFLite interop tests of quantized exports share: TOCO's parameter choice, reading a
model with TFLite's own schema code, each uint8 operator's float reference (TF ops), and the
model TensorFlow's converter writes from the fake-quantized TF graph of a float export (the
operators of Trainyard's SSD and classifier exports: CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, ADD, pools, MEAN, PAD, RESHAPE, CONCATENATION, LOGISTIC, SOFTMAX, FAKE_QUANT)."""
import re
import sys

import numpy as np
import tensorflow as tf


def fail(message):
    sys.exit(f"FAILED: {message}")


def rewritten(source, path, replacements):
    """The config `source` written to `path` with each (pattern, value) of `replacements`
    replaced; a pattern that does not match exactly once fails the test, naming it."""
    with open(source) as f:
        text = f.read()
    for pattern, value in replacements:
        text, n = re.subn(pattern, value, text)
        if n != 1:
            fail(f"{source} has no single '{pattern}' to change")
    with open(path, "w") as f:
        f.write(text)


def toco_params(low, high, narrow=False):
    """TOCO's ChooseQuantizationParams for uint8: (scale, zero point) of the range [low, high]."""
    qmin, qmax = (1.0 if narrow else 0.0), 255.0
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / (qmax - qmin)
    from_min, from_max = qmin - low / scale, qmax - high / scale
    nearer = from_min if abs(qmin) + abs(low / scale) < abs(qmax) + abs(high / scale) else from_max
    return np.float32(scale), int(np.floor(min(max(nearer, qmin), qmax) + 0.5))


def flatbuffer(path):
    """The model at `path` as TFLite's own schema code reads it (its object API)."""
    from tensorflow.lite.python import schema_py_generated as schema
    with open(path, "rb") as f:
        return schema, schema.ModelT.InitFromObj(schema.Model.GetRootAs(f.read(), 0))


def fake_quant_ranges(path):
    """{name of a FAKE_QUANT's input tensor: (min, max)} of the float model at `path`."""
    schema, model = flatbuffer(path)
    graph = model.subgraphs[0]
    ranges = {}
    for op in graph.operators:
        if model.operatorCodes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.FAKE_QUANT:
            name = graph.tensors[op.inputs[0]].name.decode()
            ranges[name] = (op.builtinOptions.min, op.builtinOptions.max)
    return ranges


def activated(y, function):
    """A fused activation (TFLite's ActivationFunctionType: 0 none, 1 relu, 3 relu6)."""
    return {0: y, 1: tf.nn.relu(y), 3: tf.nn.relu6(y)}[function]


def op_reference(schema, op, code, value):
    """The float result of one operator of the uint8 model on its dequantized inputs (TF ops):
    `value(index)` dequantizes a tensor of the run."""
    options = op.builtinOptions
    x = tf.constant(value(op.inputs[0]), tf.float32)
    padding = "SAME" if getattr(options, "padding", 0) == schema.Padding.SAME else "VALID"
    if code == schema.BuiltinOperator.CONV_2D:
        w = np.transpose(value(op.inputs[1]), (1, 2, 3, 0))  # OHWI -> HWIO
        y = tf.nn.conv2d(x, w, [1, options.strideH, options.strideW, 1], padding,
                         dilations=[1, options.dilationHFactor, options.dilationWFactor, 1])
        return activated(y + value(op.inputs[2]), options.fusedActivationFunction)
    if code == schema.BuiltinOperator.DEPTHWISE_CONV_2D:
        w = value(op.inputs[1])[0]  # [KH, KW, C * M] -> [KH, KW, C, M]
        w = w.reshape(w.shape[0], w.shape[1], x.shape[3], options.depthMultiplier)
        y = tf.nn.depthwise_conv2d(x, w, [1, options.strideH, options.strideW, 1], padding,
                                   dilations=[options.dilationHFactor, options.dilationWFactor])
        return activated(y + value(op.inputs[2]), options.fusedActivationFunction)
    if code == schema.BuiltinOperator.CONCATENATION:
        return tf.concat([value(i) for i in op.inputs], options.axis)
    if code == schema.BuiltinOperator.RESHAPE:
        return tf.reshape(x, value(op.inputs[1]))
    if code == schema.BuiltinOperator.LOGISTIC:
        return tf.sigmoid(x)
    if code == schema.BuiltinOperator.SOFTMAX:
        return tf.nn.softmax(x * options.beta)
    if code == schema.BuiltinOperator.FULLY_CONNECTED:
        y = tf.matmul(x, value(op.inputs[1]).T) + value(op.inputs[2])
        return activated(y, options.fusedActivationFunction)
    if code == schema.BuiltinOperator.ADD:
        return activated(x + value(op.inputs[1]), options.fusedActivationFunction)
    if code == schema.BuiltinOperator.MEAN:
        return tf.reduce_mean(x, value(op.inputs[1]), keepdims=options.keepDims)
    if code == schema.BuiltinOperator.PAD:
        return tf.pad(x, value(op.inputs[1]))
    if code in (schema.BuiltinOperator.MAX_POOL_2D, schema.BuiltinOperator.AVERAGE_POOL_2D):
        pool = tf.nn.max_pool2d if code == schema.BuiltinOperator.MAX_POOL_2D else tf.nn.avg_pool2d
        return pool(x, [options.filterHeight, options.filterWidth],
                    [options.strideH, options.strideW], padding)
    fail(f"no reference for the uint8 operator {code}")


def per_operator_steps(path, interpreter, details):
    """Step 6a: each integer operator's output, from the run of `interpreter` (the uint8 model at
    `path`), against its float operation on the same dequantized inputs (op_reference), in the
    output's quantization steps: the weights, biases, scales, zero points and fused activations
    are what TFLite's kernels take. The largest difference over the operators."""
    schema, model = flatbuffer(path)
    graph = model.subgraphs[0]

    def value(index):
        q = interpreter.get_tensor(index)
        scale, zero_point = details[index]["quantization"]
        if details[index]["dtype"] == np.int32 and scale == 0:
            return q  # a shape
        return (scale * (q.astype(np.float64) - zero_point)).astype(np.float32)

    worst = 0.0
    for op in graph.operators:
        code = model.operatorCodes[op.opcodeIndex].builtinCode
        if code == schema.BuiltinOperator.CUSTOM:
            continue
        out = details[op.outputs[0]]
        scale, zero_point = out["quantization"]
        want = np.clip(np.round(op_reference(schema, op, code, value).numpy() / scale) +
                       zero_point, 0, 255)
        worst = max(worst, float(np.max(np.abs(want - interpreter.get_tensor(op.outputs[0])))))
    return worst


def constants_checked(label, path, quantized, reference):
    """Step 6d: the uint8 model's weights, biases and anchors, dequantized, are the float model's
    (tensors of the same names): the weights exactly (a quantization-aware-trained weight lies on
    its grid), the others within half a step. The largest differences in steps: (weights,
    others)."""
    schema, model = flatbuffer(path)
    graph = model.subgraphs[0]
    constants = {t.name.decode() for t in graph.tensors
                 if t.buffer > 0 and model.buffers[t.buffer].data is not None}
    convolutions = (schema.BuiltinOperator.CONV_2D, schema.BuiltinOperator.DEPTHWISE_CONV_2D)
    weights = {graph.tensors[op.inputs[1]].name.decode() for op in graph.operators
               if model.operatorCodes[op.opcodeIndex].builtinCode in convolutions}
    float_tensors = {d["name"]: d["index"] for d in reference.get_tensor_details()}
    worst, count = [0.0, 0.0], 0
    for detail in quantized.get_tensor_details():
        scale, zero_point = detail["quantization"]
        if detail["name"] not in constants or detail["dtype"] == np.int32 and scale == 0:
            continue  # a computed value, a shape
        want = reference.get_tensor(float_tensors[detail["name"]])
        got = quantized.get_tensor(detail["index"])
        steps = np.abs(scale * (got.astype(np.float64) - zero_point) - want) / scale
        kind = 0 if detail["name"] in weights else 1
        worst[kind] = max(worst[kind], float(np.max(steps)))
        count += 1
    if count < 2 * len(weights):
        fail(f"{label}: {count} constants compared for {len(weights)} convolutions")
    return tuple(worst)


def dequantized(detail, values):
    """scale * (q - zero_point) in f32, as TFLite_Detection_PostProcess dequantizes its inputs."""
    scale, zero_point = detail["quantization"]
    return np.float32(scale) * (values.astype(np.float32) - np.float32(zero_point))


def tf_converted(float_path, quantized_path):
    """Step 7: TensorFlow 2.21's converter (TFLiteConverter.from_session, inference_type uint8,
    quantized_input_stats (128, 128)) on the fake-quantized TF graph of the float model at
    `float_path` (its operators as TF ops, each FAKE_QUANT as fake_quant_with_min_max_args with
    its range, each filter under a narrow-range fake quantization with the range (min, max) of its
    uint8 encoding in the model at `quantized_path`, which step 6d ties to the float weights):
    the flatbuffer."""
    schema, model = flatbuffer(float_path)
    _, ours = flatbuffer(quantized_path)
    graph, codes = model.subgraphs[0], schema.BuiltinOperator
    encodings = {t.name.decode(): t.quantization for t in ours.subgraphs[0].tensors}

    def constant(index):
        t = graph.tensors[index]
        dtype = {schema.TensorType.FLOAT32: np.float32, schema.TensorType.INT32: np.int32}[t.type]
        return np.frombuffer(bytes(bytearray(model.buffers[t.buffer].data)), dtype).reshape(
            t.shape)

    def filter_quantized(index, hwio):
        q = encodings[graph.tensors[index].name.decode()]
        return tf.quantization.fake_quant_with_min_max_args(
            tf.constant(hwio), float(q.min[0]), float(q.max[0]), narrow_range=True)

    tf1 = tf.compat.v1
    with tf.Graph().as_default() as g:
        source = graph.tensors[graph.inputs[0]]
        x = tf1.placeholder(tf.float32, list(source.shape), name=source.name.decode())
        values = {graph.inputs[0]: x}
        for op in graph.operators:
            code, o = model.operatorCodes[op.opcodeIndex].builtinCode, op.builtinOptions
            inputs = [values.get(i) for i in op.inputs]
            if code in (codes.CONV_2D, codes.DEPTHWISE_CONV_2D):
                padding = "SAME" if o.padding == schema.Padding.SAME else "VALID"
                strides = [1, o.strideH, o.strideW, 1]
                if code == codes.CONV_2D:
                    w = filter_quantized(op.inputs[1], constant(op.inputs[1]).transpose(1, 2, 3, 0))
                    y = tf.nn.conv2d(inputs[0], w, strides, padding)
                else:
                    w = constant(op.inputs[1])[0]
                    w = w.reshape(w.shape[0], w.shape[1], inputs[0].shape[3], o.depthMultiplier)
                    y = tf.nn.depthwise_conv2d(inputs[0], filter_quantized(op.inputs[1], w),
                                               strides, padding)
                y = activated(y + constant(op.inputs[2]), o.fusedActivationFunction)
            elif code == codes.FAKE_QUANT:
                y = tf.quantization.fake_quant_with_min_max_args(inputs[0], o.min, o.max)
            elif code == codes.RESHAPE:
                y = tf.reshape(inputs[0], constant(op.inputs[1]))
            elif code == codes.CONCATENATION:
                y = tf.concat(inputs, o.axis)
            elif code == codes.LOGISTIC:
                y = tf.sigmoid(inputs[0])
            elif code == codes.SOFTMAX:
                y = tf.nn.softmax(inputs[0] * o.beta)
            elif code == codes.FULLY_CONNECTED:
                w = filter_quantized(op.inputs[1], constant(op.inputs[1]).T.copy())
                y = activated(tf.matmul(inputs[0], w) + constant(op.inputs[2]),
                              o.fusedActivationFunction)
            elif code == codes.ADD:
                y = activated(tf.add(inputs[0], inputs[1]), o.fusedActivationFunction)
            elif code == codes.MEAN:
                y = tf.reduce_mean(inputs[0], constant(op.inputs[1]), keepdims=o.keepDims)
            elif code == codes.PAD:
                y = tf.pad(inputs[0], constant(op.inputs[1]))
            elif code in (codes.MAX_POOL_2D, codes.AVERAGE_POOL_2D):
                pool = tf.nn.max_pool2d if code == codes.MAX_POOL_2D else tf.nn.avg_pool2d
                y = pool(inputs[0], [o.filterHeight, o.filterWidth], [o.strideH, o.strideW],
                         "SAME" if o.padding == schema.Padding.SAME else "VALID")
            else:
                fail(f"{float_path}: no TF form for operator {code} in the test")
            values[op.outputs[0]] = y
        outputs = [tf.identity(values[i], name=graph.tensors[i].name.decode())
                   for i in graph.outputs]
        with tf1.Session(graph=g) as session:
            converter = tf1.lite.TFLiteConverter.from_session(session, [x], outputs)
            converter.inference_type = tf.uint8
            converter.quantized_input_stats = {source.name.decode(): (128.0, 128.0)}
            return converter.convert()


def signatures(interpreter):
    """Each operator as (name, output shape, output scale and zero point, and for a convolution
    its filter's and bias's encodings and bytes), sorted: the model up to tensor names and
    operator order. Left out, with their number: a MEAN and the operator that reads its output,
    and what reads or writes a float value: TF's converter keeps a mean whose output has no range,
    and the operator after it, in float between DEQUANTIZE and QUANTIZE, where Trainyard writes a
    uint8 MEAN with its input's parameters."""
    details = interpreter.get_tensor_details()
    rows, skipped, unranged = [], 0, set()
    for op in interpreter._get_ops_details():
        if op["op_name"] == "DELEGATE":
            continue
        out = details[op["outputs"][0]]
        if op["op_name"] in ("MEAN", "DEQUANTIZE") or out["dtype"] == np.float32:
            unranged.update(op["outputs"])
            skipped += 1
            continue
        if any(i in unranged for i in op["inputs"]):
            skipped += 1
            continue
        row = [op["op_name"], tuple(out["shape"]), out["quantization"]]
        if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            for i in op["inputs"][1:3]:
                row += [details[i]["quantization"], interpreter.get_tensor(i).tobytes()]
        rows.append(tuple(row))
    return sorted(rows, key=repr), skipped
