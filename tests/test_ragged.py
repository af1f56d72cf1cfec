"""Ragged maps: ``SplitToSequence(X, lengths)`` mapped by a body that works row by row.

Generated over the sources (constant and computed lengths, int64 and int32,
zeros among them, n = 0, 1 and 7, split along axis 0 and 1), the bodies
(unary, binary with a scalar or row-broadcast outer operand, Where, Cast;
ReduceSum/Prod/Max/Min/Mean over the ragged axis with keepdims 0 and 1, on
floats and ints) and the readers (ConcatFromSequence, the sequence
returned), each compared with numpy (a list comprehension is SequenceMap)
and with onnxruntime on the original, with the strategy asserted. Then
chains of maps, each reading the last one's stack, and what declines.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from tests.helpers import assert_same, lowered, op_types, parse, run, try_run

H = '<ir_version: 9, opset_import: ["" : 18]>'
SEQUENCE_OPS = {"SplitToSequence", "SequenceInsert", "ConcatFromSequence", "SequenceAt", "Loop"}


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


def _feeds(source: Source, lengths: tuple[int, ...], dtype: str, seed: int = 0) -> dict:
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


def _expected(source: Source, body: Body, lengths, feeds: dict, reader: str):
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


def _strategies(model: onnx.ModelProto, **options) -> list[tuple[str, str]]:
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), **options)
    return [(r.strategy, r.reason) for r in rewrites if r.op_type == "SequenceMap"]


CASES = [
    pytest.param(source, body, reader, id=f"{s}-{b}-{reader}")
    for (s, source), (b, body), reader in itertools.product(
        SOURCES.items(), BODIES.items(), ("concat", "sequence")
    )
]


@pytest.mark.parametrize(("source", "body", "reader"), CASES)
def test_ragged_maps_are_vectorized_and_mean_the_same(source, body, reader):
    model = ragged_model(source, body, reader)
    [(strategy, reason)] = _strategies(model)
    assert strategy == "vectorize", reason
    assert "split by lengths" in reason
    result = lowered(model)
    ops = set(op_types(result))
    assert not ops & {"Loop", "Scan", "SequenceInsert", "SequenceAt"}, ops
    if reader == "concat":
        assert not ops & SEQUENCE_OPS, ops
    for lengths in source.runs:
        feeds = _feeds(source, lengths, body.dtype)
        expected = _expected(source, body, lengths, feeds, reader)
        (actual,) = run(result, feeds)
        assert_same(actual, expected)
        original = try_run(model, feeds)  # onnxruntime fails on a concat of nothing
        if original is not None:
            assert_same(actual, original[0])
        else:
            assert not lengths and reader == "concat"


def test_a_concat_reads_the_body_on_the_split_tensor_itself():
    """split -> map(x * w + b) -> concat is the body once on X: nothing else."""
    model = ragged_model(
        SOURCES["input_lengths_axis_0"], ELEMENTWISE["binary_scalar_and_row"], "concat"
    )
    assert sorted(op_types(lowered(model))) == ["Add", "Mul"]


def test_a_returned_sequence_is_the_result_split_once():
    model = ragged_model(SOURCES["input_lengths_axis_0"], ELEMENTWISE["unary"], "sequence")
    assert sorted(op_types(lowered(model))) == ["Neg", "SplitToSequence"]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_a_segment_reduction_has_no_loop_and_no_sequence(op):
    body = REDUCTIONS[f"{op}_keepdims_0_float"]
    ops = set(op_types(lowered(ragged_model(SOURCES["input_lengths_axis_0"], body, "concat"))))
    assert "ScatterElements" in ops
    assert not ops & (SEQUENCE_OPS | {"Scan"})


# -- falling back, with the reason ------------------------------------------

FALLBACKS = {
    # ScatterND takes max and min from opset 18, add from 16 (an opset below 17,
    # which SequenceMap needs, is a --target-opset)
    "max_at_opset_17": (REDUCTIONS["ReduceMax_keepdims_0_float"], 17, "opset 18"),
    "sum_for_target_opset_15": (REDUCTIONS["ReduceSum_keepdims_0_float"], 15, "opset 16"),
    "outer_operand_along_the_ragged_axis": (  # [1, 3] against [3, K]: K is 1 or 3
        Body("t = Transpose(w)\n c = Add(e, t)", lambda e, w, b, a: e + w.T),
        18,
        "may vary along the ragged axis",
    ),
    "per_element_value_meets_ragged": (
        Body(
            "s = ReduceMean <keepdims = 1> (e, ragged_axis)\n c = Sub(e, s)",
            lambda e, w, b, a: e - e.mean(axis=a, keepdims=True),
        ),
        18,
        "mixes elements of different lengths",
    ),
    "no_ragged_rule": (Body("c = Transpose <perm = [1, 0]> (e)", None), 18, "different lengths"),
    "no_segment_form": (
        Body("c = ReduceL2 <keepdims = 1AXES> (e RAGGED_AXIS)", None, reduces=True),
        18,
        "no segment form",
    ),
}


@pytest.mark.parametrize("name", list(FALLBACKS))
def test_what_cannot_be_read_row_by_row_gets_the_current_form(name):
    body, opset, why = FALLBACKS[name]
    source = SOURCES["computed_int32_lengths_axis_1"]
    if name == "outer_operand_along_the_ragged_axis":
        source = dataclasses.replace(source, runs=((3, 1, 3), (1,)))
    if name == "no_ragged_rule":
        text = ragged_model(source, ELEMENTWISE["unary"], "sequence", opset)
        text.graph.node[-1].attribute[0].g.node[0].op_type = "Transpose"
        text.graph.output[0].type.sequence_type.elem_type.tensor_type.shape.dim[0].dim_param = "K"
        text.graph.output[0].type.sequence_type.elem_type.tensor_type.shape.dim[1].dim_value = 3
        model = text
    else:
        model = ragged_model(source, body, "sequence", max(opset, 17))
    target = {"target_opset": opset} if opset < 17 else {}
    [(strategy, reason)] = _strategies(model, **target)
    assert strategy != "vectorize"
    assert why in reason
    result = lowered(model, **target)
    for lengths in source.runs:
        feeds = _feeds(source, lengths, body.dtype)
        original = try_run(model, feeds)
        assert original is not None
        assert_same(run(result, feeds)[0], original[0])
        if body.oracle is not None:
            assert_same(run(result, feeds)[0], _expected(source, body, lengths, feeds, "sequence"))


# -- chains of maps ----------------------------------------------------------

CHAIN_BODIES = ["Neg", "Abs", "Sqrt"]


def chain_model(length: int, ragged: bool, reader: str) -> onnx.ModelProto:
    """split -> map(Neg) -> map(Abs) [-> map(Sqrt)] -> reader."""
    element = "float[K,3]" if ragged else "float[3]"
    split = (
        "SplitToSequence <axis = 0> (x, sizes)"
        if ragged
        else ("SplitToSequence <axis = 0, keepdims = 0> (x)")
    )
    maps = []
    previous = "parts"
    for i, op in enumerate(CHAIN_BODIES[:length]):
        maps.append(
            f"m{i} = SequenceMap <body = b{i} ({element} e) => ({element} c) {{ c = {op}(e) }}> "
            f"({previous})"
        )
        previous = f"m{i}"
    last = previous
    if reader == "concat":
        output, read = (
            "float[T,3] y",
            f"y = ConcatFromSequence <axis = 0, new_axis = {0 if ragged else 1}> ({last})",
        )
    else:
        output, read = f"seq({element}) {last}", ""
    inputs = "float[T,3] x, int64[N] sizes" if ragged else "float[T,3] x"
    nl = "\n      "
    return parse(f"""{H}
    g ({inputs}) => ({output}) {{
      parts = {split}
      {nl.join(maps)}
      {read}
    }}""")


def _chain_expected(x, lengths, length, ragged, reader):
    parts = (np.split(x, np.cumsum(lengths)[:-1]) if lengths else []) if ragged else list(x)
    functions = [np.negative, np.abs, np.sqrt][:length]
    for function in functions:
        parts = [function(p) for p in parts]
    if reader == "sequence":
        return parts
    if not parts:
        return np.zeros((0, 3), np.float32)
    return np.concatenate(parts) if ragged else np.stack(parts)


@pytest.mark.parametrize("length", [2, 3])
@pytest.mark.parametrize("ragged", [False, True], ids=["uniform", "ragged"])
@pytest.mark.parametrize("reader", ["concat", "sequence"])
def test_chained_maps_read_each_others_stacks(length, ragged, reader):
    model = chain_model(length, ragged, reader)
    strategies = _strategies(model)
    assert [s for s, _ in strategies] == ["vectorize"] * length, strategies
    assert all("split" in why for _, why in strategies), strategies
    result = lowered(model)
    ops = op_types(result)
    body_ops = CHAIN_BODIES[:length]
    assert [op for op in ops if op in body_ops] == body_ops
    readers = {"SplitToSequence"} if reader == "sequence" else set()
    assert set(ops) - set(body_ops) <= {"Identity", "Constant", "Reshape"} | readers, ops
    assert ops.count("SplitToSequence") == (1 if reader == "sequence" else 0)
    for lengths in ((), (1,), (3, 0, 2, 5, 0, 1, 4)):
        x = np.random.default_rng(1).standard_normal((sum(lengths), 3)).astype(np.float32)
        feeds = {"x": x, "sizes": np.array(lengths, np.int64)} if ragged else {"x": x}
        (actual,) = run(result, feeds)
        assert_same(actual, _chain_expected(x, lengths, length, ragged, reader))
        original = try_run(model, feeds)
        if original is not None:
            assert_same(actual, original[0])
