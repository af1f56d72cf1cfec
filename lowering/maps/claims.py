"""What lowering a map would show ONNX's inference that it may size wrong, with no pin for it.

A SequenceMap's results are sequences, and onnxruntime runs it as its own
expansion: a Loop that reads each element with ``SequenceAt`` and appends
the body's results with ``SequenceInsert``. ONNX's inference sees the body
on the element types the sequence declares, and no shape of a result
reaches anything that allocates or checks by it. The general Loop
(:mod:`lowering.maps.strategies.loop`) read through the sequences is that
expansion. Every other form shows ONNX's inference more:

- the body's ops on each element's static shape: unrolled, vectorized, in a
  Scan over a split tensor (which allocates its results by the body's
  inference), in a Loop reading the split tensor or stacking its results;
- the elements themselves, read from the tensor a ``SplitToSequence``
  split or the inputs of a ``SequenceConstruct`` rather than through the
  sequence that held them.

Where such a node is one ONNX may size wrong, the rewrite pins it to the
shape onnxruntime computes (:mod:`lowering.irutils.pins`). Where no pin can
be computed, or a copy of the body's node would keep ONNX's wrong size on
its own output (pinned, not respelled: onnxruntime plans its buffer by
that size and hands it on), :func:`unpinned_claim` says why (the body
proven on each element, :func:`seeded`; the vectorizer also proves the
batched nodes of its dry run, on stacks, with :func:`first_unpinned`), and
the form declines with it:
the map gets a form that keeps the op where the original kept it, the Loop
read through its sequences, or, for a runtime without them, a refusal::

    s = SequenceConstruct(a: float[1,1,4], b: float[1,1,3])
    m = SequenceMap(s) <body (e) => (r) { r = Resize<not_larger>(e, sizes) }>

    unrolled:  r_0 = Resize(a), r_1 = Resize(b)     ONNX claims [1,1,2,2] for each,
               (not computed: declined)             onnxruntime computes others
    a Loop:    e = SequenceAt(s, i); r = Resize(e); acc' = SequenceInsert(acc, r)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove
from lowering.irutils.node_inference import Operand, may_be_seen_wrong
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.pins import may_need_pin, misallocated_output, unpinned_output
from lowering.irutils.walk import nodes_within
from lowering.maps.loop_body import ragged_source, split_source
from lowering.maps.plan import MapPlan


@dataclasses.dataclass
class Claims:
    """Each map's :func:`unpinned_claim`, judged once per run on what ``prover``
    proves (the model as planned, with inference filling the undeclared
    shapes), proven only where a map's body or elements hold an op ONNX may
    size wrong, and once."""

    prover: Callable[[], Proof]
    found: dict[ir.Node, str | None] = dataclasses.field(default_factory=dict)
    _proof: Proof | None = None

    def __call__(self, plan: MapPlan) -> str | None:
        if plan.node not in self.found:
            self.found[plan.node] = unpinned_claim(plan, self.proof)
        return self.found[plan.node]

    def proof(self) -> Proof:
        if self._proof is None:
            self._proof = self.prover()
        return self._proof


def unpinned_claim(plan: MapPlan, proof: Callable[[], Proof]) -> str | None:
    """Why a form other than the Loop read through the sequences would show
    ONNX's inference a shape it may get wrong and no pin fixes (None: every
    such shape is pinned). ``proof`` gives what is proven of the model."""
    sources = [v for v in _direct_sources(plan) if _may_be_wrong(v.producer())]
    body_ops = any(_may_be_wrong(node) for node in nodes_within(plan.body))
    if not sources and not body_ops:
        return None
    proven = proof()
    for value in sources:
        producer = value.producer()
        assert producer is not None, "_may_be_wrong takes a node"
        k = unpinned_output(producer, [proven.operand(v) for v in producer.inputs], plan.opset)
        if k is not None:
            return f"its sequence holds {_output(producer, k)}, {_WRONG}"
    if not body_ops:
        return None
    nodes = list(nodes_within(plan.body))
    for elements in _element_cases(plan, proven):
        copied = seeded(nodes, proven, dict(zip(plan.body.inputs, elements, strict=True)))
        prove(plan.body, plan.opset, copied)
        if (found := first_unpinned(nodes, copied, plan.opset)) is not None:
            return found
    return None


def first_unpinned(
    nodes: list[ir.Node], proof: Proof, opset: int, *, all_used: bool = False
) -> str | None:
    """Why the first of ``nodes`` that ONNX may size wrong, as ``proof`` proves
    its inputs, has no pin (None: each has its pins); ``all_used``: count
    every output as read."""
    for node in nodes:
        if _may_be_wrong_op(node):
            operands = [proof.operand(v) for v in node.inputs]
            k = unpinned_output(node, operands, opset, all_used=all_used)
            if k is not None:
                return f"ONNX may size {_output(node, k)} wrong, {_NOT_COMPUTED}"
            k = misallocated_output(node, operands, opset, all_used=all_used)
            if k is not None:
                return f"ONNX sizes {_output(node, k)} wrong, {_ALLOCATED}"
    return None


_NOT_COMPUTED = "and its true shape is not computed here"
_WRONG = f"which ONNX may size wrong, {_NOT_COMPUTED}"
_ALLOCATED = "and onnxruntime allocates each copy by that size (no respelling sizes it right)"


def _output(node: ir.Node, k: int) -> str:
    return (
        f"output {k} of {node.op_type} {node.name!r}"
        if node.name
        else f"output {k} of {node.op_type}"
    )


def _may_be_wrong(node: ir.Node | None) -> bool:
    return node is not None and node.graph is not None and may_need_pin(node)


def _may_be_wrong_op(node: ir.Node) -> bool:
    return is_onnx_domain(node.domain) and may_be_seen_wrong(node.op_type)


def _direct_sources(plan: MapPlan) -> Iterator[ir.Value]:
    """The values a form reads in place of the map's sequences: what a split
    split, a construct's inputs."""
    for outer, sequence in zip(plan.inputs, plan.is_sequence, strict=True):
        if not sequence:
            continue
        split, ragged = split_source(outer), ragged_source(outer)
        if split is not None:
            yield split[0]
        elif ragged is not None:
            yield ragged[0]
        else:
            producer = outer.producer()
            if producer is not None and is_onnx_op(producer, "SequenceConstruct"):
                yield from (v for v in producer.inputs if v is not None)


def _element_cases(plan: MapPlan, proof: Proof) -> list[list[Operand | None]]:
    """What is proven of each body input, element by element where they
    differ (the inputs of a construct), else once: a slice of a split
    tensor, the element type the sequence declares."""
    per_input = [
        _elements(outer, sequence, element, proof)
        for outer, sequence, element in zip(
            plan.inputs, plan.is_sequence, plan.element_types, strict=True
        )
    ]
    count = max((len(known) for known in per_input), default=0)
    cases: dict[tuple, list[Operand | None]] = {}
    for i in range(count):
        case = [known[min(i, len(known) - 1)] if known else None for known in per_input]
        cases.setdefault(tuple(_key(o) for o in case), case)
    return list(cases.values())


def _elements(
    outer: ir.Value,
    sequence: bool,
    element: tuple[ir.TypeProtocol, ir.Shape | None] | None,
    proof: Proof,
) -> list[Operand | None]:
    if not sequence:
        return [proof.operand(outer)]
    declared = _declared(element)
    split, ragged = split_source(outer), ragged_source(outer)
    if split is not None:  # slice i along axis, kept as 1 or dropped
        tensor, axis, keepdims = split
        return [_slice(proof.operand(tensor), axis, 1, dropped=not keepdims) or declared]
    if ragged is not None:  # a run of the split's lengths along axis
        tensor, _, axis = ragged
        return [_slice(proof.operand(tensor), axis, None) or declared]
    producer = outer.producer()
    if producer is not None and is_onnx_op(producer, "SequenceConstruct") and producer.inputs:
        return [proof.operand(v) for v in producer.inputs]
    return [declared]


def _slice(
    whole: Operand | None, axis: int, dim: int | None, dropped: bool = False
) -> Operand | None:
    """What is proven of a slice of ``whole`` along ``axis``: its dims, with
    ``dim`` along ``axis``, or that axis ``dropped``."""
    if whole is None or whole.shape is None or not -len(whole.shape) <= axis < len(whole.shape):
        return None
    axis %= len(whole.shape)
    dims = list(whole.shape)
    if dropped:
        del dims[axis]
    else:
        dims[axis] = dim
    return Operand(whole.dtype, dims)


def _declared(element: tuple[ir.TypeProtocol, ir.Shape | None] | None) -> Operand | None:
    """The element type the plan found, as an operand."""
    if element is None or not isinstance(element[0], ir.TensorType):
        return None
    shape = element[1]
    dims = None if shape is None else [d if isinstance(d, int) else d.value for d in shape]
    return Operand(element[0].dtype, dims)


def _key(known: Operand | None) -> tuple:
    if known is None:
        return ()
    shape = None if known.shape is None else tuple(known.shape)
    return (known.dtype, shape, id(known.value) if known.value is not None else None)


def seeded(nodes: list[ir.Node], proof: Proof, inputs: dict[ir.Value, Operand | None]) -> Proof:
    """A proof for ``nodes`` as a copy of them sees them: ``inputs`` are what
    is proven of the values they read in place of their own (a body's
    inputs), and nothing downstream of those is declared (a copy's shapes
    are its element's); the values they read from elsewhere are as
    ``proof`` has them."""
    inside = set(nodes)
    found = Proof(
        doubted=set(proof.doubted) | set(inputs),
        rank_doubted=set(proof.rank_doubted),
        doubting=set(proof.doubting),
    )
    for node in nodes:
        for value in node.inputs:
            if value is not None and value.producer() not in inside and value in proof.known:
                found.known[value] = proof.known[value]
    found.known.update({value: known for value, known in inputs.items() if known is not None})
    return found
