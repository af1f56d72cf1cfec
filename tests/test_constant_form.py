"""Constants come out in their ``value`` form for the runtimes that read no
other (lowering.passes.constant_form), and as written for the others."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.passes.constant_form import ConstantValueFormPass
from lowering.runtimes.profiles import RUNTIMES
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


#: Each runtime, and whether it reads a Constant only in its ``value`` form.
VALUE_ONLY = {
    "tvm": True,
    "mnn": True,
    "generic": True,
    "onnxruntime": False,
    "openvino": False,
    "tract": False,
    "tinygrad": False,
    "iree": False,  # iree-import-onnx reads value_ints, value_float and CastLike (3.13)
}


def test_every_runtime_is_said():
    assert set(VALUE_ONLY) == set(RUNTIMES)


@pytest.mark.parametrize("attribute", list(SHORTHANDS))
@pytest.mark.parametrize("runtime", list(VALUE_ONLY))
def test_every_shorthand_becomes_value_for_a_runtime_that_reads_no_other(attribute, runtime):
    type_, tensor = SHORTHANDS[attribute]
    model = _model(attribute, type_)
    onnx.checker.check_model(model, full_check=True)
    assert _shorthands(model)
    result = lowering.lower(model, runtime=runtime)
    kept = [a for a in _shorthands(model) if not VALUE_ONLY[runtime]]
    assert _shorthands(result) == kept
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


# (constant, type of the CastLike's second input, folded?)
CAST_LIKES = [
    ("float {0}", "float", True),  # torch's Conv without bias
    ("float {1.5}", "float16", True),
    ("int64 {3}", "float", True),
    ("bool {1}", "int32", True),
    ("float {1.5}", "int32", False),  # float to integer: ONNX leaves NaN and range undefined
    ("float {1.5}", None, False),  # nothing declares the type
]


@pytest.mark.parametrize(("constant", "like", "folded"), CAST_LIKES)
def test_a_cast_like_of_a_constant_to_a_declared_type_is_that_constant(constant, like, folded):
    type_ = like or "float"
    model = onnx.parser.parse_model(
        H
        + f"""
g ({type_}[2] t, float[3,4] x) => ({type_} y, float[3,4] z) {{
  u = Identity(t)
  c = Constant <value = {constant}> ()
  y = CastLike(c, u)
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] o) {{ o = Relu(r) }}> (rows)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}}"""
    )
    if like is not None:  # u's type is declared only where the case says so
        element = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(_NUMPY[like]))
        model.graph.value_info.append(onnx.helper.make_tensor_value_info("u", element, [2]))
    onnx.checker.check_model(model, full_check=True)
    result = lowering.lower(model, runtime="mnn")
    onnx.checker.check_model(result, full_check=True)
    (producer,) = [node for node in result.graph.node if "y" in node.output]
    readers_of_c = [node for node in result.graph.node if "c" in node.input]
    if folded:
        assert producer.op_type == "Constant"
        assert not [node for node in result.graph.node if "c" in node.output]  # unread: gone
    else:
        assert producer.op_type == "CastLike" and readers_of_c == [producer]
    feeds = {"t": np.zeros(2, _NUMPY[type_]), "x": np.ones((3, 4), np.float32)}
    assert_same(run(result, feeds), run(model, feeds))


_NUMPY = {"float": np.float32, "float16": np.float16, "int32": np.int32}


@pytest.mark.parametrize("overridable", [False, True])
def test_a_cast_like_of_an_initializer_folds_unless_callers_can_override_it(overridable):
    """An initializer that is also a graph input is not a constant."""
    inputs = "float[2] t, float[3,4] x, int64[2] k" if overridable else "float[2] t, float[3,4] x"
    model = onnx.parser.parse_model(
        H
        + f"""
g ({inputs}) => (float[2] y, float[3,4] z) <int64[2] k = {{5, 6}}> {{
  y = CastLike(k, t)
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = body (float[4] r) => (float[4] o) {{ o = Relu(r) }}> (rows)
  z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}}"""
    )
    onnx.checker.check_model(model, full_check=True)
    result = lowering.lower(model, runtime="mnn")
    ops = [node.op_type for node in result.graph.node]
    assert ("CastLike" in ops) == overridable
    assert [i.name for i in result.graph.initializer] == (["k"] if overridable else [])
    feeds = {"t": np.zeros(2, np.float32), "x": np.ones((3, 4), np.float32)}
    if overridable:
        feeds["k"] = np.array([-1, 7], np.int64)
    assert_same(run(result, feeds), run(model, feeds))
