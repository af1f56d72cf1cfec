"""The canonical SequenceInsert position's forms: the wrap of a negative p, and the guard.

:class:`lowering.passes.normalize_inserts.NormalizeSequenceInsertPass`
writes a position p that may be negative as :func:`wrap_negative` (p + n
where p is in [-n, 0), else p itself), and guards a dynamic position p so
that no runtime reads p = n (the length) as anything but "append"; this
module writes the first and reads both back::

    n      = SequenceLength(s)                      n = SequenceLength(s)
    is_end = Equal(p, n)                            q = wrap_negative(p, n)
    out    = If(is_end)                     ->      out = SequenceInsert(s, x, q)
      then: SequenceInsert(s, x)
      else: q = wrap_negative(p, n)                   (or q = p)
            SequenceInsert(s, x, q)

If-11 returns no sequence, so below 13 the guard is replaced by its else
branch, hoisted out of the If. That is the same sequence: when p = n, q is
n too (n is not negative), and SequenceInsert-11 inserts at n by
appending, as the then branch does. Only this exact pattern is taken, from
the pass or written by hand; any other If returning a sequence blocks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op

#: The ops :func:`wrap_negative` writes, beside a Constant.
WRAP_OPS = frozenset({"Less", "Add", "Where"})


def wrap_negative(p: ir.Value, n: ir.Value, *, negative: bool = False) -> list[ir.Node]:
    """p + n where p is in [-n, 0), else p; the last node's output is the result::

        zero    = Constant<int64 0>
        shifted = Add(p, n)
        wrapped = Where(Less(p, zero), shifted, p)      (shifted itself where ``negative``)
        q       = Where(Less(shifted, zero), p, wrapped)

    A p below -n stays p, out of range as it was, so that a runtime refuses
    the insert as it refuses the original (p + n alone would be a valid
    negative position again: -3 into a sequence of 2 would insert at 1).
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
    outer = q.producer() if q is not None else None
    if outer is None or not is_onnx_op(outer, "Where") or len(outer.inputs) != 3:
        return None
    is_below, p, inner = outer.inputs
    below = _less_than_zero(is_below)
    if below is None or p is None:
        return None
    shifted = below.inputs[0]
    add = shifted.producer() if shifted is not None else None
    if add is None or not is_onnx_op(add, "Add") or len(add.inputs) != 2 or add.inputs[0] is not p:
        return None
    n = add.inputs[1]
    if n is None:
        return None
    if inner is shifted:
        constant = constant_array(p)
        if constant is None or constant.size != 1 or not (constant < 0).all():
            return None
        return Wrap(p, n, True, [add, below, outer])
    where = inner.producer() if inner is not None else None
    if (
        where is None
        or not is_onnx_op(where, "Where")
        or len(where.inputs) != 3
        or where.inputs[1] is not shifted
        or where.inputs[2] is not p
    ):
        return None
    less = _less_than_zero(where.inputs[0])
    if less is None or less.inputs[0] is not p:
        return None
    return Wrap(p, n, False, [add, less, where, below, outer])


def _less_than_zero(value: ir.Value | None) -> ir.Node | None:
    """The ``Less(x, 0)`` computing ``value``, or None."""
    node = value.producer() if value is not None else None
    if node is None or not is_onnx_op(node, "Less") or len(node.inputs) != 2:
        return None
    zero = constant_array(node.inputs[1])
    if zero is None or zero.size != 1 or zero.any():
        return None
    return node


def typed_scalar(value: ir.Value, dtype: ir.DataType, stem: str) -> ir.Value:
    """``value`` typed as a scalar of ``dtype``, and given a fresh name from ``stem``."""
    value.dtype, value.shape = dtype, ir.Shape([])
    return fresh(value, stem)


@dataclasses.dataclass
class InsertGuard:
    """A matched guard: its If, and the else branch's nodes to hoist."""

    node: ir.Node
    hoisted: list[ir.Node]
    result: ir.Value

    def unguard(self, maybe_dead: set[ir.Value]) -> None:
        """Replace the If by its else branch, before the If in the If's graph."""
        node, owner = self.node, self.node.graph
        assert owner is not None, "a planned node stays in its graph until its plan commits"
        else_branch = node.attributes["else_branch"].as_graph()
        else_branch.outputs.clear()
        else_branch.remove(self.hoisted)
        owner.insert_before(node, self.hoisted)
        output = node.outputs[0]
        self.result.type, self.result.shape = output.type, output.shape
        output.replace_all_uses_with(self.result, replace_graph_outputs=True)
        name, output.name = output.name, None
        cond = node.inputs[0]
        node.replace_input_with(0, None)
        owner.remove(node, safe=True)
        adopt_name(self.result, name)
        if cond is not None:
            maybe_dead.add(cond)


def insert_guard(node: ir.Node) -> InsertGuard | None:
    """The guard ``node`` is, or None (see the module docstring for the pattern)."""
    if not is_onnx_op(node, "If") or len(node.outputs) != 1 or len(node.inputs) != 1:
        return None
    equal = node.inputs[0].producer() if node.inputs[0] is not None else None
    if equal is None or not is_onnx_op(equal, "Equal") or len(equal.inputs) != 2:
        return None
    p, n = equal.inputs
    length = n.producer() if n is not None else None
    if length is None or not is_onnx_op(length, "SequenceLength") or len(length.inputs) != 1:
        return None
    s = length.inputs[0]
    then_attr, else_attr = node.attributes.get("then_branch"), node.attributes.get("else_branch")
    if not isinstance(then_attr, ir.Attr) or not isinstance(else_attr, ir.Attr):
        return None
    if then_attr.is_ref() or else_attr.is_ref():
        return None
    then_branch, else_branch = then_attr.as_graph(), else_attr.as_graph()
    appends = list(then_branch)
    if (
        len(appends) != 1
        or not is_onnx_op(appends[0], "SequenceInsert")
        or len(appends[0].inputs) != 2
        or appends[0].inputs[0] is not s
        or list(then_branch.outputs) != [appends[0].outputs[0]]
    ):
        return None
    x = appends[0].inputs[1]
    nodes = list(else_branch)
    if not nodes or list(else_branch.outputs) != [nodes[-1].outputs[0]]:
        return None
    insert = nodes[-1]
    if (
        not is_onnx_op(insert, "SequenceInsert")
        or len(insert.inputs) != 3
        or insert.inputs[0] is not s
        or insert.inputs[1] is not x
    ):
        return None
    q = insert.inputs[2]
    if q is p and len(nodes) == 1:
        return InsertGuard(node, nodes, insert.outputs[0])
    wrap = wrapped(q)
    if wrap is None or wrap.p is not p or wrap.n is not n or wrap.negative:
        return None
    computing = set(wrap.nodes)
    rest = nodes[:-1]
    if not computing <= set(rest) or not all(
        other in computing or _read_only_by(other, computing) for other in rest
    ):
        return None
    return InsertGuard(node, nodes, insert.outputs[0])


def _read_only_by(node: ir.Node, readers: set[ir.Node]) -> bool:
    """A Constant (the wrap's zero) that only ``readers`` read."""
    return is_onnx_op(node, "Constant") and all(
        use.node in readers for value in node.outputs for use in value.uses()
    )
