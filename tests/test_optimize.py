"""``--optimize`` never folds an overridable initializer (issue 10, family 9).

An initializer that is also a graph input is a default the caller may
override; onnxscript's optimizer folds it like a constant (``Add(pos, len)``
becomes ``len``). The lowering hides those values from it.
"""

from __future__ import annotations

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
