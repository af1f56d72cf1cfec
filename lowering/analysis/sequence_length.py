"""Static sequence lengths: how many elements a sequence value holds, if known.

The SequenceInsert normalization folds a constant position into canonical
form only when it knows the sequence's length. The analysis follows the
producers of a sequence value through the ops whose effect on the length is
fixed:

    SequenceEmpty()                         -> 0
    SequenceConstruct(t_1, .., t_k)         -> k
    SequenceInsert(s, t[, p])               -> len(s) + 1   (p absent, or a constant in [-n, n])
    SequenceErase(s[, p])                   -> len(s) - 1   (p absent, or a constant in [-n, n - 1])
    SplitToSequence(x, split)               -> len(split) for a 1-D constant split whose
                                               sizes add up to x's static dim on axis,
                                               ceil(dim / split) for a scalar one > 0
    SplitToSequence(x)                      -> dim, when x's dim on axis is static
    Identity(s)                             -> len(s)
    SequenceMap(s, ..)                      -> len(s)
    If(c) with branches returning
         sequences of one known length k    -> k
    Loop(M, true, s_0, ..) whose body never
         stops early and, for this output,
         appends once per trip             -> len(s_0) + M    (a SequenceMap lowered to a loop;
                                               at no position, or a constant in
                                               [-len(s_0), len(s_0)])
         passes the carried sequence on    -> len(s_0)        (whatever M)
    SplitToSequence(a scan output of
         Loop(M, true))                     -> M   (one lowered with uniform shapes; the count
                                               may also be a static dim of the tensor a
                                               split would have read)

A trip count M is known when it is ``SequenceLength`` of a sequence of known
length, ``Gather(Shape(x), i)`` of a static dim, or a constant, also one
computed through Squeeze, Unsqueeze, Reshape, Cast, Identity or integer arithmetic
(:mod:`lowering.irutils.static_values`): the forms a lowered map's count takes
before and after unrolling, sequence elimination or ``--optimize`` fold it.

Anything else, including graph inputs and loop-carried values, is unknown.
So is the result of an insert or erase at a position not proven in range (fed,
computed, an initializer that is also a graph input, or a constant out of
range): the runtime refuses it, and a length known there would let a
consumer fold ``SequenceLength`` or unroll a map and leave the op, read by
nothing any more, to be removed, answering where the original fails.
Values are objects shared across scopes, so a sequence built in the main
graph is known inside any subgraph that reads it.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.static_values import static_array


class SequenceLengths:
    """Memoized static lengths of sequence values."""

    def __init__(self, proof: Proof | None = None) -> None:
        self._known: dict[ir.Value, int | None] = {}
        #: What is proven of the model's shapes: a split dim is read from a
        #: declaration only as far as it is a fact (without it, every one is).
        self.proof = Proof() if proof is None else proof

    def __call__(self, value: ir.Value | None) -> int | None:
        if value is None:
            return None
        if value not in self._known:
            self._known[value] = None  # guards against cycles through loops
            self._known[value] = self._compute(value)
        return self._known[value]

    def _compute(self, value: ir.Value) -> int | None:
        node = value.producer()
        if node is None or not is_onnx_domain(node.domain):
            return None
        op = node.op_type
        if op == "SequenceEmpty":
            return 0
        if op == "SequenceConstruct":
            return len(node.inputs)
        if op == "SequenceInsert":
            before = self(node.inputs[0])
            if before is None or not _in_range(_position(node, 2), -before, before):
                return None
            return before + 1
        if op == "SequenceErase":
            before = self(node.inputs[0])
            if before is None or not _in_range(_position(node, 1), -before, before - 1):
                return None
            return before - 1
        if op == "Identity":
            return self(node.inputs[0])
        if op == "SplitToSequence":
            return self._split_length(node)
        if op == "SequenceMap":
            return self(node.inputs[0]) if node.inputs else None
        if op == "If":
            return self._branch_length(node, value)
        if op == "Loop":
            return self._mapped_length(node, value)
        return None

    def _branch_length(self, node: ir.Node, value: ir.Value) -> int | None:
        """The length both branches of an If agree on."""
        j = value.index()
        lengths = set()
        for name in ("then_branch", "else_branch"):
            attr = node.attributes.get(name)
            if attr is None or attr.is_ref() or attr.type != ir.AttributeType.GRAPH:
                return None
            outputs = attr.as_graph().outputs
            if j is None or j >= len(outputs):
                return None
            lengths.add(self(outputs[j]))
        return lengths.pop() if len(lengths) == 1 else None

    def _mapped_length(self, loop: ir.Node, value: ir.Value) -> int | None:
        """The length of a loop-carried sequence that grows by one per trip, or not at all."""
        j = value.index()
        body = _body(loop)
        if j is None or body is None or 2 + j >= len(loop.inputs) or 1 + j >= len(body.outputs):
            return None  # a scan output, not a loop-carried value
        start = self(loop.inputs[2 + j])
        carried, result = body.inputs[2 + j], body.outputs[1 + j]
        if start is None:
            return None
        if result is carried:
            return start  # passed on unchanged, however many trips run
        append = result.producer()
        if (
            append is not None
            and append.graph is body
            and is_onnx_op(append, "SequenceInsert")
            and append.inputs[0] is carried
            and _in_range(_position(append, 2), -start, start)  # then in range on every trip
        ):
            trips = self._trips(loop)
            return None if trips is None else start + trips
        return None

    def _trips(self, loop: ir.Node) -> int | None:
        """How many trips a Loop makes, if it never stops early and its count is known."""
        body = _body(loop)
        if body is None or len(loop.inputs) < 2 or not _always_true(loop.inputs[1]):
            return None
        count = _trip_count(loop.inputs[0], self)
        if count is None:
            return None
        cond_out = body.outputs[0].producer()
        keeps_going = (
            body.outputs[0] is body.inputs[1]
            or _always_true(body.outputs[0])
            or (
                cond_out is not None
                and is_onnx_op(cond_out, "Identity")
                and cond_out.inputs[0] is body.inputs[1]
            )
        )
        return count if keeps_going else None

    def _split_length(self, node: ir.Node) -> int | None:
        axis = node.attributes.get_int("axis", 0)
        split = node.inputs[1] if len(node.inputs) > 1 else None
        if split is not None:
            sizes = static_array(split)
            dim = _static_dim(node.inputs[0], axis, self.proof)
            if sizes is None or dim is None or sizes.dtype not in (np.int32, np.int64):
                return None
            if sizes.ndim == 1:
                # Only sizes that split the axis: else the runtime refuses the split.
                valid = bool((sizes >= 0).all()) and int(sizes.sum()) == dim
                return int(sizes.shape[0]) if valid else None
            step = int(sizes) if sizes.ndim == 0 else 0
            return None if step <= 0 else math.ceil(dim / step)
        dim = _static_dim(node.inputs[0], axis, self.proof)
        if dim is not None:
            return dim
        # The stacked scan output of a Loop, split along the trips again.
        stack = node.inputs[0]
        if stack is None:
            return None
        loop, index = stack.producer(), stack.index()
        if axis != 0 or loop is None or index is None or not is_onnx_op(loop, "Loop"):
            return None
        carried = len(loop.inputs) - 2
        return self._trips(loop) if index >= carried else None


#: A position that is absent: the insert appends, the erase takes the last element.
_ABSENT = "absent"


def _position(node: ir.Node, index: int) -> int | str | None:
    """The constant position ``node`` reads at input ``index``: _ABSENT when it
    has none, None when it is not a constant int32/int64 scalar (or [1])."""
    value = node.inputs[index] if len(node.inputs) > index else None
    if value is None:
        return _ABSENT
    array = static_array(value)
    if array is None or array.size != 1 or array.dtype not in (np.int32, np.int64):
        return None
    return int(array.reshape(()))


def _in_range(position: int | str | None, low: int, high: int) -> bool:
    """Whether the op runs: no position (and something to erase, for an erase:
    high >= low), or a constant in [low, high]."""
    if position == _ABSENT:
        return low <= high
    return isinstance(position, int) and low <= position <= high


def _body(loop: ir.Node) -> ir.Graph | None:
    attr = loop.attributes.get("body")
    if attr is None or attr.is_ref() or attr.type != ir.AttributeType.GRAPH:
        return None
    return attr.as_graph()


def _trip_count(value: ir.Value | None, lengths: SequenceLengths) -> int | None:
    """A trip count that is a constant, a sequence's length, or a static dim read by ``Shape``."""
    constant = static_array(value)
    if constant is not None:
        if constant.size != 1 or constant.dtype.kind not in "iu" or int(constant.reshape(())) < 0:
            return None
        return int(constant.reshape(()))
    node = value.producer() if value is not None else None
    if node is None:
        return None
    if is_onnx_op(node, "SequenceLength"):
        return lengths(node.inputs[0])
    if is_onnx_op(node, "Gather") and node.attributes.get_int("axis", 0) == 0:
        shape, index = node.inputs
        shape_node = shape.producer() if shape is not None else None
        where = static_array(index)
        if (
            shape_node is not None
            and is_onnx_op(shape_node, "Shape")
            and not shape_node.attributes
            and where is not None
            and where.ndim == 0
        ):
            return _static_dim(shape_node.inputs[0], int(where), lengths.proof)
    return None


def _always_true(condition: ir.Value | None) -> bool:
    """A missing Loop condition, or a constant true one."""
    if condition is None:
        return True
    value = static_array(condition)
    return value is not None and bool(value.all())


def _static_dim(value: ir.Value | None, axis: int, proof: Proof) -> int | None:
    shape = None if value is None else proof.declarable(value)
    if shape is None:
        return None
    rank = len(shape)
    if not -rank <= axis < rank:
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None
