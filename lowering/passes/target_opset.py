"""The pass: plan every node, then convert them all, or change nothing."""

from __future__ import annotations

import collections
import functools
import logging

import onnx_ir as ir

from lowering.analysis.type_inference import TypeOracle
from lowering.errors import LoweringError
from lowering.irutils.collector import collector_paused
from lowering.irutils.dead_code import remove_unread
from lowering.irutils.op_facts import is_onnx_domain
from lowering.irutils.scopes import iter_scopes
from lowering.opset import schemas
from lowering.opset.plan import DEAD_CHAIN_OPS, Plan, plan_node

MIN_OPSET = schemas.MIN_OPSET
_LOG = logging.getLogger(__name__)


class TargetOpsetPass(ir.passes.InPlacePass):
    """Convert every default-domain node to opset ``target`` and declare it.

    Each node is relabelled (an allowlisted pair whose types fit), adapted
    (a registered adapter) or expanded (ONNX's function body for its op), and
    the result converted again until it is at ``target``. Every node is
    planned and checked first: if one blocks, :class:`LoweringError` names
    each blocking op with its node, graph and the lowest opset it needs, and
    the model is unchanged.

    Attributes:
        adapted: adapter labels applied, with how many nodes each.
        expanded: ops expanded into their function bodies, with counts.
    """

    def __init__(self, target: int) -> None:
        super().__init__()
        if target < MIN_OPSET:
            raise ValueError(f"the target opset must be at least {MIN_OPSET}, not {target}")
        if target > schemas.LATEST:
            raise ValueError(
                f"the target opset must be at most {schemas.LATEST} (this onnx), not {target}"
            )
        self.target = target
        self.adapted: collections.Counter[str] = collections.Counter()
        self.expanded: collections.Counter[str] = collections.Counter()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        with collector_paused():
            return self._call(model)

    def _call(self, model: ir.Model) -> ir.passes.PassResult:
        plans = plan_model(model, self.target)
        blockers = [p.blocker for p in plans if p.blocker is not None]
        if blockers:
            raise LoweringError(blocked_message(self.target, blockers))
        self.adapted.clear()
        self.expanded.clear()
        replaced: dict[ir.Value, ir.Value] = {}
        maybe_dead: set[ir.Value] = set()
        for plan in plans:
            self.adapted.update(plan.adapted)
            self.expanded.update(plan.expanded)
            plan.commit(replaced, maybe_dead)
        for value in maybe_dead:
            remove_unread(value, DEAD_CHAIN_OPS)
        for line in self.summary():
            _LOG.info("opset %d: %s", self.target, line)
        modified = any(p.sandbox is not None for p in plans)
        for imports in _opset_tables(model):
            key = "" if "" in imports else "ai.onnx" if "ai.onnx" in imports else None
            if key is not None and imports[key] != self.target:
                imports[key] = self.target
                modified = True
        return ir.passes.PassResult(model, modified=modified)

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


def blocked_message(target: int, blockers: list) -> str:
    """One line: each blocking op, its first node and graph, the lowest opset it needs."""
    by_op: dict[tuple[str, int], list] = collections.defaultdict(list)
    for blocker in blockers:
        by_op[(blocker.op, blocker.needs)].append(blocker)
    parts = []
    for (_, _), group in sorted(by_op.items(), key=lambda item: (-item[0][1], item[0][0])):
        first = group[0]
        more = f" (and {len(group) - 1} more)" if len(group) > 1 else ""
        parts.append(f"{first}{more}")
    return f"the model cannot declare opset {target}: " + "; ".join(parts)


def lowest_opset(model: ir.Model) -> int | None:
    """The lowest default-domain opset (at least 11) the model could declare."""
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
                functools.partial(types.twin, node, owner),
            )
            if plan.blocker is not None or plan.sandbox is not None:
                plans.append(plan)
    return plans


class _Types:
    """ONNX shape inference for the checks, run only if a node lacks types."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._oracle: TypeOracle | None = None

    def twin(self, node: ir.Node, owner) -> ir.Node | None:
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        if all(v.type is not None and v.shape is not None for v in values):
            return None
        if self._oracle is None:
            self._oracle = TypeOracle(self._model, list(self._model.functions.values()))
        return self._oracle.twin(node, owner)


def _opset_tables(model: ir.Model) -> list[dict[str, int]]:
    return [model.opset_imports, *(f.opset_imports for f in model.functions.values())]


def _current_opset(model: ir.Model) -> int | None:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
