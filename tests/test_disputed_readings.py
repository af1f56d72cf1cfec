"""Nodes that runtimes compute two ways are left as written (issue 21).

``Squeeze`` with an empty axes tensor squeezes no dim in ONNX (its shape
inference, onnx.reference, so onnxscript's folder) and every unit dim in
onnxruntime's kernel. Neither the constant evaluator nor ``--optimize`` may
pick one: lowered and optimized, the model computes what onnxruntime
computes for the original, wherever the node sits and however its axes
are spelled.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils import static_values
from lowering.opset.fold import fold
from tests.helpers import assert_same, parse, session

#: How the empty axes are written: a Constant, an initializer, or computed.
AXES = {
    "Constant": "axes = Constant <value = int64[0] {}> ()",
    "Slice of a Constant": (
        "all = Constant <value = int64[2] {0, 1}> ()\n"
        "none = Constant <value = int64[1] {1}> ()\n"
        "axes = Slice(all, none, none)"
    ),
}

#: Where the Squeeze sits; {squeeze} is the node, reading a constant [1, 1] c.
PLACES = {
    "main graph": ("{squeeze}", ""),
    "If branch": (
        (
            "flag = Constant <value = bool {{1}}> ()\n"
            "q = If (flag) <then_branch = t () => (tq) {{ {squeeze_t} }},"
            " else_branch = f () => (fq) {{ {squeeze_f} }}>"
        ),
        "",
    ),
    "function": ("q = local.Squeezed ()", "function"),
}

FUNCTION = """
<domain: "local", opset_import: ["" : 17]>
Squeezed () => (q) {{
  {squeeze}
}}"""


def _squeeze(axes: str, out: str) -> str:
    return f"c = Constant <value = int64[1,1] {{7}}> ()\n{axes}\n{out} = Squeeze(c, axes)"


def _model(axes: str, place: str) -> onnx.ModelProto:
    body, extra = PLACES[place]
    text = body.format(
        squeeze=_squeeze(AXES[axes], "q"),
        squeeze_t=_squeeze(AXES[axes], "tq"),
        squeeze_f=_squeeze(AXES[axes], "fq"),
    )
    imports = '"" : 17, "local" : 1' if extra else '"" : 17'
    functions = FUNCTION.format(squeeze=_squeeze(AXES[axes], "q")) if extra else ""
    return parse(
        f"""<ir_version: 8, opset_import: [{imports}]>
        g (seq(float[2]) s) => (seq(float[2]) m, int64[K] shape) {{
          m = SequenceMap <body = b (float[2] e) => (float[2] r) {{ r = Neg(e) }}> (s)
          {text}
          shape = Shape(q)
        }}{functions}"""
    )


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("axes", list(AXES))
def test_optimize_keeps_a_squeeze_with_empty_axes(axes, place):
    model = _model(axes, place)
    feeds = {"s": [np.array([1, -2], np.float32)]}
    expected = session(model, optimize=False).run(None, feeds)
    assert list(expected[1]) == []  # onnxruntime squeezes both unit dims
    working = ir.serde.deserialize_model(model)
    rewrites = lowering.lower_in_place(working, optimize=True)
    assert [r.reason for r in rewrites if r.op_type == "Optimize"] == []
    result = ir.serde.serialize_model(working)
    onnx.checker.check_model(result, full_check=True)
    assert all(n.domain in ("", "local") for n in result.graph.node)
    assert "lowering.fenced" not in {i.domain for i in result.opset_import}
    assert_same(session(result, optimize=False).run(None, feeds), expected)


def test_the_optimizer_still_folds_an_undisputed_squeeze():
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (seq(float[2]) s) => (seq(float[2]) m, int64[1] shape) {
          m = SequenceMap <body = b (float[2] e) => (float[2] r) { r = Neg(e) }> (s)
          c = Constant <value = int64[1,1] {7}> ()
          axes = Constant <value = int64[1] {0}> ()
          q = Squeeze(c, axes)
          shape = Shape(q)
        }"""
    )
    result = lowering.lower(model, optimize=True)
    assert "Squeeze" not in {n.op_type for n in result.graph.node}


def _squeezed(axes: np.ndarray | None) -> ir.Value:
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 17})
    c = ir.Value(name="c", const_value=ir.tensor(np.ones((1, 1), np.int64), name="c"))
    graph.register_initializer(c)
    inputs = [c]
    if axes is not None:
        a = ir.Value(name="a", const_value=ir.tensor(axes, name="a"))
        graph.register_initializer(a)
        inputs.append(a)
    node = ir.node("Squeeze", inputs)
    graph.append(node)
    return node.outputs[0]


@pytest.mark.parametrize(
    ("axes", "disputed"),
    [(None, False), (np.zeros(0, np.int64), True), (np.array([0], np.int64), False)],
)
def test_the_evaluator_never_picks_a_reading(axes, disputed):
    value = _squeezed(axes)
    node = value.producer()
    assert node is not None
    assert (static_values.disputed_reading(node) is not None) == disputed
    for folded in (static_values.static_array(value), fold(value)):
        assert (folded is None) == disputed
