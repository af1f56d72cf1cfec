"""Write lowering/runtimes/ort_kernels.json from the installed onnxruntime's kernel registry.

The lowering must not emit an op on a dtype that onnxruntime has no CPU
kernel for (its SplitToSequence, for one, takes 7 of the 14 element types
that its sequences hold). The table is committed, so that what the pass
emits does not depend on the onnxruntime installed beside it; a test checks
it against the installed onnxruntime. Run after upgrading onnxruntime:

    python scripts/ort_kernel_table.py
"""

from __future__ import annotations

import json
import pathlib

import onnx.defs
import onnxruntime
import onnxruntime.capi.onnxruntime_pybind11_state as ort_c

from lowering.irutils.op_facts import is_onnx_domain
from lowering.runtimes.ort_kernels import data_constraint

# One copy of which input's types count: lowering.runtimes.ort_kernels reads nodes by it.
#: Every default-domain op that has a data input at some opset.
OPS = sorted(
    {
        s.name
        for s in onnx.defs.get_all_schemas_with_history()
        if is_onnx_domain(s.domain) and data_constraint(s.name, s.since_version)
    }
)


def element_type(type_string: str) -> str | None:
    """'tensor(float)', 'seq(tensor(float))', 'optional(tensor(float))' -> 'float'; else None."""
    for prefix in ("seq(tensor(", "tensor(", "optional(tensor(", "optional(seq(tensor("):
        if type_string.startswith(prefix):
            return type_string[len(prefix) :].rstrip(")")
    return None


def table() -> dict[str, list[tuple[int, int, list[str]]]]:
    ranges: dict[str, dict[tuple[int, int], set[str]]] = {op: {} for op in OPS}
    for kernel in ort_c.get_all_opkernel_def():
        if kernel.domain not in ("", "ai.onnx") or kernel.provider != "CPUExecutionProvider":
            continue
        if kernel.op_name not in OPS:
            continue
        # The constraint's name is the schema's at the kernel's first opset
        # (Identity's input is T up to 13, V from 14).
        constraint = data_constraint(kernel.op_name, kernel.version_range[0])
        types = kernel.type_constraints.get(constraint, []) if constraint else []
        found = ranges[kernel.op_name].setdefault(tuple(kernel.version_range), set())
        found.update(t for t in map(element_type, types) if t)
    return {
        op: [(since, until, sorted(types)) for (since, until), types in sorted(spans.items())]
        for op, spans in ranges.items()
    }


def render() -> str:
    """One op per line, so that a regenerated table diffs by op."""
    rows = [f"  {json.dumps(op)}: {json.dumps(spans)}" for op, spans in table().items()]
    return (
        '{\n "onnxruntime": '
        + json.dumps(onnxruntime.__version__)
        + ',\n "kernels": {\n'
        + ",\n".join(rows)
        + "\n }\n}\n"
    )


if __name__ == "__main__":
    target = pathlib.Path(__file__).parent.parent / "lowering" / "runtimes" / "ort_kernels.json"
    target.write_text(render())
    print(f"wrote {target}")
