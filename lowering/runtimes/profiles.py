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
venvs of their own). ``--runtime NAME:RELEASE`` names one release: one
that :data:`RELEASE_PROFILES` covers gets that profile (``openvino:2023.3``,
older than the ``openvino`` range; ``onnxruntime:1.12-1.31``, inside its
range, for what those releases get wrong), any other the range covers the
runtime's profile, and otherwise an error. The summary names every
profile, release profiles included, that rejects a map's form.

``generic`` lacks what any of them lacks: output for it runs in all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import onnx_ir as ir

from lowering.irutils.op_facts import LOOP_OPS, SEQUENCE_OPS, is_onnx_domain
from lowering.irutils.scopes import find_nodes


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
            those that reject it. An op is named as :func:`op_forms` names it
            (``ScatterElements<reduction=max>``: with that reduction only).
        passed_through: From which release on it refuses, or computes wrongly, a
            Loop or Scan body that returns one of its inputs as an output, and how
            (None if none): such outputs get a copy (:func:`passes_through_wrong`,
            :mod:`lowering.passes.copy_passed_through`).
        empty_starts: From which release on it refuses, or computes wrongly, a Loop
            or Scan that carries an empty constant (a shape with a 0) in from the
            start, and how (None if none): each such start becomes a
            ``ConstantOfShape`` (:func:`empty_starts_wrong`,
            :mod:`lowering.passes.fill_empty_starts`).
        oldest: The oldest release the profile covers ("2024.0": that and later).
        newest: The newest it covers, for a release profile ("" for no end).
        measured: The releases it was measured on.
        constant_shorthands: It reads a Constant only in its ``value`` form and a
            Conv's bias only as a constant: :class:`~lowering.passes.constant_form.ConstantValueFormPass`
            runs for it, and for no other.
    """

    name: str
    lacks: frozenset[str]
    one_if_per_graph: bool = False
    miscomputes: tuple[tuple[str, str], ...] = ()
    passed_through: tuple[str, str] | None = None
    empty_starts: tuple[str, str] | None = None
    oldest: str = ""
    newest: str = ""
    measured: tuple[str, ...] = ()
    constant_shorthands: bool = False

    @property
    def releases(self) -> str:
        """The range it covers, as the docs say it: "2024.0 and later (measured on 2024.6, ...)"."""
        if not self.oldest:
            return "every runtime it names"
        span = f"{self.oldest} to {self.newest}" if self.newest else f"{self.oldest} and later"
        return f"{span} (measured on {', '.join(self.measured)})"

    def covers(self, release: str) -> bool:
        key = release_key(release)
        if self.oldest and key < release_key(self.oldest):
            return False
        if not self.newest:
            return True
        newest = release_key(self.newest)  # 1.31 covers 1.31.1
        return key[: len(newest)] <= newest

    def rejects(self, ops: set[str] | frozenset[str]) -> list[str]:
        """Which of ``ops`` it lacks or gets wrong, in a stable order."""
        wrong = {op for op, _ in self.miscomputes}
        return sorted(set(ops) & (self.lacks | wrong))

    def miscomputed(self, ops: Iterable[str]) -> str | None:
        """How it computes the first of ``ops`` wrongly, as a reason; None if none."""
        wrong = dict(self.miscomputes)
        found = next((op for op in ops if op in wrong), None)
        return None if found is None else f"{self.name} {wrong[found]}"

    def passes_through_wrong(self) -> str | None:
        """How the releases this profile names get a body that returns an input
        wrong, as a reason; None if they all run it right (a profile named for
        one release, ``openvino:2024.6``, older than the fault's first)."""
        return self._from_release(self.passed_through)

    def empty_starts_wrong(self) -> str | None:
        """How the releases this profile names get a loop that carries an empty
        constant in, as a reason; None if they all run it right (as
        :meth:`passes_through_wrong`)."""
        return self._from_release(self.empty_starts)

    def _from_release(self, fault: tuple[str, str] | None) -> str | None:
        """A fault's ``how``, said by this profile, if the newest release it names
        is the fault's first or later; None otherwise."""
        if fault is None:
            return None
        first, how = fault
        release = self.name.partition(":")[2].rpartition("-")[2] or self.newest
        if _is_release(release) and release_key(release) < release_key(first):
            return None
        return f"{self.name} {how}"

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
    # elements of different shapes gave a wrong result (tests/test_runtime_option.py);
    # it crashed compiling the SequenceInsert guard, an If returning a sequence
    # (tests/test_sequence_chains.py). The 2024 LTS (2024.6) and 2025.4 run the same
    # forms; none before 2026.4 takes ScatterND's reduction, which the lowering does not write.
    # A Loop or Scan body returning one of its inputs: 2026.4 refuses it, and runs it
    # as a copy. 2025.4 and 2024.6 run it, wrongly for a carried value returned in
    # another's place or a Scan's element, but right, unlike a copy, for a value
    # carried on in its own place when the loop makes no trip: they get no copies
    # (tests/test_passed_through.py).
    # An empty constant (an initializer or a Constant, float or int64, [0], [0, 2] or
    # [2, 0]) carried into a Loop or Scan: 2026.4 reads it as a scalar, refusing a body
    # that reads it ("Accessing out-of-range dimension"; a Concat along axis 1:
    # "is_axis_valid") and returning one passed on as a scalar 0, at 0, 1 and 3
    # trips; a ConstantOfShape of its shape it runs right. 2025.4 runs them all right.
    # 2024.6 gets the rank-1 ones wrong too, but crashes on several of them as
    # ConstantOfShape: it gets none (tests/test_empty_starts.py).
    Runtime(
        "openvino",
        _ALL_SEQUENCES,
        passed_through=(
            "2026.0",
            "refuses a Loop or Scan body that returns an input as an output (2026.4)",
        ),
        empty_starts=(
            "2026.0",
            (
                "reads an empty constant a Loop or Scan carries in as a scalar: it refuses "
                "a body that reads it, and returns one passed on as a scalar (2026.4)"
            ),
        ),
        oldest="2024.0",
        measured=("2024.6", "2025.4", "2026.4"),
    ),
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
        constant_shorthands=True,
    ),
    # TVM Relax 0.27: the frontend converts every sequence op, but no Loop or Scan.
    Runtime(
        "tvm", frozenset(LOOP_OPS), oldest="0.27", measured=("0.27",), constant_shorthands=True
    ),
    # tinygrad 0.14: no loop and no sequence op.
    Runtime("tinygrad", frozenset(LOOP_OPS) | _ALL_SEQUENCES, oldest="0.14", measured=("0.14.0",)),
    # IREE 3.13 (iree-import-onnx, llvm-cpu): a Loop only with a constant trip count and
    # no scan output, a Scan over a dynamic length gives its last row alone, sequence
    # ops only as SequenceConstruct read by SequenceAt; no ScatterElements with reduction
    # max or min (tests/test_releases.py, scripts/runtime_probe.py).
    Runtime(
        "iree",
        frozenset(LOOP_OPS) | _ALL_SEQUENCES,
        miscomputes=(
            ("ScatterElements<reduction=max>", "compiles no ScatterElements with reduction max"),
            ("ScatterElements<reduction=min>", "compiles no ScatterElements with reduction min"),
        ),
        oldest="3.13",
        measured=("3.13.0",),
    ),
)

_ONNXRUNTIME, _OPENVINO = _MEASURED[0], _MEASURED[1]

#: What onnxruntime 1.12 to 1.31 do with an empty stack (a map over no element),
#: which a vectorized form hands each op of the body: measured in 1.12, 1.14,
#: 1.16, 1.18, 1.20, 1.24, 1.28 and 1.31 (tests/test_releases.py), fixed by 1.32.
EMPTY_STACK = {
    "MatMul": "fails on an empty stack beside a lower-rank operand (n = 0; 1.12-1.31)",
    "TopK": "crashes on an empty stack (n = 0; 1.12-1.28)",
    "OneHot": "crashes on an empty stack (n = 0; 1.12-1.24)",
    "Einsum": "crashes on an empty stack (n = 0; 1.12-1.24)",
}


def op_forms(node: ir.Node) -> tuple[str, ...]:
    """The names a profile may list ``node`` under: its op, and a scatter's with its
    reduction (``ScatterElements<reduction=max>``), which a runtime may take for some
    reductions only."""
    if node.op_type.startswith("Scatter"):
        reduction = node.attributes.get_string("reduction", "none")
        if reduction != "none":
            return (node.op_type, f"{node.op_type}<reduction={reduction}>")
    return (node.op_type,)


#: The form name of a Loop that grows a carried tensor by a Concat of pieces
#: whose size along the axis may differ between iterations (an accumulator's
#: ragged concat form, :mod:`lowering.loops`), and how OpenVINO before 2026
#: computes it.
RAGGED_CONCAT = "Loop<ragged Concat>"
RAGGED_CONCAT_LOST = (
    RAGGED_CONCAT,
    (
        "keeps only the last piece of a Loop's carried Concat whose pieces differ in "
        "size (2023.3, 2024.6, 2025.4)"
    ),
)


def _release(base: Runtime, oldest: str, newest: str, runtime: str = "", **changes) -> Runtime:
    named = runtime or base.name
    name = f"{named}:{oldest}" if newest in ("", oldest) else f"{named}:{oldest}-{newest}"
    return dataclasses.replace(base, name=name, oldest=oldest, newest=newest, **changes)


#: Releases that a profile of their own covers, inside their runtime's range or
#: older than it: ``--runtime NAME:RELEASE`` for one of them gets it.
RELEASE_PROFILES: dict[str, Runtime] = {
    r.name: r
    for r in (
        # OpenVINO 2023.3 (before the 2024 LTS): the same, and it refuses the segment
        # reductions' ScatterElements (tests/test_releases.py), so those get a Loop.
        _release(
            _OPENVINO,
            "2023.3",
            "2023.3",
            miscomputes=(
                (
                    "ScatterElements",
                    "refuses a ScatterElements with a reduction (2023.3)",
                ),
                RAGGED_CONCAT_LOST,
            ),
            measured=("2023.3",),
        ),
        # OpenVINO before 2026: a Loop growing a carried tensor by a Concat of pieces
        # that differ in size keeps only the last (tests/test_releases.py).
        _release(
            _OPENVINO,
            "2024.0",
            "2025.4",
            miscomputes=(RAGGED_CONCAT_LOST,),
            measured=("2024.6", "2025.4"),
        ),
        # onnxruntime before 1.32: the same, and the ops of EMPTY_STACK fail on an
        # empty stack, so a map whose vectorized form holds one gets a loop.
        _release(
            _ONNXRUNTIME,
            "1.12",
            "1.31",
            miscomputes=tuple(EMPTY_STACK.items()),
            measured=("1.12", "1.14", "1.16", "1.18", "1.20", "1.24", "1.28", "1.31"),
        ),
        # onnxruntime-openvino 1.24's OpenVINO execution provider, with CPU fallback
        # off: OpenVINO's ops, but it fails to load a Loop that reads an outer value
        # ("node not found in graph cache") and leaves a Scan with an If to the CPU
        # (tests/test_releases.py): no loop, as for tvm.
        _release(
            _OPENVINO,
            "1.24",
            "",
            runtime="onnxruntime-openvino",
            lacks=_OPENVINO.lacks | frozenset(LOOP_OPS),
            passed_through=None,
            empty_starts=None,
            measured=("1.24.1",),
        ),
    )
}

RUNTIMES: dict[str, Runtime] = {r.name: r for r in _MEASURED}
# Not the release profiles: what an old release gets wrong is for its own --runtime.
RUNTIMES["generic"] = Runtime(
    "generic",
    frozenset().union(*(r.lacks for r in _MEASURED)),
    one_if_per_graph=any(r.one_if_per_graph for r in _MEASURED),
    constant_shorthands=any(r.constant_shorthands for r in _MEASURED),
    miscomputes=tuple((op, f"({r.name}) {how}") for r in _MEASURED for op, how in r.miscomputes),
    passed_through=next(
        ((p[0], f"({r.name}) {p[1]}") for r in _MEASURED if (p := r.passed_through) is not None),
        None,
    ),
    empty_starts=next(
        ((e[0], f"({r.name}) {e[1]}") for r in _MEASURED if (e := r.empty_starts) is not None),
        None,
    ),
)

#: The ops that some profile refuses or gets wrong as a vectorized form writes
#: them (beside the loop and sequence ops): a vectorized map that holds one names
#: who rejects it.
REFUSED_OPS = frozenset(
    op for r in (*_MEASURED, *RELEASE_PROFILES.values()) for op, _ in r.miscomputes
)


def profile(name: str) -> Runtime:
    """The profile ``--runtime NAME`` or ``NAME:RELEASE`` means; ValueError if none.

    A release that one of :data:`RELEASE_PROFILES` covers gets it, any other
    that the runtime's range covers the runtime's, under the name given.
    """
    if name in RUNTIMES:
        return RUNTIMES[name]
    if name in RELEASE_PROFILES:
        return RELEASE_PROFILES[name]
    base, _, release = name.partition(":")
    own = [r for r in RELEASE_PROFILES.values() if r.name.partition(":")[0] == base]
    runtime = RUNTIMES.get(base) if base != "generic" else None
    candidates = [*own, *([runtime] if runtime is not None else [])]
    if not candidates or not _is_release(release):
        raise ValueError(
            f"be one of {', '.join(RUNTIMES)}, or one of them but generic with a release "
            "(openvino:2024.6), or onnxruntime-openvino:RELEASE"
        )
    for candidate in candidates:
        if candidate.covers(release):
            return dataclasses.replace(candidate, name=name)
    covered = "; ".join(f"{r.name} covers {r.releases}" for r in candidates)
    raise ValueError(f"name a release of {base} that a profile covers ({covered})")


def _is_release(text: str) -> bool:
    return bool(text) and all(part.isdigit() for part in text.split("."))


def release_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def left_unsupported(model: ir.Model, runtime: str) -> str | None:
    """The ops ``runtime`` lacks that ``model`` still holds, said in one phrase; None if none.

    Such as ``SequenceInsert x3 (first: node 'ins' in main graph 'g'), SequenceLength x1
    (first: ...)``: whether the lowering wrote them or they came with the input,
    the runtime will refuse the model (``--runtime``'s check before writing).
    """
    lacks = profile(runtime).lacks
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
    A release profile is named for what it gets wrong (its ``miscomputes``:
    ``("openvino:2023.3", "ScatterElements")``), where its runtime's range is
    not named; the loop and sequence ops its runtime lacks name the runtime.
    """
    if not ops:  # (most rewrites add no loop or sequence op: asked once per map)
        return []
    found = [(r.name, r.rejects(ops)[0]) for r in _MEASURED if r.rejects(ops)]
    named = {name for name, _ in found}
    for release in RELEASE_PROFILES.values():
        wrong = sorted(set(ops) & {op for op, _ in release.miscomputes})
        if wrong and release.name.partition(":")[0] not in named:
            found.append((release.name, wrong[0]))
    return found
