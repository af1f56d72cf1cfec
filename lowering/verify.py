"""Check with onnxruntime that two models compute the same results.

``python -m lowering.verify A.onnx B.onnx`` (or ``onnx-verify A B``) runs
both models on the same inputs and compares every output, position by
position: the same name, the same kind, and for sequences the same length
and, element by element, the same dtype, shape and values (floats within
rtol/atol, NaN only where the other has NaN, infinities exactly, everything
else exactly). Each output is also checked against what its own model
declares: dtype, rank, static dims, and symbolic dims that agree with each
other and with the inputs. ``python -m lowering IN OUT --verify`` does the
same for a model and its lowering, with the same options (:func:`add_options`).
Python: :func:`compare` returns a :class:`Report`.

A is the reference. The exit codes say who is to blame:

- 1: a mismatch on some run, or B (the rewrite) cannot be read, loaded or
  run where A runs. A mismatch always wins over everything below.
- 2: usage, or inputs that cannot be used (``--inputs`` unreadable, missing
  an input, or of a dtype that cannot be converted without changing values).
- 3: no run could be compared, because A itself cannot be loaded or run.
- 0: otherwise. Runs where A fails are listed with onnxruntime's reason and
  not counted: a rewrite that handles an input the original rejects (an
  empty sequence into ConcatFromSequence) is not wrong.

Inputs come from ``--inputs FILE.npz`` or are synthesized from A's declared
input types by a schedule (:data:`DEFAULT_SCHEDULE`, printed with ``-v``)
built to hit the edges where rewrites break: sequence lengths 0, 1, 2, 3, 4,
5, 8 and 9; every symbolic dim 1 in some runs and 5..7 in others; values
normal, zero-heavy (with -0.0), large (1e3..1e6 for float32) and, for
floats, NaN and +-inf. ``--runs K`` takes the first K runs of the schedule,
cycling with new random values past its end. ``--val-range [NAME:]LO,HI``
keeps an input's values (every numeric input's, without NAME) inside
[LO, HI], for models that are only defined there.

Files: ``--save-inputs FILE.npz`` writes every run's inputs to FILE (the one
name the user gave). On a mismatch, the failing run's inputs are written to
a new file in the system's temporary folder (``tempfile.mkstemp``, never an
existing file) and the path is printed, so ``--inputs PATH`` replays it.

In an npz file a tensor input ``X`` is the array ``X``; a sequence input
``S`` is the arrays ``S[0]``, ``S[1]``, ... in order, and an empty sequence
is the single key ``S[]`` (its array is ignored). A file of several runs
(what ``--save-inputs`` writes for more than one run) has the key
``__runs__`` listing the run numbers and the keys ``K/X``, ``K/S[0]``, ...
for run K. Arrays whose dtype differs from the declared one are converted
when no value changes (float64 to float32 rounds, with a note), and
refused otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import pathlib
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx

from lowering.runtimes.sessions import open_session

RTOL = 1e-4
ATOL = 1e-5
ULPS = 8
_WORDS = np.array(["", "a", "onnx", "Loop", "sequence", "ünï", "x y"], dtype=object)
_ODD_WORDS = np.array(["", " ", "\t\n", "ünï 名前", "a" * 64, "0", "-1"], dtype=object)

MATCH, MISMATCH, BAD_INPUTS, COULD_NOT_COMPARE = (
    "match",
    "mismatch",
    "bad inputs",
    "could not compare",
)
EXIT_CODES = {MATCH: 0, MISMATCH: 1, BAD_INPUTS: 2, COULD_NOT_COMPARE: 3}
RUNS_KEY = "__runs__"


class CannotCompare(Exception):
    """A model that cannot be read, loaded or given inputs."""


class InputsError(ValueError):
    """Inputs the user gave (a file, a range, a feed dict) that cannot be used."""


# Tolerances.

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


# The schedule.

DIM_MODES = {
    "random": "dims 1..4",
    "ones": "dims 1",
    "large": "dims 5..7",
    "zero": "dims 0",
    "primes": "prime dims",  # 2, 3, 5, 7, 11, 13
    "eights": "dims 8k",  # 8, 16, 24, 32: heads, tiles, vector widths
}
PRIMES = (2, 3, 5, 7, 11, 13)
EIGHTS = (8, 16, 24, 32)
VALUE_MODES = {
    "normal": "normal values",  # standard normal times 2; ints -9..9
    "zeros": "mostly zeros",  # 0.0 and -0.0, some +-1 and 0.5; ints 0, +-1
    # float32 1e3..1e6 (float16 1e3..2e4), one sign; ints that are data: beyond
    # int16 and near the type's limits (counts and sizes: 100..999)
    "large": "large values",
    "special": "NaN and +-inf",  # among normal values; ints min, max, 0, +-1
}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One synthesized run: the sequence length, how dims and values are drawn,
    and the variations of what is fed:

    - ``override``: graph inputs that are also initializers get other values
      (a rewrite must never fold them into constants);
    - ``absent``: optional inputs are fed as absent (present otherwise);
    - ``independent``: sequence inputs that no map ties together get lengths
      of their own (the first keeps ``length``).
    """

    length: int
    dims: str = "random"
    values: str = "normal"
    override: bool = False
    absent: bool = False
    independent: bool = False

    def describe(self) -> str:
        text = f"length {self.length}, {DIM_MODES[self.dims]}, {VALUE_MODES[self.values]}"
        extras = [
            what
            for flag, what in (
                (self.override, "initializers overridden"),
                (self.absent, "optional inputs absent"),
                (self.independent, "untied sequences of their own lengths"),
            )
            if flag
        ]
        return ", ".join([text, *extras])


# Each entry is there for an edge a rewrite can get wrong: the empty and the
# single-element sequence, lengths past 4 and past 8, 6 and 7, a prime above
# 10, and lengths past every limit of the tool (--max-unroll's default 16:
# 17, 33) for a rewrite that unrolls, caps or special-cases lengths; dims of
# 0 (empty elements), 1 (broadcasting, squeezes), 5 and more, primes, and
# multiples of 8 and 16 (a body defined only there, such as attention
# heads); zeros and signed zeros, large values (clipping, overflow in a
# narrower type, an int64 body computed in int32) and NaN/inf; initializers
# fed other values, optional inputs absent, and independent sequences of
# different lengths.
DEFAULT_SCHEDULE: tuple[RunSpec, ...] = (
    RunSpec(3),
    RunSpec(0),
    RunSpec(1, "ones"),
    RunSpec(2, "random", "zeros", override=True),
    RunSpec(5, "large", absent=True),
    RunSpec(4, "ones", "large", independent=True),
    RunSpec(8, "random", "special"),
    RunSpec(2, "large", "large", override=True, absent=True),
    RunSpec(9, "ones", "zeros"),
    RunSpec(1, "large", "special", independent=True),
    RunSpec(6, "zero"),
    RunSpec(7, "primes", "large", override=True),
    RunSpec(17, "eights"),
    RunSpec(13, "primes", "special", absent=True, independent=True),
    RunSpec(33, "ones", "large"),
    RunSpec(3, "eights", "large", independent=True),
    RunSpec(2, "zero", "special", override=True),
)


def schedule(runs: int | None = None) -> list[RunSpec]:
    """The first ``runs`` runs (all of the default schedule when None).

    Past its end the schedule starts over; each run draws from its own seed,
    so the repeats bring new values and sizes.
    """
    count = len(DEFAULT_SCHEDULE) if runs is None else runs
    return [DEFAULT_SCHEDULE[i % len(DEFAULT_SCHEDULE)] for i in range(count)]


@dataclasses.dataclass(frozen=True)
class ValueRange:
    """``--val-range``: the values of one input (or of all, name None) stay in [lo, hi]."""

    lo: float
    hi: float


def parse_val_range(text: str) -> tuple[str | None, ValueRange]:
    """``[NAME:]LO,HI``. NAME may itself contain ``:``; the bounds never do."""
    name, sep, bounds = text.rpartition(":")
    low, comma, high = bounds.partition(",")
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        lo = hi = math.nan
    if not comma or not (math.isfinite(lo) and math.isfinite(hi)):
        raise argparse.ArgumentTypeError(f"expected [NAME:]LO,HI with finite LO, HI, got {text!r}")
    if lo > hi:
        raise argparse.ArgumentTypeError(f"LO must not exceed HI in {text!r}")
    if sep and not name:
        raise argparse.ArgumentTypeError(f"empty input name in {text!r}")
    return (name if sep else None), ValueRange(lo, hi)


# Reports.


@dataclasses.dataclass(frozen=True)
class _Port:
    """A graph input or output: name, whether a sequence, element dtype, dims.

    ``optional``: of an ``optional(...)`` type (fed present or absent).
    ``default``: an input that is also an initializer holds this value
    unless fed. ``count``: an integer input whose value reaches a trip
    count, a size or a shape (Loop, Range, Tile, Reshape, ...): its values
    stay small.
    """

    name: str
    sequence: bool
    dtype: int
    dims: tuple[int | str | None, ...] | None
    optional: bool = False
    default: np.ndarray | None = dataclasses.field(default=None, compare=False)
    count: bool = False

    def kind(self) -> str:
        dtype = onnx.helper.tensor_dtype_to_string(self.dtype).split(".")[-1].lower()
        kind = f"seq(tensor({dtype}))" if self.sequence else f"tensor({dtype})"
        return f"optional({kind})" if self.optional else kind

    def declared(self) -> str:
        """In ONNX text syntax: ``float[N,3]``, ``seq(int64[?])``, ``float`` for unknown shape."""
        dtype = onnx.helper.tensor_dtype_to_string(self.dtype).split(".")[-1].lower()
        if self.dims is not None:
            dtype += "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"
        declared = f"seq({dtype})" if self.sequence else dtype
        return f"optional({declared})" if self.optional else declared


@dataclasses.dataclass
class Row:
    """One output's comparison over all runs."""

    name: str
    kind: str
    elements: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    problem: str | None = None
    failures: int = 0
    tolerance: str = ""  # the float tolerance its values were held to ("" if none)

    @property
    def verdict(self) -> str:
        return "ok" if self.problem is None else f"MISMATCH: {self.problem}"

    def fail(self, problem: str) -> None:
        self.failures += 1
        if self.problem is None:
            self.problem = problem


@dataclasses.dataclass
class RunRecord:
    """What happened to one run: compared, mismatch, skipped (A fails) or not compared."""

    label: int
    description: str
    outcome: str = "compared"
    note: str | None = None

    def line(self) -> str:
        text = f"run {self.label} ({self.description}): {self.outcome}"
        return text + (f": {self.note}" if self.note else "")


@dataclasses.dataclass
class Report:
    """The outcome: a row per output, a record per run, and notes.

    ``reason`` says why no run could be compared (exit 3); ``input_error``
    why the inputs could not be used (exit 2). A failed row (exit 1) wins
    over both.
    """

    rows: list[Row]
    runs: int
    reason: str | None = None
    records: list[RunRecord] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    input_error: str | None = None
    failing_run: int | None = None
    saved_to: str | None = None  # where inputs were saved for --inputs
    saved_runs: int = 0  # how many runs (--save-inputs); 0: the failing run alone
    show_schedule: bool = False

    @property
    def status(self) -> str:
        if any(row.problem for row in self.rows):
            return MISMATCH
        if self.input_error is not None:
            return BAD_INPUTS
        if self.reason is not None:
            return COULD_NOT_COMPARE
        return MATCH

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def mismatched(self) -> list[str]:
        return [row.name for row in self.rows if row.problem]

    def table(self) -> str:
        if self.status == BAD_INPUTS:
            return f"cannot use the inputs: {self.input_error}"
        lines = []
        if self.show_schedule:
            lines += [record.line() for record in self.records]
        if self.rows and (self.runs or self.status == MISMATCH):
            header = ("output", "kind", "elements", "max abs", "max rel", "tolerance", "verdict")
            cells = [header] + [
                (
                    r.name,
                    r.kind,
                    str(r.elements),
                    f"{r.max_abs:.3g}",
                    f"{r.max_rel:.3g}",
                    r.tolerance or "exact",
                    r.verdict,
                )
                for r in self.rows
            ]
            widths = [max(len(c[i]) for c in cells) for i in range(len(header) - 1)]
            lines += [
                "  ".join(cell.ljust(width) for cell, width in zip(c, widths, strict=False))
                + "  "
                + c[-1]
                for c in cells
            ]
        total = len(self.records)
        if total and self.runs != total:
            lines.append(f"({self.runs} of {total} runs compared)")
        else:
            lines.append(f"({self.runs} run{'s' if self.runs != 1 else ''})")
        if not self.show_schedule:
            lines += _grouped(self.records)
        lines += [f"note: {note}" for note in self.notes]
        if self.reason is not None and self.status == COULD_NOT_COMPARE:
            lines.append(f"could not compare: {self.reason}")
        if self.saved_to is not None:
            if self.saved_runs:
                s = "s" if self.saved_runs != 1 else ""
                what = f"inputs of {self.saved_runs} run{s} saved to {self.saved_to}"
                if self.failing_run is not None:
                    what += f" (run {self.failing_run} fails)"
            else:
                what = f"inputs of failing run {self.failing_run} saved to {self.saved_to}"
            lines.append(f"{what}; replay with --inputs {self.saved_to}")
        return "\n".join(lines)


def _grouped(records: list[RunRecord]) -> list[str]:
    """The runs that were not plain matches, runs with the same fate on one line."""
    groups: dict[tuple[str, str | None], list[RunRecord]] = {}
    for record in records:
        if record.outcome != "compared":
            groups.setdefault((record.outcome, record.note), []).append(record)
    lines = []
    for (outcome, note), members in groups.items():
        if len(members) == 1 and outcome != "mismatch":
            lines.append(members[0].line())
            continue
        labels = ", ".join(str(r.label) for r in members)
        lines.append(f"run{'s' if len(members) > 1 else ''} {labels}: {outcome}")
        lines[-1] += f": {note}" if note else ""
    return lines


ModelLike = str | os.PathLike | onnx.ModelProto
Feeds = dict[str, Any]


def compare(
    a: ModelLike,
    b: ModelLike,
    *,
    inputs: Mapping[str, object] | Sequence[Mapping[str, object]] | str | os.PathLike | None = None,
    runs: int | None = None,
    seed: int = 0,
    rtol: float = RTOL,
    atol: float = ATOL,
    ulps: int = ULPS,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str | None, ValueRange] | None = None,
    save_inputs: str | os.PathLike | None = None,
    save_failing: bool = False,
    show_schedule: bool = False,
    runtime: str = "onnxruntime",
) -> Report:
    """Run ``a`` (the reference) and ``b`` in onnxruntime on the same inputs; compare.

    ``inputs`` is a feed dict (one run; sequences as lists of arrays), a list
    of them, or the path of an npz file; without it, ``runs`` input sets are
    synthesized by the schedule (all of it when None) from ``a``'s input
    types. ``save_inputs`` writes every run's inputs there; ``save_failing``
    writes the first failing run's inputs to a fresh temporary file.
    ``runtime`` (one of :data:`VERIFY_RUNTIMES`) runs ``b`` there instead, each
    run in a child process (a runtime may crash); ``a`` always runs in
    onnxruntime. Inputs that are also initializers then keep their defaults.
    """
    if runtime not in VERIFY_RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(VERIFY_RUNTIMES)}, not {runtime!r}")
    if inputs is not None and runs is not None:
        raise ValueError("give inputs or runs, not both")
    if runs is not None and runs < 1:
        raise ValueError("runs must be at least 1")
    tolerance = Tolerance(rtol, atol, ulps)
    report = Report([], 0, show_schedule=show_schedule)
    try:
        proto_a = _load(a, "A")
        inputs_a, outputs_a = _ports(proto_a, "input"), _ports(proto_a, "output")
    except CannotCompare as error:
        report.reason = str(error)
        return report
    broken_b = None  # why B cannot run at all: a broken rewrite wherever A runs
    outputs_b: list[_Port] = []
    try:
        proto_b = _load(b, "B")
        inputs_b, outputs_b = _ports(proto_b, "input"), _ports(proto_b, "output")
        broken_b = _input_difference(inputs_a, inputs_b)
    except CannotCompare as error:
        broken_b, inputs_b, outputs_b = str(error), inputs_a, outputs_a
    report.rows = _signature_rows(outputs_a, outputs_b)
    if runtime != "onnxruntime":  # other runtimes take no values for initializers
        inputs_a = [p for p in inputs_a if p.default is None]
        inputs_b = [p for p in inputs_b if p.default is None]
    try:
        groups = sequence_groups(proto_a)
        feed_sets = _feed_sets(inputs_a, inputs, runs, seed, dims, val_ranges, report.notes, groups)
        if save_inputs is not None:  # before running: a run that crashes still left them
            _save_all(report, feed_sets, os.fspath(save_inputs))
    except InputsError as error:
        report.input_error = str(error)
        return report
    try:
        session_a = _session(a, "A")
    except CannotCompare as error:
        report.reason = str(error)
        return report
    session_b = None
    elsewhere: dict[int, tuple[list | None, str | None]] = {}
    if broken_b is None and runtime != "onnxruntime":
        elsewhere = _run_elsewhere(runtime, b, inputs_b, feed_sets)
    elif broken_b is None:
        try:
            session_b = _session(b, "B")
        except CannotCompare as error:
            broken_b = str(error)
    failing: Feeds | None = None
    declared_notes: dict[str, str] = {}
    substantial: list[int] = []  # the compared runs whose inputs are not all empty
    for label, text, feeds in feed_sets:
        record = RunRecord(label, text)
        report.records.append(record)
        results_a, error_a = _try_run(session_a, feeds, "A")
        if label in elsewhere:
            results_b, error_b = elsewhere[label]
        elif session_b is not None:
            results_b, error_b = _try_run(session_b, feeds, "B")
        else:
            results_b, error_b = None, broken_b
        if error_a:
            if error_b:
                record.outcome, record.note = "not compared", f"both fail: {error_a}; {error_b}"
            else:
                record.outcome, record.note = "skipped", f"{error_a}, but B runs (not counted)"
            continue
        report.runs += 1
        if not _empty_inputs(inputs_a, feeds):
            substantial.append(label)
        before = sum(row.failures for row in report.rows)
        if error_b or results_a is None or results_b is None:
            for row in report.rows:
                row.fail(f"run {label}: {error_b}, where A runs")
        else:
            for row, result_a, result_b in zip(report.rows, results_a, results_b, strict=False):
                _compare_value(row, result_a, result_b, tolerance, f"run {label}: {row.name}")
            problems_a = _declaration_problems(inputs_a, outputs_a, feeds, results_a)
            problems_b = _declaration_problems(inputs_b, outputs_b, feeds, results_b)
            _blame_declarations(report.rows, label, outputs_a, outputs_b, problems_a, problems_b)
            for index, problem in problems_a.items():
                declared_notes.setdefault(
                    outputs_a[index].name,
                    f"A's own output {outputs_a[index].name!r} breaks its declaration "
                    f"(run {label}: {problem}); not counted against B",
                )
        if sum(row.failures for row in report.rows) > before:
            record.outcome = "mismatch"
            if failing is None:
                report.failing_run, failing = label, feeds
    report.notes += declared_notes.values()
    if not report.runs:
        report.reason = (
            "A fails on every input set; no run could be compared" if feed_sets else "no input sets"
        )
    elif not substantial:
        compared = [r.label for r in report.records if r.outcome != "skipped"]
        report.reason = (
            f"only runs with empty inputs (an empty sequence or a zero-sized tensor) could be "
            f"compared (run{'s' if len(compared) != 1 else ''} "
            f"{', '.join(map(str, compared))}); A fails on every other; give --inputs or --dim "
            "with sizes A accepts"
        )
    from_file = isinstance(inputs, (str, os.PathLike))  # replaying it needs no copy
    if failing is not None and save_failing and save_inputs is None and not from_file:
        _save_failing(report, failing)
    return report


def _empty_inputs(ports: Sequence[_Port], feeds: Feeds) -> bool:
    """Whether every input of a run is empty where it could hold something: an
    empty sequence, or an array (or element) with no values where its declared
    shape allows some. A model that is only compared on such runs is not
    shown to compute anything."""
    arrays: list[Any] = []
    for port in ports:
        value = feeds.get(port.name)
        if value is None:
            continue  # absent, or left to its default
        if port.sequence and not value:
            return True
        if port.dims is None or not all(isinstance(d, int) for d in port.dims):
            arrays += value if port.sequence else [value]
    return any(np.asarray(array).size == 0 for array in arrays)


def _blame_declarations(rows, label, outputs_a, outputs_b, problems_a, problems_b) -> None:
    """B's broken declarations fail their rows, unless B only kept one that A breaks too."""
    for index, problem in problems_b.items():
        inherited = (
            index in problems_a
            and index < len(outputs_a)
            and outputs_a[index].declared() == outputs_b[index].declared()
        )
        if not inherited and index < len(rows):
            rows[index].fail(f"run {label}: {outputs_b[index].name}: B declares {problem}")


def _feed_sets(
    ports, inputs, runs, seed, dims, val_ranges, notes, groups=None
) -> list[tuple[int, str, Feeds]]:
    """(label, description, feeds) for every run."""
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
    sets = []
    for run, spec in enumerate(schedule(runs)):
        feeds, bound = _synthesize(
            ports, spec, np.random.default_rng(seed + run), dict(dims or {}), ranges, groups
        )
        sizes = ", ".join(f"{name}={size}" for name, size in sorted(bound.items()))
        sets.append((run, spec.describe() + (f"; {sizes}" if sizes else ""), feeds))
    return sets


def _save_all(report: Report, feed_sets, path: str) -> None:
    """``--save-inputs``: every run, to the one file the user named."""
    try:
        with open(path, "wb") as stream:
            write_inputs(stream, [(label, feeds) for label, _, feeds in feed_sets])
    except OSError as error:
        raise InputsError(f"cannot write --save-inputs {path}: {_one_line(error)}") from error
    report.saved_to, report.saved_runs = path, len(feed_sets)


def _save_failing(report: Report, feeds: Feeds) -> None:
    """The first failing run, to a new file in the temporary folder, never an existing one."""
    run = report.failing_run
    assert run is not None, "set together with the failing run's feeds"
    try:
        descriptor, path = tempfile.mkstemp(prefix=f"verify-run{run}-", suffix=".npz")
        with os.fdopen(descriptor, "wb") as stream:
            write_inputs(stream, [(run, feeds)])
    except OSError as error:
        report.notes.append(f"could not save the failing run's inputs: {_one_line(error)}")
        return
    report.saved_to = path


def _load(model: ModelLike, label: str) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model), load_external_data=False)
    except Exception as error:
        raise CannotCompare(
            f"cannot read {label} ({os.fspath(model)}): {_one_line(error)}"
        ) from error


def _session(model: ModelLike, label: str):
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    try:
        return open_session(source, log_severity=4)
    except Exception as error:
        raise CannotCompare(f"onnxruntime cannot load {label}: {_one_line(error)}") from error


#: ``--runtime`` for verification: where B may run, its runner
#: (:data:`lowering.runtimes.runners.RUNNERS`), the module it needs and the package to
#: install for it.
VERIFY_RUNTIMES: dict[str, tuple[str, str, str] | None] = {
    "onnxruntime": None,
    "openvino": ("OpenVINO", "openvino", "openvino"),
    "tract": ("tract", "tract", "tract"),
    "onnx-reference": ("onnx.reference", "onnx", "onnx"),
    "tvm": ("TVM", "tvm", "apache-tvm"),
    "tinygrad": ("tinygrad", "tinygrad", "tinygrad"),
    "mnn": ("MNN", "MNN", "MNN"),
}


def missing_runtime(runtime: str) -> str | None:
    """What to install for ``runtime``, if it is not installed."""
    import importlib.util

    entry = VERIFY_RUNTIMES.get(runtime)
    if entry is None:
        return None
    _, module, package = entry
    if importlib.util.find_spec(module) is None:
        return f"--runtime {runtime} needs {package}: pip install {package}"
    return None


def _run_elsewhere(
    runtime: str, b: ModelLike, ports: Sequence[_Port], feed_sets
) -> dict[int, tuple[list | None, str | None]]:
    """B's outputs (or why it failed) on every run, in ``runtime``'s own child process."""
    from lowering.runtimes.runners import run_many

    entry = VERIFY_RUNTIMES[runtime]
    assert entry is not None, "onnxruntime runs in this process"
    name = entry[0]
    jobs: list = []
    labels: list[int] = []
    outcomes: dict[int, tuple[list | None, str | None]] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "b.onnx")
        if isinstance(b, onnx.ModelProto):
            onnx.save(b, path)
        else:
            path = os.fspath(b)
        for label, _, feeds in feed_sets:
            values = [feeds.get(p.name) for p in ports if p.name in feeds]
            if any(v is None or isinstance(v, list) for v in values):
                outcomes[label] = (None, f"{name} takes no sequence or absent input")
                continue
            jobs.append((pathlib.Path(path), values))
            labels.append(label)
        for label, result in zip(labels, run_many(name, jobs), strict=True):
            if isinstance(result, Exception):
                outcomes[label] = (None, f"{name} cannot run B: {_one_line(result)}")
            else:
                outcomes[label] = (list(result), None)
    return outcomes


def _try_run(session, feeds: Feeds, label: str):
    """The outputs, or None and why onnxruntime could not run ``label``."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4
    try:
        return session.run(None, _ort_feeds(feeds), options), None
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises many kinds
        return None, f"onnxruntime cannot run {label}: {_one_line(error)}"


def _ort_feeds(feeds: Feeds) -> Feeds:
    """numpy arrays where onnxruntime takes them, OrtValues for ml_dtypes arrays."""
    import onnxruntime as ort

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


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())


def _ports(model: onnx.ModelProto, which: str) -> list[_Port]:
    """The graph's inputs or outputs. An input that is also an initializer is a
    port with its default (fed other values in some runs); one whose data is
    external, or not a tensor, keeps its default."""
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    counts = size_inputs(model) if which == "input" else set()
    ports = []
    for info in getattr(graph, which):
        port = _port(info)
        if which == "input":
            port = dataclasses.replace(port, count=port.name in counts)
        if which == "input" and info.name in initializers:
            initializer = initializers[info.name]
            if initializer.data_location == onnx.TensorProto.EXTERNAL or port.sequence:
                continue
            try:
                default = onnx.numpy_helper.to_array(initializer)
            except Exception:  # noqa: BLE001, S112 -- a dtype numpy cannot hold: its default holds
                continue
            port = dataclasses.replace(port, dims=tuple(default.shape), default=default)
        ports.append(port)
    return ports


def _port(info: onnx.ValueInfoProto) -> _Port:
    type_proto = info.type
    optional = type_proto.WhichOneof("value") == "optional_type"
    if optional:
        type_proto = type_proto.optional_type.elem_type
    sequence = type_proto.WhichOneof("value") == "sequence_type"
    if sequence:
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.WhichOneof("value") != "tensor_type":
        raise CannotCompare(
            f"{info.name!r} is not a tensor, a sequence of tensors or an optional one"
        )
    tensor = type_proto.tensor_type
    dims = None
    if tensor.HasField("shape"):
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return _Port(info.name, sequence, tensor.elem_type, dims, optional)


# The inputs of these ops (by position) are trip counts, sizes, shapes, axes
# or indices: an input whose value reaches one is fed small values, which
# every op takes; one that reaches none is data, fed values near its type's
# limits too.
SIZE_POSITIONS: dict[str, tuple[int, ...]] = {
    "Loop": (0,),
    "Range": (0, 1, 2),
    "Tile": (1,),
    "Reshape": (1,),
    "ConstantOfShape": (0,),
    "Expand": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "OneHot": (1,),
    "TopK": (1,),
    "Pad": (1, 3),
    "Slice": (3,),
    "Split": (1,),
    "SplitToSequence": (1,),
    "SequenceAt": (1,),
    "SequenceInsert": (2,),
    "SequenceErase": (1,),
    "Gather": (1,),
    "GatherElements": (1,),
    "GatherND": (1,),
    "ScatterElements": (1,),
    "ScatterND": (1,),
    "Scatter": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "CumSum": (1,),
    "CenterCropPad": (1, 2),
    "Col2Im": (1, 2),
    "MaxUnpool": (1, 2),
    "NonMaxSuppression": (2,),
    "RoiAlign": (2,),
    "DFT": (1, 2),
    "STFT": (1, 2, 3),
    "ReverseSequence": (1,),
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                           "ReduceSumSquare")},
}  # fmt: skip


def size_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs whose values reach a :data:`SIZE_POSITIONS` input of
    some node, through any ops, subgraphs and model-local functions.

    Names are followed as written, ignoring shadowing: a name that might
    reach one counts, which only keeps more values small.
    """
    readers: dict[str, list[onnx.NodeProto]] = {}
    formals: dict[tuple[str, str], onnx.FunctionProto] = {
        (f.domain, f.name): f for f in model.functions
    }

    def index(nodes) -> None:
        for node in nodes:
            for name in node.input:
                readers.setdefault(name, []).append(node)
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    index(graph.node)
                    # a subgraph's inputs are fed from its node's inputs
                    for formal in graph.input:
                        for name in node.input:
                            readers.setdefault(name, []).append(_pass_on(formal.name))

    index(model.graph.node)
    for function in model.functions:
        index(function.node)
    found = set()
    for info in model.graph.input:
        seen, todo = set(), [info.name]
        while todo and info.name not in found:
            name = todo.pop()
            if name in seen or not name:
                continue
            seen.add(name)
            for node in readers.get(name, []):
                if any(
                    node.input[i] == name
                    for i in SIZE_POSITIONS.get(node.op_type, ())
                    if i < len(node.input)
                ):
                    found.add(info.name)
                    break
                todo += node.output
                callee = formals.get((node.domain, node.op_type))
                if callee is not None:
                    todo += [f for f, actual in zip(callee.input, node.input) if actual == name]
    return found


def _pass_on(name: str) -> onnx.NodeProto:
    """A stand-in reader that hands a value on to ``name`` (a subgraph input)."""
    return onnx.NodeProto(op_type="", output=[name])


def _input_difference(a: list[_Port], b: list[_Port]) -> str | None:
    """Why B cannot take A's inputs, if it cannot: different names or kinds."""
    names_a, names_b = [p.name for p in a], [p.name for p in b]
    if sorted(names_a) != sorted(names_b):
        return f"the models take different inputs: {names_a} in A, {names_b} in B"
    kinds_b = {p.name: p.kind() for p in b}
    for port in a:
        if kinds_b[port.name] != port.kind():
            return f"input {port.name!r} is {port.kind()} in A but {kinds_b[port.name]} in B"
    return None


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


def _compare_value(row: Row, a, b, tolerance: Tolerance, where: str) -> None:
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
            _compare_value(row, element_a, element_b, tolerance, f"{where}[{i}]")
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


# Declared outputs.


def _declaration_problems(
    inputs: list[_Port], outputs: list[_Port], feeds: Feeds, results: list
) -> dict[int, str]:
    """Output index -> how the run's value breaks the model's own declaration.

    Symbolic dims are bound by the tensor inputs and then by tensor outputs
    in order; sequence elements must agree with those, but a name that only
    sequences use may take a new size in each element (as the inputs do).
    """
    bound: dict[str, int] = {}
    for port in inputs:
        value = feeds.get(port.name)
        if not port.sequence and port.dims is not None and isinstance(value, np.ndarray):
            for dim, size in zip(port.dims, value.shape, strict=False):
                if isinstance(dim, str):
                    bound.setdefault(dim, size)
    problems = {}
    order = sorted(range(min(len(outputs), len(results))), key=lambda i: outputs[i].sequence)
    for index in order:
        port, value = outputs[index], results[index]
        problem = _declaration_problem(port, value, bound)
        if problem is not None:
            problems[index] = f"{port.declared()} but produced {problem}"
    return problems


def _declaration_problem(port: _Port, value, bound: dict[str, int]) -> str | None:
    if value is None:
        return None if port.optional else "nothing (an absent optional)"
    if port.sequence != isinstance(value, list):
        return "a sequence" if isinstance(value, list) else "a tensor"
    elements = value if port.sequence else [value]
    expected = _expected_dtype(port.dtype)
    for i, element in enumerate(elements):
        element = np.asarray(element)
        subject = f"element {i}" if port.sequence else "a tensor"
        if expected is not None and element.dtype != expected:
            return f"{subject} of dtype {element.dtype}"
        if port.dims is None:
            continue
        shape = list(element.shape)
        if element.ndim != len(port.dims):
            return f"{subject} of shape {shape} (rank {element.ndim})"
        for dim, size in zip(port.dims, element.shape, strict=True):
            if isinstance(dim, int) and dim != size:
                return f"{subject} of shape {shape}"
            if isinstance(dim, str):
                if dim in bound and bound[dim] != size:
                    return f"{subject} of shape {shape}, where {dim} = {bound[dim]}"
                if not port.sequence:
                    bound[dim] = size
    return None


def _expected_dtype(dtype: int) -> np.dtype | None:
    """The numpy dtype onnxruntime returns for ``dtype``, where that is certain."""
    if dtype == onnx.TensorProto.STRING:
        return np.dtype(object)
    try:
        expected = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return None
    return None if expected.type in _ML_DTYPES or expected.kind == "V" else expected


# Synthesis.


def _check_ranges(ports: Sequence[_Port], ranges: dict) -> None:
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


def _synthesize(
    ports: Sequence[_Port],
    spec: RunSpec,
    rng: np.random.Generator,
    fixed: dict[str, int],
    ranges: Mapping[str | None, ValueRange] | None = None,
    groups: Mapping[str, int] | None = None,
) -> tuple[Feeds, dict[str, int]]:
    """One run's feeds, and the size each shared symbolic dim took.

    A symbolic dim that any tensor input uses is one size across all inputs;
    a symbolic dim only sequence elements use takes a new size for each
    element index, shared by the sequences, so elements differ in shape while
    paired elements still fit together (SequenceMap needs that). Every
    sequence input has the run's length, except with ``spec.independent``:
    then sequences of another group (``groups``, from :func:`sequence_groups`:
    sequences no map ties together) are longer by their group's number.
    An input that is also an initializer is left out (its default holds)
    unless ``spec.override``; an optional input is absent with ``spec.absent``.
    """
    ranges = ranges or {}
    groups = groups or {}
    tensor_dims = {d for p in ports if not p.sequence for d in (p.dims or ()) if isinstance(d, str)}
    shared = dict(fixed)
    for name in sorted(tensor_dims - set(shared)):
        shared[name] = _size(spec.dims, rng)

    def length(port: _Port) -> int:
        return spec.length + (groups.get(port.name, 0) if spec.independent else 0)

    longest = max([spec.length, *(length(p) for p in ports if p.sequence)])
    per_element = [dict(shared) for _ in range(longest)]
    feeds: Feeds = {}
    for port in ports:
        if port.default is not None and (port.count or not spec.override):
            continue
        if port.optional and spec.absent:
            feeds[port.name] = None
            continue
        value_range = ranges.get(port.name, ranges.get(None)) if _numeric(port.dtype) else None
        if port.sequence:
            feeds[port.name] = [
                _array(port, _shape(port.dims, per_element[i], spec.dims, rng), spec.values, value_range, rng)
                for i in range(length(port))
            ]  # fmt: skip
        else:
            shape = _shape(port.dims, shared, spec.dims, rng)
            feeds[port.name] = _array(port, shape, spec.values, value_range, rng)
    return feeds, {name: shared[name] for name in sorted(tensor_dims | set(fixed))}


def sequence_groups(model: onnx.ModelProto) -> dict[str, int]:
    """The sequence inputs, numbered by group: sequences read by one map, at any
    depth (or derived from such: a map's output has its first input's length),
    share a group and must have one length; the others may differ."""
    inputs = [
        info.name
        for info in model.graph.input
        if info.type.WhichOneof("value") in ("sequence_type", "optional_type")
    ]
    root: dict[str, str] = {name: name for name in inputs}

    def find(name: str) -> str:
        while root[name] != name:
            name = root[name]
        return name

    source: dict[str, str] = {name: name for name in inputs}  # value -> the input it follows

    def visit(nodes) -> None:
        for node in nodes:
            if node.op_type == "SequenceMap":
                tied = [source[n] for n in node.input if n in source]
                for other in tied[1:]:
                    root[find(other)] = find(tied[0])
                if node.input and node.input[0] in source:
                    for output in node.output:
                        source[output] = source[node.input[0]]
            elif node.op_type == "Identity" and node.input and node.input[0] in source:
                source[node.output[0]] = source[node.input[0]]
            for attr in node.attribute:
                for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    visit(graph.node)

    visit(model.graph.node)
    for function in model.functions:
        visit(function.node)
    numbers: dict[str, int] = {}
    return {name: numbers.setdefault(find(name), len(numbers)) for name in inputs}


def _size(mode: str, rng: np.random.Generator) -> int:
    if mode == "ones":
        return 1
    if mode == "zero":
        return 0
    if mode == "large":
        return int(rng.integers(5, 8))
    if mode == "primes":
        return int(rng.choice(PRIMES))
    if mode == "eights":
        return int(rng.choice(EIGHTS))
    return int(rng.integers(1, 5))


def _shape(dims, bound: dict[str, int], mode: str, rng) -> tuple[int, ...]:
    if dims is None:
        return tuple(_size(mode, rng) for _ in range(int(rng.integers(0, 3))))
    shape = []
    for dim in dims:
        if isinstance(dim, int):
            shape.append(dim)
        elif isinstance(dim, str):
            if dim not in bound:
                bound[dim] = _size(mode, rng)
            shape.append(bound[dim])
        else:
            shape.append(_size(mode, rng))
    return tuple(shape)


def _array(port: _Port, shape, values: str, value_range: ValueRange | None, rng) -> np.ndarray:
    """Contents of the port's element dtype, as an array even for a scalar.

    onnxruntime takes no numpy scalar (np.float32(1.0)), only arrays.
    """
    dtype = object if port.dtype == onnx.TensorProto.STRING else None
    return np.asarray(_contents(port, shape, values, value_range, rng), dtype=dtype)


def _contents(port: _Port, shape, values: str, value_range: ValueRange | None, rng):
    if port.dtype == onnx.TensorProto.STRING:
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
        complex_values.real = _floats(real, shape, values, rng)
        complex_values.imag = _floats(real, shape, values, rng)
        return complex_values
    if dtype.kind in "iu" or dtype.type in _SMALL_INTS:
        return _ints(dtype, shape, values, rng, count=port.count)
    return _floats(dtype, shape, values, rng)


_SMALL_INTS = {
    getattr(ml_dtypes, name)
    for name in ("int4", "uint4", "int2", "uint2")
    if hasattr(ml_dtypes, name)
}


def _ints(dtype: np.dtype, shape, values: str, rng, count: bool = False) -> np.ndarray:
    """``count``: the values reach a trip count, a size or a shape (:func:`size_inputs`),
    and stay within +-1000; data goes beyond int16 and to the type's limits."""
    info = ml_dtypes.iinfo(dtype) if dtype.type in _SMALL_INTS else np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if count and dtype.itemsize > 2:  # no 2**63 trips or allocations
        low, high = max(low, -1000), min(high, 1000)
    if values == "zeros":
        picked = rng.choice([0, 0, 0, 1, -1] if low < 0 else [0, 0, 1], size=shape)
    elif values == "large" and not count and high > 2**15:
        # beyond int16 (an int64 or int32 body computed in a narrower type),
        # and near the type's own limits
        sign = -1 if low < 0 and rng.random() < 0.5 else 1
        beyond = rng.integers(2**15, min(high, 2**40), size=shape, endpoint=True).astype(object)
        near = high - rng.integers(0, 1000, size=shape).astype(object)
        picked = sign * np.where(rng.random(shape) < 0.5, beyond, near)
    elif values == "large":
        sign = -1 if low < 0 and rng.random() < 0.5 else 1
        smallest = max(1, min(high // 4, 100))
        picked = sign * rng.integers(smallest, max(smallest + 1, min(high // 2, 1000)), size=shape)
    elif values == "special":
        extremes = [low, high, 0, 1] + ([-1, low + 1] if low < 0 else [high - 1])
        picked = rng.choice(np.array(extremes, dtype=object), size=shape)
    else:
        picked = rng.integers(max(low, -9), min(high, 9) + 1, size=shape, dtype=np.int64)
    return np.array(np.asarray(picked).tolist(), dtype=dtype).reshape(shape)


def _floats(dtype: np.dtype, shape, values: str, rng) -> np.ndarray:
    normal = rng.standard_normal(shape) * 2
    if values == "zeros":
        picked = rng.choice(np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.5]), size=shape)
        return np.where(rng.random(shape) < 0.8, picked, normal).astype(dtype)
    if values == "large":
        largest = float(ml_dtypes.finfo(dtype).max)
        high = min(6.0, math.log10(largest) - 0.5)
        low = min(3.0, high - 1.0)
        sign = -1.0 if rng.random() < 0.5 else 1.0  # one sign: no cancellation in sums
        return (sign * 10.0 ** rng.uniform(low, high, shape)).astype(dtype)
    if values == "special":
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
    return normal.astype(dtype)


def _in_range(dtype: np.dtype, shape, values: str, value_range: ValueRange, rng) -> np.ndarray:
    """Values in [lo, hi]: uniform, or the bounds and 0 for the edge modes."""
    lo, hi = value_range.lo, value_range.hi
    if dtype.kind in "iu" or dtype.type in _SMALL_INTS:
        info = ml_dtypes.iinfo(dtype) if dtype.type in _SMALL_INTS else np.iinfo(dtype)
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


# Inputs from files.


def read_inputs(path: str, ports: Sequence[_Port]) -> list[tuple[int, Feeds]]:
    """The runs stored in an npz: one, or several under ``__runs__`` (see the module doc)."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
    except Exception as error:
        raise InputsError(f"cannot read inputs from {path}: {_one_line(error)}") from error
    by_name = {p.name: p for p in ports}
    if RUNS_KEY not in arrays or RUNS_KEY in by_name:
        return [(0, _unflatten(arrays, by_name, path))]
    runs = []
    for label in np.asarray(arrays[RUNS_KEY]).reshape(-1).tolist():
        prefix = f"{label}/"
        chosen = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        runs.append((int(label), _unflatten(chosen, by_name, f"{path} run {label}")))
    return runs


def _unflatten(arrays: dict[str, np.ndarray], ports: dict[str, _Port], where: str) -> Feeds:
    feeds: Feeds = {}
    elements: dict[str, dict[int, np.ndarray]] = {}
    for key, array in arrays.items():
        match = re.fullmatch(r"(.*)\[(\d*)\]", key)
        absent = re.fullmatch(r"(.*)\(\)", key)
        if absent and absent.group(1) in ports and ports[absent.group(1)].optional:
            feeds[absent.group(1)] = None
        elif match and match.group(1) in ports and ports[match.group(1)].sequence:
            found = elements.setdefault(match.group(1), {})
            if match.group(2):
                found[int(match.group(2))] = array
        elif key in ports:
            feeds[key] = array
        else:
            raise InputsError(f"{where}: {key!r} is not an input of the model")
    for name, found in elements.items():
        if sorted(found) != list(range(len(found))):
            raise InputsError(f"{where}: the elements of {name!r} are not numbered 0..n-1")
        feeds[name] = [found[i] for i in range(len(found))]
    missing = [name for name, port in ports.items() if name not in feeds and port.default is None]
    if missing:
        raise InputsError(f"{where} has no value for input(s) {', '.join(missing)}")
    return feeds


def write_inputs(stream, runs: Sequence[tuple[int, Feeds]]) -> None:
    """One run as plain keys, several under ``__runs__``; strings as unicode arrays."""
    arrays: dict[str, np.ndarray] = {}
    prefix = (lambda label: "") if len(runs) == 1 else (lambda label: f"{label}/")
    if len(runs) != 1:
        arrays[RUNS_KEY] = np.array([label for label, _ in runs], dtype=np.int64)
    for label, feeds in runs:
        for name, value in feeds.items():
            if value is None:  # an absent optional
                arrays[f"{prefix(label)}{name}()"] = np.zeros(0, np.float32)
            elif isinstance(value, list):
                if not value:
                    arrays[f"{prefix(label)}{name}[]"] = np.zeros(0, np.float32)
                for i, element in enumerate(value):
                    arrays[f"{prefix(label)}{name}[{i}]"] = _storable(element)
            else:
                arrays[prefix(label) + name] = _storable(value)
    # allow_pickle is given (its default) so that numpy's stubs know no array is taken for it.
    np.savez(stream, allow_pickle=True, **arrays)


def _storable(array) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(str) if array.dtype == object else array


def _conform_feeds(ports: Sequence[_Port], feeds: Feeds, where: str, notes: list[str]) -> Feeds:
    """Each array in its port's declared dtype, or InputsError saying why not."""
    by_name = {p.name: p for p in ports}
    missing = [name for name, p in by_name.items() if name not in feeds and p.default is None]
    if missing:
        raise InputsError(f"{where}: no value for input(s) {', '.join(missing)}")
    extra = [name for name in feeds if name not in by_name]
    if extra:
        raise InputsError(f"{where}: {', '.join(map(repr, extra))} is not an input of the model")
    conformed: Feeds = {}
    for name, value in feeds.items():
        port = by_name[name]
        if value is None:
            if not port.optional:
                raise InputsError(f"{where}: {name!r} is a {port.kind()}; it cannot be absent")
            conformed[name] = None
            continue
        if port.sequence != isinstance(value, (list, tuple)):
            expected = "a list of arrays" if port.sequence else "an array"
            raise InputsError(f"{where}: {name!r} is a {port.kind()}; give {expected}")
        if port.sequence:
            conformed[name] = [
                _conform(port, element, f"{where}: {name}[{i}]", notes)
                for i, element in enumerate(value)
            ]
        else:
            conformed[name] = _conform(port, value, f"{where}: {name}", notes)
    return conformed


def _conform(port: _Port, value, where: str, notes: list[str]) -> np.ndarray:
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
    target_float = target.kind == "f" or target.type in _ML_DTYPES
    target_int = target.kind in "iu" or target.type in _SMALL_INTS
    if target.kind == "b":
        if source_kind == "b":
            return array.astype(target)
        if source_kind in "iu" and np.all((array == 0) | (array == 1)):
            return array.astype(target)
        return None
    if source_kind == "b" or source_kind in "OUSVcM":
        return None
    with np.errstate(all="ignore"):
        converted = array.astype(target)
        back = converted.astype(np.float64) if source_kind == "f" else converted.astype(array.dtype)
    if target_float and source_kind == "f":
        grew = np.isinf(back) & ~np.isinf(array)  # overflow, not rounding
        return None if np.any(grew) else converted
    if target_float or target_int:
        if source_kind == "f" and not np.all(np.isfinite(array)):
            return None
        return converted if np.array_equal(back, array) else None
    return None


# Command line.


def _dim(text: str) -> tuple[str, int]:
    name, sep, size = text.partition("=")
    if not sep or not name or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE, got {text!r}")
    return name, int(size)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text!r}")
    return value


def add_options(parser: argparse.ArgumentParser) -> None:
    """The comparison's options, shared by ``lowering.verify`` and ``onnx-lower --verify``."""
    group = parser.add_argument_group("comparison options (onnx-lower: with --verify)")
    source = group.add_mutually_exclusive_group()
    source.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="run on these inputs instead of synthesized ones (one or several runs)",
    )
    source.add_argument(
        "--runs",
        type=_positive,
        metavar="K",
        help=f"the first K runs of the schedule, cycling past its end "
        f"(default: all {len(DEFAULT_SCHEDULE)}; -v prints it)",
    )
    group.add_argument("--seed", type=int, default=0, help="seed of the first run (default 0)")
    group.add_argument(
        "--rtol", type=_tolerance, default=RTOL, help=f"float32/float64 (default {RTOL})"
    )
    group.add_argument(
        "--atol", type=_tolerance, default=ATOL, help=f"float32/float64 (default {ATOL})"
    )
    group.add_argument(
        "--ulps",
        type=_positive,
        default=ULPS,
        metavar="K",
        help=f"float16, bfloat16, float8: K units in the last place (default {ULPS})",
    )
    group.add_argument(
        "--dim",
        type=_dim,
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="fix a symbolic dim everywhere (repeatable)",
    )
    group.add_argument(
        "--val-range",
        type=parse_val_range,
        action="append",
        default=[],
        metavar="[NAME:]LO,HI",
        help="synthesize the values of input NAME (of every numeric input without NAME) "
        "in [LO, HI] (repeatable)",
    )
    group.add_argument(
        "--save-inputs",
        metavar="FILE.npz",
        help="write every run's inputs to FILE.npz, for --inputs",
    )


def compare_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`compare`'s keyword arguments from options that :func:`add_options` added."""
    return {
        "inputs": args.inputs,
        "runs": args.runs,
        "seed": args.seed,
        "rtol": args.rtol,
        "atol": args.atol,
        "ulps": args.ulps,
        "dims": dict(args.dim),
        "val_ranges": dict(args.val_range),
        "save_inputs": args.save_inputs,
        "save_failing": True,
        "show_schedule": bool(getattr(args, "verbose", False)),
        "runtime": verify_runtime(getattr(args, "runtime", None)),
    }


def verify_runtime(runtime: str | None) -> str:
    """Where ``--runtime`` runs B: that runtime, or onnxruntime for none and "generic"."""
    return runtime if runtime in VERIFY_RUNTIMES else "onnxruntime"


def joined_values(argv: Sequence[str]) -> list[str]:
    """``--val-range -1,1`` as ``--val-range=-1,1``: argparse takes a value that
    starts with '-' (and is no plain negative number) for an option."""
    joined: list[str] = []
    pending = False
    for token in argv:
        if pending and token.startswith("-"):
            joined[-1] += f"={token}"
        else:
            joined.append(token)
        pending = token == "--val-range"
    return joined


def main(argv: list[str] | None = None) -> int:
    """``onnx-verify``: prints as ``onnx-lower --verify`` does, everything on
    stderr: the table (not with -q on a match), then the verdict."""
    from lowering import __version__

    parser = argparse.ArgumentParser(
        prog="onnx-verify",
        description="Run two models on the same inputs and compare every output "
        "(also: python -m lowering.verify). Exit 0 match, 1 mismatch or B broken "
        "where A runs, 2 usage or unusable inputs, 3 could not compare (A itself cannot "
        "run, or only on empty inputs).",
    )
    parser.add_argument("a", metavar="A.onnx", help="the reference, run in onnxruntime")
    parser.add_argument("b", metavar="B.onnx", help="the model to check, e.g. a lowering")
    parser.add_argument(
        "--runtime",
        choices=list(VERIFY_RUNTIMES),
        default="onnxruntime",
        help="run B in this runtime (default onnxruntime); A runs in onnxruntime",
    )
    add_options(parser)
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "-v", "--verbose", action="store_true", help="print the schedule: every run and its fate"
    )
    noise.add_argument("-q", "--quiet", action="store_true", help="print nothing on a match")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(joined_values(sys.argv[1:] if argv is None else argv))
    problem = missing_runtime(args.runtime)
    if problem is not None:
        parser.error(problem)
    report = compare(args.a, args.b, **compare_kwargs(args))
    if report.status == BAD_INPUTS:
        print(f"{parser.prog}: error: {report.input_error}", file=sys.stderr)
        return report.exit_code
    if not args.quiet or report.status != MATCH:
        print(report.table(), file=sys.stderr)
        print(summary(report, args.a, args.b), file=sys.stderr)
    return report.exit_code


def summary(report: Report, a: str, b: str) -> str:
    """One line saying what the comparison found."""
    if report.status == MATCH:
        return f"{b} matches {a} on every output"
    if report.status == MISMATCH:
        return f"{b} does not match {a}: {', '.join(map(repr, report.mismatched()))}"
    if report.status == BAD_INPUTS:
        return f"cannot use the inputs: {report.input_error}"
    return f"could not compare {a} and {b}: {report.reason}"


if __name__ == "__main__":
    sys.exit(main())
