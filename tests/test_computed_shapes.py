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
import random
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import helper

from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.node_inference import seen_wrong
from tests.cases.node_cases import (
    Case,
    askings,
    c,
    describe,
    feeds_of,
    model_of,
    node_of,
    ort_run,
    ort_shapes,
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


def _values() -> Iterator[tuple[Case, int]]:
    """The ops whose sizes follow from constant inputs (and NonZero's rank)."""
    for value in (0, 3):
        yield Case("NonZero", [type(x())(np.array(value, np.float32))]), 13
    yield Case("NonZero", [x(2, 3)]), 13
    for d, scale in itertools.product((3, 5, 6, 7, 10), (0.3, 0.5, 1 / 3, 0.7, 1.25, 1.4, 2.0)):
        scales = c([1, 1, scale], np.float32)
        yield Case("Resize", [x(1, 1, d), c([], np.float32), scales]), 13
    sizes = c([1, 1, 2, 3])
    yield Case("Resize", [x(1, 1, 4, 5), c([], np.float32), c([], np.float32), sizes]), 13
    yield Case("Resize", [x(1, 1, 4, 5), None, c([0.5], np.float32)], {"axes": [-1]}), 18
    rng = np.random.default_rng(7)
    for _ in range(60):
        start, limit = rng.uniform(-20, 20, 2).round(rng.integers(0, 3))
        delta = float(rng.choice([-1, 1])) * float(rng.choice([0.1, 0.3, 1.0, 2.5]))
        bounds = [c(v, np.float32) for v in (start, limit, delta)]
        yield Case("Range", bounds), 13
    yield Case("Range", [c(v, np.float32) for v in (-0.17, -10.17, -1.0)]), 13
    for start, limit, delta in ((0, 10, 3), (5, -5, -2), (2**31 - 1, -(2**31), -(2**31))):
        yield Case("Range", [c(v, np.int32) for v in (start, limit, delta)]), 13
    for start, limit, delta in (
        (0, 2**53 + 1, 2**52),
        (-(2**62), 2**62, 2**61 + 1),
        (7, 2**40, -3),
    ):
        yield Case("Range", [c(v, np.int64) for v in (start, limit, delta)]), 13  # exactly
    int32_max, int64_max = 2**31 - 1, 2**63 - 1
    for dim, start, end, step, dtype in itertools.product(
        (1, 3, 5), (-7, -1, 0, 2, 6), (int64_max, int32_max, 2**40, 0, -1), (-1, -2, 1, 2),
        (np.int64, np.int32),
    ):  # fmt: skip
        if end > np.iinfo(dtype).max:
            continue
        bounds = [c([v], dtype) for v in (start, end, 0, step)]
        yield Case("Slice", [x(dim, 2), *bounds]), 13
    for ends, steps in (([int64_max, int32_max], [-1, -1]), ([int32_max, 1], [-1, 1])):
        bounds = [c([3, 1]), c(ends), c([0, -1]), c(steps)]
        yield Case("Slice", [x(4, 3), *bounds]), 13  # two axes, a negative one


CASES = {
    "pools": _pools,
    "conv transposes": _conv_transposes,
    "others": _others,
    "values": _values,
}


#: The fast loop checks a fixed sample (seed 36) of the two large families, a
#: quarter of each (every op and opset among them); the slow tests, every case.
SAMPLED, SAMPLE_SEED, SAMPLE_SHARE = ("pools", "conv transposes"), 36, 4


def _cases(family: str, whole: bool) -> list[tuple[Case, int]]:
    cases = list(CASES[family]())
    if whole or family not in SAMPLED:
        return cases
    kept = set(random.Random(SAMPLE_SEED).sample(range(len(cases)), len(cases) // SAMPLE_SHARE))
    return [case for index, case in enumerate(cases) if index in kept]


def _computed_are_onnxruntimes(cases: list[tuple[Case, int]]) -> int:
    """Checks every dim computed for ``cases``; how many were checked from static shapes."""
    checked = 0
    for case, opset in cases:
        actual = ort_shapes(case, opset)
        if actual is None:
            continue
        for way, operands, sizes in askings(case):
            computed = computed_shapes(node_of(case), operands)
            if computed is None:
                continue
            where = f"opset {opset}, {way}: {describe(case)}"
            assert len(computed) == len(actual), where
            for shape, size in zip(computed, actual, strict=True):
                assert len(shape) == len(size), f"{where}: {shape} != {size}"
                for dim, expected in zip(shape, size, strict=True):
                    if isinstance(dim, int):
                        assert dim == expected, f"{where}: {shape} != {size}"
                    elif isinstance(dim, str):
                        assert sizes[dim] == expected, f"{where}: {shape} != {size}"
            checked += way == "static"
    return checked


@pytest.mark.parametrize("family", list(CASES))
def test_computed_shapes_are_onnxruntimes(family):
    """Every dim computed is onnxruntime's, however the inputs' shapes are told
    (a sample of the large families)."""
    checked = _computed_are_onnxruntimes(_cases(family, whole=False))
    assert checked > {"pools": 500, "conv transposes": 50, "others": 15, "values": 300}[family]


@pytest.mark.slow
@pytest.mark.parametrize("family", SAMPLED)
def test_computed_shapes_are_onnxruntimes_in_every_case(family):
    """Every dim computed is onnxruntime's, however the inputs' shapes are told."""
    checked = _computed_are_onnxruntimes(_cases(family, whole=True))
    assert checked > {"pools": 2000, "conv transposes": 200}[family]


def _pinned(case: Case, opset: int, shape: tuple) -> onnx.ModelProto:
    """``case``'s model, its first output also pinned to ``shape`` (0: a dim not
    computed, kept as it is), as lowering.irutils.pins pins it."""
    model = model_of(case, opset)
    graph = model.graph
    target = np.array([d if isinstance(d, int) else 0 for d in shape], np.int64)
    graph.initializer.append(onnx.numpy_helper.from_array(target, "pin"))
    graph.node.append(helper.make_node("Reshape", ["o0", "pin"], ["pinned"]))
    graph.output.append(onnx.ValueInfoProto(name="pinned"))
    return model


def _pins_give_onnxruntimes_shape(cases: list[tuple[Case, int]]) -> int:
    """Checks the pin of every case of ``cases`` ONNX may size wrong; how many were pinned."""
    pinned = 0
    for case, opset in cases:
        actual = ort_shapes(case, opset)
        static = next(operands for way, operands, _ in askings(case) if way == "static")
        if actual is None or not seen_wrong(node_of(case), static):
            continue
        computed = computed_shapes(node_of(case), static)
        if computed is None or 0 in computed[0]:
            continue  # (a computed 0 is pinned with allowzero, where no dim is left)
        model = _pinned(case, opset, computed[0])
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        dims = inferred.graph.output[-1].type.tensor_type.shape.dim
        claimed = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
        wanted = tuple(a if isinstance(d, int) else None for a, d in zip(actual[0], computed[0]))
        assert claimed == wanted, describe(case)
        outputs = ort_run(model, feeds_of(case))
        np.testing.assert_array_equal(outputs[-1], outputs[0])
        pinned += 1
    return pinned


@pytest.mark.parametrize("family", list(CASES))
def test_a_pin_gives_onnx_onnxruntimes_shape(family):
    """Where ONNX's shape may be wrong, ``Reshape(y, computed)`` is inferred as
    onnxruntime computes it, and runs as the identity (a sample of the large families)."""
    pinned = _pins_give_onnxruntimes_shape(_cases(family, whole=False))
    assert pinned > {"pools": 75, "conv transposes": 5, "others": 5, "values": 50}[family]


@pytest.mark.slow
@pytest.mark.parametrize("family", SAMPLED)
def test_a_pin_gives_onnx_onnxruntimes_shape_in_every_case(family):
    """Where ONNX's shape may be wrong, ``Reshape(y, computed)`` is inferred as
    onnxruntime computes it, and runs as the identity."""
    pinned = _pins_give_onnxruntimes_shape(_cases(family, whole=True))
    assert pinned > {"pools": 300, "conv transposes": 20}[family]
