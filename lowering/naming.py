"""Unique names for the values and nodes that rewrites create.

Rewrites leave fresh values and nodes unnamed. :class:`FreshNamesPass` then
runs onnx_ir's ``NameFixPass`` with a generator that knows every name already
used anywhere in the model, in every scope and function. ``NameFixPass`` only
checks a name against the enclosing scopes it has walked so far, so a fresh
name in a subgraph could otherwise repeat a name that an outer graph defines
later, or that a sibling function uses. Checking against the whole model
rules out every such collision, whatever names the model already uses
(``cond``, ``i``, ``trip_count``, or ONNX's own expansion's names).

Rewrites mark what they create with :func:`fresh`.
"""

from __future__ import annotations

import collections

import onnx_ir as ir
from onnx_ir.passes.common import NameFixPass

_FRESH_KEY = "lowering.fresh"


def fresh(item: ir.Value | ir.Node, stem: str | None = None):
    """Mark a value or node made by a rewrite, to be named by :class:`FreshNamesPass`.

    ``stem`` is a readable base for a value's name ("iter", "acc"); nodes are
    named after their op type, and marking a node marks its outputs too.
    onnx_ir graphs name nodes and values the moment they are inserted, unique
    only within that one graph; the mark lets the pass replace those names
    with ones unique in the whole model.
    """
    item.meta[_FRESH_KEY] = stem or ""
    if isinstance(item, ir.Node):
        for output in item.outputs:
            output.meta.setdefault(_FRESH_KEY, "")
    return item


def adopt_name(value: ir.Value, name: str | None) -> ir.Value:
    """Give a fresh value a name it takes over from a value it replaces."""
    value.meta.pop(_FRESH_KEY, None)
    value.name = name
    return value


def used_names(model: ir.Model) -> tuple[set[str], set[str]]:
    """All value names and all node names in the model, across every scope."""
    values: set[str] = set()
    nodes: set[str] = set()
    for value in _all_values(model):
        values.add(value.name or "")
    for node in _all_nodes(model):
        nodes.add(node.name or "")
    values.discard("")
    nodes.discard("")
    return values, nodes


def _graph_likes(model: ir.Model):
    yield model.graph
    yield from model.graph.subgraphs()
    for function in model.functions.values():
        yield function
        yield from function.subgraphs()


def _all_nodes(model: ir.Model):
    for graph_like in _graph_likes(model):
        yield from graph_like


def _all_values(model: ir.Model):
    for graph_like in _graph_likes(model):
        yield from graph_like.inputs
        yield from graph_like.outputs
        if isinstance(graph_like, ir.Graph):
            yield from graph_like.initializers.values()
        for node in graph_like:
            yield from node.outputs


class _ModelWideNames:
    """A NameFixPass name generator whose names are new to the whole model."""

    def __init__(self, value_names: set[str], node_names: set[str]) -> None:
        self._values = value_names
        self._nodes = node_names
        self._counters: collections.Counter[str] = collections.Counter()

    def generate_value_name(self, value: ir.Value) -> str:
        stem = value.meta.get(_FRESH_KEY)
        if not stem and value.producer() is not None:
            stem = _snake(value.producer().op_type)
        return self._fresh(stem or "v", self._values)

    def generate_node_name(self, node: ir.Node) -> str:
        return self._fresh(_snake(node.op_type), self._nodes)

    def _fresh(self, stem: str, taken: set[str]) -> str:
        while True:
            self._counters[stem] += 1
            candidate = f"{stem}_{self._counters[stem]}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate


def _snake(op_type: str) -> str:
    out = []
    for i, ch in enumerate(op_type):
        if ch.isupper() and i and not op_type[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


class FreshNamesPass(ir.passes.InPlacePass):
    """Name every fresh or unnamed value, and every fresh node, uniquely in the model.

    Runs onnx_ir's NameFixPass with a generator that avoids every name used
    anywhere in the model. Nodes that were anonymous before the rewrite stay
    anonymous: node names are optional in ONNX, and this project leaves
    untouched nodes as they were.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = _names(model)
        for item in (*_all_values(model), *_all_nodes(model)):
            if _FRESH_KEY in item.meta:
                item.name = None
        anonymous = [
            node for node in _all_nodes(model) if not node.name and _FRESH_KEY not in node.meta
        ]
        generator = _ModelWideNames(*used_names(model))
        NameFixPass(name_generator=generator)(model)
        for node in anonymous:
            node.name = None
        for item in (*_all_values(model), *_all_nodes(model)):
            item.meta.pop(_FRESH_KEY, None)
        return ir.passes.PassResult(model, modified=_names(model) != before)


def _names(model: ir.Model) -> list[str | None]:
    return [item.name for item in (*_all_values(model), *_all_nodes(model))]
