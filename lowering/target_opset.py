"""Kept for imports: the target-opset machinery lives in :mod:`lowering.opset`."""

from lowering.opset import MIN_OPSET, TargetOpsetPass, lowest_opset

__all__ = ["MIN_OPSET", "TargetOpsetPass", "lowest_opset"]
