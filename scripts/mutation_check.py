"""Mutation checks: the fast loop catches plausible bugs in the main mechanisms.

    python scripts/mutation_check.py [--jobs N] [--only NAME,..] [--mechanism M,..]
                                     [--timeout S] [--markdown FILE]
    python scripts/mutation_check.py --check      (every snippet is where the list says)
    python scripts/mutation_check.py --list

Each entry of :data:`MUTANTS` is one plausible bug, written as an exact
source snippet of a file under ``lowering/`` and its replacement (an axis off
by one, a dropped negative-index wrap, a swapped comparison, a skipped guard,
a form chosen where it must decline...). The mutants are applied one at a
time to a copy of the checkout (never to its own files), and the fast loop's
tests of the mechanism (:data:`MECHANISMS`) run on the copy::

    checkout --copy--> tmp/tree-K   (one per job; .git and caches left out)
    for each mutant:   tmp/tree-K/lowering/FILE   snippet -> replacement
                       cd tmp/tree-K && PYTHONPATH=. pytest -m "not slow" -x -q FILES
                       killed (a test fails, or the run times out) / survived
                       FILE restored

A snippet that no longer occurs exactly once in its file stops the run
before anything is mutated (``--check`` does only that;
tests/test_mutation_list.py runs it in the fast loop), so the list cannot
rot unseen: after a change to a file, its entries are re-read and fixed.
Before the mutants, each mechanism's tests run once unmutated; a test that
fails there is left out of that mechanism's runs and named in the output.
The results, and the command, are in docs/testing.md ("Mutation checks").
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The fast loop's tests of each mechanism (files, or tests in them), the
#: quickest to fail first (-x).
MECHANISMS: dict[str, tuple[str, ...]] = {
    "vectorize": (
        "tests/test_vectorize.py",
        "tests/test_vectorize_shapes.py",
        "tests/test_differential.py",
    ),
    "unroll": (
        "tests/test_unroll.py",
        "tests/test_static_fold.py",
        "tests/test_element_shapes.py",
        "tests/test_differential.py",
    ),
    "scan": (
        "tests/test_scan_of_nothing.py",
        "tests/test_scan_empty_results.py",
        "tests/test_uniform.py",
        "tests/test_runtime_option.py",
        "tests/test_portability.py",
    ),
    "uniform": (
        "tests/test_uniform.py",
        "tests/test_stack_reads.py",
        "tests/test_differential.py",
        "tests/test_element_shapes.py",
    ),
    "loop": (
        "tests/test_golden.py",
        "tests/test_sequence_free_loops.py",
        "tests/test_differential.py",
        "tests/test_dtypes.py",
    ),
    "evaluator": (
        "tests/test_constant_evaluator.py",
        "tests/test_static_fold.py",
        "tests/test_disputed_readings.py",
        "tests/test_sequence_insert.py::test_positions_computed_from_constants_are_folded",
        "tests/test_doubted_shapes.py::test_the_map_lowering_alone_reads_no_doubted_declaration",
    ),
    "adapters": (
        "tests/test_opset_adapters.py",
        "tests/test_target_opset.py",
        "tests/test_opset_expansions.py",
        "tests/test_opset_allowzero.py",
        "tests/test_opset_coerced_empty.py",
        "tests/test_opset_all_outputs.py",
    ),
    "inserts": (
        "tests/test_sequence_insert.py",
        "tests/test_insert_out_of_range.py",
        "tests/test_sequence_positions.py",
    ),
    "accumulators": (
        "tests/test_accumulator_loops.py",
        "tests/test_torch_lists.py",
        "tests/test_tf_lists.py",
        "tests/test_doubted_shapes.py::test_a_list_of_what_onnx_sizes_wrong_is_pinned_when_it_is_stacked",
    ),
    "shapes": (
        "tests/test_proven_shapes.py",
        "tests/test_computed_shapes.py",
        "tests/test_doubted_shapes.py",
        "tests/test_trusted_shapes.py",
    ),
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One plausible bug: ``find`` (exactly once in ``path``) becomes ``replace``."""

    name: str
    mechanism: str
    path: str
    find: str
    replace: str
    why: str


_VEC = "lowering/maps/strategies/vectorize/"
_STRAT = "lowering/maps/strategies/"

#: The curated list. Snippets are short (a line where it is unique), so that
#: edits elsewhere in a file leave them valid. A mutant no run can tell from
#: the source is not listed (docs/testing.md names the ones left out), e.g. a
#: batching rule's element shape where the shape proof overrides it.
MUTANTS: tuple[Mutant, ...] = (
    # -- vectorize: the batcher -------------------------------------------------
    Mutant(
        "vectorize-shared-stack-at-start",
        "vectorize",
        "lowering/irutils/constants.py",
        "if made_by is not None and made_by.graph is graph_of(owner):",
        "if False:",
        "a stack maps share goes to the start of its graph, before its sequence is made",
    ),
    Mutant(
        "batcher-split-perm",
        "vectorize",
        _VEC + "batcher.py",
        "perm = [axis, *(i for i in range(rank) if i != axis)]",
        "perm = [*(i for i in range(rank) if i != axis), axis]",
        "a split along axis > 0 is stacked with its axis moved last, not first",
    ),
    Mutant(
        "batcher-split-keepdims",
        "vectorize",
        _VEC + "batcher.py",
        "stack = self.unsqueeze(stack, [axis + 1])",
        "stack = self.unsqueeze(stack, [axis])",
        "a keepdims split's unit dim goes before the batch axis (off by one)",
    ),
    Mutant(
        "batcher-split-negative-axis",
        "vectorize",
        _VEC + "batcher.py",
        "            axis += rank\n",
        "            axis += rank - 1\n",
        "a negative split axis is wrapped one short",
    ),
    Mutant(
        "batcher-lift-before-batch",
        "vectorize",
        _VEC + "batcher.py",
        "return self.unsqueeze(value, list(range(1, rank - have + 1)))",
        "return self.unsqueeze(value, list(range(0, rank - have)))",
        "a batched operand of lower rank is unsqueezed before the batch axis (wrong broadcast)",
    ),
    Mutant(
        "batcher-broadcast-axis",
        "vectorize",
        _VEC + "batcher.py",
        'return self.op("Tile", [self.unsqueeze(info.value, [0]), repeats])',
        'return self.op("Tile", [self.unsqueeze(info.value, [-1]), repeats])',
        "an invariant value is repeated along a new last axis, not a new batch axis",
    ),
    # -- vectorize: batching rules ---------------------------------------------
    Mutant(
        "rule-elementwise-top-rank",
        "vectorize",
        _VEC + "elementwise.py",
        "    top = max(len(s) for s in shapes)\n    inputs = [None if a is None",
        "    top = min(len(s) for s in shapes)\n    inputs = [None if a is None",
        "broadcasting operands are lifted to the lowest rank, not the highest",
    ),
    Mutant(
        "rule-reduce-axes-shift",
        "vectorize",
        _VEC + "reductions.py",
        "shifted = [a + 1 for a in axes]",
        "shifted = [a for a in axes]",
        "a reduction's axes are not shifted past the batch axis",
    ),
    Mutant(
        "rule-reduce-all-axes",
        "vectorize",
        _VEC + "reductions.py",
        "axes = list(range(rank))",
        "axes = list(range(rank - 1))",
        "a reduction without axes leaves the last axis unreduced",
    ),
    Mutant(
        "rule-argmax-axis",
        "vectorize",
        _VEC + "reductions.py",
        "out = v.like(node, [x.value], axis=axis + 1)",
        "out = v.like(node, [x.value], axis=axis)",
        "ArgMax/ArgMin read the element's axis as the stack's",
    ),
    Mutant(
        "rule-matmul-vector-rhs",
        "vectorize",
        _VEC + "linear_algebra.py",
        "if rb == 1:  # [n, k] -> [n, k, 1]\n            B, rb = v.unsqueeze(B, [2]), 2",
        "if rb == 1:  # [n, k] -> [n, k, 1]\n            B, rb = v.unsqueeze(B, [1]), 2",
        "a batched vector right operand becomes a row, not a column",
    ),
    Mutant(
        "rule-matmul-squeeze",
        "vectorize",
        _VEC + "linear_algebra.py",
        'return v.squeeze(v.op("MatMul", [A, B]), [ra])',
        'return v.squeeze(v.op("MatMul", [A, B]), [ra - 1])',
        "an invariant vector right operand's unit dim is squeezed off by one",
    ),
    Mutant(
        "rule-einsum-batch-last",
        "vectorize",
        _VEC + "linear_algebra.py",
        "equation=f\"{','.join(batched)}->{batch}{output}\"",
        "equation=f\"{','.join(batched)}->{output}{batch}\"",
        "an Einsum's batch letter ends the output, not starts it",
    ),
    Mutant(
        "rule-transpose-default-perm",
        "vectorize",
        _VEC + "shape_ops.py",
        "perm = list(reversed(range(rank))) if listed is None",
        "perm = list(range(rank)) if listed is None",
        "a Transpose without perm is taken as the identity, not a reversal",
    ),
    Mutant(
        "rule-concat-axis",
        "vectorize",
        _VEC + "shape_ops.py",
        "out = v.like(node, [v.batched(a) for a in parts], axis=axis + 1)",
        "out = v.like(node, [v.batched(a) for a in parts], axis=axis)",
        "a Concat's axis is not shifted past the batch axis",
    ),
    Mutant(
        "rule-reshape-computed-target",
        "vectorize",
        _VEC + "shape_ops.py",
        "where = [1 if i == j + 1 else 0 for i in range(len(base))]",
        "where = [1 if i == j else 0 for i in range(len(base))]",
        "a Reshape's computed -1 is put one dim early",
    ),
    Mutant(
        "rule-unsqueeze-rank",
        "vectorize",
        _VEC + "shape_ops.py",
        "rank = v.rank(x) + len(axes)",
        "rank = v.rank(x)",
        "an Unsqueeze's negative axes are wrapped by the input's rank, not the output's",
    ),
    Mutant(
        "rule-gather-axis",
        "vectorize",
        _VEC + "indexing.py",
        "out = v.like(node, [data.value, indices.value], axis=axis + 1)",
        "out = v.like(node, [data.value, indices.value], axis=axis)",
        "a Gather of batched data reads along the element's axis of the stack",
    ),
    Mutant(
        "rule-slice-axes",
        "vectorize",
        _VEC + "indexing.py",
        "v.const([a + 1 for a in axes_list], index),",
        "v.const([a for a in axes_list], index),",
        "a Slice's axes are not shifted past the batch axis",
    ),
    # -- unroll ----------------------------------------------------------------
    Mutant(
        "unroll-same-element",
        "unroll",
        _STRAT + "unroll.py",
        "copied: (values[i] if values is not None else outer)",
        "copied: (values[0] if values is not None else outer)",
        "every copy of the body reads the first element",
    ),
    Mutant(
        "unroll-chunk-sizes",
        "unroll",
        _STRAT + "unroll.py",
        "return [min(step, dim - start) for start in range(0, dim, step)]",
        "return [step for start in range(0, dim, step)]",
        "a chunked split's last, shorter chunk is read at the full chunk size",
    ),
    Mutant(
        "unroll-keeps-shapes",
        "unroll",
        _STRAT + "unroll.py",
        "output.shape = None  # shapes may differ between elements",
        "pass  # shapes may differ between elements",
        "each copy keeps the body's declared shapes, said of another element",
    ),
    Mutant(
        "unroll-max-unroll",
        "unroll",
        _STRAT + "unroll.py",
        "elif 0 < limit and length <= limit:",
        "elif 0 < limit and length < limit:",
        "a map of exactly --max-unroll elements is not unrolled (off by one)",
    ),
    # -- scan ------------------------------------------------------------------
    Mutant(
        "scan-same-length",
        "scan",
        _STRAT + "scan.py",
        "if not same_length_inputs(plan):  # a Scan takes every scan input whole",
        "if False:  # a Scan takes every scan input whole",
        "a Scan is chosen for inputs that may differ in length (it must decline)",
    ),
    Mutant(
        "scan-keepdims-unsqueeze",
        "scan",
        _STRAT + "scan.py",
        'prologue += with_axes("Unsqueeze", sliced, [axis], plan.opset)',
        'prologue += with_axes("Unsqueeze", sliced, [0], plan.opset)',
        "a keepdims slice gets its unit dim at 0, not at the split axis",
    ),
    Mutant(
        "scan-guard-comparison",
        "scan",
        _STRAT + "scan.py",
        'nonempty = fresh(new_node("Greater", [count.outputs[0], zero.outputs[0]]))',
        'nonempty = fresh(new_node("GreaterOrEqual", [count.outputs[0], zero.outputs[0]]))',
        "the guard runs the Scan on no element too",
    ),
    Mutant(
        "scan-transpose-perm",
        "scan",
        _STRAT + "scan.py",
        "perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]",
        "perm = [*range(1, axis + 2), 0, *range(axis + 2, rank + 1)]",
        "a stack built along 0 is moved one axis too far",
    ),
    Mutant(
        "scan-proven-nonempty",
        "scan",
        _STRAT + "scan.py",
        "return isinstance(dim, int) and dim > 0",
        "return isinstance(dim, int) and dim >= 0",
        "a split along a static dim of 0 is taken to have a slice: its Scan is not guarded",
    ),
    # -- uniform (scan outputs, stack reads) -----------------------------------
    Mutant(
        "uniform-not-uniform",
        "uniform",
        "lowering/maps/uniform_shapes.py",
        "if not shapes.is_uniform(result):",
        "if False:",
        "scan outputs are chosen for results that may differ in shape (it must decline)",
    ),
    Mutant(
        "uniform-count-dim",
        "uniform",
        "lowering/maps/stack_reads.py",
        '    zero = constant_node(np.array(0, np.int64), "zero")\n    count = fresh(',
        '    zero = constant_node(np.array(1, np.int64), "zero")\n    count = fresh(',
        "a stack's count is read from its second dim",
    ),
    Mutant(
        "uniform-stack-axis-wrap",
        "uniform",
        "lowering/maps/stack_reads.py",
        'return "stack", axis % (rank + 1)',
        'return "stack", axis % rank',
        "a concat with new_axis wraps its axis by the element's rank, not the stack's",
    ),
    Mutant(
        "uniform-merge-shape",
        "uniform",
        "lowering/maps/stack_reads.py",
        "np.array([-1, *shape[1:]], np.int64)",
        "np.array([-1, *shape], np.int64)",
        "a concat along 0 keeps the stack's axis instead of merging it",
    ),
    Mutant(
        "scan-outputs-split-keeps-dims",
        "uniform",
        _STRAT + "scan_outputs.py",
        '"SplitToSequence", [stack], {"axis": 0, "keepdims": 0}',
        '"SplitToSequence", [stack], {"axis": 0, "keepdims": 1}',
        "a stack is split back into elements that keep the stacking axis",
    ),
    Mutant(
        "positions-scalar",
        "uniform",
        "lowering/irutils/positions.py",
        "if p.shape is None or p.shape.rank() != 0:",
        "if p.shape is None:",
        "a [1]-shaped position is not made a scalar",
    ),
    # -- loop ------------------------------------------------------------------
    Mutant(
        "loop-concat-readers-agree",
        "loop",
        _STRAT + "loop.py",
        "    if len(readers) != 1:\n        return None",
        "    if False:\n        return None",
        "an output read by concats along different axes is built along one of them",
    ),
    Mutant(
        "loop-empty-start",
        "loop",
        "lowering/loops/concat_form.py",
        "return [0 if a == self.axis else d",
        "return [1 if a == self.axis else d",
        "the concat built in the loop starts from one zero element, not none",
    ),
    Mutant(
        "loop-concat-order",
        "loop",
        _STRAT + "loop.py",
        'new_node("Concat", [acc, part], {"axis": build.axis})',
        'new_node("Concat", [part, acc], {"axis": build.axis})',
        "each element is prepended, not appended",
    ),
    # -- the constant evaluator ------------------------------------------------
    Mutant(
        "eval-div-floors",
        "evaluator",
        "lowering/irutils/static_values.py",
        "return np.where(inexact, quotient + 1, quotient).astype(a.dtype)",
        "return quotient.astype(a.dtype)",
        "integer Div floors (numpy) where onnxruntime truncates",
    ),
    Mutant(
        "eval-cast-wraps",
        "evaluator",
        "lowering/irutils/static_values.py",
        "if int(value.min()) < int(info.min) or int(value.max()) > int(info.max):",
        "if False:",
        "a narrowing integer cast that wraps is folded",
    ),
    Mutant(
        "eval-float-to-int",
        "evaluator",
        "lowering/irutils/static_values.py",
        "source in FLOAT_TYPES and target in FLOAT_TYPES",
        "source in FLOAT_TYPES and target in NUMBER_TYPES",
        "a float to integer cast (undefined out of range) is folded",
    ),
    Mutant(
        "eval-negative-axes",
        "evaluator",
        "lowering/irutils/static_values.py",
        "result = [a + rank if a < 0 else a for a in axes]",
        "result = [a for a in axes]",
        "negative Squeeze/Unsqueeze axes are not wrapped",
    ),
    Mutant(
        "eval-reshape-allowzero",
        "evaluator",
        "lowering/irutils/static_values.py",
        "if d == 0 and not allow_zero:",
        "if d == 0:",
        "a Reshape with allowzero = 1 copies a 0 dim",
    ),
    Mutant(
        "eval-empty-squeeze",
        "evaluator",
        "lowering/irutils/static_values.py",
        "        return None  # disputed: see disputed_reading\n",
        "        pass  # disputed: see disputed_reading\n",
        "a Squeeze with empty axes (disputed) is folded",
    ),
    Mutant(
        "eval-shapes-unasked",
        "evaluator",
        "lowering/irutils/static_values.py",
        "        if not shapes:\n            return None\n",
        "        if False:\n            return None\n",
        "Shape and Size read declared shapes where the caller did not take them as facts",
    ),
    Mutant(
        "eval-float-min",
        "evaluator",
        "lowering/irutils/static_values.py",
        '"Min": _of_types(INTEGER_TYPES,',
        '"Min": _of_types(INTEGER_TYPES | FLOAT_TYPES,',
        "Min of floats is folded, where runtimes differ on NaN",
    ),
    Mutant(
        "fold-if-branch",
        "evaluator",
        "lowering/irutils/static_fold.py",
        'name = "then_branch" if bool(cond.reshape(())) else "else_branch"',
        'name = "else_branch" if bool(cond.reshape(())) else "then_branch"',
        "an If on a constant is replaced by the branch it does not take",
    ),
    Mutant(
        "fold-doubted-shapes",
        "evaluator",
        "lowering/irutils/static_fold.py",
        "return not any(v is not None and v in doubted for v in node.inputs)",
        "return True",
        "Shape/Size of a value whose declared shape is doubted is folded",
    ),
    # -- opset adapters and the planner ----------------------------------------
    Mutant(
        "adapter-reduce-noop-part",
        "adapters",
        "lowering/opset/adapters/axes_inputs.py",
        "    if node.op_type in _ELEMENTWISE_PART:\n        # Not an Identity",
        "    if False:\n        # Not an Identity",
        "ReduceSumSquare & co. with noop_with_empty_axes become an Identity",
    ),
    Mutant(
        "adapter-split-chunk",
        "adapters",
        "lowering/opset/adapters/split.py",
        "chunk = -(-size // n)",
        "chunk = size // n",
        "Split-18's num_outputs chunk is rounded down, not up",
    ),
    Mutant(
        "adapter-split-starts",
        "adapters",
        "lowering/opset/adapters/split.py",
        'starts = int64(rw.op("Sub", [ends, operand]))',
        'starts = int64(rw.op("Sub", [operand, ends]))',
        "computed Split sizes give each Slice the wrong start",
    ),
    Mutant(
        "adapter-pad-wrap-ends",
        "adapters",
        "lowering/opset/adapters/pad.py",
        "begin, end = int(pads[index]), int(pads[index + half])",
        "begin, end = int(pads[index + half]), int(pads[index])",
        'mode="wrap" pads swap their begins and ends',
    ),
    Mutant(
        "adapter-max-compare",
        "adapters",
        "lowering/opset/adapters/minmax.py",
        'compare = "Greater" if node.op_type == "Max" else "Less"',
        'compare = "Less" if node.op_type == "Max" else "Greater"',
        "integer Max selects the smaller operand (swapped comparison)",
    ),
    Mutant(
        "adapter-softmax-inverse",
        "adapters",
        "lowering/opset/adapters/softmax.py",
        "inverse = [perm.index(d) for d in range(rank)]",
        "inverse = perm",
        "the Transpose back after Softmax-11 reuses perm, not its inverse",
    ),
    Mutant(
        "adapter-reshape-allowzero",
        "adapters",
        "lowering/opset/adapters/shape.py",
        "if shape is not None and not (shape == 0).any():",
        "if shape is not None:",
        "allowzero = 1 is dropped from a constant shape that holds a 0",
    ),
    Mutant(
        "adapter-trilu-mask",
        "adapters",
        "lowering/opset/adapters/trilu.py",
        'outside = op("Less" if upper else "Greater", [diagonal, k], dtype=ir.DataType.BOOL)',
        'outside = op("Greater" if upper else "Less", [diagonal, k], dtype=ir.DataType.BOOL)',
        "Trilu's mask keeps the other triangle",
    ),
    Mutant(
        "adapter-defaults-any-value",
        "adapters",
        "lowering/opset/adapters/defaults.py",
        "    return attr.value == default\n",
        "    return True\n",
        "an added attribute is dropped whatever its value (the adapter must decline)",
    ),
    Mutant(
        "plan-unanswered-outputs",
        "adapters",
        "lowering/opset/plan.py",
        "for index in range(adapter.outputs, len(node.outputs)):",
        "for index in range(adapter.outputs + 1, len(node.outputs)):",
        "an adapter of the first output only is run where the second is read",
    ),
    # -- the SequenceInsert normalization and positions ------------------------
    Mutant(
        "positions-outer-where",
        "inserts",
        "lowering/irutils/positions.py",
        'outer = fresh(new_node("Where", [is_below, p, wrapped]))',
        'outer = fresh(new_node("Where", [is_below, wrapped, wrapped]))',
        "p + n alone: a position below -n becomes a valid one",
    ),
    Mutant(
        "positions-inner-where",
        "inserts",
        "lowering/irutils/positions.py",
        'inner = fresh(new_node("Where", [is_negative, shifted, p]))',
        'inner = fresh(new_node("Where", [is_negative, p, shifted]))',
        "the wrap shifts non-negative positions and keeps negative ones",
    ),
    Mutant(
        "insert-constant-wrap",
        "inserts",
        "lowering/passes/normalize_inserts.py",
        "            if n is not None and k < 0:\n                k += n\n",
        "            if n is not None and k < 0:\n                pass\n",
        "a negative constant position over a known length is not wrapped",
    ),
    Mutant(
        "insert-range-check",
        "inserts",
        "lowering/passes/normalize_inserts.py",
        "if n is not None and not -n <= p <= n:",
        "if n is not None and not -n < p <= n:",
        "position -n is refused as out of range (off by one)",
    ),
    Mutant(
        "insert-unguarded-constant",
        "inserts",
        "lowering/passes/normalize_inserts.py",
        'return ["guard", fix] if self._can_guard() and not self._guarded() else [fix]',
        "return [fix]",
        "a constant p >= 0 over an unknown length is not guarded (it may be n)",
    ),
    Mutant(
        "insert-guard-opset",
        "inserts",
        "lowering/passes/normalize_inserts.py",
        "return (self.scopes.opset.get(self.located.scope.owner) or 0) >= 13",
        "return (self.scopes.opset.get(self.located.scope.owner) or 0) >= 11",
        "an If returning a sequence is written below opset 13",
    ),
    Mutant(
        "insert-zero-wraps",
        "inserts",
        "lowering/passes/normalize_inserts.py",
        "return int(self.value.reshape(())) < 0 and self.length is None",
        "return int(self.value.reshape(())) <= 0 and self.length is None",
        "position 0 is wrapped as a negative one (it then appends)",
    ),
    # -- accumulator loops -----------------------------------------------------
    Mutant(
        "acc-any-position",
        "accumulators",
        "lowering/loops/accumulators.py",
        "or int(position.reshape(())) != 0:",
        "or int(position.reshape(())) < 0:",
        "an insert at a positive constant position is taken as a prepend",
    ),
    Mutant(
        "acc-stack-under-if",
        "accumulators",
        "lowering/loops/accumulators.py",
        "if static and accumulator.branch is None and _stack_serves(accumulator, opset):",
        "if static and _stack_serves(accumulator, opset):",
        "an append under an If is stacked as a scan output (every iteration)",
    ),
    Mutant(
        "acc-runs-once",
        "accumulators",
        "lowering/loops/accumulators.py",
        "or int(count.reshape(())) < 1:",
        "or int(count.reshape(())) < 0:",
        "a Loop of 0 trips is taken to run once (the empty concat's failure is lost)",
    ),
    Mutant(
        "acc-prepend-reverse",
        "accumulators",
        "lowering/loops/rewrite.py",
        'np.array([np.iinfo(np.int64).min], np.int64), "ends"',
        'np.array([0], np.int64), "ends"',
        "a prepended stack is reversed without its first row",
    ),
    Mutant(
        "acc-pins-what-it-exposes",
        "accumulators",
        "lowering/loops/accumulators.py",
        "    accumulator.doubted = tuple(doubted)\n",
        "",
        "an element computed from an op ONNX sizes wrong is stacked unpinned",
    ),
    Mutant(
        "acc-concat-prepend",
        "accumulators",
        "lowering/loops/rewrite.py",
        "pair = [part, inner] if a.prepend else [inner, part]",
        "pair = [inner, part]",
        "a prepended concat appends",
    ),
    Mutant(
        "acc-element-axis",
        "accumulators",
        "lowering/loops/concat_reads.py",
        'axes = constant_node(np.array([axis], np.int64), "axes")',
        'axes = constant_node(np.array([axis + 1], np.int64), "axes")',
        "an element is sliced from the concat along the next axis",
    ),
    # -- the shape proof -------------------------------------------------------
    Mutant(
        "proof-doubt-propagates",
        "shapes",
        "lowering/analysis/proven_shapes.py",
        "if not doubted_input and not wrong:",
        "if not wrong:",
        "a node reading a doubted value keeps its declared shape as a fact",
    ),
    Mutant(
        "proof-doubted-operand",
        "shapes",
        "lowering/analysis/proven_shapes.py",
        "                got = _unshaped(got)\n",
        "                pass\n",
        "a doubted value's declared shape is read as proven",
    ),
    Mutant(
        "proof-declarable-dims",
        "shapes",
        "lowering/analysis/proven_shapes.py",
        "[d if d == p else None for d, p in zip(dims, proven, strict=True)]",
        "[d for d, p in zip(dims, proven, strict=True)]",
        "a doubted declaration is declared again where the proof differs",
    ),
    Mutant(
        "pin-model-output-moved",
        "shapes",
        "lowering/irutils/pins.py",
        "    kept = graph is main and value.is_graph_output()\n",
        "    kept = False\n",
        "a pinned model output moves behind its pin (an inner value, planned by ONNX's size)",
    ),
    Mutant(
        "reads-split-unpinned",
        "shapes",
        "lowering/sequences/reads.py",
        "        reads += _split_inputs(node)\n",
        "",
        "a split read as tensors reads its tensor unpinned",
    ),
    Mutant(
        "computed-resize-double",
        "shapes",
        "lowering/irutils/computed_shapes.py",
        "dims[axis] = int(np.float32(d) * scale)",
        "dims[axis] = int(float(d) * float(scale))",
        "Resize's size is computed in double (ONNX's rule), not float32 (onnxruntime's)",
    ),
    Mutant(
        "computed-range-floor",
        "shapes",
        "lowering/irutils/computed_shapes.py",
        "return (max(0, -(-span // step)),)",
        "return (max(0, span // step),)",
        "an integer Range's length is rounded down, not up",
    ),
    Mutant(
        "computed-nonzero-scalar",
        "shapes",
        "lowering/irutils/computed_shapes.py",
        "return (max(len(x.shape), 1), None)",
        "return (len(x.shape), None)",
        "NonZero of a scalar has 0 rows, not 1",
    ),
)


def problems(root: pathlib.Path = ROOT) -> list[str]:
    """What is wrong with the list against the source under ``root``: a snippet
    not found exactly once, a mutant that changes nothing or does not parse,
    an unknown mechanism, a test file that is gone. Empty when it is valid."""
    found: list[str] = []
    names = [m.name for m in MUTANTS]
    for name in sorted({n for n in names if names.count(n) > 1}):
        found.append(f"{name}: the name is used twice")
    for mechanism, files in MECHANISMS.items():
        for test in files:
            module, _, function = test.partition("::")
            if not (root / module).is_file():
                found.append(f"{mechanism}: {module} does not exist")
            elif function and f"def {function}(" not in (root / module).read_text():
                found.append(f"{mechanism}: {module} has no {function}")
    for mutant in MUTANTS:
        where = f"{mutant.name} ({mutant.path})"
        if mutant.mechanism not in MECHANISMS:
            found.append(f"{where}: no mechanism {mutant.mechanism!r}")
        if mutant.find == mutant.replace:
            found.append(f"{where}: the replacement changes nothing")
        path = root / mutant.path
        if not path.is_file():
            found.append(f"{where}: no such file")
            continue
        text = path.read_text()
        count = text.count(mutant.find)
        if count != 1:
            found.append(f"{where}: the snippet occurs {count} times, not once: {mutant.find!r}")
            continue
        try:
            ast.parse(mutated(text, mutant))
        except SyntaxError as error:
            found.append(f"{where}: the mutated file does not parse ({error})")
    return found


def mutated(text: str, mutant: Mutant) -> str:
    """``text`` with the mutant's one snippet replaced."""
    assert text.count(mutant.find) == 1, "checked by problems()"
    return text.replace(mutant.find, mutant.replace, 1)


@dataclasses.dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived", "timeout"
    caught_by: str
    seconds: float


def _copy_tree(destination: pathlib.Path) -> pathlib.Path:
    ignore = shutil.ignore_patterns(
        ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".ci-venv", "*.pyc"
    )
    shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True)
    return destination


def _env(tree: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant of the same size and second is recompiled
    env["PYTHONHASHSEED"] = "0"
    return env


def _check_import(tree: pathlib.Path) -> None:
    """The copy's package is the one the tests import (not the checkout's, nor an install)."""
    out = subprocess.run(
        [sys.executable, "-c", "import lowering; print(lowering.__file__)"],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not pathlib.Path(out).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the tests would import {out}, not the copy in {tree}")


def _pytest(
    tree: pathlib.Path, files: tuple[str, ...], deselect: list[str], timeout: float, first: bool
) -> tuple[int | None, str, float]:
    """Run the fast loop's ``files`` in ``tree``: (exit code or None on timeout, output, seconds)."""
    command = [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider"]
    command += ["-x"] if first else []
    command += [f"--deselect={test}" for test in deselect] + list(files)
    start = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=tree,
        env=_env(tree),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group: a timeout ends it and its children
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        code = None
    return code, output, time.monotonic() - start


_FAILED = re.compile(r"^(?:FAILED|ERROR) (.+)$", re.MULTILINE)


def _failures(output: str) -> list[str]:
    return [line.split(" - ")[0] for line in _FAILED.findall(output)]


def baselines(
    tree: pathlib.Path, mechanisms: list[str], timeout: float
) -> tuple[dict[str, list[str]], dict[str, float]]:
    """Each mechanism's tests, unmutated: the tests that fail already (left out of
    its runs) and how long the run took."""
    failing: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    for mechanism in mechanisms:
        code, output, took = _pytest(tree, MECHANISMS[mechanism], [], timeout, first=False)
        failing[mechanism] = _failures(output)
        seconds[mechanism] = took
        if code is None or (code != 0 and not failing[mechanism]):
            raise SystemExit(f"{mechanism}: its tests do not run unmutated:\n{output[-3000:]}")
        shown = ", ".join(failing[mechanism]) or "none"
        print(f"baseline {mechanism}: {took:.0f} s, failing already: {shown}", flush=True)
    return failing, seconds


def run_mutant(mutant: Mutant, trees: queue.Queue, deselect: list[str], timeout: float) -> Outcome:
    tree = trees.get()
    path = tree / mutant.path
    original = path.read_text()
    try:
        path.write_text(mutated(original, mutant))
        code, output, took = _pytest(tree, MECHANISMS[mutant.mechanism], deselect, timeout, True)
    finally:
        path.write_text(original)
        trees.put(tree)
    if code is None:
        return Outcome(mutant, "timeout", f"no result in {timeout:.0f} s", took)
    if code == 0:
        return Outcome(mutant, "survived", "", took)
    failed = _failures(output)
    caught = failed[0] if failed else output.strip().splitlines()[-1]
    return Outcome(mutant, "killed", caught, took)


def table(outcomes: list[Outcome]) -> str:
    """The results as a markdown table."""
    lines = [
        "| mutant | mechanism | file | bug | outcome | first test to fail |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        m = o.mutant
        file = m.path.removeprefix("lowering/")
        caught = f"`{o.caught_by}`" if o.caught_by else ""
        lines.append(f"| {m.name} | {m.mechanism} | {file} | {m.why} | {o.status} | {caught} |")
    killed = sum(o.status != "survived" for o in outcomes)
    lines.append("")
    lines.append(f"{killed}/{len(outcomes)} killed.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only validate the list")
    parser.add_argument("--list", action="store_true", help="list the mutants")
    parser.add_argument("--only", default="", help="comma list of mutant names")
    parser.add_argument("--mechanism", default="", help="comma list of mechanisms")
    parser.add_argument("--jobs", "-n", type=int, default=1, help="mutants run side by side")
    parser.add_argument("--timeout", type=float, default=0, help="seconds per mutant "
                        "(default: 3x its mechanism's unmutated run, at least 120)")  # fmt: skip
    parser.add_argument("--markdown", type=pathlib.Path, help="write the result table here")
    parser.add_argument("--tests", default="", help="comma list of test files to run instead "
                        "of each mechanism's (to find which test kills a survivor)")  # fmt: skip
    args = parser.parse_args(argv)

    wrong = problems()
    if wrong:
        print("the mutation list does not match the source:", *wrong, sep="\n  ")
        return 2
    chosen = list(MUTANTS)
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {m.name for m in MUTANTS}
        if unknown:
            parser.error(f"no mutant named {', '.join(sorted(unknown))}")
        chosen = [m for m in chosen if m.name in names]
    if args.mechanism:
        mechanisms = set(args.mechanism.split(","))
        if not mechanisms <= set(MECHANISMS):
            parser.error(f"mechanisms are {', '.join(MECHANISMS)}")
        chosen = [m for m in chosen if m.mechanism in mechanisms]
    if args.tests:
        files = tuple(args.tests.split(","))
        for mechanism in MECHANISMS:
            MECHANISMS[mechanism] = files
    if args.list or args.check:
        if args.list:
            for m in chosen:
                print(f"{m.name:32} {m.mechanism:13} {m.path}: {m.why}")
        print(f"{len(chosen)} mutants, every snippet found once")
        return 0

    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        trees: queue.Queue = queue.Queue()
        for job in range(max(args.jobs, 1)):
            tree = _copy_tree(pathlib.Path(scratch) / f"tree-{job}")
            _check_import(tree)
            trees.put(tree)
        tree = trees.get()
        needed = list(dict.fromkeys(m.mechanism for m in chosen))
        failing, seconds = baselines(tree, needed, max(args.timeout, 1800))
        trees.put(tree)
        outcomes: list[Outcome] = []
        with concurrent.futures.ThreadPoolExecutor(max(args.jobs, 1)) as pool:
            futures = []
            for mutant in chosen:
                limit = args.timeout or max(120.0, 3 * seconds[mutant.mechanism])
                futures.append(
                    pool.submit(run_mutant, mutant, trees, failing[mutant.mechanism], limit)
                )
            for future in futures:  # in the list's order, whatever finishes first
                outcome = future.result()
                outcomes.append(outcome)
                print(
                    f"{outcome.status:9} {outcome.mutant.name:32} {outcome.seconds:5.0f} s  "
                    f"{outcome.caught_by}",
                    flush=True,
                )
    result = table(outcomes)
    print(result)
    if args.markdown:
        args.markdown.write_text(result + "\n")
    return 0 if all(o.status != "survived" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
