"""Split-18's num_outputs.

Going down without a ``split`` input, the sizes come from the static
dimension, or from Shape arithmetic (an input at 13; 11 needs a constant)::

    d = Shape(x)[axis]; c = (d + n - 1) / n
    Split-13(x, Concat([c] * (n - 1), [d - c * (n - 1)]))

Going up without a ``split`` input, Split-18 needs ``num_outputs``: the
number of outputs, which Split-13 splits into equal parts.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import ALL, Decline, down, up


@down("Split", 13, 18, outputs=ALL)
def sizes_from_shape(rw, node: ir.Node) -> None:
    """num_outputs -> split sizes."""
    attr = node.attributes.pop("num_outputs", None)
    has_split = len(node.inputs) > 1 and node.inputs[1] is not None
    if attr is None or has_split:
        return
    n = attr.as_int()
    axis = node.attributes.get_int("axis", 0)
    x = node.inputs[0]
    dims = rw.static_shape(x)
    if dims is not None:
        size = dims[axis]
        chunk = -(-size // n)
        last = size - chunk * (n - 1)
        if last < 0 or n != len(node.outputs):
            node.attributes["num_outputs"] = attr
            raise Decline(f"a dimension of {size} cannot be split into {n} parts")
        sizes = rw.const(np.array([chunk] * (n - 1) + [last], np.int64))
    else:
        shape = rw.op("Shape", [x])
        index = rw.const(np.array([axis], np.int64))
        dim = rw.op("Gather", [shape.outputs[0], index])
        n_minus_1 = rw.const(np.array([n - 1], np.int64))
        plus = rw.op("Add", [dim.outputs[0], n_minus_1])
        chunk = rw.op("Div", [plus.outputs[0], rw.const(np.array([n], np.int64))])
        used = rw.op("Mul", [chunk.outputs[0], n_minus_1])
        last = rw.op("Sub", [dim.outputs[0], used.outputs[0]])
        parts = [chunk.outputs[0]] * (n - 1) + [last.outputs[0]]
        concat = rw.op("Concat", parts, {"axis": 0})
        for made in (shape, dim, plus, chunk, used, last, concat):
            made.outputs[0].dtype = ir.DataType.INT64
        sizes = concat.outputs[0]
    node.resize_inputs(2)
    node.replace_input_with(1, sizes)


@up("Split", 13, 18, outputs=ALL)
def count_outputs(rw, node: ir.Node) -> None:
    """Equal parts: num_outputs = the number of outputs."""
    if len(node.inputs) < 2 or node.inputs[1] is None:
        node.attributes["num_outputs"] = ir.AttrInt64("num_outputs", len(node.outputs))
