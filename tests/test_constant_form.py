"""Constants come out in their ``value`` form (lowering.constant_form)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.constant_form import ConstantValueFormPass
from tests.helpers import all_nodes, assert_same, run

H = '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'

# attribute text -> (output type, the tensor it stands for)
SHORTHANDS = {
    "value_int = 3": ("int64", np.array(3, np.int64)),
    "value_ints = [1, -2]": ("int64[2]", np.array([1, -2], np.int64)),
    "value_float = 0.5": ("float", np.array(0.5, np.float32)),
    "value_floats = [0.5, 2.0]": ("float[2]", np.array([0.5, 2.0], np.float32)),
    'value_string = "ab"': ("string", np.array("ab", object)),
    'value_strings = ["a", "bc"]': ("string[2]", np.array(["a", "bc"], object)),
}


def _model(attribute: str, type_: str) -> onnx.ModelProto:
    """A constant in the main graph, one in a map body, and a map to lower."""
    return onnx.parser.parse_model(
        H
        + f"""
g (float[3,4] x) => ({type_} c, float[3,4] y, {type_} inner) {{
  c = Constant <{attribute}> ()
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m, copies = SequenceMap <body = body (float[4] r) => (float[4] o, {type_} k) {{
        o = Relu(r)
        k = Constant <{attribute}> ()
      }}> (rows)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
  zero = Constant <value = int64 {{0}}> ()
  inner = SequenceAt(copies, zero)
}}"""
    )


def _shorthands(model: onnx.ModelProto) -> list[str]:
    return [
        a.name
        for node in all_nodes(model)
        if node.op_type == "Constant"
        for a in node.attribute
        if a.name != "value"
    ]


@pytest.mark.parametrize("attribute", list(SHORTHANDS))
def test_every_shorthand_becomes_value(attribute):
    type_, tensor = SHORTHANDS[attribute]
    model = _model(attribute, type_)
    onnx.checker.check_model(model, full_check=True)
    assert _shorthands(model)
    result = lowering.lower(model)
    assert _shorthands(result) == []
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert_same(run(result, {"x": x}), [tensor, np.maximum(x, 0), tensor])


def test_references_and_sparse_values_stay():
    """``value_ints = @axes`` is known only at the call; a sparse value stays sparse."""
    model = ir.serde.deserialize_model(
        onnx.parser.parse_model(
            H
            + """
g (float[2,3] x) => (float[2,3] y, float[4] s) {
  y = local.keep <axes = [1]> (x)
  s = Constant <sparse_value = float[4] {1.0}> ()
}
<domain: "local", opset_import: ["" : 17]>
keep <axes> (x) => (y) {
  a = Constant <value_ints: ints = @axes> ()
  m = ReduceMax <keepdims = 1> (x, a)
  y = Sub(x, m)
}"""
        )
    )
    ConstantValueFormPass()(model)
    function = next(iter(model.functions.values()))
    (reference,) = [n for n in function if n.op_type == "Constant"]
    assert reference.attributes["value_ints"].is_ref()
    (sparse,) = [n for n in model.graph if n.op_type == "Constant"]
    assert list(sparse.attributes) == ["sparse_value"]


def test_a_model_with_nothing_to_lower_keeps_its_shorthands():
    model = onnx.parser.parse_model(
        H + "\ng () => (int64[2] c) {\n  c = Constant <value_ints = [1, 2]> ()\n}"
    )
    assert lowering.lower(model) == model
