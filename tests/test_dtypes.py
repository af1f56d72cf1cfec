"""Every element type × every strategy: the lowered model runs wherever the original does.

onnxruntime's sequences hold 14 element types, but not every op the
strategies emit has a kernel for all of them (its SplitToSequence takes 7),
and its Gather returns wrong strings from tensors of rank 2 and more. The
lowering checks its ops against onnxruntime's kernel table and falls back;
this matrix runs each type through each way a map can be lowered, with
string elements of rank 1, 2 and 3.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import lowering
from lowering.runtimes import ort_kernels
from tests.helpers import assert_same, lowered, parse, run, try_run

# ONNX type name -> (numpy type that onnxruntime feeds, numpy type of the elements)
DTYPES = {
    "float": (np.float32, np.float32),
    "double": (np.float64, np.float64),
    "float16": (np.float16, np.float16),
    # bfloat16 is left out: ONNX's sequence ops don't take it (the checker
    # refuses the original), though onnxruntime's do.
    "int8": (np.int8, np.int8),
    "uint8": (np.uint8, np.uint8),
    "int16": (np.int16, np.int16),
    "uint16": (np.uint16, np.uint16),
    "int32": (np.int32, np.int32),
    "uint32": (np.uint32, np.uint32),
    "int64": (np.int64, np.int64),
    "uint64": (np.uint64, np.uint64),
    "bool": (np.bool_, np.bool_),
    "string": (np.object_, np.object_),
}

# How the mapped sequence is made, and so which strategy "auto" tries first.
SOURCES = {
    "construct": "s = SequenceConstruct(ac, bc)",  # static length: unroll
    "split": "s = SplitToSequence <axis = 0, keepdims = 0> (xc)",  # uniform (then read)
    "split_keepdims": "s = SplitToSequence <axis = 0, keepdims = 1> (xc)",
    "split_concat": "s = SplitToSequence <axis = 0, keepdims = 0> (xc)",  # a Scan
    "input": "s = Identity(q)",  # a graph input: uniform, static shapes
}
OPTIONS = {"auto": {}, "no_unroll": {"max_unroll": 0}, "loop": {"strategy": "loop"}}


def _model(name: str, source: str, rank: int) -> onnx.ModelProto:
    element_dims = [2, 3, 2][:rank]
    feed = name
    dims = ",".join(map(str, element_dims))
    stacked = ",".join(map(str, [4] + element_dims))
    if source == "split_keepdims":  # elements keep the split axis: [1, *element_dims]
        dims = ",".join(map(str, [1] + element_dims))
    to = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(DTYPES[name][1])) if name != "string" else 8
    cast = (
        (lambda v: f"{v}c = Cast <to = {to}> ({v})")
        if feed != name
        else (lambda v: f"{v}c = Identity({v})")
    )
    back = (
        (lambda v: f"{v} = Cast <to = 1> ({v}t)")
        if feed != name
        else (lambda v: f"{v} = Identity({v}t)")
    )
    concat_only = source == "split_concat"
    readers = (
        "zt = ConcatFromSequence <axis = 0> (m)"
        if concat_only
        else "r0t = SequenceAt(m, first)\n r1t = SequenceAt(m, last)\n nt = SequenceLength(m)"
    )
    any_dims = ",".join(["?"] * len(dims.split(",")))
    outputs = (
        f"{feed}[{any_dims}] z"
        if concat_only
        else f"{feed}[{any_dims}] r0, {feed}[{any_dims}] r1, int64 n"
    )
    outs = [back("z")] if concat_only else [back("r0"), back("r1"), "n = Identity(nt)"]
    q = f"seq({name}[{dims}]) q, " if source == "input" else ""
    return parse(
        f"""<ir_version: 9, opset_import: ["" : 18]>
        g ({q}{feed}[{stacked}] x, {feed}[{dims}] a, {feed}[{dims}] b, {feed}[{dims}] w)
          => ({outputs}) {{
          first = Constant <value = int64 {{0}}> ()
          last = Constant <value = int64 {{-1}}> ()
          {cast("x")}
          {cast("a")}
          {cast("b")}
          {cast("w")}
          {SOURCES[source]}
          m = SequenceMap <body = body ({name}[{dims}] e, {name}[{dims}] u) => ({name}[{any_dims}] c) {{
                c = Concat <axis = 0> (e, u)
              }}> (s, wc)
          {readers}
          {chr(10).join(outs)}
        }}"""
    )


def _values(name: str, shape: list[int], rng) -> np.ndarray:
    feed = DTYPES[name][0]
    if name == "string":
        words = np.array(["", "a", "bb", "ccc", "dddd"], dtype=object)
        return words[rng.integers(0, len(words), shape)]
    if name == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 100, shape).astype(feed)


def _expected(name: str, source: str, feeds: dict) -> list:
    elements_of = {
        "construct": lambda: [feeds["a"], feeds["b"]],
        "split": lambda: list(feeds["x"]),
        "split_concat": lambda: list(feeds["x"]),
        "split_keepdims": lambda: [feeds["x"][i : i + 1] for i in range(len(feeds["x"]))],
        "input": lambda: feeds["q"],
    }
    results = [np.concatenate([e, feeds["w"]], axis=0) for e in elements_of[source]()]
    if source == "split_concat":
        return [np.concatenate(results, axis=0)]
    return [results[0], results[-1], np.array(len(results), np.int64)]


def _feeds(name: str, source: str, rank: int, model: onnx.ModelProto, rng) -> dict:
    feeds = {}
    for value in model.graph.input:
        if value.name == "q":
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = _values(name, dims, rng)
    if source == "input":
        feeds["q"] = [_values(name, list(feeds["a"].shape), rng) for _ in range(3)]
    return feeds


CASES = [
    (name, source, rank)
    for name in DTYPES
    for source in SOURCES
    for rank in ([1, 2, 3] if name == "string" else [2])
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize(("name", "source", "rank"), CASES, ids=lambda v: str(v))
@pytest.mark.sweep
def test_every_dtype_runs_after_every_strategy(name, source, rank, options):
    model = _model(name, source, rank)
    rng = np.random.default_rng(rank)
    feeds = _feeds(name, source, rank, model, rng)
    expected = _expected(name, source, feeds)
    onnx.checker.check_model(model, full_check=True)
    original = try_run(model, feeds)
    if original is not None:
        assert_same(original, expected)
    result = lowered(model, **OPTIONS[options])
    assert_same(run(result, feeds), expected)


def test_the_matrix_meets_the_missing_kernels():
    """The matrix is only worth something if some types lack some kernels."""
    assert ort_kernels.unsupported("SplitToSequence", lowering_dtype("int8"), 18)
    assert ort_kernels.unsupported("Gather", lowering_dtype("string"), 18)
    assert ort_kernels.unsupported("SplitToSequence", lowering_dtype("float"), 18) is None


def lowering_dtype(name: str):
    import onnx_ir as ir

    return getattr(ir.DataType, name.upper())


def test_a_missing_kernel_is_named_in_the_summary():
    model = _model("int8", "split", 2)
    rewrites = lowering.lower_in_place(__import__("onnx_ir").serde.deserialize_model(model))
    (rewrite,) = [r for r in rewrites if r.op_type == "SequenceMap"]
    assert rewrite.strategy == "loop"
    assert "no SplitToSequence kernel for int8" in rewrite.reason


def test_kernel_table_matches_the_installed_onnxruntime():
    """The committed table is what scripts/ort_kernel_table.py makes from onnxruntime."""
    import importlib.util
    import pathlib

    script = pathlib.Path(__file__).parent.parent / "scripts" / "ort_kernel_table.py"
    spec = importlib.util.spec_from_file_location("ort_kernel_table_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    installed = module.table()
    for op, spans in ort_kernels.KERNELS.items():
        for since, until, types in spans:
            found = [t for a, b, t in installed[op] if (a, b) == (since, until)]
            assert found, f"{op} ({since}, {until}) is not registered in onnxruntime"
            # The installed onnxruntime may know more types, never fewer.
            assert types <= set(found[0]), f"{op}: {sorted(types - set(found[0]))} missing"


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("n", [1, 3])
def test_string_body_returning_an_outer_value(n, options):
    """onnxruntime's Loop leaves empty strings in scan outputs after the first trip."""
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (seq(string[1]) s, string[2] t) => (string[?] flat, seq(string[?]) y) {
          m = SequenceMap <body = b (string[1] e) => (string[2] v) { v = Identity(t) }> (s)
          y = SequenceMap <body = b2 (string[1] e) => (string[2] v) { v = Identity(t) }> (s)
          flat = ConcatFromSequence <axis = 0> (m)
        }"""
    )
    t = np.array(["ccc", "dd"], dtype=object)
    feeds = {"s": [np.array(["a"], dtype=object)] * n, "t": t}
    result = lowered(model, **OPTIONS[options])
    assert_same(run(result, feeds), [np.concatenate([t] * n), [t] * n])


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("rank", [2, 3])
def test_string_elements_of_an_untyped_body(rank, keepdims, options):
    """Found by the fuzzer: with no declared element type, the Loop form read
    string rows with Gather (wrong strings: ``['d e', '', 'd e']`` came back as
    ``['d e', '', '']``). The split tensor's own type says they are strings."""
    dims = {2: [3, 3], 3: [3, 1, 3]}[rank]
    model = parse(
        f"""<ir_version: 10, opset_import: ["" : 21]>
        g (string[{",".join(map(str, dims))}] x) => (seq(string[?]) out) {{
          s = SplitToSequence <axis = 0, keepdims = {keepdims}> (x)
          out = SequenceMap (s) <body = b (e) => (r) {{
            k = Constant <value = int64[1] {{0}}> ()
            v = Unsqueeze (e, k)
            flat = Constant <value = int64[1] {{-1}}> ()
            r = Reshape (v, flat)
          }}>
        }}"""
    )
    words = np.array(["d e", "", "d e", "a", "d e", "bb", "ccc", "", "zz"], dtype=object)
    x = words.reshape(dims)
    result = lowered(model, **OPTIONS[options])
    assert_same(run(result, {"x": x}), [[row.reshape(-1) for row in x]])


def test_an_unknown_element_type_never_takes_a_kernel_that_is_wrong_for_some_type():
    assert ort_kernels.unsupported("Gather", None, 18)
    assert ort_kernels.unsupported("Loop", None, 18)
    assert ort_kernels.unsupported("SequenceAt", None, 18) is None
