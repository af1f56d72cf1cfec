"""Models at opsets 7 to 10 with initializers that are also graph inputs (issue 33).

Feature ``old_opset`` of :func:`tests.fuzz_models.structured_models`: a
model of the ops those opsets have (Resize-10 and Upsample with scales,
BatchNormalization, Conv, pools, Clip-6, Slice, Pad-2, Softmax, TopK,
elementwise ops, Dropout, ...; no SequenceMap, which needs 17) on an image
``[1, C, H, W]``, lowered with ``target_opset`` 11, 12 or 13. Its constant
inputs are initializers, and some (all of them at IR 3, opsets 7 and 8) are
graph inputs too: a default the feed overrides. The check feeds many of
them another value than the initializer holds (Resize's scales
[1, 1, 0.6, 0.6] where the initializer says [1, 1, 2, 2]), so a lowering that
reads such an initializer as a constant computes something else.

The tool must refuse (one line: ``StructuredModel.refusable``) or write a
model that gives what onnxruntime computes on the original for the fed
values: the oracle is onnxruntime on the original, without its optimizer,
run when the example is drawn. Each op is kept only where onnxruntime runs
the model so far with it and ONNX's full checker takes it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from tests.fuzz_models import Gen, Picker, StructuredModel

# IR versions of opsets 7 to 10 (IR 3: every initializer must be a graph input).
OLD_IR = {7: 3, 8: 3, 9: 4, 10: 5}
UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "LeakyRelu", "Elu", "Softplus"]
F = np.float32


@dataclasses.dataclass
class Init:
    """A constant input: an initializer, maybe a graph input too, and what it is fed."""

    name: str
    value: np.ndarray
    overridable: bool
    feed: np.ndarray | None = None  # None: not a graph input (or fed its own value)


class OldModel(Picker):
    """Draws one model at an opset from 7 to 10, op by op, each checked in onnxruntime."""

    def __init__(self, gen: Gen):
        self.gen = gen
        from hypothesis import strategies as st

        self.rng = np.random.default_rng(gen.draw(st.integers(0, 2**32 - 1)))
        self.opset = self.pick([7, 8, 9, 10])
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[Init] = []
        self.notes: list[str] = []
        self.counter = 0
        c = self.integer(1, 3)
        self.x = self.rng.standard_normal((1, c, self.pick([4, 5, 6]), self.pick([4, 5, 6])))
        self.x = self.x.astype(F)
        self.current = "x"
        self.shape = self.x.shape
        self.outputs: list[str] = []

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}{self.counter}"

    def init(self, value, hint: str, override=None) -> Init:
        """A constant input; a graph input too (always at IR 3, else half the time),
        fed ``override`` half the time it is one (its own value otherwise)."""
        value = np.asarray(value)
        must = OLD_IR[self.opset] < 4
        overridable = must or self.coin()
        feed = None
        if overridable:
            feed = value
            if override is not None and (self.coin() or not must):
                feed = np.asarray(override, value.dtype)
        return Init(self.fresh(hint), value, overridable, feed)

    # -- the ops -----------------------------------------------------------------
    def draw_op(self) -> tuple[str, list, dict, list[Init]] | None:
        """(op, inputs, attrs, constant inputs) on the current value."""
        x, (_, c, h, w) = self.current, self.shape
        rank4 = len(self.shape) == 4
        kinds = ["unary", "binary", "dropout", "clip", "softmax", "transpose"]
        if rank4:
            kinds += ["resize", "resize", "resize", "batchnorm", "batchnorm"]
            kinds += ["pad", "slice", "reshape", "concat", "global", "prelu", "lrn"]
            if min(h, w) >= 1:  # (a Resize may leave a spatial dim of 0: no kernel fits)
                kinds += ["pool", "conv", "topk"]
        # a Resize or Upsample in most models: its scales are what issue 33 found read
        kind = "resize" if rank4 and self.integer(0, 3) == 0 else self.pick(kinds)
        o = self.opset
        if kind == "unary":
            op = self.pick(UNARY)
            attrs = {"alpha": 0.2} if op in ("LeakyRelu", "Elu") and self.coin() else {}
            return op, [x], attrs, []
        if kind == "binary":
            shape = self.pick([(c, 1, 1), (1,), (w,), (1, c, 1, w)]) if rank4 else (1,)
            value = self.rng.uniform(0.5, 2, shape).astype(F)
            b = self.init(value, "b", self.rng.uniform(-2, -0.5, shape))
            op = self.pick(["Add", "Mul", "Sub", "Div"])
            return op, [x, b.name], {}, [b]
        if kind == "dropout":
            return "Dropout", [x], {"ratio": self.pick([0.1, 0.5])}, []
        if kind == "clip":
            return "Clip", [x], {"min": -0.5, "max": self.pick([0.5, 1.0])}, []
        if kind == "softmax":
            op = self.pick(["Softmax", "LogSoftmax", "Hardmax"])
            return op, [x], {"axis": self.integer(0, len(self.shape) - 1)}, []
        if kind == "transpose":
            perm = [int(i) for i in self.rng.permutation(len(self.shape))]
            return "Transpose", [x], {"perm": perm}, []
        if kind == "resize":
            return self.resize(x)
        if kind == "batchnorm":
            stats = [self.rng.uniform(0.5, 1.5, c), self.rng.uniform(-1, 1, c)]
            stats += [self.rng.uniform(-1, 1, c), self.rng.uniform(0.5, 2, c)]
            others = [self.rng.uniform(0.5, 1.5, c), self.rng.uniform(-1, 1, c)]
            others += [self.rng.uniform(-1, 1, c), self.rng.uniform(0.5, 2, c)]
            inits = [
                self.init(v.astype(F), hint, u.astype(F))
                for v, u, hint in zip(stats, others, ["scale", "bias", "mean", "var"])
            ]
            attrs = {"epsilon": self.pick([1e-5, 0.01])}
            if o < 9 and self.coin():
                attrs["spatial"] = 1
            return "BatchNormalization", [x, *(i.name for i in inits)], attrs, inits
        if kind == "pool":
            op = self.pick(["MaxPool", "AveragePool"])
            k = self.integer(1, min(3, h, w))
            attrs = {"kernel_shape": [k, k], "strides": [self.pick([1, 2])] * 2}
            if self.coin():
                attrs["pads"] = [self.integer(0, k - 1) for _ in range(4)]
            if o >= 10 and self.coin():
                attrs["ceil_mode"] = 1
            if op == "AveragePool" and self.coin():
                attrs["count_include_pad"] = 1
            return op, [x], attrs, []
        if kind == "conv":
            k = self.integer(1, min(3, h, w))
            m = self.integer(1, 3)
            weights = self.rng.integers(-1, 2, (m, c, k, k)).astype(F)
            wi = self.init(weights, "w", self.rng.integers(-2, 3, weights.shape))
            inits = [wi]
            inputs = [x, wi.name]
            if self.coin():
                bi = self.init(np.arange(m, dtype=F), "cb", np.arange(m, dtype=F) - 5)
                inits.append(bi)
                inputs.append(bi.name)
            attrs = {"kernel_shape": [k, k]}
            if self.coin():
                attrs["pads"] = [self.integer(0, k - 1) for _ in range(4)]
            return "Conv", inputs, attrs, inits
        if kind == "pad":
            pads = [0, 0, self.integer(0, 2), self.integer(0, 2)] * 2
            mode = self.pick(["constant", "reflect", "edge"])
            return "Pad", [x], {"pads": pads, "mode": mode, "value": 1.5}, []
        if kind == "slice":
            starts, ends = [self.integer(0, 1), self.integer(0, 1)], [h, w - self.integer(0, 1)]
            if o < 10:
                return "Slice", [x], {"starts": starts, "ends": ends, "axes": [2, 3]}, []
            si = self.init(np.array(starts, np.int64), "starts", [1, 0])
            ei = self.init(np.array(ends, np.int64), "ends", [h - 1, w])
            ai = self.init(np.array([2, 3], np.int64), "axes", [3, 2])
            inits = [si, ei, ai]
            if self.coin():
                inits.append(self.init(np.array([1, 1], np.int64), "steps", [1, 2]))
            return "Slice", [x, *(i.name for i in inits)], {}, inits
        if kind == "reshape":
            target = np.array([1, c, w, h], np.int64)
            si = self.init(target, "shape", [1, c * h, 1, w])
            return "Reshape", [x, si.name], {}, [si]
        if kind == "topk":
            k = self.integer(1, w)
            if o < 10:
                return "TopK", [x], {"k": k}, []
            ki = self.init(np.array([k], np.int64), "k", [max(1, w - k)])
            return "TopK", [x, ki.name], {}, [ki]
        if kind == "concat":
            return "Concat", [x, x], {"axis": self.integer(1, 3)}, []
        if kind == "global":
            return self.pick(["GlobalAveragePool", "GlobalMaxPool"]), [x], {}, []
        if kind == "prelu":
            value = self.rng.uniform(0.1, 0.5, (c, 1, 1)).astype(F)
            slope = self.init(value, "slope", self.rng.uniform(1, 2, (c, 1, 1)))
            return "PRelu", [x, slope.name], {}, [slope]
        return "LRN", [x], {"size": self.pick([1, 3])}, []

    def resize(self, x: str):
        """Resize-10 or Upsample-9 with scales an initializer (maybe fed another
        value), Upsample-7 with scales an attribute."""
        mode = self.pick(["nearest", "nearest", "linear"])
        # Resize-10 may scale down; Upsample not (onnxruntime refuses a scale below 1).
        downs = [[1, 1, 0.6, 0.6], [1, 1, 0.5, 1.0], [1, 1, 0.7, 1.4]]
        ups = [[1, 1, 2, 2], [1, 1, 3, 1], [1, 1, 1.5, 2.5], [1, 1, 1, 1], [1, 1, 2, 3]]
        if self.opset < 9:
            return "Upsample", [x], {"mode": mode, "scales": self.pick(ups)}, []
        choices = ups + (downs if self.opset == 10 else [])
        scales, fed = self.pick(choices), self.pick(choices)
        si = self.init(np.array(scales, F), "scales", fed)
        op = "Resize" if self.opset == 10 else "Upsample"
        return op, [x, si.name], {"mode": mode}, [si]

    # -- building and checking ---------------------------------------------------------
    def model(self, outputs: list[str], nodes=None, inits=None) -> onnx.ModelProto:
        nodes = self.nodes if nodes is None else nodes
        inits = self.inits if inits is None else inits
        code = onnx.TensorProto.FLOAT
        inputs = [onnx.helper.make_tensor_value_info("x", code, list(self.x.shape))]
        for i in inits:
            if i.overridable:
                type_code = onnx.helper.np_dtype_to_tensor_dtype(i.value.dtype)
                inputs.append(onnx.helper.make_tensor_value_info(i.name, type_code, i.value.shape))
        graph = onnx.helper.make_graph(
            nodes,
            "old",
            inputs,
            [onnx.helper.make_tensor_value_info(o, code, [None] * self.ranks[o]) for o in outputs],
            initializer=[onnx.numpy_helper.from_array(i.value, i.name) for i in inits],
        )
        model = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid("", self.opset)]
        )
        model.ir_version = OLD_IR[self.opset]
        return model

    def feeds(self, inits=None) -> dict:
        feeds = {"x": self.x}
        for i in self.inits if inits is None else inits:
            if i.overridable:
                feeds[i.name] = i.feed
        return feeds

    def run(self, model: onnx.ModelProto, feeds: dict) -> list:
        from tests.fuzz_check import run

        return run(model, feeds, exact=True)

    def build(self) -> StructuredModel:
        self.ranks = {"x": 4}
        for _ in range(self.integer(1, 4)):
            for _ in range(8):  # a draw onnxruntime or the checker refuses is drawn again
                drawn = self.draw_op()
                if drawn is None:
                    continue
                op, inputs, attrs, inits = drawn
                out = self.fresh(op.lower()[:5])
                node = onnx.helper.make_node(op, inputs, [out], **attrs)
                nodes, all_inits = [*self.nodes, node], [*self.inits, *inits]
                self.ranks[out] = len(self.shape)
                try:
                    model = self.model([out], nodes, all_inits)
                    onnx.checker.check_model(model, full_check=True)
                    (value,) = self.run(model, self.feeds(all_inits))
                    value = np.asarray(value)
                    if value.ndim != len(self.shape):
                        raise ValueError("another rank")
                    if self.inits_fed(inits):  # the initializers' own values must run too
                        self.run(model, {**self.feeds(all_inits), **self.own(inits)})
                except Exception:  # noqa: BLE001, S112 -- not a draw to keep
                    continue
                self.nodes, self.inits = nodes, all_inits
                self.current, self.shape = out, value.shape
                self.describe(op, attrs, inits)
                break
        outputs = [self.current]
        if len(self.nodes) > 1 and self.coin():  # an intermediate result too
            outputs.insert(0, self.nodes[self.integer(0, len(self.nodes) - 2)].output[0])
        model = self.model(outputs)
        feeds = self.feeds()
        expected = [np.asarray(v) for v in self.run(model, feeds)]
        target = self.pick([11, 11, 12, 13])
        notes = [f"old_opset: opset {self.opset} (IR {OLD_IR[self.opset]}), target {target}"]
        return StructuredModel(
            model,
            feeds,
            expected,
            self.gen.f,
            target,
            notes + self.notes,
            optimize=self.gen.on("optimize"),
            exact=True,
            refusable=True,
        )

    @staticmethod
    def inits_fed(inits: list[Init]) -> bool:
        return any(i.feed is not None and not np.array_equal(i.feed, i.value) for i in inits)

    @staticmethod
    def own(inits: list[Init]) -> dict:
        return {i.name: i.value for i in inits if i.overridable}

    def describe(self, op: str, attrs: dict, inits: list[Init]) -> None:
        shown = ", ".join(f"{k}={v}" for k, v in attrs.items())
        self.notes.append(f"{op}({shown}) -> {list(self.shape)}")
        shown_ = lambda v: v.tolist() if v.size <= 8 else f"{v.dtype}{list(v.shape)}"
        for i in inits:
            if not i.overridable:
                self.notes.append(f"  {i.name}: initializer {shown_(i.value)}")
            elif np.array_equal(i.feed, i.value):
                self.notes.append(f"  {i.name}: initializer and graph input, fed its own value")
            else:
                self.notes.append(
                    f"  {i.name}: initializer {shown_(i.value)} and graph input, "
                    f"fed {shown_(i.feed)}"
                )


def old_opset_example(gen: Gen) -> StructuredModel:
    """``old_opset``: see the module docstring."""
    return OldModel(gen).build()
