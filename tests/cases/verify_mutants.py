"""The mutants of issue 12, shared by tests/test_verify.py and tests/test_verify_options.py.

Each is a correct lowering made wrong only on some inputs; the default
schedule must find every one (exit 1).
"""

from __future__ import annotations

import onnx

import lowering
from tests.helpers import parse

MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N]) x, float[N] t) => (seq(float[N]) y) {
  y = SequenceMap <body = body (float[N] a, float[N] b) => (float[N] c) { c = Mul(a, b) }> (x, t)
}"""


def _mutant(outer: str, inner: str) -> onnx.ModelProto:
    """MAP's correct Loop lowering with the body's element ``c`` recomputed.

    ``outer`` runs first in the main graph (it reads x and t and defines
    ``cond``); ``inner`` computes ``c`` in the body from ``c_ok`` (the right
    element), ``a`` (the element of x) and ``cond``.
    """
    model = lowering.lower(parse(MAP), strategy="loop")
    outer_nodes = onnx.parser.parse_graph(
        f"outer (seq(float[N]) x, float[N] t) => (bool[] cond) {{ {outer} }}"
    ).node
    inner_nodes = onnx.parser.parse_graph(
        f"inner (float[N] a, float[N] c_ok, bool[] cond) => (float[N] c) {{ {inner} }}"
    ).node
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend([*outer_nodes, *nodes])
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    body = loop.attribute[0].g
    mul = next(n for n in body.node if n.op_type == "Mul")
    mul.output[0] = "c_ok"
    position = list(body.node).index(mul) + 1
    for offset, node in enumerate(inner_nodes):
        body.node.insert(position + offset, node)
    return model


def _wrong_when(condition: str) -> onnx.ModelProto:
    """Adds 1 to every element when ``condition`` (main graph, defines cond) holds."""
    return _mutant(
        condition,
        "one = Constant <value = float {1.0}> () bad = Add(c_ok, one) c = Where(cond, bad, c_ok)",
    )


def _wrong_declared_shape(dims: str) -> onnx.ModelProto:
    model = lowering.lower(parse(MAP), strategy="loop")
    elem = model.graph.output[0].type.sequence_type.elem_type.tensor_type
    elem.shape.CopyFrom(onnx.TensorShapeProto())
    for dim in dims.split(","):
        elem.shape.dim.add().CopyFrom(
            onnx.TensorShapeProto.Dimension(dim_value=int(dim))
            if dim.isdigit()
            else onnx.TensorShapeProto.Dimension(dim_param=dim)
        )
    return model


LENGTH = "n = SequenceLength(x)"
DIM = "s = Shape(t)"
# MAP with a second output, [2N] long, declared [M].
MAP_AND_CONCAT = MAP.replace("=> (seq(float[N]) y)", "=> (seq(float[N]) y, float[M] z)").replace(
    "(x, t)\n", "(x, t)\n  z = Concat <axis = 0> (t, t)\n"
)


def _declared_other_dim() -> onnx.ModelProto:
    """The original's output is [2N] and declared [M]; B declares [N], which t binds."""
    model = lowering.lower(parse(MAP_AND_CONCAT), strategy="loop")
    z = model.graph.output[1].type.tensor_type.shape.dim[0]
    z.Clear()
    z.dim_param = "N"
    return model


MUTANTS = {
    "wrong only for sequences of length >= 4": lambda: _wrong_when(
        f"{LENGTH} k = Constant <value = int64 {{4}}> () cond = GreaterOrEqual(n, k)"
    ),
    "wrong only at length 2": lambda: _wrong_when(
        f"{LENGTH} k = Constant <value = int64 {{2}}> () cond = Equal(n, k)"
    ),
    "wrong only when a tensor dim is 1": lambda: _wrong_when(
        f"{DIM} k = Constant <value = int64[1] {{1}}> () e = Equal(s, k) "
        "z = Constant <value = int64[1] {0}> () cond = Squeeze(e, z)"
    ),
    "wrong only when a dim is >= 5": lambda: _wrong_when(
        f"{DIM} k = Constant <value = int64[1] {{5}}> () e = GreaterOrEqual(s, k) "
        "z = Constant <value = int64[1] {0}> () cond = Squeeze(e, z)"
    ),
    "NaN only where x > 3": lambda: _mutant(
        "cond = Constant <value = bool {1}> ()",
        "three = Constant <value = float {3.0}> () big = Greater(a, three) "
        "nan = Constant <value = float {nan}> () c = Where(big, nan, c_ok)",
    ),
    "wrong only for large values": lambda: _mutant(
        "cond = Constant <value = bool {1}> ()",
        "limit = Constant <value = float {10000.0}> () m = Abs(a) big = Greater(m, limit) "
        "zero = Constant <value = float {0.0}> () c = Where(big, zero, c_ok)",
    ),
    "wrong only for NaN inputs": lambda: _mutant(
        "cond = Constant <value = bool {1}> ()",
        "isnan = IsNaN(a) zero = Constant <value = float {0.0}> () c = Where(isnan, zero, c_ok)",
    ),
    "wrong only for infinite inputs": lambda: _mutant(
        "cond = Constant <value = bool {1}> ()",
        "isinf = IsInf(a) zero = Constant <value = float {0.0}> () c = Where(isinf, zero, c_ok)",
    ),
    "output declared with a wrong rank": lambda: _wrong_declared_shape("N,1"),
    "output declared with a wrong static dim": lambda: _wrong_declared_shape("3"),
    "output declared with a dim that disagrees with the inputs": lambda: _declared_other_dim(),
}


# 1. The input schedule. Each kind of input the runs before issue 35 never
# drew has a wrong rewrite that only that kind shows: (A, B, whether the
# first 17 runs, the old schedule, miss it). Every one is caught on every seed.
HEAD = '<ir_version: 9, opset_import: ["" : 20]>\n'
KINDS = {
    # abs(x) as sqrt(x*x) overflows past 1.8e19
    "huge": ("g (float[N] x) => (float[N] y) { y = Abs (x) }",
             "g (float[N] x) => (float[N] y) { q = Mul (x, x)\n y = Sqrt (q) }", True),
    # a subnormal flushed to 0 before a reciprocal
    "tiny": ("g (float[N] x) => (float[N] y) { y = Reciprocal (x) }",
             """g (float[N] x) => (float[N] y) {
                  c = Constant <value = float {1.17549435e-38}> ()
                  z = Constant <value = float {0.0}> ()
                  a = Abs (x)
                  below = Less (a, c)
                  zero = Equal (x, z)
                  nonzero = Not (zero)
                  small = And (below, nonzero)
                  w = Where (small, z, x)
                  y = Reciprocal (w) }""", True),
    # a one-pass variance cancels on a large mean and a small spread
    "offset": ("""g (float[N] x) => (float[1] y) {
                    m = ReduceMean (x)
                    d = Sub (x, m)
                    dd = Mul (d, d)
                    y = ReduceMean (dd) }""",
               """g (float[N] x) => (float[1] y) {
                    m = ReduceMean (x)
                    xx = Mul (x, x)
                    mxx = ReduceMean (xx)
                    mm = Mul (m, m)
                    y = Sub (mxx, mm) }""", True),
    # round half to even written as floor(x + 0.5)
    "ties": ("g (float[N] x) => (float[N] y) { y = Round (x) }",
             """g (float[N] x) => (float[N] y) {
                  h = Constant <value = float {0.5}> ()
                  xh = Add (x, h)
                  y = Floor (xh) }""", False),
    # a string compare that ignores case
    "case": ("""g (string[N] s) => (bool[N] y) {
                  c = Constant <value = string {"onnx"}> ()
                  y = Equal (s, c) }""",
             """g (string[N] s) => (bool[N] y) {
                  c = Constant <value = string {"onnx"}> ()
                  low = StringNormalizer <case_change_action = "LOWER", locale = "C"> (s)
                  y = Equal (low, c) }""", False),  # False: B fails on an empty s
    # a masked softmax whose all -inf row is 0 instead of NaN
    "masked": ("g (float[N,M] x) => (float[N,M] y) { y = Softmax (x) }",
               """g (float[N,M] x) => (float[N,M] y) {
                    n = Constant <value = float {-inf}> ()
                    z = Constant <value = float {0.0}> ()
                    last = Constant <value = int64[1] {-1}> ()
                    top = ReduceMax <keepdims = 1> (x, last)
                    masked = Equal (top, n)
                    sm = Softmax (x)
                    y = Where (masked, z, sm) }""", False),
    # a transpose that is wrong only at rank 3
    "rank3": ("g (float x) => (float y) { y = Transpose (x) }",
              """g (float x) => (float y) {
                   sh = Shape (x)
                   r = Size (sh)
                   three = Constant <value = int64 {3}> ()
                   is3 = Equal (r, three)
                   y = If (is3) <
                     then_branch = t () => (float u) {
                       one = Constant <value = float {1.0}> ()
                       tx = Transpose (x)
                       u = Add (tx, one) },
                     else_branch = e () => (float v) { v = Transpose (x) }> }""", True),
    # elements truncated to 64
    "wide": ("g (float[N] x) => (float[N] y) { y = Identity (x) }",
             """g (float[N] x) => (float[N] y) {
                  s = Constant <value = int64[1] {0}> ()
                  e = Constant <value = int64[1] {64}> ()
                  y = Slice (x, s, e) }""", True),
    # a length counted in int8 (130 becomes -126)
    "long": ("g (seq(float[N]) s) => (int64 y) { y = SequenceLength (s) }",
             """g (seq(float[N]) s) => (int64 y) {
                  n = SequenceLength (s)
                  n8 = Cast <to = 3> (n)
                  y = Cast <to = 7> (n8) }""", True),
    # two untied sequences: a rewrite that takes the longer one's length
    "shorter": ("""g (seq(float[N]) x, seq(float[N]) z) => (int64 y) {
                     y = SequenceLength (z) }""",
                """g (seq(float[N]) x, seq(float[N]) z) => (int64 y) {
                     nx = SequenceLength (x)
                     nz = SequenceLength (z)
                     y = Max (nx, nz) }""", True),
}  # fmt: skip


def kind_models(kind: str) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """A and B of input kind ``kind``: B is wrong only on inputs of that kind."""
    text_a, text_b, _ = KINDS[kind]
    models = parse(HEAD + text_a), parse(HEAD + text_b)
    for model in models:  # ``float x`` is a scalar in ONNX text: of unknown rank here
        branches = [a.g for node in model.graph.node for a in node.attribute if a.HasField("g")]
        for graph in [model.graph, *branches]:
            for info in [*graph.input, *graph.output]:
                if kind == "rank3":
                    info.type.tensor_type.ClearField("shape")
    return models


# For the time limit (tests/test_verify_limits.py): B's Loop has no trip
# count and goes on while i < 2 (3 trips), or forever once the sum of x is
# NaN; A's Loop stops at 3 trips. Both compute x + 6.
_ENDLESS = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) {{
  t = ReduceSum <keepdims = 0> (x)
  nan = IsNaN (t)
  three = Constant <value = int64 {{3}}> ()
  two_trips = Constant <value = int64 {{2}}> ()
  go = Constant <value = bool {{1}}> ()
  y = Loop ({trips}, go, x) <body = body (int64 i, bool c, float[N] v) => (bool co, float[N] vo) {{
    below = Less (i, two_trips)
    co = {cond}
    two = Constant <value = float {{2.0}}> ()
    vo = Add (v, two)
  }}>
}}
"""


def endless() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    a = parse(_ENDLESS.format(trips="three", cond="Identity (c)"))
    b = parse(_ENDLESS.format(trips='""', cond="Or (below, nan)"))
    return a, b
