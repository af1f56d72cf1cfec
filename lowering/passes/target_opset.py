"""The pass: plan every node, then convert them all, or change nothing."""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof, prove, prove_model
from lowering.defaults import MIN_OPSET
from lowering.errors import LoweringError
from lowering.irutils.constants import SharedConstants
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.identities import bypass_identities
from lowering.irutils.naming import name_fresh
from lowering.irutils.op_facts import is_onnx_domain, is_onnx_op
from lowering.irutils.pins import apply_pin, plan_pins, read_producers
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.snapshot import adopt
from lowering.irutils.static_values import FOLDABLE_OPS
from lowering.irutils.walk import model_nodes
from lowering.opset import schemas
from lowering.opset.library import LibraryRefusal, needs_library, up_to_min_opset
from lowering.opset.lowest import planned_on_representatives
from lowering.opset.plan import Blocker, Plan, plan_node
from lowering.options import check_target_opset
from lowering.rewrites import Conversion, LoweringResult

__all__ = ["MIN_OPSET", "TargetOpsetPass", "TargetOpsetResult", "lowest_opset"]
_LOG = logging.getLogger(__name__)


class TargetOpsetPass(ir.passes.InPlacePass):
    """Convert every default-domain node to opset ``target`` and declare it.

    Each node is relabelled (an allowlisted pair whose types fit), adapted
    (a registered adapter) or expanded (ONNX's function body for its op), and
    the result converted again until it is at ``target``. Every node is
    planned and checked first: if one blocks, :class:`LoweringError` names
    each blocking op with its node, graph and the lowest opset it needs, and
    the model is unchanged.

    Returns a :class:`TargetOpsetResult`.
    """

    def __init__(self, target: int) -> None:
        super().__init__()
        checked = check_target_opset(target)
        assert checked is not None, "check_target_opset refuses None as well"
        self.target = checked

    def call(self, model: ir.Model) -> TargetOpsetResult:
        original = model
        upgraded = needs_library(model, self.target)
        if upgraded:
            # Below 11 the library goes up (lowering/opset/library.py), on a
            # copy: a refusal here or below leaves ``original`` as it was.
            model = _up_by_library(model, self.target)
        plans = plan_model(model, self.target)
        _refuse_blockers(plans, self.target)
        result = TargetOpsetResult(original, modified=upgraded)
        if upgraded:
            result.adapted[f"onnx.version_converter to opset {MIN_OPSET}"] += 1
        _commit(model, plans, self.target, result)
        for line in result.summary():
            _LOG.info("opset %d: %s", self.target, line)
        converted = any(p.sandbox is not None or p.guard is not None for p in plans)
        declared = _declare(model, self.target)
        result.modified = upgraded or converted or declared
        if result.expanded or result.adapted:  # relabelling alone makes no new values
            name_fresh(model)
        if model is not original:
            adopt(original, model)
        result.conversions = _conversions(result)
        return result

    def ensures(self, model: ir.Model) -> None:
        for imports in _opset_tables(model):
            for key in ("", "ai.onnx"):
                if imports.get(key, self.target) != self.target:
                    raise ir.passes.PostconditionError(
                        f"the model still imports opset {imports[key]}, not {self.target}"
                    )
        for scope in iter_scopes(model):
            for node in scope.owner:
                if (
                    is_onnx_domain(node.domain)
                    and schemas.schema(node.op_type, self.target) is None
                ):
                    raise ir.passes.PostconditionError(
                        f"{node.op_type} (node {node.name!r} in {scope.description}) "
                        f"is not an op of opset {self.target}"
                    )


def _refuse_blockers(plans: list[Plan], target: int) -> None:
    """Raise, naming every blocking node, if any plan blocks: nothing is changed yet."""
    blockers = [p.blocker for p in plans if p.blocker is not None]
    if blockers:
        raise LoweringError(blocked_message(target, blockers), details=blocked_details(blockers))


def _commit(model: ir.Model, plans: list[Plan], target: int, result: TargetOpsetResult) -> None:
    """Commit every plan, then tidy what the conversion wrote: pins where ONNX's inference
    sizes a read value wrong, its own Identities bypassed, values it left unread removed."""
    replaced: dict[ir.Value, ir.Value] = {}
    maybe_dead: set[ir.Value] = set()
    constants = SharedConstants()  # equal small constants shared, for this run only
    # The model's own Identities stay; the conversion's go where the rule allows.
    theirs = {node for node in model_nodes(model) if is_onnx_op(node, "Identity")}
    before = set(model_nodes(model))
    for plan in plans:
        result.adapted.update(plan.adapted)
        result.expanded.update(plan.expanded)
        plan.commit(replaced, maybe_dead, constants)
    # What the conversion wrote meets ONNX's inference: a node it reads
    # that ONNX sizes wrong is pinned where its shape is computed.
    written = [node for node in model_nodes(model) if node not in before]
    read = read_producers(written)
    proof = Proof()
    for graph in dict.fromkeys(node.graph for node in read if node.graph is not None):
        prove(graph, target, proof)
    for pin in plan_pins([(node, target, None) for node in read], proof):
        apply_pin(pin, model.graph)
    bypass_identities(
        [n for n in model_nodes(model) if is_onnx_op(n, "Identity") and n not in theirs]
    )
    for value in maybe_dead:
        remove_unread(value, FOLDABLE_OPS)


def _conversions(result: TargetOpsetResult) -> list[Conversion]:
    """The counters as typed rewrites: the expanded ops, then the adapters."""
    return [
        *(Conversion("expanded", op, count) for op, count in sorted(result.expanded.items())),
        *(Conversion("adapted", op, count) for op, count in sorted(result.adapted.items())),
    ]


def _declare(model: ir.Model, target: int) -> bool:
    """Set the default domain's import to ``target`` in the model and its functions;
    whether one changed."""
    changed = False
    for imports in _opset_tables(model):
        key = "" if "" in imports else "ai.onnx" if "ai.onnx" in imports else None
        if key is not None and imports[key] != target:
            imports[key] = target
            changed = True
    return changed


@dataclasses.dataclass
class TargetOpsetResult(LoweringResult):
    """What :class:`TargetOpsetPass` did; ``rewrites`` has one entry per op and way.

    Attributes:
        adapted: adapter labels applied, with how many nodes each.
        expanded: ops expanded into their function bodies, with counts.
    """

    adapted: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    expanded: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def summary(self) -> list[str]:
        """One line per kind of change, for the CLI to print."""
        lines = []
        if self.expanded:
            done = ", ".join(f"{op} x{n}" for op, n in sorted(self.expanded.items()))
            lines.append(f"expanded into ONNX function bodies: {done}")
        if self.adapted:
            done = ", ".join(f"{label} x{n}" for label, n in sorted(self.adapted.items()))
            lines.append(f"adapted: {done}")
        return lines


#: In the one line, at most this many other nodes of a group are named; -v names them all.
NAMED_PER_GROUP = 5


def blocked_message(target: int, blockers: list) -> str:
    """One line naming every blocker: a count per op and opset, then each kind with its nodes.

    ::

        the model cannot declare opset 13 (GridSample x1 needs 16; Resize x2 needs 18):
        GridSample (node 'gs' in main graph 'g') needs opset 16: <reason>;
        Resize (node 'r1' in main graph 'g') needs opset 18: <reason> (also 'r2')

    (one line, wrapped here). Blockers of one op, opset and reason are one
    kind: its first node is written out in full (op, node, graph, reason),
    the others by name, up to :data:`NAMED_PER_GROUP`.
    :func:`blocked_details` has one line per blocker, for ``-v``.
    """
    counts: collections.Counter[tuple[str, int, bool]] = collections.Counter(
        (b.op, b.needs, b.going_up) for b in blockers
    )
    unknown = {(b.op, b.needs) for b in blockers if b.no_such_op}  # no opset it "needs"
    order = sorted(counts, key=lambda key: (-key[1], key[0]))
    summary = "; ".join(
        f"{op} x{counts[op, needs, up]} "
        + (
            f"is not an ONNX op at opset {needs}"
            if (op, needs) in unknown
            else f"{'cannot go up to' if up else 'needs'} {needs}"
        )
        for op, needs, up in order
    )
    kinds: dict[tuple[str, int, bool, str], list] = collections.defaultdict(list)
    for blocker in blockers:
        kinds[(blocker.op, blocker.needs, blocker.going_up, blocker.reason)].append(blocker)
    parts = []
    for key in sorted(kinds, key=lambda key: (-key[1], key[0])):
        first, *others = kinds[key]
        text = str(first)
        if others:
            named = [_other(first, b) for b in others[:NAMED_PER_GROUP]]
            rest = len(others) - len(named)
            if rest:
                named.append(f"{rest} other{'s' if rest > 1 else ''} (-v names every node)")
            text += f" (also {', '.join(named)})"
        parts.append(text)
    return f"the model cannot declare opset {target} ({summary}): " + "; ".join(parts)


def blocked_details(blockers: list) -> list[str]:
    """Every blocker on a line of its own, in the model's order: what ``-v`` prints."""
    return [f"  blocks: {b}" for b in blockers]


def _other(first, blocker) -> str:
    if blocker.graph == first.graph:
        return repr(blocker.node)
    return f"{blocker.node!r} in {blocker.graph}"


def _up_by_library(model: ir.Model, target: int) -> ir.Model:
    """``model`` taken to opset 11 by onnx.version_converter, as a copy; refusals as blockers."""
    source = _current_opset(model)
    try:
        return up_to_min_opset(model)
    except LibraryRefusal as refusal:
        nodes = [r for r in refusal.refused if r.op]
        if not nodes:
            raise LoweringError(
                f"the model cannot declare opset {target}: going up from opset {source} "
                f"to {MIN_OPSET}, {refusal.refused[0].reason}",
                details=refusal.details,
            ) from None
        blockers = [Blocker(r.op, r.node, r.graph, target, r.reason, True) for r in nodes]
        raise LoweringError(
            blocked_message(target, blockers),
            details=blocked_details(blockers) + refusal.details,
        ) from None


def lowest_opset(model: ir.Model) -> int | None:
    """The lowest default-domain opset (at least 11) the model could declare, planned
    on one node of each kind (:mod:`lowering.opset.lowest`)."""
    return planned_on_representatives(model, _lowest_opset)


def _lowest_opset(model: ir.Model) -> int | None:
    current = _current_opset(model)
    if current is None:
        return None
    types = _Types(model)
    for target in range(MIN_OPSET, current + 1):
        if not any(p.blocker for p in plan_model(model, target, types)):
            return target
    return current


def plan_model(model: ir.Model, target: int, types: _Types | None = None) -> list[Plan]:
    """A plan for every default-domain node of every scope; nothing is changed."""
    types = types or _Types(model)
    plans = []
    for scope in iter_scopes(model):
        owner = scope.owner
        imports = owner.opset_imports if isinstance(owner, ir.Function) else model.opset_imports
        current = imports.get("", imports.get("ai.onnx"))
        if current is None:
            continue
        for node in owner:
            if not is_onnx_domain(node.domain):
                continue
            plan = plan_node(
                node,
                current,
                target,
                scope.description,
                functools.partial(types.typed_copy, node),
            )
            if plan.blocker is not None or plan.sandbox is not None or plan.guard is not None:
                plans.append(plan)
    return plans


class _Types:
    """The types of the values a node leaves untyped, for the checks: the one
    shape analysis, run over the model only if a node lacks types."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._proof: Proof | None = None

    def typed_copy(self, node: ir.Node) -> ir.Node | None:
        """A detached copy of ``node`` whose values have the types proven of
        ``node``'s (None where ``node`` declares them all)."""
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        if all(v.type is not None and v.shape is not None for v in values):
            return None
        if self._proof is None:
            self._proof = prove_model(self._model, fill=True)
        proof = self._proof

        def typed(value: ir.Value | None) -> ir.Value | None:
            if value is None:
                return None
            got = proof.typed(value)
            return ir.Value(name=value.name, type=got and got[0], shape=got and got[1])

        copy = ir.Node(
            node.domain,
            node.op_type,
            [typed(v) for v in node.inputs],
            [a for a in node.attributes.values() if a.type not in _GRAPHS],
            outputs=[typed(v) for v in node.outputs],  # type: ignore[misc]
            version=node.version,
            name=node.name,
        )
        return copy


_GRAPHS = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _opset_tables(model: ir.Model) -> list[dict[str, int]]:
    return [model.opset_imports, *(f.opset_imports for f in model.functions.values())]


def _current_opset(model: ir.Model) -> int | None:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
