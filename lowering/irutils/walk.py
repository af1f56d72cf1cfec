"""The one way the package walks graphs: safe with graph-reference attributes.

A model-local function may hold ``body = @attr``: a graph-typed attribute
that refers to the caller's attribute and holds no graph until the call is
specialized. onnx_ir's ``RecursiveGraphIterator``, ``Graph.subgraphs()`` and
``Function.all_nodes()`` stop with an error at one, so nothing in the package
walks with them; every walk goes through :func:`subgraphs`::

    node.attributes   then_branch=<graph>   body=@attr   to=1
                            |                  |           |
    subgraphs(node)   [("then_branch", g)]  (skipped: a reference holds no graph;
                                             not a graph attribute)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import overload

import onnx_ir as ir

GraphLike = ir.Graph | ir.Function

_GRAPH_TYPES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def graph_of(owner: GraphLike) -> ir.Graph:
    """The graph whose nodes are ``owner``'s: a function's nodes say their
    graph is the function's own, not the function."""
    return owner.graph if isinstance(owner, ir.Function) else owner


def _attributes(node: ir.Node):
    """``node``'s attributes, read from the dict behind onnx_ir's ``Attributes``
    (a ``UserDict``: its ``data``): every walk reads every node's, and the
    mapping view is ten times slower to iterate."""
    return node.attributes.data.values()


def named_subgraphs(node: ir.Node) -> list[tuple[str, ir.Graph]]:
    """The graphs held in ``node``'s own attributes, each with its attribute's
    name (``"branches[1]"`` for an element of a GRAPHS attribute)."""
    found: list[tuple[str, ir.Graph]] = []
    for attr in _attributes(node):  # (a list, not a generator: every walk asks every node)
        if attr.type not in _GRAPH_TYPES or not _is_attr(attr) or attr.is_ref():
            continue
        if attr.type == ir.AttributeType.GRAPH:
            found.append((attr.name, attr.as_graph()))
        else:
            found += ((f"{attr.name}[{i}]", graph) for i, graph in enumerate(attr.as_graphs()))
    return found


def _is_attr(attr: object) -> bool:
    """``isinstance(attr, ir.Attr)``, first by its exact class: ``ir.Attr``'s
    metaclass is ``Protocol``'s, whose check runs in Python."""
    return type(attr) is ir.Attr or isinstance(attr, ir.Attr)


def subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs held in ``node``'s own attributes (not those nested in them)."""
    return [graph for _, graph in named_subgraphs(node)]


def has_subgraphs(node: ir.Node) -> bool:
    """True when ``node`` holds a graph, or refers to one it will be given."""
    return any(attr.type in _GRAPH_TYPES for attr in _attributes(node))


@overload
def graphs_within(owner: ir.Graph) -> Iterator[ir.Graph]: ...
@overload
def graphs_within(owner: GraphLike) -> Iterator[GraphLike]: ...
def graphs_within(owner: GraphLike) -> Iterator[GraphLike]:
    """``owner`` and every graph nested in it, at any depth, parents first."""
    yield owner
    for node in owner:
        for graph in subgraphs(node):
            yield from graphs_within(graph)


def nodes_within(owner: GraphLike) -> Iterator[ir.Node]:
    """Every node of ``owner`` and of the graphs nested in it, graph by graph."""
    for graph in graphs_within(owner):
        yield from graph


def outer_values(body: ir.Graph) -> list[ir.Value]:
    """Values ``body``, or a graph nested in it, reads or returns from an
    enclosing scope, in the order the walk meets them."""
    graphs = list(graphs_within(body))
    inside = set(graphs)
    found: dict[ir.Value, None] = {}
    for graph in graphs:
        for node in graph:
            for value in node.inputs:
                if value is not None and value.graph not in inside:
                    found[value] = None
        for value in graph.outputs:
            if value.graph not in inside:
                found[value] = None
    return list(found)


def nodes_under(node: ir.Node) -> list[ir.Node]:
    """Every node of the graphs ``node`` holds, at any depth (not ``node``)."""
    return [n for sub in subgraphs(node) for n in nodes_within(sub)]


def model_graphs(model: ir.Model) -> Iterator[GraphLike]:
    """The main graph, each model-local function, and every graph nested in them."""
    yield from graphs_within(model.graph)
    for function in model.functions.values():
        yield from graphs_within(function)


def model_nodes(model: ir.Model) -> Iterator[ir.Node]:
    """Every node of the model, in the main graph, its functions and all subgraphs."""
    for graph in model_graphs(model):
        yield from graph


def duplicate_names(model: ir.Model) -> set[str]:
    """The value names defined twice in one scope or again in a scope nested in it.

    What ONNX's checker calls "not SSA": a node output, graph input or
    initializer that repeats a name its own graph or an enclosing one
    defines. Sibling subgraphs may reuse names; so may functions.
    """
    repeated: set[str] = set()

    def visit(owner: GraphLike, outer: frozenset[str]) -> None:
        own: set[str] = set()
        defined = [*owner.inputs]
        if isinstance(owner, ir.Graph):
            defined += [v for v in owner.initializers.values() if v not in owner.inputs]
        defined += [v for node in owner for v in node.outputs]
        for value in defined:
            if value.name is None or value.name == "":
                continue
            if value.name in own or value.name in outer:
                repeated.add(value.name)
            own.add(value.name)
        inner = outer | own
        for node in owner:
            for graph in subgraphs(node):
                visit(graph, inner)

    visit(model.graph, frozenset())
    for function in model.functions.values():
        visit(function, frozenset())
    return repeated
