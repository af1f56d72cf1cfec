"""Nodes ONNX sizes wrong, respelled where the lowering copies or exposes them.

onnxruntime sizes a node's output by ONNX's inference before the kernel
runs, and its memory planner may give the node a freed buffer of that size
("Shape mismatch attempting to re-use buffer"); a pin after the node cannot
reach it. Every op of :data:`~lowering.irutils.node_inference.seen_wrong`
that has a respelling (:mod:`lowering.irutils.respellings`):

- alone: respelled, ONNX infers onnxruntime's
  shape for it (strictly), and onnxruntime computes what it computes for
  the original;
- in every form that copies it (unrolled, vectorized, a Scan, a Loop) or
  exposes it (a SequenceConstruct read back): in the output, each node of
  the op whose input shapes are proven static is one ONNX sizes right, and
  onnxruntime computes what it computes for the original.

The cases that have none are left as they are (and pinned, as before).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.analysis.proven_shapes import default_opset, prove_model
from lowering.irutils.computed_shapes import computed_shapes
from lowering.irutils.node_inference import seen_wrong
from lowering.irutils.respellings import apply_respelling, respelling, sized_right
from lowering.irutils.walk import model_nodes
from tests.cases.copied_nodes import RESHAPED, stacked_map, with_element
from tests.cases.node_cases import DOUBTED, UNTRUSTED, Case, c, exposed_model, ort_run, x
from tests.cases.node_cases import feeds_of as case_feeds
from tests.cases.node_cases import model_of as case_model
from tests.helpers import assert_same, lowered

#: Edge cases beside the ones tests/cases/node_cases.py names.
EDGES = {
    "MaxPool ceil_mode, dilation 2, Indices": (
        Case("MaxPool", [x(1, 1, 6)], {"kernel_shape": [2], "strides": [3], "dilations": [2],
             "pads": [0, 1], "ceil_mode": 1}, 2), 17, (1, 1, 2),
    ),
    "AveragePool ceil_mode 2-D, count_include_pad 0": (
        Case("AveragePool", [x(1, 2, 4, 5)], {"kernel_shape": [2, 3], "strides": [2, 2],
             "pads": [0, 0, 1, 1], "ceil_mode": 1}), 19, (1, 2, 2, 3),
    ),
    "LpPool ceil_mode 2-D, p 3": (
        Case("LpPool", [x(1, 2, 4, 5)], {"kernel_shape": [2, 3], "strides": [2, 2], "p": 3,
             "pads": [0, 0, 1, 1], "ceil_mode": 1}), 18, (1, 2, 2, 3),
    ),
    "MaxPool SAME_UPPER, dilation 2": (
        Case("MaxPool", [x(1, 2, 5)], {"kernel_shape": [2], "dilations": [2],
             "auto_pad": "SAME_UPPER"}), 17, (1, 2, 4),
    ),
    "Einsum, three operands": (
        Case("Einsum", [x(1, 3), x(2, 1), x(2, 3)], {"equation": "ab,ab,ab->ab"}), 13, (2, 3),
    ),
    "Resize by scales, opset 18 axes": (
        Case("Resize", [x(2, 5, 3), c([], np.float32), c([1.4], np.float32)], {"axes": [1]}),
        18, (2, 7, 3),
    ),
    "Resize by scales, linear, two axes": (
        Case("Resize", [x(1, 1, 5, 5), c([], np.float32), c([1, 1, 1.4, 1.4], np.float32)],
             {"mode": "linear"}), 13, (1, 1, 7, 7),
    ),
    "Squeeze: empty axes, three unit dims": (
        Case("Squeeze", [x(1, 2, 1, 1), c([])]), 13, (2,),
    ),
}  # fmt: skip
#: The seen-wrong cases with no respelling: a Resize by scales that sizes do
#: not give back (7 / 5 is not 1.5), an LpPool (its pads count as zeros,
#: but its ceil mode is not checked here), an average pool that counts its
#: pads, Ranges.
NO_RESPELLING = {
    "Resize by scales 1.5": (
        Case("Resize", [x(1, 1, 5), c([], np.float32), c([1, 1, 1.5], np.float32)]), 13,
        (1, 1, 7),
    ),
    "AveragePool ceil_mode, count_include_pad": (
        Case("AveragePool", [x(1, 1, 4)], {"kernel_shape": [2], "strides": [2], "pads": [0, 1],
             "ceil_mode": 1, "count_include_pad": 1}), 17, (1, 1, 2),
    ),
    "Range: float bounds": DOUBTED["Range: float bounds"],
    "Range: int32 span overflows": DOUBTED["Range: int32 span overflows"],
    # (and one ONNX sizes right: nothing to respell)
    "Squeeze: empty axes, no unit dim": (Case("Squeeze", [x(2, 3), c([])]), 13, (2, 3)),
}  # fmt: skip
_KNOWN = {**UNTRUSTED, **DOUBTED, **RESHAPED}
RESPELLED = {
    **{name: case for name, case in _KNOWN.items() if name not in NO_RESPELLING},
    **EDGES,
}
#: (ONNX's claim is right for these; nothing to respell.)
RESPELLED.pop("Resize by sizes, not_larger")
RESPELLED.pop("Einsum with an ellipsis")


def _single(name: str, cases: dict) -> tuple[ir.Model, ir.Node, int]:
    case, opset, _ = cases[name]
    model = ir.serde.deserialize_model(case_model(case, opset))
    node = next(n for n in model.graph if n.op_type == case.op)
    return model, node, opset


def _plan(model: ir.Model, node: ir.Node, opset: int):
    proof = prove_model(model, fill=True)
    operands = [proof.operand(v) for v in node.inputs]
    computed = computed_shapes(node, operands)
    return None if computed is None else respelling(node, operands, computed, opset)


@pytest.mark.parametrize("name", RESPELLED)
def test_a_respelled_node_means_the_same_and_onnx_sizes_it_right(name):
    case, opset, shape = RESPELLED[name]
    original = case_model(case, opset)
    expected = ort_run(original, case_feeds(case))
    assert expected[0].shape == shape
    model, node, opset = _single(name, RESPELLED)
    found = _plan(model, node, opset)
    assert found is not None, name
    apply_respelling(found)
    proto = ir.serde.serialize_model(model)
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    for output, got in zip(inferred.graph.output, expected, strict=True):
        dims = output.type.tensor_type.shape.dim
        claimed = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
        if name.startswith("NonZero"):  # (its count: no inference knows it)
            assert claimed[:1] == got.shape[:1], name
            continue
        assert claimed == got.shape, name
    assert_same(ort_run(proto, case_feeds(case)), expected)


@pytest.mark.parametrize("name", NO_RESPELLING)
def test_what_has_no_respelling_is_left_as_it_is(name):
    model, node, opset = _single(name, NO_RESPELLING)
    assert _plan(model, node, opset) is None


# -- in every form that copies or exposes the node ---------------------------------

FORMS = {
    "auto": {},  # unrolled, or vectorized where the op has a batching rule
    "no_unroll": {"max_unroll": 0},  # vectorized, else a Scan
    "loop": {"strategy": "loop"},
    "scan": {"runtime": "openvino"},  # (no Loop there: a Scan)
    "optimize": {"optimize": True},  # (onnxscript's optimizer after it)
    "exposed": {},  # the user's node read back from a SequenceConstruct
}
#: Cases an element of a map can hold (the op's first input runs).
MAPPED = [
    name
    for name, (case, _, _) in RESPELLED.items()
    if not case.inputs[0].const and name != "Squeeze: empty axes attribute"  # (opset 11 only)
]


def _form_model(name: str, form: str) -> tuple[onnx.ModelProto, dict]:
    case, opset, _ = RESPELLED[name]
    if form == "exposed":
        return exposed_model(name)
    result = ort_run(case_model(case, max(opset, 17)), case_feeds(case))[0]
    model = stacked_map(case, None, max(opset, 17), result)
    stacked = np.stack([with_element(case, case.inputs[0].value.shape).inputs[0].value] * 4)
    scale = np.arange(1, 5).reshape(-1, *[1] * (stacked.ndim - 1))
    return model, {"x": (stacked * scale).astype(stacked.dtype)}


def _sized_wrong(model: onnx.ModelProto, op: str) -> tuple[int, list[str]]:
    """How many nodes of ``op`` have proven static inputs, and those of them
    ONNX's inference may size wrong (seen wrong) that it does not size as
    computed."""
    loaded = ir.serde.deserialize_model(model)
    proof = prove_model(loaded, fill=True)
    opset = default_opset(loaded.opset_imports)
    checked, wrong = 0, []
    for node in model_nodes(loaded):
        if node.op_type != op:
            continue
        operands = [proof.operand(v) for v in node.inputs]
        if any(o is not None and (o.shape is None or None in o.shape) for o in operands):
            continue
        checked += 1
        if not seen_wrong(node, operands):
            continue
        computed = computed_shapes(node, operands)
        if computed is None or not sized_right(
            node.op_type, node.attributes, operands, opset, computed
        ):
            wrong.append(f"{node.op_type} {node.name!r}: {computed}")
    return checked, wrong


#: (exposed_model builds the cases of tests/cases/node_cases.py)
FORM_SWEEP = [
    (name, form)
    for name in MAPPED
    for form in FORMS
    if form != "exposed" or name in UNTRUSTED or name in DOUBTED
]


@pytest.mark.parametrize(("name", "form"), FORM_SWEEP)
@pytest.mark.sweep
def test_every_copy_or_exposed_node_onnx_sizes_wrong_is_respelled(name, form):
    case = RESPELLED[name][0]
    model, feeds = _form_model(name, form)
    expected = ort_run(model, feeds)
    result = lowered(model, **FORMS[form])
    if form == "optimize":  # (a model the checker refuses is kept unoptimized: not here)
        working = ir.serde.deserialize_model(model)
        assert lowering.pipeline(optimize=True)(working).not_optimized is None
    checked, wrong = _sized_wrong(result, case.op)
    assert not wrong, wrong
    assert checked, "no node of the op with static inputs: the form copies nothing here"
    assert_same(ort_run(result, feeds), expected)


# -- with no shape known --------------------------------------------------------

#: Respellings that need no shape: a Squeeze of empty axes, a Slice's end
#: through the first (on an input of unknown dims, ``x`` below).
SHAPE_FREE = {
    "Squeeze, empty axes input": ("Squeeze", ["x", "none"], {}, 13),
    "Squeeze, empty axes attribute": ("Squeeze", ["x"], {"axes": []}, 11),
    "Slice, end INT64_MAX, negative step": (
        "Slice",
        ["x", "last", "max64", "zero", "back"],
        {},
        13,
    ),
    "Slice, int32 end INT32_MAX": ("Slice", ["x", "last32", "max32", "zero32", "back32"], {}, 13),
}
_SHAPE_FREE_CONSTANTS = {
    "none": np.array([], np.int64),
    "last": np.array([3]),
    "max64": np.array([2**63 - 1]),
    "zero": np.array([0]),
    "back": np.array([-1]),
    "last32": np.array([3], np.int32),
    "max32": np.array([2**31 - 1], np.int32),
    "zero32": np.array([0], np.int32),
    "back32": np.array([-1], np.int32),
}


@pytest.mark.parametrize("name", SHAPE_FREE)
def test_a_respelling_that_needs_no_shape_is_made_without_one(name):
    """Where the input's dims are not known (a function's input, before
    onnxruntime inlines it), no shape is computed; the node is respelled all
    the same, so that ONNX's inference is right whatever the shape."""
    from onnx import helper

    op, inputs, attrs, opset = SHAPE_FREE[name]
    node = helper.make_node(op, inputs, ["y"])
    node.attribute.extend(
        helper.make_attribute(k, v, attr_type=onnx.AttributeProto.INTS) for k, v in attrs.items()
    )
    used = set(inputs[1:])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["a", 1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in _SHAPE_FREE_CONSTANTS.items() if k in used],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model = ir.serde.deserialize_model(proto)
    node_ir = next(iter(model.graph))
    operands = [prove_model(model, fill=True).operand(v) for v in node_ir.inputs]
    assert seen_wrong(node_ir, operands)
    assert computed_shapes(node_ir, operands) is None
    found = respelling(node_ir, operands, None, opset)
    assert found is not None
    apply_respelling(found)
    operands = [prove_model(model, fill=True).operand(v) for v in node_ir.inputs]
    assert not seen_wrong(node_ir, operands)
    respelled = ir.serde.serialize_model(model)
    for rows in (1, 4):
        feeds = {"x": np.arange(rows, dtype=np.float32).reshape(rows, 1)}
        assert_same(ort_run(respelled, feeds), ort_run(proto, feeds))


def test_the_fuzz_example_of_a_squeeze_read_in_a_function_runs():
    """Fuzz seed 3802 (after infer_shapes): ``Squeeze(x: [3,1,3], [])`` in a
    function called in nested Scans, split and read by Shape in the lowered
    map; onnxruntime inlines the function, sizes the squeeze [3,1,3] and
    reused a buffer of that size for a Shape ("{1} != {2}")."""
    from lowering import lower
    from tests.cases.fuzz_regressions import FUZZ, fuzz_expected, fuzz_feeds

    name = "squeeze_empty_axes_read_in_a_function"
    result = lower(onnx.load(FUZZ / f"{name}.onnx"))
    assert_same(ort_run(result, fuzz_feeds(name)), fuzz_expected(name))


@pytest.mark.parametrize("declared", [False, True], ids=["inferred", "declared"])
def test_a_resize_respelled_in_a_loop_body_survives_the_optimizer(declared):
    """Fuzz seed 4002: a Resize by scales 2.6 on [1,2,5] (ONNX: 12, onnxruntime:
    13) in a map over a split of unknown length, a Loop; its respelling by
    sizes gives no scales at all from Resize-13 on (onnxscript's optimizer
    made an empty scales tensor one the checker reads as given: "Either
    `sizes` or `scales` must be provided, but not both of them")."""
    from tests.helpers import parse

    model = parse("""<ir_version: 9, opset_import: ["" : 19]>
    g (float[N,2,5] x) => (seq(float[2,13]) y) {
      s = SplitToSequence <axis = 0, keepdims = 1> (x)
      y = SequenceMap <body = b (float[1,2,5] e) => (float[2,13] f) {
          sc = Constant <value = float[3] {1, 1, 2.6}> ()
          r = Resize <mode = "linear"> (e, "", sc)
          f = Flatten <axis = -1> (r)
      }> (s)
    }""")
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    working = ir.serde.deserialize_model(model)
    assert lowering.pipeline(optimize=True)(working).not_optimized is None
    result = lowered(model, optimize=True)
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 2, 5)).astype(np.float32)}
    assert_same(ort_run(result, feeds), ort_run(model, feeds))
