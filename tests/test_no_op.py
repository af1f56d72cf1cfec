"""The no-op guarantee, over every model in ONNX's backend node test cases.

Each goes through the command line. Models with neither SequenceMap nor
SequenceInsert come out identical (byte for byte, so field by field); every
output passes the checker; models with SequenceInsert still give their
expected outputs in onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from lowering.cli import main
from tests.cases.onnx_node_tests import node_test_case, node_test_cases
from tests.helpers import all_nodes, assert_same, run, try_run


def _cases():
    return node_test_cases().values()


def _ops(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in all_nodes(model)}


def _valid(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError:
        return False
    return True


@pytest.mark.slow
def test_models_come_out_identical_and_every_output_passes_the_checker(tmp_path):
    """One pass over the models, every failure listed: those with neither
    SequenceMap nor SequenceInsert come out byte for byte, and every model
    that passes the checker still does once lowered."""
    failures = []
    identical = 0
    for case in _cases():
        untouched = not _ops(case.model) & {"SequenceMap", "SequenceInsert"}
        valid = _valid(case.model)  # one that does not pass has nothing to keep
        if not (untouched or valid):
            continue
        source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
        onnx.save(case.model, source)
        try:
            code = main(["-q", str(source), str(target)])
        except Exception as error:  # noqa: BLE001 -- listed with the others
            failures.append(f"{case.name}: raised {type(error).__name__}: {error}")
            continue
        if code != 0:
            failures.append(f"{case.name}: exit {code}")
            continue
        same = target.read_bytes() == source.read_bytes()
        if untouched and not same:
            failures.append(f"{case.name}: not byte for byte the input")
        identical += untouched and same
        if valid and not same:
            try:
                onnx.checker.check_model(onnx.load(target))
            except Exception as error:  # noqa: BLE001 -- unreadable, or refused by the checker
                failures.append(f"{case.name}: output fails the checker: {error}")
    assert not failures, f"{len(failures)} models:\n" + "\n".join(failures)
    assert identical > 1800


#: The cases whose models hold a SequenceInsert, named here so that collecting
#: this module loads none of ONNX's ~1,900 cases (seconds of CPU).
INSERT_CASES = [
    "test_loop13_seq",
    "test_loop16_seq_none",
    "test_sequence_map_identity_1_sequence_expanded",
    "test_sequence_map_identity_2_sequences_expanded",
    "test_sequence_map_identity_1_sequence_1_tensor_expanded",
    "test_sequence_map_add_2_sequences_expanded",
    "test_sequence_map_add_1_sequence_1_tensor_expanded",
    "test_sequence_map_extract_shapes_expanded",
    "test_sequence_insert_at_back",
    "test_sequence_insert_at_front",
]


def test_every_case_with_an_insert_is_listed():
    assert {c.name for c in _cases() if "SequenceInsert" in _ops(c.model)} == set(INSERT_CASES)


@pytest.mark.parametrize("name", INSERT_CASES)
def test_models_with_inserts_still_give_their_expected_outputs(name, tmp_path):
    case = node_test_case(name)
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
