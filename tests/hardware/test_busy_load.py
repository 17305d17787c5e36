"""`busy_load` starts processes that burn CPU, and none outlives its block, its exception or
its parent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from hardware.busy_load import busy_load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time [s] of the running process `pid` (psutil, else /proc)."""
    try:
        import psutil
    except ImportError:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def running(pid: int) -> bool:
    """`pid` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(running(p) for p in pids)


def test_the_processes_burn_cpu_and_are_gone_after_the_block():
    with busy_load(2) as pids:
        assert len(pids) == 2 and all(running(p) for p in pids)
        before = [cpu_seconds(p) for p in pids]
        time.sleep(0.3)
        grown = [cpu_seconds(p) - b for p, b in zip(pids, before)]
    # 0.3 s of wall time: each gets well over a tenth of a core even on a busy 2-core machine
    assert all(g > 0.03 for g in grown), grown
    assert not any(running(p) for p in pids)


def test_the_processes_are_gone_after_an_exception_in_the_block():
    with pytest.raises(KeyError), busy_load(1) as pids:
        assert running(pids[0])
        raise KeyError("inside")
    assert not running(pids[0])


def test_pinned_processes_run_on_their_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    with busy_load(2, cpus=cpus) as pids:
        assert [os.sched_getaffinity(p) for p in pids] == [{cpus[0]}, {cpus[1 % len(cpus)]}]


def test_zero_is_nothing():
    with busy_load(0) as pids:
        assert pids == ()


@pytest.mark.parametrize("n", [-1, 1.5, "2", True, None])
def test_a_bad_count_is_refused(n):
    with pytest.raises(ValueError, match="n must be a non-negative integer"), busy_load(n):
        pass


def test_the_processes_exit_when_their_parent_dies():
    script = textwrap.dedent("""
        import os, signal
        from hardware.busy_load import busy_load
        with busy_load(1) as pids:
            print(pids[0], flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # no clean-up runs
    """)
    parent = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=30)  # fmt: skip
    child = int(parent.stdout.split()[0])
    assert wait_gone([child], timeout=3.0), f"busy process {child} outlived its parent"
