"""Lower ``SequenceMap`` into a ``Loop`` over ``SequenceAt``/``SequenceInsert``.

SequenceMap-17 is defined only as a function that every runtime must expand
itself, and many never do. This pass writes the expansion into the model, so
the output needs nothing beyond the sequence ops of opset 11 and Loop-13::

    outs_1..outs_m = SequenceMap(s_0, a_1, .., a_k)
                     <body (e_0, e_1, .., e_k) => (y_1, .., y_m)>

becomes::

    n       = SequenceLength(s_0)
    true    = Constant<value = true>()
    empty_j = SequenceEmpty<dtype = element type of y_j>()        j = 1..m
    outs_1..outs_m = Loop(n, true, empty_1, .., empty_m)
      body (iter, cond, acc_1, .., acc_m):
        +------------------------------------------------------------+
        | e_0 = SequenceAt(s_0, iter)        for every sequence input |
        | e_i = SequenceAt(a_i, iter)        (a tensor input a_i is   |
        |                                     read from outer scope) |
        | ... the original body nodes, unchanged ...                  |
        | acc_j' = SequenceInsert(acc_j, y_j)          j = 1..m       |
        | cond'  = Identity(cond)                                     |
        +------------------------------------------------------------+
        => (cond', acc_1', .., acc_m')

The body graph object itself becomes the Loop body: its nodes, initializers,
Constant nodes, outer-scope references, value names and nested subgraphs stay
exactly as they were. Only its signature changes. The Loop takes the
SequenceMap's node name, doc string and metadata, and its outputs keep the
SequenceMap's output names, so consumers and graph outputs are untouched.

The element types come from the body's declared types or, where the body is
untyped (as torch.onnx writes it), from ONNX shape inference on the actual
input types (:mod:`lowering.type_inference`). Every node is planned and
checked before any is rewritten, so a model that fails is left unchanged.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import onnx
import onnx_ir as ir

from lowering.errors import LoweringError
from lowering.naming import adopt_name, fresh
from lowering.scopes import Located, find_nodes, is_onnx_op
from lowering.type_inference import TypeOracle

logger = logging.getLogger(__name__)

_TypeAndShape = tuple[ir.TypeProtocol, ir.Shape | None]


@dataclasses.dataclass
class Rewrite:
    """One rewritten node, for reports: where it was and what replaced it."""

    scope: str
    node_name: str
    op_type: str
    original: onnx.NodeProto
    new_nodes: list[ir.Node]

    def before(self) -> str:
        """The rewritten node in ONNX text syntax."""
        return onnx.printer.to_text(self.original)

    def after(self) -> str:
        """The replacement in ONNX text syntax (render after names are fixed)."""
        return "".join(onnx.printer.to_text(ir.serde.serialize_node(n)) for n in self.new_nodes)


class LowerSequenceMapPass(ir.passes.InPlacePass):
    """Replace every SequenceMap, in every scope, with an equivalent Loop.

    Fresh values and nodes are left unnamed: run
    :class:`lowering.naming.FreshNamesPass` (or ``NameFixPass``) afterwards,
    as :func:`lowering.lower` does.

    Attributes:
        rewrites: What the last call rewrote, outermost nodes first.
    """

    def __init__(self) -> None:
        super().__init__()
        self.rewrites: list[Rewrite] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewrites = []
        found = find_nodes(model, lambda node: is_onnx_op(node, "SequenceMap"))
        if not found:
            return ir.passes.PassResult(model, modified=False)
        functions = list(
            dict.fromkeys(
                loc.scope.owner for loc in found if isinstance(loc.scope.owner, ir.Function)
            )
        )
        oracle = TypeOracle(model, functions)
        plans = [_plan(loc, oracle.twin(loc.node, loc.scope.owner)) for loc in found]
        for opset_imports in (model.opset_imports, *(f.opset_imports for f in functions)):
            _import_default_domain(opset_imports)
        # Innermost first; the order does not matter for correctness since the
        # body graph objects are reused, but it keeps each step local.
        new_nodes = [_apply(plan) for plan in reversed(plans)][::-1]
        self.rewrites = [
            Rewrite(
                scope=plan.located.scope.description,
                node_name=plan.located.node.name or "",
                op_type="SequenceMap",
                original=plan.original,
                new_nodes=nodes,
            )
            for plan, nodes in zip(plans, new_nodes, strict=True)
        ]
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        left = find_nodes(model, lambda node: is_onnx_op(node, "SequenceMap"))
        if left:
            raise ir.passes.PostconditionError(
                f"{len(left)} SequenceMap node(s) left, first in {left[0].scope.description}"
            )


@dataclasses.dataclass
class _Plan:
    """Everything the rewrite needs, checked before anything is changed."""

    located: Located
    body: ir.Graph
    is_sequence: list[bool]
    element_types: list[_TypeAndShape | None]  # of each body input
    result_types: list[_TypeAndShape]  # of each body output (a tensor)
    output_types: list[_TypeAndShape]  # of each node output (a sequence)
    original: onnx.NodeProto


def _plan(located: Located, twin: ir.Node | None) -> _Plan:
    node = located.node

    def fail(reason: str) -> LoweringError:
        return LoweringError(reason, node=node, scope=located.scope.description)

    body = _body_of(node, fail)
    twin_body = twin.attributes["body"].as_graph() if twin is not None else None
    if not node.inputs:
        raise fail("it has no input sequence")
    if len(body.inputs) != len(node.inputs):
        raise fail(
            f"its body has {len(body.inputs)} input(s) but the node has {len(node.inputs)}; "
            "the body must take one input per node input"
        )
    if len(body.outputs) != len(node.outputs):
        raise fail(
            f"its body has {len(body.outputs)} output(s) but the node has {len(node.outputs)}; "
            "the body must return one output per node output"
        )

    is_sequence: list[bool] = []
    element_types: list[_TypeAndShape | None] = []
    for j, (outer, inner) in enumerate(zip(node.inputs, body.inputs, strict=True)):
        if outer is None:
            raise fail(f"input {j} is empty; SequenceMap inputs cannot be omitted")
        twin_outer = twin.inputs[j] if twin is not None else None
        outer_type = _first_typed(_of(outer), _of(twin_outer))
        if outer_type is None:
            if j > 0:
                raise fail(
                    f"the type of input {j} ({outer.name!r}) is unknown, so it cannot tell "
                    "a sequence from a tensor; declare the input's type"
                )
            sequence = True  # the spec makes the first input a sequence
        elif isinstance(outer_type[0], ir.SequenceType):
            sequence = True
        elif isinstance(outer_type[0], ir.TensorType):
            sequence = False
        else:
            raise fail(
                f"input {j} ({outer.name!r}) has type {outer_type[0]}, "
                "but SequenceMap takes sequences of tensors and tensors"
            )
        if j == 0 and not sequence:
            raise fail(f"its first input ({outer.name!r}) is a tensor, not a sequence")
        if sequence and outer_type is not None:
            outer_type = _element_of(outer_type)
        is_sequence.append(sequence)
        element_types.append(_first_typed(_of(inner), _of(_at(twin_body, "inputs", j)), outer_type))

    result_types: list[_TypeAndShape] = []
    output_types: list[_TypeAndShape] = []
    for k, (result, output) in enumerate(zip(body.outputs, node.outputs, strict=True)):
        twin_output = twin.outputs[k] if twin is not None else None
        declared_output = _first_typed(_of(output), _of(twin_output))
        if declared_output is not None and not isinstance(declared_output[0], ir.SequenceType):
            raise fail(
                f"output {k} ({output.name!r}) is declared as {declared_output[0]}, "
                "but SequenceMap outputs are sequences"
            )
        result_type = _first_typed(
            _of(result),
            _of(_at(twin_body, "outputs", k)),
            _element_of(declared_output) if declared_output is not None else None,
        )
        if result_type is None:
            raise fail(
                f"the element type of output {k} ({output.name!r}) cannot be determined: "
                "the body does not declare it and shape inference cannot infer it; "
                "declare the type of the body output or of the node output"
            )
        if not isinstance(result_type[0], ir.TensorType):
            raise fail(
                f"body output {k} ({result.name!r}) has type {result_type[0]}; "
                "a SequenceMap body must return tensors"
            )
        if declared_output is not None and _element_of(declared_output)[0] != result_type[0]:
            raise fail(
                f"output {k} ({output.name!r}) is declared as {declared_output[0]} but its "
                f"body output ({result.name!r}) is {result_type[0]}"
            )
        result_types.append(result_type)
        output_types.append(
            (
                ir.SequenceType(result_type[0]),
                declared_output[1] if declared_output else result_type[1],
            )
        )

    return _Plan(
        located=located,
        body=body,
        is_sequence=is_sequence,
        element_types=element_types,
        result_types=result_types,
        output_types=output_types,
        original=ir.serde.serialize_node(node),
    )


def _body_of(node: ir.Node, fail) -> ir.Graph:
    attr = node.attributes.get("body")
    if attr is None:
        raise fail("it has no 'body' attribute")
    if attr.is_ref():
        raise fail(
            f"its body is a reference to the function attribute {attr.ref_attr_name!r}; "
            "inline the function before lowering"
        )
    if attr.type != ir.AttributeType.GRAPH:
        raise fail(f"its 'body' attribute is a {attr.type.name}, not a graph")
    return attr.as_graph()


def _apply(plan: _Plan) -> list[ir.Node]:
    """Rewrite one planned SequenceMap; returns the nodes that replace it."""
    node = plan.located.node
    owner = plan.located.scope.owner
    body = plan.body
    # New nodes use the canonical spelling of the default domain: ONNX's
    # checker knows no schema under "ai.onnx", though runtimes accept it.
    domain = ""

    def typed(value: ir.Value, type_and_shape: _TypeAndShape | None) -> ir.Value:
        if type_and_shape is not None:
            value.type, value.shape = type_and_shape
        return value

    scalar_int64 = (ir.TensorType(ir.DataType.INT64), ir.Shape([]))
    scalar_bool = (ir.TensorType(ir.DataType.BOOL), ir.Shape([]))
    iteration = typed(fresh(ir.Value(), "iter"), scalar_int64)
    cond = typed(fresh(ir.Value(), "cond_in"), scalar_bool)
    accumulators = [typed(fresh(ir.Value(), "acc"), t) for t in plan.output_types]

    # Each body input becomes the current element (sequence inputs) or the
    # outer value itself (tensor inputs, read from the enclosing scope).
    prologue = []
    replacements: dict[ir.Value, ir.Value] = {}
    for outer, inner, sequence, element in zip(
        node.inputs, body.inputs, plan.is_sequence, plan.element_types, strict=True
    ):
        if sequence:
            at = fresh(ir.node("SequenceAt", [outer, iteration], domain=domain))
            current = typed(at.outputs[0], element)
            adopt_name(current, inner.name)  # the body's nodes keep reading the same name
            prologue.append(at)
        else:
            current = outer
        replacements[inner] = current
    # A body output may be a body input passed straight through.
    results = [replacements.get(value, value) for value in body.outputs]
    body.outputs.clear()
    for inner, current in replacements.items():
        inner.replace_all_uses_with(current)
    body.inputs.clear()

    for result, t in zip(results, plan.result_types, strict=True):
        # Type the body's own untyped results; never retype an outer-scope value.
        if result.graph is body and (result.type is None or not _dtype_known(result.type)):
            typed(result, t)
    inserts = [
        fresh(ir.node("SequenceInsert", [acc, result], domain=domain))
        for acc, result in zip(accumulators, results, strict=True)
    ]
    for insert, t in zip(inserts, plan.output_types, strict=True):
        typed(fresh(insert.outputs[0], "acc_next"), t)
    keep_going = fresh(ir.node("Identity", [cond], domain=domain))
    typed(fresh(keep_going.outputs[0], "cond_out"), scalar_bool)

    if prologue:
        if body.num_nodes():
            body.insert_before(body.node(0), prologue)
        else:
            body.extend(prologue)
    body.extend([*inserts, keep_going])
    body.inputs.extend([iteration, cond, *accumulators])
    body.outputs.clear()
    body.outputs.extend([keep_going.outputs[0], *(i.outputs[0] for i in inserts)])

    length = fresh(ir.node("SequenceLength", [node.inputs[0]], domain=domain))
    typed(fresh(length.outputs[0], "trip_count"), scalar_int64)
    # An explicit condition: Loop allows "" for "always", but some runtimes
    # (onnx.reference among them) then run no trip at all.
    always = fresh(ir.node("Constant", [], {"value": ir.tensor(np.array(True))}))
    typed(fresh(always.outputs[0], "true"), scalar_bool)
    empties = []
    for t in plan.result_types:
        empty = fresh(ir.node("SequenceEmpty", [], {"dtype": t[0].dtype.value}, domain=domain))
        typed(fresh(empty.outputs[0], "empty"), (ir.SequenceType(t[0]), None))
        empties.append(empty)
    loop = ir.node(
        "Loop",
        [length.outputs[0], always.outputs[0], *(e.outputs[0] for e in empties)],
        {"body": body},
        domain=domain,
        num_outputs=len(node.outputs),
        name=node.name,
        doc_string=node.doc_string,
        metadata_props=dict(node.metadata_props),
    )
    new_nodes = [length, always, *empties, loop]
    old_outputs = list(node.outputs)
    ir.convenience.replace_nodes_and_values(
        owner, node, [node], new_nodes, old_outputs, loop.outputs
    )
    for output, t in zip(loop.outputs, plan.output_types, strict=True):
        typed(output, t)
    logger.debug("Lowered SequenceMap %r in %s", node.name, plan.located.scope.description)
    return new_nodes


def _import_default_domain(opset_imports: dict[str, int]) -> None:
    """Make sure nodes in the "" domain resolve where only "ai.onnx" is imported."""
    if "" not in opset_imports and "ai.onnx" in opset_imports:
        opset_imports[""] = opset_imports["ai.onnx"]


def _of(value: ir.Value | None) -> _TypeAndShape | None:
    if value is None or value.type is None:
        return None
    return value.type, value.shape


def _at(graph: ir.Graph | None, field: str, index: int) -> ir.Value | None:
    if graph is None:
        return None
    values = getattr(graph, field)
    return values[index] if index < len(values) else None


def _element_of(type_and_shape: _TypeAndShape) -> _TypeAndShape:
    """The element type of a sequence type; the shape is already the element's."""
    type_, shape = type_and_shape
    if isinstance(type_, ir.SequenceType):
        return type_.elem_type, shape
    return type_, shape


def _first_typed(*candidates: _TypeAndShape | None) -> _TypeAndShape | None:
    """The first candidate whose innermost element type is known.

    A candidate with a known type but no shape borrows the first shape a
    later candidate of the same type offers.
    """
    for i, candidate in enumerate(candidates):
        if candidate is None or not _dtype_known(candidate[0]):
            continue
        type_, shape = candidate
        if shape is None:
            for other in candidates[i + 1 :]:
                if other is not None and other[0] == type_ and other[1] is not None:
                    shape = other[1]
                    break
        return type_, shape
    return None


def _dtype_known(type_: ir.TypeProtocol) -> bool:
    while isinstance(type_, (ir.SequenceType, ir.OptionalType)):
        type_ = type_.elem_type
    return type_.dtype != ir.DataType.UNDEFINED
