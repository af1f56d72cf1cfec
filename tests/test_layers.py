"""The layout is the pipeline: no module imports from a layer above its own.

    irutils, errors, rewrites,  (IR utilities, shared by all;
    defaults, extras, progress   the options' names, the optional
                                 packages and the progress callback,
                                 importing nothing)
    analysis, runtimes, options (read-only facts; the options and their checks)
    maps, loops, opset,         (what the passes write)
    sequences
    passes                      (one pass per module)
    pipeline, api, cli, ...     (entry points)

Imports inside functions count too: a cycle hidden in a function body is
still a cycle.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "lowering"
LAYERS = {
    "irutils": 0,
    "errors": 0,
    "rewrites": 0,
    "defaults": 0,
    "extras": 0,
    "progress": 0,
    "analysis": 1,
    "runtimes": 1,
    "options": 1,
    "maps": 2,
    "loops": 2,
    "opset": 2,
    "sequences": 2,
    "passes": 3,
}
TOP = 4  # everything else: the entry points


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def _imports(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "lowering":
                found += [f"lowering.{alias.name}" for alias in node.names]
            elif node.module.startswith("lowering."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("lowering.")]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_imports_from_a_layer_above(path):
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    upward = [m for m in _imports(path) if _layer(m) > _layer(module)]
    assert not upward, f"{module} (layer {_layer(module)}) imports {upward}"


def test_maps_and_opset_do_not_import_each_other():
    for path in MODULES:
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for other, theirs in (("maps", "opset"), ("opset", "maps")):
            if module.startswith(f"lowering.{other}."):
                assert not [m for m in _imports(path) if m.startswith(f"lowering.{theirs}")], module


def test_every_folder_is_a_package_the_wheel_ships():
    for folder in [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]:
        assert (folder / "__init__.py").exists(), folder


def test_no_module_shares_a_name_with_what_the_package_exports():
    """``import lowering.X`` makes the module the package's attribute ``X``: a module
    named like an exported function (``lowering.pipeline``) would hide it."""
    import lowering

    modules = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    functions = {name for name in lowering.__all__ if callable(getattr(lowering, name))}
    classes = {name for name in functions if isinstance(getattr(lowering, name), type)}
    assert not (functions - classes) & modules
