"""ONNX's own SequenceMap conformance cases, lowered and run in onnxruntime."""

from __future__ import annotations

import pytest

from tests.cases.onnx_node_tests import SEQUENCE_MAP_CASES, node_test_case, node_test_cases
from tests.helpers import assert_same, lowered, op_types, run


def test_every_sequence_map_case_is_covered():
    shipped = {
        name
        for name in node_test_cases()
        if name.startswith("test_sequence_map_") and not name.endswith("_expanded")
    }
    assert shipped == set(SEQUENCE_MAP_CASES)


@pytest.mark.parametrize("name", SEQUENCE_MAP_CASES)
def test_conformance_case(name):
    case = node_test_case(name)
    result = lowered(case.model)
    assert "Loop" in op_types(result)
    input_names = [i.name for i in result.graph.input]
    for inputs, expected in case.data_sets:
        actual = run(result, dict(zip(input_names, inputs)))
        assert_same(actual, list(expected))
