"""The verifier: it must catch wrong models, not only bless right ones."""

from __future__ import annotations

import tempfile

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering import cli, verify
from lowering.cli import run_pipeline
from tests.cases.differential import CASES
from tests.cases.onnx_node_tests import SEQUENCE_MAP_CASES, node_test_case
from tests.cases.verify_mutants import MAP, MAP_AND_CONCAT, MUTANTS
from tests.helpers import all_nodes, parse

# The originals onnxruntime itself cannot run (its SequenceMap expansion
# fails on untyped and nested bodies, and it resolves no "ai.onnx" body).
ORT_CANNOT_RUN = {"untyped_body", "nested_sequence_map", "domain_spelled_ai_onnx"}


@pytest.fixture(autouse=True)
def _temporary_folder(tmp_path_factory, monkeypatch):
    """Failing runs' inputs go to the temporary folder: this test's, not /tmp."""
    folder = tmp_path_factory.mktemp("temp")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _verify(a: onnx.ModelProto, b: onnx.ModelProto, tmp_path, *args: str) -> tuple[int, str]:
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    code = verify.main([str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), *args])
    return code


@pytest.mark.parametrize("name", list(CASES))
def test_every_differential_case_verifies(name, tmp_path, capsys):
    original = parse(CASES[name].text)
    code = _verify(original, lowering.lower(original), tmp_path)
    out = err = capsys.readouterr().err
    if name in ORT_CANNOT_RUN:
        assert code == 3
        assert "could not compare" in out and "onnxruntime cannot load A" in out
    else:
        assert code == 0, out
        assert "matches" in err
        assert "MISMATCH" not in out


@pytest.mark.parametrize("name", SEQUENCE_MAP_CASES)
def test_every_conformance_case_verifies(name, tmp_path, capsys):
    case = node_test_case(name)
    assert _verify(case.model, lowering.lower(case.model), tmp_path) == 0, capsys.readouterr()


# Mutations of a correct lowering that the verifier must reject.

ADDS = CASES["extras_sequence_tensor_sequence_tensor"].text


def _mutated_add_to_sub(model: onnx.ModelProto) -> onnx.ModelProto:
    body_add = next(n for n in all_nodes(model) if n.op_type == "Add")  # Loop body or vectorized
    body_add.op_type = "Sub"
    return model


def test_add_changed_to_sub_in_a_body_is_caught(tmp_path, capsys):
    original = parse(ADDS)
    assert _verify(original, _mutated_add_to_sub(lowering.lower(original)), tmp_path) == 1
    out = err = capsys.readouterr().err
    assert "'y'" in err and "values differ" in out


def test_dropped_element_is_caught(tmp_path, capsys):
    original = parse(ADDS)
    broken = lowering.lower(original, strategy="loop")
    loop = next(n for n in broken.graph.node if n.op_type == "Loop")
    loop.output[0] = "y_all"
    broken.graph.node.append(onnx.helper.make_node("SequenceErase", ["y_all"], ["y"]))
    assert _verify(original, broken, tmp_path, "--runs", "1") == 1
    out = err = capsys.readouterr().err
    assert "'y'" in err and "3 elements in A, 2 in B" in out


TENSOR_OUT = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y, float total, int64 count) {
  y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Neg(a) }> (x)
  joined = ConcatFromSequence <axis = 0> (x)
  total = ReduceSum <keepdims = 0> (joined)
  count = SequenceLength(x)
}"""


def test_changed_output_dtype_is_caught(tmp_path, capsys):
    original = parse(TENSOR_OUT)
    broken = lowering.lower(original)
    for node in broken.graph.node:
        node.output[:] = ["total_float" if o == "total" else o for o in node.output]
    broken.graph.node.append(
        onnx.helper.make_node("Cast", ["total_float"], ["total"], to=onnx.TensorProto.DOUBLE)
    )
    broken.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    assert _verify(original, broken, tmp_path, "--runs", "1") == 1
    out = err = capsys.readouterr().err
    assert "'total'" in err and "tensor(float) in A but tensor(double) in B" in out


def test_swapped_output_order_is_caught(tmp_path, capsys):
    original = parse(TENSOR_OUT)
    broken = lowering.lower(original)
    first, second = onnx.ValueInfoProto(), onnx.ValueInfoProto()
    first.CopyFrom(broken.graph.output[1])
    second.CopyFrom(broken.graph.output[2])
    broken.graph.output[1].CopyFrom(second)
    broken.graph.output[2].CopyFrom(first)
    assert _verify(original, broken, tmp_path) == 1
    out = err = capsys.readouterr().err
    assert "'total'" in err and "'count'" in err
    assert "output 1 is 'total' in A but 'count' in B" in out


def test_runtime_dtype_difference_is_caught():
    row = verify.Row("y", "tensor(float)")
    verify.compare_value(
        row, np.zeros(2, np.float32), np.zeros(2, np.float64), verify.Tolerance(0, 0), "y"
    )
    assert row.problem == "y: dtype float32 in A, float64 in B"


def test_values_within_tolerance_match_and_outside_do_not():
    close, far = verify.Row("y", "t"), verify.Row("y", "t")
    a = np.array([1.0, np.nan, np.inf], np.float32)
    verify.compare_value(close, a, a + np.float32(1e-7), verify.Tolerance(), "y")
    verify.compare_value(far, a, a + np.float32(1e-2), verify.Tolerance(), "y")
    assert close.problem is None
    assert far.problem is not None and far.max_abs == pytest.approx(1e-2, rel=1e-3)


def test_strings_and_bools_compare_exactly():
    row = verify.Row("y", "t")
    words = np.array(["a", "b"], dtype=object)
    verify.compare_value(row, words, words.copy(), verify.Tolerance(1, 1), "y")
    assert row.problem is None
    verify.compare_value(
        row, words, np.array(["a", "c"], dtype=object), verify.Tolerance(1, 1), "y"
    )
    assert row.problem == "y: 1 of 2 values differ"


# Inputs.

ALL_DTYPES = [
    t
    for t in onnx.TensorProto.DataType.values()
    if t not in (onnx.TensorProto.UNDEFINED,) and onnx.helper.tensor_dtype_to_string(t)
]


@pytest.mark.parametrize("values", list(verify.VALUE_MODES))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=onnx.helper.tensor_dtype_to_string)
@pytest.mark.sweep
def test_synthesis_covers_every_dtype_in_every_value_mode(dtype, values):
    port = verify.Port("x", False, dtype, (2, "N"))
    spec = verify.RunSpec(2, "large", values)
    feeds, bound = verify.synthesize([port], spec, np.random.default_rng(0), fixed={})
    array = feeds["x"]
    assert array.shape == (2, bound["N"]) and bound["N"] >= 5
    if dtype == onnx.TensorProto.STRING:
        assert array.dtype == object and all(isinstance(v, str) for v in array.ravel())
    else:
        assert array.dtype == onnx.helper.tensor_dtype_to_np_dtype(dtype)
    scalar = verify.Port("s", False, dtype, ())
    feeds, _ = verify.synthesize([scalar], spec, np.random.default_rng(0), fixed={})
    assert isinstance(feeds["s"], np.ndarray) and feeds["s"].shape == ()  # not np.float32(1)
    assert feeds["s"].dtype == array.dtype


ORT_DTYPES = [
    "float",
    "double",
    "float16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "string",
]


@pytest.mark.parametrize("dtype", ORT_DTYPES)
def test_every_dtype_onnxruntime_takes_round_trips(dtype, tmp_path, capsys):
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({dtype}[N] x, seq({dtype}[M]) s, {dtype} k) => ({dtype}[N] y, seq({dtype}[M]) t, {dtype} j) {{
      y = Identity(x)
      t = Identity(s)
      j = Identity(k)
    }}""")
    assert _verify(model, model, tmp_path) == 0, capsys.readouterr()
    # scalars too: every run compared
    assert f"({len(verify.DEFAULT_SCHEDULE)} runs)" in capsys.readouterr().err


def test_sequences_pair_up_and_shapes_vary_between_elements():
    ports = [
        verify.Port("t", False, onnx.TensorProto.FLOAT, ("N",)),
        verify.Port("a", True, onnx.TensorProto.FLOAT, ("N", "H")),
        verify.Port("b", True, onnx.TensorProto.FLOAT, ("H",)),
    ]
    runs = [
        verify.synthesize(ports, spec, np.random.default_rng(run), fixed={})[0]
        for run, spec in enumerate(verify.schedule())
    ]
    for feeds in runs:
        n = feeds["t"].shape[0]
        assert len(feeds["a"]) == len(feeds["b"])
        for a, b in zip(feeds["a"], feeds["b"]):
            assert a.shape[0] == n  # N is shared with a tensor input: one size
            assert a.shape[1] == b.shape[0]  # H pairs up element by element
    heights = {a.shape[1] for feeds in runs for a in feeds["a"]}
    assert len(heights) > 2  # and varies between elements


def test_dim_option_fixes_a_dim_everywhere():
    ports = [
        verify.Port("t", False, onnx.TensorProto.FLOAT, ("N",)),
        verify.Port("a", True, onnx.TensorProto.FLOAT, ("H",)),
    ]
    for run, spec in enumerate(verify.schedule()):
        rng = np.random.default_rng(run)
        feeds, bound = verify.synthesize(ports, spec, rng, fixed={"N": 6, "H": 5})
        assert feeds["t"].shape == (6,) and bound == {"N": 6, "H": 5}
        assert [a.shape for a in feeds["a"]] == [(5,)] * spec.length


def test_dim_and_runs_and_seed_options(tmp_path, capsys):
    model = parse(ADDS)
    assert (
        _verify(
            model, lowering.lower(model), tmp_path, "--runs", "5", "--seed", "3", "--dim", "N=2"
        )
        == 0
    )
    assert "(5 runs)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        verify.main([str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--dim", "N"])
    assert bad.value.code == 2


def test_inputs_from_npz_with_sequences(tmp_path, capsys):
    model = parse(ADDS)
    rng = np.random.default_rng(0)
    arrays = {f"s0[{i}]": rng.standard_normal(3).astype(np.float32) for i in range(2)}
    arrays |= {f"s1[{i}]": rng.standard_normal(3).astype(np.float32) for i in range(2)}
    arrays |= {"t": np.ones(3, np.float32), "u": np.zeros(3, np.float32)}
    np.savez(tmp_path / "in.npz", **arrays)
    assert (
        _verify(model, lowering.lower(model), tmp_path, "--inputs", str(tmp_path / "in.npz")) == 0
    )
    out = capsys.readouterr().err
    assert "(1 run)" in out and "  6  " in out  # two elements of 3 values compared
    # Empty sequences alone show nothing: not "matches", but "could not compare".
    empty = {"s0[]": np.zeros(0), "s1[]": np.zeros(0), "t": arrays["t"], "u": arrays["u"]}
    np.savez(tmp_path / "empty.npz", **empty)
    assert (
        _verify(model, lowering.lower(model), tmp_path, "--inputs", str(tmp_path / "empty.npz"))
        == 3
    )
    assert "only runs with empty inputs" in capsys.readouterr().err
    np.savez(tmp_path / "partial.npz", t=arrays["t"])
    assert _verify(model, model, tmp_path, "--inputs", str(tmp_path / "partial.npz")) == 2
    assert "no value for input(s) s0, s1, u" in capsys.readouterr().err


def test_python_api_report():
    model = parse(ADDS)
    report = verify.compare(model, lowering.lower(model), runs=2)
    assert report.status == verify.MATCH and report.exit_code == 0 and report.runs == 2
    assert [row.name for row in report.rows] == ["y"]
    assert report.rows[0].elements == 9  # lengths 3 and 0: 3 elements of 3 values


# The main command's --verify.


def test_lowering_cli_verify_prints_the_table(tmp_path, capsys):
    onnx.save(parse(ADDS), tmp_path / "in.onnx")
    assert cli.main(["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err
    assert "output  kind" in err and "ok" in err


def test_lowering_cli_verify_in_equals_out(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(parse(ADDS), path)
    assert cli.main(["-q", "--verify", str(path), str(path)]) == 0
    assert capsys.readouterr().err == ""
    assert "SequenceMap" not in [n.op_type for n in all_nodes(onnx.load(path))]
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_lowering_cli_verify_mismatch_exits_1_but_writes(tmp_path, capsys, monkeypatch):
    def sabotaged(model, **kwargs):
        result = run_pipeline(model, **kwargs)
        add = next(
            n for n in ir.traversal.RecursiveGraphIterator(model.graph) if n.op_type == "Add"
        )
        add.op_type = "Sub"
        return result

    monkeypatch.setattr(cli, "run_pipeline", sabotaged)
    onnx.save(parse(ADDS), tmp_path / "in.onnx")
    assert cli.main(["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert "out.onnx was written, but it does not match" in err and "'y'" in err
    assert (tmp_path / "out.onnx").exists()


def test_lowering_cli_verify_cannot_compare_exits_3(tmp_path, capsys):
    onnx.save(parse(CASES["nested_sequence_map"].text), tmp_path / "in.onnx")
    assert cli.main(["--verify", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 3
    err = capsys.readouterr().err
    assert "could not be compared" in err and "onnxruntime cannot load A" in err
    assert (tmp_path / "out.onnx").exists()


def _original_for(name: str) -> onnx.ModelProto:
    if name == "output declared with a dim that disagrees with the inputs":
        return parse(MAP_AND_CONCAT)
    return parse(MAP)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_is_caught_with_the_default_options(name, tmp_path, capsys):
    code = _verify(_original_for(name), MUTANTS[name](), tmp_path)
    out = err = capsys.readouterr().err
    assert code == 1, out
    assert "MISMATCH" in out and "does not match" in err


def test_mutants_are_only_wrong_where_they_say(tmp_path, capsys):
    """Each mutant agrees with the original on the old default (3 runs of
    plain values): what catches it is the schedule, not a broken mutant."""
    for name, make in MUTANTS.items():
        if name.startswith("output declared"):
            continue  # declarations were never checked
        report = verify.compare(_original_for(name), make(), inputs=[_plain(n) for n in (3, 0, 1)])
        assert report.status == verify.MATCH, (name, report.table())


def _plain(length: int) -> dict:
    rng = np.random.default_rng(length)
    return {
        "x": [rng.uniform(-2.5, 2.5, 3).astype(np.float32) for _ in range(length)],
        "t": rng.uniform(-1, 1, 3).astype(np.float32),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_schedule_catches_every_mutant_at_other_seeds_too(seed):
    for name, make in MUTANTS.items():
        report = verify.compare(_original_for(name), make(), seed=seed)
        assert report.exit_code == 1, (name, report.table())


# False alarms: right answers the verifier must accept (exit 0).

NEG_ZERO = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  y = SequenceMap <body = body (float[N] a) => (float[N] c) { d = Sub(a, a) c = Neg(d) }> (x)
}"""

NAN_IN_BOTH = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x) => (seq(float[N]) y) {
  y = SequenceMap <body = body (float[N] a) => (float[N] c) { c = Sqrt(a) }> (x)
}"""

# onnxruntime's ConcatFromSequence fails on an empty sequence; the lowering
# stacks the Loop's scan outputs instead and returns an empty tensor.
MAP_THEN_CONCAT = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[3]) x) => (float[M,3] y) {
  m = SequenceMap <body = body (float[3] a) => (float[3] c) { c = Neg(a) }> (x)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
}"""

# Both declare z as [N], but it is [2N]: A's own declaration is wrong, and B
# keeps it; that is not B's fault.
WRONG_IN_BOTH = MAP_AND_CONCAT.replace("float[M] z", "float[N] z")


def _without_neg(model: onnx.ModelProto) -> onnx.ModelProto:
    """Sub(a, a) is +0.0; the original's Neg makes it -0.0."""
    body = next(n for n in model.graph.node if n.op_type == "Loop").attribute[0].g
    neg = next(n for n in body.node if n.op_type == "Neg")
    neg.op_type = "Identity"
    return model


FALSE_ALARMS = {
    "correct lowering": (MAP, lowering.lower),
    "-0.0 vs +0.0": (NEG_ZERO, lambda m: _without_neg(lowering.lower(m, strategy="loop"))),
    "NaN in both": (NAN_IN_BOTH, lowering.lower),
    "original fails only for the empty sequence": (MAP_THEN_CONCAT, lowering.lower),
    "a declaration wrong in A and kept in B": (WRONG_IN_BOTH, lowering.lower),
}


@pytest.mark.parametrize("name", list(FALSE_ALARMS))
def test_no_false_alarm(name, tmp_path, capsys, _temporary_folder):
    text, rewrite = FALSE_ALARMS[name]
    original = parse(text)
    code = _verify(original, rewrite(original), tmp_path)
    out = err = capsys.readouterr().err
    assert code == 0, out
    assert "matches" in err and "MISMATCH" not in out
    assert list(_temporary_folder.iterdir()) == []  # nothing saved when nothing fails


def test_a_run_the_original_fails_is_skipped_with_a_note(tmp_path, capsys):
    original = parse(MAP_THEN_CONCAT)
    assert _verify(original, lowering.lower(original), tmp_path) == 0
    out = capsys.readouterr().err
    total = len(verify.DEFAULT_SCHEDULE)
    assert f"({total - 1} of {total} runs compared)" in out
    assert "run 1 (length 0" in out and "skipped: onnxruntime cannot run A" in out
    assert "ConcatFromSequence" in out and "but B runs (not counted)" in out


def test_a_declaration_wrong_in_both_is_a_note(tmp_path, capsys):
    original = parse(WRONG_IN_BOTH)
    assert _verify(original, lowering.lower(original), tmp_path) == 0
    out = capsys.readouterr().err
    assert "note: A's own output 'z' breaks its declaration" in out
    assert "float[N] but produced a tensor of shape" in out


def test_nan_in_both_really_has_nans():
    original = parse(NAN_IN_BOTH)
    report = verify.compare(original, lowering.lower(original), save_failing=False)
    assert report.status == verify.MATCH and report.runs == len(verify.DEFAULT_SCHEDULE)


# Exit codes: a mismatch always wins; 3 only when the original cannot run.


def test_a_mismatch_is_not_masked_by_a_run_the_original_fails(tmp_path, capsys):
    original = parse(MAP_THEN_CONCAT)
    broken = lowering.lower(original, strategy="loop")
    body = next(n for n in broken.graph.node if n.op_type == "Loop").attribute[0].g
    next(n for n in body.node if n.op_type == "Neg").op_type = "Identity"
    assert _verify(original, broken, tmp_path) == 1
    out = capsys.readouterr().err
    # The empty run fails in A (ConcatFromSequence of nothing), where B's Loop
    # concatenates nothing into an empty tensor: not counted.
    assert "MISMATCH" in out and "skipped: onnxruntime cannot run A" in out


def test_a_lowered_model_onnxruntime_cannot_load_is_a_mismatch(tmp_path, capsys):
    original = parse(MAP)
    broken = lowering.lower(original)
    length = next(n for n in broken.graph.node if n.op_type == "SequenceLength")
    length.input[0] = "y"  # the Loop's own output: a cycle
    assert _verify(original, broken, tmp_path) == 1
    out = err = capsys.readouterr().err
    assert "onnxruntime cannot load B" in out
    assert "where A runs" in out and "does not match" in err


def test_a_lowered_model_that_fails_where_the_original_runs_is_a_mismatch(tmp_path, capsys):
    original = parse(MAP)
    broken = lowering.lower(original)  # plus a SequenceAt(x, 0) that an empty x breaks
    first = onnx.parser.parse_graph(
        "f (seq(float[N]) x) => (float[N] zero) "
        "{ p = Constant <value = int64 {0}> () e = SequenceAt(x, p) o = Constant <value = float "
        "{0.0}> () zero = Mul(e, o) }"
    ).node
    body = next(n for n in broken.graph.node if n.op_type == "Loop").attribute[0].g
    mul = next(n for n in body.node if n.op_type == "Mul")
    mul.output[0] = "c_ok"
    body.node.insert(
        list(body.node).index(mul) + 1, onnx.helper.make_node("Add", ["c_ok", "zero"], ["c"])
    )
    nodes = list(broken.graph.node)
    del broken.graph.node[:]
    broken.graph.node.extend([*first, *nodes])
    assert _verify(original, broken, tmp_path, "--runs", "2") == 1
    out = capsys.readouterr().err
    assert "run 1: onnxruntime cannot run B" in out and "where A runs" in out


def test_exit_3_only_when_the_original_runs_on_no_input(tmp_path, capsys):
    original = parse(MAP_THEN_CONCAT)
    np.savez(tmp_path / "empty.npz", **{"x[]": np.zeros(0)})
    code = _verify(
        original, lowering.lower(original), tmp_path, "--inputs", str(tmp_path / "empty.npz")
    )
    out = capsys.readouterr().err
    assert code == 3
    assert "A fails on every input set" in out and "skipped: onnxruntime cannot run A" in out


def test_an_unreadable_lowered_model_is_a_mismatch(tmp_path, capsys):
    onnx.save(parse(MAP), tmp_path / "a.onnx")
    (tmp_path / "b.onnx").write_bytes(b"not a model")
    assert verify.main([str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")]) == 1
    assert "cannot read B" in capsys.readouterr().err


def test_an_unreadable_original_exits_3(tmp_path, capsys):
    (tmp_path / "a.onnx").write_bytes(b"not a model")
    onnx.save(parse(MAP), tmp_path / "b.onnx")
    assert verify.main([str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")]) == 3
    assert "cannot read A" in capsys.readouterr().err


def test_different_inputs_are_a_mismatch(tmp_path, capsys):
    other = parse(MAP.replace(" t)", " u)").replace("float[N] t", "float[N] u"))
    assert _verify(parse(MAP), other, tmp_path) == 1
    assert "the models take different inputs" in capsys.readouterr().err
