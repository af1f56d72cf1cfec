"""The vectorize strategy: a batchable body applied once to all elements.

Every family of batchable ops is checked against a numpy list comprehension
(the meaning of SequenceMap) at n = 0, 1 and many, in three shapes of model:
split -> map -> concat (the stack is the split tensor), a split on another
axis with keepdims, and a graph-input sequence (stacked with
ConcatFromSequence). Then the reasons it declines, goldens, and the runtimes
without Loop or Scan.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from tests.cases.vectorize_families import (
    FAMILIES,
    ONNX_TYPES,
    family_elements,
    family_expected,
    input_model,
    parse_family,
    split_axis_1_model,
    split_model,
)
from tests.golden import canonical_text
from tests.helpers import all_graphs, all_nodes, assert_same, lowered, op_types, parse, run

rng_ = np.random.default_rng


def _strategy(model: onnx.ModelProto) -> tuple[str, str]:
    [rewrite] = lowering.lower_in_place(ir.serde.deserialize_model(model))
    return rewrite.strategy, rewrite.reason


def _vectorized(model: onnx.ModelProto) -> onnx.ModelProto:
    strategy, reason = _strategy(model)
    assert strategy == "vectorize", reason
    result = lowered(model)
    assert not {"Loop", "Scan"} & set(op_types(result))
    # No node ends in an absent input (IREE compiles no Slice given an empty steps).
    assert all(node.input[-1] for node in all_nodes(result) if node.input)
    return result


@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.sweep
def test_split_map_concat(name, n):
    family = FAMILIES[name]
    result = _vectorized(parse_family(split_model(family), family))
    elements = family_elements(family, n)
    x = np.stack(elements) if elements else np.zeros((0, *family.element), ONNX_TYPES[family.dtype])
    listed, stacked = family_expected(family, elements)
    y, ys = run(result, {"x": x, **family.extras})
    assert_same(y, stacked)
    assert_same(ys, listed)


@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.sweep
def test_split_on_axis_1_with_keepdims(name, n):
    family = FAMILIES[name]
    result = _vectorized(parse_family(split_axis_1_model(family), family))
    elements = family_elements(family, n)
    x = np.stack(elements) if elements else np.zeros((0, *family.element), ONNX_TYPES[family.dtype])
    _, stacked = family_expected(family, elements)
    [y] = run(result, {"x": x[None], **family.extras})
    assert_same(y, np.moveaxis(stacked, 0, -1))


#: The families whose batched op ONNX may size wrong on a stack of a count
#: nothing proves (a graph input's elements), with no pin: the batch letter
#: both operands of the Einsum share is of no known size (lowering.maps.claims).
UNPINNED_ON_A_STACK = {
    "einsum_both_batched": (
        "not vectorized: ONNX may size output 0 of Einsum wrong, "
        "and its true shape is not computed here"
    ),
}


@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.sweep
def test_graph_input_sequence(name, n):
    family = FAMILIES[name]
    model = parse_family(input_model(family), family)
    strategy, reason = _strategy(model)
    result = lowered(model)
    if name in UNPINNED_ON_A_STACK:  # a Loop whose scan outputs stack its results
        assert strategy == "uniform" and UNPINNED_ON_A_STACK[name] in reason, reason
        assert "Loop" in op_types(result)
    else:
        assert strategy == "vectorize", reason
        assert "ConcatFromSequence" in op_types(result)
    elements = family_elements(family, n)
    listed, _ = family_expected(family, elements)
    [ys] = run(result, {"elements": elements, **family.extras})
    assert_same(ys, listed)


# -- goldens: each input beside the model the lowering must write --------------

H = '<ir_version: 8, opset_import: ["" : 17]>'

GOLDEN = {
    # The stack is x itself; the concat that stacks reads the result.
    "split_elementwise_stack": (
        H
        + """
        g (float[T,4] x, float[4] w) => (float[T,4] y) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          mapped = SequenceMap <body = body (float[4] r) => (float[4] c) {
                t = Mul(r, w)
                c = Relu(t)
              }> (rows)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (mapped)
        }""",
        H
        + """
        g (float[T,4] x, float[4] w) => (float[T,4] y) {
          t = Mul(x, w)
          y = Relu(t)
        }""",
    ),
    # Columns with keepdims: the stack is x transposed, unsqueezed after the
    # batch axis. Axes shift by one; the merging concat is a Reshape. The
    # batcher's constants lead the graph, one per value for all its maps.
    "columns_matmul_reduce_merge": (
        H
        + """
        g (float[3,T] x, float[3,5] w) => (float[M] y) {
          cols = SplitToSequence <axis = 1> (x)
          mapped = SequenceMap <body = body (float[3,1] col) => (float[5] c) {
                t = Transpose(col)
                p = MatMul(t, w)
                a = Constant <value = int64[1] {0}> ()
                c = ReduceSum <keepdims = 0> (p, a)
              }> (cols)
          y = ConcatFromSequence <axis = 0> (mapped)
        }""",
        H
        + """
        g (float[3,T] x, float[3,5] w) => (float[M] y) {
          two = Constant <value = int64[1] {2}> ()
          one = Constant <value = int64[1] {1}> ()
          xt = Transpose <perm = [1, 0]> (x)
          stack = Unsqueeze(xt, two)
          t = Transpose <perm = [0, 2, 1]> (stack)
          p = MatMul(t, w)
          c = ReduceSum <keepdims = 0> (p, one)
          merged = Constant <value = int64[1] {-1}> ()
          y = Reshape(c, merged)
        }""",
    ),
    # A graph-input sequence of static shape: stacked with a zero element
    # appended (onnxruntime cannot concatenate an empty sequence) and sliced
    # off. Reshape keeps the batch axis with -1; the initializer becomes a
    # Constant; the result is split back into the sequence the graph returns.
    "graph_input_sequence": (
        H
        + """
        g (seq(float[2,3]) xs, float b) => (seq(float[6]) ys) {
          ys = SequenceMap <body = body (float[2,3] e) => (float[6] c) <float[1] k = {2.0}> {
                s = Constant <value = int64[1] {-1}> ()
                f = Reshape(e, s)
                g2 = Mul(f, k)
                c = Add(g2, b)
              }> (xs)
        }""",
        H
        + """
        g (seq(float[2,3]) xs, float b) => (seq(float[6]) ys) {
          shape = Constant <value = int64[2] {2, 3}> ()
          zero = ConstantOfShape <value = float[1] {0.0}> (shape)
          start = Constant <value = int64[1] {0}> ()
          end = Constant <value = int64[1] {-1}> ()
          target = Constant <value = int64[2] {-1, 6}> ()
          appended = SequenceInsert(xs, zero)
          stacked = ConcatFromSequence <axis = 0, new_axis = 1> (appended)
          stack = Slice(stacked, start, end)
          f = Reshape(stack, target)
          k = Constant <value = float[1] k {2.0}> ()
          g2 = Mul(f, k)
          c = Add(g2, b)
          ys = SplitToSequence <axis = 0, keepdims = 0> (c)
        }""",
    ),
    # Two maps stack one sequence: one stack, which both read.
    "two_maps_share_one_stack": (
        H
        + """
        g (seq(float[3]) xs) => (seq(float[3]) ys, seq(float[3]) zs) {
          ys = SequenceMap <body = b1 (float[3] e) => (float[3] c) { c = Neg(e) }> (xs)
          zs = SequenceMap <body = b2 (float[3] f) => (float[3] d) { d = Abs(f) }> (xs)
        }""",
        H
        + """
        g (seq(float[3]) xs) => (seq(float[3]) ys, seq(float[3]) zs) {
          shape = Constant <value = int64[1] {3}> ()
          zero = ConstantOfShape <value = float[1] {0.0}> (shape)
          start = Constant <value = int64[1] {0}> ()
          end = Constant <value = int64[1] {-1}> ()
          appended = SequenceInsert(xs, zero)
          stacked = ConcatFromSequence <axis = 0, new_axis = 1> (appended)
          stack = Slice(stacked, start, end)
          c = Neg(stack)
          ys = SplitToSequence <axis = 0, keepdims = 0> (c)
          d = Abs(stack)
          zs = SplitToSequence <axis = 0, keepdims = 0> (d)
        }""",
    ),
    # A shared stack goes right after its sequence is made.
    "a_shared_stack_follows_its_sequence": (
        H
        + """
        g (seq(float[3]) d, float[3] x) => (seq(float[3]) ys, seq(float[3]) zs) {
          s = SequenceInsert(d, x)
          ys = SequenceMap <body = b1 (float[3] e) => (float[3] c) { c = Neg(e) }> (s)
          zs = SequenceMap <body = b2 (float[3] f) => (float[3] g) { g = Abs(f) }> (s)
        }""",
        H
        + """
        g (seq(float[3]) d, float[3] x) => (seq(float[3]) ys, seq(float[3]) zs) {
          shape = Constant <value = int64[1] {3}> ()
          zero = ConstantOfShape <value = float[1] {0.0}> (shape)
          start = Constant <value = int64[1] {0}> ()
          end = Constant <value = int64[1] {-1}> ()
          s = SequenceInsert(d, x)
          appended = SequenceInsert(s, zero)
          stacked = ConcatFromSequence <axis = 0, new_axis = 1> (appended)
          stack = Slice(stacked, start, end)
          c = Neg(stack)
          ys = SplitToSequence <axis = 0, keepdims = 0> (c)
          g = Abs(stack)
          zs = SplitToSequence <axis = 0, keepdims = 0> (g)
        }""",
    ),
}

# Two maps over one sequence share its stack, wherever they are: the sequence
# a graph input (or an outer value), or made in the maps' own graph.
_TWO_MAPS = """
  {made}
  m1{k} = SequenceMap <body = b1{k} (float[3] e) => (float[3] c) {{ c = Neg(e) }}> ({seq})
  m2{k} = SequenceMap <body = b2{k} (float[3] f) => (float[3] g) {{ g = Abs(f) }}> ({seq})
  {y} = ConcatFromSequence <axis = 0> (m1{k})
  {z} = ConcatFromSequence <axis = 0> (m2{k})
"""
_SIGNATURE = "(seq(float[3]) d, float[3] x, bool c) => (float[?] y, float[?] z)"
_SCOPES = {
    "main graph": H + "\ng " + _SIGNATURE + " {{ {maps} }}",
    "function": '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>\n'
    + "g "
    + _SIGNATURE
    + " {{ y, z = local.f (d, x) }}\n"
    + '<domain: "local", opset_import: ["" : 17]>\nf (d, x) => (y, z) {{ {maps} }}',
    "If branch": H
    + "\ng "
    + _SIGNATURE
    + """ {{
        y, z = If (c) <then_branch = t () => (float[?] y1, float[?] z1) {{ {maps} }},
                       else_branch = el () => (float[?] y2, float[?] z2) {{ {other} }}>
    }}""",
    "Loop body": H
    + "\ng "
    + _SIGNATURE
    + """ {{
        one = Constant <value = int64 {{1}}> ()
        flat = Constant <value = int64[1] {{-1}}> ()
        ys, zs = Loop (one, c) <body = lb (int64 i, bool cin) => (bool cout, float[?] y1, float[?] z1) {{
            cout = Identity (cin)
            {maps}
        }}>
        y = Reshape (ys, flat)
        z = Reshape (zs, flat)
    }}""",
}


def _two_maps_model(scope: str, made: bool) -> onnx.ModelProto:
    def maps(k: str, y: str, z: str) -> str:
        sequence = f"s{k} = SequenceInsert(d, x)" if made else ""
        return _TWO_MAPS.format(made=sequence, k=k, seq=f"s{k}" if made else "d", y=y, z=z)

    outputs = ("y", "z") if scope in ("main graph", "function") else ("y1", "z1")
    return parse(_SCOPES[scope].format(maps=maps("", *outputs), other=maps("b", "y2", "z2")))


@pytest.mark.parametrize("made", [False, True], ids=["sequence from outside", "sequence made"])
@pytest.mark.parametrize("scope", list(_SCOPES))
@pytest.mark.parametrize("n", [0, 3])
def test_maps_sharing_a_stack_answer_as_the_lists(scope, made, n):
    rng = rng_(n)
    d = [rng.standard_normal(3).astype(np.float32) for _ in range(n)]
    x = rng.standard_normal(3).astype(np.float32)
    result = lowered(_two_maps_model(scope, made))  # (checked: nodes in order)
    for graph in [*all_graphs(result, in_functions=False), *result.functions]:
        stacks = [node for node in graph.node if node.op_type == "ConcatFromSequence"]
        assert len(stacks) <= 1, f"{len(stacks)} stacks of one sequence in one graph"
    elements = d + [x] if made else d
    expected = [np.concatenate([-e for e in elements] or [np.zeros(0, np.float32)])]
    expected.append(np.abs(expected[0]))
    got = run(result, {"d": d, "x": x, "c": np.array(True)})
    for actual, wanted in zip(got, expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-6)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    source, expected = GOLDEN[name]
    assert canonical_text(lowering.lower(parse(source))) == canonical_text(parse(expected))


@pytest.mark.parametrize("n", [0, 1, 4])
def test_golden_graph_input_sequence_is_right(n):
    source = parse(GOLDEN["graph_input_sequence"][0])
    rng = rng_(n)
    feeds = {
        "xs": [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(n)],
        "b": np.array(0.5, np.float32),
    }
    expected = [[e.reshape(-1) * 2 + 0.5 for e in feeds["xs"]]]
    assert_same(run(lowered(source), feeds), expected)


# -- when it declines, and what it says ----------------------------------------

SPLIT_MAP = (
    H
    + """
g (float[T,4] x, int64[2] outer_shape, float[2,4] images) => (seq({out}) y) {{
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  y = SequenceMap <body = body (float[4] r) => ({out} c) {{
        {body}
      }}> (rows)
}}"""
)

DECLINED = {
    "no_rule": (
        "nz = NonZero(r)\n c = Cast <to = 1> (nz)",
        "float[1,K]",
        "NonZero: it has no batching rule",
    ),
    "random_per_element": (
        "c = RandomUniformLike(r)",
        "float[4]",
        "RandomUniformLike: it has no batching rule",
    ),
    "random_invariant": (
        "u = RandomNormal <shape = [4]> ()\n c = Add(r, u)",
        "float[4]",
        "RandomNormal: it reads no element, but is not known to be deterministic",
    ),
    "computed_shape": (
        "c = Reshape(r, outer_shape)",
        "float[A,B]",
        "Reshape: its shape (a computed shape) is not a constant",
    ),
    "data_dependent_gather": (
        "i = Cast <to = 7> (r)\n c = Gather(r, i)",
        "float[4]",
        "Gather: both its data and its indices differ from element to element",
    ),
    "image_without_batch_axis": (
        (
            "s = Constant <value = int64[3] {2, 1, 2}> ()\n im = Reshape(r, s)\n"
            " p = MaxPool <kernel_shape = [1]> (im)\n c = Flatten(p)"
        ),
        "float[1,4]",
        "MaxPool: its element has shape [2, 1, 2]; it must be one image, [1, C, ...]",
    ),
    "subgraph": (
        """b = Constant <value = bool {1}> ()
        c = If (b) <then_branch = t () => (float[4] o) { o = Identity(r) },
                     else_branch = e () => (float[4] o2) { o2 = Neg(r) }>""",
        "float[4]",
        "If: it has a subgraph",
    ),
    "other_domain": (
        "c = custom.Op(r)",
        "float[4]",
        "Op: an op of domain 'custom' has no batching rule",
    ),
    "named_node": (
        "[the_node] c = Hardmax <axis = 5> (r)",
        "float[4]",
        "node 'the_node' (Hardmax): axis 5 is out of range for rank 1",
    ),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_the_reason_names_the_op_that_stops_it(name):
    body, out, why = DECLINED[name]
    text = SPLIT_MAP.format(body=body, out=out)
    if "custom." in body:
        text = text.replace('["" : 17]', '["" : 17, "custom" : 1]')
    strategy, reason = _strategy(parse(text))
    assert strategy != "vectorize"
    assert f"not vectorized: {why}" in reason


def test_a_declined_map_is_left_for_the_next_strategy_unchanged():
    """The dry run detaches what it built: the fallback computes the same, and
    x is read only by what the fallback wrote."""
    text = SPLIT_MAP.format(
        body="t = Mul(r, r)\n u = Relu(t)\n c = Reshape(u, outer_shape)", out="float[A,B]"
    )
    model = ir.serde.deserialize_model(parse(text))
    [rewrite] = lowering.lower_in_place(model)
    assert rewrite.strategy == "uniform"
    x = model.graph.inputs[0]
    assert {user.op_type for user, _ in x.uses() if user.graph is not None} == {"Shape", "Gather"}
    result = ir.serde.serialize_model(model)
    feeds = {
        "x": rng_(0).standard_normal((3, 4)).astype(np.float32),
        "outer_shape": np.array([2, 2], np.int64),
        "images": np.zeros((2, 4), np.float32),
    }
    expected = [[np.maximum(r * r, 0).reshape(2, 2) for r in feeds["x"]]]
    assert_same(run(result, feeds), expected)


def test_elements_that_may_differ_in_shape_are_not_stacked():
    text = (
        H
        + """
    g (seq(float[N]) xs) => (seq(float[N]) ys) {
      ys = SequenceMap <body = body (float[N] e) => (float[N] c) { c = Neg(e) }> (xs)
    }"""
    )
    strategy, reason = _strategy(parse(text))
    assert strategy == "loop"
    # One reason stops both stacking and the uniform form: it is said once.
    assert reason.count("the elements of 'xs' may differ in shape") == 1


# -- against the other strategies -------------------------------------------------


def test_preferred_over_unrolling_when_the_stack_is_free():
    text = (
        H
        + """
    g (float[3,4] x) => (float[3,4] y) {
      rows = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Neg(r) }> (rows)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }"""
    )
    assert _strategy(parse(text))[0] == "vectorize"


def test_unrolling_preferred_when_the_stack_would_be_built():
    text = (
        H
        + """
    g (float[4] a, float[4] b) => (seq(float[4]) y) {
      s = SequenceConstruct(a, b)
      y = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Neg(r) }> (s)
    }"""
    )
    assert _strategy(parse(text))[0] == "unroll"
    model = ir.serde.deserialize_model(parse(text))
    [rewrite] = lowering.lower_in_place(model, max_unroll=0)
    assert rewrite.strategy == "vectorize"


def test_loop_strategy_still_forced():
    text = SPLIT_MAP.format(body="c = Neg(r)", out="float[4]")
    model = ir.serde.deserialize_model(parse(text))
    [rewrite] = lowering.lower_in_place(model, strategy="loop")
    assert rewrite.strategy == "loop"


@pytest.mark.parametrize("n", [0, 1, 3])
def test_map_in_a_subgraph_and_outputs_that_are_not_per_element(n):
    """A map inside an If branch; one output is an outer value, one a constant,
    one the element itself: each comes out stacked n times."""
    text = (
        H
        + """
    g (float[T,4] x, float[4] w, bool flag) => (float[T,4] a, float[T,2] b, float[T,4] c) {
      a, b, c = If (flag) <then_branch = t () => (float[T,4] a1, float[T,2] b1, float[T,4] c1) {
          rows = SplitToSequence <axis = 0, keepdims = 0> (x)
          m1, m2, m3 = SequenceMap <body = body (float[4] r) => (float[4] o1, float[2] o2, float[4] o3) {
                o2 = Constant <value = float[2] {1.0, 2.0}> ()
              }> (rows)
          a1 = ConcatFromSequence <axis = 0, new_axis = 1> (m1)
          b1 = ConcatFromSequence <axis = 0, new_axis = 1> (m2)
          c1 = ConcatFromSequence <axis = 0, new_axis = 1> (m3)
        }, else_branch = e () => (float[T,4] a2, float[T,2] b2, float[T,4] c2) {
          a2 = Identity(x)
          b2 = Constant <value = float[0,2] {}> ()
          c2 = Identity(x)
        }>
    }"""
    ).replace("(float[4] r) => (float[4] o1", "(float[4] r, float[4] ww) => (float[4] o1")
    text = text.replace(
        "=> (float[4] o1, float[2] o2, float[4] o3)", "=> (float[4] ww, float[2] o2, float[4] r)"
    )
    text = text.replace("}> (rows)", "}> (rows, w)")
    model = parse(text)
    [rewrite] = lowering.lower_in_place(ir.serde.deserialize_model(parse(text)))
    assert rewrite.strategy == "vectorize", rewrite.reason
    x = rng_(n).standard_normal((n, 4)).astype(np.float32)
    w = rng_(9).standard_normal(4).astype(np.float32)
    result = lowered(model)
    a, b, c = run(result, {"x": x, "w": w, "flag": np.array(True)})
    assert_same(a, np.tile(w, (n, 1)))
    assert_same(b, np.tile(np.array([1, 2], np.float32), (n, 1)))
    assert_same(c, x)


# -- runtimes without SequenceMap, Loop or Scan ----------------------------------

# tract's Python API cannot hand back an int64 tensor it computed through
# shapes ("Unsupported DatumType in the public API TDim").
NOT_FOR_TRACT = {"cast_shape_and_constants"}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_split_map_concat_runs_in_openvino_and_tract(name, tmp_path):
    openvino = pytest.importorskip("openvino", reason="OpenVINO is not installable here")
    tract = pytest.importorskip("tract", reason="tract is not installable here")
    from lowering.runtimes.runners import run_openvino, run_tract

    family = FAMILIES[name]
    text = split_model(family).replace(", seq(", ", seqq(").split("=> (y, seqq(")[0]
    text += "=> (y) {\n" + split_model(family).split(") ys) {", 1)[1]
    model = parse_family(text, family)
    result = _vectorized(model)
    assert not [op for op in op_types(result) if "Sequence" in op]
    path = tmp_path / "vectorized.onnx"
    onnx.save(result, path)
    elements = family_elements(family, 5)
    inputs = [np.stack(elements), *family.extras.values()]
    _, stacked = family_expected(family, elements)
    assert_same(run_openvino(path, inputs)[0], stacked)
    if name not in NOT_FOR_TRACT:
        assert_same(run_tract(path, inputs)[0], stacked)
    del openvino, tract


@pytest.mark.parametrize("n", [0, 1, 3])
def test_map_in_a_function_and_inside_another_map(n):
    """In a model-local function (its own opset import), and inside a map that
    cannot be vectorized (its elements differ in shape): the inner one is."""
    text = """<ir_version: 8, opset_import: ["" : 18, "local" : 1]>
    g (float[T,4] x, seq(float[R,4]) outer) => (float[T] y, seq(float[R]) z) {
      y = local.f(x)
      z = SequenceMap <body = body (float[R,4] e) => (float[R] c) {
            rows = SplitToSequence <axis = 0, keepdims = 0> (e)
            m = SequenceMap <body = inner (float[4] r) => (float r2) {
                  a = Constant <value = int64[1] {0}> ()
                  r2 = ReduceMax <keepdims = 0> (r, a)
                }> (rows)
            c = ConcatFromSequence <axis = 0, new_axis = 1> (m)
          }> (outer)
    }
    <domain: "local", opset_import: ["" : 18]>
    f (x) => (y) {
      rows = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[4] r) => (float s) {
            a = Constant <value = int64[1] {0}> ()
            s = ReduceSum <keepdims = 0> (r, a)
          }> (rows)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }"""
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(parse(text)))
    assert sorted(r.strategy for r in rewrites) == ["loop", "vectorize", "vectorize"]
    rng = rng_(n)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    outer = [rng.standard_normal((k + 1, 4)).astype(np.float32) for k in range(n)]
    result = lowered(parse(text))
    y, z = run(result, {"x": x, "outer": outer})
    assert_same(y, x.sum(axis=1))
    assert_same(z, [e.max(axis=1) for e in outer])


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize(
    ("target", "reshape"),
    [
        ("-1", lambda e: e.reshape(-1)),
        ("2, -1", lambda e: e.reshape(2, -1)),
        ("0, 2, -1", lambda e: e.reshape(e.shape[0], 2, -1)),
        ("0, 0", lambda e: e),
    ],
)
def test_reshape_of_elements_whose_shape_is_not_static(target, reshape, n):
    """A -1 with other dims known is computed from the element's size (no 0 and
    -1 together, which an empty batch cannot resolve); with no -1, 0 copies the
    batch axis."""
    count = len(target.split(","))
    dims = "".join(f",d{k}" for k in range(count))
    text = f"""{H}
    g (float[N,A,4] x) => (float[N{dims}] y) {{
      rows = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[A,4] e) => (c) {{
            s = Constant <value = int64[{count}] {{{target}}}> ()
            c = Reshape(e, s)
          }}> (rows)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}"""
    model = parse(text)
    result = _vectorized(model)
    x = rng_(n).standard_normal((n, 6, 4)).astype(np.float32)
    one = reshape(np.zeros((6, 4), np.float32))
    expected = np.stack([reshape(e) for e in x]) if n else np.zeros((0, *one.shape), np.float32)
    assert_same(run(result, {"x": x})[0], expected)


def test_an_ignored_input_leaves_nothing_behind():
    text = f"""{H}
    g (float[T,4] x, float[T,3] z) => (float[T,4] y) {{
      a = SplitToSequence <axis = 0, keepdims = 0> (x)
      b = SplitToSequence <axis = 0, keepdims = 1> (z)
      m = SequenceMap <body = body (float[4] r, float[1,3] unused) => (float[4] c) {{
            c = Neg(r)
          }}> (a, b)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}"""
    result = _vectorized(parse(text))
    assert op_types(result) == ["Neg"]


@pytest.mark.parametrize("n", [0, 1, 3])
def test_concat_along_an_inner_axis_reads_the_stack(n):
    """ConcatFromSequence<axis = 1> of [2, 3] results: the stack, moved and merged.
    (onnxruntime's ConcatFromSequence fails on no elements; this gives [2, 0].)"""
    text = f"""{H}
    g (float[T,2,3] x) => (float[2,M] y) {{
      rows = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[2,3] r) => (float[2,3] c) {{ c = Neg(r) }}> (rows)
      y = ConcatFromSequence <axis = -1> (m)
    }}"""
    result = _vectorized(parse(text))
    assert "ConcatFromSequence" not in op_types(result)
    x = rng_(n).standard_normal((n, 2, 3)).astype(np.float32)
    expected = np.concatenate(list(-x), axis=1) if n else np.zeros((2, 0), np.float32)
    assert_same(run(result, {"x": x})[0], expected)


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [-1, -2, -3])
def test_a_split_on_a_negative_axis_is_stacked_along_that_axis(axis, keepdims, n):
    """A negative split axis counts from the tensor's last dim (its rank, not the
    element's): each element is the slice a list comprehension reads."""
    shape = [2, 3, 4]
    shape[axis] = n
    element = [d for i, d in enumerate(shape) if i != axis % 3]
    if keepdims:
        element.insert(axis % 3, 1)
    dims = ",".join("N" if i == axis % 3 else str(d) for i, d in enumerate(shape))
    e = f"float[{','.join(map(str, element))}]"
    text = f"""{H}
    g (float[{dims}] x, float[{element[-1]}] w) => (seq({e}) ys) {{
      parts = SplitToSequence <axis = {axis}, keepdims = {keepdims}> (x)
      ys = SequenceMap <body = body ({e} e, float[{element[-1]}] u) => ({e} c) {{
             c = Mul(e, u)
           }}> (parts, w)
    }}"""
    result = _vectorized(parse(text))
    x = rng_(n).standard_normal(shape).astype(np.float32)
    w = rng_(7).standard_normal(element[-1]).astype(np.float32)
    parts = [np.take(x, [i] if keepdims else i, axis=axis) for i in range(n)]
    assert_same(run(result, {"x": x, "w": w}), [[p * w for p in parts]])


def test_emitted_ops_name_what_the_rewrite_adds_with_its_types(monkeypatch):
    """For a check against onnxruntime's kernels: the ops beyond the body's own
    (which run on the types they ran on before), with their input's type."""
    from lowering.maps.strategies.vectorize import strategy

    seen = []
    vectorized = strategy._vectorized

    def spy(plan, context, form):
        answer = vectorized(plan, context, form)
        seen.append(answer.writes)
        return answer

    monkeypatch.setattr(strategy, "_vectorized", spy)
    text = f"""{H}
    g (seq(int32[2,3]) xs, int32[3,4] w) => (seq(int32[2,4]) ys) {{
      ys = SequenceMap <body = body (int32[2,3] e) => (int32[2,4] c) {{
            c = Gemm <alpha = 2.0> (e, w)
          }}> (xs)
    }}"""
    assert _strategy(parse(text))[0] == "vectorize"
    [ops] = seen
    int32 = ir.DataType.INT32
    for op in ("SequenceInsert", "ConcatFromSequence", "Slice", "MatMul", "Mul", "SplitToSequence"):
        assert (op, int32) in ops, op
    assert ("Gemm", int32) not in ops


def test_no_vectorization_outlives_the_call():
    """What checking a map's vectorization builds lives on its plan, not in a module cache:
    maps checked on a trial copy (functions specialized first), and maps found
    vectorizable that another strategy lowers, leave nothing behind."""
    import gc

    from lowering.maps.strategies.vectorize.batcher import Batcher as _Vectorizer
    from tests.cases.functions import ADD_C, SQUARE, apply_model

    trial = ir.serde.deserialize_model(apply_model([SQUARE, ADD_C], 2))
    lowering.lower_in_place(trial)
    unrolled = ir.serde.deserialize_model(
        parse("""<ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[3,4] z) {
          y = Neg (x)
          rows = SequenceConstruct (x, y, x)
          m = SequenceMap <body = body (float[4] r) => (float[4] c) { c = Relu(r) }> (rows)
          z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }""")
    )
    # vectorizable, but its elements would be stacked: three are unrolled instead
    assert [r.strategy for r in lowering.lower_in_place(unrolled)] == ["unroll"]
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, _Vectorizer)]


# -- Pad: every mode, opset and form of pads, against the original --------------

PAD_ELEMENT = (3, 4, 5)
PAD_FORMS = {  # name: (pads, axes or None, first opset)
    "all_axes": ([1, 0, 2, 0, -1, 1], None, 11),
    "negative_axes": ([2, 1, -1, 0], [-1, 0], 18),
    "one_axis": ([0, 2], [1], 18),
}
PAD_MODES = {"constant": 11, "constant_value": 11, "reflect": 11, "edge": 11, "wrap": 19}
PAD_SOURCES = {  # name: (graph input, its feed for n elements)
    "split": ("float[N,3,4,5] x", lambda xs: np.stack(xs) if xs else np.zeros((0, *PAD_ELEMENT))),
    "split_static": ("float[3,3,4,5] x", lambda xs: np.stack(xs)),
    "split_dynamic": (
        "float[N,3,4,D] x",
        lambda xs: np.stack(xs) if xs else np.zeros((0, *PAD_ELEMENT)),
    ),
    "input": ("seq(float[3,4,5]) x", lambda xs: xs),
}


def _pad_cases():
    for opset in (17, 18, 19, 21):  # SequenceMap is from opset 17
        for mode, since in PAD_MODES.items():
            for form, (_, _, first) in PAD_FORMS.items():
                if opset >= max(since, first):
                    for source in PAD_SOURCES:
                        yield opset, mode, form, source


def _pad_model(opset: int, mode: str, form: str, source: str) -> onnx.ModelProto:
    pads, axes, _ = PAD_FORMS[form]
    value = "v = Constant <value = float {1.5}> ()\n" if mode == "constant_value" else ""
    inputs = ["e", "p", "v" if value else "", *(["a"] if axes else [])]
    while inputs[-1] == "":
        inputs.pop()
    axes_node = (
        f"a = Constant <value = int64[{len(axes)}] {{{str(axes)[1:-1]}}}> ()\n" if axes else ""
    )
    kind = mode.removesuffix("_value")
    element = "float[3,4,?]" if source == "split_dynamic" else "float[3,4,5]"
    split = source.startswith("split")
    text = f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g ({PAD_SOURCES[source][0]}) => (seq(float[p0,p1,p2]) ys) {{
      {"parts = SplitToSequence <axis = 0, keepdims = 0> (x)" if split else "parts = Identity(x)"}
      ys = SequenceMap <body = body ({element} e) => (float[q0,q1,q2] c) {{
            p = Constant <value = int64[{len(pads)}] {{{str(pads)[1:-1]}}}> ()
            {value}{axes_node}c = Pad <mode = "{kind}"> ({", ".join(inputs)})
          }}> (parts)
    }}"""
    return parse(text)


@pytest.mark.parametrize(("opset", "mode", "form", "source"), list(_pad_cases()))
@pytest.mark.sweep
def test_pad_batched_like_the_original(opset, mode, form, source):
    """The batch axis is never padded, and the batched Pad runs where the original
    does: onnxruntime's wrap fails on any zero dim, so an empty stack is guarded
    (and elements of unknown shape are not batched in wrap mode)."""
    model = _pad_model(opset, mode, form, source)
    strategy, reason = _strategy(model)
    if mode == "wrap" and source == "split_dynamic":
        assert strategy != "vectorize" and "wrap" in reason, reason
    else:
        assert strategy == "vectorize", reason
    result = lowered(model)
    for n in (3,) if source == "split_static" else (0, 1, 3):
        rng = rng_(n)
        elements = [rng.standard_normal(PAD_ELEMENT).astype(np.float32) for _ in range(n)]
        feed = PAD_SOURCES[source][1](elements)
        feeds = {"x": feed if isinstance(feed, list) else feed.astype(np.float32)}
        assert_same(run(result, feeds), run(model, feeds), f"n={n}")
