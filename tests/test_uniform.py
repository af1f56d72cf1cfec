"""The uniform-shape strategy: when it applies, what it writes, that it is right."""

from __future__ import annotations

import re

import numpy as np
import onnx_ir as ir
import pytest

import lowering
from lowering.cli import main
from tests.golden import canonical_text
from tests.helpers import assert_same, lowered, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

# Input and expected output side by side.
GOLDEN = {
    "static_output_shapes": (
        H
        + """
        g (seq(float[N]) x, float[16] w) => (seq(float[16]) y, seq(int64[1]) s) {
          y, s = SequenceMap <body = body (float[N] a, float[16] b) => (float[16] c, int64[1] d) {
                c = Mul(a, b)
                d = Shape(a)
              }> (x, w)
        }""",
        H
        + """
        g (seq(float[N]) x, float[16] w) => (seq(float[16]) y, seq(int64[1]) s) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          ys, ss = Loop (n, true) <body = body (int64 i, bool cond) => (bool cond_out, float[16] c, int64[1] d) {
                a = SequenceAt(x, i)
                c = Mul(a, w)
                d = Shape(a)
                cond_out = Identity(cond)
              }>
          y = SplitToSequence <axis = 0, keepdims = 0> (ys)
          s = SplitToSequence <axis = 0, keepdims = 0> (ss)
        }""",
    ),
    # Symbolic shapes, but every element comes from one SplitToSequence and
    # the body's shapes follow from its inputs' shapes. The elements are read
    # straight from x with Gather, and the split, now unused, is removed.
    "proven_uniform_from_split": (
        H
        + """
        g (float[T,D] x, float[D] w) => (seq(float[D]) y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          y = SequenceMap <body = body (float[D] r) => (float[D] c) {
                t = Mul(r, w)
                c = Softmax(t)
              }> (rows)
        }""",
        H
        + """
        g (float[T,D] x, float[D] w) => (seq(float[D]) y) {
          shape = Shape(x)
          axis = Constant <value = int64 {0}> ()
          n = Gather(shape, axis)
          true = Constant <value = bool {1}> ()
          ys = Loop (n, true) <body = body (int64 i, bool cond) => (bool cond_out, float[D] c) {
                r = Gather <axis = 0> (x, i)
                t = Mul(r, w)
                c = Softmax(t)
                cond_out = Identity(cond)
              }>
          y = SplitToSequence <axis = 0, keepdims = 0> (ys)
        }""",
    ),
    # Split -> map -> concat: one Scan, no sequence at all (split_map_concat.py).
    # keepdims = 1 slices are unsqueezed back in the body; the concat along
    # axis 0 becomes a Reshape of the stack, and new_axis = 1 the stack itself.
    "split_map_concat": (
        H
        + """
        g (float[T,4] x) => (float[M,4] y, float[T,1,4] z) {
          rows = SplitToSequence <axis = 0> (x)
          doubled = SequenceMap <body = body (float[1,4] r) => (float[1,4] c) {
                c = Add(r, r)
              }> (rows)
          y = ConcatFromSequence <axis = 0> (doubled)
          z = ConcatFromSequence <axis = 0, new_axis = 1> (doubled)
        }""",
        H
        + """
        g (float[T,4] x) => (float[M,4] y, float[T,1,4] z) {
          z = Scan <num_scan_inputs = 1, scan_input_axes = [0], scan_output_axes = [0],
                        body = body (float[4] s) => (float[1,4] c) {
                axes = Constant <value = int64[1] {0}> ()
                r = Unsqueeze(s, axes)
                c = Add(r, r)
              }> (x)
          merged = Constant <value = int64[2] {-1, 4}> ()
          y = Reshape(z, merged)
        }""",
    ),
    # Outputs that are not values of the body are copied with Identity.
    "pass_through_tensor_and_duplicate_outputs": (
        H
        + """
        g (seq(float[4]) x, float[2] t) => (seq(float[2]) a, seq(float[4]) b, seq(float[4]) c) {
          a, b, c = SequenceMap <body = body (float[4] e, float[2] u) => (float[2] u, float[4] f, float[4] f) {
                f = Neg(e)
              }> (x, t)
        }""",
        H
        + """
        g (seq(float[4]) x, float[2] t) => (seq(float[2]) a, seq(float[4]) b, seq(float[4]) c) {
          n = SequenceLength(x)
          true = Constant <value = bool {1}> ()
          sa, sb, sc = Loop (n, true) <body = body (int64 i, bool cond) => (bool cond_out, float[2] u2, float[4] f, float[4] f2) {
                e = SequenceAt(x, i)
                f = Neg(e)
                cond_out = Identity(cond)
                u2 = Identity(t)
                f2 = Identity(f)
              }>
          a = SplitToSequence <axis = 0, keepdims = 0> (sa)
          b = SplitToSequence <axis = 0, keepdims = 0> (sb)
          c = SplitToSequence <axis = 0, keepdims = 0> (sc)
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name, without_vectorizing):
    source, expected = GOLDEN[name]
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


def _strategies(text: str, **options) -> list[tuple[str, str]]:
    model = ir.serde.deserialize_model(parse(text))
    return [
        (r.strategy, r.reason)
        for r in lowering.lower_in_place(model, **options)
        if r.op_type == "SequenceMap"
    ]


SPLIT_MAP = (
    '<ir_version: 8, opset_import: ["" : 17, "com.acme" : 1]>'
    + """
g (float[T,D] x, int64[2] outer_shape) => (seq(float[M]) y) {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  y = SequenceMap <body = body (float[D] r) => (float[M] c) {{
        {body}
      }}> (rows)
}}"""
)

#: body -> (strategy, what the reason says of the node that breaks the proof)
CHOICES = {
    "shape_from_outer_value": ("c = Reshape(r, outer_shape)", "uniform", None),
    "shape_from_constant": (
        "s = Constant <value = int64[2] {1, -1}> ()\n c = Reshape(r, s)",
        "uniform",
        None,
    ),
    "shape_from_shape_of_element": (
        "s = Shape(r)\n z = ConstantOfShape(s)\n c = Add(r, z)",
        "uniform",
        None,
    ),
    "shape_from_data": (
        "[nz] nz = NonZero(r)\n c = Cast <to = 1> (nz)",
        "loop",
        "NonZero ('nz') computes a shape from data",
    ),
    "reshape_by_data": (
        "i = Cast <to = 7> (r)\n k = Slice(i, outer_shape, outer_shape)\n [rs] c = Reshape(r, k)",
        "loop",
        "Reshape ('rs') takes its shape from 'k', which varies",
    ),
    "subgraph_in_body": (
        """b = Constant <value = bool {1}> ()
        [branch] c = If (b) <then_branch = t () => (float[D] o) { o = Identity(r) },
                     else_branch = e () => (float[D] o2) { o2 = Neg(r) }>""",
        "loop",
        "If ('branch') has a subgraph, whose shapes are not followed",
    ),
    "custom_domain_op": (
        "n = Neg(r)\n [frob] c = com.acme.Frob(n)",
        "loop",
        "com.acme.Frob ('frob') is an op of domain 'com.acme', with no shape inference",
    ),
}


@pytest.mark.parametrize("name", list(CHOICES))
def test_strategy_choice(name, without_vectorizing):
    body, expected, why = CHOICES[name]
    [(strategy, reason)] = _strategies(SPLIT_MAP.format(body=body))
    assert strategy == expected, reason
    if why is not None:
        said = f"may differ in shape from element to element: {why}"
        assert re.search(re.escape(said) + "(;|$)", reason), reason


def test_elements_of_unknown_shape_keep_the_general_form():
    text = (
        H
        + """
    g (seq(float[N]) x) => (seq(float[N]) y) {
      y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
    }"""
    )
    [(strategy, reason)] = _strategies(text)
    assert strategy == "loop"
    assert "output 0 ('y') has shape [N]" in reason and "'x' may differ in shape" in reason


def test_strategy_loop_is_forced():
    [(strategy, reason)] = _strategies(GOLDEN["static_output_shapes"][0], strategy="loop")
    assert (strategy, reason) == ("loop", "forced by --strategy loop")
    result = lowering.lower(parse(GOLDEN["static_output_shapes"][0]), strategy="loop")
    assert "SplitToSequence" not in op_types(result) and "SequenceInsert" in op_types(result)


@pytest.mark.parametrize("strategy", ["auto", "loop"])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_every_strategy_is_right_at_every_length(strategy, n):
    source = GOLDEN["static_output_shapes"][0]
    rng = np.random.default_rng(n)
    feeds = {
        "x": [rng.standard_normal(16).astype(np.float32) for _ in range(n)],
        "w": rng.standard_normal(16).astype(np.float32),
    }
    expected = [[a * feeds["w"] for a in feeds["x"]], [np.array([16], np.int64)] * n]
    result = lowered(parse(source), strategy=strategy)
    assert_same(run(result, feeds), expected)


@pytest.mark.parametrize("n", [1, 5])
def test_split_map_concat_is_right_at_every_length(n):
    source = GOLDEN["split_map_concat"][0]
    x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
    result = lowered(parse(source))
    assert "SplitToSequence" not in op_types(result)
    assert_same(run(result, {"x": x}), [x + x, (x + x).reshape(n, 1, 4)])


def test_split_map_concat_of_nothing_fails_as_the_original_does(without_vectorizing):
    """onnxruntime's ConcatFromSequence fails on an empty sequence, and its
    Scan on an empty scan input: the lowered model keeps that behavior."""
    source = parse(GOLDEN["split_map_concat"][0])
    empty = {"x": np.zeros((0, 4), np.float32)}
    with pytest.raises(Exception, match="ConcatFromSequence|at least one"):
        run(source, empty)
    with pytest.raises(Exception, match="Scan"):
        run(lowered(source), empty)


@pytest.mark.parametrize(("rows", "other"), [(2, 3), (3, 3), (0, 2)])
def test_splits_that_may_differ_in_length_are_mapped_over_the_first_one_s(rows, other):
    """SequenceMap runs as many times as its first input has elements; a Scan
    takes every scan input whole and refuses inputs of two lengths, so split ->
    map -> concat over two splits of lengths not proven equal is a Loop."""
    source = parse(
        H
        + """
    g (float[T,4] x, float[U,4] y) => (float[M,4] z) {
      xs = SplitToSequence <axis = 0, keepdims = 0> (x)
      ys = SplitToSequence <axis = 0, keepdims = 0> (y)
      m = SequenceMap <body = body (float[4] a, float[4] b) => (float[4] c) {
            at = Constant <value = int64[1] {2}> ()
            new = Constant <value = float[1] {0.5}> ()
            s = ScatterElements <axis = 0> (a, at, new)
            c = Add(s, b)
          }> (xs, ys)
      z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }"""
    )
    rng = np.random.default_rng(rows)
    feeds = {
        "x": rng.standard_normal((rows, 4)).astype(np.float32),
        "y": rng.standard_normal((other, 4)).astype(np.float32),
    }
    expected = []
    for a, b in zip(feeds["x"], feeds["y"][:rows]):
        s = a.copy()
        s[2] = 0.5
        expected.append(s + b)
    for runtime in ("onnxruntime", "openvino"):
        result = lowered(source, runtime=runtime)
        assert "Scan" not in op_types(result)
        if rows == 0:  # a concat of no element: onnxruntime's ConcatFromSequence fails
            continue
        assert_same(run(result, feeds), [np.stack(expected)])


SPLIT_VARIANTS = (
    H
    + """
g (float[3,5,2] x) => (seq(float{dims}) y) {{
  parts = SplitToSequence <axis = {axis}, keepdims = {keepdims}> (x)
  y = SequenceMap <body = body (a) => (b) {{ b = Neg(a) }}> (parts)
}}"""
)


@pytest.mark.parametrize("strategy", ["auto", "loop"])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_elements_read_from_the_split_tensor(axis, keepdims, strategy):
    dims = "[A,B,C]" if keepdims else "[A,B]"
    source = parse(SPLIT_VARIANTS.format(axis=axis, keepdims=keepdims, dims=dims))
    x = np.random.default_rng(0).standard_normal((3, 5, 2)).astype(np.float32)
    parts = [np.take(x, [i] if keepdims else i, axis=axis) for i in range(x.shape[axis])]
    result = lowered(source, strategy=strategy)
    assert "SequenceAt" not in op_types(result)
    assert_same(run(result, {"x": x}), [[-p for p in parts]])


def test_a_split_read_elsewhere_for_its_length_is_read_from_the_shape():
    source = parse(
        H
        + """
    g (float[T,2] x) => (seq(float[2]) y, int64 n) {
      parts = SplitToSequence <axis = 0, keepdims = 0> (x)
      y = SequenceMap <body = body (float[2] a) => (float[2] b) { b = Neg(a) }> (parts)
      n = SequenceLength(parts)
    }"""
    )
    result = lowered(source)
    # the output's split; the length is x's dim 0 (the input's split goes)
    assert op_types(result).count("SplitToSequence") == 1 and "Shape" in op_types(result)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_same(run(result, {"x": x}), [list(-x), np.array(3, np.int64)])


@pytest.mark.parametrize("n", [0, 1, 5])
def test_proven_uniform_is_right_at_every_length(n):
    source = GOLDEN["proven_uniform_from_split"][0]
    rng = np.random.default_rng(n)
    feeds = {
        "x": rng.standard_normal((n, 3)).astype(np.float32),
        "w": rng.standard_normal(3).astype(np.float32),
    }

    def softmax(v):
        e = np.exp(v - v.max())
        return e / e.sum()

    expected = [[softmax(r * feeds["w"]).astype(np.float32) for r in feeds["x"]]]
    assert_same(run(lowered(parse(source)), feeds), expected)


def test_cli_summary_says_which_strategy_and_why(tmp_path, capsys):
    import onnx

    onnx.save(parse(GOLDEN["static_output_shapes"][0]), tmp_path / "in.onnx")
    assert main([str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    assert "uniform, every output has a static shape" in capsys.readouterr().err
    assert main(["--strategy", "loop", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")]) == 0
    assert "loop, forced by --strategy loop" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--strategy", "bogus", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")])


# What a split -> map -> concat body may read from outside: each kind of
# value, read directly in the body or from a branch nested in it. Only
# tensors of known rank can be Scan states; the others must stay outer-scope
# reads (onnxruntime refuses a Scan body output with no shape: "Subgraph must
# have the shape set for all outputs").
# kind: (graph inputs, setup nodes, the body's read of r, r's value)
OUTER_READS = {
    "sequence_input": ("seq(float[4]) q", "", "r = SequenceAt(q, zero)", lambda f: f["q"][0]),
    "sequence_built": (
        "float[4] t",
        "built = SequenceConstruct(t, t)",
        "r = SequenceAt(built, zero)",
        lambda f: f["t"],
    ),
    "sequence_length": (
        "seq(float[4]) q",
        "",
        "n = SequenceLength(q)\n r0 = Cast <to = 1> (n)\n r = Expand(r0, four)",
        lambda f: np.full(4, len(f["q"]), np.float32),
    ),
    "optional": ("float[4] t", "maybe = Optional(t)", "r = OptionalGetElement(maybe)", None),
    "tensor": ("float[4] t", "", "r = Identity(t)", None),
    "tensor_of_unknown_rank": (
        "float[4] t, int64[K] dims",
        "u = Reshape(t, dims)",
        "k = ReduceSum <keepdims = 0> (u)\n r = Expand(k, four)",
        lambda f: np.full(4, f["t"].sum(), np.float32),
    ),
}
# Declared types beyond the inputs: a type with no shape is what onnx_ir
# reads for a value that shape inference gives no rank (a Reshape to dims
# of unknown length).
OUTER_VALUE_INFO = {"tensor_of_unknown_rank": "<float[] u>"}


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("kind", OUTER_READS)
def test_split_map_concat_reading_outer_values_of_every_kind(kind, nested):
    declaration, setup, read, value = OUTER_READS[kind]
    if nested:  # the read sits in an If branch inside the body
        read = f"""r = If (yes) <
            then_branch = tb () => (float[4] rt) {{ {read.replace("r =", "rt =")} }},
            else_branch = eb () => (float[4] re) {{ re = Identity(a) }}>"""
    text = (
        H.replace('"" : 17', '"" : 18')
        + f"""
        g (float[3,4] x, {declaration}) => (float[3,4] y) {OUTER_VALUE_INFO.get(kind, "")} {{
          zero = Constant <value = int64 {{0}}> ()
          four = Constant <value = int64[1] {{4}}> ()
          yes = Constant <value = bool {{1}}> ()
          {setup}
          parts = SplitToSequence <axis = 0, keepdims = 0> (x)
          m = SequenceMap <body = body (float[4] a) => (float[4] b) {{
                {read}
                b = Add(a, r)
              }}> (parts)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}"""
    )
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    if "seq" in declaration:
        feeds["q"] = [rng.standard_normal(4).astype(np.float32) for _ in range(2)]
    else:
        feeds["t"] = rng.standard_normal(4).astype(np.float32)
    if "dims" in declaration:
        feeds["dims"] = np.array([2, 2], np.int64)
    r = value(feeds) if value else feeds["t"]
    for options in ({}, {"max_unroll": 0}, {"strategy": "loop"}):
        result = lowered(parse(text), **options)
        assert_same(run(result, feeds), [feeds["x"] + r])
