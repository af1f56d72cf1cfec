"""Nothing but the SequenceMap changes: the rest of the model survives intact."""

from __future__ import annotations

import onnx

import lowering
from tests.helpers import lowered, normalized, parse

SOURCE = """<
  ir_version: 9,
  opset_import: ["" : 18, "local" : 1, "com.example" : 3],
  producer_name: "exporter",
  producer_version: "4.5",
  domain: "org.example",
  model_version: 7,
  doc_string: "a model"
>
g (seq(float[N]) x, float[2] b) => (seq(float[N]) y, float[2] z)
  <float[2] w = {1.0, 2.0}, float[2] wb, float[2] bb> {
  [first] wb = Mul(w, b)
  [second] bb = local.twice(wb)
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
  [last] z = Relu(bb)
}
<domain: "local", opset_import: ["" : 18]>
twice (t) => (r) { r = Add(t, t) }
"""


def _source() -> onnx.ModelProto:
    model = parse(SOURCE)
    model.graph.doc_string = "graph doc"
    onnx.helper.set_model_props(model, {"author": "someone", "license": "MIT"})
    for node in model.graph.node:
        node.doc_string = f"doc of {node.name}"
        node.metadata_props.add(key="origin", value=node.name)
    return model


def test_everything_else_survives():
    source = _source()
    result = lowered(source)
    for field in (
        "ir_version",
        "producer_name",
        "producer_version",
        "domain",
        "model_version",
        "doc_string",
    ):
        assert getattr(result, field) == getattr(source, field), field
    # The model's own entries, and the two that say what lowered it (test_provenance.py).
    entries = {p.key: p.value for p in result.metadata_props}
    assert set(entries) == {p.key for p in source.metadata_props} | {
        "lowering.version",
        "lowering.options",
    }
    assert all(entries[p.key] == p.value for p in source.metadata_props)
    assert list(result.opset_import) == list(source.opset_import)
    assert [normalized(f) for f in result.functions] == [normalized(f) for f in source.functions]
    assert result.graph.name == source.graph.name
    assert result.graph.doc_string == source.graph.doc_string
    assert list(result.graph.initializer) == list(source.graph.initializer)
    assert list(result.graph.input) == list(source.graph.input)
    assert list(result.graph.output) == list(source.graph.output)
    for info in source.graph.value_info:
        assert info in result.graph.value_info
    # Other nodes: same protos, same order; the map's place is taken by a Loop
    # that keeps its name, doc string and metadata.
    others = [n for n in source.graph.node if n.op_type != "SequenceMap"]
    kept = [n for n in result.graph.node if n.name in {"first", "second", "last"}]
    assert [normalized(n) for n in kept] == [normalized(n) for n in others]
    names = [n.name for n in result.graph.node]
    assert (
        names.index("first") < names.index("second") < names.index("the_map") < names.index("last")
    )
    loop = result.graph.node[names.index("the_map")]
    assert loop.op_type == "Loop"
    assert loop.doc_string == "doc of the_map"
    assert {p.key: p.value for p in loop.metadata_props} == {"origin": "the_map"}


def test_nothing_to_lower_comes_out_identical():
    source = _source()
    without_map = onnx.ModelProto()
    without_map.CopyFrom(source)
    del without_map.graph.node[2]
    del without_map.graph.output[0]
    result = lowering.lower(without_map)
    assert result.SerializeToString() == without_map.SerializeToString()


def test_onnx_ir_model_in_onnx_ir_model_out():
    import onnx_ir as ir

    model = ir.serde.deserialize_model(_source())
    result = lowering.lower(model)
    assert result is model
    assert "SequenceMap" not in [n.op_type for n in model.graph.all_nodes()]
