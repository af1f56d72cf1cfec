"""The verifier: it must catch wrong models, not only bless right ones."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx.backend.test.case.node import collect_testcases

import lowering
from lowering import cli, verify
from tests.helpers import all_nodes, parse
from tests.test_differential import CASES

# The originals onnxruntime itself cannot run (its SequenceMap expansion
# fails on untyped and nested bodies, and it resolves no "ai.onnx" body).
ORT_CANNOT_RUN = {"untyped_body", "nested_sequence_map", "domain_spelled_ai_onnx"}


def _verify(a: onnx.ModelProto, b: onnx.ModelProto, tmp_path, *args: str) -> tuple[int, str]:
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    code = verify.main([str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), *args])
    return code


@pytest.mark.parametrize("name", list(CASES))
def test_every_differential_case_verifies(name, tmp_path, capsys):
    original = parse(CASES[name].text)
    code = _verify(original, lowering.lower(original), tmp_path)
    out, err = capsys.readouterr()
    if name in ORT_CANNOT_RUN:
        assert code == 3
        assert "could not compare" in out and "onnxruntime cannot load A" in out
    else:
        assert code == 0, out
        assert "matches" in err
        assert "MISMATCH" not in out


@functools.cache
def _conformance() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [
            c
            for c in collect_testcases(None)
            if c.name.startswith("test_sequence_map_") and not c.name.endswith("_expanded")
        ]


@pytest.mark.parametrize("index", range(6))
def test_every_conformance_case_verifies(index, tmp_path, capsys):
    case = _conformance()[index]
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
    out, err = capsys.readouterr()
    assert "'y'" in err and "values differ" in out


def test_dropped_element_is_caught(tmp_path, capsys):
    original = parse(ADDS)
    broken = lowering.lower(original, strategy="loop")
    loop = next(n for n in broken.graph.node if n.op_type == "Loop")
    loop.output[0] = "y_all"
    broken.graph.node.append(onnx.helper.make_node("SequenceErase", ["y_all"], ["y"]))
    assert _verify(original, broken, tmp_path, "--runs", "1") == 1
    out, err = capsys.readouterr()
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
    out, err = capsys.readouterr()
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
    out, err = capsys.readouterr()
    assert "'total'" in err and "'count'" in err
    assert "output 1 is 'total' in A but 'count' in B" in out


def test_runtime_dtype_difference_is_caught():
    row = verify.Row("y", "tensor(float)")
    verify._compare_value(row, np.zeros(2, np.float32), np.zeros(2, np.float64), 0, 0, "y")
    assert row.problem == "y: dtype float32 in A, float64 in B"


def test_values_within_tolerance_match_and_outside_do_not():
    close, far = verify.Row("y", "t"), verify.Row("y", "t")
    a = np.array([1.0, np.nan, np.inf], np.float32)
    verify._compare_value(close, a, a + np.float32(1e-7), 1e-4, 1e-5, "y")
    verify._compare_value(far, a, a + np.float32(1e-2), 1e-4, 1e-5, "y")
    assert close.problem is None
    assert far.problem is not None and far.max_abs == pytest.approx(1e-2, rel=1e-3)


def test_strings_and_bools_compare_exactly():
    row = verify.Row("y", "t")
    words = np.array(["a", "b"], dtype=object)
    verify._compare_value(row, words, words.copy(), 1, 1, "y")
    assert row.problem is None
    verify._compare_value(row, words, np.array(["a", "c"], dtype=object), 1, 1, "y")
    assert row.problem == "y: 1 of 2 values differ"


# Inputs.

ALL_DTYPES = [
    t
    for t in onnx.TensorProto.DataType.values()
    if t not in (onnx.TensorProto.UNDEFINED,) and onnx.helper.tensor_dtype_to_string(t)
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=onnx.helper.tensor_dtype_to_string)
def test_synthesis_covers_every_dtype(dtype):
    port = verify._Port("x", False, dtype, (2, "N"))
    feeds = verify._synthesize([port], run=0, seed=0, fixed={})
    array = feeds["x"]
    assert array.shape[0] == 2 and array.ndim == 2
    if dtype == onnx.TensorProto.STRING:
        assert array.dtype == object and all(isinstance(v, str) for v in array.ravel())
    else:
        assert array.dtype == onnx.helper.tensor_dtype_to_np_dtype(dtype)


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
    g ({dtype}[N] x, seq({dtype}[M]) s) => ({dtype}[N] y, seq({dtype}[M]) t) {{
      y = Identity(x)
      t = Identity(s)
    }}""")
    assert _verify(model, model, tmp_path) == 0, capsys.readouterr()


def test_sequences_get_lengths_0_and_1_and_shapes_that_vary():
    ports = [
        verify._Port("t", False, onnx.TensorProto.FLOAT, ("N",)),
        verify._Port("a", True, onnx.TensorProto.FLOAT, ("N", "H")),
        verify._Port("b", True, onnx.TensorProto.FLOAT, ("H",)),
    ]
    runs = [verify._synthesize(ports, run, seed=7, fixed={}) for run in range(3)]
    assert sorted(len(r["a"]) for r in runs) == [0, 1, 3]
    for feeds in runs:
        n = feeds["t"].shape[0]
        assert len(feeds["a"]) == len(feeds["b"])
        for a, b in zip(feeds["a"], feeds["b"]):
            assert a.shape[0] == n  # N is shared with a tensor input: one size
            assert a.shape[1] == b.shape[0]  # H pairs up element by element
    three = next(r for r in runs if len(r["a"]) == 3)
    heights = {a.shape[1] for feeds in runs for a in feeds["a"]} | {a.shape[1] for a in three["a"]}
    assert len(heights) > 1  # and varies between elements


def test_dim_option_fixes_a_dim_everywhere():
    ports = [
        verify._Port("t", False, onnx.TensorProto.FLOAT, ("N",)),
        verify._Port("a", True, onnx.TensorProto.FLOAT, ("H",)),
    ]
    feeds = verify._synthesize(ports, 0, seed=0, fixed={"N": 6, "H": 5})
    assert feeds["t"].shape == (6,)
    assert [a.shape for a in feeds["a"]] == [(5,)] * 3


def test_dim_and_runs_and_seed_options(tmp_path, capsys):
    model = parse(ADDS)
    assert (
        _verify(
            model, lowering.lower(model), tmp_path, "--runs", "5", "--seed", "3", "--dim", "N=2"
        )
        == 0
    )
    assert "(5 runs)" in capsys.readouterr().out
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
    out = capsys.readouterr().out
    assert "(1 run)" in out and "  2  " in out  # two elements compared
    empty = {"s0[]": np.zeros(0), "s1[]": np.zeros(0), "t": arrays["t"], "u": arrays["u"]}
    np.savez(tmp_path / "empty.npz", **empty)
    assert (
        _verify(model, lowering.lower(model), tmp_path, "--inputs", str(tmp_path / "empty.npz"))
        == 0
    )
    np.savez(tmp_path / "partial.npz", t=arrays["t"])
    assert _verify(model, model, tmp_path, "--inputs", str(tmp_path / "partial.npz")) == 3
    assert "no value for input(s) s0, s1, u" in capsys.readouterr().out


def test_python_api_report():
    model = parse(ADDS)
    report = verify.compare(model, lowering.lower(model), runs=2)
    assert report.status == verify.MATCH and report.exit_code == 0 and report.runs == 2
    assert [row.name for row in report.rows] == ["y"]
    assert report.rows[0].elements == 3  # lengths 3 and 0


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
        rewrites = lowering.lower_in_place(model, **kwargs)
        add = next(
            n for n in ir.traversal.RecursiveGraphIterator(model.graph) if n.op_type == "Add"
        )
        add.op_type = "Sub"
        return rewrites

    monkeypatch.setattr(cli, "lower_in_place", sabotaged)
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
