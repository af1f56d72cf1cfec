"""Shape-15's start/end, and Reshape-14's allowzero.

    Shape-15 <start=s, end=e> (x)  -->  Slice(Shape-13(x), [s], [e], [0])

Slice clamps a negative or out-of-range bound to [0, rank] exactly as
Shape-15 does. ``allowzero=1`` only differs from 0 when the shape has a 0,
so it is dropped when the shape is a constant without one.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_INT64_MAX = np.iinfo(np.int64).max


@down("Shape", 13, 15)
def shape_slice(rw, node: ir.Node) -> None:
    """Shape start/end -> Shape + Slice."""
    start = node.attributes.pop("start", None)
    end = node.attributes.pop("end", None)
    first = start.as_int() if start is not None else 0
    if first == 0 and end is None:
        return
    last = end.as_int() if end is not None else _INT64_MAX
    starts = rw.const(np.array([first], np.int64))
    ends = rw.const(np.array([last], np.int64))
    axes = rw.const(np.array([0], np.int64))
    rw.wrap_output(node.outputs[0], "Slice", extra_inputs=[starts, ends, axes])


@up("Shape", 13, 15)
def whole_shape(rw, node: ir.Node) -> None:
    """Shape-15 without start/end is Shape-13."""


@down("Reshape", 13, 14)
def no_allowzero(rw, node: ir.Node) -> None:
    """Drop allowzero when it cannot change the result (no 0 in the shape)."""
    attr = node.attributes.pop("allowzero", None)
    if attr is None or attr.as_int() == 0:
        return
    shape = rw.constant(node.inputs[1])
    if shape is not None and not (shape == 0).any():
        return
    # With allowzero=1 a 0 in the shape gives a 0 in the output: an output
    # whose dimensions are all known and non-zero had no 0 in its shape. Nor
    # had one of data with elements: a Reshape keeps the count of elements.
    dims = rw.static_shape(node.outputs[0])
    data = rw.static_shape(node.inputs[0])
    if (dims is None or 0 in dims) and (data is None or 0 in data):
        node.attributes["allowzero"] = attr
        raise Decline("allowzero=1 with a shape that may hold a 0")


@up("Reshape", 13, 14)
def copy_zeros(rw, node: ir.Node) -> None:
    """Reshape-14 without allowzero is Reshape-13."""
