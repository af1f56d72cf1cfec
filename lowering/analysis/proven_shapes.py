"""What is proven of each value's dtype and shape: the one shape analysis.

ONNX's shape inference is a second implementation of each op, and for some
ops it is not the runtime's (:func:`~lowering.irutils.node_inference.seen_wrong`).
Its answers reach a model twice: as the shapes inference gives values the
model leaves untyped, and as the ``value_info`` exporters and simplifiers
declare after running it. Neither is a fact downstream of such an op::

    X: float[1,5]                                 declared     proven
    R = Resize(X, scales [1, 1.4])                [1,6]        [1,7]   computed (onnxruntime's rule)
    S = Relu(R)                                   [1,6]        [1,7]   inferred from R's proof
    P = MaxPool<ceil_mode=1>(Q: float[1,1,?])     [1,1,?]      none    no rule for an unknown size
    T = Conv(P, W)                                [1,4,?]      none    an input's shape unproven

A value's declaration is a fact (:attr:`Proof.doubted` does not hold it)
unless the node that makes it is seen wrong or reads a doubted value,
through subgraphs too. A doubted value's shape is what is computed for it
(:mod:`lowering.irutils.computed_shapes`), else what per-node inference
proves from its inputs' proofs (:func:`~lowering.irutils.node_inference.infer_outputs`:
trusted ops only), else unknown. So a computed shape feeds the next node,
and a chain of copies is sized link by link. Dtypes are always kept: ONNX
infers them from type constraints, soundly.

An If, a Loop or a Scan is proven from its subgraphs' proofs
(:mod:`lowering.analysis.control_flow_shapes`: a join of the branches, a
fixed point of the body), and a sequence by what is proven of its elements
(:attr:`Proof.elements`, :mod:`lowering.analysis.sequence_elements`), which
SequenceAt and ConcatFromSequence read. A Loop's carried input is proven as
that fixed point, whatever the body declares of it.

Its readers: :meth:`Proof.declarable` (what of a declaration may be read or
declared again), :func:`proven_outputs` (one node's step, for a reader that
follows values of its own, as the vectorizer follows element shapes) and
:func:`call_shapes` (a model-local function proven for one call).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import cast

import onnx_ir as ir

from lowering.analysis import sequence_elements
from lowering.analysis.control_flow_shapes import Flow, element_of, prove_control_flow
from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.node_inference import (
    Dim,
    Inferred,
    Operand,
    infer_outputs,
    may_be_seen_wrong,
    operand,
    seen_wrong,
)
from lowering.irutils.op_facts import RANK_SEEN_WRONG, is_onnx_domain
from lowering.irutils.static_values import small_constant
from lowering.irutils.walk import GraphLike, graphs_within, nodes_within, subgraphs

#: What a call gives: its outputs as tensors, and as sequences' elements.
_Followed = tuple[list[Inferred], list[sequence_elements.Elements]]


@dataclasses.dataclass
class Proof:
    """What :func:`prove` found: per value, what is proven of it, and the
    values whose declared (or ONNX-inferred) shapes are not facts."""

    known: dict[ir.Value, Operand] = dataclasses.field(default_factory=dict)
    doubted: set[ir.Value] = dataclasses.field(default_factory=set)
    #: The doubted values whose rank is doubted too: computed from an op ONNX
    #: gives another rank than onnxruntime (:data:`RANK_SEEN_WRONG`).
    rank_doubted: set[ir.Value] = dataclasses.field(default_factory=set)
    #: The model-local functions some of whose outputs are doubted: a call's
    #: outputs are, as ONNX's inference sees through the call.
    doubting: set[ir.OperatorIdentifier] = dataclasses.field(default_factory=set)
    #: Per sequence, what is proven of its elements (absent: nothing)
    #: (:mod:`lowering.analysis.sequence_elements`).
    elements: dict[ir.Value, sequence_elements.Elements] = dataclasses.field(default_factory=dict)
    #: The model-local functions whose calls' untyped outputs ``fill`` proves,
    #: each function proven for the call (:func:`call_shapes`).
    callees: Mapping[ir.OperatorIdentifier, ir.Function] = dataclasses.field(default_factory=dict)
    #: Per call followed (the function and what its inputs are), what it gives:
    #: its outputs as tensors and as sequences' elements.
    followed: dict[tuple, _Followed] = dataclasses.field(default_factory=dict)

    def operand(self, value: ir.Value | None) -> Operand | None:
        """What is proven of ``value`` (None: an absent input)."""
        if value is None:
            return None
        got = self.known.get(value)
        if got is None:
            got = operand(value, small_constant(value))
            if value in self.doubted and got is not None:
                got = _unshaped(got)
        if got is not None and got.type is None and got.dtype is None:  # an untyped sequence
            elements = self.elements.get(value)
            if isinstance(elements, Operand) and elements.dtype is not None:
                return Operand(None, None, None, ir.SequenceType(ir.TensorType(elements.dtype)))
        return got

    def shape(self, value: ir.Value) -> tuple[Dim, ...] | None:
        """``value``'s proven shape (None: not even its rank)."""
        got = self.operand(value)
        return None if got is None or got.shape is None else tuple(got.shape)

    def declarable(self, value: ir.Value, *, keep_rank: bool = False) -> ir.Shape | None:
        """What of ``value``'s declared shape is a fact, and so may be declared
        again: all of it where it is not doubted; else each dim the proof gives
        too (a proven dim that differs is not declared in its place: ONNX's
        inference would contradict it), or only the rank where the proof has
        no shape and the rank is not doubted (``keep_rank``: even then)."""
        declared = value.shape
        if declared is None or value not in self.doubted:
            return declared
        dims = [d if isinstance(d, int) else d.value for d in declared]
        proven = self.shape(value)
        if proven is not None and len(proven) == len(dims):
            return ir.Shape([d if d == p else None for d, p in zip(dims, proven, strict=True)])
        if keep_rank or value not in self.rank_doubted:
            return ir.Shape([None] * len(dims))
        return None

    def typed(self, value: ir.Value | None) -> tuple[ir.TypeProtocol, ir.Shape | None] | None:
        """``value``'s type and the part of its shape that is proven: declared
        where the model declares it, else what the proof infers (a sequence's
        shape is its elements'). None where its dtype is not known."""
        if value is None:
            return None
        declared = value.type
        if declared is not None and dtype_known(declared):
            shape = self.declarable(value)
            if shape is not None or value in self.doubted:
                return declared, shape
            if isinstance(declared, ir.TensorType):
                shape = _as_shape(self.shape(value))
            elif isinstance(declared, ir.SequenceType):
                shape = _as_shape(_element_shape(self.elements.get(value)))
            return declared, shape
        # (An undeclared value computed from a doubted one gets no shape: one
        # declared would be contradicted where ONNX's inference sizes it wrong.)
        doubted = value in self.doubted
        elements = self.elements.get(value)
        if isinstance(elements, Operand) and elements.dtype is not None:
            shape = None if doubted else _as_shape(_element_shape(elements))
            return ir.SequenceType(ir.TensorType(elements.dtype)), shape
        known = self.known.get(value)
        if known is not None and known.type is not None and dtype_known(known.type):
            return known.type, None
        if known is not None and _dtype(known) is not None:
            shape = None if doubted else _as_shape(_shape(known))
            return ir.TensorType(known.dtype), shape  # type: ignore[arg-type]
        return None


def dtype_known(type_: ir.TypeProtocol) -> bool:
    """Whether the innermost element type of ``type_`` has a dtype."""
    while isinstance(type_, (ir.SequenceType, ir.OptionalType)):
        type_ = type_.elem_type
    return type_.dtype not in (None, ir.DataType.UNDEFINED)


def _element_shape(elements: sequence_elements.Elements) -> tuple[Dim, ...] | None:
    if not isinstance(elements, Operand) or elements.shape is None:
        return None
    return tuple(elements.shape)


def _as_shape(dims: Sequence[Dim] | None) -> ir.Shape | None:
    return None if dims is None else ir.Shape(list(dims))


def prove(
    owner: GraphLike,
    opset: int,
    proof: Proof | None = None,
    *,
    fill: bool = True,
    functions: Mapping[ir.OperatorIdentifier, ir.Function] | None = None,
) -> Proof:
    """Prove the shapes of the values of ``owner`` and the graphs nested in it.

    ``opset``: the default domain's version there. ``proof``: what is known
    already (of outer scopes); it is extended and returned. ``fill``: also
    infer what the declarations of values that are facts leave out (values
    rewrites made are untyped); without it, only doubted values are worked
    out, which costs no inference where nothing is seen wrong. ``functions``:
    the model-local functions whose calls are followed, each proven for the
    call (:func:`call_shapes`); by default a call's outputs are unknown.
    """
    proof = Proof() if proof is None else proof
    prover = _Prover(opset, proof, fill, functions)
    for node in owner:
        prover.node(node)
    return proof


def _doubtable_inputs(node: ir.Node, sub: ir.Graph, onnx_op: bool) -> Sequence[ir.Value]:
    """The inputs of ``sub`` that what ``node`` reads may size: not a Loop
    body's iteration number and condition, an int64 and a bool scalar by the
    spec (onnxruntime refuses a Loop whose body leaves them unshaped)."""
    if onnx_op and node.op_type == "Loop":
        return sub.inputs[2:]
    return sub.inputs


@dataclasses.dataclass
class _Prover:
    """One run of :func:`prove` over a graph and the graphs nested in it."""

    opset: int
    proof: Proof
    fill: bool
    functions: Mapping[ir.OperatorIdentifier, ir.Function] | None

    def body(self, graph: ir.Graph) -> None:
        prove(graph, self.opset, self.proof, fill=self.fill, functions=self.functions)

    def node(self, node: ir.Node) -> None:
        proof = self.proof
        doubted_input = any(v is not None and v in proof.doubted for v in node.inputs)
        rank_input = any(v is not None and v in proof.rank_doubted for v in node.inputs)
        onnx_op = is_onnx_domain(node.domain)
        flow, doubted_input, rank_input = self._subgraphs(node, onnx_op, doubted_input, rank_input)
        if onnx_op:
            _track_elements(node, proof, flow)
        callee = None if self.functions is None else self.functions.get(node.op_identifier())
        call = node.op_identifier() in proof.doubting or callee is not None
        if not (
            self.fill or doubted_input or call or (onnx_op and may_be_seen_wrong(node.op_type))
        ):
            return
        operands = [proof.operand(v) for v in node.inputs]
        wrong = call or (onnx_op and seen_wrong(node, operands))
        if not doubted_input and not wrong:
            self._filled(node, onnx_op, operands, flow)
            return
        proof.doubted.update(node.outputs)
        if rank_input or not onnx_op or (wrong and node.op_type in RANK_SEEN_WRONG):
            proof.rank_doubted.update(node.outputs)
        self._proven(node, operands, flow, callee)

    def _proven(
        self,
        node: ir.Node,
        operands: list[Operand | None],
        flow: Flow | None,
        callee: ir.Function | None,
    ) -> None:
        """A doubted node: what is proven of its outputs, whatever they declare."""
        proof = self.proof
        if callee is not None:  # followed into: proven for this call
            proven = _follow(node, callee, operands, proof, self.functions)
        else:
            proven = _with_reads(node, proof, flow, proven_outputs(node, operands, self.opset))
        for value, got in zip(node.outputs, proven, strict=True):
            declared = operand(value, small_constant(value))
            if declared is None or declared.type is not None:
                continue  # a sequence or an optional: its element's shape stays unknown
            dtype = _dtype(declared) or got.dtype
            proof.known[value] = Operand(dtype, got.shape, declared.value)

    def _subgraphs(
        self, node: ir.Node, onnx_op: bool, doubted_input: bool, rank_input: bool
    ) -> tuple[Flow | None, bool, bool]:
        """Prove ``node``'s subgraphs (their inputs doubted with ``node``'s);
        returns what control flow proves of its outputs, and whether an input
        or a value its subgraphs return is doubted, and its rank."""
        proof = self.proof
        graphs = subgraphs(node)
        for sub in graphs:
            inputs = _doubtable_inputs(node, sub, onnx_op)
            if doubted_input:
                proof.doubted.update(inputs)
            if rank_input:
                proof.rank_doubted.update(inputs)
        flow = None
        if graphs and onnx_op:
            flow = prove_control_flow(node, proof, self.opset, self.body)
        else:
            for sub in graphs:
                self.body(sub)
        for sub in graphs:
            doubted_input = doubted_input or any(v in proof.doubted for v in sub.outputs)
            rank_input = rank_input or any(v in proof.rank_doubted for v in sub.outputs)
        return flow, doubted_input, rank_input

    def _filled(
        self, node: ir.Node, onnx_op: bool, operands: list[Operand | None], flow: Flow | None
    ) -> None:
        """A node whose declarations hold: with ``fill``, what inference (or the
        callee, proven for the call) gives fills what they leave out."""
        proof = self.proof
        if onnx_op and self.fill:
            inferred = _with_reads(node, proof, flow, infer_outputs(node, operands, self.opset))
        elif self.fill and (called := proof.callees.get(node.op_identifier())) is not None:
            inferred = _follow(node, called, operands, proof, proof.callees)
        else:
            return
        for value, got in zip(node.outputs, inferred):
            proof.known[value] = _merged(value, got)


def _track_elements(node: ir.Node, proof: Proof, flow: Flow | None) -> None:
    """Record what is proven of the elements of the sequences ``node`` makes."""
    if flow is not None:
        made = flow[1]
    elif node.op_type in sequence_elements.MAKERS:
        inputs = [element_of(proof, v) for v in node.inputs]
        if node.op_type == "Identity" and inputs[0] is None:  # (most are of tensors)
            made = [None]
        else:
            operands = [proof.operand(v) for v in node.inputs]
            made = [sequence_elements.made(node, operands, inputs)]
    else:
        return
    for value, elements in zip(node.outputs, made):
        if elements is None:
            proof.elements.pop(value, None)
        else:
            proof.elements[value] = elements


def _with_reads(
    node: ir.Node, proof: Proof, flow: Flow | None, inferred: list[Inferred]
) -> list[Inferred]:
    """``inferred``, or what control flow proves (``flow``), with the shape a
    read of a sequence takes from its elements."""
    if flow is not None:  # (as many as the node has outputs, the body's extra unread)
        missing = len(node.outputs) - len(flow[0])
        return flow[0][: len(node.outputs)] + [Inferred(None, None)] * missing
    if node.op_type in sequence_elements.READERS and node.inputs[0] is not None and inferred:
        got = sequence_elements.read(node, proof.elements.get(node.inputs[0]))
        if got is not None:
            shape = None if got.shape is None else tuple(got.shape)
            return [Inferred(inferred[0].dtype or got.dtype, shape), *inferred[1:]]
    return inferred


def proven_outputs(node: ir.Node, operands: Sequence[Operand | None], opset: int) -> list[Inferred]:
    """What is proven of each output of ``node`` from what is proven of its
    inputs (``operands``), whatever is declared: the shape onnxruntime's rule
    computes (:mod:`lowering.irutils.computed_shapes`), else what ONNX's
    per-node inference proves (trusted ops only: never a shape of an op
    :func:`~lowering.irutils.node_inference.seen_wrong` names), else none.
    The step :func:`prove` takes at each node it doubts, for callers that
    follow values of their own (the vectorizer's element shapes)."""
    if not is_onnx_domain(node.domain):
        return [Inferred(None, None)] * len(node.outputs)
    inferred = infer_outputs(node, operands, opset)
    computed = computed_shapes(node, operands)
    if computed is None:
        return inferred
    return [
        Inferred(got.dtype, computed[k]) if k < len(computed) else got
        for k, got in enumerate(inferred)
    ]


def prove_model(model: ir.Model, *, fill: bool = False) -> Proof:
    """:func:`prove` over the main graph and every model-local function, each
    at the default-domain opset it imports. ``fill``: also prove what the
    model leaves untyped (:func:`prove`), calls of its functions included."""
    proof = Proof(callees=model.functions if fill else {})
    # Functions first, until no call newly doubts its outputs (a function
    # calling one that does), then the main graph.
    while True:
        for function in model.functions.values():
            prove(function, default_opset(function.opset_imports), proof, fill=fill)
        doubting = {
            f.identifier()
            for f in model.functions.values()
            if any(v in proof.doubted for v in f.outputs)
        }
        if doubting <= proof.doubting:
            break
        proof.doubting |= doubting
    prove(model.graph, default_opset(model.opset_imports), proof, fill=fill)
    if fill:
        _prove_for_call_sites(model, proof)
    return proof


def _prove_for_call_sites(model: ir.Model, proof: Proof) -> None:
    """Prove each function again with the inputs its call sites agree on.

    A function's inputs are untyped; its calls give them types. Where every
    call site whose inputs are typed agrees on their types, the function is
    proven for them (each dim only where all sites agree). A call site in a
    function is typed once that function is, so functions go callers first::

        main graph:  y = local.outer(x)          x: seq(float[2]), from the model
        outer (a):   b = local.inner(a)          a: seq(float[2]), from main's call
        inner (s):   t = SequenceMap(s)          s: seq(float[2]), from outer's call
    """
    scopes: list[GraphLike] = list(graphs_within(model.graph))
    for function in callers_first(model):
        agreed = _agreed_inputs(function, scopes, proof)
        if agreed is not None:
            for value, (known, elements) in zip(function.inputs, agreed, strict=True):
                proof.known[value] = known
                if elements is not None:
                    proof.elements[value] = elements
            prove(function, default_opset(function.opset_imports), proof, fill=True)
        scopes += graphs_within(function)


_Site = tuple[Operand, sequence_elements.Elements]


def _agreed_inputs(
    function: ir.Function, scopes: list[GraphLike], proof: Proof
) -> list[_Site] | None:
    """What every typed call site of ``function`` in ``scopes`` gives each of its
    inputs, as a tensor and as a sequence's elements; None where sites
    disagree on a type or none is typed."""
    agreed: list[_Site] | None = None
    for scope in scopes:
        for node in scope:
            if node.op_identifier() != function.identifier():
                continue
            site = [_site(proof, v) for v in node.inputs]
            if len(site) != len(function.inputs) or any(s is None for s in site):
                continue  # an input missing or untyped
            typed = cast(list[_Site], site)
            if agreed is None:
                agreed = typed
            elif [_kind(s) for s in agreed] != [_kind(s) for s in typed]:
                return None
            else:
                agreed = [_joined(a, b) for a, b in zip(agreed, typed, strict=True)]
    return agreed


def _site(proof: Proof, value: ir.Value | None) -> _Site | None:
    typed = proof.typed(value)
    if value is None or typed is None:
        return None
    type_, _ = typed
    if isinstance(type_, ir.SequenceType):
        elements = element_of(proof, value)
        if not isinstance(elements, Operand):
            elements = Operand(type_.elem_type.dtype, None)
        return Operand(None, None, None, type_), elements
    if isinstance(type_, ir.TensorType):
        known = proof.operand(value)
        assert known is not None
        return Operand(known.dtype or type_.dtype, known.shape), None
    return Operand(None, None, None, type_), None


def _kind(site: _Site) -> object:
    known, elements = site
    return known.type, known.dtype, None if not isinstance(elements, Operand) else elements.dtype


def _joined(a: _Site, b: _Site) -> _Site:
    (known_a, elements_a), (known_b, elements_b) = a, b
    shape = sequence_elements.join_shapes(_shape(known_a), _shape(known_b))
    elements = None if elements_a is None else sequence_elements.join(elements_a, elements_b)
    return known_a._replace(shape=shape, value=None), elements


def callers_first(model: ir.Model) -> list[ir.Function]:
    """The model's functions, each after every function that calls it.

    ONNX forbids recursion; a cycle would only leave its members' order open.
    """
    callers: dict[ir.Function, list[ir.Function]] = {f: [] for f in model.functions.values()}
    for function in model.functions.values():
        for node in nodes_within(function):
            callee = model.functions.get(node.op_identifier())
            if callee is not None and function not in callers[callee]:
                callers[callee].append(function)
    order: list[ir.Function] = []
    seen: set[ir.Function] = set()

    def visit(function: ir.Function) -> None:  # after all its callers
        if function in seen:
            return
        seen.add(function)
        for caller in callers[function]:
            visit(caller)
        order.append(function)

    for function in model.functions.values():
        visit(function)
    return order


def call_shapes(
    function: ir.Function,
    operands: Sequence[Operand | None],
    functions: Mapping[ir.OperatorIdentifier, ir.Function] | None = None,
) -> list[tuple[Dim, ...] | None]:
    """What is proven of the outputs of one call of ``function``, given what is
    proven of its inputs there (``operands``): the function's body proven
    for this call alone, each input as the call gives it. (Its inputs are
    untyped; :func:`prove_model` proves the function for every call at once,
    and knows no size there.) A call in it of one of ``functions`` is followed
    the same way (ONNX forbids recursion); any other call's outputs are unknown."""
    return [got.shape for got in _results(_called(function, operands, functions), function)]


def _called(
    function: ir.Function,
    operands: Sequence[Operand | None],
    functions: Mapping[ir.OperatorIdentifier, ir.Function] | None,
    elements: Sequence[sequence_elements.Elements] = (),
    followed: dict[tuple, _Followed] | None = None,
) -> Proof:
    """``function`` proven for one call: its inputs are what the call gives
    them, as tensors (``operands``) and as sequences (``elements``);
    ``followed``: the calls proven so far this run."""
    proof = Proof(followed={} if followed is None else followed)
    for value, known in zip(function.inputs, operands, strict=False):
        if known is not None:
            proof.known[value] = known
    for value, given in zip(function.inputs, elements, strict=False):
        if given is not None:
            proof.elements[value] = given
    prove(function, default_opset(function.opset_imports), proof, fill=True, functions=functions)
    return proof


def _follow(
    node: ir.Node,
    callee: ir.Function,
    operands: Sequence[Operand | None],
    proof: Proof,
    functions: Mapping[ir.OperatorIdentifier, ir.Function] | None,
) -> list[Inferred]:
    """What the call ``node`` of ``callee`` gives, ``callee`` proven for it; the
    elements of the sequences it returns go into ``proof``."""
    inputs = [element_of(proof, v) for v in node.inputs]
    key = (callee.identifier(), _keys(operands), _keys(inputs))
    if (got := proof.followed.get(key)) is None:  # (calls alike are proven once a run)
        inner = _called(callee, operands, functions, inputs, proof.followed)
        got = proof.followed[key] = (
            _results(inner, callee),
            [inner.elements.get(result) for result in callee.outputs],
        )
    results, elements = got
    for value, made in zip(node.outputs, elements):
        if isinstance(made, Operand):
            proof.elements[value] = made
    return results


def _keys(items: Sequence[sequence_elements.Elements]) -> tuple[object, ...]:
    """What is known of a call's inputs, as a key (values by their bytes)."""
    return tuple(
        item
        if item is None or item is sequence_elements.NOTHING
        else (
            item.dtype,
            None if item.shape is None else tuple(item.shape),
            None
            if item.value is None
            else (item.value.dtype.str, item.value.shape, repr(item.value.tolist())),
            None if item.type is None else str(item.type),
        )
        for item in items
    )


def _results(proof: Proof, function: ir.Function) -> list[Inferred]:
    outputs = [proof.operand(value) for value in function.outputs]
    return [
        Inferred(None, None) if got is None else Inferred(_dtype(got), _shape(got))
        for got in outputs
    ]


def _shape(known: Operand) -> tuple[Dim, ...] | None:
    return None if known.shape is None else tuple(known.shape)


def default_opset(imports: dict[str, int]) -> int:
    """The default domain's version in ``imports`` ("" or "ai.onnx")."""
    return imports.get("", imports.get("ai.onnx", 1))


def _dtype(known: Operand) -> ir.DataType | None:
    return known.dtype if known.dtype not in (None, ir.DataType.UNDEFINED) else None


def _unshaped(known: Operand) -> Operand:
    return known._replace(shape=None)


def _merged(value: ir.Value, inferred: Inferred) -> Operand:
    """``value``'s declared type, its unknown parts filled from ``inferred``."""
    declared = operand(value, small_constant(value))
    assert declared is not None
    if declared.type is not None:
        return declared
    if inferred.type is not None and declared.dtype is None:
        return Operand(None, None, None, inferred.type)
    shape = declared.shape if declared.shape is not None else inferred.shape
    if shape is not None and inferred.shape is not None and len(shape) == len(inferred.shape):
        shape = [d if d is not None else p for d, p in zip(shape, inferred.shape)]  # each dim
    return declared._replace(dtype=_dtype(declared) or inferred.dtype, shape=shape)
