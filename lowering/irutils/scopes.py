"""Every place a node can live: the main graph, each subgraph, each function.

A SequenceMap can sit at any depth: inside If/Loop/Scan bodies, inside another
SequenceMap's body, or inside a model-local function. Passes collect the nodes
they rewrite through :func:`find_nodes` first, then rewrite, so that rewriting
never disturbs the walk.

Each scope carries a description ("body of Loop 'l0' in main graph 'g'") that
reports and error messages use, so users can find the node in their model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import onnx_ir as ir

from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.walk import GraphLike, named_subgraphs


@dataclasses.dataclass(frozen=True)
class Scope:
    """A graph or function, and how to tell a human where it is.

    ``function`` is the model-local function the scope belongs to (itself,
    or the function a subgraph is nested in), or None in the main graph's
    tree: it decides which opsets the scope imports.
    """

    owner: GraphLike
    description: str
    function: ir.Function | None = None

    def opset(self, model: ir.Model) -> int | None:
        """The default-domain opset this scope imports ("" or "ai.onnx")."""
        imports = self.function.opset_imports if self.function else model.opset_imports
        return imports.get("", imports.get("ai.onnx"))


@dataclasses.dataclass(frozen=True)
class Located:
    """A node together with the scope that owns it."""

    node: ir.Node
    scope: Scope


def iter_scopes(model: ir.Model) -> Iterator[Scope]:
    """Yield the main graph, all subgraphs and all functions, parents first."""
    yield from _walk(model.graph, f"main graph {model.graph.name or '<unnamed>'!r}", None)
    for function in model.functions.values():
        yield from _walk(function, describe_function(function), function)


def describe_function(function: ir.Function) -> str:
    """How messages name a model-local function: ``function 'domain:name'``."""
    ident = ":".join(part for part in (function.domain, function.name) if part)
    return f"function {ident!r}"


def _walk(owner: GraphLike, description: str, function: ir.Function | None) -> Iterator[Scope]:
    yield Scope(owner, description, function)
    for node in owner:
        for label, graph in named_subgraphs(node):  # (described only where one is held)
            where = f"{node.op_type} {node.name or '<unnamed>'!r} in {description}"
            yield from _walk(graph, f"{label} of {where}", function)


def find_nodes(model: ir.Model, predicate: Callable[[ir.Node], bool]) -> list[Located]:
    """All nodes matching ``predicate`` in every scope, outer scopes first."""
    return [
        Located(node, scope)
        for scope in iter_scopes(model)
        for node in scope.owner
        if predicate(node)
    ]


def link_outer_outputs(model: ir.Model) -> list[ir.Node]:
    """Make each map body (at any depth inside) compute the outer values it returns.

    A body or branch may return a value of an enclosing scope unchanged (a
    SequenceMap body with no nodes that returns an outer tensor). onnx_ir
    cannot hold that: a graph's outputs must be its own values, so its
    deserializer makes a stand-in value with the outer value's name and no
    producer. The name finds the right value only while the body stays where
    it is; the lowering moves bodies and their nodes (unrolling copies them
    into the enclosing graph, where a body input's name means nothing). So
    inside every SequenceMap body, each such stand-in becomes the output of
    an ``Identity`` of the outer value it names::

        body () => (t) { }            body () => (t') { t' = Identity(t) }

    Other graphs are left as they are. Returns the Identity nodes added.
    """
    added: list[ir.Node] = []

    def visit(owner: GraphLike, chain: list[dict[str, ir.Value]], in_map: bool) -> None:
        own: dict[str, ir.Value] = {v.name: v for v in owner.inputs if v.name}
        if isinstance(owner, ir.Graph):
            own.update((name, v) for name, v in owner.initializers.items() if name)
        own.update((v.name, v) for node in owner for v in node.outputs if v.name)
        if in_map:
            for value in owner.outputs:
                if value.producer() is not None or value.is_graph_input():
                    continue
                if value.is_initializer():
                    continue
                found = next((s[value.name] for s in reversed(chain) if value.name in s), None)
                if found is not None and found is not value:
                    identity = new_node("Identity", [found], outputs=[value])
                    owner.append(identity)
                    added.append(identity)
        inner = [*chain, own]
        for node in owner:
            for label, graph in named_subgraphs(node):
                nested = in_map or (label == "body" and is_onnx_op(node, "SequenceMap"))
                visit(graph, inner, nested)

    visit(model.graph, [], False)
    for function in model.functions.values():
        visit(function, [], False)
    return added
