"""Steering a legged robot by hand or from a navigation stack: the operator's `VelocityCommand`
from a remote's sticks (`StickSteering`) or from ROS 2 `cmd_vel` Twists (`CmdVelSource`), as a
command source of `control_loop.run(..., command_source=source)`.

    box = CommandBox.from_ranges({"vx": (-1, 1), "vy": (-0.5, 0.5), "yaw_rate": (-1, 1)})
    source = StickSteering(go2.wireless_remote, box)     # Unitree's remote, through LowState
    source = CmdVelSource(box)                           # fed by `ros2_types.CmdVelReader`
    command = source(t)                                  # a VelocityCommand; t [s]

Frames and units (`VelocityCommand`'s, the heading frame: yaw-aligned, z up): vx [m/s]
forward, vy [m/s] left, yaw_rate [rad/s] counter-clockwise seen from above. ROS's REP 103 body
frame is the same (x forward, y left, z up), so a Twist's linear.x, linear.y and angular.z are
vx, vy and yaw_rate as they are; its linear.z, angular.x and angular.y are ignored.

The command box (`CommandBox`): per component the interval [low, high] the controller accepts,
for a policy the ranges it was trained on (`learning.policy_export.command_ranges`); it must
contain zero (the stand).

Sticks (Unitree's remote, `hardware.go2.conversions.remote_sticks`): lx, rx, ry, ly, each in
[-1, 1], right and up positive. They map as in Unitree's own deployment code (unitree_rl_lab,
deploy/include/isaaclab/envs/mdp/observations.h, `velocity_commands`: vx = ly, vy = -lx,
wz = -rx):
    left stick up (ly > 0)       -> vx > 0, forward
    left stick right (lx > 0)    -> vy < 0, moving to the right
    right stick right (rx > 0)   -> yaw_rate < 0, turning clockwise
    ry                           -> unused
Each stick goes through a deadband `d` (default `STICK_DEADBAND`, a fraction of full
deflection), rescaled so that the output is continuous and still reaches full scale,
`sign(s) max(|s| - d, 0) / (1 - d)` (`deadband`), then onto the box: a positive fraction
times the box's high end, a negative one times (minus) its low end (`CommandBox.scale`, as
unitree_rl_lab scales its sticks by the training ranges).

Acceleration limits (`ramp`): at each call the command moves toward its target by at most
`accel * dt` [m/s^2 * s] in vx and in vy (each) and `yaw_accel * dt` [rad/s^2 * s] in the yaw
rate, `dt` the time since the previous call (from the `t` argument; none on the first call,
after `reset` or when `t` goes back). The command starts at zero. Released sticks (all inside
the deadband), a missing remote, no cmd_vel or a stale one (older than `timeout` [s] on the
source's clock) make the target zero: the command ramps down to a stand.

Bad input never raises in the control loop: a non-finite stick value is refused (taken as
released, counted `nonfinite`), a finite one beyond [-1, 1] clipped (counted `clipped`), a
`wireless_remote` that is not 40 bytes taken as released (`malformed`); a Twist with a
non-finite field is ignored (`nonfinite`), one outside the box clipped to it (`clipped`). The
counts are in each source's `counters`.

Thread safety: each source guards its state with a lock, so the control loop's thread may call
it while another thread feeds it (`CmdVelSource.submit`) or reads `counters` and `command`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .interface import VelocityCommand

COMPONENTS = ("vx", "vy", "yaw_rate")  # VelocityCommand's, in `as_array` order
STEER_MODES = ("fixed", "remote", "cmd_vel")  # `make_steering`
STICK_DEADBAND = 0.1  # fraction of full stick deflection read as zero
CMD_VEL_TIMEOUT = 0.5  # [s] a Twist older than this commands a stand
# default acceleration limits, those of the command tours the shipped Go2 policy is checked on
# (`learning.deployment.COMMAND_ACCEL`, `COMMAND_YAW_ACCEL`)
LINEAR_ACCEL = 2.0  # [m/s^2] per component vx, vy
YAW_ACCEL = 2.0  # [rad/s^2]


def _positive(value, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


# --------------------------------------------------------------------------- the command box
@dataclass(frozen=True)
class CommandBox:
    """The velocity commands a controller accepts: `low (3,)`, `high (3,)` per component (vx,
    vy [m/s], yaw_rate [rad/s]), with `low <= 0 <= high` (zero, the stand, is inside)."""

    low: tuple
    high: tuple

    def __post_init__(self):
        low = tuple(float(v) for v in self.low)
        high = tuple(float(v) for v in self.high)
        if len(low) != 3 or len(high) != 3:
            raise ValueError(f"low and high need 3 values {COMPONENTS}, got {low}, {high}")
        for name, lo, hi in zip(COMPONENTS, low, high):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= 0.0 <= hi):
                raise ValueError(
                    f"the command box's {name} range must be finite with low <= 0 <= high "
                    f"(the stand inside), got ({lo}, {hi})"
                )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @classmethod
    def symmetric(cls, vx: float, vy: float, yaw_rate: float) -> CommandBox:
        """The box `[-vx, vx] x [-vy, vy] x [-yaw_rate, yaw_rate]` (maxima [m/s], [rad/s],
        each >= 0)."""
        maxima = (float(vx), float(vy), float(yaw_rate))
        for name, value in zip(COMPONENTS, maxima):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"the largest {name} must be finite and >= 0, got {value}")
        return cls(tuple(-m for m in maxima), maxima)

    @classmethod
    def from_ranges(cls, ranges) -> CommandBox:
        """The box of `{"vx": (low, high), "vy": (low, high), "yaw_rate": (low, high)}` (the
        layout of a policy's "command_ranges"); ValueError naming a missing component."""
        missing = [n for n in COMPONENTS if n not in ranges]
        if missing:
            raise ValueError(f"command ranges need {list(COMPONENTS)}, missing {missing}")
        lows, highs = [], []
        for name in COMPONENTS:
            try:
                low, high = ranges[name]
            except (TypeError, ValueError) as err:
                message = f"command range {name} must be (low, high), got {ranges[name]!r}"
                raise ValueError(message) from err
            lows.append(low)
            highs.append(high)
        return cls(tuple(lows), tuple(highs))

    def ranges(self) -> dict:
        """`{"vx": [low, high], "vy": [...], "yaw_rate": [...]}` (JSON-ready)."""
        return {n: [lo, hi] for n, lo, hi in zip(COMPONENTS, self.low, self.high)}

    def clip(self, values) -> np.ndarray:
        """`values (3,)` clipped into the box."""
        return np.clip(np.asarray(values, dtype=float), self.low, self.high)

    def scale(self, fractions) -> np.ndarray:
        """Fractions of full scale `(3,)` in [-1, 1] onto the box: `f * high` for `f > 0`,
        `-f * low` for `f < 0` (so +-1 reach the box's ends, 0 is 0)."""
        f = np.asarray(fractions, dtype=float)
        return np.where(f > 0, f * np.asarray(self.high), -f * np.asarray(self.low))


# --------------------------------------------------------------------------- pure pieces
def deadband(value: float, width: float) -> float:
    """`value` in [-1, 1] with `|value| <= width` read as zero, the rest rescaled to reach +-1:
    `sign(value) max(|value| - width, 0) / (1 - width)` (continuous, `0 <= width < 1`)."""
    if not 0.0 <= width < 1.0:
        raise ValueError(f"deadband width must be in [0, 1), got {width!r}")
    magnitude = max(abs(value) - width, 0.0) / (1.0 - width)
    return math.copysign(magnitude, value) if magnitude > 0 else 0.0


def checked_stick(value) -> tuple[float, str | None]:
    """`(usable value, issue)` of one raw stick value: `(value, None)` in [-1, 1]; a finite
    value beyond it clipped, `"clipped"`; NaN or inf refused as released, `(0.0,
    "nonfinite")`."""
    value = float(value)
    if not math.isfinite(value):
        return 0.0, "nonfinite"
    if abs(value) > 1.0:
        return math.copysign(1.0, value), "clipped"
    return value, None


def stick_fractions(lx: float, rx: float, ry: float, ly: float, width: float) -> np.ndarray:
    """`(vx, vy, yaw_rate)` as fractions of full scale `(3,)` from sticks in [-1, 1] (Unitree's
    convention, module docstring): `(ly, -lx, -rx)` through `deadband(., width)`; ry unused."""
    return np.array([deadband(ly, width), -deadband(lx, width), -deadband(rx, width)])


def ramp(previous, target, dt: float, limits) -> np.ndarray:
    """`previous (3,)` moved toward `target (3,)` by at most `limits (3,) * dt` per component
    (acceleration limits [m/s^2] or [rad/s^2] times `dt` [s] >= 0)."""
    previous = np.asarray(previous, dtype=float)
    step = np.asarray(limits, dtype=float) * max(float(dt), 0.0)
    return previous + np.clip(np.asarray(target, dtype=float) - previous, -step, step)


def command_of(values) -> VelocityCommand:
    """`VelocityCommand(vx, vy, yaw_rate)` of `values (3,)`."""
    vx, vy, yaw_rate = (float(v) for v in values)
    return VelocityCommand(vx, vy, yaw_rate)


class _Ramp:
    """The acceleration-limited command (`ramp`), stepped at each call with its time `t` [s];
    the caller holds the lock."""

    def __init__(self, accel: float, yaw_accel: float):
        self.limits = np.array([accel, accel, yaw_accel])
        self.reset()

    def reset(self) -> None:
        self.values = np.zeros(3)
        self.t: float | None = None

    def step(self, t: float, target) -> np.ndarray:
        dt = 0.0 if self.t is None or not t >= self.t else t - self.t
        if math.isfinite(t):
            self.t = t
        self.values = ramp(self.values, target, dt, self.limits)
        return self.values


# --------------------------------------------------------------------------- sources
class StickSteering:
    """A command source steered by Unitree's remote (module docstring: mapping, deadband, box,
    acceleration limits, bad values).

    remote: `() -> bytes | None`, the newest 40-byte `wireless_remote` (`Go2Robot.wireless_remote`),
        None when none arrived (taken as released).
    box: the `CommandBox` full deflection reaches.
    deadband: fraction of full deflection read as zero, in [0, 1).
    accel [m/s^2], yaw_accel [rad/s^2]: acceleration limits of the command.

    `counters`: calls; remote readings `missing` (None), `malformed` (not 40 bytes); stick
    values `nonfinite` (refused) and `clipped` (beyond [-1, 1]), one count per value."""

    def __init__(self, remote: Callable[[], bytes | None], box: CommandBox, *,
                 deadband: float = STICK_DEADBAND, accel: float = LINEAR_ACCEL,
                 yaw_accel: float = YAW_ACCEL):  # fmt: skip
        if not callable(remote):
            raise TypeError(f"remote must be a callable returning bytes or None, got {remote!r}")
        if not isinstance(box, CommandBox):
            raise TypeError(f"box must be a CommandBox, got {type(box).__name__}")
        if not 0.0 <= float(deadband) < 1.0:
            raise ValueError(f"deadband must be in [0, 1) of full deflection, got {deadband!r}")
        from .go2.conversions import remote_sticks  # the go2 extra (Cyclone DDS's types)

        self.decode = remote_sticks
        self.remote = remote
        self.box = box
        self.deadband = float(deadband)
        self._ramp = _Ramp(_positive(accel, "accel"), _positive(yaw_accel, "yaw_accel"))
        self._lock = threading.Lock()
        self.counters = {k: 0 for k in ("calls", "missing", "malformed", "nonfinite", "clipped")}
        self.command = VelocityCommand()  # the last one returned

    def target(self, wireless_remote) -> np.ndarray:
        """The command `(3,)` the sticks of `wireless_remote` (bytes or None) ask for, before
        the acceleration limits; counts what it refused or clipped. Call with the lock."""
        if wireless_remote is None:
            self.counters["missing"] += 1
            return np.zeros(3)
        try:
            raw = self.decode(wireless_remote)
        except ValueError:
            self.counters["malformed"] += 1
            return np.zeros(3)
        sticks = []
        for value in raw:
            value, issue = checked_stick(value)
            if issue is not None:
                self.counters[issue] += 1
            sticks.append(value)
        return self.box.scale(stick_fractions(*sticks, self.deadband))

    def __call__(self, t: float) -> VelocityCommand:
        wireless_remote = self.remote()
        with self._lock:
            self.counters["calls"] += 1
            values = self._ramp.step(float(t), self.target(wireless_remote))
            self.command = command_of(values)
            return self.command

    def reset(self) -> None:
        """Back to a zero command; the next call starts the ramp afresh."""
        with self._lock:
            self._ramp.reset()
            self.command = VelocityCommand()


class CmdVelSource:
    """A command source fed by ROS 2 `geometry_msgs/Twist` samples (`submit`; the reader is
    `hardware.ros2_types.CmdVelReader`): linear.x -> vx, linear.y -> vy, angular.z -> yaw_rate,
    clipped into `box`, under the acceleration limits `accel` [m/s^2], `yaw_accel` [rad/s^2];
    zero (a stand) before the first sample and when the newest accepted one is older than
    `timeout` [s] on `clock` (`() -> s`, default `time.monotonic`; the receive times of
    `submit` are on it).

    `counters`: calls; samples `received`, `accepted`, refused for a `nonfinite` field, and
    accepted but `clipped` into the box; `timeouts`: times the newest sample went stale."""

    def __init__(self, box: CommandBox, *, timeout: float = CMD_VEL_TIMEOUT,
                 accel: float = LINEAR_ACCEL, yaw_accel: float = YAW_ACCEL,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        if not isinstance(box, CommandBox):
            raise TypeError(f"box must be a CommandBox, got {type(box).__name__}")
        self.box = box
        self.timeout = _positive(timeout, "timeout")
        self.clock = clock
        self._ramp = _Ramp(_positive(accel, "accel"), _positive(yaw_accel, "yaw_accel"))
        self._lock = threading.Lock()
        self._target: np.ndarray | None = None  # the newest accepted sample's command
        self._received_at = -math.inf  # [s] on `clock`
        self._fresh = False
        names = ("calls", "received", "accepted", "nonfinite", "clipped", "timeouts")
        self.counters = {k: 0 for k in names}
        self.command = VelocityCommand()  # the last one returned

    def submit(self, linear, angular, received_at: float | None = None) -> bool:
        """Take one Twist: `linear (3,)` [m/s] and `angular (3,)` [rad/s], (x, y, z) in the
        robot's body frame, received at `received_at` [s] on `clock` (default now). Returns
        False when refused (a non-finite field)."""
        fields = [float(v) for v in linear] + [float(v) for v in angular]
        if len(fields) != 6:
            raise ValueError(f"linear and angular need 3 values each, got {linear}, {angular}")
        now = self.clock() if received_at is None else float(received_at)
        with self._lock:
            self.counters["received"] += 1
            if not all(math.isfinite(v) for v in fields):
                self.counters["nonfinite"] += 1
                return False
            wanted = np.array([fields[0], fields[1], fields[5]])
            target = self.box.clip(wanted)
            if not np.array_equal(target, wanted):
                self.counters["clipped"] += 1
            self.counters["accepted"] += 1
            self._target, self._received_at = target, now
            return True

    def __call__(self, t: float) -> VelocityCommand:
        now = self.clock()
        with self._lock:
            self.counters["calls"] += 1
            fresh = self._target is not None and now - self._received_at <= self.timeout
            if self._fresh and not fresh:
                self.counters["timeouts"] += 1
            self._fresh = fresh
            target = self._target if fresh else np.zeros(3)
            self.command = command_of(self._ramp.step(float(t), target))
            return self.command

    def reset(self) -> None:
        """Back to a zero command (the newest sample is kept; its age still counts)."""
        with self._lock:
            self._ramp.reset()
            self.command = VelocityCommand()


class FixedCommand:
    """A command source that always gives `command` (no box, no ramp: a step)."""

    def __init__(self, command: VelocityCommand):
        self.command = command
        self.counters: dict = {}

    def __call__(self, t: float) -> VelocityCommand:
        return self.command

    def reset(self) -> None:
        pass


class GatedSource:
    """`source(t)` while `active(t)`, else zero with `source` reset, so that it starts from a
    stand when it becomes active (e.g. once the start-up sequence hands over to the
    controller). `source` is called either way (a reader keeps polling, counters keep
    counting)."""

    def __init__(self, source, active: Callable[[float], bool]):
        self.source = source
        self.active = active
        self.command = VelocityCommand()  # the last one returned

    def __call__(self, t: float) -> VelocityCommand:
        command = self.source(t)
        if not self.active(t):
            self.source.reset()
            command = VelocityCommand()
        self.command = command
        return command

    @property
    def counters(self) -> dict:
        return dict(self.source.counters)


def make_steering(mode: str, box: CommandBox, *, fixed: VelocityCommand | None = None,
                  remote: Callable[[], bytes | None] | None = None, participant=None,
                  topic: str = "cmd_vel", accel: float = LINEAR_ACCEL,
                  yaw_accel: float = YAW_ACCEL):  # fmt: skip
    """The command source of steering `mode` (`STEER_MODES`): "fixed", the constant `fixed`
    (`FixedCommand`); "remote", `StickSteering(remote, box)`; "cmd_vel", a `CmdVelSource(box)`
    fed by a `hardware.ros2_types.CmdVelReader` on DDS `participant` (ROS 2 topic `topic`),
    which polls at each call. Each has `counters` and `reset()`."""
    if mode == "fixed":
        return FixedCommand(fixed if fixed is not None else VelocityCommand())
    if mode == "remote":
        if remote is None:
            raise ValueError("steering 'remote' needs remote, a () -> wireless_remote bytes")
        return StickSteering(remote, box, accel=accel, yaw_accel=yaw_accel)
    if mode == "cmd_vel":
        if participant is None:
            raise ValueError("steering 'cmd_vel' needs participant, a DDS DomainParticipant")
        from .ros2_types import CmdVelReader

        return CmdVelReader(participant, CmdVelSource(box, accel=accel, yaw_accel=yaw_accel), topic)
    raise ValueError(f"steering mode must be one of {STEER_MODES}, got {mode!r}")
