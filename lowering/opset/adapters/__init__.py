"""Adapters, one idea per module; importing this package registers them all."""

from lowering.opset.adapters import (  # noqa: F401
    axes_inputs,
    batch_normalization,
    constant,
    defaults,
    dropout,
    einsum,
    grid_sample,
    minmax,
    modes,
    pad,
    quantize,
    recurrent,
    resize,
    roi_align,
    sequence_identity,
    shape,
    softmax,
    split,
    trilu,
)
