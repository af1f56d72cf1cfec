"""``--optimize`` never folds an overridable initializer (issue 10, family 9).

An initializer that is also a graph input is a default the caller may
override; onnxscript's optimizer folds it like a constant (``Add(pos, len)``
becomes ``len``). The lowering hides those values from it.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

import lowering
from lowering.cli import main
from tests.helpers import assert_same, lowered, parse, run

OVERRIDABLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[2]) s, float[2] t, int64 pos, float[2] scale)
  => (seq(float[2]) y, seq(float[2]) m, float[2] k, float[2] q)
  <int64 pos = {0}, int64 len = {1}, float[2] scale = {2.0, 2.0}> {
  [the_map] m = SequenceMap <body = body (float[2] e) => (float[2] r) { r = Mul(e, scale) }> (s)
  p = Add(pos, len)
  [insert] y = SequenceInsert(s, t, p)
  k = Mul(scale, scale)
  twice = Add(len, len)
  twice_f = Cast <to = 1> (twice)
  q = Mul(t, twice_f)
}"""


def _oracle(s, t, pos, scale):
    y = list(s)
    y.insert(pos + 1, t)
    return [y, [e * scale for e in s], scale * scale, t * 2]


@pytest.mark.parametrize("pos", [None, -1, -3, 1])
@pytest.mark.parametrize("scale", [None, 5.0])
def test_overridden_initializers_still_count_after_optimize(pos, scale):
    result = lowered(parse(OVERRIDABLE), optimize=True)
    graph_inputs = {i.name for i in result.graph.input}
    assert {"pos", "scale"} <= graph_inputs
    assert {"pos", "scale"} <= {i.name for i in result.graph.initializer}
    rng = np.random.default_rng(0)
    s = [rng.standard_normal(2).astype(np.float32) for _ in range(3)]
    t = np.full(2, 9, np.float32)
    feeds = {"s": s, "t": t}
    if pos is not None:
        feeds["pos"] = np.array(pos, np.int64)
    if scale is not None:
        feeds["scale"] = np.full(2, scale, np.float32)
    expected = _oracle(
        s, t, 0 if pos is None else pos, np.full(2, 2.0 if scale is None else scale, np.float32)
    )
    assert_same(run(result, feeds), expected)


def test_the_command_line_keeps_them_too(tmp_path):
    onnx.save(parse(OVERRIDABLE), tmp_path / "in.onnx")
    assert main(["-q", "--optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    s = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    t = np.full(2, 9, np.float32)
    feeds = {"s": s, "t": t, "pos": np.array(-1, np.int64)}
    assert_same(run(onnx.load(tmp_path / "out.onnx"), feeds)[0], [t, *s])
    feeds["pos"] = np.array(1, np.int64)
    assert_same(run(onnx.load(tmp_path / "out.onnx"), feeds)[0], [*s, t])


def test_true_constants_are_still_folded():
    """Only overridable values are hidden: ``Add(len, len)`` of a plain initializer folds."""
    result = lowering.lower(parse(OVERRIDABLE), optimize=True)
    adds = [list(n.input) for n in result.graph.node if n.op_type == "Add"]
    assert [a for a in adds if "len" in a] == [["pos", "len"]]
    muls = [list(n.input) for n in result.graph.node if n.op_type == "Mul"]
    assert ["scale", "scale"] in muls  # scale is overridable: not folded


def test_a_loop_keeps_its_empty_condition_slot():
    """onnxscript's optimizer trims ``Loop(M, "")`` to ``Loop(M)``; it is put back."""
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[T,2] xs) => (int64[?,?] out) {
          s = SequenceEmpty <dtype = 1> ()
          m = Constant <value = int64 {1}> ()
          out = Loop (m, "") <body = lb (int64 i, bool c) => (bool c2, int64[?] counts) {
            counts = Scan (xs) <body = sb (float[2] row) => (int64 n) {
              y = SequenceMap <body = b (float[R] e) => (float[R] v) { v = Identity(e) }> (s)
              n = SequenceLength(y)
            }, num_scan_inputs = 1>
            c2 = Identity(c)
          }>
        }"""
    )
    result = lowered(model, optimize=True)
    xs = np.zeros((3, 2), np.float32)
    assert_same(run(result, {"xs": xs}), [np.zeros((1, 3), np.int64)])


# Empty sequences that declare different element shapes. A map over an
# empty sequence of static length becomes ``SequenceEmpty``, typed as its
# output; every element shape is true of an empty sequence, so two such
# outputs may declare shapes that contradict each other. onnxscript's
# common-subexpression elimination merges equal SequenceEmpty nodes (it
# compares op, inputs and attributes, not types), and the readers of the one
# removed then read the other's declaration: an Identity that returns a
# scalar sequence as seq(float[1]), a SequenceAt typed by the wrong shape.
# element shape: the body computing it from e: float[3]
EMPTY_ELEMENTS = {
    "": "r = ReduceSum <keepdims = 0> (e)",  # a scalar
    "[1]": "r = ReduceSum <keepdims = 1> (e)",
    "[3]": "r = Identity(e)",
    "[2,3]": "r = Concat <axis = 0> (row, row)",
}
# Who else reads an empty sequence: (outputs, nodes). ``k`` is fed False, so
# the guarded SequenceAt never runs (it would fail on an empty sequence),
# but the optimizer cannot fold the If away, and the type checker reads it.
EMPTY_READERS = {
    "outputs": ("", ""),
    "guarded_read": (
        ", float{second} z",
        """z = If (k) <
             then_branch = tb () => (float{second} z1) {{ z1 = SequenceAt(y2, zero) }},
             else_branch = eb () => (float{second} z2) {{ z2 = Identity(fallback) }}>""",
    ),
    # The model's own SequenceEmpty comes first, so it is the one kept: not a
    # graph output, the graph output y1 takes it over, renamed, with its type.
    "own_empty_first": (
        ", float[5] z",
        """z = If (k) <
             then_branch = tb () => (float[5] z1) {{ z1 = SequenceAt(own, zero) }},
             else_branch = eb () => (float[5] z2) {{ z2 = Identity(fallback5) }}>""",
    ),
}
EMPTY_PAIRS = [("", "[1]"), ("[1]", "[3]"), ("[3]", "[2,3]"), ("[2,3]", "")]


def _empty_model(first: str, second: str, reader: str) -> onnx.ModelProto:
    outputs, nodes = EMPTY_READERS[reader]
    zeros = {"": "{0.0}", "[1]": "{0.0}", "[3]": "{0.0, 0.0, 0.0}", "[2,3]": "{0,0,0,0,0,0}"}
    own = "own = SequenceEmpty <dtype = 1> ()" if reader == "own_empty_first" else ""
    return parse(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[3] t, bool k) => (seq(float{first}) y1, seq(float{second}) y2{outputs.format(second=second)})
          <seq(float[5]) own, float{second} fallback = {zeros[second]},
           float[5] fallback5 = {{1, 2, 3, 4, 5}}> {{
          {own}
          zero = Constant <value = int64 {{0}}> ()
          s = SequenceEmpty <dtype = 1> ()
          y1 = SequenceMap <body = b1 (float[3] e) => (float{first} r) {{
            axes = Constant <value = int64[1] {{0}}> ()
            row = Unsqueeze(e, axes)
            {EMPTY_ELEMENTS[first]}
          }}> (s)
          y2 = SequenceMap <body = b2 (float[3] e) => (float{second} r) {{
            axes = Constant <value = int64[1] {{0}}> ()
            row = Unsqueeze(e, axes)
            {EMPTY_ELEMENTS[second]}
          }}> (s)
          {nodes.format(second=second)}
        }}"""
    )


@pytest.mark.parametrize("reader", list(EMPTY_READERS))
@pytest.mark.parametrize(("first", "second"), EMPTY_PAIRS)
def test_equal_empty_sequences_of_different_declared_shapes(first, second, reader):
    model = _empty_model(first, second, reader)
    result = lowered(model, optimize=True)
    # The interface is the one declared, output by output.
    assert [o.type for o in result.graph.output] == [o.type for o in model.graph.output]
    feeds = {"t": np.ones(3, np.float32), "k": np.array(False)}
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    guarded = {"outputs": [], "guarded_read": ["fallback"], "own_empty_first": ["fallback5"]}
    assert_same(run(result, feeds), [[], [], *(initializers[n] for n in guarded[reader])])


# Shrunk by scripts/fuzz.py (20,000-example runs of 2026-11-30): bodies naming
# a dim per run (a function inlined per call, an If branch unrolled per
# element) whose copies read elements of different sizes.
FUZZ = pathlib.Path(__file__).parent / "data" / "fuzz"
NAMED_DIMS = ["named_dims_function_inlined", "named_dims_function_inlined_2"]
NAMED_DIMS += ["named_dims_unrolled_branch"]


def _fuzz_feeds(name: str) -> dict:
    stored = np.load(FUZZ / f"{name}.npz")
    feeds: dict = {k: stored[k] for k in stored.files if "__" not in k}
    for key in stored.files:
        if key.endswith("__len"):
            sequence = key.removesuffix("__len")
            feeds[sequence] = [stored[f"{sequence}__{i}"] for i in range(int(stored[key]))]
    return feeds


@pytest.mark.parametrize("name", NAMED_DIMS)
def test_copies_of_a_body_do_not_share_the_dims_it_names(name):
    """The optimizer spread one named dim to elements of different sizes, and onnxruntime
    reused one buffer for them ("Shape mismatch attempting to re-use buffer")."""
    model = onnx.load(FUZZ / f"{name}.onnx")
    feeds = _fuzz_feeds(name)
    expected = run(lowering.lower(model), feeds)
    result = lowering.lower(model, optimize=True)
    onnx.checker.check_model(result, full_check=True)
    assert_same(run(result, feeds), expected)
