"""``--target-opset``: declare another default-domain opset without changing meaning.

- :mod:`.allowlist`: version pairs that differ only in types (relabelled);
- :mod:`.registry` and :mod:`.adapters`: one small adapter per changed pair;
- :mod:`.expand`: ONNX's function bodies for ops newer than the target;
- :mod:`.plan`: converts one node in a sandbox, so nothing changes on failure.
- :mod:`.library` and :mod:`.library_limits`: below opset 11, onnx.version_converter,
  within what it is known to convert right.

The pass that runs them is :class:`lowering.passes.target_opset.TargetOpsetPass`.
"""
