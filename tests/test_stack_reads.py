"""Uniform maps are read from their stack; insert chains become constructs.

lowering.maps.stack_reads.read_stack_in_readers: SequenceAt, SequenceLength and
ConcatFromSequence of a uniform map read the Loop's stacked output with
Gather (Slice + Squeeze for strings), Shape/Gather, Transpose/Reshape, and
no sequence is built. sequence_elimination: SequenceEmpty -> SequenceInsert
chains at static positions become SequenceConstruct, then Concat.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

from lowering.runtimes.child import compile_openvino
from tests.golden import canonical_text
from tests.helpers import assert_same, lowered, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

GOLDEN = {
    # A split's rows, mapped, then read by SequenceAt and SequenceLength:
    # the stack is read directly, and no sequence op is left.
    "at_and_length_read_the_stack": (
        H
        + """
        g (float[T,4] x, int32 i) => (float[4] last, float[4] at, int64 n) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Relu(r) }> (rows)
          k = Constant <value = int64 {-1}> ()
          last = SequenceAt(m, k)
          at = SequenceAt(m, i)
          n = SequenceLength(m)
        }""",
        H
        + """
        g (float[T,4] x, int32 i) => (float[4] last, float[4] at, int64 n) {
          shape = Shape(x)
          axis = Constant <value = int64 {0}> ()
          count = Gather(shape, axis)
          true = Constant <value = bool {1}> ()
          stack = Loop (count, true) <body = body (int64 it, bool cond) => (bool cond_out, float[4] c) {
                r = Gather <axis = 0> (x, it)
                c = Relu(r)
                cond_out = Identity(cond)
              }>
          minus_one = Constant <value = int64 {-1}> ()
          last = Gather <axis = 0> (stack, minus_one)
          i64 = Cast <to = 7> (i)
          at = Gather <axis = 0> (stack, i64)
          stack_shape = Shape(stack)
          zero2 = Constant <value = int64[1] {0}> ()
          one = Constant <value = int64[1] {1}> ()
          first = Slice(stack_shape, zero2, one)
          ones = ConstantOfShape <value = int64[1] {1}> (first)
          n = ReduceSum <keepdims = 0> (ones)
        }""",
    ),
    # onnxruntime's Gather is wrong on strings: Slice + Squeeze instead.
    # A concat along another axis than 0 is a Transpose of the stack.
    # onnxruntime's Loop can lose strings in its scan outputs: a string map is
    # not stacked by a Loop, but built as a sequence, which its readers read.
    "strings_are_not_stacked_by_a_loop": (
        H
        + """
        g (seq(string[2]) xs) => (string[2] first, string[2,N] cols) {
          m = SequenceMap <body = body (string[2] e) => (string[2] c) { c = Identity(e) }> (xs)
          k = Constant <value = int64 {0}> ()
          first = SequenceAt(m, k)
          cols = ConcatFromSequence <axis = 1, new_axis = 1> (m)
        }""",
        H
        + """
        g (seq(string[2]) xs) => (string[2] first, string[2,N] cols) {
          count = SequenceLength(xs)
          true = Constant <value = bool {1}> ()
          empty = SequenceEmpty <dtype = 8> ()
          m = Loop (count, true, empty) <body = body (int64 it, bool cond, seq(string[2]) acc)
                                                => (bool cond_out, seq(string[2]) acc_next) {
                e = SequenceAt(xs, it)
                c = Identity(e)
                acc_next = SequenceInsert(acc, c)
                cond_out = Identity(cond)
              }>
          k = Constant <value = int64 {0}> ()
          first = SequenceAt(m, k)
          cols = ConcatFromSequence <axis = 1, new_axis = 1> (m)
        }""",
    ),
    # paddle2onnx's array_to_tensor around an unrolled map: the inserts are
    # a SequenceConstruct, then a Concat of Unsqueezes.
    "insert_chain_becomes_concat": (
        H
        + """
        g (float[2] a, float[2] b) => (float[2,2] y) {
          s = SequenceConstruct(a, b)
          m = SequenceMap <body = body (float[2] e) => (float[2] c) { c = Neg(e) }> (s)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {1}> ()
          m0 = SequenceAt(m, i0)
          m1 = SequenceAt(m, i1)
          empty = SequenceEmpty <dtype = 1> ()
          one = SequenceInsert(empty, m0)
          two = SequenceInsert(one, m1)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (two)
        }""",
        H
        + """
        g (float[2] a, float[2] b) => (float[2,2] y) {
          c0 = Neg(a)
          c1 = Neg(b)
          axes = Constant <value = int64[1] {0}> ()
          u0 = Unsqueeze(c0, axes)
          u1 = Unsqueeze(c1, axes)
          y = Concat <axis = 0> (u0, u1)
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name, without_vectorizing):
    source, expected = GOLDEN[name]
    assert canonical_text(lowered(parse(source))) == canonical_text(parse(expected))


READS = (
    H
    + """
g (seq(float[3]) xs, {index_type} i) => (float[3] at, float[3] at_k, int64 n, float[N,3] stacked,
                                      float[3,N] cols, float[M] flat) {{
  m = SequenceMap <body = body (float[3] e) => (float[3] c) {{
        two = Constant <value = float {{2.0}}> ()
        c = Mul(e, two)
      }}> (xs)
  k = Constant <value = int64 {{{k}}}> ()
  at = SequenceAt(m, i)
  at_k = SequenceAt(m, k)
  n = SequenceLength(m)
  stacked = ConcatFromSequence <axis = 0, new_axis = 1> (m)
  cols = ConcatFromSequence <axis = -1, new_axis = 1> (m)
  flat = ConcatFromSequence <axis = 0> (m)
}}"""
)


@pytest.mark.parametrize("vectorized", [False, True], ids=["uniform", "vectorized"])
@pytest.mark.parametrize("index_type", ["int64", "int32", "int64[1]", "int32[1]"])
@pytest.mark.parametrize("n", [1, 3])
def test_every_position_reads_what_a_list_would(n, index_type, vectorized, request):
    """Every position in -n..n-1, as the dynamic and as the constant index.

    Both forms that produce a stack read it: the uniform Loop's, and the
    vectorized body's (which stacks the input sequence first).
    """
    if not vectorized:
        request.getfixturevalue("without_vectorizing")
    rng = np.random.default_rng(n)
    xs = [rng.standard_normal(3).astype(np.float32) for _ in range(n)]
    mapped = [2 * x for x in xs]  # the oracle: a list comprehension
    dtype = np.int32 if index_type.startswith("int32") else np.int64
    for position in range(-n, n):
        result = lowered(parse(READS.format(index_type=index_type, k=position)))
        ops = [op for op in op_types(result) if "Sequence" in op]
        if vectorized:  # the input is stacked once (with a filler: it may be empty)
            assert sorted(ops) == ["ConcatFromSequence", "SequenceInsert"]
        else:  # the input's: count, element
            assert sorted(ops) == ["SequenceAt", "SequenceLength"]
        i = np.array(position if "[" not in index_type else [position], dtype)
        assert_same(
            run(result, {"xs": xs, "i": i}),
            [
                mapped[position],
                mapped[position],
                np.array(n, np.int64),
                np.stack(mapped),
                np.stack(mapped, axis=-1),
                np.concatenate(mapped),
            ],
        )


def test_empty_input_has_length_zero():
    """No elements: the stack is [0, 3], its count 0, the concats empty."""
    source = parse(
        H
        + """
        g (seq(float[3]) xs) => (int64 n, float[N,3] stacked) {
          m = SequenceMap <body = body (float[3] e) => (float[3] c) { c = Neg(e) }> (xs)
          n = SequenceLength(m)
          stacked = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""
    )
    result = lowered(source)
    assert "SplitToSequence" not in op_types(result)
    assert_same(run(result, {"xs": []}), [np.array(0, np.int64), np.zeros((0, 3), np.float32)])


def test_readers_in_a_branch_read_the_stack_too():
    source = parse(
        H
        + """
        g (seq(float[3]) xs, bool c) => (float[3] y) {
          m = SequenceMap <body = body (float[3] e) => (float[3] d) { d = Neg(e) }> (xs)
          y = If (c) <
            then_branch = t () => (r) {
              one = Constant <value = int64 {1}> ()
              r = SequenceAt(m, one)
            },
            else_branch = f () => (q) {
              n = SequenceLength(m)
              nf = Cast <to = 1> (n)
              three = Constant <value = int64[1] {3}> ()
              q = Expand(nf, three)
            }>
        }"""
    )
    result = lowered(source)
    assert "SplitToSequence" not in op_types(result)
    xs = [np.full(3, k, np.float32) for k in range(4)]
    for c in (True, False):
        expected = -xs[1] if c else np.full(3, 4, np.float32)
        assert_same(run(result, {"xs": xs, "c": np.array(c)}), [expected])


def test_other_readers_keep_the_split():
    """A reader the stack cannot serve (SequenceErase) still reads a sequence."""
    source = parse(
        H
        + """
        g (seq(float[3]) xs) => (float[3] y, seq(float[3]) rest) {
          m = SequenceMap <body = body (float[3] e) => (float[3] d) { d = Neg(e) }> (xs)
          zero = Constant <value = int64 {0}> ()
          y = SequenceAt(m, zero)
          rest = SequenceErase(m, zero)
        }"""
    )
    result = lowered(source)
    assert op_types(result).count("SplitToSequence") == 1
    assert "Gather" in op_types(result)
    xs = [np.full(3, k, np.float32) for k in range(3)]
    assert_same(run(result, {"xs": xs}), [-xs[0], [-xs[1], -xs[2]]])


def test_map_read_by_at_and_length_runs_in_openvino(tmp_path: pathlib.Path):
    pytest.importorskip("openvino", reason="OpenVINO is not installable here")
    source, _ = GOLDEN["at_and_length_read_the_stack"]
    result = lowered(parse(source))
    path = tmp_path / "lowered.onnx"
    onnx.save(result, path)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    compiled = compile_openvino(path)
    for i in (-3, -1, 0, 2):
        got = [np.asarray(v) for v in compiled([x, np.array(i, np.int32)]).values()]
        relu = np.maximum(x, 0)
        assert_same(got, [relu[-1], relu[i], np.array(3, np.int64)])


CHAIN = (
    H
    + """
g (float[2] a, float[2] b, float[2] c) => (float[K,2] y, int64 n) {{
  s = SequenceConstruct(a, b)
  m = SequenceMap <body = body (float[2] e) => (float[2] d) {{ d = Neg(e) }}> (s)
  i0 = Constant <value = int64 {{0}}> ()
  i1 = Constant <value = int64 {{1}}> ()
  m0 = SequenceAt(m, i0)
  m1 = SequenceAt(m, i1)
  empty = SequenceEmpty <dtype = 1> ()
  one = SequenceInsert(empty, m0)
  {second}
  {third}
  y = ConcatFromSequence <axis = 0, new_axis = 1> (three)
  n = SequenceLength({measured})
}}"""
)


def _chain_cases():
    """(second insert, third insert, list the chain builds, folded?)."""
    for p in [None, 0, 1, -1]:
        where = "" if p is None else f", p{p + 10}"
        constant = "" if p is None else f"p{p + 10} = Constant <value = int64 {{{p}}}> ()\n  "
        yield (
            f"two = SequenceInsert(one, m1)\n  {constant}three = SequenceInsert(two, c{where})",
            p,
        )


def _oracle(a, b, c, p):
    items = [-a, -b]  # list.insert is SequenceInsert
    if p is None:
        items.append(c)
    else:
        items.insert(p if p >= 0 else p + len(items), c)
    return items


@pytest.mark.parametrize("measured", ["three", "two"])
@pytest.mark.parametrize(("inserts", "p"), list(_chain_cases()))
def test_insert_chains_at_static_positions_fold(inserts, p, measured):
    """Every static position folds; a chain whose middle has another reader does not."""
    second, third = inserts.split("\n  ", 1)
    source = parse(CHAIN.format(second=second, third=third, measured=measured))
    result = lowered(source)
    folded = measured == "three"
    assert ("SequenceInsert" in op_types(result)) != folded
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(2).astype(np.float32) for _ in range(3))
    expected = [np.stack(_oracle(a, b, c, p)), np.array(3 if folded else 2, np.int64)]
    assert_same(run(result, {"a": a, "b": b, "c": c}), expected)


def test_dynamic_insert_position_is_not_folded():
    text = CHAIN.format(
        second="two = SequenceInsert(one, m1)",
        third="three = SequenceInsert(two, c, p)",
        measured="three",
    ).replace("float[2] c)", "float[2] c, int64 p)")
    result = lowered(parse(text))
    assert "SequenceInsert" in op_types(result)
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(2).astype(np.float32) for _ in range(3))
    for p in (-2, 0, 2):
        feeds = {"a": a, "b": b, "c": c, "p": np.array(p, np.int64)}
        expected = [np.stack(_oracle(a, b, c, p)), np.array(3, np.int64)]
        assert_same(run(result, feeds), expected)


def test_a_sequence_the_graph_returns_is_left_as_built():
    source = parse(
        H
        + """
        g (float[2] a, float[2] b) => (seq(float[2]) y) {
          empty = SequenceEmpty <dtype = 1> ()
          one = SequenceInsert(empty, a)
          y = SequenceInsert(one, b)
        }"""
    )
    result = lowered(source)  # the insert into the empty sequence is folded, not the output's
    assert op_types(result) == ["SequenceConstruct", "SequenceInsert"]
    with_map = parse(
        H
        + """
        g (float[2] a, float[2] b) => (seq(float[2]) y) {
          s = SequenceConstruct(a)
          m = SequenceMap <body = body (float[2] e) => (float[2] d) { d = Neg(e) }> (s)
          zero = Constant <value = int64 {0}> ()
          m0 = SequenceAt(m, zero)
          empty = SequenceEmpty <dtype = 1> ()
          one = SequenceInsert(empty, m0)
          y = SequenceInsert(one, b)
        }"""
    )
    result = lowered(with_map)
    assert op_types(result) == ["Neg", "SequenceConstruct", "SequenceInsert"]
    a, b = np.ones(2, np.float32), np.full(2, 2.0, np.float32)
    assert_same(run(result, {"a": a, "b": b}), [[-a, b]])


def test_concat_of_an_unrolled_empty_map_stays_a_concat_from_sequence():
    """No elements: Concat of nothing is not a model, so the sequence op stays (and fails
    in onnxruntime as the original does)."""
    source = parse(
        H
        + """
        g (float[2] a) => (float[N,2] y) {
          s = SequenceEmpty <dtype = 1> ()
          m = SequenceMap <body = body (float[2] e) => (float[2] d) { d = Neg(e) }> (s)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }"""
    )
    result = lowered(source)
    assert op_types(result) == ["SequenceEmpty", "ConcatFromSequence"]
    with pytest.raises(Exception, match="1 or more inputs"):
        run(source, {"a": np.zeros(2, np.float32)})
    with pytest.raises(Exception, match="1 or more inputs"):
        run(result, {"a": np.zeros(2, np.float32)})


def test_a_map_over_an_insert_chain_reads_the_inserted_tensors():
    """The chain is a construct before unrolling, so each copy reads a declared tensor
    and its rank test folds (lowering.irutils.static_fold)."""
    source = parse(
        H
        + """
        g (float[2] a, float b) => (float[1] y0, float[2] y1) {
          empty = SequenceEmpty <dtype = 1> ()
          one = SequenceInsert(empty, a)
          zero = Constant <value = int64 {0}> ()
          two = SequenceInsert(one, b, zero)
          m = SequenceMap <body = body (e) => (float[N] y) {
                shape = Shape(e)
                rank = Size(shape)
                z = Constant <value = int64 {0}> ()
                cond = Equal(rank, z)
                y = If (cond) <
                  then_branch = t () => (r) {
                    o = Constant <value_ints = [1]> ()
                    r = Reshape(e, o)
                  },
                  else_branch = f () => (r2) { r2 = Identity(e) }>
              }> (two)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {1}> ()
          y0 = SequenceAt(m, i0)
          y1 = SequenceAt(m, i1)
        }"""
    )
    result = lowered(source)
    assert op_types(result) == ["Constant", "Reshape", "Identity"]  # y1 = Identity(a)
    a, b = np.array([1, 2], np.float32), np.array(5, np.float32)
    assert_same(run(result, {"a": a, "b": b}), [np.array([5], np.float32), a])
