"""The child side of :func:`lowering.runtimes.runners.run_many`: one protocol, two pythons.

A job is a folder holding ``model`` (the model file's path, as text) and
``inputs.npz``; the child leaves ``result.json`` (``{"outputs": n}`` or
``{"error": ...}``), ``outputs.npz`` and ``log.txt`` (what the runtime
printed) in it. The package's own runtimes serve jobs through
``python -m lowering.runtimes.runners``; an old onnxruntime release, in a
virtual environment that has only numpy and onnxruntime
(:mod:`lowering.runtimes.releases`), runs this file as a script. So it
imports nothing but the standard library and numpy.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from collections.abc import Callable, Sequence

import numpy as np


def save_values(path: pathlib.Path, inputs: Sequence[object]) -> None:
    """A graph's inputs or outputs in order: arrays, or lists of arrays for sequences."""
    arrays: dict[str, np.ndarray] = {}
    for k, value in enumerate(inputs):
        if isinstance(value, list):
            arrays[f"seq_{k}"] = np.asarray(len(value))
            arrays.update({f"seq_{k}_{j}": np.asarray(e) for j, e in enumerate(value)})
        else:
            arrays[f"arr_{k}"] = np.asarray(value)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def load_values(path: pathlib.Path) -> list:
    with np.load(path) as data:
        inputs: list = []
        while True:
            k = len(inputs)
            if f"arr_{k}" in data.files:
                inputs.append(data[f"arr_{k}"])
            elif f"seq_{k}" in data.files:
                inputs.append([data[f"seq_{k}_{j}"] for j in range(int(data[f"seq_{k}"]))])
            else:
                return inputs


def serve(run: Callable[[pathlib.Path, Sequence[np.ndarray]], list], jobs: list[str]) -> None:
    """Run each job folder's model; the runtime's own printing goes to the job's log."""
    for job in map(pathlib.Path, jobs):
        inputs = load_values(job / "inputs.npz")
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(job / "log.txt", "wb") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                outputs = run(pathlib.Path((job / "model").read_text()), inputs)
            except Exception as error:  # noqa: BLE001 -- the error is the answer
                answer: dict[str, object] = {"error": f"{type(error).__name__}: {error}"}
            else:
                save_values(job / "outputs.npz", outputs)
                answer = {"outputs": len(outputs)}
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
        (job / "result.json").write_text(json.dumps(answer))


def _sessions_module():
    """lowering/runtimes/sessions.py loaded by path: the one session factory, everywhere."""
    import importlib.util

    path = pathlib.Path(__file__).with_name("sessions.py")
    spec = importlib.util.spec_from_file_location("_lowering_sessions", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_onnxruntime(path: pathlib.Path, inputs: Sequence[object]) -> list:
    """The installed onnxruntime, whatever its release, with the pinned session options."""
    session = _sessions_module().open_session(path)
    names = [i.name for i in session.get_inputs()]
    outputs = session.run(None, dict(zip(names, inputs)))
    # A sequence output is a list of arrays, and stays one.
    return [[np.asarray(e) for e in o] if isinstance(o, list) else np.asarray(o) for o in outputs]


if __name__ == "__main__":
    # python child.py JOB... : an onnxruntime release's venv serving jobs.
    serve(run_onnxruntime, sys.argv[1:])
