"""Unrolling maps of static length, and the sequence ops that then go away."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import lowering
from tests.golden import canonical_text
from tests.helpers import assert_same, lowered, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

GOLDEN = {
    # Each element gets its own copy of the body; reads of the result take
    # the tensors directly, and the sequences disappear.
    "construct_then_read": (
        H
        + """
        g (float[2] a, float[3] b, float k) => (float[2] ya, float[3] yb) {
          s = SequenceConstruct(a, b)
          m = SequenceMap <body = body (float[N] e) => (float[N] c) <float[1] one = {1.0}> {
                ek = Mul(e, k)
                c = Add(ek, one)
              }> (s)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {-1}> ()
          ya = SequenceAt(m, i0)
          yb = SequenceAt(m, i1)
        }""",
        H
        + """
        g (float[2] a, float[3] b, float k) => (float[2] ya, float[3] yb) {
          one = Constant <value = float[1] one {1.0}> ()
          ek0 = Mul(a, k)
          c0 = Add(ek0, one)
          ek1 = Mul(b, k)
          c1 = Add(ek1, one)
          ya = Identity(c0)
          yb = Identity(c1)
        }""",
    ),
    # A result that is itself an output stays a sequence, built by construct.
    "sequence_output": (
        H
        + """
        g (float[2] a, float[2] b) => (seq(float[2]) y, int64 n) {
          s = SequenceConstruct(a, b)
          y = SequenceMap <body = body (float[2] e) => (float[2] c) { c = Neg(e) }> (s)
          n = SequenceLength(y)
        }""",
        H
        + """
        g (float[2] a, float[2] b) => (seq(float[2]) y, int64 n) {
          c0 = Neg(a)
          c1 = Neg(b)
          y = SequenceConstruct(c0, c1)
          n = Constant <value = int64 {2}> ()
        }""",
    ),
    "empty": (
        H
        + """
        g (float[2] a) => (seq(int64[1]) y) {
          s = SequenceEmpty <dtype = 1> ()
          y = SequenceMap <body = body (float[N] e) => (int64[1] c) { c = Shape(e) }> (s)
        }""",
        H
        + """
        g (float[2] a) => (seq(int64[1]) y) {
          y = SequenceEmpty <dtype = 7> ()
        }""",
    ),
    # Elements of a split are read with Gather (no split) or one Split (sizes).
    "split_sizes_and_concat": (
        H
        + """
        g (float[5,2] x) => (float[5,2] y) {
          sizes = Constant <value = int64[2] {2, 3}> ()
          s = SplitToSequence(x, sizes)
          m = SequenceMap <body = body (float[N,2] e) => (float[N,2] c) { c = Relu(e) }> (s)
          y = ConcatFromSequence <axis = 0> (m)
        }""",
        H
        + """
        g (float[5,2] x) => (float[5,2] y) {
          sizes = Constant <value = int64[2] {2, 3}> ()
          split_sizes = Constant <value = int64[2] {2, 3}> ()
          p0, p1 = Split <axis = 0> (x, split_sizes)
          c0 = Relu(p0)
          c1 = Relu(p1)
          y = Concat <axis = 0> (c0, c1)
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    source, expected = GOLDEN[name]
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


STATIC_SOURCES = {
    "construct_1": ("s = SequenceConstruct(a)", lambda f: [f["a"]]),
    "construct_3": ("s = SequenceConstruct(a, b, a)", lambda f: [f["a"], f["b"], f["a"]]),
    "empty": ("s = SequenceEmpty <dtype = 1> ()", lambda f: []),
    "split_keepdims_0": (
        "s = SplitToSequence <axis = 1, keepdims = 0> (w)",
        lambda f: [f["w"][:, i] for i in range(3)],
    ),
    "split_keepdims_1": (
        "s = SplitToSequence <axis = -1> (w)",
        lambda f: [f["w"][:, i : i + 1] for i in range(3)],
    ),
    "split_scalar_size": (
        "two = Constant <value = int64 {2}> ()\n s = SplitToSequence <axis = 1> (w, two)",
        lambda f: [f["w"][:, :2], f["w"][:, 2:]],
    ),
    "insert_chain": (
        "t = SequenceConstruct(a)\n s = SequenceInsert(t, b)",
        lambda f: [f["a"], f["b"]],
    ),
}

STATIC_MAP = (
    H
    + """
g (float[4] a, float[4] b, float[4,3] w, float k) => (seq(float{dims}) y, seq(int64[R]) z) {{
  {build}
  y, z = SequenceMap <body = body (e, kk) => (c, d) {{
        c = Mul(e, kk)
        d = Shape(e)
      }}> (s, k)
}}"""
)


@pytest.mark.parametrize("max_unroll", [16, 0])
@pytest.mark.parametrize("name", list(STATIC_SOURCES))
def test_static_sources_unroll_and_compute_the_same(name, max_unroll):
    build, elements = STATIC_SOURCES[name]
    dims = "[N,M]" if name in ("split_keepdims_1", "split_scalar_size") else "[N]"
    source = parse(STATIC_MAP.format(build=build, dims=dims))
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.standard_normal(4).astype(np.float32),
        "b": rng.standard_normal(4).astype(np.float32),
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "k": np.array(1.5, np.float32),
    }
    expected = elements(feeds)
    result = lowered(source, max_unroll=max_unroll)
    # 0 never unrolls; a split tensor is vectorized instead, with no loop either way
    vectorized = name in ("split_keepdims_0", "split_keepdims_1")
    assert ("Loop" in op_types(result)) == (max_unroll == 0 and not vectorized)
    assert_same(
        run(result, feeds),
        [[e * feeds["k"] for e in expected], [np.array(e.shape, np.int64) for e in expected]],
    )


def _strategies(text: str, **options) -> list[str]:
    model = ir.serde.deserialize_model(parse(text))
    return [r.strategy for r in lowering.lower_in_place(model, **options)]


def test_max_unroll_is_the_limit():
    text = STATIC_MAP.format(build="s = SequenceConstruct(a, b, a)", dims="[N]")
    assert _strategies(text, max_unroll=3) == ["unroll"]
    assert _strategies(text, max_unroll=2) == ["loop"]


def test_elimination_turns_concat_of_construct_into_concat():
    source = parse(
        H
        + """
    g (float[2] a, float[2] b) => (float[4] y, float[2,2] z) {
      s = SequenceConstruct(a, b)
      y = ConcatFromSequence <axis = 0> (s)
      z = ConcatFromSequence <axis = 0, new_axis = 1> (s)
      m = SequenceMap <body = body (float[2] e) => (float[2] c) { c = Neg(e) }> (s)
      n = SequenceLength(m)
    }"""
    )
    result = lowered(source)
    assert [t for t in op_types(result) if "Sequence" in t] == []
    a, b = np.ones(2, np.float32), np.full(2, 2, np.float32)
    assert_same(run(result, {"a": a, "b": b}), [np.concatenate([a, b]), np.stack([a, b])])
