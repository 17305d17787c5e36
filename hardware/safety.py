"""The safety layer between a controller and the robot: every command passes through it.

Each control tick (the loop's command rate) it is called twice, in order:

    ok = safety.observe(now, measurement)      # accept or reject the newest measurement
    out = safety.command(now, command_or_None) # the command to write: always finite, in limits

`now` is the robot's clock (`robot.now()`). Modes (`safety.mode`):

    IDLE --start()--> SOFT_START --(duration)--> NORMAL
    SOFT_START / NORMAL --(any watchdog or violation)--> DAMPING  (latched; resume() -> SOFT_START)
    any --estop()--> ESTOP                                          (latched for good)

Checks, in order, each one an *intervention* recorded in `safety.events` (a structured list,
consecutive ticks of the same kind merged into one event with a count) and logged through
Python `logging` (logger "hardware.safety") when it starts:

Measurements (`observe`):
- `measurement_missing`: `read()` gave nothing yet.
- `measurement_invalid`: wrong shape, NaN/inf, degenerate quaternion: the sample is not used.
- `measurement_stale`: older than `measurement_timeout` on the robot clock: not used.
- `estimator_fault`: the robot's state estimator reports a fault (`observe(..., fault=)`):
  DAMPING.
Watchdogs and the measured state (`command`), each switching to DAMPING:
- `measurement_timeout`: no accepted measurement for `measurement_timeout`.
- `command_timeout`: no valid controller command for `command_timeout` (the controller
  stopped, returned None, raised, or produced only invalid commands).
- `joint_velocity_violation`: `|qd| > velocity_factor * velocity_limit`.
- `joint_position_violation`: `q` outside the limits by more than `position_tolerance`.
- `base_tilt_violation`: roll or pitch of the IMU orientation (`base_quat`, Z-Y-X Euler
  angles, `roll_pitch`) beyond `max_roll` / `max_pitch`: the robot is falling or has fallen.
- `motor_temperature_violation`: a motor's `motor_temperature` at or above
  `motor_temperature_limit` (the detail names the hottest one); below it, at or above
  `motor_temperature_warning`, a `motor_temperature_warning` event only (no mode change).
  Backends without temperatures (`motor_temperature` None) are not checked.
- `robot_not_active`: the robot reports DAMPING (its own watchdog fired) in NORMAL, or in
  SOFT_START after it had armed; the robot reporting ESTOP puts the layer in ESTOP.
Commands (`command`):
- `command_invalid`: wrong shape, NaN/inf, negative gains: rejected, the previous valid
  command is held (until `command_timeout`).
- `position_clipped` (targets into `[lower + margin, upper - margin]`), `velocity_clipped`
  (`|qd*| <= velocity_limit`), `gain_clipped` (`0 <= Kp <= max_kp`, `0 <= Kd <= max_kd`),
  `feedforward_clipped` (`|tau_ff| <= torque_limit`).
- soft start: for `soft_start_duration` after `start`/`resume`, targets are blended from the
  measured pose, `q* = q0 + w(s) (q*_c - q0)`, `qd*` and `tau_ff` scaled by `w(s)`, with the
  smoothstep `w`; commands carry `arm=True` so the robot's drivers leave their damping mode.
- `rate_limited`: `|q*_k - q*_{k-1}| <= max_target_rate * (t_k - t_{k-1})`.
- `torque_limited`: the torque the command asks for at the measured state,
  `Kp (q* - q) + Kd (qd* - qd) + tau_ff`, is brought within `+-torque_limit` by moving `q*`
  (when `Kp > 0`); the drivers clip their torque anyway, this keeps the target consistent.

Also recorded: `controller_error` (the loop caught an exception from the controller),
`estop`, `damping` (with the reason), `resume_refused`, and the mode changes `soft_start`,
`soft_start_done` (logged at INFO).

DAMPING and ESTOP send `Kp = 0`, `Kd = damping_kd`, `qd* = 0`, `tau_ff = 0`: the legs yield
slowly under the robot's weight instead of collapsing or holding a possibly wrong target.
The default `damping_kd` is the standing Kd (`dynamics.actuator.default_gains`), stable with the
explicit PD at 2 ms on every robot; Go2 then sits down from its stance at up to ~1 m/s in
MuJoCo (0.64 m/s with Kd 4; Kd 6 and more excite the light calves at 2 ms).
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from native import c_library

from . import safety_kernel
from .interface import JointCommand, JointMap, Measurement, RobotMode
from .pose import interpolate_pose
from .queued_logging import log_later

logger = logging.getLogger(__name__)
# [s] timeouts are exceeded when passed by more than this: robot times are sums of float
# periods, so "exactly at the timeout" must not depend on round-off
TIME_EPS = 1e-9


class Mode(enum.Enum):
    IDLE = "idle"
    SOFT_START = "soft_start"
    NORMAL = "normal"
    DAMPING = "damping"
    ESTOP = "estop"


@dataclass(frozen=True)
class SafetyConfig:
    """Thresholds of the safety layer. Per-joint values may be scalars or `(nu,)`; None means
    the default derived from the `JointMap` (stated per field).

    command_timeout: [s] longest time without a valid controller command.
    measurement_timeout: [s] largest accepted measurement age, and longest time without one.
    soft_start_duration: [s] blend from the measured pose to the controller's targets.
    damping_kd: [N m s/rad] Kd in DAMPING/ESTOP; None: the standing Kd.
    position_margin: [rad] targets are kept this far inside the joint limits.
    position_tolerance: [rad] measured positions beyond the limits by more: DAMPING.
    velocity_factor: measured `|qd| > velocity_factor * velocity_limit`: DAMPING.
    max_target_rate: [rad/s] largest rate of change of `q*`; None: the joint velocity limits.
    max_kp, max_kd: largest gains; None: 4x the standing gains.
    torque_limit: [N m] largest commanded torque; None: the joints' effort limits.
    max_roll, max_pitch: [rad] largest |roll|, |pitch| of the base (`roll_pitch`) before
        DAMPING; None: not checked. The defaults are the fall limits legged_gym-style
        trainers terminate episodes at (unitree_rl_gym: |roll| > 0.8, |pitch| > 1.0), far
        beyond any walking or standing attitude.
    motor_temperature_warning, motor_temperature_limit: [deg C] a warning event at or above
        the first, DAMPING at or above the second; None: not checked. Unitree publishes no
        thermal limit for the Go2's joint motors that we could find: 70 and 85 deg C are
        conservative choices of ours (to be raised once the drivers' own over-temperature
        cut-off is known), meant to lay the robot down under damping before the drivers
        cut torque on their own.
    arithmetic: "c" (`hardware.safety_kernel`: the command's shaping compiled), "numpy", or
        "auto" (C where a C compiler is found, else NumPy): the same results to the bit.
    """

    command_timeout: float = 0.1
    measurement_timeout: float = 0.05
    soft_start_duration: float = 1.0
    damping_kd: object = None
    position_margin: float = 0.0
    position_tolerance: float = 0.2
    velocity_factor: float = 1.5
    max_target_rate: object = None
    max_kp: object = None
    max_kd: object = None
    torque_limit: object = None
    max_roll: float | None = 0.8
    max_pitch: float | None = 1.0
    motor_temperature_warning: float | None = 70.0
    motor_temperature_limit: float | None = 85.0
    arithmetic: str = "auto"

    def __post_init__(self):
        c_library.check_arithmetic(self.arithmetic)
        rate = self.max_target_rate
        if rate is not None and not np.all(np.asarray(rate, float) > 0):
            raise ValueError(f"max_target_rate must be positive [rad/s] (or None), got {rate}")
        for name in ("max_roll", "max_pitch"):
            value = getattr(self, name)
            if value is not None and not (0.0 < float(value) <= np.pi):
                raise ValueError(f"{name} must be in (0, pi] [rad] (or None), got {value}")
        warn, limit = self.motor_temperature_warning, self.motor_temperature_limit
        if warn is not None and limit is not None and float(warn) > float(limit):
            raise ValueError(
                f"motor_temperature_warning ({warn} deg C) must not exceed "
                f"motor_temperature_limit ({limit} deg C)"
            )


@dataclass
class SafetyEvent:
    """One intervention: `kind` over robot times `[start, end]`, on `count` consecutive ticks.

    detail: human-readable specifics of the first tick; joints: indices involved (if any)."""

    kind: str
    start: float
    end: float
    count: int = 1
    detail: str = ""
    joints: tuple = ()


@dataclass
class EventLog:
    """Interventions, merged over consecutive ticks, with totals per kind."""

    events: list = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    _open: dict = field(default_factory=dict)  # kind -> (event, tick of its last record)

    def record(self, tick: int, now: float, kind: str, detail: str = "", joints=()) -> None:
        self.totals[kind] = self.totals.get(kind, 0) + 1
        ev, last = self._open.get(kind, (None, -2))
        if ev is not None and last >= tick - 1:
            if last != tick:
                ev.count += 1
            ev.end = now
        else:
            ev = SafetyEvent(kind, now, now, 1, detail, tuple(int(j) for j in joints))
            self.events.append(ev)
            if kind in _SEVERE:
                level = logging.ERROR
            elif kind in _INFO:
                level = logging.INFO
            else:
                level = logging.WARNING
            # made and written off a real-time loop's thread inside `queued_logging`
            log_later(logger, level, "t=%.4f %s %s %s", now, kind, detail, ev.joints or "")
        self._open[kind] = (ev, tick)

    def kinds(self) -> set:
        return {e.kind for e in self.events}

    def first(self, kind: str) -> SafetyEvent | None:
        return next((e for e in self.events if e.kind == kind), None)


_INFO = {"soft_start", "soft_start_done"}  # mode changes, not interventions
_SEVERE = {
    "damping",
    "estop",
    "measurement_timeout",
    "command_timeout",
    "joint_velocity_violation",
    "joint_position_violation",
    "robot_not_active",
    "base_tilt_violation",
    "motor_temperature_violation",
}


# --------------------------------------------------------------------------- pure checks
def command_error(command: JointCommand, nu: int) -> str | None:
    """Why `command` must be rejected (shape, NaN/inf, negative gains), or None."""
    shape = command.shape_error(nu)
    if shape is not None:
        return shape
    if not command.is_finite():
        bad = [n for n in JointCommand.ARRAYS if not np.all(np.isfinite(getattr(command, n)))]
        return f"non-finite values in {', '.join(bad)}"
    if (command.kp < 0).any() or (command.kd < 0).any():
        return "negative gains"
    return None


def measurement_error(measurement: Measurement, nu: int) -> str | None:
    """Why `measurement` must be rejected (shape, NaN/inf, degenerate quaternion), or None."""
    shapes = {"joint_q": (nu,), "joint_qd": (nu,), "base_quat": (4,)}
    if measurement.motor_temperature is not None:
        shapes["motor_temperature"] = (nu,)
    for name, shape in shapes.items():
        if np.shape(getattr(measurement, name)) != shape:
            return f"{name} has shape {np.shape(getattr(measurement, name))}, expected {shape}"
    if not measurement.is_finite():
        return "non-finite values or a degenerate quaternion"
    return None


def roll_pitch(quat_xyzw) -> tuple[float, float]:
    """Roll and pitch [rad] of an orientation `quat_xyzw (4,)` (base to world; normalised
    here): the Z-Y-X Euler angles of `R = Rz(yaw) Ry(pitch) Rx(roll)`,

        roll = atan2(R[2, 1], R[2, 2]) in (-pi, pi],   pitch = asin(-R[2, 0]) in [-pi/2, pi/2].

    Upside down, |roll| is near pi whatever the pitch."""
    x, y, z, w = (float(v) for v in quat_xyzw)  # R's last row, in floats (`rotation_from_quat`)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    r20, r21, r22 = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)
    return math.atan2(r21, r22), math.asin(min(max(-r20, -1.0), 1.0))


def tilt_error(quat_xyzw, max_roll: float | None, max_pitch: float | None) -> str | None:
    """Why the base is tilted too far (`|roll| > max_roll` or `|pitch| > max_pitch`, [rad];
    None disables that angle), with the angle in rad and degrees; None when it is not."""
    roll, pitch = roll_pitch(quat_xyzw)
    for name, angle, limit in (("roll", roll, max_roll), ("pitch", pitch, max_pitch)):
        if limit is not None and abs(angle) > limit:
            degrees = np.degrees(angle)
            return f"{name} {angle:+.3f} rad ({degrees:+.1f} deg) beyond +-{limit:.3f} rad"
    return None


def hot_motors(temperature, limit: float | None) -> np.ndarray:
    """Mask `(nu,)` of the motors whose `temperature (nu,)` [deg C] is at or above `limit`
    (all False when either is None)."""
    if temperature is None:
        return np.zeros(0, dtype=bool)
    temperature = np.asarray(temperature, dtype=float)
    if limit is None:
        return np.zeros(temperature.shape, dtype=bool)
    return temperature >= float(limit)


def clip_with_mask(x, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """`clip(x, lower, upper)` and the mask of the entries that moved (two ufuncs: `np.clip`'s
    dispatch costs more than the arithmetic on twelve joints, on the 500 Hz path)."""
    y = np.minimum(np.maximum(x, lower), upper)
    return y, y != x


def rate_limit(target, previous, max_step) -> tuple[np.ndarray, np.ndarray]:
    """`previous + clip(target - previous, -max_step, max_step)` and the mask of limited entries."""
    step = np.minimum(np.maximum(target - previous, -max_step), max_step)
    limited = np.abs(step - (target - previous)) > 1e-12
    return previous + step, limited


def limit_torque(command: JointCommand, q, qd, torque_limit) -> tuple[JointCommand, np.ndarray]:
    """Move `q*` so that `Kp (q* - q) + Kd (qd* - qd) + tau_ff` lies in `+-torque_limit` at the
    measured `q (nu,)`, `qd (nu,)`; joints with `Kp = 0` are left alone. Returns the command
    and the mask of joints that were over the limit."""
    tau = command.torque(q, qd)
    over = np.abs(tau) > torque_limit * (1 + 1e-9)
    fixable = over & (command.kp > 0)
    if not fixable.any():
        return command, over
    rest = command.kd * (command.qd_target - qd) + command.tau_ff
    wanted = np.clip(tau, -torque_limit, torque_limit)
    safe_kp = np.where(fixable, command.kp, 1.0)
    q_target = np.where(fixable, q + (wanted - rest) / safe_kp, command.q_target)
    return command.replace(q_target=q_target), over


def _per_joint(value, default, nu: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(default if value is None else value, float), (nu,)).copy()


# --------------------------------------------------------------------------- the layer
class SafetyLayer:
    """Stateful filter from controller commands to robot commands (see module docstring)."""

    def __init__(self, joint_map: JointMap, config: SafetyConfig | None = None):
        self.joint_map = jm = joint_map
        self.config = cfg = config or SafetyConfig()
        nu = jm.nu
        self.damping_kd = _per_joint(cfg.damping_kd, jm.kd_default, nu)
        self.max_target_rate = _per_joint(cfg.max_target_rate, jm.velocity_limit, nu)
        self.max_kp = _per_joint(cfg.max_kp, 4.0 * jm.kp_default, nu)
        self.max_kd = _per_joint(cfg.max_kd, 4.0 * jm.kd_default, nu)
        self.torque_limit = _per_joint(cfg.torque_limit, jm.effort_limit, nu)
        self.lower = jm.lower + cfg.position_margin
        self.upper = jm.upper - cfg.position_margin
        if np.any(self.lower > self.upper):
            raise ValueError("position_margin leaves no room between the joint limits")
        self.kernel = None
        if c_library.compiled_arithmetic(cfg.arithmetic):
            limits = (self.lower, self.upper, jm.velocity_limit, self.max_kp, self.max_kd,
                      self.torque_limit)  # fmt: skip
            self.kernel = safety_kernel.ShapeKernel(np.stack(limits))
        self.log = EventLog()
        self.mode = Mode.IDLE
        self.tick = 0
        self.sequence = 0
        self.measurement: Measurement | None = None
        self.last_measurement_time = -np.inf  # robot time of the last accepted measurement
        self.last_command: JointCommand | None = None
        self.last_command_time = -np.inf
        self.last_q_target: np.ndarray | None = None
        self.last_output_time = -np.inf
        self.start_time = -np.inf
        self.q_start: np.ndarray | None = None
        self.robot_armed = False

    # ------------------------------------------------------------- public state
    @property
    def events(self) -> list:
        return self.log.events

    @property
    def counters(self) -> dict:
        """Ticks with each kind of intervention."""
        return dict(self.log.totals)

    def record(self, now: float, kind: str, detail: str = "", joints=()) -> None:
        """Log an intervention made outside the layer (e.g. the loop caught a controller error)."""
        self.log.record(self.tick, now, kind, detail, joints)

    _record = record

    # ------------------------------------------------------------- mode changes
    def start(self, now: float, measurement: Measurement) -> None:
        """Begin (or restart) with a soft start from `measurement`'s joint pose."""
        if self.mode is Mode.ESTOP:
            self._record(now, "resume_refused", "e-stop is latched")
            return
        error = measurement_error(measurement, self.joint_map.nu)
        if error is not None:
            raise ValueError(f"cannot start from an invalid measurement: {error}")
        self.mode = Mode.SOFT_START
        self.measurement = measurement
        self.last_measurement_time = measurement.timestamp
        self.start_time = now
        self.q_start = measurement.joint_q.copy()
        self.last_q_target = measurement.joint_q.copy()
        self.last_output_time = now
        self.last_command = None
        self.last_command_time = now
        self.robot_armed = False  # seen ACTIVE since this start
        self._record(now, "soft_start", f"{self.config.soft_start_duration:.2f} s")

    resume = start

    def estop(self, now: float, reason: str = "requested") -> None:
        """Latch ESTOP: damping from now on, `resume` refused."""
        if self.mode is not Mode.ESTOP:
            self.mode = Mode.ESTOP
            self._record(now, "estop", reason)

    def _damp(self, now: float, kind: str, detail: str = "", joints=()) -> None:
        self._record(now, kind, detail, joints)
        if self.mode in (Mode.SOFT_START, Mode.NORMAL):
            self.mode = Mode.DAMPING
            self._record(now, "damping", f"after {kind}")

    # ------------------------------------------------------------- per tick
    def observe(
        self, now: float, measurement: Measurement | None, fault: str | None = None
    ) -> bool:
        """Accept `measurement` (True) or reject it (False, recorded). Call first each tick.

        fault: a fault reported beside the measurement (the state estimator's,
        `EstimatedRobot.estimator_fault`): recorded as `estimator_fault`, DAMPING."""
        self.tick += 1
        if fault is not None:
            self._damp(now, "estimator_fault", fault)
        if measurement is None:
            self._record(now, "measurement_missing")
            return False
        error = measurement_error(measurement, self.joint_map.nu)
        if error is not None:
            self._record(now, "measurement_invalid", error)
            return False
        age = now - measurement.timestamp
        if age > self.config.measurement_timeout + TIME_EPS:
            self._record(now, "measurement_stale", f"age {age * 1e3:.1f} ms")
            return False
        self.measurement = measurement
        self.last_measurement_time = measurement.timestamp
        return True

    def command(self, now: float, command: JointCommand | None) -> JointCommand:
        """The command to write this tick, from the controller's newest `command` (or None)."""
        if self.mode is Mode.IDLE:
            raise RuntimeError("SafetyLayer.start(now, measurement) must be called first")
        nu = self.joint_map.nu
        if command is not None:
            error = command_error(command, nu)
            if error is not None:
                self._record(now, "command_invalid", error)
            else:
                self.last_command, self.last_command_time = command, now
        if self.mode in (Mode.SOFT_START, Mode.NORMAL):
            self._watchdogs(now)
        if self.mode in (Mode.DAMPING, Mode.ESTOP) or self.last_command is None:
            return self._output_damping(now)
        return self._shape(now, self.last_command)

    def _watchdogs(self, now: float) -> None:
        cfg, m = self.config, self.measurement
        if now - self.last_measurement_time > cfg.measurement_timeout + TIME_EPS:
            age = now - self.last_measurement_time
            self._damp(now, "measurement_timeout", f"last accepted {age * 1e3:.1f} ms ago")
            return
        if now - self.last_command_time > cfg.command_timeout + TIME_EPS:
            age = now - self.last_command_time
            self._damp(now, "command_timeout", f"last valid command {age * 1e3:.1f} ms ago")
            return
        fast = np.abs(m.joint_qd) > cfg.velocity_factor * self.joint_map.velocity_limit
        if fast.any():
            detail = f"|qd| = {np.max(np.abs(m.joint_qd[fast])):.2f} rad/s"
            self._damp(now, "joint_velocity_violation", detail, np.flatnonzero(fast))
            return
        tol = cfg.position_tolerance
        out = (m.joint_q < self.joint_map.lower - tol) | (m.joint_q > self.joint_map.upper + tol)
        if out.any():
            self._damp(now, "joint_position_violation", "", np.flatnonzero(out))
            return
        tilt = tilt_error(m.base_quat, cfg.max_roll, cfg.max_pitch)
        if tilt is not None:
            self._damp(now, "base_tilt_violation", tilt)
            return
        if self._motor_temperatures(now, m.motor_temperature):
            return
        if m.robot_mode == RobotMode.ESTOP:
            self.estop(now, "robot reports ESTOP")
        elif m.robot_mode == RobotMode.ACTIVE:
            self.robot_armed = True
        elif self.mode is Mode.NORMAL or self.robot_armed:
            # DAMPING is expected only while the soft start is arming the drivers
            self._damp(now, "robot_not_active", "the robot's drivers are in DAMPING")

    def _motor_temperatures(self, now: float, temperature) -> bool:
        """Record a warning or damp for hot motors; True when it damped."""
        cfg = self.config
        checks = (
            ("motor_temperature_violation", cfg.motor_temperature_limit),
            ("motor_temperature_warning", cfg.motor_temperature_warning),
        )
        for kind, limit in checks:
            hot = hot_motors(temperature, limit)
            if not hot.any():
                continue
            hottest = int(np.argmax(temperature))
            detail = (
                f"{self.joint_map.names[hottest]} at {float(temperature[hottest]):.1f} deg C "
                f"(limit {limit:.1f})"
            )
            if kind == "motor_temperature_violation":
                self._damp(now, kind, detail, np.flatnonzero(hot))
                return True
            self._record(now, kind, detail, np.flatnonzero(hot))
            return False
        return False

    def _next(self, now: float, command: JointCommand) -> JointCommand:
        return command.replace(**self._next_stamp())

    def _next_stamp(self) -> dict:
        """The next output's `timestamp` (the accepted measurement's) and `sequence`."""
        self.sequence += 1
        m = self.measurement
        return {"timestamp": m.timestamp if m is not None else float("nan"),
                "sequence": self.sequence}  # fmt: skip

    def _output_damping(self, now: float) -> JointCommand:
        q = np.clip(self.measurement.joint_q, self.lower, self.upper)  # unused with Kp = 0
        self.last_q_target, self.last_output_time = q.copy(), now
        return self._next(now, JointCommand.damping(q, self.damping_kd))

    def _shape(self, now: float, c: JointCommand) -> JointCommand:
        if self.kernel is not None:
            return self._shape_compiled(now, c)
        jm, m = self.joint_map, self.measurement
        q_t, moved = clip_with_mask(c.q_target, self.lower, self.upper)
        if moved.any():
            self._record(now, "position_clipped", "", np.flatnonzero(moved))
        qd_t, moved = clip_with_mask(c.qd_target, -jm.velocity_limit, jm.velocity_limit)
        if moved.any():
            self._record(now, "velocity_clipped", "", np.flatnonzero(moved))
        kp, moved_p = clip_with_mask(c.kp, 0.0, self.max_kp)
        kd, moved_d = clip_with_mask(c.kd, 0.0, self.max_kd)
        if (moved_p | moved_d).any():
            self._record(now, "gain_clipped", "", np.flatnonzero(moved_p | moved_d))
        tau_ff, moved = clip_with_mask(c.tau_ff, -self.torque_limit, self.torque_limit)
        if moved.any():
            self._record(now, "feedforward_clipped", "", np.flatnonzero(moved))

        arm = False
        if self.mode is Mode.SOFT_START:
            arm = True
            s = (now - self.start_time) / max(self.config.soft_start_duration, 1e-9)
            w = float(interpolate_pose(0.0, 1.0, s))
            q_t = interpolate_pose(self.q_start, q_t, s)
            qd_t, tau_ff = w * qd_t, w * tau_ff
            if s >= 1.0:
                self.mode = Mode.NORMAL
                self._record(now, "soft_start_done")

        max_step = self.max_target_rate * max(now - self.last_output_time, 0.0)
        q_t, limited = rate_limit(q_t, self.last_q_target, max_step)
        if limited.any():
            self._record(now, "rate_limited", "", np.flatnonzero(limited))

        out = JointCommand(q_t, qd_t, kp, kd, tau_ff, arm=arm)
        out, over = limit_torque(out, m.joint_q, m.joint_qd, self.torque_limit)
        if over.any():
            self._record(now, "torque_limited", "", np.flatnonzero(over))
        # the blend, rate and torque steps start from measured poses, which may lie outside
        # the limits (a joint pushed past its stop): the targets never do
        q_t, moved = clip_with_mask(out.q_target, self.lower, self.upper)
        if moved.any():
            self._record(now, "position_clipped", "after blending", np.flatnonzero(moved))
            out = out.replace(q_target=q_t)
        self.last_q_target, self.last_output_time = out.q_target.copy(), now
        return self._next(now, out)

    def _shape_compiled(self, now: float, c: JointCommand) -> JointCommand:
        """`_shape` with its arithmetic in C (`hardware.safety_kernel`): the same output and
        the same events, in the same order."""
        k, m = self.kernel, self.measurement
        k.command[0], k.command[1], k.command[2] = c.q_target, c.qd_target, c.kp
        k.command[3], k.command[4] = c.kd, c.tau_ff
        k.last_q[...], k.q[...], k.qd[...] = self.last_q_target, m.joint_q, m.joint_qd
        k.max_step[...] = self.max_target_rate * max(now - self.last_output_time, 0.0)
        soft = self.mode is Mode.SOFT_START
        s = -1.0
        if soft:
            s = (now - self.start_time) / max(self.config.soft_start_duration, 1e-9)
            k.q_start[...] = self.q_start
        bits = k(s)
        for i, (kind, detail) in enumerate(safety_kernel.MASKS):
            if i == safety_kernel.BEFORE_BLEND and soft and s >= 1.0:
                self.mode = Mode.NORMAL
                self._record(now, "soft_start_done")
            if bits >> i & 1:
                self._record(now, kind, detail, np.flatnonzero(k.masks[i]))
        out = k.out.copy()  # the command's five arrays, rows of one copy
        self.last_q_target, self.last_output_time = out[0].copy(), now
        return JointCommand(*out, arm=soft, **self._next_stamp())
