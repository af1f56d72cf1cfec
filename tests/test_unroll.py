"""Unrolling maps of static length, and the sequence ops that then go away."""

from __future__ import annotations

import numpy as np
import onnx
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
          ya = Add(ek0, one)
          ek1 = Mul(b, k)
          yb = Add(ek1, one)
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
    # Elements of a split are read with Gather (no split) or one Split (sizes); a
    # body that works row by row (Relu) is vectorized instead (test_ragged.py).
    "split_sizes_and_concat": (
        H
        + """
        g (float[5,2] x) => (float[2,5] y) {
          sizes = Constant <value = int64[2] {2, 3}> ()
          s = SplitToSequence(x, sizes)
          m = SequenceMap <body = body (float[N,2] e) => (float[2,N] c) { c = Transpose(e) }> (s)
          y = ConcatFromSequence <axis = 1> (m)
        }""",
        H
        + """
        g (float[5,2] x) => (float[2,5] y) {
          split_sizes = Constant <value = int64[2] {2, 3}> ()
          p0, p1 = Split <axis = 0> (x, split_sizes)
          c0 = Transpose(p0)
          c1 = Transpose(p1)
          y = Concat <axis = 1> (c0, c1)
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
    # 0 never unrolls; a split tensor, or elements proven alike, are vectorized
    # instead, with no loop either way
    vectorized = name not in ("empty", "split_scalar_size")
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
    assert _strategies(text, max_unroll=2) == ["vectorize"]  # its elements proven alike


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


def _wrapped(inner: str, wrapper: str, element: str, level: int) -> str:
    """``inner`` nodes computing ``o{level}`` from ``e{level}``, directly or in a branch."""
    if wrapper == "direct":
        return inner
    if wrapper == "if":
        return f"""o{level} = If (c) <
              then_branch = t{level} () => ({element} r{level}) {{
                {inner.replace(f"o{level} =", f"r{level} =")}
              }},
              else_branch = f{level} () => ({element} z{level}) {{ z{level} = Neg(e{level}) }}>"""
    # A Loop of one trip whose carried value is the result.
    return f"""one{level} = Constant <value = int64 {{1}}> ()
            o{level} = Loop (one{level}, , e{level}) <body = l{level} (
                int64 i{level}, bool k{level}, {element} v{level}) => (bool kk{level}, {element} r{level}) {{
              kk{level} = Identity(k{level})
              {inner.replace(f"o{level} =", f"r{level} =")}
            }}>"""


def _nested_static_maps(depth: int, wrappers: tuple[str, ...]) -> str:
    """Maps nested ``depth`` deep over static splits; each level restacks what it maps."""
    dims = [2] * (depth + 1)

    def body(level: int) -> str:
        rank = depth + 1 - level
        element = f"float[{','.join(['2'] * rank)}]" if rank else "float"
        if level == depth:
            nodes = f"o{level} = Neg(e{level})"
        else:
            nodes = f"""s{level} = SplitToSequence <keepdims = 0> (e{level})
              m{level} = SequenceMap <body = {body(level + 1)}> (s{level})
              o{level} = ConcatFromSequence <axis = 0, new_axis = 1> (m{level})"""
        wrapped = _wrapped(nodes, wrappers[level - 1], element, level) if level > 1 else nodes
        return f"b{level} ({element} e{level}) => ({element} o{level}) {{ {wrapped} }}"

    top = f"float[{','.join(map(str, dims))}]"
    return (
        H
        + f"""
        g ({top} x, bool c) => (seq(float[{",".join(["2"] * depth)}]) y) {{
          s0 = SplitToSequence <keepdims = 0> (x)
          y = SequenceMap <body = {body(1)}> (s0)
        }}"""
    )


NESTINGS = [("direct", w2) for w2 in ("direct", "if", "loop")] + [
    ("direct", w2, w3) for w2 in ("direct", "if", "loop") for w3 in ("direct", "if", "loop")
]


@pytest.mark.parametrize("wrappers", NESTINGS, ids="-".join)
@pytest.mark.parametrize("max_unroll", [16, 1])
def test_unrolled_maps_nested_at_any_depth_come_out_lowered(wrappers, max_unroll):
    """Maps two and three levels deep, directly or inside If/Loop branches, all unrolled.

    With max_unroll 1 the outer maps (length 2) keep a loop and only what is
    inside them may be unrolled; with 16 every level is unrolled.
    """
    depth = len(wrappers)
    model = parse(_nested_static_maps(depth, wrappers))
    result = lowered(model, max_unroll=max_unroll)
    rng = np.random.default_rng(depth)
    x = rng.standard_normal([2] * (depth + 1)).astype(np.float32)
    for c in (True, False):
        # The innermost body negates; a false If branch negates one level
        # early instead, which is the same, so the result is -x either way.
        assert_same(run(result, {"x": x, "c": np.array(c)}), [list(-x)])


# Extra sequences of another static length than the first input, each kind
# of static source: the trip count is the first input's length (the spec's
# own expansion loops over SequenceLength of the first input).
EXTRA_SOURCES = {
    "construct": "f = SequenceConstruct(u0, u1, u2)",
    "split_sizes": "f = SplitToSequence <axis = 0> (u, sizes)",
    "split_scalar": "f = SplitToSequence <axis = 0> (u, one)",
    "split_scalar_ragged": "f = SplitToSequence <axis = 0> (u, two)",
    "split_whole": "f = SplitToSequence <axis = 0, keepdims = 1> (u)",
}


@pytest.mark.parametrize("options", [{}, {"strategy": "loop"}, {"max_unroll": 0}], ids=str)
@pytest.mark.parametrize("first_length", [1, 2, 3])
@pytest.mark.parametrize("source", EXTRA_SOURCES)
def test_extra_sequence_of_another_static_length(source, first_length, options):
    firsts = ", ".join(f"a{i}" for i in range(first_length))
    text = (
        H
        + f"""
        g ({", ".join(f"float[1,2] a{i}" for i in range(first_length))}, float[3,2] u,
           float[1,2] u0, float[1,2] u1, float[1,2] u2) => (seq(float[1,2]) y) {{
          sizes = Constant <value = int64[3] {{1, 1, 1}}> ()
          one = Constant <value = int64 {{1}}> ()
          two = Constant <value = int64 {{2}}> ()
          s = SequenceConstruct({firsts})
          {EXTRA_SOURCES[source]}
          y = SequenceMap <body = body (float[1,2] e, float[?,2] g) => (float[1,2] c) {{
                gs = ReduceSum <keepdims = 1> (g)
                c = Add(e, gs)
              }}> (s, f)
        }}"""
    )
    result = lowered(parse(text), **options)
    rng = np.random.default_rng(first_length)
    feeds = {f"a{i}": rng.standard_normal([1, 2]).astype(np.float32) for i in range(first_length)}
    u = rng.standard_normal([3, 2]).astype(np.float32)
    feeds.update(u=u, u0=u[0:1], u1=u[1:2], u2=u[2:3])
    chunks = {"split_scalar_ragged": [u[0:2], u[2:3]]}.get(source, [u[0:1], u[1:2], u[2:3]])
    if first_length > len(chunks):  # too short: the map itself fails at run time
        with pytest.raises(Exception, match="(?i)index|out of|invalid"):
            run(result, feeds)
        return
    expected = [feeds[f"a{i}"] + chunks[i].sum(keepdims=True) for i in range(first_length)]
    assert_same(run(result, feeds), [expected])


@pytest.mark.parametrize("options", [{}, {"strategy": "loop"}, {"max_unroll": 0}], ids=str)
@pytest.mark.parametrize(("first", "extra"), [(2, 3), (3, 3), (1, 4)])
def test_two_split_inputs_of_different_lengths(first, extra, options):
    """Scan and batching take every input whole: only where the lengths agree."""
    text = (
        H
        + f"""
        g (float[{first},2] x, float[{extra},2] u) => (float[N,2] y) {{
          s = SplitToSequence <axis = 0, keepdims = 0> (x)
          f = SplitToSequence <axis = 0, keepdims = 0> (u)
          m = SequenceMap <body = body (float[2] e, float[2] g) => (float[2] c) {{
                c = Sub(e, g)
              }}> (s, f)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}"""
    )
    rng = np.random.default_rng(first)
    feeds = {
        "x": rng.standard_normal([first, 2]).astype(np.float32),
        "u": rng.standard_normal([extra, 2]).astype(np.float32),
    }
    result = lowered(parse(text), **options)
    assert_same(run(result, feeds), [feeds["x"] - feeds["u"][:first]])


def test_unrolled_copies_fold_their_rank_test_in_a_loop_body():
    """The fold works in the scope the map sits in, here a Loop body."""
    body = """body (e) => (y) {
            shape = Shape(e)
            rank = Size(shape)
            zero = Constant <value = int64 {0}> ()
            cond = Equal(rank, zero)
            y = If (cond) <
              then_branch = t () => (r) {
                one = Constant <value_ints = [1]> ()
                r = Reshape(e, one)
              },
              else_branch = f () => (r2) { r2 = Identity(e) }>
          }"""
    source = parse(
        H
        + f"""
        g (float a, float[2] b) => (float[1,1] ya, float[1,2] yb) {{
          one = Constant <value = int64 {{1}}> ()
          true = Constant <value = bool {{1}}> ()
          ya, yb = Loop (one, true) <body = lb (int64 i, bool c) => (bool c2, float[1] la, float[2] lb) {{
                c2 = Identity(c)
                s = SequenceConstruct(a, b)
                m = SequenceMap <body = {body}> (s)
                k0 = Constant <value = int64 {{0}}> ()
                k1 = Constant <value = int64 {{1}}> ()
                la = SequenceAt(m, k0)
                lb = SequenceAt(m, k1)
              }}>
        }}"""
    )
    loop_body = source.graph.node[2].attribute[0].g
    map_body = next(n for n in loop_body.node if n.op_type == "SequenceMap").attribute[0].g
    map_body.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT  # no shape
    result = lowered(source)
    assert "If" not in op_types(result)
    a, b = np.array(2.0, np.float32), np.array([1.0, 3.0], np.float32)
    assert_same(run(result, {"a": a, "b": b}), [np.array([[2.0]], np.float32), b[None]])
