"""Unique names for the values and nodes that rewrites create.

Rewrites mark what they create with :func:`fresh`; :func:`name_fresh` then
names every fresh (or unnamed) value and node with a name nothing in the
model uses, in any scope or function, and renames what would break name
resolution: a value defined with a name an enclosing scope defines, one
that hides an outer value read below it, and a name a function defines
that the main graph defines too (runtimes inline functions). onnx_ir's
``NameFixPass`` checks only the scopes walked so far and copies the scope's
names per subgraph (quadratic); this walks the model twice. Why each rule
exists: docs/decisions.md, "Names"::

    g (acc_1) { y = local.f1(acc_1) }           g (acc_1) { y = local.f1(acc_1) }
    f1 (s) => (y) {                             f1 (s) => (y) {
      y = Loop <body {                     ->     y = Loop <body {
            acc_1 = Gather(s, i) ... }>                 acc_1_1 = Gather(s, i) ... }>
    }                                           }
"""

from __future__ import annotations

import collections
import functools

import onnx_ir as ir

from lowering.irutils.scopes import iter_scopes
from lowering.irutils.walk import subgraphs

# The mark, in the item's own metadata (never serialized): the stem for its
# name. onnx_ir names a value or node the moment it is inserted ("val_0"),
# unique only in its graph; the mark says which names to replace.
_FRESH = "lowering.fresh"


def _is_fresh(item: ir.Value | ir.Node) -> bool:
    return _FRESH in item.meta


def _take_stem(item: ir.Value | ir.Node) -> str:
    return item.meta.pop(_FRESH, "") or ""


def fresh(item: ir.Value | ir.Node, stem: str | None = None):
    """Mark a value or node made by a rewrite, to be named by :func:`name_fresh`.

    ``stem`` is a readable base for the name ("iter", "acc"); without one, a
    node is named after its op type and a value after its producer's. Marking
    a node marks its outputs too.
    """
    item.meta[_FRESH] = stem or ""
    if isinstance(item, ir.Node):
        for output in item.outputs:
            output.meta.setdefault(_FRESH, "")
    return item


def adopt_name(value: ir.Value, name: str | None) -> ir.Value:
    """Give a fresh value a name it takes over from a value it replaces."""
    value.meta.pop(_FRESH, None)
    value.name = name
    return value


def _values(scopes):
    for graph_like in scopes:
        yield from graph_like.inputs
        yield from graph_like.outputs
        if isinstance(graph_like, ir.Graph):
            yield from graph_like.initializers.values()
        for node in graph_like:
            yield from node.outputs


def _nodes(scopes):
    for graph_like in scopes:
        yield from graph_like


def name_fresh(model: ir.Model) -> bool:
    """Name every fresh or unnamed value, and every fresh node, uniquely in ``model``.

    Each pass calls it on what it rewrote (a pass names what it creates);
    :class:`lowering.passes.fresh_names.FreshNamesPass` runs it for nodes a
    caller built with :func:`fresh`. Returns True when anything was (re)named.
    """
    scopes = [scope.owner for scope in iter_scopes(model)]
    values = list(dict.fromkeys(_values(scopes)))
    nodes = list(_nodes(scopes))
    fresh_values = [_is_fresh(v) for v in values]
    fresh_nodes = [_is_fresh(n) for n in nodes]
    to_name_values = [v for v, new in zip(values, fresh_values) if new or not v.name]
    to_name_nodes = [n for n, new in zip(nodes, fresh_nodes) if new]
    taken_values = {v.name for v, new in zip(values, fresh_values) if v.name and not new}
    taken_nodes = {n.name for n, new in zip(nodes, fresh_nodes) if n.name and not new}
    counters: collections.Counter[str] = collections.Counter()

    def unique(stem: str, taken: set[str]) -> str:
        while True:
            counters[stem] += 1
            candidate = f"{stem}_{counters[stem]}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate

    for value in to_name_values:
        stem = _take_stem(value) or _stem_of(value)
        value.name = unique(stem, taken_values)
    for node in to_name_nodes:
        stem = _take_stem(node) or _snake(node.op_type)
        node.name = unique(stem, taken_nodes)
    renamed = _Resolver(lambda value: unique(value.name or "v", taken_values)).run(model)
    return bool(to_name_values or to_name_nodes or renamed)


class _Resolver:
    """Renames what breaks name resolution; see the module docstring."""

    def __init__(self, new_name) -> None:
        self._new_name = new_name
        self.renamed = 0

    def run(self, model: ir.Model) -> int:
        main_graph: dict[str, ir.Value] = {}
        self._visit(model.graph, [], main_graph)
        # A function sees none of the main graph's names, but runtimes inline
        # it into the main graph, so it is resolved as if nested in every
        # scope there.
        for function in model.functions.values():
            self._visit(function, [main_graph], None)
        return self.renamed

    def _rename(self, value: ir.Value) -> None:
        value.name = self._new_name(value)
        self.renamed += 1

    def _visit(
        self,
        owner: ir.Graph | ir.Function,
        outer: list[dict[str, ir.Value]],
        collect: dict[str, ir.Value] | None,
    ) -> None:
        """Resolve ``owner`` and its subgraphs; add what they define to ``collect``."""
        own: dict[str, ir.Value] = {}
        # ONNX lets a subgraph input hide an outer name, but runtimes trip on
        # it (onnxruntime's function inliner renames the hidden name inside
        # the subgraph too), so it is renamed like the rest. A function's
        # inputs and outputs are formal parameters: inlining replaces them by
        # the caller's names, so they never meet the caller's names.
        formal = set(owner.inputs) | set(owner.outputs) if isinstance(owner, ir.Function) else ()
        defined = [*owner.inputs]
        defined += [*owner.initializers.values()] if isinstance(owner, ir.Graph) else []
        defined += [output for node in owner for output in node.outputs]
        for value in defined:
            if own.get(_name(value), value) is not value or (
                value not in formal and _lookup(outer, value.name) is not None
            ):
                self._rename(value)
            own[_name(value)] = value
        chain = [*outer, own]
        for node in owner:
            for used in node.inputs:
                if used is not None:
                    self._resolve(used, chain)
            for graph in subgraphs(node):
                self._visit(graph, chain, collect)
        for value in owner.outputs:
            self._resolve(value, chain)
        if collect is not None:
            collect.update(own)

    def _resolve(self, value: ir.Value, chain: list[dict[str, ir.Value]]) -> None:
        """Make ``value``'s name find ``value`` from the innermost scope of ``chain``."""
        name = value.name
        if name is None:
            return  # no scope holds an unnamed value: every value defined in one is named
        for scope in reversed(chain):
            found = scope.get(name)
            if found is None:
                continue
            if found is value:
                return
            if not any(s.get(name) is value for s in chain):
                return  # defined elsewhere (not an enclosing scope): not ours to judge
            # ``found`` hides ``value`` and is deeper than it: rename ``found``.
            del scope[_name(found)]
            self._rename(found)
            scope[_name(found)] = found


def _name(value: ir.Value) -> str:
    """The name of a value that a scope defines."""
    # name_fresh has named every value the scopes define (the same walk)
    # before it resolves, and renaming gives a name too.
    assert value.name is not None, "name_fresh names every defined value first"
    return value.name


def _lookup(chain: list[dict[str, ir.Value]], name: str | None) -> ir.Value | None:
    for scope in reversed(chain):
        if name in scope:
            return scope[name]
    return None


def _stem_of(value: ir.Value) -> str:
    producer = value.producer()
    return _snake(producer.op_type) if producer is not None else "v"


@functools.cache
def _snake(op_type: str) -> str:
    out = []
    for i, ch in enumerate(op_type):
        if ch.isupper() and i and not op_type[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
