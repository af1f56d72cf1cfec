"""Every default-domain op, every version pair from 11 to the latest: one outcome each.

A conversion from opset a to opset b is a chain of steps between consecutive
schema versions of the op. Each step is exactly one of: a relabel (listed in
the allowlist, with its reason, and mechanically the same signature apart from
types), an adapter (registered, with an onnxruntime test in
tests/test_opset_adapters.py), or a block (then, going down, ONNX's function
body may expand the node; tests/test_opset_expansions.py runs those).
Every relabel and adapter is also run on all of its outputs in
tests/test_opset_all_outputs.py.
"""

from __future__ import annotations

import onnx.defs
import pytest

from lowering.defaults import MIN_OPSET
from lowering.opset import schemas
from lowering.opset.allowlist import RELABEL
from lowering.opset.registry import ADAPTERS
from scripts.opset_allowlist import type_only
from tests.cases.opset_adapters import EXAMPLES

OPS = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""})
VERSIONS = range(MIN_OPSET, onnx.defs.onnx_opset_version() + 1)
COVERED = {example.key for example in EXAMPLES}


def _steps(op: str, source: int, target: int):
    """The (old, new, direction) steps from ``source`` to ``target``, and how the walk ends."""
    version = schemas.schema(op, source).since_version
    end = schemas.schema(op, target)
    steps = []
    while end is None or end.since_version != version:
        step = schemas.next_step(op, version, target)
        if step is None or not step[0]:
            return steps, "missing"
        direction = "down" if target < version else "up"
        steps.append((*step, direction))
        version = step[0] if direction == "down" else step[1]
    return steps, "reached"


def _outcome(op: str, old: int, new: int, direction: str) -> list[str]:
    outcomes = []
    if (op, old, new) in RELABEL:
        outcomes.append("relabel")
    if (op, old, new, direction) in ADAPTERS:
        outcomes.append("adapt")
    return outcomes or ["block"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.sweep
def test_every_step_of_every_version_pair_has_one_outcome(op):
    seen = set()
    for source in VERSIONS:
        if schemas.schema(op, source) is None:
            continue
        for target in VERSIONS:
            if target == source:
                continue
            steps, _ = _steps(op, source, target)
            seen.update(steps)
    for old, new, direction in sorted(seen):
        outcomes = _outcome(op, old, new, direction)
        assert len(outcomes) == 1, (op, old, new, direction, outcomes)
        if outcomes == ["relabel"]:
            reason = RELABEL[(op, old, new)]
            assert reason.startswith(f"{op}-{new} vs {op}-{old}: same signature")
            assert type_only(schemas.schema(op, old), schemas.schema(op, new)) is not None
        elif outcomes == ["adapt"]:
            assert (op, old, new, direction) in COVERED, (
                f"adapter {op} {old}<->{new} {direction} has no onnxruntime example"
            )


def test_the_allowlist_holds_only_type_changes():
    for (op, old, new), reason in RELABEL.items():
        a, b = schemas.schema(op, old), schemas.schema(op, new)
        assert a.since_version == old and b.since_version == new
        assert type_only(a, b) is not None, reason
        assert (op, old, new, "down") not in ADAPTERS and (op, old, new, "up") not in ADAPTERS


@pytest.mark.parametrize(
    ("op", "old", "new"),
    [
        ("RoiAlign", 10, 16),
        ("GridSample", 16, 20),
        ("Split", 13, 18),
        ("Softmax", 11, 13),
        ("Resize", 18, 19),
        ("Pad", 18, 19),
        ("ScatterND", 16, 18),
        ("Mod", 13, 28),
    ],
)
def test_known_meaning_changes_are_never_relabelled(op, old, new):
    assert (op, old, new) not in RELABEL


def test_every_adapter_has_an_example():
    missing = sorted(set(ADAPTERS) - COVERED)
    assert not missing, missing
