"""A declaration is said of one run of its own graph: no rewrite moves it to another.

A value of an If branch or a Loop body declares what holds when that
branch runs, on that trip; its symbolic dims are that graph's own names.
Two rewrites moved such a declaration out of its graph, into a graph where
it says something else:

- bypassing an Identity of an outer value (:mod:`lowering.irutils.identities`)
  gave the outer value, an element an unrolled map reads with
  ``SequenceAt``, the shape the Identity declared in its branch: each
  copy's element got the same ``M`` (1 row and 3 rows), or a branch that
  never runs gave its ``[1,2]`` to a 3-row element;
- inlining an If on a constant in an unrolled copy
  (:mod:`lowering.irutils.static_fold`) kept what the branch declared, so
  every copy's inlined values said ``M`` side by side in one graph.

onnxruntime plans its buffers from declared shapes: "Shape mismatch
attempting to re-use buffer. {1,2} != {3,2}" where the original ran. The
fuzzer (issue 21, seed 2201) found it through a map nested in a Loop in an
unrolled map body, returning the outer element through an Identity.

Each model here maps elements of different sizes (1, 3 and 1 rows) and
declares a dim in a nested graph; under every strategy, the lowered model
passes the full checker, computes what the original computes in
onnxruntime, and every dim its main graph declares, symbolic ones
included, holds at run time.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils.identities import bypass_identities
from tests.cases.fuzz_regressions import FUZZ, fuzz_expected, fuzz_feeds
from tests.helpers import assert_declared_shapes_hold, assert_same, lowered, parse, run

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'
# Elements of three sizes: read with SequenceAt (the insert's position is an input).
READ = """
  s0 = SequenceConstruct(a, b)
  s = SequenceInsert(s0, c, p)
"""
# Elements known statically, so that what a copy tests about its element folds.
KNOWN = """
  s = SequenceConstruct(a, b, c)
"""
SIGNATURE = "g (float[1,2] a, float[3,2] b, float[1,2] c, int64 p, bool k, int64 n)"

# name: (how the elements are made, the map's body)
CASES = {
    "identity in a branch, named dim": (
        READ,
        """(float[N,2] e) => (float[?,2] r) {
          r = If(k) <then_branch = t () => (float[M,2] x) <float[M,2] i> {
                       i = Identity(e)
                       x = Relu(i) },
                     else_branch = f () => (float[M,2] x2) { x2 = Neg(e) }>
        }""",
    ),
    "identity in a branch never taken, static dims": (
        READ,
        """(float[N,2] e) => (float[?,2] r) {
          r = If(k) <then_branch = t () => (float[1,2] x) <float[1,2] i> {
                       i = Identity(e)
                       x = Relu(i) },
                     else_branch = f () => (float[?,2] x2) { x2 = Neg(e) }>
        }""",
    ),
    "identity in a loop body, named dim": (
        READ,
        """(float[N,2] e) => (float[?,2] r) {
          z = Identity(e)
          r = Loop(n, , z) <body = lb (int64 it, bool cin, float[M,2] acc) => (bool cout, float[M,2] nxt)
                                   <float[M,2] i> {
                cout = Identity(cin)
                i = Identity(e)
                nxt = Add(acc, i) }>
        }""",
    ),
    "nested map returns the outer element through an identity": (
        READ,
        """(float[N,2] e) => (float[?,2] r) {
          init = SequenceEmpty <dtype = 1> ()
          l = Loop(n, , init) <body = lb (int64 it, bool cin, seq(float[?,2]) acc)
                                        => (bool cout, seq(float[?,2]) inner) {
                rows = SplitToSequence <axis = 0> (e)
                inner = SequenceMap(rows) <body = ib (float[1,2] row) => (float[M,2] o) {
                  o = Identity(e)
                }>
                cout = Identity(cin)
              }>
          r = ConcatFromSequence <axis = 0> (l)
        }""",
    ),
    "branch inlined in each copy, named dims": (
        KNOWN,
        """(float[N,2] e) => (float[?,2] r) {
          sh = Shape(e)
          rank = Size(sh)
          two = Constant <value = int64 {2}> ()
          c2 = Equal(rank, two)
          r = If(c2) <then_branch = t () => (float[M,2] x) <float[M,2] i, float[M,2] j> {
                        i = Relu(e)
                        j = Neg(i)
                        x = Sigmoid(j) },
                      else_branch = f () => (float[M,2] x2) { x2 = Neg(e) }>
        }""",
    ),
}
OPTIONS = {"auto": {}, "unroll": {"max_unroll": 64}, "loop": {"strategy": "loop"}}

RNG = np.random.default_rng(21)
FEEDS = {
    "a": RNG.standard_normal((1, 2)).astype(np.float32),
    "b": RNG.standard_normal((3, 2)).astype(np.float32),
    "c": RNG.standard_normal((1, 2)).astype(np.float32),
    "p": np.array(1, np.int64),
    "k": np.array(False),
    "n": np.array(2, np.int64),
}


def _model(name: str) -> onnx.ModelProto:
    elements, body = CASES[name]
    return parse(
        f"""{HEADER}
        {SIGNATURE} => (seq(float[?,2]) y) {{
          {elements}
          y = SequenceMap <body = body {body}> (s)
        }}"""
    )


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
@pytest.mark.parametrize("name", list(CASES))
def test_a_nested_graph_declares_nothing_outside_it(name, options):
    model = _model(name)
    onnx.checker.check_model(model, full_check=True)
    expected = run(model, FEEDS)
    assert len({np.asarray(e).shape for e in expected[0]}) > 1  # the family's point
    result = lowered(model, **options)
    assert_same(run(result, FEEDS), expected)
    assert_declared_shapes_hold(result, FEEDS)


BRANCH = """g (bool k, float[1,2] x) => (float[1,2] y) {
  t = Neg(x)
  y = If(k) <then_branch = th () => (float[1,2] r) <float[M,2] i> {
                i = Identity(OUTER)
                r = Relu(i) },
              else_branch = el () => (float[1,2] r2) { r2 = Abs(x) }>
}"""


@pytest.mark.parametrize(("source", "keeps"), [("t", False), ("inner", True)])
def test_a_bypassed_identity_shapes_only_a_value_of_its_own_graph(source, keeps):
    """The mechanism: the Identity's input takes its type, and its shape only from
    the same graph (``t``, made outside the branch, keeps no shape of its own)."""
    text = BRANCH.replace("OUTER", source)
    if source == "inner":
        text = text.replace("i = Identity(inner)", "inner = Sin(x)\n i = Identity(inner)")
    model = ir.serde.deserialize_model(parse(HEADER + text))
    branch = model.graph.node(1).attributes["then_branch"].as_graph()
    identity = next(node for node in branch if node.op_type == "Identity")
    read = identity.inputs[0]
    assert read is not None
    read.type, read.shape = None, None
    assert bypass_identities([identity]) == {identity}
    assert read.type == ir.TensorType(ir.DataType.FLOAT)
    assert (read.shape is not None) == keeps
    if keeps:
        assert str(read.shape) == "[M,2]"


def test_the_fuzzers_example():
    """The shrunk example of seed 2201: functions whose map body is a graph
    attribute, maps nested in Loop and If bodies, a body returning an outer
    value through an Identity and one returning its own input (onnxruntime
    cannot run the original: the fuzzer's oracle says what it computes)."""
    name = "declared_dims_moved_out_of_a_body"
    model = onnx.load(FUZZ / f"{name}.onnx")
    feeds = fuzz_feeds(name)
    result = lowering.lower(model)
    onnx.checker.check_model(result, full_check=True)
    assert_same(run(result, feeds), fuzz_expected(name))
