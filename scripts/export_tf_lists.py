"""Export tf.map_fn and TensorArray loops with tf2onnx 1.17; commit models and outputs.

tf2onnx turns a ``tf.while_loop`` (what ``tf.map_fn`` and a TensorArray
written in a loop become) into a Loop. Elements of one shape become scan
outputs. A ``tf.map_fn`` whose ``fn_output_signature`` is a RaggedTensorSpec
writes ragged rows: tf2onnx carries a sequence from SequenceEmpty through
the Loop with a SequenceInsert per row, plus a scan output of row lengths,
and reads it by ConcatFromSequence (an accumulator loop, docs/strategies.md).
That is the only sequence tf2onnx 1.17 writes; a TensorArray's ``concat``
(TensorListConcatV2) it does not convert at all, so a list of ragged size is
exported here as the ragged ``map_fn`` and as a loop-carried ``tf.concat``.

Each model is small, a ``tf.function`` converted by
``tf2onnx.convert.from_function`` at opset 17, and saved as
``tests/data/tf/lists_<name>.onnx`` with an .npz of its inputs
(``input_i``) and TF's eager outputs (``output_i``), so that
tests/test_tf_lists.py needs no tensorflow (tf2onnx's names for folded
constants vary from run to run; the graphs do not). TensorFlow pins its own
numpy and protobuf: install it in a venv of its own, never in the project's::

    python3 -m venv /work/venv-tf
    /work/venv-tf/bin/pip install tensorflow-cpu==2.21.0 tf2onnx==1.17.0
    /work/venv-tf/bin/python scripts/export_tf_lists.py
"""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import onnx
import tensorflow as tf
import tf2onnx

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tf"
OPSET = 17
F32 = tf.float32
#: A ragged row: what makes tf.map_fn write a sequence.
ROW = tf.RaggedTensorSpec([None], F32, ragged_rank=0)
#: Ragged rows given as their values and row lengths (a RaggedTensor's parts).
RAGGED = (tf.TensorSpec([None], F32), tf.TensorSpec([None], tf.int64))
MATRIX = (tf.TensorSpec([None, None], F32),)


def _rows(values, lengths):
    return tf.RaggedTensor.from_row_lengths(values, lengths)


@tf.function
def map_ragged_rows(values, lengths):
    """``tf.map_fn`` over ragged rows, one scalar per row: scan outputs."""
    return tf.map_fn(
        lambda r: tf.reduce_sum(r * 2.0), _rows(values, lengths), fn_output_signature=F32
    )


@tf.function
def map_uniform(x):
    """``tf.map_fn`` with a uniform ``fn_output_signature``: scan outputs."""
    spec = tf.TensorSpec([None], F32)
    return tf.map_fn(lambda r: tf.nn.relu(r) * 3.0, x, fn_output_signature=spec)


@tf.function
def array_stack(x):
    """A TensorArray written in a ``tf.while_loop`` and stacked."""
    n = tf.shape(x)[0]
    array = tf.TensorArray(F32, size=n)

    def body(i, array):
        return i + 1, array.write(i, tf.sin(x[i]))

    _, array = tf.while_loop(lambda i, _: i < n, body, [0, array])
    return array.stack()


@tf.function
def array_until(h, w):
    """A growing TensorArray, written until the end token (0) or 20 steps."""
    array = tf.TensorArray(tf.int64, size=0, dynamic_size=True)

    def body(i, h, token, array):
        h = tf.tanh(tf.linalg.matvec(w, h))
        token = tf.argmax(h)
        return i + 1, h, token, array.write(i, token)

    def going(i, h, token, array):
        return tf.logical_and(i < 20, token != 0)

    start = [0, h, tf.constant(-1, tf.int64), array]
    return tf.while_loop(going, body, start)[3].stack()


@tf.function
def concat_loop(x):
    """Rows of growing length concatenated by a loop-carried ``tf.concat``."""
    n = tf.shape(x)[0]

    def body(i, acc):
        return i + 1, tf.concat([acc, x[i, : i + 1] + 1.0], 0)

    shapes = [tf.TensorShape([]), tf.TensorShape([None])]
    start = [0, tf.zeros([0], F32)]
    return tf.while_loop(lambda i, _: i < n, body, start, shape_invariants=shapes)[1]


@tf.function
def ragged_map(values, lengths):
    """Ragged rows to ragged rows; the values read back (ConcatFromSequence)."""
    out = tf.map_fn(lambda r: tf.exp(r) * 2.0, _rows(values, lengths), fn_output_signature=ROW)
    return out.flat_values


@tf.function
def ragged_map_splits(values, lengths):
    """Each row and its sum: a whole RaggedTensor out (values and row splits)."""

    def with_sum(r):
        return tf.concat([r, tf.reduce_sum(r, keepdims=True)], 0)

    out = tf.map_fn(with_sum, _rows(values, lengths), fn_output_signature=ROW)
    return out.flat_values, out.row_splits


@tf.function
def ragged_map_mask(x):
    """Rows of a matrix masked by their sign: lengths known only from the data."""
    out = tf.map_fn(lambda r: tf.boolean_mask(r, r > 0.0), x, fn_output_signature=ROW)
    return out.flat_values, out.row_lengths()


@tf.function
def ragged_map_cond(values, lengths):
    """Each row doubled or repeated as its sum's sign says: the row is an If's output."""

    def pick(r):
        return tf.cond(tf.reduce_sum(r) > 0.0, lambda: r * 2.0, lambda: tf.concat([r, r], 0))

    return tf.map_fn(pick, _rows(values, lengths), fn_output_signature=ROW).flat_values


@tf.function
def ragged_map_twice(values, lengths):
    """A ragged map of a ragged map's rows: the second loop reads the first's concat."""
    first = tf.map_fn(
        lambda r: tf.concat([r, [1.0]], 0), _rows(values, lengths), fn_output_signature=ROW
    )
    return tf.map_fn(tf.cumsum, first, fn_output_signature=ROW).flat_values


@tf.function
def ragged_map_dense(x):
    """Rows of a matrix written as ragged rows: every element has one shape."""
    return tf.map_fn(tf.sin, x, fn_output_signature=ROW).flat_values


@tf.function
def ragged_map_several(values, lengths):
    """One map, three outputs: a scalar per row and two ragged rows.

    Only their values: tf2onnx 1.17 gives each ragged output of one map the
    row lengths of another (``sums.row_lengths()`` came out as ``absolute``'s).
    """

    def parts(r):
        top = tf.reduce_max(tf.concat([r, [-1.0]], 0))
        return top, tf.abs(r), tf.cumsum(r)[1:]

    signature = (F32, ROW, ROW)
    top, absolute, sums = tf.map_fn(parts, _rows(values, lengths), fn_output_signature=signature)
    return top, absolute.flat_values, sums.flat_values


def _models() -> dict[str, tuple]:
    rng = np.random.default_rng(0)
    values = rng.standard_normal(9).astype(np.float32)
    lengths = np.array([2, 0, 3, 4], np.int64)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    h = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    ragged = (values, lengths)
    vector = (tf.TensorSpec([None], F32), tf.TensorSpec([None, None], F32))
    return {
        "map_ragged_rows": (map_ragged_rows, RAGGED, ragged),
        "map_uniform": (map_uniform, MATRIX, (x,)),
        "array_stack": (array_stack, MATRIX, (x,)),
        "array_until": (array_until, vector, (h, w)),
        "concat_loop": (concat_loop, MATRIX, (x,)),
        "ragged_map": (ragged_map, RAGGED, ragged),
        "ragged_map_splits": (ragged_map_splits, RAGGED, ragged),
        "ragged_map_mask": (ragged_map_mask, MATRIX, (x,)),
        "ragged_map_cond": (ragged_map_cond, RAGGED, ragged),
        "ragged_map_twice": (ragged_map_twice, RAGGED, ragged),
        "ragged_map_dense": (ragged_map_dense, MATRIX, (x,)),
        "ragged_map_several": (ragged_map_several, RAGGED, ragged),
    }


def _declare_ranks(model: onnx.ModelProto, outputs: tuple) -> None:
    """Declare the rank of each graph output tf2onnx left without a shape.

    tf2onnx writes no shape at all for the result of ConcatFromSequence, and
    onnx.checker refuses a main-graph output without one ("Field 'shape' of
    'type' is required but missing"). The rank is TF's; every dim is left
    unknown, so nothing but the rank is claimed.
    """
    for k, (info, value) in enumerate(zip(model.graph.output, outputs, strict=True)):
        if not info.type.tensor_type.HasField("shape"):
            dims = [f"out{k}_d{d}" for d in range(value.shape.rank)]
            typed = onnx.helper.make_tensor_type_proto(info.type.tensor_type.elem_type, dims)
            info.type.tensor_type.shape.CopyFrom(typed.tensor_type.shape)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (function, signature, inputs) in _models().items():
        model, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=OPSET)
        outputs = function(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        _declare_ranks(model, outputs)
        onnx.checker.check_model(model, full_check=True)
        path = OUT / f"lists_{name}.onnx"
        onnx.save(model, path)
        np.savez(
            OUT / f"lists_{name}.npz",
            **{f"input_{i}": a for i, a in enumerate(inputs)},
            **{f"output_{i}": t.numpy() for i, t in enumerate(outputs)},
        )
        print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
