"""Reading a model from disk, and writing one without ever leaving half a file.

The output is written to a temporary file in the output's own folder, synced
to disk and renamed over the destination. A rename within one folder is
atomic, so OUT is either the old file or the complete new one, and IN == OUT
is safe: IN is only replaced once the new model is fully written.

Weights stored as external data are never read into memory here: onnx_ir maps
them lazily, and :func:`save` copies data files by streaming them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError


class ModelFileError(Exception):
    """A file that cannot be read as, or written as, an ONNX model."""


def load(path: str) -> ir.Model:
    """Load a model, turning every kind of unreadable file into one clear error."""
    if not os.path.exists(path):
        raise ModelFileError("no such file; check the path")
    if os.path.isdir(path):
        raise ModelFileError("is a directory; give the path of an .onnx file")
    if os.path.getsize(path) == 0:
        raise ModelFileError("the file is empty; was it written completely?")
    try:
        proto = onnx.load(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise ModelFileError(
            f"not a valid ONNX model ({_first_line(error)}); the file may be truncated "
            "or not an ONNX model at all"
        ) from error
    if not proto.HasField("graph") or proto.ir_version == 0:
        raise ModelFileError(
            "the file is a protobuf but not an ONNX model (it has no graph or no ir_version)"
        )
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as error:  # onnx_ir raises many kinds on malformed protos
        raise ModelFileError(f"malformed ONNX model ({_first_line(error)})") from error
    ir.external_data.set_base_dir(model.graph, os.path.dirname(os.path.abspath(path)))
    return model


def checker_problem(path: str) -> str | None:
    """Why ONNX's checker rejects the model at ``path``, or None if it does not.

    A model can fail the checker for reasons that have nothing to do with
    SequenceMap; it is still lowered, with a warning.
    """
    try:
        onnx.checker.check_model(path)
    except Exception as error:  # noqa: BLE001 -- the checker raises several kinds
        return _first_line(error)
    return None


def save(model: ir.Model, path: str, *, external_data: str | None = None) -> None:
    """Write ``model`` to ``path`` atomically, its external data complete.

    By default the output keeps the input's layout: tensors stored in
    external data files stay in files of the same names at the same offsets.
    When OUT is in IN's folder it refers to the very same files; elsewhere
    the files are copied beside OUT, streamed, never read into memory.
    ``external_data`` instead writes every initializer above 256 bytes to
    that one file beside OUT.
    """
    out_dir = _output_dir(path)
    if external_data is not None:
        if os.path.isabs(external_data) or os.path.dirname(external_data):
            raise ModelFileError(
                f"--external-data takes a file name for OUT's folder, not {external_data!r}"
            )
        with _atomic_target(path) as temp_path:
            ir.save(model, temp_path, external_data=external_data)
        return
    for source, location in _external_files(model).items():
        target = os.path.join(out_dir, location)
        if os.path.abspath(source) != os.path.abspath(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with _atomic_target(target) as temp_path:
                shutil.copyfile(source, temp_path)
    with _atomic_target(path) as temp_path:
        ir.save(model, temp_path)


def check_external_data(model: ir.Model) -> None:
    """Fail clearly if a file that holds the model's weights is missing."""
    for source, location in _external_files(model).items():
        if not os.path.isfile(source):
            raise ModelFileError(
                f"the external data file {location!r} that holds the model's weights is "
                f"missing (looked for {source}); keep it beside the model"
            )


def _external_files(model: ir.Model) -> dict[str, str]:
    """Each external data file the model reads, with its location relative to the model."""
    files: dict[str, str] = {}
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                files[os.path.abspath(tensor.path)] = os.fspath(tensor.location)
    return files


def copy_unchanged(source: str, path: str, model: ir.Model) -> bool:
    """Write ``source``'s bytes to ``path`` when that gives a valid model.

    A model with nothing to lower is copied byte for byte, so it comes out
    exactly as it went in. That is only possible when its external data, if
    any, already sits where ``path`` will look for it; otherwise this
    returns False and the caller saves the model normally.
    """
    out_dir = _output_dir(path)
    if any(
        os.path.abspath(os.path.join(out_dir, location)) != source_file
        for source_file, location in _external_files(model).items()
    ):
        return False
    if os.path.abspath(source) == os.path.abspath(path):
        return True
    with _atomic_target(path) as temp_path, open(source, "rb") as src, open(temp_path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return True


@contextlib.contextmanager
def kept_original(source: str, path: str, *, keep: bool):
    """Yield a path where ``source`` can still be read after ``path`` is written.

    That is ``source`` itself, unless it is about to be replaced (IN == OUT);
    then a copy in the same folder, so that relative external data still
    resolves, removed afterwards.
    """
    if not keep or os.path.abspath(source) != os.path.abspath(path):
        yield source
        return
    fd, copy = tempfile.mkstemp(dir=_output_dir(path), prefix=".original.", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as dst, open(source, "rb") as src:
            shutil.copyfileobj(src, dst)
        yield copy
    finally:
        with contextlib.suppress(OSError):
            os.unlink(copy)


def _output_dir(path: str) -> str:
    out_dir = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(out_dir):
        raise ModelFileError(f"the folder {out_dir!r} does not exist")
    if os.path.isdir(path):
        raise ModelFileError("the output path is a directory")
    return out_dir


@contextlib.contextmanager
def _atomic_target(path: str):
    """A temporary path beside ``path`` that replaces it only on success."""
    out_dir = os.path.dirname(os.path.abspath(path))
    try:
        fd, temp_path = tempfile.mkstemp(
            dir=out_dir, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
        )
    except OSError as error:
        raise ModelFileError(f"cannot write to {out_dir!r}: {error.strerror}") from error
    os.close(fd)
    try:
        yield temp_path
        with open(temp_path, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temp_path, _mode_for(path))
        os.replace(temp_path, path)
        _sync_folder(out_dir)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        if isinstance(error, OSError):
            raise ModelFileError(f"cannot write the output: {error.strerror or error}") from error
        raise


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable, where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mode_for(path: str) -> int:
    """Keep an existing file's permissions; give a new one the usual umask ones."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
