"""Maps whose lowering would show ONNX's inference a shape it sizes wrong.

onnxruntime allocates If outputs and Scan results from ONNX's inferred
shapes, and the checker merges them; a SequenceMap held its results in
sequences, where they reach neither. A lowered map's copies of an op ONNX
sizes wrong, and the tensors it reads in place of sequences, are pinned
where their true shape is computed (:mod:`lowering.irutils.pins`); where it
is not, every form but the Loop read through its sequences (the original's
own expansion) declines (:mod:`lowering.maps.claims`), and a runtime
without sequence ops refuses the map with that reason. No output holds a
sequence op only to hide a shape (``tests.helpers.lowered`` checks it).
MaxPool with ``ceil_mode`` and an end pad is inferred [1,1,3] on [1,1,4],
computed [1,1,2]. Every strategy, wrapper, reader and source is run
against onnxruntime on the original, at n = 1 and 3 (the readers fail on an
empty map in the original too).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.analysis.proven_shapes import prove_model
from lowering.irutils.pins import misallocated_output, node_pins
from lowering.runtimes.sessions import open_session
from tests.cases.copied_nodes import COPIED, NOT_COMPUTED, RESHAPED, stacked_map, with_element
from tests.cases.node_cases import (
    DOUBTED,
    MISALLOCATED,
    NO_PIN,
    UNTRUSTED,
    Case,
    ort_run,
)
from tests.cases.node_cases import feeds_of as _case_feeds
from tests.cases.node_cases import model_of as _case_model
from tests.helpers import assert_same, lowered, op_types, parse

POOL = "MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1>"
READERS = {
    "sequence_at": "o = SequenceAt(m, zero)",
    "concat": "o = ConcatFromSequence <axis = 0, new_axis = 1> (m)",
    "relu_of_at": "a = SequenceAt(m, zero)\n o = Relu(a)",
}
RANKS = {"sequence_at": 3, "concat": 4, "relu_of_at": 3}
SOURCES = {
    "split": "parts = SplitToSequence <axis = 0, keepdims = 0> (x)",
    "construct": "x0 = Gather <axis = 0> (x, zero)\n parts = SequenceConstruct(x0, x0)",
}
OPTIONS = {"auto": {}, "loop": {"strategy": "loop"}, "no_unroll": {"max_unroll": 0}}


def _model(wrapper: str, reader: str, source: str) -> onnx.ModelProto:
    dims = ",".join(f"d{k}" for k in range(RANKS[reader]))
    inner = f"""
        zero = Constant <value = int64 {{0}}> ()
        {SOURCES[source]}
        m = SequenceMap <body = body (float[1,1,4] e) => (float[1,1,w] c) {{
              c = {POOL} (e)
            }}> (parts)
        {READERS[reader]}"""
    other = (  # of the same rank, its own names
        "o2 = Identity(x)"
        if reader == "concat"
        else "k = Constant <value = int64 {0}> ()\n o2 = Gather <axis = 0> (x, k)"
    )
    if wrapper == "scan":
        graph = f"""ys = Scan <num_scan_inputs = 1, body = sb (float[2] r) => (float[{dims}] o) {{
            {inner}
          }}> (xs)"""
    else:
        graph = f"""ys = If (b) <then_branch = tb () => (float[{dims}] o) {{
            {inner}
          }}, else_branch = eb () => (float[{dims}] o2) {{
            {other}
          }}>"""
    return parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,1,1,4] x, float[K,2] xs, bool b) => (float[S,{dims}] ys) {{
      {graph}
    }}""")


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    return open_session(model.SerializeToString(), optimize=False).run(None, feeds)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("wrapper", ["scan", "if"])
def test_lowered_maps_in_branches_and_bodies_run_like_the_original(wrapper, reader, source, option):
    model = _model(wrapper, reader, source)
    if wrapper == "if":  # the graph output has no scan axis
        del model.graph.output[0].type.tensor_type.shape.dim[0]
    result = lowered(model, **OPTIONS[option])
    rng = np.random.default_rng(0)
    for n in (1, 3):
        feeds = {
            "x": rng.standard_normal((n, 1, 1, 4)).astype(np.float32),
            "xs": rng.standard_normal((2, 2)).astype(np.float32),
            "b": np.array(True),
        }
        expected = _run(model, feeds)
        assert expected[0].shape[-1] == 2  # ONNX infers 3
        assert_same(_run(result, feeds), expected, f"n={n}")
    # Each copy of the pool is pinned to [1,1,2]: no sequence is left but the
    # Loop's, which the original's own expansion builds.
    if option != "loop":
        assert not [op for op in op_types(result) if op.startswith("Sequence")], option


def test_only_subgraphs_that_hold_a_lowered_map_are_touched():
    """An If whose branch returns a MaxPool of its own (no map in it) keeps its
    output as it was: only what a rewrite copies or reads is pinned."""
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,4] img, seq(float[3]) s, bool b) => (float[1,1,w] y, seq(float[3]) t) {{
      y = If (b) <then_branch = tb () => (float[1,1,w] p) {{ p = {POOL} (img) }},
                  else_branch = eb () => (float[1,1,w] q) {{ q = {POOL} (img) }}>
      t = SequenceMap <body = body (float[3] e) => (float[3] c) {{ c = Relu(e) }}> (s)
    }}""")
    result = ir.serde.deserialize_model(lowering.lower(model))
    [if_node] = [n for n in result.graph if n.op_type == "If"]
    for attr in if_node.attributes.values():
        assert [n.op_type for n in attr.as_graph()] == ["MaxPool"]


# -- shapes ONNX infers wrong, copied out of a body -----------------------------

# The runtimes without sequence ops: a map whose shape is not computed is refused there.
COPY_OPTIONS = {
    **OPTIONS,
    "optimize": {"optimize": True},
    "openvino": {"runtime": "openvino"},
    "tinygrad": {"runtime": "tinygrad"},
}


def _claim(op: str) -> str:
    """Why a form other than the Loop read through sequences declines a map
    whose body copies ``op`` where its shape is not computed."""
    return f"ONNX may size output 0 of {op} wrong, and its true shape is not computed here"


#: How each runtime without sequence ops refuses a map that only such a Loop takes.
REFUSED = {
    "openvino": "the map needs a Loop over sequences, and openvino has no SequenceAt",
    "tinygrad": "tinygrad runs neither Loop nor Scan, and the map can be neither unrolled nor "
    "vectorized",
}


def _lower_copied(name: str, model: onnx.ModelProto, option: str) -> onnx.ModelProto | None:
    """``model`` lowered with ``option`` (checked as :func:`tests.helpers.lowered`
    checks), its copied shape pinned by a Reshape, or kept in a Loop read
    through sequences where it is not computed; None where a runtime without
    sequence ops refuses that, as it must, naming the map and the op."""
    options = COPY_OPTIONS[option]
    claim = _claim(RESHAPED[name][0].op)
    if name in NOT_COMPUTED and "runtime" in options:
        runtime = options["runtime"]
        with pytest.raises(lowering.LoweringError) as refused:
            lowering.lower(model, **options)
        message = str(refused.value)
        assert message.startswith(
            f"node '<unnamed>' (SequenceMap) in main graph 'g': --runtime {runtime}: "
            f"{REFUSED[runtime]}: "
        ), message
        assert f"not unrolled: {claim}" in message, message
        return None
    result = lowered(model, **options)
    _, report = lowering.lower_with_report(model, **options)
    (node,) = report.nodes
    if name in NOT_COMPUTED:
        assert node.strategy == "loop", node
        read = f"its elements read and its results built through sequences: {claim}"
        assert read in node.reason, node
        assert ("openvino", "SequenceAt") in node.rejected_by, node
    elif node.strategy == "loop":  # (the only form: elements of two shapes, no unrolling)
        assert "through sequences" not in node.reason, node
    else:  # pinned: no sequence op left
        assert not [op for op in op_types(result) if op.startswith("Sequence")], node
    return result


def _onnx_shape(case: Case, opset: int) -> tuple | None:
    inferred = onnx.shape_inference.infer_shapes(_case_model(case, opset))
    tensor = inferred.graph.output[0].type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)


def _exposing_pair(case: Case, opset: int) -> tuple[Case, np.ndarray] | None:
    """``case`` with another element shape for which onnxruntime computes the
    same shape and ONNX infers another, and that shape; None if none is near."""
    shape = case.inputs[0].value.shape
    try:
        result = ort_run(_case_model(case, opset), _case_feeds(case))[0]
    except Exception:  # noqa: BLE001 -- not a case at this opset
        return None
    onnx_shape = _onnx_shape(case, opset)
    if onnx_shape is None or len(onnx_shape) != result.ndim:
        return None  # a rank ONNX gets wrong: the original's declared stack is refused too
    for axis, delta in itertools.product(range(len(shape)), [-1, 1, -2, 2, 3]):
        other_shape = tuple(d + delta if k == axis else d for k, d in enumerate(shape))
        if other_shape[axis] < 1:
            continue
        other = with_element(case, other_shape)
        try:
            computed = ort_run(_case_model(other, opset), _case_feeds(other))[0].shape
        except Exception:  # noqa: BLE001, S112 -- onnxruntime refuses this element
            continue
        if computed == result.shape and _onnx_shape(other, opset) != onnx_shape:
            return other, result
    return None


@pytest.mark.parametrize("option", list(COPY_OPTIONS))
@pytest.mark.parametrize("name", list(COPIED))
def test_copied_shapes_onnx_infers_wrong_are_pinned(name, option):
    """Lowered, the model passes the full checker and computes what the map did."""
    case, opset, _ = COPIED[name]
    opset = max(opset, 17)  # SequenceMap's
    found = _exposing_pair(case, opset)
    if found is None:  # ConvTranspose's extra output_padding is the same for every element
        assert case.op not in {"MaxPool", "AveragePool", "LpPool"}, name
        pytest.skip("no nearby element shape gives ONNX two shapes and onnxruntime one")
    other, result = found
    model = stacked_map(case, other, opset, result)
    onnx.checker.check_model(model, full_check=True)  # the element's differing dim is unknown
    feeds = {"a": case.inputs[0].value, "b": other.inputs[0].value}
    expected = _run(model, feeds)
    assert expected[0].shape == (2, *result.shape)
    result = _lower_copied(name, model, option)  # the full checker, among others
    if result is None:
        return
    assert_same(_run(result, feeds), expected)


@pytest.mark.parametrize("option", list(COPY_OPTIONS))
@pytest.mark.parametrize("name", RESHAPED)
def test_copied_shapes_meet_no_vectorized_reshape(name, option):
    """A map over a split whose body reshapes the op's result to its computed
    shape: lowered, it passes the full checker and computes what the map did."""
    case, opset, _ = RESHAPED[name]
    opset = max(opset, 17)  # SequenceMap's
    try:
        result = ort_run(_case_model(case, opset), _case_feeds(case))[0]
    except Exception:  # noqa: BLE001 -- not a case at this opset
        pytest.skip("onnxruntime refuses the case at opset 17")
    model = stacked_map(case, None, opset, result)
    onnx.checker.check_model(model, full_check=True)
    stacked = np.stack([with_element(case, case.inputs[0].value.shape).inputs[0].value] * 4)
    feeds = {
        "x": (stacked * np.arange(1, 5).reshape(-1, *[1] * (stacked.ndim - 1))).astype(
            stacked.dtype
        )
    }
    expected = _run(model, feeds)
    assert expected[0].shape == (4, *result.shape)
    lowered_model = _lower_copied(name, model, option)  # the full checker, among others
    if lowered_model is None:
        return
    assert_same(_run(lowered_model, feeds), expected)


def test_a_map_no_form_of_the_runtime_keeps_is_refused_before_anything_changes():
    """The pass alone, on a Resize whose size is not computed in a map over a
    split: for a runtime without sequence ops, refused, naming the map and
    the op, the model as it was; for onnxruntime, a Loop that reads the split
    through its sequence (SequenceLength, SequenceAt: no Shape or Gather of
    the tensor whose slices ONNX would size), which passes the full checker."""
    case, opset, _ = COPIED["Resize by sizes, not_larger"]
    result = ort_run(_case_model(case, opset), _case_feeds(case))[0]
    proto = stacked_map(case, None, opset, result)
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model).SerializeToString(deterministic=True)
    with pytest.raises(lowering.LoweringError) as refused:
        lowering.LowerSequenceMapPass(runtime="openvino")(model)
    assert str(refused.value) == (
        f"node '<unnamed>' (SequenceMap) in main graph 'g': --runtime openvino: "
        f"{REFUSED['openvino']}: not unrolled: {_claim('Resize')}; "
        "not vectorized: Resize: it has no batching rule"
    )
    assert ir.serde.serialize_model(model).SerializeToString(deterministic=True) == before
    assert lowering.LowerSequenceMapPass()(model).modified
    out = ir.serde.serialize_model(model)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node if n.op_type not in ("Constant",)] == [
        "SplitToSequence", "SequenceLength", "SequenceEmpty", "Loop", "ConcatFromSequence",
    ]  # fmt: skip
    (loop,) = [n for n in out.graph.node if n.op_type == "Loop"]
    assert [n.op_type for n in loop.attribute[0].g.node][:1] == ["SequenceAt"]
    feeds = {"x": np.stack([with_element(case, (1, 1, 4, 6)).inputs[0].value] * 4)}
    assert_same(_run(out, feeds), _run(proto, feeds))


@pytest.mark.parametrize("rank", [0, 2])
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino", "tract", "tinygrad", "generic"])
def test_copied_nonzeros_are_pinned_not_refused(runtime, rank):
    """NonZero is seen wrong for a scalar (ONNX: [0, ?], onnxruntime: [1, count]),
    so each copy of one reads its scalar as a [1] (a Reshape), which ONNX sizes
    right, and is pinned, to [1, its own count]; of a known rank above 0, ONNX's
    [rank, ?] is right and nothing is pinned. Every runtime gets the
    unrolled map, none a sequence op or a refusal."""
    dims = "[?,?]" if rank else ""
    shapes = "[2,3] a, float[3,2] b" if rank else " a, float b"
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float{shapes}) => (seq(int64[{max(rank, 1)},?]) y) {{
      s = SequenceConstruct(a, b)
      y = SequenceMap <body = body (float{dims} e) => (int64[{max(rank, 1)},?] d) {{
            d = NonZero(e)
          }}> (s)
    }}""")
    result = lowered(model, runtime=runtime)
    assert op_types(result).count("Reshape") == (0 if rank else 4)
    assert not {"SequenceInsert", "SequenceAt"} & set(op_types(result))
    if rank:
        feeds = {
            "a": np.array([[0, 1, 2], [3, 0, 0]], np.float32),
            "b": np.eye(3, 2, dtype=np.float32),
        }
    else:
        feeds = {"a": np.array(0, np.float32), "b": np.array(2, np.float32)}
    assert_same(_run(result, feeds), _run(model, feeds))


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino", "tinygrad"])
def test_a_copy_onnx_knows_more_of_than_the_proof_is_not_pinned_by_its_own_dims(runtime):
    """A MaxPool (ceil_mode, an end pad) of a MeanVarianceNormalization, whose shape ONNX infers and
    the proof does not take (MeanVarianceNormalization is not a trusted op): the pool's length is
    not computed, and a Reshape keeping that dim (0) would keep ONNX's wrong
    [1,1,3] of the [1,1,4] copy beside the [1,1,2] of the [1,1,3] one. The
    map is not unrolled but kept in a Loop read through its sequences, as
    the original runs; refused, saying why, without sequence ops."""
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,4] a, float[1,1,3] b) => (float[2,1,1,?] y) {
      s = SequenceConstruct(a, b)
      m = SequenceMap <body = body (float[1,1,?] e) => (float[?,?,?] p) {
            c = MeanVarianceNormalization <axes = [2]> (e)
            p = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (c)
          }> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }""")
    if runtime != "onnxruntime":
        with pytest.raises(lowering.LoweringError) as refused:
            lowering.lower(model, runtime=runtime)
        assert str(refused.value).startswith(
            f"node '<unnamed>' (SequenceMap) in main graph 'g': --runtime {runtime}: "
            f"{REFUSED[runtime]}: "
        )
        assert f"not unrolled: {_claim('MaxPool')}" in str(refused.value)
        return
    result = lowered(model, runtime=runtime)  # the full checker, among others
    _, report = lowering.lower_with_report(model)
    assert [n.strategy for n in report.nodes] == ["loop"]
    assert report.nodes[0].reason.startswith(
        f"its elements read and its results built through sequences: {_claim('MaxPool')}"
    )
    feeds = {
        "a": np.arange(4, dtype=np.float32).reshape(1, 1, 4),
        "b": np.ones((1, 1, 3), np.float32),
    }
    assert_same(_run(result, feeds), _run(model, feeds))


# A MaxPool (ceil_mode, an end pad) of a value the proof does not size and
# ONNX's inference of the model does: through a call of a local function
# (ONNX's per-node inference gives no shape). Its length is not computed, so
# it is neither pinned nor, for ONNX claims one, left: the map stays a Loop
# read through its sequences. Through an Identity or an If (the proof joins
# its branches), the proof sizes it: it is pinned. Each case with what it becomes.
THROUGH = {
    "identity": ("t = Identity(e)", "unroll"),
    "if": (
        (
            "t = If (c) <then_branch = tb () => (float[1,1,?] t1) { t1 = Identity(e) },"
            " else_branch = eb () => (float[1,1,?] t2) { t2 = Identity(e) }>"
        ),
        "unroll",
    ),
    "function": ("t = loc.F(e)", "loop"),
    # onnxruntime's constant folding sizes t; ONNX's inference alone does not.
    "cast shape": (
        "d = Shape(e) c1 = Cast <to = 1> (d) d2 = Cast <to = 7> (c1) t = Reshape(e, d2)",
        "loop",
    ),
    # A pool of a pinned pool: its claim follows the pin.
    "pooled twice": (
        (
            "p1 = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1>"
            " (e) w = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (e)"
            " t = Add(p1, w)"
        ),
        "unroll",
    ),
}


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
@pytest.mark.parametrize("through", list(THROUGH))
def test_a_copy_of_what_onnx_alone_sizes_is_kept_in_a_loop_not_left(through, runtime):
    body, strategy = THROUGH[through]
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17, "loc" : 1]>
    g (float[1,1,4] a, float[1,1,3] b, bool c) => (float[2,1,1,?] y) {{
      s = SequenceConstruct(a, b)
      m = SequenceMap <body = body (float[1,1,?] e) => (float[1,1,?] z) {{
            {body}
            z = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (t)
          }}> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}
    <domain: "loc", opset_import: ["" : 17]>
    F (x) => (o) {{ o = Identity(x) }}""")
    if strategy == "loop" and runtime == "openvino":
        with pytest.raises(lowering.LoweringError) as refused:
            lowering.lower(model, runtime=runtime)
        assert str(refused.value).startswith(
            "node '<unnamed>' (SequenceMap) in main graph 'g': --runtime openvino: "
            f"{REFUSED['openvino']}: "
        )
        assert str(refused.value).endswith(f"; not unrolled: {_claim('MaxPool')}")
        return
    result = lowered(model, runtime=runtime)  # the full checker, among others
    _, report = lowering.lower_with_report(model, runtime=runtime)
    assert [n.strategy for n in report.nodes] == [strategy]
    if strategy == "loop":
        assert report.nodes[0].reason.startswith(
            f"its elements read and its results built through sequences: {_claim('MaxPool')}"
        )
    else:  # pinned
        assert "Reshape" in op_types(result) and "SequenceInsert" not in op_types(result)
    feeds = {
        "a": np.arange(4, dtype=np.float32).reshape(1, 1, 4),
        "b": np.arange(3, dtype=np.float32).reshape(1, 1, 3),
        "c": np.array(True),
    }
    assert_same(_run(result, feeds), _run(model, feeds))
    session = open_session(result.SerializeToString(), optimize=True)  # its folding too
    assert_same(session.run(None, feeds), _run(model, feeds))


# -- what has no pin, and where it stays -------------------------------------------


def test_the_cases_without_a_pin_are_those_named():
    """Of the ops ONNX sizes wrong (tests/cases/node_cases.py), the cases whose
    true shape is not computed are NO_PIN: the maps the tests below keep in
    a Loop hold one of them."""
    unpinned = set()
    for name, (case, opset, _) in {**UNTRUSTED, **DOUBTED}.items():
        model = ir.serde.deserialize_model(_case_model(case, opset))
        proof = prove_model(model, fill=True)
        (node,) = [n for n in model.graph if n.op_type == case.op]
        if node_pins(node, [proof.operand(v) for v in node.inputs], opset) is None:
            unpinned.add(name)
    assert unpinned == NO_PIN


def test_the_cases_allocated_by_a_wrong_size_are_those_named():
    """Of the ops ONNX sizes wrong, the cases pinned but not respelled, whose
    own output onnxruntime allocates by ONNX's static claim, are
    MISALLOCATED: the maps whose bodies hold one are kept in a Loop."""
    found = set()
    for name, (case, opset, _) in {**UNTRUSTED, **DOUBTED}.items():
        model = ir.serde.deserialize_model(_case_model(case, opset))
        proof = prove_model(model, fill=True)
        (node,) = [n for n in model.graph if n.op_type == case.op]
        operands = [proof.operand(v) for v in node.inputs]
        if misallocated_output(node, operands, opset) is not None:
            found.add(name)
    assert found == MISALLOCATED


#: A Range onnxruntime counts 2 elements of (2147483647, -1) and ONNX none: its
#: span overflows int32 (NO_PIN). Range by float bounds, for contrast, is
#: computed: 11 elements, where ONNX says 10. Each: its dtype and its bounds.
RANGES = {
    "int32 span overflows": (
        "int32",
        ("int32 {2147483647}", "int32 {-2147483648}", "int32 {-2147483648}"),
    ),
    "float bounds": ("float", ("float {-0.17}", "float {-10.17}", "float {-1.0}")),
}


def _range(name: str, out: str) -> str:
    """Nodes making ``out``, the Range of ``name``."""
    bounds = RANGES[name][1]
    made = [f"{out}{k} = Constant <value = {b}> ()" for k, b in enumerate(bounds)]
    return " ".join([*made, f"{out} = Range({out}0, {out}1, {out}2)"])


@pytest.mark.parametrize("option", list(OPTIONS))
def test_a_split_tensor_without_a_pin_is_read_through_its_sequence(option):
    """A map over the split of a Range whose length has no pin: every form
    that reads the Range itself (its Shape for a trip count, its slices)
    declines, and the Loop reads SequenceLength and SequenceAt of the split
    the original reads (the loop form once read the Range, and onnxruntime
    refused its Loop body: "Inferred=2 Declared=0")."""
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g () => (int32[?] y) {{
      {_range("int32 span overflows", "r")}
      s = SplitToSequence <axis = 0, keepdims = 0> (r)
      m = SequenceMap <body = body (int32 e) => (int32 o) {{ o = Neg(e) }}> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}""")
    result = lowered(model, **OPTIONS[option])
    _, report = lowering.lower_with_report(model, **OPTIONS[option])
    assert [n.strategy for n in report.nodes] == ["loop"]
    forced = "forced by --strategy loop; " if option == "loop" else ""
    assert report.nodes[0].reason.startswith(
        f"{forced}its elements read and its results built through sequences: its sequence "
        "holds output 0 of Range, which ONNX may size wrong, and its true shape is not "
        "computed here"
    )
    assert {"SequenceLength", "SequenceAt"} <= set(op_types(result))
    assert "Shape" not in op_types(result) and "Gather" not in op_types(result)
    expected = _run(model, {})
    assert expected[0].tolist() == [-2147483647, 1]
    assert_same(_run(result, {}), expected)
    assert_same(open_session(result.SerializeToString(), optimize=True).run(None, {}), expected)


@pytest.mark.parametrize("name", list(RANGES))
def test_elements_read_back_are_pinned_or_left_in_their_sequence(name):
    """Two Ranges in a SequenceConstruct read by ConcatFromSequence, beside a
    map that is lowered: the sequence elimination reads the construct as its
    tensors where their length is pinned (float bounds: [11]), and leaves
    the original's sequence where no pin is computed (an int32 span that
    overflows)."""
    dtype, _ = RANGES[name]
    model = parse(f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => ({dtype}[?,?] y, float[?,?] z) {{
      {_range(name, "ra")}
      {_range(name, "rb")}
      s = SequenceConstruct(ra, rb)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (s)
      t = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[3] e) => (float[3] o) {{ o = Neg(e) }}> (t)
      z = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }}""")
    result = lowered(model)
    kept = name == "int32 span overflows"
    assert op_types(result).count("SequenceConstruct") == (1 if kept else 0)
    assert op_types(result).count("ConcatFromSequence") == (1 if kept else 0)
    assert op_types(result).count("Reshape") == (0 if kept else 2)  # the pins
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    expected = _run(model, feeds)
    assert expected[0].shape == ((2, 2) if kept else (2, 11))
    assert_same(_run(result, feeds), expected)


def test_a_scans_slices_are_declared_so_its_copies_are_pinned():
    """A map over a split of a static tensor whose body resizes (no batching
    rule) and pools (ceil_mode) each slice: a Scan, whose scan input declares
    the slice's proven shape, [2,5,10], so that the Resize's [1,2,2,18] and
    the pool's [1,2,2,10] are computed and pinned there (onnxruntime allocates
    the Scan's results by the body's inference; the fuzzer's seed 91 met it
    with the slice declared [?,?,?], where the copies were hidden)."""
    model = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,2,5,10] x) => (float[?,?,?] y) {
      s = SplitToSequence <axis = 0, keepdims = 1> (x)
      m = SequenceMap <body = body (float[?,?,?,?] e) => (float[?,?] r) {
            sc = Constant <value = float[4] {1, 1, 0.4, 1.8}> ()
            z = Resize <mode = "nearest"> (e, , sc)
            p = MaxPool <ceil_mode = 1, kernel_shape = [2, 2], pads = [0, 1, 1, 1],
                         strides = [2, 2]> (z)
            t = Constant <value = int64[2] {0, -1}> ()
            r = Reshape (p, t)
          }> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }""")
    result = lowered(model, max_unroll=0)
    (scan,) = [n for n in result.graph.node if n.op_type == "Scan"]
    body = scan.attribute[0].g
    dims = [d.dim_value for d in body.input[-1].type.tensor_type.shape.dim]
    assert dims == [2, 5, 10]
    assert [n.op_type for n in body.node if n.op_type not in ("Constant",)] == [
        "Unsqueeze", "Resize", "Reshape", "MaxPool", "Reshape", "Reshape",
    ]  # fmt: skip
    assert not [op for op in op_types(result) if op.startswith("Sequence")]
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 2, 5, 10)).astype(np.float32)}
    expected = _run(model, feeds)
    assert_same(_run(result, feeds), expected)
    assert_same(open_session(result.SerializeToString(), optimize=True).run(None, feeds), expected)


# -- copies onnxruntime would allocate by ONNX's wrong size --------------------

# A Reshape pin after a copy reaches its readers, not the copy's own output:
# onnxruntime plans that output's buffer by ONNX's inferred size, and hands a
# copy's true-sized buffer on to a later value of the claimed size ("Shape
# mismatch attempting to re-use buffer. {1,2,2} != {1,2,3}", fuzz seed 5310:
# each pool claims its element's [1,2,3], the next element's Gather reuses
# the pool's freed [1,2,2]). Where the node is respelled, ONNX sizes the copy
# right and the map is unrolled; where it is not, every form that copies it
# declines, and the map stays the Loop read through its sequences. Each case:
# (element shape, pool attributes, whether a respelling sizes it right).
ALLOCATED = {
    "AveragePool ceil_mode, count_include_pad, pads [1, 1]": (
        (1, 2, 3), {"pads": [1, 1], "count_include_pad": 1}, False,
    ),
    "AveragePool ceil_mode, count_include_pad, end pad": (
        (1, 1, 4), {"pads": [0, 1], "count_include_pad": 1}, False,
    ),
    "AveragePool ceil_mode, count_include_pad, 2-D": (
        (1, 1, 3, 3), {"pads": [1, 1, 1, 1], "count_include_pad": 1, "kernel_shape": [2, 2],
                       "strides": [2, 2]}, False,
    ),
    "AveragePool ceil_mode, end pad (its pads not counted)": (
        (1, 2, 3), {"pads": [1, 1], "count_include_pad": 0}, True,
    ),
}  # fmt: skip
WRAPPERS = ["main", "scan"]


def _pool_attributes(attributes: dict) -> str:
    given = {"kernel_shape": [2], "strides": [2], "ceil_mode": 1, **attributes}
    return ", ".join(f"{name} = {value}" for name, value in given.items())


def _pooled_shape(element: tuple[int, ...], attributes: dict) -> tuple[int, ...]:
    """onnxruntime's ceil-mode pool size: a last window that starts in the end
    pad is dropped (ONNX's inference keeps it)."""
    kernels = attributes.get("kernel_shape", [2])
    strides = attributes.get("strides", [2])
    pads = attributes["pads"]
    spatial = element[2:]
    out = list(element[:2])
    for k, n in enumerate(spatial):
        head, tail = pads[k], pads[k + len(spatial)]
        size = -(-(n + head + tail - kernels[k]) // strides[k]) + 1
        if (size - 1) * strides[k] >= n + head:
            size -= 1
        out.append(size)
    return tuple(out)


def _average_pool(x: np.ndarray, attributes: dict) -> np.ndarray:
    """The numpy oracle: each window's sum over the padded extent, divided by
    its length within that extent (count_include_pad) or among the elements."""
    kernels = attributes.get("kernel_shape", [2])
    strides = attributes.get("strides", [2])
    pads = attributes["pads"]
    rank = x.ndim - 2
    shape = _pooled_shape(x.shape, attributes)
    out = np.zeros(shape, np.float64)
    for index in itertools.product(*(range(d) for d in shape[2:])):
        window, counted = [], 1
        for k, i in enumerate(index):
            start = i * strides[k] - pads[k]
            padded_end = min(start + kernels[k], x.shape[2 + k] + pads[k + rank])
            lo, hi = max(start, 0), min(padded_end, x.shape[2 + k])
            window.append(slice(lo, hi))
            counted *= (padded_end - start) if attributes["count_include_pad"] else hi - lo
        out[(..., *index)] = x[(..., *window)].sum(axis=tuple(range(2, x.ndim))) / counted
    return out.astype(np.float32)


def _pool_map(wrapper: str, element: tuple[int, ...], attributes: dict) -> onnx.ModelProto:
    """Four elements of ``element``'s shape split from x, each pooled, stacked."""
    pooled = _pooled_shape(element, attributes)
    dims = ",".join(map(str, element))
    inner = f"""
        parts = SplitToSequence <axis = 0, keepdims = 0> (x)
        m = SequenceMap (parts) <body = body (float[{dims}] e) => (float[{",".join(["?"] * len(pooled))}] p) {{
            p = AveragePool <{_pool_attributes(attributes)}> (e)
        }}>
        o = ConcatFromSequence <axis = 0, new_axis = 1> (m)"""
    out = ",".join(["4"] + ["?"] * len(pooled))  # (ONNX's inference claims other dims)
    if wrapper == "scan":
        graph = f"""ys = Scan <num_scan_inputs = 1, body = sb (float[2] r) => (float[{out}] o) {{
            {inner}
          }}> (xs)"""
        result = f"float[K,{out}] ys"
    else:
        graph, result = inner, f"float[{out}] o"
    return parse(f"""<ir_version: 9, opset_import: ["" : 20]>
    g (float[4,{dims}] x, float[K,2] xs) => ({result}) {{
      {graph}
    }}""")


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("name", list(ALLOCATED))
def test_copies_onnxruntime_would_allocate_by_a_wrong_size_are_not_made(name, wrapper):
    """Lowered (each copy pinned and respelled, or the map kept where the
    original kept it), the model runs in onnxruntime like the original and
    the numpy oracle, and the report says why a map was not unrolled."""
    element, attributes, respelled = ALLOCATED[name]
    model = _pool_map(wrapper, element, attributes)
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(0).standard_normal((4, *element)).astype(np.float32)
    feeds = {"x": x, "xs": np.zeros((2, 2), np.float32)}
    expected = _run(model, feeds)
    oracle = np.stack([_average_pool(part, attributes) for part in x])
    np.testing.assert_allclose(expected[0][0] if wrapper == "scan" else expected[0], oracle,
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    result = lowered(model)
    assert_same(_run(result, feeds), expected)
    _, report = lowering.lower_with_report(model)
    (node,) = report.nodes
    if respelled:
        assert not [op for op in op_types(result) if op.startswith("Sequence")], node
    else:
        assert node.strategy == "loop", node
        claim = "ONNX sizes output 0 of AveragePool wrong, and onnxruntime allocates each copy"
        assert claim in node.reason, node
