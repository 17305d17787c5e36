"""Busy processes beside a measurement: a stand-in for a slower or busier computer.

    with busy_load(2, cpus=(0, 1)):      # one busy process on each of two cores
        ...                              # time the 500 Hz command path here

Why: the numbers a desktop core gives are not the robot's. A Go2's own computer has slower
cores than a desktop or a server, and a robot's computer is never idle: the vendor's services,
a camera or lidar driver, ROS nodes and logging run beside the controller. `busy_load(n)`
models both crudely: `n` processes, each a tight arithmetic loop at normal priority (the
parent's nice value), take their share of the cores, so the process under test gets about
`1 / (k + 1)` of a core that `k` of them share with it, and the scheduler must preempt them
whenever it wakes (its wake-up lateness is then measured under contention).

The processes are started with `multiprocessing.get_context("spawn")` (a fresh interpreter:
no copy of the parent's threads, locks or DDS entities), and the block is entered once each
of them runs. They are stopped on exit, also when the block raises. Each one also watches
its parent: it exits by itself within about `PARENT_CHECK_PERIOD` [s] once the process that
started it is gone (killed, crashed), so no busy process outlives a benchmark.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterable, Iterator

PARENT_CHECK_PERIOD = 0.5  # [s] how often a busy process checks that its parent lives
START_TIMEOUT = 30.0  # [s] wait for the busy processes to run
STOP_TIMEOUT = 2.0  # [s] wait after SIGTERM before SIGKILL
_SPIN_STEPS = 20_000  # arithmetic steps between clock reads (about a millisecond)


def check_count(n) -> int:
    """`n` as a process count: an int >= 0 (bools refused), else ValueError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer (the number of busy processes), "
                         f"got {n!r}")  # fmt: skip
    return n


def spin(parent_pid: int, cpu: int | None, started) -> None:
    """A busy process's body: pin to `cpu` (None: keep the inherited CPUs), set `started`,
    then spin on integer arithmetic until the process `parent_pid` is no longer its parent."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    started.set()
    x = 1
    next_check = time.monotonic() + PARENT_CHECK_PERIOD
    while True:
        for _ in range(_SPIN_STEPS):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        if time.monotonic() >= next_check:
            if os.getppid() != parent_pid:  # orphaned: the parent died
                return
            next_check = time.monotonic() + PARENT_CHECK_PERIOD


def cpu_for(index: int, cpus: tuple | None) -> int | None:
    """The CPU of busy process `index`: `cpus` taken in turn, or None (not pinned)."""
    return None if not cpus else cpus[index % len(cpus)]


def wait_started(processes: list, events: list, timeout: float) -> None:
    """Wait until every process set its event; RuntimeError when one exited first or
    `timeout` [s] passed."""
    deadline = time.monotonic() + timeout
    for p, started in zip(processes, events):
        while not started.wait(0.05):
            if p.exitcode is not None:
                raise RuntimeError(f"busy process {p.pid} exited with {p.exitcode} at its start")
            if time.monotonic() > deadline:
                raise RuntimeError(f"busy process {p.pid} did not start within {timeout} s")


def stop(processes: list) -> None:
    """Terminate `processes` (SIGTERM, then SIGKILL after `STOP_TIMEOUT` [s]) and reap them."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(STOP_TIMEOUT)
        if p.is_alive():
            p.kill()
            p.join(STOP_TIMEOUT)


@contextlib.contextmanager
def busy_load(n: int, cpus: Iterable[int] | None = None) -> Iterator[tuple[int, ...]]:
    """`n` busy processes while the block runs (module docstring); yields their process ids.

    n: the number of processes, an int >= 0 (0: nothing is started).
    cpus: CPUs to pin them to, one each in turn (process k on `cpus[k % len(cpus)]`); None:
        not pinned, they inherit the parent's affinity (note: a parent pinned to one core
        would put them all there)."""
    n = check_count(n)
    if n == 0:
        yield ()
        return
    cpus = None if cpus is None else tuple(int(c) for c in cpus)
    ctx = multiprocessing.get_context("spawn")
    parent = os.getpid()
    processes, events = [], []
    try:
        for k in range(n):
            started = ctx.Event()
            p = ctx.Process(target=spin, args=(parent, cpu_for(k, cpus), started),
                            name=f"busy-load-{k}", daemon=True)  # fmt: skip
            p.start()
            processes.append(p)
            events.append(started)
        wait_started(processes, events, START_TIMEOUT)
        yield tuple(p.pid for p in processes)
    finally:
        stop(processes)
