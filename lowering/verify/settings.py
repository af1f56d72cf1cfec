"""The comparison's defaults, importing nothing: ``--help`` shows them.

:mod:`lowering.verify.tolerance` applies them; they live here so that the
option parsers of ``onnx-lower`` and ``onnx-verify`` import neither onnx
nor numpy's dtype tables to print their defaults.
"""

from __future__ import annotations

#: Relative and absolute tolerance for float32 (and complex64).
RTOL = 1e-4
ATOL = 1e-5
#: Units in the last place for float16, bfloat16 and float8.
ULPS = 8
#: Units in the last place for float64 (and complex128), of max(|b|, 1):
#: 2**24 of float64's 2**-52 is 2**-28, 16 times finer than one rounding to
#: float32, so a float64 result computed in float32 does not pass.
FLOAT64_ULPS = 2**24
#: An output whose mean error is more than one ulp of a narrow float, or this
#: share of the float32 or float64 tolerance (over at least BIAS_MIN finite
#: elements, and clearly not noise), is biased: a mismatch, though every
#: element is within tolerance.
BIAS_SHARE = 1 / 8
BIAS_MIN = 8
#: The least time one run of a model is given, in seconds (``--timeout``).
TIMEOUT = 10.0
#: A run of B is given this many times A's own time on the same inputs, when
#: that is more than the timeout; a run of A this many times its slowest run so far.
TIME_SCALE = 10

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
