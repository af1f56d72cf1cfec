"""Types the one shape analysis gives values the model leaves untyped.

Exporters leave map bodies and function bodies untyped; the lowering needs
their element types. The proof (``prove_model(fill=True)``) gives them from
per-node inference, through maps, calls and sequences, and claims no more
than the model and the trusted rules prove. The long structural fuzz run
found what whole-model inference claimed: a map lowered to a Loop, with
elements at different positions declared with one invented dim, and
onnxruntime reusing one's buffer for the other ("Shape mismatch attempting
to re-use buffer. {1,2} != {2,2}").
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.analysis.proven_shapes import prove_model
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
    proof = prove_model(model, fill=True)
    body = node.attributes["body"].as_graph()
    for value in (body.inputs[0], body.outputs[0], node.outputs[0]):
        typed = proof.typed(value)
        assert typed is not None and typed[1] is not None
        dims = [d.value if isinstance(d, ir.SymbolicDim) else d for d in typed[1]]
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


def test_shapes_from_an_op_onnx_infers_wrong_are_onnxruntimes_and_not_declared():
    """The pool's size and all computed from it are proven as onnxruntime
    computes them, but typed without a shape: declared, they would be
    contradicted by ONNX's inference, which sizes the pool wrong."""
    model = ir.serde.deserialize_model(parse(CEIL_POOL))
    proof = prove_model(model, fill=True)
    body = model.graph.node(0).attributes["body"].as_graph()
    values = {node.op_type: node.outputs[0] for node in body}
    assert proof.shape(values["MaxPool"]) == (1, 1, 2)
    assert proof.shape(values["Relu"]) == (1, 1, 2)
    assert proof.shape(values["Shape"]) == (3,)
    for op in ("MaxPool", "Relu"):
        assert proof.typed(values[op]) == (ir.TensorType(ir.DataType.FLOAT), None)
    assert proof.typed(values["Neg"])[1] == ir.Shape([1, 1, 4])  # not computed from the pool
    assert proof.typed(values["Expand"])[1] == ir.Shape([1, 1, 4])
    # ONNX's inference itself still claims the wrong shape: the proof is what corrects it.
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


def test_the_proof_reads_the_weights_in_place_and_leaves_the_model_as_it_was():
    proto = onnx.parser.parse_model(WEIGHTED.replace("{...}", "{" + ", ".join(["1"] * 1200) + "}"))
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model)
    proof = prove_model(model, fill=True)
    assert ir.serde.serialize_model(model) == before
    shapes = [proof.typed(node.outputs[0]) for node in list(model.graph)[:2]]
    assert [list(typed[1]) for typed in shapes if typed is not None] == [[2, 4], [600, 1]]


FUNCTIONS = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (seq(float[2]) x, float[3] c) => (y, z) {
  y = local.outer(x)
  z = local.outer(x)
}
<domain: "local", opset_import: ["" : 17, "local" : 1]>
outer (a) => (b) {
  b = SequenceMap <body = outer_body (e) => (d) {
        parts = SplitToSequence <keepdims = 0> (e)
        squares = local.inner(parts)
        d = ConcatFromSequence <axis = 0, new_axis = 1> (squares)
      }> (a)
}
<domain: "local", opset_import: ["" : 17, "local" : 1]>
inner <alpha> (s) => (t) {
  t = SequenceMap <body = body (e) => (d) {
        k = Constant <value_float: float = @alpha> ()
        d = Mul(e, k)
      }> (s)
}"""


def test_functions_are_typed_as_their_call_sites_agree_and_calls_as_proven_for_them():
    """outer's input is what main's two calls agree on; inner's, what outer's
    call gives (callers first); each call's outputs are its function's,
    proven for the call, through a map and a Constant given by an attribute."""
    model = ir.serde.deserialize_model(
        parse(FUNCTIONS.replace("inner(parts)", "inner <alpha = 2.0> (parts)"))
    )
    proof = prove_model(model, fill=True)
    outer, inner = model.functions.values()
    float_seq = ir.SequenceType(ir.TensorType(ir.DataType.FLOAT))
    assert proof.typed(outer.inputs[0]) == (float_seq, ir.Shape([2]))
    assert proof.typed(inner.inputs[0]) == (float_seq, ir.Shape([]))
    inner_body = next(iter(inner)).attributes["body"].as_graph()
    assert proof.typed(inner_body.outputs[0]) == (ir.TensorType(ir.DataType.FLOAT), ir.Shape([]))
    outer_body = next(iter(outer)).attributes["body"].as_graph()
    assert proof.typed(outer_body.outputs[0])[0] == ir.TensorType(ir.DataType.FLOAT)
    for output in model.graph.outputs:  # through the call: a sequence of float[?]
        assert proof.typed(output)[0] == float_seq


def test_call_sites_that_disagree_leave_the_function_untyped():
    text = FUNCTIONS.replace("inner(parts)", "inner <alpha = 2.0> (parts)")
    text = text.replace("z = local.outer(x)", "z = local.outer(w)").replace(
        "seq(float[2]) x,", "seq(float[2]) x, seq(int64[2]) w,"
    )
    model = ir.serde.deserialize_model(parse(text))
    proof = prove_model(model, fill=True)
    outer = next(iter(model.functions.values()))
    assert proof.typed(outer.inputs[0]) is None


def test_a_length_is_a_scalar_and_a_referred_constant_has_its_attributes_type():
    model = ir.serde.deserialize_model(
        parse("""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (seq(float[2]) s) => (y) { y = local.f <alpha = 2.0> (s) }
        <domain: "local", opset_import: ["" : 17]>
        f <alpha> (a) => (n) {
          k = Constant <value_float: float = @alpha> ()
          l = SequenceLength (a)
          c = Cast <to = 1> (l)
          n = Mul (c, k)
        }""")
    )
    proof = prove_model(model, fill=True)
    (function,) = model.functions.values()
    values = {node.op_type: node.outputs[0] for node in function}
    assert proof.typed(values["Constant"]) == (ir.TensorType(ir.DataType.FLOAT), ir.Shape([]))
    assert proof.typed(values["SequenceLength"]) == (ir.TensorType(ir.DataType.INT64), ir.Shape([]))
    assert proof.typed(values["Mul"]) == (ir.TensorType(ir.DataType.FLOAT), ir.Shape([]))
    assert proof.typed(model.graph.outputs[0]) == (ir.TensorType(ir.DataType.FLOAT), ir.Shape([]))


def test_each_call_is_proven_for_what_its_inputs_are_even_where_calls_repeat():
    """Calls alike share one proof of the function (a run proves each kind of
    call once); calls whose inputs differ in shape, dtype or value get theirs."""
    model = ir.serde.deserialize_model(
        parse("""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (float[2] a, float[3] b, int64[2] c) => (y1, y2, y3, y4, z1, z2) {
          one = Constant <value = int64[1] {1}> ()
          two = Constant <value = int64[1] {2}> ()
          y1 = local.f (a, one)
          y2 = local.f (b, one)
          y3 = local.f (c, one)
          y4 = local.f (a, one)
          z1 = local.f (a, two)
          z2 = local.f (b, two)
        }
        <domain: "local", opset_import: ["" : 17]>
        f (x, k) => (t) { t = Tile (x, k) }""")
    )
    proof = prove_model(model, fill=True)
    got = [proof.typed(v) for v in model.graph.outputs]
    f32, i64 = ir.TensorType(ir.DataType.FLOAT), ir.TensorType(ir.DataType.INT64)
    assert got == [
        (f32, ir.Shape([2])),
        (f32, ir.Shape([3])),
        (i64, ir.Shape([2])),
        (f32, ir.Shape([2])),
        (f32, ir.Shape([4])),
        (f32, ir.Shape([6])),
    ]


#: Sequences whose elements nothing proves a shape of, only a dtype: empty,
#: declared with unknown dims, split from a tensor of unknown dims; with
#: feeds, and the elements (the oracle: the body doubles each).
_U16 = np.arange(6, dtype=np.uint16).reshape(2, 3)
NO_ELEMENT_PROOF = {
    "empty": ("", "s = SequenceEmpty <dtype = 4> ()", {}, []),
    "declared": ("seq(uint16[?,?]) q", "s = Identity (q)", {"q": [_U16, _U16]}, [_U16, _U16]),
    "split of unknown dims": (
        "uint16[?,?] u",
        "s = SplitToSequence <axis = 0, keepdims = 0> (u)",
        {"u": _U16},
        list(_U16),
    ),
}


@pytest.mark.parametrize("case", list(NO_ELEMENT_PROOF))
def test_an_untyped_body_over_elements_of_no_proven_shape_gets_their_dtype(case):
    """The body's input is typed with the elements' dtype, its shape unknown
    (no element: any shape holds), and the untyped result with what follows;
    the map lowers and computes what the list comprehension does."""
    inputs, source, feeds, elements = NO_ELEMENT_PROOF[case]
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({inputs}) => (int64 y, seq(uint16[{"?" if case.startswith("split") else "?,?"}]) z) {{
      {source}
      z = SequenceMap <body = body (e) => (d) {{ d = Add (e, e) }}> (s)
      y = SequenceLength (z)
    }}"""
    model = ir.serde.deserialize_model(parse(text))
    proof = prove_model(model, fill=True)
    (mapped,) = [node for node in model.graph if node.op_type == "SequenceMap"]
    body = mapped.attributes["body"].as_graph()
    assert proof.typed(body.inputs[0])[0] == ir.TensorType(ir.DataType.UINT16)
    assert proof.typed(body.outputs[0])[0] == ir.TensorType(ir.DataType.UINT16)
    result = run(lowering.lower(parse(text)), feeds)
    assert_same(result, [np.array(len(elements)), [e + e for e in elements]])
