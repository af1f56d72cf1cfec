"""Inputs files: ``--inputs FILE.npz`` read, ``--save-inputs`` and the failing run written.

The keys (the package doc has the format): ``X`` a tensor, ``S[0]``,
``S[1]``, ... a sequence, ``S[]`` an empty one, ``X()`` an absent
optional; several runs under ``__runs__`` as ``K/X``. The failing run goes
to a fresh temporary file, never over an existing one, so ``--inputs``
replays it.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence

import numpy as np

from lowering.verify.ports import Feeds, Port
from lowering.verify.report import InputsError, Report, one_line

RUNS_KEY = "__runs__"


def read_inputs(path: str, ports: Sequence[Port]) -> list[tuple[int, Feeds]]:
    """The runs stored in an npz: one, or several under ``__runs__`` (see the module doc)."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
    except Exception as error:
        raise InputsError(f"cannot read inputs from {path}: {one_line(error)}") from error
    by_name = {p.name: p for p in ports}
    if RUNS_KEY not in arrays or RUNS_KEY in by_name:
        return [(0, _unflatten(arrays, by_name, path))]
    runs = []
    for label in np.asarray(arrays[RUNS_KEY]).reshape(-1).tolist():
        prefix = f"{label}/"
        chosen = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        runs.append((int(label), _unflatten(chosen, by_name, f"{path} run {label}")))
    return runs


def _unflatten(arrays: dict[str, np.ndarray], ports: dict[str, Port], where: str) -> Feeds:
    feeds: Feeds = {}
    elements: dict[str, dict[int, np.ndarray]] = {}
    for key, array in arrays.items():
        _place(key, array, ports, feeds, elements, where)
    for name, found in elements.items():
        if sorted(found) != list(range(len(found))):
            raise InputsError(f"{where}: the elements of {name!r} are not numbered 0..n-1")
        feeds[name] = [found[i] for i in range(len(found))]
    missing = [name for name, port in ports.items() if name not in feeds and port.default is None]
    if missing:
        raise InputsError(f"{where} has no value for input(s) {', '.join(missing)}")
    return feeds


def _place(
    key: str,
    array: np.ndarray,
    ports: dict[str, Port],
    feeds: Feeds,
    elements: dict[str, dict[int, np.ndarray]],
    where: str,
) -> None:
    """One stored array where its key says: ``x()`` an absent optional, ``x[i]`` element
    i of a sequence (``x[]`` an empty one), ``x`` a tensor."""
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


def save_all(report: Report, feed_sets, path: str) -> None:
    """``--save-inputs``: every run, to the one file the user named."""
    try:
        with open(path, "wb") as stream:
            write_inputs(stream, [(label, feeds) for label, _, feeds in feed_sets])
    except OSError as error:
        raise InputsError(f"cannot write --save-inputs {path}: {one_line(error)}") from error
    report.saved_to, report.saved_runs = path, len(feed_sets)


def save_failing_run(report: Report, feeds: Feeds, folder: str | os.PathLike | None = None) -> None:
    """The first failing run, to a new file in ``folder`` (default: the temporary
    folder), never an existing one."""
    run = report.failing_run
    assert run is not None, "set together with the failing run's feeds"
    try:
        descriptor, path = tempfile.mkstemp(
            prefix=f"verify-run{run}-",
            suffix=".npz",
            dir=None if folder is None else os.fspath(folder),
        )
        with os.fdopen(descriptor, "wb") as stream:
            write_inputs(stream, [(run, feeds)])
    except OSError as error:
        report.notes.append(f"could not save the failing run's inputs: {one_line(error)}")
        return
    report.saved_to = path
