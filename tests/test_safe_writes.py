"""The tool never writes a file it was not asked to write (issue 11).

Each test snapshots the whole temporary tree before and after a run, and
checks that nothing but OUT and the data files created for OUT changed.
"""

from __future__ import annotations

import os
import pathlib
import pty
import select
import threading
import tty

import numpy as np
import onnx
import pytest

from lowering.cli import main
from tests.helpers import assert_same, cli, op_types, parse, run, weighted_model

SIMPLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""


def snapshot(root: pathlib.Path) -> dict[str, tuple]:
    """Every entry under ``root``: its kind, and its bytes or link target."""
    entries: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            entries[rel] = ("link", os.readlink(path))
        elif path.is_fifo():
            entries[rel] = ("fifo",)
        elif path.is_dir():
            entries[rel] = ("dir",)
        else:
            entries[rel] = ("file", path.read_bytes())
    return entries


def changed(before: dict, after: dict) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def lower(*argv: str | pathlib.Path) -> int:
    return main([str(a) for a in argv])


def weights(path: pathlib.Path) -> np.ndarray:
    return onnx.numpy_helper.to_array(onnx.load(path).graph.initializer[0])


def results(path: pathlib.Path) -> list:
    model = onnx.load(path)
    (width,) = (
        d.dim_value for d in model.graph.input[0].type.sequence_type.elem_type.tensor_type.shape.dim
    )
    x = [np.ones(width, np.float32), np.arange(width, dtype=np.float32)]
    return run(model, {"x": x})


def one_error_line(capsys, *expected: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    return err


# --- 1. IN's data is never written -------------------------------------------------------


def test_in_data_is_never_overwritten(tmp_path, capsys):
    source = weighted_model(tmp_path, 3, 4, real=True)
    expected = results(source)
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "out.onnx", "--external-data", "weights.bin") == 1
    one_error_line(capsys, str(tmp_path / "weights.bin"), "IN reads its weights from it")
    assert changed(before, snapshot(tmp_path)) == set()
    assert_same(results(source), expected)


def test_in_itself_is_never_a_data_file(tmp_path, capsys):
    source = weighted_model(tmp_path, 3, 4, real=True)
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "out.onnx", "--external-data", "model.onnx") == 1
    one_error_line(capsys, "it is IN itself")
    assert changed(before, snapshot(tmp_path)) == set()


def test_out_is_never_ins_data_file(tmp_path, capsys):
    source = weighted_model(tmp_path, 3, 4, real=True)
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "weights.bin") == 1
    one_error_line(capsys, "the data file IN reads its weights from")
    assert changed(before, snapshot(tmp_path)) == set()


# --- 2. another model's data is never overwritten ---------------------------------------


def _two_models(tmp_path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    for name in ("a", "b", "shared"):
        (tmp_path / name).mkdir()
    a = weighted_model(tmp_path / "a", 3, 1024, real=True)
    b = weighted_model(tmp_path / "b", 3, 1024, real=True)
    other = np.arange(3 * 1024, dtype=np.float32) + 100  # b's weights differ from a's
    (tmp_path / "b" / "weights.bin").write_bytes(other.tobytes())
    return a, b, tmp_path / "shared"


def test_models_from_same_named_inputs_share_a_folder(tmp_path, capsys):
    """Copied to another folder, IN's weights are named after OUT (issue 26):
    a second model whose input has the same data file name does not clash."""
    a, b, shared = _two_models(tmp_path)
    before = snapshot(tmp_path)
    assert lower("-q", a, shared / "a.onnx") == 0
    assert changed(before, snapshot(tmp_path)) == {"shared/a.onnx", "shared/a.onnx.data"}
    expected = results(shared / "a.onnx")
    before = snapshot(tmp_path)
    assert lower("-q", b, shared / "b.onnx") == 0
    assert changed(before, snapshot(tmp_path)) == {"shared/b.onnx", "shared/b.onnx.data"}
    assert_same(results(shared / "a.onnx"), expected)
    np.testing.assert_array_equal(weights(shared / "a.onnx"), weights(a))
    np.testing.assert_array_equal(weights(shared / "b.onnx"), weights(b))


def test_a_file_named_like_outs_data_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "m.onnx.data").write_bytes(b"precious")
    source = weighted_model(tmp_path, 3, 1024, real=True)
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "out" / "m.onnx") == 1
    one_error_line(
        capsys,
        "m.onnx.data (named after OUT)",
        "not a data file of the OUT being replaced",
        "name the data file with --external-data NAME",
    )
    assert changed(before, snapshot(tmp_path)) == set()


def test_an_unrelated_existing_file_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "all.bin").write_bytes(b"precious")
    source = weighted_model(tmp_path, 3, 1024, real=True)
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "out" / "m.onnx", "--external-data", "all.bin") == 1
    one_error_line(capsys, "all.bin", "not a data file of the OUT being replaced")
    assert changed(before, snapshot(tmp_path)) == set()


# --- running the same command twice ------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [[], ["--external-data", "lowered.onnx.data"]],
    ids=["layout kept", "external-data"],
)
def test_the_same_command_twice(tmp_path, options):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    source = weighted_model(tmp_path / "in", 3, 1024, real=True)
    target = tmp_path / "out" / "lowered.onnx"
    assert lower("-q", source, target, *options) == 0
    first = snapshot(tmp_path)
    assert lower("-q", source, target, *options) == 0
    assert snapshot(tmp_path) == first  # the same bytes again, nothing else
    np.testing.assert_array_equal(weights(target), weights(source))


def test_in_equals_out_twice_with_external_data(tmp_path):
    source = weighted_model(tmp_path, 3, 1024, real=True)
    expected = weights(source)
    for _ in range(2):  # the second run replaces the data file the first one wrote
        assert lower("-q", source, source, "--external-data", "model.onnx.data") == 0
        np.testing.assert_array_equal(weights(source), expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.onnx",
        "model.onnx.data",
        "weights.bin",
    ]


# --- 3. external data stays in the model's folder ----------------------------------------


def _relocated(tmp_path: pathlib.Path, location: str) -> pathlib.Path:
    (tmp_path / "model").mkdir()
    source = weighted_model(tmp_path / "model", 1, 4, real=True)
    model = onnx.load(source, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    onnx.save(model, source)
    return source


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_locations_out_of_the_folder_are_refused(tmp_path, capsys, kind):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    location = {
        "dotdot": "../outside.bin",
        "absolute": str(outside),
        "symlink": "link.bin",
    }[kind]
    source = _relocated(tmp_path, location)
    if kind == "symlink":
        (tmp_path / "model" / "link.bin").symlink_to(outside)
    (tmp_path / "elsewhere").mkdir()
    before = snapshot(tmp_path)
    assert lower(source, tmp_path / "elsewhere" / "out.onnx") == 1
    one_error_line(capsys, str(source), f"external data location {location!r}", "refused")
    assert changed(before, snapshot(tmp_path)) == set()


def test_data_is_never_written_through_a_symlinked_folder(tmp_path, capsys):
    (tmp_path / "model" / "sub").mkdir(parents=True)
    source = weighted_model(tmp_path / "model", 1, 4, real=True)
    os.replace(tmp_path / "model" / "weights.bin", tmp_path / "model" / "sub" / "weights.bin")
    model = onnx.load(source, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "sub/weights.bin"
    onnx.save(model, source)
    (tmp_path / "out").mkdir()
    (tmp_path / "victim").mkdir()
    (tmp_path / "out" / "sub").symlink_to(tmp_path / "victim")
    before = snapshot(tmp_path)
    # IN's location sub/weights.bin would lead through the link: the weights
    # go to the file named after OUT instead, and the link's target is untouched.
    assert lower("-q", source, tmp_path / "out" / "m.onnx") == 0
    assert changed(before, snapshot(tmp_path)) == {"out/m.onnx", "out/m.onnx.data"}
    np.testing.assert_array_equal(weights(tmp_path / "out" / "m.onnx"), weights(source))


# --- 4. OUT kinds: symlink, FIFO, character device, stdout; IN from stdin ----------------


def _lowered_bytes_ok(data: bytes) -> onnx.ModelProto:
    model = onnx.load_model_from_string(data)
    assert "SequenceMap" not in op_types(model)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("exists", [True, False])
def test_symlink_out_replaces_its_target_and_stays_a_link(tmp_path, exists):
    onnx.save(parse(SIMPLE), tmp_path / "in.onnx")
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "model.onnx"
    if exists:
        real.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(real)
    before = snapshot(tmp_path)
    assert lower("-q", tmp_path / "in.onnx", link) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    _lowered_bytes_ok(real.read_bytes())
    assert changed(before, snapshot(tmp_path)) == {"real/model.onnx"}


def test_fifo_out_is_streamed_to(tmp_path):
    onnx.save(parse(SIMPLE), tmp_path / "in.onnx")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = bytearray()

    def drain():
        with open(fifo, "rb") as stream:
            received.extend(stream.read())

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        assert lower("-q", tmp_path / "in.onnx", fifo) == 0
    finally:
        reader.join(timeout=30)
    assert fifo.is_fifo()
    _lowered_bytes_ok(bytes(received))


def test_character_device_out_is_streamed_to(tmp_path):
    """A pseudo-terminal is a character device this test owns (no system path is written)."""
    onnx.save(parse(SIMPLE), tmp_path / "in.onnx")
    master, slave = pty.openpty()
    tty.setraw(slave)
    device = os.ttyname(slave)
    received = bytearray()
    done = threading.Event()

    def drain():
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                received.extend(os.read(master, 65536))
            elif done.is_set():
                return

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        assert lower("-q", tmp_path / "in.onnx", device) == 0
    finally:
        done.set()
        reader.join(timeout=30)
        os.close(slave)
        os.close(master)
    _lowered_bytes_ok(bytes(received))


def test_stdin_to_stdout(tmp_path):
    data = parse(SIMPLE).SerializeToString()
    before = snapshot(tmp_path)
    result = cli(["-q", "-", "-"], stdin=data, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    _lowered_bytes_ok(result.stdout)
    assert changed(before, snapshot(tmp_path)) == set()


def test_stdin_to_a_file_and_the_summary_names_it(tmp_path):
    result = cli(["-", str(tmp_path / "out.onnx")], stdin=parse(SIMPLE).SerializeToString())
    assert result.returncode == 0, result.stderr
    assert b"in <stdin> -> " in result.stderr
    _lowered_bytes_ok((tmp_path / "out.onnx").read_bytes())


def test_stdout_embeds_external_weights(tmp_path):
    source = weighted_model(tmp_path, 3, 4, real=True)
    result = cli([str(source), "-"])
    assert result.returncode == 0, result.stderr
    assert b"weights embedded in <stdout>" in result.stderr
    model = _lowered_bytes_ok(result.stdout)
    assert not any(t.external_data for t in model.graph.initializer)
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(model.graph.initializer[0]), weights(source)
    )


def test_nothing_to_lower_streams_in_byte_for_byte(tmp_path):
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Neg(x) }""")
    result = cli(["-q", "-", "-"], stdin=model.SerializeToString())
    assert result.returncode == 0 and result.stdout == model.SerializeToString()


# --- failures change nothing -------------------------------------------------------------


def test_a_failed_write_leaves_no_staging_folder(tmp_path, capsys, monkeypatch):
    source = weighted_model(tmp_path, 3, 4, real=True)
    (tmp_path / "out").mkdir()
    before = snapshot(tmp_path)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("onnx_ir.save", broken)
    assert lower(source, tmp_path / "out" / "m.onnx") == 1
    one_error_line(capsys, "No space left on device")
    assert changed(before, snapshot(tmp_path)) == set()


def test_verify_compares_what_was_streamed(tmp_path):
    onnx.save(parse(SIMPLE), tmp_path / "in.onnx")
    result = cli(["--verify", str(tmp_path / "in.onnx"), "-"])
    assert result.returncode == 0, result.stderr
    assert b"verdict" in result.stderr and b" ok" in result.stderr
    _lowered_bytes_ok(result.stdout)


def test_a_data_location_named_like_out_is_not_copied_under_that_name(tmp_path):
    """IN's weights in a file named as OUT will be: copied under IN's name,
    they would be OUT itself; named after OUT, they are OUT.data."""
    source = _relocated(tmp_path, "lowered.onnx")
    os.replace(tmp_path / "model" / "weights.bin", tmp_path / "model" / "lowered.onnx")
    (tmp_path / "out").mkdir()
    before = snapshot(tmp_path)
    assert lower("-q", source, tmp_path / "out" / "lowered.onnx") == 0
    assert changed(before, snapshot(tmp_path)) <= {"out/lowered.onnx", "out/lowered.onnx.data"}
    np.testing.assert_array_equal(weights(tmp_path / "out" / "lowered.onnx"), weights(source))


def test_a_data_file_that_became_a_symlink_is_replaced_not_followed(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    source = weighted_model(tmp_path / "in", 3, 1024, real=True)
    target = tmp_path / "out" / "lowered.onnx"
    assert lower("-q", source, target) == 0
    data = tmp_path / "out" / "lowered.onnx.data"
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"not yours")
    os.unlink(data)
    data.symlink_to(victim)
    assert lower("-q", source, target) == 0  # OUT's own data file: replaced...
    assert victim.read_bytes() == b"not yours"  # ...but never written through
    assert not data.is_symlink()
    np.testing.assert_array_equal(weights(target), weights(source))


def test_verify_reads_in_from_stdin(tmp_path):
    result = cli(
        ["--verify", "-", str(tmp_path / "out.onnx")], stdin=parse(SIMPLE).SerializeToString()
    )
    assert result.returncode == 0, result.stderr
    assert b"verdict" in result.stderr and b" ok" in result.stderr
    _lowered_bytes_ok((tmp_path / "out.onnx").read_bytes())
