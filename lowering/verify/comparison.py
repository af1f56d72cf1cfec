""":func:`compare`: load A and B, run both on every run's feeds, and fill the report.

    A on every run --rejects--> the run drawn again (a kind put back, a length moved)
      |
    B on the inputs A took (here, or in --runtime's child) --> compare --> blame

onnxruntime is imported only when a comparison runs, so that ``python -m
lowering --help`` (which adds these options) does not load it. Which model
is blamed for what is decided here; the package doc lists the exit codes.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from lowering.runtimes.sessions import open_session, session_options
from lowering.verify.declared import blame_declarations, declaration_problems
from lowering.verify.dtypes import ML_FLOATS
from lowering.verify.inputs import feed_sets, synthesized_run
from lowering.verify.narrow import Reading, ort_value_array, read_back, reading
from lowering.verify.npz import save_all, save_failing_run
from lowering.verify.ports import (
    Feeds,
    ModelLike,
    Port,
    fed_as_b_declares,
    input_difference,
    model_ports,
    sequence_groups,
    sequence_offsets,
)
from lowering.verify.randomness import has_random_ops, random_sources, same
from lowering.verify.report import CannotCompare, InputsError, Report, Row, RunRecord, one_line
from lowering.verify.runs import RunSpec, fallbacks, schedule
from lowering.verify.runtime import VERIFY_RUNTIMES, known_runtime, release_column, run_elsewhere
from lowering.verify.settings import TIME_SCALE, TIMEOUT
from lowering.verify.tolerance import ATOL, FLOAT64_ULPS, RTOL, ULPS, Tolerance, compare_value
from lowering.verify.values import ValueRange

#: How a run stopped at its time limit is told.
PAST_LIMIT = "ran past its time limit"
#: The session config key that tells onnxruntime where a model loaded from
#: memory has its external data.
EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"


def compare(
    a: ModelLike,
    b: ModelLike,
    *,
    inputs: Mapping[str, object] | Sequence[Mapping[str, object]] | str | os.PathLike | None = None,
    runs: int | None = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    ulps: int = ULPS,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str | None, ValueRange] | None = None,
    save_inputs: str | os.PathLike | None = None,
    save_failing: bool | str | os.PathLike = False,
    show_schedule: bool = False,
    runtime: str = "onnxruntime",
    timeout: float = TIMEOUT,
) -> Report:
    """Run ``a`` (the reference) and ``b`` in onnxruntime on the same inputs; compare.

    ``inputs`` is a feed dict (one run; sequences as lists of arrays), a list
    of them, or the path of an npz file; without it, ``runs`` input sets are
    synthesized by the schedule (all of it when None) from ``a``'s input
    types. ``save_inputs`` writes every run's inputs there; ``save_failing``
    writes the first failing run's inputs to a fresh file (``verify-runK-*.npz``)
    in the temporary folder (True) or in that folder (a path), only where a
    replay can help: not when B cannot take A's inputs (different names,
    kinds or static dims: ``report.input_difference``, said first), cannot be
    loaded, or declares other outputs, which no input changes.
    ``runtime`` (one of :data:`VERIFY_RUNTIMES`, or a release such as
    ``openvino:2024.6``) runs ``b`` there instead, each
    run in a child process (a runtime may crash); ``a`` always runs in
    onnxruntime. Inputs that are also initializers then keep their defaults.
    ``rtol``/``atol`` hold float32 (default :data:`RTOL`, :data:`ATOL`); float64
    has its own default (:data:`FLOAT64_ULPS`), and both when either is given.
    ``timeout`` (seconds) is the least time one run is given: a run of B gets
    :data:`TIME_SCALE` times A's own time on the same inputs when that is
    more, a run of A that many times its slowest finished run so far. A run past its
    limit is stopped (onnxruntime's ``RunOptions.terminate``): B past it where
    A finished is a mismatch, A past it a run A fails. A runs first on every
    run; a synthesized run whose inputs A rejects is drawn again
    (:func:`~lowering.verify.runs.fallbacks`; past its time limit, in its
    plain form only) before B runs on what A took.
    Needs the ``verify`` extra (onnxruntime): raises
    :class:`~lowering.options.MissingExtraError` without it, and
    :class:`~lowering.runtimes.releases.ReleaseNotBuilt` for a release whose
    venv is not built (its message says which command builds it).
    """
    _check_arguments(inputs, runs, runtime, timeout)
    # float64 has its own ulps, unless rtol or atol is given (then both types use them)
    given = rtol is not None or atol is not None
    tolerance = Tolerance(
        RTOL if rtol is None else rtol,
        ATOL if atol is None else atol,
        ulps,
        None if given else FLOAT64_ULPS,
    )
    options = _Options(
        inputs, runs, seed, dims, val_ranges, save_inputs, save_failing, runtime, timeout
    )
    return _Comparison(a, b, options, tolerance, Report([], 0, show_schedule=show_schedule)).run()


def _check_arguments(inputs, runs: int | None, runtime: str, timeout: float) -> None:
    from lowering.extras import missing

    if missing("verify"):  # lowering.options imports onnx_ir, which a comparison does not need
        from lowering.options import check_extra

        check_extra("verify", "lowering.verify.compare")
    if not known_runtime(runtime):
        raise ValueError(
            f"runtime must be one of {', '.join(VERIFY_RUNTIMES)} (or a release of one that "
            f"lowering/runtimes/releases.py names, openvino:2024.6), not {runtime!r}"
        )
    column = release_column(runtime)
    if column is not None:
        from lowering.runtimes import releases

        releases.python_for(releases.RELEASES[column])  # ReleaseNotBuilt: which command builds it
    if inputs is not None and runs is not None:
        raise ValueError("give inputs or runs, not both")
    if runs is not None and runs < 1:
        raise ValueError("runs must be at least 1")
    if not timeout > 0:
        raise ValueError(f"timeout must be more than 0 seconds, not {timeout!r}")


@dataclasses.dataclass(frozen=True)
class _Options:
    """What :func:`compare` was asked, past its checks."""

    inputs: Any
    runs: int | None
    seed: int
    dims: Mapping[str, int] | None
    val_ranges: Mapping[str | None, ValueRange] | None
    save_inputs: str | os.PathLike | None
    save_failing: bool | str | os.PathLike
    runtime: str
    timeout: float


#: A run of a model: its outputs (None if it failed), why it failed, its seconds.
Outcome = tuple[list | None, str | None, float]
#: A run A finished, compared: its record, feeds, A's and B's outputs, B's
#: error, and A's outputs again (a model with random ops runs twice).
Compared = tuple[RunRecord, Feeds, list | None, list | None, str | None, list | None]


class _Comparison:
    """One comparison, phase by phase (the module's sketch); each phase fills
    the report, and a phase that ends the comparison returns False."""

    def __init__(
        self, a: ModelLike, b: ModelLike, options: _Options, tolerance: Tolerance, report: Report
    ) -> None:
        self.a, self.b, self.options, self.tolerance, self.report = a, b, options, tolerance, report
        self.dims = options.dims
        self.broken_b: str | None = None  # why B cannot run at all: broken wherever A runs
        self.slowest_a = 0.0  # A's slowest finished run so far, in seconds

    def run(self) -> Report:
        if not (self._load() and self._draw() and self._open_a()):
            return self.report
        settled, redrawn = self._run_a_first()
        if redrawn and not self._save_compared(settled):
            return self.report
        compared = self._run_b(settled)
        random = self._random_outputs(compared)
        failing = self._judge(compared, random)
        self._verdict()
        self._save_failing(failing)
        return self.report

    # -- the models and their ports -------------------------------------------------------

    def _load_b(self) -> None:
        """B and its ports; where it cannot be read, why (and A's ports stand for B's)."""
        self.proto_b: onnx.ModelProto | None = None
        try:
            self.proto_b = _load(self.b, "B")
            self.inputs_b = model_ports(self.proto_b, "input")
            self.outputs_b = model_ports(self.proto_b, "output")
            self.broken_b = self.report.input_difference = input_difference(
                self.inputs_a, self.inputs_b
            )
        except CannotCompare as error:
            self.broken_b, self.inputs_b, self.outputs_b = (
                str(error),
                self.inputs_a,
                self.outputs_a,
            )

    def _load(self) -> bool:
        report = self.report
        try:
            self.proto_a = _load(self.a, "A")
            self.inputs_a = model_ports(self.proto_a, "input")
            self.outputs_a = model_ports(self.proto_a, "output")
        except CannotCompare as error:
            report.reason = str(error)
            return False
        self._load_b()
        report.rows = _signature_rows(self.outputs_a, self.outputs_b)
        # A failure no run's inputs decide (B cannot take A's inputs, cannot be read
        # or loaded, or declares other outputs) is the same on every input: no replay.
        self.by_inputs = not any(row.problem for row in report.rows)
        if self.options.runtime != "onnxruntime":  # other runtimes take no initializer values
            self.inputs_a = [p for p in self.inputs_a if p.default is None]
            self.inputs_b = [p for p in self.inputs_b if p.default is None]
        if self.broken_b is None:  # B's fixed input dims: the runs feed only those
            return self._feed_as_b_declares()
        return True

    def _feed_as_b_declares(self) -> bool:
        """A's inputs narrowed to B's static dims; False where --dim asks for others."""
        self.inputs_a, bound = fed_as_b_declares(self.inputs_a, self.inputs_b)
        dims = self.dims
        clash = [f"{k}={dims[k]}" for k in bound if dims and dims.get(k, bound[k]) != bound[k]]
        if clash:
            declared = ", ".join(f"{k}={bound[k]}" for k in bound)
            self.report.input_error = (
                f"--dim {', '.join(clash)}: B declares {declared} on its inputs"
            )
            return False
        self.dims = {**bound, **(dims or {})}
        return True

    # -- the runs' inputs, and A on each --------------------------------------------------

    def _draw(self) -> bool:
        options, report = self.options, self.report
        try:
            self.groups = sequence_groups(self.proto_a)
            self.offsets = sequence_offsets(self.proto_a)
            self.sets = feed_sets(
                self.inputs_a,
                options.inputs,
                options.runs,
                options.seed,
                self.dims,
                options.val_ranges,
                report.notes,
                self.groups,
                self.offsets,
            )
            if options.save_inputs is not None:  # before running: a crash still left them
                save_all(report, self.sets, os.fspath(options.save_inputs))
        except InputsError as error:
            report.input_error = str(error)
            return False
        return True

    def _open_a(self) -> bool:
        self.reading_a = reading(self.a, self.proto_a)
        try:
            self.session_a = _session(self.reading_a, "A")
        except CannotCompare as error:
            self.report.reason = str(error)
            return False
        return True

    def _run_a(self, feeds: Feeds) -> Outcome:
        limit = max(self.options.timeout, TIME_SCALE * self.slowest_a)
        outcome = _try_run(self.session_a, self.reading_a, feeds, "A", limit)
        if outcome[1] is None:  # a run stopped at its limit says nothing of A's pace
            self.slowest_a = max(self.slowest_a, outcome[2])
        return outcome

    def _run_a_first(self) -> tuple[list[tuple[RunRecord, Feeds, Outcome]], bool]:
        """A on every run, first: a synthesized run whose inputs A rejects is drawn
        again, so that B, wherever it runs, gets what A took. Returns each run
        with its feeds and A's outcome, and whether any was drawn again."""
        specs = schedule(self.options.runs) if self.options.inputs is None else []
        settled: list[tuple[RunRecord, Feeds, Outcome]] = []
        lengths: list[int] = []  # the lengths A took
        redrawn = False
        for label, text, feeds in self.sets:
            record = RunRecord(label, text)
            self.report.records.append(record)
            outcome = self._run_a(feeds)
            spec = specs[label] if specs else None
            if outcome[1] and spec is not None:
                retried = self._redraw(record, spec, text, outcome, lengths)
                if retried is not None:
                    outcome, feeds, spec = retried
                    redrawn = True
            if outcome[1] is None and spec is not None:
                lengths.append(spec.length)
            settled.append((record, feeds, outcome))
        return settled, redrawn

    def _redraw(
        self, record: RunRecord, spec: RunSpec, text: str, outcome: Outcome, lengths: list[int]
    ) -> tuple[Outcome, Feeds, RunSpec] | None:
        """The first of the run's fallbacks A takes (:func:`fallbacks`), or None."""
        sequences = any(p.sequence for p in self.inputs_a)
        tries = fallbacks(spec, lengths if sequences else ())
        assert outcome[1] is not None, "only a run A rejects is drawn again"
        if PAST_LIMIT in outcome[1]:  # each try may take as long: the plain run only
            tries = [t for t in tries if t == RunSpec(spec.length)]
        for other in tries:
            other_text, other_feeds = synthesized_run(
                self.inputs_a,
                other,
                self.options.seed + record.label,
                self.dims,
                self.options.val_ranges,
                self.groups,
                self.offsets,
            )
            retried = self._run_a(other_feeds)
            if retried[1] is None:
                record.description = f"{other_text}; A rejected {text}: {outcome[1]}"
                return retried, other_feeds, other
            if PAST_LIMIT in retried[1]:
                return None
        return None

    def _save_compared(self, settled: list[tuple[RunRecord, Feeds, Outcome]]) -> bool:
        """--save-inputs again, with the inputs compared (replayed with --inputs)."""
        if self.options.save_inputs is None:
            return True
        try:
            runs = [(r.label, r.description, f) for r, f, _ in settled]
            save_all(self.report, runs, os.fspath(self.options.save_inputs))
        except InputsError as error:
            self.report.input_error = str(error)
            return False
        return True

    # -- B on what A took -----------------------------------------------------------------

    def _run_b(self, settled: list[tuple[RunRecord, Feeds, Outcome]]) -> list[Compared]:
        session_b, reading_b, elsewhere = self._open_b(settled)
        twice = self._runs_twice()
        self.substantial: list[int] = []  # the compared runs whose inputs are not all empty
        compared: list[Compared] = []
        for record, feeds, (results_a, error_a, seconds_a) in settled:
            label = record.label
            results_b, error_b = self._outcome_b(
                label, feeds, error_a, seconds_a, elsewhere, session_b, reading_b
            )
            if error_a:
                _not_compared(record, error_a, error_b)
                continue
            self.report.runs += 1
            if not _empty_inputs(self.inputs_a, feeds):
                self.substantial.append(label)
            ran = error_b is None and results_a is not None and results_b is not None
            again = self._run_a(feeds)[0] if twice and ran else None
            compared.append((record, feeds, results_a, results_b, error_b, again))
        return compared

    def _open_b(
        self, settled: list[tuple[RunRecord, Feeds, Outcome]]
    ) -> tuple[Any, Reading, dict[int, tuple[list | None, str | None]]]:
        """B's session here, or its outcomes from its runtime's child (every run at once)."""
        options = self.options
        session_b = None
        reading_b = Reading(self.b)
        elsewhere: dict[int, tuple[list | None, str | None]] = {}
        if self.broken_b is None and options.runtime != "onnxruntime":
            # B's child process is given A's slowest time, scaled
            limit = max(options.timeout, TIME_SCALE * self.slowest_a)
            runs_b = [(r.label, r.description, f) for r, f, _ in settled]
            elsewhere = run_elsewhere(options.runtime, self.b, self.inputs_b, runs_b, limit)
        elif self.broken_b is None:
            assert self.proto_b is not None, "B was read"
            reading_b = reading(self.b, self.proto_b)
            try:
                session_b = _session(reading_b, "B")
            except CannotCompare as error:
                self.broken_b = str(error)
        return session_b, reading_b, elsewhere

    def _runs_twice(self) -> bool:
        """A model with random ops runs twice: outputs that differ are compared by
        structure only, and the verdict is "could not compare"."""
        if has_random_ops(self.proto_a):
            return True
        return self.broken_b is None and self.proto_b is not None and has_random_ops(self.proto_b)

    def _outcome_b(
        self,
        label: int,
        feeds: Feeds,
        error_a: str | None,
        seconds_a: float,
        elsewhere: dict[int, tuple[list | None, str | None]],
        session_b,
        reading_b: Reading,
    ) -> tuple[list | None, str | None]:
        """B's outputs on a run, or why it failed: from its runtime's child, run
        here in a time scaled by A's (the floor where A failed), or B's breakage."""
        if label in elsewhere:
            return elsewhere[label]
        if session_b is None:
            return None, self.broken_b
        if error_a is None:
            limit = max(self.options.timeout, TIME_SCALE * seconds_a)
            results, error, _ = _try_run(session_b, reading_b, feeds, "B", limit, seconds_a)
        else:  # A fails: B gets the floor
            results, error, _ = _try_run(session_b, reading_b, feeds, "B", self.options.timeout)
        return results, error

    # -- the verdict ----------------------------------------------------------------------

    def _random_outputs(self, compared: list[Compared]) -> set[int]:
        """The outputs that differ between two runs of A on any run: random on every
        run (two runs of a Dropout over one value agree half of the time)."""
        random = {
            i
            for *_, results_a, _, _, again in compared
            if results_a is not None and again is not None
            for i in range(min(len(results_a), len(again)))
            if not same(results_a[i], again[i])
        }
        for i in sorted(random):
            if i < len(self.report.rows):
                sources = (
                    random_sources(self.proto_a, i) if i < len(self.proto_a.graph.output) else []
                )
                self.report.rows[i].random = sources
        return random

    def _judge(self, compared: list[Compared], random: set[int]) -> Feeds | None:
        """Each compared run's outputs, value by value; returns the first failing run's feeds."""
        report = self.report
        failing: Feeds | None = None
        declared_notes: dict[str, str] = {}
        for record, feeds, results_a, results_b, error_b, _ in compared:
            label = record.label
            before = sum(row.failures for row in report.rows)
            if error_b or results_a is None or results_b is None:
                for row in report.rows:
                    row.fail(f"run {label}: {error_b}, where A runs")
            else:
                for i, (row, result_a, result_b) in enumerate(
                    zip(report.rows, results_a, results_b, strict=False)
                ):
                    where = f"run {label}: {row.name}"
                    compare_value(row, result_a, result_b, self.tolerance, where, i in random)
                self._blame(label, feeds, results_a, results_b, declared_notes)
            if sum(row.failures for row in report.rows) > before:
                record.outcome = "mismatch"
                if failing is None:
                    report.failing_run, failing = label, feeds
        report.notes += declared_notes.values()
        return failing

    def _blame(
        self, label: int, feeds: Feeds, results_a: list, results_b: list, notes: dict[str, str]
    ) -> None:
        """Outputs that break their declarations: B's count against it, A's are said."""
        outputs_a, outputs_b = self.outputs_a, self.outputs_b
        problems_a = declaration_problems(self.inputs_a, outputs_a, feeds, results_a)
        problems_b = declaration_problems(self.inputs_b, outputs_b, feeds, results_b)
        blame_declarations(self.report.rows, label, outputs_a, outputs_b, problems_a, problems_b)
        for index, problem in problems_a.items():
            notes.setdefault(
                outputs_a[index].name,
                f"A's own output {outputs_a[index].name!r} breaks its declaration "
                f"(run {label}: {problem}); not counted against B",
            )

    def _verdict(self) -> None:
        """Why the outputs could not be compared by value, where they could not."""
        report = self.report
        random_rows = [row for row in report.rows if row.random is not None]
        if random_rows and report.runs:
            report.reason = _random_reason(random_rows)
        if not report.runs:
            report.reason = (
                "A fails on every input set; no run could be compared"
                if self.sets
                else "no input sets"
            )
        elif not self.substantial:
            labels = [r.label for r in report.records if r.outcome != "skipped"]
            report.reason = (
                f"only runs with empty inputs (an empty sequence or a zero-sized tensor) could "
                f"be compared (run{'s' if len(labels) != 1 else ''} "
                f"{', '.join(map(str, labels))}); A fails on every other; give --inputs or "
                "--dim with sizes A accepts"
            )

    def _save_failing(self, failing: Feeds | None) -> None:
        """The first failing run's inputs, where a replay can help (the docstring)."""
        options = self.options
        from_file = isinstance(options.inputs, (str, os.PathLike))  # replaying it needs no copy
        if (
            failing is not None
            and options.save_failing is not False
            and options.save_inputs is None
            and not from_file
            and self.by_inputs
            and self.broken_b is None
        ):
            folder = None if options.save_failing is True else options.save_failing
            save_failing_run(self.report, failing, folder)


def _not_compared(record: RunRecord, error_a: str, error_b: str | None) -> None:
    """A run A fails: not compared, or skipped where B runs (not counted either way)."""
    if error_b:
        record.outcome, record.note = "not compared", f"both fail: {error_a}; {error_b}"
    else:
        record.outcome, record.note = "skipped", f"{error_a}, but B runs (not counted)"


def _random_reason(random_rows: list[Row]) -> str:
    names = ", ".join(repr(row.name) for row in random_rows)
    ops = sorted({op for row in random_rows for op in row.random or []})
    return (
        f"output{'s' if len(random_rows) > 1 else ''} {names} differ between two runs "
        f"of A on the same inputs (random: {', '.join(ops) or 'no random op found'}); "
        "compared by dtype, shape and length only"
    )


def _empty_inputs(ports: Sequence[Port], feeds: Feeds) -> bool:
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


def _signature_rows(a: list[Port], b: list[Port]) -> list[Row]:
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


def _load(model: ModelLike, label: str) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model), load_external_data=False)
    except Exception as error:
        raise CannotCompare(
            f"cannot read {label} ({os.fspath(model)}): {one_line(error)}"
        ) from error


def _session(reading: Reading, label: str):
    model = reading.model
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    try:
        if reading.folder is None:
            return open_session(source, log_severity=4)
        # a copy in memory of a file with external data: onnxruntime reads the
        # data from the file's folder (nothing is written)
        import onnxruntime as ort

        options = session_options(log_severity=4)
        options.add_session_config_entry(EXTERNAL_FOLDER, reading.folder)
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise CannotCompare(f"onnxruntime cannot load {label}: {one_line(error)}") from error


def _try_run(
    session, reading: Reading, feeds: Feeds, label: str, limit: float, took_a: float | None = None
) -> tuple[list | None, str | None, float]:
    """The outputs (narrow floats in their type: ``reading``), or None and why
    onnxruntime could not run ``label``, and the seconds the run took. A run past ``limit`` seconds is stopped from a timer
    thread through ``RunOptions.terminate`` (checked between nodes, in Loop and
    Scan bodies too); ``took_a``: A's time on the same inputs, for the message."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        options.terminate = True

    timer = threading.Timer(limit, stop)
    timer.daemon = True
    start = time.perf_counter()
    timer.start()
    try:
        ort_values = _ort_values(feeds) if reading.ort_values else None
        if ort_values is not None:
            values = session.run_with_ort_values(None, ort_values, options)
            results = [ort_value_array(value) for value in values]
        else:
            results = session.run(None, _ort_feeds(feeds), options)
        seconds = time.perf_counter() - start
        return read_back(results, reading.types), None, seconds
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises many kinds
        seconds = time.perf_counter() - start
        if stopped.is_set():
            where = f"; A took {took_a:.3g} s" if took_a is not None else ""
            return None, f"{label} {PAST_LIMIT} of {limit:.3g} s{where}", seconds
        return None, f"onnxruntime cannot run {label}: {one_line(error)}", seconds
    finally:
        timer.cancel()


def _ort_feeds(feeds: Feeds) -> Feeds:
    """numpy arrays where onnxruntime takes them, OrtValues for ml_dtypes arrays."""
    import onnxruntime as ort

    converted = {}
    for name, value in feeds.items():
        if isinstance(value, np.ndarray) and value.dtype.type in ML_FLOATS:
            raw = value.view(np.uint16 if value.itemsize == 2 else np.uint8)
            onnx_type = ML_FLOATS[value.dtype.type]
            converted[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_type)
        else:
            converted[name] = value
    return converted


def _ort_values(feeds: Feeds) -> Feeds | None:
    """Every feed as an OrtValue (an absent optional left out); None where one
    cannot be: onnxruntime's Python API makes no OrtValue of a sequence or of
    strings."""
    import onnxruntime as ort

    values = {}
    for name, value in _ort_feeds(feeds).items():
        strings = isinstance(value, np.ndarray) and value.dtype.kind in "OUS"
        if isinstance(value, list) or strings:
            return None
        if value is not None:
            is_value = isinstance(value, ort.OrtValue)
            values[name] = value if is_value else ort.OrtValue.ortvalue_from_numpy(value)
    return values
