"""The one way the package (and its tests and scripts) opens an onnxruntime session.

Nothing is left to onnxruntime's defaults that depend on the machine or
trade accuracy for speed: one intra-op and one inter-op thread, sequential
execution, no flushing of denormals to zero, no GELU approximation, no
bfloat16 GEMM (arm64). A verdict, a test or a table then reads the same on
a 2-core CI machine and a 64-core server, with or without AVX512-BF16.
The graph optimizations are stated (all by default: its fusions compute
the same function; the one that approximates is off) and can be turned
off, for a run that must not fold Shape from ONNX's shape inference.
"""

from __future__ import annotations

import os
from typing import Any

#: The threads a session computes on.
THREADS = 1

#: Session config keys that trade accuracy for speed, each set to "0".
ACCURACY_KEYS = (
    "session.set_denormal_as_zero",
    "optimization.enable_gelu_approximation",
    "mlas.enable_gemm_fastmath_arm64_bfloat16",
)


def session_options(*, optimize: bool = True, log_severity: int = 3) -> Any:
    """Pinned ``onnxruntime.SessionOptions`` (onnxruntime is imported only here)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = log_severity
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = THREADS
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimize
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    for key in ACCURACY_KEYS:
        options.add_session_config_entry(key, "0")
    return options


def open_session(
    source: bytes | str | os.PathLike[str], *, optimize: bool = True, log_severity: int = 3
) -> Any:
    """A CPU session for a serialized model or a model file, with :func:`session_options`."""
    import onnxruntime as ort

    model = source if isinstance(source, bytes) else os.fspath(source)
    options = session_options(optimize=optimize, log_severity=log_severity)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
