"""Build the venvs of the runtime releases that the tests and ``--verify`` run models in.

    python scripts/runtime_releases.py build openvino:2024.6 iree:3.13
    python scripts/runtime_releases.py build all
    python scripts/runtime_releases.py list

Each release of :data:`lowering.runtimes.releases.RELEASES` runs in a venv
of its own under ``~/.cache/lowering/runtime-releases`` (``LOWERING_CACHE``
moves it), holding numpy and that runtime only; the package looks the venv
up and never runs pip, so this script builds it: a venv of the Python the
wheel needs (this one, ``pythonX.Y`` on PATH, or pyenv's), then ``pip
install`` of the release's requirements from PyPI (about a minute each).
A venv already built is left as it is. The tests build the releases that
``LOWERING_OLD_RUNTIMES`` names through :func:`build` (``tests/helpers.py``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from lowering.runtimes.releases import RELEASES, Release, is_built, venv_folder


class ReleaseUnavailable(RuntimeError):
    """No Python for the release's wheel, or pip could not install it."""


def build(release: Release) -> pathlib.Path:
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
        _check([base, "-m", "venv", str(building)], f"could not make a venv with {base}")
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


def release_named(name: str) -> Release:
    """``openvino:2024.6`` (or ``openvino 2024.6``) -> its release; ValueError if none."""
    column = name.replace(":", " ", 1)
    if column not in RELEASES:
        known = ", ".join(c.replace(" ", ":") for c in RELEASES)
        raise ValueError(f"no release {name!r}: one of {known}, or all")
    return RELEASES[column]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("build", help="build the venvs of these releases")
    making.add_argument("releases", nargs="+", metavar="NAME:RELEASE", help="or all")
    commands.add_parser("list", help="each release, and whether its venv is built")
    args = parser.parse_args(argv)
    if args.command == "list":
        for column, release in RELEASES.items():
            state = "built" if is_built(release) else "not built"
            print(f"{column.replace(' ', ':')}: {state} ({venv_folder(release)})")
        return 0
    names = list(RELEASES) if args.releases == ["all"] else args.releases
    try:
        chosen = [release_named(name) for name in names]
    except ValueError as error:
        parser.error(str(error))
    failed = 0
    for release in chosen:
        try:
            print(f"{release.column}: {build(release)}", flush=True)
        except ReleaseUnavailable as error:
            print(f"{release.column}: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
