"""Finding accumulator loops and planning each one's form, before anything changes.

An accumulator is a sequence a Loop carries from ``SequenceEmpty``, one
element inserted per iteration at most, read after the loop only::

    acc_0 = SequenceEmpty<dtype>()
    .., acc_n = Loop(M, cond, .., acc_0)
      body (i, c, .., acc):
        +----------------------------------------------------------+
        | acc' = SequenceInsert(acc, y)        append (no position) |
        |        or SequenceInsert(acc, y, 0)  prepend              |
        |   or, under an If (``if keep: out.append(y)``):           |
        | acc' = If(keep) then { SequenceInsert(acc, y) }           |
        |                 else { Identity(acc) }  (or acc itself)   |
        +----------------------------------------------------------+
        => (c', .., acc')
    z = ConcatFromSequence(acc_n) | SequenceAt(acc_n, i) | SequenceLength(acc_n)

TorchScript writes it for every ``list.append`` in a loop, tf2onnx for a
ragged ``map_fn``, onnxscript for an append in a ``for``. ``acc`` has no other
use in the body, and ``acc_n`` no other reader (a reader may sit in a
nested graph: ``xs[i]`` in a second loop). The form (:class:`Accumulator`):

- ``stack``: the element's shape is proven fixed (:mod:`lowering.analysis.proven_shapes`;
  static, or sized by a graph input's symbolic dim: :func:`bound_dims`) and
  every iteration appends: the Loop stacks the elements as a scan
  output, and the readers read the stack
  (:func:`lowering.maps.stack_reads.read_stack_in_readers`);
- ``concat``: otherwise, a tensor carried through the loop and grown by
  ``Concat`` along ``axis`` (after an Unsqueeze for ``new_axis``), with, where
  a reader needs it, the element's size along the axis carried as
  ``lengths`` (:mod:`lowering.loops.concat_reads`). The axis is the concat
  reader's; without one, axis 0 of a stack where the shape is static, else
  the one dim that is not. Every other dim must be fixed (the empty start
  needs it), so the elements agree on them, as the concat reader demands.

A sequence the graph returns stays a sequence (:attr:`Accumulator.returned`):
what the runtime cannot take is said by the pass. Anything else (another
use, a position neither absent nor 0, an element whose type is not the
sequence's, a dim the forms need unproven) leaves the accumulator as it is
written, with the reason.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from lowering.analysis.proven_shapes import Proof
from lowering.irutils.constants import constant_array
from lowering.irutils.node_inference import may_be_seen_wrong
from lowering.irutils.op_facts import is_onnx_op
from lowering.irutils.pins import unpinned_output
from lowering.irutils.walk import nodes_under
from lowering.loops.concat_form import concat_form
from lowering.maps.stack_reads import stack_read_kind

Dims = tuple[int | str | None, ...]

#: A symbolic dim of a graph input: the input and the axis it sizes.
Bound = dict[str, tuple[ir.Value, int]]


def bound_dims(graph: ir.Graph) -> Bound:
    """The symbolic dims of ``graph``'s inputs, each with an input and axis it sizes.

    Such a dim is one size for the whole run, so an element whose proven
    shape has it is as uniform as one of static shape, and the empty start
    of a concat reads it from the input's shape. A symbol declared only
    inside a body binds nothing: it may name another size each iteration.
    """
    bound: Bound = {}
    for value in graph.inputs:
        for axis, dim in enumerate(value.shape or ()):
            if isinstance(dim, ir.SymbolicDim) and dim.value is not None:
                bound.setdefault(dim.value, (value, axis))
    return bound


def fixed(dim: int | str | None, bound: Bound) -> bool:
    """Whether ``dim`` is one size every iteration: static, or a graph input's."""
    return isinstance(dim, int) or (isinstance(dim, str) and dim in bound)


@dataclasses.dataclass
class Accumulator:
    """One sequence a Loop accumulates, and the form planned for it.

    ``k``: its index among the loop's carried values (loop input 2 + k, body
    input 2 + k, body output 1 + k, loop output k). ``insert``: the
    SequenceInsert that grows it; ``branch``: ``(if_node, j, passing)`` where
    it sits in a branch of ``if_node`` (output ``j``), ``passing`` the branch
    that passes the sequence on. ``readers``: the loop output's uses.
    """

    loop: ir.Node
    k: int
    insert: ir.Node
    branch: tuple[ir.Node, int, ir.Graph] | None
    prepend: bool
    dtype: ir.DataType
    shape: Dims
    form: str = ""  # "stack" or "concat"
    axis: int = 0
    new_axis: bool = False
    returned: bool = False
    #: A concat along a dim the elements may differ in (not only under an If).
    ragged: bool = False
    #: The graph input dims the empty start of a concat reads.
    bound: Bound = dataclasses.field(default_factory=dict)
    #: The nodes the element is computed from (in the body or before the loop)
    #: that ONNX may size wrong: the rewrite exposes their claim (a scan
    #: output, a Concat), so they are pinned.
    doubted: tuple[ir.Node, ...] = ()

    @property
    def element(self) -> ir.Value:
        value = self.insert.inputs[1]
        assert value is not None, "plan_accumulator checked the element is there"
        return value

    @property
    def output(self) -> ir.Value:
        return self.loop.outputs[self.k]

    @property
    def readers(self) -> list[tuple[ir.Node, int]]:
        return list(self.output.uses())

    def reads(self, op_type: str) -> bool:
        return any(user.op_type == op_type for user, _ in self.readers)

    def describe(self) -> str:
        how = "prepended" if self.prepend else "appended"
        if self.branch is not None:
            how += " under an If"
        if self.form == "stack":
            return f"{self.output.name!r}: {how}, elements of one static shape, stacked as a scan output"
        along = f"stacked along {self.axis}" if self.new_axis else f"along {self.axis}"
        return f"{self.output.name!r}: {how}, a Concat carried through the loop ({along})"


@dataclasses.dataclass(frozen=True)
class Stays:
    """An accumulator no form serves: the loop output that stays a sequence, and why."""

    output: ir.Value
    reason: str

    def describe(self) -> str:
        return f"{self.output.name!r} stays a sequence: {self.reason}"


def plan_accumulators(
    loop: ir.Node, proof: Proof, opset: int, bound: Bound | None = None
) -> tuple[list[Accumulator], list[Stays]]:
    """The accumulators of ``loop`` that can be rewritten, and why the others cannot.

    A sequence the graph returns is planned with ``returned`` set and no form.
    """
    body_attr = loop.attributes.get("body")
    if (
        not isinstance(body_attr, ir.Attr)
        or body_attr.is_ref()
        or body_attr.type != ir.AttributeType.GRAPH
    ):
        return [], []
    body = body_attr.as_graph()
    carried = len(loop.inputs) - 2
    if carried <= 0 or len(body.inputs) != carried + 2 or len(body.outputs) < carried + 1:
        return [], []
    planned: list[Accumulator] = []
    why: list[Stays] = []
    for k in range(carried):
        initial = loop.inputs[2 + k]
        producer = initial.producer() if initial is not None else None
        if producer is None or not is_onnx_op(producer, "SequenceEmpty"):
            continue
        found = plan_accumulator(loop, body, k, proof, opset, bound or {})
        if isinstance(found, str):
            why.append(Stays(loop.outputs[k], found))
        else:
            planned.append(found)
    return planned, why


def plan_accumulator(
    loop: ir.Node, body: ir.Graph, k: int, proof: Proof, opset: int, bound: Bound
) -> Accumulator | str:
    """The plan for carried value ``k`` of ``loop`` (started by a SequenceEmpty), or why not."""
    initial = loop.inputs[2 + k]
    assert initial is not None and initial.producer() is not None
    empty = initial.producer()
    assert empty is not None
    dtype = ir.DataType(empty.attributes.get_int("dtype", ir.DataType.FLOAT.value))
    inner, result = body.inputs[2 + k], body.outputs[1 + k]
    if result.uses() or list(body.outputs).count(result) != 1 or inner.is_graph_output():
        return "the body reads the sequence it carries out"
    found = _insert_of(inner, result)
    if isinstance(found, str):
        return found
    insert, branch = found
    prepend = False
    if len(insert.inputs) > 2 and insert.inputs[2] is not None:
        position = constant_array(insert.inputs[2])
        if position is None or position.size != 1 or int(position.reshape(())) != 0:
            return "it inserts at a position that is neither the end nor 0"
        prepend = True
    element = insert.inputs[1] if len(insert.inputs) > 1 else None
    if element is None:
        return "its SequenceInsert has no tensor"
    known = proof.operand(element)
    if known is None or known.shape is None:
        return "the element's rank is not proven"
    if known.dtype != dtype:
        return "the element's type is not proven to be the sequence's"
    doubted = _doubted_sources(element)
    if (problem := _unpinned(doubted, proof, opset)) is not None:
        return problem
    accumulator = Accumulator(loop, k, insert, branch, prepend, dtype, tuple(known.shape))
    accumulator.doubted = tuple(doubted)
    output = loop.outputs[k]
    if output.is_graph_output():
        accumulator.returned = True
        return accumulator
    problem = _choose_form(accumulator, opset, bound)
    return problem if problem is not None else accumulator


def _doubted_sources(element: ir.Value) -> list[ir.Node]:
    """The nodes ``element`` is computed from (in the body, and before the
    loop) that ONNX may size wrong. A sequence kept their claim from the
    loop's outputs; a scan output or a Concat shows it to ONNX's inference,
    and to the buffers onnxruntime plans by it."""
    seen: set[ir.Node] = set()
    found: list[ir.Node] = []
    values = [element]
    while values:
        producer = values.pop().producer()
        if producer is None or producer in seen:
            continue
        seen.add(producer)
        for node in (producer, *nodes_under(producer)):
            if may_be_seen_wrong(node.op_type):
                found.append(node)
            values += [v for v in node.inputs if v is not None]
    return found


def _unpinned(nodes: list[ir.Node], proof: Proof, opset: int) -> str | None:
    """Why the claim of one of ``nodes`` could not be pinned, or None."""
    for node in nodes:
        k = unpinned_output(node, [proof.operand(v) for v in node.inputs], opset)
        if k is not None:
            name = f" {node.name!r}" if node.name else ""
            return (
                f"its element is computed from output {k} of {node.op_type}{name}, which "
                "ONNX may size wrong, and its true shape is not computed here"
            )
    return None


def _insert_of(
    inner: ir.Value, result: ir.Value
) -> tuple[ir.Node, tuple[ir.Node, int, ir.Graph] | None] | str:
    """The SequenceInsert growing ``inner`` into ``result``, and the If it sits under."""
    producer = result.producer()
    uses = inner.uses()
    if producer is not None and is_onnx_op(producer, "SequenceInsert"):
        if producer.inputs[0] is inner and len(uses) == 1:
            return producer, None
        return "the body reads the sequence other than by one SequenceInsert"
    if producer is None or not is_onnx_op(producer, "If"):
        return "the body does not grow it by a SequenceInsert"
    j = list(producer.outputs).index(result)
    then_attr = producer.attributes.get("then_branch")
    else_attr = producer.attributes.get("else_branch")
    if not all(
        isinstance(a, ir.Attr) and not a.is_ref() and a.type == ir.AttributeType.GRAPH
        for a in (then_attr, else_attr)
    ):
        return "its If has no branches of its own"
    assert then_attr is not None and else_attr is not None
    branches = [then_attr.as_graph(), else_attr.as_graph()]
    for inserting, passing in (branches, branches[::-1]):
        insert = _only_returned(inserting, j, "SequenceInsert", inner)
        if insert is None:
            continue
        passed = passing.outputs[j]
        allowed = {insert}
        if passed is not inner:
            copy = _only_returned(passing, j, "Identity", inner)
            if copy is None:
                return "its If's other branch does not pass the sequence on unchanged"
            allowed.add(copy)
        if {user for user, _ in uses} != allowed or len(uses) != len(allowed):
            return "the body reads the sequence other than by one SequenceInsert"
        return insert, (producer, j, passing)
    return "its If does not insert into it in one branch"


def _only_returned(graph: ir.Graph, j: int, op_type: str, inner: ir.Value) -> ir.Node | None:
    """The ``op_type`` node of ``graph`` reading ``inner`` first and making its
    output ``j``, which nothing else reads or returns; None if there is none."""
    value = graph.outputs[j]
    node = value.producer()
    if (
        node is None
        or not is_onnx_op(node, op_type)
        or node.inputs[0] is not inner
        or value.uses()
        or list(graph.outputs).count(value) != 1
    ):
        return None
    return node


def _choose_form(accumulator: Accumulator, opset: int, bound: Bound) -> str | None:
    """Set ``accumulator``'s form (the module docstring); None, or why it has none."""
    problem = _unserved_reader(accumulator.readers)
    if problem is not None:
        return problem
    static = all(fixed(d, bound) for d in accumulator.shape)
    if static and accumulator.branch is None and _stack_serves(accumulator, opset):
        accumulator.form = "stack"
        return None
    found = _concat_axis(accumulator, static, bound)
    if isinstance(found, str):
        return found
    return _choose_concat(accumulator, *found, opset, bound)


def _unserved_reader(readers: list[tuple[ir.Node, int]]) -> str | None:
    """Why a reader of the sequence is one that no form serves; None if none is."""
    for user, index in readers:
        if index != 0 or user.graph is None or user.op_type not in _READERS or user.domain:
            return f"{user.op_type} {user.name!r} reads it, which no form serves"
        if user.op_type == "SequenceAt" and (len(user.inputs) < 2 or user.inputs[1] is None):
            return f"SequenceAt {user.name!r} has no position"
    return None


def _stack_serves(accumulator: Accumulator, opset: int) -> bool:
    """Whether every reader reads a stack of the (static) elements."""
    ir_shape = ir.Shape(list(accumulator.shape))
    return all(
        stack_read_kind(u, i, ir_shape, accumulator.dtype, opset) for u, i in accumulator.readers
    )


def _concat_axis(accumulator: Accumulator, static: bool, bound: Bound) -> tuple[int, bool] | str:
    """The (axis, new_axis) the concat is built along: its readers', else a new
    axis 0 for static elements, else the one dim in which elements may differ."""
    concats = {
        (user.attributes.get_int("axis", 0), user.attributes.get_int("new_axis", 0) != 0)
        for user, _ in accumulator.readers
        if user.op_type == "ConcatFromSequence"
    }
    if len(concats) > 1:
        return "its concats differ in axis or new_axis"
    if concats:
        return concats.pop()
    if static:
        return 0, True
    unknown = [a for a, d in enumerate(accumulator.shape) if not fixed(d, bound)]
    if len(unknown) != 1:
        return "its elements may differ in more than one dim"
    return unknown[0], False


def _choose_concat(
    accumulator: Accumulator, axis: int, new_axis: bool, opset: int, bound: Bound
) -> str | None:
    """Set the concat form along ``axis``; None, or why the concat cannot be built."""
    form = concat_form(
        accumulator.shape,
        accumulator.dtype,
        axis,
        new_axis,
        opset,
        lambda d: fixed(d, bound),  # type: ignore[arg-type]
        reads_back=True,
    )
    if isinstance(form, str):
        return form
    accumulator.bound = {d: bound[d] for d in form.dims if isinstance(d, str) and d in bound}
    accumulator.form, accumulator.axis, accumulator.new_axis = "concat", form.axis, new_axis
    accumulator.ragged = form.ragged
    return None


_READERS = frozenset({"ConcatFromSequence", "SequenceAt", "SequenceLength"})


def runs_once(loop: ir.Node) -> bool:
    """Whether ``loop`` is proven to run its body at least once: a constant
    trip count of at least 1 (or none), and a constant true condition (or none)."""
    trip, cond = loop.inputs[0], loop.inputs[1]
    if trip is not None:
        count = constant_array(trip)
        if count is None or count.size != 1 or int(count.reshape(())) < 1:
            return False
    if cond is not None:
        start = constant_array(cond)
        if start is None or start.size != 1 or not bool(start.reshape(())):
            return False
    return True
