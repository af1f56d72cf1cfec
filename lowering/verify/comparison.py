""":func:`compare`: load A and B, run both on every run's feeds, and fill the report.

    A on every run --rejects--> the run drawn again (a kind put back, a length moved)
      |
    B on the inputs A took (here, or in --runtime's child) --> compare --> blame

onnxruntime is imported only when a comparison runs, so that ``python -m
lowering --help`` (which adds these options) does not load it. Which model
is blamed for what is decided here; the package doc lists the exit codes.
"""

from __future__ import annotations

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
from lowering.verify.runtime import VERIFY_RUNTIMES, known_runtime, run_elsewhere
from lowering.verify.settings import TIME_SCALE, TIMEOUT

#: How a run stopped at its time limit is told.
PAST_LIMIT = "ran past its time limit"
#: The session config key that tells onnxruntime where a model loaded from
#: memory has its external data.
EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"
from lowering.verify.tolerance import ATOL, FLOAT64_ULPS, RTOL, ULPS, Tolerance, compare_value
from lowering.verify.values import ValueRange


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
    :class:`~lowering.options.MissingExtraError` without it.
    """
    from lowering.extras import missing

    if missing("verify"):  # lowering.options imports onnx_ir, which a comparison does not need
        from lowering.options import check_extra

        check_extra("verify", "lowering.verify.compare")
    if not known_runtime(runtime):
        raise ValueError(
            f"runtime must be one of {', '.join(VERIFY_RUNTIMES)} (or a release of one that "
            f"lowering/runtimes/releases.py builds, openvino:2024.6), not {runtime!r}"
        )
    if inputs is not None and runs is not None:
        raise ValueError("give inputs or runs, not both")
    if runs is not None and runs < 1:
        raise ValueError("runs must be at least 1")
    if not timeout > 0:
        raise ValueError(f"timeout must be more than 0 seconds, not {timeout!r}")
    # float64 has its own ulps, unless rtol or atol is given (then both types use them)
    given = rtol is not None or atol is not None
    tolerance = Tolerance(
        RTOL if rtol is None else rtol,
        ATOL if atol is None else atol,
        ulps,
        None if given else FLOAT64_ULPS,
    )
    report = Report([], 0, show_schedule=show_schedule)
    try:
        proto_a = _load(a, "A")
        inputs_a, outputs_a = model_ports(proto_a, "input"), model_ports(proto_a, "output")
    except CannotCompare as error:
        report.reason = str(error)
        return report
    broken_b = None  # why B cannot run at all: a broken rewrite wherever A runs
    outputs_b: list[Port] = []
    try:
        proto_b = _load(b, "B")
        inputs_b, outputs_b = model_ports(proto_b, "input"), model_ports(proto_b, "output")
        broken_b = report.input_difference = input_difference(inputs_a, inputs_b)
    except CannotCompare as error:
        broken_b, inputs_b, outputs_b = str(error), inputs_a, outputs_a
    report.rows = _signature_rows(outputs_a, outputs_b)
    # A failure no run's inputs decide (B cannot take A's inputs, cannot be read
    # or loaded, or declares other outputs) is the same on every input: no replay.
    by_inputs = not any(row.problem for row in report.rows)
    if runtime != "onnxruntime":  # other runtimes take no values for initializers
        inputs_a = [p for p in inputs_a if p.default is None]
        inputs_b = [p for p in inputs_b if p.default is None]
    if broken_b is None:  # B's fixed input dims: the runs feed only those
        inputs_a, bound = fed_as_b_declares(inputs_a, inputs_b)
        clash = [f"{k}={dims[k]}" for k in bound if dims and dims.get(k, bound[k]) != bound[k]]
        if clash:
            report.input_error = (
                f"--dim {', '.join(clash)}: B declares {', '.join(f'{k}={bound[k]}' for k in bound)}"
                " on its inputs"
            )
            return report
        dims = {**bound, **(dims or {})}
    try:
        groups, offsets = sequence_groups(proto_a), sequence_offsets(proto_a)
        sets = feed_sets(
            inputs_a, inputs, runs, seed, dims, val_ranges, report.notes, groups, offsets
        )
        if save_inputs is not None:  # before running: a run that crashes still left them
            save_all(report, sets, os.fspath(save_inputs))
    except InputsError as error:
        report.input_error = str(error)
        return report
    reading_a = reading(a, proto_a)
    try:
        session_a = _session(reading_a, "A")
    except CannotCompare as error:
        report.reason = str(error)
        return report
    slowest_a = 0.0  # A's slowest run so far, in seconds

    def run_a(feeds: Feeds) -> tuple[list | None, str | None, float]:
        nonlocal slowest_a
        outcome = _try_run(session_a, reading_a, feeds, "A", max(timeout, TIME_SCALE * slowest_a))
        if outcome[1] is None:  # a run stopped at its limit says nothing of A's pace
            slowest_a = max(slowest_a, outcome[2])
        return outcome

    # A first, on every run: a run whose inputs A rejects is drawn again
    # (synthesized runs), so that B, wherever it runs, gets what A took
    specs = schedule(runs) if inputs is None else []
    settled: list[tuple[RunRecord, Feeds, tuple[list | None, str | None, float]]] = []
    lengths: list[int] = []  # the lengths A took
    redrawn = False
    for label, text, feeds in sets:
        record = RunRecord(label, text)
        report.records.append(record)
        outcome = run_a(feeds)
        spec = specs[label] if specs else None
        if outcome[1] and spec is not None:
            sequences = any(p.sequence for p in inputs_a)
            tries = fallbacks(spec, lengths if sequences else ())
            if PAST_LIMIT in outcome[1]:  # each try may take as long: the plain run only
                tries = [t for t in tries if t == RunSpec(spec.length)]
            for other in tries:
                other_text, other_feeds = synthesized_run(
                    inputs_a, other, seed + label, dims, val_ranges, groups, offsets
                )
                retried = run_a(other_feeds)
                if retried[1] is None:
                    record.description = f"{other_text}; A rejected {text}: {outcome[1]}"
                    outcome, feeds, spec, redrawn = retried, other_feeds, other, True
                    break
                if PAST_LIMIT in retried[1]:
                    break
        if outcome[1] is None and spec is not None:
            lengths.append(spec.length)
        settled.append((record, feeds, outcome))
    if redrawn and save_inputs is not None:  # the inputs compared, replayed with --inputs
        try:
            save_all(
                report, [(r.label, r.description, f) for r, f, _ in settled], os.fspath(save_inputs)
            )
        except InputsError as error:
            report.input_error = str(error)
            return report

    session_b = None
    reading_b = Reading(b)
    elsewhere: dict[int, tuple[list | None, str | None]] = {}
    if broken_b is None and runtime != "onnxruntime":
        # B's child process is given A's slowest time, scaled
        limit = max(timeout, TIME_SCALE * slowest_a)
        runs_b = [(r.label, r.description, f) for r, f, _ in settled]
        elsewhere = run_elsewhere(runtime, b, inputs_b, runs_b, limit)
    elif broken_b is None:
        reading_b = reading(b, proto_b)
        try:
            session_b = _session(reading_b, "B")
        except CannotCompare as error:
            broken_b = str(error)
    failing: Feeds | None = None
    declared_notes: dict[str, str] = {}
    substantial: list[int] = []  # the compared runs whose inputs are not all empty
    # a model with random ops runs twice: outputs that differ are compared by
    # structure only, and the verdict is "could not compare"
    twice = has_random_ops(proto_a) or (broken_b is None and has_random_ops(proto_b))
    compared: list[tuple[RunRecord, Feeds, list | None, list | None, str | None, list | None]] = []
    for record, feeds, (results_a, error_a, seconds_a) in settled:
        label = record.label
        if label in elsewhere:
            results_b, error_b = elsewhere[label]
        elif session_b is not None and error_a is None:
            limit = max(timeout, TIME_SCALE * seconds_a)
            results_b, error_b, _ = _try_run(session_b, reading_b, feeds, "B", limit, seconds_a)
        elif session_b is not None:  # A fails: B gets the floor
            results_b, error_b, _ = _try_run(session_b, reading_b, feeds, "B", timeout)
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
        ran = error_b is None and results_a is not None and results_b is not None
        again = run_a(feeds)[0] if twice and ran else None
        compared.append((record, feeds, results_a, results_b, error_b, again))
    # an output that differs between two runs of A on any run is random on every
    # run (two runs of a Dropout over one value agree half of the time)
    random = {
        i
        for *_, results_a, _, _, again in compared
        if results_a is not None and again is not None
        for i in range(min(len(results_a), len(again)))
        if not same(results_a[i], again[i])
    }
    for i in sorted(random):
        if i < len(report.rows):
            sources = random_sources(proto_a, i) if i < len(proto_a.graph.output) else []
            report.rows[i].random = sources
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
                compare_value(row, result_a, result_b, tolerance, where, i in random)
            problems_a = declaration_problems(inputs_a, outputs_a, feeds, results_a)
            problems_b = declaration_problems(inputs_b, outputs_b, feeds, results_b)
            blame_declarations(report.rows, label, outputs_a, outputs_b, problems_a, problems_b)
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
    random_rows = [row for row in report.rows if row.random is not None]
    if random_rows and report.runs:
        names = ", ".join(repr(row.name) for row in random_rows)
        ops = sorted({op for row in random_rows for op in row.random or []})
        report.reason = (
            f"output{'s' if len(random_rows) > 1 else ''} {names} differ between two runs of A "
            f"on the same inputs (random: {', '.join(ops) or 'no random op found'}); "
            "compared by dtype, shape and length only"
        )
    if not report.runs:
        report.reason = (
            "A fails on every input set; no run could be compared" if sets else "no input sets"
        )
    elif not substantial:
        labels = [r.label for r in report.records if r.outcome != "skipped"]
        report.reason = (
            f"only runs with empty inputs (an empty sequence or a zero-sized tensor) could be "
            f"compared (run{'s' if len(labels) != 1 else ''} "
            f"{', '.join(map(str, labels))}); A fails on every other; give --inputs or --dim "
            "with sizes A accepts"
        )
    from_file = isinstance(inputs, (str, os.PathLike))  # replaying it needs no copy
    if (
        failing is not None
        and save_failing is not False
        and save_inputs is None
        and not from_file
        and by_inputs
        and broken_b is None
    ):
        save_failing_run(report, failing, None if save_failing is True else save_failing)
    return report


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
