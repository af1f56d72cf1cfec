"""The contents of one synthesized array, in a :data:`VALUE_MODES` mode or a ``--val-range``.

Every dtype is covered, strings and bools included. Ints that are counts
(:attr:`Port.count`) stay within +-1000; ints that are data go beyond
int16 and to their type's limits, where a body computed in a narrower
type breaks.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import onnx

from lowering.verify.dtypes import SMALL_INTS
from lowering.verify.ports import Port
from lowering.verify.report import InputsError

_WORDS = np.array(["", "a", "onnx", "Loop", "sequence", "ünï", "x y"], dtype=object)
_ODD_WORDS = np.array(["", " ", "\t\n", "ünï 名前", "a" * 64, "0", "-1"], dtype=object)
# Words that differ only in case or whitespace, in this order: a scalar is "ONNX",
# two strings "ONNX" and "onnx ", ...
_CASE_WORDS = ["ONNX", "onnx ", "Onnx", " onnx", "onnx", "on nx", "ONNX\t", "A", "a"]
# Exact ties, in this order (a scalar is 0.5, where round-half-even and
# floor(x + 0.5) differ; two values 0.5 and -1.5, ...)
_TIES = [0.5, -1.5, 2.5, -0.5, 1.5, -2.5, 3.5, -3.5]


@dataclasses.dataclass(frozen=True)
class ValueRange:
    """``--val-range``: the values of one input (or of all, name None) stay in [lo, hi]."""

    lo: float
    hi: float


def make_array(
    port: Port, shape, values: str, value_range: ValueRange | None, rng, index: int = 0
) -> np.ndarray:
    """Contents of the port's element dtype, as an array even for a scalar.
    ``index``: the element's position in its sequence (mode "masked").

    onnxruntime takes no numpy scalar (np.float32(1.0)), only arrays.
    """
    dtype = object if port.dtype == onnx.TensorProto.STRING else None
    return np.asarray(_contents(port, shape, values, value_range, rng, index), dtype=dtype)


def _in_order(choices, shape, rng) -> np.ndarray:
    """``choices`` repeated to fill ``shape``, at shuffled places: every array holds
    the first ``size`` choices whatever the seed."""
    size = int(np.prod(shape, dtype=np.int64))
    filled = np.resize(np.asarray(choices, dtype=object), size)
    return filled[rng.permutation(size)].reshape(shape)


def _contents(port: Port, shape, values: str, value_range: ValueRange | None, rng, index=0):
    if port.dtype == onnx.TensorProto.STRING:
        if values == "ties":
            return _in_order(_CASE_WORDS, shape, rng)
        words = {"normal": _WORDS, "zeros": np.array([""], dtype=object)}.get(values, _ODD_WORDS)
        return np.asarray(rng.choice(words, size=shape), dtype=object)
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(port.dtype))
    if dtype == np.bool_:
        fill = {"zeros": False, "large": True}.get(values)
        return np.full(shape, fill) if fill is not None else rng.random(shape) < 0.5
    if value_range is not None:
        return _in_range(dtype, shape, values, value_range, rng)
    if dtype.kind == "c":
        real = np.dtype(np.float64 if dtype.itemsize == 16 else np.float32)
        complex_values = np.empty(shape, dtype)
        complex_values.real = _floats(real, shape, values, rng, index)
        complex_values.imag = _floats(real, shape, values, rng, index)
        return complex_values
    if dtype.kind in "iu" or dtype.type in SMALL_INTS:
        ints = {"huge": "large"}.get(values, values if values in _INT_MODES else "normal")
        return _ints(dtype, shape, ints, rng, count=port.count)
    return _floats(dtype, shape, values, rng, index)


_INT_MODES = ("normal", "zeros", "large", "special")


def _ints(dtype: np.dtype, shape, values: str, rng, count: bool = False) -> np.ndarray:
    """``count``: the values reach a trip count, a size or a shape (:func:`size_inputs`),
    and stay within +-1000; data goes beyond int16 and to the type's limits."""
    info = ml_dtypes.iinfo(dtype) if dtype.type in SMALL_INTS else np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if count and dtype.itemsize > 2:  # no 2**63 trips or allocations
        low, high = max(low, -1000), min(high, 1000)
    pick = _INT_PICKS.get(values, _normal_ints)
    picked = pick(low, high, shape, rng, count)
    return np.array(np.asarray(picked).tolist(), dtype=dtype).reshape(shape)


def _zero_ints(low: int, high: int, shape, rng, count: bool):
    return rng.choice([0, 0, 0, 1, -1] if low < 0 else [0, 0, 1], size=shape)


def _large_ints(low: int, high: int, shape, rng, count: bool):
    sign = -1 if low < 0 and rng.random() < 0.5 else 1
    if not count and high > 2**15:
        # beyond int16 (an int64 or int32 body computed in a narrower type),
        # and near the type's own limits
        beyond = rng.integers(2**15, min(high, 2**40), size=shape, endpoint=True).astype(object)
        near = high - rng.integers(0, 1000, size=shape).astype(object)
        return sign * np.where(rng.random(shape) < 0.5, beyond, near)
    smallest = max(1, min(high // 4, 100))
    return sign * rng.integers(smallest, max(smallest + 1, min(high // 2, 1000)), size=shape)


def _special_ints(low: int, high: int, shape, rng, count: bool):
    extremes = [low, high, 0, 1] + ([-1, low + 1] if low < 0 else [high - 1])
    return rng.choice(np.array(extremes, dtype=object), size=shape)


def _normal_ints(low: int, high: int, shape, rng, count: bool):
    return rng.integers(max(low, -9), min(high, 9) + 1, size=shape, dtype=np.int64)


# How each value mode draws integers in [low, high] (the rest: "normal", -9..9).
_INT_PICKS = {"zeros": _zero_ints, "large": _large_ints, "special": _special_ints}


def _floats(dtype: np.dtype, shape, values: str, rng, index: int = 0) -> np.ndarray:
    normal = rng.standard_normal(shape) * 2
    draw = _FLOAT_DRAWS.get(values)
    if draw is None:
        return normal.astype(dtype)
    return draw(dtype, shape, rng, normal, index)


def _huge_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    # exponents spread evenly from a tenth of the max down to 1e6 (float16:
    # its top binade and below), at shuffled places: a scalar is the largest
    info = ml_dtypes.finfo(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    top = math.log10(float(info.max)) - 1.0
    low = min(6.0, top - 1.0) if top > 7 else top - 0.5
    top = top if top > 7 else math.log10(float(info.max)) - 0.1
    exponents = np.linspace(top, low, size) if size > 1 else np.array([top])
    sign = -1.0 if rng.random() < 0.5 else 1.0
    return (sign * 10.0 ** exponents[rng.permutation(size)]).reshape(shape).astype(dtype)


def _tiny_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    # the first half (a scalar) near the smallest normal, so 1/x is finite and
    # flushing to 0 makes it inf; the rest a few ulps above 0; both signs
    info = ml_dtypes.finfo(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    smallest = float(info.smallest_normal)
    near = smallest * rng.uniform(0.3, 0.99, size)
    deep = float(info.smallest_subnormal) * rng.integers(1, 9, size)
    picked = np.where(np.arange(size) < max(1, size // 2), near, deep)
    signs = np.where(rng.random(size) < 0.5, -1.0, 1.0)
    return (signs * picked)[rng.permutation(size)].reshape(shape).astype(dtype)


def _offset_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    # mean 2**(mantissa/2 + 3) (float32 2**14.5), spread 1: x*x has no bits
    # left for the spread; the first two values are mean and mean + 1
    info = ml_dtypes.finfo(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    mean = 2.0 ** round(info.nmant / 2 + 3)
    spread = rng.uniform(0.0, 1.0, size)
    spread[:2] = [0.0, 1.0][: min(2, size)]
    sign = -1.0 if rng.random() < 0.5 else 1.0
    return (sign * (mean + spread))[rng.permutation(size)].reshape(shape).astype(dtype)


def _tie_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    return _in_order(_TIES, shape, rng).astype(np.float64).astype(dtype)


def _masked_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    # a tensor is all -inf; a sequence's elements all -inf, all NaN, normal, ...
    fill = (-np.inf, np.nan, None)[index % 3]
    return normal.astype(dtype) if fill is None else np.full(shape, fill, dtype)


def _zero_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    picked = rng.choice(np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.5]), size=shape)
    return np.where(rng.random(shape) < 0.8, picked, normal).astype(dtype)


def _large_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    largest = float(ml_dtypes.finfo(dtype).max)
    high = min(6.0, math.log10(largest) - 0.5)
    low = min(3.0, high - 1.0)
    sign = -1.0 if rng.random() < 0.5 else 1.0  # one sign: no cancellation in sums
    return (sign * 10.0 ** rng.uniform(low, high, shape)).astype(dtype)


def _special_floats(dtype: np.dtype, shape, rng, normal: np.ndarray, index: int) -> np.ndarray:
    # A third of the values (all three kinds from 4 values on, one of 2,
    # half the scalars) are NaN, inf or -inf; the rest stay finite so
    # that a multiplier or an offset input does not make every output NaN.
    flat = normal.reshape(-1)
    size = flat.size
    count = max(math.ceil(size / 3), min(3, size - 1)) if size > 1 else int(rng.random() < 0.5)
    specials = np.roll(np.array([np.nan, np.inf, -np.inf]), int(rng.integers(3)))
    for k, position in enumerate(rng.permutation(flat.size)[:count]):
        flat[position] = specials[k % 3]
    return normal.astype(dtype)


# How each value mode draws floats (the rest: "normal", standard normal times 2,
# which every mode draws first).
_FLOAT_DRAWS = {
    "huge": _huge_floats,
    "tiny": _tiny_floats,
    "offset": _offset_floats,
    "ties": _tie_floats,
    "masked": _masked_floats,
    "zeros": _zero_floats,
    "large": _large_floats,
    "special": _special_floats,
}


def _in_range(dtype: np.dtype, shape, values: str, value_range: ValueRange, rng) -> np.ndarray:
    """Values in [lo, hi]: uniform, or the bounds and 0 for the edge modes."""
    lo, hi = value_range.lo, value_range.hi
    if dtype.kind in "iu" or dtype.type in SMALL_INTS:
        info = ml_dtypes.iinfo(dtype) if dtype.type in SMALL_INTS else np.iinfo(dtype)
        lo, hi = max(math.ceil(lo), int(info.min)), min(math.floor(hi), int(info.max))
        if lo > hi:
            raise InputsError(f"--val-range {value_range.lo},{value_range.hi} holds no {dtype}")
        uniform = rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
        edges = np.array([lo, hi, min(max(0, lo), hi)], dtype=np.int64)
    else:
        uniform = rng.uniform(lo, hi, shape)
        edges = np.array([lo, hi, min(max(0.0, lo), hi)])
    if values != "normal":
        uniform = np.where(rng.random(shape) < 0.7, rng.choice(edges, size=shape), uniform)
    return np.asarray(uniform).astype(dtype)
