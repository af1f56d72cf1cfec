"""Names that repeat across scopes: every lowering stays SSA-valid and computes the same.

ONNX lets a body input reuse any name of its enclosing scopes (paddle2onnx
names a map's body input exactly like the outer sequence; nested maps all
call theirs ``e``), and a name may be one the pass itself generates
(``iter_1``, ``acc_1``, ...). Lowering turns body inputs into node outputs,
which may not repeat an enclosing name. This generator draws every body
input and output name from a small pool, so such collisions are the rule,
and places the map at the top level, in an If branch, in a Loop body and
in a model-local function, nested one to three levels deep.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

from tests.helpers import assert_same, lowered, parse, run

# Outer names, names this project generates, and a common body-input name.
POOL = ["X", "W", "Y", "e", "iter_1", "acc_1", "trip_count_1", "empty_1", "cond_in_1", "true_1"]
SHAPE = [2, 2, 2]


def _nested_body(
    level: int, depth: int, rng, taken: set[str], extra: bool, first: str | None = None
) -> tuple[str, str]:
    """A map body of nesting ``level``: (text, name of its input)."""
    rank = len(SHAPE) - level + 1
    dims = ",".join(["2"] * rank)
    element = f"float[{dims}]" if rank else "float"
    a = first or str(rng.choice(POOL))
    b = str(rng.choice([n for n in POOL if n != a])) if extra else None
    # A node output may repeat no enclosing name (the original must be valid).
    free = [n for n in POOL if n not in taken and n not in (a, b)]
    c = str(rng.choice(free)) if free else f"out{level}"
    inputs = f"{element} {a}" + (f", {element} {b}" if extra else "")
    if level == depth:
        nodes = f"{c} = Add({a}, {b})" if extra else f"{c} = Neg({a})"
    else:
        s, t, u = f"s{level}", f"t{level}", f"u{level}"
        inner, _ = _nested_body(level + 1, depth, rng, taken | {a, b, c, s, t, u}, extra=False)
        stack = f"{c} = Add({u}, {b})" if extra else f"{c} = Identity({u})"
        nodes = f"""{s} = SplitToSequence <axis = 0, keepdims = 0> ({a})
          {t} = SequenceMap <body = {inner}> ({s})
          {u} = ConcatFromSequence <axis = 0, new_axis = 1> ({t})
          {stack}"""
    return f"b{level} ({inputs}) => ({element} {c}) {{ {nodes} }}", a


def _model(depth: int, place: str, source: str, seed: int | str) -> onnx.ModelProto:
    """Seed "X": the outermost body input is named like the mapped sequence."""
    first = seed if isinstance(seed, str) else None
    rng = np.random.default_rng(0 if first else seed)
    q = str(rng.choice(POOL[3:]))  # an If branch's output
    i, cond, acc, out, nxt = (str(n) for n in rng.choice(POOL[3:], 5, replace=False))
    taken = {"X", "W", "Y", "k", "x0", "x1", "x2"}
    taken |= {"if": {q}, "loop": {i, cond, acc, out, nxt}}.get(place, set())
    body, _ = _nested_body(1, depth, rng, taken, extra=True, first=first)
    seq = "float[2,2,2]"
    if source == "construct":
        inputs = f"{seq} x0, {seq} x1, {seq} x2, {seq} W"
        make_x = "X = SequenceConstruct(x0, x1, x2)"
    else:
        inputs = f"seq({seq}) X, {seq} W"
        make_x = ""
    the_map = f"SequenceMap <body = {body}> (X, W)"
    header = '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'
    outputs = f"seq({seq}) Y"
    if place == "top":
        graph = f"{make_x}\n Y = {the_map}"
    elif place == "if":
        graph = f"""{make_x}
          k = Constant <value = bool {{1}}> ()
          Y = If (k) <
            then_branch = t () => (seq({seq}) {q}) {{ {q} = {the_map} }},
            else_branch = f () => (seq({seq}) Z) {{ Z = Identity(X) }}>"""
    elif place == "loop":
        graph = f"""{make_x}
          k = Constant <value = int64 {{1}}> ()
          Y = Loop (k, , X) <body = l (int64 {i}, bool {cond}, seq({seq}) {acc})
                                      => (bool {out}, seq({seq}) {nxt}) {{
            {out} = Identity({cond})
            {nxt} = SequenceMap <body = {body}> ({acc}, W)
          }}>"""
    else:  # a function that calls a function that holds the map
        graph = f"{make_x}\n Y = local.outer(X, W)"
        functions = f"""
        <domain: "local", opset_import: ["" : 17, "local" : 1]>
        outer (X, W) => (Y) {{ Y = local.inner(X, W) }}
        <domain: "local", opset_import: ["" : 17]>
        inner (X, W) => (Y) {{ Y = {the_map} }}"""
        return parse(f"{header} g ({inputs}) => ({outputs}) {{ {graph} }} {functions}")
    return parse(f"{header} g ({inputs}) => ({outputs}) {{ {graph} }}")


def _feeds(source: str, n: int, rng) -> dict:
    elements = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]
    w = rng.standard_normal(SHAPE).astype(np.float32)
    if source == "construct":
        return {"x0": elements[0], "x1": elements[1], "x2": elements[2], "W": w}
    return {"X": elements, "W": w}


def _expected(feeds: dict, depth: int) -> list:
    elements = feeds["X"] if "X" in feeds else [feeds["x0"], feeds["x1"], feeds["x2"]]
    inner = [-e for e in elements] if depth > 1 else elements  # the innermost body negates
    return [[e + feeds["W"] for e in inner]]


STRATEGIES = {
    "auto": {},
    "loop": {"strategy": "loop"},
    "no_unroll": {"max_unroll": 0},
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("seed", ["X", 0, 1, 2])
@pytest.mark.parametrize("source", ["input", "construct"])
@pytest.mark.parametrize("place", ["top", "if", "loop", "function"])
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.sweep
def test_colliding_names_lower_to_valid_equivalent_models(depth, place, source, seed, strategy):
    model = _model(depth, place, source, seed)
    onnx.checker.check_model(model, full_check=True)  # the original is valid
    result = lowered(model, **STRATEGIES[strategy])  # full checker, no SequenceMap
    rng = np.random.default_rng(0)
    lengths = [3] if source == "construct" else [1, 3]
    for n in lengths:
        feeds = _feeds(source, n, rng)
        assert_same(run(result, feeds), _expected(feeds, depth))


def _names_defined(graph: onnx.GraphProto) -> collections.Counter:
    found: collections.Counter = collections.Counter()
    for vi in graph.input:
        found[vi.name] += 1
    for node in graph.node:
        found.update(node.output)
    return found


def test_only_what_collides_is_renamed():
    """The body input named like the outer sequence is renamed; nothing else is."""
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[N]) X, float[N] W) => (seq(float[N]) Y) {
      Y = SequenceMap <body = b (float[N] X, float[N] keep) => (float[N] out) {
        out = Add(X, keep)
      }> (X, W)
    }"""
    result = lowered(parse(text), strategy="loop")
    (loop,) = [n for n in result.graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    defined = _names_defined(body)
    assert "X" not in defined  # it would repeat the outer sequence's name
    assert "out" in defined  # the body's own names are kept where they don't collide
    assert [i.name for i in result.graph.input] == ["X", "W"]
    assert [o.name for o in result.graph.output] == ["Y"]


def test_nested_maps_all_named_e():
    """Three nested maps whose bodies all call their input ``e``."""
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[2,2]) s) => (seq(float[2,2]) y) {
      y = SequenceMap <body = b1 (float[2,2] e) => (float[2,2] o1) {
        s1 = SplitToSequence <keepdims = 0> (e)
        t1 = SequenceMap <body = b2 (float[2] e) => (float[2] o2) {
          s2 = SplitToSequence <keepdims = 0> (e)
          t2 = SequenceMap <body = b3 (float e) => (float o3) { o3 = Neg(e) }> (s2)
          o2 = ConcatFromSequence <axis = 0, new_axis = 1> (t2)
        }> (s1)
        o1 = ConcatFromSequence <axis = 0, new_axis = 1> (t1)
      }> (s)
    }"""
    rng = np.random.default_rng(0)
    feeds = {"s": [rng.standard_normal([2, 2]).astype(np.float32) for _ in range(3)]}
    for options in STRATEGIES.values():
        result = lowered(parse(text), **options)
        assert_same(run(result, feeds), [[-x for x in feeds["s"]]])
