"""Where B runs: onnxruntime, or the runtime ``--runtime`` names.

A always runs in onnxruntime. Another runtime runs B through
:mod:`lowering.runtimes.runners`, every run in its own child process (a
runtime may crash), and takes plain tensors only. A release named with the
runtime (``openvino:2024.6``, ``onnxruntime:1.12``) runs B in that
release's venv (:mod:`lowering.runtimes.releases`, which
``scripts/runtime_releases.py`` builds).
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

__all__ = [
    "VERIFY_RUNTIMES", "known_runtime", "missing_runtime", "run_elsewhere", "verify_runtime",
]  # fmt: skip


def release_column(runtime: str) -> str | None:
    """``openvino:2024.6`` -> ``openvino 2024.6``, where releases.py names that release;
    a runtime that runs only in a release's venv (``iree``) -> its newest release there."""
    base, _, release = runtime.partition(":")
    if not release and base in VERIFY_RUNTIMES:
        return None  # (importing nothing: onnx-verify's start-up)
    from lowering.runtimes.profiles import release_key
    from lowering.runtimes.releases import RELEASES

    if not release:
        own = [c for c, r in RELEASES.items() if r.runtime == base]
        return max(own, key=lambda c: release_key(RELEASES[c].version), default=None)
    column = f"{base} {release}"
    return column if column in RELEASES else None


def known_runtime(runtime: str) -> bool:
    """Whether B can run in ``runtime``: one of :data:`VERIFY_RUNTIMES`, or a release
    that releases.py names (or a runtime it has releases of, ``iree``)."""
    return runtime in VERIFY_RUNTIMES or release_column(runtime) is not None


def missing_runtime(runtime: str, who: str = "--verify") -> str | None:
    """What to install for ``who`` to run B in ``runtime``, if anything: onnxruntime
    (the ``verify`` extra), where A always runs, and ``runtime``'s package."""
    if missing("verify"):
        from lowering.options import MissingExtraError  # imports onnx_ir: only here

        return str(MissingExtraError("verify", who))
    if ":" in runtime and release_column(runtime) is None:
        from lowering.runtimes.releases import RELEASES

        names = ", ".join(column.replace(" ", ":") for column in RELEASES)
        return f"--runtime {runtime}: {who} runs B in a release's venv only for {names}"
    column = release_column(runtime)
    if column is not None:
        from lowering.runtimes import releases

        release = releases.RELEASES[column]
        if not releases.is_built(release):
            return f"--runtime {runtime}: {releases.not_built(release)}"
        return None
    entry = VERIFY_RUNTIMES.get(runtime)
    if entry is None:
        return None
    _, module, package = entry
    if not installed(module):
        return f"--runtime {runtime} needs {package}: pip install {package}"
    return None


def verify_runtime(runtime: str | None) -> str:
    """Where ``--runtime`` runs B: that runtime (or release, or the venv of a runtime
    that has one only there), or onnxruntime for none and "generic"."""
    if runtime is not None and (":" in runtime or release_column(runtime) is not None):
        return runtime
    return runtime if runtime in VERIFY_RUNTIMES else "onnxruntime"


def run_elsewhere(
    runtime: str, b: ModelLike, ports: Sequence[Port], feed_sets, timeout: float
) -> dict[int, tuple[list | None, str | None]]:
    """B's outputs (or why it failed) on every run, in ``runtime``'s own child
    process, each run given ``timeout`` seconds (a child that hangs is restarted)."""
    from lowering.runtimes.runners import run_many

    name = release_column(runtime)
    if name is None:
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
