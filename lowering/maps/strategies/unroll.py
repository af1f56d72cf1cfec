"""The unroll strategy: a copy of the body for each element, no loop at all.

When the first input's length k is known statically and small (a
``SequenceConstruct`` of k tensors, a ``SplitToSequence`` with static
sizes, ...; see :mod:`lowering.analysis.sequence_length`), the body is inlined k
times, each copy reading its own element, and the outputs are built with
``SequenceConstruct``::

    outs = SequenceMap(SequenceConstruct(t_0, .., t_k-1), a)
           <body (e, b) => (y)>

becomes::

    y_0   = <body nodes, e := t_0, b := a>
    ...
    y_k-1 = <body nodes, e := t_k-1, b := a>
    outs  = SequenceConstruct(y_0, .., y_k-1)          (SequenceEmpty when k = 0)

An element is the construct's own input where there is one; otherwise it is
read with ``SequenceAt(s, i)`` for a constant i. The copies keep the body's
element types but not its shapes, which may differ from element to element.
Body initializers become one ``Constant`` each, shared by all copies. With
:class:`lowering.passes.eliminate_sequences.EliminateSequencesPass` afterwards,
reads such as ``SequenceAt(outs, 1)`` become the tensors themselves, so a
model like torch's ``atleast_2d((a, b, c))`` ends up with no sequence op.
What a copy tests about its element (its rank, its shape) is then folded
in the copy itself (:mod:`lowering.irutils.static_fold`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.irutils.axes import with_axes
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.static_fold import fold_static, release
from lowering.irutils.walk import graphs_within, nodes_within
from lowering.maps.loop_body import Replacer, read_slice, reads_sequences, split_source
from lowering.maps.plan import MapPlan, TypeAndShape, element_dtypes, result_dtypes
from lowering.maps.strategies.protocol import Context, Decline, Fit


@dataclasses.dataclass(frozen=True)
class Unrolled(Fit):
    """A map of static length: the number of copies."""

    length: int = 0


class Unroll:
    """One copy of the body per element, where the length is static.

    ``auto`` unrolls a map of at most ``--max-unroll`` elements, and any
    static length where the runtime runs no loop that could take it;
    ``anyway`` (asked last) unrolls whatever the length, where the runtime
    cannot run the Loop the map would need.
    """

    name = "unroll"
    form = "unrolled"

    def __init__(self, anyway: bool = False) -> None:
        self.anyway = anyway

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        runtime, limit = context.runtime, context.max_unroll
        length = context.lengths(plan.node.inputs[0])
        if self.anyway:
            if length is None or not declined or not declined[-1].refusal:
                return Decline(self.form, "the Loop runs", said=False)
            why = f"{declined[-1].reason}; its input has {length} elements"
        elif length is None:
            if not runtime.loops:
                return Decline(self.form, "its length is known only at run time")
            return Decline(self.form, "its length is known only at run time", said=False)
        elif 0 < limit and length <= limit:
            why = f"its input has {length} elements (--max-unroll {limit})"
        elif not runtime.loops:
            why = f"its input has {length} elements, and {runtime.name} runs no Loop or Scan"
        elif lacks := runtime.missing(reads_sequences(plan)):
            why = (
                f"its input has {length} elements, and {runtime.name} has no {lacks[0]} "
                "to read them in a loop"
            )
        else:
            return Decline(self.form, f"its {length} elements are over --max-unroll", said=False)
        if (claim := context.claims(plan)) is not None:
            return Decline(self.form, claim)
        return Unrolled(self, why, writes=unroll_writes(plan), length=length)

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        assert isinstance(fit, Unrolled), "Unroll lowers what it fitted"
        return lower_by_unrolling(plan, replacer, fit.length)


def unroll_writes(plan: MapPlan) -> list[tuple[str, ir.DataType | None]]:
    """Elements are read with Split, Gather or Slice/Squeeze, results built into sequences."""
    reads = [(op, d) for d in element_dtypes(plan) for op in ("Split", "Slice", "Squeeze")]
    return reads + [("SequenceConstruct", d) for d in result_dtypes(plan)]


def lower_by_unrolling(plan: MapPlan, replacer: Replacer, length: int) -> list[ir.Node]:
    """Rewrite ``plan``'s map as ``length`` copies of its body; returns the new nodes."""
    body, inputs = plan.body, plan.inputs
    replacer.flush_within(body)  # maps nested in the body, at any depth, are rewritten already
    new_nodes: list[ir.Node] = []
    shared_constants = _initializers_as_constants(body, new_nodes)
    elements = [
        _elements(outer, length, new_nodes, _dtype(element), plan.opset, plan.proof)
        if sequence
        else None
        for outer, sequence, element in zip(
            inputs, plan.is_sequence, plan.element_types, strict=True
        )
    ]
    results: list[list[ir.Value]] = [[] for _ in body.outputs]
    for i in range(length):
        outputs = _copy_body(body, i, inputs, elements, shared_constants, new_nodes)
        for k, output in enumerate(outputs):
            results[k].append(output)
    sequences = []
    for values, (type_, _) in zip(results, plan.result_types, strict=True):
        if length:
            construct = fresh(new_node("SequenceConstruct", values))
        else:
            construct = fresh(new_node("SequenceEmpty", [], {"dtype": type_.dtype.value}))
        new_nodes.append(construct)
        sequences.append(construct.outputs[0])
    replacer.replace(plan, new_nodes, sequences)
    # What each copy tests about its element is now known: fold it there.
    release(body)

    def discard(owner, nodes: list[ir.Node]) -> None:
        # Removed with the maps, in one batch per graph (Replacer.finish).
        replacer._removed.setdefault(owner, []).extend(nodes)

    return fold_static(plan.located.scope.owner, new_nodes, plan.opset, discard, plan.proof.doubted)


def _initializers_as_constants(
    body: ir.Graph, new_nodes: list[ir.Node]
) -> dict[ir.Value, ir.Value]:
    """A Constant for each of ``body``'s initializers, which every copy shares."""
    shared_constants: dict[ir.Value, ir.Value] = {}
    for initializer in body.initializers.values():
        constant = fresh(new_node("Constant", [], {"value": initializer.const_value}))
        output = constant.outputs[0]
        output.type, output.shape = initializer.type, initializer.shape  # whole, even if unknown
        shared_constants[initializer] = output
        new_nodes.append(constant)
    return shared_constants


def _copy_body(
    body: ir.Graph,
    i: int,
    inputs: list[ir.Value],
    elements: list[list[ir.Value] | None],
    shared_constants: dict[ir.Value, ir.Value],
    new_nodes: list[ir.Node],
) -> list[ir.Value]:
    """Add to ``new_nodes`` a copy of ``body`` reading element ``i``; returns its results."""
    copy = body.clone(allow_outer_scope_values=True)
    mapping = {
        copied: (values[i] if values is not None else outer)
        for copied, outer, values in zip(copy.inputs, inputs, elements, strict=True)
    }
    for original, copied in zip(
        body.initializers.values(), copy.initializers.values(), strict=True
    ):
        mapping[copied] = shared_constants[original]
    outputs = [mapping.get(v, v) for v in copy.outputs]
    copy.outputs.clear()
    _name_copy(copy)
    copy_nodes = list(copy)
    copy.remove(copy_nodes)
    for value, replacement in mapping.items():
        value.replace_all_uses_with(replacement)
    for copied_node in copy_nodes:
        for output in copied_node.outputs:
            output.shape = None  # shapes may differ between elements
    new_nodes += copy_nodes
    return outputs


def _name_copy(copy: ir.Graph) -> None:
    """Each copy gets its own names, built from the body's, down to the graphs nested in it."""
    for copied_node in nodes_within(copy):
        fresh(copied_node, copied_node.name or None)
        for output in copied_node.outputs:
            fresh(output, output.name or None)
    for nested in list(graphs_within(copy))[1:]:
        for value in nested.inputs:
            fresh(value, value.name or None)


def _elements(
    sequence: ir.Value,
    length: int,
    new_nodes: list[ir.Node],
    dtype: ir.DataType | None,
    opset: int,
    proof: Proof,
) -> list[ir.Value]:
    """The ``length`` elements of ``sequence``, read without a loop.

    A ``SequenceConstruct``'s inputs are its elements; a split tensor's
    slices are read with ``Gather`` (no ``split``) or one ``Split`` (static
    sizes); anything else with ``SequenceAt`` at a constant index.
    """
    producer = sequence.producer()
    if (
        producer is not None
        and is_onnx_op(producer, "SequenceConstruct")
        and len(producer.inputs) >= length
    ):
        values = [v for v in producer.inputs[:length] if v is not None]
        if len(values) == length:
            return values
    source = split_source(sequence)
    if source is not None:
        tensor, axis, keepdims = source
        values = []
        for i in range(length):
            reads = read_slice(tensor, i, axis, keepdims, dtype, opset)
            new_nodes += reads
            values.append(reads[-1].outputs[0])
        return values
    sizes = _static_split_sizes(producer, proof)
    if sizes is not None and len(sizes) >= length:
        assert producer is not None, "the sizes are its split's"
        # One Split makes all of the sequence's elements, even where the
        # trip count (the first input's length) uses fewer of them.
        whole = producer.inputs[0]
        assert whole is not None, "SplitToSequence has its input"
        axis = producer.attributes.get_int("axis", 0)
        split = with_axes("Split", whole, sizes, opset, {"axis": axis}, num_outputs=len(sizes))
        new_nodes += split
        return list(split[-1].outputs[:length])
    values = []
    for i in range(length):
        at = fresh(new_node("SequenceAt", [sequence, _constant(np.array(i, np.int64), new_nodes)]))
        new_nodes.append(at)
        values.append(at.outputs[0])
    return values


def _dtype(element: TypeAndShape | None) -> ir.DataType | None:
    return element[0].dtype if element is not None else None


def _constant(value: np.ndarray, new_nodes: list[ir.Node]) -> ir.Value:
    node = constant_node(value)
    new_nodes.append(node)
    return node.outputs[0]


def _static_split_sizes(producer: ir.Node | None, proof: Proof) -> list[int] | None:
    """The sizes of all elements of a ``SplitToSequence`` with a constant ``split``
    (a scalar one: of a split dim that is a fact, :meth:`Proof.declarable`)."""
    if (
        producer is None
        or not is_onnx_op(producer, "SplitToSequence")
        or len(producer.inputs) < 2
        or producer.inputs[1] is None
    ):
        return None
    split = constant_array(producer.inputs[1])
    if split is None:
        return None
    if split.ndim == 1:
        return [int(s) for s in split]
    tensor = producer.inputs[0]
    tensor_shape = proof.declarable(tensor) if tensor is not None else None
    axis = producer.attributes.get_int("axis", 0)
    dim = tensor_shape[axis] if tensor_shape is not None else None
    if not isinstance(dim, int):
        return None
    step = int(split)
    if step <= 0:
        return None
    return [min(step, dim - start) for start in range(0, dim, step)]
