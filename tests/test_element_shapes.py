"""Elements of one sequence with different shapes: no strategy may declare a false shape.

A lowering reads elements one by one (``SequenceAt``/``Gather`` in a Loop
body, one copy per element when unrolled) and stacks or collects the
results. The type it gives each new value is copied from the map: the
body's declared input and output types, the sequence's element type, or
ONNX shape inference. A dim may only be declared when it holds for every
element and every trip: where elements differ, the dim is unknown or
symbolic, never one element's size. A false dim is an invalid model
("Inferred shape and existing shape differ in dimension") or, where ONNX's
checker cannot see it, a promise onnxruntime may plan memory on.

The elements here differ in their first dim. They come from every way a
sequence's element type can be formed: a SequenceConstruct of tensors of
static shapes, SequenceInsert, SplitToSequence with sizes, If branches that
build sequences of different shapes, a Loop that grows its elements, a
graph input, a function called with two shapes, a body that declares a
symbolic dim, and a second mapped sequence whose elements differ from the
first's. The bodies either keep the element's shape or make a uniform one
out of differing elements (which the uniform Loop stacks). Last, one
symbolic dim declared for two inputs of different sizes, under the stacked
forms (vectorized body, Scan of split -> map -> concat).
Each case runs under every strategy: the output passes the full checker,
equals the numpy oracle in onnxruntime, and every shape it declares in the
main graph holds at run time.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.helpers import assert_declared_shapes_hold, assert_same, lowered, parse, run

OPTIONS = {
    "auto": {},
    "loop": {"strategy": "loop"},
    "no_unroll": {"max_unroll": 0},
    "unroll": {"max_unroll": 64},
}

A = np.arange(2, dtype=np.float32).reshape(1, 2)
B = np.arange(4, dtype=np.float32).reshape(2, 2) - 1
C = np.arange(6, dtype=np.float32).reshape(3, 2) * 0.5
FEEDS = {"a": A, "b": B, "c": C}
HEADER = '<ir_version: 9, opset_import: ["" : 18, "local" : 1]>'

# body name -> (body, its result as numpy, the element type of the map's output)
BODIES = {
    "keeps_shape": ("({t} e) => ({u} y) {{ y = Neg(e) }}", lambda e: -e, "float[?,2]"),
    "uniform_result": (
        (
            "({t} e) => ({r} y) {{ k = Constant<value = int64[1] {{0}}>() "
            "y = ReduceSum<keepdims = 1>(e, k) }}"
        ),
        lambda e: e.sum(axis=0, keepdims=True),
        "float[1,2]",
    ),
    "shape_of": (
        "({t} e) => ({i} y) {{ y = Shape(e) }}",
        lambda e: np.array(e.shape, np.int64),
        "int64[2]",
    ),
}

# source name -> (graph inputs, nodes making sequence `s`, the elements, extra feeds)
SOURCES = {
    "construct": ("", "s = SequenceConstruct(a, b, c)", [A, B, C], {}),
    "insert": (
        "",
        (
            "e0 = SequenceEmpty<dtype = 1>() e1 = SequenceInsert(e0, c) "
            "z = Constant<value = int64 {0}>() e2 = SequenceInsert(e1, a, z) "
            "s = SequenceInsert(e2, b)"
        ),
        [A, C, B],
        {},
    ),
    "split_sizes": (
        ", float[6,2] x",
        "sizes = Constant<value = int64[3] {1, 2, 3}>() s = SplitToSequence<axis = 0>(x, sizes)",
        [A, B, C],
        {"x": np.concatenate([A, B, C])},
    ),
    "if_branches": (
        ", bool flag",
        (
            "s = If(flag) <then_branch = t () => (seq(float[1,2]) st) { st = SequenceConstruct(a, a) },"
            " else_branch = f () => (seq(float[?,2]) sf) { sf = SequenceConstruct(b, c) }>"
        ),
        [B, C],
        {"flag": np.array(False)},
    ),
    "loop_grown": (
        ", int64 n",
        (
            "s0 = SequenceConstruct(a) go = Constant<value = bool {1}>() "
            "s = Loop(n, go, s0) <body = grow (int64 i, bool cin, seq(float[?,2]) acc)"
            " => (bool cout, seq(float[?,2]) more) {"
            " cout = Identity(cin) last = SequenceAt(acc, i)"
            " twice = Concat<axis = 0>(last, last) more = SequenceInsert(acc, twice) }>"
        ),
        [A, np.concatenate([A, A]), np.concatenate([A, A, A, A])],
        {"n": np.array(2, np.int64)},
    ),
    "graph_input": (", seq(float[?,2]) q", "s = Identity(q)", [A, C, B], {"q": [A, C, B]}),
}


def _body(body: str, declared: str) -> str:
    text = BODIES[body][0]
    return text.format(t=declared, u=declared, r="float[1,2]", i="int64[2]")


def _map_model(source: str, body: str, declared: str = "float[?,2]") -> tuple[str, list]:
    inputs, nodes, elements, _ = SOURCES[source]
    return (
        f"""{HEADER}
        g (float[1,2] a, float[2,2] b, float[3,2] c{inputs}) => (seq({BODIES[body][2]}) out) {{
            {nodes}
            out = SequenceMap(s) <body = m {_body(body, declared)}>
        }}""",
        [[BODIES[body][1](e) for e in elements]],
    )


def _cases():
    for source in SOURCES:
        for body in BODIES:
            yield f"{source}-{body}", *_map_model(source, body), SOURCES[source][3]
    for body in BODIES:
        # The body's own declaration: a symbolic dim, true of every element.
        yield f"declared_symbolic-{body}", *_map_model("construct", body, "float[R,2]"), {}
        # No declaration at all: the element type is inferred.
        untyped = _map_model("construct", body, "")[0].replace("( e)", "(e)").replace("( y)", "(y)")
        yield f"untyped-{body}", untyped, _map_model("construct", body)[1], {}
        # One function, called with elements of two shapes.
        yield (
            f"function-{body}",
            f"""{HEADER}
            g (float[1,2] a, float[2,2] b, float[3,2] c)
                => (seq({BODIES[body][2]}) o1, seq({BODIES[body][2]}) o2) {{
                s1 = SequenceConstruct(a, a)
                s2 = SequenceConstruct(b, c)
                o1 = local.f(s1)
                o2 = local.f(s2)
            }}
            <domain: "local", opset_import: ["" : 18]>
            f (s) => (out) {{ out = SequenceMap(s) <body = m {_body(body, "")}> }}""".replace(
                "( e)", "(e)"
            ).replace("( y)", "(y)"),
            [[BODIES[body][1](e) for e in (A, A)], [BODIES[body][1](e) for e in (B, C)]],
            {},
        )
    # Two mapped sequences whose elements differ from each other and along each.
    yield (
        "two_sequences",
        f"""{HEADER}
        g (float[1,2] a, float[2,2] b, float[3,2] c) => (seq(float[?,2]) out) {{
            s1 = SequenceConstruct(a, b, c)
            s2 = SequenceConstruct(c, a, b)
            out = SequenceMap(s1, s2) <body = m (float[?,2] e, float[?,2] f) => (float[?,2] y) {{
                y = Concat<axis = 0>(e, f)
            }}>
        }}""",
        [[np.concatenate([x, y]) for x, y in [(A, C), (B, A), (C, B)]]],
        {},
    )

    # One symbolic dim declared for two inputs whose rows differ (1 and 3):
    # true of each, not a claim that they are equal. The stacked forms
    # (the vectorized body, the Scan of split -> map -> concat) read both.
    x, z = np.arange(8, dtype=np.float32).reshape(4, 1, 2), np.ones((4, 3, 2), np.float32)
    pairs = [np.concatenate([e, f]) for e, f in zip(x, z, strict=True)]
    for tail, output, expected in [
        ("out = Identity(y)", "seq(float[?,2])", [pairs]),
        ("out = ConcatFromSequence<axis = 0>(y)", "float[?,2]", [np.concatenate(pairs)]),
    ]:
        yield (
            f"shared_symbolic-{'stacked' if 'Concat' in tail else 'sequence'}",
            f"""{HEADER}
            g (float[N,1,2] x, float[N,3,2] z) => ({output} out) {{
                s = SplitToSequence<axis = 0, keepdims = 0>(x)
                t = SplitToSequence<axis = 0, keepdims = 0>(z)
                y = SequenceMap(s, t) <body = m (float[R,2] e, float[R,2] f) => (float[Q,2] r) {{
                    r = Concat<axis = 0>(e, f)
                }}>
                {tail}
            }}""",
            expected,
            {"x": x, "z": z},
        )


CASES = list(_cases())


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize(
    ("text", "expected", "extra"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_elements_of_different_shapes_under_every_strategy(text, expected, extra, options):
    model = parse(text)
    onnx.checker.check_model(model, full_check=True)
    feeds = {**FEEDS, **extra}
    feeds = {i.name: feeds[i.name] for i in model.graph.input}
    result = lowered(model, **options)  # the full checker, no SequenceMap left
    assert_same(run(result, feeds), expected)
    assert_declared_shapes_hold(result, feeds)


def test_the_cases_have_elements_of_different_shapes():
    """The family is the point: every source mixes element shapes."""
    for _, _, elements, _ in SOURCES.values():
        assert len({e.shape for e in elements}) > 1
