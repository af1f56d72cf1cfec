"""``--target-opset 11`` outputs load, run and match in an old onnxruntime (1.16).

onnxruntime 1.16 reads at most IR version 9, and refuses a torch export
(IR 10) before reading anything else; the same model converted to opset 11
declares IR 6 (``lowering/passes/ir_version.py``) and must run there and
give what onnxruntime 1.32 gives on the original. 1.16 runs in a venv of
its own (``lowering/runtimes/releases.py``), which
``scripts/runtime_releases.py`` builds with pip in about a minute: only
when ``LOWERING_OLD_RUNTIMES`` asks for it (``1.16``, or ``all``; CI sets
it) or it is already built; otherwise the tests skip, saying so. scripts/runtime_matrix.py measures 1.14 and 1.18 as well.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

import lowering
from lowering.runtimes import releases
from lowering.runtimes.child import run_onnxruntime
from lowering.runtimes.runners import RuntimeFailure, run_many
from tests.helpers import assert_same, release_python
from tests.matrix_models import lowest_reachable, torch_cases

RELEASE = releases.RELEASES["onnxruntime 1.16"]
EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def old_python() -> pathlib.Path:
    return release_python(RELEASE)


def _cases() -> dict[str, tuple[onnx.ModelProto, list, int]]:
    """Name -> (model, inputs, target opset): 11, or 13 for a Loop that carries a sequence."""
    rng = np.random.default_rng(0)
    images = [rng.standard_normal(shape).astype(np.float32) for shape in ((2, 3), (4, 1), (3, 3))]
    cases = {
        "examples/shapes_and_sums": (
            onnx.load(EXAMPLES / "shapes_and_sums.onnx"),
            [images, np.array(1.5, np.float32)],
            13,  # its lowered map keeps a Loop over sequences (Loop-11 carries none)
        ),
        "examples/torch_atleast_2d": (
            onnx.load(EXAMPLES / "torch_atleast_2d.onnx"),
            [
                np.array(2.0, np.float32),
                rng.standard_normal(3).astype(np.float32),
                rng.standard_normal((2, 3)).astype(np.float32),
                rng.standard_normal((2, 3, 4)).astype(np.float32),
            ],
            11,
        ),
    }
    for name, case in torch_cases().items():
        # The exports with a genuine limit (matrix_models.GENUINE_LIMITS) go
        # as low as it: ScatterElements reduction and GridSample need 16,
        # Resize's antialias 18 (IR 8 and 9, both read by 1.16).
        stem = "corpus_" + name.removeprefix("torch ").replace(" @ opset ", "_opset")
        cases[name] = (case.model, case.inputs, lowest_reachable(stem))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def outcomes(old_python, tmp_path_factory, request) -> dict[str, list | RuntimeFailure]:
    """The opset-11 (13) form of every case the session runs (the fast loop runs
    a sample: a sweep), run in 1.16 in one child process."""
    test = test_the_opset_11_output_runs_in_1_16_as_the_original_in_1_32.__name__
    run = {i.callspec.params["name"] for i in request.session.items if i.originalname == test}
    names = [name for name in CASES if name in run]
    folder = tmp_path_factory.mktemp("old_opset")
    jobs = []
    for number, (model, inputs, target) in enumerate(CASES[name] for name in names):
        path = folder / f"{number}.onnx"
        converted = lowering.lower(model, target_opset=target)
        assert converted.ir_version <= (7 if target <= 13 else 9), "what 1.16 reads, and lower"
        onnx.save(converted, path)
        jobs.append((path, inputs))
    return dict(zip(names, run_many(RELEASE.column, jobs)))


@pytest.mark.sweep
@pytest.mark.parametrize("name", list(CASES))
def test_the_opset_11_output_runs_in_1_16_as_the_original_in_1_32(name, outcomes, tmp_path):
    model, inputs, _ = CASES[name]
    got = outcomes[name]
    assert not isinstance(got, RuntimeFailure), f"{RELEASE.column}: {got}"
    path = tmp_path / "original.onnx"
    onnx.save(model, path)
    expected = run_onnxruntime(path, inputs)
    assert len(got) == len(expected)
    for k, (a, e) in enumerate(zip(got, expected)):
        assert_same(a, e, f"{name} output {k}")


def test_the_original_export_is_refused_by_1_16_for_its_ir_version(old_python, tmp_path):
    """Why the IR version must come down: 1.16 reads at most IR 9."""
    model, inputs, _ = CASES["examples/torch_atleast_2d"]
    assert model.ir_version == 10
    path = tmp_path / "original.onnx"
    onnx.save(model, path)
    (result,) = run_many(RELEASE.column, [(path, inputs)])
    assert isinstance(result, RuntimeFailure)
    assert "Unsupported model IR version: 10, max supported IR version: 9" in str(result)
