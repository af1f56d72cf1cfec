"""Bodies with no nodes: they return their own input, an outer value, or both.

Such a body is valid ONNX, and every strategy must lower it correctly: the
result is the element itself, or the same outer tensor n times. A branch
nested in a body may do the same. onnx_ir cannot hold a graph output that
belongs to another graph, so these are the cases where an object-based
rewrite most easily loses track of what a name meant.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import assert_same, lowered, parse, run

H = '<ir_version: 8, opset_import: ["" : 18]>'

# body text, and its results for element e, extra input w, outer tensor t.
BODIES = {
    "own_input": ("(float[2] e, float[2] w) => (float[2] e) { }", lambda e, w, t, k: [e]),
    "outer_value": ("(float[2] e, float[2] w) => (float[2] t) { }", lambda e, w, t, k: [t]),
    "extra_input": ("(float[2] e, float[2] w) => (float[2] w) { }", lambda e, w, t, k: [w]),
    "input_twice": (
        "(float[2] e, float[2] w) => (float[2] e, float[2] e) { }",
        lambda e, w, t, k: [e, e],
    ),
    "outer_twice": (
        "(float[2] e, float[2] w) => (float[2] t, float[2] t) { }",
        lambda e, w, t, k: [t, t],
    ),
    "mixed": (
        "(float[2] e, float[2] w) => (float[2] e, float[2] t, float[2] w) { }",
        lambda e, w, t, k: [e, t, w],
    ),
    "branches_return_input_or_outer": (
        """(float[2] e, float[2] w) => (float[2] o) {
             o = If (k) <then_branch = tb () => (float[2] e) { },
                         else_branch = eb () => (float[2] t) { }>
           }""",
        lambda e, w, t, k: [e if k else t],
    ),
}

SOURCES = {
    "construct": "s = SequenceConstruct(a, b)",
    "split": "s = SplitToSequence <axis = 0, keepdims = 0> (x)",
    "input": "s = Identity(q)",
}

STRATEGIES = {"auto": {}, "loop": {"strategy": "loop"}, "no_unroll": {"max_unroll": 0}}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("concat", [False, True], ids=["sequences", "concat"])
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("body", BODIES)
def test_body_without_nodes(body, source, concat, strategy):
    text, oracle = BODIES[body]
    count = len(oracle(0, 0, 0, True))
    ys = ", ".join(f"y{i}" for i in range(count))
    if concat:
        outputs = ", ".join(f"float[N,2] z{i}" for i in range(count))
        readers = "\n".join(
            f"z{i} = ConcatFromSequence <axis = 0, new_axis = 1> (y{i})" for i in range(count)
        )
    else:
        outputs = ", ".join(f"seq(float[2]) y{i}" for i in range(count))
        readers = ""
    model = parse(
        f"""{H}
        g (float[2] a, float[2] b, float[2,2] x, seq(float[2]) q, float[2] t, float[2] w,
           bool k) => ({outputs}) {{
          ones = Constant <value = int64[2] {{1, 1}}> ()
          {SOURCES[source]}
          {ys} = SequenceMap <body = body {text}> (s, w)
          {readers}
        }}"""
    )
    result = lowered(model, **STRATEGIES[strategy])
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(2).astype(np.float32) for name in "abtw"}
    feeds["x"] = np.stack([feeds["a"], feeds["b"]])
    feeds["q"] = [feeds["a"], feeds["b"]]
    for k in (True, False):
        feeds["k"] = np.array(k)
        per_element = [oracle(e, feeds["w"], feeds["t"], k) for e in (feeds["a"], feeds["b"])]
        expected = [[results[j] for results in per_element] for j in range(count)]
        if concat:
            expected = [np.stack(column) for column in expected]
        assert_same(run(result, feeds), expected)
