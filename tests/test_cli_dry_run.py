"""``--dry-run``: what would be lowered, how and why, and what OUT would declare;
nothing written."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import onnx
import pytest

from tests.cases.input_shapes import SPLIT_MAP
from tests.helpers import cli, parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "torch_atleast_2d.onnx"


def _cli(folder: pathlib.Path, *args: object) -> subprocess.CompletedProcess[str]:
    return cli(list(args), cwd=folder, text=True)


def _files(folder: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("out", [[], ["out.onnx"]])
def test_says_what_would_be_lowered_and_declared_and_writes_nothing(out, tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "in.onnx")
    before = _files(tmp_path)
    done = _cli(tmp_path, "in.onnx", *out, "--dry-run", "--target-opset", "13")
    assert done.returncode == 0, done.stderr
    assert _files(tmp_path) == before  # not OUT, not a data file, not a staging file
    assert done.stdout == ""
    target = out[0] if out else "OUT"
    lines = done.stderr.splitlines()
    assert lines[0] == "onnx-lower: dry run: nothing written"
    assert lines[1].startswith(f"onnx-lower: would lower 1 SequenceMap node in in.onnx -> {target}")
    assert "    'n0_4': unroll, its input has 4 elements (--max-unroll 16)" in lines
    assert f"  {target} would declare IR version 7, opsets ai.onnx 13" in lines
    assert "  inputs: 'a' float[], 'b' float[3], 'c' float[2,3], 'd' float[2,3,4]" in lines
    assert any(line.startswith("  outputs: 'getitem' float[1,1], ") for line in lines)
    assert "  SequenceMap             1       0" in lines


def test_a_model_with_nothing_to_lower(tmp_path):
    onnx.save(
        parse(
            '<ir_version: 8, opset_import: ["" : 17]>\ng (float[N] x) => (float[N] y) { y = Neg(x) }'
        ),
        tmp_path / "in.onnx",
    )
    before = _files(tmp_path)
    done = _cli(tmp_path, "in.onnx", "--dry-run")
    assert done.returncode == 0 and _files(tmp_path) == before
    lines = done.stderr.splitlines()
    assert lines[1].startswith(
        "onnx-lower: in.onnx: nothing to lower; OUT would be IN, byte for byte"
    )
    assert "  inputs: 'x' float[N]" in lines and "  outputs: 'y' float[N]" in lines


def test_fixed_shapes_and_refusals_are_said_as_a_run_would(tmp_path):
    onnx.save(parse(SPLIT_MAP), tmp_path / "in.onnx")
    refused = _cli(tmp_path, "in.onnx", "--dry-run", "--runtime", "tvm")
    assert refused.returncode == 1 and "its length is known only at run time" in refused.stderr
    done = _cli(tmp_path, "in.onnx", "--dry-run", "--runtime", "tvm", "--input-shape", "x:3,4")
    assert done.returncode == 0, done.stderr
    assert "  inputs: 'x' float[3,4]" in done.stderr.splitlines()
    assert "unroll, its input has 3 elements" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        (["--verify"], "--verify"),
        (["--report", "r.json"], "--report"),
        (["--external-data", "w"], "--external-data"),
    ],
)
def test_what_needs_out_written_is_refused(given, flag, tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "in.onnx")
    done = _cli(tmp_path, "in.onnx", "out.onnx", "--dry-run", *given)
    assert done.returncode == 2
    assert f"--dry-run writes and runs nothing; {flag} needs OUT written" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_out_is_required_without_dry_run(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "in.onnx")
    done = _cli(tmp_path, "in.onnx")
    assert done.returncode == 2 and "OUT.onnx (or give --dry-run)" in done.stderr


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("torch/lists_nms.onnx", "would rewrite the sequences 1 Loop accumulates in"),
        ("tf/lists_array_stack.onnx", "would copy the inputs 1 loop body returns as they are in"),
    ],
)
def test_every_kind_of_rewrite_is_said_in_the_conditional(model, said, tmp_path):
    shutil.copy(ROOT / "tests" / "data" / model, tmp_path / "in.onnx")
    done = _cli(tmp_path, "in.onnx", "--dry-run", "--runtime", "openvino")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[1].startswith(f"onnx-lower: {said} in.onnx -> OUT")
