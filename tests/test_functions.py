"""Maps in model-local functions: types through call chains, bodies passed as graph attributes.

Each model is lowered under every strategy, must pass the full checker and
leave no SequenceMap (``tests.helpers.lowered``), and must compute in
onnxruntime what a list comprehension computes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.passes.lower_sequence_maps import LowerSequenceMapPass
from lowering.passes.specialize_functions import SpecializeFunctionsPass
from tests.cases.functions import ADD_C, FUNCTION, HEADER, SQUARE, apply_model
from tests.golden import canonical_text
from tests.helpers import all_nodes, assert_same, lowered, parse, run

STRATEGIES = ["auto", "loop"]
LENGTHS = [0, 3]
# The oracles of the bodies passed as graph attributes.
ORACLES = {SQUARE: lambda e, c: e * e, ADD_C: lambda e, c: e + c}


def _feeds(n: int) -> dict:
    rng = np.random.default_rng(n)
    return {
        "x": [rng.standard_normal(2).astype(np.float32) for _ in range(n)],
        "c": rng.standard_normal(2).astype(np.float32),
    }


def _functions(model: onnx.ModelProto) -> list[str]:
    return sorted(f.name for f in model.functions)


def _check(model: onnx.ModelProto, strategy: str, n: int, expected) -> onnx.ModelProto:
    result = lowered(model, strategy=strategy)
    feeds = _feeds(n)
    assert_same(run(result, feeds), expected(feeds))
    # Lowering again has nothing left to do.
    assert lowering.lower(result, strategy=strategy) == result
    return result


def chain_model(depth: int, call_in_if: bool) -> onnx.ModelProto:
    """main -> f<depth-1> -> ... -> f0, and only f0 maps; nothing typed inside."""
    functions = [
        f"""{FUNCTION}
        f0 (s) => (t) {{ t = SequenceMap <body = body (e) => (d) {{ d = Mul(e, e) }}> (s) }}"""
    ]
    for k in range(1, depth):
        if call_in_if:  # the call site sits in a subgraph of the calling function
            call = f"""n{k} = SequenceLength(a)
              zero{k} = Constant <value = int64 {{0}}> ()
              always{k} = GreaterOrEqual(n{k}, zero{k})
              b = If (always{k}) <
                then_branch = then{k} () => (b_then{k}) {{ b_then{k} = local.f{k - 1}(a) }},
                else_branch = else{k} () => (b_else{k}) {{ b_else{k} = Identity(a) }}>"""
        else:
            call = f"b = local.f{k - 1}(a)"
        functions.append(f"{FUNCTION}\n f{k} (a) => (b) {{ {call} }}")
    return parse(f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y) {{ y = local.f{depth - 1}(x) }}
    {"".join(functions)}""")


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("call_in_if", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_untyped_map_at_the_end_of_a_call_chain(depth, call_in_if, strategy, n):
    model = chain_model(depth, call_in_if)
    _check(model, strategy, n, lambda f: [[e * e for e in f["x"]]])


def test_call_sites_that_disagree_leave_the_function_untyped():
    """f0 is called with float and with int64 elements: no one type for its body."""
    model = parse(f"""{HEADER}
    g (seq(float[2]) x, seq(int64[2]) z) => (seq(float[2]) y, seq(int64[2]) w) {{
      y = local.f1(x)
      w = local.f1(z)
    }}
    {FUNCTION} f1 (a) => (b) {{ b = local.f0(a) }}
    {FUNCTION} f0 (s) => (t) {{ t = SequenceMap <body = body (e) => (d) {{ d = Mul(e, e) }}> (s) }}
    """)
    with pytest.raises(lowering.LoweringError, match="cannot be determined"):
        lowering.lower(model)


def test_map_body_calling_a_function_with_a_map():
    """Function in function: a map's body calls a function that maps again."""
    model = parse(f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y) {{
      y = local.outer(x)
    }}
    {FUNCTION} outer (a) => (b) {{
      b = SequenceMap <body = outer_body (e) => (d) {{
            parts = SplitToSequence <keepdims = 0> (e)
            squares = local.inner(parts)
            d = ConcatFromSequence <axis = 0, new_axis = 1> (squares)
          }}> (a)
    }}
    {FUNCTION} inner (s) => (t) {{ t = SequenceMap <body = body (e) => (d) {{ d = Mul(e, e) }}> (s) }}
    """)
    for strategy in STRATEGIES:
        for n in LENGTHS:
            _check(model, strategy, n, lambda f: [[e * e for e in f["x"]]])


def _apply_oracle(graphs: list[str]):
    return lambda feeds: [[ORACLES[g](e, feeds["c"]) for e in feeds["x"]] for g in graphs]


APPLY_CASES = {
    "one_graph_once": [SQUARE],
    "one_graph_twice": [ADD_C, ADD_C],
    "two_graphs": [SQUARE, ADD_C],
    "two_graphs_one_repeated": [ADD_C, SQUARE, ADD_C],
}


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("case", list(APPLY_CASES))
def test_graph_attribute_bodies_are_specialized(case, depth, strategy, n):
    graphs = APPLY_CASES[case]
    model = apply_model(graphs, depth)
    result = _check(model, strategy, n, _apply_oracle(graphs))
    # One copy of each function per distinct graph; the originals are gone.
    distinct = len(set(graphs))
    expected = sorted(f"wrap{k}_{i}" for k in range(depth) for i in range(1, distinct + 1))
    assert _functions(result) == expected
    assert not any(a.ref_attr_name for node in all_nodes(result) for a in node.attribute)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("depth", [1, 2])
def test_graph_attribute_passed_from_inside_a_map_body(depth, strategy, n):
    graphs = [SQUARE, ADD_C]
    _check(apply_model(graphs, depth, call_in_map=True), strategy, n, _apply_oracle(graphs))


NESTED = """body (e) => (d) {
  parts = SplitToSequence <keepdims = 0> (e)
  squares = SequenceMap <body = inner (q) => (r) { r = Mul(q, q) }> (parts)
  d = ConcatFromSequence <axis = 0, new_axis = 1> (squares)
}"""
ORACLES[NESTED] = lambda e, c: e * e


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("depth", [1, 2])
def test_graph_attribute_body_with_a_map_inside(depth, strategy):
    graphs = [NESTED, ADD_C]
    for n in LENGTHS:
        _check(apply_model(graphs, depth), strategy, n, _apply_oracle(graphs))


def test_graph_attribute_default_is_used_where_a_call_passes_none():
    model = apply_model([SQUARE], 1)
    function = model.functions[0]
    graph = model.graph.node[0].attribute[0]  # the call's fn, as the function's default
    del model.graph.node[0].attribute[:]
    del function.attribute[:]
    function.attribute_proto.add().CopyFrom(graph)
    onnx.checker.check_model(model, full_check=True)
    for strategy in STRATEGIES:
        result = _check(model, strategy, 3, _apply_oracle([SQUARE]))
        assert _functions(result) == ["wrap0_1"]


def test_a_call_without_the_graph_is_an_error_and_changes_nothing():
    model = apply_model([SQUARE], 2)
    model.functions[1].node[0].ClearField("attribute")  # wrap1 calls wrap0 without fn
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(model)
    assert "function 'local:wrap1'" in str(error.value)
    assert "without the graph attribute 'fn'" in str(error.value)


def test_an_uncalled_function_with_a_graph_attribute_body_is_removed():
    model = parse(f"""{HEADER}
    g (seq(float[2]) x) => (seq(float[2]) y) {{ y = Identity(x) }}
    {FUNCTION} wrap0 <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}
    """)
    result = lowered(model)
    assert _functions(result) == []
    feeds = {"x": _feeds(2)["x"]}
    assert_same(run(result, feeds), [feeds["x"]])


def test_functions_without_graph_attribute_bodies_are_left_alone():
    model = parse(f"""{HEADER}
    g (seq(float[2]) x) => (seq(float[2]) y) {{ y = local.f0(x) }}
    {FUNCTION} f0 (s) => (t) {{ t = SequenceMap <body = body (e) => (d) {{ d = Mul(e, e) }}> (s) }}
    {FUNCTION} keep <alpha> (a) => (b) {{ b = Identity(a) }}
    """)
    result = lowered(model)
    assert _functions(result) == ["f0", "keep"]


def test_graph_attribute_handed_on_from_inside_a_map_body():
    """wrap1's own map body hands wrap1's graph attribute on to wrap0."""
    model = parse(f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y0, seq(float[2]) y1) {{
      y0 = local.wrap1 <g = {ADD_C}> (x)
      y1 = local.wrap1 <g = {SQUARE}> (x)
    }}
    {FUNCTION} wrap1 <g> (a) => (b) {{
      b = SequenceMap <body = outer (e) => (r) {{
            single = SequenceConstruct(e)
            mapped = local.wrap0 <fn: graph = @g> (single)
            zero = Constant <value = int64 {{0}}> ()
            r = SequenceAt(mapped, zero)
          }}> (a)
    }}
    {FUNCTION} wrap0 <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}
    """)
    for strategy in STRATEGIES:
        for n in LENGTHS:
            result = _check(model, strategy, n, _apply_oracle([ADD_C, SQUARE]))
            assert _functions(result) == ["wrap0_1", "wrap0_2", "wrap1_1", "wrap1_2"]


def test_scopes_that_import_one_domain_at_two_versions_are_an_error():
    """A graph moved from a caller at opset 18 into a function at 17 could change meaning."""
    model = apply_model([SQUARE], 1)
    model.opset_import[0].version = 18
    with pytest.raises(
        lowering.LoweringError, match=r"domain 'ai.onnx' at different versions \[17, 18\]"
    ):
        lowering.lower(model)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_passed_graph_that_reads_the_callers_attributes(strategy):
    """``@alpha`` in the passed graph is keep's alpha: the copy declares it too
    (as alpha_1, since wrap0 has an alpha of its own) and the call hands it on."""
    model = parse(f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y, seq(float[2]) z) {{
      y = local.keep <alpha = 2.0> (x)
      z = local.keep <alpha = 3.0> (x)
    }}
    {FUNCTION} keep <alpha> (a) => (b) {{
      b = local.wrap0 <fn = body (e) => (d) {{ k = Constant <value_float: float = @alpha> ()
                                               d = Mul(e, k) }}, alpha = 5.0> (a)
    }}
    {FUNCTION} wrap0 <fn, alpha> (s) => (t) {{
      t = SequenceMap <body: graph = @fn> (s)
      unused = Constant <value_float: float = @alpha> ()
    }}
    """)
    for n in LENGTHS:
        result = _check(
            model, strategy, n, lambda f: [[e * 2 for e in f["x"]], [e * 3 for e in f["x"]]]
        )
        [copy] = [f for f in result.functions if f.name == "wrap0_1"]
        assert list(copy.attribute) == ["alpha", "alpha_1"]


def test_a_passed_graph_that_reads_an_undeclared_attribute_is_an_error():
    model = parse(f"""{HEADER}
    g (seq(float[2]) x) => (seq(float[2]) y) {{ y = local.keep (x) }}
    {FUNCTION} keep (a) => (b) {{
      b = local.wrap0 <fn = body (e) => (d) {{ k = Constant <value_float: float = @beta> ()
                                               d = Mul(e, k) }}> (a)
    }}
    {FUNCTION} wrap0 <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}
    """)
    with pytest.raises(lowering.LoweringError, match="refers to the attribute 'beta'"):
        lowering.lower(model)


# The specialization alone, input and expected output side by side.
SPECIALIZATION_GOLDEN = (
    f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y, seq(float[2]) z) {{
      y = local.outer <g = {ADD_C}> (x)
      z = local.outer <g = {SQUARE}> (x)
    }}
    {FUNCTION} outer <g> (a) => (b) {{ b = local.apply <fn: graph = @g> (a) }}
    {FUNCTION} apply <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}""",
    f"""{HEADER}
    g (seq(float[2]) x, float[2] c) => (seq(float[2]) y, seq(float[2]) z) {{
      y = local.outer_1 (x, c)
      z = local.outer_2 (x)
    }}
    {FUNCTION} outer_1 (a, c) => (b) {{ b = local.apply_1 (a, c) }}
    {FUNCTION} outer_2 (a) => (b) {{ b = local.apply_2 (a) }}
    {FUNCTION} apply_1 (s, c) => (t) {{ t = SequenceMap <body = {ADD_C}> (s) }}
    {FUNCTION} apply_2 (s) => (t) {{ t = SequenceMap <body = {SQUARE}> (s) }}""",
)


def test_specialization_golden():
    source, expected = SPECIALIZATION_GOLDEN
    model = ir.serde.deserialize_model(parse(source))
    assert SpecializeFunctionsPass()(model).modified
    actual = ir.serde.serialize_model(model)
    assert canonical_text(actual) == canonical_text(parse(expected))


@pytest.mark.parametrize("options", [{}, {"strategy": "loop"}], ids=str)
def test_map_in_a_branch_of_a_function_is_typed_from_the_call_site(options):
    """The function is inferred for maps at any depth of its subgraphs, not only its top."""
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (float[2] a, float[2] b, bool k) => (seq(float[2]) y) {
          s = SequenceConstruct(a, b)
          t = SequenceConstruct(b, a)
          y = local.f(s, t, k)
        }
        <domain: "local", opset_import: ["" : 17]>
        f (s, t, k) => (y) {
          y = If (k) <
            then_branch = tb () => (seq(float[2]) m) {
              m = SequenceMap <body = body (e, u) => (c) { c = Sub(e, u) }> (s, t)
            },
            else_branch = eb () => (seq(float[2]) z) { z = Identity(s) }>
        }"""
    )
    result = lowered(model, **options)
    feeds = {"a": np.array([1, 2], np.float32), "b": np.array([5, 7], np.float32)}
    feeds["k"] = np.array(True)
    assert_same(run(result, feeds), [[feeds["a"] - feeds["b"], feeds["b"] - feeds["a"]]])


# A Scan body that returns values onnxruntime cannot type by itself. Once it
# has inlined the function, onnxruntime infers types again, but not through
# an element of ``SequenceConstruct(p, q)`` with p: float[P], q: float[Q]
# read in the enclosing Loop body; a Scan body output it has no shape for
# fails at run time ("Subgraph must have the shape set for all outputs").
# The lowering knows the shape (it inferred the function from its call site)
# and must declare it. result: (the inner body's node, its oracle).
SCAN_RESULTS = {
    "outer_value": ("r = Identity(a)", lambda e, a: a),
    "computed_from_outer": ("r = Mul(a, a)", lambda e, a: a * a),
    "element_and_outer": ("r = Add(e, a)", lambda e, a: e + a),
}
SCAN_READERS = {  # the inner map's reader, which makes it a split -> map -> concat; b's dims
    "stack": ("b = ConcatFromSequence <axis = 0, new_axis = 1> (inner)", np.stack, "?,?"),
    "merge": ("b = ConcatFromSequence <axis = 0> (inner)", np.concatenate, "?"),
}
SCAN_CALLERS = {  # where the function is called from; the output's shape
    "main_graph": ("c = local.f(s, x)", "float[2,{dims}] c", lambda c, feeds: c),
    "loop_in_scan": (
        """c = Scan (xs) <num_scan_inputs = 1, body = sb (float[2] row) => (float[?,2,{dims}] k) {{
             k = Loop (m, "") <body = lb (int64 i, bool go) => (bool go2, float[2,{dims}] z) {{
               z = local.f(s, x)
               go2 = Identity(go)
             }}>
           }}>""",
        "float[?,?,2,{dims}] c",
        lambda c, feeds: np.broadcast_to(c, (*feeds["xs"].shape[:1], int(feeds["m"]), *c.shape)),
    ),
}


@pytest.mark.parametrize(
    "options", [{}, {"max_unroll": 0}, {"strategy": "loop"}, {"optimize": True}], ids=str
)
@pytest.mark.parametrize("caller", list(SCAN_CALLERS))
@pytest.mark.parametrize("reader", list(SCAN_READERS))
@pytest.mark.parametrize("result", list(SCAN_RESULTS))
def test_scan_bodies_in_functions_declare_their_output_shapes(result, reader, caller, options):
    node, element_oracle = SCAN_RESULTS[result]
    read, combine, dims = SCAN_READERS[reader]
    call, output, outer_oracle = (
        SCAN_CALLERS[caller][0].format(dims=dims),
        SCAN_CALLERS[caller][1].format(dims=dims),
        SCAN_CALLERS[caller][2],
    )
    model = parse(
        f"""{HEADER}
        g (float[P] p, float[Q] q, float[N,3] x, float[T,2] xs, int64 m) => ({output}) {{
          s = SequenceConstruct(p, q)
          {call}
        }}
        {FUNCTION}
        f (s, x) => (c) {{
          y = SequenceMap <body = ob (a) => (b) {{
            parts = SplitToSequence <axis = 0, keepdims = 0> (x)
            inner = SequenceMap <body = ib (e) => (r) {{ {node} }}> (parts)
            {read}
          }}> (s)
          c = ConcatFromSequence <axis = 0, new_axis = 1> (y)
        }}"""
    )
    rng = np.random.default_rng(0)
    feeds = {
        "p": rng.standard_normal(3).astype(np.float32),
        "q": rng.standard_normal(3).astype(np.float32),
        "x": rng.standard_normal((4, 3)).astype(np.float32),
        "xs": np.zeros((2, 2), np.float32),
        "m": np.array(2, np.int64),
    }
    inner = [combine([element_oracle(e, a) for e in feeds["x"]]) for a in (feeds["p"], feeds["q"])]
    expected = outer_oracle(np.stack(inner), feeds)
    assert_same(run(lowered(model, **options), feeds), [expected])


@pytest.mark.parametrize("runtime", ["tinygrad", "generic"])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_refused_map_in_a_specialized_function_leaves_the_model_as_it_was(depth, runtime):
    """The pipeline is atomic around specialization.

    A ragged map of dynamic length has no form for a runtime without loops; it is
    found only once the function holding it is specialized, which must not
    leave the copies behind when the map is then refused.
    """
    ragged = "body (e) => (d) { d = NonZero(e) }"  # elements of data-dependent shapes
    model = ir.serde.deserialize_model(apply_model([SQUARE, ragged], depth))
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    with pytest.raises(lowering.LoweringError, match=f"--runtime {runtime}: ") as refusal:
        lowering.pipeline(runtime=runtime)(model)
    # The copy it was found in is gone again: the message names what the user wrote.
    assert "function 'local:wrap0' (as specialized for one of its calls)" in str(refusal.value)
    after = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    assert after == before
    # With a runtime that runs it, it is all lowered.
    lowering.lower_in_place(model)
    assert "SequenceMap" not in {n.op_type for n in all_nodes(ir.serde.serialize_model(model))}


@pytest.mark.parametrize("depth", [1, 2])
def test_the_map_pass_alone_asks_for_specialization_and_changes_nothing(depth):
    """A map whose body is a function's attribute is SpecializeFunctionsPass's
    to resolve: the map pass alone refuses it, names that pass and leaves the
    model as it was; the two in order lower it."""
    model = ir.serde.deserialize_model(apply_model([SQUARE], depth))
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    with pytest.raises(lowering.LoweringError, match="SpecializeFunctionsPass"):
        LowerSequenceMapPass()(model)
    assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == before
    lowering.SpecializeFunctionsPass()(model)
    LowerSequenceMapPass()(model)
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)


def test_specializing_keeps_external_weights_where_they_are(tmp_path, monkeypatch):
    """The model kept to undo a specialization holds the very weights, not copies:
    external data is still read from the model's own folder, whatever the
    working directory, when the pass plans, lowers or refuses."""
    positive = "body (e) => (d) { z = Constant <value = float {0}> () p = Greater (e, z) d = Compress (e, p) }"
    model = ir.serde.deserialize_model(
        parse(f"""{HEADER}
        g (seq(float[2]) x, float[6,2] w) => (seq(float[K]) y, float[6,2] z) {{
          y = local.wrap0 <fn = {positive}> (x)
          parts = SplitToSequence <axis = 0> (w, sp)
          m = SequenceMap <body = body (float[M,2] e) => (float[M,2] d) {{ d = Relu (e) }}> (parts)
          z = ConcatFromSequence <axis = 0> (m)
        }}
        {FUNCTION} wrap0 <fn> (s) => (t) {{ t = SequenceMap <body: graph = @fn> (s) }}""")
    )
    # The split sizes, read while planning, are only in the external data file.
    sp = ir.Value(name="sp", const_value=ir.Tensor(np.array([2, 1, 3], np.int64), name="sp"))
    model.graph.initializers["sp"] = sp
    folder = tmp_path / "model"
    folder.mkdir()
    ir.save(model, folder / "m.onnx", external_data="m.data", size_threshold_bytes=0)
    monkeypatch.chdir(tmp_path)  # not where m.data is
    # tinygrad refuses the ragged map in the function; onnxruntime gets it all lowered.
    for runtime, refused in (("tinygrad", True), ("onnxruntime", False)):
        loaded = ir.load(folder / "m.onnx")
        assert isinstance(loaded.graph.initializers["sp"].const_value, ir.ExternalTensor)
        before = ir.serde.serialize_model(loaded).SerializeToString(deterministic=True)
        lower_pass = lowering.pipeline(runtime=runtime)
        if refused:
            with pytest.raises(lowering.LoweringError, match="--runtime tinygrad: "):
                lower_pass(loaded)
            after = ir.serde.serialize_model(loaded).SerializeToString(deterministic=True)
            assert after == before
        else:
            rewrites = lower_pass(loaded).rewrites
            strategies = [r.strategy for r in rewrites if r.op_type == "SequenceMap"]
            assert strategies == ["vectorize", "loop"]  # the Relu map runs once on w


def test_a_map_unrolled_in_a_function_is_folded_there_and_reports_what_it_wrote():
    """The unrolled copies in a function are folded and their dead nodes removed
    as in a graph (the folder compared a node's graph with the function
    itself, so it skipped every node and the rewrite wrote nothing)."""
    model = parse("""<ir_version: 8, opset_import: ["" : 17, "loc" : 1]>
    g (float[2] a, float[2] b) => (float[2,2] o) { o = loc.F(a, b) }
    <domain: "loc", opset_import: ["" : 17]>
    F (a, b) => (o) {
      s = SequenceConstruct(a, b)
      m = SequenceMap <body = body (float[2] e) => (float[2] z) {
            k = Constant <value = float[2] {1, 2}> ()
            dead = Neg(k)
            z = Add(e, k)
          }> (s)
      o = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }""")
    ir_model = ir.serde.deserialize_model(model)
    (rewrite,) = lowering.lower_in_place(ir_model)
    assert rewrite.strategy == "unroll"
    assert {n.op_type for n in rewrite.new_nodes} >= {"Add"}
    function = next(iter(ir_model.functions.values()))
    assert "Neg" not in [n.op_type for n in function]  # the dead copies removed there
    feeds = {"a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32)}
    assert_same(run(ir.serde.serialize_model(ir_model), feeds), run(model, feeds))
