"""The runtime matrix's models, lowered with default options, run in real runtimes.

``tests/matrix_models.py`` holds the models (the committed torch exports
and hand-written maps) and their expectations in plain numpy;
``scripts/runtime_matrix.py`` prints the whole table for the README. Here
each model is lowered with ``lowering.lower(model)`` and must give the
numpy results in OpenVINO, tract and tinygrad (the ``runtimes`` test extra;
a runtime that is not installed skips its tests). tinygrad has neither Loop
nor Scan, so a map whose body cannot be batched, which keeps a loop, is run
only where its loop form can run. The torch corpus runs in OpenVINO and
tract only: tinygrad has no LSTM, and its interpreter (on a machine without
clang) would take minutes on the larger exports.
"""

from __future__ import annotations

import pathlib

import onnx
import pytest

import lowering
from lowering.runtimes.runners import RUNNERS
from tests.matrix_models import matches, synthetic_cases, torch_cases

CASES = {**torch_cases(recent=False), **synthetic_cases()}
MODULES = {"OpenVINO": "openvino", "tract": "tract", "tinygrad": "tinygrad"}
#: The runtimes that run a loop form (Scan for tract), for bodies that cannot be batched.
LOOP_RUNTIMES = {"OpenVINO", "tract"}


def _runs_in(runtime: str, name: str) -> bool:
    case = CASES[name]
    if case.loop_expected and runtime not in LOOP_RUNTIMES:
        return False
    return runtime != "tinygrad" or not name.startswith("torch ") or "atleast" in name


PARAMS = [
    pytest.param(runtime, name, id=f"{runtime}-{name}")
    for runtime in MODULES
    for name in CASES
    if _runs_in(runtime, name)
]


@pytest.mark.slow
@pytest.mark.parametrize(("runtime", "name"), PARAMS)
def test_default_output_runs_and_matches_numpy(runtime, name, tmp_path: pathlib.Path):
    pytest.importorskip(MODULES[runtime], reason=f"{runtime} is not installed")
    case = CASES[name]
    path = tmp_path / "lowered.onnx"
    onnx.save(lowering.lower(case.model), path)
    try:
        outputs = RUNNERS[runtime](path, case.inputs)
    except FileNotFoundError as error:
        # tinygrad 0.14 reads some constants through its CPU device, which
        # compiles with clang; .ci/run installs it, a plain machine may lack it.
        if runtime == "tinygrad" and error.filename == "clang":
            pytest.skip("tinygrad needs clang for this model; apt-get install clang")
        raise
    assert matches(outputs, case.expected), [o.shape for o in outputs]


def test_every_expectation_is_met_by_onnxruntime_on_the_original(tmp_path: pathlib.Path):
    """The numpy oracles themselves, checked once against onnxruntime's SequenceMap."""
    for name, case in CASES.items():
        path = tmp_path / "original.onnx"
        onnx.save(case.model, path)
        assert matches(RUNNERS["onnxruntime"](path, case.inputs), case.expected), name
