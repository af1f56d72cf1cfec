"""Python's cyclic garbage collector, paused while the command line lowers a model.

Building IR makes many objects that live until the run ends (new nodes,
values and attributes; the opset converter's per-plan sandboxes), and each
collection walks all the young survivors again, and a full one every node of
the model too: at 10,000 maps that was a third of the lowering's time, and
it made the opset conversion superlinear. The switch is process-wide, so
only the command line, which owns its process, pauses it; the passes never
do (a caller of the Python API with a model that large can pause it around
the call, as docs/performance.md shows).
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
