"""Batching rules for ragged elements: a map over ``SplitToSequence(X, lengths)``.

The elements of such a split differ in length along one axis, so they do
not stack; but concatenated along that axis they are X itself. An op that
treats each row along that axis on its own gives the same rows whether it
runs on each element or once on X, so the body runs once on X and its
result, split by the same lengths, is the map's::

    parts = SplitToSequence<axis = a>(X, L)          element i: L[i] rows along a
    ys    = SequenceMap(parts) <body (e) => (y)>
    out   = ConcatFromSequence<axis = a>(ys)

becomes::

    +------------------------------------------------------------------+
    | Mul(e, w), Where(c, e, z), Cast(e), ...  -> the same op on X      |
    |   (outer operands: dim 1 at a, or not reaching a: w [8], [1, 8])   |
    | ReduceSum<axes = [1]>(e)                 -> the same op on X      |
    |   (rows stay rows; a shifts down past the axes dropped)            |
    | ReduceSum<axes = [a]>(e)                 -> a segment sum, [n, ..]|
    +------------------------------------------------------------------+
    out = Y                                  a concat along a reads Y itself
    ys  = SplitToSequence<axis = a>(Y, L)    only for any other reader

A reduction over the ragged axis is a segment reduction (opset 16+, for
max and min 18+), with no loop::

    R      = X with axis a moved to the front           [T, *rest]
    starts = CumSum<exclusive = 1>(L)                   [n]
    marks  = ScatterElements<reduction = add>(zeros[T + 1], starts, ones[n])
    ids    = CumSum(marks[:T]) - 1                      row t's element
    init   = ConstantOfShape<value = identity>(Concat(Shape(L), Shape<start = 1>(R)))
    S      = ScatterElements<axis = 0, reduction = add>(init, Expand(ids, Shape(R)), R)

``marks`` counts the elements that start at each row, so an element of
length 0 (several starting at one row, or at T) owns no row and keeps
``init``: what ONNX says the op gives for an empty set (0 for a sum, 1 for
a product, the lowest value of the type for a max, the highest for a min).
ReduceMean is the segment sum over ``max(L, 1)``: 0 where ``L`` is 0, as
onnxruntime's ReduceMean of nothing (ONNX leaves it undefined). A segment
sum adds each element's rows in order, starting from the empty sum: the
same float sum as the body's ReduceSum up to the order of its additions,
within the same bound (a CumSum difference would not be: its error grows
with the sum of everything before the segment).

Why these ops and not others that mean the same: every release that takes
the declared opset runs them (``tests/test_releases.py``; which release
refuses what is in docs/runtimes.md): ScatterND with a reduction and a Tile
of an empty ReduceSum do not. A release that refuses even this
ScatterElements, or its reduction max or min, has a profile that says so,
and gets the loop form or a refusal.

Everything else declines, and the map gets its next strategy: an op with
no rule here, an outer operand that may vary along the ragged axis, a
value stacked per element (a segment reduction's result) meeting a ragged
one, operands split by different split values, a reduction over the
ragged axis whose op has no segment form, a split given as one chunk
length (a scalar) where a reduction needs the lengths. Like the original
on X, the result on X is only the map's when the lengths add up to the
ragged dim (the original fails otherwise); a concat read directly does
not check that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.irutils.constants import constant_array
from lowering.irutils.op_facts import (
    BROADCAST_POINTWISE_OPS,
    REDUCE_OPS,
    UNARY_POINTWISE_OPS,
    is_onnx_op,
)
from lowering.maps.strategies.vectorize.body_values import (
    BodyValue,
    Dims,
    Ragged,
    broadcast_dims,
)
from lowering.maps.strategies.vectorize.family import RuleFamily
from lowering.maps.strategies.vectorize.reductions import reduce_along, reduced_axes

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)

#: The ScatterElements reduction of each Reduce* op that has a segment form,
#: and the opset from which ScatterElements takes it.
SEGMENT_REDUCTIONS: dict[str, tuple[str, int]] = {
    "ReduceSum": ("add", 16),
    "ReduceMean": ("add", 16),
    "ReduceProd": ("mul", 16),
    "ReduceMax": ("max", 18),
    "ReduceMin": ("min", 18),
}

_FLOATS = frozenset(
    [ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16]
)
_INTEGERS = frozenset(
    getattr(ir.DataType, f"{sign}INT{bits}") for sign in ("", "U") for bits in (8, 16, 32, 64)
)


def _with_ragged_dim(dims: Dims, axis: int) -> Dims:
    return tuple(None if i == axis else d for i, d in enumerate(dims))


def _the_ragged(v: Batcher, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """The ragged operands; declines where a value stacked per element is among them."""
    present = [a for a in args if a is not None]
    if any(a.batched and a.ragged is None for a in present):
        raise v.decline("it mixes elements of different lengths with a value stacked per element")
    return [a for a in present if a.ragged is not None]


@FAMILY.rule(*sorted(UNARY_POINTWISE_OPS), "CastLike")
def _unary(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Pointwise: the op on X; its other operands (Clip's bounds, CastLike's
    target) must be the same for every element."""
    x = v.only_first_batched(args, "its input")
    _the_ragged(v, args)
    out = v.like(node, [a.value if a else None for a in args])
    return [BodyValue(out, x.shape, True, ragged=x.ragged)]


@FAMILY.rule(*sorted(BROADCAST_POINTWISE_OPS), "PRelu")
def _pointwise(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Broadcasting, aligned on the right: the ragged operands' ragged axes must
    line up, and an outer operand must have 1 (or nothing) there."""
    ragged = _the_ragged(v, args)
    first = ragged[0]
    assert first.ragged is not None, "_the_ragged returns ragged operands"
    rank = v.rank(first)
    from_end = rank - first.ragged.axis  # the ragged axis, counted from the right
    for other in ragged[1:]:
        assert other.ragged is not None
        if not first.ragged.lines_up(other.ragged, rank, v.rank(other)):
            raise v.decline("its operands are split by different lengths, or along other axes")
    shapes = [v.dims(a) for a in args if a is not None]
    for a in args:
        if a is None or a.batched:
            continue
        dims = v.dims(a)
        at = len(dims) - from_end
        if at >= 0 and dims[at] != 1:
            what = repr(a.value.name) if a.value.name else "an outer operand"
            raise v.decline(
                f"{what} may vary along the ragged axis (its dim there is "
                f"{'unknown' if dims[at] is None else dims[at]}, not 1)"
            )
    top = max(len(s) for s in shapes)
    axis = top - from_end
    out = v.like(node, [a.value if a else None for a in args])
    shape = _with_ragged_dim(broadcast_dims(shapes), axis)
    return [BodyValue(out, shape, True, ragged=Ragged(axis, first.ragged.split))]


@FAMILY.rule(*sorted(REDUCE_OPS))
def _reduce(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """Over other axes: the op on X, still ragged. Over the ragged axis: a segment reduction."""
    x = v.only_first_batched(args)
    ragged = x.ragged
    assert ragged is not None, "the batcher calls these rules with a ragged operand"
    dims = v.dims(x)
    axes = reduced_axes(v, node, args, len(dims))
    if axes is None:
        out = v.like(node, [x.value], drop=("axes",))
        return [BodyValue(out, x.shape, True, ragged=ragged)]
    keepdims = node.attributes.get_int("keepdims", 1)
    shape = tuple(1 if i in axes else d for i, d in enumerate(dims) if keepdims or i not in axes)
    a = ragged.axis
    if a not in axes:  # each row reduced on its own
        out = reduce_along(v, node, x.value, axes)
        axis = a if keepdims else a - sum(1 for b in axes if b < a)
        return [
            BodyValue(out, _with_ragged_dim(shape, axis), True, ragged=Ragged(axis, ragged.split))
        ]
    return [BodyValue(_segment_reduce(v, node, x, axes, bool(keepdims)), shape, True)]


def _segment_reduce(
    v: Batcher, node: ir.Node, x: BodyValue, axes: list[int], keepdims: bool
) -> ir.Value:
    """The reduction of each element over ``axes`` (the ragged one among them),
    stacked: ``[n, *shape]``, as the module sketches."""
    assert x.ragged is not None
    op = node.op_type
    if op not in SEGMENT_REDUCTIONS:
        raise v.decline(
            f"{op} over the ragged axis has no segment form (only "
            f"{', '.join(sorted(SEGMENT_REDUCTIONS))})"
        )
    reduction, since = SEGMENT_REDUCTIONS[op]
    if v.lowest_opset < since:
        raise v.decline(
            f"a segment {op} over the ragged axis needs ScatterElements with reduction = "
            f"{reduction!r} (opset {since}), and the model is to declare opset {v.lowest_opset}"
        )
    dtype = x.dtype or v.dtype_of(x.value)
    mean = op == "ReduceMean"
    if mean and dtype not in _FLOATS:
        raise v.decline(f"a segment mean is only for floats, and this is {dtype}")
    identity = None if dtype is None else _empty_reduction(op, dtype)
    if identity is None:
        raise v.decline(f"a segment {op} needs its empty value in {dtype}, which has none")
    a, rank = x.ragged.axis, v.rank(x)
    lengths = lengths_of(v, x.ragged)
    others = [b for b in axes if b != a]
    rows = x.value
    if others:  # first each row over the other axes, which stay (as 1s)
        rows = reduce_along(v, node, rows, others, keepdims=1)
    if a != 0:
        rows = v.op("Transpose", [rows], {"perm": [a, *(i for i in range(rank) if i != a)]})
    ids = segment_ids(v, x.ragged, rows)
    shape = v.op("Shape", [rows])
    each = v.op("Shape", [rows], {"start": 1})
    init = v.op(
        "ConstantOfShape",
        [v.op("Concat", [v.op("Shape", [lengths]), each], {"axis": 0})],
        {"value": identity},
    )
    where = v.op("Expand", [v.unsqueeze(ids, list(range(1, rank))) if rank > 1 else ids, shape])
    result = v.op("ScatterElements", [init, where, rows], {"axis": 0, "reduction": reduction})
    if mean:
        column = v.const([-1] + [1] * (rank - 1))
        count = v.op("Reshape", [v.op("Max", [lengths, v.const(1)]), column])
        result = v.op("Div", [result, v.op("Cast", [count], {"to": identity.dtype.value})])
    # result: [n, *dims without a], 1 at the other axes
    if keepdims:
        return v.unsqueeze(result, [a + 1])
    return v.squeeze(result, [1 + (b if b < a else b - 1) for b in others])


def _empty_reduction(op: str, dtype: ir.DataType) -> ir.TensorProtocol | None:
    """``[identity]`` of ``dtype``: what ONNX says ``op`` gives for an empty set
    (ReduceMax-20, ReduceProd-18, ReduceSum-13), the start of every segment."""
    if dtype not in _FLOATS and dtype not in _INTEGERS:
        return None
    kind = dtype.numpy()
    value: object = 1 if op == "ReduceProd" else 0
    if op in ("ReduceMax", "ReduceMin"):
        low = op == "ReduceMax"
        if dtype in _FLOATS:
            value = -np.inf if low else np.inf
        else:
            info = np.iinfo(kind)
            value = info.min if low else info.max
    return ir.tensor(np.array([value], dtype=kind), dtype=dtype)


def lengths_of(v: Batcher, ragged: Ragged) -> ir.Value:
    """The elements' lengths, as int64 ``[n]``: the split, when it lists them."""
    key = ("lengths", ragged.split)
    if key in v.cache:
        return v.cache[key]
    split = ragged.split
    if _rank(split, v.plan.proof) != 1:
        raise v.decline(
            f"its input is split by {split.name!r}, which may be one chunk length rather "
            "than a list of lengths"
        )
    lengths = split
    if v.dtype_of(split) != ir.DataType.INT64:
        lengths = v.op("Cast", [split], {"to": ir.DataType.INT64.value})
    v.cache[key] = lengths
    return lengths


def _rank(value: ir.Value, proof: Proof) -> int | None:
    """The rank of ``value``: declared (where a fact, :meth:`Proof.declarable`), of a
    constant, or through pointwise unary ops (a Cast of an int64[N] input, say),
    which keep their input's shape."""
    for _ in range(16):  # a chain of casts is short; an unknown rank only declines
        declared = proof.declarable(value)
        if declared is not None:
            return len(declared)
        array = constant_array(value)
        if array is not None:
            return array.ndim
        producer = value.producer()
        if (
            producer is None
            or not is_onnx_op(producer, producer.op_type)
            or producer.op_type not in UNARY_POINTWISE_OPS
            or not producer.inputs
            or producer.inputs[0] is None
        ):
            return None
        value = producer.inputs[0]
    return None


def segment_ids(v: Batcher, ragged: Ragged, rows: ir.Value) -> ir.Value:
    """``[T]``: the element each row of ``rows`` (the ragged axis in front) is of."""
    key = ("segment_ids", ragged.split)
    if key in v.cache:
        return v.cache[key]
    lengths = lengths_of(v, ragged)
    zero, one = v.const(0), v.const([1])
    total = v.op("Slice", [v.op("Shape", [rows]), v.const([0]), one])
    starts = v.op("CumSum", [lengths, zero], {"exclusive": 1})
    int64 = ir.DataType.INT64
    zeros = v.op(
        "ConstantOfShape",
        [v.op("Add", [total, one])],
        {"value": ir.Tensor(np.zeros([1], np.int64), dtype=int64)},
    )
    ones = v.op(
        "ConstantOfShape",
        [v.op("Shape", [lengths])],
        {"value": ir.Tensor(np.ones([1], np.int64), dtype=int64)},
    )
    marks = v.op("ScatterElements", [zeros, starts, ones], {"axis": 0, "reduction": "add"})
    counted = v.op("CumSum", [v.op("Slice", [marks, v.const([0]), total]), zero])
    ids = v.op("Sub", [counted, one])
    v.cache[key] = ids
    return ids
