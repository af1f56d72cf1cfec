"""TargetOpsetPass plans and checks every node first: a LoweringError changes nothing.

Each kind of blocker is raised through ``lowering.lower(ir_model, target_opset=N)``
on an onnx_ir model in which other nodes *would* be adapted or expanded; the
model's serialization must be byte for byte what it was.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

import lowering
from tests.helpers import parse

# Nodes that convert (adapter, expansion, axes input -> attribute), placed
# before and after the blocking one so a partial rewrite would show.
_CONVERTIBLE = """
  a = Constant <value = int64[1] {1}> ()
  s1 = Softmax <axis = 0> (x)
  h = HardSwish(s1)
  r = ReduceMean <keepdims = 1> (h, a)
"""

BLOCKERS = {
    "computed axes": ("(float[2,3] x, int64[1] k) => (float[N] y)", "y = ReduceSum(r, k)", 11),
    "op newer than the target, no function": (
        "(float[2,3] x, int32[2,3] i) => (int32[2,3] y)",
        "y = BitwiseAnd(i, i)",
        13,
    ),
    "types the older version lacks": (
        "(float[2,3] x) => (int8[2,3] y)",
        "c = Cast <to = 3> (r)\n  y = Mul(c, c)",
        13,
    ),
    "attribute value with no equivalent": (
        "(float[2,3] x) => (float[2,3] y)",
        (
            "i = Constant <value = int64[1,1] {0}> ()\n"
            "  u = Constant <value = float[1,3] {1, 2, 3}> ()\n"
            '  y = ScatterND <reduction = "add"> (r, i, u)'
        ),
        13,
    ),
    "rank unknown for GridSample": (
        "(float[2,3] x, int64[M] k, float[1,2,2,2] g) => (float[N] y)",
        "z = Reshape(r, k)\n  y = GridSample(z, g)",
        16,
    ),
    # (t's first dim may be 0, and onnxruntime has no Expand for an empty bfloat16 tensor)
    "Reshape allowzero with a computed shape": (
        "(float[2,3] x, bfloat16[P,3] t, int64[2] k) => (bfloat16[N] y)",
        "y = Reshape <allowzero = 1> (t, k)",
        13,
    ),
    "sequence in a Loop below 13": (
        "(float[2,3] x, seq(float[N]) q) => (seq(float[N]) y)",
        "y = SequenceMap <body = body (float[N] e) => (float[N] o) { o = Neg(e) }> (q)",
        12,
    ),
}


@pytest.mark.parametrize("kind", sorted(BLOCKERS))
def test_a_blocked_target_leaves_the_ir_model_unchanged(kind):
    signature, blocking, target = BLOCKERS[kind]
    text = (
        '<ir_version: 10, opset_import: ["" : 20]>\n'
        f"g {signature} {{\n{_CONVERTIBLE}  {blocking}\n}}"
    )
    model = ir.serde.deserialize_model(parse(text))
    if kind == "sequence in a Loop below 13":
        lowering.lower(model)  # the map becomes a Loop first; then only the opset
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(model, target_opset=target)
    refusal = (
        # The accumulator-loop pass meets the Loop first, and says why (issue 34).
        f"it accumulates, and Loop-{target} carries no sequence"
        if kind == "sequence in a Loop below 13"
        else f"cannot declare opset {target}"
    )
    assert refusal in str(error.value)
    assert "\n" not in str(error.value)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_the_same_model_converts_when_nothing_blocks():
    text = (
        '<ir_version: 10, opset_import: ["" : 20]>\n'
        f"g (float[2,3] x) => (float[N] y) {{\n{_CONVERTIBLE}  y = Identity(r)\n}}"
    )
    model = ir.serde.deserialize_model(parse(text))
    lowering.lower(model, target_opset=11)
    ops = [n.op_type for n in model.graph]
    assert "HardSwish" not in ops and "Transpose" in ops
