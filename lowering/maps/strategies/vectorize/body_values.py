"""What the rewrite knows of one body value, and the element-shape arithmetic rules share.

A rule sees each operand as a :class:`BodyValue`: the value it now reads,
whether that value is batched (a stack, with the batch axis in front) or
invariant, and the shape of *one element* (:data:`Dims`, a static rank with
None for an unknown dim). Shapes are kept per element so that a rule's
arithmetic is the op's own; only the axes it emits shift by one.

A batched value is either a *stack* (the batch axis in front, every element
of one shape) or *ragged* (:class:`Ragged`): the elements, of different
lengths along one axis, concatenated along it, with no batch axis at all::

    stack   [n, *shape]            element i = stack[i]
    ragged  shape with T at axis a element i = rows starts[i] .. starts[i] + L[i]
            (T = sum(L))            of axis a, L = the SplitToSequence's split
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np
import onnx_ir as ir

Dims: TypeAlias = tuple[int | None, ...]  # an element shape with a known rank


@dataclasses.dataclass(frozen=True, eq=False)
class Ragged:
    """How a ragged value holds its elements: concatenated along ``axis`` (of the
    element, non-negative), split by ``split`` (SplitToSequence's split input: a
    1-D list of lengths, or one chunk length as a scalar).

    Two ragged values hold their elements alike when they have one ``split``
    and their ragged axes are as far from the last axis: broadcasting, which
    aligns shapes on the right, then lines their rows up.
    """

    axis: int
    split: ir.Value

    def lines_up(self, other: Ragged, rank: int, other_rank: int) -> bool:
        """Whether ``other`` (of element rank ``other_rank``) lines up with this one
        (of ``rank``) under broadcasting."""
        return self.split is other.split and rank - self.axis == other_rank - other.axis


@dataclasses.dataclass
class BodyValue:
    """A body value in the rewrite: its new value and what is known of its element."""

    value: ir.Value
    shape: Dims | None  # of one element (None: rank unknown)
    batched: bool
    dtype: ir.DataType | None = None
    ragged: Ragged | None = None  # batched, and concatenated rather than stacked


def required(args: Sequence[BodyValue | None], count: int | None = None) -> list[BodyValue]:
    """The first ``count`` of ``args`` (all by default), which the op's schema
    requires: a valid model gives each of them."""
    wanted = list(args) if count is None else list(args[:count])
    given = [a for a in wanted if a is not None]
    if len(given) != (len(args) if count is None else count):
        raise ValueError("a required input is omitted")
    return given


def broadcast_dims(shapes: Sequence[Dims]) -> Dims:
    """Numpy broadcasting of element shapes; None where it cannot be told."""
    rank = max(len(s) for s in shapes)
    out: list[int | None] = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        out.append(1 if not dims else dims.pop() if len(dims) == 1 and None not in dims else None)
    return tuple(out)


def prod(dims: Iterable[int | None]) -> int | None:
    """The number of elements of ``dims``; None if one is unknown."""
    known: list[int] = []
    for d in dims:
        if d is None:
            return None
        known.append(d)
    return int(np.prod(known, dtype=np.int64))


def static(dims: Dims | None) -> list[int] | None:
    """``dims`` when every one is known."""
    if dims is None or None in dims:
        return None
    return [d for d in dims if d is not None]


def show(dims: Dims | None) -> str:
    """``dims`` for a reason: ``[2, ?, 3]``."""
    if dims is None:
        return "of unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
