"""A Unitree Go2 over its own low-level protocol: Unitree SDK 2's DDS topics, as a `RobotInterface`.

    robot = Go2Robot(JointMap.from_model(dynamics.load_robot("go2")), domain=0, interface="eth0")
    control_loop.run(robot, StandUpController(robot.joint_map), SafetyLayer(robot.joint_map), ...)

The same class drives the real robot (DDS domain 0, the wired network card), Unitree's
`unitree_mujoco` (domain 1, `lo`) and our simulated Go2 (`python -m hardware.go2.sim`,
any domain, `lo`). Message types: `messages`; slot order and field mapping: `conversions`.

State (`rt/lowstate`, 500 Hz; the reader keeps the newest `STATE_QUEUE` samples, so a
process that stalls that long loses none: `take_samples()` hands every one to a filter, e.g.
`EstimatedRobot`) -> `Measurement` (conventions of `hardware.interface`; fields as
in `conversions`):
    base_position, base_linear_velocity  <- `rt/sportmodestate` position, R^T velocity (world to
        base), when one arrived within `state_timeout` (`base_state_source` "sport_state");
        else, with `ground_truth=True`, our simulated Go2's true base state
        (`conversions.TOPIC_GROUND_TRUTH`, tests and logs only: "ground_truth"); else None
        (`base_state_source` None). On the robot the sport state is Unitree's estimator,
        published by the sport service, which stops when low-level control releases it (as
        our simulated Go2 does; unitree_mujoco publishes the true state there): a full-state
        controller (MPC, policy) on the robot needs a state estimator of its own
        (`hardware.estimator`).
    foot_force [N], motor_temperature [deg C]  <- LowState_ foot_force, motor temperatures
        (`conversions`).
    timestamp: when the robot took the sample, on this computer's `time.perf_counter()` (the
        clock of `now()`): the LowState's `tick` [ms] mapped by a `TickClock`, so consecutive
        samples are the robot's interval apart however late or bunched they arrive.
    robot_mode: this backend's drivers' mode (below).

Commands. `write(JointCommand)` goes to a `MotorDriver` (the same validation, arming, watchdog
and e-stop latch as the simulated robots' drivers); a writer thread sends, every 1/500 s, the
driver's active command (the latest accepted command while ACTIVE, damping `Kp = 0`,
`Kd = damping_kd` otherwise) as a LowCmd: `head` 0xFE 0xEF, `level_flag` 0xFF, mode 0x01 on
slots 0-11, the CRC set last. Watchdogs (both latch DAMPING until a command with `arm=True`):
    - stale commands: no accepted `write` for `command_timeout` [s] (the controller stopped);
    - stale state: no LowState for `state_timeout` [s] (the robot or the link went away).
Nothing is sent before the first LowState and the first accepted `write` (a controller that
compiles for a minute in `reset` leaves the robot as it was meanwhile).

E-stop: when all the buttons of `estop_buttons` (default L2 + B) are down in the LowState's
`wireless_remote`, the drivers latch ESTOP (damping until this object is discarded) and every
measurement says `RobotMode.ESTOP`, which puts the safety layer in its ESTOP. `estop()` does
the same from software.

Sport mode. On the robot, Unitree's sport service drives the motors too until it is released:
`Go2Robot(..., release_sport_mode=True)` releases it through the motion-switcher service
before the first command goes out (`motion_switcher`, which also says how to release it by
hand). unitree_mujoco has no sport service; our simulated Go2 models one with `--sport-mode`.

`LockstepGo2Robot` is the same link in robot time, for our simulated Go2 with `--lockstep`
only: a controller slower than real time (the MPC here) then runs over the same messages.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import numpy as np

from ..interface import JointCommand, JointMap, Measurement, RobotMode
from ..motor import MotorDriver
from ..timing import TimingStats
from . import messages as msgs
from .conversions import (
    TOPIC_GROUND_TRUTH,
    Buttons,
    remote_buttons,
    sdk_permutation,
)
from .dds import (
    TOPIC_LOWCMD,
    TOPIC_LOWSTATE,
    TOPIC_SPORTSTATE,
    TOPIC_STEP,
    make_reader,
    make_writer,
    open_domain,
    take_serialized,
    write_serialized,
)
from .motion_switcher import release_sport_mode_or_none
from .packed import LowCmdPacker, LowStateDecoder, SportStateDecoder
from .tick_clock import TickClock

logger = logging.getLogger(__name__)

COMMAND_RATE = 500.0  # [Hz] LowCmd rate of the SDK's examples and unitree_mujoco
DEFAULT_ESTOP = Buttons.L2 | Buttons.B
STATE_QUEUE = 128  # LowStates kept by the reader and for `take_samples`: 0.256 s at 500 Hz


# --------------------------------------------------------------------------- the robot
class Go2Robot:
    """`RobotInterface` of a Go2 over DDS (see module docstring).

    Args:
        joint_map: the model's joint map (`JointMap.from_model(dynamics.load_robot("go2"))`).
        domain: DDS domain id (robot 0, unitree_mujoco 1).
        interface: network interface name (`lo`, the wired NIC), None: Cyclone's choice.
        command_timeout: [s] stale-command watchdog.
        state_timeout: [s] stale-state watchdog, and the largest age of a sport state used.
        max_command_age: [s] commands computed from older measurements are rejected.
        damping_kd: [N m s/rad] Kd of the damping command; default the standing Kd.
        estop_buttons: remote buttons that latch ESTOP when all are down (0: none).
        sport_state: subscribe to `rt/sportmodestate` for base position/velocity.
        ground_truth: subscribe to our simulated Go2's true base state (tests, logs).
        release_sport_mode: call `release_sport_mode` before the first command goes out.
        connect_timeout: [s] wait for the first LowState (0: do not wait).
        command_rate: [Hz] LowCmd rate.
        writer_thread: send LowCmd from a thread of this object at `command_rate` (default);
            False: send one at each `write`, for a caller whose own loop runs at that rate
            (the high-rate process of `hardware.command_process`: one thread fewer to share
            its interpreter lock with).
    """

    def __init__(
        self,
        joint_map: JointMap,
        *,
        domain: int = 0,
        interface: str | None = None,
        command_timeout: float = 0.1,
        state_timeout: float = 0.05,
        max_command_age: float = 0.1,
        damping_kd=None,
        estop_buttons: int = DEFAULT_ESTOP,
        sport_state: bool = True,
        ground_truth: bool = False,
        release_sport_mode: bool = False,
        connect_timeout: float = 2.0,
        command_rate: float = COMMAND_RATE,
        writer_thread: bool = True,
    ):
        self.joint_map = joint_map
        self.perm = sdk_permutation(joint_map)
        self._decoder = LowStateDecoder(self.perm)  # LowStates and LowCmds as bytes (`packed`)
        self._packer = LowCmdPacker(self.perm)
        self._sport_decoder = SportStateDecoder()
        self.state_timeout = float(state_timeout)
        self.estop_buttons = int(estop_buttons)
        self.period = 1.0 / command_rate
        self.driver = MotorDriver(
            joint_map,
            command_timeout=command_timeout,
            max_command_age=max_command_age,
            damping_kd=damping_kd,
        )
        self.lock = threading.Lock()
        self.latest: Measurement | None = None
        self.samples: collections.deque = collections.deque(maxlen=STATE_QUEUE)
        self.tick_clock = TickClock()
        self.last_state_time = -np.inf
        self.sport: tuple | None = None  # (receive time, position, velocity in base frame)
        self.truth: tuple | None = None  # the same of the ground-truth topic
        self.buttons = 0
        self.remote: bytes | None = None  # the newest LowState's 40-byte `wireless_remote`
        self.sequence = 0
        self.state_trips: list = []  # times the stale-state watchdog fired
        names = ("states", "sport_states", "ground_truths", "nonfinite", "sent", "estops")
        self.counters = {k: 0 for k in names}
        self.timing = TimingStats(self.period)
        self.domain, self.participant = open_domain(domain, interface)
        self.cmd_writer = make_writer(self.participant, TOPIC_LOWCMD, msgs.LowCmd_)
        self.state_reader = make_reader(
            self.participant, TOPIC_LOWSTATE, msgs.LowState_, depth=STATE_QUEUE
        )
        self.sport_reader = None
        if sport_state:
            self.sport_reader = make_reader(
                self.participant, TOPIC_SPORTSTATE, msgs.SportModeState_
            )
        self.truth_reader = None
        if ground_truth:
            self.truth_reader = make_reader(
                self.participant, TOPIC_GROUND_TRUTH, msgs.SportModeState_
            )
        self.released_mode = release_sport_mode_or_none(self.participant, release_sport_mode)
        self._running = True
        self._thread = None
        self.threaded = self.threaded and bool(writer_thread)
        if self.threaded:
            self._thread = threading.Thread(target=self._write_loop, daemon=True, name="go2-lowcmd")
            self._thread.start()
        if connect_timeout > 0:
            self.wait_for_state(connect_timeout)
            self._wait_for_sport_state(min(connect_timeout, 1.0))

    threaded = True  # a writer thread repeats the command at `command_rate`

    def _state_stamp(self, tick_ms: int, now: float) -> float:
        """The timestamp of a LowState with `tick` [ms] that arrived at local time `now`: its
        tick on this computer's clock."""
        return self.tick_clock(tick_ms, now)

    def _sport_stamp(self, data: bytes, now: float) -> float:
        """The timestamp of a serialized SportModeState that arrived at local time `now`: its
        arrival."""
        return now

    def _base_state(self, data: bytes, now: float) -> tuple:
        """`(timestamp, position (3,) world, velocity (3,) base frame)` of a serialized
        SportModeState that arrived at local time `now`."""
        data = self._sport_decoder.readable(data)
        return (self._sport_stamp(data, now), *self._sport_decoder.base_state(data))

    # ------------------------------------------------------------- incoming (polled)
    def _poll(self, now: float) -> None:
        """Take the LowStates and the newest sport state and ground truth that arrived (a
        sport state is stamped by its take: a poll a tick keeps that within a tick of its
        arrival); call with `self.lock`."""
        if self.sport_reader is not None:
            sport = take_serialized(self.sport_reader)
            if sport:
                self.counters["sport_states"] += len(sport)
                self.sport = self._base_state(sport[-1], now)
        if self.truth_reader is not None:
            truth = take_serialized(self.truth_reader)
            if truth:
                self.counters["ground_truths"] += len(truth)
                self.truth = self._base_state(truth[-1], now)
        for data in take_serialized(self.state_reader, STATE_QUEUE):  # oldest first
            self.counters["states"] += 1
            self._receive_state(data, now)

    def _receive_state(self, data: bytes, now: float) -> None:
        """Take one serialized LowState that arrived at local time `now`."""
        decoder = self._decoder
        data = decoder.readable(data)
        remote = decoder.remote(data)
        buttons = remote_buttons(remote)
        if self.estop_buttons and buttons & self.estop_buttons == self.estop_buttons:
            if self.driver.mode is not RobotMode.ESTOP:
                self.counters["estops"] += 1
                logger.error("remote e-stop buttons 0x%04x pressed", buttons)
            self.driver.estop(now)
        self.buttons = buttons
        self.remote = remote
        self.sequence += 1
        stamp = self._state_stamp(decoder.tick(data), now)
        m = decoder.measurement(
            data, timestamp=stamp, sequence=self.sequence, robot_mode=self.driver.mode
        )
        if m is None:  # a non-finite number or a degenerate quaternion
            self.counters["nonfinite"] += 1
            return
        self.latest = m
        self.samples.append(m)
        self.last_state_time = now

    def wait_for_state(self, timeout: float) -> Measurement:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            m = self.read()
            if m is not None:
                return m
            time.sleep(0.002)
        raise TimeoutError(f"no rt/lowstate within {timeout} s (domain, interface, robot on?)")

    def _wait_for_sport_state(self, timeout: float) -> bool:
        """Wait up to `timeout` [s] for a first sample of each subscribed base-state topic
        (`rt/sportmodestate`, the ground truth; topics match their peers separately); False
        when one never came (a robot whose sport service is off: then it goes on without)."""
        readers = (("sport_reader", "sport"), ("truth_reader", "truth"))

        def waiting():
            return [
                b for r, b in readers if getattr(self, r) is not None and getattr(self, b) is None
            ]

        deadline = time.perf_counter() + timeout
        while waiting() and time.perf_counter() < deadline:
            self.read()
            time.sleep(0.002)
        return not waiting()

    # ------------------------------------------------------------- the 500 Hz writer
    def _write_loop(self) -> None:
        deadline = time.perf_counter()
        while self._running:
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._send_now(deadline)
            deadline += self.period
            if time.perf_counter() - deadline > self.period:  # late: no burst to catch up
                skipped = int((time.perf_counter() - deadline) // self.period)
                self.timing.missed += skipped
                deadline += skipped * self.period

    def _active_command(self, now: float, poll: bool) -> JointCommand | None:
        with self.lock:
            if poll:
                self._poll(now)
            if self.latest is None or self.driver.command is None:
                return None
            stale = now - self.last_state_time > self.state_timeout
            if stale and self.driver.mode is RobotMode.ACTIVE:
                self.driver.mode = RobotMode.DAMPING
                self.state_trips.append(now)
                logger.error(
                    "no rt/lowstate for %.1f ms: damping", 1e3 * (now - self.last_state_time)
                )
            return self.driver.active_command(self.latest.joint_q, now)

    # ------------------------------------------------------------- RobotInterface
    def read(self) -> Measurement | None:
        with self.lock:
            self._poll(time.perf_counter())
            m, sport, truth = self.latest, self.sport, self.truth
            mode = self.driver.mode
        if m is None:
            return None
        changes = {"robot_mode": mode}
        for source, base in (("sport_state", sport), ("ground_truth", truth)):
            if base is not None and abs(base[0] - m.timestamp) <= self.state_timeout:
                changes.update(base_position=base[1], base_linear_velocity=base[2])
                changes["base_state_source"] = source
                break
        return m.replace(**changes)

    def write(self, command: JointCommand) -> None:
        with self.lock:
            self.driver.submit(command, self.now())
        if not self.threaded:
            self._send_now()

    def _send_now(self, scheduled: float | None = None) -> None:
        """Send the drivers' active command as one LowCmd (the CRC set last), timed against
        `scheduled` (the writer thread's deadline; None: a `write` without the thread, right
        after the loop's `read` took the LowStates, so it takes none)."""
        start = time.perf_counter()
        command = self._active_command(start, poll=scheduled is not None)
        if command is not None:
            write_serialized(self.cmd_writer, self._packer.pack(command))
            self.counters["sent"] += 1
            self.timing.record(start, time.perf_counter() - start, scheduled)

    def take_samples(self) -> list:
        """Every valid `Measurement` taken (by `read` or the writer thread) since the last call,
        oldest first (at most `STATE_QUEUE`; the newest of those `read` took is what it
        returned, less its base state). It takes none itself: a filter that reads, then takes
        the samples, gets what that read saw."""
        with self.lock:
            out = list(self.samples)
            self.samples.clear()
        return out

    def wireless_remote(self) -> bytes | None:
        """The newest LowState's 40-byte `wireless_remote` (buttons and sticks,
        `conversions`), or None before the first LowState."""
        with self.lock:
            return self.remote

    def now(self) -> float:
        return time.perf_counter()

    def estop(self) -> None:
        with self.lock:
            self.driver.estop(self.now())

    def status(self) -> dict:
        """Counters, modes and watchdog trips of this end."""
        with self.lock:
            return {
                "mode": RobotMode(self.driver.mode).name,
                "buttons": self.buttons,
                "watchdog_trips": list(self.driver.trip_times),
                "last_command_accepted_at": self.driver.last_accepted,
                "state_trips": list(self.state_trips),
                "counters": dict(self.counters),
                "driver": dict(self.driver.counters),
                "released_mode": self.released_mode,
            }

    def close(self) -> None:
        """Stop the writer (the robot's own timeout takes over) and leave the domain."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        names = ("state_reader", "sport_reader", "truth_reader", "cmd_writer", "participant",
                 "domain")  # fmt: skip
        for name in names:
            setattr(self, name, None)  # Cyclone deletes the entities with their last reference


class LockstepGo2Robot(Go2Robot):
    """A `SimulatedRobot` over the Go2's topics, for our simulated Go2 in lockstep (`python -m
    hardware.go2.sim --lockstep`): the same messages, CRC, slot order and drivers as
    `Go2Robot`, but in robot time, so a controller slower than real time (the MPC here) runs
    through the robot's protocol deterministically.

    `write` sends the drivers' active command at once (no writer thread); `advance(duration)`
    publishes a `Step_` (`rt/diffloco/step`: simulate to `now() + duration` once the LowCmds
    sent so far arrived) and waits for the LowState of that time, re-sending every
    `resend_every` [s], `TimeoutError` after `step_timeout`. `now()` and the measurements'
    timestamps are the robot's `tick` [ms] / 1000 (the simulated Go2 publishes its time
    there). Only our simulator knows `Step_`: a real robot or unitree_mujoco never advances.
    """

    threaded = False

    def __init__(self, joint_map: JointMap, *, step_timeout=10.0, resend_every=0.05, **kwargs):
        # the clock stands while we compute; a sport state is used only at the same robot time
        kwargs.setdefault("state_timeout", 1e-6)
        super().__init__(joint_map, **kwargs)
        self.step_timeout = step_timeout
        self.resend_every = resend_every
        self.step_writer = make_writer(self.participant, TOPIC_STEP, msgs.Step_)

    def _state_stamp(self, tick_ms: int, now: float) -> float:
        return 1e-3 * tick_ms

    def _sport_stamp(self, data: bytes, now: float) -> float:
        return self._sport_decoder.stamp(data)

    def now(self) -> float:
        latest = self.latest
        return 0.0 if latest is None else latest.timestamp

    def write(self, command: JointCommand) -> None:
        with self.lock:
            now = self.now()
            self.driver.submit(command, now)
            if self.latest is None or self.driver.command is None:
                return
            active = self.driver.active_command(self.latest.joint_q, now)
            write_serialized(self.cmd_writer, self._packer.pack(active))
            self.counters["sent"] += 1

    def advance(self, duration: float) -> None:
        """Let the robot simulate `duration` [s] and wait for its LowState at the end (and for
        the base states of that time whose topics were published up to now)."""
        start = self.now()
        expect = [name for name in ("sport", "truth") if self._base_at(name, start)]
        target = start + duration
        step = msgs.Step_(target=target, commands=self.counters["sent"])
        deadline = time.perf_counter() + self.step_timeout
        while time.perf_counter() < deadline:
            self.step_writer.write(step)
            resend = min(deadline, time.perf_counter() + self.resend_every)
            while time.perf_counter() < resend:
                m = self.read()
                arrived = all(self._base_at(name, target) for name in expect)
                if m is not None and m.timestamp >= target - 1e-6 and arrived:
                    return
                time.sleep(0.0002)
        raise TimeoutError(
            f"the simulated Go2 did not reach robot time {target:.4f} s within "
            f"{self.step_timeout} s (is it running with --lockstep?)"
        )

    def _base_at(self, name: str, target: float) -> bool:
        """The base state `name` ("sport" or "truth") of robot time `target` arrived. A topic
        that stopped (the sport state after the release) is not waited for: `advance` waits
        only for those that were at its start time."""
        base = getattr(self, name)
        return base is not None and base[0] >= target - 1e-6

    def close(self) -> None:
        self.step_writer = None
        super().close()
