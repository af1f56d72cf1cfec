"""SequenceInsert positions: canonical form, checked against list.insert."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest

import lowering
from lowering import FreshNamesPass, NormalizeSequenceInsertPass, TargetOpsetPass
from lowering.cli import main
from tests.cases.onnx_node_tests import node_test_case
from tests.cases.sequence_insert import F2, GOLDEN, H
from tests.golden import canonical_text
from tests.helpers import all_nodes, assert_same, lowered, op_types, parse, run


def _element(k: int) -> np.ndarray:
    return np.full(2, k, np.float32)


INSERTED = np.full(2, 99, np.float32)


def sweep_model(n, p, dtype, shape, source, placement, sequence):
    """A model that inserts INSERTED into a sequence of n elements at p.

    Returns the model and its feeds. Its output is the resulting sequence
    stacked into a [n + 1, 2] tensor, computed at the top level, in a Loop
    body, or in a SequenceMap body.
    """
    type_name = {"int32": "int32", "int64": "int64"}[dtype]
    p_type = f"{type_name}[1]" if shape == "[1]" else type_name
    inputs = [f"{F2} x"]
    feeds = {"x": INSERTED}
    initializers = []
    if sequence == "static":
        inputs += [f"{F2} a{k}" for k in range(n)]
        feeds.update({f"a{k}": _element(k) for k in range(n)})
        if n:
            build = f"s = SequenceConstruct({', '.join(f'a{k}' for k in range(n))})"
        else:
            build = "s = SequenceEmpty <dtype = 1> ()"
    else:
        inputs.append(f"seq({F2}) s")
        feeds["s"] = [_element(k) for k in range(n)]
        build = ""
    value = np.array(p if shape == "" else [p], dtype=dtype)
    if source == "constant":
        initializers.append(f"{p_type} p = {{{p}}}")
    else:
        inputs.append(f"{p_type} p")
        feeds["p"] = value
    insert = (
        "r = SequenceInsert(s, x_in, p)\n stacked = ConcatFromSequence <axis = 0, new_axis = 1> (r)"
    )
    if placement == "top":
        body = f"x_in = Identity(x)\n {insert}\n y = Identity(stacked)"
    elif placement == "loop":
        body = f"""one = Constant <value = int64 {{1}}> ()
          yes = Constant <value = bool {{1}}> ()
          nothing = Constant <value = float[0,2] {{}}> ()
          y = Loop (one, yes, nothing) <body = loop_body (int64 i, bool c, float[M,2] before)
                                                => (bool c_out, float[M,2] stacked) {{
                 c_out = Identity(c)
                 x_in = Identity(x)
                 {insert}
               }}>"""
    else:
        body = f"""xs = SequenceConstruct(x)
          mapped = SequenceMap <body = map_body ({F2} x_in) => (float[M,2] stacked) {{
                 {insert}
               }}> (xs)
          y = ConcatFromSequence <axis = 0> (mapped)"""
    init = f"<{', '.join(initializers)}>" if initializers else ""
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({", ".join(inputs)}) => (float[M,2] y) {init} {{
      {build}
      {body}
    }}"""
    return parse(text), feeds


def oracle(n: int, p: int) -> np.ndarray:
    elements = [_element(k) for k in range(n)]
    elements.insert(p, INSERTED)  # Python's list.insert is SequenceInsert
    return np.stack(elements)


SWEEP = [
    (n, p, dtype, shape, source, placement, sequence)
    for n in range(5)
    for p in range(-n, n + 1)
    for dtype, shape, source, placement, sequence in itertools.product(
        ["int32", "int64"],
        ["", "[1]"],
        ["constant", "input"],
        ["top", "loop", "map"],
        ["static", "dynamic"],
    )
]


def _positions(model: onnx.ModelProto) -> list[list[str]]:
    return [list(n.input[2:]) for n in all_nodes(model) if n.op_type == "SequenceInsert"]


@pytest.mark.slow
@pytest.mark.parametrize("n,p,dtype,shape,source,placement,sequence", SWEEP)
def test_position_sweep(n, p, dtype, shape, source, placement, sequence):
    model, feeds = sweep_model(n, p, dtype, shape, source, placement, sequence)
    result = lowered(model)
    expected = oracle(n, p)
    assert_same(run(result, feeds), [expected])
    # Canonical: no third input where the position appends, whenever that is known.
    if source == "constant" and sequence == "static" and p == n:
        assert all(not position for position in _positions(result))
    # Idempotent: a second run has nothing to do.
    assert lowering.lower_in_place(ir.serde.deserialize_model(result)) == []
    # onnx.reference computes (p + n) % n, so it inserts p == n at the front
    # and divides by zero on an empty sequence; canonical positions avoid both,
    # but for a constant 0 into a sequence of unknown length (which is left
    # alone: the front, and on an empty sequence the end too).
    if (n, source, sequence) != (0, "constant", "dynamic"):
        reference = onnx.reference.ReferenceEvaluator(result).run(None, feeds)
        assert_same(reference, [expected])


def test_onnx_reference_is_wrong_before_normalization():
    """Why the pass exists: onnx.reference inserts p == n at the front."""
    model, feeds = sweep_model(3, 3, "int64", "", "constant", "top", "static")
    raw = onnx.reference.ReferenceEvaluator(model).run(None, feeds)[0]
    assert not np.array_equal(raw, oracle(3, 3))


@pytest.mark.parametrize("name", ["test_sequence_insert_at_back", "test_sequence_insert_at_front"])
def test_onnx_conformance_case(name):
    case = node_test_case(name)
    result = lowered(case.model)
    names = [i.name for i in result.graph.input]
    for inputs, expected in case.data_sets:
        assert_same(run(result, dict(zip(names, inputs))), list(expected))


OUT_OF_RANGE = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[2] b, float[2] c, float[2] x) => (seq(float[2]) y) <{type} p = {{{p}}}> {{
  s = SequenceConstruct(a, b, c)
  [too_far] y = SequenceInsert(s, x, p)
}}"""


@pytest.mark.parametrize("p", [4, -4, 100])
@pytest.mark.parametrize("type_", ["int64", "int32[1]"])
def test_statically_out_of_range_is_an_error(p, type_):
    model = parse(OUT_OF_RANGE.format(type=type_, p=p))
    with pytest.raises(lowering.LoweringError) as error:
        lowering.lower(model)
    message = str(error.value)
    assert "'too_far' (SequenceInsert) in main graph 'g'" in message
    assert f"position {p} is out of range for a sequence of length 3" in message


def test_out_of_range_exits_1_from_the_cli(tmp_path, capsys):
    onnx.save(parse(OUT_OF_RANGE.format(type="int64", p=5)), tmp_path / "in.onnx")
    assert main([str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert "position 5 is out of range for a sequence of length 3" in err
    assert not (tmp_path / "out.onnx").exists()


def test_no_normalize_inserts_leaves_positions(tmp_path):
    model = parse(OUT_OF_RANGE.format(type="int32[1]", p=-1))
    assert lowering.lower(model, normalize_inserts=False) == model
    onnx.save(model, tmp_path / "in.onnx")
    assert (
        main(["-q", "--no-normalize-inserts", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx")])
        == 0
    )
    assert (tmp_path / "o.onnx").read_bytes() == (tmp_path / "in.onnx").read_bytes()


# Each kind of position beside its canonical rewrite: tests/cases/sequence_insert.py.
@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden(name):
    source, expected = (text if text.startswith("<") else H + text for text in GOLDEN[name])
    actual = lowering.lower(parse(source))
    assert canonical_text(actual) == canonical_text(parse(expected))


# Each static length source: (ops building s from a, b, c: float[2] and
# w: float[4,2], the length, and a Python builder of the same list).
LENGTH_SOURCES = {
    "SequenceEmpty": ("s = SequenceEmpty <dtype = 1> ()", 0, lambda f: []),
    "SequenceConstruct": ("s = SequenceConstruct(a, b)", 2, lambda f: [f["a"], f["b"]]),
    "SequenceInsert": (
        "t = SequenceConstruct(a, b)\n s = SequenceInsert(t, c)",
        3,
        lambda f: [f["a"], f["b"], f["c"]],
    ),
    "SequenceErase": (
        "t = SequenceConstruct(a, b, c)\n s = SequenceErase(t)",
        2,
        lambda f: [f["a"], f["b"]],
    ),
    "SplitToSequence_constant_split": (
        "sizes = Constant <value = int64[3] {1, 1, 2}> ()\n s = SplitToSequence(w, sizes)",
        3,
        lambda f: [f["w"][:1], f["w"][1:2], f["w"][2:]],
    ),
    "SplitToSequence_scalar_split": (
        "size = Constant <value = int64 {3}> ()\n s = SplitToSequence(w, size)",
        2,
        lambda f: [f["w"][:3], f["w"][3:]],
    ),
    "SplitToSequence_static_dim": (
        "s = SplitToSequence <keepdims = 0> (w)",
        4,
        lambda f: list(f["w"]),
    ),
    "Identity": ("t = SequenceConstruct(a)\n s = Identity(t)", 1, lambda f: [f["a"]]),
    "lowered_SequenceMap_over_a_split": (
        """t = SplitToSequence <keepdims = 0> (w)
           s = SequenceMap <body = body (float[2] e) => (float[2] d) { d = Neg(e) }> (t)""",
        4,
        lambda f: list(-f["w"]),
    ),
    "lowered_SequenceMap": (
        """t = SequenceConstruct(a, b, c)
           s = SequenceMap <body = body (float[2] e) => (float[2] d) { d = Neg(e) }> (t)""",
        3,
        lambda f: [-f["a"], -f["b"], -f["c"]],
    ),
    # The forms a lowered map takes once its trip count is folded to a constant.
    "Loop_appending_with_a_constant_trip_count": (
        """m = Constant <value = int64 {3}> ()
           yes = Constant <value = bool {1}> ()
           start = SequenceEmpty <dtype = 1> ()
           s = Loop (m, yes, start) <body = lb (int64 i, bool c_in, seq(float[2]) acc)
                                               => (bool c_out, seq(float[2]) acc_out) {
             c_out = Identity(c_in)
             acc_out = SequenceInsert(acc, a)
           }>""",
        3,
        lambda f: [f["a"]] * 3,
    ),
    "Loop_appending_with_a_squeezed_count_to_a_non_empty_start": (
        """m1 = Constant <value = int64[1] {2}> ()
           m = Squeeze(m1)
           yes = Constant <value = bool {1}> ()
           start = SequenceConstruct(b)
           s = Loop (m, yes, start) <body = lb (int64 i, bool c_in, seq(float[2]) acc)
                                               => (bool c_out, seq(float[2]) acc_out) {
             c_out = Constant <value = bool {1}> ()
             acc_out = SequenceInsert(acc, a)
           }>""",
        3,
        lambda f: [f["b"], f["a"], f["a"]],
    ),
    "Loop_passing_the_sequence_on": (
        """n = Size(w)
           yes = Constant <value = bool {1}> ()
           start = SequenceConstruct(a, b)
           s = Loop (n, yes, start) <body = lb (int64 i, bool c_in, seq(float[2]) acc)
                                               => (bool c_out, seq(float[2]) acc) {
             c_out = Identity(c_in)
           }>""",
        2,
        lambda f: [f["a"], f["b"]],
    ),
    "SplitToSequence_of_a_Loop_scan_output_with_a_constant_trip_count": (
        """m = Constant <value = int64 {3}> ()
           yes = Constant <value = bool {1}> ()
           stack = Loop (m, yes) <body = lb (int64 i, bool c_in) => (bool c_out, float[2] row) {
             c_out = Identity(c_in)
             row = Neg(a)
           }>
           s = SplitToSequence <keepdims = 0> (stack)""",
        3,
        lambda f: [-f["a"]] * 3,
    ),
    "If_whose_branches_agree": (
        """flag = Constant <value = bool {1}> ()
           s = If (flag) <
             then_branch = then_g () => (seq(float[2]) t) { t = SequenceConstruct(a, b) },
             else_branch = else_g () => (seq(float[2]) e) { e = SequenceConstruct(c, a) }>""",
        2,
        lambda f: [f["a"], f["b"]],
    ),
}


def _length_model(build: str, position: int) -> onnx.ModelProto:
    return parse(f"""{H}
    g (float[2] a, float[2] b, float[2] c, float[4,2] w, float[2] x) => (seq(float[N]) y)
      <int32 p = {{{position}}}> {{
      {build}
      [insert] y = SequenceInsert(s, x, p)
    }}""")


@pytest.mark.parametrize("source", list(LENGTH_SOURCES))
def test_static_length_sources(source):
    build, n, elements = LENGTH_SOURCES[source]
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(2).astype(np.float32) for name in "abcx"}
    feeds["w"] = rng.standard_normal((4, 2)).astype(np.float32)
    # Appending at the known length drops the position altogether...
    result = lowered(_length_model(build, n))
    inserts = [n for n in all_nodes(result) if n.op_type == "SequenceInsert" and n.name == "insert"]
    # (An Identity of a sequence is bypassed: the insert reads its input.)
    assert [list(node.input) for node in inserts] in ([["s", "x"]], [["t", "x"]])
    assert_same(run(result, feeds), [[*elements(feeds), feeds["x"]]])
    # ...and one past it is an error that names the length.
    with pytest.raises(lowering.LoweringError, match=f"length {n}"):
        lowering.lower(_length_model(build, n + 1))


def test_constant_position_with_several_elements_is_an_error():
    model = parse(f"""{H}
    g (float[2] a, float[2] x) => (seq(float[2]) y) <int64[2] p = {{0, 1}}> {{
      s = SequenceConstruct(a)
      y = SequenceInsert(s, x, p)
    }}""")
    with pytest.raises(lowering.LoweringError, match=r"constant of shape \[2\]"):
        lowering.lower(model)


def test_positions_inside_functions_and_from_outer_scope_constants():
    model = parse("""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[2] a, float[2] b, float[2] x, bool flag) => (seq(float[2]) y, seq(float[2]) z)
      <int32[1] p = {-1}> {
      s = SequenceConstruct(a, b)
      y = If (flag) <
        then_branch = then_g () => (seq(float[2]) t) { t = SequenceInsert(s, x, p) },
        else_branch = else_g () => (seq(float[2]) e) { e = Identity(s) }>
      z = local.push_front(s, x)
    }
    <domain: "local", opset_import: ["" : 17]>
    push_front (q, v) => (r) {
      zero = Constant <value = int32 {0}> ()
      r = SequenceInsert(q, v, zero)
    }""")
    result = lowered(model)
    positions = {
        node.input[2]
        for node in all_nodes(result)
        if node.op_type == "SequenceInsert" and len(node.input) > 2
    }
    constants = {
        out: onnx.numpy_helper.to_array(node.attribute[0].t)
        for node in all_nodes(result)
        if node.op_type == "Constant"
        for out in node.output
    }
    # Both positions became int64 scalars: 1 (length 2 known), 0 (length
    # unknown: guarded, an append where the sequence is empty).
    assert sorted(int(constants[p]) for p in positions) == [0, 1]
    assert all(constants[p].dtype == np.int64 and constants[p].ndim == 0 for p in positions)
    rng = np.random.default_rng(1)
    feeds = {k: rng.standard_normal(2).astype(np.float32) for k in "abx"}
    feeds["flag"] = np.array(True)
    expected = [[feeds["a"], feeds["x"], feeds["b"]], [feeds["x"], feeds["a"], feeds["b"]]]
    assert_same(run(result, feeds), expected)


def _insert_positions(model: onnx.ModelProto, name: str = "insert") -> list[list[str]]:
    return [list(n.input[2:]) for n in all_nodes(model) if n.name == name]


def _position_values(model: onnx.ModelProto, name: str = "insert") -> list[list[int]]:
    """Each insert's position, as its constant value (names may differ)."""
    values = _static_values(model)
    return [[int(values[p]) for p in ps] for ps in _insert_positions(model, name)]


def _static_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Every Constant output and initializer, by name."""
    values = {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in all_nodes(model):
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            values[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    return values


MAP_LOWERINGS = {
    "unrolled": {"strategy": "auto"},
    "uniform": {"strategy": "auto", "max_unroll": 0},
    "loop": {"strategy": "loop"},
}


def _length_feeds(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(2).astype(np.float32) for name in "abcx"}
    feeds["w"] = rng.standard_normal((4, 2)).astype(np.float32)
    return feeds


def _check_folded_length(result: onnx.ModelProto, p: int, options: dict) -> None:
    _, n, elements = LENGTH_SOURCES["lowered_SequenceMap"]
    feeds = _length_feeds(p + 3)
    expected = elements(feeds)
    expected.insert(p, feeds["x"])
    assert_same(run(result, feeds), [expected])
    [position] = _insert_positions(result)
    if p == n:
        assert position == []
    else:  # folded to a constant in [0, n)
        assert int(_static_values(result)[position[0]]) == p % n
    assert lowering.lower_in_place(ir.serde.deserialize_model(result), **options) == []


@pytest.mark.parametrize("lowering_name", list(MAP_LOWERINGS))
@pytest.mark.parametrize("p", range(-3, 4))
def test_a_lowered_maps_length_survives_folding(p, lowering_name):
    """Unrolling and sequence elimination fold the trip count to a constant;
    the length of the map's output must stay known."""
    model = _length_model(LENGTH_SOURCES["lowered_SequenceMap"][0], p)
    options = MAP_LOWERINGS[lowering_name]
    _check_folded_length(lowered(model, **options), p, options)


# onnxscript's optimizer runs in a process of its own: it names tensors that
# the lowering shares between models (lowering.maps.plan's constant true).
_LOWER_ALL = """
import json, sys, onnx, lowering
for source, target, options in json.load(open(sys.argv[1])):
    onnx.save(lowering.lower(onnx.load(source), **options), target)
"""


def test_a_lowered_maps_length_survives_the_optimizer(tmp_path):
    """--optimize folds the trip count too, before or after normalization."""
    jobs, cases = [], []
    for lowering_name, options in MAP_LOWERINGS.items():
        for p in range(-3, 4):
            model = _length_model(LENGTH_SOURCES["lowered_SequenceMap"][0], p)
            source = tmp_path / f"{lowering_name}_{p}.onnx"
            onnx.save(model, source)
            targets = [tmp_path / f"{lowering_name}_{p}_{kind}.onnx" for kind in ("a", "b")]
            jobs.append([str(source), str(targets[0]), {"optimize": True, **options}])
            jobs.append(
                [
                    str(source),
                    str(targets[1]),
                    {"optimize": True, "normalize_inserts": False, **options},
                ]
            )
            cases.append((p, options, targets))
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, "-c", _LOWER_ALL, str(tmp_path / "jobs.json")], check=True)
    for p, options, (optimized, unnormalized) in cases:
        result = onnx.load(optimized)
        onnx.checker.check_model(result, full_check=True)
        _check_folded_length(result, p, options)
        # Normalized only after the optimizer has folded the trip count: the same.
        renormalized = lowered(onnx.load(unnormalized))
        assert _position_values(renormalized) == _position_values(result)


FOLDS = {  # (opset, the nodes computing p from a constant P)
    "Squeeze_axes_input": (
        13,
        [
            "k = Constant <value = int64[1] {P}> ()",
            "axes = Constant <value = int64[1] {0}> ()",
            "p = Squeeze(k, axes)",
        ],
    ),
    "Squeeze_axes_attribute": (
        11,
        ["k = Constant <value = int64[1] {P}> ()", "p = Squeeze <axes = [0]> (k)"],
    ),
    "Squeeze_all": (13, ["k = Constant <value = int64[1, 1] {P}> ()", "p = Squeeze(k)"]),
    "Unsqueeze": (
        13,
        [
            "k = Constant <value = int64 {P}> ()",
            "axes = Constant <value = int64[1] {-1}> ()",
            "p = Unsqueeze(k, axes)",
        ],
    ),
    "Reshape": (
        13,
        [
            "k = Constant <value = int32[1, 1] {P}> ()",
            "shape = Constant <value = int64[1] {-1}> ()",
            "p = Reshape(k, shape)",
        ],
    ),
    "Cast": (13, ["k = Constant <value = int32 {P}> ()", "p = Cast <to = 7> (k)"]),
    "Identity": (13, ["k = Constant <value = int64[1] {P}> ()", "p = Identity(k)"]),
    "chain": (
        13,
        [
            "k = Constant <value = int32[1, 1] {P}> ()",
            "k2 = Squeeze(k)",
            "k3 = Cast <to = 7> (k2)",
            "p = Identity(k3)",
        ],
    ),
}
_FOLD_OPS = {"Squeeze", "Unsqueeze", "Reshape", "Cast", "Identity"}


def _fold_model(n: int, p: int, fold: str, sequence: str) -> tuple[onnx.ModelProto, dict]:
    opset, nodes = FOLDS[fold]
    inputs = [f"{F2} x"]
    feeds = {"x": INSERTED}
    if sequence == "static":
        inputs += [f"{F2} a{k}" for k in range(n)]
        feeds.update({f"a{k}": _element(k) for k in range(n)})
        args = ", ".join(f"a{k}" for k in range(n))
        build = f"s = SequenceConstruct({args})" if n else "s = SequenceEmpty <dtype = 1> ()"
    else:
        inputs.append(f"seq({F2}) s")
        feeds["s"] = [_element(k) for k in range(n)]
        build = ""
    model = parse(f"""<ir_version: 7, opset_import: ["" : {opset}]>
    g ({", ".join(inputs)}) => (float[M,2] y) {{
      {build}
      {chr(10).join(nodes).replace("P", str(p))}
      [insert] r = SequenceInsert(s, x, p)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
    }}""")
    return model, feeds


@pytest.mark.parametrize("sequence", ["static", "dynamic"])
@pytest.mark.parametrize("fold", list(FOLDS))
@pytest.mark.parametrize("n,p", [(n, p) for n in range(4) for p in range(-n, n + 1)])
@pytest.mark.sweep
def test_positions_computed_from_constants_are_folded(n, p, fold, sequence):
    model, feeds = _fold_model(n, p, fold, sequence)
    result = lowered(model)
    assert_same(run(result, feeds), [oracle(n, p)])
    assert lowering.lower_in_place(ir.serde.deserialize_model(result)) == []
    if sequence == "static":
        # The whole chain is read as tensors (issue 34, item 2), position folded...
        ops = op_types(result)
        assert not {"SequenceInsert", "SequenceConstruct", "SequenceEmpty"} & set(ops)
        assert not (_FOLD_OPS - {"Unsqueeze"}) & set(ops), "the folded ops are left behind"
        assert ops.count("Unsqueeze") == n + 1, "one per element stacked, none for p"
        # ...and the normalization alone folds it as well.
        normalized = ir.serde.deserialize_model(model)
        lowering.NormalizeSequenceInsertPass()(normalized)
        result = ir.serde.serialize_model(normalized)
        assert_same(run(result, feeds), [oracle(n, p)])
    [position] = _insert_positions(result)
    if sequence == "static":
        # Known as well as a Constant: dropped where it appends, else in [0, n).
        assert position == [] if p == n else int(_static_values(result)[position[0]]) == p % n
        assert not _FOLD_OPS & set(op_types(result)), "the folded ops are left behind"


@pytest.mark.parametrize("opset", [12, 17])
@pytest.mark.parametrize("n", range(4))
def test_an_initializer_that_is_also_an_input_is_not_folded(n, opset):
    """Its value is only a default: every position fed must be honoured."""
    args = ", ".join(f"a{k}" for k in range(n))
    build = f"s = SequenceConstruct({args})" if n else "s = SequenceEmpty <dtype = 1> ()"
    inputs = "".join(f", {F2} a{k}" for k in range(n))
    model = parse(f"""<ir_version: 7, opset_import: ["" : {opset}]>
    g ({F2} x, int64[1] p{inputs}) => (float[M,2] y) <int64[1] k = {{{n}}}> {{
      {build}
      q = Squeeze(k)
      [insert] r = SequenceInsert(s, x, p)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
    }}""")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([n], np.int64), "p"))
    result = lowered(model)
    for p in range(-n, n + 1):
        feeds = {"x": INSERTED, "p": np.array([p], np.int64)}
        feeds.update({f"a{k}": _element(k) for k in range(n)})
        assert_same(run(result, feeds), [oracle(n, p)])


@pytest.mark.parametrize("opset", [11, 12, 13, 17])
@pytest.mark.parametrize("p_type", ["int64", "int32[1]"])
@pytest.mark.parametrize("n,p", [(n, p) for n in range(4) for p in range(-n, n + 1)])
def test_dynamic_positions_by_opset(n, p, p_type, opset):
    """From opset 13, p == n appends through an If; below, it is left as n."""
    model = parse(f"""<ir_version: 7, opset_import: ["" : {opset}]>
    g (seq({F2}) s, {F2} x, {p_type} p) => (float[M,2] y) {{
      [insert] r = SequenceInsert(s, x, p)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
    }}""")
    result = lowered(model)
    feeds = {
        "s": [_element(k) for k in range(n)],
        "x": INSERTED,
        "p": np.array(p if p_type == "int64" else [p], np.int64 if p_type == "int64" else np.int32),
    }
    assert_same(run(result, feeds), [oracle(n, p)])
    assert ("If" in op_types(result)) == (opset >= 13)
    assert lowering.lower_in_place(ir.serde.deserialize_model(result)) == []
    if opset >= 13 or p != n:
        reference = onnx.reference.ReferenceEvaluator(result).run(None, feeds)
        assert_same(reference, [oracle(n, p)])


@pytest.mark.parametrize("target_opset", [11, 12, 13])
def test_no_guard_when_the_model_will_declare_an_opset_below_13(target_opset):
    """``--target-opset`` below 13 could not declare a sequence-valued If."""
    model = ir.serde.deserialize_model(
        parse(f"""{H}
        g (seq({F2}) s, {F2} x, int64 p) => (seq({F2}) y) {{ y = SequenceInsert(s, x, p) }}""")
    )
    NormalizeSequenceInsertPass(target_opset=target_opset)(model)
    FreshNamesPass()(model)
    TargetOpsetPass(target_opset)(model)
    result = ir.serde.serialize_model(model)
    onnx.checker.check_model(result, full_check=True)
    assert ("If" in op_types(result)) == (target_opset >= 13)
    for n in range(3):
        for p in range(-n, n + 1):
            feeds = {"s": [_element(k) for k in range(n)], "x": INSERTED, "p": np.array(p)}
            assert_same(run(result, feeds), [list(oracle(n, p))])


@pytest.mark.parametrize("opset", [12, 17])
def test_dynamic_positions_inside_a_function(opset):
    """Untyped, in a function called from a function: guarded from opset 13 all the same."""
    model = parse(f"""<ir_version: 7, opset_import: ["" : {opset}, "local" : 1]>
    g (seq({F2}) s, {F2} x, int32[1] p) => (float[M,2] y) {{
      r = local.outer(s, x, p)
      y = ConcatFromSequence <axis = 0, new_axis = 1> (r)
    }}
    <domain: "local", opset_import: ["" : {opset}, "local" : 1]>
    outer (q, v, at) => (out) {{ out = local.push_at(q, v, at) }}
    <domain: "local", opset_import: ["" : {opset}]>
    push_at (q, v, at) => (out) {{ out = SequenceInsert(q, v, at) }}""")
    result = lowered(model)
    assert ("If" in op_types(result)) == (opset >= 13)
    assert "Cast" in op_types(result)  # the int32 [1] position's type came from the call chain
    for n in range(4):
        for p in range(-n, n + 1):
            feeds = {"s": [_element(k) for k in range(n)], "x": INSERTED}
            feeds["p"] = np.array([p], np.int32)
            assert_same(run(result, feeds), [oracle(n, p)])
    assert lowering.lower_in_place(ir.serde.deserialize_model(result)) == []


@pytest.mark.parametrize("p1, p2", [(0, 0), (0, 1), (1, 0), (-1, 2), (0, -1)])
def test_chained_dynamic_inserts_are_each_guarded(p1, p2):
    """The second insert reads the first one's guard, not the node it replaced."""
    model = parse(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] a, float[2] b, float[2] c, int64 p1, int64 p2) => (seq(float[2]) out) {
          s = SequenceConstruct(a)
          first = SequenceInsert(s, b, p1)
          out = SequenceInsert(first, c, p2)
        }"""
    )
    result = lowered(model)
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(2).astype(np.float32) for k in "abc"}
    expected = [feeds["a"]]
    expected.insert(p1, feeds["b"])
    expected.insert(p2, feeds["c"])
    feeds.update(p1=np.array(p1), p2=np.array(p2))
    assert_same(run(result, feeds), [expected])
