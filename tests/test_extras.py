"""The core runs without onnxruntime and onnxscript; each is an extra (issue 26).

Every case runs in a child Python in which ``import onnxruntime`` and
``import onnxscript`` fail, as in an image that has neither (or has
onnxruntime under another distribution's name, which changes nothing here:
only the import counts). The core lowers with every strategy, runtime and
target and never imports either; ``--verify`` and ``--optimize`` exit 2 in
one line naming the extra to install.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import pathlib
import subprocess
import sys
import textwrap

import onnx
import pytest

from lowering.defaults import RUNTIME_NAMES, STRATEGIES
from tests.helpers import parse

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Put first in the child: the modules an image without the extras lacks.
WITHOUT = """
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""

MAP = """<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[2]) s, float[2] t) => (seq(float[2]) m, seq(float[2]) y) {
  m = SequenceMap <body = b (float[2] e) => (float[2] r) { r = Neg(e) }> (s)
  p = Constant <value = int64 {-1}> ()
  y = SequenceInsert(s, t, p)
}"""


def _child(code: str, blocked: tuple[str, ...] = ("onnxruntime", "onnxscript")) -> dict:
    """Run ``code`` in a child without ``blocked``; it sets ``result``, returned as JSON."""
    script = WITHOUT.format(blocked=set(blocked)) + textwrap.dedent(code)
    script += "\nimport json\nprint(json.dumps(result))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def model_path(tmp_path) -> pathlib.Path:
    path = tmp_path / "m.onnx"
    onnx.save(parse(MAP), path)
    return path


def _outcomes(model: onnx.ModelProto) -> dict[str, str]:
    """Every strategy x runtime x target: the lowered model's bytes (hex digest), or "refused"."""
    import hashlib

    import lowering

    outcomes = {}
    for strategy in STRATEGIES:
        for runtime in RUNTIME_NAMES:
            for target in (None, 13):
                key = f"{strategy}/{runtime}/{target}"
                try:
                    lowered = lowering.lower(
                        model, strategy=strategy, runtime=runtime, target_opset=target
                    )
                except lowering.LoweringError:
                    outcomes[key] = "refused"
                    continue
                outcomes[key] = hashlib.sha256(lowered.SerializeToString()).hexdigest()
    return outcomes


def test_the_core_needs_neither(model_path, tmp_path):
    """Every strategy, every runtime, a target opset and the CLI, with neither
    installed: the same models (and refusals) as with both, and neither imported."""
    out = tmp_path / "out.onnx"
    result = _child(
        f"""
        import sys, onnx
        from lowering.cli import main
        from lowering.defaults import RUNTIME_NAMES, STRATEGIES
        {textwrap.indent(inspect.getsource(_outcomes), " " * 8).strip()}
        outcomes = _outcomes(onnx.load({str(model_path)!r}))
        code = main([{str(model_path)!r}, {str(out)!r}, "-q", "--target-opset", "11"])
        result = {{
            "outcomes": outcomes,
            "cli": code,
            "imported": sorted(m for m in sys.modules if m.split(".")[0] in
                               ("onnxruntime", "onnxscript")),
        }}
        """
    )
    with_extras = _outcomes(onnx.load(model_path))
    assert result["outcomes"] == with_extras
    assert list(with_extras.values()).count("refused") < len(with_extras) / 2
    assert result["cli"] == 0 and out.exists()
    assert result["imported"] == []


@pytest.mark.parametrize(
    ("flags", "needs"),
    [
        (["--verify"], "--verify needs onnxruntime: pip install onnxruntime (or any build of it"),
        (["--verify", "--runtime", "tract"], "--verify needs onnxruntime"),
        (
            ["--optimize"],
            "--optimize needs onnxscript: pip install onnxscript; from a checkout, pip install -e",
        ),
    ],
)
def test_an_option_without_its_extra_exits_2_naming_it(model_path, tmp_path, flags, needs):
    out = tmp_path / "out.onnx"
    command = [sys.executable, "-c", WITHOUT.format(blocked={"onnxruntime", "onnxscript"})]
    command[-1] += "import runpy; runpy.run_module('lowering', run_name='__main__')"
    done = subprocess.run(
        [*command, str(model_path), str(out), *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("onnx-lower: error: ") and needs in last, done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_onnx_verify_without_onnxruntime_exits_2(model_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT.format(blocked={"onnxruntime"})
            + "import sys; from lowering.verify import main; sys.exit(main())",
            str(model_path),
            str(model_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert "onnx-verify needs onnxruntime: pip install onnxruntime (or any build" in done.stderr
    assert "; from a checkout, pip install -e '.[verify]'" in done.stderr


def test_the_api_raises_one_error_for_a_missing_extra(model_path):
    result = _child(
        f"""
        import onnx, lowering
        from lowering import verify
        from lowering.options import MissingExtraError, OptionError
        from lowering.passes.optimize import OptimizePass
        model = onnx.load({str(model_path)!r})
        result = {{}}
        for name, call in [
            ("lower", lambda: lowering.lower(model, optimize=True)),
            ("pass", lambda: OptimizePass()),
            ("compare", lambda: verify.compare(model, model)),
        ]:
            try:
                call()
                result[name] = None
            except MissingExtraError as error:
                assert isinstance(error, OptionError) and isinstance(error, ImportError)
                result[name] = str(error)
        """
    )
    assert result["lower"].startswith("optimize=True needs onnxscript")
    assert result["pass"] == result["lower"]
    assert result["compare"].startswith("lowering.verify.compare needs onnxruntime")
    assert "pip install onnxruntime (or any build of it" in result["compare"]


def test_the_extras_are_declared():
    """``[verify]`` and ``[optimize]`` hold onnxruntime and onnxscript, ``[test]`` both,
    and the core requires neither."""
    project = (ROOT / "pyproject.toml").read_text()
    core = project.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "onnxruntime" not in core and "onnxscript" not in core
    assert 'verify = ["onnxruntime>=' in project and 'optimize = ["onnxscript>=' in project
    assert '"lowering[verify,optimize]"' in project


@pytest.mark.slow
def test_mypy_sees_the_installed_packages_types(tmp_path):
    """With the README's editable install, a user's mypy reads lowering's annotations."""
    try:
        importlib.metadata.distribution("lowering")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("lowering is not installed (the README installs it with pip install -e .)")
    user = tmp_path / "user.py"
    user.write_text(
        "import onnx\nimport lowering\n\n"
        "lowered: onnx.ModelProto = lowering.lower(onnx.ModelProto(), max_unroll=2)\n"
        "wrong: str = lowering.Options().max_unroll\n"
        "reveal_type(lowering.lower)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    # the one error is the deliberate one: mypy knows the options' types
    assert "user.py:5: error: Incompatible types in assignment" in done.stdout, done.stdout
    assert (
        "def (model: onnx_ir._core.Model, options: lowering.options.Options | None" in done.stdout
    )
    assert "'max_unroll'?: int" in done.stdout  # each option's type, from OptionValues
    assert "Found 1 error" in done.stdout and "import-not-found" not in done.stdout
