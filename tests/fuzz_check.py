"""The property every structured fuzz example must have, and how failures are told apart.

Each example (:func:`tests.fuzz_models.structured_models`) must itself pass
``onnx.checker.check_model(full_check=True)``, with feeds of the types its
graph inputs declare (:func:`check_valid`). It is lowered with every
strategy ("auto", "loop", and auto with ``max_unroll=0``) and, where the
example asks, with ``target_opset``, ``optimize``, ``runtime`` and the option
sets in its ``also`` (an example with edge ops: ``target_opset=11`` too; see
:func:`option_sets`). Each output must pass
``onnx.checker.check_model(full_check=True)``, hold no SequenceMap, define
no name in a function that the main graph defines too, run in onnxruntime
and equal the numpy/Python oracle. An example with edge ops (``exact``)
runs in onnxruntime without its graph optimizer, which folds Shape from
ONNX's shape inference (one window too many for MaxPool with ceil_mode and
an end pad). Any exception from the lowering is a failure, except a
``target_opset`` that the model genuinely cannot declare, a ``runtime``
named as running the model in no form, and (``refusable``: the opset 7-10
models of issue 33, issue 34's lists the graph returns) any refusal on one line; those, the
runs no onnxruntime can judge (in examples of issue 33's sites, only where
onnxruntime does not run the tool's input right either: ``judge_plans``)
and, where a check fails on values, the
float outputs whose value the rounding decides, not the lowering
(:func:`unjudged_outputs`: every value rounded, or float16 and float32
computed as float64, lie past the tolerance apart; their dtype and shape
are still checked) are counted in :data:`SKIPPED`. A
:class:`FuzzFailure` carries a ``signature``: the stage, the options and the
message with names and numbers taken out, so that long runs can count
distinct failure families.
"""

from __future__ import annotations

import collections
import re
from types import SimpleNamespace

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

import lowering
from lowering.runtimes.profiles import LOOP_OPS, RUNTIMES
from lowering.runtimes.sessions import open_session
from lowering.verify import NARROW_FLOATS
from tests.helpers import (
    all_graphs,
    all_nodes,
    assert_close,
    names_functions_share_with_the_main_graph,
    op_types,
    salted_hashes,
)

STRATEGIES = [{}, {"strategy": "loop"}, {"max_unroll": 0}]


class FuzzFailure(AssertionError):
    """A lowering that failed the property: ``kind`` says at which stage."""

    def __init__(self, kind: str, options: dict, message: str):
        self.kind, self.options, self.message = kind, options, message
        super().__init__(f"{kind} with {options or 'defaults'}: {message}")

    @property
    def signature(self) -> str:
        # The first line that says something (numpy's messages start with "\n").
        text = next((line for line in self.message.splitlines() if line.strip()), "")
        if "Inference error(s)" in text:  # nested per subgraph: the innermost says what
            text = "shape inference: " + text.rsplit("(op_type:", 1)[-1]
        running = re.findall(r"returned while running (\w+) node", text)
        if running:  # onnxruntime's nested kernels: the chain of ops, then the innermost
            inner = text.rsplit("Status Message: ", 1)[-1]
            inner = re.sub(r"^/\S+:\d+ [^\[]*", "", inner)  # the source line and function
            text = f"onnxruntime in {' > '.join(running)}: {inner}"
        text = re.sub(r"'[^']*'", "'_'", text)
        # Where the node sits is detail: the same mechanism fails at every depth.
        text = re.sub(r"node '_' \((\w+)\) in [^:]*:", r"node (\1):", text)
        text = re.sub(r"first in .*", "", text)
        text = re.sub(r'"[^"]*"', '"_"', text)
        text = re.sub(r"\d+", "N", text)
        text = re.sub(r"\{N(,N)*\}", "{N..}", text)  # a shape, of any rank
        # The target opset is part of the family: each has its own relabels and adapters.
        strategy = ",".join(
            f"{k}={v}" if k == "target_opset" else k for k, v in sorted(self.options.items())
        )
        strategy = strategy or "auto"
        return f"{self.kind} [{strategy}] {text[:160]}"


def check_structured(example, strategies=None) -> None:
    """Raise :class:`FuzzFailure` unless every lowering of ``example`` is right."""
    check_valid(example)
    for options in option_sets(example, strategies):
        check_one(example, options)


def option_sets(example, strategies=None) -> list[dict]:
    """The options ``example`` is lowered with: each strategy, then what it asks for."""
    runs = list(strategies if strategies is not None else STRATEGIES)
    if example.target_opset is not None:
        runs.append({"target_opset": example.target_opset})
    if getattr(example, "optimize", False):
        runs.append({"optimize": True})
    if getattr(example, "runtime", None) is not None:
        runs.append({"runtime": example.runtime})
    runs += [dict(options) for options in getattr(example, "also", ())]
    return runs


def check_valid(example) -> None:
    """The original passes the full checker: a generator bug otherwise.

    An invalid original is a failure of its own, not a rejected draw: the
    lowering of a model that ONNX rejects proves nothing, and a rejection
    would hide the generator bug (and, in long runs, count the lowering's
    garbage out as a lowering family).
    """
    try:
        onnx.checker.check_model(example.model, full_check=True)
    except Exception as error:
        raise FuzzFailure("invalid original (generator)", {}, str(error)) from error
    wrong = feeds_against_declared(example.model, example.feeds)
    if wrong:
        raise FuzzFailure("invalid original (generator)", {}, wrong)


def feeds_against_declared(model: onnx.ModelProto, feeds: dict) -> str:
    """What is wrong with ``feeds`` for the graph inputs' declared types ("" if nothing)."""
    for value in model.graph.input:
        if value.name not in feeds:
            return f"no feed for graph input {value.name!r}"
        feed, type_ = feeds[value.name], value.type
        if type_.HasField("sequence_type"):
            if not isinstance(feed, list):
                return f"graph input {value.name!r} is a sequence, its feed is not"
            type_, elements = type_.sequence_type.elem_type, feed
        else:
            elements = [feed]
        tensor = type_.tensor_type
        for element in map(np.asarray, elements):
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            if element.dtype != dtype and not (dtype == np.object_ and element.dtype.kind in "OU"):
                return f"feed {value.name!r} is {element.dtype}, declared {dtype}"
            if not tensor.HasField("shape"):
                continue
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
            if len(dims) != element.ndim or any(
                d is not None and d != n for d, n in zip(dims, element.shape)
            ):
                return f"feed {value.name!r} has shape {list(element.shape)}, declared {dims}"
    return ""


# Lowerings not judged, by why: refused as allowed, or run by no faithful onnxruntime.
SKIPPED: collections.Counter[str] = collections.Counter()


def _lowered(model: onnx.ModelProto, options: dict) -> tuple[onnx.ModelProto, list]:
    """``lowering.lower(model, **options)`` and its rewrites; with ``optimize``, an
    optimized model the ONNX checker refused (kept unoptimized, lowering.api) is a
    failure too: that last line of defence must not hide a family from the fuzzer."""
    working = onnx.ModelProto()
    working.CopyFrom(model)
    ir_model = ir.serde.deserialize_model(working)
    result = lowering.pipeline(**options)(ir_model)
    if result.not_optimized is not None:
        raise FuzzFailure("optimized model refused", options, result.not_optimized)
    return ir.serde.serialize_model(ir_model), result.rewrites


def check_one(example, options: dict) -> onnx.ModelProto | None:
    """The lowered model, or None where it is not judged (counted in :data:`SKIPPED`)."""
    shown = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    try:
        result, rewrites = _lowered(example.model, options)
    except lowering.LoweringError as error:
        if "target_opset" in options and "cannot declare opset" in str(error):
            SKIPPED[f"refused (cannot declare the opset): {shown}"] += 1
            return None
        if "runtime" in options and f"--runtime {options['runtime']}: " in str(error):
            why = _reason(str(error).split(f"--runtime {options['runtime']}: ", 1)[1])
            SKIPPED[f"refused (the runtime runs it in no form): {shown}: {why}"] += 1
            return None  # a map that runtime can run in no form, refused with the reason
        if getattr(example, "refusable", False) and "\n" not in str(error).strip():
            # An opset 7-10 model whose initializers may be fed, a list the graph
            # returns (tests/fuzz_accumulators.py): refusing it is allowed.
            SKIPPED[f"refused (refusable): {shown}: {_reason(str(error))}"] += 1
            return None
        raise FuzzFailure("lowering error", options, str(error)) from error
    except FuzzFailure:
        raise
    except Exception as error:
        root = error
        while root.__cause__ is not None:  # onnx_ir's PassError wraps the real one
            root = root.__cause__
        raise FuzzFailure("internal error", options, f"{type(root).__name__}: {root}") from error
    if "SequenceMap" in op_types(result):
        raise FuzzFailure("SequenceMap left", options, "")
    try:
        onnx.checker.check_model(result, full_check=True)
    except Exception as error:
        raise FuzzFailure("invalid output", options, str(error)) from error
    shared = names_functions_share_with_the_main_graph(result)
    if shared:
        raise FuzzFailure("function name in the main graph", options, f"{sorted(shared)}")
    if any("not guarded against no element" in rewrite.reason for rewrite in rewrites):
        # For tract, in a graph with an If: onnxruntime fails on (or, along an axis
        # other than 0, dies of) the Scan when its split is empty; tract runs it.
        SKIPPED[f"unjudged (a bare Scan for tract, in a graph with an If): {shown}"] += 1
        return None
    exact = getattr(example, "exact", False)
    try:
        actual = run(result, example.feeds, exact)
    except Exception as error:
        if exact and _plans_from_onnx(example, error) and not _input_runs(example):
            SKIPPED[f"unjudged (onnxruntime plans from ONNX's wrong shape): {shown}"] += 1
            return None
        raise FuzzFailure("onnxruntime fails on the output", options, str(error)) from error
    try:
        unjudged = assert_outputs(actual, example)
    except AssertionError as error:
        raise FuzzFailure("wrong result", options, str(error)) from error
    if unjudged:
        why = "a float output whose oracles (every rounding, the fewest) differ past the tolerance"
        SKIPPED[f"unjudged ({why}): {shown}"] += unjudged
    check_positions(result, example.feeds, options, optimize=not exact)
    if "runtime" in options:
        # The loop kind is what --runtime picks; sequence ops the model reads
        # itself (a graph-input sequence, an insert) stay whatever it picks.
        lacks = RUNTIMES[options["runtime"]].lacks & set(LOOP_OPS)
        added = (set(op_types(result)) & lacks) - set(op_types(example.model))
        if added:
            raise FuzzFailure(
                "op the runtime lacks", options, f"the output has {', '.join(sorted(added))}"
            )
    return result


def check_deterministic(example, options: dict, result: onnx.ModelProto) -> None:
    """Lowered again with onnx_ir's objects hashed in another order, ``example``
    gives ``result`` byte for byte (tests/test_determinism.py says why)."""
    with salted_hashes(1):
        again, _ = _lowered(example.model, options)
    if again.SerializeToString(deterministic=True) != result.SerializeToString(deterministic=True):
        raise FuzzFailure("nondeterministic output", options, "other hash orders, other bytes")


def _reason(message: str) -> str:
    """The first clause of a refusal's reason, names and numbers taken out (a
    count of refusals by kind)."""
    text = re.sub(r"'[^']*'", "_", message.split(";", 1)[0])
    return re.sub(r"\d+", "N", text)[:100]


def check_positions(
    result: onnx.ModelProto, feeds: dict, options: dict, optimize: bool = True
) -> None:
    """Every SequenceInsert position left in the main graph is in [0, n) ([0, n] below opset 13).

    The canonical form promises a position in [0, n) or none, so that every
    runtime agrees (``onnx.reference`` reads p == n as the front). The
    positions and lengths are read by running a copy of the output with
    them as extra graph outputs.
    """
    probe = onnx.ModelProto()
    probe.CopyFrom(result)
    pairs = []
    for k, node in enumerate(list(probe.graph.node)):
        if node.op_type != "SequenceInsert" or len(node.input) < 3 or not node.input[2]:
            continue
        length = f"fuzz_probe_length_{k}"
        probe.graph.node.append(onnx.helper.make_node("SequenceLength", [node.input[0]], [length]))
        for name in (node.input[2], length):
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
        pairs.append((node.name or node.output[0], len(probe.graph.output) - 2))
    if not pairs:
        return
    try:
        values = session(probe, optimize=optimize).run(None, feeds)
    except Exception:  # noqa: BLE001 -- the probe itself is not the property
        return
    # Below opset 13 an If returns no sequence, so a run-time position equal to
    # the length stays n (docs/sequence-insert.md): onnxruntime appends there;
    # so for a runtime without If; one without SequenceLength may have a
    # position left as written (the summary says so).
    opset = {o.domain: o.version for o in result.opset_import}.get("", 13)
    runtime = RUNTIMES[options.get("runtime", "onnxruntime")]
    if runtime.missing({"SequenceLength"}):
        return
    stays = opset < 13 or bool(runtime.missing({"If"}))
    for name, index in pairs:
        p, n = int(np.asarray(values[index]).reshape(-1)[0]), int(values[index + 1])
        if not 0 <= p < n and not (p == n and stays):
            what = "equal to" if p == n else "negative for" if p < 0 else "beyond"
            raise FuzzFailure(
                "non-canonical SequenceInsert position",
                options,
                f"position {what} the length: SequenceInsert {name!r} has position {p} for a "
                f"sequence of length {n}; the canonical form is [0, n) or no position",
            )


def session(model: onnx.ModelProto, optimize: bool = True) -> ort.InferenceSession:
    """``optimize=False``: onnxruntime computes every Shape (its optimizer folds
    Shape from ONNX's shape inference, wrong for some pooling)."""
    # failures are reported, not logged
    return open_session(model.SerializeToString(), optimize=optimize, log_severity=4)


def run(model: onnx.ModelProto, feeds: dict, exact: bool = False) -> list:
    """``model``'s outputs in onnxruntime; ``exact``: without its graph optimizer."""
    return session(model, optimize=not exact).run(None, feeds)


def _plans_from_onnx(example, error: Exception) -> bool:
    """Whether onnxruntime, without its optimizer, fails only because it plans
    its buffers from ONNX's shape inference where that disagrees with its own
    kernel ("Shape mismatch attempting to re-use buffer", an output OrtValue
    "has shape .. but the computed output shape for this run is .."; a Scan's output
    "Mismatch between expected shape and shape from first output"), in an example whose
    generator saw them disagree (``Squeeze`` with empty axes: ONNX keeps the
    unit dims, the kernel drops them; MaxPool with ceil_mode; in a Loop body
    where the element shape is static).

    Then no onnxruntime run is faithful (its optimizer folds Shape from the
    same inference), and the lowering is not judged.
    """
    planned = (
        "attempting to re-use buffer",
        "but the computed output shape for this run is",
        "Mismatch between expected shape and shape from first output",
    )
    return getattr(example, "disagrees", False) and any(p in str(error) for p in planned)


def _input_runs(example) -> bool:
    """Whether onnxruntime, without its optimizer, runs the model the tool was
    handed and gets the oracle's results, in an example of issue 33's sites
    (``judge_plans``): then a faithful run exists, and an output onnxruntime
    plans wrong is the lowering's failure (a Scan whose body ONNX sizes from
    the static dims of what it scans), not one no run could judge."""
    if not getattr(example, "judge_plans", False):
        return False
    try:
        assert_outputs(run(example.model, example.feeds, exact=True), example)
    except Exception:  # noqa: BLE001 -- not run faithfully either: the output is not judged
        return False
    return True


def from_float16(feeds: dict) -> bool:
    """Whether any input holds float16, so float outputs may carry float16 rounding.

    onnxruntime's CPU provider runs many float16 ops in float32 (it casts
    around them), so ``Cast<to=float>(Add(a, b))`` on float16 gives a value
    float16 cannot hold, where numpy rounds to float16: the original and
    every lowered form alike differ from the oracle by a float16 step.
    """

    def holds(value) -> bool:
        if isinstance(value, list):
            return any(holds(v) for v in value)
        return np.asarray(value).dtype == np.float16

    return any(holds(value) for value in feeds.values())


def unjudged_outputs(example) -> set[int]:
    """The float outputs whose two oracles differ by more than the tolerance.

    ``expected`` rounds every value between ops, each op in its own dtype;
    ``fewest`` (tests/fuzz_models.py: ``fewest_roundings``) computes float16
    and float32 as float64 and rounds only at the outputs. onnxruntime
    computes in between: its CPU provider runs float16 ops that have no
    float16 kernel in float32, removes the casts between neighbouring such
    ops (InsertCastTransformer) and moves single float16 nodes to float32 by
    their neighbours (ForceSingleNodeCPUFloat16ToFloat32), so how often it
    rounds depends on the graph around a chain; and a float32 kernel is one
    rounding of the function, not the truth, so a lowering that computes it
    by another form (LayerNormalization's function body, at
    ``target_opset=16``) rounds elsewhere. Where the two ends lie further
    apart than the tolerance (an ill-conditioned chain: a LayerNormalization
    of values of small variance, scaled), the rounding decides the value, not
    the lowering. Exact (integer, bool, string) outputs are always judged.
    """
    fewest = getattr(example, "fewest", None)
    if fewest is None:
        return set()
    float16 = from_float16(example.feeds)
    found = set()
    for i, (low, high) in enumerate(zip(example.expected, fewest, strict=True)):
        leaf = low
        while isinstance(leaf, list) and leaf:
            leaf = leaf[0]
        if isinstance(leaf, list) or not np.issubdtype(np.asarray(leaf).dtype, np.floating):
            continue
        try:
            assert_equal(high, low, float16=float16)
        except AssertionError:
            found.add(i)
    return found


def assert_outputs(actual: list, example) -> int:
    """``actual`` against ``example.expected`` (:func:`assert_equal`); where that
    fails, again with only the dtype and shape of the outputs
    :func:`unjudged_outputs` names; how many those are (0 if all passed).

    The second oracle is read only then: ``example.fewest`` may be computed on
    demand (tests/fuzz_models.py: ``StructuredModel.fewest``), and a check that
    passes with every value judged needs none."""
    expected, float16 = example.expected, from_float16(example.feeds)
    assert len(actual) == len(expected), f"output: length {len(actual)} != {len(expected)}"
    try:
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_equal(a, e, f"output[{i}]", float16)
        return 0
    except AssertionError:
        unjudged = unjudged_outputs(example)
        if not unjudged:
            raise
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_equal(a, e, f"output[{i}]", float16, values=i not in unjudged)
    return len(unjudged)


def assert_equal(
    actual, expected, path: str = "output", float16: bool = False, values: bool = True
) -> None:
    """Sequences element by element; the same dtype, shape and values.

    ``float16``: float outputs carry float16 rounding (see :func:`from_float16`) and
    are compared as float16 values are (:func:`tests.helpers.assert_close`).
    ``values=False``: the dtype and shape only.
    """
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: a sequence expected, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_equal(a, e, f"{path}[{i}]", float16, values)
        return
    if isinstance(actual, list) and len(actual) == len(expected):
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_equal(a, e, f"{path}[{i}]", float16, values)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    if not values:
        return
    if np.issubdtype(expected.dtype, np.floating) or expected.dtype.name in NARROW_FLOATS:
        assert_close(actual, expected, path, np.dtype(np.float16) if float16 else None)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=path)


def after_inference_only(example, failure: FuzzFailure) -> FuzzFailure:
    """``failure`` with " (only after infer_shapes)" added to its stage where the
    example went through ``onnx.shape_inference.infer_shapes`` (feature
    "inferred") and the same lowering of the model before it passes: the tool
    read what the value_info declares. Its own family, then."""
    original = getattr(example, "original", None)
    if original is None or failure.kind.startswith(("oracle", "invalid original")):
        return failure
    fewest = getattr(example, "fewest", None)  # (computed when read)
    plain = SimpleNamespace(
        **{**vars(example), "model": original, "original": None, "fewest": fewest}
    )
    counted = SKIPPED.copy()
    try:
        check_one(plain, failure.options)
    except FuzzFailure:
        return failure
    finally:
        SKIPPED.clear()
        SKIPPED.update(counted)
    return FuzzFailure(
        f"{failure.kind} (only after infer_shapes)", failure.options, failure.message
    )


def check_original(example) -> None:
    """onnxruntime on the original, where it runs, agrees with the oracle
    (a check of the generator and its oracle, not of the lowering).

    It runs the original with every shadowing name made unique
    (:func:`unshadowed`, which does not change what the model computes):
    onnxruntime misreads shadowed names in nested maps. The original is the
    model before ``onnx.shape_inference.infer_shapes`` where the example went
    through it (feature "inferred"): the tool is handed the inferred one.
    """
    original = getattr(example, "original", None)
    model = example.model if original is None else original
    try:
        actual = run(unshadowed(model), example.feeds, getattr(example, "exact", False))
    except Exception:  # noqa: BLE001 -- onnxruntime cannot run some valid SequenceMap models
        return
    try:
        assert_outputs(actual, example)
    except AssertionError as error:
        raise FuzzFailure("oracle disagrees with onnxruntime on the original", {}, str(error))


def unshadowed(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` where no subgraph declares a name that a graph
    enclosing it declares; each such name is renamed within its scope.

    ONNX lets a subgraph input shadow an outer name, but onnxruntime (1.32)
    runs SequenceMap by inlining its schema function, and the copies of
    nested maps share one name prefix (``_inlfunc_SequenceMap_``): an inner
    body's ``x`` that shadows an outer map body's ``x`` is read as the outer
    one, under an If or a Loop in the body too, depending on unrelated parts
    of the model (seeds 20261207 and 20261208). Renaming does not change the
    model's meaning, so onnxruntime's run of the copy is a fair check of the
    oracle. The main graph's and the functions' own names are kept.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    taken = _all_names(model)
    counter = iter(range(1, 1 << 30))

    def fresh(name: str) -> str:
        while True:
            candidate = f"{name}__{next(counter)}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate

    def rename(graph: onnx.GraphProto, outer: dict[str, str]) -> None:
        scope = dict(outer)
        own: set[str] = set()

        def declare(name: str) -> str:
            if name and name not in own:
                own.add(name)
                scope[name] = fresh(name) if name in outer else name
            return scope.get(name, name)

        for value in graph.input:
            value.name = declare(value.name)
        for tensor in graph.initializer:
            tensor.name = declare(tensor.name)
        for sparse in graph.sparse_initializer:
            sparse.values.name = declare(sparse.values.name)
        walk(graph.node, scope, declare)
        for value in [*graph.output, *graph.value_info]:
            value.name = scope.get(value.name, value.name)

    def walk(nodes, scope: dict[str, str], declare) -> None:
        for node in nodes:
            node.input[:] = [scope.get(name, name) for name in node.input]
            for attribute in node.attribute:
                for graph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                    rename(graph, scope)
            node.output[:] = [declare(name) for name in node.output]

    rename(model.graph, {})
    for function in model.functions:  # a body of its own: its names are kept
        scope = {name: name for name in function.input}
        walk(function.node, scope, lambda name, scope=scope: scope.setdefault(name, name))
    return model


def _all_names(model: onnx.ModelProto) -> set[str]:
    names = {n for node in all_nodes(model) for n in (*node.input, *node.output)}
    for graph in all_graphs(model, in_functions=True):
        names.update(v.name for v in [*graph.input, *graph.output, *graph.value_info])
        names.update(t.name for t in graph.initializer)
    for function in model.functions:
        names.update([*function.input, *function.output])
    return names
