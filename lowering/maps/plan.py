"""Checking a SequenceMap: what every strategy's plan starts from.

:func:`plan_map` validates a SequenceMap and works out, before anything is
changed, which inputs are sequences and the type of every element and
output: from the body's declared types, the node's, or what the one shape
analysis proves of them (:mod:`lowering.analysis.proven_shapes`). What the
strategies' rewrites share (the Loop body, the element reads, the
:class:`~lowering.maps.loop_body.Replacer`) is in :mod:`lowering.maps.loop_body`.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, dtype_known
from lowering.errors import LoweringError
from lowering.irutils.constants import SharedConstants
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.scopes import Located
from lowering.irutils.walk import GraphLike

TypeAndShape = tuple[ir.TypeProtocol, ir.Shape | None]
SCALAR_INT64: TypeAndShape = (ir.TensorType(ir.DataType.INT64), ir.Shape([]))
SCALAR_BOOL: TypeAndShape = (ir.TensorType(ir.DataType.BOOL), ir.Shape([]))


@dataclasses.dataclass
class MapPlan:
    """Everything a rewrite needs, checked before anything is changed."""

    located: Located
    body: ir.Graph
    is_sequence: list[bool]
    element_types: list[TypeAndShape | None]  # of each body input
    result_types: list[TypeAndShape]  # of each body output (a tensor)
    output_types: list[TypeAndShape]  # of each node output (a sequence)
    opset: int = 17  # of the default domain where the map sits
    # The constants rewrites share, one per value per graph: the pass gives
    # every plan of one run the same (by default a plan has its own).
    constants: SharedConstants = dataclasses.field(default_factory=SharedConstants)
    # What is proven of the model's shapes (the one analysis, on the model as
    # planned): which declarations are facts, for what the rewrites read.
    proof: Proof = dataclasses.field(default_factory=Proof)

    @property
    def node(self) -> ir.Node:
        return self.located.node

    @property
    def inputs(self) -> list[ir.Value]:
        """The map's inputs, none of them empty (:func:`plan_map` rejects that)."""
        inputs = [v for v in self.node.inputs if v is not None]
        assert len(inputs) == len(self.node.inputs), "plan_map rejects empty inputs"
        return inputs


def plan_map(
    located: Located,
    opset: int = 17,
    proof: Proof | None = None,
    interfaces: dict[GraphLike, set[str]] | None = None,
) -> MapPlan:
    """Check a SequenceMap and work out every type its lowering needs.

    ``proof``: what is proven of the model's shapes
    (:func:`~lowering.analysis.proven_shapes.prove_model`); a declared shape
    is read only as far as it is a fact (:meth:`Proof.declarable`). Without
    it, every declaration is taken as one. ``interfaces``: the symbolic dims
    each graph's inputs declare, as far as read; the maps one run plans share
    it, so a graph of 10,000 inputs and 10,000 maps has them read once.
    """
    node = located.node
    proof = Proof() if proof is None else proof
    reading = _Reading(located, proof, {} if interfaces is None else interfaces)
    body = _body_of(node, reading.fail)
    reading.check_arity(body)
    inputs = [
        reading.input(j, outer, inner)
        for j, (outer, inner) in enumerate(zip(node.inputs, body.inputs, strict=True))
    ]
    outputs = [
        reading.output(k, result, output)
        for k, (result, output) in enumerate(zip(body.outputs, node.outputs, strict=True))
    ]
    return MapPlan(
        located=located,
        body=body,
        is_sequence=[sequence for sequence, _ in inputs],
        element_types=[element for _, element in inputs],
        result_types=[result for result, _ in outputs],
        output_types=[output for _, output in outputs],
        opset=opset,
        proof=proof,
    )


@dataclasses.dataclass
class _Reading:
    """How :func:`plan_map` reads a map's types: each as ``proof`` gives it
    (:meth:`Proof.typed`: declared, else proven), the body's own symbolic dims
    (not in :attr:`names`) dropped."""

    located: Located
    proof: Proof
    interfaces: dict[GraphLike, set[str]]

    @property
    def names(self) -> set[str]:
        """The symbolic dims the inputs of the map's graph declare; read only for a
        type with symbolic dims, and once per graph (``interfaces``)."""
        owner = self.located.scope.owner
        names = self.interfaces.get(owner)
        if names is None:
            names = self.interfaces[owner] = _interface_dims(owner)
        return names

    def fail(self, reason: str) -> LoweringError:
        return LoweringError(reason, node=self.located.node, scope=self.located.scope.description)

    def of(self, value: ir.Value | None) -> TypeAndShape | None:
        return self.proof.typed(value)

    def check_arity(self, body: ir.Graph) -> None:
        node = self.located.node
        if not node.inputs:
            raise self.fail("it has no input sequence")
        if len(body.inputs) != len(node.inputs):
            raise self.fail(
                f"its body has {len(body.inputs)} input(s) but the node has "
                f"{len(node.inputs)}; the body must take one input per node input"
            )
        if len(body.outputs) != len(node.outputs):
            raise self.fail(
                f"its body has {len(body.outputs)} output(s) but the node has "
                f"{len(node.outputs)}; the body must return one output per node output"
            )

    def input(
        self, j: int, outer: ir.Value | None, inner: ir.Value
    ) -> tuple[bool, TypeAndShape | None]:
        """Whether input ``j`` is a sequence, and its element's type (if known)."""
        if outer is None:
            raise self.fail(f"input {j} is empty; SequenceMap inputs cannot be omitted")
        outer_type = self.of(outer)
        sequence = self._is_sequence(j, outer, outer_type)
        if sequence and outer_type is not None:
            outer_type = _element_of(outer_type)
        element = _first_typed(self.of(inner), outer_type)
        return sequence, None if element is None else _unnamed(element, self)

    def _is_sequence(self, j: int, outer: ir.Value, outer_type: TypeAndShape | None) -> bool:
        if outer_type is None:
            if j > 0:
                raise self.fail(
                    f"the type of input {j} ({outer.name!r}) is unknown, so it cannot tell "
                    "a sequence from a tensor; declare the input's type"
                )
            sequence = True  # the spec makes the first input a sequence
        elif isinstance(outer_type[0], ir.SequenceType):
            sequence = True
        elif isinstance(outer_type[0], ir.TensorType):
            sequence = False
        else:
            raise self.fail(
                f"input {j} ({outer.name!r}) has type {outer_type[0]}, "
                "but SequenceMap takes sequences of tensors and tensors"
            )
        if j == 0 and not sequence:
            raise self.fail(f"its first input ({outer.name!r}) is a tensor, not a sequence")
        return sequence

    def output(
        self, k: int, result: ir.Value, output: ir.Value
    ) -> tuple[TypeAndShape, TypeAndShape]:
        """The element type of output ``k``, and its own (sequence) type."""
        declared_output = self.of(output)
        if declared_output is not None and not isinstance(declared_output[0], ir.SequenceType):
            raise self.fail(
                f"output {k} ({output.name!r}) is declared as {declared_output[0]}, "
                "but SequenceMap outputs are sequences"
            )
        result_type = self._result_type(k, result, output, declared_output)
        result_type = _unnamed(result_type, self)
        output_type = (
            ir.SequenceType(result_type[0]),
            declared_output[1] if declared_output else result_type[1],
        )
        return result_type, output_type

    def _result_type(
        self,
        k: int,
        result: ir.Value,
        output: ir.Value,
        declared_output: TypeAndShape | None,
    ) -> TypeAndShape:
        result_type = _first_typed(
            self.of(result),
            _element_of(declared_output) if declared_output is not None else None,
        )
        if result_type is None:
            raise self.fail(
                f"the element type of output {k} ({output.name!r}) cannot be determined: "
                "the body does not declare it and shape inference cannot infer it; "
                "declare the type of the body output or of the node output"
            )
        if not isinstance(result_type[0], ir.TensorType):
            raise self.fail(
                f"body output {k} ({result.name!r}) has type {result_type[0]}; "
                "a SequenceMap body must return tensors"
            )
        if declared_output is not None and _element_of(declared_output)[0] != result_type[0]:
            declared = _element_of(declared_output)[0]
            raise self.fail(
                f"inconsistent types: output {k} ({output.name!r}) is declared as a sequence "
                f"of {_dtype_name(declared)} but its body output ({result.name!r}) is "
                f"{_dtype_name(result_type[0])}; fix one of the two declarations"
            )
        return result_type


def declares_enough(node: ir.Node) -> bool:
    """Whether the model's own types say all :func:`plan_map` needs.

    That is the type of every additional input (sequence or tensor?) and
    the element type of every output. Shapes come from inference only when
    inference is needed anyway.
    """
    attr = node.attributes.get("body")
    if not isinstance(attr, ir.Attr) or attr.is_ref() or attr.type != ir.AttributeType.GRAPH:
        return True  # plan_map reports the problem
    body = attr.as_graph()
    inputs_known = all(v is None or v.type is not None for v in node.inputs[1:])
    outputs_known = all(
        any(v.type is not None and dtype_known(v.type) for v in (result, output))
        for result, output in zip(body.outputs, node.outputs, strict=False)
    )
    return inputs_known and outputs_known


def _body_of(node: ir.Node, fail) -> ir.Graph:
    attr = node.attributes.get("body")
    if attr is None:
        raise fail("it has no 'body' attribute")
    if attr.is_ref():  # SpecializeFunctionsPass resolves every one that a call supplies
        raise fail(
            f"its body is the function attribute {attr.ref_attr_name!r}, which no call "
            "supplies (SpecializeFunctionsPass, run first as lowering.pipeline() runs it, "
            "resolves every one that a call supplies)"
        )
    if attr.type != ir.AttributeType.GRAPH:
        raise fail(f"its 'body' attribute is a {attr.type.name}, not a graph")
    return attr.as_graph()


def _element_of(type_and_shape: TypeAndShape) -> TypeAndShape:
    """The element type of a sequence type; the shape is already the element's."""
    type_, shape = type_and_shape
    if isinstance(type_, ir.SequenceType):
        return type_.elem_type, shape
    return type_, shape


def _unnamed(type_and_shape: TypeAndShape, reading: _Reading) -> TypeAndShape:
    """The type with the body's own symbolic dims unknown: the element types leave the body.

    A body's symbolic dims are said of one run of the body (one element),
    in its own names: the declared ``[R, 3]`` of a map over chunks of
    ``[N, 4]`` is ``[1, 3]`` each time. Copied onto a stack, a scan
    output or a sequence outside, R would claim what nothing proves, and
    tract, which unifies dims by name, refuses such a model ("Impossible to
    unify Val(1) with Sym(R)"). Every type a rewrite copies out of a body
    comes from the plan, so this is where they lose their names. A name
    the enclosing graph's inputs declare (``reading.names``: d of ``x: [T, d]``)
    is the interface's, and means the same inside and out.
    """
    type_, shape = type_and_shape
    if shape is None or all(isinstance(d, int) for d in shape):
        return type_and_shape
    names = reading.names
    if all(isinstance(d, int) or str(d.value) in names for d in shape):
        return type_and_shape
    return type_, ir.Shape(
        [d if isinstance(d, int) or str(d.value) in names else None for d in shape]
    )


def _interface_dims(owner: GraphLike) -> set[str]:
    """The symbolic dims the inputs of the graph (or function) ``owner`` declare."""
    return {
        str(d.value)
        for value in owner.inputs
        if value.shape is not None
        for d in value.shape
        if not isinstance(d, int) and d.value is not None
    }


def _first_typed(*candidates: TypeAndShape | None) -> TypeAndShape | None:
    """The first candidate whose innermost element type is known.

    A candidate with a known type but no shape borrows the first shape a
    later candidate of the same type offers.
    """
    for i, candidate in enumerate(candidates):
        if candidate is None or not dtype_known(candidate[0]):
            continue
        type_, shape = candidate
        if shape is None:
            for other in candidates[i + 1 :]:
                if other is not None and other[0] == type_ and other[1] is not None:
                    shape = other[1]
                    break
        return type_, shape
    return None


def _dtype_name(type_: ir.TypeProtocol) -> str:
    return type_.dtype.name if isinstance(type_, ir.TensorType) else str(type_)


def tensor_dtype(type_: ir.TypeProtocol | None) -> ir.DataType | None:
    """The element type of a tensor type; None for sequences, optionals and no type."""
    return type_.dtype if isinstance(type_, ir.TensorType) else None


def result_dtypes(plan: MapPlan) -> list[ir.DataType | None]:
    """The element type of each output of ``plan``'s map."""
    return [tensor_dtype(t) for t, _ in plan.result_types]


def element_dtypes(plan: MapPlan) -> list[ir.DataType | None]:
    """The element type of each sequence input of ``plan``'s map."""
    return [
        t[0].dtype if t is not None else None
        for t, sequence in zip(plan.element_types, plan.is_sequence, strict=True)
        if sequence
    ]


def empty_is_read(plan: MapPlan) -> bool:
    """Whether the original goes on past ``plan``'s map over no element: some
    reader of its outputs is not a ConcatFromSequence (onnxruntime fails on
    the concat of an empty sequence), or an output is the graph's. Only then
    does a form that a runtime runs wrong on an empty stack differ from it."""
    return any(
        output.is_graph_output()
        or any(not is_onnx_op(user, "ConcatFromSequence") for user, _ in output.uses())
        for output in plan.node.outputs
    )
