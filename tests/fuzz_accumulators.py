"""Feature ``accumulators`` of the structural fuzzer: lists built in a Loop (issue 34).

One Loop over the rows of ``x`` (float [N, 3]) grows one or two sequences
from SequenceEmpty, the way exporters write ``list.append``: elements of one
shape (a row, a scalar; a pool, a PRelu or a Squeeze that ONNX sizes
wrong, the pool computed in the body or before the loop) or ragged (the first i + 1 rows, or values);
appended or prepended; every iteration or under an If (every other
iteration, the first always); the loop run for N trips or stopped by its
condition. Each sequence is read after the loop by one to three of:
ConcatFromSequence (new_axis 0 or 1, any valid axis), SequenceAt at 0 or -1,
SequenceAt in a second Loop at i and n - 1 - i, SequenceLength, or the graph
returning it. The oracle is onnxruntime on the original (N >= 1, so that no
concat is of nothing); a returned sequence makes a one-line refusal an
allowed outcome (``--runtime`` without sequences, opset 11).
"""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import strategies as st

from tests.fuzz_check import run
from tests.fuzz_models import Gen, Picker, StructuredModel

UNARY = ["Neg", "Relu", "Sigmoid", "Abs", "Tanh"]


class AccumulatorModel(Picker):
    """Draws one accumulator-loop model; see the module docstring."""

    def __init__(self, gen: Gen):
        self.gen = gen
        self.rng = np.random.default_rng(gen.draw(st.integers(0, 2**32 - 1)))
        self.notes: list[str] = []
        self.before: list[str] = []  # nodes before the loop an element reads
        # An element ONNX sizes wrong: onnxruntime's optimizer folds by ONNX's
        # size, so the oracle (and the check) run without it.
        self.wrong = False

    def element(self, j: int) -> tuple[str, str, int, bool]:
        """Nodes defining ``y{j}`` in the body, its kind, rank and whether it is ragged."""
        kinds = ["row", "row", "scalar", "prefix", "values", "pooled", "pooled_before"]
        kind = self.pick([*kinds, "prelu", "squeezed"])
        op = self.pick(UNARY)
        if kind == "row":
            return f"y{j} = {op} (row)", kind, 1, False
        self.wrong = self.wrong or kind in ("pooled", "pooled_before", "prelu", "squeezed")
        if kind == "prelu":  # ONNX sizes it [3], onnxruntime [2, 3] (the slope's rank)
            slope = f"slope{j} = Constant <value = float[2, 3] {{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}}> ()"
            return f"{slope}\n    y{j} = PRelu (row, slope{j})", kind, 2, False
        if kind == "squeezed":  # empty axes: ONNX keeps [3, 1], onnxruntime gives [3]
            column = (
                f"col{j} = Reshape (row, column)\n    none{j} = Constant <value = int64[0] {{}}> ()"
            )
            return f"{column}\n    y{j} = Squeeze (col{j}, none{j})", kind, 1, False
        if kind.startswith("pooled"):
            # ONNX sizes this pool [1, 1, 3], onnxruntime [1, 1, 2] (its last
            # window would start in the padding): pinned where it is stacked.
            pool = (
                f"img{j} = Reshape ({'row' if kind == 'pooled' else f'first{j}'}, three_d)\n"
                f"    pool{j} = MaxPool <ceil_mode = 1, kernel_shape = [3], pads = [2, 2], "
                f"strides = [3]> (img{j})"
            )
            if kind == "pooled":
                return f"{pool}\n    y{j} = {op} (pool{j})", kind, 3, False
            self.before.append(f"first{j} = Gather <axis = 0> (x, zero_c)\n  {pool}")
            return f"y{j} = {op} (pool{j})", kind, 3, False
        if kind == "scalar":
            return f"y{j} = ReduceSum <keepdims = 0> (row)", kind, 0, False
        upto = f"i1_{j} = Unsqueeze (i, zero)\n    end{j} = Add (i1_{j}, one)"
        if kind == "prefix":
            slice_ = f"p{j} = Slice (x, zero, end{j}, zero)\n    y{j} = {op} (p{j})"
            return f"{upto}\n    {slice_}", kind, 2, True
        return f"{upto}\n    y{j} = Slice (flat, zero, end{j}, zero)", kind, 1, True

    def readers(self, j: int, rank: int, ragged: bool) -> tuple[list[str], list[str], bool]:
        """Reader nodes of ``s{j}``, the outputs they define (typed), and whether it is returned."""
        s = f"s{j}"
        nodes: list[str] = []
        outputs: list[str] = []
        kinds = ["concat", "concat", "concat", "at", "at", "loop_at", "loop_at", "length"]
        kinds += ["length", "returned"]
        chosen = {self.pick(kinds) for _ in range(self.integer(1, 3))}
        returned = "returned" in chosen
        if returned:
            outputs.append(f"seq(float) {s}")
        if "concat" in chosen:
            new_axis = 0 if ragged else (1 if rank == 0 else self.integer(0, 1))
            top = rank + new_axis
            axis = 0 if ragged else self.integer(-top, top - 1)
            nodes.append(f"c{j} = ConcatFromSequence <axis = {axis}, new_axis = {new_axis}> ({s})")
            outputs.append(_typed(f"c{j}", top if not ragged else rank))
            self.notes.append(f"s{j}: ConcatFromSequence(axis={axis}, new_axis={new_axis})")
        if "at" in chosen:
            at = self.pick([0, -1])
            nodes.append(
                f"k{j} = Constant <value = int64 {{{at}}}> ()\n  a{j} = SequenceAt ({s}, k{j})"
            )
            outputs.append(_typed(f"a{j}", rank))
            self.notes.append(f"s{j}: SequenceAt({at})")
        if "length" in chosen:
            nodes.append(f"n{j} = SequenceLength ({s})")
            outputs.append(f"int64 n{j}")
            self.notes.append(f"s{j}: SequenceLength")
        if "loop_at" in chosen:
            zeros = "ReduceSum <keepdims = 0> (q)" if rank else "Identity (q)"
            nodes.append(
                f"""len{j} = SequenceLength ({s})
  z{j} = Constant <value = float {{0}}> ()
  r{j} = Loop (len{j}, t, z{j}) <body = r{j}b (int64 k, bool c, float acc) => (bool c2, float acc2) {{
    one1 = Constant <value = int64 {{1}}> ()
    last = Sub (len{j}, one1)
    back = Sub (last, k)
    u = SequenceAt ({s}, k)
    w = SequenceAt ({s}, back)
    us = ReduceSum <keepdims = 0> (u)
    ws = ReduceSum <keepdims = 0> (w)
    q = Mul (us, ws)
    part = {zeros}
    acc2 = Add (acc, part)
    c2 = Identity (c)
  }}>"""
            )
            outputs.append(f"float r{j}")
            self.notes.append(f"s{j}: SequenceAt(k), SequenceAt(n - 1 - k) in a second Loop")
        return nodes, outputs, returned

    def build(self) -> StructuredModel | None:
        count = self.integer(1, 2)
        conditional = self.integer(0, 2) == 0
        stopping = self.coin()
        body, inserts, body_inputs, body_outputs, inits = [], [], [], [], []
        readers, outputs, returned = [], [], False
        for j in range(count):
            text, kind, rank, ragged = self.element(j)
            body.append(text)
            prepend = self.integer(0, 3) == 0
            position = ", zero_s" if prepend else ""
            inserts.append(f"acc{j}_next = SequenceInsert (acc{j}, y{j}{position})")
            body_inputs.append(f"seq(float) acc{j}")
            body_outputs.append(f"seq(float) acc{j}_{'out' if conditional else 'next'}")
            inits.append("e")
            more, outs, back = self.readers(j, rank, ragged)
            readers += more
            outputs += outs
            returned = returned or back
            self.notes.append(f"s{j}: {kind} elements, {'prepended' if prepend else 'appended'}")
        if conditional:
            self.notes.append("appended under an If (even iterations)")
            then = "\n".join(inserts)
            els = "\n".join(f"acc{j}_kept = Identity (acc{j})" for j in range(count))
            then_outs = ", ".join(f"seq(float) acc{j}_next" for j in range(count))
            else_outs = ", ".join(f"seq(float) acc{j}_kept" for j in range(count))
            grown = ", ".join(f"acc{j}_out" for j in range(count))
            body.append(
                f"""two = Constant <value = int64 {{2}}> ()
    parity = Mod (i, two)
    even = Equal (parity, zero_s)
    {grown} = If (even) <then_branch = th () => ({then_outs}) {{
      {then}
    }}, else_branch = el () => ({else_outs}) {{
      {els}
    }}>"""
            )
        else:
            body += inserts
        if stopping:
            self.notes.append("stopped by its condition")
            trip, start = "big", "go"
            body.append(
                "one_s = Constant <value = int64 {1}> ()\n    next = Add (i, one_s)\n    c2 = Less (next, m)"
            )
        else:
            trip, start = "m", "t"
            body.append("c2 = Identity (c)")
        names = ", ".join(f"s{j}" for j in range(count))
        body_text = "\n    ".join(body)
        text = f"""<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => ({", ".join(outputs)}) {{
  n = Shape <start = 0, end = 1> (x)
  m = Squeeze (n)
  t = Constant <value = bool {{1}}> ()
  big = Constant <value = int64 {{100}}> ()
  zero_c = Constant <value = int64 {{0}}> ()
  go = Greater (m, zero_c)
  e = SequenceEmpty <dtype = 1> ()
  minus = Constant <value = int64[1] {{-1}}> ()
  flat = Reshape (x, minus)
  three_d = Constant <value = int64[3] {{1, 1, 3}}> ()
  column = Constant <value = int64[2] {{3, 1}}> ()
  {chr(10).join("  " + b for b in self.before)}
  {names} = Loop ({trip}, {start}, {", ".join(inits)}) <body = b (int64 i, bool c, {", ".join(body_inputs)}) => (bool c2, {", ".join(body_outputs)}) {{
    zero = Constant <value = int64[1] {{0}}> ()
    one = Constant <value = int64[1] {{1}}> ()
    zero_s = Constant <value = int64 {{0}}> ()
    row = Gather <axis = 0> (x, i)
    {body_text}
  }}>
  {chr(10).join(readers)}
}}"""
        model = onnx.parser.parse_model(text)
        _untyped_elements(model)
        feeds = {"x": self.rng.standard_normal((self.integer(1, 5), 3)).astype(np.float32)}
        try:
            onnx.checker.check_model(model, full_check=True)
            expected = run(model, feeds, exact=self.wrong)
        except Exception:  # noqa: BLE001 -- a draw onnxruntime refuses: drawn again
            return None
        return StructuredModel(
            model,
            feeds,
            expected,
            self.gen.f,
            self.pick([None, 11, 13]),
            ["accumulators: " + "; ".join(self.notes)],
            runtime=self.pick([None, "openvino", "tract"]),
            refusable=returned,
            exact=self.wrong,
        )


def _typed(name: str, rank: int) -> str:
    """``name`` as a float graph output of ``rank`` dims, each a symbol of its own."""
    dims = ",".join(f"{name}_{k}" for k in range(rank))
    return f"float[{dims}] {name}"


def _untyped_elements(model: onnx.ModelProto) -> None:
    """ONNX text's ``seq(float)`` declares scalar elements: declare no shape."""
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.type.HasField("sequence_type"):
                value.type.sequence_type.elem_type.tensor_type.ClearField("shape")
        for node in graph.node:
            graphs += [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]


def accumulator_example(gen: Gen) -> StructuredModel:
    """``accumulators``: see the module docstring (drawn again until onnxruntime runs it)."""
    while True:
        example = AccumulatorModel(gen).build()
        if example is not None:
            return example
