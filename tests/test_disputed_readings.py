"""Nodes that runtimes compute two ways are left as written (issue 21).

``Squeeze`` with an empty axes tensor squeezes no dim in ONNX (its shape
inference, onnx.reference, so onnxscript's folder) and every unit dim in
onnxruntime's kernel; ``ReduceMean`` over an empty set is 0 in onnxruntime
and NaN (for integers, the type's minimum) in onnx.reference; ``Slice``
by a negative step from and to before the start (or to INT64_MAX) takes
element 0 in onnxruntime, nothing in onnx.reference. Neither the
constant evaluator nor ``--optimize`` may pick one: lowered and optimized,
the model computes what onnxruntime computes for the original, wherever
the node sits and however it is spelled.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils import static_values
from tests.helpers import assert_same, parse, session


def _slice(shape: list[int], start: int, end: int, step: int, axis: int = 0) -> str:
    """Lines that make ``{out}`` by slicing a constant of ``shape`` along ``axis``."""
    values = ", ".join(str(v) for v in range(int(np.prod(shape))))
    dims = ",".join(str(d) for d in shape)
    bounds = {"b": start, "e": end, "a": axis, "p": step}
    lines = [f"c = Constant <value = int64[{dims}] {{{{{values}}}}}> ()"]
    lines += [f"{k} = Constant <value = int64[1] {{{{{v}}}}}> ()" for k, v in bounds.items()]
    return "\n".join([*lines, "{out} = Slice(c, b, e, a, p)"])


#: Nodes runtimes compute two ways, each spelled a few ways: lines that make
#: ``{out}`` from constants only (so that a folder could evaluate them).
DISPUTED = {
    "Squeeze, empty Constant axes": (
        "c = Constant <value = int64[1,1] {{7}}> ()\n"
        "axes = Constant <value = int64[0] {{}}> ()\n"
        "{out} = Squeeze(c, axes)"
    ),
    "Squeeze, axes an empty Slice": (
        "c = Constant <value = int64[1,1] {{7}}> ()\n"
        "all = Constant <value = int64[2] {{0, 1}}> ()\n"
        "none = Constant <value = int64[1] {{1}}> ()\n"
        "axes = Slice(all, none, none)\n"
        "{out} = Squeeze(c, axes)"
    ),
    "ReduceMean of an empty tensor": (
        "c = Constant <value = int64[0] {{}}> ()\n{out} = ReduceMean <keepdims = 0> (c)"
    ),
    "ReduceMean over an empty axis": (
        "c = Constant <value = int64[2,0] {{}}> ()\n"
        "axes = Constant <value = int64[1] {{1}}> ()\n"
        "{out} = ReduceMean <keepdims = 0> (c, axes)"
    ),
    "Slice back from and to before the start": _slice([3], -(2**40), -4, -(2**63)),
    "Slice back to INT64_MAX": _slice([2, 3], 0, 2**63 - 1, -1, axis=1),
}

#: Where the node sits; {node} makes q.
PLACES = {
    "main graph": ("{node}", ""),
    "If branch": (
        (
            "flag = Constant <value = bool {{1}}> ()\n"
            "q = If (flag) <then_branch = t () => (tq) {{ {node_t} }},"
            " else_branch = f () => (fq) {{ {node_f} }}>"
        ),
        "",
    ),
    "function": ("q = local.Disputed ()", "function"),
}

FUNCTION = """
<domain: "local", opset_import: ["" : 18]>
Disputed () => (q) {{
  {node}
}}"""


def _model(case: str, place: str) -> onnx.ModelProto:
    body, extra = PLACES[place]
    node = DISPUTED[case]
    text = body.format(
        node=node.format(out="q"), node_t=node.format(out="tq"), node_f=node.format(out="fq")
    )
    imports = '"" : 18, "local" : 1' if extra else '"" : 18'
    functions = FUNCTION.format(node=node.format(out="q")) if extra else ""
    return parse(
        f"""<ir_version: 8, opset_import: [{imports}]>
        g (seq(float[2]) s) => (seq(float[2]) m, int64[K] shape, int64[J] values) {{
          m = SequenceMap <body = b (float[2] e) => (float[2] r) {{ r = Neg(e) }}> (s)
          {text}
          shape = Shape(q)
          flat = Constant <value = int64[1] {{-1}}> ()
          values = Reshape(q, flat)
        }}{functions}"""
    )


#: Where onnxruntime cannot run the original: in a branch it allocates the Slice's
#: output by ONNX's shape inference ([2,0]: INT64_MAX clamped), its kernel computes [2,1].
UNRUNNABLE = {("Slice back to INT64_MAX", "If branch")}


@pytest.mark.parametrize(
    ("case", "place"), [(c, p) for c in DISPUTED for p in PLACES if (c, p) not in UNRUNNABLE]
)
def test_optimize_keeps_a_disputed_node(case, place):
    """Lowered and optimized, the model computes what onnxruntime computes for it."""
    model = _model(case, place)
    feeds = {"s": [np.array([1, -2], np.float32)]}
    expected = session(model, optimize=False).run(None, feeds)
    working = ir.serde.deserialize_model(model)
    assert lowering.pipeline(optimize=True)(working).not_optimized is None
    result = ir.serde.serialize_model(working)
    onnx.checker.check_model(result, full_check=True)
    assert all(n.domain in ("", "local") for n in result.graph.node)
    assert "lowering.fenced" not in {i.domain for i in result.opset_import}
    assert_same(session(result, optimize=False).run(None, feeds), expected)


@pytest.mark.parametrize(("case", "place"), sorted(UNRUNNABLE))
def test_onnxruntime_cannot_run_the_unrunnable(case, place):
    feeds = {"s": [np.array([1, -2], np.float32)]}
    with pytest.raises(Exception, match="computed output shape"):
        session(_model(case, place), optimize=False).run(None, feeds)


def test_the_readings_differ():
    """What makes each case disputed: onnxruntime and onnx.reference disagree on it."""
    from onnx.reference import ReferenceEvaluator

    for case in DISPUTED:
        model = _model(case, "main graph")
        feeds = {"s": [np.array([1, -2], np.float32)]}
        ours = session(model, optimize=False).run(None, feeds)[1:]
        reference = ReferenceEvaluator(model).run(None, feeds)[1:]
        assert any(
            a.shape != b.shape or not np.array_equal(a, b)
            for a, b in zip(ours, reference, strict=True)
        ), case


@pytest.mark.parametrize(
    "node",
    [
        "axes = Constant <value = int64[1] {0}> ()\n q = Squeeze(c, axes)",
        "axes = Constant <value = int64[1] {1}> ()\n q = ReduceMean <keepdims = 0> (c, axes)",
    ],
)
def test_the_optimizer_still_folds_an_undisputed_node(node):
    model = parse(
        f"""<ir_version: 8, opset_import: ["" : 18]>
        g (seq(float[2]) s) => (seq(float[2]) m, int64[1] shape) {{
          m = SequenceMap <body = b (float[2] e) => (float[2] r) {{ r = Neg(e) }}> (s)
          c = Constant <value = int64[1,1] {{7}}> ()
          {node}
          shape = Shape(q)
        }}"""
    )
    result = lowering.lower(model, optimize=True)
    assert not {"Squeeze", "ReduceMean"} & {n.op_type for n in result.graph.node}


def _squeezed(axes: np.ndarray | None) -> ir.Value:
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 17})
    c = ir.Value(name="c", const_value=ir.tensor(np.ones((1, 1), np.int64), name="c"))
    graph.register_initializer(c)
    inputs = [c]
    if axes is not None:
        a = ir.Value(name="a", const_value=ir.tensor(axes, name="a"))
        graph.register_initializer(a)
        inputs.append(a)
    node = ir.node("Squeeze", inputs)
    graph.append(node)
    return node.outputs[0]


@pytest.mark.parametrize(
    ("axes", "disputed"),
    [(None, False), (np.zeros(0, np.int64), True), (np.array([0], np.int64), False)],
)
def test_the_evaluator_never_picks_a_reading(axes, disputed):
    value = _squeezed(axes)
    node = value.producer()
    assert node is not None
    assert (static_values.disputed_reading(node) is not None) == disputed
    for folded in (static_values.static_array(value), static_values.evaluate(value, shapes=True)):
        assert (folded is None) == disputed


#: Slice bounds and steps, the extremes of each index type included (onnxruntime
#: reads an end of INT32_MAX, in either type, as it reads INT64_MAX).
_EDGES = [-(2**40), -5, -3, -2, -1, 0, 1, 2, 3, 2**40, 2**31 - 1, -(2**31)]
_BOUNDS = {
    np.int64: [-(2**63), *_EDGES, 2**63 - 1],
    np.int32: [v for v in _EDGES if abs(v) < 2**31 or v == -(2**31)],
}
_STEPS = {
    np.int64: [-(2**63), -(2**40), -2, -1, 1, 2, 2**40, 2**63 - 1],
    np.int32: [-(2**31), -2, -1, 1, 2, 2**31 - 1],
}


def _bounds_model(n: int, index: str) -> onnx.ModelProto:
    return parse(
        f"""<ir_version: 8, opset_import: ["" : 18]>
        g (int64[{n}] x, {index}[1] b, {index}[1] e, {index}[1] p) => (int64[?] y) {{
          a = Constant <value = {index}[1] {{0}}> ()
          y = Slice(x, b, e, a, p)
        }}"""
    )


def _slice_node(shape: ir.Shape | None, dtype, start: int, end: int, step: int) -> ir.Node:
    x = ir.Value(name="x", shape=shape, type=ir.TensorType(ir.DataType.INT64))
    bounds = [
        ir.Value(name=k, const_value=ir.tensor(np.array([v], dtype), name=k))
        for k, v in zip("beap", [start, end, 0, step], strict=True)
    ]
    return ir.node("Slice", [x, *bounds])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_a_slice_is_disputed_exactly_where_the_readings_differ(n, dtype):
    """Slice bounds are read two ways, stepping back from and to before a dim,
    or to INT64_MAX or INT32_MAX: of a known dim, disputed_reading says so
    exactly where onnxruntime and onnx.reference differ; of an unknown one,
    wherever they may (any dim)."""
    from onnx.reference import ReferenceEvaluator

    model = _bounds_model(n, np.dtype(dtype).name)
    ours, reference = session(model, optimize=False), ReferenceEvaluator(model)
    x = np.arange(10, 10 + n, dtype=np.int64)
    differ = 0
    for start, end, step in itertools.product(_BOUNDS[dtype], _BOUNDS[dtype], _STEPS[dtype]):
        bounds = zip("bep", [start, end, step], strict=True)
        feeds = {"x": x, **{k: np.array([v], dtype) for k, v in bounds}}
        a, b = ours.run(None, feeds)[0], reference.run(None, feeds)[0]
        differs = a.shape != b.shape or not np.array_equal(a, b)
        differ += differs
        known = static_values.disputed_reading(_slice_node(ir.Shape([n]), dtype, start, end, step))
        unknown = static_values.disputed_reading(_slice_node(None, dtype, start, end, step))
        assert (known is not None) == differs, (start, end, step)
        assert unknown is not None or not differs, (start, end, step)
    assert differ or n == 0  # the grid reaches the dispute
