"""Readers of a sequence served from the tensor that stacks its elements.

A map lowered to a Loop with scan outputs, a Scan, a vectorized form, or a
list a Loop grew, has each of its sequences as a stack: the elements along
axis 0, and their count. Splitting the stack into a sequence only to read it
back costs a copy of every element, and runtimes without sequences
(OpenVINO, tract) cannot run the split at all, so each reader that a stack
serves reads it instead (:func:`read_stack_in_readers`)::

    y = SequenceAt(seq, i)            y = Gather<axis = 0>(stack, i')
    c = SequenceLength(seq)     ->    c = Gather(Shape(stack), 0)
    z = ConcatFromSequence(seq)       z = stack, Transpose or Reshape of it

i' is i + n where i is in [-n, 0) (:func:`lowering.irutils.positions.wrap_negative`),
else i: an i below -n stays out of range, and the read fails as
SequenceAt fails.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.dead_code import become_identity
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.positions import int64_scalar, wrap_negative
from lowering.maps.loop_body import read_slice, typed
from lowering.maps.plan import SCALAR_INT64, tensor_dtype
from lowering.runtimes.ort_kernels import first_unsupported, unsupported


def read_stack_in_readers(
    output: ir.Value,
    stack: ir.Value,
    type_: ir.TypeProtocol,
    element_shape: ir.Shape | None,
    count: ir.Value,
    opset: int,
) -> list[ir.Node]:
    """Let each reader of ``output`` that a stack serves read ``stack`` instead.

    ``stack`` holds the elements along axis 0, ``count`` (an int64 scalar)
    is how many there are. Splitting the stack into a sequence only to read
    it back costs a copy of every element, and runtimes without sequences
    (OpenVINO) cannot run the split at all::

        SequenceAt(seq, i)                   ->  Gather<axis = 0>(stack, i')
                                                 (Slice + Squeeze for strings)
        SequenceLength(seq)                  ->  Gather(Shape(stack), 0)
                                                 (through a tensor for a graph output: count_of)
        ConcatFromSequence<axis = a,
                           new_axis = 1>     ->  stack (a = 0), Transpose (a > 0)
        ConcatFromSequence<axis = 0>         ->  Reshape(stack, [-1, *shape[1:]])

    where i' is i where Gather reads it (Gather, like SequenceAt, counts a
    negative index from the back and refuses one out of range), and
    otherwise ``wrap_negative(i, count)``, i + count where i is in
    [-count, 0), else i (:mod:`lowering.irutils.positions`): a negative
    constant TVM's Gather cannot take, or a Slice (strings), whose end would wrap; an i below -count
    stays out of range, so the read fails where SequenceAt fails.
    Unlike the original, a concat of no elements gives an empty tensor
    rather than an error. A reader whose op onnxruntime cannot
    run on the element type keeps reading the sequence. Returns the new
    nodes that go with the Loop (shape constants); the nodes a reader needs
    go right before it, in its own graph.
    """
    rank = None if element_shape is None else len(element_shape)
    dtype = tensor_dtype(type_)
    constants: list[ir.Node] = []
    for user, index in list(output.uses()):
        kind = stack_read_kind(user, index, element_shape, dtype, opset)
        if kind == "at":
            position = user.inputs[1]
            assert position is not None, "stack_read_kind checked the position is there"
            nodes = _element_at(stack, position, count, dtype, opset)
            typed(nodes[-1].outputs[0], (type_, element_shape))
            _become(user, nodes)
        elif kind == "length":
            _become(user, count_of(stack, None, through_data=user.outputs[0].is_graph_output()))
        elif kind == "concat":
            constants += read_stack(user, stack, element_shape)
        elif kind == "transpose":
            assert rank is not None, "concat_kind stacks along a nonzero axis only at a known rank"
            axis = concat_kind(user, index, rank, element_shape)[1]
            perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
            user.attributes.clear()
            user.op_type = "Transpose"
            user.attributes["perm"] = ir.AttrInt64s("perm", perm)
            user.replace_input_with(0, stack)
        elif kind == "merge_along":
            constants += merge_along(user, index, stack, element_shape)
    return constants


def count_of(stack: ir.Value, static: int | None, through_data: bool = False) -> list[ir.Node]:
    """Nodes computing the number of elements in ``stack`` (its first dim, or
    ``static`` where known); the count is the last node's output.

    tract computes a value read from ``Shape`` as a symbolic dim, and its
    API cannot hand one back as a graph output ("Unsupported DatumType in
    the public API TDim", even after a Cast). With ``through_data`` (for a
    count the graph returns) the count goes through a tensor, which tract
    returns as a plain int64::

        Gather(Shape(stack), 0)   ->   ReduceSum<keepdims = 0>(ConstantOfShape<1>(Shape(stack)[:1]))
    """
    if isinstance(static, int):
        return [constant_node(np.array(static, np.int64), "count")]
    if through_data:
        shape = fresh(new_node("Shape", [stack]))
        typed(fresh(shape.outputs[0], "stack_shape"), (ir.TensorType(ir.DataType.INT64), None))
        zero = constant_node(np.array([0], np.int64), "zero")
        one = constant_node(np.array([1], np.int64), "one")
        first = fresh(new_node("Slice", [shape.outputs[0], zero.outputs[0], one.outputs[0]]))
        vector = (ir.TensorType(ir.DataType.INT64), ir.Shape([1]))
        typed(fresh(first.outputs[0], "count_dims"), vector)
        value = ir.tensor(np.ones(1, np.int64))
        ones = fresh(new_node("ConstantOfShape", [first.outputs[0]], {"value": value}))
        typed(fresh(ones.outputs[0], "ones"), (ir.TensorType(ir.DataType.INT64), ir.Shape([None])))
        total = fresh(new_node("ReduceSum", [ones.outputs[0]], {"keepdims": 0}))
        typed(fresh(total.outputs[0], "count"), SCALAR_INT64)
        return [shape, zero, one, first, ones, total]
    shape = fresh(new_node("Shape", [stack]))
    typed(fresh(shape.outputs[0], "stack_shape"), (ir.TensorType(ir.DataType.INT64), None))
    zero = constant_node(np.array(0, np.int64), "zero")
    count = fresh(new_node("Gather", [shape.outputs[0], zero.outputs[0]]))
    typed(fresh(count.outputs[0], "count"), (ir.TensorType(ir.DataType.INT64), ir.Shape([])))
    return [shape, zero, count]


def stack_read_kind(
    user: ir.Node,
    index: int,
    shape: ir.Shape | None,
    dtype: ir.DataType | None,
    opset: int,
) -> str | None:
    """How :func:`read_stack_in_readers` rewrites ``user``; None where it keeps the sequence."""
    if index != 0 or user.graph is None:
        return None
    if is_onnx_op(user, "SequenceAt"):
        readable = unsupported("Gather", dtype, opset) is None or (
            first_unsupported([("Slice", dtype), ("Squeeze", dtype)], opset) is None
        )
        return "at" if readable and len(user.inputs) == 2 and user.inputs[1] is not None else None
    if is_onnx_op(user, "SequenceLength"):
        return "length" if unsupported("Shape", dtype, opset) is None else None
    rank = None if shape is None else len(shape)
    kind = concat_kind(user, index, rank, shape)
    if kind is None:
        if _merges_along(user, shape) and not unsupported("Transpose", dtype, opset):
            return "merge_along"
        return None
    if kind[1] == 0:
        return "concat"
    return "transpose" if unsupported("Transpose", dtype, opset) is None else None


def _element_at(
    stack: ir.Value,
    position: ir.Value,
    count: ir.Value,
    dtype: ir.DataType | None,
    opset: int,
) -> list[ir.Node]:
    """Nodes reading element ``position`` of ``stack``, its index normalized.

    A position is counted from the end only where it is in [-count, 0)
    (:func:`~lowering.irutils.positions.wrap_negative`): one below -count
    stays out of range, and Gather (or Slice, whose slice is then empty, and
    Squeeze) refuses it as SequenceAt refuses it.
    """
    constant = constant_array(position)
    nodes: list[ir.Node] = []
    if constant is not None and constant.size == 1:
        index = int(constant.reshape(()))
        # Gather counts a negative index from the back (every runtime measured
        # does), and TVM converts no Gather whose index is computed from Shape.
        if index >= 0 or unsupported("Gather", dtype, opset) is None:
            return read_slice(stack, index, 0, False, dtype, opset)
        # Slice reads [i, i + 1), whose end is 0 for i = -1: counted from the end.
        negative = constant_node(np.array(index, np.int64), "index")
        nodes += [negative, *wrap_negative(negative.outputs[0], count, negative=True)]
        return nodes + read_slice(stack, nodes[-1].outputs[0], 0, False, dtype, opset)
    nodes += int64_scalar(position)
    p = nodes[-1].outputs[0] if nodes else position
    if unsupported("Gather", dtype, opset) is None:
        # Gather counts a negative index from the back and refuses one out of
        # range, as SequenceAt does: one op per read (in a loop, 6x fewer).
        return nodes + read_slice(stack, p, 0, False, dtype, opset)
    nodes += wrap_negative(p, count)  # Slice: its sign is known only at run time
    return nodes + read_slice(stack, nodes[-1].outputs[0], 0, False, dtype, opset)


def _merges_along(user: ir.Node, shape: ir.Shape | None) -> bool:
    """Whether :func:`merge_along` serves ``user``, a concat of elements of ``shape``."""
    if not is_onnx_op(user, "ConcatFromSequence") or shape is None or len(shape) == 0:
        return False
    rank, axis = len(shape), user.attributes.get_int("axis", 0)
    if user.attributes.get_int("new_axis", 0) or not -rank <= axis < rank or axis % rank == 0:
        return False
    return all(isinstance(d, int) and d > 0 for i, d in enumerate(shape) if i != axis % rank)


def _become(user: ir.Node, nodes: list[ir.Node]) -> None:
    """Put ``nodes`` before ``user``, whose readers then read the last one's output.

    ``user`` stays, as an Identity, only where its output is a graph output.
    """
    graph = user.graph
    assert graph is not None, "stack_read_kind takes only readers in a graph"
    graph.insert_before(user, nodes)
    become_identity(user, nodes[-1].outputs[0], graph)


def concat_kind(user: ir.Node, index: int, rank: int | None, shape: ir.Shape | None):
    """How a stack of the elements serves ``user``, a reader of the sequence.

    ``("stack", axis)`` for ``ConcatFromSequence<axis, new_axis = 1>``: the
    elements stacked along ``axis``. ``("merge", 0)`` for
    ``ConcatFromSequence<axis = 0, new_axis = 0>``: the stack along 0 with its
    first two dims merged, which needs the element's rank and its dims after
    the first static and non-zero (Reshape reads 0 as "copy"). None otherwise.
    With no known rank only a stack along axis 0 qualifies.
    """
    if index != 0 or not is_onnx_op(user, "ConcatFromSequence"):
        return None
    axis = user.attributes.get_int("axis", 0)
    if user.attributes.get_int("new_axis", 0):
        if rank is None:
            return ("stack", 0) if axis == 0 else None
        if not -rank - 1 <= axis <= rank:
            return None
        return "stack", axis % (rank + 1)
    if (
        rank is not None
        and shape is not None  # (callers pass rank = len(shape))
        and rank >= 1
        and axis in (0, -rank)
        and all(isinstance(d, int) and d > 0 for d in shape[1:])
    ):
        return "merge", 0
    return None


def read_stack(user: ir.Node, stack: ir.Value, shape: ir.Shape | None) -> list[ir.Node]:
    """Rewrite ``user``, a ConcatFromSequence that :func:`concat_kind` accepts, to read
    ``stack`` (stacked along the concat's axis) in place: its name and output stay::

        ConcatFromSequence<axis, new_axis = 1>(seq)  ==  stack
        ConcatFromSequence<axis = 0>(seq)            ==  Reshape(stack, [-1, *shape[1:]])

    Returns the new shape constant, if any, to go before ``user``.
    """
    stacks = user.attributes.get_int("new_axis", 0)
    user.attributes.clear()
    user.replace_input_with(0, stack)
    if stacks:
        user.op_type = "Identity"
        return []
    assert shape is not None, "concat_kind merges only at a known shape"
    target = constant_node(np.array([-1, *shape[1:]], np.int64), "merged_shape")
    user.op_type = "Reshape"
    user.resize_inputs(2)
    user.replace_input_with(1, target.outputs[0])
    return [target]


def merge_along(
    user: ir.Node, index: int, stack: ir.Value, shape: ir.Shape | None
) -> list[ir.Node]:
    """Let ``ConcatFromSequence<axis = k, new_axis = 0>`` with k > 0 read the stack::

        ConcatFromSequence<axis = k>(seq) == Reshape(Transpose(stack, 0 to k),
                                                     [d_0, .., d_k-1, -1, d_k+1, ..])

    when every other dim of the element is static and non-zero, so that -1 is
    resolved even for an empty stack. Returns the new nodes (none if it does not apply).
    """
    if index != 0 or not _merges_along(user, shape):
        return []
    assert shape is not None, "_merges_along checks it"
    rank = len(shape)
    k = user.attributes.get_int("axis", 0) % rank
    dims = list(shape)
    perm = [*range(1, k + 1), 0, *range(k + 1, rank + 1)]
    transpose = fresh(new_node("Transpose", [stack], {"perm": perm}))
    target = constant_node(np.array([*dims[:k], -1, *dims[k + 1 :]], np.int64), "merged_shape")
    user.attributes.clear()
    user.op_type = "Reshape"
    user.replace_input_with(0, transpose.outputs[0])
    user.resize_inputs(2)
    user.replace_input_with(1, target.outputs[0])
    return [transpose, target]
