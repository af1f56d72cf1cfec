"""The forms the lowering writes for maps run and match in the releases each profile covers.

A profile covers a range of releases (``lowering/runtimes/profiles.py``),
so its forms run here in the oldest and the last of each, in venvs of
their own (``lowering/runtimes/releases.py``), lowered with ``--runtime``
naming the release: onnxruntime 1.12 (the oldest that takes opset 17,
SequenceMap's) and 1.16, OpenVINO 2024.6 (the 2024 LTS, the oldest that
``--runtime openvino`` covers) and 2025.4, and OpenVINO 2023.3 with its own
profile, onnxruntime-openvino 1.24's OpenVINO execution provider with
CPU fallback disabled (``--runtime onnxruntime-openvino:1.24``: no loop),
and IREE 3.13 (``--runtime iree``: no loop, no segment max or min). Each
runs, against numpy, or is refused in one line where the profile has no
form for it (a map that keeps a loop, for a runtime with none):

- every ragged reduction (``tests/ragged_maps.py``: segment sums, products,
  means, maxima and minima; L2 and log-sum-exp, which keep a loop) read by
  a concat, at n = 0, 1 and 7 with empty elements among them;
- every family of vectorized bodies (``tests/vectorize_families.py``), split
  on axis 1 with keepdims, at n = 1 and 5 (at n = 0 the original's concat
  fails); and where n = 0 is the original's, a sequence returned, the
  vectorized form of each family in onnxruntime's oldest release, whose
  MatMul, TopK, OneHot and Einsum fail on an empty stack, so that
  ``--runtime onnxruntime:1.12`` writes another form;
- the runtime matrix's hand-written maps (``tests/matrix_models.py``;
  not in the execution provider).

A reduction left in a loop runs the body's own op on each element, and an
empty element is then the release's own matter (onnxruntime 1.12 fails on
it, as on the original), so those run without empty elements; and
:data:`OWN_FAULTS` lists what a release gets wrong in the body's own ops,
which must still fail there. A venv is built only where
``LOWERING_OLD_RUNTIMES`` asks for it (its version, or ``all``; CI sets it)
or already built; otherwise the tests skip.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from collections.abc import Callable

import numpy as np
import onnx
import pytest

import lowering
from lowering.runtimes import releases, runners
from lowering.runtimes.profiles import profile
from lowering.runtimes.runners import RuntimeFailure, run_many
from tests.cases import ragged_maps, vectorize_families
from tests.cases.vectorize_families import Family
from tests.helpers import assert_same, cli, op_types, release_python
from tests.matrix_models import matches, synthetic_cases


@dataclasses.dataclass(frozen=True)
class Target:
    """A release, the ``--runtime`` it is lowered for and the opset and IR its models
    declare; ``refuses``: the reductions whose ragged maps its profile refuses (no form
    of theirs runs there), beside those that keep a loop where it has none."""

    release: releases.Release
    runtime: str
    opset: int
    ir_version: int
    refuses: tuple[str, ...] = ()


TARGETS = {
    t.release.column: t
    for t in (
        Target(releases.RELEASES["onnxruntime 1.12"], "onnxruntime:1.12", 17, 8),
        Target(releases.RELEASES["onnxruntime 1.16"], "onnxruntime:1.16", 18, 9),
        # Opset 17: 2023.3 reduces over every axis where a Reduce-18 takes its axes as
        # an input (the body's own op).
        Target(releases.RELEASES["openvino 2023.3"], "openvino:2023.3", 17, 8),
        Target(releases.RELEASES["openvino 2024.6"], "openvino:2024.6", 18, 9),
        Target(releases.RELEASES["openvino 2025.4"], "openvino", 18, 9),
        Target(releases.RELEASES["onnxruntime-openvino 1.24"], "onnxruntime-openvino:1.24", 18, 9),
        # No loop, and no segment max or min (ScatterElements with those reductions).
        Target(releases.RELEASES["iree 3.13"], "iree", 18, 9, ("ReduceMax", "ReduceMin")),
    )
}

#: (release, job) -> what the release gets wrong in the body's own op, as the
#: original would meet it: the job must still fail there.
OWN_FAULTS = {
    (column, f"vectorized one_hot n={n}"): "OneHot with a negative index gives no 1"
    for column in ("openvino 2023.3", "openvino 2024.6")
    for n in (1, 5)
}

GROUPS = ("ragged", "vectorized", "empty", "matrix")


@dataclasses.dataclass(frozen=True)
class Job:
    model: onnx.ModelProto
    inputs: list
    expected: list


@dataclasses.dataclass(frozen=True)
class Refused:
    """A map the lowering refused for the target (its one line), and whether it was
    to refuse it (an unexpected lowering is one that was not)."""

    error: str
    expected: bool


def _job(target: Target, model: onnx.ModelProto, inputs: list, expected: list) -> Job:
    """The job; for the execution provider, without the graph inputs nothing reads,
    which it binds to the wrong places ("Can't set the input tensor with index 1")."""
    if target.release.runtime != "onnxruntime-openvino":
        return Job(model, inputs, expected)
    read = {name for node in model.graph.node for name in node.input}
    read |= {name for node in model.graph.node for a in node.attribute if a.g.name
             for inner in a.g.node for name in inner.input}  # fmt: skip
    kept = [(i, x) for i, x in zip(model.graph.input, inputs, strict=True) if i.name in read]
    model = onnx.ModelProto.FromString(model.SerializeToString())
    del model.graph.input[:]
    model.graph.input.extend(i for i, _ in kept)
    return Job(model, [x for _, x in kept], expected)


def _ragged(target: Target) -> dict[str, Job | Refused]:
    jobs: dict[str, Job | Refused] = {}
    bodies = {
        **ragged_maps.REDUCTIONS,
        "unary": ragged_maps.ELEMENTWISE["unary"],
        **ragged_maps.LOOP_REDUCTIONS,
    }
    loops = profile(target.runtime).loops
    for s, source in ragged_maps.SOURCES.items():
        for b, body in bodies.items():
            model = ragged_maps.ragged_model(source, body, "concat", target.opset)
            model.ir_version = target.ir_version
            refuse = b.startswith(target.refuses) or (
                b in ragged_maps.LOOP_REDUCTIONS and not loops
            )
            try:
                result = lowering.lower(model, runtime=target.runtime)
            except lowering.LoweringError as error:
                jobs[f"{s} {b}"] = Refused(str(error), refuse)
                continue
            if refuse:
                jobs[f"{s} {b}"] = Refused("lowered, where its profile was to refuse it", False)
                continue
            looped = bool({"Loop", "Scan"} & set(op_types(result)))
            names = [i.name for i in result.graph.input]
            for lengths in source.runs:
                if looped and 0 in lengths:
                    continue  # the body's own op on an empty element
                feeds = ragged_maps.ragged_feeds(source, lengths, body.dtype)
                expected = ragged_maps.ragged_expected(source, body, lengths, feeds, "concat")
                jobs[f"{s} {b} {list(lengths)}"] = _job(
                    target, result, [feeds[n] for n in names], [expected]
                )
    return jobs


def _families(target: Target, shape: Callable[[Family], str]):
    """(name, family, its model of ``shape`` lowered for ``target``), at the target's opset."""
    for name, family in vectorize_families.FAMILIES.items():
        if family.opset <= target.opset:
            model = vectorize_families.parse_family(shape(family), family)
            model.ir_version = min(model.ir_version, target.ir_version)
            yield name, family, lowering.lower(model, runtime=target.runtime)


def _vectorized(target: Target) -> dict[str, Job]:
    jobs = {}
    for name, family, result in _families(target, vectorize_families.split_axis_1_model):
        for n in (1, 5):
            elements = vectorize_families.family_elements(family, n)
            _, stacked = vectorize_families.family_expected(family, elements)
            inputs = [np.stack(elements)[None], *family.extras.values()]
            expected = [np.moveaxis(stacked, 0, -1)]
            jobs[f"vectorized {name} n={n}"] = _job(target, result, inputs, expected)
    return jobs


def _empty(target: Target) -> dict[str, Job]:
    """Each family over no element, its sequence returned (onnxruntime only)."""
    if target.release.runtime != "onnxruntime":
        return {}
    return {
        f"empty {name}": Job(result, [[], *family.extras.values()], [[]])
        for name, family, result in _families(target, vectorize_families.input_model)
    }


def _matrix(target: Target) -> dict[str, Job | Refused]:
    """The matrix's maps; where the target has no loop, those that keep one are refused."""
    jobs: dict[str, Job | Refused] = {}
    loops = profile(target.runtime).loops
    for name, case in synthetic_cases().items():
        try:
            result = lowering.lower(case.model, runtime=target.runtime)
        except lowering.LoweringError as error:
            jobs[name] = Refused(str(error), bool(case.loop_expected) and not loops)
            continue
        jobs[name] = _job(target, result, case.inputs, case.expected)
    return jobs


@functools.cache
def _jobs(column: str, group: str) -> dict[str, Job | Refused]:
    target = TARGETS[column]
    makers = {"ragged": _ragged, "vectorized": _vectorized, "empty": _empty, "matrix": _matrix}
    return makers[group](target)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """(release, group) -> job -> outputs or failure, each release's jobs in one child."""
    found: dict[tuple[str, str], dict[str, list | RuntimeFailure]] = {}

    def of(column: str, group: str) -> dict[str, list | RuntimeFailure]:
        if (column, group) not in found:
            release_python(TARGETS[column].release)
            folder = tmp_path_factory.mktemp(f"{column}_{group}".replace(" ", "_"))
            jobs = {k: j for k, j in _jobs(column, group).items() if isinstance(j, Job)}
            paths = []
            for number, job in enumerate(jobs.values()):
                path = folder / f"{number}.onnx"
                onnx.save(job.model, path)
                paths.append((path, job.inputs))
            found[column, group] = dict(zip(jobs, run_many(column, paths)))
        return found[column, group]

    return of


def _fault(result: list | RuntimeFailure, job: Job) -> str | None:
    """Why ``result`` is not ``job``'s expectation, or None if it is."""
    if isinstance(result, RuntimeFailure):
        return str(result)[:300]
    if isinstance(job.expected[0], list):  # an empty sequence
        empty = len(result) == 1 and isinstance(result[0], list) and not result[0]
        return None if empty else f"not an empty sequence: {result}"
    if matches(result, job.expected):
        return None
    try:
        for got, expected in zip(result, job.expected, strict=True):
            assert_same(got, expected)
    except (AssertionError, ValueError) as error:
        return f"wrong result: {str(error)[:300]}"
    return None


def _has_jobs(target: Target, group: str) -> bool:
    """Whether ``group`` has jobs for ``target`` (cheaply: no lowering at collection).
    Not the matrix's maps for the execution provider: it leaves nodes of two unrolled
    ones (a Gather, Shape and ReduceSum; ReduceSums and a Concat) to the CPU."""
    if group == "empty":
        return target.release.runtime == "onnxruntime"
    return group != "matrix" or target.release.runtime != "onnxruntime-openvino"


PARAMS = [
    pytest.param(column, group, id=f"{column}-{group}")
    for column, target in TARGETS.items()
    for group in GROUPS
    if _has_jobs(target, group)
]


@pytest.mark.slow
@pytest.mark.parametrize(("column", "group"), PARAMS)
def test_every_form_runs_and_matches_numpy_in_the_release(column, group, outcomes):
    jobs = _jobs(column, group)
    got = outcomes(column, group)
    failed, healed = [], []
    for name, job in jobs.items():
        if isinstance(job, Refused):
            if not job.expected or "\n" in job.error:
                failed.append(f"{name}: {job.error}")
            continue
        fault = _fault(got[name], job)
        own = OWN_FAULTS.get((column, name))
        if fault is not None and own is None:
            failed.append(f"{name}: {fault}")
        elif fault is None and own is not None:
            healed.append(f"{name} ({own})")
    assert not failed, f"{len(failed)} of {len(jobs)} in {column}:\n" + "\n".join(failed)
    assert not healed, "no longer faults of the release; update OWN_FAULTS: " + ", ".join(healed)


@pytest.mark.slow
@pytest.mark.parametrize(("runtime", "column"), [("openvino:2024.6", "openvino 2024.6"),
                                                 ("iree", "iree 3.13")])  # fmt: skip
def test_verify_runs_b_in_the_release_named(runtime, column, tmp_path, monkeypatch):
    """``--verify --runtime openvino:2024.6`` runs B in that release, which takes the
    segment sum the default output holds; ``--runtime iree`` in IREE's newest."""
    release_python(releases.RELEASES[column])
    source = ragged_maps.SOURCES["input_lengths_axis_0"]
    body = ragged_maps.REDUCTIONS["ReduceSum_keepdims_0_float"]
    model = ragged_maps.ragged_model(source, body, "concat")
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(model, a)
    result = lowering.lower(model, runtime=runtime)
    assert "ScatterElements" in op_types(result)
    onnx.save(result, b)
    feeds = ragged_maps.ragged_feeds(source, (0, 2, 0, 1, 6, 3, 0), "float")
    ran = []
    real = runners.run_many
    monkeypatch.setattr(
        runners, "run_many", lambda name, *rest: ran.append(name) or real(name, *rest)
    )
    report = lowering.verify.compare(a, b, inputs=feeds, runtime=runtime)
    assert report.exit_code == 0 and report.runs == 1, report.table()
    assert ran == [column]


#: scripts/runtime_probe.py's models of what the ``iree`` profile lacks or refuses,
#: with the op it names for each: each must still fail in IREE (refused, or a wrong
#: result), and the controls (None) run; an IREE that runs one is a profile to widen.
IREE_PROBES = {
    "Loop, scan outputs (body reads outer x)": "Loop",
    "Loop, dynamic trip count (Shape of input)": "Loop",
    "Scan over a dynamic length": "Scan",
    "ConcatFromSequence new_axis 0 (of SplitToSequence)": "SplitToSequence",
    "ScatterElements, reduction max": "ScatterElements<reduction=max>",
    "ScatterElements, reduction min": "ScatterElements<reduction=min>",
    "ScatterElements, reduction add": None,
    "Scan (state + scan output)": None,  # over a static length
    "If": None,
}


@pytest.mark.slow
def test_what_the_iree_profile_refuses_still_fails_in_iree(tmp_path):
    from scripts.runtime_probe import PROBES

    release = releases.RELEASES["iree 3.13"]
    release_python(release)
    jobs = []
    for number, name in enumerate(IREE_PROBES):
        path = tmp_path / f"{number}.onnx"
        onnx.save(PROBES[name].model(), path)
        jobs.append((path, PROBES[name].inputs))
    iree = profile("iree")
    for (name, op), result in zip(IREE_PROBES.items(), run_many(release.column, jobs), strict=True):
        probe = PROBES[name]
        runs = not isinstance(result, RuntimeFailure) and matches(
            result, probe.expect(*probe.inputs)
        )
        assert runs == (op is None), f"{name}: {result}"
        assert op is None or iree.rejects({op}) == [op], name


# -- the profiles, without the venvs -------------------------------------------

PROFILES = {
    "openvino": ("openvino", ()),
    "openvino:2024.6": ("openvino:2024.0-2025.4", ("Loop<ragged Concat>",)),
    "openvino:2025.4": ("openvino:2024.0-2025.4", ("Loop<ragged Concat>",)),
    "openvino:2026.4": ("openvino", ()),
    "openvino:2023.3": ("openvino:2023.3", ("ScatterElements", "Loop<ragged Concat>")),
    "onnxruntime:1.12": ("onnxruntime:1.12-1.31", ("MatMul", "TopK", "OneHot", "Einsum")),
    "onnxruntime:1.31.1": ("onnxruntime:1.12-1.31", ("MatMul", "TopK", "OneHot", "Einsum")),
    "onnxruntime:1.32": ("onnxruntime", ()),
    "iree": ("iree", ("ScatterElements<reduction=max>", "ScatterElements<reduction=min>")),
    "iree:3.13": ("iree", ("ScatterElements<reduction=max>", "ScatterElements<reduction=min>")),
}


@pytest.mark.parametrize("name", list(PROFILES))
def test_a_release_gets_the_profile_that_covers_it(name):
    from lowering.runtimes.profiles import RELEASE_PROFILES, RUNTIMES, profile

    source, refused = PROFILES[name]
    got = profile(name)
    expected = RELEASE_PROFILES.get(source) or RUNTIMES[source]
    assert got.name == name
    assert (got.lacks, got.miscomputes) == (expected.lacks, expected.miscomputes)
    assert [op for op, _ in got.miscomputes] == list(refused)


@pytest.mark.parametrize(
    "name", ["openvino:2022.1", "openvino:2023.2", "onnxruntime:1.11", "generic:1.0",
             "openvino:latest", "tensorrt:10.0", "openvino:", "iree:3.12"]
)  # fmt: skip
def test_a_release_no_profile_covers_is_the_callers_mistake(name):
    model = ragged_maps.ragged_model(
        ragged_maps.SOURCES["input_lengths_axis_0"], ragged_maps.ELEMENTWISE["unary"], "concat"
    )
    with pytest.raises(ValueError, match="runtime must "):
        lowering.lower(model, runtime=name)


def test_the_segment_form_names_the_releases_that_reject_it(tmp_path):
    import json
    import subprocess
    import sys

    source = ragged_maps.SOURCES["input_lengths_axis_0"]
    body = ragged_maps.REDUCTIONS["ReduceSum_keepdims_0_float"]
    model = ragged_maps.ragged_model(source, body, "concat")
    path, out, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(model, path)
    command = [sys.executable, "-m", "lowering", path, out, "--report", report]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "vectorize" in done.stderr + done.stdout
    said = done.stderr + done.stdout
    assert "rejected by mnn (ScatterElements), openvino:2023.3 (ScatterElements)" in said
    assert "not loop-free" not in said
    (node,) = json.loads(report.read_text())["nodes"]
    assert {"runtime": "openvino:2023.3", "op": "ScatterElements"} in node["rejected_by"]
    # What that release runs: the loop form, with the release named.
    command = [*command[:-2], "--runtime", "openvino:2023.3"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    said = done.stderr + done.stdout
    assert "not vectorized: openvino:2023.3 refuses a ScatterElements with a reduction" in said
    assert "ScatterElements" not in op_types(onnx.load(out))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMean", "ReduceMax", "ReduceMin"])
def test_only_a_segment_max_or_min_is_rejected_by_iree(op, tmp_path):
    """IREE compiles a ScatterElements with reduction add or mul, not max or min: the
    summary names iree for those only, and ``--runtime iree`` refuses them in one line."""
    source = ragged_maps.SOURCES["input_lengths_axis_0"]
    model = ragged_maps.ragged_model(
        source, ragged_maps.REDUCTIONS[f"{op}_keepdims_0_float"], "concat"
    )
    _, report = lowering.lower_with_report(model)
    (said,) = report.nodes
    rejected = ("iree", f"ScatterElements<reduction={op[6:].lower()}>") in said.rejected_by
    assert said.strategy == "vectorize" and rejected is (op in ("ReduceMax", "ReduceMin"))
    path, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, path)
    done = cli([path, out, "--runtime", "iree"], text=True)
    if not rejected:
        assert done.returncode == 0, done.stderr
        assert "ScatterElements" in op_types(onnx.load(out))
        return
    assert done.returncode == 1 and not out.exists()
    (line,) = done.stderr.splitlines()
    assert "--runtime iree: iree runs neither Loop nor Scan" in line
    assert (
        f"not vectorized: iree compiles no ScatterElements with reduction {op[6:].lower()}" in line
    )


ALLOWZERO = """<ir_version: 8, opset_import: ["" : 14]>
g (float[A] x, int64[K] s) => (float[?] y) {
  y = Reshape <allowzero = 1> (x, s)
}"""


@pytest.mark.slow
def test_the_allowzero_adapter_reduces_no_empty_vector_in_onnxruntime_1_12(tmp_path):
    """``--target-opset 13`` writes Reshape-14's allowzero with counts and products of
    the shape and of Shape(x): for a reshape to a scalar (an empty shape) they reduce
    nothing, which onnxruntime 1.12 to 1.16 refuse unless the vector is padded."""
    release = releases.RELEASES["onnxruntime 1.12"]
    release_python(release)
    path = tmp_path / "allowzero.onnx"
    onnx.save(lowering.lower(onnx.parser.parse_model(ALLOWZERO), target_opset=13), path)
    cases = [
        ([np.array([1.5], np.float32), np.array([], np.int64)], ()),
        ([np.zeros(0, np.float32), np.array([0, 3], np.int64)], (0, 3)),
        ([np.arange(6, dtype=np.float32), np.array([2, 3], np.int64)], (2, 3)),
    ]
    results = run_many(release.column, [(path, inputs) for inputs, _ in cases])
    for (inputs, shape), result in zip(cases, results, strict=True):
        assert not isinstance(result, RuntimeFailure), result
        assert_same(result[0], inputs[0].reshape(shape))


#: Bodies whose vectorized form onnxruntime 1.12-1.31 get wrong on an empty stack.
EMPTY_STACK_BODIES = {
    "MatMul": ("float[3] e", "float[4] o", "o = MatMul (e, w)"),
    "TopK": (
        "float[3] e",
        "float[2] o",
        "k = Constant <value = int64[1] {2}> ()\n o, i = TopK (e, k)",
    ),
}
#: A reader of the map's output, and whether the original goes on past a map over
#: no element there (onnxruntime fails on the concat of an empty sequence).
EMPTY_READERS = {
    "concat": ("float[N,?] y", "y = ConcatFromSequence <axis = 0, new_axis = 1> (m)", False),
    "length": ("int64 y", "y = SequenceLength (m)", True),
    "returned": ("seq(float) y", "y = Identity (m)", True),
}


@pytest.mark.parametrize("reader", sorted(EMPTY_READERS))
@pytest.mark.parametrize("body", sorted(EMPTY_STACK_BODIES))
def test_an_empty_stack_fault_is_named_only_where_the_original_goes_on(body, reader):
    """onnxruntime 1.12-1.31 fail a vectorized MatMul or TopK on an empty stack;
    where the map's only readers are concats, the original fails there too, so
    the summary names no release and ``--runtime onnxruntime:1.12`` vectorizes."""
    element, result, node = EMPTY_STACK_BODIES[body]
    out_type, read, goes_on = EMPTY_READERS[reader]
    model = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x, float[3,4] w) => ({out_type}) {{
  s = SplitToSequence <axis = 0, keepdims = 0> (x)
  m = SequenceMap <body = b ({element}) => ({result}) {{ {node} }}> (s)
  {read}
}}""")
    _, report = lowering.lower_with_report(model)
    (said,) = report.nodes
    assert said.strategy == "vectorize", said
    named = set(said.rejected_by)
    assert (("onnxruntime:1.12-1.31", body) in named) is goes_on, named
    _, report = lowering.lower_with_report(model, runtime="onnxruntime:1.12")
    (said,) = report.nodes
    assert (said.strategy == "vectorize") is not goes_on, said


# -- the venvs: scripts/runtime_releases.py builds them, the package looks them up --


def _saved_ragged_sum(folder) -> pathlib.Path:
    source = ragged_maps.SOURCES["input_lengths_axis_0"]
    body = ragged_maps.REDUCTIONS["ReduceSum_keepdims_0_float"]
    path = folder / "in.onnx"
    onnx.save(ragged_maps.ragged_model(source, body, "concat"), path)
    return path


@pytest.mark.parametrize("module", ["lowering", "lowering.verify"])
def test_verify_in_a_release_not_built_names_the_command_that_builds_it(
    module, tmp_path, monkeypatch
):
    monkeypatch.setenv(releases.CACHE_VARIABLE, str(tmp_path / "cache"))
    path = _saved_ragged_sum(tmp_path)
    if module == "lowering":
        argv = [path, tmp_path / "out.onnx", "--verify", "--runtime", "openvino:2024.6"]
    else:
        argv = [path, path, "--runtime", "openvino:2024.6"]
    done = cli(argv, module=module, text=True)
    assert done.returncode == 2
    error = done.stderr.splitlines()[-1]
    assert error.endswith(
        "error: --runtime openvino:2024.6: openvino 2024.6 runs in a venv of its own, not "
        "built: `python scripts/runtime_releases.py build openvino:2024.6` (lowering's source "
        f"tree) builds it in {tmp_path / 'cache' / 'runtime-releases' / 'openvino-2024.6'}, "
        "a venv of Python 3.11 with openvino==2024.6.0 and an empty file 'built'"
    ), done.stderr
    assert not (tmp_path / "cache").exists(), "looked up, not built"
    with pytest.raises(releases.ReleaseNotBuilt, match="scripts/runtime_releases.py build"):
        lowering.verify.compare(path, path, runtime="openvino:2024.6")


def test_the_package_runs_no_pip():
    """No module of the package names pip or venv as a command: the script builds."""
    import ast

    package = pathlib.Path(lowering.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ("pip", "venv", "ensurepip"):
                raise AssertionError(f"{path.relative_to(package)}:{node.lineno} runs {node.value}")


def test_the_script_lists_and_refuses_an_unknown_release(tmp_path, monkeypatch, capsys):
    from scripts import runtime_releases

    monkeypatch.setenv(releases.CACHE_VARIABLE, str(tmp_path))
    assert runtime_releases.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == [
        f"{c.replace(' ', ':')}: not built ({tmp_path / 'runtime-releases' / c.replace(' ', '-')})"
        for c in releases.RELEASES
    ]
    with pytest.raises(SystemExit) as exit_:
        runtime_releases.main(["build", "openvino:2024.5"])
    assert exit_.value.code == 2
    assert "no release 'openvino:2024.5': one of onnxruntime:1.12," in capsys.readouterr().err
    assert not (tmp_path / "runtime-releases").exists()
