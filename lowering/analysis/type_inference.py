"""Types for values the model leaves untyped, from ONNX shape inference.

Exporters often leave a SequenceMap body untyped: torch.onnx (dynamo) writes
``body (tensor) => (tensor_2)`` with no types at all. The lowering needs the
element type of every output (``SequenceEmpty`` takes it as ``dtype``), so it
asks ONNX's own shape inference, which types a SequenceMap body from the
actual types of the node's inputs.

Inference runs on a serialized copy of the model. It adds no nodes, so every
node of the copy sits at the same position of the corresponding graph as in
the original: :class:`TypeOracle` finds a node's *twin* by position, never by
name (values made by earlier rewrites may not have names yet). The oracle
only answers questions; it never writes types into the model.

Model-local functions are not typed by ONNX inference, because their inputs
have no types. Where every call site that inference could type agrees on the
input types, the function body is inferred on its own with those types. A
call site inside a function is typed once that function is, so types flow
down call chains of any depth: the functions that need types, and every
function that calls them, directly or not, are inferred callers first::

    main graph:  y = local.outer(x)          x: seq(float[2]), from the model
    outer (a):   b = local.inner(a)          a: seq(float[2]), from main's call
    inner (s):   t = SequenceMap(s)          s: seq(float[2]), from outer's call

Call sites that disagree leave the function untyped (the lowering then asks
for declared types).

Inferred shapes are not all proven (:mod:`lowering.analysis.proven_shapes`): the
shape of every output of an op whose inference was seen to differ from
onnxruntime's (MaxPool with ``ceil_mode``, ...), or of a doubted case of a
trusted op, and of everything computed from it, is dropped from the copy
(its dtype stays)::

    m = MaxPool<ceil_mode = 1>(e)    inferred [1,1,3], computed [1,1,2]   ->  shape dropped
    r = Relu(m)                      inferred from m's                    ->  shape dropped
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove_model
from lowering.irutils.walk import GraphLike, graphs_within, nodes_within

logger = logging.getLogger(__name__)

_TypeAndShape = tuple[ir.TypeProtocol, ir.Shape | None]


class TypeOracle:
    """Finds, for a node of the model, its twin in a type-inferred copy."""

    def __init__(self, model: ir.Model, functions: Sequence[ir.Function] = ()):
        self._twin_of: dict[GraphLike, list[ir.Node]] = {}
        self._position: dict[GraphLike, dict[ir.Node, int]] = {}
        self.proof = prove_model(model, fill=True)  # (its untyped values inferred: untyped bodies)
        inferred = _infer_model(model)
        if inferred is not None:
            self._pair(model.graph, inferred.graph, self.proof)
        for function in _callers_first(model, functions):
            self._infer_function(model, function)

    def twin(self, node: ir.Node, owner: GraphLike) -> ir.Node | None:
        """The node at the same position in the inferred copy, if there is one."""
        twin_nodes = self._twin_of.get(owner)
        if twin_nodes is None:
            return None
        position = self._position.get(owner)
        if position is None:
            position = self._position[owner] = {n: i for i, n in enumerate(owner)}
        index = position.get(node)
        if index is None or index >= len(twin_nodes):
            return None
        candidate = twin_nodes[index]
        return candidate if candidate.op_type == node.op_type else None

    def _pair(self, original: GraphLike, inferred: ir.Graph, proof: Proof) -> None:
        """Pair ``original``'s graphs with ``inferred``'s, forgetting in the copy
        the shapes the proof doubts: decided on the original, whose constants
        the copy (its large initializers dropped) may not hold."""
        for sub, twin_sub in zip(graphs_within(original), graphs_within(inferred), strict=False):
            self._twin_of[sub] = list(twin_sub)
            for value, twin_value in zip(sub.inputs, twin_sub.inputs, strict=False):
                if value in proof.doubted:  # a body's element of a doubted sequence
                    twin_value.shape = None
            for node, twin in zip(sub, twin_sub, strict=False):
                for value, twin_value in zip(node.outputs, twin.outputs, strict=False):
                    if value in proof.doubted:
                        twin_value.shape = None

    def _infer_function(self, model: ir.Model, function: ir.Function) -> None:
        input_types = self._call_site_types(model, function)
        if input_types is None:
            logger.info("No typed call site for function %r", function.name)
            return
        function_proto = ir.serde.serialize_function(function)
        graph_proto = onnx.GraphProto(name=function.name, node=function_proto.node)
        for value, (type_, shape) in zip(function.inputs, input_types, strict=True):
            ir.serde.serialize_value_into(
                graph_proto.input.add(), ir.Value(name=value.name, type=type_, shape=shape)
            )
        for value in function.outputs:
            graph_proto.output.add(name=value.name)
        proto = onnx.helper.make_model(
            graph_proto,
            opset_imports=[
                onnx.helper.make_opsetid(domain, version)
                for domain, version in function.opset_imports.items()
            ],
            ir_version=model.ir_version,
        )
        proto.functions.extend(ir.serde.serialize_function(f) for f in model.functions.values())
        try:
            inferred = _infer_proto(proto)
        except Exception as error:  # noqa: BLE001 -- ONNX raises many kinds; best effort
            logger.warning("Shape inference failed for function %r: %s", function.name, error)
            return
        graph = ir.serde.deserialize_model(inferred).graph
        self._pair(function, graph, self.proof)

    def _call_site_types(
        self, model: ir.Model, function: ir.Function
    ) -> list[_TypeAndShape] | None:
        """The input types that every typed call site agrees on, or None.

        Shapes are kept only where all call sites agree on them too.
        """
        agreed: list[_TypeAndShape] | None = None
        for graph in self._typed_scopes(model):
            for node in graph:
                if node.op_identifier() != function.identifier():
                    continue
                twin = self.twin(node, graph)
                if twin is None:
                    continue
                types = [
                    (v.type, v.shape) for v in twin.inputs if v is not None and v.type is not None
                ]
                if len(types) != len(twin.inputs):
                    continue  # an input is missing or untyped
                if len(types) != len(function.inputs):
                    continue
                if agreed is None:
                    agreed = types
                elif [t for t, _ in agreed] != [t for t, _ in types]:
                    logger.warning(
                        "Call sites of function %r disagree on input types", function.name
                    )
                    return None
                else:
                    agreed = [
                        (t, s if s == other else None)
                        for (t, s), (_, other) in zip(agreed, types, strict=True)
                    ]
        return agreed

    def _typed_scopes(self, model: ir.Model) -> list[GraphLike]:
        """The main graph, its subgraphs, and the functions inferred so far."""
        scopes: list[GraphLike] = list(graphs_within(model.graph))
        for function in model.functions.values():
            if function in self._twin_of:
                scopes += graphs_within(function)
        return scopes


def _callers_first(model: ir.Model, functions: Sequence[ir.Function]) -> list[ir.Function]:
    """``functions`` and every function that calls one of them, callers before callees.

    A function's call sites in other functions are typed only once those
    functions are, so this is the order to infer them in. ONNX forbids
    recursion; a cycle would only leave its members untyped.
    """
    calls: dict[ir.Function, list[ir.Function]] = {}
    for function in model.functions.values():
        callees = [
            model.functions[node.op_identifier()]
            for node in nodes_within(function)
            if node.op_identifier() in model.functions
        ]
        calls[function] = list(dict.fromkeys(callees))
    callers: dict[ir.Function, list[ir.Function]] = {f: [] for f in calls}
    for caller, callees in calls.items():
        for callee in callees:
            callers[callee].append(caller)
    needed: set[ir.Function] = set()
    pending = list(functions)
    while pending:
        function = pending.pop()
        if function not in needed:
            needed.add(function)
            pending += callers.get(function, [])
    order: list[ir.Function] = []
    state: dict[ir.Function, str] = {}

    def visit(function: ir.Function) -> None:  # after all its callers
        if state.get(function) is not None:
            return
        state[function] = "visiting"
        for caller in callers.get(function, []):
            if caller in needed:
                visit(caller)
        state[function] = "done"
        order.append(function)

    for function in model.functions.values():
        if function in needed:
            visit(function)
    return order


def _infer_proto(proto: onnx.ModelProto) -> onnx.ModelProto:
    declared = set(dim_params(proto.graph))
    inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False)
    _drop_partial_types(inferred.graph)
    forget_invented_dims(inferred.graph, declared)
    return inferred


def forget_invented_dims(graph: onnx.GraphProto, declared: set[str]) -> None:
    """Make the dims ONNX inference named itself (``unk__0``, ...) unknown again.

    Inference names an unknown dim once and hands the name on, also through a
    sequence's one element type to every element read from it: two elements
    at different positions, which may differ in size, come out claiming the
    same dim. Copied into the lowered model, that claim lets onnxruntime
    reuse one's buffer for the other ("Shape mismatch attempting to re-use
    buffer"). An unknown dim claims nothing; the names the model declares
    itself are its own to keep.
    """
    for tensor_type in _tensor_types_in(graph):
        for dim in tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param not in declared:
                dim.ClearField("dim_param")


def dim_params(graph: onnx.GraphProto):
    for tensor_type in _tensor_types_in(graph):
        yield from (dim.dim_param for dim in tensor_type.shape.dim if dim.dim_param)


def _tensor_types_in(graph: onnx.GraphProto):
    """The tensor types declared in ``graph`` and the graphs nested in it,
    also as the elements of sequences and optionals."""
    for type_proto in _types_in(graph):
        while type_proto.WhichOneof("value") in ("sequence_type", "optional_type"):
            type_proto = getattr(type_proto, type_proto.WhichOneof("value")).elem_type
        if type_proto.WhichOneof("value") == "tensor_type":
            yield type_proto.tensor_type


def _types_in(graph: onnx.GraphProto):
    """Every declared type of ``graph`` and of the graphs nested in it."""
    for value_info in (*graph.input, *graph.output, *graph.value_info):
        if value_info.HasField("type"):
            yield value_info.type
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _types_in(attr.g)
            for subgraph in attr.graphs:
                yield from _types_in(subgraph)


def _drop_partial_types(graph: onnx.GraphProto) -> None:
    """Forget types that inference left half-built, such as ``seq(?)``.

    ONNX writes a sequence type with no element type where it cannot tell
    the element type; onnx_ir refuses to read those, and they say nothing.
    """
    kept = [vi for vi in graph.value_info if _complete(vi.type)]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for vi in (*graph.input, *graph.output):
        if vi.HasField("type") and not _complete(vi.type):
            vi.ClearField("type")
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _drop_partial_types(attr.g)
            for subgraph in attr.graphs:
                _drop_partial_types(subgraph)


def _complete(type_proto: onnx.TypeProto) -> bool:
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        return _complete(type_proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _complete(type_proto.optional_type.elem_type)
    return kind is not None


def _infer_model(model: ir.Model) -> ir.Model | None:
    try:
        inferred = _infer_proto(_without_weights(model))
    except Exception as error:  # noqa: BLE001 -- ONNX raises many kinds; best effort
        logger.warning("Shape inference failed, using declared types only: %s", error)
        return None
    twin = ir.serde.deserialize_model(inferred)
    return twin


#: Initializers larger than this (bytes) are declared inputs in the copy ONNX infers.
_LARGE = 1000


def _without_weights(model: ir.Model) -> onnx.ModelProto:
    """``model`` serialized for ONNX's inference, each large initializer declared an
    input of its type without its data (the model itself is not changed).

    A weight's value never decides a shape, and copying gigabytes into a proto
    for one call would cost more than the inference; the small ones stay, as
    ONNX reads axes and shapes from their values.
    """
    graph = model.graph
    large = {
        v
        for v in graph.initializers.values()
        if v.type is not None and (v.const_value is None or v.const_value.nbytes > _LARGE)
    }
    view = ir.GraphView(
        [
            *graph.inputs,
            *(v for v in graph.initializers.values() if v in large and not v.is_graph_input()),
        ],
        graph.outputs,
        nodes=graph,
        initializers=[v for v in graph.initializers.values() if v not in large],
        doc_string=graph.doc_string,
        opset_imports=graph.opset_imports,
        name=graph.name,
    )
    proto = onnx.ModelProto(ir_version=model.ir_version)
    proto.opset_import.extend(
        onnx.helper.make_opsetid(domain, version) for domain, version in model.opset_imports.items()
    )
    # (onnx_ir 1.1's GraphView is not typed as its own GraphViewProtocol.)
    ir.serde.serialize_graph_into(proto.graph, view, model_ir_version=model.ir_version)  # type: ignore[arg-type]
    proto.functions.extend(
        ir.serde.serialize_function(f, create_value_info=model.ir_version >= 10)
        for f in model.functions.values()
    )
    return proto
