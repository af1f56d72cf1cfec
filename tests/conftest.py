"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from lowering.passes import lower_sequence_maps as sequence_map


@pytest.fixture
def without_vectorizing(monkeypatch):
    """ "auto" as it chooses when no map can be vectorized: for tests of the other forms."""
    monkeypatch.setattr(
        sequence_map, "vectorize_reason", lambda plan, opset, **_: (False, False, "off")
    )
