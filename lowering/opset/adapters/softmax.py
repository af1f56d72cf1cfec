"""Softmax, LogSoftmax and Hardmax: a 2-D coercion at 11, one axis at 13.

At 11 the op flattens its input to [prod(d[:axis]), prod(d[axis:])] and
normalizes each row; at 13 it normalizes along ``axis`` alone. On the last
axis the two agree. Going down, another axis is moved last and back::

    x --> Transpose(perm) --> Softmax-11 <axis=r-1> --> Transpose(inverse) --> y

Going up, the 11 form is spelled out exactly::

    x --> Flatten <axis> --> Softmax-13 <axis=-1> --> Reshape<allowzero=1>(Shape(x)) --> y
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

_OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@down(_OPS, 11, 13)
def one_axis(rw, node: ir.Node) -> None:
    """Softmax on one axis: the same op on the last axis, else Transpose around it."""
    x = node.inputs[0]
    rank = rw.rank(x)
    if x is None or rank is None:
        raise Decline("the input's rank is unknown")
    axis = node.attributes.get_int("axis", -1)
    axis = axis + rank if axis < 0 else axis
    node.attributes["axis"] = ir.AttrInt64("axis", max(rank - 1, 0))
    if axis == rank - 1 or rank == 0:
        return
    perm = [d for d in range(rank) if d != axis] + [axis]
    inverse = [perm.index(d) for d in range(rank)]
    before = rw.op("Transpose", [x], {"perm": perm})
    before.outputs[0].type = x.type
    node.replace_input_with(0, before.outputs[0])
    rw.wrap_output(node.outputs[0], "Transpose", {"perm": inverse})


@up(_OPS, 11, 13)
def coerced(rw, node: ir.Node) -> None:
    """Softmax-11's 2-D coercion, spelled Flatten -> op on the last axis -> Reshape."""
    axis = node.attributes.get_int("axis", 1)
    rank = rw.rank(node.inputs[0])
    node.attributes["axis"] = ir.AttrInt64("axis", -1)
    if rank is not None and axis in (-1, rank - 1):
        return
    x = node.inputs[0]
    assert x is not None, "Softmax's input is required"
    flat = rw.op("Flatten", [x], {"axis": axis})
    flat.outputs[0].type = x.type
    node.replace_input_with(0, flat.outputs[0])
    shape = rw.op("Shape", [x])
    # Back to x's shape, which may hold a 0: Reshape-14's allowzero (the
    # Reshape adapter writes no Reshape-13 that could see it).
    rw.wrap_output(
        node.outputs[0], "Reshape", {"allowzero": 1}, extra_inputs=[shape.outputs[0]], version=14
    )
