"""Shapes from ONNX's wrong inference, declared or inferred, never read as facts.

Every op whose ONNX-inferred shape differs from onnxruntime's
(tests/cases/node_cases.py: UNTRUSTED, DOUBTED) is put where the lowering
reads shapes, with and without the ``value_info`` that
``onnx.shape_inference.infer_shapes`` writes (as exporters and simplifiers
leave it), in every form:

- read by every consumer of a shape: an insert at the claimed length (an
  append?), an insert at ``Shape(R)[axis]``, ``SequenceAt(split(R), -1)``,
  a map over ``split(R)`` (unrolled for the claimed count?);
- copied into a map's body that only a Scan or a Loop can take (the Scan's
  slices are static, and onnxruntime sizes its outputs from the body's
  inferred shapes), alone and chained after a Resize;
- exposed by the sequence elimination: ``ConcatFromSequence`` of a
  ``SequenceConstruct`` of two of them, beside a map that is lowered.

Each output must pass the full checker and compute what onnxruntime
computes on the original. A runtime without sequence ops may refuse, in one
line, where the true shape is not computed; nothing else may.
"""

from __future__ import annotations

import random

import numpy as np
import onnx
import pytest
from onnx import helper

import lowering
from lowering.runtimes.sessions import open_session
from tests.cases.node_cases import (
    DOUBTED,
    MISALLOCATED,
    NO_PIN,
    UNTRUSTED,
    Case,
    case_nodes,
    exposed_model,
    ort_run,
)
from tests.cases.node_cases import feeds_of as _case_feeds
from tests.cases.node_cases import model_of as _case_model
from tests.helpers import assert_same, lowered, run

CASES = {**UNTRUSTED, **DOUBTED}
FORMS = {
    "auto": {},
    "no_unroll": {"max_unroll": 0},
    "loop": {"strategy": "loop"},
    "openvino": {"runtime": "openvino"},
    "tract": {"runtime": "tract"},
    "tinygrad": {"runtime": "tinygrad"},
    "opset11": {"target_opset": 11},
}
#: Forms the sweeps below do not draw (``check`` takes any of these too).
OTHER_FORMS = {"optimize": {"optimize": True}}
#: Runtimes without sequence ops: they may refuse where no pin is computed.
MAY_REFUSE = {"openvino", "tract", "tinygrad"}
READERS = ("insert_at_claimed", "insert_at_shape", "at_last", "map")


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(value))


def _claimed(case: Case, opset: int, axis: int) -> int | None:
    """ONNX's claim of the case's output size along ``axis``."""
    nodes, inputs, initializers, _ = case_nodes(case, "R")
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_value_info("R", onnx.TypeProto())])
    graph.initializer.extend(initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = inferred.graph.output[0].type.tensor_type.shape.dim
    return dims[axis].dim_value if len(dims) > axis and dims[axis].HasField("dim_value") else None


def reader_model(name: str, reader: str, declared: bool) -> tuple[onnx.ModelProto, dict]:
    """The case's output R, split along its last axis and read by ``reader``."""
    case, opset, shape = CASES[name]
    if reader == "map":
        opset = max(opset, 17)  # SequenceMap
    axis = len(shape) - 1
    nodes, inputs, initializers, feeds = case_nodes(case, "R")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    element = [d for k, d in enumerate(shape) if k != axis]
    onnx_dtype = helper.np_dtype_to_tensor_dtype(dtype)
    nodes.append(helper.make_node("SplitToSequence", ["R"], ["s"], axis=axis, keepdims=0))
    concat = {"axis": axis, "new_axis": 1}
    if reader.startswith("insert"):
        inputs.append(helper.make_tensor_value_info("t", onnx_dtype, element))
        feeds["t"] = np.full(element, 7, dtype)
        if reader == "insert_at_claimed":
            claimed = _claimed(case, opset, axis)
            nodes.append(_const("p", np.array(shape[axis] if claimed is None else claimed)))
        else:
            nodes += [
                helper.make_node("Shape", ["R"], ["rs"]),
                _const("ax", np.array(axis)),
                helper.make_node("Gather", ["rs", "ax"], ["p"]),
            ]
        nodes.append(helper.make_node("SequenceInsert", ["s", "t", "p"], ["s2"]))
        nodes.append(helper.make_node("ConcatFromSequence", ["s2"], ["Y"], **concat))
    elif reader == "at_last":
        nodes += [
            _const("last", np.array(-1)),
            helper.make_node("SequenceAt", ["s", "last"], ["Y"]),
        ]
    elif reader == "length":
        nodes.append(helper.make_node("SequenceLength", ["s"], ["Y"]))
        onnx_dtype = onnx.TensorProto.INT64
    elif reader == "concat":
        nodes.append(helper.make_node("ConcatFromSequence", ["s"], ["Y"], **concat))
    else:  # a map with no batching rule: unrolled for the count it believes, or a loop
        body = helper.make_graph(
            [
                _const("flat", np.array([-1])),
                helper.make_node("Reshape", ["e", "flat"], ["f"]),  # (Compress takes rank >= 1)
                _const("keep", np.array([True])),
                helper.make_node("Compress", ["f", "keep"], ["o"]),
            ],
            "body",
            [helper.make_tensor_value_info("e", onnx_dtype, None)],
            [helper.make_tensor_value_info("o", onnx_dtype, [1])],
        )
        nodes.append(helper.make_node("SequenceMap", ["s"], ["m"], body=body))
        nodes.append(helper.make_node("ConcatFromSequence", ["m"], ["Y"], axis=0, new_axis=1))
    rank = {"at_last": len(shape) - 1, "map": 2, "length": 0}.get(reader, len(shape))
    output = helper.make_tensor_value_info("Y", onnx_dtype, [None] * rank)
    graph = helper.make_graph(nodes, "g", inputs, [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    return model, feeds


def check(model: onnx.ModelProto, feeds: dict, form: str, optimized: bool = True) -> None:
    """The lowered model passes the full checker and computes what onnxruntime
    computes on the original; a runtime without sequences may refuse. (Where
    ONNX's wrong shape makes the original fail the full checker itself, a
    PRelu whose slope raises the rank, the output need not pass it either.)"""
    original = _try(open_session, model.SerializeToString(), optimize=False, log_severity=4)
    expected = None if original is None else _try(original.run, None, feeds)
    try:
        onnx.checker.check_model(model, full_check=True)
        lower = lowered
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        lower = lowering.lower
    try:
        result = lower(model, **{**FORMS, **OTHER_FORMS}[form])
    except lowering.LoweringError as error:
        refusable = form in MAY_REFUSE or (form == "opset11" and "opset 11" in str(error))
        # (an insert out of range for a length proven static: a model that always fails)
        assert refusable or (original is not None and expected is None), str(error)
        assert "\n" not in str(error)
        return
    if original is None:
        return  # onnxruntime refuses the original (ONNX's wrong rank): no oracle
    if expected is None:  # the original fails at run time (an insert out of range, say)
        with pytest.raises(Exception):  # noqa: B017 -- onnxruntime's own error
            ort_run(result, feeds)
        return
    assert_same(ort_run(result, feeds), expected)
    # onnxruntime's optimizer folds Shape from ONNX's inference: where it goes
    # wrong on the original, it may on the output too; nowhere else.
    original_optimized = _try(run, model, feeds) if optimized else None
    if original_optimized is not None and all(
        np.array_equal(a, b) for a, b in zip(original_optimized, expected)
    ):
        assert_same(run(result, feeds), expected, "optimized")


@pytest.mark.sweep
@pytest.mark.parametrize("form", ["auto", "loop"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_model_output_onnx_sizes_wrong_stays_the_ops_own(name, form):
    """The case's output R, declared as ONNX infers it, is a model output and
    also read (split, its last element taken): onnxruntime sizes a model
    output by its kernel, so R stays the node's own output, with only the
    dims ONNX agrees on; its readers read the pin."""
    model, feeds = reader_model(name, "at_last", declared=False)
    case = CASES[name][0]
    model.graph.output.append(helper.make_value_info("R", onnx.TypeProto()))
    model = onnx.shape_inference.infer_shapes(model)
    check(model, feeds, form)
    try:
        result = lowering.lower(model, **FORMS[form])
    except lowering.LoweringError:
        return  # (check took the refusal)
    producer = {o: n for n in result.graph.node for o in n.output}[result.graph.output[-1].name]
    assert producer.op_type == case.op


@pytest.mark.parametrize("reader", ["at_last", "length", "concat"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_split_read_as_tensors_reads_its_source_through_the_pin(name, reader):
    """R, declared as ONNX infers it, split and read (its last element, its
    length, its concat) with no map: the reads become a Slice, a Shape, R
    itself. onnxruntime plans what they make by ONNX's size of what they
    read, so they read R's pin, never R (or the reads stay sequence reads)."""
    model, feeds = reader_model(name, reader, declared=True)
    check(model, feeds, "auto")
    result = lowering.lower(model)
    case = CASES[name][0]
    for node in result.graph.node:
        if node.op_type != case.op:
            continue
        readers = [n for n in result.graph.node if node.output[0] in n.input]
        assert {n.op_type for n in readers} <= {"Reshape", "SplitToSequence"}, [
            n.op_type for n in readers
        ]


def _loop_body(
    nodes: list[onnx.NodeProto], carried: onnx.ValueInfoProto, result: onnx.ValueInfoProto
) -> onnx.GraphProto:
    """A Loop body of ``nodes`` carrying one value (``carried`` in, ``result``
    out), its condition passed on."""
    return helper.make_graph(
        [*nodes, helper.make_node("Identity", ["cond"], ["cond_next"])],
        "body",
        [
            helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
            carried,
        ],
        [helper.make_tensor_value_info("cond_next", onnx.TensorProto.BOOL, []), result],
    )


def accumulated_model(name: str, declared: bool, where: str) -> tuple[onnx.ModelProto, dict]:
    """The case's output R (computed in the body, or before the loop and
    copied in the body) appended to a list in a Loop of 3 trips, which is
    concatenated after it (TorchScript's ``list.append`` then ``torch.stack``)."""
    case, opset, shape = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "R")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    onnx_dtype = helper.np_dtype_to_tensor_dtype(dtype)
    inside = nodes if where == "body" else [helper.make_node("Identity", ["R"], ["R_copy"])]
    element = "R" if where == "body" else "R_copy"
    body = _loop_body(
        [*inside, helper.make_node("SequenceInsert", ["acc", element], ["acc_next"])],
        helper.make_tensor_sequence_value_info("acc", onnx_dtype, None),
        helper.make_tensor_sequence_value_info("acc_next", onnx_dtype, None),
    )
    outer = [
        *(nodes if where == "before" else []),
        _const("trips", np.array(3)),
        _const("go", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=onnx_dtype),
        helper.make_node("Loop", ["trips", "go", "empty"], ["list"], body=body),
        helper.make_node("ConcatFromSequence", ["list"], ["Y"], axis=0, new_axis=1),
    ]
    output = helper.make_tensor_value_info("Y", onnx_dtype, [None] * (len(shape) + 1))
    graph = helper.make_graph(outer, "g", inputs, [output], initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 13))], ir_version=8
    )
    return (onnx.shape_inference.infer_shapes(model) if declared else model), feeds


@pytest.mark.sweep
@pytest.mark.parametrize("form", ["auto", "openvino"])
@pytest.mark.parametrize("where", ["body", "before"])
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "inferred"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_list_of_what_onnx_sizes_wrong_is_pinned_when_it_is_stacked(name, declared, where, form):
    """An exporter's accumulator loop over the case's output: stacked as a scan
    output (or grown by a Concat), its claim reaches ONNX's inference and the
    buffers onnxruntime plans by it, so what the element is computed from is
    pinned, or the list stays a list with the reason (and a runtime without
    sequences refuses it)."""
    model, feeds = accumulated_model(name, declared, where)
    check(model, feeds, form)


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "inferred"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_loop_carrying_what_onnx_sizes_wrong_keeps_its_counter_and_condition(name, declared):
    """A Loop carries the case's output, a doubted value: its body's carried
    input is doubted with it, but not the iteration number and condition,
    which the spec makes an int64 and a bool scalar (onnxruntime refuses a
    Loop body that leaves them unshaped: "Loop subgraph input 0 has unknown
    shape"). A sequence read after it makes the lowering run."""
    case, opset, _ = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "R")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    onnx_dtype = helper.np_dtype_to_tensor_dtype(dtype)
    body = _loop_body(
        [helper.make_node("Identity", ["carried"], ["carried_next"])],
        helper.make_tensor_value_info("carried", onnx_dtype, None),
        helper.make_tensor_value_info("carried_next", onnx_dtype, None),
    )
    nodes += [
        _const("trips", np.array(2)),
        _const("go", np.array(True)),
        helper.make_node("Loop", ["trips", "go", "R"], ["L"], body=body),
        helper.make_node("SequenceConstruct", ["L"], ["s"]),
        _const("first", np.array(0)),
        helper.make_node("SequenceAt", ["s", "first"], ["Y"]),
    ]
    output = helper.make_tensor_value_info("Y", onnx_dtype, None)
    graph = helper.make_graph(nodes, "g", inputs, [output], initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 13))], ir_version=8
    )
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    check(model, feeds, "auto")
    result = lowering.lower(model)
    [loop] = [n for n in result.graph.node if n.op_type == "Loop"]
    counter, condition = loop.attribute[0].g.input[:2]
    assert counter.type.tensor_type.HasField("shape"), counter
    assert condition.type.tensor_type.HasField("shape"), condition


def _try(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except Exception:  # noqa: BLE001 -- onnxruntime refuses it
        return None


SWEEP = [
    (name, reader, declared, form)
    for name in CASES
    if len(CASES[name][2]) >= 1
    for reader in READERS
    if not (reader == "map" and name == "Squeeze: empty axes attribute")  # (an opset-11 form)
    for declared in (True, False)
    for form in FORMS
]
#: A fixed sample runs in the fast loop; the whole sweep under ``slow``.
FAST = random.Random(33).sample(SWEEP, 60)


def _sweep(name, reader, declared, form):
    model, feeds = reader_model(name, reader, declared)
    check(model, feeds, form)


@pytest.mark.parametrize(("name", "reader", "declared", "form"), FAST)
def test_shape_readers_read_no_wrong_shape(name, reader, declared, form):
    _sweep(name, reader, declared, form)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "reader", "declared", "form"), SWEEP)
def test_shape_readers_read_no_wrong_shape_everywhere(name, reader, declared, form):
    _sweep(name, reader, declared, form)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "inferred"])
def test_a_resize_by_scales_is_read_at_its_true_length(reader, declared):
    """The issue's example: Resize(X[1,5], scales [1, 1.4]) is [1,7] in
    onnxruntime, [1,6] to ONNX; every reader, with ONNX's value_info or not."""
    name = "Resize by scales"
    for form in ("auto", "no_unroll", "loop", "openvino"):
        model, feeds = reader_model(name, reader, declared)
        check(model, feeds, form)


# -- copied into a body only a Scan or a Loop can take ---------------------------

#: After the case's op, a Resize (no batching rule, so no vectorized form):
#: by ones, which keeps the shape, then a Flatten that reads it; or by 1.4
#: along the last axis, a second shape ONNX infers wrong, fed by the first.
THEN = {"flatten": (1.0, True), "chain": (1.4, False)}
BODY_FORMS = [form for form in FORMS if form != "opset11"]


def body_model(name: str, then: str) -> tuple[onnx.ModelProto, dict]:
    """The case's op mapped over three elements of its first run-time input,
    split from one stack; its other run-time inputs are read from outside."""
    case, opset, shape = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "r")
    mapped = inputs.pop(0)
    element = feeds.pop(mapped.name)
    body_input = helper.make_tensor_value_info(
        "e", mapped.type.tensor_type.elem_type, element.shape
    )
    nodes[0].input[list(nodes[0].input).index(mapped.name)] = "e"
    scale, flatten = THEN[then]
    scales = np.ones(len(shape), np.float32)
    scales[-1] = scale
    nodes += [
        helper.make_node("Cast", ["r"], ["f"], to=onnx.TensorProto.FLOAT),
        _const("roi", np.array([], np.float32)),
        _const("scales", scales),
        helper.make_node("Resize", ["f", "roi", "scales"], ["z" if flatten else "o"]),
    ]
    if flatten:
        nodes.append(helper.make_node("Flatten", ["z"], ["o"]))
    rank = 2 if flatten else len(shape)
    body = helper.make_graph(
        [*(_const(t.name, onnx.numpy_helper.to_array(t)) for t in initializers), *nodes],
        "body",
        [body_input],
        [helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, [None] * rank)],
    )
    feeds["X"] = np.stack([element, element + 1, element * 2]).astype(element.dtype)
    graph = helper.make_graph(
        [
            helper.make_node("SplitToSequence", ["X"], ["s"], axis=0, keepdims=0),
            helper.make_node("SequenceMap", ["s"], ["m"], body=body),
            helper.make_node("ConcatFromSequence", ["m"], ["Y"], axis=0, new_axis=1),
        ],
        "g",
        [helper.make_tensor_value_info("X", body_input.type.tensor_type.elem_type, None), *inputs],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [None] * (rank + 1))],
    )
    graph.input[0].type.tensor_type.shape.dim.add().dim_param = "N"
    for d in element.shape:
        graph.input[0].type.tensor_type.shape.dim.add().dim_value = d
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 17))], ir_version=8
    )
    return model, feeds


BODY_SWEEP = [
    (name, then, form)
    for name, (case, opset, shape) in CASES.items()
    if any(g is not None and not g.const for g in case.inputs) and len(shape) >= 1
    if name != "Squeeze: empty axes attribute"  # (an opset-11 form: SequenceMap needs 17)
    for then in THEN
    for form in BODY_FORMS
]


@pytest.mark.parametrize(("name", "then", "form"), random.Random(34).sample(BODY_SWEEP, 40))
def test_copies_in_scan_and_loop_bodies_are_sized_right(name, then, form):
    model, feeds = body_model(name, then)
    check(model, feeds, form)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "then", "form"), BODY_SWEEP)
def test_copies_in_scan_and_loop_bodies_are_sized_right_everywhere(name, then, form):
    model, feeds = body_model(name, then)
    check(model, feeds, form)


# -- read in a vectorized body ---------------------------------------------------

#: What reads the case's output ``r`` in the body: its shape, its size, a
#: Reshape copying its first dim and inferring the rest, ones expanded to its
#: shape, and the shape of it concatenated with itself. Vectorized, each is
#: worked out from the element shape the rewrite holds for ``r``, and folded
#: to a constant where it is static: a wrong one is a wrong result.
SHAPE_READERS = {
    "shape": (["o = Shape(r)"], "int64", 1),
    "size": (["o = Size(r)"], "int64", 0),
    "reshape": (
        ["t = Constant <value = int64[2] {0, -1}> ()", "o = Reshape(r, t)"],
        None,
        2,
    ),
    "expand": (
        ["one = Constant <value = float {1}> ()", "rs = Shape(r)", "o = Expand(one, rs)"],
        "float",
        None,
    ),
    "concat": (["c = Concat <axis = -1> (r, r)", "o = Shape(c)"], "int64", 1),
}
#: The ops with no batching rule: a map holding one is not vectorized.
NOT_BATCHED = {"Resize", "NonZero"}
#: Why a map whose body holds a case of NO_PIN is read through its sequences.
NO_PIN_CLAIM = (
    "its elements read and its results built through sequences: "
    "ONNX may size output 0 of Range wrong, and its true shape is not computed here"
)

#: Why a map whose body holds a case of MISALLOCATED is read through its sequences.
MISALLOCATED_CLAIM = (
    "its elements read and its results built through sequences: "
    "ONNX sizes output 0 of Range wrong, and onnxruntime allocates each copy by that size"
)


def vectorized_model(
    name: str, reader: str, declared: bool, outside: bool = False, unbatched: bool = False
) -> tuple[onnx.ModelProto, dict]:
    """The case's op in a map body over three elements of its first run-time
    input (a float element the body ignores where it has none), its other
    run-time inputs read from outside, its output read by ``reader``.

    ``outside``: the op on the first element, in the main graph, its output
    read by the body from there. ``unbatched``: the body returns a Compress
    of its element too (an op with no batching rule: unrolled, not vectorized).
    """
    case, opset, shape = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "r")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    if inputs:
        mapped = inputs.pop(0)
        element = feeds.pop(mapped.name)
        first = "e0" if outside else "e"
        nodes[0].input[list(nodes[0].input).index(mapped.name)] = first
    else:
        element = np.arange(2, dtype=np.float32)
    elem_type = helper.np_dtype_to_tensor_dtype(element.dtype)
    lines, out_type, rank = SHAPE_READERS[reader]
    out_type = out_type or _type_text(dtype)
    rank = len(shape) if rank is None else rank
    made = [*(_const(t.name, onnx.numpy_helper.to_array(t)) for t in initializers), *nodes]
    reads = onnx.parser.parse_graph(
        f"reads ({_type_text(dtype)}[{','.join('?' * len(shape))}] r) => ({out_type} o) "
        "{ " + " ".join(f"{line}\n" for line in lines) + " }"
    )
    extra_nodes, extra_outputs = [], []
    if unbatched:
        extra_nodes = [
            _const("flat", np.array([-1])),
            helper.make_node("Reshape", ["e", "flat"], ["ef"]),
            _const("keep", np.array([True])),
            helper.make_node("Compress", ["ef", "keep"], ["o2"]),
        ]
        extra_outputs = [helper.make_tensor_value_info("o2", elem_type, [1])]
    out_elem = reads.output[0].type.tensor_type.elem_type
    body = helper.make_graph(
        [*([] if outside else made), *reads.node, *extra_nodes],
        "body",
        [helper.make_tensor_value_info("e", elem_type, element.shape)],
        [helper.make_tensor_value_info("o", out_elem, [None] * rank), *extra_outputs],
    )
    feeds["X"] = np.stack([element, element + 1, element * 2]).astype(element.dtype)
    outer = []
    if outside:
        outer = [
            _const("at0", np.array(0)),
            helper.make_node("Gather", ["X", "at0"], ["e0"]),
            *made,
        ]
    graph = helper.make_graph(
        [
            *outer,
            helper.make_node("SplitToSequence", ["X"], ["s"], axis=0, keepdims=0),
            helper.make_node(
                "SequenceMap", ["s"], ["m", *(["m2"] if unbatched else [])], body=body
            ),
            helper.make_node("ConcatFromSequence", ["m"], ["Y"], axis=0, new_axis=1),
        ],
        "g",
        [helper.make_tensor_value_info("X", elem_type, [3, *element.shape]), *inputs],
        [helper.make_tensor_value_info("Y", out_elem, [None] * (rank + 1))],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 17))], ir_version=8
    )
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    return model, feeds


def _type_text(dtype: np.dtype) -> str:
    return {"float32": "float", "float64": "double"}.get(dtype.name, dtype.name)


#: Where the op sits (in the body, or outside it, read by the body from
#: there) and the form the map gets (vectorized, or unrolled: the body
#: returns an op with no batching rule too).
PLACES = {
    "body, vectorized": (False, False),
    "outside, vectorized": (True, False),
    "body, unrolled": (False, True),
    "outside, unrolled": (True, True),
}
BODY_READS_SWEEP = [
    (name, reader, place, declared)
    for name in CASES
    if name != "Squeeze: empty axes attribute"  # (an opset-11 form: SequenceMap needs 17)
    for reader in SHAPE_READERS
    for place in PLACES
    for declared in (True, False)
]


def _body_reads(name: str, reader: str, place: str, declared: bool) -> None:
    outside, unbatched = PLACES[place]
    model, feeds = vectorized_model(name, reader, declared, outside, unbatched)
    # The oracle: the model without ONNX's value_info (with it, onnxruntime may
    # fail on its own, reusing a buffer of a claimed shape for a larger one).
    plain = vectorized_model(name, reader, False, outside, unbatched)[0]
    expected = _try(ort_run, plain, feeds)
    if expected is None:
        return  # onnxruntime refuses the original (a Reshape of a claimed [0]): no oracle
    _, report = lowering.lower_with_report(model)
    strategies = [node.strategy for node in report.nodes]
    if name in NO_PIN and not outside:  # no pin: kept in a Loop, read through sequences
        assert strategies == ["loop"], report.nodes
        assert report.nodes[0].reason.startswith(NO_PIN_CLAIM), report.nodes
    elif name in MISALLOCATED and not outside:  # each copy allocated by ONNX's size
        assert strategies == ["loop"], report.nodes
        assert report.nodes[0].reason.startswith(MISALLOCATED_CLAIM), report.nodes
    elif unbatched:
        assert strategies == ["unroll"], report.nodes
    elif not outside and CASES[name][0].op not in NOT_BATCHED:
        assert strategies == ["vectorize"], report.nodes
    result = lowered(model)
    assert_same(ort_run(result, feeds), expected)
    # onnxruntime's optimizer folds Shape from ONNX's inference: where it goes
    # wrong on the original, it may on the output too; nowhere else.
    optimized = _try(run, plain, feeds)
    if optimized is not None and all(np.array_equal(a, b) for a, b in zip(optimized, expected)):
        assert_same(run(result, feeds), expected, "optimized")


def _lowered_alone(name: str, reader: str, place: str) -> None:
    import onnx_ir as ir

    outside, unbatched = PLACES[place]
    model, feeds = vectorized_model(name, reader, True, outside, unbatched)
    if _try(ort_run, model, feeds) is None:
        return  # onnxruntime refuses ONNX's declaration itself (a Reshape of a claimed [0])
    expected = ort_run(vectorized_model(name, reader, False, outside, unbatched)[0], feeds)
    result = ir.serde.deserialize_model(model)
    ir.passes.PassManager([lowering.LowerSequenceMapPass(), lowering.EliminateSequencesPass()])(
        result
    )
    assert_same(ort_run(ir.serde.serialize_model(result), feeds), expected)


BODY_READS = [(n, r, p, d) for n, r, p, d in BODY_READS_SWEEP]
#: The fast loop: every op vectorized in the body, without value_info (the
#: fuzzer's seed 3805 among them), and a sample of the rest.
BODY_READS_FAST = [
    (n, r, p, d) for n, r, p, d in BODY_READS_SWEEP if p == "body, vectorized" and not d
] + random.Random(36).sample(
    [(n, r, p, d) for n, r, p, d in BODY_READS_SWEEP if p != "body, vectorized" or d],
    60,
)
ALONE = [(n, r, p) for n, r, p, d in BODY_READS_SWEEP if d]


@pytest.mark.parametrize(("name", "reader", "place", "declared"), BODY_READS_FAST)
def test_what_a_lowered_body_reads_of_a_shape_is_proven(name, reader, place, declared):
    """Every op ONNX sizes wrong, in a map body or outside it, read by Shape,
    Size, Reshape, Expand and Concat in the body, with ONNX's value_info or
    not: vectorized (where its op has a batching rule) or unrolled, it
    computes what onnxruntime computes on the original (fuzz seed 3805: the
    Shape of an Einsum broadcasting a size-1 dim, vectorized, was folded to
    ONNX's [3,1,4] for [3,2,4])."""
    _body_reads(name, reader, place, declared)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "reader", "place", "declared"), BODY_READS)
def test_what_a_lowered_body_reads_of_a_shape_is_proven_everywhere(name, reader, place, declared):
    _body_reads(name, reader, place, declared)


@pytest.mark.parametrize(("name", "reader", "place"), random.Random(37).sample(ALONE, 40))
def test_the_map_lowering_alone_reads_no_doubted_declaration(name, reader, place):
    """LowerSequenceMapPass, on the model with ONNX's value_info, without
    DoubtedShapesPass first (which forgets it in the pipeline), which pins
    the copies onnxruntime's own inference would size wrong; then
    EliminateSequencesPass: no declaration the proof doubts is read, by the
    vectorizer or by the fold of unrolled copies."""
    _lowered_alone(name, reader, place)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "reader", "place"), ALONE)
def test_the_map_lowering_alone_reads_no_doubted_declaration_everywhere(name, reader, place):
    _lowered_alone(name, reader, place)


#: Splits of a Resize (ONNX [1,6], onnxruntime [1,7]) whose lengths a map's
#: lowering reads: beside a split of a true [1,6] (one length? the stacks
#: would not line up), and in chunks of 2 (three? four, the last of one).
SPLIT_LENGTHS = {
    "beside another split": """
    g (float[1,5] x, float[1,6] w) => (float[?,?] z) {
      sc = Constant <value = float[2] {1.0, 1.4}> ()
      r = Resize <mode = "nearest"> (x, , sc)
      a = SplitToSequence <axis = 1, keepdims = 0> (w)
      b = SplitToSequence <axis = 1, keepdims = 0> (r)
      m = SequenceMap <body = body (float[1] e, float[1] f) => (float[1] o) { o = Add(e, f) }> (a, b)
      z = ConcatFromSequence <axis = 1, new_axis = 1> (m)
    }""",
    "in chunks": """
    g (float[1,5] x) => (float[?] z) {
      sc = Constant <value = float[2] {1.0, 1.4}> ()
      r = Resize <mode = "nearest"> (x, , sc)
      two = Constant <value = int64 {2}> ()
      s = SplitToSequence <axis = 1> (r, two)
      m = SequenceMap <body = body (float[1,?] e) => (float[?] o) {
          flat = Constant <value = int64[1] {-1}> ()
          f = Reshape(e, flat)
          keep = Constant <value = bool[1] {1}> ()
          n = Size(e)
          nn = Reshape(n, flat)
          k = Expand(keep, nn)
          o = Compress(f, k)
      }> (s)
      z = ConcatFromSequence <axis = 0> (m)
    }""",
}


@pytest.mark.parametrize("options", [{}, {"max_unroll": 0}, {"strategy": "loop"}])
@pytest.mark.parametrize("name", list(SPLIT_LENGTHS))
def test_the_map_lowering_alone_reads_split_lengths_as_proven(name, options):
    """LowerSequenceMapPass alone, on ONNX's value_info: the length of a split
    (unrolled, vectorized beside another) is not read from a doubted dim."""
    import onnx_ir as ir

    text = '<ir_version: 8, opset_import: ["" : 17]>' + SPLIT_LENGTHS[name]
    feeds = {"x": np.arange(5, dtype=np.float32).reshape(1, 5), "w": np.ones((1, 6), np.float32)}
    model = onnx.parser.parse_model(text)
    feeds = {i.name: feeds[i.name] for i in model.graph.input}
    expected = ort_run(model, feeds)
    result = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(model))
    lowering.LowerSequenceMapPass(**options)(result)
    assert_same(ort_run(ir.serde.serialize_model(result), feeds), expected)


# -- exposed by the sequence elimination ------------------------------------------


EXPOSED_SWEEP = [
    (name, form)
    for name, (_, _, shape) in CASES.items()
    if len(shape) >= 1 and name != "Squeeze: empty axes attribute"
    for form in FORMS
]


@pytest.mark.parametrize(("name", "form"), random.Random(35).sample(EXPOSED_SWEEP, 30))
def test_elements_read_back_as_tensors_are_sized_right(name, form):
    model, feeds = exposed_model(name)
    check(model, feeds, form)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "form"), EXPOSED_SWEEP)
def test_elements_read_back_as_tensors_are_sized_right_everywhere(name, form):
    model, feeds = exposed_model(name)
    check(model, feeds, form)


@pytest.mark.parametrize("name", ["MaxPool ceil_mode, end pad", "Resize by scales"])
def test_the_documented_composition_pins_what_it_exposes(name):
    """docs/python-api.md's PassManager, each pass on its own, on an exposed
    pool or Resize: the output passes the full checker and runs as the original."""
    import onnx_ir as ir

    model, feeds = exposed_model(name)
    expected = ort_run(model, feeds)
    result = ir.serde.deserialize_model(model)
    ir.passes.PassManager(
        [
            lowering.DoubtedShapesPass(),
            lowering.SpecializeFunctionsPass(),
            lowering.FoldInsertChainsPass(),
            lowering.LowerSequenceMapPass(runtime="openvino"),
            lowering.EliminateSequencesPass(),
            lowering.NormalizeSequenceInsertPass(),
        ]
    )(result)
    proto = ir.serde.serialize_model(result)
    assert not [n for n in proto.graph.node if "Sequence" in n.op_type]
    onnx.checker.check_model(proto, full_check=True)
    assert_same(ort_run(proto, feeds), expected)


# -- read by what --target-opset expands ---------------------------------------------


def expansion_model(name: str) -> tuple[onnx.ModelProto, dict]:
    """An Einsum contracting the case's output's last axis with a constant
    (no value_info): below 12 it is expanded into ops whose inference meets
    ONNX's claim of that axis beside the constant's true size."""
    case, opset, shape = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "R")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    letters = "abcd"[: len(shape)]
    k = np.arange(shape[-1] * 2, dtype=dtype).reshape(shape[-1], 2)
    nodes += [
        _const("k", k),
        helper.make_node(
            "Einsum", ["R", "k"], ["Y"], equation=f"{letters},{letters[-1]}z->{letters[:-1]}z"
        ),
    ]
    output = helper.make_tensor_value_info(
        "Y", helper.np_dtype_to_tensor_dtype(dtype), [None] * len(shape)
    )
    graph = helper.make_graph(nodes, "g", inputs, [output], initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 12))], ir_version=8
    )
    return model, feeds


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, (case, _, shape) in CASES.items()
        if 1 <= len(shape) <= 4 and shape[-1] > 0 and n != "Squeeze: empty axes attribute"
    ],
)
def test_what_an_expansion_reads_is_sized_right(name):
    model, feeds = expansion_model(name)
    check(model, feeds, "opset11")


def test_a_refused_copy_is_named_by_the_map_the_user_wrote():
    """A copy whose shape is not computed, for a runtime without sequence ops:
    the one line names the map (its name, op and graph) and the copied op,
    not the name the copy was given."""
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,4] a, float[1,1,3] b) => (float[2,1,1,?] y) {
      s = SequenceConstruct(a, b)
      m = SequenceMap <body = body (float[1,1,?] e) => (float[?,?,?] p) {
            c = MeanVarianceNormalization <axes = [2]> (e)
            p = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (c)
          }> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
    }""")
    model.graph.node[1].name = "pool_map"
    with pytest.raises(lowering.LoweringError) as refused:
        lowering.lower(model, runtime="openvino")
    message = str(refused.value)
    assert message.startswith("node 'pool_map' (SequenceMap) in main graph 'g': --runtime openvino")
    assert "output 0 of MaxPool" in message and "\n" not in message


# -- found by the structural fuzzer (features inferred and scan_only) -----------------

FOUND = {
    # A Squeeze with empty axes (ONNX: [1,1,3], onnxruntime: [3]) split and
    # mapped: the type oracle kept ONNX's element rank on the map body's
    # input, and the vectorizer transposed a rank-1 stack as rank 3.
    "squeezed elements": """
    g (float[1,1,3] x) => (int64[?] n, int64[?] d) {
      axes = Constant <value = int64[0] {}> ()
      q = Squeeze (x, axes)
      s = SplitToSequence <axis = -1, keepdims = 0> (q)
      shapes, sizes = SequenceMap <body = body (float e) => (int64[?] shape, int64 size) {
            shape = Shape (e)
            size = Size (e)
          }> (s)
      n = ConcatFromSequence <axis = 0, new_axis = 1> (sizes)
      d = ConcatFromSequence <axis = 0, new_axis = 0> (shapes)
    }""",
    # A Resize (ONNX [1,2,13], onnxruntime [1,2,14]) in a Scan body, then a
    # Reshape to [-1]: the optimizer merged the pin into that Reshape, and
    # onnxruntime sized the Scan's output from ONNX's [26].
    "pinned, then reshaped": """
    g (float[N,1,2,5] x) => (float[?] y) {
      s = SplitToSequence <axis = 0, keepdims = 0> (x)
      m = SequenceMap <body = body (float[1,2,5] e) => (float[?] r) {
            scales = Constant <value = float[3] {1.0, 1.0, 2.8}> ()
            z = Resize <mode = "nearest"> (e, , scales)
            flat = Constant <value = int64[1] {-1}> ()
            r = Reshape (z, flat)
          }> (s)
      y = ConcatFromSequence <axis = 0, new_axis = 0> (m)
    }""",
    # A Slice to INT32_MAX with a negative step (ONNX [0], onnxruntime [3]),
    # a model output also split and read: pinned, the Slice's own output
    # became an inner value, and onnxruntime planned its buffer by ONNX's [0].
    "a model output read on": """
    g (float[4] x) => (float[?] r, float y, float[?] c) {
      starts = Constant <value = int64[1] {2}> ()
      ends = Constant <value = int64[1] {2147483647}> ()
      axes = Constant <value = int64[1] {-1}> ()
      steps = Constant <value = int64[1] {-1}> ()
      r = Slice (x, starts, ends, axes, steps)
      s = SplitToSequence <axis = 0, keepdims = 0> (r)
      two = Constant <value = int64 {2}> ()
      y = SequenceAt (s, two)
      c = ConcatFromSequence <axis = 0, new_axis = 1> (s)
    }""",
}


# A Resize (ONNX [1,6], onnxruntime [1,7]) inside a model-local function:
# ONNX's inference sees through the call, the proof did not; and once
# onnxruntime's optimizer has inlined the function, it folded the Shape the
# lowering reads of the call's output (the loop's trip count) from its own
# [1,6]: the call's output is pinned after it (DoubtedShapesPass).
THROUGH_A_FUNCTION = """
    g (float[1,5] x) => (float[1] y, float[?,?] z) {
      r = local.f0 (x)
      s = SplitToSequence <axis = 1, keepdims = 0> (r)
      last = Constant <value = int64 {-1}> ()
      y = SequenceAt (s, last)
      m = SequenceMap <body = b (float[1] e) => (float[1] o) { o = Neg (e) }> (s)
      z = ConcatFromSequence <axis = 1, new_axis = 1> (m)
    }
    <domain: "local", opset_import: ["" : 17]>
    f0 (a) => (c) {
      sc = Constant <value = float[2] {1.0, 1.4}> ()
      c = Resize <mode = "nearest"> (a, , sc)
    }"""


@pytest.mark.parametrize("form", ["auto", "no_unroll", "loop", "optimize"])
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "inferred"])
@pytest.mark.parametrize("name", list(FOUND))
def test_what_the_fuzzer_found_lowers_right(name, declared, form):
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>' + FOUND[name]
    )
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal(
            [d.dim_value or 3 for d in i.type.tensor_type.shape.dim]
        ).astype(np.float32)
        for i in model.graph.input
    }
    check(model, feeds, form)


# The same Resize a call deeper, after a Relu: the outer function proven for
# the call follows the inner call, proven for its own.
THROUGH_TWO_FUNCTIONS = (
    THROUGH_A_FUNCTION.replace("r = local.f0 (x)", "r = local.f1 (x)")
    + """
    <domain: "local", opset_import: ["" : 17, "local" : 1]>
    f1 (a) => (d) {
      b = local.f0 (a)
      d = Relu (b)
    }"""
)


@pytest.mark.parametrize("form", ["auto", "no_unroll", "loop"])
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "inferred"])
@pytest.mark.parametrize("text", [THROUGH_A_FUNCTION, THROUGH_TWO_FUNCTIONS], ids=["one", "two"])
def test_a_function_call_of_an_op_onnx_sizes_wrong_is_doubted(text, declared, form):
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17, "local" : 1]>' + text)
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    feeds = {"x": np.arange(5, dtype=np.float32).reshape(1, 5)}
    check(model, feeds, form)


def function_model(name: str) -> tuple[onnx.ModelProto, dict]:
    """The case's op in a model-local function, called on the case's run-time
    inputs; its output split along its last axis, read at -1 and mapped."""
    case, opset, shape = CASES[name]
    nodes, inputs, initializers, feeds = case_nodes(case, "c")
    dtype = ort_run(_case_model(case, opset), _case_feeds(case))[0].dtype
    onnx_dtype = helper.np_dtype_to_tensor_dtype(dtype)
    opset = max(opset, 17)
    function = helper.make_function(
        "local",
        "f0",
        [i.name for i in inputs],
        ["c"],
        [*(_const(t.name, onnx.numpy_helper.to_array(t)) for t in initializers), *nodes[:1]],
        [helper.make_opsetid("", opset)],
    )
    del function.node[-1].output[1:]
    axis = len(shape) - 1
    element = [None] * axis
    body = helper.make_graph(
        [helper.make_node("Identity", ["e"], ["o"])],
        "b",
        [helper.make_tensor_value_info("e", onnx_dtype, element)],
        [helper.make_tensor_value_info("o", onnx_dtype, element)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("f0", [i.name for i in inputs], ["r"], domain="local"),
            helper.make_node("SplitToSequence", ["r"], ["s"], axis=axis, keepdims=0),
            _const("last", np.array(-1)),
            helper.make_node("SequenceAt", ["s", "last"], ["y"]),
            helper.make_node("SequenceMap", ["s"], ["m"], body=body),
            helper.make_node("ConcatFromSequence", ["m"], ["z"], axis=axis, new_axis=1),
        ],
        "g",
        inputs,
        [
            helper.make_tensor_value_info("y", onnx_dtype, element),
            helper.make_tensor_value_info("z", onnx_dtype, [None] * len(shape)),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("local", 1)],
        functions=[function],
        ir_version=8,
    )
    return model, feeds


FUNCTION_SWEEP = [
    (name, declared, form)
    for name, (case, _, shape) in CASES.items()
    if len(shape) >= 1 and any(g is not None and not g.const for g in case.inputs)
    if name != "Squeeze: empty axes attribute"  # (an opset-11 form: SequenceMap needs 17)
    for declared in (True, False)
    for form in ("auto", "no_unroll", "loop")
]


@pytest.mark.parametrize(("name", "declared", "form"), FUNCTION_SWEEP)
def test_every_op_onnx_sizes_wrong_is_doubted_through_a_call(name, declared, form):
    """Every such op in a function: the lowering reads the call's output as
    onnxruntime computes it, with its optimizer too (which inlines the call)."""
    model, feeds = function_model(name)
    if declared:
        model = onnx.shape_inference.infer_shapes(model)
    check(model, feeds, form)
