"""Each empty constant a Loop or Scan carries in, as a ConstantOfShape, for a runtime that reads it wrong.

tf2onnx starts a ``tf.concat`` grown in a ``while_loop`` from an empty
initializer (``zeros:0``, float[0]). OpenVINO from 2026 reads an empty
constant carried into a Loop or Scan as a scalar: it refuses a body that
reads it ("Accessing out-of-range dimension") and returns one passed on as a
scalar 0. Made at run time by a ``ConstantOfShape`` of its shape, the same
start runs right (tests/test_empty_starts.py). So for a runtime whose
profile says so (:meth:`lowering.runtimes.profiles.Runtime.empty_starts_wrong`),
every such start, at any depth, becomes one::

    e = float[0] {}                        shape = Constant<value = int64[1] {0}>()
                                           e'    = ConstantOfShape<value = float[1] {0}>(shape)
    r = Loop(M, c, e) <body ...>     ->    r     = Loop(M, c, e') <body ...>

A ConstantOfShape of a shape with a 0 computes the same empty tensor, of
the same element type, so the loop means the same. A start is a carried
input (a Loop's after its condition, a Scan's states) that is an initializer
or a Constant (an initializer that is also a graph input is not: a caller
may feed another value) with a 0 in its shape, of an element type the
scope's ConstantOfShape makes (none before opset 9). One ConstantOfShape
serves each shape and type in a graph; the initializer or Constant goes
when nothing else reads it. Every loop is planned before any is changed.
Like the copies (:mod:`lowering.passes.copy_passed_through`), it runs
after the rewrites and the optimizer, on the model as it will be written.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from lowering.irutils.constants import SharedConstants
from lowering.irutils.dead_code import remove_unread, remove_unread_initializer
from lowering.irutils.naming import name_fresh
from lowering.irutils.op_facts import is_loop
from lowering.irutils.scopes import Located, find_nodes
from lowering.irutils.static_values import small_constant
from lowering.opset.schemas import formal_types, schema, type_string
from lowering.options import RuntimeName, check_runtime
from lowering.rewrites import LoweringResult, Rewrite
from lowering.runtimes.profiles import profile

#: What a Rewrite of this pass says as its strategy (:mod:`lowering.summary` counts them).
STRATEGY = "ConstantOfShape"


@dataclasses.dataclass(frozen=True)
class _Start:
    """An empty constant ``value`` a loop carries in as its input ``index``."""

    index: int
    value: ir.Value
    dtype: ir.DataType
    dims: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class _Planned:
    """A loop and the empty constants it starts from."""

    located: Located
    starts: tuple[_Start, ...]


class FillEmptyStartsPass(ir.passes.InPlacePass):
    """Make each empty constant a Loop or Scan carries in a ``ConstantOfShape``, for ``runtime``.

    Does nothing for a runtime that reads such starts right. Each loop changed
    is a :class:`Rewrite` (strategy ``"ConstantOfShape"``, reason: which starts,
    and what the runtime does with them).
    """

    def __init__(self, runtime: RuntimeName = "onnxruntime") -> None:
        super().__init__()
        self.wrong = profile(check_runtime(runtime)).empty_starts_wrong()

    def call(self, model: ir.Model) -> LoweringResult:
        if self.wrong is None:
            return LoweringResult(model, modified=False)
        located = find_nodes(model, is_loop)
        planned = [p for p in (_plan(model, at) for at in located) if p is not None]
        shared = SharedConstants()
        rewrites = [self._fill(p, shared) for p in planned]
        if rewrites:
            name_fresh(model)
        return LoweringResult(model, modified=bool(rewrites), rewrites=rewrites)

    def _fill(self, planned: _Planned, shared: SharedConstants) -> Rewrite:
        node, owner = planned.located.node, planned.located.scope.owner
        filled, said = [], []
        for start in planned.starts:
            zeros = shared.zeros(owner, start.dims, start.dtype)
            node.replace_input_with(start.index, zeros)
            filled.append(zeros)
            said.append(f"{start.value.name!r} (input {start.index}, {_typed(start)})")
        shared.place(filled)
        several = len(said) > 1
        for start in planned.starts:
            remove_unread(start.value)
            remove_unread_initializer(start.value)
        return Rewrite(
            scope=planned.located.scope.description,
            node_name=node.name or "",
            op_type=node.op_type,
            original=None,
            written=[n for v in dict.fromkeys(filled) if (n := v.producer()) is not None],
            strategy=STRATEGY,
            reason=(
                f"it carries in the empty constant{'s' if several else ''} {', '.join(said)}, "
                f"which {self.wrong}: now {'each ' if several else ''}a ConstantOfShape of its shape"
            ),
        )


def _typed(start: _Start) -> str:
    return f"{start.dtype.name.lower()}[{', '.join(map(str, start.dims))}]"


def _carried(node: ir.Node) -> range:
    """The positions of the node's carried starts: a Loop's after M and the
    condition, a Scan's states (from Scan-9 on: no ConstantOfShape before)."""
    if node.op_type == "Loop":
        return range(2, len(node.inputs))
    attribute = node.attributes.get("num_scan_inputs")
    if attribute is None or attribute.is_ref():
        return range(0)
    return range(len(node.inputs) - attribute.as_int())


def _plan(model: ir.Model, located: Located) -> _Planned | None:
    opset = located.scope.opset(model) or 0
    if opset < 9:  # (ConstantOfShape-9 is the first; Scan-8 reads sequence_lens first)
        return None
    starts = []
    for index in _carried(located.node):
        value = located.node.inputs[index]
        array = small_constant(value, limit=0)  # (an initializer that is a graph input: None)
        if value is None or array is None:
            continue
        dtype = ir.DataType.from_numpy(array.dtype)  # (strings: no ConstantOfShape makes them)
        if _zeros_make(dtype, opset):
            starts.append(_Start(index, value, dtype, tuple(array.shape)))
    return _Planned(located, tuple(starts)) if starts else None


def _zeros_make(dtype: ir.DataType, opset: int) -> bool:
    """Whether the ``ConstantOfShape`` of ``opset`` makes tensors of ``dtype``."""
    found = schema("ConstantOfShape", opset)
    if found is None:
        return False
    made = {name: types for name, _, types in formal_types(found)}["output"]
    return type_string(ir.Value(type=ir.TensorType(dtype))) in made
