"""Releases of onnxruntime and OpenVINO, each in a virtual environment of its own, built on demand.

A runtime profile (:mod:`lowering.runtimes.profiles`) covers a range of
releases, so the runtime matrix (``scripts/runtime_matrix.py``) and the
tests (``tests/test_old_runtimes.py``, ``tests/test_releases.py``) run
the outputs in releases the package cannot import beside its own: one
process holds one onnxruntime (or OpenVINO). Each release gets a venv
under :func:`cache_folder` with only numpy and that runtime (pip from
PyPI), made once by :func:`python_for` and reused; its jobs are served by
``lowering/runtimes/child.py`` run as a script in that venv, which opens
the session as the package does (:mod:`lowering.runtimes.sessions`,
loaded by path; OpenVINO's CPU plugin in float32 on one thread).

Why these releases: onnxruntime 1.12 is the oldest that takes opset 17
(SequenceMap's), and like 1.14 and 1.16 reduces an empty axis with
keepdims to [0, ...]; 1.14 is the last that reads at most IR version 8;
1.16 reads at most IR 9 and has a wheel for this Python (3.11); 1.18 is
the oldest that reads IR 10 (so the input's ``ir_version`` no longer
matters to it). OpenVINO 2023.3 is the last release before the 2024 LTS;
2024.6 is that LTS's last, the oldest the ``openvino`` profile covers;
2025.4 the last before 2026, the first that takes ScatterND's reduction.
onnxruntime-openvino 1.24 is the OpenVINO execution provider (its wheel
replaces the onnxruntime package, so it cannot be installed beside it).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile


@dataclasses.dataclass(frozen=True)
class Release:
    """One release of a runtime: the Python its wheel needs and what pip installs.

    Attributes:
        runtime: ``onnxruntime``, ``openvino`` or ``onnxruntime-openvino`` (the
            OpenVINO execution provider): the runner ``child.py`` serves its jobs with.
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
    )
}

#: The environment variable naming the cache folder (default ~/.cache/lowering).
CACHE_VARIABLE = "LOWERING_CACHE"


class ReleaseUnavailable(RuntimeError):
    """No Python for the release's wheel, or pip could not install it."""


def cache_folder() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache" / "lowering"
    return pathlib.Path(os.environ.get(CACHE_VARIABLE) or default) / "runtime-releases"


def venv_folder(release: Release) -> pathlib.Path:
    return cache_folder() / f"{release.runtime}-{release.version}"


def is_built(release: Release) -> bool:
    return (venv_folder(release) / "built").exists()


def python_for(release: Release) -> pathlib.Path:
    """The venv's python for ``release``, building the venv first if need be.

    Built in a temporary folder beside it and renamed into place, so a
    build that fails or is interrupted leaves nothing that looks built
    (and two builds at once both end with one venv).
    """
    folder = venv_folder(release)
    python = folder / "bin" / "python"
    if is_built(release):
        return python
    base = find_python(release.python)
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = pathlib.Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=folder.parent))
    try:
        _check(
            [base, "-m", "venv", str(building)],
            f"could not make a venv with {base}",
        )
        _check(
            [
                str(building / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *release.requirements,
            ],
            f"pip could not install {' '.join(release.requirements)}",
        )
        # Only the console scripts name the folder; python -m works where it moves to.
        (building / "built").write_text(" ".join(release.requirements) + "\n")
        try:
            os.rename(building, folder)
        except OSError:
            if not is_built(release):  # not another build that finished first
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python


def find_python(version: str) -> str:
    """An interpreter of ``version`` ("3.10"): this one, ``pythonX.Y`` on PATH, or pyenv's."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return getattr(sys, "_base_executable", None) or sys.executable
    found = shutil.which(f"python{version}")
    if found is not None and _runs(found):
        return found
    pyenv = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    for candidate in sorted((pyenv / "versions").glob(f"{version}.*"), reverse=True):
        python = candidate / "bin" / "python"
        if python.exists() and _runs(str(python)):
            return str(python)
    raise ReleaseUnavailable(f"no Python {version} (on PATH or in pyenv) to install it with")


def child_command(release: Release) -> list[str]:
    """The command that serves jobs (:mod:`lowering.runtimes.child`) in ``release``."""
    script = pathlib.Path(__file__).with_name("child.py")
    return [str(python_for(release)), str(script), release.runtime]


def installed_version(release: Release) -> str:
    """What the venv says it runs ("onnxruntime 1.16.3"), for the matrix's header."""
    module = "openvino" if release.runtime == "openvino" else "onnxruntime"
    answer = subprocess.run(
        [str(python_for(release)), "-c", f"import {module}; print({module}.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    version = answer.stdout.strip().split("-")[0]  # OpenVINO: "2024.6.0-17404-<hash>"
    return f"{release.runtime} {version} (Python {release.python})"


def _runs(python: str) -> bool:
    try:
        return (
            subprocess.run([python, "-c", "pass"], check=False, capture_output=True).returncode == 0
        )
    except OSError:
        return False


def _check(command: list[str], problem: str) -> None:
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split()[-40:])
        raise ReleaseUnavailable(f"{problem}: {tail}")
