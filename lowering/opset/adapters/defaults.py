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


_average_pool_down, _average_pool_up = _make({"dilations": "ones"})


@down("AveragePool", 11, 19)
def average_pool_down(rw, node: ir.Node) -> None:
    """Drop dilations (default: the older behaviour); refuse SAME padding with a stride over the kernel.

    With ``auto_pad = SAME_*`` and a stride larger than the kernel, the
    padding SAME computes is negative where the input is not a multiple of
    the stride (input 2, kernel 1, stride 3: (1 - 1) * 3 + 1 - 2 = -1).
    onnxruntime's AveragePool-19 takes it as no padding; its AveragePool
    before 19 fails ("padding values must be non-negative")::

        AveragePool-19 <auto_pad=SAME_LOWER, kernel=[1], strides=[3]>  -->  refused below 19
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


up("AveragePool", 11, 19)(_average_pool_up)
