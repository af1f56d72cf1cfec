"""Remove the sequence ops that lowering has made unnecessary.

After an unrolled map (:mod:`lowering.maps.strategies.unroll`) a model reads tensors
out of ``SequenceConstruct`` results that it could read directly. Runtimes
without sequence support (OpenVINO, tract) refuse those ops, so this pass
rewrites them away::

    SequenceInsert(s, t[, p]) of a known s             ->  SequenceConstruct(..)
    SequenceAt(SequenceConstruct(t_0, .., t_k-1), i)   ->  t_i        (i constant)
    SequenceAt(SplitToSequence(X[, split]), i)         ->  Slice(X, [start], [end], [axis])
                                                          (Gather without split, keepdims 0;
                                                          a computed split: at its bounds)
    SequenceLength(s)                                 ->  Constant   (length of s static)
    ConcatFromSequence<axis>(SequenceConstruct(t..))  ->  Concat<axis>(t..)
    ConcatFromSequence<axis, new_axis = 1>(...)       ->  Concat<axis>(Unsqueeze(t_i, axis)..)

and then removes sequence ops left without a use (not an erase or insert
at a position not proven in range: onnxruntime runs a node nothing reads,
and its failure is the model's). The rule for
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
:class:`FoldInsertChainsPass`, which runs before the maps are lowered). A
rewritten node keeps its name and its output value, so consumers and graph
outputs are untouched. :func:`lowering.pipeline` runs it only on models
where maps were lowered, so other models come out exactly as they went in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from lowering.analysis.sequence_length import SequenceLengths
from lowering.irutils.axes import axes_form
from lowering.irutils.constants import constant_array
from lowering.irutils.dead_code import become_identity, remove_unread, unread
from lowering.irutils.naming import fresh, name_fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import SEQUENCE_OPS, is_onnx_domain
from lowering.irutils.scopes import find_nodes, iter_scopes
from lowering.maps.plan import read_slice
from lowering.maps.split_bounds import (
    Bounds,
    keepdims_disputed,
    ragged_split,
    read_bounds,
    split_bounds,
    split_rank,
)
from lowering.passes.hide_unproven_outputs import Copied
from lowering.rewrites import LoweringResult, Rewrite
from lowering.runtimes.ort_kernels import unsupported


class EliminateSequencesPass(ir.passes.InPlacePass):
    """Read tensors straight from SequenceConstruct, fold static lengths, drop dead sequence ops.

    ``after_maps`` (the default): every rule, then every sequence op nothing
    reads is removed; what it rewrites is part of lowering the maps (it reads
    the sequences their rewrites wrote), and it reports no rewrite. Without
    it, for a model whose maps were not lowered, only the elements of splits
    are read as Slices (torch.split and torch.chunk with no map), and what
    they leave unread goes; the user's inserts and concats stay as written.
    Each such node is reported as a :class:`Rewrite`, its ``strategy`` the
    op it became.
    """

    def __init__(self, after_maps: bool = True) -> None:
        super().__init__()
        self.after_maps = after_maps

    def call(self, model: ir.Model) -> EliminationResult:
        rewrites: list[Rewrite] = []
        exposed: list[Copied] = []
        lengths = SequenceLengths()
        bounds: dict[ir.Value, Bounds] = {}  # of each split read at computed bounds
        for located in find_nodes(model, lambda n: is_onnx_domain(n.domain)):
            node = located.node
            op_type, name = node.op_type, node.name or ""
            if op_type not in _RULES or not (self.after_maps or op_type == "SequenceAt"):
                continue  # (without maps, only the split reads below)
            opset = located.scope.opset(model) or 1
            done = None
            elements = _construct_inputs(node.inputs[0]) if node.inputs else None
            if self.after_maps and _RULES[op_type](node, located.scope.owner, lengths, opset):
                done = _DONE[op_type]
                if op_type in _EXPOSING:  # a sequence hid their shapes from ONNX's inference
                    exposed += _producers(elements or [], opset, located.scope.description, node)
            if done is None and op_type == "SequenceAt":
                if _split_element(node, located.scope.owner, opset):
                    done = ("Slice", "an element of a split at static bounds")
                elif _computed_split_element(node, located.scope.owner, opset, bounds):
                    done = ("Slice", "an element of a split at bounds computed once per split")
            if done is not None:
                scope = located.scope.description
                rewrites.append(Rewrite(scope, name, op_type, None, [node], *done))
        for split in bounds.values():  # a read at a constant position needs no count
            remove_unread(split.count, {"Size"})
        modified = bool(rewrites)
        if modified or self.after_maps:
            modified = _remove_dead(model) or modified
        if modified:
            name_fresh(model)
        return EliminationResult(
            model, modified=modified, rewrites=[] if self.after_maps else rewrites, exposed=exposed
        )


@dataclasses.dataclass
class EliminationResult(LoweringResult):
    """What :class:`EliminateSequencesPass` did.

    Attributes:
        exposed: The nodes whose outputs were elements of a SequenceConstruct,
            now read as tensors: their shapes, which the sequence hid, reach
            ONNX's inference (for
            :class:`~lowering.passes.hide_unproven_outputs.HideUnprovenOutputsPass`).
    """

    exposed: list[Copied] = dataclasses.field(default_factory=list)


def _producers(elements: list[ir.Value], opset: int, scope: str, reader: ir.Node) -> list[Copied]:
    nodes = dict.fromkeys(p for v in elements if (p := v.producer()) is not None)
    return [Copied(node, opset, None, scope, reader) for node in nodes]


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

    :class:`FoldInsertChainsPass` runs it before the maps are lowered, so
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
    position = len(before)
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        array = constant_array(node.inputs[2])
        if array is None or array.size != 1 or array.dtype.kind not in "iu":
            return False
        position = int(array.reshape(()))
        if not -len(before) <= position <= len(before):
            return False  # out of range: leave the runtime's error in place
        if position < 0:
            position += len(before)
    elements = [*before[:position], tensor, *before[position:]]
    dtypes = {v.dtype for v in elements if v.type is not None} - {ir.DataType.UNDEFINED}
    empty = sequence.producer() if sequence is not None else None
    assert empty is not None, "_only_reader_elements found the producer"
    if empty.op_type == "SequenceEmpty":
        dtypes.add(ir.DataType(empty.attributes.get_int("dtype", ir.DataType.FLOAT.value)))
    if len(dtypes) > 1:
        return False  # the types disagree: leave the runtime's error in place
    inputs = list(node.inputs)
    for index in range(len(node.inputs)):
        node.replace_input_with(index, None)
    node.resize_inputs(len(elements))
    for index, value in enumerate(elements):
        node.replace_input_with(index, value)
    node.op_type = "SequenceConstruct"
    node.attributes.clear()
    for old in inputs[2:]:
        remove_unread(old)
    return True


def _sequence_at(node: ir.Node, owner, lengths, opset: int) -> bool:
    tensors = _construct_inputs(node.inputs[0])
    position = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
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
    position = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
    if (
        producer is None
        or producer.op_type != "SplitToSequence"
        or not is_onnx_domain(producer.domain)
        or position is None
        or position.size != 1
        or position.dtype.kind not in "iu"
    ):
        return False
    tensor = producer.inputs[0]
    if tensor is None or tensor.shape is None or tensor.type is None:
        return False
    rank = tensor.shape.rank()
    axis = producer.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return False
    axis %= rank
    size = tensor.shape[axis]
    if not isinstance(size, int):
        return False
    split = producer.inputs[1] if len(producer.inputs) > 1 else None
    sizes = _split_sizes(split, size)
    if sizes is None:
        return False
    if split is not None and keepdims_disputed(producer, split_rank(split)):
        return False  # a chunk size with keepdims 0: onnxruntime and the spec disagree
    index = int(position.reshape(()))
    if not -len(sizes) <= index < len(sizes):
        return False  # out of range: leave the runtime's error in place
    index %= len(sizes)
    start = sum(sizes[:index])
    keepdims = split is not None or producer.attributes.get_int("keepdims", 1) != 0
    dims = list(tensor.shape)
    if keepdims:
        dims[axis] = sizes[index]
    else:
        del dims[axis]
    dtype = tensor.dtype
    if unsupported("Slice", dtype, opset) is not None and (
        sizes[index] != 1 or unsupported("Gather", dtype, opset) is not None
    ):
        return False  # read_slice reads one entry with Gather where it can, else with Slice
    nodes = read_slice(tensor, start, axis, keepdims, dtype, opset, size=sizes[index])
    nodes[-1].outputs[0].type = tensor.type
    nodes[-1].outputs[0].shape = ir.Shape(dims)
    owner.insert_before(node, nodes)
    become_identity(node, nodes[-1].outputs[0], owner)
    return True


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
    if sequence not in bounds:
        producer = sequence.producer()
        assert producer is not None and producer.graph is not None, "ragged_split found it"
        bounds[sequence] = split_bounds(source)
        producer.graph.insert_after(producer, bounds[sequence].nodes)
    index = int(position.reshape(()))
    nodes = read_bounds(source.tensor, bounds[sequence], index, source.axis)
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


#: The rules that read a SequenceConstruct's elements as tensors.
_EXPOSING = frozenset(["SequenceAt", "ConcatFromSequence"])

#: What each rule makes of the node it rewrites, and why it may.
_DONE = {
    "SequenceInsert": ("SequenceConstruct", "an insert into a sequence of known elements"),
    "SequenceAt": ("direct read", "an element of a SequenceConstruct at a constant position"),
    "SequenceLength": ("Constant", "a static length"),
    "ConcatFromSequence": ("Concat", "a concat of known elements"),
}

_RULES = {
    "SequenceInsert": _sequence_insert,
    "SequenceAt": _sequence_at,
    "SequenceLength": _sequence_length,
    "ConcatFromSequence": _concat_from_sequence,
}


def _remove_dead(model: ir.Model) -> bool:
    """Remove sequence ops that nothing reads, and the Constants only they read, until none is left.

    An erase or insert at a position not proven in range stays: onnxruntime
    runs a node nothing reads, and its failure is the model's.
    """
    removed_any = False
    lengths = SequenceLengths()
    while True:
        dead = [
            (scope.owner, node)
            for scope in iter_scopes(model)
            for node in scope.owner
            if is_onnx_domain(node.domain)
            and node.op_type in SEQUENCE_OPS
            and unread(node)
            and not _may_fail(node, lengths)
        ]
        if not dead:
            return removed_any
        for owner, node in dead:
            inputs = list(node.inputs)
            owner.remove(node, safe=True)
            for value in inputs:  # a split's sizes, an insert's position
                remove_unread(value)
        removed_any = True


def _may_fail(node: ir.Node, lengths: SequenceLengths) -> bool:
    """An erase, or an insert at a position, whose position is not proven in range."""
    if node.op_type == "SequenceInsert" and (len(node.inputs) < 3 or node.inputs[2] is None):
        return False  # an append always runs
    return node.op_type in ("SequenceErase", "SequenceInsert") and lengths(node.outputs[0]) is None
