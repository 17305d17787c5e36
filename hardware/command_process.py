"""The high-rate path in a process of its own, apart from the controller's interpreter.

    path = CommandPathProcess(serve, nu=12, kwargs={...})   # serve(link, **kwargs) -> dict
    path.start()
    run_controller(path.link, controller, control_dt=0.02,
                   running=path.is_alive)                  # the policy or MPC, here
    summary = path.join()                                  # what `serve` returned

Why: in one interpreter the 500 Hz path (read, estimate, check, write, log) and the
controller (a policy, an MPC and its JAX dispatch) share one lock, so every long controller
call or collection pass is a late tick, a stale command and a gap in the estimator's input.
Here the high-rate process runs `hardware.control_loop.run` with a `SharedCommandController`
in place of the controller: each of its calls (at the command rate) publishes the newest
accepted measurement and the operator's velocity command to shared memory
(`hardware.shared_state`) and returns the controller's newest command, once, if there is
one. The controller's process (`run_controller`) reads that state at its own rate and
writes its commands back. Neither waits for the other; a controller
that hangs or raises leaves the high-rate process running its safety layer, which holds the
last command and damps the robot after its command timeout, at the full rate.

The controller's `reset` (a compile, a first plan) runs in its own process when the
high-rate side asks (`SharedCommandController.reset` waits for it, as the in-process loop
waits for `controller.reset`).
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable

from .interface import Measurement, VelocityCommand
from .shared_state import SharedLink
from .timing import TimingStats

logger = logging.getLogger(__name__)


class ControllerResetTimeout(TimeoutError):
    """The controller's process did not finish its `reset` in time."""


class SharedCommandController:
    """The high-rate side's stand-in for a controller in another process (module docstring).

    reset_timeout: [s] the longest the controller's `reset` may take (a JAX compile).
    """

    def __init__(self, link: SharedLink, *, reset_timeout: float = 300.0):
        self.link = link
        self.reset_timeout = float(reset_timeout)
        self.taken = 0  # commands taken so far (`link.commands_sent` at the last take)

    def reset(self, measurement: Measurement) -> None:
        self.link.publish_state(measurement, 0.0)
        self.link.bump("reset_request")
        want = self.link.count("reset_request")
        deadline = time.perf_counter() + self.reset_timeout
        while self.link.count("reset_done") < want:
            if self.link.count("stop"):
                raise RuntimeError("the controller's process stopped during its reset")
            if time.perf_counter() > deadline:
                raise ControllerResetTimeout(
                    f"the controller's reset took longer than reset_timeout "
                    f"{self.reset_timeout:.0f} s"
                )
            time.sleep(0.001)
        self.taken = self.link.commands_sent

    def __call__(self, measurement: Measurement, t: float, command: VelocityCommand):
        self.link.publish_state(measurement, t, command)
        sent = self.link.commands_sent
        if sent == self.taken:
            return None
        self.taken = sent
        return self.link.command()


def run_controller(
    link: SharedLink,
    controller,
    *,
    control_dt: float,
    running: Callable[[], bool],
    on_error: Callable[[str], None] | None = None,
) -> dict:
    """Run `controller` at `control_dt` [s] on the newest shared state (measurement, loop
    time, velocity command) until `running()` is False or the link's `stop` is set; answer the
    high-rate side's reset requests. Returns `{"timing": TimingStats.summary(), "calls",
    "errors", "resets"}`. A controller exception is logged, counted and `on_error(text)`'d;
    no command goes out for that call.
    """
    if not control_dt > 0:
        raise ValueError(f"control_dt must be > 0 [s], got {control_dt!r}")
    stats = TimingStats(control_dt)
    calls = errors = resets = 0
    sequence = 0
    last_state = -1
    deadline = time.perf_counter()
    while running() and not link.count("stop"):
        if link.count("reset_request") > link.count("reset_done"):
            state = link.state()
            controller.reset(state[0])
            resets += 1
            link.bump("reset_done")
            deadline = time.perf_counter()
            continue
        delay = deadline - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        start = time.perf_counter()
        state = link.state()
        if state is not None and resets and state[0].sequence != last_state:
            m, t, velocity = state
            last_state = m.sequence
            try:
                out = controller(m, t, velocity)
            except Exception as exc:  # the high-rate side's safety layer times the command out
                errors += 1
                text = f"{type(exc).__name__}: {exc}"
                logger.error("controller error: %s", text)
                if on_error is not None:
                    on_error(text)
                out = None
            calls += 1
            if out is not None:
                sequence = max(sequence + 1, int(out.sequence))
                link.send_command(out.replace(sequence=sequence))
            stats.record(start, time.perf_counter() - start, deadline)
        deadline += control_dt
        if time.perf_counter() - deadline > control_dt:  # late: no burst to catch up
            skipped = int((time.perf_counter() - deadline) // control_dt)
            stats.missed += skipped
            deadline += skipped * control_dt
    return {"timing": stats.summary(), "calls": calls, "errors": errors, "resets": resets}


def _serve(serve, names: dict, nu: int, kwargs: dict, conn) -> None:
    """The high-rate process's entry point: `serve(link, **kwargs)`; the link's `stop` set,
    then its result (or the error) sent back through `conn`."""
    link = SharedLink.attach(names, nu)
    try:
        result = ("ok", serve(link, **kwargs))
    except BaseException as exc:  # reported to the parent, which raises it
        logger.exception("high-rate process failed")
        result = ("error", f"{type(exc).__name__}: {exc}")
    # stop first: the parent reads the result once its controller loop has ended, and a
    # large result blocks `send` until it does
    link.bump("stop")
    link.close()
    conn.send(result)


class CommandPathProcess:
    """A process running `serve(link, **kwargs) -> dict` (the high-rate path; picklable, a
    module-level function) on a fresh `SharedLink` (module docstring). Spawned, not forked: a
    fork of a process with JAX's or Cyclone's threads can deadlock."""

    def __init__(self, serve: Callable[..., dict], *, nu: int, kwargs: dict | None = None):
        self.link = SharedLink.create(nu)
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_serve, args=(serve, self.link.names, nu, dict(kwargs or {}), child),
            name="command-path", daemon=True,
        )  # fmt: skip

    def start(self) -> None:
        self.process.start()

    def is_alive(self) -> bool:
        return self.process.is_alive() and not self.link.count("stop")

    def join(self, timeout: float = 60.0) -> dict:
        """What `serve` returned. Raises RuntimeError with the child's error, or if it ended
        without a result."""
        result = None
        if self._conn.poll(timeout):
            result = self._conn.recv()
        self.process.join(timeout=5.0)
        if self.process.is_alive():
            self.process.kill()
        self.link.close()
        if result is None:
            raise RuntimeError(f"the high-rate process ended without a result "
                               f"(exit code {self.process.exitcode})")  # fmt: skip
        status, value = result
        if status != "ok":
            raise RuntimeError(f"the high-rate process failed: {value}")
        return value

    def stop(self) -> None:
        """Ask both sides to end (the high-rate side at its next check)."""
        self.link.bump("stop")
