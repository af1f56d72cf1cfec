"""The verifier's schedule, options, inputs files and replay.

What the default schedule must cover is stated once, in
``test_the_default_schedule_covers_the_edges``; the mutants in
tests/test_verify.py show that it is what catches them.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

import hypothesis
import hypothesis.strategies as st
import numpy as np
import onnx
import pytest

import lowering
from lowering import cli, verify
from lowering.cli import run_pipeline
from tests.cases.verify_mutants import MAP, MUTANTS
from tests.helpers import parse

F32 = onnx.TensorProto.FLOAT


@pytest.fixture(autouse=True)
def temporary_folder(tmp_path_factory, monkeypatch):
    """Failing runs' inputs go to the temporary folder: this test's, not /tmp."""
    folder = tmp_path_factory.mktemp("temp")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _save(tmp_path, a: onnx.ModelProto, b: onnx.ModelProto) -> tuple[str, str]:
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    return str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")


# The schedule.

PORTS = [
    verify.Port("s", True, F32, ("N", "H")),
    verify.Port("t", False, F32, ("N",)),
    verify.Port("k", False, onnx.TensorProto.INT64, ()),
    verify.Port("u", False, F32, None),
]


def test_the_default_schedule_covers_the_edges():
    runs = verify.feed_sets(PORTS, None, None, 0, None, None, [])
    lengths = {len(feeds["s"]) for _, _, feeds in runs}
    assert {0, 1, 2, 3} <= lengths
    assert any(4 < n < 8 for n in lengths) and any(n >= 8 for n in lengths)
    sizes_n = {feeds["t"].shape[0] for _, _, feeds in runs}
    sizes_h = {element.shape[1] for _, _, feeds in runs for element in feeds["s"]}
    for sizes in (sizes_n, sizes_h):  # a tensor dim, and a dim only sequences use
        assert 1 in sizes and max(sizes) >= 5
    floats = [
        np.concatenate([feeds["t"].ravel(), feeds["u"].ravel()] + [e.ravel() for e in feeds["s"]])
        for _, _, feeds in runs
    ]
    assert any(np.isnan(f).any() and np.isposinf(f).any() and np.isneginf(f).any() for f in floats)
    everything = np.concatenate(floats)
    finite = everything[np.isfinite(everything)]
    assert (finite < 0).any() and (finite == 0).any() and (np.abs(finite) >= 1e3).any()
    assert np.signbit(finite[finite == 0]).any()  # -0.0 too
    ints = np.array([feeds["k"] for _, _, feeds in runs])
    assert (ints < 0).any() and (ints == 0).any() and (np.abs(ints) >= 100).any()


def test_runs_takes_the_first_runs_and_cycles_past_the_end():
    assert verify.schedule(3) == list(verify.DEFAULT_SCHEDULE[:3])
    total = len(verify.DEFAULT_SCHEDULE)
    assert verify.schedule(total + 2)[total:] == list(verify.DEFAULT_SCHEDULE[:2])
    assert verify.schedule() == list(verify.DEFAULT_SCHEDULE)


def test_verbose_prints_the_schedule(tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, lowering.lower(model))
    assert verify.main([a, b, "-v"]) == 0
    out = capsys.readouterr().err
    for run, spec in enumerate(verify.DEFAULT_SCHEDULE):
        assert re.search(
            rf"^run {run} \({re.escape(spec.describe())}; N=\d+\): compared$", out, re.MULTILINE
        )
    assert f"({len(verify.DEFAULT_SCHEDULE)} runs)" in out


# --val-range.


def test_val_range_parses_names_with_colons():
    assert verify.parse_val_range("0,1") == (None, verify.ValueRange(0.0, 1.0))
    assert verify.parse_val_range("a:b:-2.5,1e3") == ("a:b", verify.ValueRange(-2.5, 1000.0))
    for bad in ["1,0", "0", "x:", "x:a,b", ":0,1", "0,inf", "nan,1"]:
        with pytest.raises(argparse.ArgumentTypeError):
            verify.parse_val_range(bad)


def test_val_range_keeps_every_run_in_range():
    ranges = {None: verify.ValueRange(-1, 2), "k": verify.ValueRange(3, 5)}
    runs = verify.feed_sets(PORTS, None, None, 0, None, ranges, [])
    for _, _, feeds in runs:
        for value in [feeds["t"], feeds["u"], *feeds["s"]]:
            assert np.all((value >= -1) & (value <= 2))  # no NaN either
        assert 3 <= feeds["k"] <= 5
    edges = np.concatenate([feeds["t"] for _, _, feeds in runs])
    assert {-1.0, 2.0} <= set(edges.tolist())  # the edge modes hit the bounds


def test_val_range_hides_a_bug_outside_the_range_a_model_is_defined_on(tmp_path, capsys):
    negative_only = MUTANTS["wrong only for NaN inputs"]().SerializeToString()
    wrong_below_zero = onnx.ModelProto.FromString(negative_only)
    body = next(n for n in wrong_below_zero.graph.node if n.op_type == "Loop").attribute[0].g
    isnan = next(n for n in body.node if n.op_type == "IsNaN")
    zero = onnx.helper.make_node("Constant", [], ["z0"], value_float=0.0)
    isnan.op_type, isnan.input[:] = "Less", ["a", "z0"]
    body.node.insert(0, zero)
    a, b = _save(tmp_path, parse(MAP), wrong_below_zero)
    assert verify.main([a, b]) == 1
    assert verify.main([a, b, "--val-range", "x:0,10", "--val-range", "t:0,10"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("nothere:0,1", "names 'nothere', which is not an input (inputs: x, t)"),
        ("1,0", "LO must not exceed HI"),
    ],
)
def test_bad_val_range_exits_2(option, message, tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, model)
    with pytest.raises(SystemExit) as usage:
        code = verify.main([a, b, "--val-range", option])
        raise SystemExit(code)
    assert usage.value.code == 2 and message in capsys.readouterr().err


# Inputs files: conversion, refusal, replay.


def _npz(tmp_path, name: str, **arrays) -> str:
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def _map_inputs(x_dtype=np.float32, t_dtype=np.float32, t=None) -> dict:
    rng = np.random.default_rng(0)
    return {
        "x[0]": rng.standard_normal(3).astype(x_dtype),
        "x[1]": rng.standard_normal(3).astype(x_dtype),
        "t": np.asarray(t if t is not None else rng.standard_normal(3)).astype(t_dtype),
    }


@pytest.mark.parametrize(
    "t",
    [
        np.array([1.0, 2.5, -3.0], np.float64),
        np.array([1, 2, -3], np.int64),
        np.array([1, 2, -3], np.int8),
    ],
    ids=["float64", "int64", "int8"],
)
def test_npz_arrays_are_converted_when_no_value_changes(t, tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, lowering.lower(model))
    path = _npz(tmp_path, "in.npz", **_map_inputs(np.float64, t_dtype=t.dtype, t=t))
    assert verify.main([a, b, "--inputs", path]) == 0
    out = capsys.readouterr().err
    assert "float64 converted to float32, the declared dtype" in out and "x[1]" in out
    assert f"{t.dtype} converted to float32" in out


@pytest.mark.parametrize(
    ("value", "dtype", "input_text"),
    [
        (1e300, np.float64, "float"),  # would overflow to inf
        (1 + 2j, np.complex64, "float"),
        (0.5, np.float64, "int64"),
        (2.0**40, np.int64, "int32"),
        (-1, np.int64, "uint8"),
        (2, np.int64, "bool"),
        ("one", np.str_, "float"),
    ],
)
def test_npz_arrays_are_refused_when_values_would_change(
    value, dtype, input_text, tmp_path, capsys
):
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({input_text}[1] t) => ({input_text}[1] y) {{ y = Identity(t) }}""")
    a, b = _save(tmp_path, model, model)
    path = _npz(tmp_path, "in.npz", t=np.array([value], dtype=dtype))
    assert verify.main([a, b, "--inputs", path]) == 2
    err = capsys.readouterr().err
    assert "onnx-verify: error:" in err and "t is " in err and f"tensor({input_text})" in err


def test_integral_floats_are_accepted_for_ints(tmp_path, capsys):
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (int64[2] t, bool[2] f) => (int64[2] y, bool[2] z) { y = Identity(t) z = Identity(f) }""")
    a, b = _save(tmp_path, model, model)
    path = _npz(tmp_path, "in.npz", t=np.array([2.0, -7.0]), f=np.array([0, 1]))
    assert verify.main([a, b, "--inputs", path]) == 0
    assert "float64 converted to int64" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [["--runs", "2", "--inputs", "IN"], ["--inputs", "IN", "--runs", "2"]],
)
def test_runs_with_inputs_is_a_usage_error(args, tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, model)
    path = _npz(tmp_path, "in.npz", **_map_inputs())
    args = [path if arg == "IN" else arg for arg in args]
    with pytest.raises(SystemExit) as usage:
        verify.main([a, b, *args])
    assert usage.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        cli.main(["--verify", a, str(tmp_path / "out.onnx"), *args])
    assert usage.value.code == 2


def test_dim_with_inputs_is_refused(tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, model)
    path = _npz(tmp_path, "in.npz", **_map_inputs())
    assert verify.main([a, b, "--inputs", path, "--dim", "N=3"]) == 2
    assert "not given with --inputs" in capsys.readouterr().err


def test_an_inputs_file_naming_something_else_is_refused(tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, model)
    path = _npz(tmp_path, "in.npz", **_map_inputs(), extra=np.zeros(1))
    assert verify.main([a, b, "--inputs", path]) == 2
    assert "'extra' is not an input of the model" in capsys.readouterr().err


def test_the_failing_run_is_saved_and_replays(tmp_path, capsys, temporary_folder):
    keep = temporary_folder / "verify-run4-mine.npz"
    keep.write_bytes(b"the user's")
    original, mutant = parse(MAP), MUTANTS["wrong only for sequences of length >= 4"]()
    a, b = _save(tmp_path, original, mutant)
    assert verify.main([a, b]) == 1
    out = capsys.readouterr().err
    saved = re.search(
        r"inputs of failing run (\d+) saved to (\S+); replay with --inputs \2$", out, re.MULTILINE
    )
    assert saved, out
    path = saved.group(2)
    assert path.startswith(str(temporary_folder)) and path.endswith(".npz")
    assert keep.read_bytes() == b"the user's"
    stored = np.load(path)
    assert len([key for key in stored.files if key.startswith("x[")]) >= 4
    assert verify.main([a, b, "--inputs", path]) == 1  # the replay fails the same way
    replay = capsys.readouterr().err
    assert "(1 run)" in replay and "MISMATCH" in replay and "saved to" not in replay
    assert verify.main([a, b]) == 1  # a second failure: a second, new file
    again = re.search(r"saved to (\S+);", capsys.readouterr().err).group(1)
    assert again != path and len(list(temporary_folder.iterdir())) == 3
    correct = lowering.lower(original)
    onnx.save(correct, tmp_path / "b.onnx")
    assert verify.main([a, b, "--inputs", path]) == 0


def test_save_inputs_writes_every_run_and_replays_them(tmp_path, capsys, temporary_folder):
    original = parse(MAP)
    a, b = _save(tmp_path, original, lowering.lower(original))
    path = str(tmp_path / "all.npz")
    assert verify.main([a, b, "--save-inputs", path, "--seed", "5"]) == 0
    assert (
        f"inputs of {len(verify.DEFAULT_SCHEDULE)} runs saved to {path}; replay with --inputs {path}"
        in capsys.readouterr().err
    )
    assert verify.main([a, b, "--inputs", path]) == 0
    assert f"({len(verify.DEFAULT_SCHEDULE)} runs)" in capsys.readouterr().err
    ports = verify.model_ports(original, "input")
    synthesized = verify.feed_sets(ports, None, None, 5, None, None, [])
    replayed = verify.read_inputs(path, ports)
    assert [label for label, _ in replayed] == list(range(len(verify.DEFAULT_SCHEDULE)))
    for (_, _, expected), (_, got) in zip(synthesized, replayed, strict=True):
        assert np.array_equal(expected["t"], got["t"], equal_nan=True)
        assert len(expected["x"]) == len(got["x"])
        for e, g in zip(expected["x"], got["x"], strict=True):
            assert np.array_equal(e, g, equal_nan=True)
    mutant = MUTANTS["wrong only at length 2"]()
    onnx.save(mutant, tmp_path / "b.onnx")
    assert verify.main([a, b, "--save-inputs", path]) == 1
    out = capsys.readouterr().err
    assert re.search(
        rf"inputs of {len(verify.DEFAULT_SCHEDULE)} runs saved to \S+ \(run \d+ fails\)", out
    )
    assert list(temporary_folder.iterdir()) == []  # the user's file holds the failing run


ROUND_TRIP_DTYPES = ["float", "double", "float16", "int8", "uint64", "bool", "string", "bfloat16"]


@pytest.mark.parametrize("dtype", ROUND_TRIP_DTYPES)
def test_saved_inputs_of_every_dtype_replay(dtype, tmp_path, capsys):
    # onnxruntime has no seq(tensor(bfloat16)) and returns no bfloat16 arrays
    sequence = dtype != "bfloat16"
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({dtype}[N] x{f", seq({dtype}[M]) s" if sequence else ""})
      => ({dtype if sequence else "float"}[N] y{f", seq({dtype}[M]) t" if sequence else ""}) {{
      y = {"Identity" if sequence else "Cast <to = 1>"}(x)
      {"t = Identity(s)" if sequence else ""}
    }}""")
    a, b = _save(tmp_path, model, model)
    path = str(tmp_path / "all.npz")
    assert verify.main([a, b, "--save-inputs", path]) == 0, capsys.readouterr()
    assert verify.main([a, b, "--inputs", path]) == 0, capsys.readouterr()
    ports = verify.model_ports(model, "input")
    first = verify.feed_sets(ports, None, None, 0, None, None, [])
    again = verify.feed_sets(ports, path, None, 0, None, None, [])
    for (_, _, expected), (_, _, got) in zip(first, again, strict=True):
        for name in ["x", "s"] if sequence else ["x"]:
            values, stored = expected[name], got[name]
            if not sequence or name == "x":
                values, stored = [values], [stored]
            assert len(values) == len(stored)
            for e, g in zip(values, stored, strict=True):
                assert g.dtype == e.dtype and g.shape == e.shape
                if dtype == "string":
                    assert e.tolist() == g.tolist()
                else:
                    assert np.array_equal(
                        e.astype(np.float64), g.astype(np.float64), equal_nan=True
                    )


# One option set: onnx-lower --verify takes what lowering.verify takes.


def test_lowering_cli_takes_every_comparison_option():
    shared = argparse.ArgumentParser()
    verify.add_options(shared)
    options = {s for action in shared._actions for s in action.option_strings} - {"-h", "--help"}
    ours = {s for action in cli._parser()._actions for s in action.option_strings}
    assert options <= ours
    assert {"--inputs", "--runs", "--seed", "--dim", "--rtol", "--atol"} <= options
    assert {"--val-range", "--save-inputs"} <= options


def test_lowering_cli_verify_with_options(tmp_path, capsys):
    onnx.save(parse(MAP), tmp_path / "in.onnx")
    saved = tmp_path / "runs.npz"
    args = ["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]
    options = ["--runs", "4", "--seed", "2", "--dim", "N=2", "--rtol", "1e-3", "--atol", "0"]
    options += ["--val-range", "t:-1,1", "--save-inputs", str(saved)]
    assert cli.main([*args, *options]) == 0
    err = capsys.readouterr().err
    assert "(4 runs)" in err and f"saved to {saved}" in err
    runs = verify.read_inputs(str(saved), verify.model_ports(parse(MAP), "input"))
    assert len(runs) == 4 and all(feeds["t"].shape == (2,) for _, feeds in runs)
    assert all(np.all(np.abs(feeds["t"]) <= 1) for _, feeds in runs)
    assert cli.main([*args, "--inputs", str(saved)]) == 0
    assert "(4 runs)" in capsys.readouterr().err
    assert cli.main([*args, "-v", "--runs", "2"]) == 0
    assert "run 1 (length 0, dims 1..4, normal values; N=" in capsys.readouterr().err


def test_lowering_cli_verify_saves_the_failing_run(tmp_path, capsys, monkeypatch, temporary_folder):
    def sabotaged(model, **kwargs):
        result = run_pipeline(model, **kwargs)
        loop = next(n for n in model.graph if n.op_type == "Loop")
        mul = next(n for n in loop.attributes["body"].as_graph() if n.op_type == "Mul")
        mul.op_type = "Add"
        return result

    monkeypatch.setattr(cli, "run_pipeline", sabotaged)
    onnx.save(parse(MAP), tmp_path / "in.onnx")
    args = ["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    path = re.search(r"saved to (\S+); replay with --inputs", err).group(1)
    assert path.startswith(str(temporary_folder))
    assert cli.main([*args, "--inputs", path]) == 1
    assert "(1 run)" in capsys.readouterr().err


def test_lowering_cli_verify_bad_inputs_exit_2(tmp_path, capsys):
    onnx.save(parse(MAP), tmp_path / "in.onnx")
    path = _npz(tmp_path, "in.npz", t=np.zeros(3, np.float32))
    args = ["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]
    assert cli.main([*args, "--inputs", path]) == 2
    err = capsys.readouterr().err
    assert "cannot use the inputs" in err and "has no value for input(s) x" in err


def test_module_and_console_script_entry_points(tmp_path):
    model = parse(MAP)
    a, b = _save(tmp_path, model, lowering.lower(model))
    done = subprocess.run(
        [sys.executable, "-m", "lowering.verify", a, b, "--runs", "2"],
        capture_output=True,
        text=True,
        check=False,
        cwd=pathlib.Path(__file__).parents[1],
    )
    assert done.returncode == 0 and "(2 runs)" in done.stderr and done.stdout == "", done.stderr
    project = (pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '\nonnx-verify = "lowering.verify:main"\n' in project  # tomllib is 3.11+


def test_save_inputs_to_a_folder_that_does_not_exist_exits_2(tmp_path, capsys):
    model = parse(MAP)
    a, b = _save(tmp_path, model, model)
    assert verify.main([a, b, "--save-inputs", str(tmp_path / "no" / "such.npz")]) == 2
    assert "cannot write --save-inputs" in capsys.readouterr().err


def test_an_unwritable_temporary_folder_is_a_note(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    a, b = _save(tmp_path, parse(MAP), MUTANTS["wrong only at length 2"]())
    assert verify.main([a, b]) == 1
    assert "note: could not save the failing run's inputs" in capsys.readouterr().err


_DIMS = st.one_of(st.sampled_from(["A", "B", "C"]), st.integers(1, 3), st.none())
_PORTS = st.lists(
    st.tuples(
        st.booleans(), st.sampled_from([F32, onnx.TensorProto.INT32]), st.lists(_DIMS, max_size=3)
    ),
    min_size=1,
    max_size=4,
)


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(_PORTS)
def test_every_symbolic_dim_takes_1_and_at_least_5_for_any_inputs(specs):
    ports = [
        verify.Port(f"i{k}", sequence, dtype, tuple(dims))
        for k, (sequence, dtype, dims) in enumerate(specs)
    ]
    seen: dict[str, set[int]] = {}
    lengths = set()
    for _, _, feeds in verify.feed_sets(ports, None, None, 0, None, None, []):
        for port in ports:
            value = feeds[port.name]
            if port.sequence:
                lengths.add(len(value))
            for array in value if port.sequence else [value]:
                assert isinstance(array, np.ndarray) and array.ndim == len(port.dims)
                for dim, size in zip(port.dims, array.shape, strict=True):
                    if isinstance(dim, str):
                        seen.setdefault(dim, set()).add(size)
    for name, sizes in seen.items():
        assert 1 in sizes and max(sizes) >= 5, (name, sizes)
    if any(port.sequence for port in ports):
        assert {0, 1, 2, 3} <= lengths and max(lengths) >= 8
