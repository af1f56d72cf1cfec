"""Benchmarks, measured side by side in one run, printed as Markdown tables.

    python scripts/bench.py            # everything (a few minutes)
    python scripts/bench.py --quick    # smaller sizes, for a smoke test

1. onnxruntime time of the original model (onnxruntime expands SequenceMap
   itself) and of the lowered one, for n elements of uniform shape (float[16])
   and of variable shape (float[1..32]), with a hand-written Scan over the
   same data as the reference. The uniform split -> map -> concat is lowered
   by the vectorize strategy (what auto picks for its body), and again by the
   scan strategy (what a body that cannot be batched gets). Each model takes one tensor and returns one: the
   elements come from SplitToSequence and go back through ConcatFromSequence,
   so every model pays the same input and output conversion.
2. The pass's own time against a plain onnx_ir load + save of the same model,
   for models with many SequenceMap nodes; and ``python -m lowering IN OUT``
   as a process against an onnx_ir load + save process, paired runs; and, on
   2,000 maps, ``-q`` against the default summary and ``-q --report`` (CPU
   time, the three in turns): what the summary and the report cost.
3. Peak RSS of ``python -m lowering`` on a model with 1 GiB of external
   weights, written to the same folder and to another one.
5. Accumulator loops (issue 34): TorchScript's exports of lists built in a
   loop (tests/data/torch/lists_*.onnx) against their lowered forms, at
   1,000 iterations (``--accumulators`` runs this table alone).
4. Down-conversion (``--target-opset``): TargetOpsetPass on the largest
   committed torch export, against onnx load + save of the same file; and on
   chains of n blocks that each need an adapter and an expansion, to show
   the time grows linearly with the node count.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper

import lowering
from lowering.passes import lower_sequence_maps as sequence_map
from lowering.runtimes.sessions import open_session

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tests.helpers import peak_rss_mib, weighted_model

H = '<ir_version: 8, opset_import: ["" : 17]>'

UNIFORM = (
    H
    + """
g (float[N,16] x, float[16] w) => (float[M] y) {
  parts = SplitToSequence <axis = 0, keepdims = 0> (x)
  mapped = SequenceMap <body = body (float[16] a) => (float[16] c) {
        aw = Mul(a, w)
        c = Relu(aw)
      }> (parts)
  y = ConcatFromSequence <axis = 0> (mapped)
}"""
)

# The same, with a second reader of the mapped sequence: the map cannot
# become a Scan, and takes the uniform strategy (a Loop with scan outputs).
UNIFORM_LOOP = UNIFORM.replace("=> (float[M] y)", "=> (float[M] y, int64 count)").replace(
    "  y = ConcatFromSequence", "  count = SequenceLength(mapped)\n  y = ConcatFromSequence"
)

VARIABLE = (
    H
    + """
g (float[T] x, int64[N] sizes, float w) => (float[M] y) {
  parts = SplitToSequence <axis = 0> (x, sizes)
  mapped = SequenceMap <body = body (float[K] a) => (float[K] c) {
        aw = Mul(a, w)
        c = Relu(aw)
      }> (parts)
  y = ConcatFromSequence <axis = 0> (mapped)
}"""
)

SCAN = (
    H
    + """
g (float[N,16] x, float[16] w) => (float[N,16] y) {
  y = Scan <num_scan_inputs = 1, body = body (float[16] a) => (float[16] c) {
        aw = Mul(a, w)
        c = Relu(aw)
      }> (x)
}"""
)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return open_session(model.SerializeToString())


def _medians_ms(sessions: list[ort.InferenceSession], feeds: dict, repeats: int) -> list[float]:
    """Median time of each session, the runs interleaved so that load drift hits
    all alike. A short run just after a long one (the original's, first in
    ``sessions``, which leaves the caches cold) is slower for it, whichever
    model it is: each timed run of the others follows an untimed run of the
    same session, so that none inherits another's caches."""
    for session in sessions:
        session.run(None, feeds)  # warm up
    times: list[list[float]] = [[] for _ in sessions]
    for repetition in range(repeats):
        for k in range(len(sessions)):
            index = (k + repetition) % len(sessions)
            if index:
                sessions[index].run(None, feeds)
            start = time.perf_counter()
            sessions[index].run(None, feeds)
            times[index].append(time.perf_counter() - start)
    return [statistics.median(spent) * 1000 for spent in times]


def _reps(n: int, repeats: int) -> int:
    """Fewer repetitions for the long runs, never fewer than 7."""
    return max(7, repeats // (1 + n // 2000))


@contextlib.contextmanager
def _without_vectorizing():
    """The scan and uniform strategies, which a body that cannot be batched gets,
    measured on the same body: the vectorize strategy declines every map."""
    original = sequence_map.AUTO
    sequence_map.AUTO = tuple(form for form in original if form.name != "vectorize")
    try:
        yield
    finally:
        sequence_map.AUTO = original


def _lowered(model: onnx.ModelProto, strategy: str) -> onnx.ModelProto:
    """``model`` lowered, checking that its map got ``strategy``."""
    with contextlib.ExitStack() as stack:
        if strategy in ("scan", "uniform"):
            stack.enter_context(_without_vectorizing())
        ir_model = ir.serde.deserialize_model(model)
        rewrites = lowering.lower_in_place(ir_model)
    chosen = {r.strategy for r in rewrites if r.op_type == "SequenceMap"}
    assert chosen == {strategy}, (chosen, strategy)
    return ir.serde.serialize_model(ir_model)


def runtime_table(sizes: list[int], repeats: int) -> str:
    rng = np.random.default_rng(0)
    scan = _session(onnx.parser.parse_model(SCAN))
    uniform_kinds = {
        "uniform, split -> map -> concat (vectorize)": (UNIFORM, "vectorize"),
        "uniform, split -> map -> concat (scan)": (UNIFORM, "scan"),
        "uniform, sequence also read elsewhere (uniform)": (UNIFORM_LOOP, "uniform"),
    }
    kinds = {**uniform_kinds, "variable (loop)": (VARIABLE, "loop")}
    pairs = {
        label: (_session(model), _session(_lowered(model, strategy)))
        for label, (model, strategy) in (
            (label, (onnx.parser.parse_model(text), strategy))
            for label, (text, strategy) in kinds.items()
        )
    }
    rows = [
        (
            "| shapes (strategy) | n | original (ms) | lowered (ms) | Scan (ms) "
            "| original / lowered | lowered / Scan |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        feeds = {
            "x": rng.standard_normal((n, 16)).astype(np.float32),
            "w": rng.standard_normal(16).astype(np.float32),
        }
        for label in uniform_kinds:
            original, lowered_ms, floor = _medians_ms(
                [*pairs[label], scan], feeds, _reps(n, repeats)
            )
            rows.append(
                f"| {label} | {n:,} | {original:.2f} | {lowered_ms:.2f} | {floor:.2f} "
                f"| {original / lowered_ms:.1f}x | {lowered_ms / floor:.2f}x |"
            )
    for n in sizes:
        sizes_ = rng.integers(1, 33, n).astype(np.int64)
        feeds = {
            "x": rng.standard_normal(int(sizes_.sum())).astype(np.float32),
            "sizes": sizes_,
            "w": np.array(0.5, np.float32),
        }
        original, lowered_ms = _medians_ms(pairs["variable (loop)"], feeds, _reps(n, repeats))
        rows.append(
            f"| variable (loop) | {n:,} | {original:.2f} | {lowered_ms:.2f} | - "
            f"| {original / lowered_ms:.2f}x | - |"
        )
    return "\n".join(rows)


RAGGED_HEAD = H.replace('"" : 17', '"" : 18')

# split by lengths 1..64 -> map(x * w + b) -> concat, or the sequence returned.
RAGGED = (
    RAGGED_HEAD
    + """
g (float[T,8] x, int64[N] sizes, float[8] w, float b) => (float[T,8] y) {
  parts = SplitToSequence <axis = 0> (x, sizes)
  mapped = SequenceMap <body = body (float[K,8] a) => (float[K,8] c) {
        aw = Mul(a, w)
        c = Add(aw, b)
      }> (parts)
  y = ConcatFromSequence <axis = 0> (mapped)
}"""
)
RAGGED_SEQUENCE = RAGGED.replace("=> (float[T,8] y)", "=> (seq(float[K,8]) mapped)").replace(
    "  y = ConcatFromSequence <axis = 0> (mapped)\n", ""
)
RAGGED_BEST = (
    RAGGED_HEAD
    + """
g (float[T,8] x, int64[N] sizes, float[8] w, float b) => (float[T,8] y) {
  aw = Mul(x, w)
  y = Add(aw, b)
}"""
)
RAGGED_SEQUENCE_BEST = RAGGED_BEST.replace("=> (float[T,8] y)", "=> (seq(float[K,8]) s)").replace(
    "  y = Add(aw, b)", "  y = Add(aw, b)\n  s = SplitToSequence <axis = 0> (y, sizes)"
)

# split by lengths -> map(ReduceSum over the rows) -> stacked: a segment sum.
RAGGED_SUM = (
    RAGGED_HEAD
    + """
g (float[T,8] x, int64[N] sizes, float[8] w, float b) => (float[N,8] y) {
  parts = SplitToSequence <axis = 0> (x, sizes)
  rows = Constant <value = int64[1] {0}> ()
  mapped = SequenceMap <body = body (float[K,8] a) => (float[8] c) {
        c = ReduceSum <keepdims = 0> (a, rows)
      }> (parts)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (mapped)
}"""
)
#: How the by-hand segment sum expands each row's segment id to X's shape, for
#: rows of floats and for 1-D elements (:func:`_rows_of`).
SEGMENT_INDEX_2D = """  column = Unsqueeze(ids, one)
  index = Expand(column, shape)
  width = Shape <start = 1> (x)
  out_shape = Concat <axis = 0> (n, width)"""
SEGMENT_INDEX_1D = """  index = Identity(ids)
  out_shape = Identity(n)"""

# The segment sum written by hand: each row's segment from the lengths, then
# ScatterElements with reduction = add into zeros.
RAGGED_SUM_BEST = (
    RAGGED_HEAD
    + """
g (float[T,8] x, int64[N] sizes, float[8] w, float b) => (float[N,8] y) {
  zero = Constant <value = int64 {0}> ()
  one = Constant <value = int64[1] {1}> ()
  starts = CumSum <exclusive = 1> (sizes, zero)
  shape = Shape(x)
  total = Shape <end = 1> (x)
  room = Add(total, one)
  marks0 = ConstantOfShape <value = int64[1] {0}> (room)
  n = Shape(sizes)
  ones = ConstantOfShape <value = int64[1] {1}> (n)
  marks = ScatterElements <axis = 0, reduction = "add"> (marks0, starts, ones)
  begin = Constant <value = int64[1] {0}> ()
  cut = Slice(marks, begin, total)
  counted = CumSum(cut, zero)
  ids = Sub(counted, one)
  column = Unsqueeze(ids, one)
  index = Expand(column, shape)
  width = Shape <start = 1> (x)
  out_shape = Concat <axis = 0> (n, width)
  zeros = ConstantOfShape <value = float[1] {0}> (out_shape)
  y = ScatterElements <axis = 0, reduction = "add"> (zeros, index, x)
}"""
)

# split (uniform) -> map(Neg) -> map(Abs) -> concat; by hand Abs(Neg(x)).
CHAINED = (
    RAGGED_HEAD
    + """
g (float[N,16] x) => (float[N,16] y) {
  parts = SplitToSequence <axis = 0, keepdims = 0> (x)
  m1 = SequenceMap <body = b1 (float[16] a) => (float[16] c) { c = Neg(a) }> (parts)
  m2 = SequenceMap <body = b2 (float[16] a) => (float[16] c) { c = Abs(a) }> (m1)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (m2)
}"""
)
CHAINED_RAGGED = (
    RAGGED_HEAD
    + """
g (float[T,8] x, int64[N] sizes) => (float[T,8] y) {
  parts = SplitToSequence <axis = 0> (x, sizes)
  m1 = SequenceMap <body = b1 (float[K,8] a) => (float[K,8] c) { c = Neg(a) }> (parts)
  m2 = SequenceMap <body = b2 (float[K,8] a) => (float[K,8] c) { c = Abs(a) }> (m1)
  y = ConcatFromSequence <axis = 0> (m2)
}"""
)
CHAINED_BEST = (
    RAGGED_HEAD
    + """
g (float[N,16] x) => (float[N,16] y) {
  m = Neg(x)
  y = Abs(m)
}"""
)
CHAINED_RAGGED_BEST = CHAINED_BEST.replace("float[N,16] x", "float[T,8] x, int64[N] sizes").replace(
    "float[N,16] y", "float[T,8] y"
)


def _rows_of(text: str, width: int) -> str:
    """A ragged model of the bench (written with rows of 8 floats) with rows of
    ``width`` floats, or with 1-D elements for ``width`` 0 (the issue's setting:
    ``SplitToSequence`` of a vector; onnxruntime broadcasts ``[T,1] * [1]``
    200x slower than ``[T] * [1]``, so a row of one float measures that)."""
    if width == 0:
        text = text.replace(SEGMENT_INDEX_2D, SEGMENT_INDEX_1D).replace("float[8] w", "float w")
        for pattern in ("float[T,8]", "float[K,8]", "float[N,8]"):
            text = text.replace(pattern, pattern.replace(",8]", "]"))
        return text
    for pattern in ("float[T,8]", "float[K,8]", "float[N,8]"):
        text = text.replace(pattern, pattern.replace(",8]", f",{width}]"))
    return text.replace("float[8] w", f"float[{width}] w")


RAGGED_KINDS = {
    "ragged x * w + b, concat read": (RAGGED, RAGGED_BEST),
    "ragged x * w + b, sequence returned": (RAGGED_SEQUENCE, RAGGED_SEQUENCE_BEST),
    "ragged ReduceSum over the rows": (RAGGED_SUM, RAGGED_SUM_BEST),
    "chained Neg -> Abs, uniform": (CHAINED, CHAINED_BEST),
    "chained Neg -> Abs, ragged": (CHAINED_RAGGED, CHAINED_RAGGED_BEST),
}


def ragged_table(
    sizes: list[int], repeats: int, runs: int = 3, widths: tuple[int, ...] = (0, 8)
) -> str:
    """Ragged and chained maps: the original, the lowered model and the form
    written by hand, side by side in one process; each cell the median of
    ``runs`` medians (a run: the three interleaved, ``repeats`` times).

    Ragged elements are 1-D (``widths`` 0, the issue's setting) or rows of
    ``width`` floats: with 8, the body itself is eight times the work, which
    bounds what any form can gain.
    """
    rng = np.random.default_rng(0)
    sessions = {}
    for label, (text, best) in RAGGED_KINDS.items():
        for width in (16,) if "uniform" in label else widths:  # the uniform chain: rows of 16
            model = onnx.parser.parse_model(_rows_of(text, width))
            sessions[(label, width)] = [
                _session(model),
                _session(_lowered(model, "vectorize")),
                _session(onnx.parser.parse_model(_rows_of(best, width))),
            ]
    rows = [
        (
            "| map | element | n | original (ms) | lowered (ms) | by hand (ms) "
            "| original / lowered | lowered / by hand |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        lengths = rng.integers(1, 65, n).astype(np.int64)
        for (label, width), trio in sessions.items():
            if "uniform" in label:
                feeds = {"x": rng.standard_normal((n, 16)).astype(np.float32)}
            else:
                ragged_feeds = {
                    "x": rng.standard_normal(
                        (int(lengths.sum()), width)[: 2 if width else 1]
                    ).astype(np.float32),
                    "sizes": lengths,
                    "w": np.asarray(rng.standard_normal((width,)[: 1 if width else 0]), np.float32),
                    "b": np.array(0.5, np.float32),
                }
                names = {i.name for i in trio[0].get_inputs()}
                feeds = {k: v for k, v in ragged_feeds.items() if k in names}
            _check_same(trio, feeds, label)
            medians = [_medians_ms(trio, feeds, _reps(n, repeats)) for _ in range(runs)]
            original, lowered_ms, best = (
                statistics.median(m[i] for m in medians) for i in range(3)
            )
            rows.append(
                f"| {label} | {_element(label, width)} | {n:,} | {original:.2f} | {lowered_ms:.2f} | {best:.2f} "
                f"| {original / lowered_ms:.1f}x | {lowered_ms / best:.2f}x |"
            )
    return "\n".join(rows)


def _element(label: str, width: int) -> str:
    if "uniform" in label:
        return f"[{width}]"
    return f"[K,{width}]" if width else "[K]"


def _check_same(sessions: list[ort.InferenceSession], feeds: dict, label: str) -> None:
    """The three give one answer (a segment sum up to float rounding)."""
    answers = [session.run(None, feeds)[0] for session in sessions]
    for answer in answers[1:]:
        for got, want in zip(
            answer if isinstance(answer, list) else [answer],
            answers[0] if isinstance(answers[0], list) else [answers[0]],
            strict=True,
        ):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=label)


def many_maps_model(count: int, inputs: int = 1, dim: int | str = 16) -> onnx.ModelProto:
    """``count`` SequenceMap nodes, each of its own result a graph output, over
    ``inputs`` graph-input sequences in turn (maps over one sequence share its
    stack), of elements ``[dim]``: a name makes each map's plan ask which
    symbolic dims its graph's inputs declare."""
    nodes, outputs = [], []
    for i in range(count):
        body = helper.make_graph(
            [helper.make_node("Neg", ["a"], ["c"])],
            f"body_{i}",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [dim])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [dim])],
        )
        source = "x" if inputs == 1 else f"x{i % inputs}"
        nodes.append(helper.make_node("SequenceMap", [source], [f"y{i}"], body=body, name=f"m{i}"))
        outputs.append(helper.make_tensor_sequence_value_info(f"y{i}", TensorProto.FLOAT, [dim]))
    names = ["x"] if inputs == 1 else [f"x{k}" for k in range(inputs)]
    sequences = [helper.make_tensor_sequence_value_info(n, TensorProto.FLOAT, [dim]) for n in names]
    graph = helper.make_graph(nodes, "g", sequences, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def pass_time_table(
    counts: list[int],
    folder: pathlib.Path,
    repeats: int = 3,
    distinct: bool = False,
    dim: int | str = 16,
) -> str:
    """The lowering pass against an onnx_ir load + save of the same model, in
    one process, in turns; each cell the median of ``repeats`` pairs.

    Each timed region starts after ``gc.collect()``: a model is cyclic
    garbage once dropped (its nodes and graphs point at each other), and
    without it the pass of the second pair paid for collecting the first
    pair's lowered model, which a program lowering one model never does.
    With ``distinct``, each map reads a sequence of its own (no stack shared);
    ``dim``: the elements' one dim (a name: symbolic)."""
    rows = [
        "| SequenceMap nodes | load + save (s) | lowering pass (s) | pass / (load + save), median of pairs |",
        "|---:|---:|---:|---:|",
    ]
    for count in counts:
        path = folder / f"maps_{count}{'_distinct' if distinct else ''}_{dim}.onnx"
        onnx.save(many_maps_model(count, count if distinct else 1, dim), path)
        pairs = []
        for _ in range(repeats):
            gc.collect()
            start = time.perf_counter()
            ir.save(ir.load(path), folder / "copy.onnx")
            load_save = time.perf_counter() - start
            model = ir.load(path)
            gc.collect()
            start = time.perf_counter()
            lowering.lower_in_place(model)
            pairs.append((load_save, time.perf_counter() - start))
            del model
        base = statistics.median(p[0] for p in pairs)
        pass_time = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        rows.append(
            f"| {count:,} | {base:.2f} | {pass_time:.2f} | {ratio:.2f}x ({repeats} pairs) |"
        )
    return "\n".join(rows)


def _process_seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cli_time_table(count: int, folder: pathlib.Path, repeats: int) -> str:
    """``python -m lowering IN OUT`` against an onnx_ir load + save process, on
    ``count`` maps: each a fresh process, the two run in turns (so that load
    drift hits both alike), the median of ``repeats`` pairs."""
    path = folder / f"cli_maps_{count}.onnx"
    onnx.save(many_maps_model(count), path)
    load_save = [
        sys.executable,
        "-c",
        f"import onnx_ir as ir; ir.save(ir.load({str(path)!r}), {str(folder / 'copy.onnx')!r})",
    ]
    cli = [sys.executable, "-m", "lowering", "-q", str(path), str(folder / "cli_out.onnx")]
    pairs = [(_process_seconds(load_save), _process_seconds(cli)) for _ in range(repeats)]
    base = statistics.median(p[0] for p in pairs)
    lowered = statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[1] / p[0] for p in pairs)
    return "\n".join(
        [
            "| SequenceMap nodes | load + save process (s) | CLI (s) | CLI / (load + save), median of pairs |",
            "|---:|---:|---:|---:|",
            f"| {count:,} | {base:.2f} | {lowered:.2f} | {ratio:.2f}x ({repeats} pairs) |",
        ]
    )


def _process_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of one child process: what a loaded machine
    leaves least disturbed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def summary_cost_table(count: int, folder: pathlib.Path, repeats: int) -> str:
    """What the summary and ``--report`` add to a run on ``count`` maps: ``-q``
    (no summary, no report), the default summary, and ``-q --report``, each a
    fresh process, the three run in turns (paired), the median of ``repeats``
    CPU times and of the ratios to ``-q`` within each turn."""
    path = folder / f"summary_maps_{count}.onnx"
    onnx.save(many_maps_model(count), path)
    base = [sys.executable, "-m", "lowering", str(path), str(folder / "summary_out.onnx")]
    variants = {
        "-q": [*base, "-q"],
        "default summary": base,
        "-q --report": [*base, "-q", "--report", str(folder / "report.json")],
    }
    turns = [
        {name: _process_cpu(command) for name, command in variants.items()} for _ in range(repeats)
    ]
    rows = [
        f"| {count:,} maps | CPU s (median of {repeats}) | / -q (median of paired ratios) |",
        "|---|---:|---:|",
    ]
    for name in variants:
        spent = statistics.median(turn[name] for turn in turns)
        ratio = statistics.median(turn[name] / turn["-q"] for turn in turns)
        rows.append(f"| `{name}` | {spent:.2f} | {ratio:.2f}x |")
    return "\n".join(rows)


TORCH_DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def opset_chain_model(blocks: int) -> onnx.ModelProto:
    """``blocks`` x (ReduceMean-18 with an axes input, Gelu-20, Reshape-19 allowzero)."""
    lines = []
    previous = "x"
    for i in range(blocks):
        lines.append(f"m{i} = ReduceMean <keepdims = 1> ({previous}, axes)")
        lines.append(f"g{i} = Gelu(m{i})")
        lines.append(f"v{i} = Reshape <allowzero = 1> (g{i}, shape)")
        previous = f"v{i}"
    text = (
        '<ir_version: 10, opset_import: ["" : 20]>\n'
        "g (float[2,3] x) => (float[2,1] y) {\n"
        "  axes = Constant <value = int64[1] {1}> ()\n"
        "  shape = Constant <value = int64[2] {2, 1}> ()\n  "
        + "\n  ".join(lines)
        + f"\n  y = Identity({previous})\n}}"
    )
    return onnx.parser.parse_model(text)


def down_conversion_table(counts: list[int], folder: pathlib.Path) -> str:
    from lowering.passes.target_opset import TargetOpsetPass

    rows = [
        "| model | nodes | load + save (s) | to opset 13 (s) | to opset 11 (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    exports = sorted(TORCH_DATA.glob("corpus_*.onnx"), key=lambda p: len(onnx.load(p).graph.node))
    models = [(exports[-1].stem, exports[-1])]
    for count in counts:
        path = folder / f"chain_{count}.onnx"
        onnx.save(opset_chain_model(count), path)
        models.append((f"{count:,} x (ReduceMean, Gelu, Reshape)", path))
    for label, path in models:
        load_save = _timed(lambda p=path: onnx.save(onnx.load(p), folder / "copy.onnx"))
        times = []
        for target in (13, 11):
            model = ir.load(path)
            lowering.lower_in_place(model)  # the SequenceMaps first, as the CLI does
            times.append(_timed(lambda m=model, t=target: TargetOpsetPass(t)(m)))
        nodes = len(onnx.load(path).graph.node)
        rows.append(f"| {label} | {nodes:,} | {load_save:.3f} | {times[0]:.3f} | {times[1]:.3f} |")
    return "\n".join(rows)


def rss_table(folder: pathlib.Path, gib: float) -> str:
    source = weighted_model(folder, max(1, round(gib * 16)), 16 * 1024 * 1024, real=False)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    rows = ["| run | peak RSS (MiB) |", "|---|---:|"]
    for label, target in (
        ("output beside the input", folder / "out.onnx"),
        ("output in another folder", elsewhere / "out.onnx"),
    ):
        rss = peak_rss_mib([sys.executable, "-m", "lowering", "-q", str(source), str(target)])
        rows.append(f"| {gib:g} GiB of weights, {label} | {rss:.0f} |")
    return "\n".join(rows)


#: The TorchScript list exports timed, and their inputs for n iterations.
ACCUMULATOR_FEEDS = {
    "stack (append, torch.stack)": ("stack", lambda rng, n: [rng.standard_normal((n, 16))]),
    "prepend (insert(0), torch.stack)": ("prepend", lambda rng, n: [rng.standard_normal((n, 16))]),
    "ragged (x[i, :i+1], torch.cat)": (
        "cat_ragged",
        lambda rng, n: [rng.standard_normal((n, n))],
    ),
    "NMS-style (if keep: append)": (
        "nms",
        lambda rng, n: [rng.standard_normal((n, 4)), rng.random(n)],
    ),
    "two lists (stack and ragged cat)": (
        "several",
        lambda rng, n: [rng.standard_normal((n, n))],
    ),
    "xs[i] in a second loop, len(xs)": (
        "second_loop",
        lambda rng, n: [rng.standard_normal((n, 16))],
    ),
}


def accumulator_table(sizes: list[int], repeats: int) -> str:
    """The original list loops against their lowered forms, in onnxruntime."""
    data = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch"
    rng = np.random.default_rng(0)
    rows = [
        "| list loop (form) | n | original (ms) | lowered (ms) | original / lowered |",
        "|---|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for label, (name, make) in ACCUMULATOR_FEEDS.items():
            model = onnx.load(data / f"lists_{name}.onnx")
            ir_model = ir.serde.deserialize_model(model)
            rewrites = lowering.lower_in_place(ir_model)
            lowered_proto = ir.serde.serialize_model(ir_model)
            target = "default"
            if not any(r.op_type == "Loop" for r in rewrites):
                # onnxruntime keeps ragged lists as written: time the form of a
                # runtime without sequences (the Concat), slower, which is why
                ir_model = ir.serde.deserialize_model(model)
                rewrites = lowering.lower_in_place(ir_model, runtime="openvino")
                lowered_proto = ir.serde.serialize_model(ir_model)
                target = "--runtime openvino"
            forms = {r.strategy for r in rewrites if r.op_type == "Loop"}
            assert forms, f"{name}: no accumulator rewritten"
            sessions = [_session(model), _session(lowered_proto)]
            names = [i.name for i in model.graph.input]
            feeds = {k: v.astype(np.float32) for k, v in zip(names, make(rng, n), strict=True)}
            _check_same(sessions, feeds, label)
            original, lowered_ms = _medians_ms(sessions, feeds, _reps(n, repeats))
            rows.append(
                f"| {label} ({'+'.join(sorted(forms))}, {target}) | {n:,} | {original:.2f} "
                f"| {lowered_ms:.2f} | {original / lowered_ms:.1f}x |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument(
        "--accumulators", action="store_true", help="only the accumulator loops' table"
    )
    parser.add_argument(
        "--only-summary", action="store_true", help="only the summary's cost (the 2,000-map case)"
    )
    args = parser.parse_args()
    if args.accumulators:
        print("## Accumulator loops (median)\n")
        print(accumulator_table([100] if args.quick else [1000], 7 if args.quick else 15))
        return
    if args.only_summary:
        with tempfile.TemporaryDirectory() as folder:
            print(
                summary_cost_table(
                    200 if args.quick else 2000, pathlib.Path(folder), 3 if args.quick else 5
                )
            )
        return
    sizes = [10, 100] if args.quick else [10, 100, 1000, 10000]
    counts = [10, 100] if args.quick else [100, 1000, 10000]
    opset_counts = [10, 100] if args.quick else [100, 1000, 3000]
    print(f"# lowering benchmarks, {time.strftime('%Y-%m-%d')}")
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"onnxruntime {ort.__version__} (1 thread), onnx {onnx.__version__}, "
        f"onnx-ir {ir.__version__}\n"
    )
    print("## onnxruntime time per run (median)\n")
    print(runtime_table(sizes, repeats=7 if args.quick else 15), "\n")
    print("## Ragged and chained maps (median of 3 paired runs)\n")
    print(ragged_table([100] if args.quick else [1000, 4000, 10000], 7 if args.quick else 9), "\n")
    with tempfile.TemporaryDirectory() as folder:
        print("## The pass's own time\n")
        print(pass_time_table(counts, pathlib.Path(folder)), "\n")
        print("## The pass's own time, each map over a sequence of its own\n")
        print(pass_time_table(counts, pathlib.Path(folder), distinct=True), "\n")
        print("## The same, over elements of a symbolic dim\n")
        print(pass_time_table(counts, pathlib.Path(folder), distinct=True, dim="N"), "\n")
        print("## The CLI against a load + save process\n")
        print(cli_time_table(counts[-1], pathlib.Path(folder), 3 if args.quick else 5), "\n")
        print("## What the summary and --report cost\n")
        print(
            summary_cost_table(
                200 if args.quick else 2000, pathlib.Path(folder), 3 if args.quick else 5
            ),
            "\n",
        )
        print("## Down-conversion with --target-opset\n")
        print(down_conversion_table(opset_counts, pathlib.Path(folder)), "\n")
        print("## Peak memory with large external weights\n")
        print(rss_table(pathlib.Path(folder), 0.0625 if args.quick else 1.0), "\n")
    print("## Accumulator loops (median)\n")
    print(accumulator_table([100] if args.quick else [1000], 7 if args.quick else 15))


if __name__ == "__main__":
    main()
