"""Going up from below opset 11: ``onnx.version_converter``, checked, then our own steps.

The package's relabels and adapters start at opset 11 (:data:`MIN_OPSET`,
the oldest opset the output can declare). Below it the well-kept library
converts, for the steps it is known to get right::

    model @ opset 7..10
      | weights swapped for placeholders (small ones kept: its adapters read them)
      | every node: its step in LIBRARY_UP, within the limits of the library's
      | adapters (library_limits.py), or refused by name
      v
    onnx.version_converter.convert_version(proto, 11)        the library's upward steps
      | full checker; every node it changed is in LIBRARY_UP (tested in onnxruntime)
      | its known wrong outputs fixed (FIXES), or refused
      v
    model @ opset 11, weights put back     -->  TargetOpsetPass's own plan, 11 -> target

Why only up to 11: from 11 on, the package's own allowlist and adapters are
the ones checked in onnxruntime in both directions, and the library is
wrong on some steps above 11 that the package gets right (Hardmax-11 on a
non-last axis is relabelled to Hardmax-13 as it is, where 13 changed what
the axis means). Down, the library is never used.

What the library is known to get wrong below 11 (each found by
``tests/test_opset_upgrade.py`` in onnxruntime) is fixed on its output or
refused, never written:

- Upsample-7/9 and Resize-10 become Resize-11 with Resize-11's default
  ``half_pixel`` coordinates, where they meant ``asymmetric`` (and, for
  nearest, ``floor`` of the source coordinate when upsampling, which is what
  onnxruntime does for them): the Resize gets both written out; a nearest
  one whose scales are not constants of at least 1 is refused (scales an
  initializer that is also a graph input are not constants: a caller may
  feed others; they are read on the original node, by the one evaluator).
- Pad-2 in reflect or edge mode keeps its ``value`` attribute, which Pad-11
  does not have (and those modes ignore): it is dropped.
- It declares every shape ONNX's inference gives, an initializer that is
  also a graph input read as a constant (and the ops inference sizes wrong
  sized so): once the checker has met them, the model's own declarations
  are put back, as onnxruntime allocates by a declared shape.

Where the library fails all the same, the node it fails on is found by
converting each node alone, and named; its own words go to ``-v`` only.

The library does not convert model-local functions (it drops them): they
are kept as they were and go through the package's own steps from their own
opset. It renames the nodes it replaces: each gets back the name of the
node whose outputs it writes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx.version_converter
import onnx_ir as ir

from lowering.defaults import MIN_OPSET
from lowering.irutils.checker import full_check_problem, proto_graphs
from lowering.irutils.scopes import iter_scopes
from lowering.irutils.snapshot import (
    PLACEHOLDER_LOCATION,
    serialize_without_weights,
    with_weights,
)
from lowering.irutils.static_values import MAX_ELEMENTS, small_constant
from lowering.irutils.walk import graphs_within
from lowering.opset import schemas
from lowering.opset.allowlist import RELABEL
from lowering.opset.library_limits import InferredShapes, culprit, over_limit

#: The library's upward conversions known right: (op, schema version the
#: node is at) -> the op types the library writes for it. Each is run to 11,
#: and on through the package to 13 and the latest, in onnxruntime against
#: the original (tests/test_opset_upgrade.py, which fails for an entry no
#: case exercises). A node whose schema is still in force at 11, or whose
#: steps up to 11 are all relabels (allowlist.py), needs no entry. Left out
#: because the library gets them wrong: PRelu-6 (its legacy per-channel
#: slope is relabelled as PRelu-7's numpy broadcast, which onnxruntime then
#: refuses to run). What an entry's adapters cannot take is refused before
#: the library runs (:mod:`lowering.opset.library_limits`). The legacy
#: broadcasts (Add-6 ..., Pow-1) write an Unsqueeze for ``axis=0``; onnxruntime
#: runs none of them at opset 6, so those are checked against numpy
#: (tests/test_opset_upgrade_refusals.py).
LIBRARY_UP: dict[tuple[str, int], frozenset[str]] = {
    ("Add", 6): frozenset({"Add", "Unsqueeze"}),
    ("ArgMax", 1): frozenset({"ArgMax"}),
    ("AveragePool", 1): frozenset({"AveragePool"}),
    ("AveragePool", 7): frozenset({"AveragePool"}),
    ("BatchNormalization", 6): frozenset({"BatchNormalization"}),
    ("BatchNormalization", 7): frozenset({"BatchNormalization"}),
    ("Clip", 6): frozenset({"Clip", "Constant"}),
    ("Concat", 4): frozenset({"Concat"}),
    ("Constant", 1): frozenset({"Constant"}),
    ("Constant", 9): frozenset({"Constant"}),
    ("Conv", 1): frozenset({"Conv"}),
    ("ConvTranspose", 1): frozenset({"ConvTranspose"}),
    ("Div", 6): frozenset({"Div", "Unsqueeze"}),
    ("Dropout", 7): frozenset({"Dropout"}),
    ("Flatten", 1): frozenset({"Flatten"}),
    ("Flatten", 9): frozenset({"Flatten"}),
    ("Gather", 1): frozenset({"Gather"}),
    ("Gemm", 6): frozenset({"Gemm"}),
    ("Gemm", 9): frozenset({"Gemm"}),
    ("Hardmax", 1): frozenset({"Hardmax"}),
    ("LogSoftmax", 1): frozenset({"LogSoftmax"}),
    ("MatMul", 1): frozenset({"MatMul"}),
    ("Max", 6): frozenset({"Max"}),
    ("MaxPool", 1): frozenset({"MaxPool"}),
    ("MaxPool", 8): frozenset({"MaxPool"}),
    ("Min", 6): frozenset({"Min"}),
    ("Mul", 6): frozenset({"Mul", "Unsqueeze"}),
    ("Pad", 2): frozenset({"Constant", "Pad"}),
    ("Pow", 1): frozenset({"Pow", "Unsqueeze"}),
    ("ReduceL2", 1): frozenset({"ReduceL2"}),
    ("ReduceLogSumExp", 1): frozenset({"ReduceLogSumExp"}),
    ("ReduceMax", 1): frozenset({"ReduceMax"}),
    ("ReduceMean", 1): frozenset({"ReduceMean"}),
    ("ReduceProd", 1): frozenset({"ReduceProd"}),
    ("ReduceSum", 1): frozenset({"ReduceSum"}),
    ("Resize", 10): frozenset({"Constant", "Resize"}),
    ("Slice", 1): frozenset({"Constant", "Slice"}),
    ("Softmax", 1): frozenset({"Softmax"}),
    ("Split", 2): frozenset({"Split"}),
    ("Squeeze", 1): frozenset({"Squeeze"}),
    ("Sub", 6): frozenset({"Sub", "Unsqueeze"}),
    ("Sum", 6): frozenset({"Sum"}),
    ("TopK", 1): frozenset({"Constant", "TopK"}),
    ("Unsqueeze", 1): frozenset({"Unsqueeze"}),
    ("Upsample", 7): frozenset({"Constant", "Resize"}),
    ("Upsample", 9): frozenset({"Constant", "Resize"}),
}


@dataclasses.dataclass
class Refused:
    """A node the library step cannot take up: its op, name, graph and why."""

    op: str
    node: str
    graph: str
    reason: str


class LibraryRefusal(Exception):
    """The library step refuses the model: ``refused`` names each node (or the model).

    ``details``: the library's own words, for ``-v`` (never in the one line).
    """

    def __init__(self, refused: list[Refused], details: list[str] | None = None) -> None:
        super().__init__("; ".join(r.reason for r in refused))
        self.refused = refused
        self.details = list(details or [])


def needs_library(model: ir.Model, target: int) -> bool:
    """Whether ``model``'s main opset is below :data:`MIN_OPSET` (so ``target`` is above it)."""
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    return current is not None and current < MIN_OPSET <= target


def up_to_min_opset(model: ir.Model) -> ir.Model:
    """A copy of ``model`` at opset :data:`MIN_OPSET`, by the library; ``model`` is unchanged.

    The copy holds the very weight tensors of ``model`` (none is read or
    copied), and its functions are ``model``'s, unconverted (so ``model``
    must not be used afterwards but to adopt the copy).
    Raises :class:`LibraryRefusal`.
    """
    source = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    assert source is not None, "needs_library checked the model's opset"
    proto, kept = serialize_without_weights(model, inline_up_to=MAX_ELEMENTS)
    del proto.functions[:]  # the library drops them; they go through the package's steps
    shapes = InferredShapes(proto)
    refused = _refused_before(model, source, shapes)
    if refused:
        raise LibraryRefusal(refused)
    _forget_unread_masks(model, proto)
    try:
        converted = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as error:  # noqa: BLE001 -- the library raises RuntimeError, IndexError...
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise LibraryRefusal(
            _traced(model, proto, shapes, False, "onnx.version_converter failed on the model"),
            [f"  onnx.version_converter: {first}"],
        ) from None
    # The library writes initializers that are not graph inputs (IR 4), and
    # opset 11 needs IR 6 anyway: declared here, as the IR version pass would.
    converted.ir_version = max(
        converted.ir_version,
        onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", MIN_OPSET)]),
    )
    refused = _fix(model, converted)
    if refused:
        raise LibraryRefusal(refused)
    problem = _checker_problem(converted)
    if problem is not None:
        raise LibraryRefusal(
            _traced(
                model,
                proto,
                shapes,
                True,
                "onnx.version_converter wrote a model the checker refuses",
            ),
            [f"  onnx.checker: {problem}"],
        )
    _keep_own_declarations(proto, converted)  # (the checker has met the library's)
    try:
        result = with_weights(converted, kept)
    except ValueError as error:
        raise LibraryRefusal(
            [Refused("", "", "the model", f"onnx.version_converter changed the weights: {error}")]
        ) from None
    written = _written_problem(model, result)
    if written:
        raise LibraryRefusal(written)
    _restore_node_names(model, result)
    for function in model.functions.values():
        result.functions[function.identifier()] = function
    return result


def _changes(op: str, source: int) -> tuple[int, bool] | None:
    """(the node's schema version, whether its steps to 11 are all relabels), or None if none."""
    now = schemas.schema(op, source)
    then = schemas.schema(op, MIN_OPSET)
    if now is None or (then is not None and then.since_version == now.since_version):
        return None
    version = now.since_version
    while then is not None and version != then.since_version:
        step = schemas.next_step(op, version, MIN_OPSET)
        if step is None or step not in {(o, n) for (p, o, n) in RELABEL if p == op}:
            return now.since_version, False
        version = step[1]
    return now.since_version, then is not None


def _refused_before(model: ir.Model, source: int, shapes: InferredShapes) -> list[Refused]:
    """The nodes refused before the library runs: steps it is not known right on, or
    features of the node its adapters cannot take (:mod:`lowering.opset.library_limits`)."""
    where = _descriptions(model)
    refused = []
    for graph in graphs_within(model.graph):
        for node in graph:
            if node.domain not in ("", "ai.onnx"):
                continue
            reason = _why_not(node, source, shapes)
            if reason is not None:
                refused.append(
                    Refused(
                        node.op_type,
                        node.name or "<unnamed>",
                        where.get(graph, repr(graph.name)),
                        reason,
                    )
                )
    return refused


def _why_not(node: ir.Node, source: int, shapes: InferredShapes) -> str | None:
    if schemas.schema(node.op_type, source) is None:
        return f"{node.op_type} is not an op of opset {source}"
    change = _changes(node.op_type, source)
    if change is None or change[1]:
        return None
    if (node.op_type, change[0]) not in LIBRARY_UP:
        return (
            f"{node.op_type}-{change[0]} -> opset {MIN_OPSET} by onnx.version_converter "
            "is not among its upward conversions checked in onnxruntime"
        )
    return over_limit(node, change[0], shapes)


def _forget_unread_masks(model: ir.Model, proto: onnx.ModelProto) -> None:
    """Drop the declared types of Dropout-7 masks (unread: a read one is refused) from
    ``proto``: the input's type there, bool at Dropout-10; the library keeps them."""
    source = _source(model)
    for graph, proto_graph in zip(graphs_within(model.graph), proto_graphs(proto.graph)):
        masks = {
            node.outputs[1].name
            for node in graph
            if node.op_type == "Dropout"
            and node.domain in ("", "ai.onnx")
            and _changes("Dropout", source) == (7, False)
            and len(node.outputs) > 1
        }
        kept = [info for info in proto_graph.value_info if info.name not in masks]
        if len(kept) != len(proto_graph.value_info):
            del proto_graph.value_info[:]
            proto_graph.value_info.extend(kept)


def _keep_own_declarations(proto: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """Put back ``proto``'s own declarations in ``converted`` (in place): the library
    declares every shape ONNX's inference gives, reading an initializer that is
    also a graph input as a constant (a Resize's scales, a Reshape's shape,
    which a caller may feed others) and sizing the ops it gets wrong, and
    onnxruntime allocates by a declaration ("Shape mismatch attempting to
    re-use buffer. {1,1,1,1} != {1,1,1,2}"). The lowering proves its own."""
    for own, written in zip(proto_graphs(proto.graph), proto_graphs(converted.graph)):
        made = {name for node in written.node for name in node.output}
        kept = [info for info in own.value_info if info.name in made]
        del written.value_info[:]
        written.value_info.extend(kept)
        declared = {info.name: info for info in own.output}
        for info in written.output:
            if info.name not in declared:
                continue
            if declared[info.name].type.tensor_type.HasField("shape"):
                info.CopyFrom(declared[info.name])
            else:  # (the checker wants a shape at the library's IR: its rank, no dims)
                for dim in info.type.tensor_type.shape.dim:
                    dim.Clear()


def _traced(
    model: ir.Model, proto: onnx.ModelProto, shapes: InferredShapes, checked: bool, fallback: str
) -> list[Refused]:
    """The node the library fails on (:func:`culprit`), or the model with ``fallback``."""
    found = culprit(proto, shapes, checked)
    if found is None:
        return [Refused("", "", "the model", fallback)]
    graph_index, node_index, reason = found
    graph = list(graphs_within(model.graph))[graph_index]
    node = list(graph)[node_index]
    where = _descriptions(model).get(graph, repr(graph.name))
    return [Refused(node.op_type, node.name or "<unnamed>", where, reason)]


def _descriptions(model: ir.Model) -> dict[ir.Graph, str]:
    """How messages name each graph of the main graph's tree ("main graph 'g'", ...)."""
    return {s.owner: s.description for s in iter_scopes(model) if s.function is None}  # type: ignore[misc]


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {name: node for node in graph.node for name in node.output if name}


def _fix(model: ir.Model, converted: onnx.ModelProto) -> list[Refused]:
    """Fix what the library is known to write wrong (module docstring); the nodes it cannot."""
    refused = []
    where = _descriptions(model)
    source = _source(model)
    pairs = zip(graphs_within(model.graph), proto_graphs(converted.graph))
    for graph, proto_graph in pairs:
        for node, new in _written_by(graph, proto_graph, source):
            reason = _fix_node(node, new, source)
            if reason:
                scope = where.get(graph, repr(graph.name))
                refused.append(Refused(node.op_type, node.name or "<unnamed>", scope, reason))
    return refused


def _fix_node(node: ir.Node, new: onnx.NodeProto | None, source: int) -> str | None:
    """Fix the node the library wrote for ``node``; why it cannot be, or None."""
    if new is None:
        return "onnx.version_converter renamed what it wrote for it: not found to check"
    version = _version(node, source)
    if _becomes_resize(node, version) and new.op_type == "Resize":
        return _fix_resize(new, _scales(node, version))
    if node.op_type == "Pad" and new.op_type == "Pad":
        _drop_pad_value(new)
    return None


def _drop_pad_value(pad: onnx.NodeProto) -> None:
    """A Pad's value attribute goes where its mode is not "constant"."""
    mode = next((a.s for a in pad.attribute if a.name == "mode"), b"constant")
    if mode != b"constant":
        kept = [a for a in pad.attribute if a.name != "value"]
        del pad.attribute[:]
        pad.attribute.extend(kept)


def _version(node: ir.Node, source: int) -> int:
    since = schemas.schema(node.op_type, source)
    return since.since_version if since else 0


def _becomes_resize(node: ir.Node, version: int) -> bool:
    return node.op_type == "Upsample" or (node.op_type, version) == ("Resize", 10)


def _written_by(
    graph: ir.Graph, proto_graph: onnx.GraphProto, source: int
) -> list[tuple[ir.Node, onnx.NodeProto | None]]:
    """Each default-domain node of ``graph`` with the node the library wrote for
    it: the one writing its first output's name, where the library kept it.
    It renames the outputs of the nodes it replaces that are not graph outputs
    (``_v_10``), so the Upsamples and Resize-10s left are paired, in order,
    with the Resizes no name claims; where they do not pair one for one, each
    is paired with None (refused: its Resize would go unfixed)."""
    written = _producers(proto_graph)
    pairs: list[tuple[ir.Node, onnx.NodeProto | None]] = []
    claimed: set[int] = set()
    unnamed: list[ir.Node] = []
    for node in graph:
        if node.domain not in ("", "ai.onnx"):
            continue
        new = written.get(node.outputs[0].name or "") if node.outputs else None
        if new is not None:
            pairs.append((node, new))
            claimed.add(id(new))
        elif _becomes_resize(node, _version(node, source)):
            unnamed.append(node)
    resizes = [n for n in proto_graph.node if n.op_type == "Resize" and id(n) not in claimed]
    if len(resizes) == len(unnamed):
        return pairs + list(zip(unnamed, resizes, strict=True))
    return pairs + [(node, None) for node in unnamed]


def _source(model: ir.Model) -> int:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))


#: The constant inputs the fixes read, by (op, schema version): Upsample-9's
#: and Resize-10's scales (Upsample-7's are an attribute). Read by the one
#: constant evaluator, on the original node: an initializer that is also a
#: graph input is not a constant (a caller may feed another value).
READS_CONSTANT: dict[tuple[str, int], int] = {("Upsample", 9): 1, ("Resize", 10): 1}


def _scales(node: ir.Node, version: int) -> np.ndarray | None:
    """An Upsample's or Resize-10's scales, where they are a constant; else None."""
    attribute = node.attributes.get("scales")
    if attribute is not None:
        return np.array(attribute.as_floats(), np.float32)
    index = READS_CONSTANT.get((node.op_type, version))
    if index is None or len(node.inputs) <= index:
        return None
    return small_constant(node.inputs[index])


def _fix_resize(node: onnx.NodeProto, scales: np.ndarray | None) -> str | None:
    """Upsample-7/9 and Resize-10 as the Resize-11 they mean: asymmetric, nearest by floor."""
    attrs = {a.name: a for a in node.attribute}
    mode = attrs["mode"].s if "mode" in attrs else b"nearest"
    if "coordinate_transformation_mode" in attrs:
        return "onnx.version_converter wrote a coordinate mode for it: unchecked"
    if mode == b"nearest":
        if scales is None or scales.size == 0 or not bool(np.all(scales >= 1)):
            return (
                "nearest with scales that are not constants of at least 1: onnxruntime "
                "rounds those its own way, which Resize-11 has no mode for"
            )
        node.attribute.append(onnx.helper.make_attribute("nearest_mode", "floor"))
    elif mode != b"linear":
        return f"mode {mode.decode()!r}: unchecked"
    node.attribute.append(
        onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric")
    )
    return None


def _checker_problem(converted: onnx.ModelProto) -> str | None:
    """The full checker's complaint about the library's output, or None."""
    problem = full_check_problem(converted, _is_placeholder)
    if problem is None:
        return None
    return problem.splitlines()[0]


def _is_placeholder(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL and any(
        e.key == "location" and e.value == PLACEHOLDER_LOCATION for e in tensor.external_data
    )


def _written_problem(model: ir.Model, result: ir.Model) -> list[Refused]:
    """The op types the library wrote that no entry of :data:`LIBRARY_UP` it used writes."""
    source = _source(model)
    allowed: set[str] = set()
    for graph in graphs_within(model.graph):
        for node in graph:
            allowed.add(node.op_type)
            change = _changes(node.op_type, source)
            if change is not None:
                allowed |= LIBRARY_UP.get((node.op_type, change[0]), frozenset())
    refused = []
    where = _descriptions(result)
    for graph in graphs_within(result.graph):
        for node in graph:
            if node.op_type not in allowed:
                refused.append(
                    Refused(
                        node.op_type,
                        node.name or "<unnamed>",
                        where.get(graph, repr(graph.name)),
                        f"onnx.version_converter wrote {node.op_type}, which none of its "
                        "checked conversions of this model writes",
                    )
                )
    return refused


def _restore_node_names(model: ir.Model, result: ir.Model) -> None:
    """A node the library replaced takes back the name of the one whose outputs it writes."""
    for graph, new_graph in zip(graphs_within(model.graph), graphs_within(result.graph)):
        names = {v.name: n.name for n in graph for v in n.outputs if v.name and n.name}
        taken = {n.name for n in new_graph if n.name}
        for node in new_graph:
            if node.name:
                continue
            for output in node.outputs:
                name = names.get(output.name or "")
                if name and name not in taken:
                    node.name = name
                    taken.add(name)
                    break
