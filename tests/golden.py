"""Compare models by structure, never by generated names.

Golden tests write the expected model by hand in ONNX text. The lowering's
fresh names are generated, so both models are first put in a canonical form:
every value defined inside the model is renamed after its position (the
order in which definitions appear), node names are dropped, and value_info
annotations are dropped. Names that are part of the model's interface keep
their spelling: main graph inputs and outputs, function inputs and outputs,
and initializers. The ``metadata_props`` that say what lowered the model
are dropped too. Then the printed texts must be equal, so node order,
op types, attributes, types of graph signatures and the wiring all count.
"""

from __future__ import annotations

import itertools

import onnx

from tests.helpers import without_provenance


def canonical_text(model: onnx.ModelProto) -> str:
    model = without_provenance(model)  # what lowered it is not the rewrite's form
    keep = {vi.name for vi in (*model.graph.input, *model.graph.output)}
    keep |= _initializer_names(model.graph)
    for function in model.functions:
        keep |= {*function.input, *function.output}
        for node in function.node:
            for attr in node.attribute:
                for graph in (attr.g, *attr.graphs):
                    keep |= _initializer_names(graph)
    counter = itertools.count()
    _rename_graph(model.graph, {}, keep, counter)
    for function in model.functions:
        scope = {name: name for name in function.input}
        _rename_nodes(function.node, scope, keep, counter)
    return onnx.printer.to_text(model)


def _initializer_names(graph: onnx.GraphProto) -> set[str]:
    names = {init.name for init in graph.initializer}
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names |= _initializer_names(attr.g)
            for sub in attr.graphs:
                names |= _initializer_names(sub)
    return names


def _define(name: str, scope: dict, keep: set, counter) -> str:
    if name == "" or name in keep:
        scope[name] = name
    else:
        scope[name] = f"v{next(counter)}"
    return scope[name]


def _rename_graph(graph: onnx.GraphProto, outer: dict, keep: set, counter) -> None:
    scope = dict(outer)
    graph.name = "g"
    for vi in graph.input:
        vi.name = _define(vi.name, scope, keep, counter)
    for init in graph.initializer:
        _define(init.name, scope, keep, counter)
    _rename_nodes(graph.node, scope, keep, counter)
    for vi in graph.output:
        vi.name = scope.get(vi.name, vi.name)
    del graph.value_info[:]


def _rename_nodes(nodes, scope: dict, keep: set, counter) -> None:
    for node in nodes:
        node.name = ""
        ordered = sorted(node.attribute, key=lambda attr: attr.name)
        del node.attribute[:]
        node.attribute.extend(ordered)
        node.input[:] = [scope.get(name, name) for name in node.input]
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _rename_graph(attr.g, scope, keep, counter)
            for sub in attr.graphs:
                _rename_graph(sub, scope, keep, counter)
        node.output[:] = [_define(name, scope, keep, counter) for name in node.output]
