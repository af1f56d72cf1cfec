"""The adapter registry: one small function per (op, old, new, direction).

An adapter rewrites one node, inside a sandbox (see :mod:`lowering.opset.plan`),
from one schema version to the next one down (or up). It either leaves the
node valid at the other version, possibly with new nodes around it, or raises
:class:`Decline` with the reason, which becomes the blocker. The registry is
the allowlist for everything that is not a plain relabel: a version pair with
no relabel entry and no adapter is not converted.

    @down("Softmax", 11, 13)        # Softmax-13 -> Softmax-11
    def _softmax(rw, node): ...

Each adapter's docstring says what it does, the module docstring why it is sound. An
adapter is called as ``function(rw, node)`` with a
:class:`lowering.opset.plan.Rewriter`.

An adapter answers for its node's first output only, unless it is
registered with ``outputs=ALL`` (it then carries over, or declines for,
every output: Dropout's mask, BatchNormalization's running statistics, an
RNN's states). Where a node reads an output its adapter does not answer for,
the planner declines before the adapter runs::

    @down("Dropout", 10, 12, outputs=ALL)    # the mask too
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable


class Decline(Exception):
    """An adapter cannot convert this node; the message says why."""


@dataclasses.dataclass(frozen=True)
class Adapter:
    op: str
    old: int
    new: int
    direction: str  # "down": new -> old; "up": old -> new
    function: Callable
    # How many leading outputs the adapter answers for; None: all of them.
    outputs: int | None = 1

    @property
    def label(self) -> str:
        source, dest = (self.new, self.old) if self.direction == "down" else (self.old, self.new)
        return f"{self.op}-{source} -> {self.op}-{dest}"


ADAPTERS: dict[tuple[str, int, int, str], Adapter] = {}

#: ``outputs=ALL``: the adapter answers for every output of its node.
ALL = None


def _register(direction: str, ops: str | Iterable[str], old: int, new: int, outputs: int | None):
    names = [ops] if isinstance(ops, str) else list(ops)

    def decorate(function: Callable) -> Callable:
        for op in names:
            key = (op, old, new, direction)
            if key in ADAPTERS:
                raise ValueError(f"two adapters for {key}")
            ADAPTERS[key] = Adapter(op, old, new, direction, function, outputs)
        return function

    return decorate


def down(ops: str | Iterable[str], old: int, new: int, *, outputs: int | None = 1):
    """Register an adapter taking ``op``-``new`` nodes down to ``op``-``old``."""
    return _register("down", ops, old, new, outputs)


def up(ops: str | Iterable[str], old: int, new: int, *, outputs: int | None = 1):
    """Register an adapter taking ``op``-``old`` nodes up to ``op``-``new``."""
    return _register("up", ops, old, new, outputs)


# Hand-written expansions, for ops that ONNX defines without a function body;
# used, like ONNX's own bodies, only where a node blocks going down.
EXPANSIONS: dict[str, Callable] = {}


def expansion(op: str):
    """Register a hand-written expansion of ``op`` into older ops."""

    def decorate(function: Callable) -> Callable:
        EXPANSIONS[op] = function
        return function

    return decorate
