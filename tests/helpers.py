"""Shared test tools: parse ONNX text, lower, run in onnxruntime, compare.

The oracles are onnxruntime and plain Python. ``onnx.reference`` is not used
as an oracle: it is wrong for SequenceMap and SequenceInsert on positions,
empty sequences and outer-scope references.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto

import lowering
from lowering.runtimes.sessions import open_session
from lowering.verify import NARROW_FLOATS, Tolerance

#: Which releases of lowering/runtimes/releases.py the tests may build venvs for
#: (scripts/runtime_releases.py): their versions ("1.16,2024.6"), or "all" (CI sets
#: it). A release not asked for runs only if its venv is already built; otherwise its
#: tests skip, saying so.
RELEASES_VARIABLE = "LOWERING_OLD_RUNTIMES"


def release_python(release) -> pathlib.Path:
    """The python of ``release``'s venv (a :class:`lowering.runtimes.releases.Release`),
    built first by scripts/runtime_releases.py if asked for; skips the test where it is
    neither asked for nor built."""
    import pytest

    from lowering.runtimes import releases
    from scripts.runtime_releases import ReleaseUnavailable, build

    wanted = {v.strip() for v in os.environ.get(RELEASES_VARIABLE, "").split(",")}
    asked = "all" in wanted or release.version in wanted
    if not (asked or releases.is_built(release)):
        pytest.skip(
            f"{release.column} runs in a venv of its own: set {RELEASES_VARIABLE}="
            f"{release.version} to build it (pip, about a minute) under {releases.cache_folder()}"
        )
    try:
        return build(release)
    except ReleaseUnavailable as error:
        if asked:
            raise
        pytest.skip(str(error))


def cli(
    argv: list,
    stdin: bytes = b"",
    cwd: pathlib.Path | None = None,
    text: bool = False,
    module: str = "lowering",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGV`` (``lowering`` or ``lowering.verify``) in this
    process, with bytes for stdin and stdout, and ``env`` set in ``os.environ``
    for the call (``TMPDIR`` is read afresh).

    A child process costs seconds of imports per call; tests/test_cli.py and
    tests/test_cli_streams.py run the real entry points as a user does (what
    only a child shows: closed and terminal streams, Ctrl-C, a runtime's own
    prints). Returns what ``subprocess.run`` would."""
    if module == "lowering":
        from lowering.cli import main
    else:
        assert module == "lowering.verify", module
        from lowering.verify.cli import main

    streams = [io.TextIOWrapper(io.BytesIO(data)) for data in (stdin, b"", b"")]
    saved = sys.stdin, sys.stdout, sys.stderr
    here = os.getcwd()
    environ = dict(os.environ)
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        if env:
            os.environ.update(env)
            tempfile.tempdir = None  # gettempdir() reads TMPDIR again
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        for stream in streams[1:]:
            stream.flush()
    finally:
        os.chdir(here)
        sys.stdin, sys.stdout, sys.stderr = saved
        if env:
            os.environ.clear()
            os.environ.update(environ)
            tempfile.tempdir = None
    out, err = (stream.buffer.getvalue() for stream in streams[1:])  # type: ignore[attr-defined]
    if text:
        return subprocess.CompletedProcess(argv, code, out.decode(), err.decode())
    return subprocess.CompletedProcess(argv, code, out, err)


def parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node at any depth, in the main graph and in every function."""

    def walk(nodes):
        for node in nodes:
            yield node
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from walk(attr.g.node)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for graph in attr.graphs:
                        yield from walk(graph.node)

    yield from walk(model.graph.node)
    for function in model.functions:
        yield from walk(function.node)


def op_types(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in all_nodes(model)]


def without_provenance(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy without the ``metadata_props`` that say what lowered it (``lowering.*``,
    tests/test_provenance.py), for tests of the rewrite's form."""
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    kept = [p for p in copy.metadata_props if not p.key.startswith("lowering.")]
    del copy.metadata_props[:]
    copy.metadata_props.extend(kept)
    return copy


def lowered(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    """Lower and check the promises every output keeps."""
    before = model.SerializeToString()
    result = lowering.lower(model, **options)
    assert model.SerializeToString() == before, "lower() changed its input"
    assert "SequenceMap" not in op_types(result)
    onnx.checker.check_model(result, full_check=True)
    for type_proto in all_types(result):
        assert_no_dtype_zero(type_proto)
    for node in all_nodes(result):
        if node.op_type == "SequenceEmpty":
            dtype = [a.i for a in node.attribute if a.name == "dtype"]
            assert dtype and dtype[0] != 0, "SequenceEmpty without a real dtype"
    assert not passed_through_a_sequence(result), "a sequence op written to hide a shape"
    if result.SerializeToString() != before:  # what is not lowered comes out as it came
        # Runtimes inline functions into the main graph (onnxruntime failed
        # on a float16 model where a function and the main graph shared one).
        assert names_functions_share_with_the_main_graph(result) == set()
    return result


def passed_through_a_sequence(model: onnx.ModelProto) -> list[str]:
    """The values read back out of a sequence of one that an empty one was
    given, ``SequenceAt(SequenceInsert(SequenceEmpty(), v), 0)``: a sequence
    no computation needs, written only to keep ONNX's inference from a shape
    (issue 36)."""
    found = []
    for graph in all_graphs(model, in_functions=True):
        made = {out: node for node in graph.node for out in node.output}
        for node in graph.node:
            insert = made.get(node.input[0]) if node.op_type == "SequenceAt" else None
            if insert is None or insert.op_type != "SequenceInsert" or len(insert.input) > 2:
                continue
            empty = made.get(insert.input[0])
            if empty is not None and empty.op_type == "SequenceEmpty":
                found.append(node.output[0])
    return found


def names_functions_share_with_the_main_graph(model: onnx.ModelProto) -> set[str]:
    """Names that a function defines and the main graph defines too, at any
    depth. A function's formal inputs and outputs do not count: inlining
    replaces them by the caller's names."""
    main = main_graph_names(model)
    shared = set()
    for function in model.functions:
        own = {name for node in function.node for name in node.output}
        own -= {*function.input, *function.output}
        shared |= (own | names_defined(graphs_in(function.node))) & main
    return shared - {""}


def main_graph_names(model: onnx.ModelProto) -> set[str]:
    """Every name the main graph defines, at any depth."""
    return names_defined(all_graphs(model))


def names_defined(graphs) -> set[str]:
    """The names ``graphs`` define: their inputs, initializers and node outputs."""
    names: set[str] = set()
    for graph in graphs:
        names.update(value.name for value in (*graph.input, *graph.initializer))
        names.update(name for node in graph.node for name in node.output)
    return names


def all_graphs(model: onnx.ModelProto, in_functions: bool = False) -> Iterator[onnx.GraphProto]:
    """The main graph and every graph nested in it, at any depth; with
    ``in_functions``, the graphs nested in function bodies too."""
    yield model.graph
    yield from graphs_in(model.graph.node)
    if in_functions:
        for function in model.functions:
            yield from graphs_in(function.node)


def graphs_in(nodes) -> Iterator[onnx.GraphProto]:
    """Every graph nested in the attributes of ``nodes``, at any depth."""
    for node in nodes:
        for attr in node.attribute:
            for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield graph
                yield from graphs_in(graph.node)


def all_types(model: onnx.ModelProto) -> Iterator[onnx.TypeProto]:
    for graph in all_graphs(model):
        for vi in (*graph.input, *graph.output, *graph.value_info):
            if vi.HasField("type"):
                yield vi.type


def assert_no_dtype_zero(type_proto: onnx.TypeProto) -> None:
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        assert type_proto.tensor_type.elem_type != 0, f"dtype 0 in {type_proto}"
    elif kind == "sequence_type":
        assert_no_dtype_zero(type_proto.sequence_type.elem_type)


def session(model: onnx.ModelProto, optimize: bool = True) -> ort.InferenceSession:
    """onnxruntime on one thread, with no accuracy traded for speed (lowering.runtimes.sessions)."""
    return open_session(model.SerializeToString(), optimize=optimize)


def run(model: onnx.ModelProto, feeds: dict) -> list:
    return session(model).run(None, feeds)


def try_run(model: onnx.ModelProto, feeds: dict) -> list | None:
    """onnxruntime's results, or None where onnxruntime cannot run the model."""
    try:
        return run(model, feeds)
    except Exception:  # noqa: BLE001 -- onnxruntime fails on some valid SequenceMap models
        return None


def assert_declared_shapes_hold(model: onnx.ModelProto, feeds: dict) -> None:
    """Every dim the main graph declares (value_info, outputs) is the run-time size.

    Each typed value is made a graph output of a copy, so onnxruntime
    returns it; a sequence's declared dims must hold for each element. A
    symbolic dim of a tensor is one size throughout the graph, first bound
    by the tensor inputs (onnxruntime plans its buffers on that: two values
    of one declared shape may share one); one that only sequences use may
    take a new size in each element (as :mod:`lowering.verify` reads it).
    """
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    made = {name for node in probe.graph.node for name in node.output}
    declared = {
        vi.name: vi.type
        for vi in (*probe.graph.value_info, *probe.graph.output)
        if vi.name in made  # not a function's own values, typed here too
    }
    outputs = {o.name for o in probe.graph.output}
    for name in declared:
        if name not in outputs:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    names = [o.name for o in probe.graph.output]
    values = dict(zip(names, run(probe, feeds), strict=True))
    bound: dict[str, tuple[int, str]] = {}
    for graph_input in probe.graph.input:
        value = feeds.get(graph_input.name)
        if graph_input.type.HasField("tensor_type") and isinstance(value, np.ndarray):
            for dim, size in zip(graph_input.type.tensor_type.shape.dim, value.shape, strict=False):
                if dim.HasField("dim_param"):
                    bound.setdefault(dim.dim_param, (size, f"input {graph_input.name}"))
    for name, type_proto in declared.items():
        kind = type_proto.WhichOneof("value")
        if kind == "sequence_type":
            tensor, actual = type_proto.sequence_type.elem_type, values[name]
        else:
            tensor, actual = type_proto, [values[name]]
        if not tensor.tensor_type.HasField("shape"):
            continue
        dims = tensor.tensor_type.shape.dim
        for element in actual:
            shape = np.asarray(element).shape
            assert len(shape) == len(dims), f"{name}: rank {len(shape)}, declared {len(dims)}"
            for k, dim in enumerate(dims):
                if dim.HasField("dim_value"):
                    assert dim.dim_value == shape[k], (
                        f"{name}: dim {k} is declared {dim.dim_value} but is {shape[k]}"
                    )
                elif dim.HasField("dim_param") and kind != "sequence_type":
                    size, where = bound.setdefault(dim.dim_param, (shape[k], name))
                    assert size == shape[k], (
                        f"{name}: dim {k} is declared {dim.dim_param!r}, which is {size} "
                        f"in {where}, but is {shape[k]}"
                    )


def assert_same(actual, expected, path: str = "output") -> None:
    """Equal values: sequences element by element, same dtype and shape."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, list), f"{path}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
        return
    if expected is None or actual is None:  # an absent optional
        assert actual is None and expected is None, f"{path}: {actual!r} != {expected!r}"
        return
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    if np.issubdtype(expected.dtype, np.floating) or expected.dtype.name in NARROW_FLOATS:
        assert_close(actual, expected, path)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=path)


def assert_close(
    actual: np.ndarray,
    expected: np.ndarray,
    path: str = "output",
    rounded_as: np.dtype | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """Float values equal up to rounding, by the project's one rule for narrow
    floats (:class:`lowering.verify.Tolerance`): float16, bfloat16 and float8
    values, or values that carry the rounding of ``rounded_as``, within its
    ulps of max(|b|, 1); an rtol fits no float16 value (24.53 and 24.56 are two
    ulps apart, 1.3e-3 relative). Other floats: ``rtol`` and ``atol``. NaN
    matches NaN, an infinity only the same infinity."""
    narrow = rounded_as if rounded_as is not None else expected.dtype
    if np.dtype(narrow).name not in NARROW_FLOATS:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=path)
        return
    a, b = actual.astype(np.float64), expected.astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    assert np.array_equal(nan_a, nan_b), f"{path}: NaN in different places"
    infinite = np.isinf(a) | np.isinf(b)
    assert np.array_equal(a[infinite], b[infinite]), f"{path}: infinities differ"
    finite = ~(nan_a | infinite)
    tolerance = Tolerance()
    allowed = tolerance.allowed(np.dtype(narrow), np.where(finite, b, 0.0))
    with np.errstate(invalid="ignore"):  # inf - inf, masked out
        diff = np.where(finite, np.abs(a - b), 0.0)
    bad = diff > allowed
    if np.any(bad):
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{path}: {int(bad.sum())} of {bad.size} values differ by more than "
            f"{tolerance.describe(np.dtype(narrow))}, at {list(where)}: "
            f"{actual[where]!r} (actual), {expected[where]!r} (expected)"
        )


def normalized(message):
    """A copy with explicitly set default scalars cleared.

    onnx_ir writes ``domain: ""`` where the input left the field unset; both
    mean the same, so comparisons of protos ignore the difference.
    """
    copy = type(message)()
    copy.CopyFrom(message)
    _clear_defaults(copy)
    return copy


def _clear_defaults(message) -> None:
    for field, value in list(message.ListFields()):
        if field.message_type is not None:
            items = value if field.is_repeated else [value]
            for item in items:
                if hasattr(item, "ListFields"):
                    _clear_defaults(item)
        elif not field.is_repeated and value == field.default_value:
            message.ClearField(field.name)


WEIGHTED_MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[4]) x) => (seq(float[4]) y) {
  y = SequenceMap <body = body (float[4] a) => (float[4] c) { c = Mul(a, w0) }> (x)
}"""


def weighted_model(folder: pathlib.Path, tensors: int, values: int, real: bool) -> pathlib.Path:
    """A map that reads w0, with ``tensors`` float32 initializers of ``values``
    each in ``weights.bin``; the map's elements have ``values`` too. Unless ``real``,
    the file is sparse zeros (fast to make)."""
    model = parse(WEIGHTED_MAP.replace("[4]", f"[{values}]"))
    data = folder / "weights.bin"
    size = values * 4
    if real:
        rng = np.random.default_rng(0)
        with open(data, "wb") as f:
            f.writelines(
                rng.standard_normal(values).astype(np.float32).tobytes() for _ in range(tensors)
            )
    else:
        with open(data, "wb") as f:
            f.truncate(tensors * size)
    for i in range(tensors):
        tensor = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[values])
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", "weights.bin"),
            ("offset", str(i * size)),
            ("length", str(size)),
        ):
            tensor.external_data.add(key=key, value=value)
        model.graph.initializer.append(tensor)
    path = folder / "model.onnx"
    onnx.save(model, path)
    return path


def peak_rss_mib(command: list[str]) -> float:
    """The peak resident memory of ``command``, run in a fresh process, in MiB."""
    probe = (
        "import resource, subprocess, sys; "
        "subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *command], check=True, capture_output=True, text=True
    )
    return int(out.stdout.split()[-1]) / 1024


#: onnx_ir's objects that rewrites keep in sets and dicts, hashed by identity.
_HASHED_BY_IDENTITY = (ir.Node, ir.Value, ir.Graph, ir.Function, ir.Model)


@contextlib.contextmanager
def salted_hashes(salt: int) -> Iterator[None]:
    """Hash onnx_ir's nodes, values, graphs and functions in another order.

    Their hash is their address, so a set of them iterates in an order that
    changes between runs of one process. Lowering the same model under two
    salts shows any output that depends on that order. Only for objects made
    inside the block: one made before it changes its hash in a dict.
    """
    for cls in _HASHED_BY_IDENTITY:
        cls.__hash__ = lambda self, salt=salt: hash((id(self), salt))  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls in _HASHED_BY_IDENTITY:
            del cls.__hash__
