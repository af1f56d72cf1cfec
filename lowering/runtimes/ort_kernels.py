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
The kernel table (:mod:`lowering.runtimes.ort_kernel_table`) is generated from
onnxruntime's own registry by ``scripts/ort_kernel_table.py`` and
committed, so the output does not depend on what is installed beside it.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.runtimes.ort_kernel_table import KERNELS, ONNXRUNTIME_VERSION

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
    types = next((types for since, until, types in spans if since <= opset <= until), None)
    if types is None:
        return f"onnxruntime {ONNXRUNTIME_VERSION} has no {op_type} kernel at opset {opset}"
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        if SEQUENCE_ELEMENT_TYPES <= types:
            return None
        return f"the element type is unknown, and onnxruntime's {op_type} takes only some types"
    if type_name(dtype) not in types:
        return f"onnxruntime {ONNXRUNTIME_VERSION} has no {op_type} kernel for {type_name(dtype)}"
    return None


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
