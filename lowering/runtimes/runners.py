"""Run one ONNX model in one real runtime: the runners of ``--verify --runtime``
and of the runtime matrix (scripts/runtime_matrix.py).

Each runner takes a model file and the graph's inputs in order and returns
the graph's outputs in order as numpy arrays, or raises the runtime's own
error. The runtimes are optional (the ``runtimes`` test extra and
``scripts/runtime_matrix.py``'s own setup): a runner imports its runtime
only when called.

Some runtimes crash the process on models they cannot handle (MNN's
converter segfaults on some graphs), so :func:`run_many` runs runners in
a child process (``python -m lowering.runtimes.runners RUNTIME JOB...``) and
turns a crash into an error.

No runner leaves its results to a runtime's defaults for precision or
threads, which depend on the machine: OpenVINO's CPU plugin, left to
itself, infers in bfloat16 on a CPU with AVX512-BF16 or AMX, off from
numpy by about 1e-2 (:func:`lowering.runtimes.child.compile_openvino`). Each runtime that has a
setting for them runs in float32 on one thread (:data:`THREADS`).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

import numpy as np
import onnx

from lowering.runtimes import releases
from lowering.runtimes.child import load_values, run_openvino, save_values, serve
from lowering.runtimes.sessions import THREADS, open_session

Runner = Callable[[pathlib.Path, Sequence[np.ndarray]], list[np.ndarray]]


def run_onnxruntime(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    session = open_session(path)
    names = [i.name for i in session.get_inputs()]
    return [np.asarray(v) for v in session.run(None, dict(zip(names, inputs)))]


def run_onnx_reference(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(str(path))
    return [np.asarray(v) for v in evaluator.run(None, dict(zip(evaluator.input_names, inputs)))]


def run_tract(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """tract, as loaded; told the inputs' shapes only where an output needs them.

    A shape computed from a symbolic dim comes back as a TDim that still
    names the symbol ("Undetermined symbol in expression: N"): tract's
    Python API does not bind it from the inputs. Told concrete input shapes,
    tract instead fails to unify them with symbols in the model's
    value_info, so the runner tells it only on that error. tract has no
    precision or thread setting to pin: it computes float32 as float32 unless
    a model is transformed to float16, and on the calling thread.
    """
    import tract

    def run(concrete: bool) -> list[np.ndarray]:
        model = tract.onnx().load(str(path))
        for number, x in enumerate(inputs) if concrete else ():
            x = np.asarray(x)
            model.set_input_fact(number, ",".join([*map(str, x.shape), _TRACT_TYPES[x.dtype.name]]))
        runnable = model.into_model().into_runnable()
        return [_tract_array(tract, t) for t in runnable.run(list(inputs))]

    try:
        return run(concrete=False)
    except tract.TractError as error:
        if "Undetermined symbol" not in str(error):
            raise
        return run(concrete=True)


_TRACT_TYPES = {
    "float32": "f32",
    "float64": "f64",
    "int64": "i64",
    "int32": "i32",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
}


def _tract_array(tract, tensor) -> np.ndarray:
    """tract computes shapes as TDim, which its Python API cannot export: as int64."""
    try:
        return tensor.to_numpy()
    except tract.TractError as error:
        if "TDim" not in str(error):
            raise
        return tensor.convert_to(tract.tensor.DatumType.I64).to_numpy()


def run_tvm(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TVM Relax: the ONNX frontend, built for llvm and run on the CPU by Relax's VM.

    Nothing left to a default that depends on the CPU: the target is plain
    ``llvm`` (no ``-mcpu``, no fast-math), and Relax's default CPU pipeline
    schedules no parallel loop, so no thread count enters.
    """
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(str(path))
    names = [i.name for i in model.graph.input if i.name not in _initializer_names(model)]
    shapes = {name: list(x.shape) for name, x in zip(names, inputs)}
    dtypes = {name: str(np.asarray(x).dtype) for name, x in zip(names, inputs)}
    module = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
    module = relax.transform.DecomposeOpsForInference()(module)
    machine = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
    result = machine["main"](*(tvm.runtime.tensor(np.array(x, order="C")) for x in inputs))
    return _flatten_tvm(result)


def _flatten_tvm(result) -> list[np.ndarray]:
    if hasattr(result, "numpy"):
        return [result.numpy()]
    if isinstance(result, int):  # a scalar computed from a shape comes back as a PrimValue
        return [np.array(result, np.int64)]
    items = list(result)
    if all(isinstance(item, int) for item in items):  # a Shape output comes back as ShapeTuple
        return [np.array(items, np.int64)]
    return [array for item in items for array in _flatten_tvm(item)]


def _initializer_names(model: onnx.ModelProto) -> set[str]:
    return {i.name for i in model.graph.initializer}


def run_tinygrad(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """tinygrad's own ONNX runner (``tinygrad.nn.onnx``).

    On its CPU device, which compiles with clang; where there is no clang
    (a CI machine with only pip), on its PYTHON device, which interprets
    the same kernels: slow, but the same results. Whatever the environment
    says, in float32 (DEFAULT_FLOAT, no FLOAT16), with kernels chosen
    without timing them (no BEAM search), split over :data:`THREADS`
    threads on the CPU device.
    """
    from tinygrad.helpers import Context

    device = os.environ.get("DEV") or ("CPU" if shutil.which("clang") else "PYTHON")
    pinned = {"DEFAULT_FLOAT": "float32", "FLOAT16": 0, "BEAM": 0, "NUM_CPU_THREADS": THREADS}
    with Context(DEV=device, **pinned):
        # Imported here: tinygrad.nn.onnx makes tensors as it is imported, on the
        # default device, and without clang there is none unless DEV names one.
        from tinygrad.nn.onnx import OnnxRunner

        runner = OnnxRunner(path)
        results = runner(dict(zip(runner.graph_inputs, inputs)))
        return [_tinygrad_array(value, device) for value in results.values()]


def _tinygrad_array(value, device: str) -> np.ndarray:
    """As numpy; a tensor on no device (a constant, such as a 0-d input passed
    through) is put on ``device`` first: tinygrad reads one out through its
    CPU device, which needs clang."""
    if hasattr(value, "numpy"):
        if value.device is None:
            value = value.clone(device)
        return value.numpy()
    if isinstance(value, list):
        raise TypeError(f"tinygrad returned a sequence of {len(value)} tensors")
    return np.asarray(value)


def run_mnn(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """MNN: its converter called directly, then MNN's Python module API.

    Not the ``mnnconvert`` console script: that wrapper pip-installs a
    telemetry package at run time, which can break protobuf. The CPU
    backend's settings are stated, not left to MNN's defaults: precision
    high (the default is normal), on :data:`THREADS` threads.
    """
    import _tools  # MNN's converter, shipped in the MNN wheel
    from MNN import expr, nn

    model = onnx.load(str(path))
    input_names = [i.name for i in model.graph.input if i.name not in _initializer_names(model)]
    output_names = [o.name for o in model.graph.output]
    converted = path.with_suffix(".mnn")
    args = ["mnnconvert", "-f", "ONNX", "--modelFile", str(path), "--MNNModel", str(converted)]
    if not _tools.mnnconvert([*args, "--bizCode", "lowering"]) or not converted.exists():
        raise RuntimeError("MNN converter: conversion failed")
    runtime = nn.create_runtime_manager(
        ({"backend": "CPU", "precision": "high", "numThread": THREADS},)
    )
    module = nn.load_module_from_file(
        str(converted),
        input_names,
        output_names,
        runtime_manager=runtime,
        precision_mode=expr.PrecisionMode.High,
        thread_num=THREADS,
    )
    if module is None:
        raise RuntimeError("MNN: could not load the converted model")
    feeds = [_mnn_const(expr, np.asarray(x)) for x in inputs]
    outputs = module.forward(feeds)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    if len(outputs) != len(output_names):  # (MNN 3.6 returns none after a failed op)
        raise RuntimeError(f"MNN: {len(outputs)} outputs, not {len(output_names)}")
    return [_mnn_array(expr, o) for o in outputs]


def _mnn_array(expr, value) -> np.ndarray:
    """An MNN result as numpy; ``read()`` raises on an empty one, whose shape MNN
    reports right (MNN 3.6.1)."""
    if 0 in value.shape:
        kinds = {expr.float: np.float32, expr.int: np.int32, expr.uint8: np.uint8}
        return np.zeros(value.shape, kinds.get(value.dtype, np.float32))
    return np.array(value.read()).reshape(value.shape)


def _mnn_const(expr, array: np.ndarray):
    kinds = {np.dtype(np.float32): expr.float, np.dtype(np.int32): expr.int}
    if array.dtype == np.int64:
        array = array.astype(np.int32)  # MNN computes integers as int32
    if array.dtype not in kinds:
        raise TypeError(f"MNN runner: no input of dtype {array.dtype}")
    return expr.const(array.flatten().tolist(), list(array.shape), expr.NCHW, kinds[array.dtype])


#: Column name -> runner, in the matrix's column order.
RUNNERS: dict[str, Runner] = {
    "onnxruntime": run_onnxruntime,
    "onnx.reference": run_onnx_reference,
    "OpenVINO": run_openvino,
    "tract": run_tract,
    "TVM": run_tvm,
    "tinygrad": run_tinygrad,
    "MNN": run_mnn,
}


class RuntimeFailure(Exception):
    """The runtime refused the model, failed while running it, or crashed."""


def run_many(
    runtime: str,
    jobs: Sequence[tuple[pathlib.Path, Sequence[np.ndarray]]],
    timeout: float = 300,
) -> list[list[np.ndarray] | RuntimeFailure]:
    """Run each (model, inputs) job in one child process, restarted after a crash.

    ``runtime`` is a column of :data:`RUNNERS`, or of
    :data:`lowering.runtimes.releases.RELEASES` (a release of onnxruntime or
    OpenVINO, whose child runs in that release's venv: ReleaseNotBuilt where it is not
    built, saying which command builds it). One child
    runs the jobs in order (a runtime's import costs seconds, so
    not one child per job) and leaves each job's answer in its own folder;
    when it crashes or hangs, the job it was on fails and a fresh child goes
    on with the next.
    """
    results: list[list[np.ndarray] | RuntimeFailure] = []
    with tempfile.TemporaryDirectory() as folder:
        folders = []
        for number, (path, inputs) in enumerate(jobs):
            job = pathlib.Path(folder) / str(number)
            job.mkdir()
            save_values(job / "inputs.npz", inputs)
            (job / "model").write_text(str(path))
            folders.append(job)
        root = pathlib.Path(__file__).resolve().parent.parent
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        }
        if runtime in releases.RELEASES:
            command = releases.child_command(releases.RELEASES[runtime])
        else:
            command = [sys.executable, "-m", "lowering.runtimes.runners", runtime]
        while len(results) < len(folders):
            pending = folders[len(results) :]
            try:
                subprocess.run(
                    [*command, *map(str, pending)],
                    check=False,
                    capture_output=True,
                    timeout=timeout * len(pending),
                    env=env,
                )
            except subprocess.TimeoutExpired:
                pass
            for job in pending:
                if not (job / "result.json").exists():
                    break
                results.append(_read_result(job))
            if len(results) < len(folders):
                job = folders[len(results)]
                log = (job / "log.txt").read_text() if (job / "log.txt").exists() else ""
                tail = " ".join(log.split()[-30:])
                results.append(RuntimeFailure(f"crashed or hung: {tail}"))
    return results


def _read_result(job: pathlib.Path) -> list[np.ndarray] | RuntimeFailure:
    answer = json.loads((job / "result.json").read_text())
    if "error" in answer:
        log = (job / "log.txt").read_text(errors="replace")
        said = [line for line in log.splitlines() if "Not Support" in line]
        return RuntimeFailure(" ".join([answer["error"], *said]))
    outputs = load_values(job / "outputs.npz")
    assert len(outputs) == answer["outputs"], job
    return outputs


def _child(runtime: str, jobs: list[str]) -> None:
    """Serve the jobs with ``runtime``'s runner (:func:`lowering.runtimes.child.serve`)."""
    serve(RUNNERS[runtime], jobs)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
