"""The optional parts of the package, and the one message for a missing one.

The core (every strategy, ``--runtime``, ``--target-opset``) needs onnx,
onnx-ir and numpy only. ``--verify`` runs models in onnxruntime and
``--optimize`` runs onnxscript's optimizer; each is an extra,
``lowering[verify]`` and ``lowering[optimize]``, so that an image with
``onnxruntime-gpu`` (or the OpenVINO or DirectML build) is not given a
second distribution writing the same ``onnxruntime`` package. What counts
is the import, not the distribution: any build that provides
``import onnxruntime`` will do.
"""

from __future__ import annotations

import importlib.util

#: extra -> (the module it provides, other distributions that provide it too)
EXTRAS = {
    "verify": ("onnxruntime", "onnxruntime-gpu, onnxruntime-openvino, ..."),
    "optimize": ("onnxscript", ""),
}


def installed(module: str) -> bool:
    """Whether ``import module`` would find it, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing; a module set to None
        return False


def missing(extra: str) -> bool:
    """Whether ``extra``'s module cannot be imported."""
    return not installed(EXTRAS[extra][0])
