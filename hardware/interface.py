"""The hardware control interface: what a robot driver reads and writes, and what a controller is.

A robot (real, simulated, or remote) implements `RobotInterface`:

    measurement = robot.read()      # the newest valid `Measurement`, or None before the first
    robot.write(command)            # a `JointCommand`: per joint (q*, qd*, Kp, Kd, tau_ff)
    robot.now()                     # current time on the robot's clock [s]
    robot.close()

and the motor drivers on the robot apply, at their own (fast) rate and until the next command,

    tau = clip(Kp (q* - q) + Kd (qd* - qd) + tau_ff, -tau_max, tau_max)          [N m]

(`hardware.motor.MotorDriver` is that driver for the simulated robots). A controller (a
fixed pose, a neural policy, MPC) implements `Controller`:

    controller.reset(measurement)                       # before the loop starts (compile here)
    command = controller(measurement, t, velocity)      # JointCommand, or None: "nothing new"

where `t` [s] is the time since the loop started and `velocity` the operator's
`VelocityCommand`, which may change at every call (a joystick, a script). The control loop
(`hardware.control_loop`) calls the controller at its rate and passes every command
through the safety layer (`hardware.safety`) before `robot.write`.

Conventions (the robot model's, `dynamics.Model`; `JointMap.describe()` prints them):

- Joints: the model's actuated joints in `v[6:]` order (`model.actuated_joint_names`), e.g. for
  Go2 FL_hip, FL_thigh, FL_calf, FR_..., RL_..., RR_... Every per-joint array is `(nu,)` in
  that order. A driver whose motors are numbered differently (Unitree's SDK numbers Go2's
  legs FR, FL, RR, RL) permutes with `JointMap.permutation(driver_names)`.
- Units: SI. Joint positions [rad] (prismatic: [m]), rates [rad/s], torques [N m],
  Kp [N m/rad], Kd [N m s/rad], times [s].
- Frames: world z up. `base_quat` is the base orientation, base to world, `[x, y, z, w]`
  (Pinocchio's order; MuJoCo's is `[w, x, y, z]`). `base_angular_velocity` (the gyro) and
  `base_linear_velocity` are expressed in the *base* frame, exactly `v[3:6]` and `v[0:3]` of
  the model's velocity. `base_linear_acceleration` is what an accelerometer at the base origin
  measures, the specific force `R^T (a - g)` in the base frame: `(0, 0, +9.81)` at rest,
  level. `base_position` is the base origin in the world frame, `q[0:3]`.
- Times: `Measurement.timestamp` is on the robot's clock. A command carries in `timestamp` the
  timestamp of the measurement it was computed from, so the robot can reject stale commands
  without synchronised clocks (`now - command.timestamp > max_age`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

GRAVITY = 9.81  # [m/s^2], world -z; used for the accelerometer convention only


class RobotMode(enum.IntEnum):
    """The mode of the robot-side motor drivers, reported in every measurement.

    DAMPING: `Kp = 0`, `Kd > 0`, `tau_ff = 0`: the legs yield slowly (power-up state, and the
        state after the robot-side watchdog fired). Latched: only a command with `arm=True`
        leaves it.
    ACTIVE: applying the latest command.
    ESTOP: damping, latched until the robot process restarts.
    """

    DAMPING = 0
    ACTIVE = 1
    ESTOP = 2


def _vector(x, n: int, name: str) -> np.ndarray:
    """`x` as a float64 array of shape `(n,)` (scalars broadcast); raises on a wrong shape."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        return np.full(n, float(a))
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
    return a.copy()


def rotation_from_quat(quat_xyzw) -> np.ndarray:
    """Rotation matrix `(3, 3)` (base to world) of a quaternion `[x, y, z, w]` (normalised)."""
    x, y, z, w = (float(v) for v in quat_xyzw)  # Python floats: cheaper than NumPy scalars
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


# --------------------------------------------------------------------------- joint map
@dataclass(frozen=True)
class JointMap:
    """Joint order, limits and default gains of a robot's actuated joints, from its model.

    All arrays are `(nu,)` in the model's actuated order (`v[6:]`, `q[7:]` for a floating base).

    robot: model name.
    names: joint names.
    q_index, v_index: index of each joint in the model's `q` and `v`.
    lower, upper: position limits [rad]; velocity_limit [rad/s]; effort_limit [N m].
    q_default: the standing pose's joint angles [rad].
    kp_default, kd_default: standing PD gains (`dynamics.actuator.default_gains`).
    """

    robot: str
    names: tuple
    q_index: np.ndarray
    v_index: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    q_default: np.ndarray
    kp_default: np.ndarray
    kd_default: np.ndarray

    @property
    def nu(self) -> int:
        return len(self.names)

    @classmethod
    def from_model(cls, model, kp=None, kd=None) -> JointMap:
        """The joint map of a `dynamics.Model`; gains default to
        `dynamics.actuator.default_gains`."""
        from dynamics.actuator import default_gains

        nu = model.nu
        nq_base, nv_base = model.nq - nu, model.nv - nu
        default_kp, default_kd = default_gains(model)
        return cls(
            robot=model.name,
            names=tuple(model.actuated_joint_names),
            q_index=np.arange(nq_base, model.nq),
            v_index=np.arange(nv_base, model.nv),
            lower=np.asarray(model.lower_position_limit, dtype=float)[nq_base:].copy(),
            upper=np.asarray(model.upper_position_limit, dtype=float)[nq_base:].copy(),
            velocity_limit=np.asarray(model.velocity_limit, dtype=float)[nv_base:].copy(),
            effort_limit=np.asarray(model.effort_limit, dtype=float)[nv_base:].copy(),
            q_default=np.asarray(model.q_standing, dtype=float)[nq_base:].copy(),
            kp_default=_vector(default_kp if kp is None else kp, nu, "kp"),
            kd_default=_vector(default_kd if kd is None else kd, nu, "kd"),
        )

    def permutation(self, driver_names) -> np.ndarray:
        """`perm (nu,)` with `ours = driver[perm]` and `driver[perm] = ours` for every per-joint
        array, given the joint names in the driver's order. Raises if the sets differ."""
        driver_names = tuple(driver_names)
        if sorted(driver_names) != sorted(self.names):
            missing = set(self.names) ^ set(driver_names)
            raise ValueError(f"driver joints do not match {self.robot}'s: {sorted(missing)}")
        return np.array([driver_names.index(n) for n in self.names])

    def describe(self) -> str:
        """A table of the conventions: index, name, limits, default pose and gains."""
        lines = [
            f"{self.robot}: {self.nu} actuated joints; q [rad], qd [rad/s], tau [N m], "
            "Kp [N m/rad], Kd [N m s/rad]; base quaternion xyzw (base to world), gyro and "
            "base velocity in the base frame",
            f"{'i':>2} {'name':<16} {'q idx':>5} {'v idx':>5} {'lower':>8} {'upper':>8} "
            f"{'vmax':>6} {'taumax':>7} {'q0':>7} {'Kp':>6} {'Kd':>5}",
        ]
        for i, name in enumerate(self.names):
            lines.append(
                f"{i:>2} {name:<16} {self.q_index[i]:>5} {self.v_index[i]:>5} "
                f"{self.lower[i]:>8.3f} {self.upper[i]:>8.3f} {self.velocity_limit[i]:>6.1f} "
                f"{self.effort_limit[i]:>7.2f} {self.q_default[i]:>7.3f} "
                f"{self.kp_default[i]:>6.1f} {self.kd_default[i]:>5.2f}"
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------- messages
@dataclass(frozen=True, eq=False)
class Measurement:
    """One timestamped sample of the robot's sensors.

    timestamp: [s] robot clock, when the sample was taken.
    sequence: the robot's sample counter (increases by one per sample sent).
    joint_q (nu,) [rad], joint_qd (nu,) [rad/s]: joint encoders, `JointMap` order.
    base_quat (4,): IMU orientation, base to world, `[x, y, z, w]`.
    base_angular_velocity (3,) [rad/s]: gyro, base frame (= the model's `v[3:6]`).
    base_linear_acceleration (3,) [m/s^2]: accelerometer, specific force `R^T (a - g)` in the
        base frame (`+9.81` along the base z axis at rest, level).
    joint_tau (nu,) [N m] or None: torque the drivers apply (an estimate on hardware).
    base_linear_velocity (3,) [m/s] or None: base-frame velocity of the base origin (= `v[0:3]`),
        from a state estimator on hardware, exact in simulation.
    base_position (3,) [m] or None: base origin in the world (= `q[0:3]`), simulation/mocap.
    robot_mode: the drivers' `RobotMode`.
    foot_force (4,) [N] or None: each foot's contact sensor, feet in the model's order
        (`Model.foot_names`: FL, FR, HL/RL, HR/RR); the normal force in simulation, the
        sensor's reading scaled to newtons on a Go2 (`hardware.go2.conversions`).
    motor_temperature (nu,) [deg C] or None: each joint's motor temperature.
    base_state_source: where `base_linear_velocity` and `base_position` came from:
        "ground_truth" (a simulator's true state), "sport_state" (the Go2's sport service),
        "estimator" (`hardware.estimator`), or None when they are absent.
    """

    timestamp: float
    sequence: int
    joint_q: np.ndarray
    joint_qd: np.ndarray
    base_quat: np.ndarray
    base_angular_velocity: np.ndarray
    base_linear_acceleration: np.ndarray
    joint_tau: np.ndarray | None = None
    base_linear_velocity: np.ndarray | None = None
    base_position: np.ndarray | None = None
    robot_mode: RobotMode = RobotMode.ACTIVE
    foot_force: np.ndarray | None = None
    motor_temperature: np.ndarray | None = None
    base_state_source: str | None = None

    @property
    def nu(self) -> int:
        return len(self.joint_q)

    @property
    def base_rotation(self) -> np.ndarray:
        """`R (3, 3)`, base to world."""
        return rotation_from_quat(self.base_quat)

    @property
    def projected_gravity(self) -> np.ndarray:
        """Unit gravity direction in the base frame, `R^T (0, 0, -1)` (`(0, 0, -1)` level)."""
        return -self.base_rotation[2, :]

    def arrays(self) -> dict:
        """The array fields that are present, by name."""
        names = (
            "joint_q",
            "joint_qd",
            "base_quat",
            "base_angular_velocity",
            "base_linear_acceleration",
            "joint_tau",
            "base_linear_velocity",
            "base_position",
            "foot_force",
            "motor_temperature",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def is_finite(self) -> bool:
        """All numbers finite, a non-degenerate quaternion and a finite timestamp."""
        if not math.isfinite(self.timestamp):
            return False
        values = np.concatenate([np.ravel(a) for a in self.arrays().values()])
        quat = self.base_quat
        return bool(np.isfinite(values).all() and quat @ quat > 0.25)

    def replace(self, **changes) -> Measurement:
        return dataclasses.replace(self, **changes)


def state_from_measurement(measurement: Measurement) -> tuple[np.ndarray, np.ndarray]:
    """The model's full state `q (7 + nu,)`, `v (6 + nu,)` from a measurement.

    Needs `base_position` and `base_linear_velocity` (simulation, or a state estimator on
    hardware); raises ValueError without them. This is the state an MPC starts from."""
    m = measurement
    if m.base_position is None or m.base_linear_velocity is None:
        raise ValueError(
            "the measurement has no base position/velocity estimate; a state estimator must "
            "fill base_position and base_linear_velocity before a full-state controller runs"
        )
    quat = np.asarray(m.base_quat, dtype=float)
    q = np.concatenate([m.base_position, quat / np.linalg.norm(quat), m.joint_q])
    v = np.concatenate([m.base_linear_velocity, m.base_angular_velocity, m.joint_qd])
    return q, v


def measurement_from_state(
    q,
    v,
    *,
    timestamp: float,
    sequence: int,
    base_linear_acceleration=None,
    joint_tau=None,
    robot_mode: RobotMode = RobotMode.ACTIVE,
) -> Measurement:
    """The ideal (noise-free, full-state) measurement of a model state `q (nq,)`, `v (nv,)`.

    Without an acceleration, the accelerometer reads the static specific force `R^T (0,0,g)`."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    rotation = rotation_from_quat(q[3:7])
    if base_linear_acceleration is None:
        base_linear_acceleration = rotation.T @ np.array([0.0, 0.0, GRAVITY])
    return Measurement(
        timestamp=float(timestamp),
        sequence=int(sequence),
        joint_q=q[7:].copy(),
        joint_qd=v[6:].copy(),
        base_quat=q[3:7].copy(),
        base_angular_velocity=v[3:6].copy(),
        base_linear_acceleration=np.asarray(base_linear_acceleration, dtype=float).copy(),
        joint_tau=None if joint_tau is None else np.asarray(joint_tau, dtype=float).copy(),
        base_linear_velocity=v[0:3].copy(),
        base_position=q[0:3].copy(),
        robot_mode=RobotMode(robot_mode),
        base_state_source="ground_truth",
    )


@dataclass(frozen=True, eq=False)
class JointCommand:
    """Per-joint targets and gains for the motor drivers, all `(nu,)` in `JointMap` order.

    q_target [rad], qd_target [rad/s], kp [N m/rad] >= 0, kd [N m s/rad] >= 0, tau_ff [N m].
    timestamp: [s] robot clock: the timestamp of the measurement this command was computed
        from (the robot rejects commands older than its `max_command_age`); NaN if unknown.
    sequence: sender's counter, strictly increasing (the robot rejects out-of-order commands).
    arm: ask the drivers to leave their latched DAMPING mode (the safety layer sets it during
        its soft start only; never leaves ESTOP).
    """

    q_target: np.ndarray
    qd_target: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau_ff: np.ndarray
    timestamp: float = float("nan")
    sequence: int = 0
    arm: bool = False

    ARRAYS = ("q_target", "qd_target", "kp", "kd", "tau_ff")

    @classmethod
    def create(
        cls, q_target, kp, kd, qd_target=0.0, tau_ff=0.0, *, nu: int | None = None, **meta
    ) -> JointCommand:
        """A command with scalars broadcast to `(nu,)` (`nu` defaults to `len(q_target)`)."""
        n = len(np.atleast_1d(q_target)) if nu is None else nu
        return cls(
            q_target=_vector(q_target, n, "q_target"),
            qd_target=_vector(qd_target, n, "qd_target"),
            kp=_vector(kp, n, "kp"),
            kd=_vector(kd, n, "kd"),
            tau_ff=_vector(tau_ff, n, "tau_ff"),
            **meta,
        )

    @classmethod
    def damping(cls, q, kd, **meta) -> JointCommand:
        """Damping mode: `Kp = 0`, `Kd = kd`, `qd* = 0`, `tau_ff = 0` (q* = `q`, unused)."""
        q = np.asarray(q, dtype=float)
        return cls.create(q, 0.0, kd, nu=len(q), **meta)

    @property
    def nu(self) -> int:
        return len(self.q_target)

    def torque(self, q, qd, effort_limit=None) -> np.ndarray:
        """The drivers' law `Kp (q* - q) + Kd (qd* - qd) + tau_ff`, clipped to `effort_limit`."""
        tau = self.kp * (self.q_target - q) + self.kd * (self.qd_target - qd) + self.tau_ff
        if effort_limit is not None:
            tau = np.clip(tau, -effort_limit, effort_limit)
        return tau

    def is_finite(self) -> bool:
        values = np.concatenate([np.ravel(getattr(self, n)) for n in self.ARRAYS])
        return bool(np.isfinite(values).all())

    def shape_error(self, nu: int) -> str | None:
        """None if every array is `(nu,)`, else a description of the first wrong one."""
        for n in self.ARRAYS:
            shape = np.shape(getattr(self, n))
            if shape != (nu,):
                return f"{n} has shape {shape}, expected ({nu},)"
        return None

    def replace(self, **changes) -> JointCommand:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class VelocityCommand:
    """The operator's command: base velocity in the heading frame (yaw-aligned, z up).

    vx [m/s] forward, vy [m/s] left, yaw_rate [rad/s] counter-clockwise, base_height [m] or
    None (the controller's default). A loop takes a `command_source(t) -> VelocityCommand`."""

    vx: float = 0.0
    vy: float = 0.0
    yaw_rate: float = 0.0
    base_height: float | None = None

    def as_array(self) -> np.ndarray:
        """`[vx, vy, yaw_rate] (3,)`, the layout policies observe."""
        return np.array([self.vx, self.vy, self.yaw_rate], dtype=float)


# --------------------------------------------------------------------------- protocols
@runtime_checkable
class RobotInterface(Protocol):
    """What a robot driver implements (see the module docstring for conventions)."""

    joint_map: JointMap

    def read(self) -> Measurement | None:
        """The newest valid measurement, or None if none arrived yet. Never blocks long."""
        ...

    def write(self, command: JointCommand) -> None:
        """Send a command to the drivers; it replaces the previous one."""
        ...

    def now(self) -> float:
        """Current time on the robot's clock [s] (an estimate for a remote robot)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SimulatedRobot(RobotInterface, Protocol):
    """A robot whose time the caller advances (deterministic, faster than real time)."""

    def advance(self, duration: float) -> None:
        """Run the drivers' PD and the physics for `duration` [s] of robot time."""
        ...


@runtime_checkable
class Controller(Protocol):
    """A fixed pose, a neural policy or an MPC, as the control loop calls it.

    reset(measurement): called once before the loop starts (and on resume), with the first
        valid measurement: initialise state, warm-start, and compile (JAX) here, not in the
        first call.
    __call__(measurement, t, command) -> JointCommand | None:
        measurement: the newest valid `Measurement` (accepted by the safety layer).
        t: [s] time since the loop started.
        command: the operator's `VelocityCommand`, possibly different at every call.
        Returns the joint command to apply until the next call, or None when there is nothing
        new and valid (e.g. an MPC solve failed): the safety layer then holds the previous
        command and goes to damping after its `command_timeout`. An exception is treated as
        None and logged.
    """

    def reset(self, measurement: Measurement) -> None: ...

    def __call__(
        self, measurement: Measurement, t: float, command: VelocityCommand
    ) -> JointCommand | None: ...
