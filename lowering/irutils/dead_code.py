"""Removing what a rewrite left unread: the one dead-code remover.

A rewrite that stops reading a value (an axes input that became an
attribute, a position that was folded, a sequence read back as a tensor)
removes the chain that computed it, producer by producer, while nothing
else reads it. Only producers of the ops the caller names go, and only in
the default domain: a custom op may have effects we cannot see::

    c = Constant<[0]>()              (gone: nothing reads r any more)
    r = Reshape(c, [-1])             (gone)
    y = Unsqueeze(x, r)      ->      y = Unsqueeze<axes=[0]>(x)

A graph input is never removed (an initializer that is one is part of the
model's interface), and neither is a node with a graph output.
"""

from __future__ import annotations

from collections.abc import Collection

import onnx_ir as ir

from lowering.irutils.identities import bypass_identity
from lowering.irutils.op_facts import is_onnx_domain

#: Constants only: what every rewrite may drop.
CONSTANTS: frozenset[str] = frozenset({"Constant"})


def unread(node: ir.Node) -> bool:
    """True when no output of ``node`` is read, in the graph or as a graph output."""
    return not any(v.uses() or v.is_graph_output() for v in node.outputs)


def remove_unread(value: ir.Value | None, ops: Collection[str] = CONSTANTS) -> None:
    """Remove the producer of ``value``, and so on up, while nothing reads it.

    ``ops``: the (default-domain) ops that may be removed; the walk stops at
    any other producer, at a graph input and at a node any of whose outputs
    is still read.
    """
    if value is None:
        return
    node = value.producer()
    if (
        node is None
        or node.graph is None
        or not is_onnx_domain(node.domain)
        or node.op_type not in ops
        or not unread(node)
    ):
        return
    inputs = [v for v in node.inputs if v is not None]
    node.graph.remove(node, safe=True)
    for operand in inputs:
        remove_unread(operand, ops)


def become_identity(node: ir.Node, source: ir.Value, owner) -> None:
    """Make ``node``'s readers read ``source``; ``node`` goes unless it must stay as an Identity.

    It stays, as ``Identity(source)``, only where
    :func:`lowering.irutils.identities.must_stay` says so (a graph output
    copying a graph input, say); otherwise a graph output it made is made by
    ``source``'s producer, under the output's name.
    """
    inputs = list(node.inputs)
    node.op_type = "Identity"
    node.domain = ""
    node.attributes.clear()
    node.resize_inputs(1)
    node.replace_input_with(0, source)
    for value in inputs:
        if value is not source:
            remove_unread(value)
    if bypass_identity(node):
        node.replace_input_with(0, None)
        owner.remove(node, safe=True)


def remove_unread_initializer(value: ir.Value | None) -> None:
    """Drop ``value`` from its graph's initializers when nothing reads it any more
    (onnxruntime warns of an unread one on every load); never a graph input or output."""
    if (
        value is not None
        and value.is_initializer()
        and not value.uses()
        and not value.is_graph_input()
        and not value.is_graph_output()
        and value.graph is not None
        and value.name is not None
    ):
        value.graph.initializers.pop(value.name)
