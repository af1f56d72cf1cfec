"""An empty constant a Loop or Scan carries in from the start, for OpenVINO.

Measured (``lowering/passes/fill_empty_starts.py``): OpenVINO 2026.4 reads
every start of the family below as a scalar, at 0, 1 and 3 trips: a body
that reads it by Concat is refused ("Accessing out-of-range dimension"; along
axis 1, "is_axis_valid"), and one passed on comes back as a scalar 0. As
``ConstantOfShape`` of its shape, it runs every case right. 2025.4 runs the
originals right: ``--runtime openvino:2025.4`` gets no ConstantOfShape. 2024.6
gets the rank-1 originals wrong too, but crashes on several of them as
ConstantOfShape (a float Concat at 1 and 3 trips, an int64 start read or
passed on): it gets none either.

The family: the start an initializer or a Constant; of shape [0], [0, 2] or
[2, 0] (grown along its 0 dim); float or int64; in a Loop whose body grows it
by Concat, reads it by Concat into a scan output, or passes it on, counted or
run while a condition holds; in a Scan whose body reads it or passes it on (a
Scan's state keeps one shape, ONNX says, so no Scan grows it). Expected
values are plain numpy. Where a Loop makes no trip, its scan outputs are
checked for size alone (their element shape is the runtime's to say, where
the body's is not static); onnxruntime fails on a Scan over nothing ("Invalid
dim0_offset of 0") whatever its start, so it runs the Scans at 1 and 3 trips.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

import lowering
from lowering.cli import main
from lowering.console import PROG
from lowering.passes.fill_empty_starts import STRATEGY, FillEmptyStartsPass
from lowering.runtimes.profiles import RUNTIMES, profile
from tests.golden import canonical_text
from tests.helpers import lowered, op_types, parse, release_python, run

TYPES = {"float": (TensorProto.FLOAT, np.float32), "int64": (TensorProto.INT64, np.int64)}
#: The start's shape -> (the axis it grows along, a piece's shape).
SHAPES = {"[0]": ((0,), 0, (3,)), "[0,2]": ((0, 2), 0, (1, 2)), "[2,0]": ((2, 0), 1, (2, 1))}
TRIPS = (0, 1, 3)


@dataclasses.dataclass(frozen=True)
class Case:
    op: str  # Loop, Scan
    source: str  # initializer, Constant
    shape: str  # a key of SHAPES
    dtype: str  # a key of TYPES
    use: str  # concat (Loop only), read, passed
    kind: str = "counted"  # Loop: counted (M given) or while (a condition from data)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.source}-{self.shape}-{self.dtype}-{self.use}-{self.kind}"


CASES = [
    Case("Loop", source, shape, dtype, use, kind)
    for source, shape, dtype, use, kind in itertools.product(
        ("initializer", "Constant"),
        SHAPES,
        TYPES,
        ("concat", "read", "passed"),
        ("counted", "while"),
    )
] + [
    Case("Scan", source, shape, dtype, use)
    for source, shape, dtype, use in itertools.product(
        ("initializer", "Constant"), SHAPES, TYPES, ("read", "passed")
    )
]
IDS = [c.id for c in CASES]


def _ranked(name: str, elem: int, rank: int) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, elem, [None] * rank)


def _model(case: Case) -> onnx.ModelProto:
    """``sf`` (the start carried through) and ``ys`` (a scan output) of a Loop or Scan."""
    dims, axis, piece = SHAPES[case.shape]
    elem, numpy_type = TYPES[case.dtype]
    rank = len(dims)
    empty = numpy_helper.from_array(np.zeros(dims, numpy_type), "e")
    nodes, initializers = [], []
    if case.source == "initializer":
        initializers.append(empty)
    else:
        nodes.append(oh.make_node("Constant", [], ["e"], value=empty))
    carried = [_ranked("s", elem, rank)]
    if case.op == "Loop":
        body, inputs = _loop_body(case, axis), ["n", "t", "e"]
        if case.kind == "counted":
            nodes.append(
                oh.make_node("Constant", [], ["t"], value=numpy_helper.from_array(np.array(True)))
            )
        else:
            zero = numpy_helper.from_array(np.array(0, np.int64))
            nodes += [
                oh.make_node("Constant", [], ["z"], value=zero),
                oh.make_node("Less", ["z", "n"], ["t"]),
            ]
            inputs[0] = ""
        signature = [
            oh.make_tensor_value_info("i", TensorProto.INT64, []),
            oh.make_tensor_value_info("c", TensorProto.BOOL, []),
            *carried,
        ]
        results = [
            oh.make_tensor_value_info("c2", TensorProto.BOOL, []),
            _ranked("s2", elem, rank),
            _ranked("p", elem, len(piece)),
        ]
        graph_inputs = [
            oh.make_tensor_value_info("x", elem, piece),
            oh.make_tensor_value_info("n", TensorProto.INT64, []),
        ]
        nodes.append(
            oh.make_node(
                "Loop", inputs, ["sf", "ys"], body=oh.make_graph(body, "body", signature, results)
            )
        )
    else:
        body = [oh.make_node("Identity", ["s"], ["s2"])]
        body.append(
            oh.make_node("Concat", ["s", "el"], ["p"], axis=axis)
            if case.use == "read"
            else oh.make_node("Identity", ["el"], ["p"])
        )
        signature = [*carried, _ranked("el", elem, len(piece))]
        results = [_ranked("s2", elem, rank), _ranked("p", elem, len(piece))]
        graph_inputs = [oh.make_tensor_value_info("xs", elem, [None, *piece])]
        nodes.append(
            oh.make_node(
                "Scan",
                ["e", "xs"],
                ["sf", "ys"],
                num_scan_inputs=1,
                body=oh.make_graph(body, "body", signature, results),
            )
        )
    outputs = [_ranked("sf", elem, rank), _ranked("ys", elem, len(piece) + 1)]
    graph = oh.make_graph(nodes, "g", graph_inputs, outputs, initializer=initializers)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _loop_body(case: Case, axis: int) -> list[onnx.NodeProto]:
    """p = x + i, and the start grown by p, read beside p, or passed on."""
    elem = TYPES[case.dtype][0]
    body = [oh.make_node("Cast", ["i"], ["ic"], to=elem)]
    if case.use == "read":
        body += [
            oh.make_node("Add", ["x", "ic"], ["q"]),
            oh.make_node("Concat", ["s", "q"], ["p"], axis=axis),
        ]
    else:
        body.append(oh.make_node("Add", ["x", "ic"], ["p"]))
    grown = case.use == "concat"
    body.append(
        oh.make_node("Concat", ["s", "p"], ["s2"], axis=axis)
        if grown
        else oh.make_node("Identity", ["s"], ["s2"])
    )
    if case.kind == "counted":
        return [*body, oh.make_node("Identity", ["c"], ["c2"])]
    one = numpy_helper.from_array(np.array(1, np.int64))
    return [
        *body,
        oh.make_node("Constant", [], ["one"], value=one),
        oh.make_node("Add", ["i", "one"], ["next"]),
        oh.make_node("Less", ["next", "n"], ["c2"]),
    ]


def _feeds(case: Case, n: int) -> list[np.ndarray]:
    _, _, piece = SHAPES[case.shape]
    numpy_type = TYPES[case.dtype][1]
    if case.op == "Loop":
        x = (np.arange(np.prod(piece)) + 1).astype(numpy_type).reshape(piece)
        return [x, np.array(n, np.int64)]
    return [(np.arange(n * np.prod(piece)) + 1).astype(numpy_type).reshape(n, *piece)]


def _expected(case: Case, n: int) -> list[np.ndarray]:
    dims, axis, piece = SHAPES[case.shape]
    numpy_type = TYPES[case.dtype][1]
    start = np.zeros(dims, numpy_type)
    if case.op == "Loop":
        x = _feeds(case, n)[0]
        pieces = [x + numpy_type(k) for k in range(n)]
    else:
        pieces = list(_feeds(case, n)[0])
    final = np.concatenate([start, *pieces], axis=axis) if case.use == "concat" else start
    return [final, np.array(pieces, numpy_type).reshape(n, *piece)]


def _right(actual: list, expected: list[np.ndarray], n: int) -> bool:
    """Each output as numpy says; a scan output of no trip by its size alone."""
    if len(actual) != len(expected):
        return False
    for k, (got, wanted) in enumerate(zip(map(np.asarray, actual), expected, strict=True)):
        scanned_of_nothing = k == 1 and n == 0
        if got.dtype != wanted.dtype or not (got.shape == wanted.shape or scanned_of_nothing):
            return False
        if got.size != wanted.size or not np.array_equal(got.ravel(), wanted.ravel()):
            return False
    return True


def _starts(model: onnx.ModelProto) -> list[str]:
    """The op making each carried start of the main graph's loop (an initializer: "")."""
    (loop,) = [n for n in model.graph.node if n.op_type in ("Loop", "Scan")]
    makers = {o: n.op_type for n in model.graph.node for o in n.output}
    carried = loop.input[2:] if loop.op_type == "Loop" else loop.input[:1]
    return [makers.get(name, "") for name in carried]


@pytest.mark.sweep
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_empty_start_becomes_a_constant_of_shape(case):
    model = _model(case)
    result = lowered(model, runtime="openvino")
    assert _starts(model) == ["Constant" if case.source == "Constant" else ""]
    assert _starts(result) == ["ConstantOfShape"]
    assert not result.graph.initializer and op_types(result).count("Constant") == op_types(
        model
    ).count("Constant") + (case.source == "initializer")
    for n in TRIPS if case.op == "Loop" else TRIPS[1:]:
        feeds = dict(zip(["x", "n"] if case.op == "Loop" else ["xs"], _feeds(case, n)))
        assert _right(run(model, feeds), _expected(case, n), n)
        assert _right(run(result, feeds), _expected(case, n), n)


@pytest.mark.sweep
@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs openvino")
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_openvino_gets_the_original_wrong_and_the_constant_of_shape_right(case, tmp_path):
    from lowering.runtimes.runners import run_openvino

    original, filled = tmp_path / "original.onnx", tmp_path / "filled.onnx"
    onnx.save(_model(case), original)
    onnx.save(lowering.lower(_model(case), runtime="openvino"), filled)
    for n in TRIPS:
        if case.use == "passed":  # a scalar 0 in the empty start's place
            (start, _) = run_openvino(original, _feeds(case, n))
            assert np.asarray(start).shape == ()
        else:
            refused = "is_axis_valid" if case.shape == "[2,0]" else "out-of-range dimension"
            with pytest.raises(RuntimeError, match=re.escape(refused)):
                run_openvino(original, _feeds(case, n))
        assert _right(run_openvino(filled, _feeds(case, n)), _expected(case, n), n)


#: A Loop carrying three starts: an empty initializer that a Concat reads too (it
#: stays), an empty Constant (it goes), and an empty initializer that is a graph
#: input (not a constant: a caller may feed another value; it stays as it is).
GOLDEN_IN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, int64 n, float[0] fed) => (float[N] af, float[M] bf, float[K] cf, float[L] d) <float[0] a = {}, float[0] fed = {}> {
    t = Constant<value = bool {1}>()
    b = Constant<value = float[0] {}>()
    af, bf, cf = Loop(n, t, a, b, fed) <body = body (int64 i, bool c, float[?] p, float[?] q, float[?] r)
        => (bool c2, float[?] p2, float[?] q2, float[?] r2) {
        c2 = Identity(c)
        p2 = Concat<axis = 0>(p, x)
        q2 = Concat<axis = 0>(q, x)
        r2 = Concat<axis = 0>(r, x)
    }>
    d = Concat<axis = 0>(a, x)
}"""

GOLDEN_OUT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, int64 n, float[0] fed) => (float[N] af, float[M] bf, float[K] cf, float[L] d) <float[0] a = {}, float[0] fed = {}> {
    shape = Constant<value = int64[1] {0}>()
    empty = ConstantOfShape<value = float[1] {0}>(shape)
    t = Constant<value = bool {1}>()
    af, bf, cf = Loop(n, t, empty, empty, fed) <body = body (int64 i, bool c, float[?] p, float[?] q, float[?] r)
        => (bool c2, float[?] p2, float[?] q2, float[?] r2) {
        c2 = Identity(c)
        p2 = Concat<axis = 0>(p, x)
        q2 = Concat<axis = 0>(q, x)
        r2 = Concat<axis = 0>(r, x)
    }>
    d = Concat<axis = 0>(a, x)
}"""


def test_the_starts_become_one_constant_of_shape_and_what_else_reads_them_stays():
    result = lowering.lower(parse(GOLDEN_IN), runtime="openvino")
    assert canonical_text(result) == canonical_text(parse(GOLDEN_OUT))


RIGHT_ALREADY = [
    "onnxruntime",
    "tract",
    "mnn",
    "tvm",
    "tinygrad",
    "iree",
    "openvino:2023.3",
    "openvino:2024.6",
    "openvino:2025.4",
    "onnxruntime-openvino:1.24",
]


@pytest.mark.parametrize("runtime", RIGHT_ALREADY)
@pytest.mark.parametrize("op", ["Loop", "Scan"])
def test_other_runtimes_get_the_model_unchanged(runtime, op):
    model = _model(Case(op, "initializer", "[0]", "float", "read"))
    assert profile(runtime).empty_starts_wrong() is None
    assert lowering.lower(model, runtime=runtime) == model


@pytest.mark.parametrize("runtime", ["openvino", "openvino:2026.4", "openvino:2027.0", "generic"])
def test_the_releases_with_the_fault_get_constant_of_shape(runtime):
    said = profile(runtime).empty_starts_wrong()
    assert said is not None and said.startswith(runtime)
    result = lowering.lower(
        _model(Case("Loop", "Constant", "[0]", "float", "concat")), runtime=runtime
    )
    assert _starts(result) == ["ConstantOfShape"]


#: What is not an empty constant carried in from the start, and stays as written.
LEFT = {
    # A Loop's trip count, condition or a body's own initializer read by the body:
    # not carried in; a value carried in that is computed, or not empty.
    "computed": """g (float[3] x, int64 n) => (float[N] sf) {
        t = Constant<value = bool {1}>()
        k = Constant<value = int64[1] {0}>()
        e = Slice(x, k, k)
        sf = Loop(n, t, e) <body = b (int64 i, bool c, float[?] s) => (bool c2, float[?] s2) {
            c2 = Identity(c)
            s2 = Concat<axis = 0>(s, x)
        }>
    }""",
    "not_empty": """g (float[3] x, int64 n) => (float[N] sf) {
        t = Constant<value = bool {1}>()
        e = Constant<value = float[1] {7}>()
        sf = Loop(n, t, e) <body = b (int64 i, bool c, float[?] s) => (bool c2, float[?] s2) {
            c2 = Identity(c)
            s2 = Concat<axis = 0>(s, x)
        }>
    }""",
    "scan_input": """g (float[3] x) => (float[3] sf, float[0,3] ys) {
        e = Constant<value = float[0,3] {}>()
        sf, ys = Scan(x, e) <num_scan_inputs = 1, body = b (float[3] s, float[3] el)
            => (float[3] s2, float[3] y) {
            s2 = Add(s, el)
            y = Identity(el)
        }>
    }""",
    "strings": """g (int64 n) => (string[N] sf) {
        t = Constant<value = bool {1}>()
        e = Constant<value = string[0] {}>()
        sf = Loop(n, t, e) <body = b (int64 i, bool c, string[?] s) => (bool c2, string[?] s2) {
            c2 = Identity(c)
            w = Constant<value = string[1] {"w"}>()
            s2 = Concat<axis = 0>(s, w)
        }>
    }""",
}


@pytest.mark.parametrize("name", sorted(LEFT))
def test_what_is_no_empty_constant_start_is_left(name):
    model = parse(f'<ir_version: 8, opset_import: ["" : 17]>\n{LEFT[name]}')
    result = lowering.pipeline(runtime="openvino")(ir.serde.deserialize_model(model))
    assert [r for r in result.rewrites if r.strategy == STRATEGY] == []


#: The loop in other places: an If's branch, another loop's body (its start a body
#: initializer, as tf2onnx writes them), a function.
PLACES = {
    "in_if": """g (float[3] x, int64 n) => (float[N] sf) {
        zero = Constant<value = int64 {0}>()
        some = Greater(n, zero)
        sf = If(some) <then_branch = then () => (float[N] s1) {
            t = Constant<value = bool {1}>()
            e = Constant<value = float[0] {}>()
            s1 = Loop(n, t, e) <body = b (int64 i, bool c, float[?] s) => (bool c2, float[?] s2) {
                c2 = Identity(c)
                s2 = Concat<axis = 0>(s, x)
            }>
        }, else_branch = other () => (float[3] nx) {
            nx = Neg(x)
        }>
    }""",
    "nested": """g (float[3] x, int64 n) => (float[3] vf) {
        t = Constant<value = bool {1}>()
        vf = Loop(n, t, x) <body = b (int64 i, bool c, float[3] v) => (bool c2, float[3] v2) <float[0] e = {}> {
            c2 = Identity(c)
            two = Constant<value = int64 {2}>()
            go = Constant<value = bool {1}>()
            u = Loop(two, go, e) <body = inner (int64 j, bool d, float[?] w) => (bool d2, float[?] w2) {
                d2 = Identity(d)
                w2 = Concat<axis = 0>(w, v)
            }>
            h = Constant<value = int64[1] {3}>()
            end = Constant<value = int64[1] {6}>()
            last = Slice(u, h, end)
            v2 = Add(v, last)
        }>
    }""",
    "in_function": """g (float[3] x, int64 n) => (float[N] sf) {
        sf = local.grow(x, n)
    }
    <domain: "local", opset_import: ["" : 17]>
    grow (x, n) => (sf) {
        t = Constant<value = bool {1}>()
        e = Constant<value = float[0] {}>()
        sf = Loop(n, t, e) <body = b (int64 i, bool c, float[?] s) => (bool c2, float[?] s2) {
            c2 = Identity(c)
            s2 = Concat<axis = 0>(s, x)
        }>
    }""",
}
X = np.array([1.0, 2.0, 3.0], np.float32)


def _places_expected(name: str, n: int) -> list[np.ndarray]:
    if name == "nested":
        return [X * 2.0**n]  # the start grown by v twice: its second v added each trip
    if name == "in_if" and n == 0:
        return [-X]
    return [np.tile(X, n)]


@pytest.mark.parametrize("name", sorted(PLACES))
def test_a_start_at_any_depth_becomes_a_constant_of_shape(name):
    header = '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'
    model = parse(f"{header}\n{PLACES[name]}")
    onnx.checker.check_model(model, full_check=True)
    result = lowered(model, runtime="openvino")
    assert op_types(result).count("ConstantOfShape") == 1
    for n in TRIPS:
        feeds = {"x": X, "n": np.array(n, np.int64)}
        assert _right(run(result, feeds), _places_expected(name, n), n)


def test_the_pass_plans_every_loop_and_says_what_it_wrote():
    model = ir.serde.deserialize_model(parse(GOLDEN_IN))
    result = FillEmptyStartsPass("openvino")(model)
    assert result.modified
    (rewrite,) = result.rewrites
    assert rewrite.op_type == "Loop" and rewrite.strategy == STRATEGY
    assert rewrite.scope == "main graph 'g'"
    assert [n.op_type for n in rewrite.new_nodes] == ["ConstantOfShape"]
    assert rewrite.reason == (
        "it carries in the empty constants 'a' (input 2, float[0]), 'b' (input 3, float[0]), "
        f"which {RUNTIMES['openvino'].empty_starts_wrong()}: now each a ConstantOfShape of its shape"
    )
    assert not FillEmptyStartsPass("openvino")(model).modified
    assert not FillEmptyStartsPass("openvino:2025.4")(
        ir.serde.deserialize_model(parse(GOLDEN_IN))
    ).modified


#: A Scan whose body returns its empty state as it is: copied, and filled.
SCAN_RETURNING_ITS_STATE = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] xs) => (float[0] sf, float[N,3] ys) <float[0] e = {}> {
    sf, ys = Scan(e, xs) <num_scan_inputs = 1, body = b (float[?] s, float[3] el)
        => (float[?] s, float[3] y) {
        y = Identity(el)
    }>
}"""


def test_the_summary_says_it_in_a_line_of_its_own_and_the_report_names_it(tmp_path, capsys):
    import json

    source, out, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(parse(SCAN_RETURNING_ITS_STATE), source)
    assert main([str(source), str(out), "--runtime", "openvino", "--report", str(report)]) == 0
    lines = capsys.readouterr().err.splitlines()
    said = [line for line in lines if "ConstantOfShape" in line and line.startswith(PROG)]
    assert len(said) == 1
    assert said[0].startswith(f"{PROG}: wrote the empty starts of 1 loop as ConstantOfShape in ")
    assert any(line.startswith(f"{PROG}: copied the inputs 1 loop body returns") for line in lines)
    dry = [str(source), str(tmp_path / "dry.onnx"), "--runtime", "openvino", "--dry-run"]
    assert main(dry) == 0
    would = f"{PROG}: would write the empty starts of 1 loop as ConstantOfShape in "
    assert any(line.startswith(would) for line in capsys.readouterr().err.splitlines())
    nodes = json.loads(report.read_text())["nodes"]
    assert [(n["op"], n["strategy"]) for n in nodes] == [("Scan", "copied"), ("Scan", STRATEGY)]
    assert "'e' (input 0, float[0])" in nodes[1]["reason"]


#: Releases before 2026: the runs that say why they get no ConstantOfShape.
OLD_RUNS = {
    # 2025.4 runs every original right.
    "openvino 2025.4": [(c, False, "right") for c in CASES],
    # 2024.6 gets a rank-1 original wrong, and crashes on it as ConstantOfShape.
    "openvino 2024.6": [
        (Case("Loop", "initializer", "[0]", "int64", "passed"), False, "wrong"),
        (Case("Loop", "initializer", "[0]", "int64", "passed"), True, "fails"),
        (Case("Loop", "initializer", "[0]", "int64", "read"), True, "fails"),
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("column", sorted(OLD_RUNS))
def test_releases_before_2026_get_no_constant_of_shape(column, tmp_path):
    from lowering.runtimes import releases
    from lowering.runtimes.runners import RuntimeFailure, run_many

    release_python(releases.RELEASES[column])
    assert lowering.lower(_model(CASES[0]), runtime=f"openvino:{column.split()[1]}") == _model(
        CASES[0]
    )
    jobs, wanted = [], []
    for k, (case, filled, how) in enumerate(OLD_RUNS[column]):
        path = tmp_path / f"{k}.onnx"
        model = lowering.lower(_model(case), runtime="openvino") if filled else _model(case)
        onnx.save(model, path)
        for n in TRIPS if case.op == "Loop" else TRIPS[1:]:  # (before 2026: no Scan of nothing)
            jobs.append((path, _feeds(case, n)))
            wanted.append((case, n, how))
    for (case, n, how), result in zip(wanted, run_many(column, jobs, timeout=120), strict=True):
        failed = isinstance(result, RuntimeFailure)
        said = "fails" if failed else "right" if _right(result, _expected(case, n), n) else "wrong"
        assert said == how, (case.id, n)


def test_before_opset_9_there_is_no_constant_of_shape_and_the_start_stays():
    """Scan-8 (sequence_lens first, here left out, and every input batched)."""
    state = oh.make_tensor_value_info("s", TensorProto.FLOAT, [None])
    body = oh.make_graph(
        [oh.make_node("Identity", ["s"], ["s2"]), oh.make_node("Identity", ["el"], ["y"])],
        "body",
        [state, oh.make_tensor_value_info("el", TensorProto.FLOAT, [3])],
        [_ranked("s2", TensorProto.FLOAT, 1), _ranked("y", TensorProto.FLOAT, 1)],
    )
    scan = oh.make_node("Scan", ["", "e", "xs"], ["sf", "ys"], num_scan_inputs=1, body=body)
    graph = oh.make_graph(
        [scan],
        "g",
        [oh.make_tensor_value_info("xs", TensorProto.FLOAT, [1, None, 3])],
        [_ranked("sf", TensorProto.FLOAT, 2), _ranked("ys", TensorProto.FLOAT, 3)],
        initializer=[numpy_helper.from_array(np.zeros([1, 0], np.float32), "e")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 8)], ir_version=4)
    onnx.checker.check_model(model, full_check=True)
    assert lowering.lower(model, runtime="openvino") == model
