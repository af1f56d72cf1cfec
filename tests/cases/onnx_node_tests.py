"""ONNX's backend node test cases (``onnx.backend.test.case.node``), loaded once.

Loading the ~1,900 models and their data takes seconds of CPU (each of ONNX's
modules computes its expected outputs as it is imported); the no-op guarantee
and the checks that a list of cases is complete read them all, so one session
loads them once. A test of a few cases loads only the modules that make them
(:func:`node_test_case`). Callers read, never change, them.
"""

from __future__ import annotations

import functools
import importlib
import warnings

from onnx.backend.test.case import node
from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.case.test_case import TestCase

#: ONNX's SequenceMap conformance cases (tests/test_conformance.py checks the list is whole).
SEQUENCE_MAP_CASES = [
    "test_sequence_map_identity_1_sequence",
    "test_sequence_map_identity_2_sequences",
    "test_sequence_map_identity_1_sequence_1_tensor",
    "test_sequence_map_add_2_sequences",
    "test_sequence_map_add_1_sequence_1_tensor",
    "test_sequence_map_extract_shapes",
]

#: The module of ``onnx.backend.test.case.node`` that makes a case, by the case's prefix.
MODULES = {
    "test_sequence_map_": "sequence_map",
    "test_sequence_insert_": "sequenceinsert",
    "test_loop": "loop",
}


@functools.cache
def node_test_cases() -> dict[str, TestCase]:
    """Every case by name (it warns about deprecated ops while loading), in the
    order loaded: the modules :func:`node_test_case` loaded first come first."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases(None)}


def node_test_case(name: str) -> TestCase:
    """The case ``name``, loading only the module of ONNX's that makes it (the
    cases a module makes are the same whichever loads it first)."""
    (module,) = (module for prefix, module in MODULES.items() if name.startswith(prefix))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module(f"{node.__name__}.{module}")
    return next(case for case in node._NodeTestCases if case.name == name)
