"""The models scripts/fuzz.py shrank from its failures, kept in tests/data/fuzz/.

Each ``NAME.onnx`` has its feeds beside it in ``NAME.npz``: a tensor under
its name, a sequence ``s`` as ``s__len`` and its elements ``s__0``, ``s__1``...
(npz holds arrays only). Where onnxruntime cannot run the original (a
function whose map body is a graph attribute), the fuzzer's oracle outputs are
in ``NAME.expected.npz``, as ``output_0``, ``output_1``... in the same way.
Several test modules each check one of them.
"""

from __future__ import annotations

import pathlib

import numpy as np

FUZZ = pathlib.Path(__file__).parent.parent / "data" / "fuzz"


def fuzz_feeds(name: str) -> dict:
    """The feeds of ``FUZZ / f"{name}.onnx"``, sequences as lists."""
    return _unpacked(FUZZ / f"{name}.npz")


def fuzz_expected(name: str) -> list:
    """The oracle's outputs for :func:`fuzz_feeds`, in order, sequences as lists."""
    outputs = _unpacked(FUZZ / f"{name}.expected.npz")
    return [outputs[f"output_{k}"] for k in range(len(outputs))]


def _unpacked(path: pathlib.Path) -> dict:
    stored = np.load(path)
    values: dict = {k: stored[k] for k in stored.files if "__" not in k}
    for key in stored.files:
        if key.endswith("__len"):
            sequence = key.removesuffix("__len")
            values[sequence] = [stored[f"{sequence}__{i}"] for i in range(int(stored[key]))]
    return values
