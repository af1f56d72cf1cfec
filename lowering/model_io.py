"""Reading a model, and writing one without ever touching a file it was not asked to write.

The rules, in the order the code applies them:

- IN is read from a file, or from standard input when it is ``-`` (or any
  other path that is not a regular file, such as a pipe). Its external data
  must sit in its own folder: a location that is absolute, contains ``..``
  or leads through a symlink out of that folder is refused.
- OUT of ``-`` (standard output), a FIFO or a character device is a
  *stream*: the model is written to it in one piece, its weights embedded.
- Any other OUT is replaced atomically. A symlink is followed, its target
  replaced and the link kept. Everything this run writes (OUT and the data
  files it creates for OUT) is first written into a private staging folder
  beside OUT, synced, and only then renamed into place, data files first.
  So a failed run changes nothing, and IN == OUT is safe.
- A data file is only ever written when it is new, or when it belongs to the
  OUT being replaced (the OUT on disk refers to it: the same command run
  twice). A name that is IN's data, IN itself, OUT itself or any other
  existing file is refused before anything is written, with the file's name
  and what to do. (The one exception: with IN == OUT, IN's data files are
  OUT's own, and may be replaced with it.) Data files are never written
  through a symlink.

Weights stored as external data are never read into memory when writing to
a file: onnx_ir maps them lazily and writes them tensor by tensor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from lowering.irutils.walk import model_graphs

STREAM = "-"
_TWO_GB = 2**31


class ModelFileError(Exception):
    """A file that cannot be read as, or written as, an ONNX model."""

    def __init__(self, message: str, *, file: str | None = None):
        super().__init__(message)
        #: The file the message is about, when it is not the one being read or written.
        self.file = file


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a model was read from."""

    #: The path as given, or ``<stdin>``.
    label: str
    #: The folder that the model's external data locations are relative to.
    folder: str
    #: The regular file it was read from, or None for a stream.
    path: str | None
    #: The bytes read from a stream (None for a regular file).
    raw: bytes | None

    def bytes(self) -> bytes:
        if self.raw is not None:
            return self.raw
        assert self.path is not None
        with open(self.path, "rb") as file:
            return file.read()


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a model is to be written."""

    #: The path as given (``-`` for standard output).
    label: str
    #: For a regular file: the file to replace, symlinks resolved. None for a stream.
    path: str | None
    #: True for ``-``, a FIFO or a character device.
    is_stream: bool

    @property
    def folder(self) -> str:
        assert self.path is not None
        return os.path.dirname(self.path)


@dataclasses.dataclass(frozen=True)
class Written:
    """What :func:`write` did, for the summary."""

    #: OUT holds exactly IN's bytes.
    identical: bool
    #: The data files written for OUT, as they are named in OUT.
    data_files: tuple[str, ...] = ()
    #: The weights were embedded in a stream.
    embedded: bool = False
    #: What was streamed, when OUT is a stream and not IN's bytes (for --verify).
    streamed: onnx.ModelProto | None = None
    #: IN's data files that OUT reads its weights from (OUT in IN's folder), as OUT
    #: names them: whoever ships OUT must ship these too.
    shared: tuple[str, ...] = ()


# --- reading -------------------------------------------------------------------------------


def read(path: str) -> tuple[ir.Model, Source]:
    """Load a model, turning every kind of unreadable file into one clear error."""
    if path == STREAM:
        raw = sys.stdin.buffer.read()
        source = Source("<stdin>", os.getcwd(), None, raw)
    else:
        if not os.path.exists(path):
            raise ModelFileError("no such file; check the path")
        if os.path.isdir(path):
            raise ModelFileError("is a directory; give the path of an .onnx file")
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isfile(path):
            source = Source(path, folder, os.path.abspath(path), None)
        else:  # a pipe such as <(cat model.onnx): read it once
            with open(path, "rb") as file:
                source = Source(path, folder, None, file.read())
    if (len(source.raw) if source.raw is not None else os.path.getsize(path)) == 0:
        raise ModelFileError("the file is empty; was it written completely?")
    model = _parse(source)
    tensors = list(_external_tensors(model))  # one walk, for both
    for tensor in tensors:
        tensor.base_dir = source.folder
    _check_external_data(tensors, source.folder)
    return model, source


def reread(source: Source) -> ir.Model:
    """The model :func:`read` read from ``source``, read again, as it was then.

    A stream's bytes are kept; a file is read again (IN is written, if at
    all, only after the lowering). What a failed lowering restores its model
    from (:func:`lowering.irutils.snapshot.restorer`), at no cost up front.
    """
    model = _parse(source)
    for tensor in _external_tensors(model):
        tensor.base_dir = source.folder
    return model


def _parse(source: Source) -> ir.Model:
    try:
        if source.raw is not None:
            proto = onnx.load_model_from_string(source.raw)
        else:
            assert source.path is not None
            proto = onnx.load(source.path, load_external_data=False)
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
    return model


def checker_problem(source: Source) -> str | None:
    """Why ONNX's checker rejects the model, or None if it does not.

    A model can fail the checker for reasons that have nothing to do with
    SequenceMap; it is still lowered, with a warning.
    """
    try:
        if source.path is not None:
            onnx.checker.check_model(source.path)
        else:
            onnx.checker.check_model(onnx.load_model_from_string(source.bytes()))
    except Exception as error:  # noqa: BLE001 -- the checker raises several kinds
        return _first_line(error)
    return None


def _external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    """Every tensor of the model stored as external data: initializers and attributes,
    in every graph and function at any depth."""
    for graph in model_graphs(model):
        if isinstance(graph, ir.Graph):
            for value in graph.initializers.values():
                if isinstance(value.const_value, ir.ExternalTensor):
                    yield value.const_value
        for node in graph:
            for attr in node.attributes.values():
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.TENSOR:
                    tensors = [attr.value]
                elif attr.type == ir.AttributeType.TENSORS:
                    tensors = list(attr.value)
                else:
                    continue
                yield from (t for t in tensors if isinstance(t, ir.ExternalTensor))


def external_files(model: ir.Model) -> dict[str, str]:
    """Each external data file the model reads (absolute path), with its location."""
    return {os.path.abspath(t.path): os.fspath(t.location) for t in _external_tensors(model)}


def _check_external_data(tensors: list[ir.ExternalTensor], folder: str) -> None:
    """Refuse data locations that leave the model's folder, and missing data files."""
    real_folder = os.path.realpath(folder)
    for tensor in tensors:
        location = os.fspath(tensor.location)
        where = f"the external data location {location!r} of tensor {tensor.name!r}"
        if not _plain_relative(location):
            raise ModelFileError(
                f"{where} is not a plain path inside the model's folder (absolute, or with "
                "'..'); refused: keep the model's data files in its folder"
            )
        full = os.path.join(folder, location)
        real = os.path.realpath(full)
        if os.path.commonpath([real, real_folder]) != real_folder:
            raise ModelFileError(
                f"{where} leads through a symlink out of the model's folder (to {real}); "
                "refused: copy the data file into the model's folder"
            )
        if not os.path.isfile(full):
            raise ModelFileError(
                f"the external data file {location!r} that holds the model's weights is "
                f"missing (looked for {full}); keep it beside the model"
            )


def _plain_relative(location: str) -> bool:
    if not location or os.path.isabs(location) or location.startswith(("/", "\\")):
        return False
    parts = location.replace("\\", "/").split("/")
    return ".." not in parts and ":" not in parts[0]


def valid_data_name(name: str) -> bool:
    """A name for ``--external-data``: one plain file name for OUT's folder."""
    return (
        _plain_relative(name)
        and "/" not in name
        and "\\" not in name
        and name not in (".", "..")
        and not name.startswith(".onnx-lower-")
    )


# --- writing -------------------------------------------------------------------------------


def target(path: str) -> Target:
    """Classify OUT before any work is done, so a bad OUT fails fast; each
    error names OUT (``ModelFileError.file``), not the model being read."""
    if path == STREAM:
        return Target(path, None, True)
    try:
        info = os.stat(path)  # follows symlinks: OUT's kind is its target's
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise ModelFileError(f"cannot use the output path: {error.strerror}", file=path) from error
    if info is not None:
        if stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            return Target(path, None, True)
        if stat.S_ISDIR(info.st_mode):
            raise ModelFileError("the output path is a directory", file=path)
        if not stat.S_ISREG(info.st_mode):
            raise ModelFileError(
                "the output path is neither a regular file, a FIFO nor a character device; refused",
                file=path,
            )
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise ModelFileError(
            f"the folder {os.path.dirname(os.path.abspath(path))!r} does not exist", file=path
        )
    return Target(path, real, False)


def write(
    model: ir.Model,
    source: Source,
    out: Target,
    *,
    changed: bool,
    external_data: str | None = None,
) -> Written:
    """Write ``model`` to ``out``, or IN's own bytes when nothing ``changed``."""
    if out.is_stream:
        return _write_stream(model, source, out, changed=changed)
    assert out.path is not None
    files = external_files(model)  # one walk of the model, for every check below
    for data in files:
        if _same_file(out.path, data):
            raise ModelFileError(
                f"OUT is {data}, the data file IN reads its weights from; refused: "
                "give OUT another name"
            )
    _refuse_split_symlink(files, out, external_data)
    same_file = source.path is not None and _same_file(source.path, out.path)
    if not changed and external_data is None and _data_resolves_from(files, out):
        if not same_file:
            with _staging(out.folder) as stage:
                staged = os.path.join(stage, os.path.basename(out.path))
                _copy_into(source, staged)
                _commit(stage, [], staged, out.path)
        return Written(identical=True, shared=_shared(files))
    external_data = _plan_data(files, source, out, external_data, same_file=same_file)
    with _staging(out.folder) as stage:
        # Named as OUT is: no data location can be that name (see _DataCheck).
        staged_model = os.path.join(stage, os.path.basename(out.path))
        ir.save(model, staged_model, format="protobuf", external_data=external_data)
        written = []
        if external_data is not None and os.path.exists(os.path.join(stage, external_data)):
            written.append(external_data)
        _commit(stage, written, staged_model, out.path)
    shared = _shared(files) if external_data is None else ()
    return Written(identical=False, data_files=tuple(written), shared=shared)


def _shared(files: dict[str, str]) -> tuple[str, ...]:
    """The data locations OUT keeps from IN (:func:`external_files`), each once."""
    return tuple(sorted(set(files.values())))


def _write_stream(model: ir.Model, source: Source, out: Target, *, changed: bool) -> Written:
    embedded = any(True for _ in _external_tensors(model))
    if not changed and not embedded:
        _stream(out, source.bytes())
        return Written(identical=True)
    if embedded:
        ir.external_data.load_to_model(model)  # a stream is one file: the weights go in it
    proto = ir.serde.serialize_model(model)
    if proto.ByteSize() >= _TWO_GB:
        raise ModelFileError(
            "the model is over 2 GB with its weights, too large for one protobuf stream; "
            "give an OUT file instead, whose weights go in data files beside it"
        )
    _stream(out, proto.SerializeToString())
    return Written(identical=False, embedded=embedded, streamed=proto)


def _stream(out: Target, data: bytes) -> None:
    try:
        if out.label == STREAM:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        # No O_CREAT and no O_TRUNC: the FIFO or device is written to, never replaced.
        fd = os.open(out.label, os.O_WRONLY)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
    except BrokenPipeError as error:
        raise ModelFileError("the reader closed the stream before the model was written") from error
    except OSError as error:
        raise ModelFileError(f"cannot write the output: {error.strerror or error}") from error


def _data_resolves_from(files: dict[str, str], out: Target) -> bool:
    """Whether every data file IN reads (``files``: :func:`external_files`) is the
    very file OUT would read."""
    for source_file, location in files.items():
        assert out.path is not None
        beside = os.path.join(out.folder, location)
        if not (os.path.lexists(beside) and _same_file(beside, source_file)):
            return False
        if os.path.islink(beside) or _through_symlink(out.folder, location):
            return False
    return True


def _refuse_split_symlink(files: dict[str, str], out: Target, external_data: str | None) -> None:
    """OUT is a symlink into another folder, and the model needs data files.

    ONNX resolves data locations from the folder of the path a model is opened
    by: the link's folder for some readers, the target's for others. No layout
    serves both, so this is refused rather than guessed.
    """
    assert out.path is not None
    link_folder = os.path.realpath(os.path.dirname(os.path.abspath(out.label)))
    if link_folder == out.folder:
        return
    if external_data is not None or files:
        raise ModelFileError(
            f"OUT is a symlink to {out.path}, in another folder, and the model has external "
            "data, whose locations would resolve differently through the link; "
            "give the target's path as OUT"
        )


def _plan_data(
    files: dict[str, str],
    source: Source,
    out: Target,
    external_data: str | None,
    *,
    same_file: bool,
) -> str | None:
    """The one data file beside OUT that all weights go to, None to keep IN's
    layout; checked before anything is written.

    OUT in IN's folder refers to IN's very data files. What it cannot share
    (OUT in another folder) goes to a file named after OUT, ``OUT.onnx.data``:
    copied under IN's names, two models from same-named inputs would clash
    in one folder.
    """
    assert out.path is not None
    check = _DataCheck(source, out, list(files), _locations_of(out.path), same_file)
    if external_data is not None:
        check(external_data, "--external-data")
        return external_data
    for source_file, location in files.items():
        beside = os.path.join(out.folder, location)
        shared = (
            os.path.lexists(beside)
            and not os.path.islink(beside)
            and not _through_symlink(out.folder, location)
            and _same_file(beside, source_file)
        )
        if not shared:
            named = f"{os.path.basename(out.path)}.data"
            check(named, "named after OUT")
            return named
    return None


@dataclasses.dataclass
class _DataCheck:
    source: Source
    out: Target
    in_data: list[str]
    owned: set[str]
    same_file: bool

    def __call__(self, location: str, why: str) -> None:
        dest = os.path.join(self.out.folder, location)
        reason = self._problem(dest, location)
        if reason is not None:
            raise ModelFileError(f"refused to write the data file {dest} ({why}): {reason}")

    def _problem(self, dest: str, location: str) -> str | None:
        """Why the data file may not be written at ``dest``, with advice; None if it may."""
        assert self.out.path is not None
        named = f"{os.path.basename(self.out.path)}.data"
        advice = (
            "name the data file with --external-data NAME"
            if location == named
            else f"name the data after OUT, with --external-data {named}"
        )
        if _through_symlink(self.out.folder, location):
            return "a folder on its path is a symlink, which is never written through"
        if os.path.normpath(dest) == os.path.normpath(self.out.path):
            return f"it is OUT itself; {advice}"
        if not os.path.lexists(dest):
            return None
        return self._existing_problem(dest, location, advice)

    def _existing_problem(self, dest: str, location: str, advice: str) -> str | None:
        """Why a file already at ``dest`` may not be replaced: only OUT's own data may."""
        assert self.out.path is not None
        if self.source.path is not None and _same_file(dest, self.source.path):
            return f"it is IN itself; {advice}"
        if _same_file(dest, self.out.path):
            return f"it is OUT itself; {advice}"
        if os.path.isdir(dest) and not os.path.islink(dest):
            return f"it is a directory; {advice}"
        reads = any(_same_file(dest, data) for data in self.in_data)
        if reads and not self.same_file:
            return (
                f"IN reads its weights from it, and would compute other results; {advice}, "
                "or write OUT to another folder"
            )
        if os.path.normpath(location) not in self.owned:
            return (
                f"it exists and is not a data file of the OUT being replaced (it may belong "
                f"to another model); {advice}, write OUT to another folder, or remove the file"
            )
        return None


def _locations_of(path: str) -> set[str]:
    """The data locations that the model now at ``path`` refers to (none if unreadable)."""
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 -- not a model (or no file): it owns no data files
        return set()
    locations: set[str] = set()
    for tensor in _proto_tensors(proto):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations.update(
                os.path.normpath(e.value) for e in tensor.external_data if e.key == "location"
            )
    return locations


def _proto_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    def graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
        yield from graph.initializer
        yield from (s.values for s in graph.sparse_initializer)
        yield from node_tensors(graph.node)

    def node_tensors(nodes) -> Iterator[onnx.TensorProto]:
        for node in nodes:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    yield from graph_tensors(attr.g)
                for graph in attr.graphs:
                    yield from graph_tensors(graph)

    yield from graph_tensors(proto.graph)
    for function in proto.functions:
        yield from node_tensors(function.node)


def _through_symlink(folder: str, location: str) -> bool:
    """Whether a folder between ``folder`` and ``folder/location`` is a symlink."""
    parts = location.replace("\\", "/").split("/")[:-1]
    current = folder
    for part in parts:
        current = os.path.join(current, part)
        if os.path.islink(current):
            return True
    return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@contextlib.contextmanager
def _staging(folder: str) -> Iterator[str]:
    """A private folder beside OUT, removed afterwards whatever happens."""
    try:
        stage = tempfile.mkdtemp(dir=folder, prefix=".onnx-lower-")
    except OSError as error:
        raise ModelFileError(f"cannot write to {folder!r}: {error.strerror}") from error
    try:
        yield stage
    except OSError as error:
        raise ModelFileError(f"cannot write the output: {error.strerror or error}") from error
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _copy_into(source: Source, path: str) -> None:
    if source.raw is not None:
        with open(path, "wb") as file:
            file.write(source.raw)
    else:
        assert source.path is not None
        shutil.copyfile(source.path, path)


def _commit(stage: str, data_files: list[str], staged_model: str, out_path: str) -> None:
    """Sync what was staged, then rename it into place: the data first, OUT last."""
    folder = os.path.dirname(out_path)
    try:
        for path in [*(os.path.join(stage, d) for d in data_files), staged_model]:
            with open(path, "rb") as written:
                os.fsync(written.fileno())
        for location in data_files:
            dest = os.path.join(folder, location)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.chmod(os.path.join(stage, location), _mode_for(dest))
            os.replace(os.path.join(stage, location), dest)
        os.chmod(staged_model, _mode_for(out_path))
        os.replace(staged_model, out_path)
    except OSError as error:
        raise ModelFileError(f"cannot write the output: {error.strerror or error}") from error
    _sync_folder(folder)


def write_file(path: str, data: bytes) -> None:
    """Replace the file ``path`` (a symlink's target) with ``data`` atomically, as OUT is:
    staged beside it, synced, renamed into place (``--report``)."""
    real = os.path.realpath(path)
    with _staging(os.path.dirname(real)) as stage:
        staged = os.path.join(stage, os.path.basename(real))
        with open(staged, "wb") as file:
            file.write(data)
        _commit(stage, [], staged, real)


@contextlib.contextmanager
def kept_original(source: Source, out: Target, *, keep: bool) -> Iterator[str | onnx.ModelProto]:
    """Something :func:`lowering.verify.compare` can read IN from after OUT is written.

    That is IN's path, unless IN is about to be replaced (IN == OUT): then a
    copy in the same folder, so that relative external data still resolves,
    removed afterwards. A model read from a stream is kept in memory.
    """
    if not keep:
        yield source.label
        return
    if source.path is None:
        proto = onnx.load_model_from_string(source.bytes())
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in _proto_tensors(proto)):
            onnx.load_external_data_for_model(proto, source.folder)
        yield proto
        return
    if out.path is None or not _same_file(source.path, out.path):
        yield source.path
        return
    fd, copy = tempfile.mkstemp(dir=source.folder, prefix=".onnx-lower-original.", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as dst, open(source.path, "rb") as src:
            shutil.copyfileobj(src, dst)
        yield copy
    finally:
        with contextlib.suppress(OSError):
            os.unlink(copy)


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
