"""Output dims that the package computes itself, by the ONNX spec's own rules.

Python's slicing is not ONNX's: ``range(4)[-10::-1]`` is empty, where ONNX
clamps the adjusted start of a negative step into ``[0, dim - 1]`` and keeps
one element. Where runtimes read the spec differently the answer is None
(unknown), never a guess. Every rule here is checked against onnxruntime
over edge values (tests/test_vectorize_shapes.py)::

    dim 4, start -10, end -20, step -1       Python: []     ONNX: [x0]
    dim 4, start 3, end INT64_MAX, step -1   the spec: []   onnxruntime: [x3, x2, x1, x0]
    (the same for an end of INT32_MAX, in int64 or int32 ends)

The window ops' sizes are onnxruntime's where it reads the spec its own way
(SAME padding of a pool from the undilated kernel; a ConvTranspose's SAME
size no larger than its unpadded one), swept against it over edge attributes
(tests/test_computed_shapes.py).
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
#: The ends onnxruntime reads, with a negative step, as "through the first
#: element" (int64 ends of either value, int32 ends of INT32_MAX), where the
#: spec clamps them to ``dim - 1``.
THROUGH_FIRST = (INT64_MAX, INT32_MAX)


def slice_length(dim: int, start: int, end: int, step: int) -> int | None:
    """How many elements ``Slice`` keeps of an axis of size ``dim``; None where
    that is not one answer (a step of 0 is invalid; an end of
    :data:`THROUGH_FIRST` with a negative step is read two ways)."""
    if step == 0 or (step < 0 and end in THROUGH_FIRST and dim > 0):
        return None
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return max(0, -(-(start - end) // -step))


def onnxruntime_slice_length(dim: int, start: int, end: int, step: int) -> int | None:
    """:func:`slice_length` as onnxruntime reads an end of :data:`THROUGH_FIRST`
    with a negative step: through the first element."""
    if step < 0 and end in THROUGH_FIRST:
        end = -dim - 1
    return slice_length(dim, start, end, step)


def pool_output_size(
    dim: int,
    kernel: int,
    stride: int,
    dilation: int,
    pads: tuple[int, int],
    auto_pad: str,
    ceil_mode: bool,
) -> int | None:
    """How many windows a pool (MaxPool, AveragePool, LpPool) slides along an
    axis of size ``dim``; None where onnxruntime truncates (a window wider than
    the padded axis) or the pads are negative.

    With ``ceil_mode`` a window that would start in the end pad is dropped:
    dim 4, kernel 2, stride 2, pads [0, 1] slides 2 windows, not 3.
    """
    if stride < 1 or dilation < 1 or kernel < 1:
        return None
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # From the undilated kernel, and below zero where it is narrower than
        # the stride (onnxruntime's MaxPool refuses that; its other pools run it).
        needed = (-(-dim // stride) - 1) * stride + kernel - dim
        head = needed // 2 if auto_pad == "SAME_UPPER" else (needed + 1) // 2
        total = needed
    elif auto_pad == "VALID":
        head = total = 0
    else:
        head, total = pads[0], pads[0] + pads[1]
    span = dim + total - dilation * (kernel - 1) - 1
    if span < 0 or (auto_pad == "NOTSET" and min(pads) < 0):
        return None
    if not ceil_mode:
        return span // stride + 1
    count = -(-span // stride) + 1
    return count - 1 if (count - 1) * stride >= dim + head else count


def conv_transpose_output_size(
    dim: int,
    kernel: int,
    stride: int,
    dilation: int,
    pads: tuple[int, int],
    auto_pad: str,
    output_padding: int,
) -> int | None:
    """A ConvTranspose's output size along an axis of size ``dim`` (no
    ``output_shape`` given); None where it would not be positive.

    SAME padding aims at ``dim * stride`` but never pads below zero, so the
    unpadded size wins when it is smaller (onnxruntime: dim 1, kernel 1,
    stride 2 gives 1, not 2); ``output_padding`` is not added then.
    """
    unpadded = stride * (dim - 1) + output_padding + (kernel - 1) * dilation + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        size = min(dim * stride, unpadded)
    elif auto_pad == "VALID":
        size = unpadded
    else:
        size = unpadded - pads[0] - pads[1]
    return size if size > 0 else None
