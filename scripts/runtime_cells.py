"""A runtime's answer as the tables of scripts/runtime_matrix.py and
scripts/runtime_probe.py print it: its error shortened to what went wrong,
and the version of each runtime a column ran.
"""

from __future__ import annotations

import re
import subprocess

from lowering.runtimes import releases


def versions() -> dict[str, str]:
    """The installed version of each runtime, or why it is missing."""
    import importlib.metadata

    found = {}
    packages = {
        "onnxruntime": "onnxruntime",
        "onnx.reference": "onnx",
        "OpenVINO": "openvino",
        "tract": "tract",
        "TVM": "apache-tvm",
        "tinygrad": "tinygrad",
        "MNN": "MNN",
    }
    for name, package in packages.items():
        try:
            found[name] = f"{package} {importlib.metadata.version(package)}"
        except importlib.metadata.PackageNotFoundError:
            found[name] = f"{package} not installed"
    for name, release in releases.RELEASES.items():
        found[name] = (
            installed_version(release)
            if releases.is_built(release)
            else f"{name} not built (`{releases.build_command(release)}` builds it)"
        )
    return found


def installed_version(release: releases.Release) -> str:
    """What the venv says it runs ("onnxruntime 1.16.3"), for the matrix's header."""
    package = release.requirements[0].partition("==")[0].partition("[")[0]
    answer = subprocess.run(
        [
            str(releases.python_for(release)),
            "-c",
            f"import importlib.metadata as m; print(m.version({package!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"{release.runtime} {answer.stdout.strip()} (Python {release.python})"


def short_error(text: str, limit: int = 90) -> str:
    """The part of a runtime's error that says what went wrong, on one line, for a cell."""
    text = " ".join(text.split())
    for pattern in _ERROR_NOISE:
        text = re.sub(pattern, "", text)
    for pattern in _ERROR_CORES:
        found = re.search(pattern, text)
        if found:
            text = found.group(1)
            break
    text = " ".join(text.strip(" :-").replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Removed from errors first: where in the runtime's sources it failed.
_ERROR_NOISE = [
    r"Check '[^']*' failed at \S+:\d+:",
    r"While validating ONNX node '<Node\([^)]*\): [^>]*>':",
    r"Exception from \S+:\d+:",
    r"Stack backtrace:.*",
    r"Load model from .*? failed:\S+ \S+\(.*?\)(?= \w)",  # onnxruntime: the path, the C++ frame
]

#: The one part of each runtime's error that names the problem.
_ERROR_CORES = [
    r"(Unimplemented\(\w+\))",  # tract
    r"Failed operations detailed log: -- (.*?)(?: Summary:|$)",  # OpenVINO
    r"(No conversion rule found for operations: .*)",  # OpenVINO
    r"(operators are not supported for frontend ONNX: .*)",  # TVM
    r"(op='\w+' is not supported.*)",  # tinygrad
    r"\[ONNXRuntimeError\] : \d+ : (.*)",  # onnxruntime
    r"(These Op Not Support: .*)",  # MNN's converter
]
