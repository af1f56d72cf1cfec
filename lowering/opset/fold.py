"""Read a value that a short chain of shape ops computes from constants.

torch.onnx writes axes and shapes as small computations rather than
constants: ``ReduceMean(x, Reshape(Constant[1], Constant[-1]))``,
``Reshape(x, Concat(Constant[2], Constant[8]))``. Going below the opset where
such an input became an attribute needs its value. An adapter reads it
through these ops only, whose meaning on small integer tensors is plain,
by the rules of the one constant evaluator
(:mod:`lowering.irutils.static_values`); anything else is "not a constant".
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from lowering.irutils.static_values import evaluate

FOLDED_OPS = frozenset(
    {
        "Identity",
        "Cast",
        "Reshape",
        "Concat",
        "Squeeze",
        "Unsqueeze",
        "Gather",
        "Add",
        "Sub",
        "Mul",
        "Range",
        "Shape",
    }
)


def fold(value: ir.Value | None) -> np.ndarray | None:
    """The value of ``value`` if it is a constant or computed from constants, else None."""
    return evaluate(value, FOLDED_OPS)
