"""What unrolling makes static is folded in the copies, by default (lowering.irutils.static_fold)."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnxruntime.capi.onnxruntime_pybind11_state as ort_c
import pytest

import lowering
from tests.golden import canonical_text
from tests.helpers import all_nodes, assert_same, lowered, op_types, parse, run

H = '<ir_version: 8, opset_import: ["" : 17]>'
DATA = pathlib.Path(__file__).parent / "data" / "torch"

# torch's atleast_1d body: a rank test, then an If on it.
RANK_TEST_BODY = """body (e) => (y) {
        shape = Shape(e)
        rank = Size(shape)
        zero = Constant <value = int64 {0}> ()
        zero_cast = CastLike(zero, rank)
        cond = Equal(rank, zero_cast)
        y = If (cond) <
          then_branch = t () => (r) {
            one = Constant <value_ints = [1]> ()
            r = Reshape(e, one)
          },
          else_branch = f () => (r2) { r2 = Identity(e) }>
      }"""

GOLDEN = {
    # Each copy's rank test has one answer: the If becomes the branch it
    # takes, and the test itself is gone. A symbolic dim still has a rank.
    "rank_test": (
        H
        + f"""
        g (float a, float[3] b, float[N,2] c) => (float[1] ya, float[3] yb, float[N,2] yc) {{
          s = SequenceConstruct(a, b, c)
          m = SequenceMap <body = {RANK_TEST_BODY}> (s)
          i0 = Constant <value = int64 {{0}}> ()
          i1 = Constant <value = int64 {{1}}> ()
          i2 = Constant <value = int64 {{-1}}> ()
          ya = SequenceAt(m, i0)
          yb = SequenceAt(m, i1)
          yc = SequenceAt(m, i2)
        }}""",
        H
        + """
        g (float a, float[3] b, float[N,2] c) => (float[1] ya, float[3] yb, float[N,2] yc) {
          one = Constant <value_ints = [1]> ()
          ya = Reshape(a, one)
          yb = Identity(b)
          yc = Identity(c)
        }""",
    ),
    # Shape folds only where every dim is static; Size and integer
    # arithmetic of what folded fold too. Shapes inferred inside the copy
    # (Transpose of a known tensor) count.
    "shape_size_arithmetic": (
        H
        + """
        g (float[3,2] b, float[N,2] c) => (int64[2] sb, int64[2] sc, int64 nb, int64 nc) {
          s = SequenceConstruct(b, c)
          y, z = SequenceMap <body = body (e) => (sh, n) {
                t = Transpose <perm = [1, 0]> (e)
                sh = Shape(t)
                r = Size(sh)
                one = Constant <value = int64 {1}> ()
                n = Add(r, one)
              }> (s)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {1}> ()
          sb = SequenceAt(y, i0)
          sc = SequenceAt(y, i1)
          nb = SequenceAt(z, i0)
          nc = SequenceAt(z, i1)
        }""",
        H
        + """
        g (float[3,2] b, float[N,2] c) => (int64[2] sb, int64[2] sc, int64 nb, int64 nc) {
          sb = Constant <value = int64[2] {2, 3}> ()
          nb = Constant <value = int64 {3}> ()
          tc = Transpose <perm = [1, 0]> (c)
          sc = Shape(tc)
          nc = Constant <value = int64 {3}> ()
        }""",
    ),
    # An initializer that is also a graph input can be overridden: the test
    # on it stays, If and all. The copies' dead Constants go all the same.
    "overridable_initializer_is_not_a_constant": (
        H
        + """
        g (float[2] a, int64 flag) => (float[2] ya)
          <int64 flag = {0}> {
          s = SequenceConstruct(a)
          m = SequenceMap <body = body (e) => (y) {
                zero = Constant <value = int64 {0}> ()
                unused = Constant <value = int64 {7}> ()
                cond = Equal(flag, zero)
                y = If (cond) <
                  then_branch = t () => (r) { r = Neg(e) },
                  else_branch = f () => (r2) { r2 = Identity(e) }>
              }> (s)
          i0 = Constant <value = int64 {0}> ()
          ya = SequenceAt(m, i0)
        }""",
        H
        + """
        g (float[2] a, int64 flag) => (float[2] ya)
          <int64 flag = {0}> {
          zero = Constant <value = int64 {0}> ()
          cond = Equal(flag, zero)
          ya = If (cond) <
            then_branch = t () => (r) { r = Neg(a) },
            else_branch = f () => (r2) { r2 = Identity(a) }>
        }""",
    ),
    # Initializers and Constants that only the rank test read are removed,
    # in the body (shared by the copies) and outside it.
    "dead_initializers_removed": (
        H
        + """
        g (float[2,2] a, float b) => (float[2,2] ya, float[1] yb) <int64 two = {2}> {
          s = SequenceConstruct(a, b)
          m = SequenceMap <body = body (e) => (y) <int64[1] flat = {-1}> {
                shape = Shape(e)
                rank = Size(shape)
                cond = Less(rank, two)
                y = If (cond) <
                  then_branch = t () => (r) { r = Reshape(e, flat) },
                  else_branch = f () => (r2) { r2 = Identity(e) }>
              }> (s)
          i0 = Constant <value = int64 {0}> ()
          i1 = Constant <value = int64 {1}> ()
          ya = SequenceAt(m, i0)
          yb = SequenceAt(m, i1)
        }""",
        H
        + """
        g (float[2,2] a, float b) => (float[2,2] ya, float[1] yb) {
          flat = Constant <value = int64[1] flat {-1}> ()
          yb = Reshape(b, flat)
          ya = Identity(a)
        }""",
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    source, expected = GOLDEN[name]
    assert canonical_text(lowered(parse(source))) == canonical_text(parse(expected))


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_torch_atleast_default_output_has_no_rank_test_and_matches_torch(name):
    result = lowered(onnx.load(DATA / f"{name}.onnx"))
    ops = op_types(result)
    assert not {"If", "Shape", "Size", "CastLike", "Equal", "LessOrEqual"} & set(ops)
    assert not [op for op in ops if "Sequence" in op]
    read = {value for node in all_nodes(result) for value in node.input}
    assert [i.name for i in result.graph.initializer if i.name not in read] == []
    assert all(node.op_type != "Constant" or node.output[0] in read for node in all_nodes(result))
    data = np.load(DATA / f"{name}.npz")
    feeds = {i.name: data[f"input_{k}"] for k, i in enumerate(result.graph.input)}
    assert_same(run(result, feeds), [data[f"output_{k}"] for k in range(4)])


def test_if_outside_the_copies_is_left_alone():
    """The fold is local: an If on a constant in the graph around the map stays."""
    source = parse(
        H
        + f"""
        g (float a, float[3] b) => (float[1] ya, float[3] z) {{
          t = Constant <value = bool {{1}}> ()
          z = If (t) <then_branch = tt () => (p) {{ p = Neg(b) }},
                      else_branch = ff () => (q) {{ q = Identity(b) }}>
          s = SequenceConstruct(a, b)
          m = SequenceMap <body = {RANK_TEST_BODY}> (s)
          i0 = Constant <value = int64 {{0}}> ()
          ya = SequenceAt(m, i0)
        }}"""
    )
    result = lowered(source)
    assert op_types(result).count("If") == 1
    feeds = {"a": np.array(2.0, np.float32), "b": np.arange(3, dtype=np.float32)}
    assert_same(run(result, feeds), [np.array([2.0], np.float32), -feeds["b"]])


def test_ifs_in_maps_nested_in_unrolled_maps_fold_too():
    """The inner map is unrolled inside the outer body first, then copied per element."""
    source = parse(
        H
        + f"""
        g (float a, float[2] b) => (float[1] y00, float[2] y10) {{
          s = SequenceConstruct(a, b)
          outer = SequenceMap <body = ob (e) => (o) {{
                inner_s = SequenceConstruct(e)
                inner = SequenceMap <body = {RANK_TEST_BODY}> (inner_s)
                k = Constant <value = int64 {{0}}> ()
                o = SequenceAt(inner, k)
              }}> (s)
          i0 = Constant <value = int64 {{0}}> ()
          i1 = Constant <value = int64 {{1}}> ()
          y00 = SequenceAt(outer, i0)
          y10 = SequenceAt(outer, i1)
        }}"""
    )
    result = lowered(source)
    assert "If" not in op_types(result)
    feeds = {"a": np.array(3.0, np.float32), "b": np.array([1.0, 2.0], np.float32)}
    assert_same(run(result, feeds), [np.array([3.0], np.float32), feeds["b"]])


# Every folding rule, on every element type onnxruntime runs it on, with
# edge values (wrapping integers, negatives, zero); the oracle is
# onnxruntime on the same op left unfolded (the map's body reads an
# element, so nothing is constant before unrolling).
_EDGES = {
    "int8": [[-128, 127, 5], [1, 1, -5]],
    "uint8": [[255, 0, 7], [1, 0, 9]],
    "int32": [[2**31 - 1, -7, 0], [1, 7, 0]],
    "int64": [[2**63 - 1, -3, 4], [1, -3, 5]],
    "uint64": [[2**64 - 1, 3, 4], [1, 3, 2]],
    "float": [[1.5, -0.0, np.inf], [1.5, 0.0, 2.0]],
    "double": [[1e300, -2.5, 0.0], [1e300, 2.5, 0.0]],
    "bool": [[True, False, True], [True, True, False]],
}
_BINARY = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Add", "Sub", "Mul"]
_INTEGER_ONLY = {"Add", "Sub", "Mul"}
_BOOL_ONLY = {"And", "Or", "Xor", "Not"}


def _ort_runs(op: str, dtype: str, opset: int = 17) -> bool:
    """Whether onnxruntime's CPU kernel for ``op`` at ``opset`` takes ``dtype`` inputs."""
    constraint = "T1" if op == "CastLike" else "T"
    return any(
        kernel.op_name == op
        and kernel.domain in ("", "ai.onnx")
        and kernel.provider == "CPUExecutionProvider"
        and kernel.version_range[0] <= opset <= kernel.version_range[1]
        and f"tensor({dtype})" in kernel.type_constraints.get(constraint, [])
        for kernel in _KERNELS
    )


_KERNELS = ort_c.get_all_opkernel_def()


def _fold_cases():
    for op in [*_BINARY, *sorted(_BOOL_ONLY)]:
        for dtype in _EDGES:
            integer = dtype not in ("float", "double", "bool")
            if op in _INTEGER_ONLY and not integer or op in _BOOL_ONLY and dtype != "bool":
                continue
            if _ort_runs(op, dtype):
                yield op, dtype
    for target in ["int8", "int64", "uint8", "float", "double", "bool", "float16"]:
        for dtype in _EDGES:
            if dtype in ("float", "double") and target not in ("float", "double", "float16"):
                continue  # float to integer is undefined out of range: never folded
            if _ort_runs("CastLike", dtype):
                yield f"CastLike:{target}", dtype


@pytest.mark.parametrize(("op", "dtype"), list(_fold_cases()))
def test_each_rule_folds_as_onnxruntime_computes(op, dtype):
    np_dtype = {"float": np.float32, "double": np.float64}.get(dtype, dtype)
    left, right = (np.array(v, np_dtype) for v in _EDGES[dtype])
    const = onnx.numpy_helper.from_array
    if op.startswith("CastLike:"):
        target = op.split(":")[1]
        like = np.zeros(1, {"float": np.float32, "double": np.float64}.get(target, target))
        compute = "r = CastLike(k0, like)"
        constants = [const(left, "k0"), const(like, "like")]
    elif op in ("Not",):
        compute, constants = f"r = {op}(k0)", [const(left, "k0")]
    else:
        compute = f"r = {op}(k0, k1)"
        constants = [const(left, "k0"), const(right, "k1")]
    template = """g (float a, float[2] b) => (ys) {
      s = SequenceConstruct(a, b)
      ys = SequenceMap <body = body (e) => (r) { COMPUTE }> (s)
    }"""
    source = parse(H + template.replace("COMPUTE", compute))
    body = source.graph.node[1].attribute[0].g
    for tensor in constants:  # constants of the body, so only unrolling makes them read
        body.node.insert(0, onnx.helper.make_node("Constant", [], [tensor.name], value=tensor))
    result = lowered(source)
    assert op.split(":")[0] not in op_types(result)  # folded
    feeds = {"a": np.array(1.0, np.float32), "b": np.zeros(2, np.float32)}
    reference = lowering.lower(source, max_unroll=0)  # a Loop: nothing is folded
    assert op.split(":")[0] in op_types(reference)
    assert_same(run(result, feeds), run(reference, feeds))


def test_float_to_integer_cast_is_never_folded():
    source = parse(
        H
        + """
        g (float a) => (seq(int32) ys) {
          s = SequenceConstruct(a)
          ys = SequenceMap <body = body (e) => (r) {
                big = Constant <value = float {3e9}> ()
                r = Cast <to = 6> (big)
              }> (s)
        }"""
    )
    assert "Cast" in op_types(lowered(source))


def test_large_initializers_are_never_read(tmp_path):
    """Shape of a large weight folds from its declared shape; its data stays on disk."""
    source = parse(
        H
        + """
        g (int64[4096] a) => (int64[4096] ya, int64[1] sa) {
          s = SequenceConstruct(a)
          y, z = SequenceMap <body = body (e) => (c, d) {
                c = Add(w, w)
                d = Shape(w)
              }> (s)
          zero = Constant <value = int64 {0}> ()
          ya = SequenceAt(y, zero)
          sa = SequenceAt(z, zero)
        }"""
    )
    weight = onnx.numpy_helper.from_array(np.arange(4096, dtype=np.int64), "w")
    source.graph.initializer.append(weight)
    onnx.save(source, tmp_path / "model.onnx", save_as_external_data=True, location="w.bin")
    model = onnx.load(tmp_path / "model.onnx", load_external_data=False)
    (tmp_path / "w.bin").rename(tmp_path / "elsewhere.bin")  # reading it would fail
    result = lowering.lower(model)
    assert op_types(result).count("Add") == 1  # too large to fold
    assert "Shape" not in op_types(result)  # its shape is declared


def test_constants_that_cannot_be_combined_are_left_to_the_runtime():
    """Operands that do not broadcast: an invalid model is not the fold's to judge."""
    source = parse(
        H
        + """
        g (float a) => (bool[N] ya) {
          s = SequenceConstruct(a)
          m = SequenceMap <body = body (e) => (bool[N] c) {
                two = Constant <value = int64[2] {1, 2}> ()
                three = Constant <value = int64[3] {1, 2, 3}> ()
                c = Equal(two, three)
              }> (s)
          zero = Constant <value = int64 {0}> ()
          ya = SequenceAt(m, zero)
        }"""
    )
    assert "Equal" in op_types(lowering.lower(source))


def test_what_only_the_branch_not_taken_read_is_removed():
    source = parse(
        H
        + """
        g (float[2] a) => (float[2] ya) <float[2] bias = {1.0, 2.0}> {
          s = SequenceConstruct(a)
          m = SequenceMap <body = body (e) => (y) {
                shape = Shape(e)
                rank = Size(shape)
                zero = Constant <value = int64 {0}> ()
                cond = Equal(rank, zero)
                y = If (cond) <
                  then_branch = t () => (r) { r = Add(e, bias) },
                  else_branch = f () => (r2) { r2 = Identity(e) }>
              }> (s)
          i0 = Constant <value = int64 {0}> ()
          ya = SequenceAt(m, i0)
        }"""
    )
    result = lowered(source)
    assert list(result.graph.initializer) == []
    assert op_types(result) == ["Identity"]  # the graph input a read as ya
