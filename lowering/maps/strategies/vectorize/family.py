"""A family of batching rules: one module's ops, each with the rule that batches it.

A rule takes the batcher, the body node and its operands (each batched or
invariant, None where omitted), builds the batched nodes with the batcher's
building blocks, and returns what is known of each output. A rule that
cannot batch its node raises the batcher's ``decline()`` with the reason.
Each family module declares ``FAMILY = RuleFamily(__name__)`` and decorates
its rules with ``@FAMILY.rule("Op", ...)``; the batcher imports every
family and merges them (:data:`.batcher.FAMILIES`), so a rule is in force
as soon as its module is listed there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import onnx_ir as ir

from lowering.maps.strategies.vectorize.body_values import BodyValue

if TYPE_CHECKING:  # the batcher imports the families: only its type is needed here
    from lowering.maps.strategies.vectorize.batcher import Batcher

Rule: TypeAlias = "Callable[[Batcher, ir.Node, Sequence[BodyValue | None]], list[BodyValue]]"


class RuleFamily:
    """The batching rules of one module, by op type."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.rules: dict[str, Rule] = {}

    def rule(self, *op_types: str) -> Callable[[Rule], Rule]:
        """Register the decorated function as the rule of ``op_types``."""

        def register(function: Rule) -> Rule:
            for op_type in op_types:
                if op_type in self.rules:
                    raise ValueError(f"{op_type} has two batching rules in {self.module}")
                self.rules[op_type] = function
            return function

        return register
