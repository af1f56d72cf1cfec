"""Version pairs relabelled as they are: the same operator apart from types.

A pair (op, old, new) lists two consecutive schema versions that have the
same inputs, outputs and attributes with the same defaults, and differ only
in the types they take; going either way, a node is relabelled only when its
actual types are taken by the other version. The pairs are data
(``allowlist.json``), written by ``scripts/opset_allowlist.py`` from onnx.defs
and reviewed against ONNX's operator changelog.
"""

from __future__ import annotations

import json
from importlib import resources

_DATA = json.loads(resources.files(__package__).joinpath("allowlist.json").read_text())

#: (op, old since_version, new since_version) -> what differs.
RELABEL: dict[tuple[str, int, int], str] = {
    (op, old, new): reason for op, old, new, reason in _DATA["relabel"]
}
