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

A profile covers a range of releases, from ``oldest`` on, and names those
it was measured on (``tests/test_releases.py`` runs the forms in each, in
venvs of their own). ``--runtime NAME:RELEASE`` names one release: a
release the range covers gets the profile, an older one its own profile
where :data:`RELEASE_PROFILES` has one (``openvino:2023.3``), and
otherwise an error. The summary names every profile, release profiles
included, that rejects a map's form.

``generic`` lacks what any of them lacks: output for it runs in all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from lowering import defaults
from lowering.irutils.op_facts import LOOP_OPS, SEQUENCE_OPS
from lowering.rewrites import spelled


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A runtime's name, the releases it covers and the ops they lack.

    Attributes:
        name: What ``--runtime`` takes.
        lacks: Ops among :data:`LOOP_OPS` and :data:`SEQUENCE_OPS` it cannot run.
        one_if_per_graph: It loads a graph with one ``If`` at most (its branches
            may hold more).
        miscomputes: Ops it refuses or computes wrongly in the way the rewrites
            write them, with how: a map whose vectorized form has one gets
            another form, and a form that keeps one names the runtime among
            those that reject it.
        oldest: The oldest release the profile covers ("2024.0": that and later).
        measured: The releases it was measured on.
    """

    name: str
    lacks: frozenset[str]
    one_if_per_graph: bool = False
    miscomputes: tuple[tuple[str, str], ...] = ()
    oldest: str = ""
    measured: tuple[str, ...] = ()

    @property
    def releases(self) -> str:
        """The range it covers, as the docs say it: "2024.0 and later (measured on 2024.6, ...)"."""
        if not self.oldest:
            return "every runtime it names"
        return f"{self.oldest} and later (measured on {', '.join(self.measured)})"

    def rejects(self, ops: set[str] | frozenset[str]) -> list[str]:
        """Which of ``ops`` it lacks or gets wrong, in a stable order."""
        wrong = {op for op, _ in self.miscomputes}
        return sorted(set(ops) & (self.lacks | wrong))

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
    # onnxruntime 1.32: everything; 1.12 (the oldest with opset 17), 1.14 and 1.16 the
    # forms the lowering writes (an empty axis is reduced by none of them: 1.12-1.16
    # give [0, ...] for it with keepdims, and fail without).
    Runtime("onnxruntime", frozenset(), oldest="1.12", measured=("1.12", "1.16", "1.32")),
    # OpenVINO 2026.4 runs Loop and Scan. Its frontend converts sequence ops only in the
    # patterns it recognizes: SplitToSequence only over a static axis, a
    # SequenceInsert into a Loop's sequence not at all, and a Loop appending
    # elements of different shapes gave a wrong result (tests/test_runtime_option.py).
    # The 2024 LTS (2024.6) and 2025.4 run the same forms; none before 2026.4 takes
    # ScatterND's reduction, which the lowering does not write.
    Runtime("openvino", _ALL_SEQUENCES, oldest="2024.0", measured=("2024.6", "2025.4", "2026.4")),
    # tract 0.23: Scan only; a second If in one graph fails to load ("Duplicate
    # node name: If", whatever the nodes are named; tests/test_scan_of_nothing.py).
    Runtime(
        "tract",
        frozenset({"Loop"}) | _ALL_SEQUENCES,
        one_if_per_graph=True,
        oldest="0.23",
        measured=("0.23.9",),
    ),
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
        oldest="3.6",
        measured=("3.6.1",),
    ),
    # TVM Relax 0.27: the frontend converts every sequence op, but no Loop or Scan.
    Runtime("tvm", frozenset(LOOP_OPS), oldest="0.27", measured=("0.27",)),
    # tinygrad 0.14: no loop and no sequence op.
    Runtime("tinygrad", frozenset(LOOP_OPS) | _ALL_SEQUENCES, oldest="0.14", measured=("0.14.0",)),
)

_OPENVINO = _MEASURED[1]

#: Releases older than their runtime's range that have a profile of their own.
RELEASE_PROFILES: dict[str, Runtime] = {
    # OpenVINO 2023.3 (before the 2024 LTS): the same, and it refuses the
    # segment reductions' ScatterElements (tests/test_releases.py), so those get a Loop.
    "openvino:2023.3": dataclasses.replace(
        _OPENVINO,
        name="openvino:2023.3",
        miscomputes=(
            (
                "ScatterElements",
                "refuses ScatterElements with a reduction (2023.3: 'Indices rank and data rank')",
            ),
        ),
        oldest="2023.3",
        measured=("2023.3",),
    ),
}

RUNTIMES: dict[str, Runtime] = {r.name: r for r in _MEASURED}
_EVERY = (*_MEASURED, *RELEASE_PROFILES.values())
RUNTIMES["generic"] = Runtime(
    "generic",
    frozenset().union(*(r.lacks for r in _EVERY)),
    one_if_per_graph=any(r.one_if_per_graph for r in _EVERY),
    miscomputes=tuple((op, f"({r.name}) {how}") for r in _EVERY for op, how in r.miscomputes),
)

DEFAULT_RUNTIME = defaults.DEFAULT_RUNTIME

#: The ops that some profile refuses or gets wrong as the rewrites write them
#: (beside the loop and sequence ops; all of them scatters with a reduction): a
#: rewrite that adds one names who rejects it.
REFUSED_OPS = frozenset(op for r in _EVERY for op, _ in r.miscomputes)


def profile(name: str) -> Runtime:
    """The profile ``--runtime NAME`` or ``NAME:RELEASE`` means; ValueError if none.

    A release the range covers gets the range's profile, under the name
    given; an older one its own from :data:`RELEASE_PROFILES`.
    """
    if name in RUNTIMES:
        return RUNTIMES[name]
    if name in RELEASE_PROFILES:
        return RELEASE_PROFILES[name]
    base, _, release = name.partition(":")
    runtime = RUNTIMES.get(base)
    if runtime is None or base == "generic" or not _is_release(release):
        raise ValueError(
            f"be one of {', '.join(RUNTIMES)}, or one of them but generic with a release "
            "(openvino:2024.6)"
        )
    if _release_key(release) < _release_key(runtime.oldest):
        own = [n for n in RELEASE_PROFILES if n.startswith(base + ":")]
        also = f"; {', '.join(own)} has a profile of its own" if own else ""
        raise ValueError(
            f"name a release of {base} from {runtime.oldest} on (its profile covers "
            f"{runtime.releases}{also})"
        )
    return dataclasses.replace(runtime, name=name)


def _is_release(text: str) -> bool:
    return bool(text) and all(part.isdigit() for part in text.split("."))


def _release_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def rejections(ops: set[str]) -> list[tuple[str, str]]:
    """Each measured runtime that cannot run ``ops``, with the first op it lacks.

    Such as ``[("tract", "Loop"), ("tvm", "Loop")]``; empty when all of them can.
    A release profile is named only where its runtime's range is not
    (``("openvino:2023.3", "ScatterElements")``).
    """
    if not ops:  # (most rewrites add no loop or sequence op: asked once per map)
        return []
    found = [(r.name, r.rejects(ops)[0]) for r in _MEASURED if r.rejects(ops)]
    named = {name for name, _ in found}
    for release in RELEASE_PROFILES.values():
        if release.rejects(ops) and release.name.partition(":")[0] not in named:
            found.append((release.name, release.rejects(ops)[0]))
    return found


def rejecting(ops: set[str]) -> list[str]:
    """:func:`rejections` as the summary says them: ``["tract (Loop)", "tvm (Loop)"]``."""
    return spelled(rejections(ops))
