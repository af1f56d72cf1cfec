"""What the one shape analysis proves through NonZero, If, Loop, Scan and sequences.

Each case is a model in ONNX text, the shape the proof must give each of
its outputs (None: not even the rank), and feeds. The outputs' declarations
are dropped before proving, so that what is proven is worked out, and every
claimed dim is checked against what onnxruntime computes on each feed: a
join that kept a dim one side lacks (branches of two ranks, a loop that
grows its value, a body input's declaration read as a fact on every
iteration) claims a dim onnxruntime does not give.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from lowering.analysis.proven_shapes import prove_model
from lowering.analysis.sequence_elements import NOTHING, join
from lowering.irutils.node_inference import Operand
from tests.helpers import parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'
A34 = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def _m(n: int) -> np.ndarray:
    return np.array(n, np.int64)


#: name: (model text, {output: proven shape}, feeds to run it on)
CASES = {
    "NonZero of a matrix": (
        "g (float[2,3] x) => (int64[] y) { y = NonZero(x) }",
        {"y": (2, None)},
        [{"x": np.array([[0, 1, 2], [3, 0, 0]], np.float32)}],
    ),
    "NonZero of a scalar": (
        "g (float x) => (int64[] y) { y = NonZero(x) }",
        {"y": (1, None)},
        [{"x": np.array(2, np.float32)}, {"x": np.array(0, np.float32)}],
    ),
    "boolean mask: Gather of a NonZero": (
        """g (float[N] x) => (float[] y) {
          zero = Constant <value = float {0}> ()
          keep = Greater(x, zero)
          where = NonZero(keep)
          rows = Transpose(where)
          axes = Constant <value = int64[1] {1}> ()
          picked = Squeeze(rows, axes)
          y = Gather(x, picked)
        }""",
        {"y": (None,)},
        [{"x": np.array([1, -1, 2], np.float32)}],
    ),
    "If, branches of one shape": (
        """g (bool c, float[3,4] a) => (float[] y) {
          y = If (c) <then_branch = t () => (float[] p) { p = Relu(a) },
                      else_branch = e () => (float[] q) { q = Sigmoid(a) }>
        }""",
        {"y": (3, 4)},
        [{"c": np.array(True), "a": A34}, {"c": np.array(False), "a": A34}],
    ),
    "If, branches of one rank": (
        """g (bool c, float[3,4] a) => (float[] y) {
          y = If (c) <then_branch = t () => (float[] p) { p = Relu(a) },
                      else_branch = e () => (float[] q) { q = Concat <axis = 1> (a, a) }>
        }""",
        {"y": (3, None)},
        [{"c": np.array(True), "a": A34}, {"c": np.array(False), "a": A34}],
    ),
    "If, branches of two ranks": (
        """g (bool c, float[3,4] a) => (float[] y) {
          y = If (c) <then_branch = t () => (float[] p) { p = Relu(a) },
                      else_branch = e () => (float[] q) {
                        z = Constant <value = int64[1] {0}> ()
                        q = Unsqueeze(a, z)
                      }>
        }""",
        {"y": None},
        [{"c": np.array(True), "a": A34}, {"c": np.array(False), "a": A34}],
    ),
    "If, a branch unproven": (
        """g (bool c, float[1,1,4] a) => (float[] y) {
          y = If (c) <then_branch = t () => (float[] p) { p = Relu(a) },
                      else_branch = e () => (float[] q) { q = MeanVarianceNormalization <axes = [2]> (a) }>
        }""",
        {"y": None},
        [{"c": np.array(True), "a": A34[:1, :4].reshape(1, 1, 4)}],
    ),
    "Loop, values it keeps as they are": (
        """g (int64 m, float[3,4] a) => (float[] v, int64[] k) {
          k0 = Constant <value = int64 {0}> ()
          v, k = Loop (m, , a, k0) <body = b (int64 i, bool ci, float[] vi, int64[] ki)
                                            => (bool co, float[] vo, int64[] ko) {
              co = Identity(ci)
              vo = Relu(vi)
              one = Constant <value = int64 {1}> ()
              ko = Add(ki, one)
          }>
        }""",
        {"v": (3, 4), "k": ()},
        [{"m": _m(0), "a": A34}, {"m": _m(3), "a": A34}],
    ),
    "Loop, a value that grows": (
        """g (int64 m, float[3,4] a) => (float[] v, float[] w) {
          v, w = Loop (m, , a, a) <body = b (int64 i, bool ci, float[] vi, float[] wi)
                                           => (bool co, float[] vo, float[] wo) {
              co = Identity(ci)
              vo = Concat <axis = 0> (vi, vi)
              wo = Identity(vi)
          }>
        }""",
        {"v": (None, 4), "w": (None, 4)},
        [{"m": _m(0), "a": A34}, {"m": _m(1), "a": A34}, {"m": _m(3), "a": A34}],
    ),
    "Loop, a body input declared as on the first iteration": (
        """g (int64 m, float[3,4] a) => (float[] v, float[] u) {
          v, u = Loop (m, , a, a) <body = b (int64 i, bool ci, float[3,4] vi, float[3,4] ui)
                                           => (bool co, float[] vo, float[] uo) {
              co = Identity(ci)
              vo = Concat <axis = 0> (vi, vi)
              uo = Identity(vi)
          }>
        }""",
        {"v": (None, 4), "u": (None, 4)},
        [{"m": _m(2), "a": A34}],
    ),
    "Loop, a value whose rank grows": (
        """g (int64 m, float[3,4] a) => (float[] r) {
          r = Loop (m, , a) <body = b (int64 i, bool ci, float[] ri) => (bool co, float[] ro) {
              co = Identity(ci)
              z = Constant <value = int64[1] {0}> ()
              ro = Unsqueeze(ri, z)
          }>
        }""",
        {"r": None},
        [{"m": _m(0), "a": A34}, {"m": _m(2), "a": A34}],
    ),
    "Loop, scan outputs of a constant count": (
        """g (float[N] a) => (float[] s, float[] t) {
          m = Constant <value = int64 {3}> ()
          yes = Constant <value = bool {1}> ()
          s, t = Loop (m, yes) <body = b (int64 i, bool ci) => (bool co, float[] so, float[R] to) {
              co = Identity(ci)
              so = Relu(a)
              to = Sigmoid(a)
          }>
        }""",
        {"s": (None, "N"), "t": (None, None)},  # R: the body's name, not the graph's
        [{"a": np.ones(5, np.float32)}],
    ),
    "Loop, scan outputs of a count from data": (
        """g (int64 m, float[3] a) => (int64[] s, float[] t) {
          yes = Constant <value = bool {1}> ()
          s, t = Loop (m, yes) <body = b (int64 i, bool ci) => (bool co, int64[] so, float[3] to) {
              co = Identity(ci)
              so = NonZero(a)
              to = Sigmoid(a)
          }>
        }""",
        # After no iteration onnxruntime gives [0] and the shape its own
        # inference finds for the body output ([0] alone where it finds no
        # rank); the proof claims one only where the body output is declared.
        {"s": None, "t": (None, 3)},
        [{"m": _m(0), "a": np.ones(3, np.float32)}, {"m": _m(2), "a": np.ones(3, np.float32)}],
    ),
    "Loop, a list of rows of one shape": (
        """g (int64 m, float[3] a) => (float[] y, float[] z, float[] w) {
          e = SequenceEmpty <dtype = 1> ()
          s = Loop (m, , e) <body = b (int64 i, bool ci, seq(float[]) si)
                                     => (bool co, seq(float[]) so) {
              co = Identity(ci)
              r = Relu(a)
              so = SequenceInsert(si, r)
          }>
          y = ConcatFromSequence <axis = 0> (s)
          z = ConcatFromSequence <axis = -1, new_axis = 1> (s)
          zero = Constant <value = int64 {0}> ()
          w = SequenceAt(s, zero)
        }""",
        {"y": (None,), "z": (3, None), "w": (3,)},
        [{"m": _m(1), "a": np.ones(3, np.float32)}, {"m": _m(3), "a": np.ones(3, np.float32)}],
    ),
    "Loop, a list of ragged rows": (
        """g (int64 m, float[5] a) => (float[] y) {
          e = SequenceEmpty <dtype = 1> ()
          s = Loop (m, , e) <body = b (int64 i, bool ci, seq(float[]) si)
                                     => (bool co, seq(float[]) so) {
              co = Identity(ci)
              zero = Constant <value = int64[1] {0}> ()
              one = Constant <value = int64[1] {1}> ()
              ii = Unsqueeze(i, zero)
              end = Add(ii, one)
              r = Slice(a, zero, end)
              so = SequenceInsert(si, r)
          }>
          y = ConcatFromSequence <axis = 0> (s)
        }""",
        {"y": (None,)},
        [{"m": _m(3), "a": np.ones(5, np.float32)}],
    ),
    "Loop, a list of rows of two ranks": (
        """g (int64 m, float[3] a) => (float[] w) {
          e = SequenceEmpty <dtype = 1> ()
          s, v = Loop (m, , e, a) <body = b (int64 i, bool ci, seq(float[]) si, float[] vi)
                                           => (bool co, seq(float[]) so, float[] vo) {
              co = Identity(ci)
              so = SequenceInsert(si, vi)
              z = Constant <value = int64[1] {0}> ()
              vo = Unsqueeze(vi, z)
          }>
          last = Constant <value = int64 {-1}> ()
          w = SequenceAt(s, last)
        }""",
        {"w": None},
        [{"m": _m(1), "a": np.ones(3, np.float32)}, {"m": _m(3), "a": np.ones(3, np.float32)}],
    ),
    "SequenceConstruct, read back": (
        """g (float[2,3] a, float[2,3] b, float[2,5] c) => (float[] x, float[] y, float[] z) {
          s = SequenceConstruct(a, b)
          one = Constant <value = int64 {1}> ()
          x = SequenceAt(s, one)
          y = ConcatFromSequence <axis = 1> (s)
          t = SequenceConstruct(a, c)
          z = ConcatFromSequence <axis = 1> (t)
        }""",
        {"x": (2, 3), "y": (2, None), "z": (2, None)},
        [{"a": A34[:2, :3].copy(), "b": A34[1:, 1:].copy(), "c": np.ones((2, 5), np.float32)}],
    ),
    "SplitToSequence, each form": (
        """g (float[6,4] x) => (float[] p, float[] q, float[] r, float[] s, float[] t) {
          zero = Constant <value = int64 {0}> ()
          two = Constant <value = int64 {2}> ()
          four = Constant <value = int64 {4}> ()
          even = Constant <value = int64[2] {3, 3}> ()
          uneven = Constant <value = int64[2] {2, 4}> ()
          sp = SplitToSequence(x, two)
          p = SequenceAt(sp, zero)
          sq = SplitToSequence(x, four)
          q = SequenceAt(sq, zero)
          sr = SplitToSequence <axis = 1, keepdims = 0> (x)
          r = SequenceAt(sr, zero)
          ss = SplitToSequence(x, even)
          s = SequenceAt(ss, zero)
          st = SplitToSequence(x, uneven)
          t = SequenceAt(st, zero)
        }""",
        {"p": (2, 4), "q": (None, 4), "r": (6,), "s": (3, 4), "t": (None, 4)},
        [{"x": A34.reshape(-1)[:24].repeat(2).reshape(6, 4)}],
    ),
    "If, returning lists": (
        """g (bool c, float[3] a) => (float[] y, float[] z) {
          s, t = If (c) <then_branch = tb () => (seq(float[]) p, seq(float[]) u) {
                           p = SequenceConstruct(a, a)
                           u = SequenceConstruct(a)
                         },
                         else_branch = eb () => (seq(float[]) q, seq(float[]) w) {
                           q = SequenceConstruct(a)
                           z1 = Constant <value = int64[1] {0}> ()
                           aa = Unsqueeze(a, z1)
                           w = SequenceConstruct(aa)
                         }>
          zero = Constant <value = int64 {0}> ()
          y = SequenceAt(s, zero)
          z = SequenceAt(t, zero)
        }""",
        {"y": (3,), "z": None},
        [
            {"c": np.array(True), "a": np.ones(3, np.float32)},
            {"c": np.array(False), "a": np.ones(3, np.float32)},
        ],
    ),
    "Scan, a state and a scan output": (
        """g (float[5,3] x, float[3] s0) => (float[] s, float[] ys, float[] zs) {
          s, ys, zs = Scan <num_scan_inputs = 1, scan_output_axes = [0, 1],
                            body = b (float[] si, float[] xi) => (float[] so, float[] yo, float[] zo) {
              so = Add(si, xi)
              yo = Relu(xi)
              zo = Sigmoid(xi)
          }> (s0, x)
        }""",
        {"s": (3,), "ys": (5, 3), "zs": (3, 5)},
        [{"x": np.ones((5, 3), np.float32), "s0": np.zeros(3, np.float32)}],
    ),
}


def _model(text: str) -> onnx.ModelProto:
    """The case's model, its outputs' shapes undeclared (dtype kept)."""
    model = parse(H + "\n" + text)
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    return model


def _proven(model: onnx.ModelProto, fill: bool = True) -> dict[str, tuple | None]:
    graph = ir.serde.deserialize_model(model)
    proof = prove_model(graph, fill=fill)
    return {v.name: proof.shape(v) for v in graph.graph.outputs}


@pytest.mark.parametrize("name", list(CASES))
def test_what_is_proven(name):
    text, expected, _ = CASES[name]
    proven = _proven(_model(text))
    assert {k: proven[k] for k in expected} == expected


@pytest.mark.parametrize("name", list(CASES))
def test_what_is_proven_is_what_onnxruntime_computes(name):
    text, _, feeds = CASES[name]
    model = _model(text)
    proven = _proven(model)
    for feed in feeds:
        for output, actual in zip(model.graph.output, run(model, feed), strict=True):
            shape = proven[output.name]
            if shape is None:
                continue
            where = f"{output.name} on { ({k: v.shape for k, v in feed.items()}) }"
            assert len(shape) == actual.ndim, f"{where}: {shape} != {actual.shape}"
            for dim, size in zip(shape, actual.shape, strict=True):
                assert not isinstance(dim, int) or dim == size, (
                    f"{where}: {shape} != {actual.shape}"
                )


def test_a_doubted_value_through_a_loop_is_proven_without_fill():
    """Without ``fill``, a value ONNX may size wrong is still worked out
    through a Loop: a NonZero of a scalar, carried."""
    text = """g (int64 m, float x) => (int64[] v) {
      nz = NonZero(x)
      v = Loop (m, , nz) <body = b (int64 i, bool ci, int64[] vi) => (bool co, int64[] vo) {
          co = Identity(ci)
          vo = Identity(vi)
      }>
    }"""
    assert _proven(_model(text), fill=False) == {"v": (1, None)}


@pytest.mark.parametrize(
    ("a", "b", "joined"),
    [
        ((3, "N"), (3, "N"), (3, "N")),
        ((3, 4), (3, 5), (3, None)),
        ((3,), (1, 3), None),
        ((3,), None, None),
        ((), (), ()),
    ],
)
def test_the_join_keeps_what_both_sides_have(a, b, joined):
    float = ir.DataType.FLOAT
    assert join(Operand(float, a), Operand(float, b)) == Operand(float, joined)
    assert join(NOTHING, Operand(float, a)) == Operand(float, a)
    assert join(Operand(float, a), None) is None
