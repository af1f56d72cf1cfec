"""Types taken from ONNX shape inference claim no more than the model does.

Inference names an unknown dim itself (``unk__0``) and hands the name on,
also through a sequence's element type to every element read from it. The
long structural fuzz run found the result: a map lowered to a Loop, with
elements at different positions declared with the same dim, and
onnxruntime reusing one's buffer for the other ("Shape mismatch attempting
to re-use buffer. {1,2} != {2,2}").
"""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.analysis.type_inference import TypeOracle
from tests.cases.fuzz_regressions import FUZZ, fuzz_feeds
from tests.helpers import assert_same, parse, run


@pytest.mark.parametrize(
    ("element", "expected"),
    [("bool[?,2]", [None, 2]), ("bool[N,2]", ["N", 2]), ("bool[3,2]", [3, 2])],
)
def test_an_untyped_body_gets_the_dims_the_model_declares_and_no_invented_ones(element, expected):
    model = ir.serde.deserialize_model(
        parse(f"""<ir_version: 8, opset_import: ["" : 17]>
        g (seq({element}) s) => (seq({element}) y) {{
          y = SequenceMap <body = body (e) => (d) {{ d = Not (e) }}> (s)
        }}""")
    )
    (node,) = model.graph
    twin = TypeOracle(model).twin(node, model.graph)
    assert twin is not None
    body = twin.attributes["body"].as_graph()
    for value in (body.inputs[0], body.outputs[0]):
        dims = [d.value if isinstance(d, ir.SymbolicDim) else d for d in value.shape]
        assert dims == expected


@pytest.mark.parametrize("strategy", ["auto", "loop"])
def test_elements_read_at_different_positions_do_not_share_an_invented_dim(strategy):
    """The fuzzer's shrunk example: nested maps in Loop, Scan, If and function
    bodies over ragged boolean sequences, untyped bodies."""
    model = onnx.load(FUZZ / "inferred_dims_sequence_elements.onnx")
    feeds = fuzz_feeds("inferred_dims_sequence_elements")
    expected = run(lowering.lower(model, max_unroll=1000), feeds)  # unrolled: no Loop at all
    result = lowering.lower(model, strategy=strategy, max_unroll=0)
    onnx.checker.check_model(result, full_check=True)
    assert_same(run(result, feeds), expected)


# MaxPool with ceil_mode and an end pad: ONNX infers [1,1,3], onnxruntime computes [1,1,2].
CEIL_POOL = """<ir_version: 8, opset_import: ["" : 18]>
g (seq(float[1,1,4]) x) => (seq(float[1,1,4]) y, seq(float[1,1,4]) z) {
  y = SequenceMap <body = body (float[1,1,4] e) => (c) {
    m = MaxPool <kernel_shape = [2], strides = [2], pads = [0, 1], ceil_mode = 1> (e)
    r = Relu(m)
    s = Shape(r)
    k = Constant <value = int64[3] {1, 1, 4}> ()
    u = Neg(e)
    c = Expand(u, k)
  }> (x)
  z = SequenceMap <body = other (float[1,1,4] e2) => (c2) { c2 = Abs(e2) }> (x)
}"""


def test_shapes_from_an_op_onnx_infers_wrong_are_dropped_with_all_computed_from_them():
    model = ir.serde.deserialize_model(parse(CEIL_POOL))
    oracle = TypeOracle(model)
    mapped = model.graph.node(0)
    twin = oracle.twin(mapped, model.graph)
    assert twin is not None
    body = twin.attributes["body"].as_graph()
    shapes = {node.op_type: node.outputs[0].shape for node in body}
    assert shapes["MaxPool"] is None and shapes["Relu"] is None and shapes["Shape"] is None
    assert shapes["Neg"] == ir.Shape([1, 1, 4])  # not computed from the pool: kept
    assert list(shapes["Expand"]) == [1, 1, 4]
    # ONNX's inference itself still claims the wrong shape: the mechanism is what drops it.
    inferred = onnx.shape_inference.infer_shapes(parse(CEIL_POOL))
    claimed = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in inferred.graph.node[0].attribute[0].g.value_info
    }
    assert claimed["m"] == [1, 1, 3]


@pytest.mark.parametrize(
    ("shapes", "wrong"),
    [
        (([4, 2, 3], [4, 3, 5]), False),  # every letter one size: ONNX is right
        (([1, 2, 3], [4, 3, 5]), True),  # b of size 1 broadcasts: ONNX infers [1, 2, 5]
        (([None, 2, 3], [4, 3, 5]), True),  # unknown: not proven
        (([None, 2, 3], [3, 5]), False),  # b in one place only: nothing to broadcast
        (([None, 2, 3], [None, 5]), True),  # j unknown in both
        ((["N", 2, 3], ["N", 3, 5]), False),  # one symbolic b: the same size
        ((["N", 2, 3], ["M", 3, 5]), True),  # two: N may be 1 where M is 4
    ],
)
def test_an_einsum_is_only_trusted_where_its_letters_agree(shapes, wrong):
    from lowering.irutils.node_inference import Operand, seen_wrong

    equation = "bij,bjk->bik" if len(shapes[1]) == 3 else "bij,jk->bik"
    node = ir.Node("", "Einsum", [], [ir.AttrString("equation", equation)])
    operands = [Operand(ir.DataType.FLOAT, shape) for shape in shapes]
    assert seen_wrong(node, operands) is wrong


WEIGHTED = """<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 300] x, int64[2] s) => (m, y, z)
<float[300, 4] w = {...}, int64[2] s = {1, 600}, int64[2] t = {600, 1}> {
  m = MatMul(x, w)
  y = Reshape(x, t)
  z = Reshape(x, s)
}"""


def test_inference_reads_no_weight_and_leaves_the_model_as_it_was():
    """A large initializer is an input without data in ONNX's copy (its value
    decides no shape); a small one keeps its value, and the model is untouched."""
    from lowering.analysis.type_inference import _without_weights

    proto = onnx.parser.parse_model(WEIGHTED.replace("{...}", "{" + ", ".join(["1"] * 1200) + "}"))
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model)
    copy = _without_weights(model)
    assert [t.name for t in copy.graph.initializer] == ["s", "t"]
    assert [i.name for i in copy.graph.input] == ["x", "s", "w"]
    assert ir.serde.serialize_model(model) == before
    oracle = TypeOracle(model)
    twins = [oracle.twin(node, model.graph) for node in list(model.graph)[:2]]
    assert [list(twin.outputs[0].shape) for twin in twins if twin is not None] == [[2, 4], [600, 1]]
