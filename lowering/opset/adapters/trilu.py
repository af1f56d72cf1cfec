"""Trilu below 14, where ONNX gives it no function body: a mask and a Where.

    d = Range(0, M) - Unsqueeze(Range(0, N), 1)     # column - row, [N, M]
    keep = Not(Less(d, k))      (upper)   or   Not(Greater(d, k))   (lower)
    y = Where(keep, x, 0)                           # broadcast over the batch dims

Where, Less, Greater, Not and Range take every type Trilu does at 11, so the
result is the same tensor.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, expansion

_VERSION = 14


@expansion("Trilu")
def mask_and_where(rw, node: ir.Node) -> None:
    """Trilu -> Where on a Range mask."""
    x = node.inputs[0]
    if x is None or x.dtype is None or x.dtype == ir.DataType.UNDEFINED:
        raise Decline("its input's element type is unknown")
    if rw.rank(x) is not None and rw.rank(x) < 2:
        raise Decline("its input has rank below 2")

    def op(op_type, inputs, attributes=None, dtype=ir.DataType.INT64):
        made = rw.op(op_type, inputs, attributes, version=_VERSION)
        made.outputs[0].dtype = dtype
        return made.outputs[0]

    shape = op("Shape", [x])
    rows = op("Gather", [shape, rw.const(np.array(-2, np.int64))])
    columns = op("Gather", [shape, rw.const(np.array(-1, np.int64))])
    zero, one = rw.const(np.array(0, np.int64)), rw.const(np.array(1, np.int64))
    row = op("Unsqueeze", [op("Range", [zero, rows, one]), rw.const(np.array([1], np.int64))])
    diagonal = op("Sub", [op("Range", [zero, columns, one]), row])
    k = node.inputs[1] if len(node.inputs) > 1 and node.inputs[1] is not None else zero
    upper = node.attributes.get_int("upper", 1)
    outside = op("Less" if upper else "Greater", [diagonal, k], dtype=ir.DataType.BOOL)
    keep = op("Not", [outside], dtype=ir.DataType.BOOL)
    filler = rw.const(np.zeros((), x.dtype.numpy()))
    result = op("Where", [keep, x, filler], dtype=x.dtype)
    rw.reroute(node.outputs[0], result)
    rw.remove(node)
