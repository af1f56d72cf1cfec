"""Einsum at opset 11: the hand-written expansion (lowering/opset/adapters/einsum.py).

Each equation is declared with static dims, with symbolic ones (fed with
every letter's dim 0 in turn: an empty batch, an empty contracted dim whose
sum is 0, an empty output) and with a static 0, on float, double, float16 and
int64, from opsets 12, 13 and 18. The converted model passes the full
checker and runs in onnxruntime like the original (where onnxruntime runs
the original, on operands with elements: its Einsum dies of SIGFPE on
some empty ones) and like numpy.einsum. The refused equations say why.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
from onnx import TensorProto
from onnx import helper as oh

from lowering.errors import LoweringError
from lowering.passes.target_opset import TargetOpsetPass
from tests.helpers import run

# (equation, operand shapes): one letter, one size; '...' dims by shape.
EQUATIONS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("ji,jk->ki", [(3, 2), (3, 4)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i->", [(4,), (4,)]),
    ("i,i", [(4,), (4,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,j->i", [(2, 3), (3,)]),
    ("bi,bj->bij", [(2, 3), (2, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ij->i", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ijk->j", [(2, 3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("bqhd,bkhd->bhqk", [(2, 4, 3, 5), (2, 6, 3, 5)]),
    ("abc,cde->abde", [(2, 3, 4), (4, 5, 6)]),
    ("zabc,zcde->zabde", [(2, 3, 2, 4), (2, 4, 3, 2)]),
    ("abcd,cdb->a", [(2, 3, 4, 5), (4, 5, 3)]),
    ("ab,cd->abcd", [(2, 3), (4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,ij,j->", [(2,), (2, 3), (3,)]),
    ("IJ,JK->IK", [(2, 3), (3, 4)]),
    ("Ij,jK->KI", [(2, 3), (3, 4)]),
    ("IJ,JK", [(2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 2, 3, 4), (2, 2, 4, 5)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (5, 4, 2)]),
    ("i...j,j...k->...ik", [(3, 2, 4), (4, 2, 5)]),
    ("...i,...i->...", [(2, 3), (2, 3)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("...ij->...", [(2, 3, 4)]),
    ("ij...->i...", [(2, 3, 4)]),
    (" b i j , b j k -> b i k ", [(2, 3, 4), (2, 4, 5)]),
]

DTYPES = {  # element type, numpy type, tolerance
    "float": (TensorProto.FLOAT, np.float32, 1e-5),
    "double": (TensorProto.DOUBLE, np.float64, 1e-12),
    "float16": (TensorProto.FLOAT16, np.float16, 2e-2),
    "int64": (TensorProto.INT64, np.int64, 0),
}
# (dtype, the opset the model declares)
FORMS = [
    ("float", 12),
    ("float", 13),
    ("float", 18),
    ("double", 13),
    ("float16", 18),
    ("int64", 12),
]


def _terms(equation: str, count: int) -> list[str]:
    text = "".join(equation.split())
    return text.split("->")[0].split(",")[:count]


def _letters(term: str, rank: int) -> list[str]:
    """The label of each dim: its letter, or '.k' for the k-th (from the right) '...' dim."""
    before, _, after = term.partition("...")
    width = rank - len(before) - len(after)
    return [*before, *[f".{width - i}" for i in range(width)], *after]


def _shaped(equation: str, shapes, zero: str | None) -> list[tuple[int, ...]]:
    """The operands' shapes, with every dim labelled ``zero`` set to 0 (but a
    '...' dim of 1, which broadcasts: it stays declared 1)."""

    def dim(label: str, d: int) -> int:
        return 0 if label == zero and not (label.startswith(".") and d == 1) else d

    return [
        tuple(dim(label, d) for label, d in zip(_letters(t, len(s)), s))
        for t, s in zip(_terms(equation, len(shapes)), shapes)
    ]


def _declared(equation: str, shapes, symbolic: bool) -> list[list]:
    """Static dims, or a name per letter ('...' dims of 1 stay 1: they broadcast)."""
    if not symbolic:
        return [list(s) for s in shapes]
    return [
        [
            d
            if label.startswith(".") and d == 1
            else f"d_{label.lstrip('.')}{'e' * label.startswith('.')}"
            for label, d in zip(_letters(t, len(s)), s)
        ]
        for t, s in zip(_terms(equation, len(shapes)), shapes)
    ]


def _model(equation: str, declared, dtype: str, opset: int) -> onnx.ModelProto:
    element = DTYPES[dtype][0]
    names = [f"x{i}" for i in range(len(declared))]
    graph = oh.make_graph(
        [oh.make_node("Einsum", names, ["y"], equation=equation, name="einsum")],
        "g",
        [oh.make_tensor_value_info(n, element, d) for n, d in zip(names, declared)],
        [oh.make_tensor_value_info("y", element, None)],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)


def _convert(model: onnx.ModelProto):
    converted = ir.serde.deserialize_model(model)
    opset_pass = TargetOpsetPass(11)(converted)
    result = ir.serde.serialize_model(converted)
    onnx.checker.check_model(result, full_check=True)
    assert {o.domain: o.version for o in result.opset_import}[""] == 11
    assert "Einsum" not in {n.op_type for n in result.graph.node}
    assert "Einsum-12" in opset_pass.expanded
    return result, opset_pass


def _feeds(shapes, numpy_type, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f"x{i}": (
            rng.integers(-5, 5, s) if numpy_type is np.int64 else rng.uniform(-2, 2, s)
        ).astype(numpy_type)
        for i, s in enumerate(shapes)
    }


def _ort_runs_original(equation: str, dtype: str) -> bool:
    """onnxruntime has no float16 Einsum, and fails on an implicit output of capitals."""
    implicit_capitals = "->" not in equation and any(c.isupper() for c in equation)
    return dtype in ("float", "double", "int64") and not implicit_capitals


def _run_converted(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    try:
        return run(model, feeds)[0]
    except Exception:  # noqa: BLE001 -- onnxruntime lacks some float16 kernels (ReduceSum)
        return onnx.reference.ReferenceEvaluator(model).run(None, feeds)[0]


def _check(equation, original, converted, dtype, feeds_list) -> None:
    numpy_type, tolerance = DTYPES[dtype][1], DTYPES[dtype][2]
    for feeds in feeds_list:
        got = _run_converted(converted, feeds)
        wide = [v.astype(np.float64) if dtype == "float16" else v for v in feeds.values()]
        want = np.einsum(equation.replace(" ", ""), *wide).astype(numpy_type)
        assert got.dtype == want.dtype and got.shape == want.shape, (feeds.keys(), got.shape)
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * 4)
        # onnxruntime's Einsum dies of SIGFPE on some empty operands ('ij,kj->ik'
        # on [2, 0] and [4, 0]): those are checked against numpy only.
        if _ort_runs_original(equation, dtype) and all(v.size for v in feeds.values()):
            [expected] = run(original, feeds)
            assert expected.shape == got.shape
            np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * 4)


def _zero_labels(equation: str, shapes) -> list[str]:
    labels = {x for t, s in zip(_terms(equation, len(shapes)), shapes) for x in _letters(t, len(s))}
    return sorted(labels)


@pytest.mark.parametrize(("dtype", "opset"), FORMS)
@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS, ids=[e for e, _ in EQUATIONS])
@pytest.mark.sweep
def test_einsum_runs_like_the_original_at_11(equation, shapes, symbolic, dtype, opset):
    original = _model(equation, _declared(equation, shapes, symbolic), dtype, opset)
    converted, _ = _convert(original)
    numpy_type = DTYPES[dtype][1]
    feeds = [_feeds(shapes, numpy_type, seed=1)]
    if symbolic:  # one dim 0 at a time: '...' dims too
        feeds += [
            _feeds(_shaped(equation, shapes, zero), numpy_type, seed=2)
            for zero in _zero_labels(equation, shapes)
        ]
    _check(equation, original, converted, dtype, feeds)


@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_with_a_static_empty_dim(equation, shapes):
    """Each letter declared 0 in turn: Reshape's 0 copies no dim it should not."""
    for zero in _zero_labels(equation, shapes):
        empty = _shaped(equation, shapes, zero)
        original = _model(equation, [list(s) for s in empty], "float", 13)
        converted, _ = _convert(original)
        _check(equation, original, converted, "float", [_feeds(empty, np.float32, seed=3)])


def test_contracted_dims_not_known_equal_are_broadcast():
    """Einsum broadcasts a contracted dim of 1 (numpy and onnxruntime do); MatMul does not."""
    original = _model("ij,jk->ik", [["i", "j"], ["j2", "k"]], "float", 13)
    converted, _ = _convert(original)
    assert "Expand" in {n.op_type for n in converted.graph.node}
    feeds = [
        _feeds(s, np.float32, seed=4)
        for s in ([(2, 3), (3, 4)], [(2, 1), (3, 4)], [(2, 3), (1, 4)])
    ]
    _check("ij,jk->ik", original, converted, "float", feeds)
    # A static 1 is squeezed away: its one value stands for every index.
    original = _model("ij,jk->ik", [[2, 1], [3, 4]], "float", 13)
    converted, _ = _convert(original)
    _check("ij,jk->ik", original, converted, "float", [_feeds([(2, 1), (3, 4)], np.float32, 5)])


def test_attention_scores_are_a_transpose_and_a_matmul():
    original = _model("bhqd,bhkd->bhqk", [["B", "H", "Q", 8], ["B", "H", "K", 8]], "float", 13)
    converted, _ = _convert(original)
    assert [n.op_type for n in converted.graph.node] == ["Transpose", "MatMul"]


REFUSED = [
    ("ii->i", [(3, 3)], "float", "Einsum 'ii->i' (a diagonal: 'i' repeats in operand 0)"),
    ("ii->", [(3, 3)], "float", "Einsum 'ii->' (a trace: 'i' repeats in operand 0)"),
    ("ii", [(3, 3)], "float", "(a trace: 'i' repeats in operand 0)"),
    ("ij,jj->i", [(2, 3), (3, 3)], "float", "'j' repeats in operand 1"),
    ("ij,jk", [(2, 3), (3, 4)], "int8", "is on int8, which MatMul-9 and ReduceSum-11 do not take"),
    ("ij,jk", [(2, 3), (3, 4)], "uint8", "is on uint8"),
    ("...ij,jk->ik", [(2, 3, 4), (4, 5)], "float", "sums over the dims '...' stands for"),
    ("...ij,...jk", [(2, 2, 3, 4), (2, 4, 5)], "float", "different numbers of dims"),
    ("Ab,bc", [(2, 3), (3, 4)], "float", "implicit output of upper- and lower-case letters"),
    ("ij,jk->iz", [(2, 3), (3, 4)], "float", "has 'z' in its output and in no operand"),
    ("ij->ii", [(2, 3)], "float", "repeats a letter in its output"),
    ("ij", [(2, 3, 4)], "float", "names 2 dims of operand 0, which has rank 3"),
    ("i1,1k", [(2, 3), (3, 4)], "float", "is not an equation of letters"),
]


@pytest.mark.parametrize(
    ("equation", "shapes", "dtype", "reason"), REFUSED, ids=[r[0] for r in REFUSED]
)
def test_refused_equations_say_why(equation, shapes, dtype, reason):
    element = {"float": TensorProto.FLOAT, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8}[
        dtype
    ]
    names = [f"x{i}" for i in range(len(shapes))]
    graph = oh.make_graph(
        [oh.make_node("Einsum", names, ["y"], equation=equation, name="e")],
        "g",
        [oh.make_tensor_value_info(n, element, list(s)) for n, s in zip(names, shapes)],
        [oh.make_tensor_value_info("y", element, None)],
    )
    model = ir.serde.deserialize_model(
        oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    )
    with pytest.raises(LoweringError) as raised:
        TargetOpsetPass(11)(model)
    message = str(raised.value)
    assert reason in message and "it has no opset-11 form" in message, message
    assert "\n" not in message
    assert [n.op_type for n in model.graph] == ["Einsum"]  # untouched
