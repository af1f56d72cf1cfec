"""What a Rewrite says: a short repr, and only the nodes still in the model (issue 26, item 6)."""

from __future__ import annotations

import onnx
import onnx_ir as ir

import lowering

EXAMPLE = "examples/torch_atleast_2d.onnx"


def test_repr_names_the_rewrite_without_dumping_nodes():
    model = ir.load(EXAMPLE)
    rewrite = lowering.lower_in_place(model, keep_originals=True)[0]
    text = repr(rewrite)
    assert text.startswith("Rewrite(scope=") and "strategy='unroll'" in text
    assert "ir.Node" not in text and "Node(" not in text and "input:" not in text
    assert len(text) < 400


def test_new_nodes_are_those_still_in_the_model():
    """Unrolling writes a SequenceConstruct that sequence elimination then removes."""
    model = ir.load(EXAMPLE)
    rewrite = lowering.lower_in_place(model)[0]
    gone = [node for node in rewrite.written if node.graph is None]
    assert gone, "the example's construct is read back and removed"
    assert all(node.graph is not None for node in rewrite.new_nodes)
    assert len(rewrite.new_nodes) == len(rewrite.written) - len(gone)
    # after() renders only what is there, and it parses as nodes of the model.
    assert "SequenceConstruct" not in rewrite.after()
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)
