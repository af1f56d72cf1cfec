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
from lowering.verify.settings import ATOL, BIAS_MIN, BIAS_SHARE, FLOAT64_ULPS, RTOL, ULPS

__all__ = [  # the defaults are re-exported from lowering.verify.settings
    "ATOL",
    "FLOAT64_ULPS",
    "NARROW_FLOATS",
    "RTOL",
    "ULPS",
    "Tolerance",
    "compare_value",
]

#: Mantissa bits of float32 and float64 (for ulps and the bias check).
WIDE_FLOATS: dict[str, int] = {"float32": 23, "complex64": 23, "float64": 52, "complex128": 52}

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
    """How close two float values must be, by element type; each type has its own.

    float32 (complex64): ``|a - b| <= atol + rtol * |b|``. float64 (complex128):
    ``float64_ulps`` units in the last place of ``max(|b|, 1)`` (2**24: 2**-28
    relative, where one rounding to float32 is up to 2**-24), or ``rtol`` and
    ``atol`` where they are given (``float64_ulps`` None). float16, bfloat16 and
    float8, where one unit in the last place (ulp) is 1e-3 or more relative:
    ``|a - b| <= ulps * ulp(max(|b|, 1))``, so a right rewrite that rounds a
    partial result to the narrow type passes (below 1, a sum's rounding is
    that of its larger terms), and one that is off by more than a few
    roundings does not.

    Beside each element, an output's errors together: a mean error (signed,
    or toward larger magnitudes) of more than one ulp of a narrow type, or
    :data:`BIAS_SHARE` of the float32 or float64 tolerance, over at least
    :data:`BIAS_MIN` finite elements and more than three standard errors (so
    rounding noise, in either direction, is no bias), is a bias: a
    systematic error (a bfloat16 result 2.5% off is 3-5 ulps, within 8).
    """

    rtol: float = RTOL
    atol: float = ATOL
    ulps: int = ULPS
    float64_ulps: int | None = FLOAT64_ULPS

    def describe(self, dtype: np.dtype) -> str:
        if dtype.name in NARROW_FLOATS:
            return f"{self.ulps} ulp ({dtype.name})"
        if WIDE_FLOATS.get(dtype.name) == 52 and self.float64_ulps is not None:
            return f"2**{int(np.log2(self.float64_ulps))} ulp ({dtype.name})"
        return f"rtol {self.rtol:g}, atol {self.atol:g}"

    def allowed(self, dtype: np.dtype, b: np.ndarray) -> np.ndarray:
        """The largest difference each element of ``b`` (float64) may have."""
        bits = NARROW_FLOATS.get(dtype.name)
        if bits is not None:
            return self.ulps * ulp(b, bits)
        if WIDE_FLOATS.get(dtype.name) == 52 and self.float64_ulps is not None:
            return self.float64_ulps * ulp(b, 52)
        return self.atol + self.rtol * np.abs(b)

    def bias(self, dtype: np.dtype, a: np.ndarray, b: np.ndarray) -> float | None:
        """A bias of ``a`` against ``b`` (:func:`bias`): a mean error of more than one
        ulp of a narrow type, of more than :data:`BIAS_SHARE` of the tolerance
        of float32 and float64."""
        limit = 1 / self.ulps if dtype.name in NARROW_FLOATS else BIAS_SHARE
        return bias(a, b, self.allowed(dtype, b), limit)


def ulp(b: np.ndarray, bits: int) -> np.ndarray:
    """One unit in the last place of ``max(|b|, 1)`` for a type of ``bits`` mantissa bits."""
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(b), 1.0))) - bits)


def bias(a: np.ndarray, b: np.ndarray, allowed: np.ndarray, limit: float) -> float | None:
    """The mean signed error of ``a`` against ``b`` (float64, all finite), in units
    of ``allowed`` (each element's tolerance), when it is a bias: more than
    ``limit`` of them over at least :data:`BIAS_MIN` elements, and more than
    three standard errors (rounding noise either way is none). Signed as is
    (an offset) and toward larger magnitudes (a scale: ``a = 1.025 * b``)."""
    if a.size < BIAS_MIN or a.dtype.kind == "c":
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.where(allowed > 0, (a - b) / allowed, 0.0)
    for signed in (errors, errors * np.sign(b)):
        mean = float(signed.mean())
        noise = 3 * float(signed.std()) / np.sqrt(signed.size)
        if abs(mean) > max(limit, noise):
            return mean
    return None


def compare_value(
    row: Row, a, b, tolerance: Tolerance, where: str, structure_only: bool = False
) -> None:
    """Fail ``row`` where ``a`` and ``b`` differ; ``structure_only``: in kind,
    sequence length, dtype and shape only (an output that is random in A)."""
    if a is None or b is None:  # an optional output
        if (a is None) != (b is None):
            row.fail(f"{where}: absent in {'A' if a is None else 'B'} only")
        return
    if isinstance(a, list) or isinstance(b, list):
        _compare_sequences(row, a, b, tolerance, where, structure_only)
        return
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        row.fail(f"{where}: dtype {a.dtype} in A, {b.dtype} in B")
        return
    if a.shape != b.shape:
        row.fail(f"{where}: shape {list(a.shape)} in A, {list(b.shape)} in B")
        return
    if structure_only:
        return
    row.elements += int(a.size)  # the values compared, over every run and element
    if a.dtype.kind in "fc" or a.dtype.type in ML_FLOATS:
        _compare_floats(row, a, b, tolerance, where)
    elif not np.array_equal(a, b):
        _fail_exact(row, a, b, where)


def _fail_exact(row: Row, a: np.ndarray, b: np.ndarray, where: str) -> None:
    """Values held exactly that differ: how many, and how far for numbers."""
    differing = int(np.sum(a != b))
    if a.dtype.kind in "iub" and a.size:
        delta = np.abs(a.astype(np.float64) - b.astype(np.float64))
        row.max_abs = max(row.max_abs, float(delta.max()))
    row.fail(f"{where}: {differing} of {a.size} values differ")


def _compare_sequences(
    row: Row, a, b, tolerance: Tolerance, where: str, structure_only: bool
) -> None:
    """Two sequences: the same length, and element by element."""
    if not (isinstance(a, list) and isinstance(b, list)):
        row.fail(f"{where}: a sequence in one model, a tensor in the other")
        return
    if len(a) != len(b):
        row.fail(f"{where}: {len(a)} elements in A, {len(b)} in B")
        return
    for i, (element_a, element_b) in enumerate(zip(a, b, strict=True)):
        compare_value(row, element_a, element_b, tolerance, f"{where}[{i}]", structure_only)


def _compare_floats(
    row: Row, a: np.ndarray, b: np.ndarray, tolerance: Tolerance, where: str
) -> None:
    """Two float tensors of one dtype and shape: NaN where the other has NaN, infinities
    exactly, the rest within the tolerance and without a bias."""
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
    elif (mean := tolerance.bias(dtype, a[finite], b[finite])) is not None:
        row.fail(
            f"{where}: a bias: A is off by {mean:+.2g} of {tolerance.describe(dtype)} on "
            f"average over {int(np.sum(finite))} values, though each is within it"
        )
