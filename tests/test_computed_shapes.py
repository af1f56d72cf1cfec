"""The shapes lowering.irutils.computed_shapes computes are the shapes onnxruntime computes.

Each op it has a rule for is run, one node to a model, over a sweep of edge
attributes (ceil_mode with and without end pads, SAME padding narrower and
wider than the stride, dilations, windows as wide as the input,
output_padding, groups, broadcasting Einsum letters), and its computed shape
is checked against onnxruntime's, asked the four ways of
tests/test_trusted_shapes.py. Then the pin itself: ``Reshape(output,
computed)`` gives ONNX's strict inference onnxruntime's shape, and runs as
a no-op. Cases onnxruntime refuses are not counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import helper

from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.node_inference import seen_wrong
from tests.test_trusted_shapes import (
    Case,
    _askings,
    _describe,
    _feeds,
    _model,
    _node,
    _ort_shapes,
    c,
    ort_run,
    x,
)

POOLS = (("MaxPool", 12), ("MaxPool", 22), ("AveragePool", 19), ("LpPool", 18), ("LpPool", 11))
PADDINGS = ([0, 0], [1, 0], [0, 1], [1, 1], [2, 1], "VALID", "SAME_UPPER", "SAME_LOWER")


def _window(pads, spatial: int = 1) -> dict:
    if isinstance(pads, str):
        return {"auto_pad": pads}
    return {"pads": [p for p in pads[:1] for _ in range(spatial)] + pads[1:] * spatial}


def _pools() -> Iterator[tuple[Case, int]]:
    for (op, opset), d, k, stride, dilation, pads, ceil in itertools.product(
        POOLS, (1, 2, 3, 5, 8), (1, 2, 3), (1, 2, 3), (1, 2), PADDINGS, (0, 1)
    ):
        if opset < 18 and op == "LpPool" and (ceil or dilation > 1):
            continue  # (LpPool's ceil_mode and dilations are new in 18)
        attrs = {"kernel_shape": [k], "strides": [stride], **_window(pads)}
        if ceil:
            attrs["ceil_mode"] = 1
        if dilation > 1:
            attrs["dilations"] = [dilation]
        outputs = 2 if op == "MaxPool" and d % 2 else 1  # Indices, now and then
        yield Case(op, [x(1, 2, d)], attrs, outputs), opset
    for (h, w), pads, ceil in itertools.product(((3, 4), (5, 2)), PADDINGS, (0, 1)):
        attrs = {"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": ceil, **_window(pads, 2)}
        yield Case("AveragePool", [x(1, 1, h, w)], attrs), 19


def _conv_transposes() -> Iterator[tuple[Case, int]]:
    for d, k, stride, dilation, pads, output_padding, group in itertools.product(
        (1, 2, 5), (1, 2, 3), (1, 2, 3), (1, 2), PADDINGS, (0, 1), (1, 2)
    ):
        if output_padding >= max(stride, dilation):
            continue  # (onnxruntime refuses it)
        attrs = {"strides": [stride], "group": group, **_window(pads)}
        if dilation > 1:
            attrs["dilations"] = [dilation]
        if output_padding:
            attrs["output_padding"] = [output_padding]
        weights = c(np.ones((2, 3, k), np.float32), np.float32)
        yield Case("ConvTranspose", [x(1, 2, d), weights], attrs), 17
    weights = c(np.ones((2, 1, 3), np.float32), np.float32)
    yield Case("ConvTranspose", [x(1, 2, 4), weights], {"strides": [2], "output_shape": [9]}), 17


def _others() -> Iterator[tuple[Case, int]]:
    for equation, shapes in (
        ("bij,bjk->bik", ((1, 2, 3), (4, 3, 5))),
        ("bij,bjk->bik", ((4, 2, 3), (1, 3, 5))),
        ("ij,jk", ((2, 3), (3, 4))),
        ("ij,kj->ik", ((2, 1), (4, 3))),
        ("i,i->", ((3,), (1,))),
        ("ab->ba", ((1, 3),)),
    ):
        yield Case("Einsum", [x(*s) for s in shapes], {"equation": equation}), 13
    for data, slope in (((1, 3, 1), (1, 4)), ((3,), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 5))):
        yield Case("PRelu", [x(*data), x(*slope)]), 17
    for shape in ((2, 1), (1, 1, 3), (0, 1), (4,)):
        yield Case("Squeeze", [x(*shape), c([])]), 13
        yield Case("Squeeze", [x(*shape)], {"axes": []}), 11


CASES = {"pools": _pools, "conv transposes": _conv_transposes, "others": _others}


@pytest.mark.parametrize("family", list(CASES))
def test_computed_shapes_are_onnxruntimes(family):
    """Every dim computed is onnxruntime's, however the inputs' shapes are told."""
    checked = 0
    for case, opset in CASES[family]():
        actual = _ort_shapes(case, opset)
        if actual is None:
            continue
        for way, operands, sizes in _askings(case):
            computed = computed_shapes(_node(case), operands)
            if computed is None:
                continue
            where = f"opset {opset}, {way}: {_describe(case)}"
            assert len(computed) == len(actual), where
            for shape, size in zip(computed, actual, strict=True):
                assert len(shape) == len(size), f"{where}: {shape} != {size}"
                for dim, expected in zip(shape, size, strict=True):
                    if isinstance(dim, int):
                        assert dim == expected, f"{where}: {shape} != {size}"
                    elif isinstance(dim, str):
                        assert sizes[dim] == expected, f"{where}: {shape} != {size}"
            checked += way == "static"
    assert checked > {"pools": 2000, "conv transposes": 200, "others": 15}[family]


def _pinned(case: Case, opset: int, target: list[int]) -> onnx.ModelProto:
    model = _model(case, opset)
    graph = model.graph
    graph.initializer.append(onnx.numpy_helper.from_array(np.array(target, np.int64), "pin"))
    graph.node.append(helper.make_node("Reshape", ["o0", "pin"], ["pinned"]))
    graph.output.append(onnx.ValueInfoProto(name="pinned"))
    return model


@pytest.mark.parametrize("family", list(CASES))
def test_a_pin_gives_onnx_onnxruntimes_shape(family):
    """Where ONNX's shape may be wrong, ``Reshape(y, computed)`` is inferred as
    onnxruntime computes it, and runs as the identity."""
    pinned = 0
    for case, opset in CASES[family]():
        actual = _ort_shapes(case, opset)
        static = next(operands for way, operands, _ in _askings(case) if way == "static")
        if actual is None or not seen_wrong(_node(case), static):
            continue
        computed = computed_shapes(_node(case), static)
        if computed is None or 0 in computed[0]:
            continue
        model = _pinned(case, opset, list(computed[0]))  # type: ignore[arg-type]
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        dims = inferred.graph.output[-1].type.tensor_type.shape.dim
        assert tuple(d.dim_value for d in dims) == actual[0], _describe(case)
        outputs = ort_run(model, _feeds(case))
        np.testing.assert_array_equal(outputs[-1], outputs[0])
        pinned += 1
    assert pinned > {"pools": 300, "conv transposes": 20, "others": 5}[family]
