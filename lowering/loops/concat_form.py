"""A tensor grown by Concat in a Loop, in place of a sequence appended to.

Both loops that append, a map's Loop (:mod:`lowering.maps.strategies.loop`)
and an accumulator loop an exporter wrote (:mod:`lowering.loops.accumulators`),
can carry a tensor instead, from an empty start, when every dim but the
concat's axis is one size in every iteration::

    acc_0 = SequenceEmpty()                    acc_0 = ConstantOfShape([2, 0])
    Loop body: acc' = SequenceInsert(acc, y)   Loop body: acc' = Concat<axis = 1>(acc, y)
    z = ConcatFromSequence<axis = 1>(acc_n)    z = acc_n

This module judges that form once for both: the axis, the start's dims,
whether onnxruntime makes the start and runs the ops that grow it, and
whether the pieces may differ in size along the axis (``ragged``, a form
some runtimes get wrong: :data:`lowering.runtimes.profiles.RAGGED_CONCAT`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from lowering.runtimes.ort_kernels import first_unsupported

#: The element types onnxruntime's ConstantOfShape makes (measured with 1.32, at
#: opsets 11 and 18; the kernel table lists the type of its shape input only).
EMPTY_TYPES = frozenset(
    [
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
        ir.DataType.BOOL,
    ]
)

Dim = int | str | ir.SymbolicDim | None


@dataclasses.dataclass(frozen=True)
class ConcatForm:
    """Concat along ``axis`` (of the elements with ``new_axis`` inserted, as 1, in
    ``dims``); ``ragged``: the pieces may differ in size along it."""

    axis: int
    new_axis: bool
    dims: tuple[Dim, ...]
    ragged: bool

    @property
    def start(self) -> list[Dim]:
        """The empty start's dims: no element along the axis."""
        return [0 if a == self.axis else d for a, d in enumerate(self.dims)]


def concat_form(
    shape: tuple[Dim, ...],
    dtype: ir.DataType,
    axis: int,
    new_axis: bool,
    opset: int,
    fixed: Callable[[Dim], bool],
    reads_back: bool = False,
) -> ConcatForm | str:
    """The concat of elements of ``shape`` along ``axis``, or why it cannot be
    built: ``fixed`` says whether a dim is one size every iteration;
    ``reads_back``: the elements are sliced out of it again (SequenceAt)."""
    rank = len(shape) + (1 if new_axis else 0)
    if rank == 0 or not -rank <= axis < rank:
        return "its concat's axis is out of range"
    axis %= rank
    dims = list(shape)
    if new_axis:
        dims.insert(axis, 1)
    if not all(fixed(d) for a, d in enumerate(dims) if a != axis):
        return f"a dim of its elements other than the concat's axis ({axis}) is not proven fixed"
    if dtype not in EMPTY_TYPES:
        return f"onnxruntime makes no empty {dtype.name} tensor to start from"
    ops: list[tuple[str, ir.DataType | None]] = [("Concat", dtype)]
    if new_axis:
        ops.append(("Unsqueeze", dtype))
    if reads_back:
        ops += [("Slice", dtype)] + ([("Squeeze", dtype)] if new_axis else [])
    if (missing := first_unsupported(ops, opset)) is not None:
        return f"onnxruntime has no {missing} for {dtype.name}"
    return ConcatForm(axis, new_axis, tuple(dims), not new_axis and not fixed(dims[axis]))
