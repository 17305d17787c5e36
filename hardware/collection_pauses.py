"""Keep the garbage collector's full passes out of a real-time loop.

    with frozen_heap():
        while running:
            tick()                 # no generation-2 pass over the objects made before the loop

CPython's cyclic collector runs a generation-2 pass over every tracked object once enough
objects have survived younger passes. With JAX, Pinocchio and MuJoCo imported that heap holds
millions of objects, and one such pass stops every thread of the process for tens of
milliseconds: a 500 Hz command loop misses dozens of ticks, the state stream shows a gap, and
the estimator (`hardware.estimator`, its gap bound) or the watchdogs rightly fault. `gc.freeze()`
moves every object alive at the start into a permanent generation that no pass scans, so the
loop's passes walk only what the loop itself allocated. Reference counting frees everything
else as usual; cycles made inside the loop are still collected.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def freeze_survivors(collect: bool = True) -> None:
    """Collect once (`collect`: a full pass, tens of milliseconds), then move every surviving
    object into the permanent generation (after a loop's own set-up or a JAX compile, inside
    `frozen_heap`). Without the pass the freeze takes microseconds, and the garbage of the
    moment stays in memory, frozen."""
    if collect:
        gc.collect()
    gc.freeze()


@contextlib.contextmanager
def frozen_heap(collect: bool = True) -> Iterator[None]:
    """`freeze_survivors(collect)` for the block, unfreeze after it (a later full pass may
    collect them again). Nested blocks are harmless. `collect=False` where a robot is already
    connected and waits for its first command."""
    freeze_survivors(collect)
    try:
        yield
    finally:
        gc.unfreeze()
