"""Random SequenceMap models with a numpy oracle, for property-based tests.

A model maps 1-3 sequences (elements float32 [R_i, 3], R_i varying with the
element index) and 0-2 tensor extras (float32 [3]) through a body drawn from
a menu: elementwise ops, shape-changing ops (Reshape, Transpose, Slice,
Concat), reductions, Shape, Cast, If, and a nested SequenceMap. The
sequences come from graph inputs, from SequenceConstruct of tensors (static
length: unrolled), or from SplitToSequence of one tensor (uniform shapes).
:class:`FuzzModel` carries the ONNX text, inputs for a given length, and the
oracle: a list comprehension over numpy arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

C = 3  # the fixed last dim of every element


@dataclasses.dataclass
class Step:
    text: str  # ONNX text defining `out` from earlier values
    out: str
    rank: int  # of out
    dtype: str  # ONNX type name of out
    combinable: bool  # float [R, 3]: may feed elementwise ops
    run: Callable[[dict], np.ndarray]


@dataclasses.dataclass
class FuzzModel:
    text: str
    source: str
    num_sequences: int
    num_extras: int
    length: int
    rows: list[int]
    outputs: list[str]
    steps: list[Step]

    def feeds(self, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        elements = [
            [rng.standard_normal((r, C)).astype(np.float32) for r in self.rows]
            for _ in range(self.num_sequences)
        ]
        feeds = {f"t{j}": rng.standard_normal(C).astype(np.float32) for j in range(self.num_extras)}
        for j, sequence in enumerate(elements):
            if self.source == "input":
                feeds[f"s{j}"] = sequence
            elif self.source == "construct":
                feeds.update({f"e{j}_{i}": e for i, e in enumerate(sequence)})
            else:  # one tensor to split; its rows are the same for every element
                rows = self.rows[0] if self.rows else 2
                feeds[f"x{j}"] = (
                    np.stack(sequence) if sequence else np.zeros((0, rows, C), np.float32)
                )
        return feeds

    def oracle(self, feeds: dict) -> list:
        if self.source == "split":
            elements = [list(feeds[f"x{j}"]) for j in range(self.num_sequences)]
        elif self.source == "input":
            elements = [feeds[f"s{j}"] for j in range(self.num_sequences)]
        else:
            elements = [
                [feeds[f"e{j}_{i}"] for i in range(self.length)] for j in range(self.num_sequences)
            ]
        results: list[list[np.ndarray]] = [[] for _ in self.outputs]
        for i in range(self.length):
            env = {f"a{j}": elements[j][i] for j in range(self.num_sequences)}
            env.update({f"u{j}": feeds[f"t{j}"] for j in range(self.num_extras)})
            for step in self.steps:
                env[step.out] = step.run(env)
            for k, name in enumerate(self.outputs):
                results[k].append(env[name])
        return results


def _unary(op: str, fn):
    def make(x: str, out: str) -> Step:
        return Step(
            f"{out} = {op}({x})", out, 2, "float", True, lambda env: fn(env[x]).astype(np.float32)
        )

    return make


def _binary(op: str, fn):
    def make(x: str, y: str, out: str) -> Step:
        return Step(
            f"{out} = {op}({x}, {y})",
            out,
            2,
            "float",
            True,
            lambda env: fn(env[x], env[y]).astype(np.float32),
        )

    return make


UNARY = [
    _unary("Neg", np.negative),
    _unary("Abs", np.abs),
    _unary("Tanh", np.tanh),
    _unary("Relu", lambda v: np.maximum(v, 0)),
]
BINARY = [
    _binary("Add", np.add),
    _binary("Sub", np.subtract),
    _binary("Mul", np.multiply),
    _binary("Max", np.maximum),
]


def _terminal(kind: str, x: str, out: str, extra: str | None) -> Step:
    """Ops whose result is not [R, 3] float: they only feed outputs."""
    if kind == "reshape":
        return Step(
            f"{out}_shape = Constant <value = int64[1] {{-1}}> ()\n {out} = Reshape({x}, {out}_shape)",
            out,
            1,
            "float",
            False,
            lambda env: env[x].reshape(-1),
        )
    if kind == "transpose":
        return Step(
            f"{out} = Transpose <perm = [1, 0]> ({x})",
            out,
            2,
            "float",
            False,
            lambda env: env[x].T.copy(),
        )
    if kind == "slice":
        return Step(
            f"{out}_s = Constant <value = int64[1] {{0}}> ()\n {out}_e = Constant <value = int64[1] {{2}}> ()\n"
            f" {out}_a = Constant <value = int64[1] {{1}}> ()\n {out} = Slice({x}, {out}_s, {out}_e, {out}_a)",
            out,
            2,
            "float",
            False,
            lambda env: env[x][:, 0:2].copy(),
        )
    if kind == "concat":
        return Step(
            f"{out} = Concat <axis = 0> ({x}, {x})",
            out,
            2,
            "float",
            False,
            lambda env: np.concatenate([env[x], env[x]], axis=0),
        )
    if kind == "reduce":
        return Step(
            f"{out}_axes = Constant <value = int64[1] {{0}}> ()\n"
            f" {out} = ReduceSum <keepdims = 0> ({x}, {out}_axes)",
            out,
            1,
            "float",
            False,
            lambda env: env[x].sum(axis=0).astype(np.float32),
        )
    if kind == "shape":
        return Step(
            f"{out} = Shape({x})",
            out,
            1,
            "int64",
            False,
            lambda env: np.array(env[x].shape, np.int64),
        )
    if kind == "cast":
        return Step(
            f"{out} = Cast <to = 6> ({x})",
            out,
            2,
            "int32",
            False,
            lambda env: env[x].astype(np.int32),
        )
    if kind == "if":
        return Step(
            f"{out}_sum = ReduceSum <keepdims = 0> ({x})\n {out}_zero = Constant <value = float {{0}}> ()\n"
            f" {out}_cond = Greater({out}_sum, {out}_zero)\n"
            f" {out} = If ({out}_cond) <then_branch = {out}_then () => (float[R,{C}] {out}_t) {{ {out}_t = Neg({x}) }},"
            f" else_branch = {out}_else () => (float[R,{C}] {out}_f) {{ {out}_f = Abs({x}) }}>",
            out,
            2,
            "float",
            False,
            lambda env: (-env[x] if env[x].sum() > 0 else np.abs(env[x])).astype(np.float32),
        )
    if kind == "nested":
        inner_extra = extra or x
        return Step(
            f"{out}_rows = SplitToSequence <axis = 0, keepdims = 0> ({x})\n"
            f" {out}_mapped = SequenceMap <body = {out}_body (float[{C}] {out}_r) => (float[{C}] {out}_c) {{\n"
            f"   {out}_c = Mul({out}_r, {inner_extra if extra else out + '_r'})\n"
            f" }}> ({out}_rows)\n"
            f" {out} = ConcatFromSequence <axis = 0, new_axis = 1> ({out}_mapped)",
            out,
            2,
            "float",
            False,
            lambda env: (env[x] * (env[extra] if extra else env[x])).astype(np.float32),
        )
    raise ValueError(kind)


TERMINALS = ["reshape", "transpose", "slice", "concat", "reduce", "shape", "cast", "if", "nested"]


@st.composite
def fuzz_models(draw) -> FuzzModel:
    num_sequences = draw(st.integers(1, 3))
    num_extras = draw(st.integers(0, 2))
    source = draw(st.sampled_from(["input", "construct", "split"]))
    length = draw(st.integers(0, 6))
    if source == "split":
        rows = [draw(st.integers(1, 4))] * length
    else:
        rows = [draw(st.integers(1, 4)) for _ in range(length)]
    pool = [f"a{j}" for j in range(num_sequences)]
    extras = [f"u{j}" for j in range(num_extras)]
    steps: list[Step] = []
    for index in range(draw(st.integers(1, 5))):
        out = f"v{index}"
        kind = draw(st.sampled_from(["unary", "binary", "terminal"]))
        if kind == "unary":
            steps.append(draw(st.sampled_from(UNARY))(draw(st.sampled_from(pool)), out))
            pool.append(out)
        elif kind == "binary":
            left = draw(st.sampled_from(pool))
            right = draw(st.sampled_from(pool + extras))
            steps.append(draw(st.sampled_from(BINARY))(left, right, out))
            pool.append(out)
        else:
            extra = draw(st.sampled_from([None, *extras]))
            steps.append(
                _terminal(draw(st.sampled_from(TERMINALS)), draw(st.sampled_from(pool)), out, extra)
            )
    candidates = [s.out for s in steps] + [f"a{j}" for j in range(num_sequences)] + extras
    outputs = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))
    return _assemble(num_sequences, num_extras, source, length, rows, steps, outputs)


def _type(name: str, steps: list[Step], prefix: str) -> str:
    for step in steps:
        if step.out == name:
            dims = ",".join(f"{prefix}{d}" for d in range(step.rank))
            return f"{step.dtype}[{dims}]"
    if name.startswith("u"):
        return f"float[{C}]"
    return f"float[R,{C}]"


def _assemble(num_sequences, num_extras, source, length, rows, steps, outputs) -> FuzzModel:
    seq_inputs, build = [], []
    graph_inputs = [f"float[{C}] t{j}" for j in range(num_extras)]
    for j in range(num_sequences):
        if source == "input":
            graph_inputs.append(f"seq(float[R,{C}]) s{j}")
            seq_inputs.append(f"s{j}")
        elif source == "construct":
            names = [f"e{j}_{i}" for i in range(length)]
            graph_inputs += [f"float[R{i},{C}] {n}" for i, n in enumerate(names)]
            build.append(
                f"s{j} = SequenceConstruct({', '.join(names)})"
                if names
                else f"s{j} = SequenceEmpty <dtype = 1> ()"
            )
            seq_inputs.append(f"s{j}")
        else:
            graph_inputs.append(f"float[L,R,{C}] x{j}")
            build.append(f"s{j} = SplitToSequence <axis = 0, keepdims = 0> (x{j})")
            seq_inputs.append(f"s{j}")
    body_inputs = [f"float[R,{C}] a{j}" for j in range(num_sequences)]
    body_inputs += [f"float[{C}] u{j}" for j in range(num_extras)]
    body_outputs = [f"{_type(o, steps, f'D{k}_')} {o}" for k, o in enumerate(outputs)]
    # An output that is a body input is listed once per use: give it a fresh name.
    renamed, copies = [], []
    for k, name in enumerate(outputs):
        if name.startswith(("a", "u")):
            copies.append(f"o{k} = Identity({name})")
            renamed.append(f"o{k}")
        else:
            renamed.append(name)
    body_outputs = [
        f"{_type(o, steps, f'D{k}_')} {r}" for k, (o, r) in enumerate(zip(outputs, renamed))
    ]
    node_outputs = [f"y{k}" for k in range(len(outputs))]
    graph_outputs = [f"seq({_type(o, steps, f'G{k}_')}) y{k}" for k, o in enumerate(outputs)]
    body_text = "\n   ".join([s.text for s in steps] + copies)
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
g ({", ".join(graph_inputs)}) => ({", ".join(graph_outputs)}) {{
  {chr(10).join(build)}
  {", ".join(node_outputs)} = SequenceMap <body = body ({", ".join(body_inputs)}) => ({", ".join(body_outputs)}) {{
   {body_text}
  }}> ({", ".join(seq_inputs + [f"t{j}" for j in range(num_extras)])})
}}"""
    return FuzzModel(text, source, num_sequences, num_extras, length, rows, outputs, steps)
