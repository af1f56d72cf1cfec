"""Shapes ONNX's inference gets wrong, put where the tool reads shapes (issue 33).

Two features of :func:`tests.fuzz_models.structured_models`:

``inferred``
    Exporters and simplifiers hand on models that went through
    ``onnx.shape_inference.infer_shapes``: every value then declares what
    ONNX infers of it, wrong for the ops of
    ``lowering.irutils.node_inference`` (op_facts.SHAPES_SEEN_WRONG, doubted()). Some
    examples go through it (:func:`inferred_model`): the tool is handed that
    model, value_info and all; the oracle, and onnxruntime's run of the
    original, stay those of the model before. :func:`wrong_site` puts an op
    ONNX sizes wrong, on static input shapes, where the size it declares
    reaches what reads shapes: a SplitToSequence of its result read at -1,
    inserted into at the declared length, mapped, concatenated back; an
    Einsum of it (lowered to opset 11 too, where the expansion reads dims);
    in the main graph (maybe wrapped) or in a map body over static elements.
``scan_only``
    :func:`scan_site`: a map over the uniform elements of a SplitToSequence,
    read by ConcatFromSequence, whose body holds a Resize by scales (no
    batching rule: only a Scan or a Loop can take it), alone or chained with
    a second op ONNX sizes wrong (a pool with ceil_mode 1 and end pads,
    another Resize), sometimes then a Flatten or a Reshape; lowered with
    ``runtime`` openvino or tract, or to opset 11, too.

Each such op is drawn on static input shapes and kept where ONNX's claim
(``infer_shapes`` of the op alone, as it sits in the model) differs from
what onnxruntime computes (:func:`draw_wrong`); its oracle is the op alone in
onnxruntime without its optimizer (``OneOp``), like the edge ops'.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from hypothesis import strategies as st

from tests.fuzz_models import (
    DTYPES,
    Builder,
    Gen,
    OneOp,
    Picker,
    V,
    _dtype_name,
    _value_info,
    run_steps,
)

I64_MAX = int(np.iinfo(np.int64).max)
I32_MAX = int(np.iinfo(np.int32).max)
SCALES = [1.4, 0.6, 1.7, 2.5, 0.7, 1.3, 2.2, 1.2, 0.4, 1.6]
# The scales (of one decimal, up to 3) whose product with a size up to 10 ONNX
# floors in float32 to one less than onnxruntime computes (5 x 1.4: 6 to ONNX,
# 7 to onnxruntime); no other size up to 10 has one.
WRONG_SCALES = {5: [1.4, 1.8, 2.6, 2.8], 10: [0.7, 0.9, 1.3, 1.4, 1.8, 2.3]}
RESIZED = [5, 5, 5, 10, 3, 4, 6, 7]  # spatial sizes of a Resize's input
# Every kind of op whose shape ONNX was seen to infer wrong, by the draw below.
WRONG_KINDS = [
    "resize", "resize", "pool", "pool", "conv_transpose", "einsum", "nonzero", "squeeze",
    "range", "slice", "prelu",
]  # fmt: skip


@dataclasses.dataclass
class WrongOp:
    """One op on static shapes, with what ONNX claims of its output and what
    onnxruntime computes. ``inputs`` name "x" for the data input, "" for an
    omitted one, else a key of ``consts`` (Constant nodes in the model)."""

    op: str
    inputs: list[str]
    attrs: dict
    consts: dict
    shape: tuple | None  # the data input's (None: the op reads none)
    note: str
    claimed: list | None = None  # ONNX's dims (None: no shape claimed), a dim None if unknown
    actual: tuple = ()

    @property
    def ranked(self) -> bool:
        """ONNX claims the rank onnxruntime computes (a declared rank is then right)."""
        return self.claimed is not None and len(self.claimed) == len(self.actual)

    @property
    def wrong(self) -> bool:
        if self.claimed is None:
            return False
        return not self.ranked or any(
            c is not None and c != a for c, a in zip(self.claimed, self.actual)
        )

    def describe(self) -> str:
        return (
            f"{self.op}({self.note}) on {list(self.shape) if self.shape is not None else '-'}:"
            f" ONNX infers {self.claimed}, onnxruntime computes {list(self.actual)}"
        )


def _image(p: Picker, low: int = 2, high: int = 7) -> tuple:
    return (1, p.integer(1, 2), *[p.integer(low, high) for _ in range(p.integer(1, 2))])


def _resize(p: Picker, opset: int, shape):
    if shape is None:
        shape = (1, p.integer(1, 2), *[p.pick(RESIZED) for _ in range(p.integer(1, 2))])
    if len(shape) < 3:
        return None
    scales = [1.0, 1.0] + [
        p.pick(WRONG_SCALES[d]) if d in WRONG_SCALES and p.integer(0, 3) else p.pick(SCALES)
        for d in shape[2:]
    ]
    mode = p.pick(["nearest", "nearest", "linear"])
    attrs = {"mode": mode}
    if mode == "nearest" and p.coin():
        attrs["nearest_mode"] = p.pick(["floor", "ceil", "round_prefer_ceil"])
    consts = {"scales": np.array(scales, np.float32)}
    return WrongOp("Resize", ["x", "", "scales"], attrs, consts, shape, f"scales {scales[2:]}")


def _pool(p: Picker, opset: int, shape):
    shape = shape if shape is not None else _image(p, 3, 7)
    if len(shape) < 3:
        return None
    op = p.pick(["MaxPool", "MaxPool", "AveragePool"] + (["LpPool"] if opset >= 18 else []))
    spatial = shape[2:]
    kernel = [p.integer(2, min(3, d)) if d >= 2 else 1 for d in spatial]
    strides = [p.pick([2, 2, 3]) for _ in spatial]
    begin = [p.integer(0, k - 1) for k in kernel]
    end = [p.integer(1, k - 1) if k >= 2 else 0 for k in kernel]
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": begin + end, "ceil_mode": 1}
    if op == "AveragePool" and p.coin():
        attrs["count_include_pad"] = 1
    return WrongOp(op, ["x"], attrs, {}, shape, f"ceil_mode 1, pads {begin + end}")


def _conv_transpose(p: Picker, opset: int, shape):
    shape = shape if shape is not None else _image(p, 2, 5)
    if len(shape) < 3:
        return None
    spatial = shape[2:]
    kernel = [p.integer(1, 3) for _ in spatial]
    strides = [p.pick([2, 3]) for _ in spatial]
    padding = [p.integer(1, s - 1) for s in strides]
    w = p.rng.integers(-1, 2, (shape[1], p.integer(1, 2), *kernel)).astype(np.float32)
    attrs = {
        "auto_pad": p.pick(["SAME_UPPER", "SAME_LOWER"]),
        "strides": strides,
        "output_padding": padding,
    }
    return WrongOp("ConvTranspose", ["x", "w"], attrs, {"w": w}, shape, f"{attrs}")


def _einsum(p: Picker, opset: int, shape):
    if shape is None:
        rank = p.integer(2, 3)
        shape = tuple(p.integer(2, 4) for _ in range(rank))
        unit = p.integer(0, rank - 1)
        shape = shape[:unit] + (1,) + shape[unit + 1 :]
    units = [i for i, d in enumerate(shape) if d == 1]
    if not units:
        return None
    unit = p.pick(units)
    other = list(shape)
    other[unit] = p.integer(2, 3)  # a size-1 dim of x broadcasts against it
    letters = "ijkl"[: len(shape)]
    out = letters if p.coin() else letters.replace(letters[-1], "") or letters
    swap = p.coin()
    terms = [letters, letters]
    equation = f"{','.join(terms)}->{out}"
    other_value = p.rng.integers(-2, 3, other).astype(np.float32)
    inputs = ["b", "x"] if swap else ["x", "b"]
    return WrongOp(
        "Einsum", inputs, {"equation": equation}, {"b": other_value}, shape, f"{equation} {other}"
    )


def _nonzero(p: Picker, opset: int, shape):
    if shape not in (None, ()):
        return None
    return WrongOp("NonZero", ["x"], {}, {}, (), "of a scalar")


def _squeeze(p: Picker, opset: int, shape):
    if shape is None:
        shape = tuple(p.pick([1, 1, 2, 3]) for _ in range(p.integer(2, 3)))
    if 1 not in shape:
        return None
    consts = {"axes": np.zeros(0, np.int64)}
    return WrongOp("Squeeze", ["x", "axes"], {}, consts, shape, "empty axes")


# Float bounds ONNX counts in float32 and onnxruntime in double: one less, or more.
RANGES = [
    (-0.17, -10.17, -1.0), (0.1, 1.1, 0.2), (0.2, -9.8, -1.0), (0.7, 1.7, 0.2), (0.1, 3.4, 0.3),
    (-0.3, 1.7, 0.1),
]  # fmt: skip


def _range(p: Picker, opset: int, shape):
    if shape is not None:
        return None
    start, limit, delta = p.pick(RANGES)
    consts = {
        "start": np.array(start, np.float32),
        "limit": np.array(limit, np.float32),
        "delta": np.array(delta, np.float32),
    }
    return WrongOp(
        "Range", ["start", "limit", "delta"], {}, consts, None, f"{start}:{limit}:{delta}"
    )


def _slice(p: Picker, opset: int, shape):
    if shape is None:
        shape = tuple(p.integer(2, 5) for _ in range(p.integer(1, 3)))
    axes = [i for i, d in enumerate(shape) if d >= 2]
    if not axes:
        return None
    axis = p.pick(axes)
    d = shape[axis]
    consts = {
        "starts": np.array([p.integer(1, d - 1)], np.int64),
        "ends": np.array([p.pick([I64_MAX, I32_MAX])], np.int64),
        "axes": np.array([axis - len(shape) if p.coin() else axis], np.int64),
        "steps": np.array([p.pick([-1, -1, -2])], np.int64),
    }
    shown = f"{consts['starts'][0]}:{consts['ends'][0]}:{consts['steps'][0]} axis {axis}"
    return WrongOp("Slice", ["x", "starts", "ends", "axes", "steps"], {}, consts, shape, shown)


def _prelu(p: Picker, opset: int, shape):
    if shape is None:
        shape = (1, p.integer(2, 3), 1)
    if shape[-1] != 1:
        return None
    slope = (p.integer(2, 4),) if p.coin() else (1, p.integer(2, 4))
    value = p.rng.uniform(0.1, 0.5, slope).astype(np.float32)
    return WrongOp("PRelu", ["x", "slope"], {}, {"slope": value}, shape, f"slope {list(slope)}")


DRAWS = {
    "resize": _resize,
    "pool": _pool,
    "conv_transpose": _conv_transpose,
    "einsum": _einsum,
    "nonzero": _nonzero,
    "squeeze": _squeeze,
    "range": _range,
    "slice": _slice,
    "prelu": _prelu,
}


def _node(w: WrongOp, names: dict, out: str) -> onnx.NodeProto:
    inputs = [names.get(i, i) if i else "" for i in w.inputs]
    return onnx.helper.make_node(w.op, inputs, [out], **w.attrs)


def settle(w: WrongOp, opset: int, x: np.ndarray | None) -> WrongOp:
    """``w`` with what onnxruntime computes on ``x`` and what ONNX claims (raises
    where either refuses the op)."""
    from tests.fuzz_models import IR_VERSION

    node = _node(w, {}, "y")
    one = OneOp(node, w.consts, opset)
    (y,) = one(*[x if i == "x" else w.consts.get(i) for i in w.inputs])
    nodes = [
        onnx.helper.make_node("Constant", [], [k], value=onnx.numpy_helper.from_array(v))
        for k, v in w.consts.items()
    ]
    inputs = []
    if w.shape is not None:
        code = onnx.helper.np_dtype_to_tensor_dtype(x.dtype)
        inputs.append(onnx.helper.make_tensor_value_info("x", code, list(w.shape)))
    # y inside the graph (a declared output would claim a rank): its Size out
    nodes += [node, onnx.helper.make_node("Size", ["y"], ["n"])]
    output = onnx.helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])
    graph = onnx.helper.make_graph(nodes, "one", inputs, [output])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION[opset]
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model)
    t = next(v for v in inferred.graph.value_info if v.name == "y").type.tensor_type
    claimed = None
    if t.HasField("shape"):
        claimed = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return dataclasses.replace(w, claimed=claimed, actual=tuple(np.asarray(y).shape))


def draw_wrong(p: Picker, opset: int, kinds, shape=None, x=None, tries: int = 16, wrong=True):
    """An op of one of ``kinds`` on ``shape`` (drawn if None) that onnxruntime
    runs and whose shape ONNX claims wrong (any, if not ``wrong``); (op, its
    data input's value), or None if no draw of ``tries`` gives one."""
    for _ in range(tries):
        w = DRAWS[p.pick(kinds)](p, opset, shape)
        if w is None:
            continue
        value = x
        if value is None and w.shape is not None:
            value = p.rng.standard_normal(w.shape).astype(np.float32)
            if w.op == "NonZero" and p.integer(0, 3) == 0:
                value = np.zeros((), np.float32)
        try:
            settled = settle(w, opset, value)
        except Exception:  # noqa: BLE001, S112 -- a draw onnxruntime or ONNX refuses: draw again
            continue
        if settled.wrong or not wrong:
            return settled, value
    return None


def constant(gen: Gen, b: Builder, value: np.ndarray, hint: str) -> str:
    """A Constant node of ``value`` (any dtype)."""
    value = np.asarray(value)
    out = V(gen.fresh(hint), _dtype_name(value), "tensor", ("T", value.ndim), value.ndim)
    tensor = onnx.numpy_helper.from_array(value)
    gen.node(b, "Constant", [], [out], lambda v=value: (v,), value=tensor)
    return out.name


def emit(gen: Gen, b: Builder, w: WrongOp, x: str | None, dtype: str) -> V:
    """``w`` on ``x`` in ``b``, its constants as Constant nodes; its oracle the op alone."""
    names = {k: constant(gen, b, v, k[:5]) for k, v in w.consts.items()}
    if x is not None:
        names["x"] = x
    out = V(gen.fresh(w.op.lower()[:5]), dtype, "tensor", ("T", len(w.actual)), len(w.actual))
    node = _node(w, names, out.name)
    one = OneOp(node, {names[k]: v for k, v in w.consts.items()}, gen.opset)
    gen.node(b, w.op, list(node.input), [out], one, **w.attrs)
    # (an op after the first of a chain may be sized right on its true input)
    gen.note(f"ONNX sizes {'wrong' if w.wrong else 'right alone'}: {w.describe()}")
    return out


class WrongSite(Picker):
    """Draws one site of ``inferred`` or ``scan_only`` in a model being drawn."""

    def __init__(self, gen: Gen):
        self.gen = gen
        # Choices from a stream of their own, as the edge ops' (see Gen.edge_site).
        own = gen.draw(st.integers(0, 2**32 - 1))
        gen.rng = np.random.default_rng([own, *gen.rng.integers(0, 2**32, 2)])
        self.rng = gen.rng
        gen.exact = True  # Shape folded from ONNX's inference would be wrong
        gen.disagrees = True
        gen.wrong = True

    # -- what reads a value ONNX sizes wrong ------------------------------------
    def expose(self, b: Builder, v: V, ranked: bool) -> list[V]:
        """``v`` as the model returns it: as data where ONNX claims its rank
        (a declared rank is then right), else through its Shape or Size."""
        gen = self.gen
        ways = ["data", "shape", "scaled"] if ranked else ["shape", "size"]
        way = self.pick(ways)
        if way == "data":
            return [v]
        if way == "shape":
            out = V(gen.fresh("shape"), "int64", "tensor", ("T", 1), 1)
            gen.node(b, "Shape", [v.name], [out], lambda a: (np.array(a.shape, np.int64),))
            return [out]
        size = V(gen.fresh("size"), "int64", "tensor", ("T", 0), 0)
        gen.node(b, "Size", [v.name], [size], lambda a: (np.array(a.size, np.int64),))
        if way == "size":
            return [size]
        cast = V(gen.fresh("cast"), v.dtype, "tensor", ("T", 0), 0)
        gen.node(b, "CastLike", [size.name, v.name], [cast], lambda c, a: (c.astype(a.dtype),))
        out = dataclasses.replace(v, name=gen.fresh("scaled"))
        gen.node(b, "Mul", [v.name, cast.name], [out], lambda a, c: ((a * c).astype(a.dtype),))
        return [out]

    def readers(self, b: Builder, y: V, w: WrongOp, top: bool) -> list[V]:
        """What reads ``y`` (``w``'s output): a SplitToSequence along a dim ONNX
        sizes wrong, read at -1, inserted into at the declared length, mapped,
        concatenated back; an Einsum; and ``y`` itself. Sequences are returned
        only at ``top``; in a body they end as tensors."""
        results: list[V] = []
        rank = len(w.actual)
        kinds = ["split", "split", "split"] + ["einsum"] * (w.ranked and y.dtype == "float")
        kinds += ["self"]
        if rank == 0:
            kinds = ["self"]
        for kind in self.some(kinds, 1, 2, unique=True):
            if kind == "self":
                results += self.expose(b, y, w.ranked)
            elif kind == "einsum":
                results += self.einsum(b, y, w)
            else:
                results += self.split(b, y, w, top)
        return results

    def split(self, b: Builder, y: V, w: WrongOp, top: bool) -> list[V]:
        gen = self.gen
        rank = len(w.actual)
        wrong_axes = [
            i
            for i in range(rank)
            if w.ranked and w.claimed[i] is not None and w.claimed[i] != w.actual[i]
        ]
        axis = (
            self.pick(wrong_axes)
            if wrong_axes and self.integer(0, 3)
            else self.integer(0, rank - 1)
        )
        keep = self.coin()
        n = w.actual[axis]
        declared = w.claimed[axis] if w.ranked else None
        element_rank = rank if keep else rank - 1
        seq = V(
            gen.fresh("s"),
            y.dtype,
            "seq",
            ("T", element_rank),
            element_rank,
            length=n,
            nonempty=n > 0,
        )
        signed = axis - rank if self.coin() else axis

        def fn(t, a=axis, keep=keep):
            return (
                [np.asarray(np.take(t, [i] if keep else i, axis=a)) for i in range(t.shape[a])],
            )

        gen.node(b, "SplitToSequence", [y.name], [seq], fn, axis=signed, keepdims=int(keep))
        gen.note(
            f"SplitToSequence(axis={signed}, keepdims={int(keep)}) of it: {n} elements,"
            f" ONNX declares {declared}"
        )
        # ONNX claims an element's rank right where it claims y's: returned as data then.
        ranked = w.ranked
        results: list[V] = []
        current = seq
        if self.integer(0, 2) == 0 or (declared is not None and self.coin()):
            current = self.insert(b, seq, w, axis, keep, declared)
        ways = ["at", "length", "map", "concat"] + (["output"] if top and ranked else [])
        for way in self.some(ways, 1, 3, unique=True):
            m = current.length or 0
            if way == "at" and m:
                index = self.pick(
                    [-1, -1, m - 1, 0] + ([declared - 1] if declared and declared <= m else [])
                )
                at = V(gen.fresh("at"), y.dtype, "tensor", ("T", element_rank), element_rank)
                k = constant(gen, b, np.array(index, self.pick([np.int64, np.int32])), "i")
                gen.node(b, "SequenceAt", [current.name, k], [at], lambda s, i: (s[int(i)],))
                gen.note(f"SequenceAt({index}) of it")
                results += self.expose(b, at, ranked)
            elif way == "length":
                out = V(gen.fresh("len"), "int64", "tensor", ("T", 0), 0)
                gen.node(b, "SequenceLength", [current.name], [out], lambda s: (np.array(len(s)),))
                results.append(out)
            elif way == "map":
                results += self.small_map(b, current, ranked, top)
            elif way == "concat" and m and current is seq:
                out = V(gen.fresh("cat"), y.dtype, "tensor", ("T", rank), rank)

                def cat(s, a=axis, keep=keep):
                    return (np.concatenate(s, axis=a) if keep else np.stack(s, axis=a),)

                gen.node(
                    b,
                    "ConcatFromSequence",
                    [current.name],
                    [out],
                    cat,
                    axis=signed,
                    new_axis=int(not keep),
                )
                gen.note("ConcatFromSequence of it back")
                results += self.expose(b, out, ranked)
            elif way == "output":
                results.append(current)
        if not results:
            out = V(gen.fresh("len"), "int64", "tensor", ("T", 0), 0)
            gen.node(b, "SequenceLength", [current.name], [out], lambda s: (np.array(len(s)),))
            results.append(out)
        return results

    def insert(self, b: Builder, seq: V, w: WrongOp, axis: int, keep: bool, declared) -> V:
        """SequenceInsert at the length ONNX declares (where that is a position
        of the sequence: not beyond it), or at its true length."""
        gen = self.gen
        n = seq.length or 0
        positions = [n, -n]
        if declared is not None and declared <= n:
            positions += [declared, declared, -declared]
        position = self.pick(positions)
        shape = list(w.actual)
        if keep:
            shape[axis] = 1
        else:
            del shape[axis]
        t = V(gen.fresh("t"), seq.dtype, "tensor", ("T", len(shape)), len(shape))
        gen.graph_input(t, gen.tensor(seq.dtype, shape), shape)
        p = constant(gen, b, np.array(position, self.pick([np.int64, np.int32])), "pos")
        out = dataclasses.replace(seq, name=gen.fresh("ins"), length=n + 1, nonempty=True)

        def fn(s, x, q):
            result = list(s)
            result.insert(int(q), x)
            return (result,)

        gen.node(b, "SequenceInsert", [seq.name, t.name, p], [out], fn)
        gen.note(f"SequenceInsert at {position} of {n} (ONNX declares {declared})")
        return out

    def small_map(self, b: Builder, seq: V, ranked: bool, top: bool) -> list[V]:
        """A map over ``seq`` returning each element times its Size, its Shape, its Size."""
        gen = self.gen
        body = Builder(b, "body")
        name = gen.fresh("e")
        body.define([name])
        code = DTYPES[seq.dtype][0]
        element = onnx.helper.make_tensor_value_info(
            name, code, [None] * seq.rank if ranked else None
        )
        e = V(name, seq.dtype, "tensor", ("T", seq.rank), seq.rank)
        outputs = []
        for way in self.some(
            ["scaled", "shape", "size"] if ranked else ["shape", "size"], 1, 2, unique=True
        ):
            size = V(gen.fresh("size"), "int64", "tensor", ("T", 0), 0)
            if way == "shape":
                out = V(gen.fresh("shape"), "int64", "tensor", ("T", 1), 1)
                gen.node(body, "Shape", [name], [out], lambda a: (np.array(a.shape, np.int64),))
            elif way == "size":
                out = size
                gen.node(body, "Size", [name], [out], lambda a: (np.array(a.size, np.int64),))
            else:
                gen.node(body, "Size", [name], [size], lambda a: (np.array(a.size, np.int64),))
                cast = V(gen.fresh("cast"), e.dtype, "tensor", ("T", 0), 0)
                gen.node(
                    body, "CastLike", [size.name, name], [cast], lambda c, a: (c.astype(a.dtype),)
                )
                out = dataclasses.replace(e, name=gen.fresh("scaled"))
                gen.node(
                    body, "Mul", [name, cast.name], [out], lambda a, c: ((a * c).astype(a.dtype),)
                )
            outputs.append(out)
        for v in outputs:
            body.use(v.name)
        graph = onnx.helper.make_graph(
            body.nodes, gen.fresh("body"), [element], [_value_info(v) for v in outputs]
        )
        outs = [
            dataclasses.replace(
                v, name=gen.fresh("y"), kind="seq", length=seq.length, nonempty=seq.nonempty
            )
            for v in outputs
        ]
        b.use(seq.name)
        b.nodes.append(
            onnx.helper.make_node("SequenceMap", [seq.name], [o.name for o in outs], body=graph)
        )
        b.define(o.name for o in outs)

        def step(env):
            results: list[list] = [[] for _ in outputs]
            for x in env[seq.name]:
                local = dict(env)
                local[name] = x
                run_steps(body.steps, local)
                for result, v in zip(results, outputs):
                    result.append(local[v.name])
            env.update(zip([o.name for o in outs], results))

        b.steps.append(step)
        gen.note("a map over it")
        results = []
        for out, v in zip(outs, outputs):
            # Shapes and Sizes have one shape; the data too where ONNX claims its rank,
            # but an element inserted may differ from the split's ones: not stacked then.
            if (not top or self.coin()) and seq.length and v.dtype == "int64" and v.rank == 0:
                cat = V(gen.fresh("cat"), v.dtype, "tensor", ("T", 1), 1)
                gen.node(
                    b,
                    "ConcatFromSequence",
                    [out.name],
                    [cat],
                    lambda s: (np.stack(s),),
                    axis=0,
                    new_axis=1,
                )
                results.append(cat)
            elif top:
                results.append(out)
            else:
                n = V(gen.fresh("len"), "int64", "tensor", ("T", 0), 0)
                gen.node(b, "SequenceLength", [out.name], [n], lambda s: (np.array(len(s)),))
                results.append(n)
        return results

    def einsum(self, b: Builder, y: V, w: WrongOp) -> list[V]:
        """An Einsum of ``y`` with a constant, on the dims onnxruntime computes
        (ONNX's claim of ``y`` says otherwise); lowered to opset 11 too, where
        Einsum-12 is expanded by reading its operands' dims."""
        gen = self.gen
        shape = w.actual
        letters = "abcd"[: len(shape)]
        kind = self.pick(["contract", "elementwise", "matmul", "transpose"])
        if kind == "contract":
            other, equation = (shape[-1],), f"{letters},{letters[-1]}->{letters[:-1]}"
        elif kind == "elementwise":
            other, equation = shape, f"{letters},{letters}->{letters}"
        elif kind == "matmul":
            m = self.integer(1, 3)
            other, equation = (shape[-1], m), f"{letters},{letters[-1]}z->{letters[:-1]}z"
        else:
            other, equation = None, f"{letters}->{letters[::-1]}"
        inputs = [y.name]
        consts = {}
        if other is not None:
            value = self.rng.integers(-2, 3, other).astype(np.float32)
            consts["k"] = value
        probe = WrongOp(
            "Einsum",
            ["x"] + (["k"] if consts else []),
            {"equation": equation},
            consts,
            shape,
            equation,
        )
        try:  # ONNX's checker, on the claim of y, and onnxruntime must take it
            node = _node(probe, {"x": "y"}, "z")
            x = np.ones(shape, np.float32)
            out_rank = OneOp(node, consts, gen.opset)(x, *consts.values())[0].ndim
            self.check_claimed(w, node, consts, out_rank)
        except Exception:  # noqa: BLE001 -- not an Einsum ONNX or onnxruntime takes here
            return []
        if consts:
            inputs.append(constant(gen, b, consts["k"], "k"))
        out = V(gen.fresh("einsu"), "float", "tensor", ("T", out_rank), out_rank)
        one = OneOp(
            onnx.helper.make_node("Einsum", inputs, [out.name], equation=equation),
            {inputs[1]: consts["k"]} if consts else {},
            gen.opset,
        )
        gen.node(b, "Einsum", inputs, [out], one, equation=equation)
        gen.note(f"Einsum({equation}) of it, with {other}")
        gen.also.append({"target_opset": 11})
        return self.expose(b, out, True)

    def check_claimed(self, w: WrongOp, node: onnx.NodeProto, consts: dict, rank: int) -> None:
        """ONNX's full checker on ``node`` reading ``y`` as ONNX claims it."""
        from tests.fuzz_models import IR_VERSION

        dims = list(w.claimed or [])
        code = onnx.TensorProto.FLOAT
        nodes = [
            onnx.helper.make_node("Constant", [], [k], value=onnx.numpy_helper.from_array(v))
            for k, v in consts.items()
        ]
        graph = onnx.helper.make_graph(
            nodes + [node],
            "probe",
            [onnx.helper.make_tensor_value_info("y", code, dims)],
            [onnx.helper.make_tensor_value_info("z", code, [None] * rank)],
        )
        opset = self.gen.opset
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        model.ir_version = IR_VERSION[opset]
        onnx.checker.check_model(model, full_check=True)

    # -- the sites ---------------------------------------------------------------
    def top(self, b: Builder, env: dict) -> list[V]:
        """An op ONNX sizes wrong on a graph input of static shape, and what reads it,
        in the main graph or wrapped in If, Loop, Scan and function bodies."""
        gen = self.gen
        drawn = draw_wrong(self, gen.opset, WRONG_KINDS)
        if drawn is None:
            return []
        w, value = drawn
        x = None
        if w.shape is not None:
            v = V(gen.fresh("x"), "float", "tensor", ("T", len(w.shape)), len(w.shape))
            gen.graph_input(v, value, list(w.shape))
            x = v.name
        gen.note("inferred: an op ONNX sizes wrong, on a static graph input")

        def core(builder: Builder, inner: dict) -> list[V]:
            dtype = "int64" if w.op == "NonZero" else "float"
            y = emit(gen, builder, w, x, dtype)
            return self.readers(builder, y, w, top=True)

        return gen.wrap(b, env, gen.wrappers(top=True) if self.coin() else [], core)

    def in_body(self, b: Builder, env: dict) -> list[V]:
        """The same in a map body over the static elements of a split."""
        gen = self.gen
        kinds = [k for k in WRONG_KINDS if k not in ("nonzero", "range")]
        drawn = draw_wrong(self, gen.opset, kinds)
        if drawn is None:
            return []
        w, _ = drawn
        shape = w.shape
        n = self.pick([1, 2, 3])
        elements = [self.rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
        seq = self.split_source(b, elements, shape)
        gen.note("inferred: an op ONNX sizes wrong in a map body over static elements")
        body = Builder(b, "body")
        name = gen.fresh("e")
        body.define([name])
        code = DTYPES["float"][0]
        element = onnx.helper.make_tensor_value_info(name, code, list(shape))
        y = emit(gen, body, w, name, "float")
        outputs = self.readers(body, y, w, top=False)
        return self.map_of(b, seq, body, name, element, outputs)

    def split_source(self, b: Builder, elements: list, shape: tuple) -> V:
        """A SplitToSequence of a graph input of static dims into ``elements``."""
        gen = self.gen
        n = len(elements)
        keep = self.coin() and shape[0] == 1
        value = np.concatenate(elements) if keep else np.stack(elements)
        x = V(gen.fresh("x"), "float", "tensor", ("T", value.ndim), value.ndim)
        dims = list(value.shape)
        if self.coin():
            dims[0] = "N"
        gen.graph_input(x, value, dims)
        rank = len(shape)
        seq = V(gen.fresh("s"), "float", "seq", ("T", rank), rank, length=n, nonempty=n > 0)

        def fn(t, keep=keep):
            return ([t[i : i + 1] if keep else t[i] for i in range(t.shape[0])],)

        gen.node(b, "SplitToSequence", [x.name], [seq], fn, axis=0, keepdims=int(keep))
        gen.note(f"source: SplitToSequence(keepdims={int(keep)}) of {dims}: {n} x {list(shape)}")
        return seq

    def map_of(self, b, seq: V, body: Builder, name: str, element, outputs: list[V]) -> list[V]:
        """The map of ``body`` over ``seq``; each output stacked by ConcatFromSequence."""
        gen = self.gen
        for v in outputs:
            body.use(v.name)
        graph = onnx.helper.make_graph(
            body.nodes, gen.fresh("body"), [element], [_value_info(v) for v in outputs]
        )
        outs = [
            dataclasses.replace(
                v, name=gen.fresh("y"), kind="seq", length=seq.length, nonempty=seq.nonempty
            )
            for v in outputs
        ]
        b.use(seq.name)
        b.nodes.append(
            onnx.helper.make_node("SequenceMap", [seq.name], [o.name for o in outs], body=graph)
        )
        b.define(o.name for o in outs)

        def step(env):
            results: list[list] = [[] for _ in outputs]
            for x in env[seq.name]:
                local = dict(env)
                local[name] = x
                run_steps(body.steps, local)
                for result, v in zip(results, outputs):
                    result.append(local[v.name])
            env.update(zip([o.name for o in outs], results))

        b.steps.append(step)
        results = []
        for out in outs:
            if seq.length and self.integer(0, 3):
                new_axis = self.integer(0, 1) if out.rank else 1
                rank = out.rank + new_axis
                axis = self.integer(-rank, rank - 1) if rank else 0
                cat = V(gen.fresh("cat"), out.dtype, "tensor", ("T", rank), rank)

                def fn(s, a=axis, n=new_axis):
                    return (np.stack(s, axis=a) if n else np.concatenate(s, axis=a),)

                gen.node(
                    b, "ConcatFromSequence", [out.name], [cat], fn, axis=axis, new_axis=new_axis
                )
                gen.note(f"ConcatFromSequence(axis={axis}, new_axis={new_axis}) of the map")
                results.append(cat)
            else:
                results.append(out)
        return results

    def scan(self, b: Builder, env: dict) -> list[V]:
        """``scan_only``: a Resize by scales (no batching rule), alone or chained with
        another op ONNX sizes wrong, maybe then a Flatten or a Reshape, in a map over
        the uniform elements of a split, read by ConcatFromSequence."""
        gen = self.gen
        chain = self.pick(
            [["resize"], ["resize", "pool"], ["pool", "resize"], ["resize", "resize"]]
        )
        tail = self.pick([None, None, "flatten", "reshape"])
        n = self.pick([1, 2, 3, 4])
        # The first op ONNX sizes wrong on a shape of its own drawing; each next
        # one on what the one before computes, element by element (ONNX's claim
        # of its input is wrong already).
        first = draw_wrong(self, gen.opset, chain[:1])
        if first is None:
            return []
        shape = first[0].shape
        elements = [self.rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
        drawn, current = [], elements
        for k, kind in enumerate(chain):
            found = (
                first
                if k == 0
                else draw_wrong(self, gen.opset, [kind], current[0].shape, current[0], wrong=False)
            )
            if found is None:
                break
            w = found[0]
            node = _node(w, {}, "y")
            one = OneOp(node, w.consts, gen.opset)
            current = [
                one(*[c if i == "x" else w.consts.get(i) for i in w.inputs])[0] for c in current
            ]
            drawn.append(w)
        gen.note(f"scan_only: {' then '.join(w.op for w in drawn)} on {n} x {list(shape)}")

        def core(builder: Builder, inner: dict) -> list[V]:
            seq = self.split_source(builder, elements, shape)
            body = Builder(builder, "body")
            name = gen.fresh("e")
            body.define([name])
            dims = list(shape) if self.integer(0, 2) else [None] * len(shape)
            element = onnx.helper.make_tensor_value_info(name, DTYPES["float"][0], dims)
            v = V(name, "float", "tensor", ("T", len(shape)), len(shape))
            for w in drawn:
                v = emit(gen, body, w, v.name, "float")
            if tail == "flatten":
                axis = self.pick([0, 1, 2, -1])
                out = V(gen.fresh("flat"), "float", "tensor", ("T", 2), 2)

                def flatten(a, k=axis):
                    k = k % a.ndim if k < 0 else k
                    # (both dims given: a -1 is ambiguous for an empty tensor)
                    return (a.reshape(int(np.prod(a.shape[:k])), int(np.prod(a.shape[k:]))),)

                gen.node(body, "Flatten", [v.name], [out], flatten, axis=axis)
                gen.note(f"then Flatten(axis={axis})")
                v = out
            elif tail == "reshape":
                target = self.pick([[-1], [1, -1], [0, -1], [0, 0, -1]])
                k = constant(gen, body, np.array(target, np.int64), "shape")
                out = V(gen.fresh("resh"), "float", "tensor", ("T", len(target)), len(target))

                def reshape(a, s, t=target):
                    dims = [a.shape[i] if d == 0 else d for i, d in enumerate(t)]
                    return (a.reshape(dims),)

                gen.node(body, "Reshape", [v.name, k], [out], reshape)
                gen.note(f"then Reshape({target})")
                v = out
            outputs = [v]
            if self.coin():
                outputs += self.expose(body, v, True)
            outputs = list({o.name: o for o in outputs}.values())
            return self.map_of(builder, seq, body, name, element, outputs)

        if self.integer(0, 2) == 0:
            gen.also.append({"target_opset": 11})
        elif self.integer(0, 1) == 0:
            gen.also.append({"runtime": self.pick(["openvino", "tract"])})
        return gen.wrap(b, env, gen.wrappers(top=True) if self.integer(0, 3) == 0 else [], core)


def wrong_site(gen: Gen, b: Builder, env: dict) -> list[V]:
    """``inferred``: an op ONNX sizes wrong where its declared size reaches a shape reader."""
    site = WrongSite(gen)
    return site.top(b, env) if site.coin() else site.in_body(b, env)


def scan_site(gen: Gen, b: Builder, env: dict) -> list[V]:
    """``scan_only``: see :meth:`WrongSite.scan`."""
    return WrongSite(gen).scan(b, env)


def inferred_model(model: onnx.ModelProto, data_prop: bool) -> onnx.ModelProto | None:
    """``model`` as ``onnx.shape_inference.infer_shapes`` hands it on (None where
    that fails, or writes a model ONNX's full checker refuses)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
        onnx.checker.check_model(inferred, full_check=True)
    except Exception:  # noqa: BLE001 -- nothing an exporter would hand on
        return None
    return inferred


def claimed_wrong(model: onnx.ModelProto, inferred: onnx.ModelProto) -> int:
    """How many value_info entries the inference added (a note for the example)."""
    count = lambda m: sum(1 for _ in _infos(m.graph))
    return count(inferred) - count(model)


def _infos(graph: onnx.GraphProto):
    yield from graph.value_info
    for node in graph.node:
        for attribute in node.attribute:
            for g in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _infos(g)
