"""Every run's feeds: synthesized from the ports by the schedule, or given and conformed.

Synthesis (:func:`synthesize`) shares symbolic dims the way SequenceMap
needs them. Given inputs (a feed dict, a list of them, an npz file) are
converted to the declared dtypes only when no value changes, and refused
(exit 2) otherwise: a silent cast would compare other inputs than the
user's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from lowering.verify.dtypes import ML_FLOATS, SMALL_INTS
from lowering.verify.npz import read_inputs
from lowering.verify.ports import Feeds, Port
from lowering.verify.report import InputsError
from lowering.verify.runs import RunSpec, dim_size, schedule
from lowering.verify.values import ValueRange, make_array


def feed_sets(
    ports, inputs, runs, seed, dims, val_ranges, notes, groups=None, offsets=None
) -> list[tuple[int, str, Feeds]]:
    """(label, description, feeds) for every run: read from an npz path or given
    as feed dicts (both conformed to the declared dtypes), or else synthesized
    by the first ``runs`` runs of the schedule, run i seeded with seed + i."""
    if inputs is not None and (dims or val_ranges):
        raise InputsError("--dim and --val-range shape synthesized inputs; not given with --inputs")
    if isinstance(inputs, (str, os.PathLike)):
        path = os.fspath(inputs)
        return [
            (label, f"from {path}", _conform_feeds(ports, feeds, f"{path} run {label}", notes))
            for label, feeds in read_inputs(path, ports)
        ]
    if isinstance(inputs, Mapping):
        inputs = [inputs]
    if inputs is not None:
        return [
            (i, "given inputs", _conform_feeds(ports, dict(feeds), f"run {i}", notes))
            for i, feeds in enumerate(inputs)
        ]
    ranges = dict(val_ranges or {})
    _check_ranges(ports, ranges)
    return [
        (run, *synthesized_run(ports, spec, seed + run, dims, ranges, groups, offsets))
        for run, spec in enumerate(schedule(runs))
    ]


def synthesized_run(
    ports, spec: RunSpec, seed: int, dims, ranges, groups, offsets=None
) -> tuple[str, Feeds]:
    """One run's description and feeds, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    feeds, bound = synthesize(
        ports, spec, rng, dict(dims or {}), dict(ranges or {}), groups, offsets
    )
    sizes = ", ".join(f"{name}={size}" for name, size in sorted(bound.items()))
    return spec.describe() + (f"; {sizes}" if sizes else ""), feeds


def _check_ranges(ports: Sequence[Port], ranges: dict) -> None:
    by_name = {p.name: p for p in ports}
    for name in ranges:
        if name is None:
            continue
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise InputsError(
                f"--val-range names {name!r}, which is not an input (inputs: {known})"
            )
        if not _numeric(by_name[name].dtype):
            raise InputsError(f"--val-range does not apply to {name!r}, a {by_name[name].kind()}")


def _numeric(dtype: int) -> bool:
    return dtype not in (onnx.TensorProto.STRING, onnx.TensorProto.BOOL)


def synthesize(
    ports: Sequence[Port],
    spec: RunSpec,
    rng: np.random.Generator,
    fixed: dict[str, int],
    ranges: Mapping[str | None, ValueRange] | None = None,
    groups: Mapping[str, int] | None = None,
    offsets: Mapping[str, int] | None = None,
) -> tuple[Feeds, dict[str, int]]:
    """One run's feeds, and the size each shared symbolic dim took.

    A symbolic dim that any tensor input uses is one size across all inputs;
    a symbolic dim only sequence elements use takes a new size for each
    element index, shared by the sequences, so elements differ in shape while
    paired elements still fit together (SequenceMap needs that). Every
    sequence input has the run's length, except with ``spec.independent``:
    then sequences of another group (``groups``, from :func:`sequence_groups`:
    sequences no map ties together) are longer by their group's number
    (shorter with ``spec.shorter``). ``offsets`` (:func:`sequence_offsets`)
    lengthens a tied sequence that a map reads with an element inserted.
    An input that is also an initializer is left out (its default holds)
    unless ``spec.override``; an optional input is absent with ``spec.absent``.
    """
    tensor_dims = _tensor_dims(ports)
    shared = _shared_dims(ports, tensor_dims, fixed, spec.dims, rng)
    lengths = [_length(p, spec, groups or {}, offsets or {}) for p in ports]
    longest = max([spec.length, *(n for p, n in zip(ports, lengths) if p.sequence)])
    dims = _Dims(shared, longest, spec.dims == "same")
    feeds: Feeds = {}
    for port, length in zip(ports, lengths):
        if not _default_holds(port, spec):
            feeds[port.name] = _feed(port, length, spec, ranges or {}, dims, rng)
    return feeds, {name: shared[name] for name in sorted(tensor_dims | set(fixed))}


def _tensor_dims(ports: Sequence[Port]) -> set[str]:
    """The symbolic dims the tensor inputs use: one size each, across all inputs."""
    return {d for p in ports if not p.sequence for d in (p.dims or ()) if isinstance(d, str)}


def _default_holds(port: Port, spec: RunSpec) -> bool:
    """An initializer's input is left out (its default holds) unless the run overrides
    defaults; a count's default always holds."""
    return port.default is not None and (port.count or not spec.override)


def _feed(port: Port, length: int, spec: RunSpec, ranges: Mapping, dims: _Dims, rng):
    """One input's value: absent, a sequence of ``length`` elements, or a tensor."""
    if port.optional and spec.absent:
        return None
    value_range = ranges.get(port.name, ranges.get(None)) if _numeric(port.dtype) else None
    if port.sequence:
        return _sequence(port, length, spec, value_range, dims, rng)
    shape = _shape(port.dims, dims.shared, spec.dims, rng)
    return make_array(port, shape, spec.values, value_range, rng)


def _shared_dims(
    ports: Sequence[Port], tensor_dims: set[str], fixed: dict[str, int], mode: str, rng
) -> dict[str, int]:
    """A size for each symbolic dim of the tensor inputs (``fixed`` as given)."""
    shared = dict(fixed)
    if mode == "wide":  # shape by shape: one wide dim in each
        for port in ports:
            if not port.sequence and port.dims is not None:
                _shape(port.dims, shared, mode, rng)
    for name in sorted(tensor_dims - set(shared)):
        shared[name] = dim_size(mode, rng)
    return shared


def _length(
    port: Port, spec: RunSpec, groups: Mapping[str, int], offsets: Mapping[str, int]
) -> int:
    """A sequence input's length in this run (see :func:`synthesize`)."""
    extra = offsets.get(port.name, 0)
    if spec.shorter:
        return max(0, spec.length - groups.get(port.name, 0)) + extra
    return spec.length + extra + (groups.get(port.name, 0) if spec.independent else 0)


class _Dims:
    """The dims each element index draws from: one dict for all in mode "same" (all
    elements share a shape), else one per index, each starting from the shared dims."""

    def __init__(self, shared: dict[str, int], longest: int, same: bool) -> None:
        self.shared = shared
        self.one = dict(shared)
        self.same = same
        self.per_element = [self.one if same else dict(shared) for _ in range(longest)]


def _sequence(port: Port, length: int, spec: RunSpec, value_range, dims: _Dims, rng) -> list:
    """The elements of one sequence input, each shape drawn before its values."""
    mode = spec.dims
    fixed_shape = _shape(port.dims, dims.one, mode, rng) if dims.same else None
    return [
        make_array(port, fixed_shape or _shape(port.dims, dims.per_element[i], mode, rng),
                   spec.values, value_range, rng, index=i)
        for i in range(length)
    ]  # fmt: skip


def _shape(dims, bound: dict[str, int], mode: str, rng) -> tuple[int, ...]:
    """A shape for declared ``dims``; an unknown rank is 0..2 (3 or 4 in modes rank3
    and rank4). In mode "wide" the first dim drawn in a shape that has no dim
    above 64 yet is 65..130, the others 1..2: one wide dim, cheaply."""
    if dims is None:
        rank = {"rank3": 3, "rank4": 4}.get(mode, int(rng.integers(0, 3)))
        dims = (None,) * rank
    has_wide = any(
        (d if isinstance(d, int) else bound.get(d, 0) if isinstance(d, str) else 0) > 64
        for d in dims
    )
    shape = []
    for dim in dims:
        if isinstance(dim, int):
            shape.append(dim)
            continue
        if isinstance(dim, str) and dim in bound:
            shape.append(bound[dim])
            continue
        size = dim_size(mode, rng, wide=not has_wide)
        has_wide = has_wide or size > 64
        if isinstance(dim, str):
            bound[dim] = size
        shape.append(size)
    return tuple(shape)


def _conform_feeds(ports: Sequence[Port], feeds: Feeds, where: str, notes: list[str]) -> Feeds:
    """Each array in its port's declared dtype, or InputsError saying why not."""
    by_name = {p.name: p for p in ports}
    missing = [name for name, p in by_name.items() if name not in feeds and p.default is None]
    if missing:
        raise InputsError(f"{where}: no value for input(s) {', '.join(missing)}")
    extra = [name for name in feeds if name not in by_name]
    if extra:
        raise InputsError(f"{where}: {', '.join(map(repr, extra))} is not an input of the model")
    return {
        name: _conform_value(by_name[name], value, where, name, notes)
        for name, value in feeds.items()
    }


def _conform_value(port: Port, value, where: str, name: str, notes: list[str]):
    """One input's value conformed: absent (if optional), a list of arrays, or an array."""
    if value is None:
        if not port.optional:
            raise InputsError(f"{where}: {name!r} is a {port.kind()}; it cannot be absent")
        return None
    if port.sequence != isinstance(value, (list, tuple)):
        expected = "a list of arrays" if port.sequence else "an array"
        raise InputsError(f"{where}: {name!r} is a {port.kind()}; give {expected}")
    if port.sequence:
        return [
            _conform(port, element, f"{where}: {name}[{i}]", notes)
            for i, element in enumerate(value)
        ]
    return _conform(port, value, f"{where}: {name}", notes)


def _conform(port: Port, value, where: str, notes: list[str]) -> np.ndarray:
    """Convert to the declared dtype when no value changes but float rounding."""
    array = np.asarray(value)
    if port.dtype == onnx.TensorProto.STRING:
        if array.dtype.kind in "OU":
            return array.astype(object)
        raise InputsError(f"{where} is {array.dtype}, but the input is {port.kind()}")
    target = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(port.dtype))
    if array.dtype == target:
        return array
    if array.dtype.kind == "V" and array.dtype.itemsize == target.itemsize:
        return array.view(target)  # np.load gives ml_dtypes arrays back as raw bytes
    converted = _converted(array, target)
    if converted is None:
        raise InputsError(
            f"{where} is {array.dtype}, but the input is {port.kind()}, and converting would "
            f"change values; save the array as {target}"
        )
    if array.dtype.kind != "b":
        notes.append(f"{where}: {array.dtype} converted to {target}, the declared dtype")
    return converted


def _converted(array: np.ndarray, target: np.dtype) -> np.ndarray | None:
    """``array`` as ``target`` if that keeps every value (floats may round), else None."""
    source_kind = array.dtype.kind
    if target.kind == "b":
        return _as_bool(array, target)
    if source_kind == "b" or source_kind in "OUSVcM":
        return None
    with np.errstate(all="ignore"):
        converted = array.astype(target)
        back = converted.astype(np.float64) if source_kind == "f" else converted.astype(array.dtype)
    return converted if _keeps_values(array, back, target) else None


def _keeps_values(array: np.ndarray, back: np.ndarray, target: np.dtype) -> bool:
    """Whether ``back`` (the conversion, read back) has ``array``'s values: float to
    float may round but not overflow; any other conversion is exact."""
    target_float = target.kind == "f" or target.type in ML_FLOATS
    target_int = target.kind in "iu" or target.type in SMALL_INTS
    source_float = array.dtype.kind == "f"
    if target_float and source_float:
        return not np.any(np.isinf(back) & ~np.isinf(array))  # overflow, not rounding
    if not (target_float or target_int):
        return False
    if source_float and not np.all(np.isfinite(array)):
        return False
    return bool(np.array_equal(back, array))


def _as_bool(array: np.ndarray, target: np.dtype) -> np.ndarray | None:
    """Bools, or ints that are all 0 or 1, as bools."""
    if array.dtype.kind == "b":
        return array.astype(target)
    if array.dtype.kind in "iu" and np.all((array == 0) | (array == 1)):
        return array.astype(target)
    return None
