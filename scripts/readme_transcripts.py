"""Rewrite the console transcripts of the README and docs/ with what the commands print today.

tests/test_readme.py runs every ``$ python -m lowering ...`` line of every
```console block and compares the output exactly (times aside). After a
change to the summary or the verifier's table, run this and review the diff:

    python scripts/readme_transcripts.py
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```console\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def run(command: str, folder: pathlib.Path) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = shlex.split(command)
    result = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return (result.stdout + result.stderr).rstrip("\n")


def refresh(block: str, folder: pathlib.Path) -> str:
    lines: list[str] = []
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue
        lines.append(line)
        command = line[2:]
        if command.startswith("python -m lowering"):
            lines += run(command, folder).splitlines()
    return "\n".join(lines) + "\n"


def main() -> None:
    """The README's and every docs/*.md file's transcripts."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        with tempfile.TemporaryDirectory() as tmp:
            folder = pathlib.Path(tmp)
            shutil.copytree(ROOT / "examples", folder / "examples")
            shutil.copy(ROOT / "examples" / "torch_atleast_2d.onnx", folder / "model.onnx")
            text = BLOCK.sub(
                lambda m, f=folder: "```console\n" + refresh(m.group(1), f) + "```", text
            )
        page.write_text(text)


if __name__ == "__main__":
    main()
