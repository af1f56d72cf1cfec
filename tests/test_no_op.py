"""The no-op guarantee, over every model in ONNX's backend node test cases.

Each goes through the command line. Models with neither SequenceMap nor
SequenceInsert come out identical (byte for byte, so field by field); every
output passes the checker; models with SequenceInsert still give their
expected outputs in onnxruntime.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import pytest
from onnx.backend.test.case.node import collect_testcases

from lowering.cli import main
from tests.helpers import all_nodes, assert_same, run, try_run


@functools.cache
def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases(None)


def _ops(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in all_nodes(model)}


def test_models_without_maps_or_inserts_come_out_identical(tmp_path):
    checked = 0
    for case in _cases():
        if _ops(case.model) & {"SequenceMap", "SequenceInsert"}:
            continue
        source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
        onnx.save(case.model, source)
        assert main(["-q", str(source), str(target)]) == 0, case.name
        assert target.read_bytes() == source.read_bytes(), case.name
        checked += 1
    assert checked > 1800


def test_every_output_passes_the_checker(tmp_path):
    failures = []
    for case in _cases():
        source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
        onnx.save(case.model, source)
        try:
            onnx.checker.check_model(case.model)
        except onnx.checker.ValidationError:
            continue  # the input itself does not pass: nothing to keep
        assert main(["-q", str(source), str(target)]) == 0, case.name
        try:
            onnx.checker.check_model(onnx.load(target))
        except onnx.checker.ValidationError as error:
            failures.append(f"{case.name}: {error}")
    assert failures == []


@pytest.mark.parametrize("name", [c.name for c in _cases() if "SequenceInsert" in _ops(c.model)])
def test_models_with_inserts_still_give_their_expected_outputs(name, tmp_path):
    case = next(c for c in _cases() if c.name == name)
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(case.model, source)
    assert main(["-q", str(source), str(target)]) == 0
    lowered = onnx.load(target)
    names = [i.name for i in lowered.graph.input]
    for inputs, expected in case.data_sets:
        feeds = dict(zip(names, inputs))
        assert_same(run(lowered, feeds), list(expected))
        original = try_run(case.model, feeds)
        if original is not None:
            assert_same(
                original, [np.asarray(e) if not isinstance(e, list) else e for e in expected]
            )
