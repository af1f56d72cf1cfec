"""Which ops the lowering may emit on which element types, in onnxruntime.

A rewrite must run wherever the original runs. onnxruntime's SequenceMap
expands into SequenceAt/SequenceInsert/Loop, whose kernels take all 14
element types that its sequences hold; other ops the strategies emit do
not. Its ``SplitToSequence``, for one, has no kernel for int8, uint8,
int16, uint16, uint32, uint64 or bfloat16, so a uniform map of int8 that
ran before would fail with NOT_IMPLEMENTED once lowered. And some kernels
exist but are wrong: its ``Gather`` returns empty strings for rows of a
string tensor of rank 2 or more (``['a', 'bb']`` comes back as
``['a', '']``).

Every strategy asks :func:`unsupported` about each (op, element type) it
would emit, and the pass falls back to the next strategy, down to the
general Loop form whose ops are the ones the original's expansion uses.
The kernel table (``ort_kernels.json``, package data) is generated from
onnxruntime's own registry by ``scripts/ort_kernel_table.py`` and
committed, so the output does not depend on what is installed beside it.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

import onnx
import onnx.defs
import onnx_ir as ir

_TABLE = json.loads(resources.files(__package__).joinpath("ort_kernels.json").read_text())
ONNXRUNTIME_VERSION: str = _TABLE["onnxruntime"]
#: op -> [(first opset, last opset, element types of its data input)]
KERNELS: dict[str, list[tuple[int, int, frozenset[str]]]] = {
    op: [(since, until, frozenset(types)) for since, until, types in spans]
    for op, spans in _TABLE["kernels"].items()
}

# Kernels that exist and give wrong results, with what goes wrong.
WRONG_RESULTS: dict[tuple[str, ir.DataType], str] = {
    ("Gather", ir.DataType.STRING): (
        "onnxruntime's Gather returns wrong strings from tensors of rank 2 and more"
    ),
    # (Loop-carried string sequences are right: only the stacked outputs are not.)
    ("Loop", ir.DataType.STRING): (
        "onnxruntime's Loop returns empty strings in its scan outputs after the first trip"
    ),
}


def type_name(dtype: ir.DataType) -> str:
    """The element type as onnxruntime's kernel registry spells it ("float", "int8")."""
    return dtype.name.lower()


@functools.cache  # (asked for every op of every form of every map)
def unsupported(op_type: str, dtype: ir.DataType | None, opset: int) -> str | None:
    """Why onnxruntime cannot run ``op_type`` on ``dtype`` at ``opset``; None if it can.

    An unknown element type (None or UNDEFINED) is answered conservatively:
    only an op whose kernel takes every element type a sequence can hold,
    and is right for all of them, is known to run on it.
    """
    if dtype is not None and (op_type, dtype) in WRONG_RESULTS:
        return WRONG_RESULTS[op_type, dtype]
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        wrong = [reason for (op, _), reason in WRONG_RESULTS.items() if op == op_type]
        if wrong:
            return f"the element type is unknown, and {wrong[0]}"
    spans = KERNELS.get(op_type)
    if not spans:  # the table holds every default-domain op onnxruntime registers
        return f"onnxruntime {ONNXRUNTIME_VERSION} has no {op_type} kernel"
    version = _schema_version(op_type, opset)
    types = next((types for since, until, types in spans if _matches(since, until, version)), None)
    if types is None:
        return f"onnxruntime {ONNXRUNTIME_VERSION} has no {op_type} kernel at opset {opset}"
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        if SEQUENCE_ELEMENT_TYPES <= types:
            return None
        return f"the element type is unknown, and onnxruntime's {op_type} takes only some types"
    if type_name(dtype) not in types:
        return f"onnxruntime {ONNXRUNTIME_VERSION} has no {op_type} kernel for {type_name(dtype)}"
    return None


# The end of a kernel's opset range that onnxruntime registers as "and later".
_OPEN = 2**31 - 1


def _matches(since: int, until: int, version: int) -> bool:
    """Whether a kernel registered for opsets [since, until] runs the schema of ``version``.

    onnxruntime matches a node by the version of its schema, and a kernel
    registered as "from ``since`` on" only that schema: its RoiAlign
    kernel for [16, *] does not run RoiAlign-22, so a model at opset 22 has
    none, though 22 lies in the range.
    """
    if until == _OPEN:
        return since == version
    return since <= version <= until


@functools.cache
def _schema_version(op_type: str, opset: int) -> int:
    """The version of ``op_type``'s schema in force at ``opset`` (``opset`` if ONNX has none)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return opset


def first_unsupported(uses: list[tuple[str, ir.DataType | None]], opset: int) -> str | None:
    """The reason of the first (op, element type) in ``uses`` that cannot run."""
    for op_type, dtype in uses:
        reason = unsupported(op_type, dtype, opset)
        if reason is not None:
            return reason
    return None


# The element types onnxruntime's sequences hold (its SequenceAt's).
SEQUENCE_ELEMENT_TYPES = next(
    types for since, until, types in KERNELS["SequenceAt"] if since <= 11 <= until
)


# Which values' element types the table is about: those bound to the type
# constraint of the op's first input in ONNX's schema at that opset
# (onnxruntime's kernels use the same names). A few ops read another
# input's type. (Loop's and If's first inputs are the trip count and the
# condition, Where's is the condition: what matters is the type of the
# values they carry.)
DATA_INPUT_OVERRIDES = {
    "ConcatFromSequence": "S",
    "ConstantOfShape": "T1",
    "If": "V",
    "Loop": "V",
    "Scan": "V",
    "SequenceAt": "T",
    "SequenceConstruct": "T",
    "SequenceEmpty": "S",
    "SequenceInsert": "S",
    "SequenceLength": "S",
    "SplitToSequence": "T",
    "Where": "T",
}


@functools.cache
def data_constraint(op: str, opset: int) -> str | None:
    """The type constraint of ``op``'s data input at ``opset``; None if it has none."""
    if op in DATA_INPUT_OVERRIDES:
        return DATA_INPUT_OVERRIDES[op]
    try:
        schema = onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        try:  # onnxruntime registers some ops from before ONNX's first schema of them
            schema = onnx.defs.get_schema(op, "")
        except onnx.defs.SchemaError:
            return None
    if op == "Constant":
        return None  # onnxruntime makes it an initializer: no kernel runs it
    # An op with no input (RandomNormal) by its output's type.
    formals = schema.inputs or schema.outputs
    name = formals[0].type_str if formals else ""
    return name if name.isidentifier() else None


def node_unsupported(node: ir.Node, opset: int) -> str | None:
    """Why onnxruntime has no kernel for ``node`` at ``opset``; None if it has one.

    The element types asked about are those of the values bound to the op's
    data constraint (:func:`data_constraint`), inputs and outputs. A value
    of unknown type is not held against the node, nor is an op with no data
    input (Constant): the caller's type checks are as lenient.
    """
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return f"{node.op_type} is not an ONNX op at opset {opset}"
    constraint = data_constraint(node.op_type, opset)
    if constraint is None:
        return None
    spans = KERNELS.get(node.op_type, [])
    version = _schema_version(node.op_type, opset)
    if not any(_matches(since, until, version) for since, until, _ in spans):
        # whatever its types (an absent optional has none)
        return unsupported(node.op_type, ir.DataType.UNDEFINED, opset)
    sides = ((node.inputs, schema.inputs), (node.outputs, schema.outputs))
    for values, formals in sides:
        for index, value in enumerate(values):
            if value is None or not formals:
                continue
            if formals[min(index, len(formals) - 1)].type_str != constraint:
                continue
            dtype = _element_type(value.type)
            if dtype is None:
                continue
            reason = unsupported(node.op_type, dtype, opset)
            if reason is not None:
                return reason
    return None


def runs_as_function(node: ir.Node, opset: int) -> bool:
    """Whether onnxruntime runs ``node`` at ``opset`` by inlining its ONNX function body.

    onnxruntime falls back to the schema's body where it has no kernel, but
    only to a body written for an opset the model declares (Softsign-1's body
    is for opset 18: a double Softsign runs at 18, not at 17).
    """
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    # (onnx's stubs do not declare these members of the C++ binding)
    versions = [
        *getattr(schema, "function_opset_versions", []),
        *getattr(schema, "context_dependent_function_opset_versions", []),
    ]
    return any(v <= opset for v in versions)


def _element_type(type_: ir.TypeProtocol | None) -> ir.DataType | None:
    """The element type of a tensor, or of a sequence's or optional's tensors; None if unknown."""
    dtype = type_.dtype if type_ is not None else None  # a sequence's is its tensors'
    return None if dtype in (None, ir.DataType.UNDEFINED) else dtype
