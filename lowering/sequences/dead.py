"""Sequence ops nothing reads, removed, with the Constants only they read.

Lowering leaves them behind: a map's SequenceConstruct once its reads read
the tensors, a split once its elements are Slices. An erase or insert at a
position not proven in range stays: onnxruntime runs a node nothing reads,
and its failure is the model's.
"""

from __future__ import annotations

import onnx_ir as ir

from lowering.analysis.sequence_length import SequenceLengths
from lowering.irutils.dead_code import remove_unread, unread
from lowering.irutils.op_facts import SEQUENCE_OPS, is_onnx_domain
from lowering.irutils.scopes import iter_scopes


def remove_dead_sequences(model: ir.Model) -> bool:
    """Remove sequence ops that nothing reads, and the Constants only they read, until none is left.

    An erase or insert at a position not proven in range stays: onnxruntime
    runs a node nothing reads, and its failure is the model's.
    """
    removed_any = False
    lengths = SequenceLengths()
    while True:
        dead = [
            (scope.owner, node)
            for scope in iter_scopes(model)
            for node in scope.owner
            if is_onnx_domain(node.domain)
            and node.op_type in SEQUENCE_OPS
            and unread(node)
            and not _may_fail(node, lengths)
        ]
        if not dead:
            return removed_any
        for owner, node in dead:
            inputs = list(node.inputs)
            owner.remove(node, safe=True)
            for value in inputs:  # a split's sizes, an insert's position
                remove_unread(value)
        removed_any = True


def _may_fail(node: ir.Node, lengths: SequenceLengths) -> bool:
    """An erase, or an insert at a position, whose position is not proven in range."""
    if node.op_type == "SequenceInsert" and (len(node.inputs) < 3 or node.inputs[2] is None):
        return False  # an append always runs
    return node.op_type in ("SequenceErase", "SequenceInsert") and lengths(node.outputs[0]) is None
