"""``--target-opset``: declare another default-domain opset without changing meaning.

- :mod:`.allowlist`: version pairs that differ only in types (relabelled);
- :mod:`.registry` and :mod:`.adapters`: one small adapter per changed pair;
- :mod:`.expand`: ONNX's function bodies for ops newer than the target;
- :mod:`.plan`: converts one node in a sandbox, so nothing changes on failure;
- :mod:`.convert`: the pass.
"""

from lowering.opset import adapters  # noqa: F401  (registers the adapters)
from lowering.opset.convert import MIN_OPSET, TargetOpsetPass, lowest_opset

__all__ = ["MIN_OPSET", "TargetOpsetPass", "lowest_opset"]
