"""Long fuzzing runs of the property in tests/test_fuzz.py.

    python scripts/fuzz.py --examples 5000 [--seed S]

Generates random SequenceMap models (tests/fuzz_models.py), lowers each
with every strategy, and checks the output against the numpy oracle and
onnxruntime on the original. Prints how many examples ran and, on a
failure, hypothesis's shrunk example (make it a regression test in
tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tests.fuzz_models import fuzz_models
from tests.test_fuzz import check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
        seen[model.source] += 1
        seen["steps"] += len(model.steps)
        check(model)

    start = time.perf_counter()
    try:
        property_()
    except Exception as error:  # noqa: BLE001 -- report, then fail
        print(
            f"FAILED after {sum(seen[s] for s in ('input', 'construct', 'split'))} examples: {error}"
        )
        return 1
    examples = sum(seen[s] for s in ("input", "construct", "split"))
    print(
        f"{examples} examples passed in {time.perf_counter() - start:.0f} s "
        f"(sources: {seen['input']} graph inputs, {seen['construct']} SequenceConstruct, "
        f"{seen['split']} SplitToSequence; {seen['steps']} body ops), 0 failures"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
