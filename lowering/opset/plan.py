"""Plan the conversion of one node, without touching the model.

A node whose every step is a relabel needs nothing but the opset it is
declared under, so it is only checked. A node that needs an adapter or an
expansion is converted in a *sandbox*: a detached graph holding a copy of the
node, whose inputs are placeholders standing for the real inputs::

    real model                sandbox (detached)
    ----------                -------------------------------
    a, b  --> [Op-18] --> y   pa, pb --> [Op-18 copy] --> y'
                                   (adapters and expansions rewrite here)
                              pa, pb --> [Transpose] [Op-13] ... --> y'

Adapters and expansions work there with the usual onnx_ir calls. If every
node of the sandbox reaches the target, :meth:`Plan.commit` moves the
sandbox's nodes into the model in place of the original node, the
placeholders replaced by the real inputs; otherwise the plan carries the
blocker and the model was never touched. This is what makes
:class:`lowering.opset.TargetOpsetPass` atomic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx.defs
import onnx_ir as ir

from lowering.irutils.constants import SharedConstants
from lowering.irutils.identities import bypass_identities
from lowering.irutils.naming import adopt_name, fresh
from lowering.irutils.op_facts import SHAPE_READING_OPS, is_onnx_op
from lowering.irutils.static_values import (
    MAX_ELEMENTS,
    evaluate,
    evaluate_node,
    small_constant,
)
from lowering.irutils.walk import has_subgraphs
from lowering.opset import adapters as _registered  # noqa: F401  (registers the adapters)
from lowering.opset import expand, schemas
from lowering.opset.insert_guard import InsertGuard, insert_guard
from lowering.opset.registry import ADAPTERS, EXPANSIONS, Adapter, Decline
from lowering.runtimes.ort_kernels import node_unsupported, runs_as_function


@dataclasses.dataclass
class Blocker:
    """Why a node cannot reach the target, and the lowest opset it needs."""

    op: str
    node: str
    graph: str
    needs: int
    reason: str

    going_up: bool = False

    @property
    def no_such_op(self) -> bool:
        """The op is no ONNX op at the opset the model declares (a custom op in the
        default domain): no opset is what it "needs" (the message only)."""
        return self.reason.startswith(f"{self.op} is not an ONNX op at opset")

    def __str__(self) -> str:
        where = f"{self.op} (node {self.node!r} in {self.graph})"
        if self.no_such_op:
            return f"{where}: {self.reason}"
        if self.going_up:
            return f"{where} cannot go up to opset {self.needs}: {self.reason}"
        return f"{where} needs opset {self.needs}: {self.reason}"


@dataclasses.dataclass
class Plan:
    """What converting one node takes: nothing, a sandbox to commit, or a blocker."""

    node: ir.Node
    blocker: Blocker | None = None
    sandbox: Sandbox | None = None
    guard: InsertGuard | None = None
    adapted: list[str] = dataclasses.field(default_factory=list)
    expanded: list[str] = dataclasses.field(default_factory=list)
    # Whether onnxruntime runs the original node: then every node the plan
    # writes must run there too (see final_form_problem).
    original_runs: bool = True
    # The original node's schema version.
    since: int = 0
    # Whether onnxruntime runs the original only by inlining ONNX's body of it.
    original_inlined: bool = False

    def commit(
        self,
        replaced: dict[ir.Value, ir.Value],
        maybe_dead: set[ir.Value],
        shared: SharedConstants,
    ) -> None:
        """Apply the plan.

        ``replaced`` maps outputs of nodes committed earlier to their new
        values; the inputs the node read are added to ``maybe_dead``.
        """
        if self.sandbox is not None:
            self.sandbox.commit(self.node, replaced, maybe_dead, shared)
        if self.guard is not None:
            self.guard.unguard(maybe_dead)


class Sandbox:
    """A detached copy of one node, with placeholder inputs, to convert freely."""

    def __init__(self, node: ir.Node, version: int, typed: ir.Node | None) -> None:
        self.real: dict[ir.Value, ir.Value] = {}
        # Whether the model reads each of the node's outputs (a node or a graph
        # output does): in the sandbox every output is a graph output.
        self.read = [bool(v.uses()) or v.is_graph_output() for v in node.outputs]
        placeholders: dict[ir.Value, ir.Value] = {}
        inputs: list[ir.Value | None] = []
        for index, value in enumerate(node.inputs):
            if value is None:
                inputs.append(None)
                continue
            if value not in placeholders:
                placeholder = ir.Value(name=f"__input{index}")
                _copy_type(placeholder, value, typed.inputs[index] if typed else None)
                placeholders[value] = placeholder
                self.real[placeholder] = value
            inputs.append(placeholders[value])
        attributes = [_copy_attribute(a) for a in node.attributes.values()]
        copy = ir.Node(
            "",
            node.op_type,
            inputs,
            attributes,
            num_outputs=len(node.outputs),
            version=version,
            name=node.name,
        )
        for index, (mine, theirs) in enumerate(zip(copy.outputs, node.outputs)):
            _copy_type(mine, theirs, typed.outputs[index] if typed else None)
            mine.name = f"__output{index}"
        self.copy = copy
        self.graph = ir.Graph(
            list(placeholders.values()), list(copy.outputs), nodes=[copy], name="sandbox"
        )

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        """The constant behind a sandbox value: a real input's, or a Constant's made here.

        torch.onnx writes axes and shapes as small computations rather than
        constants (``Reshape(Constant[1], Constant[-1])``, ``Concat(..)``): an
        adapter reads them by the one constant evaluator, declared shapes
        included (``Shape`` of a static shape).
        """
        if value is None:
            return None
        return evaluate(self.real.get(value, value), shapes=True)

    def tidy(self, target: int) -> None:
        """Fold what the conversion made constant, and drop its Identities and dead nodes.

        Expansions compute their constants at run time (Gelu's body:
        ``Sqrt(CastLike(Constant 2, X))``, and CastLike below 15 is a Cast)::

            Constant 2 -> Cast -> Sqrt -> Div(X, .)    -->    Constant 1.4142135 -> Div(X, .)

        Each node of the sandbox whose inputs are all constants is replaced
        by a Constant of its value, by the rules of the one constant
        evaluator (:mod:`lowering.irutils.static_values`: exact casts, IEEE
        arithmetic), so what the model computes does not change; Shape and
        Size are not read from declared dims here. An Identity the
        conversion made is bypassed where :mod:`lowering.irutils.identities`
        lets it go, and what nothing reads is removed.
        """
        graph = self.graph
        known: dict[ir.Value, np.ndarray] = {}
        for node in list(graph):
            if node.op_type == "Constant":
                value = _tensor_of(node)
                if value is not None:
                    known[node.outputs[0]] = value
                continue
            result = self._fold(node, known)
            if result is None:
                continue
            constant = ir.Node(
                "", "Constant", [], [ir.AttrTensor("value", ir.Tensor(result))], version=target
            )
            constant.outputs[0].dtype = ir.DataType.from_numpy(result.dtype)
            constant.outputs[0].shape = ir.Shape(result.shape)
            graph.insert_before(node, constant)
            self._bypass(node, constant.outputs[0])
            known[constant.outputs[0]] = result
        # The sandbox's outputs are the node's: the one rule keeps an Identity
        # that makes one from a placeholder (a real input) or from another.
        bypass_identities([node for node in graph if is_onnx_op(node, "Identity")])
        for node in reversed(list(graph)):
            if all(not v.uses() and v not in graph.outputs for v in node.outputs):
                graph.remove(node, safe=True)

    def _fold(self, node: ir.Node, known: dict) -> np.ndarray | None:
        """``node``'s one output, where its inputs are all known and its type is kept."""
        if node.op_type in SHAPE_READING_OPS or len(node.outputs) != 1:
            return None
        values = [self._known(v, known) for v in node.inputs]
        if any(value is None for value in values):
            return None
        result = evaluate_node(node, values)
        output = node.outputs[0]
        if result is None or output.dtype not in (None, ir.DataType.from_numpy(result.dtype)):
            return None
        return result

    def _known(self, value: ir.Value | None, known: dict) -> np.ndarray | None:
        if value is None:
            return None
        if value in known:
            return known[value]
        real = self.real.get(value)
        return small_constant(real) if real is not None else None

    def _bypass(self, node: ir.Node, value: ir.Value) -> None:
        """Let ``value`` stand for ``node``'s only output everywhere; remove ``node``."""
        output = node.outputs[0]
        if value.type is None:
            value.type = output.type
        if value.shape is None and output.shape is not None:
            value.shape = output.shape
        output.replace_all_uses_with(value, replace_graph_outputs=True)
        self.graph.remove(node, safe=True)

    def commit(
        self,
        node: ir.Node,
        replaced: dict[ir.Value, ir.Value],
        maybe_dead: set[ir.Value],
        constants: SharedConstants,
    ) -> None:
        """Put the sandbox's nodes in place of ``node`` in its graph."""
        owner = node.graph
        assert owner is not None, "a planned node stays in its graph until its plan commits"
        shared = _share_constants(self.graph, owner, constants)
        outputs = self._own_outputs(node.version)
        new_nodes = list(self.graph)
        self.graph.remove(new_nodes)
        self.graph.outputs.clear()
        self.graph.inputs.clear()
        for placeholder, value in self.real.items():
            placeholder.replace_all_uses_with(_latest(value, replaced))
        _name_written(new_nodes, self.copy, node.name)
        for new_value, old_value in zip(outputs, node.outputs):
            if old_value.type is not None:
                new_value.type = old_value.type
            if old_value.shape is not None:
                new_value.shape = old_value.shape
        replaced.update(zip(node.outputs, outputs))
        names = [value.name for value in node.outputs]
        # The model's first constants of their value: at the top of the
        # graph, where every later node of every conversion can read them.
        constants.place(shared)
        ir.convenience.replace_nodes_and_values(
            owner, node, [node], new_nodes, list(node.outputs), outputs
        )
        # The values keep their names: graph outputs are the model's interface.
        for value, name in zip(outputs, names):
            adopt_name(value, name)
        # Inputs this node no longer reads may be dead now; the pass removes
        # their constant chains once every node is committed (each value is
        # then checked once, however many nodes share it).
        for value in self.real.values():
            maybe_dead.add(_latest(value, replaced))

    def _own_outputs(self, version: int | None) -> list[ir.Value]:
        """The sandbox's outputs, each made by a node of its own: an Identity where one
        is a real input or repeats another (a real graph output needs its own producer)."""
        outputs = list(self.graph.outputs)
        seen: set[ir.Value] = set()
        for index, value in enumerate(outputs):
            if value in self.real or value in seen:
                identity = ir.Node("", "Identity", [value], version=version)
                self.graph.append(identity)
                outputs[index] = identity.outputs[0]
                _copy_type(identity.outputs[0], value, None)
            seen.add(outputs[index])
        return outputs


def _latest(value: ir.Value, replaced: dict[ir.Value, ir.Value]) -> ir.Value:
    """What ``value`` became through the plans committed so far."""
    while value in replaced:
        value = replaced[value]
    return value


def _name_written(new_nodes: list[ir.Node], copy: ir.Node, name: str | None) -> None:
    """Fresh names for what the conversion wrote; the converted node keeps its own."""
    for new in new_nodes:
        new.version = None
        if new is copy and name:
            new.name = name
        else:
            fresh(new)
        for output in new.outputs:
            if output.name and output.name.startswith("__"):
                output.name = None
            fresh(output)


def _tensor_of(node: ir.Node) -> np.ndarray | None:
    """A small Constant's value (the sandbox's are ``value`` tensors: read directly)."""
    attr = node.attributes.get("value")
    if len(node.attributes) == 1 and attr is not None and attr.type == ir.AttributeType.TENSOR:
        tensor = attr.value
        return tensor.numpy() if tensor.size <= MAX_ELEMENTS else None
    return small_constant(node.outputs[0])


_MAX_SHARED = 64  # elements: the constants of expansions and adapters are small


def _share_constants(sandbox: ir.Graph, owner: ir.Graph, shared: SharedConstants) -> list[ir.Value]:
    """Let the sandbox's small Constants read an equal one of ``owner``'s, by ``shared``.

    Returns the values of the sandbox's Constants that become shared ones
    (moved out of the sandbox, for :meth:`SharedConstants.place` to put at
    the top of ``owner``).
    """
    first = []
    for node in list(sandbox):
        output = node.outputs[0] if node.op_type == "Constant" and node.outputs else None
        if output is None or output in sandbox.outputs:
            continue
        value = _tensor_of(node)
        if (
            value is None
            or value.size > _MAX_SHARED
            or value.dtype == object
            or output.dtype is None
        ):
            continue
        known = shared.share(owner, node, value)
        if known is not output:
            output.replace_all_uses_with(known)
            sandbox.remove(node, safe=True)
            continue
        sandbox.remove(node)  # its readers follow it into the model
        node.version = None
        fresh(node)
        fresh(output)
        first.append(output)
    return first


def _copy_type(mine: ir.Value, theirs: ir.Value, typed: ir.Value | None) -> None:
    for source in (theirs, typed):
        if source is None:
            continue
        if mine.type is None and source.type is not None:
            mine.type = source.type
        if mine.shape is None and source.shape is not None:
            mine.shape = ir.Shape(list(source.shape))


def _copy_attribute(attr: ir.Attr) -> ir.Attr:
    return ir.Attr(attr.name, attr.type, attr.value, ref_attr_name=attr.ref_attr_name)


class Rewriter:
    """What an adapter may do to the sandbox around the node it converts."""

    def __init__(self, sandbox: Sandbox, node: ir.Node, version: int, target: int) -> None:
        self.sandbox = sandbox
        self.node = node
        # The version this step converts to; new nodes are made at it.
        self.version = version
        self.target = target
        self.created: list[ir.Node] = []

    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        return self.sandbox.constant(value)

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: dict | None = None,
        *,
        version: int | None = None,
        after: bool = False,
    ) -> ir.Node:
        """A new node before (or after) the one being converted, at this step's version."""
        new = ir.Node(
            "",
            op_type,
            inputs,
            [_as_attribute(k, v) for k, v in (attributes or {}).items()],
            version=version or max(self.version, self.target),
        )
        if after:
            self.sandbox.graph.insert_after(self.node, new)
        else:
            self.sandbox.graph.insert_before(self.node, new)
        self.created.append(new)
        return new

    def const(self, array: np.ndarray) -> ir.Value:
        node = self.op("Constant", [], {"value": ir.tensor(np.asarray(array))})
        output = node.outputs[0]
        output.dtype = ir.DataType.from_numpy(np.asarray(array).dtype)
        output.shape = ir.Shape(np.asarray(array).shape)
        return output

    def is_read(self, value: ir.Value) -> bool:
        """Whether anything reads ``value``: a sandbox node, or the model for the node's outputs."""
        if value.uses():
            return True
        for index, output in enumerate(self.sandbox.graph.outputs):
            if output is value:
                return self.sandbox.read[index]
        return False

    def rank(self, value: ir.Value | None) -> int | None:
        return None if value is None or value.shape is None else len(value.shape)

    def static_shape(self, value: ir.Value | None) -> list[int] | None:
        if value is None or value.shape is None:
            return None
        dims = [d for d in value.shape if isinstance(d, int)]
        return dims if len(dims) == len(value.shape) else None

    def reroute(self, old: ir.Value, new: ir.Value) -> None:
        """Let everything that read ``old`` (node output of the sandbox) read ``new``."""
        old.replace_all_uses_with(new, replace_graph_outputs=True)
        if new.type is None and old.type is not None:
            new.type = old.type
        if new.shape is None and old.shape is not None:
            new.shape = old.shape

    def wrap_output(
        self,
        value: ir.Value,
        op_type: str,
        attributes: dict | None = None,
        extra_inputs: Sequence[ir.Value] = (),
        *,
        version: int | None = None,
    ) -> ir.Node:
        """Let ``op_type(value, *extra_inputs)`` stand for ``value`` wherever it was read."""
        uses = list(value.uses())
        new = self.op(op_type, [value, *extra_inputs], attributes, after=True, version=version)
        for use in uses:
            use.node.replace_input_with(use.idx, new.outputs[0])
        outputs = self.sandbox.graph.outputs
        for index, output in enumerate(outputs):
            if output is value:
                outputs[index] = new.outputs[0]
        new.outputs[0].type = value.type
        new.outputs[0].shape = value.shape
        value.shape = None
        return new

    def remove(self, node: ir.Node) -> None:
        self.sandbox.graph.remove(node, safe=True)


def _as_attribute(name: str, value) -> ir.Attr:
    if isinstance(value, ir.Attr):
        return ir.Attr(name, value.type, value.value)
    return ir.convenience.convert_attribute(name, value)


TypedCopy = Callable[[], "ir.Node | None"]


def plan_node(node: ir.Node, current: int, target: int, where: str, typed_copy: TypedCopy) -> Plan:
    """How ``node``, at opset ``current``, reaches opset ``target``."""
    op = node.op_type
    now = schemas.schema(op, current)
    name = node.name or "<unnamed>"

    def blocked(needs: int, reason: str) -> Plan:
        going_up = target > current
        return Plan(node, Blocker(op, name, where, target if going_up else needs, reason, going_up))

    if now is None:
        return blocked(
            current,
            f"{op} is not an ONNX op at opset {current}, the opset the model declares "
            "(a custom op needs a domain of its own)",
        )
    since = now.since_version
    then = schemas.schema(op, target)
    typed, runs, inlined = _how_original_runs(node, current, target, typed_copy)
    version, stuck = _relabelled(node, typed, since, then, target, runs)
    if not stuck and then is not None and then.since_version == version:
        return Plan(node)
    if has_subgraphs(node):
        guard = insert_guard(node) if target < 13 else None
        if guard is not None:
            plan = Plan(node, guard=guard)
            plan.adapted.append("If-13 -> the SequenceInsert guard's else branch")
            return plan
        # Nodes with subgraphs (If, Loop, Scan) only ever gained types.
        return blocked(version, stuck or f"{op}-{version} has no relabel to opset {target}")
    sandbox = Sandbox(node, since, typed_copy())
    plan = Plan(node, sandbox=sandbox, original_runs=runs, since=since, original_inlined=inlined)
    blocker = _convert(sandbox, target, plan)
    if blocker is not None:
        needs, reason = blocker
        return blocked(needs, reason)
    sandbox.tidy(target)
    return plan


def _how_original_runs(
    node: ir.Node, current: int, target: int, typed_copy: TypedCopy
) -> tuple[ir.Node | None, bool, bool]:
    """The typed node (None where the opset stays), whether onnxruntime runs it at
    ``current``, and whether only by inlining ONNX's body of it."""
    if target == current:
        return None, True, False
    typed = typed_copy() or node
    runs = ort_runs(typed, current)
    return typed, runs, node_unsupported(typed, current) is not None and runs


def _relabelled(
    node: ir.Node,
    typed: ir.Node | None,
    since: int,
    then: onnx.defs.OpSchema | None,
    target: int,
    runs: bool,
) -> tuple[int, str]:
    """A dry run of relabels, which change nothing in the node: the version they
    reach, and why they stop short of the target's schema ("" where they do not)."""
    op = node.op_type
    if then is not None and then.since_version == since:
        # The same schema: onnxruntime may still run it at one opset only
        # (Softsign-1 on doubles, as ONNX's body of it from opset 18).
        no_kernel = None if typed is None else _kernel_problem(typed, target, runs)
        return since, "" if no_kernel is None else f"{op}-{since}: {no_kernel}"
    version = since  # relabel after relabel while each step allows it and the types fit
    while then is None or then.since_version != version:
        step = schemas.next_step(op, version, target)
        if step is None or not step[0] or schemas.relabel_reason(op, *step) is None:
            break
        destination = step[0] if target < version else step[1]
        assert typed is not None, "the node is typed where its opset changes"
        dest_schema = schemas.schema(op, destination)
        assert dest_schema is not None, "next_step only names versions that exist"
        wrong = _relabel_problem(node, dest_schema, then, target, runs) or _relabel_problem(
            typed, dest_schema, then, target, runs
        )
        if wrong:
            return version, wrong
        version = destination
    return version, ""


def _convert(sandbox: Sandbox, target: int, plan: Plan) -> tuple[int, str] | None:
    """Convert every node of ``sandbox`` to ``target``; (needs, reason) if one cannot."""
    work = list(sandbox.graph)
    budget = 10_000  # expansions are finite; this guards against a cycle of adapters
    while work:
        budget -= 1
        if budget < 0:
            return (target, "conversion did not terminate")
        node = work.pop()
        if node.graph is None:
            continue
        result = _convert_node(sandbox, node, target, plan)
        if isinstance(result, tuple):
            return result
        work.extend(result)
    return None


@dataclasses.dataclass
class _Failed:
    """A step that neither relabelled nor adapted: why, and whether the target's
    final form is what blocked (then ONNX's body of the op may still do)."""

    reason: str
    final_blocks: bool = False


def _convert_node(
    sandbox: Sandbox, node: ir.Node, target: int, plan: Plan
) -> list[ir.Node] | tuple[int, str]:
    """One step for ``node``: the nodes to look at again, or (needs, reason)."""
    op = node.op_type
    version = node.version
    assert version is not None, "every sandbox node carries its opset version"
    now = schemas.schema(op, version)
    if now is None:
        return (version, f"{op} is not an ONNX op at opset {version}")
    since = now.since_version
    going_down = target < since
    outcome = _relabel_or_adapt(sandbox, node, since, target, plan)
    if not isinstance(outcome, _Failed):
        return outcome
    # Expanded where ONNX's body is what onnxruntime runs, or the final form blocks.
    if going_down or plan.original_inlined or outcome.final_blocks:
        expanded = _expand(sandbox, node, since, target, plan, outcome.reason)
        if expanded is not None:
            return expanded
    if since <= target:  # the final form blocks: the original's version is known to do
        return (max(plan.since, target + 1), outcome.reason)
    return (since if going_down else target, outcome.reason)


def _relabel_or_adapt(
    sandbox: Sandbox, node: ir.Node, since: int, target: int, plan: Plan
) -> list[ir.Node] | tuple[int, str] | _Failed:
    """``node`` written in its final form, or one step taken towards it."""
    op = node.op_type
    then = schemas.schema(op, target)
    step = schemas.next_step(op, since, target)
    if then is not None and then.since_version == since:
        failure = final_form_problem(node, then, target, plan.original_runs)
        if failure is None:
            node.version = target
            return []
        # Not a form to write: ONNX's body of the op may be (Softsign-1 on
        # doubles, which onnxruntime runs only as its body from opset 18).
        return _Failed(failure, final_blocks=True)
    if step is not None and step[0]:
        return _step(sandbox, node, since, step, then, target, plan)
    return _Failed(f"{op} does not exist at opset {target}")


def _step(
    sandbox: Sandbox,
    node: ir.Node,
    since: int,
    step: tuple[int, int],
    then: onnx.defs.OpSchema | None,
    target: int,
    plan: Plan,
) -> list[ir.Node] | tuple[int, str] | _Failed:
    """One (old, new) schema step: a relabel where allowed, else the registered adapter."""
    op = node.op_type
    going_down = target < since
    old, new = step
    destination = old if going_down else new
    dest_schema = schemas.schema(op, destination)
    assert dest_schema is not None, "next_step only names versions that exist"
    failure = None
    final_blocks = False
    if schemas.relabel_reason(op, old, new):
        failure = _relabel_problem(node, dest_schema, then, target, plan.original_runs)
        if failure is None:
            node.version = destination
            return [node]
        # Its final form blocks: its body may not (as above).
        final_blocks = then is not None and then.since_version == destination
    adapter = ADAPTERS.get((op, old, new, "down" if going_down else "up"))
    if adapter is None:
        if failure is None:
            failure = _no_adapter(op, since, destination, going_down)
        return _Failed(failure, final_blocks)
    result = _run_adapter(sandbox, node, adapter, destination, target, plan)
    if isinstance(result, tuple):
        return (since if going_down else target, result[1])
    if isinstance(result, str):
        return _Failed(result, final_blocks)
    return result


def _no_adapter(op: str, since: int, destination: int, going_down: bool) -> str:
    if going_down:
        return f"{op}-{since} differs from {op}-{destination}, and no adapter converts it"
    return f"no adapter from {op}-{since} to {op}-{destination}"


def _expand(
    sandbox: Sandbox, node: ir.Node, since: int, target: int, plan: Plan, failure: str
) -> list[ir.Node] | tuple[int, str] | None:
    """``node`` expanded: by ONNX's function body, else by a hand-written expansion;
    None where neither exists."""
    expanded = expand.expand(sandbox, node, plan)
    if expanded is not None:
        return expanded
    by_hand = EXPANSIONS.get(node.op_type)
    if by_hand is None:
        return None
    rewriter = Rewriter(sandbox, node, since, target)
    try:
        by_hand(rewriter, node)
    except Decline as decline:
        return (since, f"{failure}; {decline}")
    plan.expanded.append(f"{node.op_type}-{since}")
    return rewriter.created


def ort_runs(node: ir.Node, opset: int) -> bool:
    """Whether onnxruntime runs ``node`` at ``opset``: a kernel, or ONNX's body of its op."""
    return node_unsupported(node, opset) is None or runs_as_function(node, opset)


def _kernel_problem(node: ir.Node, opset: int, original_runs: bool) -> str | None:
    """Why onnxruntime would not run ``node`` at ``opset`` where it ran the original.

    A node written must have a kernel: onnxruntime's inlining of ONNX's body
    is not counted on, as that body may hold ops it has no kernel for
    (Bernoulli-22's RandomUniformLike-22); the planner expands the node
    itself, and checks each node of the body.
    """
    return node_unsupported(node, opset) if original_runs else None


def _relabel_problem(
    node: ir.Node,
    dest_schema: onnx.defs.OpSchema,
    final: onnx.defs.OpSchema | None,
    target: int,
    original_runs: bool,
) -> str | None:
    """Why ``node`` may not be relabelled to ``dest_schema``: types, or, where that is
    its final form (``final``, in force at the target), no onnxruntime kernel."""
    if final is not None and final.since_version == dest_schema.since_version:
        return final_form_problem(node, final, target, original_runs)
    wrong = schemas.types_not_taken(node, dest_schema)
    return None if wrong is None else f"{node.op_type}-{dest_schema.since_version} {wrong}"


def final_form_problem(
    node: ir.Node, schema: onnx.defs.OpSchema, target: int, original_runs: bool
) -> str | None:
    """Why ``node``, under ``schema`` (the one in force at ``target``), may not be written.

    Every node the conversion writes ends here, the original relabelled and
    each node an adapter or an expansion made: its actual types must be
    taken by the schema (an ONNX function body may compute ``Log`` of an
    int64 where its op takes ints: ReduceLogSum-18), and onnxruntime must run
    it where it ran the original node (Clip-11 has no double kernel, Clip-12
    has).
    """
    form = f"{node.op_type}-{schema.since_version}"
    wrong = schemas.types_not_taken(node, schema)
    if wrong is not None:
        return f"{form} {wrong}"
    no_kernel = _kernel_problem(node, target, original_runs)
    return None if no_kernel is None else f"{form}: {no_kernel}"


def _run_adapter(
    sandbox: Sandbox, node: ir.Node, adapter: Adapter, destination: int, target: int, plan: Plan
) -> list[ir.Node] | str | tuple[int, str]:
    """Run one adapter: the nodes to convert next, why it declined, or (0, why it failed)."""
    rewriter = Rewriter(sandbox, node, destination, target)
    unanswered = _outputs_unanswered(rewriter, node, adapter)
    if unanswered:
        return f"{adapter.label}: {unanswered}"
    checkpoint = list(sandbox.graph)
    try:
        adapter.function(rewriter, node)
    except Decline as decline:
        if rewriter.created or list(sandbox.graph) != checkpoint:
            return (0, f"{adapter.label}: {decline}")  # declined after a change
        return f"{adapter.label}: {decline}"
    again = list(rewriter.created)
    if node.graph is not None:
        # The adapted node must also take its actual types at the new version.
        dest_schema = schemas.schema(node.op_type, destination)
        assert dest_schema is not None, "adapters only lead to versions that exist"
        wrong = schemas.types_not_taken(node, dest_schema)
        if wrong:
            # The sandbox has changed: no expansion may start from it.
            return (0, f"{adapter.label}: {node.op_type}-{destination} {wrong}")
        node.version = destination
        again.append(node)
    plan.adapted.append(adapter.label)
    return again


def _outputs_unanswered(rw: Rewriter, node: ir.Node, adapter: Adapter) -> str | None:
    """Why ``adapter`` cannot convert ``node``: it reads an output the adapter does not answer for."""
    if adapter.outputs is None:
        return None
    found = schemas.schema(node.op_type, node.version or 0)
    formals = [f.name for f in found.outputs] if found is not None else []
    for index in range(adapter.outputs, len(node.outputs)):
        if rw.is_read(node.outputs[index]):
            name = formals[min(index, len(formals) - 1)] if formals else str(index)
            first = "output" if adapter.outputs == 1 else f"{adapter.outputs} outputs"
            return f"its {name} output is read, and the adapter converts its first {first} only"
    return None
