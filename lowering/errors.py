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
    """

    def __init__(self, reason: str, *, node: ir.Node | None = None, scope: str | None = None):
        self.reason = reason
        self.node = node
        self.scope = scope
        super().__init__(self._format())

    def _format(self) -> str:
        if self.node is None:
            return self.reason
        where = f"node {self.node.name or '<unnamed>'!r} ({self.node.op_type})"
        if self.scope:
            where += f" in {self.scope}"
        return f"{where}: {self.reason}"
