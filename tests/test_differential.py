"""Differential tests: lowered model vs original model vs plain Python.

Every case (tests/cases/differential.py) names the capability it covers.
Each runs at sequence lengths 0, 1 and several: onnxruntime on the lowered
model must equal a Python oracle (a list comprehension over numpy arrays),
and onnxruntime on the original must agree wherever onnxruntime can run the
original at all.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.cases.differential import CASES
from tests.helpers import assert_same, lowered, op_types, parse, run, session, try_run


@pytest.mark.parametrize("strategy", ["auto", "loop"])
@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("name", list(CASES))
def test_lowered_matches_oracle_and_original(name, n, strategy):
    spec = CASES[name]
    original = parse(spec.text)
    result = lowered(original, strategy=strategy)
    kinds = set(op_types(result))
    # auto vectorizes elements of one static shape: stacked, with no loop
    assert {"Loop", "Scan"} & kinds or (strategy == "auto" and "ConcatFromSequence" in kinds)
    feeds = spec.feeds(n, np.random.default_rng(n))
    expected = spec.oracle(feeds)
    assert_same(run(result, feeds), expected)
    from_original = try_run(original, feeds)
    if from_original is not None:
        assert_same(from_original, expected)


# The ai.onnx-domain case can only be checked on the output: ONNX's checker
# resolves no schema under "ai.onnx", and the lowering writes "" instead.
def test_ai_onnx_domain_output_uses_the_default_domain():
    result = lowered(parse(CASES["domain_spelled_ai_onnx"].text))
    domains = {node.domain for node in result.graph.node}
    assert domains == {""}
    assert {o.domain: o.version for o in result.opset_import}[""] == 17


@pytest.mark.parametrize("opset", range(17, 26))
def test_every_model_opset(opset):
    text = CASES["several_outputs_changing_dtype_and_shape"].text
    model = parse(text)
    model.opset_import[0].version = opset
    model.ir_version = onnx.helper.find_min_ir_version_for([model.opset_import[0]])
    spec = CASES["several_outputs_changing_dtype_and_shape"]
    feeds = spec.feeds(3, np.random.default_rng(opset))
    result = lowered(model)
    assert result.opset_import[0].version == opset
    assert result.ir_version == model.ir_version
    assert_same(run(result, feeds), spec.oracle(feeds))


@pytest.mark.parametrize("name", ["several_outputs_changing_dtype_and_shape", "untyped_body"])
def test_empty_input_gives_empty_outputs_of_the_right_element_type(name):
    """onnxruntime returns [] for an empty sequence, which hides the dtype;
    so check that every Loop output starts from SequenceEmpty of its type."""
    result = lowered(parse(CASES[name].text), strategy="loop")
    producers = {out: node for node in result.graph.node for out in node.output}
    loop = next(node for node in result.graph.node if node.op_type == "Loop")
    for initial, output in zip(loop.input[2:], loop.output, strict=True):
        empty = producers[initial]
        assert empty.op_type == "SequenceEmpty"
        declared = next(o for o in result.graph.output if o.name == output)
        element = declared.type.sequence_type.elem_type.tensor_type.elem_type
        assert element != 0
        assert [a.i for a in empty.attribute if a.name == "dtype"] == [element]
    feeds = CASES[name].feeds(0, np.random.default_rng(0))
    session_outputs = session(result).get_outputs()
    assert all(o.type.startswith("seq(tensor(") for o in session_outputs)
    assert run(result, feeds) == [[] for _ in loop.output]
