"""``lowering.irutils.nodes`` builds the nodes ``ir.node`` builds, only faster."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from lowering.irutils.nodes import attribute, new_node

VALUES = {
    "int": 3,
    "bool": True,
    "float": 0.5,
    "string": "x",
    "ints": [1, -2],
    "int_tuple": (4,),
    "floats": [1.0, 2.5],
    "strings": ["a", "b"],
    "tensor": ir.tensor(np.array([1, 2], np.int64)),
    "string_tensor": ir.StringTensor(np.array([b"a", b"bb"], dtype=object)),
    "empty_list": [],  # onnx_ir guesses INTS, and so it stays
    "graph": ir.Graph([], [], nodes=[], name="g"),
    "attr": ir.AttrInt64("attr", 7),
}


def _serialized(attr: ir.Attr) -> bytes:
    return ir.serde.serialize_attribute(attr).SerializeToString(deterministic=True)


@pytest.mark.parametrize("name", list(VALUES))
def test_attributes_are_typed_as_ir_node_types_them(name):
    value = VALUES[name]
    assert _serialized(attribute(name, value)) == _serialized(
        ir.convenience.convert_attribute(name, value)
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(np.int64(4), ir.AttrInt64("a", 4)), ([np.int32(1), 2], ir.AttrInt64s("a", [1, 2]))],
)
def test_numpy_numbers_are_the_numbers_they_hold(value, expected):
    assert _serialized(attribute("a", value)) == _serialized(expected)


@pytest.mark.parametrize("value", [[1, 2.0], None, {"a": 1}])
def test_anything_else_is_left_to_onnx_ir(value):
    with pytest.raises((TypeError, ValueError)) as ours:
        attribute("a", value)
    with pytest.raises(type(ours.value)):
        ir.convenience.convert_attribute("a", value)


def test_a_node_is_the_node_ir_node_makes():
    x = ir.Value(name="x")
    kwargs = {"num_outputs": 2, "name": "n", "doc_string": "d", "metadata_props": {"k": "v"}}
    ours = new_node("Split", [x], {"axis": 1, "num_outputs": 2}, **kwargs)
    theirs = ir.node("Split", [x], {"axis": 1, "num_outputs": 2}, **kwargs)
    for node in (ours, theirs):
        for i, output in enumerate(node.outputs):
            output.name = f"y{i}"
    assert ir.serde.serialize_node(ours) == ir.serde.serialize_node(theirs)


def test_an_attribute_under_another_name_is_refused_as_ir_node_refuses_it():
    with pytest.raises(ValueError, match="does not match"):
        attribute("b", ir.AttrInt64("a", 1))
    with pytest.raises(ValueError, match="does not match"):
        ir.convenience.convert_attribute("b", ir.AttrInt64("a", 1))
