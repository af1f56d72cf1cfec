"""``--runtime`` and the SequenceInsert normalization: no op the runtime lacks is written.

Every runtime of lowering.runtimes.profiles x every kind of position: the
normalization writes no op the runtime lacks (a guard it cannot run gives
way to the form below opset 13; a position every form needs SequenceLength
for is left as written, and the summary and the report say why), each
rewrite names the runtimes that reject the ops it added, and the output
computes what the original does in onnxruntime.
"""

from __future__ import annotations

import collections
import functools
import json
import subprocess

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from lowering import NormalizeSequenceInsertPass
from lowering.cli import main
from lowering.runtimes.profiles import RUNTIMES
from lowering.runtimes.sessions import open_session
from tests.helpers import all_nodes, assert_same, cli, parse

F2 = "float[2]"
X = np.full(2, 99, np.float32)
A = [np.full(2, k, np.float32) for k in range(3)]

#: Each kind of position: its model (s: a sequence, fed or built of a, b, c;
#: x: the tensor; p: the position, fed or constant), and the positions it takes.
KINDS = {
    "constant in range, length known": (
        17,
        f"({F2} a, {F2} b, {F2} c, {F2} x) => (seq({F2}) y) <int32[1] p = {{-1}}>",
        "s = SequenceConstruct(a, b, c)",
    ),
    "constant, length not known": (
        17,
        f"(seq({F2}) s, {F2} x) => (seq({F2}) y) <int32 p = {{1}}>",
        "",
    ),
    "negative constant, length not known": (
        17,
        f"(seq({F2}) s, {F2} x) => (seq({F2}) y) <int64 p = {{-1}}>",
        "",
    ),
    "dynamic": (17, f"(seq({F2}) s, {F2} x, int32[1] p) => (seq({F2}) y)", ""),
    "dynamic, below opset 13": (12, f"(seq({F2}) s, {F2} x, int64 p) => (seq({F2}) y)", ""),
}
#: The kinds whose every form needs SequenceLength: left as written where it is lacking.
NEEDS_LENGTH = {"negative constant, length not known", "dynamic", "dynamic, below opset 13"}
MEASURED = [runtime for name, runtime in RUNTIMES.items() if name != "generic"]


def _model(kind: str) -> onnx.ModelProto:
    opset, signature, build = KINDS[kind]
    return parse(f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g {signature} {{
      {build}
      [insert] y = SequenceInsert(s, x, p)
    }}""")


def _runs(kind: str) -> list[dict]:
    """Feeds over every length 0..3 and every valid position (a constant: where it is
    valid, as its 1 or -1 is not for an empty sequence)."""
    if kind == "constant in range, length known":
        return [{"a": A[0], "b": A[1], "c": A[2], "x": X}]
    if kind.startswith("dynamic"):
        dtype = np.int32 if kind == "dynamic" else np.int64
        shape = (1,) if kind == "dynamic" else ()
        return [
            {"s": A[:n], "x": X, "p": np.full(shape, p, dtype)}
            for n in range(4)
            for p in range(-n, n + 1)
        ]
    return [{"s": A[:n], "x": X} for n in range(1, 4)]


@functools.cache
def _original(kind: str) -> tuple[onnx.ModelProto, list]:
    model = _model(kind)
    session = open_session(model.SerializeToString(), log_severity=4)
    return model, [session.run(None, feeds)[0] for feeds in _runs(kind)]


def _op_counts(model: onnx.ModelProto) -> collections.Counter[str]:
    return collections.Counter(node.op_type for node in all_nodes(model))


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_no_op_the_runtime_lacks_is_written(runtime, kind):
    model, expected = _original(kind)
    ir_model = ir.serde.deserialize_model(model)
    result = NormalizeSequenceInsertPass(runtime=runtime)(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    before, after = _op_counts(model), _op_counts(lowered)
    added = {op for op in after if after[op] > before[op]}
    lacks = RUNTIMES[runtime].lacks
    assert not added & lacks, f"{runtime} lacks {sorted(added & lacks)}"
    kept = kind in NEEDS_LENGTH and "SequenceLength" in lacks
    if kept:
        untouched = ir.serde.serialize_model(ir.serde.deserialize_model(model))
        assert lowered.SerializeToString() == untouched.SerializeToString()
        assert not result.modified and not result.rewrites
        assert [(k.node_name, k.reason) for k in result.kept] == [
            ("insert", f"{runtime} has no SequenceLength")
        ]
    else:
        assert not result.kept
        (rewrite,) = result.rewrites
        # The rewrite's rejections are those of the ops it added, as
        # lowering.runtimes.profiles says them (the node's own op aside: a
        # guard's append repeats it).
        written = added - {"SequenceInsert"}
        assert rewrite.rejections == [
            (r.name, min(written & r.lacks)) for r in MEASURED if written & r.lacks
        ]
        guarded = "SequenceLength" not in lacks and kind in (
            "dynamic",
            "constant, length not known",
        )
        assert ("If" in added) == guarded
        if kind == "constant, length not known" and not guarded:
            assert rewrite.reason.endswith(f": {runtime} has no SequenceLength")
    session = open_session(lowered.SerializeToString(), log_severity=4)
    for feeds, original in zip(_runs(kind), expected, strict=True):
        assert_same(session.run(None, feeds)[0], original)


def _cli(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``python -m lowering in.onnx out.onnx --runtime mnn --report r.json`` on the dynamic
    position; the run and its report."""
    source, out, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_model("dynamic"), source)
    command = [source, out, "--runtime", "mnn"]
    run = cli([*command, "--report", report, *extra], text=True)
    assert run.returncode == 0, run.stderr
    assert out.read_bytes() == source.read_bytes()
    return run, json.loads(report.read_text())


KEPT = {
    "op": "SequenceInsert",
    "name": "insert",
    "scope": "main graph 'g'",
    "reason": "mnn has no SequenceLength",
}


def test_the_cli_says_which_insert_it_left_and_why(tmp_path):
    """In the summary, grouped like its other lines, and in the report, as data;
    no warning before them."""
    run, report = _cli(tmp_path)
    done, left, where = run.stderr.splitlines()
    assert done.startswith(f"onnx-lower: {tmp_path / 'in.onnx'}: nothing to lower; wrote ")
    assert left == (
        f"onnx-lower: left 1 SequenceInsert position as written in {tmp_path / 'in.onnx'}: "
        "mnn has no SequenceLength"
    )
    assert where == "  1 in main graph 'g': 'insert'"
    assert report["kept"] == [KEPT] and report["nodes"] == []


def test_quiet_still_reports_the_insert_it_left(tmp_path):
    run, report = _cli(tmp_path, "-q")
    assert run.stderr == "" and report["kept"] == [KEPT]


#: The reason the summary gives where mnn's guard gave way to the form below 13.
UNGUARDED = (
    "not guarded against a position equal to the length (onnxruntime appends there): "
    "mnn has no SequenceLength"
)


@pytest.mark.parametrize(
    "kind, runtime, said",
    [
        # The guard's SequenceLength, which mnn (among others) lacks.
        ("dynamic", "onnxruntime", "not loop-free or sequence-free, so rejected by "),
        # The form below 13 adds no sequence op: the reason alone.
        ("constant, length not known", "mnn", UNGUARDED),
    ],
)
def test_the_summary_says_why_of_each_insert_it_rewrote(tmp_path, capsys, kind, runtime, said):
    """As of a map: the reason (a guard passed over) and the runtimes that reject the form,
    as the report says them."""
    source, report = tmp_path / "in.onnx", tmp_path / "r.json"
    onnx.save(_model(kind), source)
    argv = [str(source), str(tmp_path / "out.onnx"), "--runtime", runtime, "--report", str(report)]
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    (node,) = json.loads(report.read_text())["nodes"]
    rejected = ", ".join(f"{r['runtime']} ({r['op']})" for r in node["rejected_by"])
    assert lines[0].startswith(f"onnx-lower: normalized 1 SequenceInsert position in {source} ")
    assert lines[1:3] == ["  1 in main graph 'g': 'insert'", f"    'insert': {said}{rejected}"]
    assert bool(rejected) == (runtime == "onnxruntime")
    if rejected:
        assert {"runtime": "mnn", "op": "SequenceLength"} in node["rejected_by"]
