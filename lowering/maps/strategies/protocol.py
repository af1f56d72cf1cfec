"""One shape for every strategy: it fits a plan, or declines with a reason; then it lowers.

The pass asks the strategies of ``auto`` in order and takes the first whose
fit the target runtime and onnxruntime's kernels run (:func:`choose`)::

    for strategy in order:
        strategy.fit(plan, context)  -> Decline(form, reason)           next
                                     -> Fit(why, writes, needs, ...)
            runtime lacks an op of fit.needs                            next
            onnxruntime has no kernel for an op of fit.writes           next
            runtime computes an op of fit.writes wrongly                next
                                                                        chosen
    strategy.lower(plan, replacer, fit, context)

A decline is data, as onnxscript's ``MatchResult`` and MLIR's
``notifyMatchFailure`` are: the chosen form's reason lists the declines
that are ``said`` (``not a Scan: tract has no Scan``), and a map that no
form fits is refused with them. What a strategy computed while fitting (the
vectorized nodes, the length) rides on its :class:`Fit` to its rewrite,
which never judges again (a Scan its axes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.analysis.sequence_length import SequenceLengths
from lowering.errors import LoweringError
from lowering.maps.claims import Claims
from lowering.maps.loop_body import Replacer
from lowering.maps.plan import MapPlan
from lowering.runtimes.ort_kernels import first_unsupported
from lowering.runtimes.profiles import EMPTY_STACK, Runtime

#: (op, element type of its first input) that a form writes, for the kernel check.
Writes = Sequence[tuple[str, ir.DataType | None]]


@dataclasses.dataclass(frozen=True)
class Decline:
    """Why a form does not fit a map.

    ``said``: the reason of the form chosen after it mentions it (a form
    that declines only because an earlier one was preferred says nothing).
    ``form`` None: the reason explains the map rather than one form ("output
    0 may differ in shape"), and comes first. ``refusal``: the form every map
    fits, where the runtime cannot run it; a map no form fits is refused
    with its reason.
    """

    form: str | None
    reason: str
    said: bool = True
    refusal: bool = False

    def __str__(self) -> str:
        return self.reason if self.form is None else f"not {self.form}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Fit:
    """A form fits a map: why, what it will write, and the ops the runtime must have.

    ``computes``: the body's own ops, where the form runs them otherwise than
    the original does (on a stack that may be empty), for the runtime's
    faults; ``forms``: what it writes as a profile tells ops apart by an
    attribute (:func:`~lowering.runtimes.profiles.op_forms`); ``empty_read``: the original goes on past a map over no element
    (else a fault on an empty stack, which the original meets too, does not
    count). Strategies subclass it to carry what they computed for their
    rewrite.
    """

    strategy: Strategy
    why: str
    writes: Writes = ()
    needs: frozenset[str] = frozenset()
    computes: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()
    empty_read: bool = True


@dataclasses.dataclass
class Context:
    """What one run of the pass knows while it chooses and lowers, shared by its maps."""

    runtime: Runtime
    max_unroll: int
    lengths: SequenceLengths
    main_graph: ir.Graph
    target_opset: int | None = None
    #: Without a Loop, a uniform map over split tensors is a Scan whatever reads it.
    scan_reads_stacks: bool = False
    #: What each map found vectorizable stacks its outputs as, for the maps that read them.
    upstream: dict = dataclasses.field(default_factory=dict)
    #: Graphs given an If that guards a Scan against no element.
    guarded: set[ir.Graph] = dataclasses.field(default_factory=set)
    #: What a rewrite adds to its map's reason (keyed by the map's node).
    notes: dict[ir.Node, str] = dataclasses.field(default_factory=dict)
    #: Each map's analyses that two strategies read, judged once (by the map's node):
    #: its vectorized rewrite (or why not), and whether its results have one shape.
    vectorized: dict[ir.Node, Fit | Decline] = dataclasses.field(default_factory=dict)
    uniform: dict[ir.Node, tuple[bool, str]] = dataclasses.field(default_factory=dict)
    #: Why a form other than the Loop read through its sequences would show ONNX's
    #: inference a shape it may get wrong that no pin fixes (:mod:`lowering.maps.claims`).
    claims: Claims = dataclasses.field(default_factory=lambda: Claims(Proof))


class Strategy(Protocol):
    """A form a map can be lowered to."""

    #: The name the summary and report give the form.
    name: str
    #: How a decline names it: "vectorized", "a Scan".
    form: str

    def fit(self, plan: MapPlan, context: Context, declined: list[Decline]) -> Fit | Decline:
        """Whether the form fits ``plan``, changing nothing (``declined``: the
        declines of the forms asked before)."""
        ...

    def lower(self, plan: MapPlan, replacer: Replacer, fit: Fit, context: Context) -> list[ir.Node]:
        """Rewrite ``plan``'s map as ``fit`` says; returns the nodes that replace it."""
        ...


def choose(plan: MapPlan, context: Context, strategies: Sequence[Strategy]) -> tuple[Fit, str]:
    """The first of ``strategies`` that fits ``plan`` and runs where it must,
    with the reason the summary gives.

    Raises:
        LoweringError: No form fits (the target runtime runs none of them).
    """
    declined: list[Decline] = []
    for strategy in strategies:
        found = strategy.fit(plan, context, declined)
        if isinstance(found, Fit):
            found = _runnable(found, plan, context)
        if isinstance(found, Fit):
            return found, _joined(found.why, declined)
        declined.append(found)
    problem = next((d.reason for d in declined if d.refusal), "no form fits")
    raise LoweringError(
        f"--runtime {context.runtime.name}: {problem}: {_joined('', declined)}",
        node=plan.node,
        scope=plan.located.scope.description,
    )


def _runnable(fit: Fit, plan: MapPlan, context: Context) -> Fit | Decline:
    """``fit``, or why the runtime or onnxruntime's kernels cannot run what it writes."""
    form: str | None = fit.strategy.form
    if lacks := context.runtime.missing(fit.needs):
        return Decline(form, f"{context.runtime.name} has no {lacks[0]}")
    if blocked := first_unsupported(list(fit.writes), plan.opset):
        return Decline(form, blocked)
    ops = [*(op for op, _ in fit.writes), *fit.forms, *fit.computes]
    if not fit.empty_read:
        ops = [op for op in ops if op not in EMPTY_STACK]
    if wrong := context.runtime.miscomputed(ops):
        return Decline(form, wrong)
    return fit


def _joined(why: str, declined: list[Decline]) -> str:
    """``why``, then each decline the form chosen after it mentions, once:
    what explains the map first, then the forms passed over."""
    parts = [why] if why else []
    ordered = sorted(declined, key=lambda d: d.form is not None)  # (stable)
    for decline in ordered:
        if decline.said and not any(decline.reason in part for part in parts):
            parts.append(str(decline))
    return "; ".join(parts)
