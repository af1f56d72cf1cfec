"""The vectorizer's batching rules live in family modules, one home per op.

A newcomer adds an op's rule to the family its op is of; these tests keep
that map honest: every family module is merged into the batcher's registry,
every op the batcher claims has its rule in exactly one family module, and
no two families claim the same op (the merge refuses it, as a family
refuses an op registered twice).
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from lowering.maps.strategies import vectorize
from lowering.maps.strategies.vectorize import batcher
from lowering.maps.strategies.vectorize.batcher import (
    FAMILIES,
    RAGGED_FAMILIES,
    RAGGED_RULES,
    RULES,
)
from lowering.maps.strategies.vectorize.family import RuleFamily


def _declared_families() -> dict[str, list[RuleFamily]]:
    """The RuleFamily objects each module of the package declares."""
    found = {}
    for info in pkgutil.iter_modules(vectorize.__path__):
        module = importlib.import_module(f"{vectorize.__name__}.{info.name}")
        families = [value for value in vars(module).values() if isinstance(value, RuleFamily)]
        if families:
            found[module.__name__] = families
    return found


def test_every_family_module_is_in_the_registry():
    declared = _declared_families()
    assert len(declared) >= 6
    for module, families in declared.items():
        assert [f.module for f in families] == [module], "one family a module, named after it"
    assert sorted(f.module for f in (*FAMILIES, *RAGGED_FAMILIES)) == sorted(declared)


def test_every_op_with_a_ragged_rule_has_a_rule_for_stacks():
    """A ragged rule narrows what the op's own rule does (rows along one axis):
    an op with one is an op the vectorizer batches anyway."""
    assert RAGGED_RULES
    assert set(RAGGED_RULES) <= set(RULES)


def test_every_op_the_batcher_claims_has_its_rule_in_exactly_one_family_module():
    assert RULES
    for op_type, rule in RULES.items():
        owners = [f for f in FAMILIES if op_type in f.rules]
        assert [f.module for f in owners] == [rule.__module__], op_type
        assert owners[0].rules[op_type] is rule, op_type


def test_family_modules_claim_disjoint_ops():
    for i, one in enumerate(FAMILIES):
        for other in FAMILIES[i + 1 :]:
            assert not set(one.rules) & set(other.rules), (one.module, other.module)
    assert set(RULES) == {op for family in FAMILIES for op in family.rules}


def test_an_op_claimed_twice_is_refused():
    def rule(v, node, args):
        return []

    first, second = RuleFamily("first"), RuleFamily("second")
    first.rule("Relu")(rule)
    second.rule("Relu", "Abs")(rule)
    with pytest.raises(ValueError, match="Relu has batching rules in two families"):
        batcher._merged([first, second])
    with pytest.raises(ValueError, match="Relu has two batching rules in first"):
        first.rule("Relu")(rule)
