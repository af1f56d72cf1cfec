"""Pad-18's optional ``axes`` input, and Pad-19's ``wrap`` mode.

    Pad-18(x, pads, value)  -->  Pad-13(x, pads, value)

Without ``axes``, ``pads`` covers every axis, as at 13.

``mode = "wrap"`` (torch's circular pad; torch 2.13 writes it at opset 18
too, where Pad-18 does not define it) with constant pads is written, axis
by axis, with ops every opset has. Where the axis's size ``d`` is static and
no pad exceeds it, the ends are Slices of the other side::

    x = [a b c d], pads (2, 1)   -->   Concat(Slice(x, d-2, d), x, Slice(x, 0, 1))
                                        = [c d | a b c d | a]

otherwise (a symbolic ``d``, or pads longer than it, which wrap round again)
a Gather at the indices ``Range(-begin, d + end) mod d``, which is the same
tensor. A negative pad with ``wrap`` is declined: onnxruntime crops first and
wraps the rest, where ONNX's reference refuses it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.opset.registry import Decline, down, up


@down("Pad", 13, 18)
def every_axis(rw, node: ir.Node) -> None:
    """Pad without an axes input: the same op (a "wrap" torch wrote at 18: unwrapped)."""
    mode = node.attributes.get("mode")
    if mode is not None and mode.as_string() == "wrap":
        # torch 2.13 writes a circular pad at opset 18 as Pad-18 mode="wrap",
        # a mode only Pad-19 defines; onnxruntime runs it as Pad-19's wrap,
        # and no Pad below 19 may keep it (onnxruntime 1.14 refuses it).
        unwrap(rw, node)
        return
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        raise Decline("its axes input is new in Pad-18")
    if len(node.inputs) > 3:
        node.resize_inputs(3)


@up("Pad", 13, 18)
def no_axes(rw, node: ir.Node) -> None:
    """Pad-13 has no axes input: Pad-18 without one pads every axis."""


@down("Pad", 18, 19)
def unwrap(rw, node: ir.Node) -> None:
    """Keep any mode Pad-18 has; mode "wrap" -> Slice + Concat (or Gather) per axis."""
    attr = node.attributes.get("mode")
    if attr is None or attr.as_string() != "wrap":
        return
    x = node.inputs[0]
    pads = _wrap_pads(rw, node)
    assert x is not None, "_wrap_pads declines a Pad without data"
    half = pads.size // 2
    result = x
    for index, axis in enumerate(_wrap_axes(rw, node, x, half)):
        begin, end = int(pads[index]), int(pads[index + half])
        if begin or end:
            result = _wrap_axis(rw, result, axis, begin, end, x)
    rw.reroute(node.outputs[0], result)
    rw.remove(node)


def _wrap_pads(rw, node: ir.Node) -> np.ndarray:
    """The constant pads, none negative (runtimes read a negative wrap differently)."""
    pads = rw.constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if node.inputs[0] is None or pads is None or pads.ndim != 1 or pads.size % 2:
        raise Decline('mode="wrap" with computed pads')
    if (pads < 0).any():
        raise Decline('mode="wrap" with a negative pad, which runtimes read differently')
    return pads


def _wrap_axes(rw, node: ir.Node, x: ir.Value, half: int) -> list[int]:
    """The axes the pads are for: the constant axes input, else every axis."""
    rank = rw.rank(x)
    operand = node.inputs[3] if len(node.inputs) > 3 else None
    if operand is not None:
        axes = rw.constant(operand)
        if axes is None or rank is None:
            raise Decline('mode="wrap" with computed axes, or of an input of unknown rank')
        chosen = [int(a) + rank if a < 0 else int(a) for a in axes.reshape(-1)]
    else:
        chosen = list(range(half))
    if len(chosen) != half or (rank is not None and rank != half and operand is None):
        raise Decline('mode="wrap" with pads that do not match the rank')
    return chosen


@up("Pad", 18, 19)
def same_modes(rw, node: ir.Node) -> None:
    """Every mode Pad-18 takes means the same in Pad-19."""


def _typed(made: ir.Node, like: ir.Value | None = None) -> ir.Value:
    output = made.outputs[0]
    dtype = like.dtype if like is not None else ir.DataType.INT64
    if dtype is not None:
        output.dtype = dtype
    return output


def _wrap_axis(rw, x: ir.Value, axis: int, begin: int, end: int, source: ir.Value) -> ir.Value:
    """``x`` padded by wrapping along ``axis``; ``source`` is the Pad's input (whose dims it has)."""
    shape = source.shape
    dim = shape[axis] if shape is not None and axis < len(shape) else None
    axes = rw.const(np.array([axis], np.int64))
    if isinstance(dim, int) and begin <= dim and end <= dim:
        parts = []
        if begin:
            starts, ends = (
                rw.const(np.array([dim - begin], np.int64)),
                rw.const(np.array([dim], np.int64)),
            )
            parts.append(_typed(rw.op("Slice", [x, starts, ends, axes]), source))
        parts.append(x)
        if end:
            starts, ends = rw.const(np.array([0], np.int64)), rw.const(np.array([end], np.int64))
            parts.append(_typed(rw.op("Slice", [x, starts, ends, axes]), source))
        return _typed(rw.op("Concat", parts, {"axis": axis}), source)
    size = _typed(rw.op("Shape", [x]))
    d = _typed(rw.op("Gather", [size, rw.const(np.array(axis, np.int64))]))
    stop = _typed(rw.op("Add", [d, rw.const(np.array(end, np.int64))]))
    one = rw.const(np.array(1, np.int64))
    at = _typed(rw.op("Range", [rw.const(np.array(-begin, np.int64)), stop, one]))
    # Max(d, 1): an empty axis gives an index out of range (an error), not a division by 0.
    divisor = _typed(rw.op("Max", [d, one]))
    wrapped = _typed(rw.op("Mod", [at, divisor]))
    return _typed(rw.op("Gather", [x, wrapped], {"axis": axis}), source)
