"""One SharedConstants for the map lowering and the opset conversion.

A value is shared by its element type, shape and contents: numpy spells
bfloat16 and the float8 types alike, so two constants of the same bytes
and different ONNX types stay two.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx_ir as ir
import pytest

from lowering.irutils.constants import SharedConstants

_EIGHT_BITS = [
    (ir.DataType.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    (ir.DataType.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    (ir.DataType.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    (ir.DataType.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
    (ir.DataType.UINT8, np.uint8),
]


def _constant(dtype: ir.DataType, numpy_type) -> tuple[ir.Node, np.ndarray]:
    array = np.frombuffer(bytes([0x38, 0x40]), dtype=numpy_type)
    node = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.Tensor(array, dtype=dtype))])
    node.outputs[0].dtype = dtype
    return node, array


def test_equal_bytes_of_other_types_are_not_shared():
    graph = ir.Graph([], [], nodes=[], name="g")
    shared = SharedConstants()
    values = [shared.share(graph, *_constant(dtype, t)) for dtype, t in _EIGHT_BITS]
    assert len(set(values)) == len(_EIGHT_BITS)
    fillers = [shared.zeros(graph, [2], dtype) for dtype, _ in _EIGHT_BITS]
    assert len(set(fillers)) == len(_EIGHT_BITS)


@pytest.mark.parametrize(("dtype", "numpy_type"), _EIGHT_BITS)
def test_an_equal_constant_is_shared_once_per_graph_and_placed_at_its_top(dtype, numpy_type):
    graph = ir.Graph([], [], nodes=[ir.Node("", "Relu", [])], name="g")
    other = ir.Graph([], [], nodes=[], name="h")
    shared = SharedConstants()
    first, array = _constant(dtype, numpy_type)
    second, _ = _constant(dtype, numpy_type)
    assert shared.share(graph, first, array) is first.outputs[0]
    assert shared.share(graph, second, array) is first.outputs[0]
    assert shared.share(other, second, array) is second.outputs[0]
    reader = ir.Node("", "Identity", [first.outputs[0]])
    graph.append(reader)
    shared.place([first.outputs[0]])
    assert next(iter(graph)) is first
