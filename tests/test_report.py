"""``--report FILE.json`` and ``lowering.lower_with_report``: what the summary says, as data.

For every kind of run (each strategy, many maps grouped, insert positions,
normalized or left as written for a runtime, ``--target-opset`` adapting and expanding, nothing to lower, a refusal, a
model that cannot be read, ``--verify`` matching and not): the JSON has
schema 1's keys and types, and says what the summary says, line by line
(the summary is rendered from the same object). The API's report is the
CLI's but for the run's own fields. A report path that the run would
write otherwise, or that cannot be written, is a usage error before any work.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import re
import sys

import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering import cli
from lowering.cli import run_pipeline
from lowering.report import SCHEMA, Report
from lowering.rewrites import Kept
from lowering.runtimes.profiles import RUNTIMES
from lowering.summary import DETAIL_LIMIT
from tests.cases.report_models import HEAD, MODELS, many_maps
from tests.helpers import parse, weighted_model

OPTIONS = {
    "adapted": ["--target-opset", "11"],
    "expanded": ["--target-opset", "13"],
    "insert left as written": ["--runtime", "mnn"],
}
STRATEGIES = {
    "vectorize": ["vectorize"],
    "unroll": ["unroll"],
    "loop": ["loop"],
    "uniform": ["uniform"],
    "scan and loop, nested": ["loop", "scan"],
    "insert": [""],
    "insert left as written": [],
    "nothing to lower": [],
    "adapted": ["vectorize"],
    "expanded": [],
    "grouped": ["vectorize"] * 25,
    "grouped inserts": [""] * 25,
}


def _many_inserts(count: int) -> onnx.ModelProto:
    """``count`` inserts at fed positions, more than the summary lists one by one."""
    inputs = ", ".join(f"int64 p{i}" for i in range(count))
    outputs = ", ".join(f"seq(float[3]) y{i}" for i in range(count))
    inserts = "\n".join(f"  [k{i}] y{i} = SequenceInsert (xs, x, p{i})" for i in range(count))
    return parse(
        HEAD + f"g (seq(float[3]) xs, float[3] x, {inputs}) => ({outputs}) {{\n{inserts}\n}}"
    )


def _model(name: str) -> onnx.ModelProto:
    if name == "grouped":
        return many_maps(DETAIL_LIMIT + 5)
    if name == "grouped inserts":
        return _many_inserts(DETAIL_LIMIT + 5)
    return parse(MODELS[name])


def _run(tmp_path: pathlib.Path, capsys, name: str, *extra: str) -> tuple[int, dict, str]:
    source = tmp_path / "in.onnx"
    onnx.save(_model(name), source)
    report = tmp_path / "report.json"
    argv = [*OPTIONS.get(name, []), *extra, str(source), str(tmp_path / "out.onnx")]
    code = cli.main([*argv, "--report", str(report)])
    return code, json.loads(report.read_text()), capsys.readouterr().err


# --- the schema ----------------------------------------------------------------------------

#: The ops a ``kept`` entry names: an insert position or a Loop accumulator left as written.
KEPT_OPS = ("SequenceInsert", "Loop")
KEYS = {
    "schema": int,
    "tool": str,
    "version": str,
    "options": dict,
    "input": (str, type(None)),
    "output": (str, type(None)),
    "exit_code": (int, type(None)),
    "error": (str, type(None)),
    "seconds": (float, int, type(None)),
    "before": (dict, type(None)),
    "after": (dict, type(None)),
    "lowest_opset": (int, type(None)),
    "nodes": list,
    "kept": list,
    "target_opset": (dict, type(None)),
    "not_optimized": (str, type(None)),
    "files": (dict, type(None)),
    "verify": (dict, type(None)),
}


def check_schema(data: dict) -> None:
    """Schema 1, every key with its type (docs/cli.md lists them)."""
    assert list(data) == list(KEYS)
    for key, kind in KEYS.items():
        assert isinstance(data[key], kind), (key, data[key])
    assert data["schema"] == SCHEMA == 1 and data["tool"] == "lowering"
    assert data["version"] == lowering.__version__
    assert data["options"] == dataclasses.asdict(lowering.Options(**data["options"]))
    for side in ("before", "after"):
        if data[side] is not None:
            assert set(data[side]) == {"ir_version", "opset_import", "op_counts"}
            assert all(isinstance(n, int) and n > 0 for n in data[side]["op_counts"].values())
    for node in data["nodes"]:
        assert set(node) == {"op", "name", "scope", "strategy", "reason", "rejected_by"}
        assert node["op"] in ("SequenceMap", "SequenceInsert")
        for rejection in node["rejected_by"]:
            assert set(rejection) == {"runtime", "op"} and rejection["runtime"] in RUNTIMES
    for kept in data["kept"]:
        assert set(kept) == {"op", "name", "scope", "reason"} and kept["op"] in KEPT_OPS
        assert all(isinstance(value, str) for value in kept.values())
    if data["target_opset"] is not None:
        assert data["target_opset"]["opset"] == data["options"]["target_opset"]
        assert set(data["target_opset"]) == {"opset", "expanded", "adapted"}
    if data["files"] is not None:
        assert set(data["files"]) == {"unchanged", "data_files", "embedded", "shared"}


# --- the JSON says what the summary says -----------------------------------------------------


def _explained(node: dict) -> str:
    rejected = [f"{r['runtime']} ({r['op']})" for r in node["rejected_by"]]
    if not rejected:
        return node["reason"]
    said = "not loop-free or sequence-free, so rejected by " + ", ".join(rejected)
    return f"{node['reason']}; {said}" if node["reason"] else said


def check_against_summary(data: dict, summary: str) -> None:
    """Every fact of the summary is in the JSON, and the other way round."""
    lines = summary.splitlines()
    kept = _kept_lines(data, lines)
    if data["files"]["unchanged"]:
        assert lines == [
            (
                f"onnx-lower: {data['input']}: nothing to lower; wrote {data['output']} "
                f"unchanged, byte for byte (in {data['seconds']:.2f} s)"
            ),
            *kept,
        ]
        assert not data["nodes"] and data["before"] == data["after"]
        return
    for op, done in (("SequenceMap", "lowered"), ("SequenceInsert", "normalized")):
        count = sum(node["op"] == op for node in data["nodes"])
        said = [line for line in lines if line.startswith(f"onnx-lower: {done} ")]
        assert bool(count) == bool(said)
        if count:
            assert f" {count} {op} " in said[0] and f"in {data['input']} -> " in said[0]
    grouped = any(line.startswith("  (-v lists every node") for line in lines)
    assert grouped == (len(data["nodes"]) > DETAIL_LIMIT)
    for node in data["nodes"]:
        # A map's strategy; an insert position's reason or rejections, if any.
        said = ", ".join(filter(None, [node["strategy"], _explained(node)]))
        if not said:
            continue
        line = f"{node['name'] or '<unnamed>'!r}: {said}"
        if grouped and node["strategy"]:
            strategy = node["strategy"]
            count = sum(n["strategy"] == strategy for n in data["nodes"])
            assert any(l.startswith(f"  {count} {strategy}, such as ") for l in lines)
        elif grouped:
            alike = [n for n in data["nodes"] if not n["strategy"] and _explained(n) == said]
            assert f"  {len(alike)} such as {alike[0]['name']!r}: {said}" in lines
        else:
            assert f"    {line}" in lines
    lowest = [line for line in lines if "could declare default-domain opset" in line]
    declared = data["after"]["opset_import"].get("", data["lowest_opset"])
    if data["lowest_opset"] is None or data["lowest_opset"] >= declared:
        assert not lowest  # nothing to say when it declares that opset already
    else:
        assert lowest == [
            (
                f"  the output could declare default-domain opset {data['lowest_opset']} "
                f"with --target-opset {data['lowest_opset']} (it declares {declared})"
            )
        ]
    target = data["target_opset"]
    for how in ("expanded", "adapted"):
        said = [line for line in lines if line.startswith("  --target-opset ") and how in line]
        done = [] if target is None else target[how]
        assert bool(said) == bool(done)
        if done:
            assert said[0].endswith(": " + ", ".join(f"{c['what']} x{c['count']}" for c in done))
    # The op table: every row, from the counts before and after.
    start = next(
        i for i, line in enumerate(lines) if line.split() == ["op", "type", "before", "after"]
    )
    rows = {}
    for line in lines[start + 1 :]:
        *op, before, after = line.split()
        rows[" ".join(op)] = (int(before), int(after))
    before, after = data["before"]["op_counts"], data["after"]["op_counts"]
    changed = {op for op in before.keys() | after.keys() if before.get(op) != after.get(op)}
    assert {op for op in rows if op != "total" and not op.endswith("other op types")} == changed
    for op in changed:
        assert rows[op] == (before.get(op, 0), after.get(op, 0))
    assert rows["total"] == (sum(before.values()), sum(after.values()))


def _kept_lines(data: dict, lines: list[str]) -> list[str]:
    """The summary's lines for the inserts left as written, checked against the JSON's
    (one group per reason, each node named in its graph's line)."""
    heads = [i for i, line in enumerate(lines) if line.startswith("onnx-lower: left ")]
    reasons = list(dict.fromkeys(kept["reason"] for kept in data["kept"]))
    assert len(heads) == len(reasons)
    said = []
    for head, reason in zip(heads, reasons, strict=True):
        of_reason = [kept for kept in data["kept"] if kept["reason"] == reason]
        plural = "s" if len(of_reason) != 1 else ""
        assert lines[head] == (
            f"onnx-lower: left {len(of_reason)} SequenceInsert position{plural} as written "
            f"in {data['input']}: {reason}"
        )
        scopes = list(dict.fromkeys(kept["scope"] for kept in of_reason))
        listed = []
        for scope in scopes:
            names = [repr(k["name"] or "<unnamed>") for k in of_reason if k["scope"] == scope]
            listed.append(f"  {len(names)} in {scope}: {', '.join(names)}")
        assert lines[head + 1 : head + 1 + len(listed)] == listed
        said += [lines[head], *listed]
    return said


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_report_says_what_the_summary_says(tmp_path, capsys, name):
    code, data, err = _run(tmp_path, capsys, name)
    assert code == 0 and data["exit_code"] == 0 and data["error"] is None
    check_schema(data)
    check_against_summary(data, err)
    assert [node["strategy"] for node in data["nodes"]] == STRATEGIES[name]
    assert data["input"] == str(tmp_path / "in.onnx") and data["output"] == str(
        tmp_path / "out.onnx"
    )
    written = onnx.load(tmp_path / "out.onnx")
    assert data["after"]["ir_version"] == written.ir_version
    assert data["after"]["opset_import"] == {o.domain: o.version for o in written.opset_import}
    assert data["verify"] is None and data["files"]["data_files"] == []


def test_target_opset_lists_what_it_adapted_and_expanded(tmp_path, capsys):
    _, adapted, _ = _run(tmp_path, capsys, "adapted")
    assert adapted["target_opset"]["adapted"] and not adapted["target_opset"]["expanded"]
    assert adapted["before"]["opset_import"] == {"": 17} and adapted["after"]["opset_import"] == {
        "": 11
    }
    assert adapted["after"]["ir_version"] == 6
    _, expanded, err = _run(tmp_path, capsys, "expanded")
    assert [c["what"] for c in expanded["target_opset"]["expanded"]] == ["LayerNormalization-17"]
    assert all(c["count"] >= 1 for c in expanded["target_opset"]["adapted"])
    assert "LayerNormalization" not in expanded["after"]["op_counts"]
    assert not expanded["nodes"] and "nothing to lower; wrote" in err


def test_a_many_map_report_lists_every_node_the_summary_groups(tmp_path, capsys):
    _, data, err = _run(tmp_path, capsys, "grouped")
    assert [node["name"] for node in data["nodes"]] == [f"m{i}" for i in range(25)]
    assert "'m24'" not in err


def test_the_api_report_is_the_clis_but_for_the_run(tmp_path, capsys):
    """lower_with_report: the same nodes, counts, declarations and conversions."""
    run_only = {"input", "output", "exit_code", "seconds", "files", "verify", "error"}
    api_options = {"adapted": {"target_opset": 11}, "insert left as written": {"runtime": "mnn"}}
    for name in (
        "scan and loop, nested",
        "adapted",
        "insert",
        "insert left as written",
        "nothing to lower",
    ):
        _, data, _ = _run(tmp_path, capsys, name)
        options = api_options.get(name, {})
        lowered, report = lowering.lower_with_report(_model(name), **options)
        assert isinstance(lowered, onnx.ModelProto) and isinstance(report, Report)
        ours = report.as_dict()
        assert {k: v for k, v in ours.items() if k not in run_only} == {
            k: v for k, v in data.items() if k not in run_only
        }
        assert all(ours[key] is None for key in run_only - {"nodes"})
        assert onnx.load(tmp_path / "out.onnx") == lowered


def test_quiet_still_reports_the_inserts_left_as_written(tmp_path, capsys):
    code, data, err = _run(tmp_path, capsys, "insert left as written", "-q")
    assert code == 0 and err == "" and data["nodes"] == []
    assert data["kept"] == [
        {
            "op": "SequenceInsert",
            "name": "kept",
            "scope": "main graph 'g'",
            "reason": "mnn has no SequenceLength",
        }
    ]


def test_many_inserts_left_as_written_are_grouped(tmp_path, capsys):
    count = DETAIL_LIMIT + 5
    source = tmp_path / "in.onnx"
    onnx.save(_many_inserts(count), source)
    argv = ["--runtime", "mnn", str(source), str(tmp_path / "out.onnx")]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[1:] == [
        (
            f"onnx-lower: left {count} SequenceInsert positions as written in {source}: "
            "mnn has no SequenceLength"
        ),
        f"  {count} in main graph 'g'",
        "  (-v names every one)",
    ]
    assert cli.main(["-v", *argv]) == 0
    names = ", ".join(f"'k{i}'" for i in range(count))
    assert f"  {count} in main graph 'g': {names}" in capsys.readouterr().err.splitlines()


def test_the_api_report_lists_the_inserts_left_as_written():
    """lower_with_report: the inserts --runtime left as written are data, with the reason;
    the pipeline's result holds the same."""
    model = _model("insert left as written")
    lowered, report = lowering.lower_with_report(model, runtime="mnn")
    assert report.kept == (Kept("main graph 'g'", "kept", "mnn has no SequenceLength"),)
    assert report.nodes == () and lowered == model
    assert report.as_dict()["kept"] == [
        {
            "op": "SequenceInsert",
            "name": "kept",
            "scope": "main graph 'g'",
            "reason": "mnn has no SequenceLength",
        }
    ]
    result = lowering.pipeline(runtime="mnn")(ir.serde.deserialize_model(model))
    assert tuple(result.kept) == report.kept and not result.rewrites
    # Where the runtime has SequenceLength, the position is normalized: nothing kept.
    _, normalized = lowering.lower_with_report(model)
    assert normalized.kept == () and [node.name for node in normalized.nodes] == ["kept"]


def test_the_api_report_of_an_onnx_ir_model_is_made_in_place():
    model = ir.serde.deserialize_model(_model("loop"))
    lowered, report = lowering.lower_with_report(model, max_unroll=0)
    assert lowered is model
    [node] = report.nodes
    assert node.op == "SequenceMap" and node.name == "looped" and node.strategy == "loop"
    assert ("tract", "Loop") in node.rejected_by
    fresh = ir.serde.deserialize_model(_model("loop"))
    assert [r.explained() for r in lowering.lower_in_place(fresh, max_unroll=0)] == [
        node.explained()
    ]
    assert (
        report.before.op_counts["SequenceMap"] == 1 and "SequenceMap" not in report.after.op_counts
    )
    assert report.options == lowering.Options(max_unroll=0)
    json.loads(report.to_json())


def test_the_api_refuses_what_is_no_model():
    with pytest.raises(TypeError, match=r"lower_with_report\(\) expected onnx.ModelProto"):
        lowering.lower_with_report("model.onnx")  # type: ignore[call-overload]


# --- failures: the report says what went wrong ----------------------------------------------


def test_a_refusal_is_reported_with_its_error(tmp_path, capsys):
    code, data, err = _run(tmp_path, capsys, "loop", "--runtime", "tinygrad")
    check_schema(data)
    assert code == 1 and data["exit_code"] == 1
    assert err == f"onnx-lower: error: {data['error']}\n"
    assert "--runtime tinygrad: " in data["error"] and "'looped'" in data["error"]
    assert data["before"]["op_counts"]["SequenceMap"] == 1
    assert data["after"] is None and data["nodes"] == [] and data["files"] is None
    assert not (tmp_path / "out.onnx").exists()


def test_a_model_that_cannot_be_read_is_reported(tmp_path, capsys):
    report = tmp_path / "report.json"
    code = cli.main(
        [str(tmp_path / "missing.onnx"), str(tmp_path / "out.onnx"), "--report", str(report)]
    )
    data = json.loads(report.read_text())
    check_schema(data)
    assert code == 1 == data["exit_code"] and "no such file" in data["error"]
    assert data["before"] is None and data["after"] is None
    assert capsys.readouterr().err == f"onnx-lower: error: {data['error']}\n"


def test_a_verify_run_reports_the_table(tmp_path, capsys):
    code, data, err = _run(tmp_path, capsys, "unroll", "--verify", "--runs", "3")
    check_schema(data)
    verify = data["verify"]
    assert code == 0 and verify["status"] == "match" and verify["exit_code"] == 0
    assert verify["runs"] == 3 and [r["run"] for r in verify["records"]] == [0, 1, 2]
    assert [row["output"] for row in verify["rows"]] == ["ys"]
    for row in verify["rows"]:
        assert row["verdict"] == "ok" and row["failures"] == 0
        assert f"{row['max_abs']:.3g}" in err and row["kind"] in err
    assert "(3 runs)" in err


def test_a_verify_mismatch_is_reported(tmp_path, capsys, monkeypatch):
    def sabotaged(model, **options):
        result = run_pipeline(model, **options)
        neg = next(
            n for n in ir.traversal.RecursiveGraphIterator(model.graph) if n.op_type == "Neg"
        )
        neg.op_type = "Abs"
        return result

    monkeypatch.setattr(cli, "run_pipeline", sabotaged)
    code, data, _ = _run(tmp_path, capsys, "unroll", "--verify", "--runs", "2")
    assert code == 1 == data["exit_code"] and data["verify"]["status"] == "mismatch"
    assert data["verify"]["rows"][0]["verdict"].startswith("MISMATCH")
    assert data["error"] is None  # OUT was written; the comparison says what differs


def test_quiet_still_writes_the_report(tmp_path, capsys):
    code, data, err = _run(tmp_path, capsys, "unroll", "-q")
    assert code == 0 and err == "" and [n["name"] for n in data["nodes"]] == ["unrolled"]


def test_an_existing_report_is_replaced_and_a_symlinks_target_written(tmp_path, capsys):
    target = tmp_path / "kept" / "r.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    _run(tmp_path, capsys, "unroll")
    assert link.is_symlink() and json.loads(target.read_text())["schema"] == 1
    assert sorted(p.name for p in target.parent.iterdir()) == ["r.json"]  # no staging left


def test_non_finite_numbers_are_strings_in_strict_json():
    from lowering.verify.report import Report as Compared
    from lowering.verify.report import Row

    compared = Compared([Row("y", "tensor", 3, math.inf, math.nan, "x")], runs=1)
    text = Report(lowering.Options(), verify=compared).to_json()
    row = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))["verify"]["rows"][
        0
    ]
    assert (row["max_abs"], row["max_rel"]) == ("inf", "nan")


# --- usage: a report path the run cannot write is refused before any work ------------------


def _usage(tmp_path, capsys, *argv: str) -> str:
    onnx.save(_model("unroll"), tmp_path / "in.onnx")
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(tmp_path / "in.onnx"), *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("usage: ") and len([l for l in err if "error:" in l]) == 1
    assert not (tmp_path / "out.onnx").exists()
    return err[-1]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["{t}/out.onnx", "--report", "{t}/in.onnx"], "would be IN itself"),
        (["{t}/out.onnx", "--report", "{t}/out.onnx"], "would be OUT itself"),
        (["{t}/out.onnx", "--report", "{t}/./out.onnx"], "would be OUT itself"),
        (
            ["{t}/out.onnx", "--verify", "--save-inputs", "{t}/r.json", "--report", "{t}/r.json"],
            "would be --save-inputs itself",
        ),
        (
            ["{t}/out.onnx", "--external-data", "w.bin", "--report", "{t}/w.bin"],
            "would be OUT's data file itself",
        ),
        (["{t}/out.onnx", "--report", "{t}/out.onnx.data"], "would be OUT's data file itself"),
        (["{t}/out.onnx", "--report", "-"], "give a file name"),
        (["{t}/out.onnx", "--report", "{t}"], "is not a regular file"),
        (["{t}/out.onnx", "--report", "{t}/no/r.json"], "does not exist"),
    ],
)
def test_a_report_path_that_cannot_be_written_is_a_usage_error(tmp_path, capsys, argv, said):
    last = _usage(tmp_path, capsys, *(a.format(t=tmp_path) for a in argv))
    assert last.startswith("onnx-lower: error: --report ") and said in last


def test_a_report_over_ins_data_file_is_refused_and_never_written(tmp_path, capsys):
    source = weighted_model(tmp_path, 3, 1024, real=True)
    data = tmp_path / "weights.bin"
    before = data.read_bytes()
    code = cli.main([str(source), str(tmp_path / "out.onnx"), "--report", str(data)])
    assert code == 1 and data.read_bytes() == before
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{data}: refused: IN reads its weights from it" in err
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes anywhere")
def test_a_report_in_a_folder_that_cannot_be_written_is_a_usage_error(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        last = _usage(
            tmp_path, capsys, str(tmp_path / "out.onnx"), "--report", str(locked / "r.json")
        )
    finally:
        locked.chmod(0o700)
    assert re.search(r"--report .*: cannot write to the folder", last)


def test_quiet_without_a_report_skips_the_lowest_opset(tmp_path, capsys, monkeypatch):
    """Planning every node at each opset takes seconds for thousands of maps, for a
    summary line that -q does not print; --report still gets it."""
    import lowering.report

    asked = []
    monkeypatch.setattr(lowering.report, "_lowest_opset", lambda model: asked.append(1) or 11)
    onnx.save(_model("unroll"), tmp_path / "in.onnx")
    assert cli.main(["-q", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    assert asked == []
    code, data, _ = _run(tmp_path, capsys, "unroll", "-q")
    assert code == 0 and asked == [1] and data["lowest_opset"] == 11


def test_the_time_said_is_the_whole_runs_summarizing_included(tmp_path, capsys, monkeypatch):
    """The summary's (in T s) and the report's seconds include summarizing (issue 37:
    a report said 30.9 s for a 77.7 s run): a clock that jumps 100 s while the
    lowest opset is worked out shows in both."""
    import time

    import lowering.report

    now = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])

    def slow(model):
        now[0] += 100.0
        return 11

    monkeypatch.setattr(lowering.report, "_lowest_opset", slow)
    code, data, err = _run(tmp_path, capsys, "unroll")
    assert code == 0 and data["seconds"] == 100.0
    assert "(in 100.00 s)" in err
