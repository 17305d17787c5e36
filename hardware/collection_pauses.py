"""Keep the garbage collector's passes out of a real-time loop's ticks.

    with frozen_heap(), collections_in_slack() as collect_if_due:
        while running:
            tick()                 # no generation-2 pass over the objects made before the loop
            collect_if_due()       # the young generations' passes here, after the tick's work

CPython's cyclic collector runs a generation-2 pass over every tracked object once enough
objects have survived younger passes. With JAX, Pinocchio and MuJoCo imported that heap holds
millions of objects, and one such pass stops every thread of the process for tens of
milliseconds: a 500 Hz command loop misses dozens of ticks, the state stream shows a gap, and
the estimator (`hardware.estimator`, its gap bound) or the watchdogs rightly fault. `gc.freeze()`
moves every object alive at the start into a permanent generation that no pass scans, so the
loop's passes walk only what the loop itself allocated. Reference counting frees everything
else as usual; cycles made inside the loop are still collected.

The young generations' passes are short (tens of microseconds) but frequent: one every 700
allocations of container objects, in whichever thread makes the 700th, so a few ticks in ten
pay one in the middle of their work. `collections_in_slack` turns the automatic collection off
for the block and yields `collect_if_due()`, which runs the pass CPython would have run
(`gc.collect(generation)`, by CPython's counts and thresholds, `gc.get_count()` and
`gc.get_threshold()`) when the loop calls it: after a tick's work, in the time before the next
tick.
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


def collect_if_due() -> int | None:
    """Run the collection CPython's thresholds call for now, the oldest generation whose count
    is past its threshold, each older one only once the younger ones are
    (`gc.collect(generation)`); returns that generation, or None when none is due. CPython
    also holds generation 2 back until its survivors have grown by a quarter: that wait is
    left out (after `freeze_survivors` the pass walks only the loop's own survivors)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    due = None
    for generation in range(3):
        if thresholds[generation] and counts[generation] > thresholds[generation]:
            due = generation
        else:
            break  # an older generation is only due once the younger one is
    if due is not None:
        gc.collect(due)
    return due


@contextlib.contextmanager
def collections_in_slack() -> Iterator:
    """No automatic collection in the block; yields `collect_if_due` for the loop to call
    where a pause costs nothing (module docstring). The collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield collect_if_due
    finally:
        if enabled:
            gc.enable()
