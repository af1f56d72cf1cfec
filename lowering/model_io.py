"""Reading a model from disk, and writing one without ever leaving half a file.

The output is written to a temporary file in the output's own folder, synced
to disk and renamed over the destination. A rename within one folder is
atomic, so OUT is either the old file or the complete new one, and IN == OUT
is safe: IN is only replaced once the new model is fully written.

Weights stored as external data are never read into memory here: onnx_ir maps
them lazily. When OUT is in IN's folder the output refers to the same data
file; elsewhere the weights are copied into a data file beside OUT.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError


class ModelFileError(Exception):
    """A file that cannot be read as, or written as, an ONNX model."""


def load(path: str) -> ir.Model:
    """Load a model, turning every kind of unreadable file into one clear error."""
    if not os.path.exists(path):
        raise ModelFileError("no such file")
    if os.path.isdir(path):
        raise ModelFileError("is a directory, not an ONNX file")
    if os.path.getsize(path) == 0:
        raise ModelFileError("the file is empty")
    try:
        proto = onnx.load(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise ModelFileError(f"not a valid ONNX model ({_first_line(error)})") from error
    if not proto.HasField("graph") or proto.ir_version == 0:
        raise ModelFileError("the file parses but holds no ONNX model (no graph or no ir_version)")
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as error:  # onnx_ir raises many kinds on malformed protos
        raise ModelFileError(f"malformed ONNX model ({_first_line(error)})") from error
    ir.external_data.set_base_dir(model.graph, os.path.dirname(os.path.abspath(path)))
    return model


def save(model: ir.Model, path: str) -> None:
    """Write ``model`` to ``path`` atomically."""
    out_dir = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(out_dir):
        raise ModelFileError(f"the folder {out_dir!r} does not exist")
    external_data = None
    if _has_external_data_elsewhere(model, out_dir):
        external_data = os.path.basename(path) + ".data"
    try:
        fd, temp_path = tempfile.mkstemp(
            dir=out_dir, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
        )
    except OSError as error:
        raise ModelFileError(f"cannot write to {out_dir!r}: {error.strerror}") from error
    os.close(fd)
    try:
        ir.save(model, temp_path, external_data=external_data)
        with open(temp_path, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temp_path, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        if isinstance(error, OSError):
            raise ModelFileError(f"cannot write the output: {error.strerror or error}") from error
        raise


def _has_external_data_elsewhere(model: ir.Model, out_dir: str) -> bool:
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                if os.path.abspath(tensor.base_dir) != out_dir:
                    return True
    return False


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
