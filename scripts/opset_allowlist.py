"""Regenerate lowering/opset/allowlist.json: the version pairs relabelled as they are.

A pair (op, old, new) of consecutive default-domain schema versions is a
candidate when both schemas have the same inputs, outputs and attributes
(names, optionality, attribute types, defaults, required) and differ only in
the types each formal parameter takes. Every candidate was then read against
ONNX's operator changelog and the doc diff of the two versions (printed with
``--docs``); the pairs below in ``_NOT_TYPE_ONLY`` changed meaning without
changing their signature, or changed their documentation in a way that was not
clearly editorial, and are left to adapters or blocked.

    python scripts/opset_allowlist.py [--docs]
"""

from __future__ import annotations

import difflib
import itertools
import json
import pathlib
import sys

import onnx
import onnx.defs

from lowering.opset.schemas import formal_types

FIRST = 11
OUT = pathlib.Path(__file__).resolve().parent.parent / "lowering" / "opset" / "allowlist.json"

# Same signature, other meaning (or meaning not shown to be the same): never relabelled.
_NOT_TYPE_ONLY = {
    ("Pad", 18, 19): "Pad-19 adds mode 'wrap' (adapter: any other mode)",
    ("Resize", 18, 19): "Resize-19 adds coordinate mode 'half_pixel_symmetric' (adapter)",
    ("ScatterElements", 16, 18): "ScatterElements-18 adds reduction max/min (adapter)",
    ("ScatterND", 16, 18): "ScatterND-18 adds reduction max/min (adapter)",
    ("Mod", 13, 28): "Mod-28 rewrites the fmod=0 semantics for floating point; not reviewed",
    ("DepthToSpace", 13, 28): "DepthToSpace-28 changes no type; what it changes is not in the docs",
    ("SpaceToDepth", 13, 28): "SpaceToDepth-28 changes no type; what it changes is not in the docs",
    ("NegativeLogLikelihoodLoss", 12, 13): "no type added; doc rewritten; not reviewed",
    ("Max", 8, 12): "Max-12 adds integers; an adapter keeps floats and rewrites integers",
    ("Min", 8, 12): "Min-12 adds integers; an adapter keeps floats and rewrites integers",
    ("Clip", 11, 12): "Clip-12 adds integers; an adapter keeps floats and rewrites integers",
    ("OptionalHasElement", 15, 18): "OptionalHasElement-18 takes tensors and sequences too",
}


def attributes(s) -> dict:
    out = {}
    for name, a in s.attributes.items():
        default = onnx.helper.get_attribute_value(a.default_value) if a.default_value.name else None
        out[name] = (a.type, a.required, repr(default))
    return out


def type_only(a, b) -> tuple[list[str], list[str]] | None:
    """(added, removed) types if ``a`` and ``b`` differ only in types, else None."""
    fa, fb = formal_types(a), formal_types(b)
    if [(n, o) for n, o, _ in fa] != [(n, o) for n, o, _ in fb]:
        return None
    if attributes(a) != attributes(b) or len(a.inputs) != len(b.inputs):
        return None
    if (a.min_input, a.max_input, a.min_output, a.max_output) != (
        b.min_input,
        b.max_input,
        b.min_output,
        b.max_output,
    ):
        return None
    added = sorted(set().union(*(tb - ta for (_, _, ta), (_, _, tb) in zip(fa, fb))))
    removed = sorted(set().union(*(ta - tb for (_, _, ta), (_, _, tb) in zip(fa, fb))))
    return added, removed


def schema(op: str, version: int):
    try:
        return onnx.defs.get_schema(op, version, "")
    except onnx.defs.SchemaError:
        return None


def pairs(last: int):
    ops = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""})
    for op in ops:
        versions = sorted({s.since_version for v in range(FIRST, last + 1) if (s := schema(op, v))})
        for old, new in itertools.pairwise(versions):
            yield op, schema(op, old), schema(op, new)


def main() -> None:
    last = onnx.defs.onnx_opset_version()
    lines = []
    for op, a, b in pairs(last):
        key = (op, a.since_version, b.since_version)
        diff = type_only(a, b)
        if diff is None or key in _NOT_TYPE_ONLY or not (diff[0] or diff[1]):
            continue
        added, removed = diff
        reason = f"{op}-{key[2]} vs {op}-{key[1]}: same signature"
        reason += (
            f"; adds {', '.join(t.removeprefix('tensor(')[:-1] if t.startswith('tensor(') else t for t in added)}"
            if added
            else ""
        )
        reason += f"; drops {', '.join(removed)}" if removed else ""
        lines.append(f"  {json.dumps([*key, reason])}")
        if "--docs" in sys.argv and a.doc != b.doc:
            print(key)
            print(
                "\n".join(
                    difflib.unified_diff(
                        (a.doc or "").splitlines(), (b.doc or "").splitlines(), lineterm="", n=0
                    )
                )
            )
    OUT.write_text(
        '{\n "opsets": '
        + json.dumps([FIRST, last])
        + ',\n "relabel": [\n'
        + ",\n".join(lines)
        + "\n ]\n}\n"
    )
    print(f"{len(lines)} pairs written to {OUT}")


if __name__ == "__main__":
    main()
