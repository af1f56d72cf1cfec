"""Old onnxruntime releases, each in a virtual environment of its own, built on demand.

A model that declares opset 11 is meant for old runtimes, so the runtime
matrix (``scripts/runtime_matrix.py``) and a test
(``tests/test_old_runtimes.py``) run the ``--target-opset 11`` outputs in
releases the package cannot import beside its own onnxruntime: one
process holds one onnxruntime. Each release gets a venv under
:func:`cache_folder` with only numpy and that onnxruntime (pip from PyPI),
made once by :func:`python_for` and reused; its jobs are served by
``lowering/runtimes/child.py`` run as a script in that venv, which opens
the session with :mod:`lowering.runtimes.sessions` (loaded by path), so an
old release computes on one thread with the accuracy options pinned, as
every session of the project does.

Why these releases: 1.14 is the last that reads at most IR version 8 with
a wheel for a Python pyenv has here (3.10); 1.16 reads at most IR 9 and
has a wheel for this Python (3.11); 1.18 is the oldest that reads IR 10
(so the input's ``ir_version`` no longer matters to it).
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
    """One onnxruntime release: the Python its wheel needs and what pip installs."""

    version: str
    python: str
    requirements: tuple[str, ...]

    @property
    def column(self) -> str:
        return f"onnxruntime {self.version}"


#: Column name -> release. numpy 2 arrived with onnxruntime 1.19.
RELEASES: dict[str, Release] = {
    r.column: r
    for r in (
        Release("1.14", "3.10", ("onnxruntime==1.14.1", "numpy<2")),
        Release("1.16", "3.11", ("onnxruntime==1.16.3", "numpy<2")),
        Release("1.18", "3.11", ("onnxruntime==1.18.1", "numpy<2")),
    )
}

#: The environment variable naming the cache folder (default ~/.cache/lowering).
CACHE_VARIABLE = "LOWERING_CACHE"


class ReleaseUnavailable(RuntimeError):
    """No Python for the release's wheel, or pip could not install it."""


def cache_folder() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache" / "lowering"
    return pathlib.Path(os.environ.get(CACHE_VARIABLE) or default) / "onnxruntime-releases"


def venv_folder(release: Release) -> pathlib.Path:
    return cache_folder() / release.version


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
    building = pathlib.Path(tempfile.mkdtemp(prefix=f"{release.version}.", dir=folder.parent))
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
    return [str(python_for(release)), str(script)]


def installed_version(release: Release) -> str:
    """What the venv says it runs ("onnxruntime 1.16.3"), for the matrix's header."""
    answer = subprocess.run(
        [str(python_for(release)), "-c", "import onnxruntime; print(onnxruntime.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"onnxruntime {answer.stdout.strip()} (Python {release.python})"


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
