"""The models scripts/fuzz.py shrank from its failures, kept in tests/data/fuzz/.

Each ``NAME.onnx`` has its feeds beside it in ``NAME.npz``: a tensor under
its name, a sequence ``s`` as ``s__len`` and its elements ``s__0``, ``s__1``...
(npz holds arrays only). Several test modules each check one of them.
"""

from __future__ import annotations

import pathlib

import numpy as np

FUZZ = pathlib.Path(__file__).parent.parent / "data" / "fuzz"


def fuzz_feeds(name: str) -> dict:
    """The feeds of ``FUZZ / f"{name}.onnx"``, sequences as lists."""
    stored = np.load(FUZZ / f"{name}.npz")
    feeds: dict = {k: stored[k] for k in stored.files if "__" not in k}
    for key in stored.files:
        if key.endswith("__len"):
            sequence = key.removesuffix("__len")
            feeds[sequence] = [stored[f"{sequence}__{i}"] for i in range(int(stored[key]))]
    return feeds
