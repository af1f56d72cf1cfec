"""The passes of the pipeline (:mod:`lowering.steps`), one per module.

Each is an ``onnx_ir`` in-place pass, valid on its own: it plans and checks
before it changes anything, names what it creates, and returns what it
rewrote in its :class:`~lowering.rewrites.LoweringResult`.
"""
