"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from lowering.passes import lower_sequence_maps as sequence_map


@pytest.fixture
def without_vectorizing(monkeypatch):
    """ "auto" as it chooses when no map can be vectorized: for tests of the other forms."""
    monkeypatch.setattr(sequence_map, "AUTO", without_vectorize())


def without_vectorize() -> tuple:
    """The forms "auto" asks, but vectorizing."""
    return tuple(form for form in sequence_map.AUTO if form.name != "vectorize")
