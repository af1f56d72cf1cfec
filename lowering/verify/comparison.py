""":func:`compare`: load A and B, run both on every run's feeds, and fill the report.

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

from lowering.runtimes.sessions import open_session
from lowering.verify.declared import blame_declarations, declaration_problems
from lowering.verify.dtypes import ML_FLOATS, read_as_floats
from lowering.verify.inputs import feed_sets, synthesized_run
from lowering.verify.npz import save_all, save_failing_run
from lowering.verify.ports import (
    Feeds,
    ModelLike,
    Port,
    model_ports,
    sequence_groups,
    sequence_offsets,
)
from lowering.verify.randomness import has_random_ops, random_sources, same
from lowering.verify.report import CannotCompare, InputsError, Report, Row, RunRecord, one_line
from lowering.verify.runs import fallbacks, schedule
from lowering.verify.runtime import VERIFY_RUNTIMES, known_runtime, run_elsewhere
from lowering.verify.settings import TIME_SCALE, TIMEOUT
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
    save_failing: bool = False,
    show_schedule: bool = False,
    runtime: str = "onnxruntime",
    timeout: float = TIMEOUT,
) -> Report:
    """Run ``a`` (the reference) and ``b`` in onnxruntime on the same inputs; compare.

    ``inputs`` is a feed dict (one run; sequences as lists of arrays), a list
    of them, or the path of an npz file; without it, ``runs`` input sets are
    synthesized by the schedule (all of it when None) from ``a``'s input
    types. ``save_inputs`` writes every run's inputs there; ``save_failing``
    writes the first failing run's inputs to a fresh temporary file.
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
    A finished is a mismatch, A past it a run A fails.
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
        broken_b = _input_difference(inputs_a, inputs_b)
    except CannotCompare as error:
        broken_b, inputs_b, outputs_b = str(error), inputs_a, outputs_a
    report.rows = _signature_rows(outputs_a, outputs_b)
    if runtime != "onnxruntime":  # other runtimes take no values for initializers
        inputs_a = [p for p in inputs_a if p.default is None]
        inputs_b = [p for p in inputs_b if p.default is None]
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
    narrow_a = _narrow(a, proto_a)
    try:
        session_a = _session(narrow_a[0], "A")
    except CannotCompare as error:
        report.reason = str(error)
        return report
    session_b = None
    elsewhere: dict[int, tuple[list | None, str | None]] = {}
    slowest_a = 0.0  # A's slowest run so far, in seconds
    ran_a: dict[int, tuple[list | None, str | None, float]] = {}

    def run_a(feeds: Feeds) -> tuple[list | None, str | None, float]:
        nonlocal slowest_a
        outcome = _try_run(session_a, feeds, "A", max(timeout, TIME_SCALE * slowest_a))
        outcome = (_narrowed(outcome[0], narrow_a[1]), *outcome[1:])
        if outcome[1] is None:  # a run stopped at its limit says nothing of A's pace
            slowest_a = max(slowest_a, outcome[2])
        return outcome

    if broken_b is None and runtime != "onnxruntime":
        # A first: B's child process is given A's slowest time, scaled
        ran_a = {label: run_a(feeds) for label, _, feeds in sets}
        limit = max(timeout, TIME_SCALE * slowest_a)
        elsewhere = run_elsewhere(runtime, b, inputs_b, sets, limit)
    elif broken_b is None:
        narrow_b = _narrow(b, proto_b)
        try:
            session_b = _session(narrow_b[0], "B")
        except CannotCompare as error:
            broken_b = str(error)
    failing: Feeds | None = None
    declared_notes: dict[str, str] = {}
    substantial: list[int] = []  # the compared runs whose inputs are not all empty
    # a model with random ops runs twice: outputs that differ are compared by
    # structure only, and the verdict is "could not compare"
    twice = has_random_ops(proto_a) or (broken_b is None and has_random_ops(proto_b))
    specs = schedule(runs) if inputs is None else []
    for label, text, feeds in sets:
        record = RunRecord(label, text)
        report.records.append(record)
        results_a, error_a, seconds_a = ran_a.pop(label) if label in ran_a else run_a(feeds)
        if error_a and specs and not elsewhere:
            # A rejects this run's inputs: try the run again with one kind of
            # input at a time put back to the plain one, so the others are drawn
            for other in fallbacks(specs[label]):
                other_text, other_feeds = synthesized_run(
                    inputs_a, other, seed + label, dims, val_ranges, groups, offsets
                )
                outcome = run_a(other_feeds)
                if outcome[1] is None:
                    results_a, error_a, seconds_a = outcome
                    feeds = other_feeds
                    record.description = f"{other_text}; A rejected {text}"
                    break
        if label in elsewhere:
            results_b, error_b = elsewhere[label]
        elif session_b is not None and error_a is None:
            limit = max(timeout, TIME_SCALE * seconds_a)
            results_b, error_b, _ = _try_run(session_b, feeds, "B", limit, seconds_a)
            results_b = _narrowed(results_b, narrow_b[1])
        elif session_b is not None:  # A fails: B gets the floor
            results_b, error_b, _ = _try_run(session_b, feeds, "B", timeout)
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
            again = run_a(feeds)[0] if twice else None
            for i, (row, result_a, result_b) in enumerate(
                zip(report.rows, results_a, results_b, strict=False)
            ):
                random = again is not None and not same(result_a, again[i])
                if random and row.random is None:
                    row.random = random_sources(proto_a, i) if i < len(proto_a.graph.output) else []
                where = f"run {label}: {row.name}"
                compare_value(row, result_a, result_b, tolerance, where, structure_only=random)
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
        compared = [r.label for r in report.records if r.outcome != "skipped"]
        report.reason = (
            f"only runs with empty inputs (an empty sequence or a zero-sized tensor) could be "
            f"compared (run{'s' if len(compared) != 1 else ''} "
            f"{', '.join(map(str, compared))}); A fails on every other; give --inputs or --dim "
            "with sizes A accepts"
        )
    from_file = isinstance(inputs, (str, os.PathLike))  # replaying it needs no copy
    if failing is not None and save_failing and save_inputs is None and not from_file:
        save_failing_run(report, failing)
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


def _input_difference(a: list[Port], b: list[Port]) -> str | None:
    """Why B cannot take A's inputs, if it cannot: different names or kinds."""
    names_a, names_b = [p.name for p in a], [p.name for p in b]
    if sorted(names_a) != sorted(names_b):
        return f"the models take different inputs: {names_a} in A, {names_b} in B"
    kinds_b = {p.name: p.kind() for p in b}
    for port in a:
        if kinds_b[port.name] != port.kind():
            return f"input {port.name!r} is {port.kind()} in A but {kinds_b[port.name]} in B"
    return None


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


def _narrow(model: ModelLike, proto: onnx.ModelProto) -> tuple[ModelLike, dict[int, type]]:
    """What onnxruntime loads for ``model``, and which outputs are narrow floats read
    through a Cast to float32 (:func:`read_as_floats`). A model file with external
    data is loaded as it is (its copy would lose the data's folder)."""
    external = any(
        init.data_location == onnx.TensorProto.EXTERNAL for init in proto.graph.initializer
    )
    copy = None if external and not isinstance(model, onnx.ModelProto) else read_as_floats(proto)
    return (model, {}) if copy is None else copy


def _narrowed(results: list | None, positions: dict[int, type]) -> list | None:
    """The float32 outputs read through a Cast back in their narrow type (exact)."""
    if results is None or not positions:
        return results
    return [
        np.asarray(value).astype(positions[i]) if i in positions else value
        for i, value in enumerate(results)
    ]


def _session(model: ModelLike, label: str):
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else os.fspath(model)
    try:
        return open_session(source, log_severity=4)
    except Exception as error:
        raise CannotCompare(f"onnxruntime cannot load {label}: {one_line(error)}") from error


def _try_run(
    session, feeds: Feeds, label: str, limit: float, took_a: float | None = None
) -> tuple[list | None, str | None, float]:
    """The outputs, or None and why onnxruntime could not run ``label``, and the
    seconds the run took. A run past ``limit`` seconds is stopped from a timer
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
        return session.run(None, _ort_feeds(feeds), options), None, time.perf_counter() - start
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises many kinds
        seconds = time.perf_counter() - start
        if stopped.is_set():
            where = f"; A took {took_a:.3g} s" if took_a is not None else ""
            return None, f"{label} ran past its time limit of {limit:.3g} s{where}", seconds
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
