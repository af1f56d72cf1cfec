"""The vectorize strategy: the body applied once to all elements, no loop at all.

A SequenceMap whose body only does things that can take one more leading
axis is "vmap" in ONNX: stack the elements, run each op once on the stack,
and read the results from the stacked outputs. No Loop, no Scan, so it runs
where neither exists, and at tensor speed::

    parts = SplitToSequence<axis = a, keepdims = k>(X)             (no split)
    ys    = SequenceMap(parts, t) <body (e, u) => (y)>
    out   = ConcatFromSequence<axis = b, new_axis = 1>(ys)

becomes::

    E   = X                              a = 0, k = 0: the stack is X itself
        | Unsqueeze(X, [1])              a = 0, k = 1
        | Transpose(X, a to the front)   a != 0 (then Unsqueeze at a + 1 if k = 1)
    +---------------------------------------------------------------+
    | each body node, rewritten by its op's batching rule:           |
    |   Add(e, u)          -> Add(Unsqueeze(E, ..), u)   ranks lined |
    |   ReduceSum<axes=[0]>(e) -> ReduceSum<axes=[1]>(E)  axes + 1    |
    |   MatMul(e, W)       -> MatMul(E, W)                             |
    |   Reshape(e, s)      -> Reshape(E, [0 or -1, *s])               |
    |   Conv(e, W)         -> Unsqueeze(Conv(Squeeze(E, [1]), W), [1]) |
    |   Shape(e)           -> Slice(Shape(E), [1], [max])  (no batch) |
    |   Constant(), ops on outer values only -> moved out unchanged   |
    +---------------------------------------------------------------+
    Y   = what the body computes, with a leading batch axis: [n, *shape]
    out = Y                              b = 0 (Transpose for b != 0;
                                         Reshape for new_axis = 0)
    ys  = SplitToSequence<axis = 0, keepdims = 0>(Y)   only if still read

A sequence that is not a split, whose elements have one static shape, is
stacked with ``ConcatFromSequence<axis = 0, new_axis = 1>``; one zero element
is appended first and sliced off after, because onnxruntime's
ConcatFromSequence fails on an empty sequence. The maps of one graph that
stack the same sequence share that stack (``SharedConstants.shared``)::

    ys = SequenceMap<Neg>(xs)                 stack = Slice(ConcatFromSequence(SequenceInsert(xs, 0)))
    zs = SequenceMap<Abs>(xs)      ->         ys = SplitToSequence(Neg(stack))
                                              zs = SplitToSequence(Abs(stack))

Every body value is either *batched* (it differs from element to element
and now has the batch axis in front) or *invariant* (an outer-scope value,
an initializer, a Constant, or a deterministic op on invariant values; it is
computed once, outside). Each op has one rule (the registry ``batcher.RULES``, an
allowlist in the manner of JAX's ``primitive_batchers``) that says how to
apply it to batched operands and what the element shape of its outputs is.
An op without a rule, an operand a rule cannot take (a computed Reshape
shape, batched Gather data and indices, an element rank that is unknown),
or a subgraph stops the strategy, and the reason names the node: the map
then gets the next strategy.

The rules are written against element shapes: an element of rank r is a
batched tensor of rank r + 1. What the batcher keeps of each body value's
element shape is the one shape analysis's
(:func:`lowering.analysis.proven_shapes.proven_outputs`, from its operands'
element shapes: onnxruntime's rule for an op ONNX sizes wrong, trusted
inference otherwise), each dim it leaves unknown from the rule's, which
never decides the size of an op ONNX sizes wrong; outer values and split
tensors are read as the plan's proof has them (:attr:`MapPlan.proof`). Axes shift by one; operands broadcast against
each other are unsqueezed after the batch axis to one rank, so that
broadcasting never reaches the batch axis; a batch size of 0 works
throughout (Reshape copies the batch axis with 0 or infers it with -1,
never both with a zero-sized product). The default-domain opset decides
whether axes are attributes or inputs.

The analysis is a dry run of the same rewrite: it builds the new nodes
without inserting them and then detaches them, so a map that cannot be
vectorized is left exactly as it was. When the map is then vectorized, the
detached nodes are attached again rather than built twice.

Where things are (a new op's batching rule goes in the family its op is
of, or in a new family module listed in ``batcher.FAMILIES``):

- ``strategy``: the entry points (:class:`Vectorize`, its fit and its
  rewrite, :func:`lower_by_vectorizing`) and the readers of
  the map's outputs, which read the stacks;
- ``batcher``: the interpreter, the stacking of the inputs, the building
  blocks rules build with, and the registry merged from the families;
- ``body_values``: what a rule knows of an operand, and element-shape
  arithmetic; ``family``: how a module declares its rules;
- the rule families: ``elementwise`` (unary, broadcasting, Dropout),
  ``reductions`` (Reduce*, ArgMax, CumSum, TopK), ``shape_ops`` (Reshape,
  Flatten, Squeeze, Unsqueeze, Expand, Tile, Transpose, Concat, Split,
  Shape, Size), ``indexing`` (Gather, GatherElements, Slice, OneHot),
  ``linear_algebra`` (MatMul, Gemm, Einsum, Trilu) and ``nn`` (Conv, pools,
  normalizations, softmax, Pad).
"""

from lowering.maps.strategies.vectorize.strategy import Vectorize, vectorized_stacks

__all__ = ["Vectorize", "vectorized_stacks"]
