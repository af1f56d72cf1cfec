"""One example of each opset adapter in each direction, at the version it starts from.

Read by the adapter tests (tests/test_opset_adapters.py), which run each in
onnxruntime against the original, and by the coverage test, which checks that
every adapter has its examples.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lowering.irutils.op_facts import REDUCE_OPS


@dataclasses.dataclass(frozen=True)
class Example:
    key: tuple[str, int, int, str]
    source: int
    target: int
    text: str
    # Feeds: random by input type, unless given.
    feeds: tuple = ()
    # onnxruntime has no kernel for some originals (layout=1): then this model
    # states what the original means with ops it has.
    oracle: str | None = None

    @property
    def id(self) -> str:
        op, old, new, direction = self.key
        return f"{op}-{old}-{new}-{direction}-{self.source}to{self.target}"


def model_text(opset: int, signature: str, body: str) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{\n{body}\n}}'


def _pair(op, old, new, signature, body_new, body_old, down_to=None, up_from=None):
    """A down example from ``new`` and an up example from ``old``."""
    low = max(old, 11)
    yield Example((op, old, new, "down"), new, down_to or low, model_text(new, signature, body_new))
    if body_old is not None:
        source = up_from or low
        yield Example((op, old, new, "up"), source, new, model_text(source, signature, body_old))


def _examples():
    x23 = "(float[2,3] x) => (float[N] y)"
    # Axes: input at 13 (18 for Reduce ops but ReduceSum), attribute before.
    for op in ("Squeeze", "Unsqueeze"):
        shape_in, axes = ("float[2,1,3]", "[1]") if op == "Squeeze" else ("float[2,3]", "[0]")
        sig = f"({shape_in} x) => (float[N] y)"
        yield from _pair(
            op,
            11,
            13,
            sig,
            f"a = Constant <value = int64[1] {{{axes[1:-1]}}}> ()\ny = {op}(x, a)",
            f"y = {op} <axes = {axes}> (x)",
        )
    yield from _pair(
        "Split",
        11,
        13,
        "(float[5,3] x) => (float[N] y, float[M] z)",
        "s = Constant <value = int64[2] {2, 3}> ()\ny, z = Split <axis = 0> (x, s)",
        "y, z = Split <axis = 0, split = [2, 3]> (x)",
    )
    for op in sorted(REDUCE_OPS):
        old, new = (11, 13) if op == "ReduceSum" else (13, 18)
        yield from _pair(
            op,
            old,
            new,
            "(float[2,3,4] x) => (float[N] y)",
            f"a = Constant <value = int64[2] {{0, 2}}> ()\n"
            f"y = {op} <keepdims = 0, noop_with_empty_axes = 0> (x, a)",
            f"y = {op} <keepdims = 0, axes = [0, 2]> (x)",
        )
    # noop_with_empty_axes=1 without axes is an Identity.
    yield Example(
        ("ReduceMean", 13, 18, "down"),
        18,
        11,
        model_text(18, x23, "y = ReduceMean <noop_with_empty_axes = 1> (x)"),
    )
    yield from _pair(
        "Constant",
        11,
        12,
        "(float[2,3] x) => (float[N] y)",
        "s = Constant <value_ints = [3, 2]> ()\nf = Constant <value_float = 2.0> ()\n"
        "r = Reshape(x, s)\ny = Mul(r, f)",
        None,
    )
    yield Example(
        ("Constant", 11, 12, "up"),
        11,
        12,
        model_text(11, x23, "s = Constant <value = int64[2] {3, 2}> ()\ny = Reshape(x, s)"),
    )
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        sig = "(float[2,3,4] x) => (float[N] y)"
        yield from _pair(op, 11, 13, sig, f"y = {op} <axis = 1> (x)", f"y = {op} <axis = 1> (x)")
        yield Example((op, 11, 13, "down"), 13, 11, model_text(13, sig, f"y = {op}(x)"))
    yield from _pair(
        "ArgMax",
        11,
        12,
        "(float[2,3] x) => (int64[N] y)",
        "y = ArgMax <axis = 1, select_last_index = 0> (x)",
        "y = ArgMax <axis = 1> (x)",
    )
    yield from _pair(
        "ArgMin",
        11,
        12,
        "(float[2,3] x) => (int64[N] y)",
        "y = ArgMin <axis = 1, select_last_index = 0> (x)",
        "y = ArgMin <axis = 1> (x)",
    )
    gather_nd = "i = Constant <value = int64[2,1] {1, 0}> ()\ny = GatherND{attrs}(x, i)"
    yield from _pair(
        "GatherND",
        11,
        12,
        x23,
        gather_nd.replace("{attrs}", " <batch_dims = 0> "),
        gather_nd.replace("{attrs}", ""),
    )
    pool = "(float[1,2,5,5] x) => (float[N] y)"
    yield from _pair(
        "AveragePool",
        11,
        19,
        pool,
        "y = AveragePool <kernel_shape = [2, 2], dilations = [1, 1]> (x)",
        "y = AveragePool <kernel_shape = [2, 2]> (x)",
    )
    yield from _pair(
        "LpPool",
        11,
        18,
        pool,
        "y = LpPool <kernel_shape = [2, 2], dilations = [1, 1], ceil_mode = 0> (x)",
        "y = LpPool <kernel_shape = [2, 2]> (x)",
    )
    yield from _pair(
        "Cast",
        13,
        19,
        "(float[2,3] x) => (int32[N] y)",
        "y = Cast <to = 6, saturate = 1> (x)",
        "y = Cast <to = 6> (x)",
    )
    yield from _pair(
        "CastLike",
        15,
        19,
        "(float[2,3] x, int32[1] t) => (int32[N] y)",
        "y = CastLike <saturate = 1> (x, t)",
        "y = CastLike(x, t)",
        up_from=15,
    )
    yield from _pair(
        "Cast",
        23,
        24,
        "(float[2,3] x) => (int32[N] y)",
        'y = Cast <to = 6, round_mode = "up"> (x)',
        "y = Cast <to = 6> (x)",
        down_to=23,
        up_from=23,
    )
    yield from _pair(
        "CastLike",
        23,
        24,
        "(float[2,3] x, int32[1] t) => (int32[N] y)",
        'y = CastLike <round_mode = "up"> (x, t)',
        "y = CastLike(x, t)",
        down_to=23,
        up_from=23,
    )
    qdq = (
        "s = Constant <value = float {0.05}> ()\nz = Constant <value = uint8 {{128}}> ()\n"
        "q = QuantizeLinear{q}(x, s, z)\ny = DequantizeLinear{d}(q, s, z)"
    ).replace("{{128}}", "{128}")
    for op in ("QuantizeLinear", "DequantizeLinear"):
        mine = "{q}" if op == "QuantizeLinear" else "{d}"
        other = "{d}" if mine == "{q}" else "{q}"
        down_body = qdq.replace(mine, " <axis = 1> ").replace(other, "")
        yield from _pair(op, 10, 13, x23, down_body, qdq.replace(mine, "").replace(other, ""))
    yield from _pair(
        "QuantizeLinear",
        13,
        19,
        x23,
        qdq.replace("{q}", " <saturate = 1> ").replace("{d}", ""),
        qdq.replace("{q}", "").replace("{d}", ""),
        down_to=13,
        up_from=13,
    )
    yield from _pair(
        "QuantizeLinear",
        19,
        21,
        x23,
        qdq.replace("{q}", " <block_size = 0, output_dtype = 0> ").replace("{d}", ""),
        qdq.replace("{q}", "").replace("{d}", ""),
        down_to=19,
        up_from=19,
    )
    yield from _pair(
        "DequantizeLinear",
        19,
        21,
        x23,
        qdq.replace("{d}", " <block_size = 0> ").replace("{q}", ""),
        qdq.replace("{q}", "").replace("{d}", ""),
        down_to=19,
        up_from=19,
    )
    yield from _pair(
        "Dropout",
        10,
        12,
        x23,
        "r = Constant <value = float {0.25}> ()\nt = Constant <value = bool {0}> ()\n"
        "y = Dropout(x, r, t)",
        "y = Dropout <ratio = 0.25> (x)",
        down_to=11,
        up_from=11,
    )
    scatter = {
        "ScatterND": "i = Constant <value = int64[2,1] {1, 0}> ()\n"
        "u = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> ()\n"
        "y = ScatterND{attrs}(x, i, u)",
        "ScatterElements": "i = Constant <value = int64[1,2] {1, 0}> ()\n"
        "u = Constant <value = float[1,2] {7, 8}> ()\n"
        "y = ScatterElements{attrs}(x, i, u)",
    }
    for op, body in scatter.items():
        yield from _pair(
            op,
            13,
            16,
            x23,
            body.replace("{attrs}", ' <reduction = "none"> '),
            body.replace("{attrs}", ""),
        )
        yield from _pair(
            op,
            16,
            18,
            x23,
            body.replace("{attrs}", ' <reduction = "add"> '),
            body.replace("{attrs}", ' <reduction = "mul"> '),
            down_to=16,
            up_from=16,
        )
    resize = "(float[1,1,2,3] x) => (float[N] y)"
    sizes = "s = Constant <value = int64[4] {1, 1, 4, 5}> ()\n"
    yield from _pair(
        "Resize",
        18,
        19,
        resize,
        sizes
        + 'y = Resize <mode = "linear", coordinate_transformation_mode = "half_pixel"> (x, , , s)',
        sizes + 'y = Resize <mode = "linear"> (x, , , s)',
        down_to=18,
        up_from=18,
    )
    yield from _pair(
        "Resize",
        13,
        18,
        resize,
        sizes
        + 'y = Resize <mode = "nearest", antialias = 0, keep_aspect_ratio_policy = "stretch"> (x, , , s)',
        sizes + 'y = Resize <mode = "nearest"> (x, , , s)',
        down_to=13,
        up_from=13,
    )
    scales = "c = Constant <value = float[4] {1, 1, 2, 2}> ()\n"
    yield Example(
        ("Resize", 11, 13, "down"),
        13,
        11,
        model_text(13, resize, scales + 'y = Resize <mode = "linear"> (x, , c)'),
    )
    yield Example(
        ("Resize", 11, 13, "down"),
        13,
        11,
        model_text(13, resize, sizes + 'y = Resize <mode = "nearest"> (x, , , s)'),
    )
    roi = "r = Constant <value = float[0] {}> ()\n"
    for mode in (
        'mode = "linear"',
        'mode = "nearest", coordinate_transformation_mode = "asymmetric"',
    ):
        yield Example(
            ("Resize", 11, 13, "up"),
            11,
            13,
            model_text(11, resize, roi + scales + f"y = Resize <{mode}> (x, r, c)"),
        )
    yield Example(
        ("Resize", 11, 13, "up"),
        11,
        13,
        model_text(
            11,
            resize,
            roi
            + "e = Constant <value = float[0] {}> ()\n"
            + sizes
            + 'y = Resize <mode = "cubic"> (x, r, e, s)',
        ),
    )
    pads = "p = Constant <value = int64[4] {0, 1, 0, 2}> ()\n"
    yield from _pair(
        "Pad",
        18,
        19,
        x23,
        pads + 'y = Pad <mode = "reflect"> (x, p)',
        pads + 'y = Pad <mode = "edge"> (x, p)',
        down_to=18,
        up_from=18,
    )
    yield from _pair(
        "Pad",
        13,
        18,
        x23,
        pads + "y = Pad(x, p)",
        pads + "y = Pad(x, p)",
        down_to=13,
        up_from=13,
    )
    # torch 2.13's circular pad at opset 18: a "wrap" Pad-18 does not define.
    for target in (13, 11):
        yield Example(
            ("Pad", 13, 18, "down"),
            18,
            target,
            model_text(
                18, "(float[3,4] x) => (float[N] y)", pads + 'y = Pad <mode = "wrap"> (x, p)'
            ),
        )
    yield from _pair(
        "Shape",
        13,
        15,
        "(float[2,3,4,5] x) => (int64[N] y)",
        "y = Shape <start = 1, end = -1> (x)",
        "y = Shape(x)",
    )
    yield Example(
        ("Shape", 13, 15, "down"),
        15,
        11,
        model_text(15, "(float[2,3,4,5] x) => (int64[N] y)", "y = Shape <start = -2> (x)"),
    )
    reshape = "(float[2,3] x) => (float[N] y)"
    yield from _pair(
        "Reshape",
        13,
        14,
        reshape,
        "s = Constant <value = int64[2] {3, 2}> ()\ny = Reshape <allowzero = 1> (x, s)",
        "s = Constant <value = int64[2] {3, 2}> ()\ny = Reshape(x, s)",
    )
    # A shape read from Shape(x): its entries are x's own dims (allowzero goes), or not
    # (an If on Size(x) == 0). The symbolic dims are fed as 0.
    own = "h = Shape(x)\ny = Reshape <allowzero = 1> (x, h)"
    other = (
        "h = Shape(x)\ni = Constant <value = int64[1] {0}> ()\nn = Gather(h, i)\n"
        "t = Constant <value = int64[1] {3}> ()\ns = Concat <axis = 0> (t, n)\n"
        "y = Reshape <allowzero = 1> (x, s)"
    )
    for body in (own, other):
        for target in (11, 13):
            yield Example(
                ("Reshape", 13, 14, "down"),
                14,
                target,
                model_text(14, "(float[N,3] x) => (float[N] y)", body),
            )
    for op in ("Max", "Min"):
        yield Example(
            (op, 8, 12, "down"),
            13,
            11,
            model_text(
                13, "(int64[2,3] a, int64[3] b, int64[1] c) => (int64[N] y)", f"y = {op}(a, b, c)"
            ),
        )
        yield Example(
            (op, 8, 12, "down"),
            13,
            11,
            model_text(13, "(float[2,3] a, float[3] b) => (float[N] y)", f"y = {op}(a, b)"),
        )
        yield Example(
            (op, 8, 12, "up"),
            11,
            12,
            model_text(11, "(float[2,3] a, float[3] b) => (float[N] y)", f"y = {op}(a, b)"),
        )
    # Clip on integers (torch's int64 clamp of interpolation indices): both
    # bounds, each alone, lo > hi (numpy's clip: hi), int32 and a dynamic dim.
    clip_bodies = {
        "both": "lo = Constant <value = int64 {-2}> ()\nhi = Constant <value = int64 {3}> ()\n"
        "y = Clip(x, lo, hi)",
        "max only": "hi = Constant <value = int64 {1}> ()\ny = Clip(x, , hi)",
        "min only": "lo = Constant <value = int64 {0}> ()\ny = Clip(x, lo)",
        "lo > hi": "lo = Constant <value = int64 {2}> ()\nhi = Constant <value = int64 {-1}> ()\n"
        "y = Clip(x, lo, hi)",
        "bounds as inputs": "y = Clip(x, lo, hi)",
    }
    for what, body in clip_bodies.items():
        bounds = ", int64 lo, int64 hi" if what == "bounds as inputs" else ""
        for x in ("int64[3,5]", "int64[2,N]"):  # N: an empty input
            signature = f"({x} x{bounds}) => (int64[N] y)"
            yield Example(("Clip", 11, 12, "down"), 13, 11, model_text(13, signature, body))
    float_clip = (
        "lo = Constant <value = float {-0.5}> ()\nhi = Constant <value = float {0.25}> ()\n"
        "y = Clip(x, lo, hi)"
    )
    yield from _pair(
        "Clip", 11, 12, "(float[4,3] x) => (float[N] y)", float_clip, float_clip, down_to=11
    )
    yield Example(
        ("Clip", 11, 12, "down"),
        12,
        11,
        model_text(
            12,
            "(int32[4,3] x) => (int32[N] y)",
            "lo = Constant <value = int32 {-1}> ()\nhi = Constant <value = int32 {1}> ()\n"
            "y = Clip(x, lo, hi)",
        ),
    )
    split3 = "(float[7,2] x) => (float[N] a, float[M] b, float[K] c)"
    yield from _pair(
        "Split",
        13,
        18,
        split3,
        "a, b, c = Split <axis = 0, num_outputs = 3> (x)",
        None,
        down_to=13,
    )
    yield Example(
        ("Split", 13, 18, "down"),
        18,
        13,
        model_text(
            18,
            "(float[M,2] x) => (float[N] a, float[K] b, float[J] c)",
            "a, b, c = Split <axis = 0, num_outputs = 3> (x)",
        ),
        feeds=(("x", np.arange(14, dtype=np.float32).reshape(7, 2)),),
    )
    yield Example(
        ("Split", 13, 18, "up"),
        13,
        18,
        model_text(
            13,
            "(float[6,2] x) => (float[N] a, float[M] b, float[K] c)",
            "a, b, c = Split <axis = 0> (x)",
        ),
    )
    # Only the split axis is static: its sizes are constants, whatever the batch.
    yield Example(
        ("Split", 13, 18, "down"),
        18,
        11,
        model_text(
            18,
            "(float[N,6] x) => (float[N] a, float[K] b, float[J] c)",
            "a, b, c = Split <axis = 1, num_outputs = 3> (x)",
        ),
        feeds=(("x", np.arange(18, dtype=np.float32).reshape(3, 6)),),
    )
    # A computed split at 11 (here from the Shape arithmetic): a Slice per output.
    yield Example(
        ("Split", 11, 13, "down"),
        18,
        11,
        model_text(
            18,
            "(float[M,2] x) => (float[N] a, float[K] b, float[J] c)",
            "a, b, c = Split <axis = 0, num_outputs = 3> (x)",
        ),
        feeds=(("x", np.arange(14, dtype=np.float32).reshape(7, 2)),),
    )
    bn_sig = "(float[2,3,4] x) => (float[N] y)"
    bn_consts = (
        "s = Constant <value = float[3] {1, 2, 3}> ()\nb = Constant <value = float[3] {0, 1, 0}> ()\n"
        "m = Constant <value = float[3] {0.5, 0, 1}> ()\nv = Constant <value = float[3] {1, 4, 2}> ()\n"
    )
    yield from _pair(
        "BatchNormalization",
        9,
        14,
        bn_sig,
        bn_consts + "y = BatchNormalization <training_mode = 0> (x, s, b, m, v)",
        bn_consts + "y = BatchNormalization(x, s, b, m, v)",
        down_to=13,
        up_from=13,
    )
    yield from _pair(
        "BatchNormalization",
        14,
        15,
        bn_sig,
        bn_consts + "y = BatchNormalization(x, s, b, m, v)",
        bn_consts + "y = BatchNormalization(x, s, b, m, v)",
        down_to=14,
        up_from=14,
    )
    roi = (
        "r = Constant <value = float[1,4] {0, 0, 2, 2}> ()\n"
        "i = Constant <value = int64[1] {0}> ()\n"
    )
    yield from _pair(
        "RoiAlign",
        10,
        16,
        "(float[1,1,4,4] x) => (float[N] y)",
        roi
        + 'y = RoiAlign <coordinate_transformation_mode = "output_half_pixel", output_height = 2, output_width = 2> (x, r, i)',
        roi + "y = RoiAlign <output_height = 2, output_width = 2> (x, r, i)",
        up_from=11,
    )
    grid = "(float[1,1,3,3] x, float[1,2,2,2] g) => (float[N] y)"
    yield from _pair(
        "GridSample",
        16,
        20,
        grid,
        'y = GridSample <mode = "linear"> (x, g)',
        'y = GridSample <mode = "bicubic"> (x, g)',
        down_to=16,
        up_from=16,
    )
    yield Example(
        ("GridSample", 16, 20, "down"), 20, 16, model_text(20, grid, "y = GridSample(x, g)")
    )
    rnn_w = {"LSTM": 4, "GRU": 3, "RNN": 1}
    for op, gates in rnn_w.items():
        sig = (
            f"(float[2,3,4] x, float[1,{gates * 5},4] w, float[1,{gates * 5},5] r) "
            "=> (float[N] y, float[M] h)"
        )
        layout1 = f"y, h = {op} <hidden_size = 5, layout = 1> (x, w, r)"
        yield from _pair(
            op,
            7,
            14,
            sig,
            f"y, h = {op} <hidden_size = 5, layout = 0> (x, w, r)",
            f"y, h = {op} <hidden_size = 5> (x, w, r)",
            down_to=13,
            up_from=13,
        )
        oracle = (
            "xt = Transpose <perm = [1, 0, 2]> (x)\n"
            f"y0, h0 = {op} <hidden_size = 5> (xt, w, r)\n"
            "y = Transpose <perm = [2, 0, 1, 3]> (y0)\nh = Transpose <perm = [1, 0, 2]> (h0)"
        )
        yield Example(
            (op, 7, 14, "down"),
            14,
            13,
            model_text(14, sig, layout1),
            oracle=model_text(14, sig, oracle),
        )


EXAMPLES = list(_examples())
