"""Where B runs: onnxruntime, or the runtime ``--runtime`` names.

A always runs in onnxruntime. Another runtime runs B through
:mod:`lowering.runtimes.runners`, every run in its own child process (a
runtime may crash), and takes plain tensors only.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Sequence

import onnx

from lowering.extras import installed, missing
from lowering.verify.ports import ModelLike, Port
from lowering.verify.report import one_line
from lowering.verify.settings import VERIFY_RUNTIMES

__all__ = ["VERIFY_RUNTIMES", "missing_runtime", "run_elsewhere", "verify_runtime"]


def missing_runtime(runtime: str, who: str = "--verify") -> str | None:
    """What to install for ``who`` to run B in ``runtime``, if anything: onnxruntime
    (the ``verify`` extra), where A always runs, and ``runtime``'s package."""
    if missing("verify"):
        from lowering.options import MissingExtraError  # imports onnx_ir: only here

        return str(MissingExtraError("verify", who))
    entry = VERIFY_RUNTIMES.get(runtime)
    if entry is None:
        return None
    _, module, package = entry
    if not installed(module):
        return f"--runtime {runtime} needs {package}: pip install {package}"
    return None


def verify_runtime(runtime: str | None) -> str:
    """Where ``--runtime`` runs B: that runtime, or onnxruntime for none and "generic"."""
    return runtime if runtime in VERIFY_RUNTIMES else "onnxruntime"


def run_elsewhere(
    runtime: str, b: ModelLike, ports: Sequence[Port], feed_sets, timeout: float
) -> dict[int, tuple[list | None, str | None]]:
    """B's outputs (or why it failed) on every run, in ``runtime``'s own child
    process, each run given ``timeout`` seconds (a child that hangs is restarted)."""
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
        for label, result in zip(labels, run_many(name, jobs, timeout), strict=True):
            if isinstance(result, Exception):
                outcomes[label] = (None, f"{name} cannot run B: {one_line(result)}")
            else:
                outcomes[label] = (list(result), None)
    return outcomes
