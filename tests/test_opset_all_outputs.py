"""Every relabel and every adapter, run in onnxruntime on ALL of its outputs.

The entries are read from the tables themselves: each allowlisted pair
(:data:`lowering.opset.allowlist.RELABEL`) in both directions, each adapter
(:data:`lowering.opset.registry.ADAPTERS`), and for each op the longest
chain of such steps from its opset-11 version, both ways. For each one the op's
model builder (:data:`BUILDERS`) writes small models at the source opset in
which every output the op has at that version is a graph output (masks,
indices, running statistics, the optional ones too), with typical and edge
attributes. Each is converted with ``lowering.lower(model, target_opset=N)``
and run, original and converted, in onnxruntime on the same inputs; every
output must match (exactly for integers and booleans, to 1e-5 for floats).

A case may instead expect a refusal (``refused``): then the conversion must
raise LoweringError, on one line, saying why. A conversion refused because
onnxruntime has no kernel for the converted form passes only if that
refusal is needed: converted with the kernel check off, the model must fail
in onnxruntime. A converted model that onnxruntime cannot run fails. A new
table entry without a builder fails ("no case for ..."); where onnxruntime
has no kernel for the original, the case is skipped and says so.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator

import numpy as np
import onnx
import onnx.helper
import onnx.shape_inference
import onnx_ir as ir
import onnxruntime as ort
import pytest

import lowering
from lowering.defaults import MIN_OPSET
from lowering.irutils.op_facts import REDUCE_OPS
from lowering.opset import plan, schemas
from lowering.opset.allowlist import RELABEL
from lowering.opset.registry import ADAPTERS
from tests.helpers import assert_same, parse

MIN = MIN_OPSET


@dataclasses.dataclass(frozen=True)
class Entry:
    """One table entry, in one direction: a relabel pair or an adapter."""

    kind: str  # "relabel", "adapter", or "span" (a chain of table steps, end to end)
    op: str
    old: int
    new: int
    direction: str  # "down": new -> old; "up": old -> new

    @property
    def source(self) -> int:
        """The opset the model declares: the entry's starting schema is in force there."""
        return self.new if self.direction == "down" else max(self.old, MIN)

    @property
    def target(self) -> int:
        return max(self.old, MIN) if self.direction == "down" else self.new

    @property
    def version(self) -> int:
        """The op's schema version in the original model."""
        return self.new if self.direction == "down" else self.old

    @property
    def other(self) -> int:
        """The op's schema version in the converted model."""
        return self.old if self.direction == "down" else self.new

    @property
    def label(self) -> str:
        return f"{self.op}-{self.version} -> {self.op}-{self.other}"

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.op}-{self.old}-{self.new}-{self.direction}"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    inputs: str  # the graph's typed inputs: "float[2,3] x, int64[1] k"
    outputs: str  # the graph's outputs, untyped (shape inference types them): "y, m"
    body: str
    feeds: tuple = ()  # (name, array) pairs; other inputs are random by type
    # The conversion must be refused with a one-line reason holding this text.
    refused: str | None = None
    # onnxruntime cannot run the original: this model, at the same opset, says
    # what it means with ops it has: (inputs, outputs, body).
    oracle: tuple[str, str, str] | None = None
    # The adapter declines, and ONNX's function body of the op is expanded.
    expanded: bool = False


def _entries() -> list[Entry]:
    entries = []
    for op, old, new in sorted(RELABEL):
        for direction in ("down", "up"):
            entries.append(Entry("relabel", op, old, new, direction))
    for op, old, new, direction in sorted(ADAPTERS):
        entries.append(Entry("adapter", op, old, new, direction))
    # The steps chained: from opset 11's version of the op to the newest one
    # that table steps alone reach, and back.
    for op in sorted({entry.op for entry in entries}):
        versions = sorted(
            {
                s.since_version
                for v in range(MIN, onnx.defs.onnx_opset_version() + 1)
                if (s := schemas.schema(op, v))
            }
        )
        for direction in ("down", "up"):
            reached = 0
            for old, new in itertools.pairwise(versions):
                if (op, old, new) not in RELABEL and (op, old, new, direction) not in ADAPTERS:
                    break
                reached += 1
            if reached > 1:
                entries.append(Entry("span", op, versions[0], versions[reached], direction))
    return entries


ENTRIES = _entries()

# Builders: op -> function(entry) -> the cases for the entry's source version.
Builder = Callable[[Entry], list[Case]]
BUILDERS: dict[str, Builder] = {}


def builds(*ops: str):
    def register(function: Builder) -> Builder:
        for op in ops:
            assert op not in BUILDERS, op
            BUILDERS[op] = function
        return function

    return register


def _a(*values, dtype=np.float32) -> np.ndarray:
    return np.array(values, dtype=dtype)


def _uniform(shape, low=-1.0, high=1.0, seed=0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


# ---------------------------------------------------------------- elementwise

_UNARY_RANGES = {
    "Acos": (-0.9, 0.9),
    "Acosh": (1.1, 3.0),
    "Asin": (-0.9, 0.9),
    "Atanh": (-0.9, 0.9),
    "Log": (0.1, 3.0),
    "Sqrt": (0.1, 3.0),
    "Reciprocal": (0.5, 2.0),
}
# Ops whose output follows each input value: also run on integers where both versions take them.
_UNARY_INTS = {"Abs", "Neg", "Sign"}


@builds(
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Ceil",
    "Cos",
    "Cosh",
    "Erf",
    "Exp",
    "Floor",
    "Log",
    "Neg",
    "Reciprocal",
    "Relu",
    "Round",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Sqrt",
    "Tan",
    "Tanh",
    "Softplus",
    "Softsign",
    "HardSwish",
    "Mish",
)
def _unary(e: Entry) -> list[Case]:
    low, high = _UNARY_RANGES.get(e.op, (-3.0, 3.0))
    x = _uniform((2, 3), low, high)
    cases = [Case("float", "float[2,3] x", "y", f"y = {e.op}(x)", (("x", x),))]
    if e.op == "Round":
        halves = _a(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5).reshape(2, 3)
        cases.append(Case("halves", "float[2,3] x", "y", "y = Round(x)", (("x", halves),)))
    if e.op in _UNARY_INTS:
        cases.append(Case("int32", "int32[2,3] x", "y", f"y = {e.op}(x)"))
    cases.append(Case("dynamic", "float[N] x", "y", f"y = {e.op}(x)", (("x", x[0]),)))
    return cases


_ACTIVATIONS = {
    "Celu": "alpha = 2.0",
    "Elu": "alpha = 0.5",
    "Selu": "alpha = 1.5, gamma = 1.1",
    "HardSigmoid": "alpha = 0.3, beta = 0.4",
    "LeakyRelu": "alpha = 0.2",
    "ThresholdedRelu": "alpha = 0.5",
}


@builds(*_ACTIVATIONS)
def _activation(e: Entry) -> list[Case]:
    x = _uniform((2, 3), -3, 3)
    return [
        Case("default", "float[2,3] x", "y", f"y = {e.op}(x)", (("x", x),)),
        Case("attrs", "float[2,3] x", "y", f"y = {e.op} <{_ACTIVATIONS[e.op]}> (x)", (("x", x),)),
    ]


@builds("IsNaN", "IsInf")
def _special_values(e: Entry) -> list[Case]:
    x = _a(np.nan, np.inf, -np.inf, 0.0, -1.0, 2.0).reshape(2, 3)
    cases = [Case("float", "float[2,3] x", "y", f"y = {e.op}(x)", (("x", x),))]
    if e.op == "IsInf":
        for attrs in ("detect_negative = 0", "detect_positive = 0"):
            cases.append(Case(attrs, "float[2,3] x", "y", f"y = IsInf <{attrs}> (x)", (("x", x),)))
    return cases


_BINARY = ("Add", "Sub", "Mul", "Div")


@builds(*_BINARY)
def _arithmetic(e: Entry) -> list[Case]:
    return [
        Case("float-broadcast", "float[2,3] a, float[3] b", "y", f"y = {e.op}(a, b)"),
        Case(
            "int32",
            "int32[2,3] a, int32[2,3] b",
            "y",
            f"y = {e.op}(a, b)",
            (("b", np.array([[1, -2, 3], [-4, 5, 7]], np.int32)),),
        ),
        Case(
            "int64-scalar", "int64[2,3] a, int64 b", "y", f"y = {e.op}(a, b)", (("b", np.array(3)),)
        ),
    ]


@builds("Pow")
def _pow(e: Entry) -> list[Case]:
    base = _uniform((2, 3), 0.5, 2.0)
    cases = [Case("float", "float[2,3] a, float[3] b", "y", "y = Pow(a, b)", (("a", base),))]
    if e.version >= 12 and e.other >= 12:
        cases.append(
            Case(
                "float-int-exponent",
                "float[2,3] a, int64[3] b",
                "y",
                "y = Pow(a, b)",
                (("a", base), ("b", np.array([0, 1, 3]))),
            )
        )
        cases.append(
            Case(
                "int32",
                "int32[2,3] a, int32[3] b",
                "y",
                "y = Pow(a, b)",
                (("b", np.array([0, 1, 2], np.int32)),),
            )
        )
    return cases


@builds("Mod")
def _mod(e: Entry) -> list[Case]:
    b = np.array([[3, -3, 4], [-5, 2, 7]], np.int32)
    return [
        Case("int-fmod0", "int32[2,3] a, int32[2,3] b", "y", "y = Mod(a, b)", (("b", b),)),
        Case(
            "int-fmod1", "int32[2,3] a, int32[2,3] b", "y", "y = Mod <fmod = 1> (a, b)", (("b", b),)
        ),
        Case(
            "float-fmod1",
            "float[2,3] a, float[2,3] b",
            "y",
            "y = Mod <fmod = 1> (a, b)",
            (("a", _uniform((2, 3), -5, 5)), ("b", b.astype(np.float32))),
        ),
    ]


@builds("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")
def _compare(e: Entry) -> list[Case]:
    a = np.array([[1, 2, 3], [3, 2, 1]], np.int32)
    return [
        Case("float", "float[2,3] a, float[3] b", "y", f"y = {e.op}(a, b)"),
        Case(
            "int-ties",
            "int32[2,3] a, int32[3] b",
            "y",
            f"y = {e.op}(a, b)",
            (("a", a), ("b", a[0])),
        ),
    ]


@builds("BitShift")
def _bitshift(e: Entry) -> list[Case]:
    x = np.array([[1, 2, 255], [7, 8, 1024]], np.uint32)
    s = np.array([1, 3, 4], np.uint32)
    return [
        Case(
            d,
            "uint32[2,3] x, uint32[3] s",
            "y",
            f'y = BitShift <direction = "{d}"> (x, s)',
            (("x", x), ("s", s)),
        )
        for d in ("LEFT", "RIGHT")
    ]


@builds("PRelu")
def _prelu(e: Entry) -> list[Case]:
    return [
        Case("channel-slope", "float[1,3,2] x, float[3,1] s", "y", "y = PRelu(x, s)"),
        Case("scalar-slope", "float[2,3] x, float[1] s", "y", "y = PRelu(x, s)"),
    ]


@builds("Max", "Min", "Mean", "Sum")
def _variadic(e: Entry) -> list[Case]:
    cases = [
        Case("one", "float[2,3] a", "y", f"y = {e.op}(a)"),
        Case(
            "three-broadcast", "float[2,3] a, float[3] b, float[1] c", "y", f"y = {e.op}(a, b, c)"
        ),
    ]
    if e.op in ("Max", "Min") and e.version >= 12:
        # Integers are new in 12: going down the adapter rewrites them.
        cases.append(Case("int64", "int64[2,3] a, int64[3] b", "y", f"y = {e.op}(a, b)"))
    return cases


@builds("Where")
def _where(e: Entry) -> list[Case]:
    return [
        Case("broadcast", "bool[2,3] c, float[3] a, float[2,1] b", "y", "y = Where(c, a, b)"),
        Case("int64", "bool[2,3] c, int64[2,3] a, int64[2,3] b", "y", "y = Where(c, a, b)"),
    ]


@builds("Clip")
def _clip(e: Entry) -> list[Case]:
    lo = "lo = Constant <value = float {-0.5}> ()\n"
    hi = "hi = Constant <value = float {0.25}> ()\n"
    cases = [
        Case("none", "float[2,3] x", "y", "y = Clip(x)"),
        Case("min-max", "float[2,3] x", "y", lo + hi + "y = Clip(x, lo, hi)"),
        Case("max-only", "float[2,3] x", "y", hi + "y = Clip(x, , hi)"),
    ]
    if e.version >= 12 and e.other >= 12:
        cases.append(
            Case(
                "int32",
                "int32[2,3] x",
                "y",
                "lo = Constant <value = int32 {-1}> ()\ny = Clip(x, lo)",
            )
        )
    return cases


# ---------------------------------------------------------------- shapes and data movement


@builds("Identity")
def _identity(e: Entry) -> list[Case]:
    cases = [
        Case("float", "float[2,3] x", "y", "y = Identity(x)"),
        Case(
            "string", "string[2] x", "y", "y = Identity(x)", (("x", np.array(["a", "bb"], object)),)
        ),
    ]
    if e.version >= 14:
        # (s is an output too, so the Identity stays: sequence elimination
        # bypasses any other.) From 13 it is a Loop of no trip carrying s.
        refused = "takes no seq" if e.other < 13 else None
        cases.append(
            Case(
                "sequence",
                "float[4,3] x",
                "s, y",
                "s = SplitToSequence <axis = 0> (x)\ny = Identity(s)",
                refused=refused,
            )
        )
    if e.version >= 16:
        refused = "takes no optional" if e.other < 16 else None
        cases.append(
            Case(
                "optional", "float[2,3] x", "y", "o = Optional(x)\ny = Identity(o)", refused=refused
            )
        )
    return cases


@builds("Shape")
def _shape(e: Entry) -> list[Case]:
    cases = [
        Case("whole", "float[2,3,4,5] x", "y", "y = Shape(x)"),
        Case("scalar", "float x", "y", "y = Shape(x)", (("x", np.array(1.5, np.float32)),)),
    ]
    if e.version >= 15:
        cases += [
            Case("start-end", "float[2,3,4,5] x", "y", "y = Shape <start = 1, end = -1> (x)"),
            Case("start-negative", "float[2,3,4,5] x", "y", "y = Shape <start = -2> (x)"),
            Case("out-of-range", "float[2,3,4,5] x", "y", "y = Shape <start = -9, end = 9> (x)"),
            Case("empty", "float[2,3,4,5] x", "y", "y = Shape <start = 3, end = 1> (x)"),
        ]
    return cases


@builds("Size")
def _size(e: Entry) -> list[Case]:
    return [
        Case("float", "float[2,3,4] x", "y", "y = Size(x)"),
        Case("empty", "float[0,3] x", "y", "y = Size(x)", (("x", np.zeros((0, 3), np.float32)),)),
    ]


@builds("Flatten")
def _flatten(e: Entry) -> list[Case]:
    return [
        Case(f"axis{axis}", "float[2,3,4] x", "y", f"y = Flatten <axis = {axis}> (x)")
        for axis in (0, 1, -1, 3)
    ]


@builds("Transpose")
def _transpose(e: Entry) -> list[Case]:
    return [
        Case("default", "float[2,3,4] x", "y", "y = Transpose(x)"),
        Case("perm", "float[2,3,4] x", "y", "y = Transpose <perm = [1, 2, 0]> (x)"),
        Case("int64", "int64[2,3] x", "y", "y = Transpose <perm = [1, 0]> (x)"),
    ]


@builds("Reshape")
def _reshape(e: Entry) -> list[Case]:
    def shape(values):
        return f"s = Constant <value = int64[{len(values)}] {{{', '.join(map(str, values))}}}> ()\n"

    cases = [
        Case("minus-one", "float[2,3,4] x", "y", shape([4, -1]) + "y = Reshape(x, s)"),
        Case("zero-copies", "float[2,3,4] x", "y", shape([0, -1]) + "y = Reshape(x, s)"),
        Case(
            "computed",
            "float[2,3,4] x, int64[2] s",
            "y",
            "y = Reshape(x, s)",
            (("s", np.array([6, 4])),),
        ),
    ]
    if e.version >= 14:
        # torch's repeat_kv: [b, kv, n, s, d] -> [b, kv * n, s, d], the shape
        # read from the Shape of a tensor of another rank (an If below 14).
        kv = (
            _axes("i", [0])
            + _axes("j", [2, 3])
            + "r = Shape(k)\nh = Gather(r, i)\nq = Gather(r, j)\n"
            + shape([8])
            + _axes("a", [2])
            + "t = Concat <axis = 0> (h, s, q)\nu = Unsqueeze(k, a)\n"
            + "e = Expand(u, w)\ny = Reshape <allowzero = 1> (e, t)"
        )
        kv_inputs = "float[B,2,S,3] k, int64[5] w"

        def kv_feeds(b, length):
            k = np.arange(b * 2 * length * 3, dtype=np.float32).reshape(b, 2, length, 3)
            return (("k", k), ("w", np.array([b, 2, 4, length, 3])))

        same = (
            _axes("z", [0])
            + _axes("o", [1])
            + _axes("w", [2])
            + _axes("m", [3])
            + "h = Shape(x)\ni = Constant <value = int64[2] {0, 2}> ()\nj = Gather(h, i)\n"
            + "b = Slice(j, z, o)\nc = Slice(j, o, w)\n"
            + "t = Concat <axis = 0> (b, m, c)\ny = Reshape <allowzero = 1> (x, t)"
        )
        cases += [
            Case(
                "allowzero-no-zero",
                "float[2,3,4] x",
                "y",
                shape([4, 6]) + "y = Reshape <allowzero = 1> (x, s)",
            ),
            Case(
                "allowzero-zero",
                "float[0,3] x",
                "y",
                shape([3, 0]) + "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3), np.float32)),),
            ),
            # Data with elements: a 0 in s fails either way, so allowzero goes.
            Case(
                "allowzero-computed",
                "float[2,3,4] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("s", np.array([6, 4])),),
            ),
            Case(
                "allowzero-computed-maybe-empty",
                "float[N,3,4] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((2, 3, 4), np.float32)), ("s", np.array([6, 4]))),
            ),
            Case(
                "allowzero-computed-empty",
                "float[N,3,4] x, int64[3] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3, 4), np.float32)), ("s", np.array([3, 0, 4]))),
            ),
            # An empty result's -1 is 0.
            Case(
                "allowzero-computed-empty-minus-one",
                "float[N,3,4] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3, 4), np.float32)), ("s", np.array([-1, 4]))),
            ),
            Case(
                "allowzero-computed-empty-int64",
                "int64[N,3] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3), np.int64)), ("s", np.array([0, 5]))),
            ),
            Case(
                "allowzero-computed-bool",
                "bool[N,3] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.ones((2, 3), bool)), ("s", np.array([3, 2]))),
            ),
            Case(
                "allowzero-repeat-kv",
                kv_inputs,
                "y",
                kv,
                kv_feeds(2, 5),
            ),
            Case(
                "allowzero-repeat-kv-empty-cache",
                kv_inputs,
                "y",
                kv,
                kv_feeds(2, 0),
            ),
            Case(
                "allowzero-repeat-kv-empty-batch",
                kv_inputs,
                "y",
                kv,
                kv_feeds(0, 5),
            ),
            # Each entry that may be 0 is x's own dim there: allowzero just goes.
            Case(
                "allowzero-own-dims",
                "float[N,3,M] x",
                "y",
                same,
                (("x", np.zeros((0, 3, 2), np.float32)),),
            ),
            Case(
                "allowzero-own-dims-full",
                "float[N,3,M] x",
                "y",
                same,
                (("x", np.ones((2, 3, 5), np.float32)),),
            ),
            # A constant 0 past the data's rank: no Reshape-13 may see it, in
            # no If branch either (onnxruntime checks them all at load).
            Case(
                "allowzero-zero-past-rank",
                "int64[N,M] x",
                "y",
                shape([0, 1, 0]) + "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 0), np.int64)),),
            ),
            Case(
                "allowzero-computed-zero-past-rank",
                "float[N,M] x, int64[3] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 0), np.float32)), ("s", np.array([0, 1, 0]))),
            ),
            Case(
                "allowzero-computed-float16-empty",
                "float16[N,3] x, int64[3] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3), np.float16)), ("s", np.array([3, 0, 2]))),
            ),
            Case(
                "allowzero-string",
                "string[N,3] x, int64[2] s",
                "y",
                "y = Reshape <allowzero = 1> (x, s)",
                (
                    ("x", np.array([["a", "b", "c"], ["d", "e", "f"]], object)),
                    ("s", _a(3, 2, dtype=np.int64)),
                ),
            ),
            Case(
                "allowzero-string-empty",
                "string[N,3] x",
                "y",
                shape([3, 0, 1]) + "y = Reshape <allowzero = 1> (x, s)",
                (("x", np.zeros((0, 3), object)),),
            ),
        ]
    return cases


def _axes(name: str, values: list[int]) -> str:
    return (
        f"{name} = Constant <value = int64[{len(values)}] {{{', '.join(map(str, values))}}}> ()\n"
    )


@builds("Squeeze", "Unsqueeze")
def _squeeze(e: Entry) -> list[Case]:
    squeeze = e.op == "Squeeze"
    x = "float[2,1,3,1] x" if squeeze else "float[2,3] x"
    axes = [1, -1] if squeeze else [0, 3]
    if e.version >= 13:
        cases = [Case("axes", x, "y", _axes("a", axes) + f"y = {e.op}(x, a)")]
        if squeeze:
            cases.append(Case("no-axes", x, "y", "y = Squeeze(x)"))
        refused = "computed" if e.other < 13 else None
        cases.append(
            Case(
                "computed-axes",
                f"{x}, int64[2] a",
                "y",
                f"y = {e.op}(x, a)",
                (("a", np.array(axes)),),
                refused=refused,
            )
        )
    else:
        cases = [Case("axes", x, "y", f"y = {e.op} <axes = [{axes[0]}, {axes[1]}]> (x)")]
        if squeeze:
            cases.append(Case("no-axes", x, "y", "y = Squeeze(x)"))
    return cases


@builds("Concat")
def _concat(e: Entry) -> list[Case]:
    return [
        Case("axis-last", "float[2,3] a, float[2,1] b", "y", "y = Concat <axis = -1> (a, b)"),
        Case("one-input", "int64[2] a", "y", "y = Concat <axis = 0> (a)"),
    ]


@builds("Split")
def _split(e: Entry) -> list[Case]:
    x = "float[5,6] x"
    seven = (("x", np.arange(14, dtype=np.float32).reshape(7, 2)),)
    if e.version >= 18:
        return [
            Case(
                "num-outputs-uneven",
                "float[7,2] x",
                "a, b, c",
                "a, b, c = Split <axis = 0, num_outputs = 3> (x)",
            ),
            Case(
                "num-outputs-even", x, "a, b, c", "a, b, c = Split <axis = 1, num_outputs = 3> (x)"
            ),
            Case("sizes", x, "a, b", _axes("s", [2, 3]) + "a, b = Split <axis = 0> (x, s)"),
            Case(
                "num-outputs-dynamic",
                "float[M,2] x",
                "a, b, c",
                "a, b, c = Split <axis = 0, num_outputs = 3> (x)",
                seven,
            ),
            # Only the split axis need be static: GRU/LSTM gates with a dynamic batch.
            Case(
                "num-outputs-dynamic-batch",
                "float[N,6] x",
                "a, b, c",
                "a, b, c = Split <axis = -1, num_outputs = 3> (x)",
                (("x", np.arange(24, dtype=np.float32).reshape(4, 6)),),
            ),
            Case(
                "num-outputs-empty-batch",
                "float[N,6] x",
                "a, b",
                "a, b = Split <axis = 1, num_outputs = 2> (x)",
                (("x", np.zeros((0, 6), np.float32)),),
            ),
            Case(
                "num-outputs-dynamic-empty",
                "float[M,2] x",
                "a, b",
                "a, b = Split <axis = 0, num_outputs = 2> (x)",
                (("x", np.zeros((0, 2), np.float32)),),
            ),
            Case(
                "num-outputs-int64",
                "int64[M,3] x",
                "a, b",
                "a, b = Split <axis = 0, num_outputs = 2> (x)",
                (("x", np.arange(15, dtype=np.int64).reshape(5, 3)),),
            ),
        ]
    if e.version >= 13:
        return [
            Case("sizes", x, "a, b", _axes("s", [2, 3]) + "a, b = Split <axis = 0> (x, s)"),
            Case("equal", x, "a, b, c", "a, b, c = Split <axis = 1> (x)"),
            Case("one-output", x, "a", "a = Split <axis = 1> (x)"),
            Case(
                "computed-sizes",
                "float[5,6] x, int64[2] s",
                "a, b",
                "a, b = Split <axis = 0> (x, s)",
                (("s", np.array([1, 4])),),
            ),
            Case(
                "computed-sizes-with-zero",
                "float[5,N] x, int64[3] s",
                "a, b, c",
                "a, b, c = Split <axis = -1> (x, s)",
                (("x", np.ones((5, 4), np.float32)), ("s", np.array([3, 0, 1]))),
            ),
            Case(
                "computed-sizes-bool",
                "bool[4,2] x, int64[2] s",
                "a, b",
                "a, b = Split <axis = 0> (x, s)",
                (("s", np.array([3, 1])),),
            ),
        ]
    return [
        Case("sizes", x, "a, b", "a, b = Split <axis = 0, split = [2, 3]> (x)"),
        Case("equal", x, "a, b, c", "a, b, c = Split <axis = -1> (x)"),
    ]


@builds("SplitToSequence")
def _split_to_sequence(e: Entry) -> list[Case]:
    return [
        Case("keepdims0", "float[3,2] x", "y", "y = SplitToSequence <axis = 0, keepdims = 0> (x)"),
        Case(
            "sizes",
            "float[5,2] x",
            "y",
            _axes("s", [2, 3]) + "y = SplitToSequence <axis = 0> (x, s)",
        ),
    ]


@builds("Slice")
def _slice(e: Entry) -> list[Case]:
    body = (
        _axes("b", [-1, 0])
        + _axes("n", [-4, 9])
        + _axes("a", [1, 0])
        + _axes("t", [-1, 2])
        + "y = Slice(x, b, n, a, t)"
    )
    return [
        Case("negative-steps", "float[3,5] x", "y", body),
        Case(
            "starts-ends",
            "float[3,5] x",
            "y",
            _axes("b", [1]) + _axes("n", [3]) + "y = Slice(x, b, n)",
        ),
    ]


@builds("Expand")
def _expand(e: Entry) -> list[Case]:
    return [
        Case("broadcast", "float[3,1] x", "y", _axes("s", [2, 1, 4]) + "y = Expand(x, s)"),
        Case("smaller-shape", "float[2,3] x", "y", _axes("s", [3]) + "y = Expand(x, s)"),
    ]


@builds("Tile")
def _tile(e: Entry) -> list[Case]:
    return [Case("repeats", "float[2,3] x", "y", _axes("r", [2, 1]) + "y = Tile(x, r)")]


@builds("Pad")
def _pad(e: Entry) -> list[Case]:
    pads = _axes("p", [0, 1, 0, 2])
    value = "v = Constant <value = float {1.5}> ()\n"
    cases = [
        Case("constant", "float[2,3] x", "y", pads + "y = Pad(x, p)"),
        Case("constant-value", "float[2,3] x", "y", pads + value + "y = Pad(x, p, v)"),
        Case("reflect", "float[2,3] x", "y", pads + 'y = Pad <mode = "reflect"> (x, p)'),
        Case("edge", "float[2,3] x", "y", pads + 'y = Pad <mode = "edge"> (x, p)'),
        Case("negative", "float[2,3] x", "y", _axes("p", [0, -1, 0, 1]) + "y = Pad(x, p)"),
    ]
    if e.version >= 18:
        refused = "axes" if e.other < 18 else None
        cases.append(
            Case(
                "axes",
                "float[2,3] x",
                "y",
                _axes("p", [1, 2]) + _axes("a", [1]) + "y = Pad(x, p, , a)",
                refused=refused,
            )
        )
    if e.version >= 19:
        wrap = 'y = Pad <mode = "wrap"> (x, p)'
        refused = "negative pad" if e.other < 19 else None
        cases += [
            Case("wrap", "float[2,3] x", "y", pads + wrap),
            # Pads longer than the dim wrap round again (a Gather).
            Case("wrap-long", "float[2,3] x", "y", _axes("p", [3, 4, 5, 7]) + wrap),
            Case(
                "wrap-dynamic",
                "float[N,M] x",
                "y",
                _axes("p", [1, 2, 0, 3]) + wrap,
                (("x", _uniform((3, 4))),),
            ),
            Case(
                "wrap-dynamic-short",
                "float[N,M] x",
                "y",
                _axes("p", [0, 1, 0, 1]) + wrap,
                (("x", _uniform((1, 1))),),
            ),
            Case(
                "wrap-axes",
                "int64[2,3,4] x",
                "y",
                _axes("p", [1, 2, 2, 0])
                + _axes("a", [-1, 0])
                + 'y = Pad <mode = "wrap"> (x, p, , a)',
            ),
            # (onnxruntime 1.32 fails on an empty x: see test_opset_adapters)
            Case("wrap-bool", "bool[2,3] x", "y", pads + wrap),
            Case(
                "wrap-negative",
                "float[2,3] x",
                "y",
                _axes("p", [0, -1, 0, 2]) + wrap,
                refused=refused,
            ),
        ]
        if refused is None:
            cases.pop()
    return cases


@builds("DepthToSpace")
def _depth_to_space(e: Entry) -> list[Case]:
    return [
        Case(
            mode, "float[1,8,2,3] x", "y", f'y = DepthToSpace <blocksize = 2, mode = "{mode}"> (x)'
        )
        for mode in ("DCR", "CRD")
    ]


@builds("SpaceToDepth")
def _space_to_depth(e: Entry) -> list[Case]:
    return [Case("blocksize2", "float[1,2,4,6] x", "y", "y = SpaceToDepth <blocksize = 2> (x)")]


@builds("Compress")
def _compress(e: Entry) -> list[Case]:
    c = "c = Constant <value = bool[3] {1, 0, 1}> ()\n"
    return [
        Case("axis", "float[2,3] x", "y", c + "y = Compress <axis = 1> (x, c)"),
        Case("flat", "float[2,3] x", "y", c + "y = Compress(x, c)"),
    ]


@builds("Gather")
def _gather(e: Entry) -> list[Case]:
    i = "i = Constant <value = int64[2,2] {0, -1, 2, 1}> ()\n"
    return [
        Case("axis0", "float[3,4] x", "y", i + "y = Gather(x, i)"),
        Case("axis1", "float[3,4] x", "y", i + "y = Gather <axis = 1> (x, i)"),
        Case(
            "scalar-index",
            "float[3,4] x",
            "y",
            "i = Constant <value = int64 {1}> ()\ny = Gather(x, i)",
        ),
    ]


@builds("GatherElements")
def _gather_elements(e: Entry) -> list[Case]:
    i = "i = Constant <value = int64[2,2] {0, -1, 2, 1}> ()\n"
    return [Case("axis1", "float[2,3] x", "y", i + "y = GatherElements <axis = 1> (x, i)")]


@builds("GatherND")
def _gather_nd(e: Entry) -> list[Case]:
    cases = [
        Case(
            "rows",
            "float[2,3] x",
            "y",
            "i = Constant <value = int64[2,1] {1, 0}> ()\ny = GatherND(x, i)",
        ),
        Case(
            "elements",
            "float[2,3] x",
            "y",
            "i = Constant <value = int64[2,2] {1, 2, 0, 0}> ()\ny = GatherND(x, i)",
        ),
    ]
    if e.version >= 12:
        refused = "batch_dims=1" if e.other < 12 else None
        cases.append(
            Case(
                "batch-dims",
                "float[2,3] x",
                "y",
                "i = Constant <value = int64[2,1] {1, 2}> ()\ny = GatherND <batch_dims = 1> (x, i)",
                refused=refused,
            )
        )
    return cases


@builds("ScatterElements", "ScatterND")
def _scatter(e: Entry) -> list[Case]:
    if e.op == "ScatterND":
        data = "i = Constant <value = int64[2,1] {1, 1}> ()\nu = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> ()\n"
        call = "y = ScatterND{attrs}(x, i, u)"
    else:
        data = "i = Constant <value = int64[1,2] {1, 1}> ()\nu = Constant <value = float[1,2] {7, 8}> ()\n"
        call = "y = ScatterElements <axis = 1{attrs}> (x, i, u)"

    def case(name: str, reduction: str | None, refused: str | None = None) -> Case:
        if e.op == "ScatterND":
            attrs = f' <reduction = "{reduction}"> ' if reduction else ""
        else:
            attrs = f', reduction = "{reduction}"' if reduction else ""
        return Case(
            name, "float[2,3] x", "y", data + call.replace("{attrs}", attrs), refused=refused
        )

    unique = data.replace("{1, 1}", "{1, 0}")
    cases = [
        Case("default", "float[2,3] x", "y", unique + call.replace("{attrs}", "")),
    ]
    if e.version >= 16:
        for reduction in ("none", "add", "mul") if e.version >= 16 else ():
            name = f"reduction-{reduction}"
            refused = "reduction" if reduction != "none" and e.other < 16 else None
            if reduction == "none":
                attrs = ' <reduction = "none"> ' if e.op == "ScatterND" else ', reduction = "none"'
                cases.append(
                    Case(name, "float[2,3] x", "y", unique + call.replace("{attrs}", attrs))
                )
            else:
                cases.append(case(name, reduction, refused))
    if e.version >= 18:
        for reduction in ("max", "min"):
            cases.append(
                case(f"reduction-{reduction}", reduction, "reduction" if e.other < 18 else None)
            )
    return cases


@builds("ConstantOfShape")
def _constant_of_shape(e: Entry) -> list[Case]:
    return [
        Case("default", "int64[2] s", "y", "y = ConstantOfShape(s)", (("s", np.array([2, 3])),)),
        Case(
            "int32-value",
            "int64[2] s",
            "y",
            "y = ConstantOfShape <value = int32[1] {7}> (s)",
            (("s", np.array([3, 1])),),
        ),
        Case(
            "bool-value",
            "int64[1] s",
            "y",
            "y = ConstantOfShape <value = bool[1] {1}> (s)",
            (("s", np.array([4])),),
        ),
        Case("empty", "int64[2] s", "y", "y = ConstantOfShape(s)", (("s", np.array([0, 3])),)),
    ]


@builds("Constant")
def _constant(e: Entry) -> list[Case]:
    cases = [
        Case(
            "tensor",
            "float[2] x",
            "y",
            "c = Constant <value = float[2] {1.5, -2}> ()\ny = Add(x, c)",
        ),
        Case(
            "int64-scalar",
            "int64 x",
            "y",
            "c = Constant <value = int64 {4}> ()\ny = Mul(x, c)",
            (("x", np.array(3)),),
        ),
    ]
    if e.version >= 12:
        for attr, value, x in (
            ("value_float", "2.5", "float"),
            ("value_floats", "[1.0, 2.0]", "float[2]"),
            ("value_int", "3", "int64"),
            ("value_ints", "[3, 2]", "int64[2]"),
        ):
            feeds = (("x", np.array(2)),) if x == "int64" else ()
            cases.append(
                Case(
                    attr, f"{x} x", "y", f"c = Constant <{attr} = {value}> ()\ny = Add(x, c)", feeds
                )
            )
        for attr, value in (("value_strings", '["a", "bc"]'), ("value_string", '"abc"')):
            cases.append(
                Case(
                    attr,
                    "float x",
                    "y",
                    f"y = Constant <{attr} = {value}> ()",
                    (("x", np.array(1, np.float32)),),
                )
            )
    return cases


@builds("EyeLike")
def _eye_like(e: Entry) -> list[Case]:
    return [
        Case("square", "float[3,3] x", "y", "y = EyeLike(x)"),
        Case("offset-dtype", "float[3,4] x", "y", "y = EyeLike <k = 1, dtype = 7> (x)"),
        Case("negative-offset", "int32[4,3] x", "y", "y = EyeLike <k = -2> (x)"),
    ]


@builds("OneHot")
def _one_hot(e: Entry) -> list[Case]:
    body = (
        "d = Constant <value = int64 {4}> ()\nv = Constant <value = float[2] {0, 5}> ()\n"
        "y = OneHot{attrs}(i, d, v)"
    )
    i = (("i", np.array([[0, 3, -1], [2, 1, 5]], np.int64)),)
    return [
        Case("last-axis", "int64[2,3] i", "y", body.replace("{attrs}", ""), i),
        Case("axis0", "int64[2,3] i", "y", body.replace("{attrs}", " <axis = 0> "), i),
    ]


@builds("NonZero")
def _non_zero(e: Entry) -> list[Case]:
    x = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    return [
        Case("float", "float[2,3] x", "y", "y = NonZero(x)", (("x", x),)),
        Case("none", "float[2,3] x", "y", "y = NonZero(x)", (("x", np.zeros((2, 3), np.float32)),)),
    ]


@builds("CumSum")
def _cumsum(e: Entry) -> list[Case]:
    a = "a = Constant <value = int64 {1}> ()\n"
    return [
        Case(
            attrs or "default",
            "float[2,3] x",
            "y",
            a + f"y = CumSum{attrs and f' <{attrs}> '}(x, a)",
        )
        for attrs in ("", "exclusive = 1", "reverse = 1", "exclusive = 1, reverse = 1")
    ]


@builds("ReverseSequence")
def _reverse_sequence(e: Entry) -> list[Case]:
    lens = (("l", np.array([1, 3, 2], np.int64)),)
    return [
        Case(
            "time-major",
            "float[3,3,2] x, int64[3] l",
            "y",
            "y = ReverseSequence <time_axis = 0, batch_axis = 1> (x, l)",
            lens,
        ),
        Case(
            "batch-major",
            "float[3,3,2] x, int64[3] l",
            "y",
            "y = ReverseSequence <time_axis = 1, batch_axis = 0> (x, l)",
            lens,
        ),
    ]


@builds("Cast")
def _cast(e: Entry) -> list[Case]:
    x = _a(-2.7, -0.5, 0.5, 1.5, 100.25, 3.0).reshape(2, 3)
    cases = [
        Case("float-int32", "float[2,3] x", "y", "y = Cast <to = 6> (x)", (("x", x),)),
        Case("float-bool", "float[2,3] x", "y", "y = Cast <to = 9> (x)", (("x", x),)),
        Case("int64-float16", "int64[2,3] x", "y", "y = Cast <to = 10> (x)"),
        Case("float-string", "float[2,3] x", "y", "y = Cast <to = 8> (x)", (("x", x),)),
    ]
    # saturate and round_mode act only on types the older versions lack: dropped.
    if e.version >= 19:
        cases.append(
            Case(
                "saturate", "float[2,3] x", "y", "y = Cast <to = 6, saturate = 1> (x)", (("x", x),)
            )
        )
    if e.version >= 24:
        cases.append(
            Case(
                "round-mode",
                "float[2,3] x",
                "y",
                'y = Cast <to = 6, round_mode = "up"> (x)',
                (("x", x),),
            )
        )
    return cases


@builds("CastLike")
def _cast_like(e: Entry) -> list[Case]:
    x = _a(-2.7, -0.5, 0.5, 1.5, 100.25, 3.0).reshape(2, 3)
    feeds = (("x", x),)
    cases = [
        Case("float-int32", "float[2,3] x, int32[1] t", "y", "y = CastLike(x, t)", feeds),
        Case("float-bool", "float[2,3] x, bool[1] t", "y", "y = CastLike(x, t)", feeds),
    ]
    if e.version >= 19:
        cases.append(
            Case(
                "saturate",
                "float[2,3] x, int32[1] t",
                "y",
                "y = CastLike <saturate = 1> (x, t)",
                feeds,
            )
        )
    if e.version >= 24:
        cases.append(
            Case(
                "round-mode",
                "float[2,3] x, int32[1] t",
                "y",
                'y = CastLike <round_mode = "up"> (x, t)',
                feeds,
            )
        )
    return cases


# ---------------------------------------------------------------- reductions


@builds("ArgMax", "ArgMin")
def _arg(e: Entry) -> list[Case]:
    ties = (("x", np.array([[1, 3, 3], [2, 2, 0]], np.float32)),)
    cases = [
        Case("axis1", "float[2,3] x", "y", f"y = {e.op} <axis = 1> (x)", ties),
        Case("keepdims0", "float[2,3] x", "y", f"y = {e.op} <axis = 0, keepdims = 0> (x)", ties),
    ]
    if e.version >= 12:
        cases.append(
            Case(
                "first-index",
                "float[2,3] x",
                "y",
                f"y = {e.op} <axis = 1, select_last_index = 0> (x)",
                ties,
            )
        )
        refused = "select_last_index" if e.other < 12 else None
        cases.append(
            Case(
                "last-index",
                "float[2,3] x",
                "y",
                f"y = {e.op} <axis = 1, select_last_index = 1> (x)",
                ties,
                refused=refused,
            )
        )
    return cases


_REDUCE = sorted(REDUCE_OPS)

# ReduceX-18 is a function of ReduceSum-18 (and elementwise ops) for these.
_REDUCE_WITH_BODIES = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


@builds(*_REDUCE)
def _reduce(e: Entry) -> list[Case]:
    axes_input = e.version >= (13 if e.op == "ReduceSum" else 18)
    x = (("x", _uniform((2, 3, 4), 0.5, 2.0)),)
    signed = (("x", _uniform((2, 3, 4), -2.0, 2.0)),)
    if axes_input:
        # Computed axes cannot become an attribute; the ops with a function
        # body at 18 are expanded instead.
        crossing = e.other < (13 if e.op == "ReduceSum" else 18)
        body = crossing and e.op in _REDUCE_WITH_BODIES
        # ReduceLogSumExp of one element is the element (onnxruntime), an Identity.
        noop_body = body and e.op != "ReduceLogSumExp"
        # The body is a ReduceSum over the axes, which needs them constant below 13.
        refused = "computed" if crossing and (not body or e.other < 13) else None
        cases = [
            Case(
                "axes",
                "float[2,3,4] x",
                "y",
                _axes("a", [0, 2]) + f"y = {e.op} <keepdims = 0> (x, a)",
                x,
            ),
            Case("all", "float[2,3,4] x", "y", f"y = {e.op}(x)", x),
            Case("negative-axis", "float[2,3,4] x", "y", _axes("a", [-1]) + f"y = {e.op}(x, a)", x),
            Case(
                "noop-empty",
                "float[2,3,4] x",
                "y",
                f"y = {e.op} <noop_with_empty_axes = 1> (x)",
                x,
                expanded=noop_body,
            ),
            Case(
                "noop-empty-signed",
                "float[2,3,4] x",
                "y",
                f"y = {e.op} <noop_with_empty_axes = 1> (x)",
                signed,
                expanded=noop_body,
            ),
            Case(
                "noop-empty-keepdims0",
                "float[2,3,4] x",
                "y",
                f"y = {e.op} <noop_with_empty_axes = 1, keepdims = 0> (x)",
                signed,
                expanded=noop_body,
            ),
            Case(
                "noop-given-axes",
                "float[2,3,4] x",
                "y",
                _axes("a", [1]) + f"y = {e.op} <noop_with_empty_axes = 1> (x, a)",
                signed,
            ),
            Case(
                "computed-axes",
                "float[2,3,4] x, int64[1] a",
                "y",
                f"y = {e.op}(x, a)",
                (*x, ("a", np.array([1]))),
                refused=refused,
                expanded=body,
            ),
        ]
    else:
        cases = [
            Case("axes", "float[2,3,4] x", "y", f"y = {e.op} <keepdims = 0, axes = [0, 2]> (x)", x),
            Case("all", "float[2,3,4] x", "y", f"y = {e.op}(x)", x),
            Case("negative-axis", "float[2,3,4] x", "y", f"y = {e.op} <axes = [-1]> (x)", x),
        ]
    if e.op == "ReduceLogSumExp" and axes_input:
        # One element each: onnxruntime gives it back exactly (Log(Exp(x)) would
        # round the integers and overflow the floats).
        noop = f"y = {e.op} <noop_with_empty_axes = 1> (x)"
        big = np.array([[2, 1, 5], [30, -3, 100]])
        if max(e.version, e.other) < 28:  # (integers are gone in 28)
            cases.append(Case("noop-int64", "int64[2,3] x", "y", noop, (("x", big),)))
        cases.append(
            Case("noop-large", "float[2,3] x", "y", noop, (("x", big.astype(np.float32)),))
        )
    if e.op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"):
        cases.append(Case("int32", "int32[2,3] x", "y", f"y = {e.op} <keepdims = 0> (x)"))
    if e.op in ("ReduceMax", "ReduceMin") and e.version >= 20:
        refused = "takes no tensor(bool)" if e.other < 20 else None
        cases.append(
            Case("bool", "bool[2,3] x", "y", f"y = {e.op} <keepdims = 0> (x)", refused=refused)
        )
    return cases


# ---------------------------------------------------------------- normalization and activations on axes


@builds("Softmax", "LogSoftmax", "Hardmax")
def _softmax(e: Entry) -> list[Case]:
    ties = (("x", np.array([[[1, 3, 3, 0], [2, 2, 0, 1], [0, 0, 0, 0]]] * 2, np.float32)),)
    return [
        Case("default", "float[2,3,4] x", "y", f"y = {e.op}(x)", ties),
        Case("axis1", "float[2,3,4] x", "y", f"y = {e.op} <axis = 1> (x)", ties),
        Case("axis0", "float[2,3,4] x", "y", f"y = {e.op} <axis = 0> (x)", ties),
        Case("axis-last", "float[2,3,4] x", "y", f"y = {e.op} <axis = -1> (x)", ties),
    ]


@builds("LRN")
def _lrn(e: Entry) -> list[Case]:
    return [
        Case("size3", "float[1,5,2,2] x", "y", "y = LRN <size = 3> (x)"),
        Case(
            "attrs",
            "float[1,5,2,2] x",
            "y",
            "y = LRN <size = 3, alpha = 0.001, beta = 0.5, bias = 2.0> (x)",
        ),
    ]


@builds("LpNormalization")
def _lp_normalization(e: Entry) -> list[Case]:
    return [
        Case("default", "float[2,3] x", "y", "y = LpNormalization(x)"),
        Case("l1-axis0", "float[2,3] x", "y", "y = LpNormalization <p = 1, axis = 0> (x)"),
    ]


@builds("MeanVarianceNormalization")
def _mvn(e: Entry) -> list[Case]:
    return [
        Case("default", "float[2,3,2,2] x", "y", "y = MeanVarianceNormalization(x)"),
        Case("axes", "float[2,3,2,2] x", "y", "y = MeanVarianceNormalization <axes = [1]> (x)"),
    ]


@builds("InstanceNormalization")
def _instance_norm(e: Entry) -> list[Case]:
    return [
        Case(
            "default",
            "float[2,3,4] x, float[3] s, float[3] b",
            "y",
            "y = InstanceNormalization <epsilon = 0.01> (x, s, b)",
        )
    ]


_BN_CONSTS = (
    "s = Constant <value = float[3] {1, 2, 3}> ()\nb = Constant <value = float[3] {0, 1, 0}> ()\n"
    "m = Constant <value = float[3] {0.5, 0, 1}> ()\nv = Constant <value = float[3] {1, 4, 2}> ()\n"
)


@builds("BatchNormalization")
def _batch_normalization(e: Entry) -> list[Case]:
    x = "float[2,3,4] x"
    if e.version < 14:
        refused = "training outputs" if e.other >= 14 else None
        return [
            Case("inference", x, "y", _BN_CONSTS + "y = BatchNormalization(x, s, b, m, v)"),
            Case(
                "epsilon",
                x,
                "y",
                _BN_CONSTS
                + "y = BatchNormalization <epsilon = 0.1, momentum = 0.5> (x, s, b, m, v)",
            ),
            Case(
                "training-outputs",
                x,
                "y, rm, rv, sm, sv",
                _BN_CONSTS + "y, rm, rv, sm, sv = BatchNormalization(x, s, b, m, v)",
                refused=refused,
            ),
        ]
    training_refused = "training_mode=1" if e.other < 14 else None
    cases = [
        Case("inference", x, "y", _BN_CONSTS + "y = BatchNormalization(x, s, b, m, v)"),
        Case(
            "training-mode-0",
            x,
            "y",
            _BN_CONSTS
            + "y = BatchNormalization <training_mode = 0, epsilon = 0.1> (x, s, b, m, v)",
        ),
        Case(
            "training-mode-1",
            x,
            "y, rm, rv",
            _BN_CONSTS
            + "y, rm, rv = BatchNormalization <training_mode = 1, momentum = 0.5> (x, s, b, m, v)",
            refused=training_refused,
        ),
    ]
    if e.version >= 15:
        refused = "needs one type" if e.other < 15 else None
        cases.append(
            Case(
                "mixed-types",
                "float16[2,3,4] x",
                "y",
                _BN_CONSTS + "y = BatchNormalization(x, s, b, m, v)",
                refused=refused,
            )
        )
    return cases


# ---------------------------------------------------------------- pooling and convolution

_IMAGE = "float[1,2,5,5] x"


@builds("MaxPool")
def _max_pool(e: Entry) -> list[Case]:
    ties = np.array(
        [
            [[[1, 1, 0, 2, 2], [1, 1, 0, 2, 2], [3, 0, 3, 0, 1], [0, 0, 0, 0, 0], [4, 4, 4, 4, 4]]]
            * 2
        ],
        np.float32,
    )
    feeds = (("x", ties),)
    cases = [
        Case("y-only", _IMAGE, "y", "y = MaxPool <kernel_shape = [2, 2]> (x)", feeds),
        Case("indices", _IMAGE, "y, i", "y, i = MaxPool <kernel_shape = [2, 2]> (x)", feeds),
        Case("indices-random", _IMAGE, "y, i", "y, i = MaxPool <kernel_shape = [2, 2]> (x)"),
        Case(
            "pads-strides",
            _IMAGE,
            "y, i",
            "y, i = MaxPool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]> (x)",
            feeds,
        ),
        Case(
            "storage-order",
            _IMAGE,
            "y, i",
            "y, i = MaxPool <kernel_shape = [2, 2], storage_order = 1> (x)",
            feeds,
        ),
        Case(
            "dilations",
            _IMAGE,
            "y, i",
            "y, i = MaxPool <kernel_shape = [2, 2], dilations = [2, 2]> (x)",
            feeds,
        ),
        Case(
            "ceil-mode",
            _IMAGE,
            "y, i",
            "y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)",
            feeds,
        ),
        Case(
            "auto-pad",
            _IMAGE,
            "y, i",
            'y, i = MaxPool <kernel_shape = [2, 2], auto_pad = "SAME_UPPER"> (x)',
            feeds,
        ),
        Case(
            "1d", "float[1,2,7] x", "y, i", "y, i = MaxPool <kernel_shape = [3], strides = [2]> (x)"
        ),
        Case("indices-read", _IMAGE, "i", "y, i = MaxPool <kernel_shape = [2, 2]> (x)", feeds),
    ]
    if e.version >= 12 and e.other >= 12:
        cases.append(
            Case("int8", "int8[1,2,5,5] x", "y", "y = MaxPool <kernel_shape = [2, 2]> (x)")
        )
    return cases


@builds("AveragePool", "LpPool")
def _pool(e: Entry) -> list[Case]:
    cases = [
        Case("kernel", _IMAGE, "y", f"y = {e.op} <kernel_shape = [2, 2]> (x)"),
        Case(
            "pads-strides",
            _IMAGE,
            "y",
            f"y = {e.op} <kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]> (x)",
        ),
    ]
    if e.op == "AveragePool":
        cases.append(
            Case(
                "count-pad",
                _IMAGE,
                "y",
                "y = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1> (x)",
            )
        )
        cases.append(
            Case(
                "ceil-mode",
                _IMAGE,
                "y",
                "y = AveragePool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)",
            )
        )
    else:
        cases.append(Case("p1", _IMAGE, "y", "y = LpPool <kernel_shape = [2, 2], p = 1> (x)"))
    dilations = e.version >= (19 if e.op == "AveragePool" else 18)
    if dilations:
        refused = "dilations" if e.other < (19 if e.op == "AveragePool" else 18) else None
        cases.append(
            Case(
                "dilations-1",
                _IMAGE,
                "y",
                f"y = {e.op} <kernel_shape = [2, 2], dilations = [1, 1]> (x)",
            )
        )
        cases.append(
            Case(
                "dilations-2",
                _IMAGE,
                "y",
                f"y = {e.op} <kernel_shape = [2, 2], dilations = [2, 2]> (x)",
                refused=refused,
            )
        )
    if e.op == "LpPool" and e.version >= 18:
        refused = "ceil_mode" if e.other < 18 else None
        cases.append(
            Case(
                "ceil-mode",
                _IMAGE,
                "y",
                "y = LpPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)",
                refused=refused,
            )
        )
    return cases


@builds("GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool")
def _global_pool(e: Entry) -> list[Case]:
    cases = [
        Case("2d", _IMAGE, "y", f"y = {e.op}(x)"),
        Case("1d", "float[2,3,4] x", "y", f"y = {e.op}(x)"),
    ]
    if e.op == "GlobalLpPool":
        cases.append(Case("p3", _IMAGE, "y", "y = GlobalLpPool <p = 3> (x)"))
    return cases


@builds("MaxRoiPool")
def _max_roi_pool(e: Entry) -> list[Case]:
    rois = (("r", np.array([[0, 0, 0, 3, 3], [0, 1, 1, 4, 4]], np.float32)),)
    return [
        Case(
            "pooled",
            "float[1,2,5,5] x, float[2,5] r",
            "y",
            "y = MaxRoiPool <pooled_shape = [2, 2]> (x, r)",
            rois,
        ),
        Case(
            "scale",
            "float[1,2,5,5] x, float[2,5] r",
            "y",
            "y = MaxRoiPool <pooled_shape = [2, 2], spatial_scale = 0.5> (x, r)",
            rois,
        ),
    ]


@builds("MaxUnpool")
def _max_unpool(e: Entry) -> list[Case]:
    body = "y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)\nz = MaxUnpool <kernel_shape = [2, 2], strides = [2, 2]> (y, i{shape})"
    return [
        Case("pool-unpool", "float[1,1,4,4] x", "z", body.replace("{shape}", "")),
        Case(
            "output-shape",
            "float[1,1,5,5] x",
            "z",
            _axes("s", [1, 1, 5, 5]) + body.replace("{shape}", ", s"),
        ),
    ]


@builds("Conv", "ConvTranspose")
def _conv(e: Entry) -> list[Case]:
    w = "float[2,3,3,3] w" if e.op == "ConvTranspose" else "float[3,2,3,3] w"
    return [
        Case("plain", f"{_IMAGE}, {w}", "y", f"y = {e.op}(x, w)"),
        Case(
            "bias-pads-strides",
            f"{_IMAGE}, {w}, float[3] b",
            "y",
            f"y = {e.op} <pads = [1, 1, 1, 1], strides = [2, 2]> (x, w, b)",
        ),
        Case("dilations", f"{_IMAGE}, {w}", "y", f"y = {e.op} <dilations = [2, 1]> (x, w)"),
        Case("auto-pad", f"{_IMAGE}, {w}", "y", f'y = {e.op} <auto_pad = "SAME_UPPER"> (x, w)'),
        Case(
            "group",
            f"float[1,4,5,5] x, float[4,{2 if e.op == 'Conv' else 1},3,3] w",
            "y",
            f"y = {e.op} <group = 2> (x, w)",
        ),
    ]


@builds("DeformConv")
def _deform_conv(e: Entry) -> list[Case]:
    return [
        Case(
            "plain",
            "float[1,2,4,4] x, float[3,2,2,2] w, float[1,8,3,3] o",
            "y",
            "y = DeformConv(x, w, o)",
        ),
        Case(
            "mask-bias",
            "float[1,2,4,4] x, float[3,2,2,2] w, float[1,8,3,3] o, float[3] b, float[1,4,3,3] m",
            "y",
            "y = DeformConv(x, w, o, b, m)",
        ),
    ]


@builds("Gemm")
def _gemm(e: Entry) -> list[Case]:
    return [
        Case("plain", "float[2,3] a, float[3,4] b", "y", "y = Gemm(a, b)"),
        Case(
            "trans-alpha-beta",
            "float[3,2] a, float[4,3] b, float[4] c",
            "y",
            "y = Gemm <transA = 1, transB = 1, alpha = 0.5, beta = 2.0> (a, b, c)",
        ),
        Case("c-scalar", "float[2,3] a, float[3,4] b, float c", "y", "y = Gemm(a, b, c)"),
    ]


@builds("MatMul")
def _matmul(e: Entry) -> list[Case]:
    return [
        Case("2d", "float[2,3] a, float[3,4] b", "y", "y = MatMul(a, b)"),
        Case("batched-broadcast", "float[2,1,2,3] a, float[3,3,2] b", "y", "y = MatMul(a, b)"),
        Case("vector", "float[3] a, float[3,4] b", "y", "y = MatMul(a, b)"),
        Case("int32", "int32[2,3] a, int32[3,2] b", "y", "y = MatMul(a, b)"),
    ]


@builds("Einsum")
def _einsum(e: Entry) -> list[Case]:
    return [
        Case(
            "matmul",
            "float[2,3] a, float[3,4] b",
            "y",
            'y = Einsum <equation = "ij,jk->ik"> (a, b)',
        ),
        Case("trace", "float[3,3] a", "y", 'y = Einsum <equation = "ii"> (a)'),
        Case("batch-transpose", "float[2,3,4] a", "y", 'y = Einsum <equation = "bij->bji"> (a)'),
    ]


@builds("Det")
def _det(e: Entry) -> list[Case]:
    return [
        Case("batch", "float[2,3,3] x", "y", "y = Det(x)"),
        Case("single", "float[2,2] x", "y", "y = Det(x)"),
    ]


@builds("GridSample")
def _grid_sample(e: Entry) -> list[Case]:
    grid = (("g", _uniform((1, 2, 2, 2), -1.2, 1.2)),)
    sig = "float[1,1,3,3] x, float[1,2,2,2] g"
    if e.version >= 20:
        cases = [
            Case("default", sig, "y", "y = GridSample(x, g)", grid),
            Case(
                "nearest-border",
                sig,
                "y",
                'y = GridSample <mode = "nearest", padding_mode = "border"> (x, g)',
                grid,
            ),
            Case(
                "cubic-aligned",
                sig,
                "y",
                'y = GridSample <mode = "cubic", align_corners = 1> (x, g)',
                grid,
            ),
            Case(
                "reflection",
                sig,
                "y",
                'y = GridSample <mode = "linear", padding_mode = "reflection"> (x, g)',
                grid,
            ),
        ]
        refused = "4-D" if e.other < 20 else None
        cases.append(
            Case(
                "5d",
                "float[1,1,3,3,3] x, float[1,2,2,2,3] g",
                "y",
                "y = GridSample(x, g)",
                (("g", _uniform((1, 2, 2, 2, 3), -1, 1)),),
                refused=refused,
            )
        )
        return cases
    return [
        Case("default", sig, "y", "y = GridSample(x, g)", grid),
        Case(
            "nearest-border",
            sig,
            "y",
            'y = GridSample <mode = "nearest", padding_mode = "border"> (x, g)',
            grid,
        ),
        Case(
            "bicubic-aligned",
            sig,
            "y",
            'y = GridSample <mode = "bicubic", align_corners = 1> (x, g)',
            grid,
        ),
    ]


@builds("RoiAlign")
def _roi_align(e: Entry) -> list[Case]:
    roi = "r = Constant <value = float[2,4] {0, 0, 2, 2, 0.5, 1, 3.5, 3}> ()\ni = Constant <value = int64[2] {0, 0}> ()\n"
    attrs = "output_height = 2, output_width = 2, sampling_ratio = 2"
    if e.version >= 16:
        refused = "half_pixel" if e.other < 16 else None
        return [
            Case(
                "output-half-pixel",
                "float[1,1,4,4] x",
                "y",
                roi
                + f'y = RoiAlign <coordinate_transformation_mode = "output_half_pixel", {attrs}> (x, r, i)',
            ),
            Case(
                "max",
                "float[1,1,4,4] x",
                "y",
                roi
                + f'y = RoiAlign <coordinate_transformation_mode = "output_half_pixel", mode = "max", {attrs}> (x, r, i)',
            ),
            Case(
                "half-pixel",
                "float[1,1,4,4] x",
                "y",
                roi + f"y = RoiAlign <{attrs}> (x, r, i)",
                refused=refused,
            ),
        ]
    return [
        Case("default", "float[1,1,4,4] x", "y", roi + f"y = RoiAlign <{attrs}> (x, r, i)"),
        Case(
            "max-scale",
            "float[1,1,4,4] x",
            "y",
            roi + f'y = RoiAlign <mode = "max", spatial_scale = 0.5, {attrs}> (x, r, i)',
        ),
    ]


@builds("Resize")
def _resize(e: Entry) -> list[Case]:
    sig = "float[1,1,2,3] x"
    sizes = _axes("s", [1, 1, 4, 5])
    scales = "c = Constant <value = float[4] {1, 1, 2, 2}> ()\n"
    if e.version >= 13:
        cases = [
            Case("sizes-nearest", sig, "y", sizes + 'y = Resize <mode = "nearest"> (x, , , s)'),
            Case("scales-linear", sig, "y", scales + 'y = Resize <mode = "linear"> (x, , c)'),
            Case(
                "cubic-align",
                sig,
                "y",
                sizes
                + 'y = Resize <mode = "cubic", coordinate_transformation_mode = "align_corners"> (x, , , s)',
            ),
            Case(
                "nearest-floor",
                sig,
                "y",
                scales
                + 'y = Resize <mode = "nearest", nearest_mode = "floor", coordinate_transformation_mode = "asymmetric"> (x, , c)',
            ),
        ]
    else:
        empty = "roi = Constant <value = float[0] {}> ()\n"
        cases = [
            Case(
                "sizes-nearest",
                sig,
                "y",
                sizes
                + empty
                + "e = Constant <value = float[0] {}> ()\n"
                + 'y = Resize <mode = "nearest"> (x, roi, e, s)',
            ),
            Case(
                "scales-linear",
                sig,
                "y",
                scales + empty + 'y = Resize <mode = "linear"> (x, roi, c)',
            ),
        ]
    if e.version >= 18:
        refused = "antialias" if e.other < 18 else None
        cases.append(
            Case(
                "antialias",
                sig,
                "y",
                scales + 'y = Resize <mode = "linear", antialias = 1> (x, , c)',
                refused=refused,
            )
        )
        cases.append(
            Case(
                "defaults-18",
                sig,
                "y",
                sizes
                + 'y = Resize <mode = "linear", antialias = 0, keep_aspect_ratio_policy = "stretch"> (x, , , s)',
            )
        )
    if e.version >= 19:
        refused = "half_pixel_symmetric" if e.other < 19 else None
        cases.append(
            Case(
                "half-pixel-symmetric",
                sig,
                "y",
                sizes
                + 'y = Resize <mode = "linear", coordinate_transformation_mode = "half_pixel_symmetric"> (x, , , s)',
                refused=refused,
            )
        )
    return cases


# ---------------------------------------------------------------- multi-output ops


@builds("Dropout")
def _dropout(e: Entry) -> list[Case]:
    x = "float[2,3] x"
    if e.version < 12:
        mask_up = "mask" if e.other >= 12 else None
        return [
            Case("y", x, "y", "y = Dropout(x)"),
            Case("y-ratio", x, "y", "y = Dropout <ratio = 0.25> (x)"),
            Case("mask", x, "y, m", "y, m = Dropout(x)", refused=mask_up),
            Case("mask-ratio", x, "y, m", "y, m = Dropout <ratio = 0.25> (x)", refused=mask_up),
        ]
    ratio = "r = Constant <value = float {0.25}> ()\n"
    false = "t = Constant <value = bool {0}> ()\n"
    true = "t = Constant <value = bool {1}> ()\nz = Constant <value = float {0}> ()\n"
    down_to_10 = e.other < 12
    return [
        Case("y", x, "y", "y = Dropout(x)"),
        Case("y-ratio", x, "y", ratio + "y = Dropout(x, r)"),
        Case("y-ratio-training-false", x, "y", ratio + false + "y = Dropout(x, r, t)"),
        Case("mask", x, "y, m", "y, m = Dropout(x)"),
        Case("mask-ratio", x, "y, m", ratio + "y, m = Dropout(x, r)"),
        Case("mask-seed", x, "y, m", ratio + "y, m = Dropout <seed = 3> (x, r)"),
        Case("mask-ratio-training-false", x, "y, m", ratio + false + "y, m = Dropout(x, r, t)"),
        Case(
            "mask-dynamic",
            "float[N,3] x",
            "y, m",
            "y, m = Dropout(x)",
            (("x", _uniform((4, 3))),),
        ),
        Case("mask-read-inside", x, "y, n", "y, m = Dropout(x)\nn = Not(m)"),
        Case(
            "training-true-ratio-0",
            x,
            "y, m",
            true + "y, m = Dropout(x, z, t)",
            refused="training_mode" if down_to_10 else None,
        ),
        Case(
            "computed-ratio",
            "float[2,3] x, float r",
            "y",
            "y = Dropout(x, r)",
            (("r", np.array(0.5, np.float32)),),
            refused="ratio is computed" if down_to_10 else None,
        ),
    ]


def _recurrent_inputs(op: str, directions: int = 1) -> tuple[str, str]:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    hidden = 5
    return (
        (
            f"float[{directions},{gates * hidden},4] w, "
            f"float[{directions},{gates * hidden},{hidden}] r, "
            f"float[{directions},{2 * gates * hidden}] b"
        ),
        f"float[{directions},3,{hidden}] h0",
    )


@builds("LSTM", "GRU", "RNN")
def _recurrent(e: Entry) -> list[Case]:
    op = e.op
    states = "y, h, c" if op == "LSTM" else "y, h"
    weights, h0 = _recurrent_inputs(op)
    weights2, h02 = _recurrent_inputs(op, 2)
    x = "float[2,3,4] x"
    initial = f", {h0}" + (", float[1,3,5] c0" if op == "LSTM" else "")
    initial2 = f", {h02}" + (", float[2,3,5] c0" if op == "LSTM" else "")
    init_args = "h0, c0" if op == "LSTM" else "h0"
    lens = (("l", np.array([2, 1, 2], np.int32)),)
    cases = [
        Case("all", f"{x}, {weights}", states, f"{states} = {op} <hidden_size = 5> (x, w, r, b)"),
        Case("y-only", f"{x}, {weights}", "y", f"y = {op} <hidden_size = 5> (x, w, r, b)"),
        Case(
            "states-only",
            f"{x}, {weights}",
            states[3:],
            f"{states[1:]} = {op} <hidden_size = 5> (x, w, r, b)",
        ),
        Case(
            "bidirectional",
            f"{x}, {weights2}",
            states,
            f'{states} = {op} <hidden_size = 5, direction = "bidirectional"> (x, w, r, b)',
        ),
        Case(
            "reverse-lens-initial",
            f"{x}, {weights}, int32[3] l{initial}",
            states,
            f'{states} = {op} <hidden_size = 5, direction = "reverse"> (x, w, r, b, l, {init_args})',
            lens,
        ),
        Case(
            "bidirectional-lens-initial",
            f"{x}, {weights2}, int32[3] l{initial2}",
            states,
            f'{states} = {op} <hidden_size = 5, direction = "bidirectional"> (x, w, r, b, l, {init_args})',
            lens,
        ),
        Case(
            "activations-clip",
            f"{x}, {weights}",
            states,
            f"{states} = {op} <hidden_size = 5, clip = 0.5> (x, w, r, b)",
        ),
    ]
    if op == "GRU":
        cases.append(
            Case(
                "linear-before-reset",
                f"{x}, {weights}",
                states,
                f"{states} = GRU <hidden_size = 5, linear_before_reset = 1> (x, w, r, b)",
            )
        )
    if op == "LSTM":
        cases.append(
            Case(
                "peepholes-forget",
                f"{x}, {weights}, float[1,15] p",
                states,
                f"{states} = LSTM <hidden_size = 5, input_forget = 1> (x, w, r, b, , , , p)",
            )
        )
    if op == "RNN":
        cases.append(
            Case(
                "relu",
                f"{x}, {weights}",
                states,
                f'{states} = RNN <hidden_size = 5, activations = ["Relu"]> (x, w, r, b)',
            )
        )
    if e.version >= 14:
        cases.append(
            Case(
                "layout-0",
                f"{x}, {weights}",
                states,
                f"{states} = {op} <hidden_size = 5, layout = 0> (x, w, r, b)",
            )
        )
        # Batch first: x [3,2,4], states [3,1,5]. onnxruntime has no kernel for layout=1.
        bx = "float[3,2,4] x"
        binit = ", float[3,1,5] h0" + (", float[3,1,5] c0" if op == "LSTM" else "")
        oracle_states = "y0, h1, c1" if op == "LSTM" else "y0, h1"
        moved = (
            "xt = Transpose <perm = [1, 0, 2]> (x)\nht = Transpose <perm = [1, 0, 2]> (h0)\n"
            + ("ct = Transpose <perm = [1, 0, 2]> (c0)\n" if op == "LSTM" else "")
        )
        back = (
            "y = Transpose <perm = [2, 0, 1, 3]> (y0)\nh = Transpose <perm = [1, 0, 2]> (h1)\n"
            + ("c = Transpose <perm = [1, 0, 2]> (c1)\n" if op == "LSTM" else "")
        )
        init_t = "ht, ct" if op == "LSTM" else "ht"
        cases.append(
            Case(
                "layout-1",
                f"{bx}, {weights}, int32[3] l{binit}",
                states,
                f"{states} = {op} <hidden_size = 5, layout = 1> (x, w, r, b, l, {init_args})",
                lens,
                oracle=(
                    f"{bx}, {weights}, int32[3] l{binit}",
                    states,
                    moved
                    + f"{oracle_states} = {op} <hidden_size = 5> (xt, w, r, b, l, {init_t})\n"
                    + back,
                ),
            )
        )
    return cases


@builds("TopK")
def _topk(e: Entry) -> list[Case]:
    ties = np.array([[3, 1, 3, 2], [0, 0, 5, 0], [1, 2, 3, 4]], np.float32)
    k = "k = Constant <value = int64[1] {2}> ()\n"
    feeds = (("x", ties),)
    return [
        Case("values-indices", "float[3,4] x", "v, i", k + "v, i = TopK(x, k)", feeds),
        Case("random", "float[3,4] x", "v, i", k + "v, i = TopK(x, k)"),
        Case("smallest", "float[3,4] x", "v, i", k + "v, i = TopK <largest = 0> (x, k)", feeds),
        Case("axis0", "float[3,4] x", "v, i", k + "v, i = TopK <axis = 0> (x, k)", feeds),
        Case("unsorted", "float[3,4] x", "v, i", k + "v, i = TopK <sorted = 0> (x, k)", feeds),
        Case(
            "k-all",
            "float[3,4] x",
            "v, i",
            "k = Constant <value = int64[1] {4}> ()\nv, i = TopK(x, k)",
            feeds,
        ),
        Case(
            "computed-k",
            "float[3,4] x, int64[1] k",
            "v, i",
            "v, i = TopK(x, k)",
            (*feeds, ("k", np.array([3]))),
        ),
        Case(
            "int64",
            "int64[3,4] x",
            "v, i",
            k + "v, i = TopK(x, k)",
            (("x", ties.astype(np.int64)),),
        ),
        Case("indices-only", "float[3,4] x", "i", k + "v, i = TopK(x, k)", feeds),
    ]


@builds("Unique")
def _unique(e: Entry) -> list[Case]:
    flat = (("x", np.array([2, 1, 1, 3, 4, 3, 2], np.float32)),)
    rows = (("x", np.array([[1, 0], [0, 1], [1, 0], [0, 0]], np.float32)),)
    outputs = "y, idx, inv, cnt"
    return [
        Case("sorted", "float[7] x", outputs, f"{outputs} = Unique(x)", flat),
        Case("unsorted", "float[7] x", outputs, f"{outputs} = Unique <sorted = 0> (x)", flat),
        Case("axis0", "float[4,2] x", outputs, f"{outputs} = Unique <axis = 0> (x)", rows),
        Case("y-only", "float[7] x", "y", "y = Unique(x)", flat),
        Case(
            "int64-counts",
            "int64[7] x",
            "y, cnt",
            "y, , , cnt = Unique(x)",
            (("x", flat[0][1].astype(np.int64)),),
        ),
    ]


@builds("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(e: Entry) -> list[Case]:
    labels = (("t", np.array([0, 4, 2], np.int64)),)
    sig = "float[3,5] x, int64[3] t"
    return [
        Case("mean", sig, "loss, lp", "loss, lp = SoftmaxCrossEntropyLoss(x, t)", labels),
        Case(
            "none",
            sig,
            "loss, lp",
            'loss, lp = SoftmaxCrossEntropyLoss <reduction = "none"> (x, t)',
            labels,
        ),
        Case(
            "sum-weights",
            f"{sig}, float[5] w",
            "loss, lp",
            'loss, lp = SoftmaxCrossEntropyLoss <reduction = "sum"> (x, t, w)',
            labels,
        ),
        Case(
            "ignore-index",
            sig,
            "loss, lp",
            "loss, lp = SoftmaxCrossEntropyLoss <ignore_index = 4> (x, t)",
            labels,
        ),
        Case("loss-only", sig, "loss", "loss = SoftmaxCrossEntropyLoss(x, t)", labels),
    ]


@builds("NegativeLogLikelihoodLoss")
def _nll(e: Entry) -> list[Case]:
    labels = (("t", np.array([0, 4, 2], np.int64)),)
    sig = "float[3,5] x, int64[3] t"
    return [
        Case("mean", sig, "loss", "loss = NegativeLogLikelihoodLoss(x, t)", labels),
        Case(
            "none",
            sig,
            "loss",
            'loss = NegativeLogLikelihoodLoss <reduction = "none"> (x, t)',
            labels,
        ),
        Case(
            "weights-ignore",
            f"{sig}, float[5] w",
            "loss",
            "loss = NegativeLogLikelihoodLoss <ignore_index = 2> (x, t, w)",
            labels,
        ),
    ]


# ---------------------------------------------------------------- control flow and optionals


@builds("If")
def _if(e: Entry) -> list[Case]:
    body = (
        "y, s = If(c) <then_branch = then () => (float[2,3] a, int64[2] b) {\n"
        "    a = Add(x, x)\n    b = Shape(x)\n  }, else_branch = other () => (float[2,3] a, int64[2] b) {\n"
        "    a = Neg(x)\n    b = Shape(a)\n  }>"
    )
    return [
        Case(f"cond-{flag}", "bool c, float[2,3] x", "y, s", body, (("c", np.array(flag)),))
        for flag in (True, False)
    ]


@builds("Loop")
def _loop(e: Entry) -> list[Case]:
    body = (
        "n = Constant <value = int64 {3}> ()\ncond = Constant <value = bool {1}> ()\n"
        "v, k, u = Loop(n, cond, x, z) <body = body (int64 i, bool c, float[2,3] a, int64 j)"
        " => (bool c2, float[2,3] w, int64 j2, float[2,3] s) {\n"
        "    c2 = Identity(c)\n    w = Add(a, a)\n    one = Constant <value = int64 {1}> ()\n"
        "    j2 = Add(j, one)\n    s = Mul(a, a)\n  }>"
    )
    return [
        Case("carried-and-scanned", "float[2,3] x, int64 z", "v, k, u", body, (("z", np.array(5)),))
    ]


@builds("Scan")
def _scan(e: Entry) -> list[Case]:
    body = (
        "total, rows, doubled = Scan(init, xs) <num_scan_inputs = 1, body = body (float[3] acc, float[3] row)"
        " => (float[3] acc2, float[3] out, float[3] twice) {\n"
        "    acc2 = Add(acc, row)\n    out = Identity(acc2)\n    twice = Add(row, row)\n  }>"
    )
    reverse = body.replace(
        "num_scan_inputs = 1",
        "num_scan_inputs = 1, scan_input_directions = [1], scan_output_directions = [0, 1]",
    )
    return [
        Case("state-and-scans", "float[3] init, float[4,3] xs", "total, rows, doubled", body),
        Case("reversed", "float[3] init, float[4,3] xs", "total, rows, doubled", reverse),
    ]


@builds("Optional", "OptionalGetElement")
def _optional(e: Entry) -> list[Case]:
    """Optional and OptionalGetElement (OptionalHasElement-15 -> 18 is neither relabel nor adapter)."""
    cases = [
        Case("tensor", "float[2,3] x", "y", "o = Optional(x)\ny = OptionalGetElement(o)"),
        Case(
            "sequence",
            "float[4,3] x",
            "y",
            "s = SplitToSequence(x)\no = Optional(s)\ny = OptionalGetElement(o)",
        ),
    ]
    if e.op == "OptionalGetElement" and e.version >= 18:
        refused = "takes no tensor" if e.other < 18 else None
        cases.append(
            Case("plain-tensor", "float[2,3] x", "y", "y = OptionalGetElement(x)", refused=refused)
        )
    return cases


@builds("OptionalHasElement")
def _optional_has_element(e: Entry) -> list[Case]:
    return [
        Case("tensor", "float[2,3] x", "h", "o = Optional(x)\nh = OptionalHasElement(o)"),
        Case(
            "empty",
            "float[2,3] x",
            "h",
            "o = Optional <type = float> ()\nh = OptionalHasElement(o)",
        ),
        Case("plain-tensor", "float[2,3] x", "h", "h = OptionalHasElement(x)"),
        Case("absent", "float[2,3] x", "h, z", "h = OptionalHasElement()\nz = Identity(x)"),
    ]


# ---------------------------------------------------------------- random ops (seeded)


@builds("RandomNormal", "RandomUniform")
def _random(e: Entry) -> list[Case]:
    return [
        Case(
            "seeded",
            "float[1] x",
            "y, z",
            f"y = {e.op} <shape = [2, 3], seed = 7.0> ()\nz = Identity(x)",
        ),
        Case(
            "double",
            "float[1] x",
            "y, z",
            f"y = {e.op} <shape = [4], seed = 1.0, dtype = 11> ()\nz = Identity(x)",
        ),
    ]


@builds("RandomNormalLike", "RandomUniformLike")
def _random_like(e: Entry) -> list[Case]:
    return [
        Case("seeded", "float[2,3] x", "y", f"y = {e.op} <seed = 7.0> (x)"),
        Case("dtype", "float[2,3] x", "y", f"y = {e.op} <seed = 2.0, dtype = 11> (x)"),
    ]


@builds("Bernoulli")
def _bernoulli(e: Entry) -> list[Case]:
    p = (("p", _uniform((4, 5), 0, 1)),)
    return [
        Case("seeded", "float[4,5] p", "y", "y = Bernoulli <seed = 5.0> (p)", p),
        Case("dtype", "float[4,5] p", "y", "y = Bernoulli <seed = 5.0, dtype = 7> (p)", p),
    ]


@builds("Multinomial")
def _multinomial(e: Entry) -> list[Case]:
    return [
        Case("seeded", "float[2,4] x", "y", "y = Multinomial <sample_size = 5, seed = 3.0> (x)")
    ]


# ---------------------------------------------------------------- quantization


_QDQ = (
    "s = Constant <value = float {0.05}> ()\nz = Constant <value = uint8 {128}> ()\n"
    "q = QuantizeLinear{q}(x, s, z)\ny = DequantizeLinear{d}(q, s, z)"
)


@builds("QuantizeLinear", "DequantizeLinear")
def _qdq(e: Entry) -> list[Case]:
    mine, other = ("{q}", "{d}") if e.op == "QuantizeLinear" else ("{d}", "{q}")
    x = (("x", _uniform((2, 3), -8, 8)),)
    cases = [
        Case("per-tensor", "float[2,3] x", "q, y", _QDQ.replace("{q}", "").replace("{d}", ""), x)
    ]
    if e.version >= 13:
        cases.append(
            Case(
                "axis",
                "float[2,3] x",
                "q, y",
                _QDQ.replace(mine, " <axis = 1> ").replace(other, ""),
                x,
            )
        )
        refused = "scalar" if e.other < 13 else None
        per_axis = (
            "s = Constant <value = float[3] {0.05, 0.1, 0.2}> ()\nz = Constant <value = uint8[3] {128, 100, 0}> ()\n"
            "q = QuantizeLinear <axis = 1> (x, s, z)\ny = DequantizeLinear <axis = 1> (q, s, z)"
        )
        cases.append(Case("per-axis", "float[2,3] x", "q, y", per_axis, x, refused=refused))
        cases.append(
            Case(
                "no-zero-point",
                "float[2,3] x",
                "q, y",
                "s = Constant <value = float {0.05}> ()\nq = QuantizeLinear(x, s)\ny = DequantizeLinear(q, s)",
                x,
            )
        )
        cases.append(
            Case(
                "int8",
                "float[2,3] x",
                "q, y",
                _QDQ.replace("uint8 {128}", "int8 {-3}").replace("{q}", "").replace("{d}", ""),
                x,
            )
        )
    if e.version >= 19 and e.op == "QuantizeLinear":
        cases.append(
            Case(
                "saturate",
                "float[2,3] x",
                "q, y",
                _QDQ.replace("{q}", " <saturate = 1> ").replace("{d}", ""),
                x,
            )
        )
    if e.version >= 21:
        attrs = (
            " <block_size = 0, output_dtype = 0> "
            if e.op == "QuantizeLinear"
            else " <block_size = 0> "
        )
        cases.append(
            Case(
                "block-size-0",
                "float[2,3] x",
                "q, y",
                _QDQ.replace(mine, attrs).replace(other, ""),
                x,
            )
        )
    if e.version >= 21 and e.op == "QuantizeLinear":
        refused = "output_dtype" if e.other < 21 else None
        cases.append(
            Case(
                "output-dtype",
                "float[2,3] x",
                "q, y",
                "s = Constant <value = float {0.05}> ()\nq = QuantizeLinear <output_dtype = 3> (x, s)\ny = DequantizeLinear(q, s)",
                x,
                refused=refused,
            )
        )
    return cases


@builds("QLinearMatMul")
def _qlinear_matmul(e: Entry) -> list[Case]:
    body = (
        "sa = Constant <value = float {0.1}> ()\nza = Constant <value = uint8 {10}> ()\n"
        "sb = Constant <value = float {0.2}> ()\nzb = Constant <value = uint8 {20}> ()\n"
        "sy = Constant <value = float {0.5}> ()\nzy = Constant <value = uint8 {30}> ()\n"
        "y = QLinearMatMul(a, sa, za, b, sb, zb, sy, zy)"
    )
    feeds = (
        ("a", np.random.default_rng(1).integers(0, 60, (2, 3)).astype(np.uint8)),
        ("b", np.random.default_rng(2).integers(0, 60, (3, 4)).astype(np.uint8)),
    )
    return [Case("uint8", "uint8[2,3] a, uint8[3,4] b", "y", body, feeds)]


# ---------------------------------------------------------------- the test


def _params(entries: list[Entry]) -> Iterator:
    for entry in entries:
        builder = BUILDERS.get(entry.op)
        cases = builder(entry) if builder is not None else []
        if not cases:
            yield pytest.param(entry, None, id=f"{entry.id}-no-case")
        for case in cases:
            yield pytest.param(entry, case, id=f"{entry.id}-{case.name}")


PARAMS = list(_params(ENTRIES))


def _text(opset: int, inputs: str, outputs: str, body: str) -> str:
    ir_version = max(8, onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)]))
    return (
        f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>\n'
        f"g ({inputs}) => ({outputs}) {{\n{body}\n}}"
    )


def _model(opset: int, inputs: str, outputs: str, body: str) -> onnx.ModelProto:
    """The case's model, every value typed by ONNX shape inference."""
    model = parse(_text(opset, inputs, outputs, body))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        # MeanVarianceNormalization-13's own function body fails strict inference.
        inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    for output in inferred.graph.output:
        if output.type.WhichOneof("value") is None and output.name in types:
            output.type.CopyFrom(types[output.name])
    outputs_named = {o.name for o in inferred.graph.output}
    kept = [vi for vi in inferred.graph.value_info if vi.name not in outputs_named]
    del inferred.graph.value_info[:]
    inferred.graph.value_info.extend(kept)
    return inferred


def _random_feed(tensor: onnx.TypeProto.Tensor, rng: np.random.Generator) -> np.ndarray:
    shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tensor.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.unsignedinteger):
        return rng.integers(0, 10, shape).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


def _feeds(model: onnx.ModelProto, given: dict) -> dict:
    rng = np.random.default_rng(0)
    return {
        i.name: given[i.name] if i.name in given else _random_feed(i.type.tensor_type, rng)
        for i in model.graph.input
    }


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


_NO_KERNEL = (
    "NOT_IMPLEMENTED",
    "Could not find an implementation",
    "is not supported",
    "not implemented",
    "not supported",
)


def _run(model: onnx.ModelProto, feeds: dict, side: str) -> list:
    """onnxruntime's outputs; where it has no kernel for the original, a skip
    (nothing to compare with), for the converted model a failure (the planner
    checks every node it writes against onnxruntime's kernels)."""
    try:
        return _session(model).run(None, feeds)
    except Exception as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        if any(marker in str(error) for marker in _NO_KERNEL):
            if side.startswith("original") or "either" in side:
                pytest.skip(f"onnxruntime cannot run the {side}: {message[:300]}")
            pytest.fail(
                f"onnxruntime cannot run the {side}, and the planner let it through: {message}"
            )
        raise


# How the planner words a refusal for onnxruntime's missing kernels.
_NO_KERNEL_REFUSAL = re.compile(r"onnxruntime \S+ has no \w+ kernel")


def _assert_needed_refusal(
    model: onnx.ModelProto, entry: Entry, message: str, feeds: dict, monkeypatch
) -> None:
    """A refusal for a missing kernel is one onnxruntime agrees with: converted
    with the kernel check off, the model fails in onnxruntime for a kernel."""
    assert "\n" not in message and "cannot declare opset" in message, message
    monkeypatch.setattr(plan, "_kernel_problem", lambda *args: None)
    try:
        unchecked = lowering.lower(model, target_opset=entry.target)
    except lowering.LoweringError:
        return  # blocked for another reason too
    with pytest.raises(Exception) as error:  # onnxruntime raises its own kinds
        _session(unchecked).run(None, feeds)
    assert any(marker in str(error.value) for marker in _NO_KERNEL), str(error.value)


def _opset(model: onnx.ModelProto) -> int:
    return {o.domain: o.version for o in model.opset_import}[""]


def _converted_ops(model: onnx.ModelProto, op: str) -> bool:
    return any(n.op_type == op for n in model.graph.node)


# ONNX's full check fails on every model holding these: their function body
# fails strict shape inference (a Constant of a referenced attribute).
_FULL_CHECK_FAILS = {("MeanVarianceNormalization", 13)}


def _check(model: onnx.ModelProto) -> None:
    """The full check, or the plain one where an op's own ONNX function body fails it."""
    opset = _opset(model)
    ops = {(n.op_type, schemas.schema(n.op_type, opset).since_version) for n in model.graph.node}
    onnx.checker.check_model(model, full_check=not ops & _FULL_CHECK_FAILS)


def _typed_outputs(model: onnx.ModelProto, results: list) -> onnx.ModelProto:
    """Outputs shape inference left untyped get onnxruntime's element type and rank."""
    for output, result in zip(model.graph.output, results):
        tensor = output.type.tensor_type
        known = output.type.WhichOneof("value") is not None
        if known and (not output.type.HasField("tensor_type") or tensor.HasField("shape")):
            continue
        array = np.asarray(result)
        output.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        output.type.tensor_type.shape.SetInParent()  # a scalar has a shape too
        dims = output.type.tensor_type.shape.dim
        for index in range(array.ndim):
            dims.add().dim_param = f"{output.name}_{index}"
    return model


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "case"), PARAMS)
def test_every_output_matches_in_onnxruntime(entry: Entry, case: Case | None, monkeypatch):
    """Converted, every output matches; or the conversion is refused because
    onnxruntime has no kernel for the converted form (checked: without the
    check, the converted model fails in onnxruntime)."""
    if case is None:
        pytest.fail(
            f"no case for {entry.op}-{entry.version} ({entry.kind} {entry.label}): add a builder"
        )
    original = _model(entry.source, case.inputs, case.outputs, case.body)
    assert schemas.schema(entry.op, entry.source).since_version == entry.version
    if case.refused is not None:
        with pytest.raises(lowering.LoweringError) as error:
            lowering.lower(original, target_opset=entry.target)
        message = str(error.value)
        assert "\n" not in message
        assert case.refused in message, message
        return
    feeds = _feeds(original, dict(case.feeds))
    reference = _model(entry.source, *case.oracle) if case.oracle else original
    want = _run(reference, feeds, f"original {entry.op}-{entry.version}")
    original = _typed_outputs(original, want)
    model = ir.serde.deserialize_model(original)
    try:
        conversions = lowering.pipeline(target_opset=entry.target)(model).conversions
    except lowering.LoweringError as error:
        if not _NO_KERNEL_REFUSAL.search(str(error)):
            raise
        _assert_needed_refusal(original, entry, str(error), feeds, monkeypatch)
        return
    converted = ir.serde.serialize_model(model)
    assert _opset(converted) == entry.target
    _check(converted)
    assert [o.name for o in converted.graph.output] == [o.name for o in original.graph.output]
    done: dict[str, list[str]] = {c.how: [] for c in conversions}
    for conversion in conversions:
        done[conversion.how].append(str(conversion))
    if case.expanded:
        assert any(r.startswith(f"{entry.op}-") for r in done.get("expanded", [])), done
    elif entry.kind == "adapter":
        assert any(r.startswith(entry.label) for r in done.get("adapted", [])), (entry.label, done)
    # Where the original cannot run either, the case's oracle stands for it.
    either = " (the original cannot run either)" if case.oracle else ""
    got = _run(converted, feeds, f"converted {entry.op}-{entry.other}{either}")
    names = [o.name for o in original.graph.output]
    assert len(got) == len(want) == len(names)
    for name, a, b in zip(names, got, want):
        assert_same(a, b, f"{entry.label} output {name!r}")


def test_every_entry_has_a_case_that_converts():
    """A refusal alone says nothing about the outputs: each entry also converts a model."""
    empty = []
    for entry in ENTRIES:
        builder = BUILDERS.get(entry.op)
        cases = builder(entry) if builder else []
        if not any(case.refused is None for case in cases):
            empty.append(entry.id)
    assert not empty, empty


def test_every_builder_is_for_a_table_entry():
    ops = {entry.op for entry in ENTRIES}
    assert not set(BUILDERS) - ops, sorted(set(BUILDERS) - ops)


def test_an_entry_without_a_builder_is_a_failing_case():
    (param,) = _params([Entry("relabel", "NoSuchOp", 1, 2, "down")])
    assert param.values[1] is None and param.id.endswith("-no-case")


# The issue: an inference Dropout-13 whose mask is read, --target-opset 11.
_DROPOUT_13 = """<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3] x) => (float[N,3] y, bool[N,3] m) {
  r = Constant <value = float {0.25}> ()
  y, m = Dropout(x, r)
}"""


def test_a_read_dropout_mask_becomes_a_constant_true_mask_at_opset_11(tmp_path):
    original = parse(_DROPOUT_13)
    onnx.save(original, tmp_path / "in.onnx")
    from lowering.cli import main

    assert (
        main(["--target-opset", "11", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 0
    )
    converted = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(converted, full_check=True)
    assert _opset(converted) == 11
    (dropout,) = [n for n in converted.graph.node if n.op_type == "Dropout"]
    assert list(dropout.output) == ["y"]  # Dropout-10's own mask is all false in onnxruntime
    assert [n.op_type for n in converted.graph.node if n.output[0] == "m"] == ["ConstantOfShape"]
    x = _uniform((5, 3))
    y, m = _session(converted).run(None, {"x": x})
    np.testing.assert_array_equal(y, x)
    assert m.dtype == np.bool_ and m.shape == (5, 3) and m.all()
    for a, b in zip(
        _session(converted).run(None, {"x": x}), _session(original).run(None, {"x": x})
    ):
        assert_same(a, b, "dropout")


def test_dropout_10_going_up_with_its_mask_read_is_refused():
    text = """<ir_version: 8, opset_import: ["" : 11]>
    g (float[2,3] x) => (float[2,3] y, bool[2,3] m) { y, m = Dropout(x) }"""
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(parse(text), target_opset=13)
    assert "Dropout (node '<unnamed>' in main graph 'g') cannot go up to opset 13" in str(
        error.value
    )
    assert "its mask is read" in str(error.value)
    assert "\n" not in str(error.value)


def test_an_adapter_answers_for_its_first_output_unless_it_says_all(monkeypatch):
    """The planner refuses an output the adapter was not registered for, before it runs."""
    from lowering.opset import registry

    key = ("Dropout", 10, 12, "down")
    real = registry.ADAPTERS[key].function
    ran = []

    def first_only(rw, node):
        ran.append(node)
        real(rw, node)

    monkeypatch.setitem(
        registry.ADAPTERS,
        key,
        dataclasses.replace(registry.ADAPTERS[key], function=first_only, outputs=1),
    )
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(parse(_DROPOUT_13), target_opset=11)
    assert "Dropout-12 -> Dropout-10: its mask output is read" in str(error.value)
    assert not ran
    unread = _DROPOUT_13.replace(", bool[N,3] m", "")
    converted = lowering.lower(parse(unread), target_opset=11)
    onnx.checker.check_model(converted, full_check=True)
    assert _opset(converted) == 11 and ran
