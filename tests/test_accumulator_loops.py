"""Accumulator loops (``list.append`` in a loop) become scan outputs or a carried Concat.

Each model is the pattern an exporter writes (``Loop(.., SequenceEmpty())``
growing the sequence by ``SequenceInsert``), read after the loop by
ConcatFromSequence, SequenceAt (constant or computed, in a second Loop too)
or SequenceLength: uniform and ragged elements, an append under an If, a
loop stopped by its condition, a prepend, two accumulators in one loop.
Each is lowered for onnxruntime, for OpenVINO and for opset 11, must keep
no sequence op, and must compute what the original computes in
onnxruntime, at 0, 1 and 4 elements: where the original fails (a concat
of nothing), the lowered model fails too. OpenVINO runs the
``--runtime openvino`` form where it is installed.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.errors import LoweringError
from lowering.rewrites import Kept
from lowering.runtimes.profiles import RUNTIMES
from tests.helpers import all_graphs, assert_same, cli, lowered, op_types, parse, try_run

SEQUENCE_OPS = RUNTIMES["openvino"].lacks

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'
START = """
  n = Shape <start = 0, end = 1> (x)
  m = Squeeze (n)
  t = Constant <value = bool {1}> ()
  e = SequenceEmpty <dtype = 1> ()
"""


def model(outputs: str, loop: str, readers: str, inputs: str = "float[N,3] x") -> onnx.ModelProto:
    """The graph; its sequences' elements of no declared shape (ONNX text's
    ``seq(float)`` declares a scalar)."""
    proto = parse(f"{HEADER}\ng ({inputs}) => ({outputs}) {{{START}{loop}\n{readers}\n}}")
    for graph in all_graphs(proto):
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.type.HasField("sequence_type"):
                value.type.sequence_type.elem_type.tensor_type.ClearField("shape")
    return proto


def append(element: str, insert: str = "acc2 = SequenceInsert (acc, y)") -> str:
    """A Loop over the rows of x appending ``element`` (nodes defining y)."""
    return f"""
  s = Loop (m, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) acc2) {{
    row = Gather <axis = 0> (x, i)
    {element}
    {insert}
    c2 = Identity (c)
  }}>"""


ROW = "y = Mul (row, row)"  # [3]: one static shape
PREFIX = """
    one = Constant <value = int64[1] {1}> ()
    zero = Constant <value = int64[1] {0}> ()
    i1 = Unsqueeze (i, zero)
    end = Add (i1, one)
    y = Slice (x, zero, end, zero)"""  # [i + 1, 3]: ragged along 0
FLAT_PREFIX = (
    PREFIX + "\n    minus = Constant <value = int64[1] {-1}> ()\n    y2 = Reshape (y, minus)"
)

CONDITIONAL = """
  s = Loop (m, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) acc2) {
    row = Gather <axis = 0> (x, i)
    zero0 = Constant <value = int64 {0}> ()
    lead = Gather <axis = 0> (row, zero0)
    half = Constant <value = float {0}> ()
    keep = Greater (lead, half)
    acc2 = If (keep) <then_branch = th () => (seq(float) a1) {
      a1 = SequenceInsert (acc, row)
    }, else_branch = el () => (seq(float) a2) {
      a2 = Identity (acc)
    }>
    c2 = Identity (c)
  }>"""

WHILE = """
  big = Constant <value = int64 {1000}> ()
  zero_s = Constant <value = int64 {0}> ()
  go = Greater (m, zero_s)
  s = Loop (big, go, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) acc2) {
    row = Gather <axis = 0> (x, i)
    y = Neg (row)
    acc2 = SequenceInsert (acc, y)
    one_s = Constant <value = int64 {1}> ()
    next = Add (i, one_s)
    c2 = Less (next, m)
  }>"""

SEVERAL = (
    """
  s, r = Loop (m, t, e, e) <body = b (int64 i, bool c, seq(float) acc, seq(float) racc)
      => (bool c2, seq(float) acc2, seq(float) racc2) {
    row = Gather <axis = 0> (x, i)
    y = Sigmoid (row)"""
    + PREFIX.replace("y =", "z =")
    + """
    acc2 = SequenceInsert (acc, y)
    racc2 = SequenceInsert (racc, z)
    c2 = Identity (c)
  }>"""
)

SECOND_LOOP = """
  total0 = Constant <value = float[3] {0, 0, 0}> ()
  sum = Loop (m, t, total0) <body = b2 (int64 j, bool c3, float[3] total) => (bool c4, float[3] total2) {
    k1 = Constant <value = int64 {1}> ()
    last = Sub (m, k1)
    back = Sub (last, j)
    a = SequenceAt (s, j)
    z = SequenceAt (s, back)
    prod = Mul (a, z)
    total2 = Add (total, prod)
    c4 = Identity (c3)
  }>"""

SECOND_LOOP_RAGGED = """
  total0 = Constant <value = float {0}> ()
  sum = Loop (m, t, total0) <body = b2 (int64 j, bool c3, float total) => (bool c4, float total2) {
    a = SequenceAt (s, j)
    part = ReduceSum <keepdims = 0> (a)
    total2 = Add (total, part)
    c4 = Identity (c3)
  }>"""

WITH_SCAN = (
    """
  s, sq = Loop (m, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) acc2, float[3] sq2) {
    row = Gather <axis = 0> (x, i)"""
    + PREFIX
    + """
    acc2 = SequenceInsert (acc, y)
    sq2 = Mul (row, row)
    c2 = Identity (c)
  }>"""
)

NESTED = """
  two = Constant <value = int64 {2}> ()
  out = Loop (two, t) <body = outer (int64 k, bool oc) => (bool oc2, float[M,3] part) {
    s = Loop (m, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) acc2) {
      row = Gather <axis = 0> (x, i)
      kf = Cast <to = 1> (k)
      y = Mul (row, kf)
      acc2 = SequenceInsert (acc, y)
      c2 = Identity (c)
    }>
    part = ConcatFromSequence <axis = 0, new_axis = 1> (s)
    oc2 = Identity (oc)
  }>"""

#: name: (model, the form expected)
CASES = {
    "stack": (
        model(
            "float[N,3] out", append(ROW), "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)"
        ),
        "stack",
    ),
    "stack_axis_1": (
        model(
            "float[3,N] out", append(ROW), "out = ConcatFromSequence <axis = 1, new_axis = 1> (s)"
        ),
        "stack",
    ),
    "merged": (
        model("float[M] out", append(ROW), "out = ConcatFromSequence <axis = 0> (s)"),
        "stack",
    ),
    "ragged": (
        model("float[M,3] out", append(PREFIX), "out = ConcatFromSequence <axis = 0> (s)"),
        "concat",
    ),
    "ragged_flat": (
        model(
            "float[M] out",
            append(FLAT_PREFIX, "acc2 = SequenceInsert (acc, y2)"),
            "out = ConcatFromSequence <axis = 0> (s)",
        ),
        "concat",
    ),
    "conditional": (
        model(
            "float[M,3] out", CONDITIONAL, "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)"
        ),
        "concat",
    ),
    "conditional_at": (
        model(
            "float[3] first, float[3] last, int64 count",
            CONDITIONAL,
            "z0 = Constant <value = int64 {0}> ()\n  first = SequenceAt (s, z0)\n"
            "  m1 = Constant <value = int64 {-1}> ()\n  last = SequenceAt (s, m1)\n"
            "  count = SequenceLength (s)",
        ),
        "concat",
    ),
    "while": (
        model("float[M,3] out", WHILE, "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)"),
        "stack",
    ),
    "prepend": (
        model(
            "float[N,3] out",
            append(
                ROW, "zp = Constant <value = int64 {0}> ()\n    acc2 = SequenceInsert (acc, y, zp)"
            ),
            "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)",
        ),
        "stack",
    ),
    "prepend_ragged": (
        model(
            "float[M,3] out",
            append(
                PREFIX,
                "zp = Constant <value = int64 {0}> ()\n    acc2 = SequenceInsert (acc, y, zp)",
            ),
            "out = ConcatFromSequence <axis = 0> (s)",
        ),
        "concat",
    ),
    "several": (
        model(
            "float[N,3] out, float[M,3] rout",
            SEVERAL,
            "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)\n"
            "  rout = ConcatFromSequence <axis = 0> (r)",
        ),
        "concat+stack",
    ),
    "at_and_length": (
        model(
            "float[3] first, float[3] last, int64 count",
            append(ROW),
            "z0 = Constant <value = int64 {0}> ()\n  first = SequenceAt (s, z0)\n"
            "  m1 = Constant <value = int64 {-1}> ()\n  last = SequenceAt (s, m1)\n"
            "  count = SequenceLength (s)",
        ),
        "stack",
    ),
    "second_loop": (model("float[3] sum", append(ROW), SECOND_LOOP), "stack"),
    "with_scan_output": (
        model(
            "float[M,3] out, float[N,3] sq",
            WITH_SCAN,
            "out = ConcatFromSequence <axis = 0> (s)",
        ),
        "concat",
    ),
    "nested": (model("float[2,N,3] out", NESTED, ""), "stack"),
    "second_loop_ragged": (model("float sum", append(PREFIX), SECOND_LOOP_RAGGED), "concat"),
    "ragged_at_and_length": (
        model(
            "float[M,3] last, int64 count",
            append(PREFIX),
            "m1 = Constant <value = int64 {-1}> ()\n  last = SequenceAt (s, m1)\n"
            "  count = SequenceLength (s)",
        ),
        "concat",
    ),
}

#: Ragged lists keep their sequence where the target runs sequences (the default,
#: onnxruntime: faster than a carried Concat); the forms still written there.
KEPT_BY_DEFAULT = {
    "ragged": [],
    "ragged_flat": [],
    "prepend_ragged": [],
    "second_loop_ragged": [],
    "ragged_at_and_length": [],
    "with_scan_output": [],
    "several": ["stack"],
}

OPTIONS = {
    "default": {},
    "openvino": {"runtime": "openvino"},
    "opset11": {"target_opset": 11},
}


def feeds(count: int) -> dict:
    rng = np.random.default_rng(count)
    return {"x": rng.standard_normal((count, 3)).astype(np.float32)}


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("name", CASES, ids=str)
def test_lowered_loop_computes_what_the_original_computes(name, options):
    original, form = CASES[name]
    onnx.checker.check_model(original, full_check=True)
    result = lowered(original, **OPTIONS[options])
    forms = [form]
    if options == "default" and name in KEPT_BY_DEFAULT:
        forms = KEPT_BY_DEFAULT[name]
    else:
        assert not set(op_types(result)) & SEQUENCE_OPS, op_types(result)
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(original), **OPTIONS[options])
    assert [r.strategy for r in rewrites if r.op_type == "Loop"] == forms
    for count in (0, 1, 4):
        expected = try_run(original, feeds(count))
        actual = try_run(result, feeds(count))
        if expected is None:
            assert actual is None, f"{count} elements: the original fails, the lowered model runs"
            continue
        assert actual is not None, f"{count} elements: the lowered model fails"
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)


def test_a_loop_run_once_needs_no_check_of_the_concat():
    """A constant trip count and condition prove an element: the concat reads the stack."""
    loop = append(ROW).replace("Loop (m, t, e)", "Loop (three, t, e)")
    original = model(
        "float[3,3] out",
        "  three = Constant <value = int64 {3}> ()" + loop,
        "out = ConcatFromSequence <axis = 0, new_axis = 1> (s)",
    )
    result = lowered(original)
    assert "Reshape" not in op_types(result) and "ConstantOfShape" not in op_types(result)
    assert_same(try_run(result, feeds(4))[0], try_run(original, feeds(4))[0])


@pytest.mark.parametrize(("trips", "go"), [(0, 1), (3, 0)])
@pytest.mark.parametrize(("element", "new_axis"), [(ROW, 1), (PREFIX, 0)], ids=["stack", "concat"])
def test_a_loop_that_runs_no_trip_fails_its_concat_as_the_original_does(
    trips, go, element, new_axis
):
    """A constant trip count of 0, or a constant false condition, proves no element:
    onnxruntime's ConcatFromSequence fails on none, and so must the lowered model."""
    loop = append(element).replace("Loop (m, t, e)", "Loop (k, go, e)")
    original = model(
        "float[M,3] out",
        f"  k = Constant <value = int64 {{{trips}}}> ()\n"
        f"  go = Constant <value = bool {{{go}}}> ()" + loop,
        f"out = ConcatFromSequence <axis = 0, new_axis = {new_axis}> (s)",
    )
    result = lowered(original, runtime="openvino")
    assert not set(op_types(result)) & SEQUENCE_OPS, op_types(result)
    assert try_run(original, feeds(4)) is None
    assert try_run(result, feeds(4)) is None


RETURNED = model("seq(float) s", append(ROW), "")


@pytest.mark.parametrize(
    "options, said",
    [
        ({"runtime": "openvino"}, "--runtime openvino has no sequences"),
        ({"runtime": "tract"}, "--runtime tract has no sequences"),
        ({"target_opset": 11}, "Loop-11 carries no sequence"),
    ],
)
def test_a_returned_sequence_is_refused_where_the_target_has_none(options, said):
    with pytest.raises(LoweringError) as error:
        lowering.lower(RETURNED, **options)
    message = str(error.value)
    assert "\n" not in message
    assert said in message and "'s'" in message and "(Loop)" in message


def test_a_returned_sequence_stays_where_the_target_has_sequences():
    result = lowered(RETURNED)
    assert "SequenceInsert" in op_types(result)
    assert_same(try_run(result, feeds(3)), try_run(RETURNED, feeds(3)))


@pytest.mark.parametrize(
    "reader",
    [
        "s2 = SequenceErase (s)\n  out = SequenceLength (s2)",
        "s2 = Identity (s)\n  out = SequenceLength (s2)",
    ],
)
def test_readers_no_form_serves_leave_the_loop(reader):
    original = model("int64 out", append(ROW), reader)
    result = lowered(original)
    assert "SequenceInsert" in op_types(result)


# Accumulators no form serves: the loop's sequence stays, and why (the element's
# rank grows each iteration; a reader no form serves; a position in the middle).
STAYS = {
    "the element's rank is not proven": model(
        "int64 out",
        """
  s, v = Loop (m, t, e, x) <body = b (int64 i, bool c, seq(float) acc, float[] vi)
                                   => (bool c2, seq(float) acc2, float[] vo) {
    acc2 = SequenceInsert (acc, vi)
    zero = Constant <value = int64[1] {0}> ()
    vo = Unsqueeze (vi, zero)
    c2 = Identity (c)
  }>""",
        "out = SequenceLength (s)",
    ),
    "SequenceErase '' reads it, which no form serves": model(
        "int64 out", append(ROW), "s2 = SequenceErase (s)\n  out = SequenceLength (s2)"
    ),
    "it inserts at a position that is neither the end nor 0": model(
        "int64 out",
        append(
            ROW, "one = Constant <value = int64 {1}> ()\n    acc2 = SequenceInsert (acc, y, one)"
        ),
        "out = SequenceLength (s)",
    ),
}


def _named(proto: onnx.ModelProto) -> onnx.ModelProto:
    (loop,) = [node for node in proto.graph.node if node.op_type == "Loop"]
    loop.name = "acc_loop"
    return proto


@pytest.mark.parametrize("options", [{"runtime": "openvino"}, {"runtime": "tract"}])
@pytest.mark.parametrize("reason", list(STAYS))
def test_the_pass_says_why_an_accumulator_stays_where_the_target_has_no_sequences(reason, options):
    result = lowering.pipeline(**options)(ir.serde.deserialize_model(_named(STAYS[reason])))
    said = f"'s' stays a sequence: {reason}"
    assert result.kept == [Kept("main graph 'g'", "acc_loop", said, op_type="Loop")]


@pytest.mark.parametrize("reason", list(STAYS))
def test_nothing_is_said_where_the_sequence_runs_as_written(reason):
    result = lowering.pipeline()(ir.serde.deserialize_model(_named(STAYS[reason])))
    assert result.kept == []
    assert "SequenceInsert" in op_types(ir.serde.serialize_model(result.model))


@pytest.mark.parametrize("reason", list(STAYS))
def test_the_refusal_says_why_each_accumulator_stays(reason, tmp_path):
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_named(STAYS[reason]), source)
    said = f"'s' stays a sequence: {reason}"
    for option in (["--runtime", "tract"], ["--target-opset", "11"]):
        run = cli([source, out, *option], text=True)
        assert run.returncode == 1 and not out.exists()
        (line,) = run.stderr.splitlines()
        assert said in line
    (line,) = cli([source, out, "--runtime", "tract"], text=True).stderr.splitlines()
    assert "tract lacks ops the output holds: " in line and line.endswith(
        f"; {said}; nothing written (--allow-unsupported writes it anyway)"
    )


def test_the_summary_and_the_report_say_why_an_accumulator_stays(tmp_path):
    reason = "the element's rank is not proven"
    source, out, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_named(STAYS[reason]), source)
    command = [source, out, "--runtime", "openvino", "--allow-unsupported", "--report", report]
    run = cli(command, text=True)
    assert run.returncode == 0, run.stderr
    said = f"'s' stays a sequence: {reason}"
    lines = run.stderr.splitlines()
    assert f"onnx-lower: left 1 Loop accumulator as written in {source}: {said}" in lines
    assert "  1 in main graph 'g': 'acc_loop'" in lines
    assert lines[-1].startswith("onnx-lower: warning: ") and lines[-1].endswith(f"; {said}")
    kept = {"op": "Loop", "name": "acc_loop", "scope": "main graph 'g'", "reason": said}
    assert json.loads(report.read_text())["kept"] == [kept]


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs openvino")
@pytest.mark.parametrize("name", CASES, ids=str)
def test_openvino_runs_the_openvino_form(name, tmp_path):
    from lowering.runtimes.runners import run_openvino

    original, _ = CASES[name]
    result = lowering.lower(original, runtime="openvino")
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    for count in (1, 4):
        expected = try_run(original, feeds(count))
        assert expected is not None
        actual = run_openvino(pathlib.Path(path), list(feeds(count).values()))
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_allclose(np.asarray(a), e, rtol=1e-5, atol=1e-6)
