"""Lowered models run on real runtimes that have no SequenceMap.

OpenVINO and tract are the ``runtimes`` test extra. Where one cannot be
installed on the platform, its tests are skipped and say so.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

import lowering
from tests.helpers import assert_same, op_types, run

openvino = pytest.importorskip("openvino", reason="OpenVINO is not installable here")
tract = pytest.importorskip("tract", reason="tract is not installable here")

DATA = pathlib.Path(__file__).parent / "data" / "torch"
NAMES = ["atleast_1d", "atleast_2d", "atleast_3d"]


def run_openvino(path: pathlib.Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    compiled = openvino.Core().compile_model(str(path), "CPU")
    return [np.asarray(v) for v in compiled(inputs).values()]


def run_tract(path: pathlib.Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    runnable = tract.onnx().load(str(path)).into_model().into_runnable()
    return [t.to_numpy() for t in runnable.run(inputs)]


def _torch_case(name: str, tmp_path: pathlib.Path, **options):
    result = lowering.lower(onnx.load(DATA / f"{name}.onnx"), **options)
    path = tmp_path / f"{name}.onnx"
    onnx.save(result, path)
    data = np.load(DATA / f"{name}.npz")
    inputs = [data[f"input_{k}"] for k in range(4)]
    return result, path, inputs, dict(zip([i.name for i in result.graph.input], inputs))


@pytest.mark.parametrize("name", NAMES)
def test_torch_atleast_has_no_sequence_op_and_runs_in_openvino(name, tmp_path):
    result, path, inputs, feeds = _torch_case(name, tmp_path, optimize=True)
    assert not [op for op in op_types(result) if "Sequence" in op]
    expected = run(result, feeds)
    assert_same(run_openvino(path, inputs), expected)


@pytest.mark.parametrize("name", NAMES)
def test_torch_atleast_without_folding_still_has_no_sequence_op(name, tmp_path):
    result, _, _, feeds = _torch_case(name, tmp_path)
    assert not [op for op in op_types(result) if "Sequence" in op]
    data = np.load(DATA / f"{name}.npz")
    assert_same(run(result, feeds), [data[f"output_{k}"] for k in range(4)])
