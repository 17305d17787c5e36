"""The control loop: a controller at its rate, the safety layer and `write` at the command rate,
the joint PD at the robot's own rate.

    result = run(robot, controller, SafetyLayer(robot.joint_map), duration=3.0,
                 control_dt=0.02, command_dt=0.002)

Three rates: the controller (`control_dt`, e.g. 50 Hz for a policy or MPC), the command loop
(`command_dt`, e.g. 500 Hz: read, safety checks, write; between controller calls the safety
layer re-sends the latest command, rate-limited and checked against the newest measurement,
so its watchdogs act at this rate), and the drivers' PD on the robot (its physics step in
simulation, kHz on hardware), which holds the last command between writes.

Two clocks:
- simulated time (the robot has `advance`, i.e. `SimulatedRobot`): each tick reads, runs the
  controller on its ticks, writes, then advances the robot by `command_dt`. Deterministic and as
  fast as the computer allows; the robot waits for the controller, so a slow controller shows up
  as overruns in the timing statistics (ticks whose work exceeded their period), not as delay.
- wall-clock time (any other robot, e.g. `backends.udp.UdpRobot`): the command loop sleeps until
  each deadline; the controller runs in its own thread at its period on the newest accepted
  measurement, so a slow or hung controller never blocks the command loop (its safety layer
  then times the controller out and damps the robot). Late ticks are counted as jitter, skipped
  deadlines as missed ticks.

Start-up: wait for a first valid measurement (`start_timeout`), `controller.reset(m)` (compile
there), `safety.start(now, m)` (soft start). Controller exceptions are caught, logged as a
`controller_error` safety event and treated as "no command".
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .collection_pauses import collections_in_slack, freeze_survivors, frozen_heap
from .interface import Controller, Measurement, RobotInterface, VelocityCommand
from .queued_logging import queued_logging
from .safety import SafetyLayer
from .timing import TimingStats


@dataclass
class LoopResult:
    """What a run recorded.

    log: per command tick: `t` [s] robot time since start, `stamp` [s] the newest
        measurement's timestamp (robot clock), `joint_q`, `joint_qd` (ticks, nu) of that
        measurement (NaN before any), `base_position` (ticks, 3) (NaN if not measured),
        `q_target`, `kp`, `kd`, `tau_ff` (ticks, nu) as written, `mode` (safety mode names),
        `robot_mode` (as measured), `accepted` (measurement accepted this tick).
    timing: {"command": TimingStats.summary(), "controller": ...}.
    safety: the SafetyLayer (events, counters, final mode).
    controller_calls, controller_errors: counts.
    """

    log: dict
    timing: dict
    safety: SafetyLayer
    controller_calls: int = 0
    controller_errors: int = 0
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """What every deployment example reports: the measured base height (min, and the mean
        over the last tenth of the finite samples: settled) [m], the peak joint speed as a
        fraction of the joint's velocity limit (`max_j,t |qd_j| / velocity_limit_j`; the safety
        layer damps above `SafetyConfig.velocity_factor`, 1.5 by default; NaN before any
        measurement; NaN heights without any base position), the safety layer's final mode and
        events, and the timing statistics."""
        z = self.log["base_position"][:, 2]
        z = z[np.isfinite(z)]
        speed = np.abs(self.log["joint_qd"]) / self.safety.joint_map.velocity_limit
        return {
            "settled_base_height_m": float(np.mean(z[-max(1, len(z) // 10) :]))
            if len(z) else float("nan"),
            "min_base_height_m": float(np.min(z)) if len(z) else float("nan"),
            "peak_joint_speed_fraction": (
                float(np.nanmax(speed)) if np.any(np.isfinite(speed)) else float("nan")
            ),
            "safety_mode": self.safety.mode.value,
            "safety_events": [
                {"kind": e.kind, "start": e.start, "count": e.count, "detail": e.detail}
                for e in self.safety.events
            ],
            "timing": self.timing,
        }


def save_run(folder: str, name: str, log: dict, summary: dict) -> str:
    """Save a run as `folder/name.npz` (the loop log's numeric arrays; the `mode` names are
    left out) and `folder/name.json` (the summary; NumPy scalars as floats). Returns the stem."""
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, name)
    np.savez(stem + ".npz", **{k: v for k, v in log.items() if v.dtype != object})
    with open(stem + ".json", "w") as f:
        json.dump(summary, f, indent=2, default=float)
    print(f"results saved to {os.path.abspath(stem)}.npz (+ .json)")
    return stem


class _Recorder:
    def __init__(self, nu: int):
        self.nu = nu
        self.rows: dict = {k: [] for k in _LOG_KEYS}
        self._nan_j, self._nan3 = np.full(nu, np.nan), np.full(3, np.nan)  # shared, read only

    def add(self, t, m: Measurement | None, accepted, out, mode) -> None:
        nan_j, nan3 = self._nan_j, self._nan3
        r = self.rows
        r["t"].append(t)
        r["stamp"].append(np.nan if m is None else m.timestamp)
        r["joint_q"].append(nan_j if m is None else m.joint_q)
        r["joint_qd"].append(nan_j if m is None else m.joint_qd)
        has_base = m is not None and m.base_position is not None
        r["base_position"].append(m.base_position if has_base else nan3)
        r["robot_mode"].append(-1 if m is None else int(m.robot_mode))
        r["accepted"].append(bool(accepted))
        for k in ("q_target", "kp", "kd", "tau_ff"):
            r[k].append(getattr(out, k))
        r["mode"].append(mode.value)

    def arrays(self) -> dict:
        return {k: np.array(v) for k, v in self.rows.items()}


_LOG_KEYS = (
    "t",
    "stamp",
    "joint_q",
    "joint_qd",
    "base_position",
    "robot_mode",
    "accepted",
    "q_target",
    "kp",
    "kd",
    "tau_ff",
    "mode",
)


def average_speed(log: dict, after: float) -> float:
    """Average forward speed [m/s] of a loop log: world x displacement of the measured base
    over the time from `after` [s] to the end (NaN with fewer than two samples)."""
    t, pos = log["t"], log["base_position"]
    keep = t >= after
    if keep.sum() < 2:
        return float("nan")
    return float((pos[-1, 0] - pos[keep][0, 0]) / (t[-1] - t[keep][0]))


def wait_for_measurement(robot: RobotInterface, timeout: float, poll: float = 0.001):
    """The first measurement `robot.read()` returns within `timeout` [s] of wall time."""
    deadline = time.perf_counter() + timeout
    while True:
        m = robot.read()
        if m is not None:
            return m
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no measurement from the robot within {timeout} s")
        time.sleep(poll)


def _ratio(control_dt: float, command_dt: float) -> int:
    k = int(round(control_dt / command_dt))
    if k < 1 or abs(k * command_dt - control_dt) > 1e-9:
        raise ValueError(f"control_dt {control_dt} must be a multiple of command_dt {command_dt}")
    return k


def run(
    robot: RobotInterface,
    controller: Controller,
    safety: SafetyLayer,
    *,
    duration: float,
    control_dt: float = 0.02,
    command_dt: float = 0.002,
    command_source: Callable[[float], VelocityCommand] | None = None,
    realtime: bool | None = None,
    start_timeout: float = 2.0,
    on_tick: Callable | None = None,
) -> LoopResult:
    """Run `controller` on `robot` through `safety` for `duration` [s] (see module docstring).

    Args:
        command_source: `t -> VelocityCommand` (default: stand still), queried at each
            controller call with the time since start.
        realtime: wall-clock loop; default: False if the robot has `advance`, else True.
        start_timeout: [s] wall time to wait for the first measurement.
        on_tick: optional `on_tick(t, safety, robot)` after each write (fault scripts, e-stop
            buttons); `t` is the time since start.
    """
    command_source = command_source or (lambda t: VelocityCommand())
    if realtime is None:
        realtime = not hasattr(robot, "advance")
    ratio = _ratio(control_dt, command_dt)
    # real time: no full collection pass stalls the loop (`frozen_heap`); none before it
    # either, the robot may be waiting for its first command
    with frozen_heap(collect=False) if realtime else contextlib.nullcontext():
        first = wait_for_measurement(robot, start_timeout)
        controller.reset(first)
        if realtime:
            freeze_survivors(collect=False)  # what the reset built (a compile, a first plan)
        # the reset may have taken long (a JAX compile): start from the newest sample
        newest = robot.read() or first
        t0_robot = robot.now()
        safety.start(t0_robot, newest)
        if realtime:  # warnings written by a thread of their own (`queued_logging`), the
            # garbage collector's passes between ticks (`collections_in_slack`)
            with queued_logging(), collections_in_slack() as collect_if_due:
                return _run_wall(robot, controller, safety, duration, control_dt, command_dt,
                                 command_source, on_tick, t0_robot, collect_if_due)  # fmt: skip
        return _run_simulated(robot, controller, safety, duration, ratio, command_dt,
                              command_source, on_tick, t0_robot)  # fmt: skip


def _call_controller(controller, m, t, command_source):
    """`(command or None, error text or None)`: a controller bug must damp the robot (the
    safety layer times the command out), not kill the loop."""
    try:
        return controller(m, t, command_source(t)), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _run_simulated(robot, controller, safety, duration, ratio, command_dt, source, on_tick, t0):
    recorder = _Recorder(robot.joint_map.nu)
    command_stats = TimingStats(command_dt)
    controller_stats = TimingStats(command_dt * ratio)
    ticks = int(round(duration / command_dt))
    calls = errors = 0
    for k in range(ticks):
        wall = time.perf_counter()
        now = robot.now()
        m = robot.read()
        accepted = safety.observe(now, m, fault=getattr(robot, "estimator_fault", None))
        new = None
        if k % ratio == 0 and accepted:
            c0 = time.perf_counter()
            new, error = _call_controller(controller, m, now - t0, source)
            controller_stats.record(now, time.perf_counter() - c0)
            calls += 1
            if error is not None:
                errors += 1
                safety.record(now, "controller_error", error)
        out = safety.command(now, new)
        robot.write(out)
        recorder.add(now - t0, m, accepted, out, safety.mode)
        if on_tick is not None:
            on_tick(now - t0, safety, robot)
        command_stats.record(now, time.perf_counter() - wall)
        robot.advance(command_dt)
    timing = {"command": command_stats.summary(), "controller": controller_stats.summary()}
    return LoopResult(recorder.arrays(), timing, safety, calls, errors)


class _ControllerWorker(threading.Thread):
    """Runs the controller at its period on the newest accepted measurement (wall clock), its
    calls `phase` [s] after the period's marks (`t0_wall + k period + phase`): the command
    loop ticks on the marks, and a call that woke with a tick would take the interpreter's
    lock from it (every `period`, the tick would wait for the call); half a command period
    later the tick is done and the loop sleeps."""

    def __init__(self, controller, period, source, t0_wall, phase: float = 0.0):
        super().__init__(daemon=True, name="controller")
        self.controller, self.period = controller, period
        self.source, self.t0_wall, self.phase = source, t0_wall, float(phase)
        self.stats = TimingStats(period)
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.measurement: Measurement | None = None
        self.output = None
        self.error_texts: list = []  # drained by the command loop into the safety log
        self.calls = self.errors = 0

    def offer(self, m: Measurement) -> None:
        with self.lock:
            self.measurement = m

    def take(self):
        """`(newest command or None, controller errors since the last call)`."""
        with self.lock:
            out, self.output = self.output, None
            errors, self.error_texts = self.error_texts, []
        return out, errors

    def run(self) -> None:
        deadline = self.t0_wall + self.phase
        while not self.stop_event.is_set():
            delay = deadline - time.perf_counter()
            if delay > 0 and self.stop_event.wait(delay):
                break
            start = time.perf_counter()
            with self.lock:
                m = self.measurement
            if m is not None:
                t = start - self.t0_wall
                new, error = _call_controller(self.controller, m, t, self.source)
                with self.lock:
                    self.calls += 1
                    if new is not None:
                        self.output = new
                    if error is not None:
                        self.errors += 1
                        self.error_texts.append(error)
            self.stats.record(start - self.t0_wall, time.perf_counter() - start,
                              deadline - self.t0_wall)  # fmt: skip
            deadline = _next_deadline(deadline, self.period, self.stats)


def _next_deadline(deadline: float, period: float, stats: TimingStats) -> float:
    """The next deadline; those more than a full period in the past are skipped (counted):
    a late loop runs its next tick at once but does not burst to catch up."""
    deadline += period
    late = time.perf_counter() - deadline
    if late > period:
        skipped = int(late // period)
        stats.missed += skipped
        deadline += skipped * period
    return deadline


def sleep_until(deadline: float) -> None:
    """Sleep, then spin the last 0.3 ms (sleep overshoots by ~0.1 ms on Linux)."""
    remaining = deadline - time.perf_counter()
    if remaining > 3e-4:
        time.sleep(remaining - 3e-4)
    while time.perf_counter() < deadline:
        pass


def _run_wall(robot, controller, safety, duration, control_dt, command_dt, source, on_tick, t0,
              collect_if_due):  # fmt: skip
    recorder = _Recorder(robot.joint_map.nu)
    command_stats = TimingStats(command_dt)
    t0_wall = time.perf_counter()
    # the safety layer is used by this thread only; the worker hands over commands and errors
    worker = _ControllerWorker(controller, control_dt, source, t0_wall, phase=command_dt / 2)
    deadline = t0_wall
    end = t0_wall + duration
    worker.start()
    try:
        while deadline < end:
            sleep_until(deadline)
            start = time.perf_counter()
            now = robot.now()
            m = robot.read()
            accepted = safety.observe(now, m, fault=getattr(robot, "estimator_fault", None))
            if accepted:
                worker.offer(m)
            new, errors = worker.take()
            for error in errors:
                safety.record(now, "controller_error", error)
            out = safety.command(now, new)
            robot.write(out)
            recorder.add(now - t0, m, accepted, out, safety.mode)
            if on_tick is not None:
                on_tick(start - t0_wall, safety, robot)
            command_stats.record(start - t0_wall, time.perf_counter() - start,
                                 deadline - t0_wall)  # fmt: skip
            deadline = _next_deadline(deadline, command_dt, command_stats)
            collect_if_due()  # a collection the tick's allocations made due, before the next
    finally:
        worker.stop_event.set()
        worker.join(timeout=5.0)
    timing = {"command": command_stats.summary(), "controller": worker.stats.summary()}
    return LoopResult(recorder.arrays(), timing, safety, worker.calls, worker.errors)
