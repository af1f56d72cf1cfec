"""Split-18's num_outputs, and Split-13's computed sizes at 11.

Going down without a ``split`` input, the sizes come from the split axis's
dimension: a constant where that one dim is static (the others may be
symbolic: a GRU cell's gates with a dynamic batch), Shape arithmetic
otherwise::

    d = Shape(x)[axis]; c = (d + n - 1) / n
    Split-13(x, Concat([c] * (n - 1), [d - c * (n - 1)]))

Going from 13 to 11, a constant ``split`` input becomes the attribute; a
computed one (HF GPT-2's ``split``, or the Shape arithmetic above) becomes
one Slice per output, at the cumulative offsets of the sizes, which
Slice-11 takes as inputs::

    s = split sizes (int64[n])        ends = CumSum(s), starts = ends - s
    x --+--> Slice(x, starts[0:1], ends[0:1], [axis]) --> y0
        +--> Slice(x, starts[1:2], ends[1:2], [axis]) --> y1 ...

The Slices compute what Split does whenever the sizes are valid (non-negative,
summing to the dim); Split refuses other sizes, and the Slices then compute
something: a model that feeds such sizes is not one ONNX defines.

Going up without a ``split`` input, Split-18 needs ``num_outputs``: the
number of outputs, which Split-13 splits into equal parts.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.adapters.axes_inputs import to_attribute
from lowering.opset.registry import ALL, Decline, down, up


def _axis_dim(x: ir.Value | None, axis: int) -> int | None:
    """The static size of ``x``'s dim ``axis`` (its other dims may be symbolic)."""
    if x is None or x.shape is None or not -len(x.shape) <= axis < len(x.shape):
        return None
    dim = x.shape[axis]
    return dim if isinstance(dim, int) else None


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
    size = _axis_dim(x, axis)
    if size is not None:
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


@down("Split", 11, 13, outputs=ALL)
def sizes_to_attribute(rw, node: ir.Node) -> None:
    """Constant split sizes -> attribute; computed ones -> a Slice per output."""
    operand = node.inputs[1] if len(node.inputs) > 1 else None
    if operand is None or rw.constant(operand) is not None:
        to_attribute(rw, node)
        return
    x = node.inputs[0]
    if x is None:
        raise Decline("its input is missing")
    axis = node.attributes.get_int("axis", 0)

    def int64(made: ir.Node) -> ir.Value:
        made.outputs[0].dtype = ir.DataType.INT64
        return made.outputs[0]

    ends = int64(rw.op("CumSum", [operand, rw.const(np.array(0, np.int64))]))
    starts = int64(rw.op("Sub", [ends, operand]))
    axes = rw.const(np.array([axis], np.int64))
    for index, output in enumerate(node.outputs):
        at = rw.const(np.array([index], np.int64))
        start = int64(rw.op("Gather", [starts, at]))
        end = int64(rw.op("Gather", [ends, at]))
        part = rw.op("Slice", [x, start, end, axes])
        rw.reroute(output, part.outputs[0])
    rw.remove(node)


@up("Split", 13, 18, outputs=ALL)
def count_outputs(rw, node: ir.Node) -> None:
    """Equal parts: num_outputs = the number of outputs."""
    if len(node.inputs) < 2 or node.inputs[1] is None:
        node.attributes["num_outputs"] = ir.AttrInt64("num_outputs", len(node.outputs))
