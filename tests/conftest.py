"""Fixtures shared by the test modules, and the sampling of sweeps.

A test marked ``@pytest.mark.sweep`` is a sweep over many cases that mostly
repeat each other: the fast loop (``-m "not slow"``) runs a fixed sample of
its cases, a quarter and at least ten, the same on every run and in every
xdist worker (seeded by the test's name); the rest are marked ``slow``, so
plain ``pytest`` (CI) runs them all.
"""

from __future__ import annotations

import collections
import math
import random

import pytest

from lowering.passes import lower_sequence_maps as sequence_map


@pytest.fixture
def without_vectorizing(monkeypatch):
    """ "auto" as it chooses when no map can be vectorized: for tests of the other forms."""
    monkeypatch.setattr(sequence_map, "AUTO", without_vectorize())


def without_vectorize() -> tuple:
    """The forms "auto" asks, but vectorizing."""
    return tuple(form for form in sequence_map.AUTO if form.name != "vectorize")


#: The share of a sweep's cases the fast loop runs, and the fewest it runs.
SWEEP_SHARE, SWEEP_LEAST = 0.25, 10


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark all but a fixed sample of each sweep's cases ``slow`` (before ``-m``
    deselects: this hook runs first)."""
    sweeps: dict[str, list[pytest.Item]] = collections.defaultdict(list)
    for item in items:
        if item.get_closest_marker("sweep") is not None and item.get_closest_marker("slow") is None:
            sweeps[item.nodeid.partition("[")[0]].append(item)
    for name, cases in sweeps.items():
        keep = max(SWEEP_LEAST, math.ceil(SWEEP_SHARE * len(cases)))
        kept = set(random.Random(name).sample(range(len(cases)), min(keep, len(cases))))
        for index, item in enumerate(cases):
            if index not in kept:
                item.add_marker(pytest.mark.slow)
