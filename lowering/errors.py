"""The one exception type the lowering raises for models it cannot handle.

The CLI turns it into a single line on stderr and exit code 1, so the message
must name where the problem is (node, op, graph) and what is wrong, without a
traceback.
"""

from __future__ import annotations

import onnx_ir as ir


class LoweringError(Exception):
    """A model that cannot be lowered, with the place and the reason.

    Attributes:
        reason: What is wrong, in one sentence.
        node: The offending node, when there is one.
        scope: A human description of the graph or function the node sits in.
        details: More lines, one per place, for ``-v`` (every node that
            blocks a ``--target-opset``, where the message counts them).
    """

    def __init__(
        self,
        reason: str,
        *,
        node: ir.Node | None = None,
        scope: str | None = None,
        details: list[str] | None = None,
    ):
        self.reason = reason
        self.node = node
        self.scope = scope
        self.details = list(details or [])
        super().__init__(self._format())

    def _format(self) -> str:
        if self.node is None:
            return self.reason
        where = f"node {self.node.name or '<unnamed>'!r} ({self.node.op_type})"
        if self.scope:
            where += f" in {self.scope}"
        return f"{where}: {self.reason}"


def refusal(error: BaseException) -> LoweringError | None:
    """The :class:`LoweringError` behind ``error``, however deep; None if there is none.

    ``onnx_ir``'s PassManager wraps what a pass raises in ``PassError``, once
    for the step and once for the manager, so a toolchain that composes the
    passes itself catches ``PassError`` and asks this for the refusal::

        try:
            ir.passes.PassManager([...])(model)
        except ir.passes.PassError as error:
            if (refused := lowering.refusal(error)) is None:
                raise
            print(refused)        # node 'm' (SequenceMap) in main graph 'g': ...
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, LoweringError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
