"""Python's cyclic garbage collector, paused while a pass builds IR.

A pass makes many objects that live until it ends (new nodes, values and
attributes; the opset converter's per-plan sandboxes), and each collection
walks all the young survivors again, and a full one every node of the model
too: at 10,000 maps that was a third of the lowering's time, and it made
the opset conversion superlinear. What the passes drop is small (replaced
nodes; weights are shared, not copied) and reference counting still frees
what is not in a cycle, so the collector is paused for the pass and resumed
after it, as it was.

The switch is process-wide: while a pass runs, other threads' cyclic
garbage waits too, and two lowerings in threads at once may resume it while
the other still runs (which only costs that one its speed-up).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause cyclic collection inside the block; leave it as it was after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
