"""Reading a sequence kept as a concat and its lengths, instead of the sequence.

A sequence of n elements that agree on every dim but ``axis`` is held as
``whole``, their Concat along ``axis`` (each one Unsqueezed first with
``new_axis``), and ``lengths``, an int64 [n] of their sizes along it
(:mod:`lowering.loops.rewrite`'s concat form). Its readers become::

    ConcatFromSequence<axis, new_axis>(seq)  ->  whole
    SequenceAt(seq, i)                       ->  Slice(whole, Gather(starts, [i]),
                                                       Gather(ends, [i]), [axis])
                                                 (then Squeeze(axis) with new_axis)
    SequenceLength(seq)                      ->  Gather(Shape(lengths), 0)

with ``ends = CumSum(lengths)``, ``starts = ends - lengths`` computed once
after the loop. Gather, like SequenceAt, counts an i in [-n, 0) from the
end and fails on one out of range. A concat of no elements fails in
onnxruntime; ``whole`` would be an empty tensor, so unless the sequence is
proven non-empty the concat reads it through :func:`nonempty`, which fails
the same way.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_node
from lowering.irutils.dead_code import become_identity
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.positions import int64_scalar
from lowering.maps.loop_body import typed
from lowering.maps.stack_reads import count_of

_INT64_VECTOR = (ir.TensorType(ir.DataType.INT64), ir.Shape([None]))


def read_concat_in_readers(
    output: ir.Value,
    whole: ir.Value,
    lengths: ir.Value | None,
    axis: int,
    new_axis: bool,
    element: tuple[ir.TypeProtocol, ir.Shape | None],
    opset: int,
) -> list[ir.Node]:
    """Let every reader of ``output`` (a sequence) read ``whole`` and ``lengths``.

    Every reader must be one of the module docstring's (the planner checked);
    ``lengths`` is needed by SequenceAt and SequenceLength only. ``whole``
    is read as it is: a caller that must keep the empty concat's failure
    passes :func:`nonempty` of it. Returns the nodes that go right after
    the value's producer (the offsets); a reader's own nodes go before it.
    """
    after: list[ir.Node] = []
    offsets: tuple[ir.Value, ir.Value] | None = None
    for user, _ in list(output.uses()):
        graph = user.graph
        assert graph is not None, "the planner takes only readers in a graph"
        if user.op_type == "ConcatFromSequence":
            become_identity(user, whole, graph)
            continue
        assert lengths is not None, "SequenceAt and SequenceLength read the lengths"
        if user.op_type == "SequenceLength":
            nodes = count_of(lengths, None, through_data=user.outputs[0].is_graph_output())
            graph.insert_before(user, nodes)
            become_identity(user, nodes[-1].outputs[0], graph)
            continue
        if offsets is None:
            nodes, offsets = _offsets(lengths)
            after += nodes
        starts, ends = offsets
        position = user.inputs[1]
        assert position is not None, "the planner checked the position is there"
        nodes = _element(whole, position, starts, ends, axis, new_axis, opset)
        typed(nodes[-1].outputs[0], element)
        graph.insert_before(user, nodes)
        become_identity(user, nodes[-1].outputs[0], graph)
    return after


def _offsets(lengths: ir.Value) -> tuple[list[ir.Node], tuple[ir.Value, ir.Value]]:
    """``starts`` and ``ends`` of each element along the axis."""
    zero = constant_node(np.array(0, np.int64), "axis")
    cumsum = fresh(new_node("CumSum", [lengths, zero.outputs[0]]))
    ends = typed(fresh(cumsum.outputs[0], "ends"), _INT64_VECTOR)
    sub = fresh(new_node("Sub", [ends, lengths]))
    starts = typed(fresh(sub.outputs[0], "starts"), _INT64_VECTOR)
    return [zero, cumsum, sub], (starts, ends)


def _element(
    whole: ir.Value,
    position: ir.Value,
    starts: ir.Value,
    ends: ir.Value,
    axis: int,
    new_axis: bool,
    opset: int,
) -> list[ir.Node]:
    nodes: list[ir.Node] = []
    nodes += int64_scalar(position)
    p = nodes[-1].outputs[0] if nodes else position
    one = constant_node(np.array([1], np.int64), "one")
    shape = fresh(new_node("Reshape", [p, one.outputs[0]]))
    index = typed(fresh(shape.outputs[0], "at"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
    start = fresh(new_node("Gather", [starts, index]))
    end = fresh(new_node("Gather", [ends, index]))
    for node, stem in ((start, "start"), (end, "end")):
        typed(fresh(node.outputs[0], stem), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
    axes = constant_node(np.array([axis], np.int64), "axes")
    sliced = fresh(new_node("Slice", [whole, start.outputs[0], end.outputs[0], axes.outputs[0]]))
    nodes += [one, shape, start, end, axes, sliced]
    if new_axis:
        nodes += with_axes("Squeeze", sliced.outputs[0], [axis], opset)
    return nodes


def nonempty(whole: ir.Value, count_dims: ir.Value) -> list[ir.Node]:
    """``whole``, failing in onnxruntime where ``count_dims`` (int64 [1], the
    element count as a shape) is [0], as ConcatFromSequence fails on an
    empty sequence::

        ones   = ConstantOfShape<1>(count_dims)
        whole' = Reshape(whole, Mul(Shape(whole), Gather(ones, [0])))

    Gather refuses index 0 of an empty axis; otherwise it is [1] and the
    Reshape keeps the shape. The last node's output is ``whole'``.
    """
    value = ir.tensor(np.ones(1, np.int64))
    ones = fresh(new_node("ConstantOfShape", [count_dims], {"value": value}))
    typed(fresh(ones.outputs[0], "ones"), _INT64_VECTOR)
    zero = constant_node(np.array([0], np.int64), "first")
    first = fresh(new_node("Gather", [ones.outputs[0], zero.outputs[0]]))
    typed(fresh(first.outputs[0], "nonempty"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1])))
    dims = fresh(new_node("Shape", [whole]))
    typed(fresh(dims.outputs[0], "dims"), (ir.TensorType(ir.DataType.INT64), None))
    checked = fresh(new_node("Mul", [dims.outputs[0], first.outputs[0]]))
    typed(fresh(checked.outputs[0], "dims"), (ir.TensorType(ir.DataType.INT64), None))
    reshape = fresh(new_node("Reshape", [whole, checked.outputs[0]]))
    checked_whole = fresh(reshape.outputs[0], "whole")
    checked_whole.type, checked_whole.shape = whole.type, whole.shape
    return [ones, zero, first, dims, checked, reshape]


def lengths_count(lengths: ir.Value) -> list[ir.Node]:
    """``Shape(lengths)``: the element count as a shape, for :func:`nonempty`."""
    counted = fresh(new_node("Shape", [lengths]))
    typed(
        fresh(counted.outputs[0], "count_dims"), (ir.TensorType(ir.DataType.INT64), ir.Shape([1]))
    )
    return [counted]
