"""Check with onnxruntime that two models compute the same results.

``python -m lowering.verify A.onnx B.onnx`` runs both models on the same
inputs and compares every output, position by position: the same name, the
same kind, and for sequences the same length and, element by element, the
same dtype, shape and values (floats within rtol/atol, everything else
exactly). ``python -m lowering IN OUT --verify`` does the same for a model
and its lowering. Python: :func:`compare` returns a :class:`Report`.

Exit codes: 0 all outputs match, 1 a mismatch, 2 usage, 3 could not compare
(onnxruntime cannot run a model, or the inputs cannot be read).

Inputs come from ``--inputs FILE.npz`` or are synthesized from the declared
input types, one set per run (``--runs``, default 3):

- every ONNX tensor dtype, strings and bools included (bfloat16, float8 and
  the 4-bit types through ml_dtypes);
- sequence inputs take length 3, 0, 1, 2, ... in successive runs, the same
  length for every sequence input of a run (SequenceMap needs that);
- a symbolic dim that any tensor input uses is one size across all inputs;
  a symbolic dim only sequence elements use takes a new size for each
  element index, shared by the sequences, so elements differ in shape while
  paired elements still fit together; ``--dim NAME=SIZE`` fixes a dim
  everywhere; a dim with no name gets a fresh size.

In an npz file a tensor input ``X`` is the array ``X``; a sequence input
``S`` is the arrays ``S[0]``, ``S[1]``, ... in order, and an empty sequence
is the single key ``S[]`` (its array is ignored). With ``--inputs`` there
is one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import re
import sys
from collections.abc import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort

RTOL = 1e-4
ATOL = 1e-5
SEQUENCE_LENGTHS = (3, 0, 1, 2)
_WORDS = np.array(["", "a", "onnx", "Loop", "sequence", "ünï", "x y"], dtype=object)

MATCH, MISMATCH, COULD_NOT_COMPARE = "match", "mismatch", "could not compare"
EXIT_CODES = {MATCH: 0, MISMATCH: 1, COULD_NOT_COMPARE: 3}


class CannotCompare(Exception):
    """A model that onnxruntime cannot run, or inputs that cannot be read."""


@dataclasses.dataclass(frozen=True)
class _Port:
    """A graph input or output: name, whether a sequence, element dtype, dims."""

    name: str
    sequence: bool
    dtype: int
    dims: tuple[int | str | None, ...] | None

    def kind(self) -> str:
        dtype = onnx.helper.tensor_dtype_to_string(self.dtype).split(".")[-1].lower()
        return f"seq(tensor({dtype}))" if self.sequence else f"tensor({dtype})"


@dataclasses.dataclass
class Row:
    """One output's comparison over all runs."""

    name: str
    kind: str
    elements: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    problem: str | None = None

    @property
    def verdict(self) -> str:
        return "ok" if self.problem is None else f"MISMATCH: {self.problem}"

    def fail(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem


@dataclasses.dataclass
class Report:
    """The outcome: a row per output, or the reason no comparison was possible."""

    rows: list[Row]
    runs: int
    reason: str | None = None

    @property
    def status(self) -> str:
        if self.reason is not None:
            return COULD_NOT_COMPARE
        return MISMATCH if any(row.problem for row in self.rows) else MATCH

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def mismatched(self) -> list[str]:
        return [row.name for row in self.rows if row.problem]

    def table(self) -> str:
        if self.reason is not None:
            return f"could not compare: {self.reason}"
        header = ("output", "kind", "elements", "max abs", "max rel", "verdict")
        lines = [header] + [
            (r.name, r.kind, str(r.elements), f"{r.max_abs:.3g}", f"{r.max_rel:.3g}", r.verdict)
            for r in self.rows
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
        text = [
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False))
            + "  "
            + line[-1]
            for line in lines
        ]
        return "\n".join(text) + f"\n({self.runs} run{'s' if self.runs != 1 else ''})"


ModelLike = str | os.PathLike | onnx.ModelProto


def compare(
    a: ModelLike,
    b: ModelLike,
    *,
    inputs: Mapping[str, object] | None = None,
    runs: int = 3,
    seed: int = 0,
    rtol: float = RTOL,
    atol: float = ATOL,
    dims: Mapping[str, int] | None = None,
) -> Report:
    """Run ``a`` and ``b`` in onnxruntime on the same inputs and compare every output.

    ``inputs`` (a feed dict; sequences as lists of arrays) makes one run;
    otherwise ``runs`` input sets are synthesized from ``a``'s input types.
    """
    try:
        proto_a, proto_b = _load(a), _load(b)
        session_a, session_b = _session(a, "A"), _session(b, "B")
        inputs_a, outputs_a = _ports(proto_a.graph, "input"), _ports(proto_a.graph, "output")
        outputs_b = _ports(proto_b.graph, "output")
        _check_inputs(inputs_a, _ports(proto_b.graph, "input"))
        feed_sets = (
            [dict(inputs)]
            if inputs is not None
            else [_synthesize(inputs_a, run, seed, dict(dims or {})) for run in range(runs)]
        )
    except CannotCompare as error:
        return Report([], 0, reason=str(error))
    rows = _signature_rows(outputs_a, outputs_b)
    compared, rejected = 0, []
    for feeds in feed_sets:
        results_a, error_a = _try_run(session_a, feeds, "A")
        results_b, error_b = _try_run(session_b, feeds, "B")
        if error_a and error_b:
            rejected.append(error_a)  # inputs neither model accepts prove nothing
            continue
        if error_a:
            return Report(rows, compared, reason=f"{error_a}, but B runs")
        if error_b:
            for row in rows:
                row.fail(f"{error_b}, but A runs")
            compared += 1
            continue
        compared += 1
        for row, result_a, result_b in zip(rows, results_a, results_b, strict=False):
            _compare_value(row, result_a, result_b, rtol, atol, row.name)
    if not compared:
        return Report(rows, 0, reason=f"both models rejected every input set: {rejected[0]}")
    return Report(rows, compared)


def _load(model: ModelLike) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model), load_external_data=False)
    except Exception as error:
        raise CannotCompare(f"cannot read {os.fspath(model)}: {error}") from error


def _session(model: ModelLike, label: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise CannotCompare(f"onnxruntime cannot load {label}: {_one_line(error)}") from error


def _try_run(session: ort.InferenceSession, feeds: dict, label: str):
    """The outputs, or None and why onnxruntime could not run ``label``."""
    try:
        return session.run(None, _ort_feeds(feeds)), None
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises many kinds
        return None, f"onnxruntime cannot run {label}: {_one_line(error)}"


def _ort_feeds(feeds: dict) -> dict:
    """numpy arrays where onnxruntime takes them, OrtValues for ml_dtypes arrays."""
    converted = {}
    for name, value in feeds.items():
        if isinstance(value, np.ndarray) and value.dtype.type in _ML_DTYPES:
            raw = value.view(np.uint16 if value.itemsize == 2 else np.uint8)
            onnx_type = _ML_DTYPES[value.dtype.type]
            converted[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_type)
        else:
            converted[name] = value
    return converted


_ML_DTYPES = {
    ml_dtypes.bfloat16: onnx.TensorProto.BFLOAT16,
    ml_dtypes.float8_e4m3fn: onnx.TensorProto.FLOAT8E4M3FN,
    ml_dtypes.float8_e4m3fnuz: onnx.TensorProto.FLOAT8E4M3FNUZ,
    ml_dtypes.float8_e5m2: onnx.TensorProto.FLOAT8E5M2,
    ml_dtypes.float8_e5m2fnuz: onnx.TensorProto.FLOAT8E5M2FNUZ,
}


_SMALL_INTS = {
    getattr(ml_dtypes, name): bounds
    for name, bounds in {
        "int4": (-8, 8),
        "uint4": (0, 16),
        "int2": (-2, 2),
        "uint2": (0, 4),
    }.items()
    if hasattr(ml_dtypes, name)
}


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())


def _ports(graph: onnx.GraphProto, which: str) -> list[_Port]:
    initializers = {init.name for init in graph.initializer}
    ports = []
    for info in getattr(graph, which):
        if which == "input" and info.name in initializers:
            continue  # an overridable initializer keeps its default
        ports.append(_port(info))
    return ports


def _port(info: onnx.ValueInfoProto) -> _Port:
    type_proto = info.type
    sequence = type_proto.WhichOneof("value") == "sequence_type"
    if sequence:
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.WhichOneof("value") != "tensor_type":
        raise CannotCompare(f"{info.name!r} is not a tensor or a sequence of tensors")
    tensor = type_proto.tensor_type
    dims = None
    if tensor.HasField("shape"):
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return _Port(info.name, sequence, tensor.elem_type, dims)


def _check_inputs(a: list[_Port], b: list[_Port]) -> None:
    names_a, names_b = [p.name for p in a], [p.name for p in b]
    if sorted(names_a) != sorted(names_b):
        raise CannotCompare(f"the models take different inputs: {names_a} and {names_b}")


def _signature_rows(a: list[_Port], b: list[_Port]) -> list[Row]:
    rows = []
    for i, (port_a, port_b) in enumerate(itertools.zip_longest(a, b)):
        if port_a is None:
            rows.append(Row(port_b.name, port_b.kind(), problem=f"output {i} exists only in B"))
            continue
        row = Row(port_a.name, port_a.kind())
        if port_b is None:
            row.fail(f"output {i} exists only in A")
        elif port_b.name != port_a.name:
            row.fail(f"output {i} is {port_a.name!r} in A but {port_b.name!r} in B")
        elif port_b.kind() != port_a.kind():
            row.fail(f"declared as {port_a.kind()} in A but {port_b.kind()} in B")
        rows.append(row)
    return rows


def _compare_value(row: Row, a, b, rtol: float, atol: float, where: str) -> None:
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)):
            row.fail(f"{where}: a sequence in one model, a tensor in the other")
            return
        if len(a) != len(b):
            row.fail(f"{where}: {len(a)} elements in A, {len(b)} in B")
            return
        for i, (element_a, element_b) in enumerate(zip(a, b, strict=True)):
            _compare_value(row, element_a, element_b, rtol, atol, f"{where}[{i}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    row.elements += 1
    if a.dtype != b.dtype:
        row.fail(f"{where}: dtype {a.dtype} in A, {b.dtype} in B")
        return
    if a.shape != b.shape:
        row.fail(f"{where}: shape {list(a.shape)} in A, {list(b.shape)} in B")
        return
    if a.dtype.kind in "fc" or a.dtype.type in _ML_DTYPES:
        a, b = (
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64),
        )
        same_nan = np.array_equal(np.isnan(a), np.isnan(b))
        finite = ~(np.isnan(a) | np.isnan(b))
        with np.errstate(invalid="ignore"):
            diff = np.where(finite & (a != b), np.abs(a - b), 0.0)
        rel = diff / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
        if diff.size:
            row.max_abs = max(row.max_abs, float(np.nanmax(diff)))
            row.max_rel = max(row.max_rel, float(np.nanmax(rel)))
        if not same_nan or not np.all(diff <= atol + rtol * np.abs(np.where(finite, b, 0))):
            row.fail(f"{where}: values differ (max abs {float(np.nanmax(diff, initial=0)):.3g})")
    elif not np.array_equal(a, b):
        differing = int(np.sum(a != b))
        if a.dtype.kind in "iub" and a.size:
            delta = np.abs(a.astype(np.float64) - b.astype(np.float64))
            row.max_abs = max(row.max_abs, float(delta.max()))
        row.fail(f"{where}: {differing} of {a.size} values differ")


def _synthesize(ports: Sequence[_Port], run: int, seed: int, fixed: dict[str, int]) -> dict:
    rng = np.random.default_rng(seed + run)
    length = SEQUENCE_LENGTHS[run % len(SEQUENCE_LENGTHS)]
    tensor_dims = {d for p in ports if not p.sequence for d in (p.dims or ()) if isinstance(d, str)}
    shared = dict(fixed)
    for name in sorted(tensor_dims - set(shared)):
        shared[name] = int(rng.integers(1, 5))
    per_element = [dict(shared) for _ in range(length)]
    feeds = {}
    for port in ports:
        if port.sequence:
            feeds[port.name] = [
                _array(port, _shape(port.dims, per_element[i], rng), rng) for i in range(length)
            ]
        else:
            feeds[port.name] = _array(port, _shape(port.dims, shared, rng), rng)
    return feeds


def _shape(dims, bound: dict[str, int], rng) -> tuple[int, ...]:
    if dims is None:
        return tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))
    shape = []
    for dim in dims:
        if isinstance(dim, int):
            shape.append(dim)
        elif isinstance(dim, str):
            if dim not in bound:
                bound[dim] = int(rng.integers(1, 5))
            shape.append(bound[dim])
        else:
            shape.append(int(rng.integers(1, 4)))
    return tuple(shape)


def _array(port: _Port, shape: tuple[int, ...], rng) -> np.ndarray:
    """Random contents of the port's element dtype, as an array even for a scalar."""
    dtype = object if port.dtype == onnx.TensorProto.STRING else None
    return np.asarray(_contents(port, shape, rng), dtype=dtype)


def _contents(port: _Port, shape: tuple[int, ...], rng):
    if port.dtype == onnx.TensorProto.STRING:
        return rng.choice(_WORDS, size=shape)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(port.dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.issubdtype(dtype, np.unsignedinteger):
        return rng.integers(0, 10, shape).astype(dtype)
    if np.issubdtype(dtype, np.signedinteger):
        return rng.integers(-9, 10, shape).astype(dtype)
    if dtype.type in _SMALL_INTS:
        low, high = _SMALL_INTS[dtype.type]
        return rng.integers(low, high, shape).astype(dtype)
    return (rng.standard_normal(shape) * 2).astype(dtype)


def load_inputs(path: str, model: ModelLike) -> dict:
    """Read an npz of inputs, sequences as ``S[0]``, ``S[1]``, ... or ``S[]``."""
    ports = {p.name: p for p in _ports(_load(model).graph, "input")}
    try:
        stored = dict(np.load(path, allow_pickle=True))
    except Exception as error:
        raise CannotCompare(f"cannot read inputs from {path}: {error}") from error
    feeds: dict = {}
    elements: dict[str, dict[int, np.ndarray]] = {}
    for key, array in stored.items():
        match = re.fullmatch(r"(.*)\[(\d*)\]", key)
        if match and match.group(1) in ports and ports[match.group(1)].sequence:
            found = elements.setdefault(match.group(1), {})
            if match.group(2):
                found[int(match.group(2))] = array
        else:
            feeds[key] = array
    for name, found in elements.items():
        if sorted(found) != list(range(len(found))):
            raise CannotCompare(f"{path}: the elements of {name!r} are not numbered 0..n-1")
        feeds[name] = [found[i] for i in range(len(found))]
    missing = sorted(set(ports) - set(feeds))
    if missing:
        raise CannotCompare(f"{path} has no value for input(s) {', '.join(missing)}")
    return feeds


def _dim(text: str) -> tuple[str, int]:
    name, sep, size = text.partition("=")
    if not sep or not name or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE, got {text!r}")
    return name, int(size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lowering.verify",
        description="Run two models in onnxruntime on the same inputs and compare every output.",
    )
    parser.add_argument("a", metavar="A.onnx")
    parser.add_argument("b", metavar="B.onnx")
    parser.add_argument("--inputs", metavar="FILE.npz", help="inputs to use instead of random ones")
    parser.add_argument("--runs", type=int, default=3, help="input sets to synthesize (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first run (default 0)")
    parser.add_argument("--rtol", type=float, default=RTOL, help=f"default {RTOL}")
    parser.add_argument("--atol", type=float, default=ATOL, help=f"default {ATOL}")
    parser.add_argument(
        "--dim",
        type=_dim,
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="fix a symbolic dim everywhere (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        inputs = load_inputs(args.inputs, args.a) if args.inputs else None
    except CannotCompare as error:
        report = Report([], 0, reason=str(error))
    else:
        report = compare(
            args.a,
            args.b,
            inputs=inputs,
            runs=args.runs,
            seed=args.seed,
            rtol=args.rtol,
            atol=args.atol,
            dims=dict(args.dim),
        )
    print(report.table())
    print(summary(report, args.a, args.b), file=sys.stderr)
    return report.exit_code


def summary(report: Report, a: str, b: str) -> str:
    """One line saying what the comparison found."""
    if report.status == MATCH:
        return f"{b} matches {a} on every output"
    if report.status == MISMATCH:
        return f"{b} does not match {a}: {', '.join(map(repr, report.mismatched()))}"
    return f"could not compare {a} and {b}: {report.reason}"


if __name__ == "__main__":
    sys.exit(main())
