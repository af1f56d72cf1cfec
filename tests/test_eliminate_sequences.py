"""The two passes that read sequences as tensors, over one set of rules
(``lowering/sequences/reads.py``): ``ReadSequencesPass`` reports each node it
rewrites and, where it rewrote none, leaves the model as it was;
``EliminateSequencesPass``, the step after the maps, reports none and removes
every sequence op nothing reads. The pipeline runs the first on a model
whose maps were not lowered, the second after the maps.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils.op_facts import SEQUENCE_OPS
from tests.helpers import assert_same, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'

# Each: a model with sequence chains and no map, and what ReadSequencesPass
# reports for it, as (op_type, strategy), in order.
CHAINS = {
    "construct": (
        """g (float[2,3] a, float[2,3] b) => (float[2,3] y, int64 n, float[4,3] c) {
          s = SequenceConstruct(a, b)
          one = Constant <value = int64 {1}> ()
          y = SequenceAt(s, one)
          n = SequenceLength(s)
          c = ConcatFromSequence <axis = 0> (s)
        }""",
        [
            ("SequenceAt", "direct read"),
            ("SequenceLength", "Constant"),
            ("ConcatFromSequence", "Concat"),
        ],
    ),
    "split": (
        """g (float[6,3] x) => (float[4,3] y) {
          sizes = Constant <value = int64[2] {2, 4}> ()
          s = SplitToSequence <axis = 0> (x, sizes)
          one = Constant <value = int64 {1}> ()
          y = SequenceAt(s, one)
        }""",
        [("SequenceAt", "Slice")],
    ),
    "insert chain": (
        """g (float[3] a, float[3] b) => (float[2,3] y) {
          s0 = SequenceEmpty <dtype = 1> ()
          s1 = SequenceInsert(s0, a)
          s2 = SequenceInsert(s1, b)
          y = ConcatFromSequence <axis = 0, new_axis = 1> (s2)
        }""",
        [
            ("SequenceInsert", "SequenceConstruct"),
            ("SequenceInsert", "SequenceConstruct"),
            ("ConcatFromSequence", "Concat"),
        ],
    ),
}

# A sequence the user builds and nothing reads, next to a graph no rule applies to.
DEAD = """g (float[3] a) => (float[3] y) {
  s = SequenceConstruct(a, a)
  y = Neg(a)
}"""


def _model(text: str) -> ir.Model:
    return ir.serde.deserialize_model(parse(f"{H}\n{text}"))


def _bytes(model: ir.Model) -> bytes:
    return ir.serde.serialize_model(model).SerializeToString(deterministic=True)


def _feeds(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in proto.graph.input
    }


@pytest.mark.parametrize("name", list(CHAINS))
def test_both_passes_write_the_same_model_and_only_read_sequences_reports(name):
    text, reported = CHAINS[name]
    read, eliminated = _model(text), _model(text)
    result = lowering.ReadSequencesPass()(read)
    assert result.modified
    assert [(r.op_type, r.strategy) for r in result.rewrites] == reported
    after_maps = lowering.EliminateSequencesPass()(eliminated)
    assert after_maps.modified and after_maps.rewrites == []
    assert _bytes(read) == _bytes(eliminated)
    lowered = ir.serde.serialize_model(read)
    onnx.checker.check_model(lowered, full_check=True)
    assert not set(op_types(lowered)) & set(SEQUENCE_OPS)
    original = parse(f"{H}\n{text}")
    feeds = _feeds(original)
    assert_same(run(lowered, feeds), run(original, feeds))


def test_a_model_no_rule_applies_to_is_left_by_read_sequences_and_cleaned_after_maps():
    model = _model(DEAD)
    before = _bytes(model)
    result = lowering.ReadSequencesPass()(model)
    assert not result.modified and result.rewrites == []
    assert _bytes(model) == before  # the user's own unread sequence stays
    result = lowering.EliminateSequencesPass()(model)
    assert result.modified and result.rewrites == []
    assert op_types(ir.serde.serialize_model(model)) == ["Neg"]


def test_where_read_sequences_rewrites_it_removes_every_unread_sequence_op():
    text, _ = CHAINS["split"]
    model = _model(
        text.replace("y = SequenceAt(s, one)", "y = SequenceAt(s, one)\n t = SequenceConstruct(x)")
    )
    assert lowering.ReadSequencesPass()(model).modified
    assert not set(op_types(ir.serde.serialize_model(model))) & set(SEQUENCE_OPS)


MAP_AND_CHAIN = """g (float[2,3] a, float[2,3] b) => (float[2,3] y, float[4,3] c) {
  s = SequenceConstruct(a, b)
  m = SequenceMap <body = body (float[2,3] e) => (float[2,3] r) { r = Neg(e) }> (s)
  one = Constant <value = int64 {1}> ()
  y = SequenceAt(s, one)
  c = ConcatFromSequence <axis = 0> (m)
}"""


@pytest.mark.parametrize(
    ("text", "step", "reported"),
    [
        (CHAINS["construct"][0], "read sequences", CHAINS["construct"][1]),
        (MAP_AND_CHAIN, "eliminate sequences", None),
    ],
    ids=["no map", "a map"],
)
def test_the_pipeline_reads_the_users_chains_or_eliminates_after_the_maps(text, step, reported):
    steps: list[str] = []
    rewrites = lowering.lower_in_place(
        _model(text), progress=lambda phase, done, total: steps.append(phase)
    )
    (other,) = {"read sequences", "eliminate sequences"} - {step}
    assert step in steps and other not in steps
    if reported is None:  # after the maps, only the map is reported
        assert [r.op_type for r in rewrites] == ["SequenceMap"]
    else:
        assert [(r.op_type, r.strategy) for r in rewrites] == reported


@pytest.mark.parametrize("position", [None, -4, -3, -2, -1, 0, 1, 2, 3, 4])
@pytest.mark.parametrize("op", ["SequenceInsert", "SequenceErase"])
def test_an_insert_or_erase_folds_exactly_at_the_positions_in_range(op, position):
    """Into 3 elements: an insert at -3..3, an erase at -3..2 (absent: append, the
    last) folds, and computes what onnxruntime computes for the original; out of
    range it stays, with onnxruntime's error."""
    inputs = ", c" if op == "SequenceInsert" else ""
    at = "" if position is None else ", p"
    text = f"""g (float[2] a, float[2] b, float[2] c) => (float[K,2] y) {{
      s = SequenceConstruct(a, b, a)
      p = Constant <value = int64 {{{position or 0}}}> ()
      u = {op}(s{inputs}{at})
      y = ConcatFromSequence <axis = 0, new_axis = 1> (u)
    }}"""
    model = _model(text)
    result = lowering.ReadSequencesPass()(model)
    in_range = position is None or -3 <= position <= (3 if op == "SequenceInsert" else 2)
    lowered = ir.serde.serialize_model(model)
    assert (op not in op_types(lowered)) == in_range == result.modified
    if in_range:
        assert not set(op_types(lowered)) & set(SEQUENCE_OPS)
        original = parse(f"{H}\n{text}")
        feeds = _feeds(original)
        assert_same(run(lowered, feeds), run(original, feeds))
