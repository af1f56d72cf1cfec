"""Narrow-float outputs read as floats: what onnxruntime loads, and how each output is read.

onnxruntime's Python API (1.20 to 1.32) returns float8e4m3fn only as raw
bytes, and bfloat16 and the other float8 types not at all. Each output that
holds one (a tensor, an optional, a sequence's elements) is read back in
its ml_dtypes type, exactly, and compared in its ulps (-0.0 equal to +0.0,
NaN only against NaN):

    tensor y    copy: y -> Cast(to=float) -> y_as_float32   --astype-->  narrow type
    optional    run_with_ort_values: the OrtValue's bytes     --view-->    narrow type
                (a run with a sequence input: run, raw bytes  --view-->    narrow type)

An optional cannot be cast (no ONNX op takes apart an optional of a narrow
float: OptionalGetElement and OptionalHasElement take none). A run that
reads OrtValues takes no sequence or string input (onnxruntime's Python API
makes no OrtValue of them): with one, the run reads arrays, and an optional that
onnxruntime returns no array of, when present, fails it (a run A fails,
listed with onnxruntime's reason). A narrow-float sequence is never longer
than 0 in onnxruntime (no op builds one, and its Python API feeds none), so
nothing in it is read. The copy is made in memory: a model file with
external data is opened with onnxruntime told the folder of its data
(nothing is written, and the file is not changed).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import onnx

from lowering.verify.dtypes import ML_FLOATS
from lowering.verify.ports import ModelLike

#: The ml_dtypes type of each narrow float's ONNX type.
_ONNX_TO_ML: dict[int, type] = {int(onnx_type): ml for ml, onnx_type in ML_FLOATS.items()}


@dataclasses.dataclass
class Reading:
    """How to open and read one model: ``model`` is what onnxruntime loads (the
    file, or a copy in memory), ``folder`` the folder of the file's external
    data when the copy is loaded from memory, ``types`` the outputs read as an
    ml_dtypes type (by position), and ``ort_values`` whether runs read
    OrtValues (a bfloat16 optional output)."""

    model: ModelLike
    folder: str | None = None
    types: dict[int, type] = dataclasses.field(default_factory=dict)
    ort_values: bool = False


def _narrow_type(type_proto: onnx.TypeProto) -> tuple[str, int] | None:
    """("tensor" | "optional" | "sequence", elem_type) of an output holding a narrow float."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        elem = type_proto.tensor_type.elem_type
        return ("tensor", elem) if elem in _ONNX_TO_ML else None
    if which in ("optional_type", "sequence_type"):
        inner = getattr(type_proto, which).elem_type
        found = _narrow_type(inner)
        if found is None:
            return None
        return ("optional" if which == "optional_type" and found[0] == "tensor" else "sequence",
                found[1])  # fmt: skip
    return None


def reading(model: ModelLike, proto: onnx.ModelProto) -> Reading:
    """How onnxruntime opens ``model`` (read as ``proto``) and reads its narrow floats."""
    found = {i: _narrow_type(info.type) for i, info in enumerate(proto.graph.output)}
    narrow = {i: kind for i, kind in found.items() if kind is not None}
    types = {i: _ONNX_TO_ML[elem] for i, (_, elem) in narrow.items()}
    if any(kind == "optional" for kind, _ in narrow.values()):
        return Reading(model, types=types, ort_values=True)
    cast = [i for i, (kind, _) in narrow.items() if kind == "tensor"]
    if not cast:
        return Reading(model, types=types)
    folder = None
    if not isinstance(model, onnx.ModelProto):
        folder = os.path.dirname(os.path.abspath(os.fspath(model)))
    return Reading(_cast_copy(proto, cast), folder, types)


def _cast_copy(model: onnx.ModelProto, positions: list[int]) -> onnx.ModelProto:
    """A copy of ``model`` whose outputs at ``positions`` are cast to float32 (exact)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    taken = _names(copy.graph)
    for index in positions:
        info = copy.graph.output[index]
        wide = info.name + "_as_float32"
        while wide in taken:
            wide += "_"
        taken.add(wide)
        copy.graph.node.append(
            onnx.helper.make_node("Cast", [info.name], [wide], to=onnx.TensorProto.FLOAT)
        )
        replacement = onnx.ValueInfoProto(name=wide)
        replacement.type.CopyFrom(info.type)
        replacement.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        info.CopyFrom(replacement)
    return copy


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every value name of ``graph`` and its subgraphs (a new name must shadow none)."""
    names = {i.name for i in [*graph.input, *graph.output, *graph.initializer]}
    for node in graph.node:
        names.update([*node.input, *node.output])
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                names |= _names(sub)
    return names


def read_back(results: list | None, types: dict[int, type]) -> list | None:
    """The outputs with each narrow one in its ml_dtypes type (exact)."""
    if results is None or not types:
        return results
    return [_as(value, types[i]) if i in types else value for i, value in enumerate(results)]


def _as(value, ml_type: type):
    if value is None:
        return None
    if isinstance(value, list):
        return [_as(element, ml_type) for element in value]
    array = np.asarray(value)
    if array.dtype == ml_type:
        return array
    if array.dtype.kind == "u" and array.dtype.itemsize == np.dtype(ml_type).itemsize:
        return array.view(ml_type)  # raw bytes
    return array.astype(ml_type)  # float32 from the Cast: exact


#: The raw form of each narrow float an OrtValue holds, by its type's name.
_RAW = {"tensor(bfloat16)": np.uint16, "tensor(float8e4m3fnuz)": np.uint8,
        "tensor(float8e5m2fnuz)": np.uint8, "tensor(float8e4m3fn)": np.uint8,
        "tensor(float8e5m2)": np.uint8}  # fmt: skip


def ort_value_array(value) -> np.ndarray | None:
    """An output OrtValue as numpy: None when absent, a narrow float's bytes as uints."""
    import ctypes

    if not value.has_value():
        return None
    if not value.is_tensor():
        raise TypeError(f"cannot read an output of type {value.data_type()} as an OrtValue")
    raw_type = _RAW.get(value.data_type())
    if raw_type is None:
        return value.numpy()
    shape = tuple(value.shape())
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return np.zeros(shape, raw_type)
    raw = ctypes.string_at(value.data_ptr(), size * np.dtype(raw_type).itemsize)
    return np.frombuffer(raw, raw_type).reshape(shape).copy()
