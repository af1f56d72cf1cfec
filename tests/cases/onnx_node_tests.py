"""ONNX's backend node test cases (``onnx.backend.test.case.node``), loaded once.

Loading the ~1,900 models and their data takes seconds of CPU; the no-op
guarantee, the SequenceMap conformance cases and the SequenceInsert ones all
read them, so one session loads them once. Callers read, never change, them.
"""

from __future__ import annotations

import functools
import warnings

from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.case.test_case import TestCase


@functools.cache
def node_test_cases() -> dict[str, TestCase]:
    """Every case by name, in ONNX's order (it warns about deprecated ops while loading)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases(None)}
