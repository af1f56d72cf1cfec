"""Sequence positions counted from the end: one form, written and read back.

A sequence op takes a position p that may be negative: SequenceAt and
SequenceErase in [-n, n - 1], SequenceInsert in [-n, n]; anything else is
an error (onnxruntime: "Invalid sequence index"). A rewrite that reads a
position as an index counts it from the end only where it is in [-n, 0)::

    zero    = Constant<int64 0>
    shifted = Add(p, n)
    wrapped = Where(Less(p, zero), shifted, p)      (shifted itself where p is a negative constant)
    q       = Where(Less(shifted, zero), p, wrapped)

so every valid p becomes its index, and a p below -n stays p, out of range
as it was: the op (or the Gather or Slice reading the index) refuses it as
the original refuses it. ``p + n`` alone would make it a valid negative
position again: -4 in a sequence of 3 would read the last element.
:func:`wrap_negative` writes it; :func:`wrapped` reads it back (the
SequenceInsert normalization's idempotence and its guard's matcher,
:mod:`lowering.opset.insert_guard`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op

#: The ops :func:`wrap_negative` writes, beside a Constant.
WRAP_OPS = frozenset({"Less", "Add", "Where"})


def wrap_negative(p: ir.Value, n: ir.Value, *, negative: bool = False) -> list[ir.Node]:
    """p + n where p is in [-n, 0), else p; the last node's output is the result.

    A p below -n stays p, out of range as it was (see the module docstring).
    ``negative``: p is known to be below 0 (a negative constant), so the
    inner Where is left out. p and n are int64 scalars.
    """
    zero = constant_node(np.array(0, np.int64), "zero")
    add = fresh(new_node("Add", [p, n]))
    shifted = typed_scalar(add.outputs[0], ir.DataType.INT64, "shifted")
    nodes = [zero, add]
    wrapped = shifted
    if not negative:
        less = fresh(new_node("Less", [p, zero.outputs[0]]))
        is_negative = typed_scalar(less.outputs[0], ir.DataType.BOOL, "is_negative")
        inner = fresh(new_node("Where", [is_negative, shifted, p]))
        wrapped = typed_scalar(inner.outputs[0], ir.DataType.INT64, "wrapped")
        nodes += [less, inner]
    below = fresh(new_node("Less", [shifted, zero.outputs[0]]))
    is_below = typed_scalar(below.outputs[0], ir.DataType.BOOL, "is_below")
    outer = fresh(new_node("Where", [is_below, p, wrapped]))
    typed_scalar(outer.outputs[0], ir.DataType.INT64, "position")
    return [*nodes, below, outer]


@dataclasses.dataclass
class Wrap:
    """A matched :func:`wrap_negative`: its p and n, and the nodes computing it
    (its Constant zero aside)."""

    p: ir.Value
    n: ir.Value
    negative: bool
    nodes: list[ir.Node]


def wrapped(q: ir.Value | None) -> Wrap | None:
    """The :func:`wrap_negative` that computes ``q``, or None.

    Its ``negative`` form (no inner Where) is taken only where p is a
    negative constant: for p >= 0 it would compute p + n.
    """
    outer = _made_by(q, "Where", 3)
    if outer is None:
        return None
    is_below, p, inner = outer.inputs
    below = _less_than_zero(is_below)
    if below is None or p is None:
        return None
    shifted = below.inputs[0]
    add = _made_by(shifted, "Add", 2)
    if add is None or add.inputs[0] is not p or add.inputs[1] is None:
        return None
    n = add.inputs[1]
    if inner is shifted:
        return Wrap(p, n, True, [add, below, outer]) if _negative_constant(p) else None
    found = _inner_where(inner, shifted, p)
    if found is None:
        return None
    return Wrap(p, n, False, [add, *found, below, outer])


def _inner_where(
    inner: ir.Value | None, shifted: ir.Value | None, p: ir.Value
) -> tuple[ir.Node, ir.Node] | None:
    """The ``Less(p, 0)`` and ``Where(that, shifted, p)`` computing ``inner``, or None."""
    where = _made_by(inner, "Where", 3)
    if where is None or where.inputs[1] is not shifted or where.inputs[2] is not p:
        return None
    less = _less_than_zero(where.inputs[0])
    if less is None or less.inputs[0] is not p:
        return None
    return less, where


def _negative_constant(p: ir.Value) -> bool:
    constant = constant_array(p)
    return constant is not None and constant.size == 1 and bool((constant < 0).all())


def _made_by(value: ir.Value | None, op_type: str, arity: int) -> ir.Node | None:
    """The ``op_type`` node of ``arity`` inputs computing ``value``, or None."""
    node = value.producer() if value is not None else None
    if node is None or not is_onnx_op(node, op_type) or len(node.inputs) != arity:
        return None
    return node


def _less_than_zero(value: ir.Value | None) -> ir.Node | None:
    """The ``Less(x, 0)`` computing ``value``, or None."""
    node = _made_by(value, "Less", 2)
    if node is None:
        return None
    zero = constant_array(node.inputs[1])
    if zero is None or zero.size != 1 or zero.any():
        return None
    return node


def typed_scalar(value: ir.Value, dtype: ir.DataType, stem: str) -> ir.Value:
    """``value`` typed as a scalar of ``dtype``, and given a fresh name from ``stem``."""
    value.dtype, value.shape = dtype, ir.Shape([])
    return fresh(value, stem)


def int64_scalar(position: ir.Value) -> list[ir.Node]:
    """Nodes making ``position`` (an integer of any type, a scalar or one entry)
    an int64 scalar, as a Gather or :func:`wrap_negative` reads it: a Cast
    and a Reshape where needed. The last node's output is it; none where
    ``position`` is one already (then it is the position itself)."""
    nodes: list[ir.Node] = []
    p = position
    if p.dtype != ir.DataType.INT64:
        cast = fresh(new_node("Cast", [p], {"to": ir.DataType.INT64.value}))
        p = fresh(cast.outputs[0], "index")
        p.dtype, p.shape = ir.DataType.INT64, position.shape
        nodes.append(cast)
    if p.shape is None or p.shape.rank() != 0:
        scalar = constant_node(np.array([], np.int64), "scalar_shape")
        reshape = fresh(new_node("Reshape", [p, scalar.outputs[0]]))
        typed_scalar(reshape.outputs[0], ir.DataType.INT64, "index")
        nodes += [scalar, reshape]
    return nodes
