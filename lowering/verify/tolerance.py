"""How two values are held to each other: :class:`Tolerance`, and :func:`compare_value`.

:func:`compare_value` walks two outputs (absent optionals, sequences,
tensors) and fails the output's row where they differ: float32/float64
within rtol/atol, narrow floats (:data:`NARROW_FLOATS`) within ulps, NaN
only where the other has NaN, infinities exactly, everything else exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lowering.verify.dtypes import ML_FLOATS
from lowering.verify.report import Row
from lowering.verify.settings import ATOL, RTOL, ULPS

__all__ = [  # the defaults are re-exported from lowering.verify.settings
    "ATOL",
    "NARROW_FLOATS",
    "RTOL",
    "ULPS",
    "Tolerance",
    "compare_value",
]

#: Floating types narrower than float32, and their mantissa bits.
NARROW_FLOATS: dict[str, int] = {
    "float16": 10,
    "bfloat16": 7,
    "float8_e4m3fn": 3,
    "float8_e4m3fnuz": 3,
    "float8_e5m2": 2,
    "float8_e5m2fnuz": 2,
}


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close two float values must be, by element type.

    float32, float64 and complex values: ``|a - b| <= atol + rtol * |b|``.
    float16, bfloat16 and float8 values, where one unit in the last place
    (ulp) is 1e-3 or more relative: ``|a - b| <= ulps * ulp(max(|b|, 1))``,
    so a right rewrite that rounds a partial result to the narrow type
    passes (below 1, a sum's rounding is that of its larger terms), and one
    that is off by more than a few roundings does not.
    """

    rtol: float = RTOL
    atol: float = ATOL
    ulps: int = ULPS

    def describe(self, dtype: np.dtype) -> str:
        if dtype.name not in NARROW_FLOATS:
            return f"rtol {self.rtol:g}, atol {self.atol:g}"
        return f"{self.ulps} ulp ({dtype.name})"

    def allowed(self, dtype: np.dtype, b: np.ndarray) -> np.ndarray:
        """The largest difference each element of ``b`` (float64) may have."""
        bits = NARROW_FLOATS.get(dtype.name)
        if bits is None:
            return self.atol + self.rtol * np.abs(b)
        return self.ulps * 2.0 ** (np.floor(np.log2(np.maximum(np.abs(b), 1.0))) - bits)


def compare_value(row: Row, a, b, tolerance: Tolerance, where: str) -> None:
    if a is None or b is None:  # an optional output
        if (a is None) != (b is None):
            row.fail(f"{where}: absent in {'A' if a is None else 'B'} only")
        return
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)):
            row.fail(f"{where}: a sequence in one model, a tensor in the other")
            return
        if len(a) != len(b):
            row.fail(f"{where}: {len(a)} elements in A, {len(b)} in B")
            return
        for i, (element_a, element_b) in enumerate(zip(a, b, strict=True)):
            compare_value(row, element_a, element_b, tolerance, f"{where}[{i}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    row.elements += 1
    if a.dtype != b.dtype:
        row.fail(f"{where}: dtype {a.dtype} in A, {b.dtype} in B")
        return
    if a.shape != b.shape:
        row.fail(f"{where}: shape {list(a.shape)} in A, {list(b.shape)} in B")
        return
    if a.dtype.kind in "fc" or a.dtype.type in ML_FLOATS:
        row.tolerance = row.tolerance or tolerance.describe(a.dtype)
        dtype = a.dtype
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
        a, b = a.astype(wide), b.astype(wide)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        # An infinity matches only the same infinity: inf - inf is no
        # difference and inf <= atol + rtol * inf would let 1e38 pass for inf.
        infinite = np.isinf(a) | np.isinf(b)
        finite = ~(nan_a | nan_b | infinite)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(finite, np.abs(a - b), 0.0)
            rel = diff / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
        if diff.size:
            row.max_abs = max(row.max_abs, float(diff.max()))
            row.max_rel = max(row.max_rel, float(rel.max()))
        bad_inf = infinite & ~(nan_a | nan_b) & (a != b)
        if not np.array_equal(nan_a, nan_b):
            row.fail(f"{where}: NaN in {int(np.sum(nan_a != nan_b))} place(s) of only one model")
        elif np.any(bad_inf):
            row.fail(f"{where}: {int(np.sum(bad_inf))} infinite value(s) differ")
        elif not np.all(diff <= tolerance.allowed(dtype, np.where(finite, b, 0))):
            row.fail(
                f"{where}: values differ by more than {tolerance.describe(dtype)} "
                f"(max abs {float(diff.max()):.3g})"
            )
    elif not np.array_equal(a, b):
        differing = int(np.sum(a != b))
        if a.dtype.kind in "iub" and a.size:
            delta = np.abs(a.astype(np.float64) - b.astype(np.float64))
            row.max_abs = max(row.max_abs, float(delta.max()))
        row.fail(f"{where}: {differing} of {a.size} values differ")
