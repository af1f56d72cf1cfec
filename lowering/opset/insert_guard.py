"""The canonical SequenceInsert guard, below opset 13, where an If cannot return a sequence.

:class:`lowering.passes.normalize_inserts.NormalizeSequenceInsertPass`
guards a dynamic position p so that no runtime reads p = n (the length)
as anything but "append"::

    n      = SequenceLength(s)                      n = SequenceLength(s)
    is_end = Equal(p, n)                            q = Where(Less(p, 0), Add(p, n), p)
    out    = If(is_end)                     ->      out = SequenceInsert(s, x, q)
      then: SequenceInsert(s, x)
      else: q = Where(Less(p, 0), Add(p, n), p)       (or q = p)
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

from lowering.irutils.constants import constant_array
from lowering.irutils.naming import adopt_name
from lowering.irutils.op_facts import is_onnx_op


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
    if len(nodes) == 5 and q is nodes[3].outputs[0] and _wraps_negative(nodes[:4], p, n):
        return InsertGuard(node, nodes, insert.outputs[0])
    return None


def _wraps_negative(nodes: list[ir.Node], p: ir.Value | None, n: ir.Value | None) -> bool:
    """``zero = 0; is_negative = Less(p, zero); shifted = Add(p, n); Where(is_negative, shifted, p)``."""
    zero, less, add, where = nodes
    value = constant_array(zero.outputs[0]) if is_onnx_op(zero, "Constant") else None
    return (
        value is not None
        and value.size == 1
        and bool(np.all(value == 0))
        and is_onnx_op(less, "Less")
        and list(less.inputs) == [p, zero.outputs[0]]
        and is_onnx_op(add, "Add")
        and list(add.inputs) == [p, n]
        and is_onnx_op(where, "Where")
        and list(where.inputs) == [less.outputs[0], add.outputs[0], p]
        and all(len(v.uses()) == 1 for v in (less.outputs[0], add.outputs[0], zero.outputs[0]))
    )
