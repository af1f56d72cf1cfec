"""Ragged maps: the sources of ``SplitToSequence(X, lengths)``, the bodies that work
row by row with their meaning in numpy, and the model of a source, a body and
a reader, with its feeds and expected values. Read by tests/test_ragged.py
and tests/test_releases.py.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import onnx

from tests.helpers import parse

H = '<ir_version: 9, opset_import: ["" : 18]>'


@dataclasses.dataclass(frozen=True)
class Source:
    """How the lengths reach the split, and the lengths to run with."""

    axis: int
    lengths: str  # "constant", "input" (int64) or "computed" (int32, from a Cast)
    runs: tuple[tuple[int, ...], ...]


SOURCES = {
    "constant_lengths_axis_0": Source(0, "constant", ((3, 0, 1, 5, 0, 2, 4),)),
    "input_lengths_axis_0": Source(0, "input", ((), (4,), (0, 2, 0, 1, 6, 3, 0))),
    "computed_int32_lengths_axis_1": Source(1, "computed", ((), (0,), (1, 3, 0, 2, 2, 0, 5))),
}


@dataclasses.dataclass(frozen=True)
class Body:
    """A body over ``e`` (with outer operands ``w``, a row: [1, 3] or [3, 1] across the
    ragged axis, and ``b``, a scalar), and its meaning."""

    text: str
    oracle: Callable[..., np.ndarray]
    dtype: str = "float"
    out: str = "float"
    reduces: bool = False  # over the ragged axis (then keepdims and the output shape)
    keepdims: bool = True


ELEMENTWISE = {
    "unary": Body("c = Neg(e)", lambda e, w, b, a: -e),
    "binary_scalar_and_row": Body(
        "m = Mul(e, w)\n c = Add(m, b)",
        lambda e, w, b, a: e * w + b,
    ),
    "where": Body(
        "g = Greater(e, w)\n z = Neg(e)\n c = Where(g, e, z)",
        lambda e, w, b, a: np.where(e > w, e, -e),
    ),
    "cast": Body("c = Cast <to = 6> (e)", lambda e, w, b, a: e.astype(np.int32), out="int32"),
}

_IDENTITY = {
    "ReduceSum": lambda dt: 0,
    "ReduceProd": lambda dt: 1,
    "ReduceL2": lambda dt: 0,
    "ReduceLogSumExp": lambda dt: -np.inf,
    "ReduceMean": lambda dt: 0,  # onnxruntime's mean of nothing: 0
    "ReduceMax": lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min,
    "ReduceMin": lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max,
}


def _numpy_reduce(op: str, e: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    if e.shape[axis] == 0:
        shape = list(e.shape)
        shape[axis] = 1
        out = np.full(shape, _IDENTITY[op](e.dtype), e.dtype)
        return out if keepdims else out.squeeze(axis)
    if op == "ReduceMean":
        return e.mean(axis=axis, keepdims=keepdims).astype(e.dtype)
    function = {
        "ReduceSum": np.sum,
        "ReduceProd": np.prod,
        "ReduceMax": np.max,
        "ReduceMin": np.min,
        "ReduceL2": lambda e, **how: np.sqrt(np.sum(e * e, **how)),
        "ReduceLogSumExp": lambda e, **how: np.log(np.sum(np.exp(e), **how)),
    }[op]
    return function(e, axis=axis, keepdims=keepdims).astype(e.dtype)


def _reduction(op: str, keepdims: bool, dtype: str) -> Body:
    return Body(
        f"c = {op} <keepdims = {int(keepdims)}AXES> (e RAGGED_AXIS)",
        lambda e, w, b, a: _numpy_reduce(op, e, a, keepdims),
        dtype=dtype,
        out=dtype,
        reduces=True,
        keepdims=keepdims,
    )


REDUCTIONS = {
    f"{op}_keepdims_{k}_{dtype}": _reduction(op, bool(k), dtype)
    for op, k, dtype in itertools.product(
        ("ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceMean"),
        (0, 1),
        ("float", "int32"),
    )
    if not (op in ("ReduceMean", "ReduceProd") and dtype == "int32")
}
#: Reductions over the ragged axis with no segment form: they keep a loop.
LOOP_REDUCTIONS = {
    f"{op}_keepdims_{k}_float": _reduction(op, bool(k), "float")
    for op, k in itertools.product(("ReduceL2", "ReduceLogSumExp"), (0, 1))
}
BODIES = {**ELEMENTWISE, **REDUCTIONS}
NUMPY = {"float": np.float32, "int32": np.int32, "int64": np.int64}


def _dims(axis: int, ragged: str) -> str:
    return f"{ragged},3" if axis == 0 else f"3,{ragged}"


def _lengths_lines(source: Source) -> tuple[str, str]:
    """(graph inputs, nodes) that make ``sizes``."""
    if source.lengths == "constant":
        values = source.runs[0]
        return "", (
            f"sizes = Constant <value = int64[{len(values)}] {{{', '.join(map(str, values))}}}> ()"
        )
    if source.lengths == "input":
        return ", int64[N] sizes", ""
    return ", int64[N] raw", "sizes = Cast <to = 6> (raw)"


def ragged_model(source: Source, body: Body, reader: str, opset: int = 18) -> onnx.ModelProto:
    """split -> map(body) -> read by ``reader``: "concat" or "sequence" (returned)."""
    a = source.axis
    inputs, make_sizes = _lengths_lines(source)
    as_input = opset >= (13 if "ReduceSum" in body.text else 18)
    code = body.text.replace("AXES", "" if as_input else f", axes = [{a}]")
    code = code.replace(" RAGGED_AXIS", ", ragged_axis" if as_input else "")
    if "ragged_axis" in code:
        make_sizes += f"\n      ragged_axis = Constant <value = int64[1] {{{a}}}> ()"
    element = _dims(a, "K")
    if body.reduces:
        result = _dims(a, "1") if body.keepdims else "3"
        stacked = f"N,{result}"
        concat = "ConcatFromSequence <axis = 0, new_axis = 1> (m)"
    else:
        result, stacked = element, _dims(a, "T")
        concat = f"ConcatFromSequence <axis = {a}> (m)"
    output = f"{body.out}[{stacked}] y" if reader == "concat" else f"seq({body.out}[{result}]) m"
    read = f"y = {concat}" if reader == "concat" else ""
    text = f"""<ir_version: 9, opset_import: ["" : {opset}]>
    g ({body.dtype}[{_dims(a, "T")}] x, float[{_dims(a, "1")}] w, float b{inputs}) => ({output}) {{
      {make_sizes}
      parts = SplitToSequence <axis = {a}> (x, sizes)
      m = SequenceMap <body = body ({body.dtype}[{element}] e) => ({body.out}[{result}] c) {{
        {code}
      }}> (parts)
      {read}
    }}"""
    return parse(text)


def ragged_feeds(source: Source, lengths: tuple[int, ...], dtype: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    total = sum(lengths)
    shape = (total, 3) if source.axis == 0 else (3, total)
    x = rng.standard_normal(shape) * 4
    feeds = {
        "x": x.astype(NUMPY[dtype]),
        "w": rng.standard_normal((1, 3) if source.axis == 0 else (3, 1)).astype(np.float32),
        "b": np.array(0.5, np.float32),
    }
    if source.lengths == "input":
        feeds["sizes"] = np.array(lengths, np.int64)
    elif source.lengths == "computed":
        feeds["raw"] = np.array(lengths, np.int64)
    return feeds


def ragged_expected(source: Source, body: Body, lengths, feeds: dict, reader: str):
    """The map's meaning: a list comprehension over the split, then the reader."""
    a = source.axis
    cuts = np.cumsum(lengths)[:-1] if lengths else []
    parts = np.split(feeds["x"], cuts, axis=a) if lengths else []
    mapped = [np.asarray(body.oracle(e, feeds["w"], feeds["b"], a)) for e in parts]
    if reader == "sequence":
        return mapped
    if body.reduces:  # an empty concat: what the lowered model gives (the original fails)
        result = ((1, 3) if a == 0 else (3, 1)) if body.keepdims else (3,)
        return np.stack(mapped) if mapped else np.zeros((0, *result), NUMPY[body.out])
    if not mapped:
        return np.zeros((0, 3) if a == 0 else (3, 0), NUMPY[body.out])
    return np.concatenate(mapped, axis=a)
