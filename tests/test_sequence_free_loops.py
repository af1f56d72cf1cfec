"""Loops over a ragged split read their elements with Slice, and build concats without sequences.

A map over ``SplitToSequence(X, split)`` whose body has no batching rule for
ragged elements keeps a loop (uniform or loop form). Its elements are read
with ``Slice`` at bounds computed before the loop, and an output read only
by ConcatFromSequence is built by the loop itself, so that runtimes with
Loop and no sequence ops (OpenVINO, MNN) run it. Generated over the split
(lengths as an input, int32 lengths computed, constant lengths, a chunk
size), the axis (0, 1, -1), the body (a uniform one, a NonZero, a
Transpose over float, int32, bool and string elements) and the reader (a
concat, the sequence returned, SequenceAt at a computed position), each
compared with numpy (a list comprehension is SequenceMap) and with
onnxruntime on the original; invalid splits must fail where the original
fails. Then the same forms in OpenVINO, with no sequence op left.
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.runtimes.profiles import RUNTIMES
from tests.helpers import assert_same, lowered, op_types, parse, run, try_run

SEQUENCE_OPS = RUNTIMES["openvino"].lacks


@dataclasses.dataclass(frozen=True)
class Body:
    """A body over ``e`` (ragged along ``a``) and its meaning."""

    text: str  # {a}: the ragged axis as written
    oracle: Callable[[np.ndarray, int], np.ndarray]
    result: Callable[[int], str]  # the element's declared dims, for axis a (0 or 1)
    concat_axis: Callable[[int], int]
    strategy: str
    dtypes: tuple[str, ...] = ("float",)


def _l2(e: np.ndarray, a: int) -> np.ndarray:
    return np.sqrt((e.astype(np.float64) ** 2).sum(axis=a, keepdims=True)).astype(e.dtype)


BODIES = {
    # No segment form for ReduceL2: a Loop with scan outputs, stacked.
    "uniform": Body(
        "ax = Constant <value = int64[1] {{{a}}}> ()\n        c = ReduceL2 <keepdims = 1> (e, ax)",
        _l2,
        lambda a: "1,3" if a == 0 else "3,1",
        lambda a: a,
        "uniform",
    ),
    "nonzero": Body(
        "c = NonZero (e)",
        lambda e, a: np.array(np.nonzero(e), np.int64).reshape(2, -1),
        lambda a: "2,J",
        lambda a: 1,
        "loop",
        ("float", "int32", "bool"),
    ),
    "transpose": Body(
        "c = Transpose <perm = [1, 0]> (e)",
        lambda e, a: e.T,
        lambda a: "K,3" if a == 1 else "3,K",
        lambda a: 1 - a,
        "loop",
        ("float", "int32", "bool", "string"),
    ),
}

SPLITS = ("lengths", "computed_int32", "constant", "chunk")
ONNX_TYPES = {"float": "float", "int32": "int32", "bool": "bool", "string": "string"}
CONSTANT = (2, 0, 3, 1)
RUNS = {
    "lengths": ((), (0,), (4,), (3, 0, 1, 0, 2)),
    "computed_int32": ((), (0, 0), (1, 2, 0, 3)),
    "constant": (CONSTANT,),
    "chunk": ((7, 2), (6, 3), (0, 2), (1, 5)),  # (dim, chunk): the last chunk shorter
}


def _model(split: str, axis: int, body: Body, reader: str, dtype: str, keepdims=None):
    a = axis % 2
    t = ONNX_TYPES[dtype]
    x_dims = "T,3" if a == 0 else "3,T"
    element = "K,3" if a == 0 else "3,K"
    inputs, make = "", ""
    if split == "lengths":
        inputs = ", int64[N] sizes"
    elif split == "computed_int32":
        inputs, make = ", int64[N] raw", "sizes = Cast <to = 6> (raw)"
    elif split == "constant":
        make = f"sizes = Constant <value = int64[4] {{{', '.join(map(str, CONSTANT))}}}> ()"
    else:
        inputs = ", int64 sizes"
    kd = "" if keepdims is None else f", keepdims = {keepdims}"
    out_type = "int64" if "NonZero" in body.text else t
    result = body.result(a)
    code = body.text.format(a=axis)
    if reader == "concat":
        output = f"{out_type}[?,?] y"
        read = f"y = ConcatFromSequence <axis = {body.concat_axis(a)}> (m)"
    elif reader == "stack":
        output = f"{out_type}[?,?,?] y"
        read = "y = ConcatFromSequence <axis = 1, new_axis = 1> (m)"
    elif reader == "at":
        inputs += ", int64 i"
        output = f"{out_type}[{result}] y"
        read = "y = SequenceAt (m, i)"
    else:
        output, read = f"seq({out_type}[{result}]) m", ""
    text = f"""<ir_version: 9, opset_import: ["" : 18]>
    g ({t}[{x_dims}] x{inputs}) => ({output}) {{
      {make}
      parts = SplitToSequence <axis = {axis}{kd}> (x, sizes)
      m = SequenceMap <body = body ({t}[{element}] e) => ({out_type}[{result}] c) {{
        {code}
      }}> (parts)
      {read}
    }}"""
    return parse(text)


def _x(dtype: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "string":
        return rng.choice(np.array(["a", "bb", "", "ccc"], dtype=object), shape)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    values = rng.integers(-2, 3, shape)
    return values.astype(np.float32 if dtype == "float" else np.int32)


def _feeds(split: str, axis: int, run_: tuple, dtype: str, reader: str) -> tuple[dict, list]:
    """The feeds and the element lengths."""
    if split == "chunk":
        dim, chunk = run_
        lengths = [min(chunk, dim - at) for at in range(0, dim, chunk)]
    else:
        dim, lengths = sum(run_), list(run_)
    shape = (dim, 3) if axis % 2 == 0 else (3, dim)
    feeds: dict = {"x": _x(dtype, shape)}
    if split == "lengths":
        feeds["sizes"] = np.array(run_, np.int64)
    elif split == "computed_int32":
        feeds["raw"] = np.array(run_, np.int64)
    elif split == "chunk":
        feeds["sizes"] = np.array(run_[1], np.int64)
    if reader == "at":
        feeds["i"] = np.array(-1, np.int64)
    return feeds, lengths


def _expected(body: Body, axis: int, x: np.ndarray, lengths: list, reader: str):
    a = axis % 2
    cuts = np.cumsum(lengths)[:-1]
    parts = np.split(x, cuts, axis=a) if lengths else []
    mapped = [np.asarray(body.oracle(e, a)) for e in parts]
    if reader == "sequence":
        return mapped
    if reader == "at":
        return mapped[-1]
    if reader == "stack":
        return np.stack(mapped, axis=1)
    return np.concatenate(mapped, axis=body.concat_axis(a))


def _strategies(model, **options) -> list[str]:
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), **options)
    return [r.strategy for r in rewrites if r.op_type == "SequenceMap"]


CASES = [
    pytest.param(split, axis, name, reader, dtype, id=f"{split}-axis{axis}-{name}-{dtype}-{reader}")
    for split, axis, (name, body), reader in itertools.product(
        SPLITS, (0, 1, -1), BODIES.items(), ("concat", "sequence", "at")
    )
    for dtype in body.dtypes
    if not (axis != 0 and dtype in ("int32", "bool"))  # the dtypes once, on axis 0
]


@pytest.mark.parametrize(("split", "axis", "name", "reader", "dtype"), CASES)
def test_a_loop_over_a_ragged_split_reads_slices_and_means_the_same(
    split, axis, name, reader, dtype
):
    body = BODIES[name]
    model = _model(split, axis, body, reader, dtype)
    strategies = _strategies(model, max_unroll=0)  # constant lengths would be unrolled
    expected_strategy = "loop" if dtype == "string" and body.strategy == "uniform" else None
    assert strategies[0] == (expected_strategy or body.strategy), strategies
    result = lowered(model, max_unroll=0)
    ops = set(op_types(result))
    assert not ops & {"SplitToSequence", "SequenceAt"} or reader in ("sequence", "at"), ops
    if reader == "concat" and dtype != "string":
        assert not ops & SEQUENCE_OPS, ops
    for run_ in RUNS[split]:
        feeds, lengths = _feeds(split, axis, run_, dtype, reader)
        if name == "uniform" and dtype != "float":
            continue
        if reader == "at" and not lengths:
            assert try_run(result, feeds) is None  # SequenceAt of nothing fails
            continue
        if reader == "concat" and not lengths:
            # The original fails on a concat of nothing; a concat built by the loop is empty.
            outputs = try_run(result, feeds)
            assert (outputs is None) == (dtype == "string")
            assert outputs is None or np.asarray(outputs[0]).size == 0
            continue
        actual = run(result, feeds)[0]
        assert_same(actual, _expected(body, axis, feeds["x"], lengths, reader))
        original = try_run(model, feeds)
        assert original is not None
        assert_same(actual, original[0])


INVALID = {
    "lengths": ((2, 1), (3, 3), (5, -1), (-1, 2, 3)),  # against a dim of 4
    "chunk": ((0,), (-2,)),
}


@pytest.mark.parametrize("split", list(INVALID))
@pytest.mark.parametrize("name", ["uniform", "nonzero"])
def test_an_invalid_split_fails_as_the_original_does(split, name):
    """Lengths that do not add up to the axis, a negative length, a chunk below 1."""
    model = _model(split, 0, BODIES[name], "concat", "float")
    result = lowered(model)
    for values in INVALID[split]:
        feeds = {
            "x": _x("float", (4, 3)),
            "sizes": np.array(values if split == "lengths" else values[0], np.int64),
        }
        assert try_run(model, feeds) is None
        assert try_run(result, feeds) is None, values


@pytest.mark.parametrize("keepdims", [0, 1])
def test_keepdims_is_ignored_for_lengths(keepdims):
    model = _model("lengths", 0, BODIES["nonzero"], "concat", "float", keepdims=keepdims)
    result = lowered(model)
    assert "SequenceAt" not in op_types(result)
    feeds, _ = _feeds("lengths", 0, (1, 0, 3), "float", "concat")
    assert_same(run(result, feeds)[0], run(model, feeds)[0])


def test_a_chunk_with_keepdims_0_is_left_to_the_sequence_form():
    """onnxruntime drops the axis of a chunk of 1 there (and fails on longer ones);
    the spec keeps it: the reading is disputed, so the elements are read with SequenceAt."""
    model = _model("chunk", 0, BODIES["nonzero"], "concat", "float", keepdims=0)
    ops = op_types(lowered(model))
    assert "SequenceAt" in ops


@pytest.mark.parametrize("target", [11, 13])
@pytest.mark.parametrize("name", ["uniform", "nonzero"])
@pytest.mark.parametrize("split", ["lengths", "chunk"])
def test_older_targets(target, name, split):
    model = _model(split, 0, BODIES[name], "concat", "float")
    result = lowered(model, target_opset=target)
    assert result.opset_import[0].version == target
    assert not set(op_types(result)) & SEQUENCE_OPS
    for run_ in RUNS[split][1:]:
        feeds, lengths = _feeds(split, 0, run_, "float", "concat")
        if not lengths:
            continue
        assert_same(
            run(result, feeds)[0], _expected(BODIES[name], 0, feeds["x"], lengths, "concat")
        )


# -- OpenVINO ------------------------------------------------------------------


@pytest.mark.parametrize("split", ["lengths", "chunk"])
@pytest.mark.parametrize(
    ("name", "reader"),  # (a stack of ragged elements is an error)
    [("uniform", "concat"), ("uniform", "stack"), ("nonzero", "concat"), ("transpose", "concat")],
)
def test_openvino_runs_the_ragged_loops_with_no_sequence_op(split, name, reader, tmp_path):
    pytest.importorskip("openvino")
    from lowering.runtimes.runners import run_openvino

    body = BODIES[name]
    model = _model(split, 0, body, reader, "float")
    (rewrite,) = [
        r
        for r in lowering.lower_in_place(ir.serde.deserialize_model(model), runtime="openvino")
        if r.op_type == "SequenceMap"
    ]
    assert rewrite.strategy == body.strategy
    assert not any(name.startswith("openvino") for name in rewrite.rejected_by)
    result = lowering.lower(model, runtime="openvino")
    assert not set(op_types(result)) & SEQUENCE_OPS
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    for run_ in RUNS[split][1:]:
        feeds, lengths = _feeds(split, 0, run_, "float", reader)
        if not lengths:
            continue
        (actual,) = run_openvino(pathlib.Path(path), list(feeds.values()))
        assert_same(actual, _expected(body, 0, feeds["x"], lengths, reader))
