"""What is proven of a sequence's elements: one shape every element has, and its joins.

A sequence holds tensors that may differ in shape. What is proven of it is
what all of them share: their join, dim by dim. A dim is kept only where
every element has it; elements of two ranks have no rank in common::

    join([3, N], [3, N]) = [3, N]     join([3, 4], [3, 5]) = [3, ?]
    join([3], [1, 3])    = unknown    join(NOTHING, [2])   = [2]

:data:`NOTHING` is the join of no element (SequenceEmpty's), the unit of
every join. The same join merges the two branches of an If and the values a
Loop carries (:mod:`lowering.analysis.proven_shapes`). What each sequence
op proves of its output's elements, and what a reader takes from them::

    SequenceEmpty()                     NOTHING
    SequenceConstruct(t_1, .., t_k)     join(t_1, .., t_k)
    SequenceInsert(s, t[, p])           join(s, t)
    SequenceErase(s[, p]), Identity(s)  s
    SplitToSequence(x[, split])         x with the split axis: 1 or gone (no split,
                                        keepdims 1 or 0), c where a scalar c divides a
                                        static dim, the size where a constant split
                                        gives one size to all, else unknown
    SequenceAt(s, i)                    s (an element)
    ConcatFromSequence(s)               s with its dim at axis unknown (new_axis 0),
                                        or an unknown dim inserted there (new_axis 1)
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Literal

import numpy as np
import onnx_ir as ir

from lowering.irutils.node_inference import Dim, Operand

Shape = tuple[Dim, ...] | None  # None: not even the rank is proven


class _Nothing(enum.Enum):
    NOTHING = "no element"


#: The join of no element: what a sequence SequenceEmpty makes holds.
NOTHING = _Nothing.NOTHING

#: What is proven of a tensor, or of every element of a sequence: a dtype and
#: shape (an Operand with no value), NOTHING, or None where nothing is.
Elements = Operand | None | Literal[_Nothing.NOTHING]

#: The default domain's ops whose output's elements :func:`made` proves (an
#: Identity: of a sequence), and those whose output :func:`read` proves.
MAKERS = frozenset(
    ["SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence",
     "Identity"]
)  # fmt: skip
READERS = frozenset(["SequenceAt", "ConcatFromSequence"])


def join(a: Elements, b: Elements) -> Elements:
    """What every element of ``a`` and of ``b`` has (the module docstring):
    the dtype both have, and the dims (:func:`join_shapes`)."""
    if a is NOTHING:
        return b
    if b is NOTHING:
        return a
    if a is None or b is None:
        return None
    dtype = a.dtype if a.dtype == b.dtype else None
    return Operand(dtype, join_shapes(shape_of(a), shape_of(b)))


def join_shapes(a: Shape, b: Shape) -> Shape:
    """The dims ``a`` and ``b`` share: a dim where both have it, else unknown;
    unknown where their ranks differ or either is unknown."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x is not None and x == y else None for x, y in zip(a, b, strict=True))


def proven(known: Operand | None) -> Operand | None:
    """What ``known`` proves of a tensor: its dtype and shape (not its value)."""
    if known is None or known.type is not None:
        return None
    dtype = None if known.dtype == ir.DataType.UNDEFINED else known.dtype
    return Operand(dtype, shape_of(known))


def shape_of(known: Operand | None) -> Shape:
    return None if known is None or known.shape is None else tuple(known.shape)


def made(node: ir.Node, operands: Sequence[Operand | None], inputs: Sequence[Elements]) -> Elements:
    """What is proven of the elements of the sequence ``node`` (of the default
    domain) makes, given what is proven of its inputs: ``operands`` as
    tensors, ``inputs`` as sequences (None where nothing is)."""
    op = node.op_type
    if op == "SequenceEmpty":
        return NOTHING
    if op == "SequenceConstruct":
        joined: Elements = NOTHING
        for known in operands:
            joined = join(joined, proven(known))
        return joined
    if op == "SequenceInsert" and len(operands) >= 2:
        return join(inputs[0], proven(operands[1]))
    if op in ("SequenceErase", "Identity") and inputs:
        return inputs[0]
    if op == "SplitToSequence" and operands:
        x = proven(operands[0])
        return None if x is None else Operand(x.dtype, _split(node, operands))
    return None


def _split(node: ir.Node, operands: Sequence[Operand | None]) -> Shape:
    x = shape_of(operands[0])
    if x is None or not x:
        return None
    rank = len(x)
    axis = node.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return None
    axis %= rank
    dims = list(x)
    split = operands[1] if len(operands) > 1 else None
    if split is None:
        if node.attributes.get_int("keepdims", 1) == 0:
            return (*dims[:axis], *dims[axis + 1 :])
        dims[axis] = 1
        return tuple(dims)
    sizes = None if split.value is None else np.asarray(split.value).reshape(-1)
    size: Dim = None
    if sizes is not None and split.value is not None and np.ndim(split.value) == 0:
        c, d = int(sizes[0]), x[axis]
        size = c if isinstance(d, int) and c > 0 and d % c == 0 else None
    elif sizes is not None and sizes.size and np.all(sizes == sizes[0]):
        size = int(sizes[0])
    dims[axis] = size
    return tuple(dims)


def read(node: ir.Node, elements: Elements) -> Operand | None:
    """What a reader of a sequence (the default domain's SequenceAt or
    ConcatFromSequence, input 0) proves of its output from ``elements``."""
    if elements is NOTHING or elements is None:
        return None  # (a read of an empty sequence fails)
    if node.op_type == "SequenceAt" or elements.shape is None:
        return elements
    new_axis = node.attributes.get_int("new_axis", 0) != 0
    axis = node.attributes.get_int("axis", 0)
    rank = len(elements.shape) + (1 if new_axis else 0)
    if not -rank <= axis < rank:
        return elements._replace(shape=None)
    axis %= rank
    dims = list(elements.shape)
    if new_axis:
        dims.insert(axis, None)
    else:
        dims[axis] = None
    return elements._replace(shape=tuple(dims))
