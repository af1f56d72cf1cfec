"""The runners of ``lowering/runtimes/runners.py`` leave no result to a runtime's defaults.

A runtime's default precision or thread count can depend on the CPU: on a
CPU with AVX512-BF16 or AMX, OpenVINO's CPU plugin infers in bfloat16
unless told otherwise, which puts a dot product of 512 float32 values off by
0.5 here. So the runners pin float32 and one thread where a runtime has a
setting for them; these tests read the settings back from the compiled
model or session, and run a dot product that bfloat16 gets wrong in every
installed runtime, as the scripts run them (in a child process). The
runtimes are optional (the ``runtimes`` test extra): a test of one that is
not installed skips.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest

from lowering.runtimes.child import compile_openvino
from lowering.runtimes.runners import RUNNERS, THREADS, RuntimeFailure, run_many
from lowering.runtimes.sessions import open_session

#: Column of the runtime matrix -> the module its runner imports.
MODULES = {
    "onnxruntime": "onnxruntime",
    "onnx.reference": "onnx.reference",
    "OpenVINO": "openvino",
    "tract": "tract",
    "TVM": "tvm",
    "tinygrad": "tinygrad",
    "MNN": "MNN",
}

N = 512
DOT = onnx.parser.parse_model(
    f"""<ir_version: 8, opset_import: ["" : 18]>
    g (float[1,{N}] x, float[{N},1] w) => (float[1,1] y) {{
      y = MatMul (x, w)
    }}"""
)
#: x[i] = 1 + (i % 4) / 512 and w[i] = (-1)**i: the ones cancel and the dot
#: product is -0.5, exactly, in float32 (every partial sum is a multiple of
#: 1/512 below 2**10). In bfloat16 (8 significant bits) 1 + 1/512 and
#: 1 + 2/512 round to 1 and 1 + 3/512 to 1 + 1/128, which makes it -1.
X = (1 + (np.arange(N) % 4) / 512).astype(np.float32).reshape(1, N)
W = np.where(np.arange(N) % 2 == 0, 1, -1).astype(np.float32).reshape(N, 1)
EXPECTED = np.array([[-0.5]], np.float32)


@pytest.fixture
def dot_path(tmp_path: pathlib.Path) -> pathlib.Path:
    onnx.checker.check_model(DOT, full_check=True)
    path = tmp_path / "dot.onnx"
    onnx.save(DOT, path)
    return path


def test_the_expectation_is_exact_in_float32_and_off_in_bfloat16():
    """The oracle itself: float32 gets -0.5 exactly, bfloat16 inputs get -1."""
    assert (X.astype(np.float64) @ W.astype(np.float64)).item() == -0.5
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rounded = X.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (rounded @ W).item() == -1.0


@pytest.mark.slow
@pytest.mark.parametrize("runtime", list(RUNNERS))
def test_a_dot_product_matches_numpy_in_every_runtime(runtime, dot_path):
    pytest.importorskip(MODULES[runtime], reason=f"{runtime} is not installed")
    (result,) = run_many(runtime, [(dot_path, [X, W])])
    assert not isinstance(result, RuntimeFailure), result
    (got,) = result
    np.testing.assert_allclose(np.asarray(got, np.float64), EXPECTED, rtol=0, atol=1e-5)


def test_openvino_compiles_in_float32_at_accuracy_on_the_pinned_threads(dot_path):
    openvino = pytest.importorskip("openvino", reason="OpenVINO is not installed")
    compiled = compile_openvino(dot_path)
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == openvino.Type.f32
    assert str(compiled.get_property("EXECUTION_MODE_HINT")) == "ExecutionMode.ACCURACY"
    assert compiled.get_property("INFERENCE_NUM_THREADS") == THREADS
    assert compiled.get_property("CPU_DENORMALS_OPTIMIZATION") is False


def test_openvino_runner_matches_numpy_in_process(dot_path):
    pytest.importorskip("openvino", reason="OpenVINO is not installed")
    (got,) = RUNNERS["OpenVINO"](dot_path, [X, W])
    np.testing.assert_allclose(np.asarray(got, np.float64), EXPECTED, rtol=0, atol=1e-5)


def test_openvinos_own_default_is_off_on_this_cpu_where_it_is_bfloat16(dot_path):
    """That the tests above can fail: where the plugin's default is bfloat16,
    compiling without the pinned settings gets the dot product wrong."""
    openvino = pytest.importorskip("openvino", reason="OpenVINO is not installed")
    core = openvino.Core()
    if core.get_property("CPU", "INFERENCE_PRECISION_HINT") != openvino.Type.bf16:
        pytest.skip("OpenVINO's CPU plugin defaults to float32 on this CPU")
    compiled = core.compile_model(str(dot_path), "CPU")
    got = np.asarray(compiled([X, W])[compiled.outputs[0]])
    assert abs(got.item() - EXPECTED.item()) > 1e-3


def test_onnxruntime_sessions_are_pinned(dot_path):
    pytest.importorskip("onnxruntime")
    options = open_session(dot_path).get_session_options()
    assert options.intra_op_num_threads == THREADS
    assert options.inter_op_num_threads == THREADS
    for key in (
        "session.set_denormal_as_zero",
        "optimization.enable_gelu_approximation",
        "mlas.enable_gemm_fastmath_arm64_bfloat16",
    ):
        assert options.get_session_config_entry(key) == "0", key
