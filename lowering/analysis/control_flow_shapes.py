"""What an If, a Loop or a Scan proves of its outputs, from its subgraphs' proofs.

ONNX's inference of these ops reads the subgraphs' declarations; the one
shape analysis (:mod:`lowering.analysis.proven_shapes`) reads their proofs
instead, joined as a sequence's elements are
(:func:`~lowering.analysis.sequence_elements.join`: a dim where both sides
have it, no rank where their ranks differ):

- If: each output is the join of the two branches' outputs.
- Loop and Scan, a carried value: a fixed point. The body is proven assuming
  its carried input is what the initial value proves; the body's result is
  joined into the assumption, and the body proven again, until the join
  changes nothing. After two passes a value still changing keeps only its
  rank, after three nothing::

      v_0: [3]   body: v' = Concat(v, v)
      pass 1  assume [3]   v': [6]   join [?]
      pass 2  assume [?]   v': [?]   join [?]   (a fixed point: every iteration has [?])

  The body's input declaration is not read: what holds on the first
  iteration need not on the next (the assumption replaces it). So each
  iteration's value has the join, and so has the output (also after no
  iteration: the initial value). A sequence carried is joined the same way,
  element by element.
- A Loop's scan output: ``[?]`` and the body output's proof, where the body
  is proven to run at least once or the body output is declared static (and
  not doubted): after no iteration onnxruntime returns ``[0]`` and the shape
  it infers for the body output, else ``[0]`` alone.
- A Scan's scan output: its input's length inserted at ``scan_output_axes``
  into the body output's proof; the body reads each scan input without
  its axis (opset 9 on; onnxruntime refuses an empty scan).

A symbolic dim a subgraph declares may name another size each iteration or
run, so a dim leaves a subgraph symbolic only where the node's inputs or the
values its subgraphs read from outside have that symbol.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from lowering.analysis.sequence_elements import (
    NOTHING,
    Elements,
    join,
    proven,
    shape_of,
)
from lowering.irutils.node_inference import Dim, Inferred, Operand, operand
from lowering.irutils.walk import outer_values, subgraphs

if TYPE_CHECKING:
    from lowering.analysis.proven_shapes import Proof

#: What is proven of a node's outputs: as tensors, and as sequences' elements.
Flow = tuple[list[Inferred], list[Elements]]

#: Proves one subgraph into the proof (with the caller's opset and options).
ProveBody = Callable[[ir.Graph], None]

#: A carried value's kind: a tensor, a sequence, or neither (nothing assumed).
_TENSOR, _SEQUENCE = "tensor", "sequence"


def prove_control_flow(
    node: ir.Node, proof: Proof, opset: int, prove_body: ProveBody
) -> Flow | None:
    """Prove the subgraphs of ``node`` (of the default domain) into ``proof``,
    and return what that proves of its outputs; None for another op or a
    malformed one (its subgraphs are proven all the same)."""
    graphs = subgraphs(node)
    flow = None
    if node.op_type == "Loop" and len(graphs) == 1:
        flow = _loop(node, graphs[0], proof, prove_body)
    elif node.op_type == "Scan" and len(graphs) == 1 and opset >= 9:
        flow = _scan(node, graphs[0], proof, prove_body)
    elif node.op_type == "SequenceMap" and len(graphs) == 1:
        flow = _sequence_map(node, graphs[0], proof, prove_body)
    elif node.op_type == "If" and len(graphs) == 2:
        for graph in graphs:
            prove_body(graph)
        flow = _if(node, graphs, proof)
    else:
        for graph in graphs:
            prove_body(graph)
    return flow


def _if(node: ir.Node, branches: list[ir.Graph], proof: Proof) -> Flow | None:
    then, other = branches
    if not len(then.outputs) == len(other.outputs) == len(node.outputs):
        return None
    outer = _outer_symbols(node, proof)
    tensors, elements = [], []
    for a, b in zip(then.outputs, other.outputs, strict=True):
        tensors.append(_inferred(_scoped(join(_tensor_of(proof, a), _tensor_of(proof, b)), outer)))
        elements.append(_scoped(join(element_of(proof, a), element_of(proof, b)), outer))
    return tensors, elements


def _loop(node: ir.Node, body: ir.Graph, proof: Proof, prove_body: ProveBody) -> Flow | None:
    carried = len(node.inputs) - 2
    if carried < 0 or len(body.inputs) != carried + 2 or len(body.outputs) < carried + 1:
        prove_body(body)
        return None
    outer = _outer_symbols(node, proof)
    states = list(zip(node.inputs[2:], body.inputs[2:], body.outputs[1 : carried + 1], strict=True))
    tensors, elements = _fixed_point(states, {}, body, proof, prove_body, outer)
    trip, cond = (proof.operand(v) for v in node.inputs[:2])
    once = _at_least(trip, 1) and _at_least(cond, True)
    for value in body.outputs[carried + 1 :]:
        known = _scoped(_tensor_of(proof, value), outer)
        static = value.shape is not None and all(isinstance(d, int) for d in value.shape)
        if not (once or (static and value not in proof.doubted)):
            known = _unshaped(known)
        tensors.append(_stacked(known, 0, None))
        elements.append(None)
    return tensors, elements


def _scan(node: ir.Node, body: ir.Graph, proof: Proof, prove_body: ProveBody) -> Flow | None:
    scans = node.attributes.get_int("num_scan_inputs", 0)
    carried = len(node.inputs) - scans
    outputs = len(node.outputs) - carried
    input_axes = list(node.attributes.get_ints("scan_input_axes", [0] * scans))
    output_axes = list(node.attributes.get_ints("scan_output_axes", [0] * outputs))
    if (
        scans < 1
        or carried < 0
        or outputs < 0
        or len(body.inputs) != len(node.inputs)
        or len(body.outputs) != len(node.outputs)
        or len(input_axes) != scans
        or len(output_axes) != outputs
    ):
        prove_body(body)
        return None
    outer = _outer_symbols(node, proof)
    slices: dict[ir.Value, Operand] = {}
    lengths: list[Dim] = []
    for x, inner, axis in zip(
        node.inputs[carried:], body.inputs[carried:], input_axes, strict=True
    ):
        known = proof.operand(x)
        shape = shape_of(known)
        if shape is not None and -len(shape) <= axis < len(shape):
            axis %= len(shape)
            lengths.append(shape[axis])
            shape = (*shape[:axis], *shape[axis + 1 :])
        else:
            shape = None
        if _tensor(inner):
            slices[inner] = Operand(_dtype(operand(inner)) or _dtype(known), shape)
    states = list(
        zip(node.inputs[:carried], body.inputs[:carried], body.outputs[:carried], strict=True)
    )
    tensors, elements = _fixed_point(states, slices, body, proof, prove_body, outer)
    length = lengths[0] if lengths and all(d == lengths[0] for d in lengths) else None
    for value, axis in zip(body.outputs[carried:], output_axes, strict=True):
        element = _scoped(_tensor_of(proof, value), outer)
        tensors.append(_stacked(element, axis, _scoped_dim(length, outer)))
        elements.append(None)
    return tensors, elements


def _sequence_map(
    node: ir.Node, body: ir.Graph, proof: Proof, prove_body: ProveBody
) -> Flow | None:
    """Each body input is what every element of its sequence is (a tensor
    input: that tensor), where the body leaves it undeclared; each output's
    elements are what the body's output is proven to be."""
    if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
        prove_body(body)
        return None
    outer = _outer_symbols(node, proof)
    for index, (value, inner) in enumerate(zip(node.inputs, body.inputs, strict=True)):
        if value is None:
            continue
        sequence = index == 0 or value in proof.elements or isinstance(value.type, ir.SequenceType)
        known = element_of(proof, value) if sequence else _tensor_of(proof, value)
        if sequence and (known is None or known is NOTHING):
            # No element proven (or none at all: any shape holds): the dtype is exact.
            known = _element_dtype(proof, value)
        if known is not None and known is not NOTHING and _tensor(inner):
            proof.known[inner] = _filled(proof.operand(inner), known)
    prove_body(body)
    elements = [_scoped(_tensor_of(proof, v), outer) for v in body.outputs]
    return [Inferred(None, None)] * len(node.outputs), elements


def element_of(proof: Proof, value: ir.Value | None) -> Elements:
    """What is proven of every element of the sequence ``value``: its elements'
    proof, else what its declaration says of them (as far as it is a fact)."""
    if value is None:
        return None
    if value in proof.elements:
        return proof.elements[value]
    if not isinstance(value.type, ir.SequenceType) or not isinstance(
        value.type.elem_type, ir.TensorType
    ):
        return None
    shape = proof.declarable(value)
    dims = None if shape is None else tuple(d if isinstance(d, int) else d.value for d in shape)
    return Operand(_dtype(Operand(value.type.elem_type.dtype, None)), dims)


def _element_dtype(proof: Proof, value: ir.Value) -> Operand | None:
    """The dtype of the elements of the sequence ``value``, from its type alone."""
    typed = proof.typed(value)
    if typed is None or not isinstance(typed[0], ir.SequenceType):
        return None
    element = typed[0].elem_type
    return Operand(element.dtype, None) if isinstance(element, ir.TensorType) else None


def _filled(declared: Operand | None, known: Elements) -> Operand:
    """``declared``, its unknown dtype and dims taken from ``known``."""
    got = _inferred(known)
    if declared is None or declared.type is not None:
        return Operand(got.dtype, got.shape)
    shape = declared.shape
    if shape is None:
        shape = got.shape
    elif got.shape is not None and len(got.shape) == len(shape):
        shape = tuple(d if d is not None else g for d, g in zip(shape, got.shape, strict=True))
    return Operand(_dtype(declared) or got.dtype, shape, declared.value)


def _stacked(known: Elements, axis: int, length: Dim) -> Inferred:
    """A scan output of elements ``known``: ``length`` inserted at ``axis``."""
    got = _inferred(known)
    if got.shape is None or not -len(got.shape) - 1 <= axis <= len(got.shape):
        return got._replace(shape=None)
    axis %= len(got.shape) + 1
    return got._replace(shape=(*got.shape[:axis], length, *got.shape[axis:]))


def _fixed_point(
    states: Sequence[tuple[ir.Value | None, ir.Value, ir.Value]],
    fixed: dict[ir.Value, Operand],
    body: ir.Graph,
    proof: Proof,
    prove_body: ProveBody,
    outer: frozenset[str],
) -> Flow:
    """Prove ``body`` until what each carried value ``(initial, body input,
    body output)`` is assumed to be is the join of its initial value and its
    body output (the module docstring); ``fixed``: the other body inputs
    assumed. Returns the carried values' joins."""
    kinds = [_kind(initial, inner, proof) for initial, inner, _ in states]
    assumed = [
        _scoped(_value_of(proof, initial, kind), outer)
        for (initial, _, _), kind in zip(states, kinds, strict=True)
    ]
    for attempt in itertools.count():
        proof.known.update(fixed)
        for (_, inner, _), kind, known in zip(states, kinds, assumed, strict=True):
            _assume(proof, inner, kind, known)
        prove_body(body)
        joined = [
            join(known, _value_of(proof, result, kind))
            for (_, _, result), kind, known in zip(states, kinds, assumed, strict=True)
        ]
        if joined == assumed:
            break
        assumed = [_widened(j, a, attempt) for j, a in zip(joined, assumed, strict=True)]
    tensors = [
        _inferred(known if kind == _TENSOR else None)
        for kind, known in zip(kinds, assumed, strict=True)
    ]
    elements = [
        known if kind == _SEQUENCE else None for kind, known in zip(kinds, assumed, strict=True)
    ]
    return tensors, elements


def _kind(initial: ir.Value | None, inner: ir.Value, proof: Proof) -> str | None:
    """A carried value's kind: a tensor, a sequence, or neither (nothing assumed)."""
    if (initial is not None and initial in proof.elements) or isinstance(
        inner.type, ir.SequenceType
    ):
        return _SEQUENCE
    known = proof.operand(initial)
    if known is None or known.type is not None or not _tensor(inner):
        return None
    return _TENSOR


def _value_of(proof: Proof, value: ir.Value | None, kind: str | None) -> Elements:
    """What is proven of ``value`` of ``kind``: a tensor, or a sequence's elements."""
    if value is None:
        return None
    if kind == _SEQUENCE:
        return element_of(proof, value)
    return _tensor_of(proof, value) if kind == _TENSOR else None


def _tensor_of(proof: Proof, value: ir.Value) -> Elements:
    return proven(proof.operand(value))


def _assume(proof: Proof, inner: ir.Value, kind: str | None, known: Elements) -> None:
    """Let ``inner`` (a body input) be ``known`` for the next pass."""
    if kind == _SEQUENCE:
        if known is None:
            proof.elements.pop(inner, None)
        else:
            proof.elements[inner] = known
    elif kind == _TENSOR:
        got = _inferred(known)
        dtype = _dtype(operand(inner)) or got.dtype
        proof.known[inner] = Operand(dtype, got.shape)


def _widened(joined: Elements, before: Elements, attempt: int) -> Elements:
    """``joined``, widened where it still changes: after two passes to its
    rank, after three to no shape, so that the passes end."""
    if joined == before or attempt < 2 or joined is None or joined is NOTHING:
        return joined
    if attempt == 2 and joined.shape is not None:
        return joined._replace(shape=(None,) * len(joined.shape))
    return _unshaped(joined)


def _inferred(known: Elements) -> Inferred:
    if known is None or known is NOTHING:
        return Inferred(None, None)
    return Inferred(known.dtype, shape_of(known))


def _unshaped(known: Elements) -> Elements:
    return known if known is None or known is NOTHING else known._replace(shape=None)


def _tensor(value: ir.Value) -> bool:
    """Whether ``value`` is a tensor or untyped (not a sequence, an optional, ..)."""
    return value.type is None or isinstance(value.type, ir.TensorType)


def _at_least(known: Operand | None, least: object) -> bool:
    """Whether an optional scalar input is absent or a constant of at least ``least``."""
    if known is None:
        return True
    value = known.value
    if value is None or value.size != 1:
        return False
    return bool(np.asarray(value).reshape(()) >= least)


def _outer_symbols(node: ir.Node, proof: Proof) -> frozenset[str]:
    """The symbolic dims of what ``node`` reads: its inputs, and the values its
    subgraphs read from outside."""
    values = [v for v in node.inputs if v is not None]
    values += [v for graph in subgraphs(node) for v in outer_values(graph)]
    symbols: set[str] = set()
    for value in values:
        for known in (_tensor_of(proof, value), proof.elements.get(value)):
            shape = _inferred(known).shape
            symbols.update(d for d in shape or () if isinstance(d, str))
    return frozenset(symbols)


def _scoped_dim(dim: Dim, outer: frozenset[str]) -> Dim:
    return None if isinstance(dim, str) and dim not in outer else dim


def _scoped(known: Elements, outer: frozenset[str]) -> Elements:
    """``known`` with the symbols not in ``outer`` unknown."""
    if known is None or known is NOTHING or known.shape is None:
        return known
    return known._replace(shape=tuple(_scoped_dim(d, outer) for d in known.shape))


def _dtype(known: Operand | None) -> ir.DataType | None:
    return None if known is None or known.dtype == ir.DataType.UNDEFINED else known.dtype
