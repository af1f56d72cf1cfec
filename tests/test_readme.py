"""The README and docs/ are true: their commands run and print what they show.

Every ```console block of README.md and of docs/*.md is a transcript:
``$ `` lines are commands, the lines after one are its output (stdout and
stderr), compared exactly except for the elapsed time. Each block's
commands run in order in one fresh temporary folder holding a copy of
``examples/`` and a ``model.onnx``, as a reader typing them would (the
quick start's second command reads what its first wrote). ``pip`` lines are setup, not run. Every ```python block runs
too, in such a folder, except a block right after the line
``<!-- not run by tests/test_readme.py: REASON -->`` (the torch.onnx recipe,
which needs torch): that one is only compiled, and reported as skipped
with its REASON. Plain ``` blocks (example output, usage lines) are not run.
Relative links between the README, docs/ and the CHANGELOG must resolve,
anchors included. The claims of the README's "Why" are checked below.
"""

from __future__ import annotations

import pathlib
import re
import shlex
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from lowering.runtimes.sessions import open_session
from tests.cases.differential import CASES
from tests.helpers import cli, parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
TIME = re.compile(r"\(in \d+\.\d\d s\)")
NOT_RUN = re.compile(r"^<!-- not run by tests/test_readme\.py: (.+) -->$")


def _name(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _blocks(path: pathlib.Path, language: str) -> list[tuple[str, str | None]]:
    """(code, why it is not run or None) for every block of ``language`` in ``path``."""
    text = path.read_text()
    blocks = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = NOT_RUN.match(before)
        blocks.append((match.group(1), skip.group(1) if skip else None))
    return blocks


def _transcripts(path: pathlib.Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """(id, [(command, expected output), ...]) for every console block of ``path``."""
    found = []
    for number, (block, _) in enumerate(_blocks(path, "console"), start=1):
        pairs: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:], []))
            else:
                pairs[-1][1].append(line)
        commands = [
            (command, "\n".join(out)) for command, out in pairs if not command.startswith("pip ")
        ]
        if commands:
            found.append((f"{_name(path)}:console{number}", commands))
    return found


TRANSCRIPTS = [t for path in DOCS for t in _transcripts(path)]
PYTHON_BLOCKS = [
    (f"{_name(path)}:python{number}", code, skip)
    for path in DOCS
    for number, (code, skip) in enumerate(_blocks(path, "python"), start=1)
]


def test_the_readme_and_docs_have_examples():
    assert _transcripts(README) and any(skip is None for _, skip in _blocks(README, "python"))
    assert len(TRANSCRIPTS) >= 3 and len(PYTHON_BLOCKS) >= 5
    assert len(DOCS) > 1


@pytest.fixture
def folder(tmp_path) -> pathlib.Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "examples" / "torch_atleast_2d.onnx", tmp_path / "model.onnx")
    return tmp_path


@pytest.mark.parametrize("commands", [t[1] for t in TRANSCRIPTS], ids=[t[0] for t in TRANSCRIPTS])
def test_console_transcript(folder, commands):
    for command, expected in commands:
        _check_command(folder, command, expected)


def _check_command(folder: pathlib.Path, command: str, expected: str) -> None:
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-m"] and argv[2] in ("lowering", "lowering.verify"), (
        f"unknown command in the docs: {command}"
    )
    # In this process: what `python -m MODULE` runs, without a child's imports
    # (tests/test_cli.py runs the entry points themselves).
    result = cli(argv[3:], cwd=folder, text=True, module=argv[2])
    assert result.returncode == 0, result.stderr
    printed = (result.stdout + result.stderr).rstrip("\n")
    assert TIME.sub("(in T)", printed) == TIME.sub("(in T)", expected)


@pytest.mark.parametrize(
    "code, skip", [b[1:] for b in PYTHON_BLOCKS], ids=[b[0] for b in PYTHON_BLOCKS]
)
def test_python_block(folder, code, skip, monkeypatch):
    compile(code, "<block>", "exec")
    if skip is not None:
        pytest.skip(f"not run: {skip}")
    monkeypatch.chdir(folder)
    exec(compile(code, "<block>", "exec"), {"__name__": "__main__"})  # noqa: S102 -- the docs run as written


# --- links ---------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```$", flags=re.DOTALL | re.MULTILINE)


def _anchors(path: pathlib.Path) -> set[str]:
    """GitHub's anchors for the headings of ``path`` (a repeated slug gets -1, -2, ...)."""
    anchors: set[str] = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        if heading := re.match(r"^#{1,6} (.+)$", line):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1)).strip().lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            candidate, n = slug, 0
            while candidate in anchors:
                n += 1
                candidate = f"{slug}-{n}"
            anchors.add(candidate)
    return anchors


@pytest.mark.parametrize("path", [*DOCS, ROOT / "CHANGELOG.md"], ids=_name)
def test_relative_links_resolve(path):
    text = FENCE.sub("", path.read_text())
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{_name(path)}: {target}: no such file"
        if anchor:
            assert anchor in _anchors(linked), f"{_name(path)}: {target}: no such heading"


def test_every_doc_is_linked_from_the_readme():
    text = README.read_text()
    for path in DOCS[1:]:
        assert f"]({_name(path)}" in text, f"the README does not link {_name(path)}"


# --- the "Why" section --------------------------------------------------------------------


def test_onnx_expands_torchs_untyped_map_with_dtype_0():
    model = onnx.load(ROOT / "examples" / "torch_atleast_2d.onnx")
    node = next(n for n in model.graph.node if n.op_type == "SequenceMap")
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    schema = onnx.defs.get_schema("SequenceMap", model.opset_import[0].version)
    body = onnx.FunctionProto()
    body.ParseFromString(
        schema.get_context_dependent_function(
            node.SerializeToString(), [types[i].SerializeToString() for i in node.input]
        )
    )
    empties = [n for n in body.node if n.op_type == "SequenceEmpty"]
    assert empties and all(a.i == 0 for n in empties for a in n.attribute if a.name == "dtype")


def test_onnxruntime_runs_torchs_untyped_maps():
    data = ROOT / "tests" / "data" / "torch"
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        session = open_session(data / f"{name}.onnx")
        expected = np.load(data / f"{name}.npz")
        feeds = {i.name: expected[f"input_{k}"] for k, i in enumerate(session.get_inputs())}
        for k, output in enumerate(session.run(None, feeds)):
            np.testing.assert_array_equal(output, expected[f"output_{k}"])


def test_onnxruntime_fails_on_a_nested_map():
    with pytest.raises(Exception, match="INVALID_GRAPH.*_inlfunc_SequenceMap"):
        ort.InferenceSession(
            parse(CASES["nested_sequence_map"].text).SerializeToString(),
            providers=["CPUExecutionProvider"],
        )


# --- the README itself ----------------------------------------------------------------------


def test_the_readme_fits_two_screens_and_installs_what_its_quick_start_uses():
    import tomllib

    text = README.read_text()
    assert len(text.splitlines()) <= 150
    installs = re.findall(r"^(?:\$ )?pip install (.+)$", text, flags=re.MULTILINE)
    assert len(installs) == 1, installs  # one install line
    extras = set(re.fullmatch(r"-e '\.\[(.*)\]'", installs[0]).group(1).split(","))
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras <= set(declared["optional-dependencies"])
    commands = [c for _, block in _transcripts(README) for c, _ in block]
    if any("--verify" in c or "lowering.verify" in c for c in commands):
        assert "verify" in extras


def test_gitignore_covers_what_the_quick_start_writes(folder):
    before = {p.name for p in folder.iterdir()}
    for _, block in _transcripts(README):
        for command, expected in block:
            _check_command(folder, command, expected)
    written = {p.name for p in folder.iterdir()} - before
    assert written  # the quick start writes OUT
    ignored = set((ROOT / ".gitignore").read_text().split())
    assert {name for name in written if f"/{name}" not in ignored and name not in ignored} == set()
