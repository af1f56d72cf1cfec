"""Going up from below 11 reads a constant input only where no caller can feed another.

Every input the library step reads as a constant (``READS_CONSTANT``:
Upsample-9's and Resize-10's scales) is swept three ways: a plain
initializer and a Constant node are constants (converted); an initializer
that is also a graph input is not (a caller may feed another value), so the
node is refused where the conversion depends on the value (nearest) and
converted where it is right for any value (linear). Each conversion is run
in onnxruntime against the original, with the graph input fed values that
override the initializer (scales below 1 too where the op takes them).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper as h

import lowering
from lowering.errors import LoweringError
from lowering.opset.library import READS_CONSTANT
from tests.cases.upgrade_models import init, model, vi
from tests.helpers import assert_same, run

SCALES = np.float32([1, 1, 2, 1.5])
#: The values fed in place of the initializer, by op: Upsample takes no scale below 1.
FED = {
    "Upsample": [np.float32([1, 1, 3, 2]), np.float32([1, 1, 1, 1])],
    "Resize": [np.float32([1, 1, 0.6, 0.6]), np.float32([1, 1, 3, 2]), np.float32([1, 1, 0.5, 1])],
}
_READERS = (("Upsample", 9), ("Resize", 10))
KINDS = ("initializer", "constant_node", "overridable")
TARGETS = (11, 13, onnx.defs.onnx_opset_version())


def _model(op: str, opset: int, mode: str, kind: str) -> onnx.ModelProto:
    x = vi("x", [1, 2, 4, 5])
    node = h.make_node(op, ["x", "sc"], ["y"], mode=mode, name="scale")
    if kind == "constant_node":
        made = h.make_node("Constant", [], ["sc"], value=init("v", SCALES), name="c")
        return model(opset, [made, node], [x], [vi("y", None)])
    inputs = [x, vi("sc", [4])] if kind == "overridable" else [x]
    return model(opset, [node], inputs, [vi("y", None)], [init("sc", SCALES)])


def test_every_constant_the_library_step_reads_is_swept():
    assert set(READS_CONSTANT) == set(_READERS)


def _feeds(op: str, kind: str) -> list[dict]:
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5)).astype(np.float32)
    if kind != "overridable":
        return [{"x": x}]
    return [{"x": x}, *({"x": x, "sc": fed} for fed in FED[op])]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize(("op", "opset"), _READERS)
def test_scales_are_read_as_constants_only_where_no_caller_can_feed_them(
    op, opset, mode, kind, target
):
    proto = _model(op, opset, mode, kind)
    if kind == "overridable" and mode == "nearest":
        model_ir = ir.serde.deserialize_model(proto)
        before = ir.serde.serialize_model(model_ir).SerializeToString()
        with pytest.raises(LoweringError) as raised:
            lowering.lower(model_ir, target_opset=target)
        message = str(raised.value)
        assert "\n" not in message
        assert (
            f"{op} (node 'scale' in main graph 'g') cannot go up to opset {target}: "
            "nearest with scales that are not constants of at least 1"
        ) in message
        assert ir.serde.serialize_model(model_ir).SerializeToString() == before
        return
    out = lowering.lower(proto, target_opset=target)
    onnx.checker.check_model(out, full_check=True)
    if kind == "overridable":
        assert "sc" in {i.name for i in out.graph.input}, "the graph input stays an input"
    for feeds in _feeds(op, kind):
        for got, want in zip(run(out, feeds), run(proto, feeds), strict=True):
            assert_same(got, want)


#: Fed in place of the overridable scales and shape of :func:`_chain_model`.
CHAIN_FEEDS = [
    {"sc": np.float32([1, 1, 1.5, 2.5]), "shape": np.int64([1, 1, 1, 2])},
    {"sc": np.float32([1, 1, 3, 2]), "shape": np.int64([1, 1, 3, 2])},
]


def _chain_model(op: str, opset: int) -> onnx.ModelProto:
    """The fuzz example of seed 3803: a small value that dies before a linear
    resize by overridable scales, whose result a Reshape to an overridable
    shape reads; the initializers say 1s (so ONNX's inference, reading them,
    sizes the resize like the value that died)."""
    nodes = [
        h.make_node("GlobalMaxPool", ["x"], ["g"]),
        h.make_node("Hardmax", ["g"], ["m"], axis=3),
        h.make_node(op, ["m", "sc"], ["u"], mode="linear", name="scale"),
        h.make_node("Reshape", ["u", "shape"], ["y"]),
    ]
    inputs = [vi("x", [1, 1, 6, 4]), vi("sc", [4]), vi("shape", [4], onnx.TensorProto.INT64)]
    initializers = [init("sc", np.float32([1, 1, 1, 1])), init("shape", np.int64([1, 1, 2, 1]))]
    return model(opset, nodes, inputs, [vi("y", [None] * 4)], initializers)


@pytest.mark.parametrize("target", [11, 12, 13])
@pytest.mark.parametrize(("op", "opset"), [("Upsample", 9), ("Resize", 10)])
def test_no_shape_read_from_an_overridable_initializer_is_declared(op, opset, target):
    """onnx.version_converter declares the shapes ONNX's inference gives, reading
    the initializers as constants: onnxruntime allocated by them ("Shape
    mismatch attempting to re-use buffer. {1,1,1,1} != {1,1,1,2}"). Only the
    model's own declarations stay."""
    proto = _chain_model(op, opset)
    out = lowering.lower(proto, target_opset=target)
    onnx.checker.check_model(out, full_check=True)
    declared = {info.name: info for info in (*out.graph.value_info, *out.graph.output)}
    for name in ("u", "y"):
        dims = declared[name].type.tensor_type.shape.dim if name in declared else []
        assert not any(d.HasField("dim_value") for d in dims), name
    for feeds in CHAIN_FEEDS:
        feeds = {"x": np.random.default_rng(0).standard_normal((1, 1, 6, 4), np.float32), **feeds}
        assert_same(run(out, feeds), run(proto, feeds))
