"""The comparison's defaults, importing nothing: ``--help`` shows them.

:mod:`lowering.verify.tolerance` applies them; they live here so that the
option parsers of ``onnx-lower`` and ``onnx-verify`` import neither onnx
nor numpy's dtype tables to print their defaults.
"""

from __future__ import annotations

#: Relative and absolute tolerance for float32/float64.
RTOL = 1e-4
ATOL = 1e-5
#: Units in the last place for float16, bfloat16 and float8.
ULPS = 8

#: ``--runtime`` for verification: where B may run, its runner
#: (:data:`lowering.runtimes.runners.RUNNERS`), the module it needs and the package to
#: install for it.
VERIFY_RUNTIMES: dict[str, tuple[str, str, str] | None] = {
    "onnxruntime": None,
    "openvino": ("OpenVINO", "openvino", "openvino"),
    "tract": ("tract", "tract", "tract"),
    "onnx-reference": ("onnx.reference", "onnx", "onnx"),
    "tvm": ("TVM", "tvm", "apache-tvm"),
    "tinygrad": ("tinygrad", "tinygrad", "tinygrad"),
    "mnn": ("MNN", "MNN", "MNN"),
}
