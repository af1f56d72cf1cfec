"""Batching rules of matrix products and matrix ops: MatMul, Gemm, Einsum, Trilu.

MatMul already broadcasts leading dims, so a stack of matrices is a batch
of them; the element's numpy semantics (a vector operand, a rank below the
other's) are kept by unsqueezing after the batch axis. Gemm takes only
matrices, so it becomes MatMul, Mul and Add; Einsum names the batch axis
with a letter its equation does not use::

    MatMul(e, W)         ->   MatMul(E, W)
    Einsum<ij,jk->ik>    ->   Einsum<Zij,jk->Zik>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from lowering.maps.strategies.vectorize.body_values import (
    BodyValue,
    Dims,
    broadcast_dims,
    required,
)
from lowering.maps.strategies.vectorize.family import RuleFamily

if TYPE_CHECKING:
    from lowering.maps.strategies.vectorize.batcher import Batcher

FAMILY = RuleFamily(__name__)


def _matmul_dims(a: Dims, b: Dims) -> Dims:
    va, vb = len(a) == 1, len(b) == 1
    a = (1, *a) if va else a
    b = (*b, 1) if vb else b
    dims = [*broadcast_dims([a[:-2], b[:-2]]), a[-2], b[-1]]
    if vb:
        dims.pop(-1)
    if va:
        dims.pop(-2 if not vb else -1)
    return tuple(dims)


def _batched_matmul(v: Batcher, a: BodyValue, b: BodyValue) -> ir.Value:
    """MatMul with numpy's semantics for the element, on stacks."""
    ra, rb = v.rank(a), v.rank(b)
    if ra == 0 or rb == 0:
        raise v.decline("MatMul of a scalar")
    A, B = a.value, b.value
    if a.batched and b.batched:
        squeeze = []
        if ra == 1:  # [n, k] -> [n, 1, k]
            A, ra = v.unsqueeze(A, [1]), 2
            squeeze.append(-2)
        if rb == 1:  # [n, k] -> [n, k, 1]
            B, rb = v.unsqueeze(B, [2]), 2
            squeeze.append(-1)
        top = max(ra, rb)
        out = v.op("MatMul", [v.lift_value(A, ra, top), v.lift_value(B, rb, top)])
        if squeeze:
            out = v.squeeze(out, sorted(top + 1 + s for s in squeeze))
        return out
    if a.batched:
        if ra == 1 and rb > 2:  # a vector against a stack of matrices
            A = v.lift_value(v.unsqueeze(A, [1]), 2, rb)
            return v.squeeze(v.op("MatMul", [A, B]), [rb - 1])
        if ra >= 2 and rb > ra:
            A = v.lift_value(A, ra, rb)
        return v.op("MatMul", [A, B])
    if rb == 1:
        if ra == 1:  # a dot product is symmetric
            return v.op("MatMul", [B, A])
        B = v.lift_value(v.unsqueeze(B, [2]), 2, ra)
        return v.squeeze(v.op("MatMul", [A, B]), [ra])
    if ra > rb:
        B = v.lift_value(B, rb, ra)
    return v.op("MatMul", [A, B])


@FAMILY.rule("MatMul")
def _matmul(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    a, b = required(args)
    out = _batched_matmul(v, a, b)
    return [BodyValue(out, _matmul_dims(v.dims(a), v.dims(b)), True)]


@FAMILY.rule("Gemm")
def _gemm(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """alpha * A' B' + beta * C, as MatMul, Mul and Add: Gemm takes only matrices."""
    a, b = required(args, 2)
    c = args[2] if len(args) > 2 else None
    attrs = node.attributes
    alpha, beta = attrs.get_float("alpha", 1.0), attrs.get_float("beta", 1.0)
    if c is None or beta == 0.0:
        c = None
    dtype = a.dtype or b.dtype
    if (alpha != 1.0 or (c is not None and beta != 1.0)) and dtype is None:
        raise v.decline("alpha or beta is not 1 and the element type is unknown")
    out, rows, cols = _gemm_product(v, a, b, node)
    out = _scaled(v, out, alpha, dtype)
    if c is not None:
        bias = _scaled(v, c.value, beta, dtype)
        if c.batched:
            bias = v.lift_value(bias, v.rank(c), 2)
        out = v.op("Add", [out, bias])
    batched = a.batched or b.batched or (c is not None and c.batched)
    return [BodyValue(out, (rows, cols), batched)]


def _gemm_product(
    v: Batcher, a: BodyValue, b: BodyValue, node: ir.Node
) -> tuple[ir.Value, int | None, int | None]:
    """A' B', each operand a matrix (or a stack of them) transposed where Gemm
    says; and the product's rows and columns."""
    attrs = node.attributes
    operands = []
    for info, flag in ((a, "transA"), (b, "transB")):
        if v.rank(info) != 2:
            raise v.decline("Gemm takes matrices")
        value = info.value
        if attrs.get_int(flag, 0):
            value = v.op("Transpose", [value], {"perm": [0, 2, 1] if info.batched else [1, 0]})
        operands.append(BodyValue(value, info.shape, info.batched))
    rows = v.dims(a)[1 if attrs.get_int("transA", 0) else 0]
    cols = v.dims(b)[0 if attrs.get_int("transB", 0) else 1]
    if a.batched or b.batched:
        return _batched_matmul(v, operands[0], operands[1]), rows, cols
    return v.op("MatMul", [operands[0].value, operands[1].value]), rows, cols


def _scaled(v: Batcher, value: ir.Value, factor: float, dtype: ir.DataType | None) -> ir.Value:
    """``value`` times ``factor`` (Gemm's alpha or beta), where it is not 1."""
    if factor == 1.0:
        return value
    assert dtype is not None, "_gemm declines a factor of an unknown type"
    return v.op("Mul", [value, v.const(factor, dtype.numpy())])


@FAMILY.rule("Einsum")
def _einsum(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    """A letter the equation does not use names the batch axis of each batched operand."""
    equation = node.attributes.get_string("equation", "").replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    if "..." in equation or not arrow:
        raise v.decline("its equation has an ellipsis or no explicit output")
    terms = inputs.split(",")
    if len(terms) != len(args):
        raise v.decline("its equation does not match its inputs")
    operands = required(args)
    batch = next(
        c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in equation
    )
    batched = [batch + t if a.batched else t for t, a in zip(terms, operands, strict=True)]
    out = v.like(
        node, [a.value for a in operands], equation=f"{','.join(batched)}->{batch}{output}"
    )
    # A letter's size where every operand gives it the same one; the rest
    # (a 1 broadcast against another size, which ONNX misreads) is the
    # proof's (Batcher._record: computed by onnxruntime's rule).
    sizes: dict[str, set[int | None]] = {}
    for term, a in zip(terms, operands, strict=True):
        for letter, d in zip(term, a.shape or (None,) * len(term), strict=False):
            sizes.setdefault(letter, set()).add(d)
    agreed = {letter: got.pop() if len(got) == 1 else None for letter, got in sizes.items()}
    return [BodyValue(out, tuple(agreed.get(c) for c in output), True)]


@FAMILY.rule("Trilu")
def _trilu(v: Batcher, node: ir.Node, args: Sequence[BodyValue | None]) -> list[BodyValue]:
    x = v.only_first_batched(args)
    if v.rank(x) < 2:
        raise v.decline("Trilu takes matrices")
    return [BodyValue(v.like(node, [a.value if a else None for a in args]), x.shape, True)]
