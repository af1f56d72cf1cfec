"""The child side of :func:`lowering.runtimes.runners.run_many`: one protocol, two pythons.

A job is a folder holding ``model`` (the model file's path, as text) and
``inputs.npz``; the child leaves ``result.json`` (``{"outputs": n}`` or
``{"error": ...}``), ``outputs.npz`` and ``log.txt`` (what the runtime
printed) in it. The package's own runtimes serve jobs through
``python -m lowering.runtimes.runners``; a release of onnxruntime,
OpenVINO or IREE, in a virtual environment that has only numpy and that runtime
(:mod:`lowering.runtimes.releases`), runs this file as a script
(``python child.py RUNTIME JOB...``). So it imports nothing but the
standard library and numpy, and each runtime only in its runner.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from collections.abc import Callable, Sequence

import numpy as np


def save_values(path: pathlib.Path, inputs: Sequence[object]) -> None:
    """A graph's inputs or outputs in order: arrays, or lists of arrays for sequences."""
    arrays: dict[str, np.ndarray] = {}
    for k, value in enumerate(inputs):
        if isinstance(value, list):
            arrays[f"seq_{k}"] = np.asarray(len(value))
            arrays.update({f"seq_{k}_{j}": np.asarray(e) for j, e in enumerate(value)})
        else:
            arrays[f"arr_{k}"] = np.asarray(value)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def load_values(path: pathlib.Path) -> list:
    with np.load(path) as data:
        inputs: list = []
        while True:
            k = len(inputs)
            if f"arr_{k}" in data.files:
                inputs.append(data[f"arr_{k}"])
            elif f"seq_{k}" in data.files:
                inputs.append([data[f"seq_{k}_{j}"] for j in range(int(data[f"seq_{k}"]))])
            else:
                return inputs


def serve(run: Callable[[pathlib.Path, Sequence[np.ndarray]], list], jobs: list[str]) -> None:
    """Run each job folder's model; the runtime's own printing goes to the job's log."""
    for job in map(pathlib.Path, jobs):
        inputs = load_values(job / "inputs.npz")
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(job / "log.txt", "wb") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                outputs = run(pathlib.Path((job / "model").read_text()), inputs)
            except Exception as error:  # noqa: BLE001 -- the error is the answer
                answer: dict[str, object] = {"error": f"{type(error).__name__}: {error}"}
            else:
                save_values(job / "outputs.npz", outputs)
                answer = {"outputs": len(outputs)}
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
        (job / "result.json").write_text(json.dumps(answer))


def _sessions_module():
    """lowering/runtimes/sessions.py loaded by path: the one session factory, everywhere."""
    import importlib.util

    path = pathlib.Path(__file__).with_name("sessions.py")
    spec = importlib.util.spec_from_file_location("_lowering_sessions", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_onnxruntime(path: pathlib.Path, inputs: Sequence[object]) -> list:
    """The installed onnxruntime, whatever its release, with the pinned session options."""
    session = _sessions_module().open_session(path)
    names = [i.name for i in session.get_inputs()]
    outputs = session.run(None, dict(zip(names, inputs)))
    # A sequence output is a list of arrays, and stays one.
    return [[np.asarray(e) for e in o] if isinstance(o, list) else np.asarray(o) for o in outputs]


def openvino_config() -> dict:
    """The CPU plugin's settings that change results, pinned for :func:`compile_openvino`.

    Left to its defaults the plugin infers in bfloat16 wherever the CPU has
    AVX512-BF16 or AMX (INFERENCE_PRECISION_HINT reads bf16 there), may
    trade accuracy for speed elsewhere too (EXECUTION_MODE_HINT PERFORMANCE;
    ACCURACY also turns dynamic quantization off), and runs on every core.
    The same names from OpenVINO 2023.3 on.
    """
    import openvino
    from openvino import properties
    from openvino.properties import hint as hints
    from openvino.properties import intel_cpu

    # Named by string: OpenVINO 2023.3 takes no property object as a key, and
    # crashes on the ExecutionMode enum as a value (its name it takes).
    return {
        hints.inference_precision(): openvino.Type.f32,
        hints.execution_mode(): hints.ExecutionMode.ACCURACY.name,
        properties.inference_num_threads(): _sessions_module().THREADS,
        intel_cpu.denormals_optimization(): False,
    }


def compile_openvino(path: pathlib.Path):
    """``path`` compiled by OpenVINO for its CPU plugin, in float32 on the sessions' threads.

    The runners, and so the scripts that use them, compile through here, so
    that none gets the plugin's defaults (:func:`openvino_config`).
    """
    import openvino

    return openvino.Core().compile_model(str(path), "CPU", openvino_config())


def run_openvino(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Fed by name: releases before 2026 drop the graph inputs that nothing reads."""
    from openvino.frontend import FrontEndManager

    # Each held while it is read: 2023.3 crashes on a place whose frontend is freed.
    manager = FrontEndManager()
    frontend = manager.load_by_framework("onnx")
    read = frontend.load(str(path))
    names = [place.get_names()[0] for place in read.get_inputs()]
    del read, frontend, manager
    compiled = compile_openvino(path)
    kept = {name for port in compiled.inputs for name in port.get_names()}
    results = compiled({n: x for n, x in zip(names, inputs, strict=True) if n in kept})
    return [np.asarray(results[output]) for output in compiled.outputs]


def run_openvino_ep(path: pathlib.Path, inputs: Sequence[object]) -> list:
    """onnxruntime-openvino's OpenVINO execution provider, strict: with CPU fallback
    disabled, a node it does not take fails the session rather than run on the CPU.
    Fed by name, as the session lists its inputs."""
    import onnxruntime as ort

    options = _sessions_module().session_options()
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    session = ort.InferenceSession(str(path), options, providers=["OpenVINOExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = session.run(None, dict(zip(names, inputs, strict=True)))
    return [np.asarray(o) for o in outputs]


#: This child's IREE modules, by the sha256 of the model file: a compile takes about
#: a second, and the tests run one model on several inputs, each a job of its own.
_IREE_MODULES: dict[str, bytes] = {}


def compile_iree(path: pathlib.Path) -> bytes:
    """``path`` imported by IREE's own ONNX importer (``iree-import-onnx``, which
    runs ONNX's shape inference first) and compiled for ``llvm-cpu``."""
    import hashlib
    import tempfile

    import iree.compiler
    from iree.compiler.tools.import_onnx import __main__ as importer

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest not in _IREE_MODULES:
        with tempfile.TemporaryDirectory() as folder:
            mlir = str(pathlib.Path(folder) / "model.mlir")
            importer.main(importer.parse_arguments([str(path), "-o", mlir]))
            _IREE_MODULES[digest] = iree.compiler.compile_file(mlir, target_backends=["llvm-cpu"])
    return _IREE_MODULES[digest]


def run_iree(path: pathlib.Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """IREE, compiled by :func:`compile_iree`, run on one thread (the ``local-sync``
    driver). The function is the graph's name."""
    import iree.runtime
    import onnx

    flatbuffer = compile_iree(path)
    context = iree.runtime.SystemContext(config=iree.runtime.Config("local-sync"))
    context.add_vm_module(iree.runtime.VmModule.copy_buffer(context.instance, flatbuffer))
    function = context.modules.module[onnx.load(str(path), load_external_data=False).graph.name]
    results = function(*inputs)
    results = results if isinstance(results, (tuple, list)) else [results]
    return [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]


#: What ``python child.py RUNTIME JOB...`` serves the jobs with.
RUNNERS: dict[str, Callable[[pathlib.Path, Sequence[np.ndarray]], list]] = {
    "onnxruntime": run_onnxruntime,
    "openvino": run_openvino,
    "onnxruntime-openvino": run_openvino_ep,
    "iree": run_iree,
}


if __name__ == "__main__":
    # python child.py RUNTIME JOB... : a release's venv serving jobs.
    serve(RUNNERS[sys.argv[1]], sys.argv[2:])
