"""The command line: summary, -v/-q, exit codes, safe writes, external data."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest

from lowering.cli import main
from tests.helpers import assert_same, op_types, parse, run

SIMPLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""

TWO_SCOPES = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x, bool flag) => (seq(float[N]) y) {
  [top] m = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
  [branch] y = If (flag) <
    then_branch = then_g () => (seq(float[N]) t) {
      [inner] t = SequenceMap <body = body2 (float[N] a2) => (float[N] c2) { c2 = Abs(a2) }> (m)
    },
    else_branch = else_g () => (seq(float[N]) e) { e = Identity(m) }>
}"""

# The body calls an op nobody knows, and the map's output is not declared:
# no one can say what the output's element type is.
UNKNOWABLE = """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
g (seq(float[N]) x) => (float z) {
  [mystery] y = SequenceMap <body = body (float[N] a) => (c) { c = custom.Foo(a) }> (x)
  z = custom.Bar(y)
}"""


def write(path: pathlib.Path, text: str) -> pathlib.Path:
    onnx.save(parse(text), path)
    return path


def test_lowers_and_reports_to_stderr(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", SIMPLE)
    assert main([str(source), str(tmp_path / "out.onnx")]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "lowered 1 SequenceMap node" in captured.err
    assert "main graph 'g': 'the_map'" in captured.err
    result = onnx.load(tmp_path / "out.onnx")
    assert "SequenceMap" not in op_types(result)
    onnx.checker.check_model(result, full_check=True)


def test_summary_names_every_scope(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", TWO_SCOPES)
    assert main([str(source), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    assert "lowered 2 SequenceMap nodes" in err
    assert "1 in main graph 'g': 'top'" in err
    assert "1 in then_branch of If 'branch' in main graph 'g': 'inner'" in err


def test_verbose_prints_each_node_before_and_after(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", SIMPLE)
    assert main(["-v", str(source), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    before, after = err.split("+++ after:")
    assert "= SequenceMap (x)" in before and "Neg (a)" in before
    assert "= SequenceLength (x)" in after and "= Loop (" in after and "SequenceInsert" in after


def test_quiet_prints_nothing(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", SIMPLE)
    assert main(["-q", str(source), str(tmp_path / "out.onnx")]) == 0
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    "argv", [[], ["only_one.onnx"], ["-v", "-q", "a", "b"], ["--bogus", "a", "b"]]
)
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


def test_missing_input_exits_1_naming_the_file(tmp_path, capsys):
    missing = tmp_path / "nope.onnx"
    assert main([str(missing), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "no such file" in err
    assert not (tmp_path / "out.onnx").exists()


def test_garbage_input_exits_1(tmp_path, capsys):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x96\x01 definitely not a model \xff\xfe")
    assert main([str(garbage), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert str(garbage) in err and "Traceback" not in err
    assert not (tmp_path / "out.onnx").exists()


def test_unknowable_element_type_names_node_and_output(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", UNKNOWABLE)
    target = tmp_path / "out.onnx"
    assert main([str(source), str(target)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(source) in err
    assert "'mystery' (SequenceMap) in main graph 'g'" in err
    assert "element type of output 0 ('y')" in err
    assert "Traceback" not in err
    assert not target.exists()


def test_verbose_failure_shows_traceback(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", UNKNOWABLE)
    assert main(["-v", str(source), str(tmp_path / "out.onnx")]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_in_equals_out(tmp_path):
    path = write(tmp_path / "model.onnx", SIMPLE)
    assert main(["-q", str(path), str(path)]) == 0
    assert "Loop" in op_types(onnx.load(path))
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_failed_run_leaves_in_equal_out_untouched(tmp_path):
    path = write(tmp_path / "model.onnx", UNKNOWABLE)
    before = path.read_bytes()
    assert main(["-q", str(path), str(path)]) == 1
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def _socket(path: pathlib.Path) -> pathlib.Path:
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


#: OUTs that cannot be written, and what the one error line says about each.
BAD_OUTS = {
    "a directory": (lambda tmp: tmp, "the output path is a directory"),
    "in a missing folder": (lambda tmp: tmp / "no" / "out.onnx", "does not exist"),
    "a socket": (lambda tmp: _socket(tmp / "s"), "neither a regular file, a FIFO"),
}


@pytest.mark.parametrize("case", list(BAD_OUTS))
def test_an_error_about_out_names_out(tmp_path, capsys, case):
    """Not IN: the file the error is about (issue 26)."""
    source = write(tmp_path / "in.onnx", SIMPLE)
    make, reason = BAD_OUTS[case]
    out = make(tmp_path)
    assert main([str(source), str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"onnx-lower: error: {out}: "), err
    assert reason in err and "in.onnx" not in err


def test_nothing_to_lower_is_copied_byte_for_byte(tmp_path, capsys):
    source = write(
        tmp_path / "in.onnx",
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) { y = Neg(x) }""",
    )
    assert main([str(source), str(tmp_path / "out.onnx")]) == 0
    assert (tmp_path / "out.onnx").read_bytes() == source.read_bytes()
    assert "nothing to lower" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [[], ["--target-opset", "13"]])
def test_optimize_with_nothing_to_lower_says_it_was_not_run(tmp_path, capsys, flags):
    source = write(
        tmp_path / "in.onnx",
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) { y = Neg(x) }""",
    )
    assert main([str(source), str(tmp_path / "out.onnx"), "--optimize", *flags]) == 0
    err = capsys.readouterr().err
    assert "nothing to lower" in err and "  --optimize: not run, as nothing was lowered\n" in err
    if not flags:
        assert (tmp_path / "out.onnx").read_bytes() == source.read_bytes()


def test_output_permissions_follow_umask(tmp_path):
    source = write(tmp_path / "in.onnx", SIMPLE)
    target = tmp_path / "out.onnx"
    assert main(["-q", str(source), str(target)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


WEIGHTED = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[64]) x) => (seq(float[64]) y) <float[64] w> {
  y = SequenceMap <body = body (float[64] a) => (float[64] c) { c = Mul(a, w) }> (x)
}"""


@pytest.mark.parametrize("same_folder", [True, False])
def test_external_data_survives(tmp_path, same_folder):
    model = parse(WEIGHTED)
    weights = np.arange(64, dtype=np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(weights, "w"))
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    onnx.save(
        model,
        source_dir / "in.onnx",
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=0,
    )
    target_dir = source_dir if same_folder else tmp_path / "elsewhere"
    target_dir.mkdir(exist_ok=True)
    target = target_dir / "out.onnx"
    assert main(["-q", str(source_dir / "in.onnx"), str(target)]) == 0
    result = onnx.load(target)  # loads the external data from beside `target`
    stored = onnx.numpy_helper.to_array(result.graph.initializer[0])
    np.testing.assert_array_equal(stored, weights)
    x = [np.ones(64, np.float32), np.full(64, 2, np.float32)]
    assert_same(run(result, {"x": x}), [[a * weights for a in x]])


def test_python_dash_m_and_console_script(tmp_path):
    source = write(tmp_path / "in.onnx", SIMPLE)
    module = subprocess.run(
        [sys.executable, "-m", "lowering", str(source), str(tmp_path / "a.onnx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert module.returncode == 0, module.stderr
    script = pathlib.Path(sys.executable).parent / "onnx-lower"
    console = subprocess.run(
        [str(script), str(source), str(tmp_path / "b.onnx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert console.returncode == 0, console.stderr
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    usage = subprocess.run(
        [sys.executable, "-m", "lowering"], capture_output=True, text=True, check=False
    )
    assert usage.returncode == 2


# --- usage errors, --version, -q and the summary (issue 11) ------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (["--external-data", "sub/w.bin"], "--external-data takes a plain file name"),
        (["--external-data", "../w.bin"], "--external-data takes a plain file name"),
        (["--external-data", "/tmp/w.bin"], "--external-data takes a plain file name"),
        (["--external-data", ""], "--external-data takes a plain file name"),
        (["--external-data", "out.onnx"], "would be OUT itself"),
        (["--target-opset", "10"], "--target-opset must be from 11 to"),
        (["--target-opset", str(onnx.defs.onnx_opset_version() + 1)], "the newest opset"),
        (["--max-unroll", "-1"], "--max-unroll must be an int of at least 0"),
        (["--max-unroll", "two"], "invalid int value"),
    ],
)
def test_usage_errors_exit_2_with_the_usage_line(tmp_path, capsys, options, message):
    source = write(tmp_path / "in.onnx", SIMPLE)
    with pytest.raises(SystemExit) as exit_info:
        main([*options, str(source), str(tmp_path / "out.onnx")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: onnx-lower") and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_external_data_with_a_stream_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--external-data", "w.bin", "in.onnx", "-"])
    assert exit_info.value.code == 2
    assert "needs an OUT file" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["-m", "lowering"], ["-m", "lowering.cli"]])
def test_version(command):
    from lowering import __version__

    if command[-1] == "lowering.cli":  # what the onnx-lower console script calls
        command = ["-c", "import sys, lowering.cli; sys.exit(lowering.cli.main())"]
    result = subprocess.run(
        [sys.executable, *command, "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout == f"onnx-lower {__version__}\n"


UNUSED_INITIALIZER = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) <float[2] unused = {1.0, 2.0}> {
  [the_map] y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
}"""


def test_quiet_verify_prints_nothing_not_even_onnxruntime(tmp_path):
    source = write(tmp_path / "in.onnx", UNUSED_INITIALIZER)
    # onnxruntime does warn about this model, in colour, when left to itself...
    noisy = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys, onnxruntime as ort; "
                "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
            ),
            str(source),
        ],
        capture_output=True,
        check=False,
    )
    assert b"Removing initializer 'unused'" in noisy.stderr
    # ...and -q --verify prints nothing at all.
    quiet = subprocess.run(
        [sys.executable, "-m", "lowering", "-q", "--verify", str(source), str(tmp_path / "o.onnx")],
        capture_output=True,
        check=False,
    )
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", b"")


def test_no_ansi_colours_in_any_output(tmp_path):
    source = write(tmp_path / "in.onnx", UNUSED_INITIALIZER)
    loud = subprocess.run(
        [sys.executable, "-m", "lowering", "-v", "--verify", str(source), str(tmp_path / "o.onnx")],
        capture_output=True,
        check=False,
    )
    assert loud.returncode == 0 and b"lowered 1 SequenceMap" in loud.stderr
    assert b"\x1b[" not in loud.stdout + loud.stderr


def test_summary_counts_ops_before_and_after_and_times_the_run(tmp_path, capsys):
    source = write(tmp_path / "in.onnx", SIMPLE)
    assert main(["--max-unroll", "0", str(source), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"-> \S+out\.onnx \(in \d+\.\d\d s\)", err), err
    rows = {line.split()[0]: line.split()[1:] for line in err.splitlines() if line.startswith("  ")}
    assert rows["SequenceMap"] == ["1", "0"]
    assert rows["Loop"] == ["0", "1"]
    assert re.search(r"1 other op types\s+1\s+1\n", err), err  # Neg
    result = onnx.load(tmp_path / "out.onnx")
    assert rows["total"] == ["2", str(len(op_types(result)))]


MANY_MAPS = 60


def test_a_large_model_gets_a_grouped_summary(tmp_path, capsys):
    maps = "\n".join(
        f"[m{i}] y{i} = SequenceMap <body = b{i} (float[N] a{i}) => (float[N] c{i}) "
        f"{{ c{i} = Neg(a{i}) }}> (x)"
        for i in range(MANY_MAPS)
    )
    outputs = ", ".join(f"seq(float[N]) y{i}" for i in range(MANY_MAPS))
    source = write(
        tmp_path / "in.onnx",
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (seq(float[N]) x) => ({outputs}) {{ {maps} }}""",
    )
    assert main([str(source), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    assert f"lowered {MANY_MAPS} SequenceMap nodes" in err
    assert f"{MANY_MAPS} in main graph 'g'" in err
    assert "'m59'" not in err  # not one line per map
    assert len(err.splitlines()) < 20, err
    assert main(["-v", str(source), str(tmp_path / "out.onnx")]) == 0
    assert "'m59': loop" in capsys.readouterr().err  # -v still lists each


def test_unchanged_only_when_byte_for_byte(tmp_path, capsys):
    plain = write(
        tmp_path / "in.onnx",
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) { y = Neg(x) }""",
    )
    assert main([str(plain), str(tmp_path / "same.onnx")]) == 0
    assert "unchanged, byte for byte" in capsys.readouterr().err
    assert (tmp_path / "same.onnx").read_bytes() == plain.read_bytes()
    # Declaring another opset changes the file: the summary must not call it unchanged.
    assert main(["--target-opset", "13", str(plain), str(tmp_path / "o13.onnx")]) == 0
    err = capsys.readouterr().err
    assert "unchanged, byte for byte" not in err and "declared default-domain opset 13" in err
    assert (tmp_path / "o13.onnx").read_bytes() != plain.read_bytes()


def test_unchanged_model_with_relaid_weights_is_not_called_unchanged(tmp_path, capsys):
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[64] x) => (float[64] y) <float[64] w> { y = Mul(x, w) }""")
    model.graph.initializer.append(
        onnx.numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")
    )
    onnx.save(model, tmp_path / "in.onnx")
    assert (
        main(
            [
                "--external-data",
                "out.onnx.data",
                str(tmp_path / "in.onnx"),
                str(tmp_path / "out.onnx"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "unchanged, byte for byte" not in err and "weights written to out.onnx.data" in err


def test_in_from_a_pipe_path(tmp_path):
    """A path that is not a regular file, such as bash's <(cat model.onnx), is read once."""
    source = write(tmp_path / "in.onnx", SIMPLE)
    result = subprocess.run(
        [
            "bash",
            "-c",
            '"$0" -m lowering -q <(cat "$1") "$2"',
            sys.executable,
            str(source),
            str(tmp_path / "out.onnx"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Loop" in op_types(onnx.load(tmp_path / "out.onnx"))


def test_summary_says_what_target_opset_expanded_and_adapted(tmp_path, capsys):
    source = (
        pathlib.Path(__file__).parent / "data" / "torch" / "corpus_mobilenet_block_opset18.onnx"
    )
    out = tmp_path / "out.onnx"
    assert main([str(source), str(out), "--target-opset", "11"]) == 0
    err = capsys.readouterr().err
    assert "--target-opset 11 expanded into ONNX function bodies: HardSwish-14 x2" in err
    assert "--target-opset 11 adapted: " in err and "ReduceMean-18 -> ReduceMean-13 x2" in err


def test_help_names_every_form_auto_picks(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "into an equivalent form without it (vectorized, unrolled, a Scan or a Loop)" in text
    auto = text[text.index("auto (default)") :]
    forms = ("vectorize (", "unroll (", "scan (", "uniform (", "loop (")
    positions = [auto.index(form) for form in forms]
    assert positions == sorted(positions), auto  # in the order auto tries them
