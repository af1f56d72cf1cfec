"""Attributes a newer version added, whose default is the older behaviour.

Going down, such an attribute is dropped when it has its default (or, for
the ones that only act on types the older version lacks, whatever its value:
the type check then rejects those types). Going up nothing changes: the new
attribute is absent, so it takes its default, the old behaviour::

    ArgMax-13 <select_last_index=0>  -->  ArgMax-11
    ReduceMean-18 <noop_with_empty_axes=0> ... (see axes_inputs)
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.opset.registry import Decline, down, up

# (ops, old, new): {attribute: default, or None when any value only concerns new types}
_ADDED: dict[tuple[tuple[str, ...], int, int], dict[str, object]] = {
    (("ArgMax", "ArgMin"), 11, 12): {"select_last_index": 0},
    (("GatherND",), 11, 12): {"batch_dims": 0},
    (("LpPool",), 11, 18): {"dilations": "ones", "ceil_mode": 0},
    (("Cast",), 13, 19): {"saturate": None},
    (("CastLike",), 15, 19): {"saturate": None},
    (("Cast", "CastLike"), 23, 24): {"round_mode": None},
    (("QuantizeLinear",), 13, 19): {"saturate": None},
    (("QuantizeLinear",), 19, 21): {"block_size": 0, "output_dtype": 0},
    (("DequantizeLinear",), 19, 21): {"block_size": 0},
    (("ScatterND", "ScatterElements"), 13, 16): {"reduction": "none"},
}


def _is_default(attr: ir.Attr, default) -> bool:
    if default is None:
        return True
    if default == "ones":
        return all(v == 1 for v in attr.as_ints())
    return attr.value == default


def _make(added: dict[str, object]):
    def drop_defaults(rw, node: ir.Node) -> None:
        """Drop the newer attributes, which have their defaults."""
        for name, default in added.items():
            attr = node.attributes.get(name)
            if attr is not None and not _is_default(attr, default):
                raise Decline(f"{name}={attr.value!r} has no equivalent in the older version")
        for name in added:
            node.attributes.pop(name, None)

    def nothing(rw, node: ir.Node) -> None:
        """The new attributes are absent, so their defaults give the old behaviour."""

    return drop_defaults, nothing


for (_ops, _old, _new), _added in _ADDED.items():
    _down, _up = _make(_added)
    _down.__doc__ = f"Drop {', '.join(_added)} (defaults: the older behaviour)."
    down(_ops, _old, _new)(_down)
    up(_ops, _old, _new)(_up)


_average_pool_down, _ = _make({"dilations": "ones"})


def _average_pool_pads(node: ir.Node) -> list[int]:
    """The explicit pads (begins, then ends); zeros for VALID, and for SAME (which pads itself)."""
    rank = len(node.attributes.get_ints("kernel_shape", []))
    if node.attributes.get_string("auto_pad", "NOTSET") != "NOTSET":
        return [0] * (2 * rank)
    return list(node.attributes.get_ints("pads", [0] * (2 * rank)))


def _average_pool_window_over_input(node: ir.Node) -> str | None:
    """Why onnxruntime's AveragePool-11 and -19 may average a window differently; None: they agree.

    With ``ceil_mode = 0`` and ``count_include_pad = 1``, an axis whose padded
    size is under the kernel (``d + pads < k``, ``d >= 1``; VALID pads
    nothing) has no window to ONNX, but one to onnxruntime: its -11 kernel
    divides that window's sum by the kernel size, its -19 kernel by the
    window clipped to the padded input. An unknown size is taken as 1, its
    least that can differ (an empty axis gives the same in both); SAME pads
    the input to a kernel's length at least::

        AveragePool <auto_pad=VALID, kernel=[2], count_include_pad=1> on [x]
            onnxruntime -19: [x]   -11: [x / 2]
    """
    if (
        node.attributes.get_string("auto_pad", "NOTSET") not in ("NOTSET", "VALID")
        or node.attributes.get_int("ceil_mode", 0) != 0
        or node.attributes.get_int("count_include_pad", 0) == 0
    ):
        return None
    kernel = node.attributes.get_ints("kernel_shape", [])
    rank = len(kernel)
    dilations = node.attributes.get_ints("dilations", [1] * rank)
    pads = _average_pool_pads(node)
    shape = node.inputs[0].shape if node.inputs and node.inputs[0] is not None else None
    dims = list(shape)[2:] if shape is not None and len(shape) == rank + 2 else [None] * rank
    for axis, (k, d) in enumerate(zip(kernel, dilations)):
        dim = dims[axis]
        if dim == 0:
            continue
        size = dim if isinstance(dim, int) else 1
        if size + pads[axis] + pads[axis + rank] < (k - 1) * d + 1:
            known = f"size {dim}" if isinstance(dim, int) else "a size not known"
            return (
                f"count_include_pad=1 with spatial axis {axis} ({known}) padded under the "
                f"kernel ({k}): onnxruntime's AveragePool-11 and -19 average that window "
                "differently"
            )
    return None


@down("AveragePool", 11, 19)
def average_pool_down(rw, node: ir.Node) -> None:
    """Drop dilations (default: the older behaviour); refuse SAME padding with a stride over the kernel.

    With ``auto_pad = SAME_*`` and a stride larger than the kernel, the
    padding SAME computes is negative where the input is not a multiple of
    the stride (input 2, kernel 1, stride 3: (1 - 1) * 3 + 1 - 2 = -1).
    onnxruntime's AveragePool-19 takes it as no padding; its AveragePool
    before 19 fails ("padding values must be non-negative")::

        AveragePool-19 <auto_pad=SAME_LOWER, kernel=[1], strides=[3]>  -->  refused below 19

    Where a window may overhang the padded input
    (:func:`_average_pool_window_over_input`) with no pads, -19 divides by
    the input it covers, as -11 does with ``count_include_pad = 0`` (the
    attribute means nothing else without pads); with pads that is refused::

        AveragePool-19 <auto_pad=VALID, kernel=[2], count_include_pad=1>
            -->  AveragePool-11 <auto_pad=VALID, kernel=[2], count_include_pad=0>
    """
    auto_pad = node.attributes.get_string("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        kernel = node.attributes.get_ints("kernel_shape", [])
        strides = node.attributes.get_ints("strides", [1] * len(kernel))
        if any(s > k for s, k in zip(strides, kernel)):
            raise Decline(
                f"auto_pad={auto_pad} with a stride over the kernel pads by a negative amount, "
                "which onnxruntime's AveragePool before 19 refuses"
            )
    _average_pool_down(rw, node)
    reason = _average_pool_window_over_input(node)
    if reason is not None:
        if any(_average_pool_pads(node)):
            raise Decline(reason)
        node.attributes["count_include_pad"] = ir.AttrInt64("count_include_pad", 0)


@up("AveragePool", 11, 19)
def average_pool_up(rw, node: ir.Node) -> None:
    """Nothing to change (no dilations: the old behaviour), save a window over the padded input.

    There -11 divides by the whole kernel, which -19 has no way to say
    (:func:`_average_pool_window_over_input`): refused.
    """
    reason = _average_pool_window_over_input(node)
    if reason is not None:
        raise Decline(reason)
