"""Long fuzzing runs: random models, every strategy, failures counted by family.

    python scripts/fuzz.py --examples 20000 [--seed S] [--features all|none|F1,F2|-F1,-F2]
                           [--generator structure|ops] [--save DIR [--only REGEX]
                           [--shrink N] [--shrink-seconds T]]
    python scripts/fuzz.py --replay DIR/<family>.onnx

``--generator structure`` (the default) draws whole models with
tests/fuzz_models.py's ``structured_models``: maps at any depth inside If,
Loop and Scan bodies, functions and other maps; names from a small pool;
every dtype; static and dynamic lengths; SequenceInsert positions.
``--features`` picks which structural features are on (see ``FEATURES``
there): a comma list, or "all" minus a comma list of "-F". Each example is
lowered with every strategy (and ``target_opset``, ``optimize``, ``runtime``
where the example asks; a map of edge ops, issue 21, also with
``target_opset=11``) and checked (tests/fuzz_check.py) against a numpy/Python
oracle, and lowered once more with onnx_ir's objects hashed in another order,
which must give the same bytes. An example that itself fails ONNX's full checker is the
generator's failure ("invalid original (generator)") and is not lowered:
the lowering of an invalid model proves nothing. A failure does not stop
the run: it is counted by its signature (stage, strategy, message with
names and numbers removed). Lowerings that are not failures but were not
judged either (a ``target_opset`` the model cannot declare, a ``runtime``
that runs it in no form, a run no onnxruntime computes faithfully) are
counted on lines "not a failure, ...". The last line is
``N examples, K failures`` (K: failing examples); the exit code is 1 when K > 0.

``--save DIR`` then shrinks one example of each family (hypothesis ``find``,
at most ``--shrink`` examples and ``--shrink-seconds`` each; ``--only``
restricts it to the signatures matching REGEX) and writes DIR/<family>.onnx,
DIR/<family>.txt (feeds, strategy, error, notes, expected values, the
model as text) and DIR/<family>.pkl (feeds, expected values and their
fewest-roundings bound, options: what
``tests.fuzz_check.check_one`` needs to run it again); for an example that
went through ``onnx.shape_inference.infer_shapes`` (feature ``inferred``),
DIR/<family>.original.onnx is the model before it (what onnxruntime runs as
the original), and a failure that model does not have is a family of its
own, "(only after infer_shapes)". ``--replay DIR/<family>.onnx`` runs the
check that failed again and prints the failure (exit 1) or that it passes.
``--generator ops`` runs the older body-op property of tests/test_fuzz.py
instead.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import pathlib
import pickle
import random
import re
import sys
import time

import onnxruntime as ort
from hypothesis import HealthCheck, find, given, seed, settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tests.fuzz_check import (
    SKIPPED,
    FuzzFailure,
    after_inference_only,
    check_deterministic,
    check_one,
    check_original,
    check_valid,
    option_sets,
)
from tests.fuzz_models import fuzz_models, parse_features, structured_models


def failures_of(example) -> list[FuzzFailure]:
    """Every way ``example`` fails, one per strategy (the run does not stop).

    A lowering refused as allowed (a ``target_opset`` the model cannot
    declare, a ``runtime`` that cannot run it) or that no onnxruntime run can
    judge is no failure; tests/fuzz_check.py's ``SKIPPED`` counts them, and
    the run prints how often each option set was not judged.
    """
    try:
        check_valid(example)
    except FuzzFailure as failure:  # the generator's bug: nothing to lower
        return [failure]
    found = []
    try:
        check_original(example)
    except FuzzFailure as failure:
        found.append(failure)
    for options in option_sets(example):
        try:
            result = check_one(example, options)
            if result is not None:
                check_deterministic(example, options, result)
        except FuzzFailure as failure:
            found.append(after_inference_only(example, failure))
    return found


def check_again(example, kind: str, options: dict) -> None:
    """Run the check that failed with ``kind`` on ``example`` (raises its FuzzFailure)."""
    check_valid(example)
    if kind.startswith("oracle"):
        check_original(example)
    elif not kind.startswith("invalid original"):
        try:
            result = check_one(example, options)
            if result is not None and kind.startswith("nondeterministic"):
                check_deterministic(example, options, result)
        except FuzzFailure as failure:
            raise after_inference_only(example, failure) from None


def slug(signature: str) -> str:
    words = "".join(c if c.isalnum() else "-" for c in signature.lower()).split("-")
    short = "-".join(w for w in words if w)[:60]
    return f"{short}-{hashlib.sha1(signature.encode()).hexdigest()[:6]}"


def describe(example, failure: FuzzFailure) -> str:
    lines = [
        f"family signature: {failure.signature}",
        f"stage: {failure.kind}",
        f"options: lowering.lower(model, **{failure.options!r})",
        f"features: {', '.join(sorted(example.features))}",
        "what the example contains:",
        *(f"  - {n}" for n in example.notes),
        "",
        "error:",
        str(failure),
        "",
        "feeds:",
        *(f"  {k} = {v!r}" for k, v in example.feeds.items()),
        "",
        "expected (oracle):",
        f"  {example.expected!r}",
        "",
        "model:",
        example.text,
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--features", default="all")
    parser.add_argument("--generator", choices=["structure", "ops"], default="structure")
    parser.add_argument("--save", type=pathlib.Path)
    parser.add_argument("--only", help="with --save: only the families whose signature matches")
    parser.add_argument("--shrink", type=int, default=2000, help="examples to look through")
    parser.add_argument("--shrink-seconds", type=float, default=240, help="per family")
    parser.add_argument(
        "--replay", type=pathlib.Path, help="check DIR/<family>.onnx that --save wrote, again"
    )
    args = parser.parse_args()
    ort.set_default_logger_severity(4)
    if args.replay:
        return replay(args.replay)
    if args.generator == "ops":
        return run_ops(args)
    try:
        features = parse_features(args.features)
    except ValueError as error:
        parser.error(str(error))
    families: collections.Counter[str] = collections.Counter()
    first: dict[str, tuple] = {}
    stats = collections.Counter()

    @seed(args.seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(structured_models(features))
    def explore(example):
        stats["examples"] += 1
        found = failures_of(example)
        if found:
            stats["failing"] += 1
        for failure in found:
            families[failure.signature] += 1
            first.setdefault(failure.signature, (example, failure))

    start = time.perf_counter()
    explore()
    print(f"features: {','.join(sorted(features))}")
    for signature, count in families.most_common():
        print(f"{count:6d}  {signature}")
    for why, count in SKIPPED.most_common():
        print(f"{count:6d}  not a failure, {why}")
    if args.save and families:
        args.save.mkdir(parents=True, exist_ok=True)
        saved = set()
        for signature in families:
            family = signature.split("] ", 1)[-1]  # the same failure under another strategy
            if (first[signature][1].kind, family) in saved:
                continue
            if args.only and not re.search(args.only, signature):
                continue
            saved.add((first[signature][1].kind, family))
            save_family(args, features, signature, *first[signature])
    print(
        f"{stats['examples']} examples, {stats['failing']} failures "
        f"({len(families)} families) in {time.perf_counter() - start:.0f} s"
    )
    return 1 if stats["failing"] else 0


def save_family(args, features, signature: str, example, failure: FuzzFailure) -> None:
    """Shrink an example of ``signature`` and write it to args.save."""
    options = failure.options

    deadline = time.monotonic() + args.shrink_seconds
    smallest = [example]

    def same_family(candidate) -> bool:
        if time.monotonic() > deadline:  # out of time: keep the smallest found so far
            return False
        try:
            check_again(candidate, failure.kind, options)  # a shrunk example stays valid too
        except FuzzFailure as other:
            if other.signature != signature:
                return False
            if len(candidate.text) < len(smallest[0].text):
                smallest[0] = candidate
            return True
        except Exception:  # noqa: BLE001 -- a rejected example is not this family
            return False
        return False

    if "target_opset" not in options:
        try:
            find(
                structured_models(features),
                same_family,
                settings=settings(
                    max_examples=args.shrink,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                ),
                random=random.Random(args.seed),
            )
        except Exception:  # noqa: BLE001, S110 -- not found, or out of time (flaky): keep the smallest
            pass
    example = smallest[0]
    failure = _failure_of(example, options, failure)
    name = slug(signature)
    import onnx

    onnx.save(example.model, args.save / f"{name}.onnx")
    original = getattr(example, "original", None)
    if original is not None:  # the model before infer_shapes: what onnxruntime runs
        onnx.save(original, args.save / f"{name}.original.onnx")
    (args.save / f"{name}.txt").write_text(describe(example, failure) + "\n")
    # What it takes to run it again (--replay): tests.fuzz_check.check_one(example, options).
    again = {
        "feeds": example.feeds,
        "expected": example.expected,
        "options": failure.options,
        "kind": failure.kind,
        "exact": getattr(example, "exact", False),
        "disagrees": getattr(example, "disagrees", False),
        "fewest": getattr(example, "fewest", None),
        "refusable": getattr(example, "refusable", False),
        "judge_plans": getattr(example, "judge_plans", False),
    }
    with open(args.save / f"{name}.pkl", "wb") as file:
        pickle.dump(again, file)
    print(f"saved {args.save / name}.onnx")


def replay(path: pathlib.Path) -> int:
    """Check a model --save wrote again (PATH.onnx, with PATH.pkl beside it)."""
    import types

    import onnx

    with open(path.with_suffix(".pkl"), "rb") as file:
        again = pickle.load(file)
    original = path.with_suffix(".original.onnx")
    example = types.SimpleNamespace(
        model=onnx.load(path),
        original=onnx.load(original) if original.exists() else None,
        **{k: v for k, v in again.items() if k not in ("options", "kind")},
    )
    kind = again.get("kind", "")
    try:
        check_again(example, kind, again["options"])
    except FuzzFailure as failure:
        print(failure.signature)
        print(failure)
        return 1
    print(f"passes: {path} with {again['options'] or 'defaults'} ({kind or 'any stage'})")
    return 0


def _failure_of(example, options, fallback: FuzzFailure) -> FuzzFailure:
    try:
        check_again(example, fallback.kind, options)
    except FuzzFailure as failure:
        return failure
    return fallback


def run_ops(args) -> int:
    """The body-op property of tests/test_fuzz.py, for long runs."""
    from tests.test_fuzz import check

    seen: collections.Counter[str] = collections.Counter()

    @seed(args.seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzz_models())
    def property_(model):
        seen["examples"] += 1
        check(model)

    try:
        property_()
    except Exception as error:  # noqa: BLE001 -- report, then fail
        print(f"FAILED: {error}")
        print(f"{seen['examples']} examples, 1 failures")
        return 1
    print(f"{seen['examples']} examples, 0 failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
