"""Fixtures shared by the test modules, and the sampling of sweeps.

A test marked ``@pytest.mark.sweep`` is a sweep over many cases that mostly
repeat each other: the fast loop (``-m "not slow"``) runs a fixed sample of
its cases, a quarter and at least ten, the same on every run and in every
xdist worker (seeded by the test's name), widened so that every value of a
parameter with few values (a strategy, a runtime, an opset) is in it; the
rest are marked ``slow``, so plain ``pytest`` (CI) runs them all.
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
#: A parameter of at most this many values has each of them in the sample.
SWEEP_COVERED = 12


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark all but a fixed sample of each sweep's cases ``slow`` (before ``-m``
    deselects: this hook runs first)."""
    sweeps: dict[str, list[pytest.Item]] = collections.defaultdict(list)
    for item in items:
        if item.get_closest_marker("sweep") is not None and item.get_closest_marker("slow") is None:
            sweeps[item.nodeid.partition("[")[0]].append(item)
    for name, cases in sweeps.items():
        for index in set(range(len(cases))) - sample(name, cases):
            cases[index].add_marker(pytest.mark.slow)


def sample(name: str, cases: list[pytest.Item]) -> set[int]:
    """The indices of the cases of sweep ``name`` the fast loop runs: a seeded
    quarter, then, in a second seeded order, a case for each value the quarter
    missed of a parameter of at most :data:`SWEEP_COVERED` values."""
    keep = max(SWEEP_LEAST, math.ceil(SWEEP_SHARE * len(cases)))
    kept = set(random.Random(name).sample(range(len(cases)), min(keep, len(cases))))
    order = random.Random(name).sample(range(len(cases)), len(cases))
    values = [_values(item) for item in cases]
    counts = collections.Counter(key for case in values for key in case)
    names = collections.Counter(key[0] for key in counts)
    wanted = {key for key in counts if names[key[0]] <= SWEEP_COVERED} - {
        key for index in kept for key in values[index]
    }
    for index in order:
        if wanted & values[index]:
            kept.add(index)
            wanted -= values[index]
    return kept


def _values(item: pytest.Item) -> set[tuple[str, object]]:
    """(parameter, its value, or the value's identity where it has no hash) for
    each parameter of ``item``: the cases of one parametrize list share its objects."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return set()
    keys = set()
    for name, value in callspec.params.items():
        try:
            hash(value)
        except TypeError:
            value = ("id", id(value))
        keys.add((name, value))
    return keys
