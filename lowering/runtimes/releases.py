"""Releases of onnxruntime, OpenVINO and IREE, each in a virtual environment of its own.

A runtime profile (:mod:`lowering.runtimes.profiles`) covers a range of
releases, so the runtime matrix (``scripts/runtime_matrix.py``), the
tests (``tests/test_old_runtimes.py``, ``tests/test_releases.py``) and
``--verify --runtime openvino:2024.6`` run models in releases the package
cannot import beside its own: one process holds one onnxruntime (or
OpenVINO). Each release runs in a venv under :func:`cache_folder` with only
numpy and that runtime, which ``scripts/runtime_releases.py`` builds (pip
from PyPI): the package runs no pip, and only looks the venv up. Its jobs
are served by ``lowering/runtimes/child.py`` run as a script in that venv,
which opens the session as the package does (:mod:`lowering.runtimes.sessions`,
loaded by path; OpenVINO's CPU plugin in float32 on one thread).

Why these releases: docs/runtimes.md (each is the oldest or the last of a
range a profile covers). onnxruntime-openvino is the OpenVINO execution
provider (its wheel replaces the onnxruntime package, so it cannot be
installed beside it); IREE compiles the model (``iree-base-compiler``) and
runs it (``iree-base-runtime``).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib


@dataclasses.dataclass(frozen=True)
class Release:
    """One release of a runtime: the Python its wheel needs and what its venv holds.

    Attributes:
        runtime: ``onnxruntime``, ``openvino``, ``onnxruntime-openvino`` (the
            OpenVINO execution provider) or ``iree``: the runner ``child.py``
            serves its jobs with.
        requirements: What ``scripts/runtime_releases.py`` installs with pip, the
            runtime's package first.
    """

    runtime: str
    version: str
    python: str
    requirements: tuple[str, ...]

    @property
    def column(self) -> str:
        return f"{self.runtime} {self.version}"


#: Column name -> release. numpy 2 arrived with onnxruntime 1.19 and OpenVINO 2024.2.
RELEASES: dict[str, Release] = {
    r.column: r
    for r in (
        Release("onnxruntime", "1.12", "3.10", ("onnxruntime==1.12.1", "numpy<2")),
        Release("onnxruntime", "1.14", "3.10", ("onnxruntime==1.14.1", "numpy<2")),
        Release("onnxruntime", "1.16", "3.11", ("onnxruntime==1.16.3", "numpy<2")),
        Release("onnxruntime", "1.18", "3.11", ("onnxruntime==1.18.1", "numpy<2")),
        Release("openvino", "2023.3", "3.11", ("openvino==2023.3.0", "numpy<2")),
        Release("openvino", "2024.6", "3.11", ("openvino==2024.6.0",)),
        Release("openvino", "2025.4", "3.11", ("openvino==2025.4.1",)),
        # Its wheel installs the onnxruntime package itself: only in a venv of its own.
        Release("onnxruntime-openvino", "1.24", "3.11", ("onnxruntime-openvino==1.24.1",)),
        # The compiler with its ONNX importer (which needs onnx), and the runtime.
        Release(
            "iree",
            "3.13",
            "3.11",
            ("iree-base-compiler[onnx]==3.13.0", "iree-base-runtime==3.13.0"),
        ),
    )
}

#: The environment variable naming the cache folder (default ~/.cache/lowering).
CACHE_VARIABLE = "LOWERING_CACHE"


class ReleaseNotBuilt(RuntimeError):
    """The release's venv is not in the cache: the message says which command builds it."""


def cache_folder() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache" / "lowering"
    return pathlib.Path(os.environ.get(CACHE_VARIABLE) or default) / "runtime-releases"


def venv_folder(release: Release) -> pathlib.Path:
    return cache_folder() / f"{release.runtime}-{release.version}"


def is_built(release: Release) -> bool:
    return (venv_folder(release) / "built").exists()


def build_command(release: Release) -> str:
    """What builds ``release``'s venv, from lowering's source tree."""
    return f"python scripts/runtime_releases.py build {release.runtime}:{release.version}"


def not_built(release: Release) -> str:
    """One line: the venv is missing, and which command builds it (or what it holds)."""
    return (
        f"{release.column} runs in a venv of its own, not built: `{build_command(release)}` "
        f"(lowering's source tree) builds it in {venv_folder(release)}, a venv of Python "
        f"{release.python} with {' '.join(release.requirements)} and an empty file 'built'"
    )


def python_for(release: Release) -> pathlib.Path:
    """The venv's python for ``release``; ReleaseNotBuilt where it is not built."""
    if not is_built(release):
        raise ReleaseNotBuilt(not_built(release))
    return venv_folder(release) / "bin" / "python"


def child_command(release: Release) -> list[str]:
    """The command that serves jobs (:mod:`lowering.runtimes.child`) in ``release``."""
    script = pathlib.Path(__file__).with_name("child.py")
    return [str(python_for(release)), str(script), release.runtime]
