"""Output dims that the package computes itself, by the ONNX spec's own rules.

Python's slicing is not ONNX's: ``range(4)[-10::-1]`` is empty, where ONNX
clamps the adjusted start of a negative step into ``[0, dim - 1]`` and keeps
one element. Where runtimes read the spec differently the answer is None
(unknown), never a guess. Every rule here is checked against onnxruntime
over edge values (tests/test_vectorize_shapes.py)::

    dim 4, start -10, end -20, step -1       Python: []     ONNX: [x0]
    dim 4, start 3, end INT64_MAX, step -1   the spec: []   onnxruntime: [x3, x2, x1, x0]
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1


def slice_length(dim: int, start: int, end: int, step: int) -> int | None:
    """How many elements ``Slice`` keeps of an axis of size ``dim``; None where
    that is not one answer (a step of 0 is invalid; onnxruntime reads an end of
    INT64_MAX with a negative step as "through the first element", where the
    spec clamps it to ``dim - 1``)."""
    if step == 0 or (step < 0 and end == INT64_MAX and dim > 0):
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
