"""Declare an older default-domain opset, when every node is valid at it.

Lowering leaves a model that needs nothing of opset 17 but the ops it
already had, so it can often run on runtimes of opset 11. ONNX's version
converter cannot take such models down ("No Adapter From Version $14 for
Mul"), so this pass checks and adapts each node itself:

- a node whose schema is the same at both versions is relabeled;
- known schema changes are adapted where the operands allow it: the
  ``axes`` input of Squeeze, Unsqueeze and the Reduce ops and the ``split``
  input of Split become attributes when constant (and back, going up);
  Constant's ``value_int(s)``/``value_float(s)`` become a ``value`` tensor;
- Loop, If and Scan only gained types since opset 11; below 13 a Loop may
  not carry a sequence nor an If return one;
- for an op whose inputs, outputs and attributes are unchanged and whose
  newer versions only added types, the node's actual types are checked
  against the older schema.

Anything else blocks: the pass raises :class:`LoweringError` listing each
op that blocks, with its versions, and changes nothing.
:func:`lowest_opset` says how low a model could go.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx.defs
import onnx_ir as ir

from lowering.constants import constant_array, constant_node
from lowering.errors import LoweringError
from lowering.scopes import iter_scopes
from lowering.type_inference import TypeOracle
from lowering.uniform_shapes import REDUCE_OPS

MIN_OPSET = 11

# Same inputs, outputs and attributes, but other semantics: never relabeled.
_CHANGED_MEANING = frozenset(["Softmax", "LogSoftmax", "Hardmax", "Resize", "Upsample"])
# Where each op's axes (or split) moved from an attribute to an input.
_INPUT_SINCE = {"Squeeze": 13, "Unsqueeze": 13, "Split": 13, "ReduceSum": 13}


@dataclasses.dataclass
class _Change:
    """What converting one node takes: a function to apply, or why it cannot."""

    apply: object = None
    blocker: str | None = None


class TargetOpsetPass(ir.passes.InPlacePass):
    """Convert every default-domain node to ``target`` and declare it.

    Constants it adds (going up, for an ``axes`` that becomes an input) are
    left for :class:`lowering.naming.FreshNamesPass` to name.
    """

    def __init__(self, target: int) -> None:
        super().__init__()
        if target < MIN_OPSET:
            raise ValueError(f"the target opset must be at least {MIN_OPSET}, not {target}")
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        changes = _plan(model, self.target, _types(model))
        blockers = sorted({c.blocker for c in changes if c.blocker})
        if blockers:
            raise LoweringError(
                f"the model cannot declare opset {self.target}: " + "; ".join(blockers)
            )
        for change in changes:
            if change.apply is not None:
                change.apply()
        modified = False
        for imports in _opset_tables(model):
            if imports.get("", None) not in (None, self.target):
                imports[""] = self.target
                modified = True
        return ir.passes.PassResult(model, modified=modified or any(c.apply for c in changes))


def lowest_opset(model: ir.Model) -> int | None:
    """The lowest default-domain opset (at least 11) the model could declare."""
    current = _current_opset(model)
    if current is None:
        return None
    types = _types(model)
    for target in range(MIN_OPSET, current + 1):
        if not any(c.blocker for c in _plan(model, target, types)):
            return target
    return current


class _Types:
    """ONNX shape inference for the checks, run only if a node lacks types."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._oracle: TypeOracle | None = None

    def twin(self, node: ir.Node, owner) -> ir.Node | None:
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        if all(v.type is not None for v in values):
            return None
        if self._oracle is None:
            self._oracle = TypeOracle(self._model, list(self._model.functions.values()))
        return self._oracle.twin(node, owner)


def _types(model: ir.Model) -> _Types:
    """Types for the checks, where the model itself does not declare them."""
    return _Types(model)


def _opset_tables(model: ir.Model) -> list[dict[str, int]]:
    return [model.opset_imports, *(f.opset_imports for f in model.functions.values())]


def _current_opset(model: ir.Model) -> int | None:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))


def _plan(model: ir.Model, target: int, types: _Types) -> list[_Change]:
    changes = []
    for scope in iter_scopes(model):
        owner = scope.owner
        imports = owner.opset_imports if isinstance(owner, ir.Function) else model.opset_imports
        current = imports.get("", imports.get("ai.onnx"))
        if current is None:
            continue
        for node in owner:
            if node.domain in ("", "ai.onnx"):
                changes.append(
                    _change(node, current, target, lambda n=node, o=owner: types.twin(n, o))
                )
    return changes


def _schema(op: str, version: int):
    try:
        return onnx.defs.get_schema(op, version, "")
    except onnx.defs.SchemaError:
        return None


def _change(node: ir.Node, current: int, target: int, twin) -> _Change:
    """How to convert ``node``; ``twin()`` gives an inferred copy, only if asked."""
    op = node.op_type
    now, then = _schema(op, current), _schema(op, target)
    if now is None:
        return _Change(blocker=f"{op} (not an ONNX op at opset {current})")
    if then is None:
        return _Change(blocker=f"{op} (opset {now.since_version}, not defined at opset {target})")
    if now.since_version == then.since_version:
        return _Change()
    typed_node = twin() or node
    sequences = _sequence_blocker(node, target) or _sequence_blocker(typed_node, target)
    if sequences:
        return _Change(blocker=sequences)
    adapter = _ADAPTERS.get(op) or (_adapt_reduce if op in REDUCE_OPS else None)
    if adapter is not None:
        return adapter(node, now, then, target)
    if op in ("Loop", "If", "Scan") or _only_types_added(node, now, then):
        wrong = _types_not_allowed(node, then) or _types_not_allowed(typed_node, then)
        if wrong:
            return _Change(
                blocker=f"{op} (opset {now.since_version}; at opset {target} it takes no {wrong})"
            )
        return _Change()
    return _Change(blocker=f"{op} (changed from opset {then.since_version} to {now.since_version})")


def _sequence_blocker(node: ir.Node, target: int) -> str | None:
    if target >= 13:
        return None
    if node.op_type == "Loop" and any(
        isinstance(v.type, ir.SequenceType) for v in node.inputs[2:] if v is not None
    ):
        return "Loop (carries a sequence, which needs Loop-13: opset 13)"
    if node.op_type == "If" and any(isinstance(v.type, ir.SequenceType) for v in node.outputs):
        return "If (returns a sequence, which needs If-13: opset 13)"
    return None


def _only_types_added(node: ir.Node, now, then) -> bool:
    if node.op_type in _CHANGED_MEANING:
        return False
    same_inputs = [(i.name, i.option) for i in now.inputs] == [
        (i.name, i.option) for i in then.inputs
    ]
    same_outputs = [(o.name, o.option) for o in now.outputs] == [
        (o.name, o.option) for o in then.outputs
    ]
    used_attributes_exist = all(name in then.attributes for name in node.attributes)
    return same_inputs and same_outputs and used_attributes_exist


def _types_not_allowed(node: ir.Node, schema) -> str | None:
    """The first actual type the older schema does not take, if any."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for values, formals in ((node.inputs, schema.inputs), (node.outputs, schema.outputs)):
        for index, value in enumerate(values):
            if value is None or value.type is None or not formals:
                continue
            formal = formals[min(index, len(formals) - 1)]
            if formal.type_str not in allowed:
                continue
            name = _type_string(value)
            if name is not None and name not in allowed[formal.type_str]:
                return name
    return None


def _type_string(value: ir.Value) -> str | None:
    try:
        proto = ir.serde.serialize_type(value.type)
    except (TypeError, ValueError):
        return None
    return _onnx_type_name(proto) if _complete(proto) else None


def _complete(proto: onnx.TypeProto) -> bool:
    kind = proto.WhichOneof("value")
    if kind == "tensor_type":
        return proto.tensor_type.elem_type != 0
    if kind == "sequence_type":
        return _complete(proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _complete(proto.optional_type.elem_type)
    return False


def _onnx_type_name(proto: onnx.TypeProto) -> str:
    kind = proto.WhichOneof("value")
    if kind == "sequence_type":
        return f"seq({_onnx_type_name(proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_onnx_type_name(proto.optional_type.elem_type)})"
    name = onnx.helper.tensor_dtype_to_string(proto.tensor_type.elem_type).split(".")[-1].lower()
    return f"tensor({name})"


# Adapters: each checks that it can convert the node, and returns how.


def _adapt_axes_input(node: ir.Node, now, then, target: int) -> _Change:
    """Squeeze/Unsqueeze/ReduceX/Split: the axes (split) input <-> attribute."""
    op = node.op_type
    name = "split" if op == "Split" else "axes"
    since = _INPUT_SINCE.get(op, 18)
    going_down = then.since_version < since <= now.since_version
    going_up = now.since_version < since <= then.since_version
    if op == "Split" and "num_outputs" in node.attributes and then.since_version < 18:
        return _Change(blocker=f"Split (its num_outputs needs opset 18, not {target})")
    if any(a not in then.attributes and a != name for a in node.attributes):
        return _Change(blocker=f"{op} (opset {now.since_version} attributes not at {target})")
    if going_down:
        operand = node.inputs[1] if len(node.inputs) > 1 else None
        if operand is None:
            return _Change()
        values = constant_array(operand)
        if values is None:
            return _Change(
                blocker=f"{op} (its {name} is computed, and opset {target} needs a constant)"
            )

        def to_attribute() -> None:
            node.attributes[name] = ir.AttrInt64s(name, [int(v) for v in values.reshape(-1)])
            node.resize_inputs(1)

        return _Change(apply=to_attribute)
    if going_up and name in node.attributes:
        values = np.array(node.attributes[name].as_ints(), np.int64)

        def to_input() -> None:
            constant = constant_node(values, name)
            node.graph.insert_before(node, constant)
            del node.attributes[name]
            node.resize_inputs(2)
            node.replace_input_with(1, constant.outputs[0])

        return _Change(apply=to_input)
    return _Change()


def _adapt_reduce(node: ir.Node, now, then, target: int) -> _Change:
    noop = node.attributes.get_int("noop_with_empty_axes", 0)
    if noop and then.since_version < 13:
        return _Change(blocker=f"{node.op_type} (noop_with_empty_axes needs a newer opset)")
    change = _adapt_axes_input(node, now, then, target)
    if (
        change.blocker
        or "noop_with_empty_axes" not in node.attributes
        or "noop_with_empty_axes" in then.attributes
    ):
        return change
    inner = change.apply

    def drop_noop() -> None:
        if inner is not None:
            inner()
        del node.attributes["noop_with_empty_axes"]

    return _Change(apply=drop_noop)


def _adapt_constant(node: ir.Node, now, then, target: int) -> _Change:
    (name,) = list(node.attributes) or [None]
    if name in then.attributes:
        return _Change()
    if name in ("value_int", "value_ints", "value_float", "value_floats"):
        values = constant_array(node.outputs[0])

        def to_tensor() -> None:
            del node.attributes[name]
            node.attributes["value"] = ir.AttrTensor("value", ir.tensor(values))

        return _Change(apply=to_tensor)
    return _Change(blocker=f"Constant (its {name} needs a newer opset than {target})")


_ADAPTERS = {
    "Squeeze": _adapt_axes_input,
    "Unsqueeze": _adapt_axes_input,
    "Split": _adapt_axes_input,
    "Constant": _adapt_constant,
}
