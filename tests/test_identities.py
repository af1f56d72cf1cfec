"""The Identities the lowering leaves: only those that must stay.

The rule is :func:`lowering.irutils.identities.must_stay`, tested here on
small graphs; then every model of the corpora (the differential cases, the
examples, the torch exports), with every strategy and with ``--target-opset
11``, is lowered in place and no Identity the lowering made may be one the
rule would bypass, while the results stay what onnxruntime computed before
and the full checker passes. An Identity the user wrote stays, even one the
rule would bypass.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.defaults import STRATEGIES
from lowering.irutils.identities import bypass_identities, must_stay
from tests.cases.differential import CASES
from tests.golden import canonical_text
from tests.helpers import assert_same, parse, run

ROOT = pathlib.Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.onnx"))
TORCH = sorted((ROOT / "tests" / "data" / "torch").glob("*.onnx"))
H = '<ir_version: 8, opset_import: ["" : 17]>'


def _identities(model: ir.Model) -> list[ir.Node]:
    graphs = [model.graph, *(f.graph for f in model.functions.values())]
    return [
        node
        for graph in graphs
        for node in ir.traversal.RecursiveGraphIterator(graph)
        if node.op_type == "Identity"
    ]


def _first_identity(text: str) -> tuple[ir.Model, ir.Node]:
    model = ir.serde.deserialize_model(parse(text))
    return model, _identities(model)[0]


# (why the Identity matters, the model: its first Identity is the one judged)
STAYS = {
    "graph input to graph output": "g (float x) => (float y) { y = Identity(x) }",
    "initializer to graph output": "g () => (float y) <float w = {1.0}> { y = Identity(w) }",
    "graph output to graph output": "g (float x) => (float a, float y) { a = Neg(x)\n y = Identity(a) }",
    "outer value to body output": """g (bool c, float x) => (float y) {
          y = If(c) <then_branch = t () => (float r) { r = Identity(x) },
                     else_branch = e () => (float s) { s = Neg(x) }>
        }""",
    "body input to body output": """g (float[N] x) => (float[N] y) {
          y = Scan(x) <num_scan_inputs = 1, body = b (float e) => (float r) { r = Identity(e) }>
        }""",
}
GOES = {
    "read by a node": "g (float x) => (float y) { t = Identity(x)\n y = Neg(t) }",
    "graph output of a node's value": "g (float x) => (float y) { t = Neg(x)\n y = Identity(t) }",
    "body output of a body value": """g (float[N] x) => (float[N] y) {
          y = Scan(x) <num_scan_inputs = 1, body = b (float e) => (float r) {
                n = Neg(e)
                r = Identity(n)
              }>
        }""",
}


@pytest.mark.parametrize("why", sorted(STAYS))
def test_the_rule_keeps_what_the_interface_needs(why):
    _, node = _first_identity(H + STAYS[why])
    assert must_stay(node) is not None


@pytest.mark.parametrize("why", sorted(GOES))
def test_the_rule_bypasses_the_rest_and_the_interface_keeps_its_names(why):
    proto = parse(H + GOES[why])
    model, node = _first_identity(H + GOES[why])
    assert must_stay(node) is None
    assert bypass_identities([node]) == {node}
    assert not [n for n in _identities(model)]
    written = ir.serde.serialize_model(model)
    onnx.checker.check_model(written, full_check=True)
    assert [o.name for o in written.graph.output] == [o.name for o in proto.graph.output]
    assert written.graph.output == proto.graph.output  # names, types and shapes
    x = np.arange(3, dtype=np.float32) if "body" in why else np.array(2.0, np.float32)
    feeds = {"x": x}
    assert_same(run(written, feeds), run(proto, feeds))


def _corpus():
    for name, case in CASES.items():
        yield pytest.param(parse(case.text), case, id=f"case-{name}")
    for path in [*EXAMPLES, *TORCH]:
        yield pytest.param(onnx.load(path), path, id=path.stem)


def _feeds(source, proto: onnx.ModelProto) -> tuple[dict, list | None]:
    """Feeds and the expected outputs: the case's oracle or the export's torch outputs."""
    if not isinstance(source, pathlib.Path):
        feeds = source.feeds(3, np.random.default_rng(3))
        return feeds, source.oracle(feeds)
    data = source.with_suffix(".npz")
    if data.exists():
        saved = np.load(data)
        names = [i.name for i in proto.graph.input]
        count = len(proto.graph.output)
        return {n: saved[f"input_{k}"] for k, n in enumerate(names)}, [
            saved[f"output_{k}"] for k in range(count)
        ]
    rng = np.random.default_rng(0)
    values = [
        rng.standard_normal(shape).astype(np.float32) for shape in EXAMPLE_SHAPES[source.stem]
    ]
    if source.stem == "shapes_and_sums":
        values = [values[:3], np.array(1.5, np.float32)]
    return dict(zip([i.name for i in proto.graph.input], values, strict=True)), None


# The examples' inputs: shapes_and_sums takes three images (a sequence) and a gain.
EXAMPLE_SHAPES = {
    "shapes_and_sums": [(2, 3), (4, 1), (3, 3)],
    "torch_atleast_2d": [(), (3,), (2, 3), (2, 3, 4)],
}


@pytest.mark.slow
@pytest.mark.parametrize("target_opset", [None, 11])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("proto", "source"), list(_corpus()))
def test_no_identity_the_lowering_made_could_go(proto, source, strategy, target_opset):
    model = ir.serde.deserialize_model(proto)
    users = set(_identities(model))
    try:
        lowering.lower_in_place(model, strategy=strategy, target_opset=target_opset)
    except lowering.LoweringError:
        pytest.skip("refused: nothing written")
    made = [node for node in _identities(model) if node not in users]
    assert [(n.name, n.graph.name) for n in made if must_stay(n) is None] == []  # type: ignore[union-attr]
    assert users <= set(_identities(model)) or strategy == "auto"  # unrolled bodies are copies
    written = ir.serde.serialize_model(model)
    onnx.checker.check_model(written, full_check=True)
    feeds, expected = _feeds(source, proto)
    if expected is None:
        expected = run(proto, feeds)
    assert_same(run(written, feeds), expected)


def test_an_identity_the_user_wrote_stays():
    # t = Identity(x) copies for nothing, but the user wrote it: it stays.
    text = (
        H
        + """
        g (seq(float[N]) x, float k) => (seq(float[N]) y, float u) {
          t = Identity(k)
          u = Neg(t)
          y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Mul(a, t) }> (x)
        }"""
    )
    for strategy in STRATEGIES:
        result = lowering.lower(parse(text), strategy=strategy)
        assert [n.input[0] for n in result.graph.node if n.op_type == "Identity"] == ["k"]


QUICK_START = """\
<ir_version: 10, opset_import: ["" : 20]>
g (float a, float[3] b, float[2,3] c, float[2,3,4] d)
    => (float[1,1] getitem, float[1,3] getitem_1, float[2,3] getitem_2, float[2,3,4] getitem_3) {
  s1 = Constant <value = int64[2] {1, -1}> ()
  getitem = Reshape(a, s1)
  s2 = Constant <value = int64[2] {1, -1}> ()
  getitem_1 = Reshape(b, s2)
  getitem_2 = Identity(c)
  getitem_3 = Identity(d)
}"""


@pytest.mark.parametrize("target_opset", [None, 11])
def test_the_quick_start_example_keeps_only_the_interface_identities(target_opset):
    result = lowering.lower(onnx.load(ROOT / "examples" / "torch_atleast_2d.onnx"),
                            target_opset=target_opset)  # fmt: skip
    # torch's Constants stay as torch wrote them (value_ints), but where opset 11,
    # which has no value_ints, is declared
    spelled = "value = int64[2] {1, -1}" if target_opset else "value_ints = [1, -1]"
    expected = parse(QUICK_START.replace("value = int64[2] {1, -1}", spelled))
    if target_opset is not None:
        expected.opset_import[0].version = target_opset
        expected.ir_version = result.ir_version
    result.ClearField("producer_name")
    result.ClearField("producer_version")
    assert canonical_text(result) == canonical_text(expected)
