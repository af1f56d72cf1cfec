"""The shapes lowering.irutils.node_inference proves are the shapes onnxruntime computes.

Every op of TRUSTED_SHAPE_OPS is run, one node to a model, on edge
attributes and inputs (negative and empty axes, keepdims 0 and 1, Slice's
negative steps and out-of-range bounds, zero-sized dims, Reshape's
allowzero, broadcasting with 1 and 0, ..), plus seeded random sweeps for
Slice, Range, Reshape, Expand and Add, at opsets 11 to 21. Whenever the
helper claims a dim, onnxruntime's output has it. The helper is asked four
ways: with the inputs' static shapes, with symbolic dims, with unknown dims
and with unknown ranks; constant inputs are told as constants in each.
Cases onnxruntime refuses (an invalid model) are not counted. onnxruntime
runs on one thread with no graph optimization (its optimizer folds Shape
from ONNX's inference too).

Where ONNX's shape is not onnxruntime's (the ops left out, such as MaxPool
with ``ceil_mode = 1``, and the cases of trusted ops the helper doubts) the
helper gives the dtype and no shape; and a map whose body reads the Shape of
such a MaxPool lowers, unrolled, to what onnxruntime computes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper

from lowering.irutils.node_inference import Operand, infer_outputs, seen_wrong
from lowering.irutils.op_facts import TRUSTED_SHAPE_OPS
from tests.cases.node_cases import (
    DOUBTED,
    INT64_MAX,
    INT64_MIN,
    UNTRUSTED,
    Case,
    In,
    askings,
    both,
    c,
    describe,
    feeds_of,
    model_of,
    node_of,
    ort_run,
    ort_shapes,
    r,
    x,
)
from tests.helpers import assert_same, lowered, op_types, parse

OPSETS = (11, 13, 17, 18, 21)


UNARY_FLOAT = [
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos", "Cosh",
    "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Identity", "IsInf",
    "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Reciprocal", "Relu", "Round", "Selu",
    "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
    "ThresholdedRelu",
]  # fmt: skip
SHAPES = [(), (0,), (3,), (2, 0, 3), (2, 3, 4), (1, 1)]
# Pairs that broadcast (and two that do not: onnxruntime refuses those).
BROADCASTS = [
    ((), ()), ((), (3,)), ((3,), ()), ((0,), (1,)), ((1,), (0,)), ((0,), ()), ((2, 1, 3), (4, 1)),
    ((0, 3), (1, 3)), ((3,), (2, 0, 3)), ((1, 1), (1,)), ((2, 0), (2, 1)), ((1, 0), (5, 1)),
    ((4, 1, 0), (1, 3, 1)), ((2, 3), (2, 3)), ((2,), (3,)), ((0,), (2,)),
]  # fmt: skip
BINARY = {
    "Add": np.float32, "Sub": np.int64, "Mul": np.float32, "Div": np.float32,
    "Pow": np.float32, "BitwiseAnd": np.int32, "BitwiseOr": np.int32, "BitwiseXor": np.int32,
    "And": np.bool_, "Or": np.bool_, "Xor": np.bool_, "Equal": np.int64, "Less": np.float32,
    "LessOrEqual": np.float32, "Greater": np.int32, "GreaterOrEqual": np.float32,
    "Max": np.float32, "Min": np.int32, "Mean": np.float32, "Sum": np.float32,
}  # fmt: skip
REDUCTIONS = [
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
]  # fmt: skip


def _unary(op: str, opset: int) -> Iterator[Case]:
    for shape in SHAPES:
        yield Case(op, [x(*shape)])


def _reduce(op: str, opset: int) -> Iterator[Case]:
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    for shape, axes, keepdims in itertools.product(
        [(2, 3, 4), (2, 0, 3), (3,), ()],
        [None, [], [0], [-1], [0, 2], [-3, 1], [1, -1]],
        [0, 1],
    ):
        if axes is not None and any(not -len(shape) <= a < len(shape) for a in axes):
            continue
        attrs: dict = {"keepdims": keepdims}
        if not axes_input:
            yield Case(op, [x(*shape)], attrs if axes is None else {**attrs, "axes": axes})
            continue
        for noop in [0, 1]:
            extra = {**attrs, "noop_with_empty_axes": noop}
            if axes is None:
                yield Case(op, [x(*shape)], extra)
            else:
                for given in both(axes):
                    yield Case(op, [x(*shape), given], extra)


def _arg(op: str, opset: int) -> Iterator[Case]:
    for shape, axis, keepdims, last in itertools.product(
        [(2, 3, 4), (3,), (2, 0)], [0, -1, 1], [0, 1], [0, 1]
    ):
        if not -len(shape) <= axis < len(shape):
            continue
        yield Case(op, [x(*shape)], {"axis": axis, "keepdims": keepdims, "select_last_index": last})


def _binary(op: str, opset: int) -> Iterator[Case]:
    dtype = BINARY[op]
    for a, b in BROADCASTS:
        yield Case(op, [x(*a, dtype=dtype), x(*b, dtype=dtype)])
    if op == "Add":
        rng = np.random.default_rng(opset)
        for _ in range(100):
            a, b = (
                tuple(int(d) for d in rng.choice([0, 1, 2, 3], rng.integers(0, 4))) for _ in "ab"
            )
            yield Case(op, [x(*a, dtype=dtype), x(*b, dtype=dtype)])


def _variadic(op: str, opset: int) -> Iterator[Case]:
    yield from _binary(op, opset)
    dtype = BINARY[op]
    for shapes in [[(3,)], [()], [(0,)], [(2, 1), (3,), (1, 1, 1)], [(1,), (0, 1), (4, 1, 1)]]:
        yield Case(op, [x(*s, dtype=dtype) for s in shapes])


def _mod(op: str, opset: int) -> Iterator[Case]:
    for (a, b), fmod in itertools.product(BROADCASTS, [0, 1]):
        dtype = np.float32 if fmod else np.int64
        yield Case(op, [x(*a, dtype=dtype), x(*b, dtype=dtype)], {"fmod": fmod})


def _bitshift(op: str, opset: int) -> Iterator[Case]:
    for (a, b), direction in itertools.product(BROADCASTS, ["LEFT", "RIGHT"]):
        yield Case(op, [x(*a, dtype=np.uint8), x(*b, dtype=np.uint8)], {"direction": direction})


def _where(op: str, opset: int) -> Iterator[Case]:
    for a, b, cond in [
        ((3,), (3,), (3,)), ((), (2, 1), (1, 3)), ((0,), (1,), ()), ((2, 1), (1,), (2, 0)),
        ((4, 1, 1), (3, 1), (2,)), ((2,), (3,), (1,)),
    ]:  # fmt: skip
        yield Case(op, [x(*cond, dtype=np.bool_), x(*a), x(*b)])


def _prelu(op: str, opset: int) -> Iterator[Case]:
    for data, slope in [
        ((2, 3), (3,)), ((2, 3), (1,)), ((2, 3, 4), (3, 1)), ((0, 3), (3,)), ((3,), ()),
        ((2, 3), (2, 3)), ((2, 0), (1,)),
    ]:  # fmt: skip
        yield Case(op, [x(*data), x(*slope)])


def _not(op: str, opset: int) -> Iterator[Case]:
    dtype = np.bool_ if op == "Not" else np.int32
    for shape in SHAPES:
        yield Case(op, [x(*shape, dtype=dtype)])


def _cast(op: str, opset: int) -> Iterator[Case]:
    for shape, to in itertools.product(SHAPES, [onnx.TensorProto.INT64, onnx.TensorProto.BOOL]):
        if op == "Cast":
            yield Case(op, [x(*shape)], {"to": to})
        else:
            like = np.zeros((2,), helper.tensor_dtype_to_np_dtype(to))
            yield Case(op, [x(*shape), In(like)])


def _clip(op: str, opset: int) -> Iterator[Case]:
    for shape in SHAPES:
        yield Case(op, [x(*shape)], {} if opset >= 11 else {"min": 0.2})
        yield Case(op, [x(*shape), c(0.2, np.float32), c(0.5, np.float32)])
        yield Case(op, [x(*shape), None, r(0.5, np.float32)])


def _softmax(op: str, opset: int) -> Iterator[Case]:
    for shape, axis in itertools.product([(2, 3, 4), (3,), (2, 0), ()], [None, 0, 1, -1, -3]):
        yield Case(op, [x(*shape)], {} if axis is None else {"axis": axis})


def _cumsum(op: str, opset: int) -> Iterator[Case]:
    for shape, axis, exclusive, reverse in itertools.product(
        [(2, 3), (3,), (0, 2)], [0, -1], [0, 1], [0, 1]
    ):
        for given in both(axis):
            yield Case(op, [x(*shape), given], {"exclusive": exclusive, "reverse": reverse})


def _trilu(op: str, opset: int) -> Iterator[Case]:
    for shape, upper in itertools.product([(3, 4), (2, 3, 3), (0, 2), (2, 0)], [0, 1]):
        yield Case(op, [x(*shape)], {"upper": upper})
        for given in [*both(-1), *both(5)]:
            yield Case(op, [x(*shape), given], {"upper": upper})


def _lpnorm(op: str, opset: int) -> Iterator[Case]:
    for shape, axis, p in itertools.product([(2, 3), (3,), (2, 0, 3)], [0, -1], [1, 2]):
        yield Case(op, [x(*shape)], {"axis": axis, "p": p})


def _lrn(op: str, opset: int) -> Iterator[Case]:
    for shape, size in itertools.product([(1, 3, 4), (2, 5, 2, 2), (1, 0, 3)], [1, 3]):
        yield Case(op, [x(*shape)], {"size": size})


def _shape(op: str, opset: int) -> Iterator[Case]:
    bounds = [(None, None), (1, None), (-1, None), (0, -1), (-10, 10), (2, 1), (5, None), (1, 1)]
    for shape, (start, end) in itertools.product([(), (2, 3, 4), (0,), (2, 0)], bounds):
        attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
        if attrs and opset < 15:
            continue
        yield Case(op, [x(*shape)], attrs)


def _size(op: str, opset: int) -> Iterator[Case]:
    for shape in SHAPES:
        yield Case(op, [x(*shape)])


def _concat(op: str, opset: int) -> Iterator[Case]:
    for shapes, axis in [
        ([(2, 3), (2, 0)], 1), ([(0, 3), (2, 3)], 0), ([(2, 3), (2, 3), (2, 1)], -1),
        ([(3,)], 0), ([(0,), (0,)], -1), ([(2, 3), (4, 3)], -2), ([(2, 3), (3, 3)], 1),
    ]:  # fmt: skip
        yield Case(op, [x(*s) for s in shapes], {"axis": axis})


def _gather(op: str, opset: int) -> Iterator[Case]:
    for data, indices, axis in [
        ((3, 4), 1, 0), ((3, 4), [0, -1], 1), ((5,), [[0, 1], [2, -5]], 0), ((2, 0, 3), [1], -1),
        ((3, 4), np.zeros((0,), np.int64), 0), ((3, 4), [[1, 2]], -1), ((2, 3), 0, -2),
    ]:  # fmt: skip
        for given in both(indices):
            yield Case(op, [x(*data), given], {"axis": axis})


def _gather_elements(op: str, opset: int) -> Iterator[Case]:
    for data, indices, axis in [
        ((3, 4), (2, 4), 0), ((3, 4), (3, 1), -1), ((3, 4), (0, 4), 0), ((5,), (2,), 0),
    ]:  # fmt: skip
        yield Case(op, [x(*data), r(np.zeros(indices, np.int64))], {"axis": axis})


def _slice(op: str, opset: int) -> Iterator[Case]:
    specs = [  # starts, ends, axes, steps
        ([-100], [100], None, None), ([5], [2], None, [-1]), ([-1], [INT64_MIN], None, [-1]),
        ([0], [INT64_MAX], None, None), ([1], [-1], [-1], [3]), ([20], [30], None, None),
        ([INT64_MAX], [-2], None, [-2]), ([2, 0], [0, 4], [1, 0], [-1, 2]), ([0], [0], None, None),
        ([-3], [-1], [0], [1]), ([3], [1], [0], [1]), ([0, 1], [10, 3], [-2, -1], None),
        ([-1], [-100], [-1], [-1]), ([1], [10], [0], [INT64_MAX]), ([9], [0], [0], [INT64_MIN]),
        ([0], [INT64_MAX], [0], [-1]), ([-1], [INT64_MAX], [0], [-2]), ([2], [INT64_MAX - 1], [0], [-1]),
        ([1, 0], [INT64_MAX, INT64_MAX], [0, 1], [1, -1]),
    ]  # fmt: skip
    for data, (starts, ends, axes, steps) in itertools.product(
        [(10,), (4, 5), (2, 0, 3), (0, 4)], specs
    ):
        rank = len(data)
        if axes is None and len(starts) > rank:
            continue
        if axes is not None and any(not -rank <= a < rank for a in axes):
            continue
        for const in [True, False]:
            make = c if const else r
            inputs = [x(*data), make(starts), make(ends)]
            if axes is not None or steps is not None:
                inputs.append(make(axes if axes is not None else list(range(len(starts)))))
            if steps is not None:
                inputs.append(make(steps))
            yield Case(op, inputs)
    top = np.iinfo(np.int32).max
    for data, bounds in itertools.product([(3,), (5, 2)], [[0, top, 0, -1], [-1, -top - 1, 0, -1]]):
        yield Case(op, [x(*data), *(c([b], np.int32) for b in bounds)])
    rng = np.random.default_rng(opset)
    for _ in range(150):
        data = tuple(int(d) for d in rng.integers(0, 6, rng.integers(1, 4)))
        rank = len(data)
        axes = [int(a) - rank * int(rng.integers(0, 2)) for a in rng.permutation(rank)]
        axes = axes[: rng.integers(1, rank + 1)]
        bound = [-8, -1, 0, 1, 3, 8, INT64_MAX, INT64_MIN]
        starts, ends = ([int(rng.choice(bound)) for _ in axes] for _ in range(2))
        steps = [int(rng.choice([1, 2, -1, -3, INT64_MAX, INT64_MIN])) for _ in axes]
        yield Case(op, [x(*data), c(starts), c(ends), c(axes), c(steps)])


def _reshape(op: str, opset: int) -> Iterator[Case]:
    for data, shape, allowzero in [
        ((2, 3, 4), [-1], 0), ((2, 3, 4), [0, -1], 0), ((2, 3, 4), [4, 0, -1], 0),
        ((2, 3, 4), [24], 0), ((1,), [], 0), ((), [1, 1], 0), ((0, 3), [3, 0], 1),
        ((0, 3), [3, 0], 0), ((0, 3), [0, -1], 0), ((0, 3), [-1, 0], 1), ((0, 3), [0, 5], 1),
        ((0, 3), [-1, 3], 0), ((2, 3), [0, 0], 1), ((2, 3), [3, -1], 1), ((2, 3), [0], 0),
        ((2, 3, 4), [2, -1, 0], 0), ((2, 3), [7], 0), ((6,), [2, 0], 0),
    ]:  # fmt: skip
        if allowzero and opset < 14:
            continue
        attrs = {"allowzero": allowzero} if opset >= 14 else {}
        for given in both(shape):
            yield Case(op, [x(*data), given], attrs)
    rng = np.random.default_rng(opset)
    for _ in range(100):
        data = tuple(int(d) for d in rng.integers(0, 4, rng.integers(0, 4)))
        shape = [int(d) for d in rng.integers(-1, 5, rng.integers(0, 4))]
        attrs = {"allowzero": int(rng.integers(0, 2))} if opset >= 14 else {}
        yield Case(op, [x(*data), c(shape)], attrs)


def _squeeze(op: str, opset: int) -> Iterator[Case]:
    for data, axes in [
        ((1, 3, 1), None), ((1, 3, 1), [0]), ((1, 3, 1), [-1]), ((1, 3, 1), [0, 2]), ((1,), None),
        ((1, 0, 1), None), ((1, 0, 1), [-3]), ((2, 3), None), ((2, 3), [0]), ((1, 1), [1, -2]),
        ((2, 1), []), ((1, 1), []),
    ]:  # fmt: skip
        if axes is None:
            yield Case(op, [x(*data)])
        elif opset < 13:
            yield Case(op, [x(*data)], {"axes": axes})
        else:
            for given in both(axes):
                yield Case(op, [x(*data), given])


def _unsqueeze(op: str, opset: int) -> Iterator[Case]:
    for data, axes in [
        ((), [0]), ((3,), [-1]), ((3,), [0, -1]), ((2, 0), [2, 0]), ((2, 3), [1, 3]),
        ((2,), [-3, -1]), ((2,), [1, 1]), ((2,), [5]), ((2, 1), []),
    ]:  # fmt: skip
        if opset < 13:
            yield Case(op, [x(*data)], {"axes": axes})
        else:
            for given in both(axes):
                yield Case(op, [x(*data), given])


def _transpose(op: str, opset: int) -> Iterator[Case]:
    for data, perm in [
        ((), None), ((3,), None), ((2, 0, 4), None), ((2, 3), [1, 0]), ((2, 0, 4), [2, 0, 1]),
        ((2, 3, 4), [0, 2, 1]), ((2, 3), [0, 1]),
    ]:  # fmt: skip
        yield Case(op, [x(*data)], {} if perm is None else {"perm": perm})


def _expand(op: str, opset: int) -> Iterator[Case]:
    for data, shape in [
        ((3, 1), [2, 1, 1]), ((3, 1), [3, 4]), ((3, 1), [1]), ((3, 1), [3, 0]), ((1,), [0]),
        ((0,), [1]), ((0, 1), [3]), ((), [2, 2]), ((2, 3), []), ((1, 0), [4, 1, 1]),
        ((3,), [2]),
    ]:  # fmt: skip
        for given in both(shape):
            yield Case(op, [x(*data), given])
    rng = np.random.default_rng(opset)
    for _ in range(100):
        data = tuple(int(d) for d in rng.choice([0, 1, 2, 3], rng.integers(0, 4)))
        shape = [int(d) for d in rng.choice([0, 1, 2, 3], rng.integers(0, 4))]
        yield Case(op, [x(*data), c(shape)])


def _constant_of_shape(op: str, opset: int) -> Iterator[Case]:
    for shape, value in itertools.product(
        [[], [0], [2, 3], [2, 0]], [None, onnx.numpy_helper.from_array(np.array([7], np.int32))]
    ):
        attrs = {} if value is None else {"value": value}
        for given in both(shape):
            yield Case(op, [given], attrs)


def _range(op: str, opset: int) -> Iterator[Case]:
    for start, limit, delta, dtype in [
        (0, 5, 1, np.int64), (5, 0, -1, np.int64), (0, 0, 1, np.int64), (0, 10, 3, np.int64),
        (10, 0, 3, np.int64), (-3, 3, 2, np.int32), (0, 1, 0.1, np.float32),
        (0, 1, 0.3, np.float32), (1, 0, -0.25, np.float32), (0, 1, 0.1, np.float64),
        (0.1, 0.7, 0.2, np.float32), (0, 3.000001, 1, np.float32), (2, 2.5, -1, np.float64),
        (-0.17, -10.17, -1.0, np.float32), (2**31 - 1, -(2**31), 2, np.int32),
        (-(2**31), 2**31 - 1, -(2**31), np.int32), (INT64_MAX - 2, INT64_MAX, 1, np.int64),
        (INT64_MIN, INT64_MIN + 3, 2, np.int64), (-7, 9, INT64_MAX, np.int64),
    ]:  # fmt: skip
        for const in [True, False]:
            make = c if const else r
            yield Case(op, [make(start, dtype), make(limit, dtype), make(delta, dtype)])
    rng = np.random.default_rng(opset)
    for _ in range(150):  # float bounds: where counting in float and in double differ
        dtype = rng.choice([np.float32, np.float64])
        start = np.round(rng.uniform(-3, 3), rng.integers(0, 4))
        delta = np.round(rng.uniform(-1, 1), rng.integers(1, 4)) or 0.5
        limit = np.round(
            start + delta * rng.integers(0, 12) + rng.choice([0, 1e-7, 0.5 * delta]), 6
        )
        yield Case(op, [c(start, dtype), c(limit, dtype), c(delta, dtype)])


def _constant(op: str, opset: int) -> Iterator[Case]:
    for value in [np.zeros((2, 0), np.float32), np.array(3, np.int64), np.ones((1, 2, 3))]:
        yield Case(op, [], {"value": onnx.numpy_helper.from_array(value)})
    yield Case(op, [], {"value_float": 2.0})
    yield Case(op, [], {"value_floats": [1.0, 2.0]})
    yield Case(op, [], {"value_int": 2})
    yield Case(op, [], {"value_ints": [1, 2, 3]})


def _flatten(op: str, opset: int) -> Iterator[Case]:
    for data, axis in itertools.product([(2, 3, 4), (2, 0, 4), (3,), ()], [None, 0, 1, -1, 3]):
        yield Case(op, [x(*data)], {} if axis is None else {"axis": axis})


def _tile(op: str, opset: int) -> Iterator[Case]:
    for data, repeats in [
        ((2, 3), [1, 1]), ((2, 3), [0, 2]), ((2, 3), [3, 1]), ((0,), [5]), ((), []), ((2,), [2, 2]),
    ]:  # fmt: skip
        for given in both(repeats):
            yield Case(op, [x(*data), given])


def _split(op: str, opset: int) -> Iterator[Case]:
    for data, axis, split in [
        ((6,), 0, [2, 4]), ((5, 4), 0, [0, 5]), ((5, 4), -1, [1, 3]), ((2, 0), 1, [0, 0]),
        ((6,), 0, None), ((5, 4), 1, None), ((2, 0), -1, None), ((6,), 0, [1, 2]),
    ]:  # fmt: skip
        count = 2 if split is None else len(split)
        attrs: dict = {"axis": axis}
        if split is None:
            yield Case(op, [x(*data)], attrs, count)
            if opset >= 18:
                for n in [2, 3, 4]:
                    yield Case(op, [x(*data)], {**attrs, "num_outputs": n}, n)
        elif opset < 13:
            yield Case(op, [x(*data)], {**attrs, "split": split}, count)
        else:
            for given in both(split):
                yield Case(op, [x(*data), given], attrs, count)


def _topk(op: str, opset: int) -> Iterator[Case]:
    for data, k, axis, largest in [
        ((5,), 2, 0, 1), ((3, 4), 0, -1, 0), ((3, 4), 3, 0, 1), ((3, 4), 4, 1, 1),
        ((0, 4), 2, -1, 1), ((3, 4), 5, 1, 1), ((2, 0), 0, 1, 1),
    ]:  # fmt: skip
        attrs = {"axis": axis, "largest": largest}
        for given in both([k]):
            yield Case(op, [x(*data), given], attrs, 2)


def _onehot(op: str, opset: int) -> Iterator[Case]:
    for indices, depth, axis in [
        ((3,), 4, -1), ((2, 2), 3, 0), ((), 5, -1), ((2, 2), 2, 1), ((3,), 3.7, -1), ((0,), 4, 0),
        ((2,), 0, -1),
    ]:  # fmt: skip
        depth_type = np.float32 if isinstance(depth, float) else np.int64
        for given in both(depth, depth_type):
            values = c([0, 1], np.float32)
            yield Case(op, [x(*indices, dtype=np.int64), given, values], {"axis": axis})


def _pad(op: str, opset: int) -> Iterator[Case]:
    for data, pads, axes, mode in [
        ((2, 3), [1, 0, 0, 2], None, "constant"), ((2, 3), [-1, 0, 0, -1], None, "constant"),
        ((2, 3), [0, -3, 0, 0], None, "constant"), ((2, 3), [1, 1, 1, 1], None, "reflect"),
        ((2, 3), [1, 1, 1, 1], None, "edge"), ((0, 3), [1, 0, 1, 0], None, "constant"),
        ((2, 3), [2, 1], [1], "constant"), ((2, 3), [2, 1], [-2], "edge"),
        ((2, 3, 4), [0, 1, 1, 0], [-1, 0], "constant"), ((3,), [0, 0], None, "wrap"),
    ]:  # fmt: skip
        if axes is not None and opset < 18 or mode == "wrap" and opset < 19:
            continue
        for const in [True, False]:
            make = c if const else r
            inputs = [x(*data), make(pads), c(0.5, np.float32)]
            if axes is not None:
                inputs.append(make(axes))
            yield Case(op, inputs, {"mode": mode})


def _depth_to_space(op: str, opset: int) -> Iterator[Case]:
    for data, mode in itertools.product([(1, 8, 2, 3), (2, 4, 0, 1)], ["DCR", "CRD"]):
        yield Case(op, [x(*data)], {"blocksize": 2, "mode": mode})


def _space_to_depth(op: str, opset: int) -> Iterator[Case]:
    for data in [(1, 2, 4, 6), (2, 3, 0, 2), (1, 1, 2, 2)]:
        yield Case(op, [x(*data)], {"blocksize": 2})


def _matmul(op: str, opset: int) -> Iterator[Case]:
    for a, b in [
        ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
        ((1, 2, 3), (4, 3, 2)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 1, 2, 3), (3, 3, 1)),
        ((3,), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 3), (4, 5)),
    ]:  # fmt: skip
        yield Case(op, [x(*a), x(*b)])


def _gemm(op: str, opset: int) -> Iterator[Case]:
    for (a, b, cshape), trans_a, trans_b in itertools.product(
        [((2, 3), (3, 4), (4,)), ((2, 3), (3, 4), (1,)), ((2, 3), (3, 4), (2, 1)),
         ((2, 3), (3, 4), None), ((0, 3), (3, 4), (4,)), ((2, 0), (0, 4), ()),
         ((3, 3), (3, 3), (3, 3))],
        [0, 1], [0, 1],
    ):  # fmt: skip
        if trans_a:
            a = a[::-1]
        if trans_b:
            b = b[::-1]
        inputs = [x(*a), x(*b)] + ([] if cshape is None else [x(*cshape)])
        yield Case(op, inputs, {"transA": trans_a, "transB": trans_b})


def _batchnorm(op: str, opset: int) -> Iterator[Case]:
    for data in [(2, 3, 4), (2, 3), (1, 3, 2, 2), (0, 3, 1)]:
        params = [x(3) for _ in range(4)]
        yield Case(op, [x(*data), *params])
        if opset >= 14:
            yield Case(op, [x(*data), *params], {"training_mode": 1}, 3)


def _instancenorm(op: str, opset: int) -> Iterator[Case]:
    for data in [(2, 3, 4), (1, 3, 2, 2), (2, 3, 0)]:
        yield Case(op, [x(*data), x(3), x(3)])


def _layernorm(op: str, opset: int) -> Iterator[Case]:
    for data, axis in [((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), 0), ((3,), 0), ((2, 0), -1)]:
        scale = data[axis:] if axis >= 0 else data[len(data) + axis :]
        for outputs in [1, 3]:
            yield Case(op, [x(*data), x(*scale), x(*scale)], {"axis": axis}, outputs)


def _conv(op: str, opset: int) -> Iterator[Case]:
    """Windows that fit and that do not, every auto_pad, strides, dilations, groups."""
    for (data, weight), group in [
        (((1, 2, 5), (3, 2, 2)), 1), (((2, 2, 5, 6), (4, 2, 3, 3)), 1),
        (((1, 4, 5, 5), (4, 2, 3, 2)), 2), (((1, 2, 2, 2), (1, 2, 3, 3)), 1),
        (((1, 2, 7, 4), (2, 1, 1, 2)), 2),
    ]:  # fmt: skip
        spatial = len(data) - 2
        for auto_pad, strides, dilations in itertools.product(
            ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"], [1, 2, 3], [1, 2]
        ):
            attributes = {
                "group": group,
                "auto_pad": auto_pad,
                "strides": [strides] * spatial,
                "dilations": [dilations] * spatial,
            }
            if auto_pad == "NOTSET":
                attributes["pads"] = [1] * spatial + [2] * spatial
            yield Case(op, [x(*data), x(*weight)], attributes)
        yield Case(op, [x(*data), x(*weight), x(weight[0])], {"group": group})


def _global_pool(op: str, opset: int) -> Iterator[Case]:
    for data in [(2, 3, 4, 5), (2, 3, 4), (1, 2, 0), (1, 2)]:
        yield Case(op, [x(*data)])


def _dropout(op: str, opset: int) -> Iterator[Case]:
    for data in [(2, 3), (), (0, 2)]:
        for outputs in [1, 2]:
            yield Case(op, [x(*data)], {}, outputs)
            if opset >= 12:
                ratio = c(0.5, np.float32)
                yield Case(op, [x(*data), ratio, c(False, np.bool_)], {}, outputs)


GENERATORS: dict[str, Callable[[str, int], Iterator[Case]]] = {
    **dict.fromkeys(UNARY_FLOAT, _unary),
    **dict.fromkeys(REDUCTIONS, _reduce),
    **dict.fromkeys(["ArgMax", "ArgMin"], _arg),
    **dict.fromkeys(["Max", "Min", "Mean", "Sum"], _variadic),
    **dict.fromkeys(set(BINARY) - {"Max", "Min", "Mean", "Sum"}, _binary),
    **dict.fromkeys(["Not", "BitwiseNot"], _not),
    **dict.fromkeys(["Cast", "CastLike"], _cast),
    **dict.fromkeys(["Softmax", "LogSoftmax", "Hardmax"], _softmax),
    **dict.fromkeys(["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"], _global_pool),
    "Mod": _mod,
    "BitShift": _bitshift,
    "Where": _where,
    "PRelu": _prelu,
    "Clip": _clip,
    "CumSum": _cumsum,
    "Trilu": _trilu,
    "LpNormalization": _lpnorm,
    "LRN": _lrn,
    "Shape": _shape,
    "Size": _size,
    "Concat": _concat,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "Slice": _slice,
    "Reshape": _reshape,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Transpose": _transpose,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Constant": _constant,
    "Flatten": _flatten,
    "Tile": _tile,
    "Split": _split,
    "TopK": _topk,
    "OneHot": _onehot,
    "Pad": _pad,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "BatchNormalization": _batchnorm,
    "InstanceNormalization": _instancenorm,
    "LayerNormalization": _layernorm,
    "Dropout": _dropout,
}


# -- running a case -----------------------------------------------------------


def check_op(op: str) -> tuple[int, int]:
    """Check every case of ``op``; returns (cases run, output shapes claimed)."""
    ran = claimed = 0
    for opset in OPSETS:
        try:
            onnx.defs.get_schema(op, opset, "")
        except onnx.defs.SchemaError:
            continue  # not an op at this opset
        for case in GENERATORS[op](op, opset):
            actual = ort_shapes(case, opset)
            if actual is None:
                continue
            ran += 1
            for way, operands, sizes in askings(case):
                inferred = infer_outputs(node_of(case), operands, opset)
                for k, (output, shape) in enumerate(zip(inferred, actual, strict=True)):
                    if output.shape is None:
                        continue
                    where = f"opset {opset}, {way}, output {k} of {describe(case)}"
                    assert len(output.shape) == len(shape), f"{where}: {output.shape} != {shape}"
                    for dim, size in zip(output.shape, shape, strict=True):
                        if isinstance(dim, int):
                            assert dim == size, f"{where}: {output.shape} != {shape}"
                        elif isinstance(dim, str):
                            assert sizes[dim] == size, f"{where}: {output.shape} != {shape}"
                    claimed += 1
    return ran, claimed


def test_every_trusted_op_is_checked():
    assert set(GENERATORS) == TRUSTED_SHAPE_OPS


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(TRUSTED_SHAPE_OPS))
def test_trusted_shapes_are_onnxruntimes(op):
    ran, claimed = check_op(op)
    assert ran >= 3, f"{op}: onnxruntime ran only {ran} cases"
    assert claimed > 0, f"{op}: the helper never claimed a shape"


# -- pools whose windows fit -------------------------------------------------------


def _pool_cases():
    """Pools with ceil_mode 0 and pads given or VALID, every window inside the padded input."""
    for op, opset in (("MaxPool", 12), ("MaxPool", 22), ("AveragePool", 11), ("AveragePool", 19),
                      ("LpPool", 18)):  # fmt: skip
        for d, k, stride, dilation, pads, auto_pad in itertools.product(
            (1, 2, 3, 5, 8),
            (1, 2, 3),
            (1, 2, 3),
            (1, 2),
            ([0, 0], [1, 0], [0, 2], [1, 1]),
            ("NOTSET", "VALID"),
        ):
            if d + sum(pads) < (k - 1) * dilation + 1 or (auto_pad == "VALID" and pads != [0, 0]):
                continue
            if dilation > 1 and (op, opset) in (("AveragePool", 11),):
                continue  # (no dilations before AveragePool-19)
            attrs = {"kernel_shape": [k], "strides": [stride], "auto_pad": auto_pad}
            if auto_pad == "NOTSET":
                attrs["pads"] = pads
            if dilation > 1:
                attrs["dilations"] = [dilation]
            outputs = 2 if op == "MaxPool" else 1
            yield Case(op, [x(1, 2, d)], attrs, outputs), opset


def test_a_pool_whose_windows_fit_has_the_shape_onnx_infers():
    """Where :func:`seen_wrong` trusts a pool, ONNX's inferred shape is onnxruntime's."""
    checked = 0
    for case, opset in _pool_cases():
        operands = [Operand(np.float32, list(g.value.shape), None) for g in case.inputs]
        assert not seen_wrong(node_of(case), operands), describe(case)
        actual = ort_shapes(case, opset)
        if actual is None:
            continue
        model = onnx.shape_inference.infer_shapes(model_of(case, opset), strict_mode=True)
        inferred = {v.name: v for v in model.graph.output}
        for output, shape in zip(model.graph.output, actual, strict=True):
            dims = [d.dim_value for d in inferred[output.name].type.tensor_type.shape.dim]
            assert tuple(dims) == shape, f"opset {opset}: {describe(case)}: {dims} != {shape}"
        checked += 1
    assert checked > 400


# -- NonZero of rank 1 or more ---------------------------------------------------


@pytest.mark.parametrize("shape", [(0,), (3,), (2, 0), (2, 3), (1, 2, 3), (2, 1, 1, 2)])
@pytest.mark.parametrize("opset", [11, 13, 21])
def test_a_nonzero_of_known_rank_has_the_shape_onnx_infers(shape, opset):
    """Where :func:`seen_wrong` trusts a NonZero (its input's rank known, not 0),
    the shape claimed, [rank, ?], is onnxruntime's, every way it is asked."""
    case = Case("NonZero", [x(*shape)])
    (actual,) = ort_shapes(case, opset) or pytest.fail("onnxruntime refused the case")
    claimed = 0
    for way, operands, _ in askings(case):
        (inferred,) = infer_outputs(node_of(case), operands, opset)
        if way == "unknown rank":
            assert inferred.shape is None
            continue
        assert inferred.shape == (len(shape), None), way
        assert actual[0] == len(shape)
        claimed += 1
    assert claimed == 3


# -- what is not trusted --------------------------------------------------------


@pytest.mark.parametrize("name", [*UNTRUSTED, *DOUBTED])
def test_where_onnx_differs_no_shape_is_claimed(name):
    """The dtype, and no shape, where ONNX's shape is not onnxruntime's."""
    case, opset, shape = {**UNTRUSTED, **DOUBTED}[name]
    assert (case.op in TRUSTED_SHAPE_OPS) == (name in DOUBTED)
    outputs = ort_run(model_of(case, opset), feeds_of(case))
    assert outputs[0].shape == shape
    for _, operands, _ in askings(case):
        inferred = infer_outputs(node_of(case), operands, opset)[0]
        assert inferred.shape is None
        assert inferred.dtype == ir.DataType.from_numpy(outputs[0].dtype)


# -- end to end: Shape of a MaxPool in an unrolled map --------------------------

# Each element is pooled with ceil_mode = 1 and an end pad, and the body
# reads the pooled shape: returned, and as a factor. Unrolled, each copy
# reads a tensor of static shape, for which ONNX's inference claims one
# window too many (float[1,1,4] -> [1,1,3]; onnxruntime computes [1,1,2]).
MAXPOOL_MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4] a, float[1,1,6] b)
  => (int64[3] sa, float[1,1,W] za, int64[3] sb, float[1,1,V] zb) {
  s = SequenceConstruct(a, b)
  shapes, scaled = SequenceMap <body = body (float[1,1,L] e) => (int64[3] sh, float[1,1,K] z) {
        y = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (e)
        sh = Shape(y)
        n = ReduceProd <keepdims = 0> (sh)
        f = Cast <to = 1> (n)
        z = Mul(y, f)
      }> (s)
  i0 = Constant <value = int64 {0}> ()
  i1 = Constant <value = int64 {1}> ()
  sa = SequenceAt(shapes, i0)
  za = SequenceAt(scaled, i0)
  sb = SequenceAt(shapes, i1)
  zb = SequenceAt(scaled, i1)
}"""


def _max_pool(e: np.ndarray) -> np.ndarray:
    """The spec's MaxPool of the last axis, kernel 2, stride 2, pads [0, 1],
    ceil_mode 1: a window that would start in the end pad is dropped."""
    length = e.shape[-1]
    count = -(-(length + 1 - 2) // 2) + 1
    if (count - 1) * 2 >= length:
        count -= 1
    return np.stack([e[..., 2 * i : 2 * i + 2].max(axis=-1) for i in range(count)], axis=-1)


def _oracle(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    results = []
    for e in (a, b):
        y = _max_pool(e)
        results += [np.array(y.shape, np.int64), y * np.float32(y.size)]
    return results


@pytest.mark.parametrize("optimize", [False, True])
def test_shape_of_a_ceil_mode_max_pool_is_not_folded_wrong(optimize):
    model = parse(MAXPOOL_MAP)
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.standard_normal((1, 1, 4)).astype(np.float32),
        "b": rng.standard_normal((1, 1, 6)).astype(np.float32),
    }
    expected = _oracle(feeds["a"], feeds["b"])
    assert [o.shape for o in expected] == [(3,), (1, 1, 2), (3,), (1, 1, 3)]
    for actual, wanted in zip(ort_run(model, feeds), expected, strict=True):
        assert_same(actual, wanted)  # the oracle is onnxruntime's answer on the map itself
    result = lowered(model, optimize=optimize)
    assert not {"Loop", "SequenceMap", "SequenceConstruct"} & set(op_types(result))  # unrolled
    for actual, wanted in zip(ort_run(result, feeds), expected, strict=True):
        assert_same(actual, wanted)
