"""Small ONNX models covering every op `tirc import` supports, built with the `onnx` helper
API: odd shapes, broadcasting, groups, padding, the opset-dependent forms, the PyTorch shape
subgraph, and the patterns the import-time cleanup rewrites (activation fusion, BN folding).

    python make_models.py OUT_DIR     # writes OUT_DIR/<name>.onnx, prints the names

Used by conformance.py; weights are seeded, so every run builds the same models.
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)
F = TensorProto.FLOAT


def w(name, *shape, scale=0.5):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def pos(name, *shape):
    """Positive values (variances)."""
    return numpy_helper.from_array(RNG.uniform(0.5, 2.0, shape).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def inp(name, *shape):
    return helper.make_tensor_value_info(name, F, list(shape))


def out(name):
    return helper.make_empty_tensor_value_info(name)


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    # An output is a name, or (name, shape) where shape inference cannot tell the shape.
    outs = [out(o) if isinstance(o, str) else helper.make_tensor_value_info(o[0], F, o[1]) for o in outputs]
    g = helper.make_graph(nodes, name, inputs, outs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tir-bench")
    m.ir_version = 8
    # Give the outputs the types shape inference finds (the checker wants typed outputs).
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in m.graph.output:
        if not o.type.HasField("tensor_type"):
            o.type.CopyFrom(types[o.name])
    onnx.checker.check_model(m, full_check=True)
    return m


N = helper.make_node


def models():
    yield model(
        "conv_relu",
        [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
        [inp("x", 1, 3, 11, 9)], ["y"], [w("w", 8, 3, 3, 3), w("b", 8)],
    )
    yield model(
        "conv_groups_strides_dilations",
        [N("Conv", ["x", "w", "b"], ["y"], group=2, strides=[2, 1], dilations=[2, 1], pads=[2, 0, 1, 2])],
        [inp("x", 2, 4, 13, 10)], ["y"], [w("w", 6, 2, 3, 2), w("b", 6)],
    )
    yield model(
        "conv_depthwise_same_clip6",
        [
            N("Conv", ["x", "w"], ["c"], group=5, strides=[2, 2], auto_pad="SAME_UPPER", kernel_shape=[3, 3]),
            N("Clip", ["c", "lo", "hi"], ["y"]),
        ],
        [inp("x", 1, 5, 9, 8)], ["y"], [w("w", 5, 1, 3, 3, scale=3.0), f32("lo", 0.0), f32("hi", 6.0)],
    )
    yield model(
        "conv_bn_relu",
        [
            N("Conv", ["x", "w"], ["c"], pads=[0, 1, 0, 1]),
            N("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], epsilon=1e-3),
            N("Relu", ["n"], ["y"]),
        ],
        [inp("x", 1, 3, 7, 6)], ["y"],
        [w("w", 4, 3, 3, 3), pos("g", 4), w("be", 4), w("mu", 4), pos("var", 4)],
    )
    yield model(
        "conv_transpose_upsample_relu",
        [
            N("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
            N("Relu", ["c"], ["y"]),
        ],
        [inp("x", 1, 4, 6, 5)], ["y"], [w("w", 4, 3, 3, 3), w("b", 3)],
    )
    yield model(
        "conv_transpose_groups_dilations_same_lower",
        [N("ConvTranspose", ["x", "w"], ["y"], group=2, strides=[2, 3], dilations=[1, 2], auto_pad="SAME_LOWER")],
        [inp("x", 2, 4, 5, 4)], ["y"], [w("w", 4, 2, 3, 2)],
    )
    yield model(
        "conv_transpose_output_shape",
        [N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[3, 2], output_shape=[10, 8], kernel_shape=[3, 3])],
        [inp("x", 1, 2, 3, 3)], ["y"], [w("w", 2, 3, 3, 3), w("b", 3)],
    )
    yield model(
        "batch_norm",
        [N("BatchNormalization", ["x", "g", "be", "mu", "var"], ["y"])],
        [inp("x", 2, 3, 5)], ["y"], [pos("g", 3), w("be", 3), w("mu", 3), pos("var", 3)],
    )
    yield model(
        "gemm",
        [N("Gemm", ["a", "wt", "c"], ["y"], transB=1, alpha=0.75, beta=1.5), ],
        [inp("a", 3, 7)], ["y"], [w("wt", 5, 7), w("c", 1, 5)],
    )
    yield model(
        "gemm_trans_a_relu",
        [N("Gemm", ["a", "w", "c"], ["g"], transA=1), N("Relu", ["g"], ["y"])],
        [inp("a", 7, 3)], ["y"], [w("w", 7, 4), w("c", 4)],
    )
    yield model(
        "matmul_broadcast_sigmoid",
        [N("MatMul", ["a", "w"], ["m"]), N("Add", ["m", "b"], ["s"]), N("Sigmoid", ["s"], ["y"])],
        [inp("a", 2, 3, 4, 5)], ["y"], [w("w", 5, 6), w("b", 6)],
    )
    yield model(
        "matmul_batched",
        [N("MatMul", ["a", "b"], ["y"])],
        [inp("a", 2, 1, 3, 4), inp("b", 3, 4, 2)], ["y"],
    )
    yield model(
        "binary_broadcast",
        [
            N("Add", ["x", "k"], ["a"]),
            N("Sub", ["a", "v"], ["b"]),
            N("Mul", ["b", "half"], ["c"]),
            N("Div", ["c", "d"], ["y"]),
        ],
        [inp("x", 2, 3, 4, 5), inp("v", 5)], ["y"],
        [w("k", 3, 1, 1), f32("half", 0.5), pos("d", 1, 4, 1)],
    )
    yield model(
        "unary",
        [
            N("Relu", ["x"], ["r"]), N("Sigmoid", ["x"], ["s"]), N("Tanh", ["x"], ["t"]),
            N("Exp", ["x"], ["e"]), N("HardSwish", ["x"], ["hs"]),
            N("HardSigmoid", ["x"], ["h"], alpha=0.3, beta=0.4), N("PRelu", ["x", "slope"], ["p"]),
        ],
        [inp("x", 1, 3, 4, 7)], ["r", "s", "t", "e", "hs", "h", "p"], [w("slope", 3, 1, 1)], opset=14,
    )
    yield model("gelu", [N("Gelu", ["x"], ["y"])], [inp("x", 3, 17)], ["y"], opset=20)
    yield model(
        "gelu_erf_pattern",
        [
            N("Div", ["x", "sqrt2"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["a"]),
            N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "half"], ["y"]),
        ],
        [inp("x", 3, 17)], ["y"], [f32("sqrt2", 2 ** 0.5), f32("one", 1.0), f32("half", 0.5)],
    )
    yield model(
        "clip",
        [N("Clip", ["x", "lo", "hi"], ["a"]), N("Clip", ["x", "", "hi"], ["b"])],
        [inp("x", 4, 6)], ["a", "b"], [f32("lo", -0.3), f32("hi", 0.4)],
    )
    yield model(
        "pools",
        [
            N("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            N("MaxPool", ["x"], ["b"], kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1),
            N("AveragePool", ["x"], ["c"], kernel_shape=[3, 3], strides=[2, 1], pads=[1, 1, 1, 1], count_include_pad=1),
            N("AveragePool", ["x"], ["d"], kernel_shape=[3, 2], pads=[1, 0, 1, 1]),
            N("GlobalAveragePool", ["x"], ["e"]),
        ],
        [inp("x", 1, 3, 9, 7)], ["a", "b", "c", "d", "e"],
    )
    yield model(
        "concat_split",
        [
            N("Concat", ["x", "z"], ["c"], axis=1),
            N("Split", ["c", "sizes"], ["p", "q", "r"], axis=1),
            N("Add", ["p", "r"], ["y"]),
        ],
        [inp("x", 1, 5, 3), inp("z", 1, 2, 3)], ["y", "q"], [i64("sizes", [3, 1, 3])],
    )
    yield model(
        "split_num_outputs",
        [N("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)],
        [inp("x", 2, 8)], ["a", "b", "c"], opset=18,
    )
    yield model(
        "slice",
        [
            N("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
            N("Slice", ["x", "st1", "en1"], ["b"]),
        ],
        [inp("x", 3, 10, 6)], ["a", "b"],
        [i64("st", [1, -1]), i64("en", [9, -100]), i64("ax", [1, 2]), i64("sp", [3, -2]),
         i64("st1", [1]), i64("en1", [2**62])],
    )
    yield model(
        "views",
        [
            N("Reshape", ["x", "shape"], ["r"]),
            N("Flatten", ["x"], ["f"], axis=2),
            N("Squeeze", ["x", "sq"], ["s"]),
            N("Unsqueeze", ["x", "uq"], ["u"]),
            N("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        ],
        [inp("x", 2, 3, 1, 5)], ["r", "f", "s", "u", "t"],
        [i64("shape", [0, -1, 5]), i64("sq", [2]), i64("uq", [0, -1])],
    )
    yield model(
        "softmax",
        [N("Softmax", ["x"], ["a"]), N("Softmax", ["x"], ["b"], axis=1)],
        [inp("x", 2, 3, 5)], ["a", "b"],
    )
    yield model(
        "softmax_opset11_coerced",
        [N("Softmax", ["x"], ["y"], axis=1)],
        [inp("x", 2, 3, 5)], ["y"], opset=11,
    )
    yield model(
        "pad",
        [
            N("Pad", ["x", "pads", "v"], ["a"]),
            N("Pad", ["x", "p2"], ["b"], mode="reflect"),
            N("Pad", ["x", "pads"], ["c"], mode="edge"),
        ],
        [inp("x", 1, 2, 4, 5)], ["a", "b", "c"],
        [i64("pads", [0, 0, 1, 2, 0, 1, 3, 0]), f32("v", 0.7), i64("p2", [0, 0, 2, 1, 0, 0, 3, 4])],
    )
    yield model(
        "layer_norm_reduce_mean",
        [
            N("LayerNormalization", ["x", "g", "b"], ["a"], axis=-1, epsilon=1e-5),
            N("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0),
        ],
        [inp("x", 2, 7, 6)], ["a", "m"], [pos("g", 6), w("b", 6)], opset=17,
    )
    yield model(
        "reduce_mean_opset18",
        [N("ReduceMean", ["x", "axes"], ["y"])],
        [inp("x", 2, 3, 4, 5)], ["y"], [i64("axes", [2, 3])], opset=18,
    )
    yield model(
        "resize_nearest_scales",
        [N("Resize", ["x", "", "scales"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        [inp("x", 1, 2, 5, 4)], ["y"], [f32("scales", [1, 1, 2, 1.5])],
    )
    yield model(
        "resize_nearest_half_pixel",
        [N("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")],
        [inp("x", 1, 2, 5, 4)], ["y"], [i64("sizes", [1, 2, 9, 7])],
    )
    yield model(
        "resize_linear_align_corners",
        [N("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
        [inp("x", 1, 3, 4, 5)], ["y"], [i64("sizes", [1, 3, 7, 3])],
    )
    yield model(
        "resize_linear_half_pixel",
        [N("Resize", ["x", "", "scales"], ["y"], mode="linear")],
        [inp("x", 1, 3, 4, 5)], ["y"], [f32("scales", [1, 1, 2, 2])],
    )
    yield model(
        "resize_linear_pytorch_half_pixel",
        [N("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")],
        [inp("x", 1, 2, 6, 5)], ["y"], [i64("sizes", [1, 2, 3, 8])],
    )
    # `x.view(x.size(0), -1)` followed by a linear layer, as PyTorch exports it.
    yield model(
        "shape_subgraph",
        [
            N("Shape", ["x"], ["s"]),
            N("Gather", ["s", "zero"], ["n"], axis=0),
            N("Unsqueeze", ["n", "axes0"], ["n1"]),
            N("Concat", ["n1", "minus1"], ["target"], axis=0),
            N("Reshape", ["x", "target"], ["flat"]),
            N("Gemm", ["flat", "fc", "fcb"], ["y"], transB=1),
            N("ConstantOfShape", ["one"], ["z"], value=helper.make_tensor("v", F, [1], [0.25])),
            N("Add", ["y", "z"], ["out"]),
        ],
        [helper.make_tensor_value_info("x", F, ["batch", 2, 3, 3])], [("out", ["batch", 4])],
        [i64("zero", 0), i64("axes0", [0]), i64("minus1", [-1]), i64("one", [1]), w("fc", 4, 18), w("fcb", 4)],
    )
    yield model(
        "identity_dropout_constant",
        [
            N("Identity", ["x"], ["i"]),
            N("Dropout", ["i"], ["d"]),
            N("Constant", [], ["k"], value=helper.make_tensor("k", F, [3], [1.0, -2.0, 0.5])),
            N("Mul", ["d", "k"], ["y"]),
        ],
        [inp("x", 2, 3)], ["y"],
    )


def main():
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "onnx-models")
    out_dir.mkdir(parents=True, exist_ok=True)
    for m in models():
        name = m.graph.name
        onnx.save(m, out_dir / f"{name}.onnx")
        print(name)


if __name__ == "__main__":
    main()
