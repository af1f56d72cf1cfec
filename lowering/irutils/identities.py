"""Bypassing the Identity nodes a rewrite leaves: the one rule of when one must stay.

Rewrites leave Identities behind: a read of a sequence built from tensors
becomes the tensor itself, an ``If`` on a constant is replaced by its taken
branch, whose output was an Identity of an outer value (a branch output must
be made by a node of the branch), a copy of a map body keeps the body's
Identities. Once the value they copy is in the same graph, they copy for
nothing; :func:`bypass_identity` lets the readers read the input instead::

    t = Identity(c)                          y = Add(c, x)
    y = Add(t, x)                 ->         (t is read by nothing: the caller removes it)

    r = Reshape(a, s)                        out = Reshape(a, s)
    out = Identity(r)    (output) ->         (r takes the graph output's place and name)

An Identity stays (:func:`must_stay` says why) where removing it would
change the graph's interface or make it invalid:

- its output is an output of its graph and its input is not made by a node
  of that same graph: a graph input, an initializer, a value of an outer
  scope (a subgraph's body output must be made by a node of the body: some
  runtimes need it, and a body input copied through stays a copy);
- its output is a graph output and so is its input (the same value would
  be a graph output twice);
- its input is missing (not a valid Identity: left alone).

A graph output keeps its name and its declared type and shape (the model's
interface): the input takes them over, which is safe because it is made in
the same graph and is no interface value itself.

An Identity read by nodes gives its input what it declared where the input
says less: the type always, the shape only when the input is of the
Identity's own graph. A declaration is said of one run of its graph: in an
If branch or a Loop body it holds when that branch runs, on that trip, and
its symbolic dims are that graph's names. Given to an outer value it would
hold always, there, and in an unrolled map body each copy's branch would
give its element the same name::

    e_0 = SequenceAt(s, 0)                              (1 row)
    e_1 = SequenceAt(s, 1)                              (3 rows)
    If(k) <then: float[M,2] i_0 = Identity(e_0) ..>     bypassed, e_0 and e_1 stay
    If(k) <then: float[M,2] i_1 = Identity(e_1) ..>     unshaped (float[M,2] on both
                                                        would say 1 == 3)

onnxruntime plans its buffers from such shapes ("Shape mismatch attempting
to re-use buffer. {1,2} != {3,2}"), and a branch that never runs may declare
what is never true.

Only the rewrites that created an Identity call this, on that Identity: an
Identity the user wrote, anywhere in the model, is never looked at.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx_ir as ir

from lowering.irutils.naming import adopt_name
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.walk import model_nodes


def must_stay(node: ir.Node) -> str | None:
    """Why the Identity ``node`` cannot be bypassed, or None when it can."""
    if not is_onnx_op(node, "Identity") or len(node.outputs) != 1:
        return "not an Identity"
    source = node.inputs[0] if node.inputs else None
    if source is None:
        return "it has no input"
    if len(node.inputs) != 1:
        return "not an Identity"
    output = node.outputs[0]
    if not output.is_graph_output():
        return None
    producer = source.producer()
    if producer is None or producer.graph is not node.graph or node.graph is None:
        return "it makes a graph output from a value not made in its graph"
    if source.is_graph_output():
        return "its input is a graph output too"
    return None


def bypass_identity(node: ir.Node) -> bool:
    """Let the Identity ``node``'s readers (and graph output) read its input, if it need not stay.

    Returns True when bypassed: ``node`` then still reads its input but
    nothing reads it, and the caller removes it (in one batch if it removes
    many: onnx_ir's ``Graph.remove`` scans the graph's outputs).
    """
    if must_stay(node) is not None:
        return False
    source = node.inputs[0]
    assert source is not None, "must_stay checks the input"
    output = node.outputs[0]
    if output.is_graph_output():
        name = output.name
        if output.type is not None:
            source.type = output.type
        source.shape = output.shape  # exactly what the interface declared
        output.replace_all_uses_with(source, replace_graph_outputs=True)
        output.name = None
        adopt_name(source, name)
    else:
        if source.type is None:
            source.type = output.type
        if source.shape is None and output.shape is not None and source.graph is node.graph:
            source.shape = output.shape  # said of this graph's runs: see the module's notes
        output.replace_all_uses_with(source)
    return True


def bypass_identities(nodes: Iterable[ir.Node]) -> set[ir.Node]:
    """:func:`bypass_identity` each of ``nodes`` (Identities a rewrite made), removing those bypassed.

    Returns the nodes removed; each graph loses its own in one batch.
    """
    removed: dict[ir.Graph, list[ir.Node]] = {}
    for node in nodes:
        owner = node.graph
        if owner is not None and bypass_identity(node):
            node.replace_input_with(0, None)
            removed.setdefault(owner, []).append(node)
    for graph, gone in removed.items():
        graph.remove(gone)
    return {node for gone in removed.values() for node in gone}


def identities_in(model: ir.Model) -> set[ir.Node]:
    """Every Identity of ``model``: taken before a rewrite, the user's, which stay."""
    return {node for node in model_nodes(model) if is_onnx_op(node, "Identity")}


def bypass_made_identities(model: ir.Model, users: set[ir.Node]) -> set[ir.Node]:
    """:func:`bypass_identities` of every Identity of ``model`` not in ``users``
    (what :func:`identities_in` gave before the rewrite): the ones it made.

    They go in the model's order, never a set's: in a chain of two, the one
    bypassed first decides which stays, and so the output's bytes.
    """
    made = [
        node for node in model_nodes(model) if is_onnx_op(node, "Identity") and node not in users
    ]
    return bypass_identities(made)
