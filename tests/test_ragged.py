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

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from tests.cases.ragged_maps import (
    BODIES,
    ELEMENTWISE,
    REDUCTIONS,
    SOURCES,
    Body,
    H,
    ragged_expected,
    ragged_feeds,
    ragged_model,
)
from tests.helpers import assert_same, lowered, op_types, parse, run, try_run

SEQUENCE_OPS = {"SplitToSequence", "SequenceInsert", "ConcatFromSequence", "SequenceAt", "Loop"}


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
        feeds = ragged_feeds(source, lengths, body.dtype)
        expected = ragged_expected(source, body, lengths, feeds, reader)
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
        feeds = ragged_feeds(source, lengths, body.dtype)
        original = try_run(model, feeds)
        assert original is not None
        assert_same(run(result, feeds)[0], original[0])
        if body.oracle is not None:
            assert_same(
                run(result, feeds)[0], ragged_expected(source, body, lengths, feeds, "sequence")
            )


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
