"""Fresh names never collide with any name at any scope, and node names stay unique."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.passes.fresh_names import FreshNamesPass
from tests.cases.fuzz_regressions import FUZZ, fuzz_feeds
from tests.helpers import (
    assert_same,
    lowered,
    main_graph_names,
    names_functions_share_with_the_main_graph,
    parse,
    run,
)

# Names a lowering is tempted to use, the ones this project generates, and
# the ones ONNX's own SequenceMap expansion generates, all taken already, in
# the main graph, in the body, in a sibling If branch, and after the map.
CROWDED = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) cond, float i, bool trip_count) => (seq(float[N]) n, float seq_empty,
                                                       float iter_1, float acc_1) {
  [sequence_length_1] seq_len = Identity(i)
  [loop_1] n = SequenceMap <body = body (float[N] iter) => (float[N] acc) {
        [identity_1] acc_next_1 = Identity(iter)
        [sequence_at_1] cond_out_1 = Neg(acc_next_1)
        [sequence_insert_1] trip_count_1 = Identity(cond_out_1)
        [cond_in_1] acc = Add(trip_count_1, i)
      }> (cond)
  [sequence_empty_1] seq_empty = If (trip_count) <
     then_branch = t () => (float empty_1) { [node_SequenceEmpty_1] empty_1 = Identity(i) },
     else_branch = e () => (float cond_in_1) { [node_Loop_1] cond_in_1 = Neg(i) }>
  [x] _inlfunc_SequenceMap_seq_empty = Identity(i)
  [y] _inlfunc_SequenceMap_seq_len = Identity(_inlfunc_SequenceMap_seq_empty)
  [z] _inlfunc_SequenceMap_input_sequence_seq_at = Identity(_inlfunc_SequenceMap_seq_len)
  [w] iter_1 = Identity(_inlfunc_SequenceMap_input_sequence_seq_at)
  [v] acc_1 = Identity(iter_1)
}"""


def _defined_names(graph: onnx.GraphProto, found: collections.Counter, nodes: list) -> None:
    for vi in graph.input:
        found[vi.name] += 1
    for init in graph.initializer:
        found[init.name] += 1
    for node in graph.node:
        nodes.append(node.name)
        for output in node.output:
            found[output] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _defined_names(attr.g, found, nodes)
            for sub in attr.graphs:
                _defined_names(sub, found, nodes)


def test_no_fresh_name_collides_anywhere():
    result = lowered(parse(CROWDED))
    values: collections.Counter = collections.Counter()
    nodes: list[str] = []
    _defined_names(result.graph, values, nodes)
    assert [name for name, count in values.items() if count > 1] == []
    named = [name for name in nodes if name]
    assert len(named) == len(set(named)), collections.Counter(named).most_common(3)


def test_crowded_model_still_computes_the_same():
    rng = np.random.default_rng(0)
    feeds = {
        "cond": [rng.standard_normal(3).astype(np.float32) for _ in range(3)],
        "i": np.array(2.0, np.float32),
        "trip_count": np.array(False),
    }
    expected = [
        [-a + np.float32(2.0) for a in feeds["cond"]],
        np.float32(-2.0),
        np.float32(2.0),
        np.float32(2.0),
    ]
    assert_same(run(lowered(parse(CROWDED)), feeds), expected)


def test_existing_names_are_kept():
    source = parse(CROWDED)
    result = lowered(source)
    original = collections.Counter()
    _defined_names(source.graph, original, [])
    after = collections.Counter()
    _defined_names(result.graph, after, [])
    # The map's own body input "iter" disappears (it becomes SequenceAt's
    # output, which keeps the name); every other name survives.
    assert set(original) <= set(after)


def test_float16_elements_read_in_a_function_share_no_name_with_the_main_graph():
    """Found by the long run (seed 20261213, f59f232): a Loop body in
    function ``f1`` read the element into ``acc_1``, the name of a main-graph
    input that ``f1`` is called with, and onnxruntime stopped with "Shape
    mismatch attempting to re-use buffer" in a float16 Cast it inserts
    (``InsertedPrecisionFreeCast_acc_1``); renaming either ``acc_1`` made it
    run. The loop and no-unrolling forms ran; now every form does."""
    model = onnx.load(FUZZ / "float16_casts_in_inlined_functions.onnx")
    feeds = fuzz_feeds("float16_casts_in_inlined_functions")
    expected = run(lowered(model, strategy="loop"), feeds)
    assert_same(run(lowered(model), feeds), expected)
    assert_same(run(lowered(model, max_unroll=0), feeds), expected)


# A main-graph value named ``e`` passed to ``f``, whose map body input is
# also ``e``: the graph's text (``T`` is the element type) and e's value.
MAIN_GRAPH_E = {
    "graph input": ("y = local.f (s, e)", lambda feeds: feeds["e"]),
    "initializer": ("y = local.f (s, e)", lambda feeds: np.array([1, 2])),
    "node output": ("e = Neg (w)\n y = local.f (s, e)", lambda feeds: -feeds["w"]),
    "node output in an If branch": (
        """c = Constant <value = bool {1}> ()
        y = If (c) <then_branch = t () => (seq(T[2]) y1) { e = Neg (w)
                                                           y1 = local.f (s, e) },
                    else_branch = u () => (seq(T[2]) y2) { y2 = Identity (s) }>""",
        lambda feeds: -feeds["w"],
    ),
    "Loop body input": (
        """k = Constant <value = int64 {1}> ()
        w_out, y = Loop (k, , w, s) <body = l (int64 i, bool c, T[2] e, seq(T[2]) a)
                                               => (bool c_out, T[2] e_out, seq(T[2]) y1) {
            c_out = Identity (c)
            e_out = Identity (e)
            y1 = local.f (a, e)
        }>""",
        lambda feeds: feeds["w"],
    ),
}


@pytest.mark.parametrize("strategy", [{}, {"strategy": "loop"}, {"max_unroll": 0}])
@pytest.mark.parametrize("dtype", ["float16", "float", "int64"])
@pytest.mark.parametrize("kind", MAIN_GRAPH_E)
def test_names_a_function_defines_are_not_main_graph_names(kind, dtype, strategy):
    """The map in ``f`` reads each element into a value named like its body
    input ``e``; the main graph defines an ``e`` of its own, in each way a
    graph can define a name. Runtimes inline ``f`` into the main graph, so
    the element is renamed (:func:`lowered` checks that no name a function
    defines is a main-graph name); ``f``'s formal parameters keep theirs,
    since inlining replaces them by the caller's names."""
    graph, e_value = MAIN_GRAPH_E[kind]
    inputs = "seq(T[2]) s, T[2] w" + (", T[2] e" if kind == "graph input" else "")
    # The parser reads float16 data as raw bits.
    one_two = "15360, 16384" if dtype == "float16" else "1, 2"
    initializers = f"<T[2] e = {{{one_two}}}>" if kind == "initializer" else ""
    text = f"""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g ({inputs}) => (seq(T[2]) y) {initializers} {{
        {graph}
    }}
    <domain: "local", opset_import: ["" : 17]>
    f (s, v) => (y) {{
        y = SequenceMap <body = b (T[2] e) => (T[2] o) {{ o = Mul (e, v) }}> (s)
    }}"""
    model = parse(text.replace("T[", f"{dtype}["))
    onnx.checker.check_model(model, full_check=True)
    result = lowered(model, **strategy)
    [function] = result.functions
    assert [*function.input, *function.output] == ["s", "v", "y"]
    np_type = {"float16": np.float16, "float": np.float32, "int64": np.int64}[dtype]
    for n in [0, 1, 3]:
        feeds = {
            "s": [np.arange(2).astype(np_type) + k for k in range(n)],
            "w": np.array([3, -4], np_type),
        }
        if kind == "graph input":
            feeds["e"] = np.array([5, 6], np_type)
        e = e_value(feeds).astype(np_type)
        assert_same(run(result, feeds)[-1], [x * e for x in feeds["s"]])


# How the main graph defines ``n`` and hands it to ``f``.
MAIN_DEFINES_N = {
    "graph input": ("float[2] n", "", "y = local.f (n)"),
    "initializer": ("", "<float[2] n = {1.0, 2.0}>", "y = local.f (n)"),
    "node output": ("", "", "n = Neg (w)\n y = local.f (n)"),
    "node output in an If branch": (
        "",
        "",
        """cm = Constant <value = bool {1}> ()
        y = If (cm) <then_branch = t () => (float[2] y1) { n = Neg (w)
                                                          y1 = local.f (n) },
                    else_branch = u () => (float[2] y2) { y2 = Identity (w) }>""",
    ),
    "Loop body input": (
        "",
        "",
        """km = Constant <value = int64 {1}> ()
        y = Loop (km, , w) <body = l (int64 im, bool cm, float[2] n) => (bool cm_out, float[2] y1) {
            cm_out = Identity (cm)
            y1 = local.f (n)
        }>""",
    ),
}

# How ``f`` (or ``g``, which ``f`` calls) defines an ``n`` of its own.
LOOP = """k = Constant <value = int64 {1}> ()
        r = Loop (k, , a) <body = b (int64 i, bool c, float[2] x) => (bool c_out, float[2] x_out)
                                    INITIALIZERS {
            c_out = Identity (c)
            BODY
        }>"""
FUNCTION_DEFINES_N = {
    "node output": "n = Neg (a)\n r = Neg (n)",
    "Loop body node output": LOOP.replace("BODY", "n = Neg (x)\n x_out = Identity (n)"),
    "Loop body input": LOOP.replace("float[2] x)", "float[2] n)").replace(
        "BODY", "x_out = Neg (n)"
    ),
    "Loop body initializer": LOOP.replace("INITIALIZERS", "<float[2] n = {1.0, 1.0}>").replace(
        "BODY", "x_out = Sub (x, n)"
    ),
    "If branch in a Loop body": LOOP.replace(
        "BODY",
        """t = Constant <value = bool {1}> ()
            x_out = If (t) <then_branch = tb () => (float[2] z) { n = Neg (x)
                                                                  z = Identity (n) },
                            else_branch = eb () => (float[2] z2) { z2 = Identity (x) }>""",
    ),
    "a function f calls": "r = local.g (a)",
}


@pytest.mark.parametrize("in_function", FUNCTION_DEFINES_N)
@pytest.mark.parametrize("in_main", MAIN_DEFINES_N)
def test_no_name_a_function_defines_repeats_a_main_graph_name(in_main, in_function):
    """The naming pass alone, over every way the main graph and a function can
    define the same name: the function's ``n`` is renamed, the main graph's
    names and the function's formal parameters stay, and onnxruntime
    computes what it computed before."""
    extra_input, initializers, graph = MAIN_DEFINES_N[in_main]
    body = FUNCTION_DEFINES_N[in_function].replace("INITIALIZERS", "")
    inner = "g (a) => (r) { n = Neg (a)\n r = Neg (n) }"
    text = f"""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g ({", ".join(filter(None, ["float[2] w", extra_input]))}) => (float[2] y) {initializers} {{
        {graph}
    }}
    <domain: "local", opset_import: ["" : 17, "local" : 1]>
    f (a) => (r) {{ {body} }}
    <domain: "local", opset_import: ["" : 17]>
    {inner}"""
    model = parse(text)
    onnx.checker.check_model(model, full_check=True)
    assert names_functions_share_with_the_main_graph(model) == {"n"}
    feeds = {"w": np.array([3, -4], np.float32)}
    if extra_input:
        feeds["n"] = np.array([5, 6], np.float32)
    expected = run(model, feeds)

    ir_model = ir.serde.deserialize_model(model)
    assert FreshNamesPass()(ir_model).modified
    result = ir.serde.serialize_model(ir_model)

    onnx.checker.check_model(result, full_check=True)
    assert names_functions_share_with_the_main_graph(result) == set()
    assert main_graph_names(result) == main_graph_names(model)
    assert [(f.name, [*f.input], [*f.output]) for f in result.functions] == [
        ("f", ["a"], ["r"]),
        ("g", ["a"], ["r"]),
    ]
    assert_same(run(result, feeds), expected)


NOTHING_TO_LOWER = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2] n) => (float[2] y) { y = local.f (n) }
<domain: "local", opset_import: ["" : 17]>
f (a) => (r) { n = Neg (a)
               r = Neg (n) }"""


@pytest.mark.parametrize("target_opset", [None, 18])
def test_a_model_with_nothing_to_lower_keeps_its_names(target_opset):
    """Nothing rewritten (at most the opset relabelled): nothing renamed,
    on the onnx_ir path too, where the model is not copied byte for byte."""
    model = ir.serde.deserialize_model(parse(NOTHING_TO_LOWER))
    lowering.lower_in_place(model, target_opset=target_opset)
    [function] = model.functions.values()
    assert [v.name for node in function for v in node.outputs] == ["n", "r"]


def test_a_lowered_model_renames_what_its_functions_share_with_the_main_graph():
    """The same function, in a model that has a map to lower."""
    text = (
        NOTHING_TO_LOWER.replace("(float[2] y)", "(float[2] y, seq(float[2]) z)")
        .replace(
            "{ y = local.f (n) }",
            "{ y = local.f (n)\n z = SequenceMap <body = b (float[2] e) => (float[2] o) "
            "{ o = Neg (e) }> (s) }",
        )
        .replace("(float[2] n)", "(float[2] n, seq(float[2]) s)")
    )
    model = ir.serde.deserialize_model(parse(text))
    lowering.lower_in_place(model)
    [function] = model.functions.values()
    assert [v.name for node in function for v in node.outputs] == ["n_1", "r"]
