"""The mutation list of scripts/mutation_check.py matches the source it mutates.

Every mutant names an exact snippet of a file under lowering/; once the file
changes, the snippet may be gone or repeated, and the mutant would then test
nothing. These checks fail first, naming the entry to re-read
(docs/testing.md, "Mutation checks").
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


@functools.cache
def _script():
    path = ROOT / "scripts" / "mutation_check.py"
    spec = importlib.util.spec_from_file_location("mutation_check_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_every_snippet_occurs_once_and_every_mutant_parses():
    assert _script().problems(ROOT) == []


def test_every_main_mechanism_has_mutants():
    """Issue 36 asks for each strategy, the evaluator, the adapters and the insert
    normalization; the accumulator loops and the shape proof are listed too."""
    script = _script()
    covered = {m.mechanism for m in script.MUTANTS}
    assert covered == set(script.MECHANISMS)
    files = {m.path for m in script.MUTANTS}
    strategies = ["vectorize/batcher.py", "unroll.py", "scan.py", "scan_outputs.py", "loop.py"]
    for strategy in strategies:
        assert "lowering/maps/strategies/" + strategy in files, strategy
    for needed in [
        "lowering/irutils/static_values.py",
        "lowering/irutils/static_fold.py",
        "lowering/opset/plan.py",
        "lowering/passes/normalize_inserts.py",
        "lowering/irutils/positions.py",
        "lowering/analysis/proven_shapes.py",
        "lowering/irutils/computed_shapes.py",
    ]:
        assert needed in files, needed
    assert any(f.startswith("lowering/opset/adapters/") for f in files)
    assert any(f.startswith("lowering/loops/") for f in files)


def test_a_moved_snippet_is_reported(tmp_path):
    """The check itself: a file where a snippet is gone, or repeated, is named."""
    script = _script()
    mutant = script.MUTANTS[0]
    source = (ROOT / mutant.path).read_text()
    for text, count in [(source.replace(mutant.find, ""), 0), (source + mutant.find, 2)]:
        copy = tmp_path / mutant.path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
        found = [p for p in script.problems(tmp_path) if p.startswith(mutant.name + " ")]
        where = f"{mutant.name} ({mutant.path})"
        assert found == [f"{where}: the snippet occurs {count} times, not once: {mutant.find!r}"]
