"""The options' names and defaults, importing nothing: what ``--help`` needs.

``onnx-lower --help`` and ``--version`` build the whole parser, and its
choices and defaults live here so that building it imports neither onnx
nor onnx_ir (each takes longer to import than the help takes to print).
:mod:`lowering.options` checks options against these, and
:mod:`lowering.runtimes.profiles` keeps one profile for each runtime named here.
"""

from __future__ import annotations

#: How each map is lowered: "auto" picks the fastest correct form, "loop" the general one.
STRATEGIES: tuple[str, ...] = ("auto", "loop")
#: The longest static length "auto" unrolls.
DEFAULT_MAX_UNROLL = 16
#: The oldest default-domain opset the output can declare (SequenceInsert is from 11).
MIN_OPSET = 11
#: The runtimes the output can be for (:mod:`lowering.runtimes.profiles`).
RUNTIME_NAMES: tuple[str, ...] = (
    "onnxruntime",
    "openvino",
    "tract",
    "mnn",
    "tvm",
    "tinygrad",
    "iree",
    "generic",
)
DEFAULT_RUNTIME = "onnxruntime"
