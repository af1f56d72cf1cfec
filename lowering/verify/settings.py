"""The comparison's default tolerances, importing nothing: ``--help`` shows them.

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
#: The least time one run of a model is given, in seconds (``--timeout``).
TIMEOUT = 10.0
#: A run of B is given this many times A's own time on the same inputs, when
#: that is more than the timeout; a run of A this many times its slowest run so far.
TIME_SCALE = 10
