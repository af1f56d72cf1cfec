"""Expand a node into ONNX's own function body for its op.

ONNX defines many newer ops as functions of older ones: HardSwish is
``x * HardSigmoid<alpha=1/6>(x)``, LayerNormalization a chain of ReduceMean,
Sub, Pow, Sqrt and Div. Where a node cannot be relabelled or adapted to the
target, its schema's function body (``OpSchema.get_function_with_opset_version``)
or context-dependent body (which depends on the node's attributes and input
types, ``get_context_dependent_function_with_opset_version``) replaces it in
the sandbox, at the opset the body is written for; the planner then converts
each body node in turn, so an expansion that itself needs converting is::

    Gelu-20 --expand--> Div, Erf, Add, Mul (at 20) --relabel--> ... at 13

Only nodes that block are expanded: everything else keeps its op.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

import onnx
import onnx.shape_inference
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove
from lowering.irutils.node_inference import operand
from lowering.irutils.op_facts import is_onnx_domain
from lowering.opset import schemas

if TYPE_CHECKING:
    from lowering.opset.plan import Plan, Sandbox


class _FunctionSchema(Protocol):
    """The function-body part of ``onnx.defs.OpSchema``.

    The C++ binding has these members, but onnx's stubs (1.23) do not declare them.
    """

    has_function: bool
    function_opset_versions: list[int]
    has_context_dependent_function: bool
    context_dependent_function_opset_versions: list[int]

    def get_function_with_opset_version(self, version: int, /) -> bytes: ...

    def get_context_dependent_function_with_opset_version(
        self, version: int, node: bytes, input_types: Sequence[bytes], /
    ) -> bytes: ...


def function_body(node: ir.Node) -> onnx.FunctionProto | None:
    """The lowest-opset function body ONNX gives for ``node``, if any."""
    found = schemas.schema(node.op_type, node.version)
    if found is None:
        return None
    schema = cast(_FunctionSchema, found)
    if schema.has_function and schema.function_opset_versions:
        version = min(schema.function_opset_versions)
        return onnx.FunctionProto.FromString(schema.get_function_with_opset_version(version))
    if schema.has_context_dependent_function and schema.context_dependent_function_opset_versions:
        return _context_dependent_body(schema, node)
    return None


def _context_dependent_body(schema: _FunctionSchema, node: ir.Node) -> onnx.FunctionProto | None:
    """The body ONNX builds for this node's attributes and input types (all must be known)."""
    types = _input_types(node)
    if types is None:
        return None
    version = min(schema.context_dependent_function_opset_versions)
    proto = onnx.helper.make_node(
        node.op_type,
        [f"in{i}" if v is not None else "" for i, v in enumerate(node.inputs)],
        [f"out{i}" for i in range(len(node.outputs))],
    )
    for attr in node.attributes.values():
        proto.attribute.append(ir.serde.serialize_attribute(attr))
    try:
        data = schema.get_context_dependent_function_with_opset_version(
            version, proto.SerializeToString(), types
        )
    except Exception:  # noqa: BLE001 - onnx raises bare errors when no body can be built
        return None
    return onnx.FunctionProto.FromString(data) if data else None


def _input_types(node: ir.Node) -> list[bytes] | None:
    """Each input's serialized type (an empty one for a missing input); None if one is unknown."""
    types = []
    for v in node.inputs:
        if v is None:
            types.append(onnx.TypeProto().SerializeToString())
        elif v.type is None:
            return None
        else:
            types.append(ir.serde.serialize_type(v.type).SerializeToString())
    return types


@dataclasses.dataclass
class _Template:
    """A function body ready to instantiate: attributes resolved, types inferred."""

    version: int
    since: int
    inputs: list[str]
    outputs: list[str]
    # (op_type, input names, output names, attributes)
    steps: list[tuple[str, list[str], list[str], list[ir.Attr]]]
    types: dict[str, tuple[ir.TypeProtocol | None, ir.Shape | None]]


# Templates per op, version, attributes and input types: the layers of a
# model repeat, and building a body is the slow part.
_TEMPLATES: dict[bytes, _Template | None] = {}
_MAX_CACHED = 4096


def _template(node: ir.Node, as_onnxruntime: bool = False) -> _Template | None:
    widen = _stash_in_input_type(node)
    key = onnx.NodeProto(
        op_type=node.op_type, name=str(node.version), domain=f"{as_onnxruntime} {widen}"
    )
    for attr in node.attributes.values():
        key.attribute.append(ir.serde.serialize_attribute(attr))
    # A context-dependent body has the node's outputs: LayerNormalization's of
    # one output has no Mean, which a later node of two would have read.
    key.output.extend(["" for _ in node.outputs])
    for value in node.inputs:
        info = ir.serde.serialize_value(value) if value is not None else onnx.ValueInfoProto()
        info.name = ""
        key.input.append(info.SerializeToString().hex())
    digest = key.SerializeToString()
    if digest not in _TEMPLATES:
        if len(_TEMPLATES) >= _MAX_CACHED:
            _TEMPLATES.clear()
        _TEMPLATES[digest] = _build_template(node, as_onnxruntime, widen)
    return _TEMPLATES[digest]


def _build_template(node: ir.Node, as_onnxruntime: bool, widen: bool = False) -> _Template | None:
    body = _onnx_body(node, widen)
    if body is None:
        return None
    schema = schemas.schema(node.op_type, node.version)
    assert schema is not None, "function_body found a body, so the schema exists"
    attributes = _with_defaults(node, schema)
    steps = []
    for proto in body.node:
        attrs = _step_attributes(proto, attributes)
        if attrs is None:
            return None
        steps.append((proto.op_type, list(proto.input), list(proto.output), attrs))
    version = next(o.version for o in body.opset_import if is_onnx_domain(o.domain))
    if not as_onnxruntime and not _literal_reshapes(steps, version):
        return None
    deviations = _two_pass_variance(steps)
    types = _body_types(steps, list(body.input), node, version, deviations)
    return _Template(
        version, schema.since_version, list(body.input), list(body.output), steps, types
    )


def _with_defaults(node: ir.Node, schema: onnx.defs.OpSchema) -> dict[str, ir.Attr]:
    """The node's attributes, and the schema's default for each it leaves out."""
    attributes = dict(node.attributes)
    for name, formal in schema.attributes.items():
        if name not in attributes and formal.default_value.name:
            attributes[name] = ir.serde.deserialize_attribute(formal.default_value)
    return attributes


def _body_types(
    steps: list, inputs: list[str], node: ir.Node, version: int, deviations: dict[str, str]
) -> dict[str, tuple[ir.TypeProtocol | None, ir.Shape | None]]:
    """The type and proven shape of each value the body's ``steps`` make, its
    ``inputs`` typed as the node's (the one shape analysis, on the body alone)."""
    given = [name for name, actual in zip(inputs, node.inputs, strict=False) if actual is not None]
    values: dict[str, ir.Value] = {name: ir.Value(name=name) for name in given}
    proof = Proof()
    for name, actual in zip(inputs, node.inputs, strict=False):
        if actual is not None and (known := operand(actual)) is not None:
            proof.known[values[name]] = known
    nodes = []
    for op_type, step_inputs, step_outputs, attrs in steps:
        operands = [values.get(name) if name else None for name in step_inputs]
        nodes.append(ir.Node("", op_type, operands, attrs, num_outputs=len(step_outputs)))
        for name, value in zip(step_outputs, nodes[-1].outputs, strict=True):
            value.name = name
            values[name] = value
    graph = ir.Graph([values[name] for name in given], [], nodes=nodes)
    prove(graph, version, proof, fill=True)
    types: dict[str, tuple[ir.TypeProtocol | None, ir.Shape | None]] = {}
    for step in graph:
        for value in step.outputs:
            if value.name and (typed := proof.typed(value)) is not None:
                types[value.name] = typed
    for deviation, x in deviations.items():  # X - Mean broadcasts to X's type
        if x in types:
            types[deviation] = types[x]
    return types


def _onnx_body(node: ir.Node, widen: bool) -> onnx.FunctionProto | None:
    """ONNX's body for ``node``, its operands broadcast and (``widen``) its first stage
    in double; None where it has none or it uses another domain."""
    body = function_body(node)
    if body is None or any(not is_onnx_domain(o.domain) for o in body.opset_import):
        return None
    _expand_broadcast_operands(body, node)
    if widen:
        _stage_in_double(body, node.attributes.get_int("stash_type", ir.DataType.FLOAT.value))
    if any(not is_onnx_domain(n.domain) for n in body.node):
        return None
    return body


def _step_attributes(proto: onnx.NodeProto, attributes: dict[str, ir.Attr]) -> list[ir.Attr] | None:
    """A body node's attributes, references to the op's resolved; None for a subgraph
    (it belongs to one node: not worth sharing)."""
    attrs = []
    for attribute in proto.attribute:
        if attribute.ref_attr_name:
            if attribute.ref_attr_name in attributes:
                source = attributes[attribute.ref_attr_name]
                attrs.append(ir.Attr(attribute.name, source.type, source.value))
        elif attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            return None
        else:
            attrs.append(ir.serde.deserialize_attribute(attribute))
    return attrs


def _literal_reshapes(steps: list, version: int) -> bool:
    """Make each Reshape of a shape the body computes read its 0s as 0s; False if it cannot.

    Bodies reshape to shapes they compute from their inputs' (LayerNormalization:
    ``Reshape(Normalized2D, Shape(X))``), and a Reshape without ``allowzero``
    reads a 0 there as "copy the input's dim": for an X of shape [5, 0, 1] the
    body asks for [5, 1, 1] (an error) or, for [0, 0, 3], gives [0, 3, 3]
    (a wrong shape). Such a Reshape gets ``allowzero = 1``, which reads every
    dim as it is, so a body at opset 14 or later means what its op means;
    the Reshape-14 adapter then goes below 14 only where no 0 can occur. A
    body older than 14 with such a Reshape is not expanded, unless the body
    is what onnxruntime runs for the original node itself (it has no kernel
    for it, and inlines the same body: SoftmaxCrossEntropyLoss-13): then it
    is taken as it is. Constant shapes are the body's own choice and stay.
    """
    constants = {out for op, _, outs, _ in steps if op == "Constant" for out in outs}
    for op_type, inputs, _, attrs in steps:
        if op_type != "Reshape" or len(inputs) < 2 or inputs[1] in constants:
            continue
        if any(a.name == "allowzero" for a in attrs):
            continue
        if version < 14:
            return False
        attrs.append(ir.Attr("allowzero", ir.AttributeType.INT, 1))
    return True


def _two_pass_variance(steps: list) -> dict[str, str]:
    """Compute each variance the body computes as E[X^2] - E[X]^2 as E[(X - E[X])^2].

    ONNX's bodies of LayerNormalization, GroupNormalization and
    MeanVarianceNormalization compute the variance from the mean of the
    squares, where their specs define it (LayerNormalization's equations:
    ``D = Sub(X, Mean)``, ``Var = ReduceMean(Mul(D, D))``). The two are equal
    in exact arithmetic, but in float32 the first loses the variance to
    rounding where the mean is large beside it: on ``3000 + N(0, 1)`` the
    body's LayerNormalization is off by 727 where onnxruntime's kernel is
    off by 1e-4 (its variance rounds to nearly 0). So::

        Q = Mul(X, X)      (or Pow(X, 2))              D = Sub(X, M)
        A = ReduceMean(Q)                              Q = Mul(D, D)
        M = ReduceMean(X)                       -->    A = ReduceMean(Q)
        B = Mul(M, M)                                  Var = Identity(A)
        Var = Sub(A, B)                                (B is read by nothing)

    where both ReduceMeans reduce the same axes. Returns each deviation
    value made, with the X it is of (it has X's type).
    """
    made: dict[str, str] = {}
    while (found := _variance_of_squares(steps)) is not None:
        index, x, mean, square = found
        outputs = steps[index][2]
        deviation = f"{outputs[0]}__deviation"
        at = steps.index(square)
        square_op, square_inputs, square_outputs, square_attrs = square
        twice = [deviation, deviation] if square_op == "Mul" else [deviation, square_inputs[1]]
        steps[at] = (square_op, twice, square_outputs, square_attrs)
        steps.insert(at, ("Sub", [x, mean], [deviation], []))
        steps[index + 1] = ("Identity", [steps[index + 1][1][0]], outputs, [])
        made[deviation] = x
    return made


def _variance_of_squares(steps: list) -> tuple[int, str, str, tuple] | None:
    """The first ``Var = Sub(ReduceMean(X^2), ReduceMean(X)^2)`` of ``steps``:
    (its index, X, the mean, the step squaring X), or None."""
    producer = {out: step for step in steps for out in step[2]}

    def squared(name: str) -> str | None:
        """What ``name`` is the square of (Mul(x, x), Pow(x, 2)), or None."""
        found = producer.get(name)
        if found is None or len(found[1]) != 2:
            return None
        op, (base, other), _, _ = found
        if op == "Mul" and base == other:
            return base
        exponent = producer.get(other)
        if op == "Pow" and exponent is not None and exponent[0] == "Constant":
            values = [a.value.numpy() for a in exponent[3] if a.name == "value"]
            if values and values[0].size == 1 and float(values[0].reshape(())) == 2.0:
                return base
        return None

    def reduced(name: str) -> tuple[str, list, bytes] | None:
        """(what, the other inputs, the attributes) of a ReduceMean making ``name``."""
        found = producer.get(name)
        if found is None or found[0] != "ReduceMean" or not found[1]:
            return None
        keys = b"".join(ir.serde.serialize_attribute(a).SerializeToString() for a in found[3])
        return found[1][0], found[1][1:], keys

    for index, (op, inputs, _, _) in enumerate(steps):
        if op != "Sub" or len(inputs) != 2:
            continue
        of_squares, mean = reduced(inputs[0]), squared(inputs[1])
        if of_squares is None or mean is None:
            continue
        square, rest, keys = of_squares
        x = squared(square)
        if x is None or reduced(mean) != (x, rest, keys):
            continue
        # The rewrite squares the deviation in the square's step and broadcasts
        # Sub(X, M): only if nothing else reads the square and M keeps its dims.
        if sum(square in step[1] for step in steps) != 1 or not _keeps_dims(producer[mean]):
            continue
        if steps.index(producer[mean]) < steps.index(producer[square]):
            return index, x, mean, producer[square]
    return None


def _keeps_dims(step: tuple) -> bool:
    """Whether a ReduceMean step keeps the reduced dims (keepdims defaults to 1)."""
    return all(a.value != 0 for a in step[3] if a.name == "keepdims")


def expand(sandbox: Sandbox, node: ir.Node, plan: Plan) -> list[ir.Node] | None:
    """Replace ``node`` in ``sandbox`` by its function body; the new nodes, or None."""
    template = _template(node, plan.original_inlined)
    if template is None:
        return None
    new_nodes, env = _instantiate(template, node)
    found = [env.get(name) for name in template.outputs][: len(node.outputs)]
    outputs = [value for value in found if value is not None]
    if len(outputs) != len(found):
        return None
    graph = sandbox.graph
    graph.insert_before(node, new_nodes)
    for old, replacement in zip(node.outputs, outputs):
        if replacement.type is None:
            replacement.type = old.type
        if replacement.shape is None and old.shape is not None:
            replacement.shape = old.shape
        old.replace_all_uses_with(replacement, replace_graph_outputs=True)
    graph.remove(node, safe=True)
    plan.expanded.append(f"{node.op_type}-{template.since}")
    return new_nodes


def _instantiate(
    template: _Template, node: ir.Node
) -> tuple[list[ir.Node], dict[str, ir.Value | None]]:
    """The template's nodes on ``node``'s inputs, typed; and each body name's value."""
    env: dict[str, ir.Value | None] = {"": None}
    for formal, actual in zip(template.inputs, node.inputs):
        env[formal] = actual
    for formal in template.inputs[len(node.inputs) :]:
        env[formal] = None
    new_nodes = []
    for op_type, input_names, output_names, attrs in template.steps:
        new = ir.Node(
            "",
            op_type,
            [env[name] for name in input_names],
            [ir.Attr(a.name, a.type, a.value) for a in attrs],
            num_outputs=len(output_names),
            version=template.version,
        )
        for name, value in zip(output_names, new.outputs):
            env[name] = value if name else None
            _type_from(value, template.types.get(name) if name else None)
        new_nodes.append(new)
    return new_nodes, env


def _type_from(
    value: ir.Value, known: tuple[ir.TypeProtocol | None, ir.Shape | None] | None
) -> None:
    if known is not None:
        value.type = known[0]
        if known[1] is not None:
            value.shape = ir.Shape(list(known[1]))


#: Operands (by position) that an op's spec lets broadcast to X's dims from
#: ``axis`` on, and that ONNX's body flattens as if they had those dims::
#:
#:     LayerNormalization <axis = 1> (X [2,3,4,5], Scale [4,5], B [5])
#:     body:  Flatten<axis=1>(X) [2,60] * Flatten<axis=0>(Scale) [1,20]    (no broadcast)
#:
#: Each such operand is expanded to those dims first, where its declared
#: shape is not already them:  Scale -> Expand(Scale, Shape<start=axis>(X)).
#: (RMSNormalization's and Attention's bodies broadcast theirs as they are.)
BROADCAST_OPERANDS: dict[str, tuple[int, ...]] = {"LayerNormalization": (1, 2)}


def _expand_broadcast_operands(body: onnx.FunctionProto, node: ir.Node) -> None:
    """Read each of ``node``'s :data:`BROADCAST_OPERANDS` expanded to X's dims from
    ``axis`` on, in ``body`` (in place), unless its declared shape is those dims."""
    positions = BROADCAST_OPERANDS.get(node.op_type, ())
    axis = node.attributes.get_int("axis", -1)
    x = node.inputs[0] if node.inputs else None
    steps = []
    for position in positions:
        operand = node.inputs[position] if position < len(node.inputs) else None
        if operand is None or position >= len(body.input) or _is_suffix(operand, x, axis):
            continue
        formal = body.input[position]
        dims, full = f"{formal}__dims", f"{formal}__expanded"
        for proto in body.node:
            proto.input[:] = [full if name == formal else name for name in proto.input]
        steps.append(onnx.helper.make_node("Shape", [body.input[0]], [dims], start=axis))
        steps.append(onnx.helper.make_node("Expand", [formal, dims], [full]))
    if steps:
        nodes = [*steps, *body.node]
        del body.node[:]
        body.node.extend(nodes)


def _is_suffix(operand: ir.Value, x: ir.Value | None, axis: int) -> bool:
    """Whether ``operand``'s declared shape is ``x``'s dims from ``axis`` on."""
    if operand.shape is None or x is None or x.shape is None:
        return False
    dims = list(x.shape)
    if not -len(dims) <= axis < len(dims):
        return False
    suffix = dims[axis:]
    return len(operand.shape) == len(suffix) and all(
        isinstance(a, (int, ir.SymbolicDim)) and a == b and (isinstance(a, int) or a.value)
        for a, b in zip(operand.shape, suffix)
    )


_DOUBLE = ir.DataType.DOUBLE.value


def _stash_in_input_type(node: ir.Node) -> bool:
    """Whether a normalization of a double X is to compute its first stage in
    double rather than in ``stash_type``.

    The bodies cast X to ``stash_type`` (float by default, and only float or
    bfloat16 allowed) for the mean and variance, where onnxruntime's kernels
    compute a double X in double and round only Mean and InvStdDev to the
    stash type: expanded, a double model lost 2.6e-4 relative where
    onnxruntime is exact to 1e-12. Either is within the
    spec's precision; the expansion computes as the kernel does
    (:func:`_stage_in_double`).
    """
    if node.op_type not in ("LayerNormalization", "GroupNormalization"):
        return False
    found = schemas.schema(node.op_type, node.version or 1)
    if found is None or "stash_type" not in found.attributes:
        return False
    x = node.inputs[0] if node.inputs else None
    return x is not None and x.dtype == ir.DataType.DOUBLE


def _stage_in_double(body: onnx.FunctionProto, stash: int) -> None:
    """Make the body's casts to the stash type casts to double, and cast the
    outputs after Y (Mean, InvStdDev) to the stash type at the end (in place)."""
    for proto in body.node:
        if proto.op_type == "Cast":
            _cast_to_double(proto, stash)
    made = {out for proto in body.node for out in proto.output}
    for name in [out for out in body.output[1:] if out in made]:
        for proto in body.node:
            proto.output[:] = [f"{name}__double" if out == name else out for out in proto.output]
        body.node.append(onnx.helper.make_node("Cast", [f"{name}__double"], [name], to=stash))


def _cast_to_double(cast_node: onnx.NodeProto, stash: int) -> None:
    for attribute in cast_node.attribute:
        if attribute.name == "to" and not attribute.ref_attr_name and attribute.i == stash:
            attribute.i = _DOUBLE
