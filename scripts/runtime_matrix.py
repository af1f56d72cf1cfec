"""Which runtimes run which forms of which models: the README's runtime matrix.

    python scripts/runtime_matrix.py [--only SUBSTRING] [--runtimes A,B] > matrix.md

Rows are (model, form), columns the runtimes of ``lowering/runtimes/runners.py``
(onnxruntime, onnx.reference, OpenVINO, tract, TVM, tinygrad, MNN), then
releases of onnxruntime (1.12, 1.14, 1.16, 1.18), OpenVINO (2023.3, 2024.6,
2025.4), its execution provider (1.24) and IREE (3.13), each in a venv of its
own that ``scripts/runtime_releases.py``
builds under ~/.cache/lowering (pip from PyPI; 1.14 needs a Python 3.10,
found on PATH or in pyenv; the columns are those built, unless named). The
models are ``tests/matrix_models.py``'s: the committed torch exports and
hand-written maps, each with an expectation computed in plain numpy (torch's
own outputs for the torch corpus). The forms:

- ``original``: the model as written;
- ``default``: ``lowering.lower(model)``;
- ``--runtime NAME``: ``lowering.lower(model, runtime=NAME)`` for the
  column's runtime (``openvino:2024.6`` for a release's column), where the
  installed ``lowering`` has that option;
- ``--target-opset 11``: ``lowering.lower(model, target_opset=11)``.

A cell is a check mark when the runtime runs the form and its outputs
match, "wrong result" when they differ, and otherwise the runtime's own
error, shortened (or the lowering's, when the form could not be made).
Each runtime runs in child processes (``lowering.runtimes.runners.run_many``),
so a crash is a cell, not the end of the table, and as those runners set it
up: in float32 on one thread, not at the runtime's defaults, which depend on
the CPU (OpenVINO's infers in bfloat16 where the CPU has AVX512-BF16 or
AMX). After the table, the script lists every cell of the default form that
fails, which issue 14 requires to be none but a body that cannot be
batched, where its loop form can't run.
"""

from __future__ import annotations

import argparse
import inspect
import pathlib
import platform
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import lowering
from lowering.runtimes.releases import RELEASES, is_built, not_built
from lowering.runtimes.runners import RUNNERS, RuntimeFailure, run_many
from scripts.runtime_cells import short_error, versions
from tests.matrix_models import Case, matches, synthetic_cases, torch_cases

#: Column -> the name ``lowering.lower(model, runtime=...)`` takes for it.
RUNTIME_OPTION = {
    "onnxruntime": "onnxruntime",
    "onnx.reference": "generic",
    "OpenVINO": "openvino",
    "tract": "tract",
    "TVM": "tvm",
    "tinygrad": "tinygrad",
    "MNN": "mnn",
    **{column: column.replace(" ", ":") for column in RELEASES},  # "openvino:2024.6"
}
#: Every column: the package's runtimes, then the releases in venvs of their own.
COLUMNS = [*RUNNERS, *RELEASES]

CHECK = "✓"


def has_runtime_option() -> bool:
    return "runtime" in inspect.signature(lowering.lower).parameters


def forms() -> dict[str, Callable[[onnx.ModelProto, str], onnx.ModelProto]]:
    """Form name -> how to make it from the model, for a runtime column."""
    made: dict[str, Callable[[onnx.ModelProto, str], onnx.ModelProto]] = {
        "original": lambda model, runtime: model,
        "default": lambda model, runtime: lowering.lower(model),
    }
    if has_runtime_option():
        made["--runtime NAME"] = lambda model, runtime: lowering.lower(
            model, runtime=RUNTIME_OPTION[runtime]
        )
    made["--target-opset 11"] = lambda model, runtime: lowering.lower(model, target_opset=11)
    return made


def cell(result: list[np.ndarray] | RuntimeFailure, case: Case) -> str:
    if isinstance(result, RuntimeFailure):
        return short_error(str(result), limit=70)
    if matches(result, case.expected):
        return CHECK
    got = ", ".join(f"{np.asarray(o).dtype}{list(np.shape(o))}" for o in result)
    return f"wrong result ({got})"


def measure(
    cases: dict[str, Case], runtimes: list[str], folder: pathlib.Path
) -> dict[tuple[str, str], dict[str, str]]:
    """(model, form) -> runtime -> cell."""
    makers = forms()
    table: dict[tuple[str, str], dict[str, str]] = {
        (name, form): {} for name in cases for form in makers
    }
    for runtime in runtimes:
        jobs = []
        places = []
        for number, (name, case) in enumerate(cases.items()):
            for form, make in makers.items():
                per_runtime = form == "--runtime NAME"
                path = folder / (runtime.replace(" ", "_") if per_runtime else "all")
                path = path / f"{number}_{form[:9]}.onnx"
                path = path.with_name(path.name.replace(" ", "_").replace("-", ""))
                if not path.exists() and not path.with_suffix(".error").exists():
                    path.parent.mkdir(exist_ok=True)
                    try:
                        onnx.save(make(case.model, runtime), path)
                    except lowering.LoweringError as error:
                        path.with_suffix(".error").write_text(str(error))
                if path.with_suffix(".error").exists():
                    text = path.with_suffix(".error").read_text()
                    table[name, form][runtime] = "lowering: " + short_error(text, limit=60)
                    continue
                jobs.append((path, case.inputs))
                places.append((name, form))
        for (name, form), result in zip(places, run_many(runtime, jobs)):
            table[name, form][runtime] = cell(result, cases[name])
        print(f"measured {runtime}", file=sys.stderr)
    return table


def markdown(table: dict[tuple[str, str], dict[str, str]], runtimes: list[str]) -> str:
    lines = ["| model | form | " + " | ".join(runtimes) + " |"]
    lines.append("|---|---|" + "---|" * len(runtimes))
    previous = None
    for (name, form), cells in table.items():
        shown = name if name != previous else ""
        previous = name
        lines.append(f"| {shown} | {form} | " + " | ".join(cells[r] for r in runtimes) + " |")
    return "\n".join(lines)


def default_failures(
    table: dict[tuple[str, str], dict[str, str]], cases: dict[str, Case]
) -> list[str]:
    """Every default-form cell of the package's runtimes that fails, and whether issue 14
    allows it (an old release refuses the default form by its IR version: that is what
    ``--target-opset 11`` is for)."""
    found = []
    for (name, form), cells in table.items():
        if form != "default":
            continue
        for runtime, text in cells.items():
            if runtime not in RUNNERS:
                continue
            if text != CHECK:
                allowed = cases[name].loop_expected
                why = f" (allowed: {allowed})" if allowed else ""
                found.append(f"- {name} / {runtime}: {text}{why}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="only the models whose name contains this")
    built = [c for c in COLUMNS if c not in RELEASES or is_built(RELEASES[c])]
    parser.add_argument(
        "--runtimes",
        default=",".join(built),
        help="comma-separated columns (default: every one whose venv is built)",
    )
    args = parser.parse_args()
    runtimes = args.runtimes.split(",")
    unknown = [r for r in runtimes if r not in COLUMNS]
    if unknown:
        parser.error(f"unknown runtimes {unknown}; known: {', '.join(COLUMNS)}")
    unbuilt = [RELEASES[r] for r in runtimes if r not in built]
    if unbuilt:
        parser.error("; ".join(not_built(release) for release in unbuilt))
    cases = {
        name: case
        for name, case in {**torch_cases(recent=False), **synthetic_cases()}.items()
        if args.only in name
    }
    with tempfile.TemporaryDirectory() as folder:
        table = measure(cases, runtimes, pathlib.Path(folder))
    found = versions()
    print(
        f"{platform.machine()}, Python {platform.python_version()}, "
        + ", ".join(found[r] for r in runtimes)
        + f", lowering {lowering.__version__}; every runtime in float32 on one thread "
        "(lowering/runtimes/runners.py), so no cell depends on the CPU\n"
    )
    print(markdown(table, runtimes))
    failures = default_failures(table, cases)
    print(f"\nDefault form: {len(failures)} failing cells")
    print("\n".join(failures))


if __name__ == "__main__":
    main()
