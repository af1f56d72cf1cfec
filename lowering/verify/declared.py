"""Each output against its own model's declaration: dtype, rank and dims.

A wrong rewrite can compute the right values under a wrong declaration,
which a consumer trusts. A B that breaks its own declaration fails; one
that only keeps a declaration A breaks too is not blamed (a note).
"""

from __future__ import annotations

import numpy as np
import onnx

from lowering.verify.dtypes import ML_FLOATS
from lowering.verify.ports import Feeds, Port


def declaration_problems(
    inputs: list[Port], outputs: list[Port], feeds: Feeds, results: list
) -> dict[int, str]:
    """Output index -> how the run's value breaks the model's own declaration.

    Symbolic dims are bound by the tensor inputs and then by tensor outputs
    in order; sequence elements must agree with those, but a name that only
    sequences use may take a new size in each element (as the inputs do).
    """
    bound: dict[str, int] = {}
    for port in inputs:
        value = feeds.get(port.name)
        if not port.sequence and port.dims is not None and isinstance(value, np.ndarray):
            for dim, size in zip(port.dims, value.shape, strict=False):
                if isinstance(dim, str):
                    bound.setdefault(dim, size)
    problems = {}
    order = sorted(range(min(len(outputs), len(results))), key=lambda i: outputs[i].sequence)
    for index in order:
        port, value = outputs[index], results[index]
        problem = _declaration_problem(port, value, bound)
        if problem is not None:
            problems[index] = f"{port.declared()} but produced {problem}"
    return problems


def _declaration_problem(port: Port, value, bound: dict[str, int]) -> str | None:
    if value is None:
        return None if port.optional else "nothing (an absent optional)"
    if port.sequence != isinstance(value, list):
        return "a sequence" if isinstance(value, list) else "a tensor"
    elements = value if port.sequence else [value]
    expected = _expected_dtype(port.dtype)
    for i, element in enumerate(elements):
        element = np.asarray(element)
        subject = f"element {i}" if port.sequence else "a tensor"
        if expected is not None and element.dtype != expected:
            return f"{subject} of dtype {element.dtype}"
        problem = _shape_problem(port, element.shape, bound)
        if problem is not None:
            return f"{subject} of shape {list(element.shape)}{problem}"
    return None


def _shape_problem(port: Port, shape: tuple[int, ...], bound: dict[str, int]) -> str | None:
    """What follows "of shape [..]" where ``shape`` breaks the declared dims ("" for a
    plain mismatch), or None; a tensor's symbolic dims are bound as they are met."""
    if port.dims is None:
        return None
    if len(shape) != len(port.dims):
        return f" (rank {len(shape)})"
    for dim, size in zip(port.dims, shape, strict=True):
        if isinstance(dim, int) and dim != size:
            return ""
        if isinstance(dim, str):
            if dim in bound and bound[dim] != size:
                return f", where {dim} = {bound[dim]}"
            if not port.sequence:
                bound[dim] = size
    return None


def _expected_dtype(dtype: int) -> np.dtype | None:
    """The numpy dtype onnxruntime returns for ``dtype``, where that is certain."""
    if dtype == onnx.TensorProto.STRING:
        return np.dtype(object)
    try:
        expected = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return None
    return None if expected.type in ML_FLOATS or expected.kind == "V" else expected


def blame_declarations(rows, label, outputs_a, outputs_b, problems_a, problems_b) -> None:
    """B's broken declarations fail their rows, unless B only kept one that A breaks too."""
    for index, problem in problems_b.items():
        inherited = (
            index in problems_a
            and index < len(outputs_a)
            and outputs_a[index].declared() == outputs_b[index].declared()
        )
        if not inherited and index < len(rows):
            rows[index].fail(f"run {label}: {outputs_b[index].name}: B declares {problem}")
