"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from lowering.irutils import scopes
from lowering.passes import lower_sequence_maps as sequence_map


@pytest.fixture(autouse=True)
def _shared_scopes_checked(monkeypatch):
    """Every walk served from a pipeline's shared scope index is checked against
    a fresh walk: a pass that changed the scopes without saying so fails."""
    monkeypatch.setattr(scopes, "check_shared", True)


@pytest.fixture
def without_vectorizing(monkeypatch):
    """ "auto" as it chooses when no map can be vectorized: for tests of the other forms."""
    monkeypatch.setattr(
        sequence_map, "vectorize_reason", lambda plan, opset, **_: (False, False, "off")
    )
