"""`hardware.collection_pauses`: inside `collections_in_slack` no collection runs by itself;
`collect_if_due` runs the one CPython's thresholds call for, and cyclic garbage is still freed."""

import gc
import weakref

from hardware.collection_pauses import collect_if_due, collections_in_slack


class Node:
    """A container object that can sit in a reference cycle."""

    def __init__(self):
        self.other = None


def cycle() -> weakref.ref:
    """A two-node cycle, unreachable once returned; a weak reference to one of its nodes."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_no_collection_runs_by_itself_and_collect_if_due_runs_generation_zero():
    passes = []

    def record(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    was_enabled = gc.isenabled()
    gc.callbacks.append(record)
    try:
        with collections_in_slack() as collect:
            garbage = [cycle() for _ in range(5 * gc.get_threshold()[0])]  # 5 passes' worth
            assert passes == []  # none ran while the cycles were made
            assert all(ref() is not None for ref in garbage)  # uncollected cycles stay
            assert collect() == 0 and passes == [0]  # the young generation's pass, now
            assert collect() is None  # nothing due right after it
            gc.collect()
            assert all(ref() is None for ref in garbage)  # the cycles are garbage, collected
        assert gc.isenabled() == was_enabled
    finally:
        gc.callbacks.remove(record)


def test_an_older_generation_is_due_only_after_enough_younger_passes():
    gc.collect()
    with collections_in_slack():
        generations = []
        for _ in range(gc.get_threshold()[1] + 2):
            [cycle() for _ in range(gc.get_threshold()[0] + 1)]
            generations.append(collect_if_due())
        # CPython's rule: generation 1 once its count (passes of generation 0 since its last
        # pass) is past its threshold
        assert generations == [0] * (gc.get_threshold()[1] + 1) + [1]
