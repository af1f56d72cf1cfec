"""Where each element of ``SplitToSequence(X, split)`` starts and ends, without sequences.

A split by lengths (or by one chunk size, as ``torch.split`` writes it)
makes elements of different lengths along one axis. Runtimes that run a
``Loop`` but no sequence op (OpenVINO, MNN) can still read them: element i
is ``Slice(X, starts[i], ends[i], [axis])``, with the bounds computed once,
before any loop, from the lengths::

    lengths L (1-D)                          one chunk size c (a scalar)
    L'     = Cast<to = int64>(L)             c'     = Cast<to = int64>(c)
    ends   = CumSum(L', 0) + guard           dim    = Gather(Shape(X), axis)
    starts = ends - L'                       starts = Range(0, dim, c' + guard)
    count  = Size(L')                        ends   = starts + c'   (Slice clamps the last)
                                             count  = Size(starts)

    element i = Slice(X, Gather(starts, [i]), Gather(ends, [i]), [axis])

The split axis is kept, as SplitToSequence keeps it whenever ``split`` is
given (keepdims is then ignored: the spec, and onnxruntime for 1-D lengths).
onnxruntime reads keepdims = 0 with a scalar split its own way (it drops a
chunk of 1, and fails on longer ones), so that form is left as written
(:func:`ragged_split` declines it).

``guard`` keeps SplitToSequence's errors. onnxruntime refuses lengths that
do not add up to the axis, a negative length and a chunk size below 1;
Slice would read something instead. Unless the split is a constant proven
valid, the bounds depend on a guard that is 0, and fails exactly where the
split is invalid, since onnxruntime's Gather refuses an index out of range::

    lengths: ok = (ReduceSum([0, *L']) == dim) and (ReduceSum([0, *Abs(L')]) == dim)
    chunk:   ok = c' > 0
    guard  = Gather([0], Cast<to = int64>(Not(ok)))     index 1 is out of range

(the lengths add up to dim and, all being >= 0 exactly when their sum is
the sum of their magnitudes, none is negative; the leading 0 keeps the sums
off an empty axis, which old onnxruntime releases refuse to reduce). A runtime whose Gather
does not check its indices runs the model as if the split were valid.
The rules of :mod:`lowering.sequences.reads` read
``SequenceAt(s, k)`` at a constant k the same way: Gather, like SequenceAt,
counts a negative k from the back and refuses one out of range.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from lowering.irutils.constants import constant_array, constant_node
from lowering.irutils.naming import fresh
from lowering.irutils.nodes import new_node
from lowering.irutils.op_facts import (
    BROADCAST_POINTWISE_OPS,
    UNARY_POINTWISE_OPS,
    is_onnx_domain,
    is_onnx_op,
)

_INT64 = ir.TensorType(ir.DataType.INT64)
_VECTOR = (_INT64, ir.Shape([None]))
_SCALAR = (_INT64, ir.Shape([]))


@dataclasses.dataclass(frozen=True)
class RaggedSplit:
    """``SplitToSequence<axis>(tensor, split)``: ``split`` is 1-D lengths, or a
    chunk size when ``scalar``."""

    tensor: ir.Value
    split: ir.Value
    axis: int
    scalar: bool


def split_producer(sequence: ir.Value | None) -> ir.Node | None:
    """The ``SplitToSequence(X, split)``, with both inputs given, that makes ``sequence``."""
    producer = sequence.producer() if sequence is not None else None
    if (
        producer is None
        or not is_onnx_op(producer, "SplitToSequence")
        or producer.inputs[0] is None
        or len(producer.inputs) < 2
        or producer.inputs[1] is None
    ):
        return None
    return producer


def keepdims_disputed(split_to_sequence: ir.Node, rank: int | None) -> bool:
    """Whether runtimes read this split two ways: keepdims = 0 with a split not
    proven 1-D (of ``rank``), where onnxruntime drops the axis of a chunk of 1
    and the spec keeps it (see the module docstring)."""
    return split_to_sequence.attributes.get_int("keepdims", 1) == 0 and rank != 1


def ragged_split(sequence: ir.Value | None) -> RaggedSplit | None:
    """The split that makes ``sequence``, where its split's rank is known.

    None for anything else, and for a scalar split with keepdims = 0, which
    onnxruntime and the spec read differently (:func:`keepdims_disputed`).
    """
    producer = split_producer(sequence)
    if producer is None:
        return None
    split = producer.inputs[1]
    assert split is not None, "split_producer checks it"
    rank = split_rank(split)
    if rank not in (0, 1) or keepdims_disputed(producer, rank):  # int32 or int64 when valid
        return None
    tensor = producer.inputs[0]
    assert tensor is not None, "split_producer checks it"
    return RaggedSplit(tensor, split, producer.attributes.get_int("axis", 0), rank == 0)


#: Ops whose output has the rank of their broadcast inputs (the largest).
_RANK_KEEPING = UNARY_POINTWISE_OPS | BROADCAST_POINTWISE_OPS | {"CastLike"}


#: Ops whose output has one rank whatever their inputs.
_FIXED_RANKS = {"Shape": 1, "Size": 0}


def split_rank(value: ir.Value, depth: int = 8) -> int | None:
    """``value``'s rank: declared, a constant's, or followed through the ops
    exporters compute a split with (``Div(Gather(Shape(x), 2), 3)``); None if unknown."""
    if value.shape is not None:
        return value.shape.rank()
    array = constant_array(value)
    if array is not None:
        return array.ndim
    producer = value.producer()
    if producer is None or depth == 0 or not is_onnx_domain(producer.domain):
        return None
    op = producer.op_type
    inputs = [v for v in producer.inputs if v is not None]
    if op in _FIXED_RANKS:
        return _FIXED_RANKS[op]
    if op == "Gather":
        return _gather_rank(inputs, depth - 1)
    if op in _RANK_KEEPING:
        return _broadcast_rank(op, inputs, depth - 1)
    return None


def _gather_rank(inputs: list[ir.Value], depth: int) -> int | None:
    """A Gather's rank: its data's, less the axis, plus its indices'."""
    if len(inputs) != 2:
        return None
    data, index = (split_rank(v, depth) for v in inputs)
    return None if data is None or index is None else data + index - 1


def _broadcast_rank(op: str, inputs: list[ir.Value], depth: int) -> int | None:
    """The largest rank of the inputs a rank-keeping op broadcasts (CastLike: its first)."""
    if not inputs:
        return None
    ranks = [split_rank(v, depth) for v in (inputs[:1] if op == "CastLike" else inputs)]
    return None if None in ranks else max(r for r in ranks if r is not None)


@dataclasses.dataclass
class Bounds:
    """The nodes computing a split's bounds (to go before any loop), and the values."""

    nodes: list[ir.Node]
    starts: ir.Value  # int64 [n]
    ends: ir.Value  # int64 [n]
    count: ir.Value  # int64 scalar: n


def split_bounds(source: RaggedSplit) -> Bounds:
    """The bounds of every element of ``source``, as sketched in the module docstring."""
    nodes: list[ir.Node] = []

    def op(op_type, inputs, attributes=None, stem=None, type_=_VECTOR) -> ir.Value:
        node = fresh(new_node(op_type, inputs, attributes))
        nodes.append(node)
        value = fresh(node.outputs[0], stem)
        value.type, value.shape = type_
        return value

    def const(array: np.ndarray, stem: str | None = None) -> ir.Value:
        nodes.append(constant_node(array, stem))
        return nodes[-1].outputs[0]

    tensor, split, axis = source.tensor, source.split, source.axis
    shape_type = (_INT64, ir.Shape([None]))
    lengths = split
    if split.dtype != ir.DataType.INT64:
        lengths = op(
            "Cast", [split], {"to": ir.DataType.INT64.value}, "split", (_INT64, split.shape)
        )

    def dim() -> ir.Value:
        shape = op("Shape", [tensor], stem="shape", type_=shape_type)
        return op(
            "Gather", [shape, const(np.array(axis, np.int64), "axis")], stem="dim", type_=_SCALAR
        )

    def padded(vector: ir.Value) -> ir.Value:
        """``[0, *vector]``: a sum of it reduces no empty axis, which onnxruntime
        1.12 to 1.16 refuse with keepdims = 0 (n = 0 lengths)."""
        zero = const(np.array([0], np.int64), "zero")
        return op("Concat", [zero, vector], {"axis": 0}, "padded")

    def guard(ok: ir.Value) -> ir.Value:
        bad = op("Not", [ok], stem="invalid", type_=(ir.TensorType(ir.DataType.BOOL), ir.Shape([])))
        index = op("Cast", [bad], {"to": ir.DataType.INT64.value}, "invalid", _SCALAR)
        return op(
            "Gather", [const(np.array([0], np.int64), "valid"), index], stem="guard", type_=_SCALAR
        )

    proven = _proven_valid(source)
    if source.scalar:
        size = lengths
        if not proven:
            positive = op(
                "Greater",
                [lengths, const(np.array(0, np.int64), "zero")],
                stem="positive",
                type_=(ir.TensorType(ir.DataType.BOOL), ir.Shape([])),
            )
            size = op("Add", [lengths, guard(positive)], stem="chunk", type_=_SCALAR)
        starts = op("Range", [const(np.array(0, np.int64), "zero"), dim(), size], stem="starts")
        ends = op("Add", [starts, size], stem="ends")
        count = op("Size", [starts], stem="count", type_=_SCALAR)
        return Bounds(nodes, starts, ends, count)
    ends = op("CumSum", [lengths, const(np.array(0, np.int64), "axis")], stem="ends")
    if not proven:
        boolean = (ir.TensorType(ir.DataType.BOOL), ir.Shape([]))
        along = dim()
        total = op("ReduceSum", [padded(lengths)], {"keepdims": 0}, "total", _SCALAR)
        magnitude = op("Abs", [lengths], stem="magnitude", type_=(_INT64, lengths.shape))
        magnitudes = op("ReduceSum", [padded(magnitude)], {"keepdims": 0}, "magnitudes", _SCALAR)
        adds_up = op("Equal", [total, along], stem="adds_up", type_=boolean)
        none_negative = op("Equal", [magnitudes, along], stem="none_negative", type_=boolean)
        ok = op("And", [adds_up, none_negative], stem="valid", type_=boolean)
        ends = op("Add", [ends, guard(ok)], stem="ends")
    starts = op("Sub", [ends, lengths], stem="starts")
    count = op("Size", [lengths], stem="count", type_=_SCALAR)
    return Bounds(nodes, starts, ends, count)


def _proven_valid(source: RaggedSplit) -> bool:
    """Whether the split is a constant that SplitToSequence accepts for X's static dim."""
    array = constant_array(source.split)
    if array is None or array.dtype.kind not in "iu":
        return False
    if source.scalar:
        return int(array) > 0
    shape = source.tensor.shape
    if shape is None or not -shape.rank() <= source.axis < shape.rank():
        return False
    size = shape[source.axis]
    return isinstance(size, int) and bool((array >= 0).all()) and int(array.sum()) == size


def read_bounds(
    tensor: ir.Value, bounds: Bounds, index: ir.Value | int, axis: int
) -> list[ir.Node]:
    """Nodes reading element ``index`` (an int64 scalar, or a constant) of the split
    whose bounds are ``bounds``: ``Slice(X, starts[i], ends[i], [axis])``, the last node.

    A constant index may be negative (from the back); Gather checks it is in range.
    """
    nodes: list[ir.Node] = []
    if isinstance(index, int):
        nodes.append(constant_node(np.array([index], np.int64), "index"))
    else:
        one = constant_node(np.array([1], np.int64), "one_element")
        reshape = fresh(new_node("Reshape", [index, one.outputs[0]]))
        nodes += [one, reshape]
    at = nodes[-1].outputs[0]
    at.type, at.shape = _INT64, ir.Shape([1])
    vector = (_INT64, ir.Shape([1]))
    start = fresh(new_node("Gather", [bounds.starts, at]))
    end = fresh(new_node("Gather", [bounds.ends, at]))
    for node, stem in ((start, "start"), (end, "end")):
        value = fresh(node.outputs[0], stem)
        value.type, value.shape = vector
    axes = constant_node(np.array([axis], np.int64), "axis")
    sliced = fresh(new_node("Slice", [tensor, start.outputs[0], end.outputs[0], axes.outputs[0]]))
    return [*nodes, start, end, axes, sliced]
