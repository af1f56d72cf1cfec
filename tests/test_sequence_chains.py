"""Sequence chains with no map are read as tensors (issue 34, item 2).

paddle2onnx builds its arrays one insert at a time, at positions written
``Cast(Add(Mul(Cast(0), 1), k))``, and reads them at constant and computed
positions; onnxscript splits, erases, inserts, appends and concatenates;
torch reads a chunked split's elements and its length. None holds a
SequenceMap, and each comes out with no sequence op, computing what the
original computes in onnxruntime (a read out of range fails in both), and
in OpenVINO and tract (which run no sequence op) what onnxruntime computes
for the original.
"""

from __future__ import annotations

import importlib.util
import itertools
import json

import numpy as np
import onnx
import pytest

import lowering
from lowering.irutils import op_facts
from lowering.runtimes.runners import run_openvino, run_tract
from tests.golden import canonical_text
from tests.helpers import assert_same, lowered, op_types, parse, run, try_run

H = '<ir_version: 8, opset_import: ["" : 17]>'
SEQUENCE_OPS = set(op_facts.SEQUENCE_OPS)


def _paddle_position(k: int, name: str) -> str:
    """paddle2onnx's way of writing the constant k."""
    return f"""
      {name}_z = Constant <value = int64 {{0}}> ()
      {name}_c = Cast <to = 7> ({name}_z)
      {name}_one = Constant <value = int64 {{1}}> ()
      {name}_m = Mul({name}_c, {name}_one)
      {name}_k = Constant <value = int64 {{{k}}}> ()
      {name}_a = Add({name}_m, {name}_k)
      {name} = Cast <to = 7> ({name}_a)"""


def _paddle_array(order: tuple[int, ...], read: int) -> onnx.ModelProto:
    """SequenceEmpty -> SequenceInsert x3 at ``order``'s positions -> SequenceLength,
    SequenceAt at constant ``read`` and at a fed i."""
    text = f"""{H}
    g (float[2,3] x, float[2,3] y, int64 i) => (float[2,3] at, float[2,3] at_i, int64 n) {{
      s0 = SequenceEmpty <dtype = 1> ()
      x2 = Mul(x, y)"""
    for k, (tensor, position) in enumerate(zip(("x", "y", "x2"), order)):
        text += _paddle_position(position, f"p{k}")
        text += f"\n      s{k + 1} = SequenceInsert(s{k}, {tensor}, p{k})"
    text += f"""
      r = Constant <value = int64 {{{read}}}> ()
      at = SequenceAt(s3, r)
      at_i = SequenceAt(s3, i)
      n = SequenceLength(s3)
    }}"""
    return parse(text)


# Positions valid for lengths 0, 1, 2 (in [-n, n]), reads in [-3, 3).
PADDLE = [
    (order, read)
    for order in itertools.product([0], [0, 1, -1], [0, 2, -2, -1])
    for read in (0, -1, 2)
]
FEEDS = {
    "x": np.arange(6, dtype=np.float32).reshape(2, 3),
    "y": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
}


@pytest.mark.parametrize(("order", "read"), PADDLE)
def test_a_paddle_array_is_read_as_tensors(order, read):
    model = _paddle_array(order, read)
    result = lowered(model)
    assert not SEQUENCE_OPS & set(op_types(result)), op_types(result)
    assert not {"Add", "Cast"} & set(op_types(result)), "the positions are folded"
    for i in range(-4, 4):  # -4 and 3 are out of range: both fail
        feeds = {**FEEDS, "i": np.array(i, np.int64)}
        expected = try_run(model, feeds)
        got = try_run(result, feeds)
        assert (got is None) == (expected is None), i
        if expected is not None:
            for a, b in zip(got, expected):
                np.testing.assert_array_equal(a, b)


def _chain(chunk: int, erase: int, insert: int) -> onnx.ModelProto:
    """What onnxscript writes for a split, an erase, an insert, an append and a concat."""
    return parse(f"""{H}
    g (float[6,3] x, float[2,3] y) => (float[?,3] z) {{
      c = Constant <value_int = {chunk}> ()
      s = SplitToSequence <axis = 0> (x, c)
      e = Constant <value_int = {erase}> ()
      s0 = SequenceErase(s, e)
      p = Constant <value_int = {insert}> ()
      s1 = SequenceInsert(s0, y, p)
      s2 = SequenceInsert(s1, y)
      z = ConcatFromSequence <axis = 0> (s2)
    }}""")


def _count(chunk: int) -> int:
    return -(-6 // chunk)  # ceil(6 / chunk) elements


# Every erase position, then every insert position of what is left (n - 1 elements).
CHAINS = [
    (chunk, erase, insert)
    for chunk in (1, 2, 4)
    for erase in range(-_count(chunk), _count(chunk))
    for insert in range(-(_count(chunk) - 1), _count(chunk))
]


@pytest.mark.parametrize(("chunk", "erase", "insert"), CHAINS)
@pytest.mark.sweep
def test_an_onnxscript_chain_is_read_as_tensors(chunk, erase, insert):
    model = _chain(chunk, erase, insert)
    result = lowered(model)
    assert not SEQUENCE_OPS & set(op_types(result)), op_types(result)
    feeds = {
        "x": np.arange(18, dtype=np.float32).reshape(6, 3),
        "y": -np.ones((2, 3), np.float32),
    }
    [expected] = run(model, feeds)
    [got] = run(result, feeds)
    np.testing.assert_array_equal(got, expected)


def test_an_erase_out_of_range_stays():
    """onnxruntime refuses it: the chain is left, and so is the failure."""
    model = _chain(2, 3, 0)
    result = lowered(model)
    assert "SequenceErase" in op_types(result)
    feeds = {"x": np.zeros((6, 3), np.float32), "y": np.zeros((2, 3), np.float32)}
    assert try_run(model, feeds) is None and try_run(result, feeds) is None


def _chunks(chunk: int) -> onnx.ModelProto:
    """torch.split(x, chunk) read at 0 and -1 and counted, over a dim known at run time."""
    return parse(f"""{H}
    g (float[N,3] x) => (float[?,3] first, float[?,3] last, int64 n) {{
      c = Constant <value = int64 {{{chunk}}}> ()
      s = SplitToSequence <axis = 0> (x, c)
      zero = Constant <value = int64 {{0}}> ()
      first = SequenceAt(s, zero)
      minus_one = Constant <value = int64 {{-1}}> ()
      last = SequenceAt(s, minus_one)
      n = SequenceLength(s)
    }}""")


@pytest.mark.parametrize("chunk", [1, 2, 4])
@pytest.mark.parametrize("rows", [1, 3, 4, 5, 8])
def test_a_split_s_length_is_ceil_dim_over_chunk(chunk, rows):
    """SequenceLength(SplitToSequence(x, c)) = ceil(dim / c): the split goes."""
    model = _chunks(chunk)
    result = lowered(model)
    assert not SEQUENCE_OPS & set(op_types(result)), op_types(result)
    feeds = {"x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)}
    expected = run(model, feeds)
    got = run(result, feeds)
    assert int(got[2]) == -(-rows // chunk)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_the_length_of_an_empty_split_is_zero():
    """onnxruntime counts no element in an empty axis: neither does the count."""
    model = parse(f"""{H}
    g (float[N,3] x) => (int64 n) {{
      c = Constant <value = int64 {{2}}> ()
      s = SplitToSequence <axis = 0> (x, c)
      n = SequenceLength(s)
    }}""")
    result = lowered(model)
    assert not SEQUENCE_OPS & set(op_types(result))
    for rows in (0, 1, 4):
        feeds = {"x": np.zeros((rows, 3), np.float32)}
        assert int(run(result, feeds)[0]) == int(run(model, feeds)[0]) == -(-rows // 2)


def _one_each(opset: int, axis: int, keepdims: int) -> str:
    """``SequenceLength(SplitToSequence(x))``, no sizes: one element per index along ``axis``."""
    return f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g (float[N,M] x) => (int64 n) {{
      s = SplitToSequence <axis = {axis}, keepdims = {keepdims}> (x)
      n = SequenceLength(s)
    }}"""


@pytest.mark.parametrize("opset", [11, 15, 17])
@pytest.mark.parametrize(("axis", "keepdims"), [(0, 1), (0, 0), (1, 1), (-1, 0), (-2, 1)])
def test_the_length_of_a_split_with_no_sizes_is_the_dim_it_splits(opset, axis, keepdims):
    """Each element one index along the axis, whatever keepdims: as many as the dim."""
    model = parse(_one_each(opset, axis, keepdims))
    result = lowered(model)
    assert op_types(result) == ["Shape", "Constant", "Gather"]
    for dims in [(0, 3), (1, 3), (5, 3), (3, 0), (3, 1), (3, 5)]:
        feeds = {"x": np.zeros(dims, np.float32)}
        (expected,) = run(model, feeds)
        assert int(expected) == dims[axis]
        assert_same(run(result, feeds), [expected])


def test_a_split_with_no_sizes_is_counted_by_a_gather_of_its_shape():
    result = lowered(parse(_one_each(17, 1, 0)))
    expected = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,M] x) => (int64 n) {
      shape = Shape(x)
      axis = Constant <value = int64 {1}> ()
      n = Gather <axis = 0> (shape, axis)
    }""")
    assert canonical_text(result) == canonical_text(expected)


def test_an_axis_out_of_range_fails_as_the_split_does():
    """Gather refuses the index, as SplitToSequence refuses the axis."""
    model = parse(_one_each(17, 2, 1))
    result = lowered(model)
    feeds = {"x": np.zeros((2, 3), np.float32)}
    assert try_run(model, feeds) is None and try_run(result, feeds) is None


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs openvino")
def test_openvino_runs_the_length_of_a_split_with_no_sizes(tmp_path):
    """OpenVINO converts SplitToSequence only over a static axis: the length alone
    of one over a dynamic axis no longer needs it."""
    model = parse(_one_each(17, 0, 1))
    result = lowering.lower(model, runtime="openvino")
    assert not SEQUENCE_OPS & set(op_types(result))
    target = tmp_path / "lowered.onnx"
    onnx.save(result, target)
    for rows in (0, 1, 5):
        x = np.zeros((rows, 3), np.float32)
        assert int(np.asarray(run_openvino(target, [x])[0])) == rows


def test_ragged_elements_read_at_a_computed_position_stay():
    """A Gather needs one shape: elements of two shapes keep their SequenceAt."""
    model = parse(f"""{H}
    g (float[2,3] x, float[1,3] y, int64 i) => (float[?,3] z) {{
      s = SequenceConstruct(x, y)
      z = SequenceAt(s, i)
    }}""")
    assert "SequenceAt" in op_types(lowered(model))


def test_an_identity_of_a_sequence_is_bypassed_for_opset_13():
    """TorchScript returns a list through an Identity, which Identity-13 refuses."""
    model = parse(f"""{H}
    g (float[2] a, float[2] b, bool c) => (seq(float[2]) out) {{
      s = SequenceConstruct(a, b)
      t = SequenceConstruct(b)
      r = If (c) <then_branch = tb () => (seq(float[2]) tr) {{ tr = SequenceInsert(s, a) }},
                  else_branch = eb () => (seq(float[2]) er) {{ er = SequenceInsert(t, a) }}>
      out = Identity(r)
    }}""")
    result = lowered(model, target_opset=13)
    assert "Identity" not in op_types(result)
    onnx.checker.check_model(result, full_check=True)
    for c in (True, False):
        feeds = {"a": np.ones(2, np.float32), "b": np.zeros(2, np.float32), "c": np.array(c)}
        for got, expected in zip(run(result, feeds)[0], run(model, feeds)[0]):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_paddle_array_runs_in_runtimes_without_sequences(tmp_path, runtime):
    """OpenVINO crashed on, or ran wrong, the guarded form the normalization
    wrote for the original (issue 34, item 3); the lowered model has no
    sequence op, and both runtimes compute onnxruntime's result for the
    original, lowered for the default runtime or for their own."""
    pytest.importorskip(runtime)
    model = _paddle_array((0, 1, -1), -1)
    for options in ({}, {"runtime": runtime}):
        target = tmp_path / f"lowered_{len(options)}.onnx"
        onnx.save(lowered(model, **options), target)
        for i in range(-3, 3):
            feeds = {**FEEDS, "i": np.array(i, np.int64)}
            expected = run(model, feeds)
            got = {"openvino": run_openvino, "tract": run_tract}[runtime](
                target, list(feeds.values())
            )
            for a, b in zip(got, expected):
                np.testing.assert_array_equal(np.asarray(a), b)


def test_a_split_read_by_an_insert_that_stays_is_left_as_written():
    """Planned first: an insert at a fed position would not fold, so the split is not
    rewritten into a construct for nothing."""
    model = parse(f"""{H}
    g (float[6,3] x, float[2,3] y, int64 p) => (float[?,3] z) {{
      c = Constant <value = int64 {{2}}> ()
      s = SplitToSequence <axis = 0> (x, c)
      s1 = SequenceInsert(s, y, p)
      z = ConcatFromSequence <axis = 0> (s1)
    }}""")
    result = lowered(model, normalize_inserts=False)
    assert op_types(result) == op_types(model)


ELEMENT_TYPES = {"float": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("index_type", ["int32", "int64"])
@pytest.mark.parametrize("element", list(ELEMENT_TYPES))
def test_a_read_at_a_computed_position_is_a_gather_of_the_stack(element, index_type, count):
    """Every position in [-n, n) reads what SequenceAt reads; -n - 1 and n fail in both."""
    names = [f"t{k}" for k in range(count)]
    inputs = ", ".join(f"{element}[2] {name}" for name in names)
    model = parse(f"""{H}
    g ({inputs}, {index_type} i) => ({element}[2] z) {{
      s = SequenceConstruct({", ".join(names)})
      z = SequenceAt(s, i)
    }}""")
    result = lowered(model)
    assert "Gather" in op_types(result)
    assert not SEQUENCE_OPS & set(op_types(result))
    numpy_type = ELEMENT_TYPES[element]
    feeds = {name: (np.arange(2) + 2 * k).astype(numpy_type) for k, name in enumerate(names)}
    for i in range(-count - 1, count + 1):
        feeds["i"] = np.array(i, ELEMENT_TYPES[index_type])
        expected, got = try_run(model, feeds), try_run(result, feeds)
        assert (got is None) == (expected is None), i
        if expected is not None:
            np.testing.assert_array_equal(got[0], expected[0])


@pytest.mark.parametrize("target", [13, 14])
def test_a_branch_returning_an_outer_list_through_an_identity_declares_opset_13(target):
    """TorchScript's If branch returns the list it was given through an Identity,
    which must stay (a branch output is made in the branch): at 13 it is a Loop
    of no trip (``lowering/opset/adapters/sequence_identity.py``); at 14 it stays."""
    model = parse(f"""{H}
    g (float[2] a, float[2] b, bool c) => (seq(float[2]) out, float[2] first) {{
      s = SequenceConstruct(a, b)
      z = Constant <value = int64 {{0}}> ()
      r = If (c) <then_branch = tb () => (seq(float[2]) tr) {{ tr = Identity(s) }},
                  else_branch = eb () => (seq(float[2]) er) {{ er = SequenceInsert(s, b, z) }}>
      out = Identity(r)
      first = SequenceAt(r, z)
    }}""")
    result = lowered(model, target_opset=target)
    assert ("Loop" in op_types(result)) == (target == 13)
    for c in (True, False):
        feeds = {"a": np.ones(2, np.float32), "b": np.zeros(2, np.float32), "c": np.array(c)}
        got, expected = run(result, feeds), run(model, feeds)
        for x, y in zip(got[0], expected[0]):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(got[1], expected[1])


def test_below_13_an_identity_of_a_sequence_still_blocks():
    model = parse(f"""{H}
    g (float[2] a, bool c) => (seq(float[2]) out) {{
      s = SequenceConstruct(a)
      out = If (c) <then_branch = tb () => (seq(float[2]) tr) {{ tr = Identity(s) }},
                    else_branch = eb () => (seq(float[2]) er) {{ er = SequenceInsert(s, a) }}>
    }}""")
    with pytest.raises(lowering.LoweringError, match="Identity"):
        lowering.lower(model, target_opset=12)


def test_the_summary_and_the_report_say_what_was_rewritten(tmp_path, capsys):
    from lowering.cli import main

    source, target, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_chain(2, 1, 0), source)
    assert main([str(source), str(target), "--report", str(report)]) == 0
    err = capsys.readouterr().err
    assert f"read 5 sequence ops as tensors in {source} -> {target}" in err
    assert "SequenceConstruct, an erase from a sequence of known elements" in err
    nodes = json.loads(report.read_text())["nodes"]
    assert [(n["op"], n["strategy"]) for n in nodes] == [
        ("SplitToSequence", "SequenceConstruct"),
        ("SequenceErase", "SequenceConstruct"),
        ("SequenceInsert", "SequenceConstruct"),
        ("SequenceInsert", "SequenceConstruct"),
        ("ConcatFromSequence", "Concat"),
    ]
