"""The canonical SequenceInsert position's guard.

:class:`lowering.passes.normalize_inserts.NormalizeSequenceInsertPass`
writes a position p that may be negative as
:func:`~lowering.irutils.positions.wrap_negative` (p + n where p is in
[-n, 0), else p itself: the one form every rewrite counts a position from
the end with, :mod:`lowering.irutils.positions`), and guards a dynamic
position p so that no runtime reads p = n (the length) as anything but
"append"; this module reads the guard back::

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

import onnx_ir as ir

from lowering.irutils.naming import adopt_name
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.positions import wrapped


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
    compared = _end_test(node)
    branches = _branches(node)
    if compared is None or branches is None:
        return None
    p, n, s = compared
    then_branch, else_branch = branches
    append = _append(then_branch, s)
    if append is None:
        return None
    x = append.inputs[1]
    nodes = list(else_branch)
    if not nodes or list(else_branch.outputs) != [nodes[-1].outputs[0]]:
        return None
    insert = nodes[-1]
    if not _inserts(insert, s, x):
        return None
    if not _computes_position(nodes[:-1], insert.inputs[2], p, n):
        return None
    return InsertGuard(node, nodes, insert.outputs[0])


def _end_test(
    node: ir.Node,
) -> tuple[ir.Value | None, ir.Value, ir.Value | None] | None:
    """(p, n, s) when ``node`` is an If on Equal(p, n = SequenceLength(s))."""
    if not is_onnx_op(node, "If") or len(node.outputs) != 1 or len(node.inputs) != 1:
        return None
    equal = node.inputs[0].producer() if node.inputs[0] is not None else None
    if equal is None or not is_onnx_op(equal, "Equal") or len(equal.inputs) != 2:
        return None
    p, n = equal.inputs
    if n is None:
        return None
    length = n.producer()
    if length is None or not is_onnx_op(length, "SequenceLength") or len(length.inputs) != 1:
        return None
    return p, n, length.inputs[0]


def _branches(node: ir.Node) -> tuple[ir.Graph, ir.Graph] | None:
    """The If's two branches, when both are graphs held in place (not references)."""
    then_attr, else_attr = node.attributes.get("then_branch"), node.attributes.get("else_branch")
    if not isinstance(then_attr, ir.Attr) or not isinstance(else_attr, ir.Attr):
        return None
    if then_attr.is_ref() or else_attr.is_ref():
        return None
    return then_attr.as_graph(), else_attr.as_graph()


def _append(then_branch: ir.Graph, s: ir.Value | None) -> ir.Node | None:
    """The branch's one node when it is ``SequenceInsert(s, x)``, returned."""
    appends = list(then_branch)
    if len(appends) != 1:
        return None
    append = appends[0]
    if not is_onnx_op(append, "SequenceInsert") or len(append.inputs) != 2:
        return None
    if append.inputs[0] is not s or list(then_branch.outputs) != [append.outputs[0]]:
        return None
    return append


def _inserts(insert: ir.Node, s: ir.Value | None, x: ir.Value | None) -> bool:
    """Whether ``insert`` is SequenceInsert(s, x, q)."""
    return (
        is_onnx_op(insert, "SequenceInsert")
        and len(insert.inputs) == 3
        and insert.inputs[0] is s
        and insert.inputs[1] is x
    )


def _computes_position(
    rest: list[ir.Node], q: ir.Value | None, p: ir.Value | None, n: ir.Value
) -> bool:
    """Whether q is p itself, or wrap_negative(p, n) computed by exactly ``rest``."""
    if q is p:
        return not rest
    wrap = wrapped(q)
    if wrap is None or wrap.p is not p or wrap.n is not n or wrap.negative:
        return False
    computing = set(wrap.nodes)
    if not computing <= set(rest):
        return False
    return all(other in computing or _read_only_by(other, computing) for other in rest)


def _read_only_by(node: ir.Node, readers: set[ir.Node]) -> bool:
    """A Constant (the wrap's zero) that only ``readers`` read."""
    return is_onnx_op(node, "Constant") and all(
        use.node in readers for value in node.outputs for use in value.uses()
    )
