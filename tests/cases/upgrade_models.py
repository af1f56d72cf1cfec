"""Models at opsets 6-10, one or a few nodes each, for going up (tests/test_opset_upgrade.py).

One generator: every op the issue named (BatchNormalization-7, Dropout-7,
Upsample-7/9, Slice-1, Pad-2, TopK-1, Unsqueeze-1, Softmax-1 on rank 3,
Split-2, Clip-6, Resize-10, ReduceSum-1, Gemm-9, MaxPool-8) and the
neighbours that share their changes (the other axis-coerced and
axes-attribute ops), with the attributes that change meaning on the way.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def model(opset, nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    made = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    made.ir_version = 4
    return made


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def init(name, array):
    return nh.from_array(np.asarray(array), name)


def cases() -> Iterator[tuple[str, onnx.ModelProto]]:
    """(id, model) for each case."""
    x4 = vi("x", [1, 2, 3, 3])
    yield (
        "bn_dropout_upsample-7",
        model(
            7,
            [
                h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
                h.make_node("Dropout", ["bn"], ["d"], ratio=0.3),
                h.make_node("Upsample", ["d"], ["y"], scales=[1.0, 1.0, 2.0, 2.0], mode="nearest"),
            ],
            [x4],
            [vi("y", [1, 2, 6, 6])],
            [
                init("s", np.float32([1, 2])),
                init("b", np.float32([0.5, -1])),
                init("m", np.float32([0.1, 0.2])),
                init("v", np.float32([1, 4])),
            ],
        ),
    )
    for mode in ("nearest", "linear"):
        yield (
            f"upsample-7-{mode}",
            model(
                7,
                [h.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0], mode=mode)],
                [x4],
                [vi("y", [1, 2, 6, 9])],
            ),
        )
        yield (
            f"upsample-9-{mode}",
            model(
                9,
                [h.make_node("Upsample", ["x", "sc"], ["y"], mode=mode)],
                [x4],
                [vi("y", [1, 2, 6, 9])],
                [init("sc", np.float32([1, 1, 2, 3]))],
            ),
        )
    x34 = vi("x", [3, 4, 5])
    yield (
        "slice-1",
        model(
            9,
            [h.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[1000, -1], axes=[0, 2])],
            [x34],
            [vi("y", None)],
        ),
    )
    yield (
        "slice-1-noaxes",
        model(
            9,
            [h.make_node("Slice", ["x"], ["y"], starts=[0, 1], ends=[2, 3])],
            [x34],
            [vi("y", None)],
        ),
    )
    for mode in ("constant", "reflect", "edge"):
        yield (
            f"pad-2-{mode}",
            model(
                10,
                [h.make_node("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 2, 1], mode=mode, value=1.5)],
                [x34],
                [vi("y", None)],
            ),
        )
    yield (
        "topk-1",
        model(
            9,
            [h.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1)],
            [x34],
            [vi("v", None), vi("i", None, T.INT64)],
        ),
    )
    yield (
        "unsqueeze-1",
        model(10, [h.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 4])], [x34], [vi("y", None)]),
    )
    yield (
        "squeeze-1",
        model(
            10,
            [h.make_node("Squeeze", ["x"], ["y"], axes=[0])],
            [vi("x", [1, 4, 5])],
            [vi("y", None)],
        ),
    )
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        for axis in (None, 0, 1, 2):
            attrs = {} if axis is None else {"axis": axis}
            yield (
                f"{op.lower()}-1-rank3-axis{axis}",
                model(10, [h.make_node(op, ["x"], ["y"], **attrs)], [x34], [vi("y", None)]),
            )
    yield (
        "split-2",
        model(
            10,
            [h.make_node("Split", ["x"], ["a", "b"], axis=2, split=[2, 3])],
            [x34],
            [vi("a", None), vi("b", None)],
        ),
    )
    yield (
        "split-2-equal",
        model(
            10,
            [h.make_node("Split", ["x"], ["a", "b"], axis=1)],
            [x34],
            [vi("a", None), vi("b", None)],
        ),
    )
    yield (
        "clip-6",
        model(10, [h.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)], [x34], [vi("y", None)]),
    )
    yield "clip-6-default", model(10, [h.make_node("Clip", ["x"], ["y"])], [x34], [vi("y", None)])
    for mode in ("nearest", "linear"):
        yield (
            f"resize-10-{mode}",
            model(
                10,
                [h.make_node("Resize", ["x", "sc"], ["y"], mode=mode)],
                [x4],
                [vi("y", None)],
                [init("sc", np.float32([1, 1, 2, 1.5]))],
            ),
        )
    for op in (
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceL2",
        "ReduceLogSumExp",
        "ReduceProd",
        "ArgMax",
    ):
        yield (
            f"{op.lower()}-1",
            model(
                10,
                [
                    h.make_node(
                        op,
                        ["x"],
                        ["y"],
                        **(
                            {"axis": 1, "keepdims": 0}
                            if op == "ArgMax"
                            else {"axes": [0, 2], "keepdims": 0}
                        ),
                    )
                ],
                [x34],
                [vi("y", None, T.INT64 if op == "ArgMax" else T.FLOAT)],
            ),
        )
    yield (
        "reducesum-1-all",
        model(10, [h.make_node("ReduceSum", ["x"], ["y"])], [x34], [vi("y", None)]),
    )
    yield (
        "gemm-9",
        model(
            9,
            [h.make_node("Gemm", ["a", "bb", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
            [vi("a", [4, 3]), vi("bb", [4, 5]), vi("c", [5])],
            [vi("y", None)],
        ),
    )
    yield (
        "maxpool-8",
        model(
            8,
            [
                h.make_node(
                    "MaxPool",
                    ["x"],
                    ["y", "i"],
                    kernel_shape=[2, 2],
                    strides=[1, 1],
                    pads=[0, 0, 1, 1],
                )
            ],
            [x4],
            [vi("y", None), vi("i", None, T.INT64)],
        ),
    )
    yield (
        "averagepool-7",
        model(
            7,
            [
                h.make_node(
                    "AveragePool",
                    ["x"],
                    ["y"],
                    kernel_shape=[2, 2],
                    pads=[1, 1, 1, 1],
                    count_include_pad=1,
                )
            ],
            [x4],
            [vi("y", None)],
        ),
    )
    yield "dropout-10", model(10, [h.make_node("Dropout", ["x"], ["y"])], [x34], [vi("y", None)])
    yield (
        "bn-9",
        model(
            9,
            [h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
            [x4],
            [vi("y", None)],
            [
                init("s", np.float32([1, 2])),
                init("b", np.float32([0.5, -1])),
                init("m", np.float32([0.1, 0.2])),
                init("v", np.float32([1, 4])),
            ],
        ),
    )
    yield (
        "reshape-5",
        model(
            9,
            [h.make_node("Reshape", ["x", "sh"], ["y"])],
            [x34],
            [vi("y", None)],
            [init("sh", np.int64([0, -1]))],
        ),
    )
    yield (
        "flatten-9",
        model(9, [h.make_node("Flatten", ["x"], ["y"], axis=2)], [x34], [vi("y", None)]),
    )
    yield (
        "concat-4",
        model(9, [h.make_node("Concat", ["x", "x"], ["y"], axis=1)], [x34], [vi("y", None)]),
    )
    yield (
        "gather-1",
        model(
            9,
            [h.make_node("Gather", ["x", "ix"], ["y"], axis=1)],
            [x34],
            [vi("y", None)],
            [init("ix", np.int64([3, 0]))],
        ),
    )
    yield (
        "cast-9",
        model(9, [h.make_node("Cast", ["x"], ["y"], to=T.INT32)], [x34], [vi("y", None, T.INT32)]),
    )
    yield (
        "add-7-mul-7",
        model(
            7,
            [h.make_node("Add", ["x", "c"], ["t"]), h.make_node("Mul", ["t", "x"], ["y"])],
            [x34],
            [vi("y", None)],
            [init("c", np.float32([1, 2, 3, 4, 5]))],
        ),
    )


#: Scales where half_pixel and asymmetric coordinates (and the nearest
#: roundings) part: what the library's Upsample/Resize-10 conversion missed.
SCALES = ([1.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.5, 2.5], [1.0, 1.0, 3.0, 1.25])


def resize_cases() -> Iterator[tuple[str, onnx.ModelProto]]:
    x = vi("x", [1, 2, 4, 5])
    for scales in SCALES:
        tag = "x".join(str(s) for s in scales[2:])
        for mode in ("nearest", "linear"):
            yield (
                f"upsample-7-{mode}-{tag}",
                model(
                    7,
                    [h.make_node("Upsample", ["x"], ["y"], scales=scales, mode=mode)],
                    [x],
                    [vi("y", None)],
                ),
            )
            for op, opset in (("Upsample", 9), ("Resize", 10)):
                yield (
                    f"{op.lower()}-{opset}-{mode}-{tag}",
                    model(
                        opset,
                        [h.make_node(op, ["x", "sc"], ["y"], mode=mode)],
                        [x],
                        [vi("y", None)],
                        [init("sc", np.float32(scales))],
                    ),
                )
    for scales in ([1, 1, 0.5, 0.6], [1, 1, 0.75, 1]):
        yield (
            f"resize-10-linear-down-{scales[2]}x{scales[3]}",
            model(
                10,
                [h.make_node("Resize", ["x", "sc"], ["y"], mode="linear")],
                [x],
                [vi("y", None)],
                [init("sc", np.float32(scales))],
            ),
        )
