"""``--optimize`` never folds an overridable initializer (issue 10, family 9).

An initializer that is also a graph input is a default the caller may
override; onnxscript's optimizer folds it like a constant (``Add(pos, len)``
becomes ``len``). The lowering hides those values from it.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.cli import main
from tests.cases.fuzz_regressions import FUZZ, fuzz_feeds
from tests.helpers import assert_same, lowered, parse, run, session, without_provenance

OVERRIDABLE = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[2]) s, float[2] t, int64 pos, float[2] scale)
  => (seq(float[2]) y, seq(float[2]) m, float[2] k, float[2] q)
  <int64 pos = {0}, int64 len = {1}, float[2] scale = {2.0, 2.0}> {
  [the_map] m = SequenceMap <body = body (float[2] e) => (float[2] r) { r = Mul(e, scale) }> (s)
  p = Add(pos, len)
  [insert] y = SequenceInsert(s, t, p)
  k = Mul(scale, scale)
  twice = Add(len, len)
  twice_f = Cast <to = 1> (twice)
  q = Mul(t, twice_f)
}"""


def _oracle(s, t, pos, scale):
    y = list(s)
    y.insert(pos + 1, t)
    return [y, [e * scale for e in s], scale * scale, t * 2]


@pytest.mark.parametrize("pos", [None, -1, -3, 1])
@pytest.mark.parametrize("scale", [None, 5.0])
def test_overridden_initializers_still_count_after_optimize(pos, scale):
    result = lowered(parse(OVERRIDABLE), optimize=True)
    graph_inputs = {i.name for i in result.graph.input}
    assert {"pos", "scale"} <= graph_inputs
    assert {"pos", "scale"} <= {i.name for i in result.graph.initializer}
    rng = np.random.default_rng(0)
    s = [rng.standard_normal(2).astype(np.float32) for _ in range(3)]
    t = np.full(2, 9, np.float32)
    feeds = {"s": s, "t": t}
    if pos is not None:
        feeds["pos"] = np.array(pos, np.int64)
    if scale is not None:
        feeds["scale"] = np.full(2, scale, np.float32)
    expected = _oracle(
        s, t, 0 if pos is None else pos, np.full(2, 2.0 if scale is None else scale, np.float32)
    )
    assert_same(run(result, feeds), expected)


def test_the_command_line_keeps_them_too(tmp_path):
    onnx.save(parse(OVERRIDABLE), tmp_path / "in.onnx")
    assert main(["-q", "--optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    s = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    t = np.full(2, 9, np.float32)
    feeds = {"s": s, "t": t, "pos": np.array(-1, np.int64)}
    assert_same(run(onnx.load(tmp_path / "out.onnx"), feeds)[0], [t, *s])
    feeds["pos"] = np.array(1, np.int64)
    assert_same(run(onnx.load(tmp_path / "out.onnx"), feeds)[0], [*s, t])


def test_true_constants_are_still_folded():
    """Only overridable values are hidden: ``Add(len, len)`` of a plain initializer folds."""
    result = lowering.lower(parse(OVERRIDABLE), optimize=True)
    adds = [list(n.input) for n in result.graph.node if n.op_type == "Add"]
    assert [a for a in adds if "len" in a] == [["pos", "len"]]
    muls = [list(n.input) for n in result.graph.node if n.op_type == "Mul"]
    assert ["scale", "scale"] in muls  # scale is overridable: not folded


def test_a_loop_keeps_its_empty_condition_slot():
    """onnxscript's optimizer trims ``Loop(M, "")`` to ``Loop(M)``; it is put back."""
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[T,2] xs) => (int64[?,?] out) {
          s = SequenceEmpty <dtype = 1> ()
          m = Constant <value = int64 {1}> ()
          out = Loop (m, "") <body = lb (int64 i, bool c) => (bool c2, int64[?] counts) {
            counts = Scan (xs) <body = sb (float[2] row) => (int64 n) {
              y = SequenceMap <body = b (float[R] e) => (float[R] v) { v = Identity(e) }> (s)
              n = SequenceLength(y)
            }, num_scan_inputs = 1>
            c2 = Identity(c)
          }>
        }"""
    )
    result = lowered(model, optimize=True)
    xs = np.zeros((3, 2), np.float32)
    assert_same(run(result, {"xs": xs}), [np.zeros((1, 3), np.int64)])


# Empty sequences that declare different element shapes. A map over an
# empty sequence of static length becomes ``SequenceEmpty``, typed as its
# output; every element shape is true of an empty sequence, so two such
# outputs may declare shapes that contradict each other. onnxscript's
# common-subexpression elimination merges equal SequenceEmpty nodes (it
# compares op, inputs and attributes, not types), and the readers of the one
# removed then read the other's declaration: an Identity that returns a
# scalar sequence as seq(float[1]), a SequenceAt typed by the wrong shape.
# element shape: the body computing it from e: float[3]
EMPTY_ELEMENTS = {
    "": "r = ReduceSum <keepdims = 0> (e)",  # a scalar
    "[1]": "r = ReduceSum <keepdims = 1> (e)",
    "[3]": "r = Identity(e)",
    "[2,3]": "r = Concat <axis = 0> (row, row)",
}
# Who else reads an empty sequence: (outputs, nodes). ``k`` is fed False, so
# the guarded SequenceAt never runs (it would fail on an empty sequence),
# but the optimizer cannot fold the If away, and the type checker reads it.
EMPTY_READERS = {
    "outputs": ("", ""),
    "guarded_read": (
        ", float{second} z",
        """z = If (k) <
             then_branch = tb () => (float{second} z1) {{ z1 = SequenceAt(y2, zero) }},
             else_branch = eb () => (float{second} z2) {{ z2 = Identity(fallback) }}>""",
    ),
    # The model's own SequenceEmpty comes first, so it is the one kept: not a
    # graph output, the graph output y1 takes it over, renamed, with its type.
    "own_empty_first": (
        ", float[5] z",
        """z = If (k) <
             then_branch = tb () => (float[5] z1) {{ z1 = SequenceAt(own, zero) }},
             else_branch = eb () => (float[5] z2) {{ z2 = Identity(fallback5) }}>""",
    ),
}
EMPTY_PAIRS = [("", "[1]"), ("[1]", "[3]"), ("[3]", "[2,3]"), ("[2,3]", "")]


def _empty_model(first: str, second: str, reader: str) -> onnx.ModelProto:
    outputs, nodes = EMPTY_READERS[reader]
    zeros = {"": "{0.0}", "[1]": "{0.0}", "[3]": "{0.0, 0.0, 0.0}", "[2,3]": "{0,0,0,0,0,0}"}
    own = "own = SequenceEmpty <dtype = 1> ()" if reader == "own_empty_first" else ""
    return parse(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[3] t, bool k) => (seq(float{first}) y1, seq(float{second}) y2{outputs.format(second=second)})
          <seq(float[5]) own, float{second} fallback = {zeros[second]},
           float[5] fallback5 = {{1, 2, 3, 4, 5}}> {{
          {own}
          zero = Constant <value = int64 {{0}}> ()
          s = SequenceEmpty <dtype = 1> ()
          y1 = SequenceMap <body = b1 (float[3] e) => (float{first} r) {{
            axes = Constant <value = int64[1] {{0}}> ()
            row = Unsqueeze(e, axes)
            {EMPTY_ELEMENTS[first]}
          }}> (s)
          y2 = SequenceMap <body = b2 (float[3] e) => (float{second} r) {{
            axes = Constant <value = int64[1] {{0}}> ()
            row = Unsqueeze(e, axes)
            {EMPTY_ELEMENTS[second]}
          }}> (s)
          {nodes.format(second=second)}
        }}"""
    )


@pytest.mark.parametrize("reader", list(EMPTY_READERS))
@pytest.mark.parametrize(("first", "second"), EMPTY_PAIRS)
def test_equal_empty_sequences_of_different_declared_shapes(first, second, reader):
    model = _empty_model(first, second, reader)
    result = lowered(model, optimize=True)
    # Optimized, not put back for failing the checker (as it is where the
    # merged empty sequence's readers read its declaration).
    rewrites = lowering.lower_in_place(ir.serde.deserialize_model(model), optimize=True)
    assert not [r for r in rewrites if r.op_type == "Optimize"], rewrites
    # The interface is the one declared, output by output.
    assert [o.type for o in result.graph.output] == [o.type for o in model.graph.output]
    feeds = {"t": np.ones(3, np.float32), "k": np.array(False)}
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    guarded = {"outputs": [], "guarded_read": ["fallback"], "own_empty_first": ["fallback5"]}
    assert_same(run(result, feeds), [[], [], *(initializers[n] for n in guarded[reader])])


# Shrunk by scripts/fuzz.py (20,000-example runs of 2026-11-30): bodies naming
# a dim per run (a function inlined per call, an If branch unrolled per
# element) whose copies read elements of different sizes.
NAMED_DIMS = ["named_dims_function_inlined", "named_dims_function_inlined_2"]
NAMED_DIMS += ["named_dims_unrolled_branch"]


@pytest.mark.parametrize("name", NAMED_DIMS)
def test_copies_of_a_body_do_not_share_the_dims_it_names(name):
    """The optimizer spread one named dim to elements of different sizes, and onnxruntime
    reused one buffer for them ("Shape mismatch attempting to re-use buffer")."""
    model = onnx.load(FUZZ / f"{name}.onnx")
    feeds = fuzz_feeds(name)
    expected = run(lowering.lower(model), feeds)
    result = lowering.lower(model, optimize=True)
    onnx.checker.check_model(result, full_check=True)
    assert_same(run(result, feeds), expected)


# -- zero-sized dims through the shape ops (issue 21) ----------------------------
#
# onnxscript's Flatten2Reshape writes Flatten(x) as Reshape(x, [0, -1]) or
# [d0, d1] from the output's dims, reading a 0 as "copy": refused or wrong
# for a zero-sized dim; its MaterializeReshapeShape writes -1 next to a 0.
# Each op the vectorizer batches, on elements with a zero-sized dim, from a
# sequence of run-time length (vectorized), a split of static length
# (unrolled: every copy sees static shapes), and in the general Loop; each
# result passes the checker with full_check, without the optimizer being
# refused (the sound rule set, not the fallback, makes it valid), and runs in
# onnxruntime as numpy computes it.
def _ints(values) -> str:
    return f"int64[{len(values)}] {{{', '.join(str(v) for v in values)}}}"


def _reshape(target, allowzero=0):
    attrs = f" <allowzero = {allowzero}>" if allowzero else ""
    return f"k = Constant <value = {_ints(target)}> ()\n r = Reshape{attrs} (e, k)"


def _with_input(op: str, values) -> str:
    return f"k = Constant <value = {_ints(values)}> ()\n r = {op}(e, k)"


# name: (element shape, body computing r from e, numpy)
ZERO_DIM_OPS = {
    "Reshape [-1]": ((2, 0), _reshape([-1]), lambda a: a.reshape(-1)),
    "Reshape [0, 0] (copies)": ((2, 0), _reshape([0, 0]), lambda a: a),
    "Reshape [0, -1] (copy 3, infer 0)": ((3, 0), _reshape([0, -1]), lambda a: a.reshape(3, 0)),
    "Reshape [2, -1]": ((2, 0, 3), _reshape([2, -1]), lambda a: a.reshape(2, 0)),
    "Reshape allowzero [3, 0]": ((0, 3), _reshape([3, 0], 1), lambda a: a.reshape(3, 0)),
    "Reshape allowzero [-1, 1]": ((0,), _reshape([-1, 1], 1), lambda a: a.reshape(0, 1)),
    "Flatten axis 0": ((2, 0, 3), "r = Flatten <axis = 0> (e)", lambda a: a.reshape(1, 0)),
    "Flatten axis 1": ((0, 3), "r = Flatten (e)", lambda a: a.reshape(0, 3)),
    "Flatten axis 1 of [2,0,3]": ((2, 0, 3), "r = Flatten (e)", lambda a: a.reshape(2, 0)),
    "Flatten axis 2": ((2, 0, 3), "r = Flatten <axis = 2> (e)", lambda a: a.reshape(0, 3)),
    "Flatten axis -1": ((2, 3, 0), "r = Flatten <axis = -1> (e)", lambda a: a.reshape(6, 0)),
    "Flatten axis = rank": ((2, 0, 3), "r = Flatten <axis = 3> (e)", lambda a: a.reshape(0, 1)),
    "Flatten axis 0 of [0]": ((0,), "r = Flatten <axis = 0> (e)", lambda a: a.reshape(1, 0)),
    "Squeeze": ((0, 1, 3), _with_input("Squeeze", [1]), lambda a: a.reshape(0, 3)),
    "Unsqueeze": ((0, 3), _with_input("Unsqueeze", [0]), lambda a: a.reshape(1, 0, 3)),
    "Expand [0,1] to [1,4]": ((0, 1), _with_input("Expand", [1, 4]), lambda a: a.reshape(0, 4)),
    "Expand [2,1] to [2,0]": ((2, 1), _with_input("Expand", [2, 0]), lambda a: a[:, :0]),
    "Tile [0,3] by [2,3]": ((0, 3), _with_input("Tile", [2, 3]), lambda a: a.reshape(0, 9)),
    "Tile [2,3] by [0,1]": ((2, 3), _with_input("Tile", [0, 1]), lambda a: a[:0]),
}
ZERO_DIM_SOURCES = ["input", "split static", "loop"]


def _zero_dim_model(name: str, source: str, n: int) -> onnx.ModelProto:
    element, body, numpy_op = ZERO_DIM_OPS[name]
    dims = ",".join(str(d) for d in element)
    out = ",".join(str(d) for d in numpy_op(np.zeros(element, np.float32)).shape)
    lead = str(n) if source == "split static" else "N"
    if source == "input":
        inputs, sequence = f"seq(float[{dims}]) s", ""
    else:
        inputs = f"float[{lead}{',' if dims else ''}{dims}] x"
        sequence = "s = SplitToSequence <axis = 0, keepdims = 0> (x)"
    return parse(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g ({inputs}) => (seq(float[{out}]) ys) {{
          {sequence}
          ys = SequenceMap <body = b (float[{dims}] e) => (float[{out}] r) {{
            {body}
          }}> (s)
        }}"""
    )


def _lowered_and_checked(model: onnx.ModelProto, **options) -> tuple[onnx.ModelProto, str | None]:
    """Lowered by the pipeline (its result says whether the optimizer's result
    was refused, and why), then checked as :func:`tests.helpers.lowered` checks."""
    working = ir.serde.deserialize_model(model)
    not_optimized = lowering.pipeline(**options)(working).not_optimized
    result = ir.serde.serialize_model(working)
    onnx.checker.check_model(result, full_check=True)
    return result, not_optimized


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("source", ZERO_DIM_SOURCES)
@pytest.mark.parametrize("name", list(ZERO_DIM_OPS))
@pytest.mark.sweep
def test_zero_sized_dims_through_shape_ops_after_optimize(name, source, n):
    element, _, numpy_op = ZERO_DIM_OPS[name]
    model = _zero_dim_model(name, source, n)
    strategy = "loop" if source == "loop" else "auto"
    result, not_optimized = _lowered_and_checked(model, optimize=True, strategy=strategy)
    assert not_optimized is None
    elements = [np.full(element, float(i), np.float32) for i in range(n)]
    feeds = {"s": elements} if source == "input" else {"x": np.zeros((n, *element), np.float32)}
    if source != "input":
        elements = list(feeds["x"])
    # onnxruntime's own graph optimizer is off: in a Loop body it computes
    # Expand(e: [2,1], [2,0]) as [2,1] (lowered or not, optimize or not).
    outputs = session(result, optimize=False).run(None, feeds)
    assert_same(outputs, [[numpy_op(e) for e in elements]])


def _computed_targets(opset: int) -> onnx.ModelProto:
    """z = Reshape<allowzero=1>(x, [N, 0]) (Flatten before opset 14) and
    v = Reshape(w, [N, 6]), N read from x."""
    zero = "z = Reshape <allowzero = 1> (x, z_target)" if opset >= 14 else "z = Flatten(x)"
    return parse(
        f"""<ir_version: 7, opset_import: ["" : {opset}]>
        g (float[N,2,0] x, float[N,2,3] w, seq(float[2]) s, float[2] t, int64 pos)
          => (float[N,0] z, float[N,6] v, seq(float[2]) y) {{
          shape = Shape(x)
          i = Constant <value = int64[1] {{0}}> ()
          n = Gather(shape, i)
          zero = Constant <value = int64[1] {{0}}> ()
          six = Constant <value = int64[1] {{6}}> ()
          z_target = Concat <axis = 0> (n, zero)
          v_target = Concat <axis = 0> (n, six)
          {zero}
          v = Reshape(w, v_target)
          y = SequenceInsert(s, t, pos)
        }}"""
    )


@pytest.mark.parametrize("opset", [13, 17])
def test_a_computed_reshape_target_is_materialized_only_without_a_zero(opset):
    """onnxscript's MaterializeReshapeShape writes the output's shape as the target,
    -1 for its one unknown dim, with allowzero = 1: [-1, 0] is refused, and
    allowzero does not exist before opset 14. Here the target of z ([N, 0])
    stays computed; that of v becomes [-1, 6], without allowzero."""
    model = _computed_targets(opset)
    result, not_optimized = _lowered_and_checked(model, optimize=True)
    assert not_optimized is None
    reshapes = {n.output[0]: n for n in result.graph.node if n.op_type == "Reshape"}
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in result.graph.initializer}
    assert initializers[reshapes["v"].input[1]].tolist() == [-1, 6]
    assert not reshapes["v"].attribute
    if opset >= 14:
        assert reshapes["z"].input[1] not in initializers
    x = np.zeros((3, 2, 0), np.float32)
    w = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    feeds = {"x": x, "w": w, "s": [np.ones(2, np.float32)], "t": np.zeros(2, np.float32)}
    feeds["pos"] = np.array(0)
    z, v, y = run(result, feeds)
    assert_same([z, v], [x.reshape(3, 0), w.reshape(3, 6)])
    assert_same(y, [feeds["t"], *feeds["s"]])


def test_with_the_sound_rules_the_optimizer_is_onnxscripts():
    """lowering.passes.optimize runs onnxscript's optimizer pass for pass, so that it can leave
    rules out; given onnxscript's default rules, it writes what ``optimize`` writes."""
    from onnxscript import optimizer, rewriter

    from lowering.passes.optimize import _run_onnxscript_optimizer

    for text in [OVERRIDABLE, _zero_dim_model("Flatten axis 1 of [2,0,3]", "split static", 3)]:
        model = parse(text) if isinstance(text, str) else text
        ours = ir.serde.deserialize_model(lowering.lower(model))
        theirs = ir.serde.deserialize_model(lowering.lower(model))
        _run_onnxscript_optimizer(ours, rewriter._DEFAULT_REWRITE_RULES)
        optimizer.optimize(theirs, onnx_shape_inference=False)
        assert onnx.printer.to_text(ir.serde.serialize_model(ours)) == onnx.printer.to_text(
            ir.serde.serialize_model(theirs)
        )


def test_an_optimized_model_the_checker_refuses_is_not_kept(monkeypatch, tmp_path, capsys):
    """The last line of defence: with onnxscript's default rules (Flatten2Reshape
    among them), Flatten<axis = 0> of a [0] element becomes Reshape(e, [1, 0]),
    whose 0 copies a dim e does not have; the checker refuses it, so the
    model is kept unoptimized, and the summary says why."""
    from onnxscript import rewriter

    import lowering.passes.optimize

    monkeypatch.setattr(
        lowering.passes.optimize,
        "_sound_rewrite_rules",
        lambda: list(rewriter._DEFAULT_REWRITE_RULES),
    )
    model = _zero_dim_model("Flatten axis 0 of [0]", "split static", 3)
    result, refused = _lowered_and_checked(model, optimize=True)
    assert refused is not None
    assert "fails the ONNX checker" in refused and "Invalid position of 0" in refused
    unoptimized = lowering.lower(model)  # the same but for lowering.options
    assert onnx.printer.to_text(without_provenance(result)) == onnx.printer.to_text(
        without_provenance(unoptimized)
    )
    x = np.zeros((3, 0), np.float32)
    assert_same(run(result, {"x": x}), [[np.zeros((1, 0), np.float32)] * 3])
    onnx.save(model, tmp_path / "in.onnx")
    assert main(["--optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    assert "--optimize: the optimized model fails the ONNX checker" in capsys.readouterr().err


ZERO_WIDTH_SLICE = """<ir_version: 8, opset_import: ["" : {opset}]>
g (seq(float[1,0]) s) => (seq(float[1,0]) m) {{
  m = SequenceMap <body = body (float[1,0] e) => (float[1,0] c) {{
        zero = Constant <value = int64[1] {{0}}> ()
        one = Constant <value = int64[1] {{1}}> ()
        empty = Slice(e, zero, zero, one)
        c = Concat <axis = 1> (e, empty)
      }}> (s)
}}"""


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("n", [1, 3])
def test_a_zero_width_slice_is_not_made_a_split(opset, n):
    """onnxscript's SlicesSplit matches one Slice for both its roots and writes
    Split-18's num_outputs at any opset: below 18 the checker refused the
    optimized model (found by the fuzz run of seed 2301)."""
    model = parse(ZERO_WIDTH_SLICE.format(opset=opset))
    result, not_optimized = _lowered_and_checked(model, optimize=True, strategy="loop")
    assert not_optimized is None
    feeds = {"s": [np.zeros((1, 0), np.float32)] * n}
    assert_same(run(result, feeds), run(model, feeds))


# -- Slice bounds read two ways (fuzz seed 5303) ----------------------------------
#
# Unrolled, a body's Slice of its element's Size has constant inputs, and
# onnxscript folds it by onnx.reference, which reads bounds stepping back
# from and to before the start (or to INT64_MAX) as numpy does, taking
# nothing where onnxruntime takes element 0: the folded [] disagreed with
# the declared [1] and the optimized model was refused (or, where nothing
# declared it, would have computed [] silently).
SLICED_SIZES = """<ir_version: 10, opset_import: ["" : 21]>
g (int64[5,0] a, int64[5,0] b) => (seq(int64[?]) ys, int64[?,?] shapes) {{
  s = SequenceConstruct (a, b)
  ys, ks = SequenceMap <body = body (int64[5,0] e) => (int64[?] y, int64[1] k) {{
    size = Size (e)
    last = Constant <value = int64[1] {{-1}}> ()
    u = Unsqueeze (size, last)
    start = Constant <value = int64[1] {{{start}}}> ()
    end = Constant <value = int64[1] {{{end}}}> ()
    axis = Constant <value = int64[1] {{0}}> ()
    step = Constant <value = int64[1] {{{step}}}> ()
    y = Slice (u, start, end, axis, step)
    k = Shape (y)
  }}> (s)
  shapes = ConcatFromSequence <axis = -1, new_axis = 1> (ks)
}}"""


@pytest.mark.parametrize(
    ("start", "end", "step", "disputed"),
    [
        (-(2**40), -4, -(2**63), True),  # the fuzz run's
        (-5, -5, -1, True),
        (-2, -3, -2, True),
        (-(2**31), -(2**31), -1, True),
        (-1, -5, -1, False),
        (0, 1, 1, False),
    ],
)
def test_a_slice_read_two_ways_is_kept_and_the_rest_folded(start, end, step, disputed):
    model = parse(SLICED_SIZES.format(start=start, end=end, step=step))
    result, not_optimized = _lowered_and_checked(model, optimize=True)
    assert not_optimized is None
    assert ("Slice" in {n.op_type for n in result.graph.node}) == disputed
    feeds = {"a": np.zeros((5, 0), np.int64), "b": np.zeros((5, 0), np.int64)}
    assert_same(run(result, feeds), run(model, feeds))
