"""The rules that read a sequence's tensors directly, where the sequence is known.

After an unrolled map (:mod:`lowering.maps.strategies.unroll`) a model reads tensors
out of ``SequenceConstruct`` results that it could read directly, and
exporters write such chains of their own. Runtimes without sequence support
(OpenVINO, tract) refuse those ops, so these rules rewrite them away::

    SequenceInsert(s, t[, p]) of a known s             ->  SequenceConstruct(..)
    SequenceErase(s[, p]) of a known s                 ->  SequenceConstruct(..)
    SplitToSequence(X[, split]) read by an erase or
        an insert, at static bounds                    ->  SequenceConstruct(Slice(X, ..), ..)
    Identity(s) of a sequence                          ->  s   (where it need not stay)
    SequenceAt(SequenceConstruct(t_0, .., t_k-1), i)   ->  t_i        (i constant)
    SequenceAt(SequenceConstruct(t_0, .., t_k-1), i)   ->  Gather(Concat(Unsqueeze(t_j, 0)..), i)
                                                          (i computed, the t_j of one proven shape)
    SequenceAt(SplitToSequence(X[, split]), i)         ->  Slice(X, [start], [end], [axis])
                                                          (Gather without split, keepdims 0;
                                                          a computed split: at its bounds)
    SequenceLength(s)                                 ->  Constant   (length of s static)
    SequenceLength(SplitToSequence(X, split))         ->  the count of the split's bounds
    SequenceLength(SplitToSequence(X))                ->  Gather(Shape(X), axis)
    ConcatFromSequence<axis>(SequenceConstruct(t..))  ->  Concat<axis>(t..)
    ConcatFromSequence<axis, new_axis = 1>(...)       ->  Concat<axis>(Unsqueeze(t_i, axis)..)

(:func:`read_as_tensors`: each rule checks its node before it rewrites it,
and declines where it does not apply, leaving the node as written); the
sequence ops left without a use then go (:mod:`lowering.sequences.dead`).
Two passes apply them: :class:`~lowering.passes.eliminate_sequences.EliminateSequencesPass`
after the maps, :class:`~lowering.passes.read_sequences.ReadSequencesPass`
on a model whose maps were not lowered. The rule for
``SplitToSequence`` is for what torch writes for ``torch.split`` and
``torch.chunk`` next to its maps (a split read at constant positions); it
applies where i is a constant, the split axis has a static size, and
``split`` is absent or a constant, so every element's bounds are known and
i is checked against the element count. Where ``split`` is computed (a
chunk size from data, lengths from data), the element is read at bounds
computed once per split (:mod:`lowering.maps.split_bounds`), whose Gathers
check i against the element count at run time, as SequenceAt does. A chunk
size with keepdims = 0 is left as written: onnxruntime drops the axis of
a chunk of 1, the spec keeps it. The first rule is for
what exporters write around maps: paddle2onnx's ``array_to_tensor`` builds
its result one insert at a time, which after unrolling is a chain of
inserts at static positions::

    s_0 = SequenceEmpty()                           s_2 = SequenceConstruct(a, b)
    s_1 = SequenceInsert(s_0, a)           ->       y   = Concat<axis>(Unsqueeze(a, axis),
    s_2 = SequenceInsert(s_1, b)                                       Unsqueeze(b, axis))
    y   = ConcatFromSequence<axis, new_axis = 1>(s_2)

An insert is folded when the sequence it inserts into is a SequenceEmpty or
SequenceConstruct that nothing else reads, its position is absent (append)
or a constant valid for that length (-n..n), and its result is not a graph
output (a sequence the graph returns is left as it is built); the chain
then folds one insert at a time (that rule alone is
:class:`~lowering.passes.fold_insert_chains.FoldInsertChainsPass`, which
runs before the maps are lowered). A
rewritten node keeps its name and its output value, so consumers and graph
outputs are untouched. Positions are read through the constant evaluator
(:func:`lowering.irutils.static_values.static_array`: paddle2onnx's
``Cast(Add(Mul(Cast(0), 1), k))`` is k). A model where no rule applies
comes out exactly as it went in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove_model
from lowering.analysis.sequence_length import SequenceLengths
from lowering.irutils.axes import axes_form
from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.dead_code import become_identity, remove_unread
from lowering.irutils.identities import bypass_identity
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import SEQUENCE_OPS, is_onnx_domain, is_onnx_op
from lowering.irutils.pins import apply_pin, may_need_pin, plan_pins, unpinned_output
from lowering.irutils.scopes import Scope, find_nodes
from lowering.irutils.static_values import FOLDABLE_OPS, static_array
from lowering.maps.loop_body import read_slice
from lowering.maps.split_bounds import (
    Bounds,
    keepdims_disputed,
    ragged_split,
    read_bounds,
    split_bounds,
    split_rank,
)
from lowering.rewrites import Rewrite
from lowering.runtimes.ort_kernels import unsupported

_INT64 = ir.TensorType(ir.DataType.INT64)


def read_as_tensors(model: ir.Model) -> list[Rewrite]:
    """Apply every rule to every node, in every scope, outer scopes first; one
    :class:`Rewrite` per node rewritten, its ``strategy`` the op it became.

    The nodes a rule reads through (a chain's inserts, a split's reads) are
    rewritten in order, so a chain folds one node at a time. Unread sequence
    ops stay (:func:`lowering.sequences.dead.remove_dead_sequences` removes them).
    """
    reading = _Reading(model)
    rewrites = []
    for located in find_nodes(model, lambda n: is_onnx_domain(n.domain) and n.op_type in _RULES):
        node, scope = located.node, located.scope
        name, op_type = node.name or "", node.op_type  # before the rule rewrites them
        done = reading.rewrite(node, scope)
        if done is not None:
            rewrites.append(Rewrite(scope.description, name, op_type, None, [node], *done))
    reading.finish()
    return rewrites


class _Reading:
    """What the rules share in one run: the sequences' static lengths, the
    bounds computed once per split, the proof (made when first asked), and
    the nodes whose outputs a rewrite exposed to ONNX's inference."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self.lengths = SequenceLengths()
        self.bounds: dict[ir.Value, Bounds] = {}  # of each split read at computed bounds
        self.shapes = _Shapes(model)
        self.exposed: list[tuple[ir.Node, int, None]] = []

    def rewrite(self, node: ir.Node, scope: Scope) -> tuple[str, str] | None:
        """What ``node`` became (its op and why), or None where no rule applies."""
        opset = scope.opset(self.model) or 1
        elements = _construct_inputs(node.inputs[0]) if node.inputs else None
        reads = [*(elements or [])] if node.op_type in _EXPOSING else []
        reads += _split_inputs(node)
        if _unpinned(reads, opset, self.shapes):
            return None  # the sequence holds a shape ONNX may get wrong, with no pin
        done = self._apply(node, scope.owner, opset)
        if done is not None:
            # A sequence held their shapes (or a split read them itself): ONNX's
            # inference, and the buffers onnxruntime plans by it, now read them.
            self.exposed += [(n, opset, None) for n in _producers(reads)]
        return done

    def _apply(self, node: ir.Node, owner, opset: int) -> tuple[str, str] | None:
        op_type = node.op_type
        if _RULES[op_type](node, owner, self.lengths, opset):
            return _DONE[op_type]
        if op_type == "SequenceAt":
            return _read_element(node, owner, opset, self.bounds, self.shapes)
        if op_type == "SequenceLength":
            return _split_count(node, owner, self.bounds, opset)
        return None

    def finish(self) -> None:
        """Drop the counts no read needed; pin what the rewrites exposed."""
        for split in self.bounds.values():  # a read at a constant position needs no count
            remove_unread(split.count, {"Size"})
        if any(may_need_pin(node) for node, _, _ in self.exposed):
            for pin in plan_pins(self.exposed, self.shapes.proven()):
                apply_pin(pin, self.model.graph)


def _read_element(
    node: ir.Node, owner, opset: int, bounds: dict[ir.Value, Bounds], shapes: _Shapes
) -> tuple[str, str] | None:
    """What a SequenceAt not at a constant position of a construct became, if anything."""
    if _split_element(node, owner, opset):
        return ("Slice", "an element of a split at static bounds")
    if _computed_split_element(node, owner, opset, bounds):
        return ("Slice", "an element of a split at bounds computed once per split")
    if _stack_element(node, owner, opset, shapes):
        return ("Gather", "an element of same-shape tensors at a computed position")
    return None


def _split_inputs(node: ir.Node) -> list[ir.Value]:
    """The tensor and the sizes a split reads, where ``node`` is one or reads
    the sequence of one: a rule reads them itself (a Slice, a Shape, bounds)."""
    split = node
    if not is_onnx_op(node, "SplitToSequence"):
        sequence = node.inputs[0] if node.inputs else None
        split = sequence.producer() if sequence is not None else None  # type: ignore[assignment]
    if split is None or not is_onnx_op(split, "SplitToSequence"):
        return []
    return [v for v in split.inputs[:2] if v is not None]


def _producers(elements: list[ir.Value]) -> list[ir.Node]:
    return list(dict.fromkeys(p for v in elements if (p := v.producer()) is not None))


def _unpinned(elements: list[ir.Value], opset: int, shapes: _Shapes) -> bool:
    """Whether an element is made by a node ONNX may size wrong that has no pin
    (:mod:`lowering.irutils.pins`): read as a tensor, its claim would reach
    the readers' inference, which the sequence kept it from; the read stays,
    as the original's own computation."""
    for node in _producers(elements):
        if node.graph is None or not may_need_pin(node):
            continue
        proof = shapes.proven()
        if unpinned_output(node, [proof.operand(v) for v in node.inputs], opset) is not None:
            return True
    return False


def _construct_inputs(sequence: ir.Value | None) -> list[ir.Value] | None:
    producer = sequence.producer() if sequence is not None else None
    if (
        producer is None
        or producer.op_type != "SequenceConstruct"
        or not is_onnx_domain(producer.domain)
    ):
        return None
    return _present(producer.inputs)


def _present(inputs: Sequence[ir.Value | None]) -> list[ir.Value] | None:
    """SequenceConstruct's elements; None if one is missing (malformed: not read)."""
    elements = [v for v in inputs if v is not None]
    return elements if len(elements) == len(inputs) else None


def fold_insert_chains(model: ir.Model) -> bool:
    """Only the first rule: every static insert chain, in every scope, becomes a construct.

    :class:`~lowering.passes.fold_insert_chains.FoldInsertChainsPass` runs it
    before the maps are lowered, so
    that a map over such a chain reads the inserted tensors, whose shapes
    are declared, directly.
    """
    modified = False
    for located in find_nodes(model, lambda n: n.op_type == "SequenceInsert"):
        if is_onnx_domain(located.node.domain):
            opset = located.scope.opset(model) or 1
            modified = _sequence_insert(located.node, located.scope.owner, None, opset) or modified
    return modified


def _only_reader_elements(sequence: ir.Value | None) -> list[ir.Value] | None:
    """The elements of a SequenceEmpty or SequenceConstruct result read only once."""
    if sequence is None:
        return None
    producer = sequence.producer()
    if (
        producer is None
        or not is_onnx_domain(producer.domain)
        or len(sequence.uses()) != 1
        or sequence.is_graph_output()
    ):
        return None
    if producer.op_type == "SequenceConstruct":
        return _present(producer.inputs)
    if producer.op_type == "SequenceEmpty":
        return []
    return None


def _sequence_insert(node: ir.Node, owner, lengths, opset: int) -> bool:
    sequence = node.inputs[0]
    before = _only_reader_elements(sequence)
    tensor = node.inputs[1] if len(node.inputs) > 1 else None
    if before is None or tensor is None or node.outputs[0].is_graph_output():
        return False  # (a sequence the graph returns is left as it is built)
    position = _static_position(node, 2, len(before), len(before), inserting=True)
    if position is None:
        return False
    elements = [*before[:position], tensor, *before[position:]]
    if not _one_dtype(elements, sequence):
        return False  # the types disagree: leave the runtime's error in place
    inputs = list(node.inputs)
    _become_construct(node, elements)
    for old in inputs[2:]:
        remove_unread(old, FOLDABLE_OPS)
    return True


def _static_position(
    node: ir.Node, index: int, count: int, default: int, *, inserting: bool
) -> int | None:
    """Input ``index`` of an insert or erase into ``count`` elements, counted from
    the front: ``default`` where absent; None where it is no static integer in
    range (-count..count for an insert, ..count - 1 for an erase): out of
    range, the runtime's error stays in place."""
    value = node.inputs[index] if len(node.inputs) > index else None
    if value is None:
        return default
    array = static_array(value)
    if array is None or array.size != 1 or array.dtype.kind not in "iu":
        return None
    position = int(array.reshape(()))
    if not -count <= position <= (count if inserting else count - 1):
        return None
    return position + count if position < 0 else position


def _one_dtype(elements: list[ir.Value], sequence: ir.Value | None) -> bool:
    """Whether ``elements`` agree on one element type, and with the dtype of the
    SequenceEmpty that made ``sequence``, if one did."""
    dtypes = {v.dtype for v in elements if v.type is not None} - {ir.DataType.UNDEFINED}
    empty = sequence.producer() if sequence is not None else None
    assert empty is not None, "_only_reader_elements found the producer"
    if empty.op_type == "SequenceEmpty":
        dtypes.add(ir.DataType(empty.attributes.get_int("dtype", ir.DataType.FLOAT.value)))
    return len(dtypes) <= 1


def _sequence_at(node: ir.Node, owner, lengths, opset: int) -> bool:
    tensors = _construct_inputs(node.inputs[0])
    position = static_array(node.inputs[1]) if len(node.inputs) > 1 else None
    if tensors is None or position is None or position.size != 1:
        return False
    index = int(position.reshape(()))
    if not -len(tensors) <= index < len(tensors):
        return False  # out of range: leave the runtime's error in place
    become_identity(node, tensors[index], owner)
    return True


def _split_element(node: ir.Node, owner, opset: int) -> bool:
    """``SequenceAt(SplitToSequence(X, split), i)`` as a slice of X, where its bounds are static.

    Without ``split`` every element is one index of the axis (kept with
    keepdims 1); a scalar ``split`` c cuts chunks of c, the last one
    shorter; a 1-D ``split`` gives the sizes, which must add up to the axis.
    """
    sequence = node.inputs[0]
    producer = sequence.producer() if sequence is not None else None
    position = static_array(node.inputs[1]) if len(node.inputs) > 1 else None
    split = _static_split(producer, opset)
    if split is None or position is None or position.size != 1 or position.dtype.kind not in "iu":
        return False
    index = int(position.reshape(()))
    if not -len(split.sizes) <= index < len(split.sizes):
        return False  # out of range: leave the runtime's error in place
    nodes = split.element(index % len(split.sizes))
    owner.insert_before(node, nodes)
    become_identity(node, nodes[-1].outputs[0], owner)
    return True


@dataclasses.dataclass
class _StaticSplit:
    """A SplitToSequence whose every element's bounds are static."""

    tensor: ir.Value
    axis: int
    sizes: list[int]
    keepdims: bool
    opset: int

    def element(self, index: int) -> list[ir.Node]:
        """The nodes reading element ``index`` (in range) as a slice, the last one's output."""
        tensor, axis, sizes = self.tensor, self.axis, self.sizes
        start = sum(sizes[:index])
        assert tensor.shape is not None and tensor.type is not None, "_static_split checks it"
        dims = list(tensor.shape)
        if self.keepdims:
            dims[axis] = sizes[index]
        else:
            del dims[axis]
        nodes = read_slice(
            tensor, start, axis, self.keepdims, tensor.dtype, self.opset, size=sizes[index]
        )
        nodes[-1].outputs[0].type = tensor.type
        nodes[-1].outputs[0].shape = ir.Shape(dims)
        return nodes


def _static_split(producer: ir.Node | None, opset: int) -> _StaticSplit | None:
    """``producer`` as a :class:`_StaticSplit`, if it is a SplitToSequence of static bounds
    (an invalid split stays, and its error with it)."""
    if producer is None or not is_onnx_op(producer, "SplitToSequence"):
        return None
    static = _static_axis(producer)
    if static is None:
        return None
    tensor, axis, size = static
    split = producer.inputs[1] if len(producer.inputs) > 1 else None
    sizes = _split_sizes(split, size)
    if sizes is None:
        return None
    if split is not None and keepdims_disputed(producer, split_rank(split)):
        return None  # a chunk size with keepdims 0: onnxruntime and the spec disagree
    dtype = tensor.dtype
    if unsupported("Slice", dtype, opset) is not None and (
        any(n != 1 for n in sizes) or unsupported("Gather", dtype, opset) is not None
    ):
        return None  # read_slice reads one entry with Gather where it can, else with Slice
    keepdims = split is not None or producer.attributes.get_int("keepdims", 1) != 0
    return _StaticSplit(tensor, axis, sizes, keepdims, opset)


def _static_axis(split: ir.Node) -> tuple[ir.Value, int, int] | None:
    """The tensor a split splits, its axis (from 0) and that axis's size, where static."""
    tensor = split.inputs[0]
    if tensor is None or tensor.shape is None or tensor.type is None:
        return None
    rank = tensor.shape.rank()
    axis = split.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return None
    size = tensor.shape[axis % rank]
    return (tensor, axis % rank, size) if isinstance(size, int) else None


def _split_to_construct(node: ir.Node, owner, lengths, opset: int) -> bool:
    """A split of static bounds that an erase or insert reads, as a construct of its slices::

        s = SplitToSequence(X, [2, 4])      ->    s = SequenceConstruct(Slice(X, 0, 2), Slice(X, 2, 6))
        u = SequenceErase(s, 0)                   u = SequenceErase(s, 0)   (then folded: below)

    Only where the split is read once, by an erase or an insert (a split
    read by SequenceAt is read where it is, a slice at a time).
    """
    output = node.outputs[0]
    uses = list(output.uses())
    if len(uses) != 1 or output.is_graph_output():
        return False
    reader = uses[0].node
    if reader.op_type not in ("SequenceErase", "SequenceInsert") or uses[0].idx != 0:
        return False
    split = _static_split(node, opset)
    if split is None or not split.sizes or not _folds(reader, len(split.sizes)):
        return False  # (an empty construct is no SequenceConstruct)
    elements = [split.element(i) for i in range(len(split.sizes))]
    owner.insert_before(node, [n for nodes in elements for n in nodes])
    sizes = node.inputs[1] if len(node.inputs) > 1 else None
    _become_construct(node, [nodes[-1].outputs[0] for nodes in elements])
    remove_unread(sizes, FOLDABLE_OPS)
    return True


def _folds(reader: ir.Node, n: int) -> bool:
    """Whether the erase or insert ``reader`` of n known elements folds into a construct
    (planned before the split it reads is rewritten)."""
    if reader.outputs[0].is_graph_output():
        return False
    inserting = reader.op_type == "SequenceInsert"
    index = 2 if inserting else 1
    position = _static_position(reader, index, n, 0, inserting=inserting)
    return position is not None and (inserting or n > 1)


def _sequence_erase(node: ir.Node, owner, lengths, opset: int) -> bool:
    """An erase from a sequence of known elements, at a static position in range, or the last."""
    before = _only_reader_elements(node.inputs[0])
    if not before or node.outputs[0].is_graph_output():
        return False
    position = _static_position(node, 1, len(before), len(before) - 1, inserting=False)
    if position is None:
        return False
    erased = before[position]
    elements = [v for i, v in enumerate(before) if i != position]
    if not elements:
        return False  # (an empty construct is no SequenceConstruct)
    inputs = list(node.inputs)
    _become_construct(node, elements)
    for old in inputs[1:]:
        remove_unread(old, FOLDABLE_OPS)
    remove_unread(inputs[0], {"SequenceConstruct"})  # (it was read by this erase only)
    remove_unread(erased, _READS)  # a slice of a split nothing else reads
    return True


def _become_construct(node: ir.Node, elements: list[ir.Value]) -> None:
    """Make ``node`` a SequenceConstruct of ``elements`` (its output, name and readers kept)."""
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    node.resize_inputs(len(elements))
    for index, value in enumerate(elements):
        node.replace_input_with(index, value)
    node.op_type = "SequenceConstruct"
    node.attributes.clear()


def _sequence_identity(node: ir.Node, owner, lengths, opset: int) -> bool:
    """An Identity of a sequence: its readers read its input.

    Identity takes a sequence from opset 14 only (``--target-opset 13``
    refuses it); TorchScript returns a list through one. It stays where
    :func:`lowering.irutils.identities.must_stay` says (a graph output copying
    a value not made in its graph).
    """
    source = node.inputs[0] if len(node.inputs) == 1 else None
    if source is None or not (_is_sequence(source) or _is_sequence(node.outputs[0])):
        return False
    if not bypass_identity(node):
        return False
    node.replace_input_with(0, None)
    owner.remove(node, safe=True)
    return True


def _is_sequence(value: ir.Value) -> bool:
    if isinstance(value.type, ir.SequenceType):
        return True
    producer = value.producer()
    return (
        producer is not None
        and is_onnx_domain(producer.domain)
        and producer.op_type in ("SequenceMap", *SEQUENCE_OPS)
        and producer.op_type not in ("SequenceAt", "SequenceLength", "ConcatFromSequence")
    )


def _stack_element(node: ir.Node, owner, opset: int, shapes: _Shapes) -> bool:
    """``SequenceAt(SequenceConstruct(t_0, .., t_k-1), i)`` at a computed i, where every t_j
    has one proven static shape and one dtype::

        s = SequenceConstruct(t_0, .., t_k-1)      stack = Concat<axis = 0>(Unsqueeze(t_0, [0]), ..)
        y = SequenceAt(s, i)                  ->   y     = Gather<axis = 0>(stack, i)

    Gather, like SequenceAt, counts a negative i from the back and, in
    onnxruntime, refuses one out of range, so the original's failure stays.
    i must be proven a scalar (SequenceAt's own reading of another shape is
    not Gather's).
    """
    tensors = _construct_inputs(node.inputs[0])
    position = node.inputs[1] if len(node.inputs) > 1 else None
    if not tensors or position is None or static_array(position) is not None:
        return False  # (a constant position: _sequence_at, in range or not)
    if position.dtype not in (ir.DataType.INT32, ir.DataType.INT64) or shapes(position) != ():
        return False
    stacked = _stack_type(tensors, shapes, opset)
    if stacked is None:
        return False
    dtype, shape = stacked
    form = axes_form("Unsqueeze", [0], opset)
    unsqueezes = [fresh(new_node("Unsqueeze", [t, *form.inputs], form.attributes)) for t in tensors]
    stack = fresh(new_node("Concat", [u.outputs[0] for u in unsqueezes], {"axis": 0}))
    gather = fresh(new_node("Gather", [stack.outputs[0], position], {"axis": 0}))
    stack.outputs[0].type = ir.TensorType(dtype)
    stack.outputs[0].shape = ir.Shape([len(tensors), *shape])
    gather.outputs[0].type = ir.TensorType(dtype)
    gather.outputs[0].shape = ir.Shape(list(shape))
    owner.insert_before(node, [*form.nodes, *unsqueezes, stack, gather])
    become_identity(node, gather.outputs[0], owner)
    return True


def _stack_type(
    tensors: list[ir.Value], shapes: _Shapes, opset: int
) -> tuple[ir.DataType, tuple[int, ...]] | None:
    """The one dtype and static shape every tensor is proven to have, where
    onnxruntime stacks and gathers that dtype; else None."""
    dtypes = {shapes.dtype(t) for t in tensors}
    known = {shapes(t) for t in tensors}
    dtype, shape = dtypes.pop(), known.pop()
    if dtypes or known or shape is None or not all(isinstance(d, int) for d in shape):
        return None
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        return None
    if any(unsupported(op, dtype, opset) is not None for op in ("Unsqueeze", "Concat", "Gather")):
        return None
    return dtype, shape


def _split_count(
    node: ir.Node, owner, bounds: dict[ir.Value, Bounds], opset: int
) -> tuple[str, str] | None:
    """``SequenceLength(SplitToSequence(X[, split]))`` where it is not static: the count of
    the split's bounds (:mod:`lowering.maps.split_bounds`), computed once per split;
    without a split, one element per index along the axis, the axis's dim::

        n = SequenceLength(SplitToSequence<axis>(X, c))  ->  n = Size(Range(0, dim, c))
        n = SequenceLength(SplitToSequence<axis>(X))     ->  n = Gather(Shape(X), axis)

    that is ceil(dim / c) for a chunk size c (0 for an empty axis, as
    onnxruntime counts), Size(L) for lengths L; the bounds' guard keeps the
    split's errors. Without a split, keepdims changes each element, not
    their count, and an empty axis has none (as onnxruntime counts); Gather,
    not a Shape with start and end (opset 15), reads the dim: it refuses
    an axis out of range, as the split does, where Shape's bounds clamp.
    The split then goes once its reads became Slices. A Shape of an X that
    ONNX may size wrong, with no pin, is not read (:func:`_unpinned`, as for
    every rule that reads a split's X): the length stays the split's.
    """
    sequence = node.inputs[0] if node.inputs else None
    producer = sequence.producer() if sequence is not None else None
    if (
        producer is not None
        and is_onnx_op(producer, "SplitToSequence")
        and producer.inputs[0] is not None
        and (len(producer.inputs) < 2 or producer.inputs[1] is None)
    ):
        axis = producer.attributes.get_int("axis", 0)
        shape = fresh(new_node("Shape", [producer.inputs[0]]))
        at = constant_node(np.array(axis, np.int64), "axis")
        dim = fresh(new_node("Gather", [shape.outputs[0], at.outputs[0]], {"axis": 0}))
        shape.outputs[0].type, shape.outputs[0].shape = _INT64, ir.Shape([None])
        dim.outputs[0].type, dim.outputs[0].shape = _INT64, ir.Shape([])
        owner.insert_before(node, [shape, at, dim])
        become_identity(node, dim.outputs[0], owner)
        return ("Gather", "the element count of a split with no sizes: the dim it splits")
    source = ragged_split(sequence)
    if source is None or sequence is None:
        return None
    become_identity(node, _bounds_of(sequence, source, bounds).count, owner)
    return ("Size", "the element count of a split, computed from its bounds")


def _bounds_of(sequence: ir.Value, source, bounds: dict[ir.Value, Bounds]) -> Bounds:
    """The bounds of the split ``source`` that makes ``sequence``, computed once, right after it."""
    if sequence not in bounds:
        producer = sequence.producer()
        assert producer is not None and producer.graph is not None, "ragged_split found it"
        bounds[sequence] = split_bounds(source)
        producer.graph.insert_after(producer, bounds[sequence].nodes)
    return bounds[sequence]


class _Shapes:
    """The values' proven shapes (:mod:`lowering.analysis.proven_shapes`), proven when first asked."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self.proof: Proof | None = None

    def __call__(self, value: ir.Value) -> tuple | None:
        return self.proven().shape(value)

    def dtype(self, value: ir.Value) -> ir.DataType | None:
        known = self.proven().operand(value)
        return None if known is None else known.dtype

    def proven(self) -> Proof:
        if self.proof is None:
            self.proof = prove_model(self.model, fill=True)
        return self.proof


def _computed_split_element(
    node: ir.Node, owner, opset: int, bounds: dict[ir.Value, Bounds]
) -> bool:
    """``SequenceAt(SplitToSequence(X, split), k)`` at a constant k, with a computed split::

        s = SplitToSequence<axis>(X, split)        starts, ends = split_bounds(X, split)
        y = SequenceAt(s, k)                  ->   y = Slice(X, Gather(starts, [k]),
                                                             Gather(ends, [k]), [axis])

    (:mod:`lowering.maps.split_bounds`): the bounds are computed once per
    split, right after it, and guard SplitToSequence's errors; Gather, like
    SequenceAt, counts a negative k from the back and refuses one out of
    range. torch writes this for ``torch.split`` with a computed size (GPT-2
    at opset 11: three reads of one split).
    """
    sequence = node.inputs[0]
    position = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
    source = ragged_split(sequence)
    if (
        source is None
        or sequence is None
        or position is None
        or position.size != 1
        or position.dtype.kind not in "iu"
        or unsupported("Slice", source.tensor.dtype, opset) is not None
        or _static_bounds(source)
    ):
        return False
    index = int(position.reshape(()))
    nodes = read_bounds(source.tensor, _bounds_of(sequence, source, bounds), index, source.axis)
    element = nodes[-1].outputs[0]
    element.type = source.tensor.type
    shape = source.tensor.shape
    if shape is not None and -len(shape) <= source.axis < len(shape):
        axis = source.axis % len(shape)
        element.shape = ir.Shape([None if i == axis else d for i, d in enumerate(shape)])
    owner.insert_before(node, nodes)
    become_identity(node, element, owner)
    return True


def _static_bounds(source) -> bool:
    """Whether :func:`_split_element` decides: a constant split of a static axis
    (an invalid one, or an index out of range, keeps the runtime's error in place)."""
    shape = source.tensor.shape
    if constant_array(source.split) is None or shape is None:
        return False
    return -len(shape) <= source.axis < len(shape) and isinstance(shape[source.axis], int)


def _split_sizes(split: ir.Value | None, size: int) -> list[int] | None:
    """The element sizes along the axis, or None where they are not static and valid."""
    if split is None:
        return [1] * size
    array = constant_array(split)
    if array is None or array.dtype.kind not in "iu":
        return None
    if array.ndim == 0:
        chunk = int(array)
        return [min(chunk, size - at) for at in range(0, size, chunk)] if chunk > 0 else None
    if array.ndim == 1 and (array >= 0).all() and int(array.sum()) == size:
        return [int(v) for v in array]
    return None


def _sequence_length(node: ir.Node, owner, lengths: SequenceLengths, opset: int) -> bool:
    length = lengths(node.inputs[0])
    if length is None:
        return False
    node.op_type = "Constant"
    node.attributes.clear()
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    node.resize_inputs(0)
    node.attributes["value"] = ir.AttrTensor("value", ir.tensor(np.array(length, np.int64)))
    return True


def _concat_from_sequence(node: ir.Node, owner, lengths, opset: int) -> bool:
    tensors = _construct_inputs(node.inputs[0])
    if not tensors:
        return False  # unknown, or empty: ConcatFromSequence of nothing is an error
    axis = node.attributes.get_int("axis", 0)
    new_axis = node.attributes.get_int("new_axis", 0)
    parts = tensors
    if new_axis:
        form = axes_form("Unsqueeze", [axis], opset)
        unsqueezes = [
            fresh(new_node("Unsqueeze", [t, *form.inputs], form.attributes)) for t in tensors
        ]
        owner.insert_before(node, [*form.nodes, *unsqueezes])
        parts = [u.outputs[0] for u in unsqueezes]
    node.op_type = "Concat"
    node.attributes.clear()
    node.attributes["axis"] = ir.AttrInt64("axis", axis)
    node.replace_input_with(0, None)
    node.resize_inputs(len(parts))
    for index, value in enumerate(parts):
        node.replace_input_with(index, value)
    return True


#: What reads an element of a split (:func:`lowering.maps.loop_body.read_slice`).
_READS = frozenset({"Constant", "Slice", "Gather", "Squeeze"})

#: The rules that read a SequenceConstruct's elements as tensors.
_EXPOSING = frozenset(["SequenceAt", "ConcatFromSequence"])

#: What each rule makes of the node it rewrites, and why it may.
_DONE = {
    "SequenceInsert": ("SequenceConstruct", "an insert into a sequence of known elements"),
    "SequenceErase": ("SequenceConstruct", "an erase from a sequence of known elements"),
    "SplitToSequence": ("SequenceConstruct", "a split of static bounds, as its slices"),
    "Identity": ("bypassed", "an Identity of a sequence"),
    "SequenceAt": ("direct read", "an element of a SequenceConstruct at a constant position"),
    "SequenceLength": ("Constant", "a static length"),
    "ConcatFromSequence": ("Concat", "a concat of known elements"),
}

_RULES = {
    "SplitToSequence": _split_to_construct,
    "SequenceErase": _sequence_erase,
    "Identity": _sequence_identity,
    "SequenceInsert": _sequence_insert,
    "SequenceAt": _sequence_at,
    "SequenceLength": _sequence_length,
    "ConcatFromSequence": _concat_from_sequence,
}
