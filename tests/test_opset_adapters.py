"""Every adapter, in each direction, run in onnxruntime against the original.

Each example (tests/cases/opset_adapters.py) is a small model at the version
the adapter starts from. It is converted with
``lowering.lower(model, target_opset=...)``; the result must declare the
target, pass the full checker, name the adapter in the pass's summary and
compute what the original computes.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import lowering
from lowering.irutils.op_facts import REDUCE_OPS
from lowering.passes.target_opset import TargetOpsetPass, TargetOpsetResult
from tests.cases.opset_adapters import EXAMPLES, model_text
from tests.helpers import assert_same, parse, run, try_run


def _feeds(model: onnx.ModelProto, given: dict) -> dict:
    rng = np.random.default_rng(0)
    feeds = {}
    for graph_input in model.graph.input:
        if graph_input.name in given:
            feeds[graph_input.name] = given[graph_input.name]
            continue
        tensor = graph_input.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[graph_input.name] = rng.integers(-5, 5, shape).astype(dtype)
        else:
            feeds[graph_input.name] = rng.uniform(-1, 1, shape).astype(dtype)
    return feeds


def _parse(text: str) -> onnx.ModelProto:
    """The model, its outputs' shapes left to inference (the texts write them as [N])."""
    model = parse(text)
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def convert(text: str, target: int) -> tuple[onnx.ModelProto, TargetOpsetResult]:
    model = ir.serde.deserialize_model(_parse(text))
    result = TargetOpsetPass(target)(model)
    assert isinstance(result, TargetOpsetResult)
    return ir.serde.serialize_model(model), result


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_adapter_matches_the_original_in_onnxruntime(example):
    """Every example in the fast loop, not a sample: each is another adapter, or
    another path of one (constant and computed split sizes), and they share no
    code (a sample missed two of the mutation checks' bugs, docs/testing.md)."""
    original = _parse(example.text)
    converted, opset_pass = convert(example.text, example.target)
    assert {o.domain: o.version for o in converted.opset_import}[""] == example.target
    onnx.checker.check_model(converted, full_check=True)
    op, old, new, direction = example.key
    label = f"{op}-{new} -> {op}-{old}" if direction == "down" else f"{op}-{old} -> {op}-{new}"
    assert any(text.startswith(label) for text in opset_pass.adapted), opset_pass.adapted
    feeds = _feeds(original, dict(example.feeds))
    reference = _parse(example.oracle) if example.oracle else original
    assert_same(run(converted, feeds), run(reference, feeds))


@pytest.mark.parametrize("op", sorted(REDUCE_OPS))
def test_a_reduce_of_no_axes_with_noop_goes_down_as_onnxruntime_computes_it(op):
    """noop_with_empty_axes = 1 and no axes: the identity for most Reduce ops, but
    ReduceL1, ReduceL2, ReduceLogSum and ReduceSumSquare still apply their
    elementwise part (onnxruntime: Abs(x), Sqrt(x * x), ...), which the older
    version, with no such attribute, says by ONNX's function body."""
    source, target = (13, 11) if op == "ReduceSum" else (18, 13)
    text = model_text(
        source, "(float[2,3] x) => (float[N] y)", f"y = {op} <noop_with_empty_axes = 1> (x)"
    )
    original = _parse(text)
    converted, _ = convert(text, target)
    onnx.checker.check_model(converted, full_check=True)
    x = np.array([[-2.0, 0.5, 3.0], [1.0, -0.25, 4.0]], np.float32)
    assert_same(run(converted, {"x": x}), run(original, {"x": x}))


# Squeeze's input type -> its output type, and the axes Squeeze-11 gets (None: no attribute)
SQUEEZE_ALL = {
    "float[1,3,1]": ("float[3]", [0, 2]),
    "float[1]": ("float", [0]),
    "float[1,1,1]": ("float", [0, 1, 2]),
    "float[2,3]": ("float[2,3]", None),  # nothing to squeeze
    "float[1,N,1]": ("float[N]", None),  # N may be 1 too: only the runtime knows
    "float": ("float", None),  # a scalar
}


@pytest.mark.parametrize("x_type", list(SQUEEZE_ALL))
def test_a_squeeze_of_every_unit_dim_spells_its_axes_where_they_are_static(x_type, tmp_path):
    """Squeeze-13 without axes, down to 11: tract refuses Squeeze-11 without the attribute."""
    y_type, expected = SQUEEZE_ALL[x_type]
    model = ir.serde.deserialize_model(
        parse(model_text(13, f"({x_type} x) => ({y_type} y)", "y = Squeeze (x)"))
    )
    TargetOpsetPass(11)(model)
    converted = ir.serde.serialize_model(model)
    onnx.checker.check_model(converted, full_check=True)
    (node,) = converted.graph.node
    axes = [list(a.ints) for a in node.attribute if a.name == "axes"]
    assert axes == ([expected] if expected is not None else [])
    dims = [3 if d == "N" else int(d) for d in x_type[6:-1].split(",")] if "[" in x_type else []
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    assert_same(run(converted, {"x": x}), [np.squeeze(x)])
    if expected is not None:
        pytest.importorskip("tract")
        from lowering.runtimes.runners import run_tract

        onnx.save(converted, tmp_path / "squeeze.onnx")
        assert_same(run_tract(tmp_path / "squeeze.onnx", [x]), [np.squeeze(x)])


@pytest.mark.parametrize(("source", "target"), [(19, 11), (19, 13), (19, 18), (18, 11), (18, 13)])
@pytest.mark.parametrize("shape", [(0, 3), (2, 3), (1, 1)])
def test_a_wrap_pad_is_numpy_s_wrap_even_where_onnxruntime_fails(shape, source, target):
    """onnxruntime 1.32's Pad-19 fails on an empty input ("Unexpected mode of 3"):
    the converted model is checked against numpy's wrap, which ONNX's reference uses.
    Source 18: torch 2.13 writes "wrap" at opset 18, where Pad-18 has no such mode."""
    text = model_text(
        source,
        "(float[N,M] x) => (float[N] y)",
        'p = Constant <value = int64[4] {0, 2, 0, 1}> ()\ny = Pad <mode = "wrap"> (x, p)',
    )
    converted, opset_pass = convert(text, target)
    onnx.checker.check_model(converted, full_check=True)
    step = "Pad-19 -> Pad-18" if source == 19 else "Pad-18 -> Pad-13"
    assert any(label.startswith(step) for label in opset_pass.adapted)
    assert not any(n.op_type == "Pad" for n in converted.graph.node), "no wrap left"
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    assert_same(run(converted, {"x": x}), [np.pad(x, [(0, 0), (2, 1)], mode="wrap")])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint64", "int16"])
def test_an_integer_clip_below_12_is_numpy_s_clip_or_refused_for_a_kernel(dtype):
    """Clip-11 takes floats only; the adapter selects with Less/Greater + Where,
    which onnxruntime runs at 11 for some integer types only (no Where for int16, uint64)."""
    import lowering

    text = model_text(
        13,
        f"({dtype}[6] x) => ({dtype}[6] y)",
        f"lo = Constant <value = {dtype} {{2}}> ()\nhi = Constant <value = {dtype} {{4}}> ()\n"
        "y = Clip(x, lo, hi)",
    )
    x = np.array([0, 1, 2, 4, 5, 9], dtype)
    try:
        converted = lowering.lower(parse(text), target_opset=11)
    except lowering.LoweringError as error:
        assert dtype in ("int16", "uint64"), error
        assert f"onnxruntime {__import__('onnxruntime').__version__} has no Where kernel" in str(
            error
        )
        assert "Clip (node" in str(error) and "\n" not in str(error)
        return
    onnx.checker.check_model(converted, full_check=True)
    assert [n.op_type for n in converted.graph.node if n.op_type != "Constant"] == [
        "Less",
        "Where",
        "Greater",
        "Where",
    ]
    assert_same(run(converted, {"x": x}), [np.clip(x, 2, 4)])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize(("kernel", "stride"), [(1, 3), (2, 3), (1, 2), (2, 2), (3, 1)])
def test_average_pool_same_padding_goes_below_19_only_where_it_pads_forward(
    auto_pad, kernel, stride
):
    """SAME padding with a stride over the kernel is negative on some input sizes
    (total (ceil(d/s) - 1) * s + k - d < 0): onnxruntime's AveragePool-11 fails
    there (shown on the -11 form itself), so that is refused; every other case
    converts and matches on every size."""
    attrs = f'auto_pad = "{auto_pad}", kernel_shape = [{kernel}], strides = [{stride}]'
    signature = "(float[1,2,D] x) => (float[N] y)"
    text = model_text(19, signature, f"y = AveragePool <{attrs}> (x)")

    def pad(d: int) -> int:
        return (-(-d // stride) - 1) * stride + kernel - d

    if stride > kernel:
        with pytest.raises(lowering.LoweringError, match="stride over the kernel"):
            convert(text, 13)
        d = next(d for d in range(1, 10) if pad(d) < 0)
        x = np.arange(2 * d, dtype=np.float32).reshape(1, 2, d)
        old = parse(model_text(11, signature, f"y = AveragePool <{attrs}> (x)"))
        with pytest.raises(Exception, match="padding values must be non-negative"):
            run(old, {"x": x})
        return
    converted, _ = convert(text, 13)
    onnx.checker.check_model(converted, full_check=True)
    for d in range(1, 8):
        assert pad(d) >= 0
        x = np.arange(2 * d, dtype=np.float32).reshape(1, 2, d)
        assert_same(run(converted, {"x": x}), run(parse(text), {"x": x}))


def _pool_cases():
    """(id, op, source opset, attribute text, outputs) over the pools' edge attributes.

    AveragePool: count_include_pad both ways; ceil_mode from 10 (always here);
    dilations from 19. MaxPool: its indices too; dilations from 10. LpPool:
    ceil_mode and dilations from 18. Kernel/stride pairs take a stride over
    the kernel, a kernel over the stride, and a kernel of 3 that overhangs
    inputs of 1 and 2 (with VALID or too little padding)."""
    paddings = {
        "valid": 'auto_pad = "VALID"',
        "upper": 'auto_pad = "SAME_UPPER"',
        "lower": 'auto_pad = "SAME_LOWER"',
        "notset": "pads = [0, 0]",
        "pad10": "pads = [1, 0]",
        "pad11": "pads = [1, 1]",
    }
    for op, sources in (("AveragePool", (11, 19, 22)), ("MaxPool", (12, 22)), ("LpPool", (11, 18))):
        for source in sources:
            ceil_modes = (0, 1) if op != "LpPool" or source >= 18 else (None,)
            dilated = {"AveragePool": 19, "MaxPool": 10, "LpPool": 18}[op] <= source
            for (kernel, stride, dilation), (pad_id, pad), ceil in itertools.product(
                [(2, 3, 1), (3, 2, 1), (1, 2, 1), (2, 1, 2)]
                if dilated
                else [(2, 3, 1), (3, 2, 1), (1, 2, 1)],
                paddings.items(),
                ceil_modes,
            ):
                if dilation > 1 and pad_id in ("upper", "lower"):
                    continue  # onnxruntime's SAME ignores dilations (its own reading)
                attrs = [f"kernel_shape = [{kernel}]", f"strides = [{stride}]", pad]
                if dilation > 1:
                    attrs.append(f"dilations = [{dilation}]")
                if ceil is not None:
                    attrs.append(f"ceil_mode = {ceil}")
                outputs = "y, i" if op == "MaxPool" else "y"
                base = f"{op}{source}-k{kernel}s{stride}d{dilation}-{pad_id}-ceil{ceil}"
                for include in (0, 1) if op == "AveragePool" else (None,):
                    extra = [] if include is None else [f"count_include_pad = {include}"]
                    name = base if include is None else f"{base}-cip{include}"
                    for target in (11, 13, 18, 19, 22):
                        if target != source:
                            yield pytest.param(
                                op,
                                source,
                                ", ".join(attrs + extra),
                                outputs,
                                target,
                                id=f"{name}-to{target}",
                            )


def _pool_refusals(op: str, attrs: str) -> str:
    """The refusals a pool with these attributes may meet: each names an attribute it has."""
    reasons = []
    kernel, stride = (
        int(re.search(rf"{a} = \[(\d+)\]", attrs)[1]) for a in ("kernel_shape", "strides")
    )
    if "SAME" in attrs and stride > kernel:
        reasons.append("stride over the kernel")
    if "count_include_pad = 1" in attrs:
        reasons.append("padded under the kernel")
    for attribute in ("ceil_mode = 1", "dilations = [2]"):
        if attribute in attrs:
            name = attribute.split(" ")[0]
            reasons += [name, f"{name}=.* no equivalent"]
    return "|".join(reasons) or "(?!)"


POOL_CASES = list(_pool_cases())


def _pool_sample():
    """A fixed tenth of the pools' sweep for the fast loop; the whole under ``slow``."""
    sample = set(random.Random(11).sample(range(len(POOL_CASES)), len(POOL_CASES) // 10))
    return [
        case if i in sample else pytest.param(*case.values, marks=pytest.mark.slow, id=case.id)
        for i, case in enumerate(POOL_CASES)
    ]


@pytest.mark.parametrize(("op", "source", "attrs", "outputs", "target"), _pool_sample())
def test_pools_convert_to_what_onnxruntime_computes_at_the_source_opset(
    op, source, attrs, outputs, target
):
    """Each pool, on inputs of 0 to 5 along its axis (declared, and as a symbol),
    converted to each target: refused for a reason that names one of its
    attributes, or every output equal to onnxruntime's on the original
    wherever the original runs. The kernels of one op differ across opsets on
    a window over the padded input (AveragePool-11 divides by the kernel, -19
    by what it covers)."""
    declared = "float[?,?,?] y, int64[?,?,?] i" if op == "MaxPool" else "float[?,?,?] y"
    converted_dynamic = None
    for size in (None, 0, 1, 2, 3, 5):
        dim = "D" if size is None else str(size)
        text = model_text(
            source,
            f"(float[1,2,{dim}] x) => ({declared})",
            f"{outputs} = {op} <{attrs}> (x)",
        )
        try:
            converted = lowering.lower(parse(text), target_opset=target)
        except lowering.LoweringError as error:
            assert re.search(_pool_refusals(op, attrs), str(error)), error
            continue
        assert {o.domain: o.version for o in converted.opset_import}[""] == target
        if size is None:
            converted_dynamic = converted
            continue
        for model in (converted, converted_dynamic):
            if model is None:
                continue
            x = np.arange(2 * size, dtype=np.float32).reshape(1, 2, size) * 0.5 - 1
            expected = try_run(parse(text), {"x": x})
            if expected is None:
                continue
            assert_same(run(model, {"x": x}), expected)
