"""What each runtime runs of the forms a map can be lowered to.

A SequenceMap can become plain ops (vectorized or unrolled), a ``Scan``, a
``Loop`` with scan outputs, or a ``Loop`` over sequences. onnxruntime runs
them all; many runtimes run only some. ``--runtime NAME`` makes the pass
choose, where a loop is unavoidable, a form NAME runs, and refuse a map
that NAME can run in no form; the summary says, for every map that keeps a
loop, which of the runtimes below will reject it.

The table is measured, not guessed: ``scripts/runtime_probe.py`` runs one
small model per construct in each runtime (the versions below) against
numpy. An op listed in ``lacks`` is one the runtime refused to load, or
computed wrongly, in some model; every other op the lowering emits ran and
matched.

``generic`` lacks what any of them lacks: output for it runs in all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import onnx_ir as ir

from lowering import defaults
from lowering.irutils.op_facts import LOOP_OPS, SEQUENCE_OPS, is_onnx_domain
from lowering.irutils.scopes import find_nodes
from lowering.rewrites import spelled


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A runtime's name and the ops it lacks (measured with the version noted).

    Attributes:
        name: What ``--runtime`` takes.
        lacks: Ops among :data:`LOOP_OPS` and :data:`SEQUENCE_OPS` it cannot run.
        one_if_per_graph: It loads a graph with one ``If`` at most (its branches
            may hold more).
        miscomputes: Ops it loads but computes wrongly in a way the rewrites
            would rely on, with how: a map whose vectorized form has one gets
            another form.
    """

    name: str
    lacks: frozenset[str]
    one_if_per_graph: bool = False
    miscomputes: tuple[tuple[str, str], ...] = ()

    def miscomputed(self, ops: Iterable[str]) -> str | None:
        """How it computes the first of ``ops`` wrongly, as a reason; None if none."""
        wrong = dict(self.miscomputes)
        found = next((op for op in ops if op in wrong), None)
        return None if found is None else f"{self.name} {wrong[found]}"

    def missing(self, ops: set[str] | frozenset[str]) -> list[str]:
        """Which of ``ops`` this runtime cannot run, in a stable order."""
        return sorted(set(ops) & self.lacks)

    @property
    def loops(self) -> bool:
        """Whether it runs some loop (a Loop or a Scan)."""
        return not {"Loop", "Scan"} <= self.lacks


_ALL_SEQUENCES = frozenset(SEQUENCE_OPS)

_MEASURED = (
    # onnxruntime 1.32: everything.
    Runtime("onnxruntime", frozenset()),
    # OpenVINO 2026.4 runs Loop and Scan. Its frontend converts sequence ops only in the
    # patterns it recognizes: SplitToSequence only over a static axis, a
    # SequenceInsert into a Loop's sequence not at all, and a Loop appending
    # elements of different shapes gave a wrong result (tests/test_runtime_option.py);
    # it crashed compiling the SequenceInsert guard, an If returning a sequence
    # (tests/test_sequence_chains.py).
    Runtime("openvino", _ALL_SEQUENCES),
    # tract 0.23: Scan only; a second If in one graph fails to load ("Duplicate
    # node name: If", whatever the nodes are named; tests/test_scan_of_nothing.py).
    Runtime("tract", frozenset({"Loop"}) | _ALL_SEQUENCES, one_if_per_graph=True),
    # MNN 3.6: its converter refuses Scan; SequenceLength comes back as int32[1];
    # 3.6.1 computes a Scatter with reduction = "add" as if it had none
    # (tests/test_sequence_free_loops.py), so segment reductions get a Loop.
    Runtime(
        "mnn",
        frozenset({"Scan", "SequenceLength"}),
        miscomputes=(
            ("ScatterElements", "ignores ScatterElements' reduction (3.6.1)"),
            ("ScatterND", "ignores ScatterND's reduction (3.6.1)"),
        ),
    ),
    # TVM Relax 0.27: the frontend converts every sequence op, but no Loop or Scan.
    Runtime("tvm", frozenset(LOOP_OPS)),
    # tinygrad 0.14: no loop and no sequence op.
    Runtime("tinygrad", frozenset(LOOP_OPS) | _ALL_SEQUENCES),
)

RUNTIMES: dict[str, Runtime] = {r.name: r for r in _MEASURED}
RUNTIMES["generic"] = Runtime(
    "generic",
    frozenset().union(*(r.lacks for r in _MEASURED)),
    one_if_per_graph=any(r.one_if_per_graph for r in _MEASURED),
    miscomputes=tuple((op, f"({r.name}) {how}") for r in _MEASURED for op, how in r.miscomputes),
)

DEFAULT_RUNTIME = defaults.DEFAULT_RUNTIME


def left_unsupported(model: ir.Model, runtime: str) -> str | None:
    """The ops ``runtime`` lacks that ``model`` still holds, said in one phrase; None if none.

    Such as ``SequenceInsert x3 (first: node 'ins' in main graph 'g'), SequenceLength x1
    (first: ...)``: whether the lowering wrote them or they came with the input,
    the runtime will refuse the model (``--runtime``'s check before writing).
    """
    lacks = RUNTIMES[runtime].lacks
    found = find_nodes(model, lambda n: is_onnx_domain(n.domain) and n.op_type in lacks)
    if not found:
        return None
    by_op: dict[str, list] = {}
    for located in found:
        by_op.setdefault(located.node.op_type, []).append(located)
    said = []
    for op, places in sorted(by_op.items()):
        first = places[0]
        said.append(
            f"{op} x{len(places)} (first: node {first.node.name or '<unnamed>'!r} "
            f"in {first.scope.description})"
        )
    return ", ".join(said)


def rejections(ops: set[str]) -> list[tuple[str, str]]:
    """Each measured runtime that cannot run ``ops``, with the first op it lacks.

    Such as ``[("tract", "Loop"), ("tvm", "Loop")]``; empty when all of them can.
    """
    if not ops:  # (most rewrites add no loop or sequence op: asked once per map)
        return []
    return [(r.name, r.missing(ops)[0]) for r in _MEASURED if r.missing(ops)]


def rejecting(ops: set[str]) -> list[str]:
    """:func:`rejections` as the summary says them: ``["tract (Loop)", "tvm (Loop)"]``."""
    return spelled(rejections(ops))
