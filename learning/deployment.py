"""Deploying an exported policy: its runtime and conventions, the command tour, the controller
behind the start-up sequence and the safety layer, on MuJoCo.

    summary, result = run_mujoco("examples/policies/go2_omni_proprio", seconds=5.0)
    row = run_tour("examples/policies/go2_omni_proprio", seed=0)   # one randomised tour
    check = tour_check(folder, seeds=range(8))                     # {"walked": k, "of": 8, ...}

The examples `deploy_policy.py` (MuJoCo) and `make_policy.py` are argument parsing and
printing over this module.

A run on MuJoCo (`run_mujoco`): the folder's runtime (`load_runtime`: its own NumPy runner,
onnxruntime or JAX), checked against the robot named in its policy.json (`check_conventions`,
`dynamics.load_robot`, any quadruped), inside `PolicyController` at its exported period and
gains; the safety layer and MuJoCo at `command_rate`, in simulated time. The robot stands
until `STAND_SECONDS`, then follows the commands (`command_schedule`: one after another,
ramped). Optionally under one draw of domain randomisation
(`hardware.backends.mujoco_disturbances`: payload, friction, command latency, pushes), and
with `estimator` on the measurements a real robot gives: IMU, joint and foot-force noise
(`hardware.sensor_noise.SensorNoise.go2`), MuJoCo's true base state removed and estimated
(`hardware.estimated_robot.EstimatedRobot`), the start-up sequence (`hardware.startup`)
standing the robot and handing over to the policy once the estimate is there. For a robot
other than Go2 the estimator's foot-force thresholds and the force noise, tuned on Go2, are
scaled by the robot's mass against Go2's (`estimator_config`, `sensor_noise`).

Tracking (`BaseVelocityRecorder`): MuJoCo's true base velocity in the heading frame (world
frame rotated by the base yaw), averaged over each command from `SETTLE_SECONDS` after it
starts; a fall: MuJoCo's true base height below `FELL_HEIGHT_FRACTION` of the robot's standing
base height.

The tour (`run_tour`, `tour_check`): `OMNI_TOUR` stretched onto the command box the policy was
trained on (`policy_export.command_ranges`; `tour_commands`), `TOUR_SEGMENT_SECONDS` per
command, ramped so that each change takes as long as on Go2's box (`tour_ramp`). A tour
"walked" (`walk_failures`) when the policy took over from the start-up sequence, the base never
fell, the safety layer never damped (no watchdog, tilt, joint limit or estimator fault), and the
mean linear tracking error over the commands stayed below `WALKED_LINEAR_ERROR`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

import numpy as np

import dynamics
from contact.terrain import Plane
from hardware import control_loop
from hardware.backends.mujoco_disturbances import DisturbanceRanges, DisturbedMuJoCoRobot
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.estimated_robot import EstimatedRobot
from hardware.estimator import EstimatorConfig, StateEstimator
from hardware.interface import JointMap, VelocityCommand, rotation_from_quat
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.sensor_noise import NoisySensors, SensorNoise
from hardware.startup import AutoStart, StartupSequence

from .policy import ACTION_CLIP
from .policy_adapter import PolicyController
from .policy_export import (
    DEFAULT_COMMAND_RANGES,
    command_ranges,
    load_exported_policy,
    load_numpy_policy,
    load_onnx_policy,
    policy_inputs,
)

STAND_SECONDS = 0.5  # [s] zero velocity command before the first command
SETTLE_SECONDS = 1.0  # [s] after a command change, not counted in its tracking
# the command ramp [m/s^2], [rad/s^2]: the largest change of the tour on Go2's box (vx 1 to -1
# and so on) takes 1.1 s of linear, 1 s of yaw ramp, within SETTLE_SECONDS (BENCHMARKS.md: with
# step changes the omnidirectional policy tripped the velocity watchdog at corner-to-corner
# jumps)
COMMAND_ACCEL = 2.0
COMMAND_YAW_ACCEL = 2.0
# (vx [m/s], vy [m/s], yaw rate [rad/s]) on Go2's box (`DEFAULT_COMMAND_RANGES`): the
# omnidirectional box's axes, a corner of each sign and mixed commands, ending at rest
OMNI_TOUR = ((0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.5, 0.0), (-1.0, 0.0, 0.0),
             (0.0, -0.5, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0), (1.0, 0.5, 1.0),
             (-1.0, -0.5, -1.0), (0.5, -0.3, 0.5), (0.0, 0.0, 0.0))  # fmt: skip
TOUR_SEGMENT_SECONDS = 2.5  # [s] per command of a tour: OMNI_TOUR's 11 take 28 s with the stand
COMMAND_RATE = 500.0  # [Hz] the safety layer's and MuJoCo's rate
SOFT_START_SECONDS = 0.2  # [s] the safety layer's soft start in front of a policy
# a tour walked only with the mean over its commands of |mean v_xy - c_xy| below this [m/s]
WALKED_LINEAR_ERROR = 0.1
# fell: MuJoCo's true base height below this fraction of the robot's standing base height
# (`dynamics.Model.q_standing[2]`; Go2 stands at 0.335 m, so 0.2 m)
FELL_HEIGHT_FRACTION = 0.6
ESTIMATED_INPUTS = ("base_linear_velocity", "base_position")  # what the estimator fills


# --------------------------------------------------------------------------- the policy
def load_runtime(folder: str, runtime: str):
    """`(policy, config)`: `policy(observation (n,)) -> action (nu,)` on NumPy arrays, run by
    the folder's own NumPy runner ("numpy"), onnxruntime ("onnx") or JAX ("jax", jit-compiled);
    `config` the folder's policy.json (its conventions)."""
    if runtime not in ("numpy", "onnx", "jax"):
        raise ValueError(f"runtime must be 'numpy', 'onnx' or 'jax', got {runtime!r}")
    numpy_policy = load_numpy_policy(folder)  # checks the folder; holds the conventions
    if runtime == "numpy":
        return numpy_policy, numpy_policy.config
    if runtime == "onnx":
        return load_onnx_policy(folder), numpy_policy.config
    import equinox as eqx

    return eqx.filter_jit(load_exported_policy(folder)), numpy_policy.config


def check_conventions(config: dict, joint_map: JointMap) -> None:
    """Raises ValueError naming what differs when the robot's joints (names, order), its
    standing pose (`q_default` [rad], per joint) or `PolicyController`'s action clip are not
    those the policy was exported with (`config`: its policy.json)."""
    policy_joints, robot_joints = list(config["joint_names"]), list(joint_map.names)
    if policy_joints != robot_joints:
        if len(policy_joints) != len(robot_joints):
            where = f"{len(policy_joints)} joints against {len(robot_joints)}"
        elif sorted(policy_joints) == sorted(robot_joints):
            where = "the same joints in another order: " + ", ".join(
                f"{i}: {a} vs {b}"
                for i, (a, b) in enumerate(zip(policy_joints, robot_joints))
                if a != b
            )
        else:
            where = (
                f"only the policy's {sorted(set(policy_joints) - set(robot_joints))}, only "
                f"the robot's {sorted(set(robot_joints) - set(policy_joints))}"
            )
        raise ValueError(
            f"the policy's joints {policy_joints} are not {joint_map.robot}'s {robot_joints} "
            f"({where})"
        )
    q_policy = np.asarray(config["q_default"], dtype=float)
    q_robot = np.asarray(joint_map.q_default, dtype=float)
    if q_policy.shape != q_robot.shape or not np.allclose(q_policy, q_robot):
        if q_policy.shape != q_robot.shape:
            where = f"{q_policy.size} values against {q_robot.size}"
        else:
            where = ", ".join(
                f"{name} {a:+.4f} vs {b:+.4f}"
                for name, a, b, close in zip(
                    robot_joints, q_policy, q_robot, np.isclose(q_policy, q_robot)
                )
                if not close
            )
        raise ValueError(
            f"the policy's q_default differs from {joint_map.robot}'s standing pose "
            f"(policy vs robot [rad]: {where})"
        )
    if float(config["action_clip"]) != float(ACTION_CLIP):
        raise ValueError(
            f"the policy was exported with action clip {config['action_clip']}, "
            f"PolicyController applies {ACTION_CLIP}"
        )


def policy_controller(policy, config: dict, joint_map: JointMap) -> PolicyController:
    """`PolicyController` of `policy` (`load_runtime`) with the exported action scale and gains
    (kp [N m/rad], kd [N m s/rad] per joint), after `check_conventions`."""
    check_conventions(config, joint_map)
    return PolicyController(
        policy,
        joint_map,
        action_scale=config["action_scale"],
        kp=np.asarray(config["kp"], dtype=float),
        kd=np.asarray(config["kd"], dtype=float),
    )


def startup(
    controller,
    joint_map: JointMap,
    *,
    stand_duration: float,
    auto: bool,
    controller_after: float | None,
    required_inputs: Sequence[str] = (),
    buttons: Callable[[], int] | None = None,
    kp=None,
    kd=None,
    backend: str = "in use",
) -> AutoStart:
    """THE place where the start-up sequence wraps a controller: `AutoStart` around
    `StartupSequence` (passive -> stand up over `stand_duration` [s] -> hold -> `controller`),
    on the remote's `buttons` and, with `auto`, from software (the controller from
    `controller_after` [s] of loop time on, once the measurement has the base state).
    `required_inputs`: the Measurement fields `controller` reads (a policy's "inputs"); the
    base velocity and position among them may come from the state estimator once it runs;
    kp, kd: the standing gains (default the joint map's)."""
    sequence = StartupSequence(
        controller,
        joint_map,
        buttons=buttons,
        stand_duration=stand_duration,
        kp=kp,
        kd=kd,
        required_inputs=tuple(required_inputs),
        estimated_inputs=ESTIMATED_INPUTS,
        warm_up=False,
        backend=backend,
    )
    return AutoStart(sequence, auto, controller_after)


# --------------------------------------------------------------------------- commands
def command_schedule(commands, segment_seconds: float, accel: float | None = None,
                     yaw_accel: float | None = None):  # fmt: skip
    """`(source, segments)`: `source(t) -> VelocityCommand` (rest before `STAND_SECONDS`, then
    each of `commands` (K, 3) (vx [m/s], vy [m/s], yaw rate [rad/s]) for `segment_seconds`
    [s], the last one held), and the segments `[(start [s], end [s] or inf, (vx, vy,
    yaw_rate))]`.

    accel [m/s^2], yaw_accel [rad/s^2]: the source moves toward each new command at these
    rates (`c_xy` along the straight line to the target, the yaw rate on its own), as an
    operator's joystick filter would; None or 0: the commands change in one step. The ramp is
    a function of `t` alone (queried at any times, in any order)."""
    commands = np.asarray(commands, dtype=float).reshape(-1, 3)
    if not segment_seconds > 0:
        raise ValueError(f"segment_seconds must be > 0, got {segment_seconds}")
    for name, value in (("accel", accel), ("yaw_accel", yaw_accel)):
        if value is not None and not value >= 0:
            raise ValueError(f"{name} must be >= 0 or None, got {value}")
    starts = STAND_SECONDS + segment_seconds * np.arange(len(commands))
    ends = np.append(starts[1:], np.inf)
    segments = [(float(a), float(b), tuple(map(float, c)))
                for a, b, c in zip(starts, ends, commands)]  # fmt: skip
    targets = np.vstack([np.zeros(3), commands])  # the rest before the first segment
    times = np.append(0.0, starts)

    def ramp(start, target, elapsed):
        """`start` moved toward `target` for `elapsed` s at the rates."""
        out = target.copy()
        dxy = target[:2] - start[:2]
        if accel and np.linalg.norm(dxy) > accel * elapsed:
            out[:2] = start[:2] + dxy * (accel * elapsed / np.linalg.norm(dxy))
        dyaw = target[2] - start[2]
        if yaw_accel and abs(dyaw) > yaw_accel * elapsed:
            out[2] = start[2] + np.sign(dyaw) * yaw_accel * elapsed
        return out

    def source(t: float) -> VelocityCommand:
        k = int(np.searchsorted(times, t, side="right")) - 1  # the segment t is in
        value = targets[0]
        for i in range(1, k + 1):  # where each earlier ramp had got to at its segment's end
            value = ramp(value, targets[i], (times[i + 1] if i < k else t) - times[i])
        return VelocityCommand(*value)

    return source, segments


def _half_extents(ranges: dict) -> np.ndarray:
    """(3,) the largest |value| each command component reaches in `ranges` (0 for a side that
    does not reach past zero)."""
    return np.array([max(ranges[n][1], -ranges[n][0], 0.0) for n in ("vx", "vy", "yaw_rate")])


def tour_commands(ranges: dict | None = None) -> np.ndarray:
    """`OMNI_TOUR` stretched onto the command box `ranges` (`{"vx", "vy": (low, high) [m/s],
    "yaw_rate": (low, high) [rad/s]}`; None: `DEFAULT_COMMAND_RANGES`, where the tour is
    `OMNI_TOUR` itself): each component as a fraction of Go2's box, then that fraction of the
    box's high end (positive) or low end (negative), so that the tour's corners are the box's
    corners. A side of the box that does not reach past zero gives zero. Returns (K, 3)."""
    ranges = DEFAULT_COMMAND_RANGES if ranges is None else ranges
    fraction = np.asarray(OMNI_TOUR) / _half_extents(DEFAULT_COMMAND_RANGES)
    high = np.array([max(ranges[n][1], 0.0) for n in ("vx", "vy", "yaw_rate")])
    low = np.array([min(ranges[n][0], 0.0) for n in ("vx", "vy", "yaw_rate")])
    return np.where(fraction > 0, fraction * high, -fraction * low)


def tour_ramp(ranges: dict | None = None) -> tuple[float, float]:
    """`(accel [m/s^2], yaw_accel [rad/s^2])` for `command_schedule` on the box `ranges`:
    `COMMAND_ACCEL` and `COMMAND_YAW_ACCEL` scaled by the box's size against Go2's (its (vx,
    vy) half-diagonal, its yaw-rate half-width), so that a change across the box takes as long
    as on Go2's. None: Go2's box, the constants themselves."""
    if ranges is None:
        return COMMAND_ACCEL, COMMAND_YAW_ACCEL
    ours, go2 = _half_extents(ranges), _half_extents(DEFAULT_COMMAND_RANGES)
    linear = COMMAND_ACCEL * float(np.linalg.norm(ours[:2]) / np.linalg.norm(go2[:2]))
    return linear, COMMAND_YAW_ACCEL * float(ours[2] / go2[2])


# --------------------------------------------------------------------------- MuJoCo
class BaseVelocityRecorder:
    """`on_tick` of `control_loop.run` on a MuJoCo robot: after each write, MuJoCo's base
    velocity in the heading frame (world frame rotated by the base yaw): `v_xy` [m/s] and the
    yaw rate `omega_z` [rad/s] (world z), the base height `z` [m] (world), with the loop time
    `t` [s]."""

    def __init__(self, robot):
        self.robot = robot
        self.qpos, self.dof = robot.base_joint_addresses()
        self.t, self.v_xy, self.omega_z, self.z = [], [], [], []

    def __call__(self, t, safety, _robot) -> None:
        robot = self.robot  # the simulator itself, under any wrapper the loop drives
        quat_wxyz = robot.data.qpos[self.qpos + 3 : self.qpos + 7]
        rotation = rotation_from_quat(quat_wxyz[[1, 2, 3, 0]])  # base to world
        yaw = np.arctan2(rotation[1, 0], rotation[0, 0])
        v = robot.data.qvel[self.dof : self.dof + 3]  # world frame
        omega = rotation @ robot.data.qvel[self.dof + 3 : self.dof + 6]  # body -> world
        c, s_ = np.cos(yaw), np.sin(yaw)
        self.t.append(t)
        self.v_xy.append((c * v[0] + s_ * v[1], -s_ * v[0] + c * v[1]))
        self.omega_z.append(omega[2])
        self.z.append(float(robot.data.qpos[self.qpos + 2]))

    def min_height(self) -> float:
        """The lowest base height [m] recorded (NaN before any tick)."""
        return float(np.min(self.z)) if self.z else float("nan")

    def final_position(self) -> list:
        """MuJoCo's base position `[x, y, z]` [m] (world) now."""
        return [float(v) for v in self.robot.data.qpos[self.qpos : self.qpos + 3]]

    def tracking(self, segments, settle: float = SETTLE_SECONDS) -> list:
        """Per segment `(start, end, command)`: the mean heading-frame velocity from `start +
        settle` to `end`, and its errors `|mean v_xy - c_xy|` [m/s], `|mean omega_z - c_yaw|`
        [rad/s] (NaN where the run ended before)."""
        t, v, w = np.asarray(self.t), np.asarray(self.v_xy), np.asarray(self.omega_z)
        rows = []
        for start, end, command in segments:
            keep = (t >= start + settle) & (t < end)
            mean_v = v[keep].mean(axis=0) if keep.any() else np.full(2, np.nan)
            mean_w = w[keep].mean() if keep.any() else np.nan
            rows.append({
                "start_s": start, "end_s": min(end, float(t[-1]) if len(t) else start),
                "command": list(command), "mean_v_xy": mean_v.tolist(),
                "mean_yaw_rate": float(mean_w),
                "linear_error": float(np.linalg.norm(mean_v - np.asarray(command[:2]))),
                "yaw_rate_error": float(abs(mean_w - command[2])),
            })  # fmt: skip
        return rows


def _weight_scale(model) -> float:
    """The robot's mass over Go2's (1.0 for Go2)."""
    go2 = dynamics.load_robot("go2")
    return 1.0 if model is go2 else float(model.total_mass) / float(go2.total_mass)


def sensor_noise(model) -> SensorNoise:
    """`SensorNoise.go2()` for `model`: the foot-force noise [N] scaled by the robot's mass
    against Go2's (Go2: unchanged)."""
    noise = SensorNoise.go2()
    return dataclasses.replace(noise, foot_force_std=noise.foot_force_std * _weight_scale(model))


def estimator_config(model, terrain=None) -> EstimatorConfig:
    """`EstimatorConfig()` for `model` on `terrain` (a `contact.terrain`; None: the level
    floor): the foot-force thresholds (`contact_on`, `contact_off`, `full_contact_force` [N],
    tuned on Go2) scaled by the robot's mass against Go2's, so that a standing foot loads past
    them on a light robot too (Go2: the defaults); off a level plane, the stance feet's
    heights from their touchdowns (`ground="touchdown"`): a flat floor there errs by the
    terrain's rise (BENCHMARKS.md, "Estimator off the plane")."""
    config, scale = EstimatorConfig(), _weight_scale(model)
    return dataclasses.replace(
        config,
        contact_on=config.contact_on * scale,
        contact_off=config.contact_off * scale,
        full_contact_force=config.full_contact_force * scale,
        ground="flat" if is_level(terrain) else "touchdown",
    )


def is_level(terrain) -> bool:
    """`terrain` is None (the floor) or a horizontal `contact.terrain.Plane`."""
    if terrain is None:
        return True
    return isinstance(terrain, Plane) and bool(np.allclose(np.asarray(terrain.normal), (0, 0, 1)))


def mujoco_robot(model, *, seconds: float, command_rate: float = COMMAND_RATE,
                 randomize: int | None = None, ranges: DisturbanceRanges | None = None,
                 estimator: bool = False, terrain=None):  # fmt: skip
    """`(robot, simulator, disturbances)`: MuJoCo at `command_rate` [Hz] (`simulator`, the
    object whose state is the truth), under `ranges.sample(randomize, seconds, ...)` (pushes
    after `STAND_SECONDS`; `randomize` None: nominal, `disturbances` None), and with
    `estimator` wrapped as `robot` in `sensor_noise` (seeded by `randomize`, else 0) and an
    `EstimatedRobot` (`estimator_config`) in place of the true base state; on `terrain`."""
    if randomize is None:
        simulator = MuJoCoRobot(model, timestep=1.0 / command_rate, terrain=terrain)
        disturbances = None
    else:
        ranges = ranges or DisturbanceRanges()
        disturbances = ranges.sample(randomize, seconds, model.total_mass, start=STAND_SECONDS)
        simulator = DisturbedMuJoCoRobot(model, disturbances, timestep=1.0 / command_rate,
                                         terrain=terrain)  # fmt: skip
    robot = simulator
    if estimator:
        noisy = NoisySensors(simulator, sensor_noise(model), seed=randomize or 0)
        robot = EstimatedRobot(noisy, StateEstimator(model, estimator_config(model, terrain)))
    return robot, simulator, disturbances


def estimator_summary(robot: EstimatedRobot) -> dict:
    """The estimate against MuJoCo's truth over the run: RMS velocity error [m/s] (base frame,
    the norm of the 3-vector), RMS height error [m], the fault (None) and the share of samples
    with a valid estimate, and the lowest true base height [m]."""
    h = robot.history_arrays()
    valid = h["valid"]
    lowest = float(np.min(h["true_position"][:, 2])) if len(valid) else float("nan")
    if not valid.any():
        return {"valid_share": 0.0, "fault": robot.fault, "min_true_height_m": lowest}
    dv = h["velocity"][valid] - h["true_velocity"][valid]
    dz = h["position"][valid, 2] - h["true_position"][valid, 2]
    return {
        "valid_share": float(valid.mean()),
        "fault": robot.fault,
        "velocity_rms_m_per_s": float(np.sqrt(np.mean(np.sum(dv**2, axis=1)))),
        "height_rms_m": float(np.sqrt(np.mean(dz**2))),
        "min_true_height_m": lowest,
    }


def run_mujoco(folder, runtime="numpy", seconds=5.0, velocity=0.5, command_rate=COMMAND_RATE,
               soft_start=SOFT_START_SECONDS, max_target_rate=None, vy=0.0, yaw_rate=0.0,
               commands=None, segment_seconds=TOUR_SEGMENT_SECONDS, randomize=None,
               ranges=None, accel=COMMAND_ACCEL, yaw_accel=COMMAND_YAW_ACCEL,
               estimator=False, terrain=None):  # fmt: skip
    """One run of the exported policy in `folder` on MuJoCo (module docstring); returns
    `(summary, control_loop.LoopResult)`.

    seconds [s] of loop time; command_rate [Hz]; soft_start [s]; max_target_rate [rad/s]
    (None: the joint velocity limits); `commands`: (K, 3) to run one after another,
    `segment_seconds` [s] each (None: `(velocity, vy, yaw_rate)` [m/s, m/s, rad/s]);
    `randomize`: seed of a `ranges.sample` draw (`DisturbanceRanges`; None: nominal MuJoCo);
    `accel` [m/s^2], `yaw_accel` [rad/s^2]: the ramp of `command_schedule`; `estimator`:
    noisy sensors and the state estimator in place of MuJoCo's true base state, behind the
    start-up sequence (the policy from `STAND_SECONDS` on, once the estimate is valid);
    `terrain`: MuJoCo's ground, a `contact.terrain` pytree (None: flat)."""
    policy, config = load_runtime(folder, runtime)
    model = dynamics.load_robot(config["robot"])
    robot, simulator, disturbances = mujoco_robot(
        model, seconds=seconds, command_rate=command_rate, randomize=randomize, ranges=ranges,
        estimator=estimator, terrain=terrain,
    )  # fmt: skip
    controller = policy_controller(policy, config, robot.joint_map)
    if estimator:  # as on the robot: stand, hold, then the policy
        controller = startup(
            controller, robot.joint_map, stand_duration=0.2, auto=True,
            controller_after=STAND_SECONDS, required_inputs=policy_inputs(config),
            kp=np.asarray(config["kp"]), kd=np.asarray(config["kd"]),
            backend="MuJoCo with the state estimator",
        )  # fmt: skip
    config_safety = SafetyConfig(soft_start_duration=soft_start, max_target_rate=max_target_rate)
    safety = SafetyLayer(robot.joint_map, config_safety)
    if commands is None:
        commands = [(velocity, vy, yaw_rate)]
    source, segments = command_schedule(commands, segment_seconds, accel, yaw_accel)
    recorder = BaseVelocityRecorder(simulator)
    result = control_loop.run(
        robot,
        controller,
        safety,
        duration=seconds,
        control_dt=config["control_dt"],
        command_dt=1.0 / command_rate,
        command_source=source,
        on_tick=recorder,
    )
    tracking = recorder.tracking(segments)
    done = [r for r in tracking if np.isfinite(r["linear_error"])]
    standing = float(model.q_standing[2])
    summary = {
        "policy": os.path.abspath(folder),
        "runtime": runtime,
        "robot": config["robot"],
        "seconds": seconds,
        "velocity_command_m_per_s": velocity,
        "commands": [list(c) for _, _, c in segments],
        "segment_seconds": segment_seconds if len(segments) > 1 else None,
        "command_ramp": {"accel_m_per_s2": accel, "yaw_accel_rad_per_s2": yaw_accel},
        "tracking": tracking,
        "mean_linear_error_m_per_s": float(np.mean([r["linear_error"] for r in done]))
        if done else float("nan"),
        "mean_yaw_rate_error_rad_per_s": float(np.mean([r["yaw_rate_error"] for r in done]))
        if done else float("nan"),
        "randomization": None if disturbances is None else {
            "seed": randomize, **disturbances.to_dict(),
            "applied_pushes": [list(p) for p in simulator.applied_pushes]},
        "control_rate_hz": 1.0 / config["control_dt"],
        "command_rate_hz": command_rate,
        "average_speed_m_per_s": control_loop.average_speed(
            result.log, after=min(STAND_SECONDS + 1.0, 0.5 * seconds)
        ),
        "controller_calls": result.controller_calls,
        "controller_errors": result.controller_errors,
        "drivers": dict(simulator.driver.counters),
        "watchdog_trips": list(simulator.driver.trip_times),
        "base_state_source": "estimator" if estimator else "ground_truth",
        "estimator": estimator_summary(robot) if estimator else None,
        "startup_phases": [p.value for p in controller.sequence.phases()] if estimator else None,
        "controller_started_s": controller.controller_started if estimator else 0.0,
        "standing_base_height_m": standing,
        "min_true_base_height_m": recorder.min_height(),
        "final_true_base_position_m": recorder.final_position(),
        "fell": bool(recorder.min_height() < FELL_HEIGHT_FRACTION * standing),
        **result.summary(),
    }  # fmt: skip
    return summary, result


# --------------------------------------------------------------------------- the tour
def run_tour(
    folder: str,
    seed: int | None,
    *,
    estimator: bool = True,
    commands=None,
    segment_seconds: float | None = None,
    runtime: str = "numpy",
) -> dict:
    """One tour of the exported policy in `folder` on MuJoCo for the robot its policy.json
    names, as `run_mujoco` runs it, and its results as a plain (JSON-able) dict.

    seed: the `DisturbanceRanges()` draw (payload, friction, latency, pushes) and the sensor
        noise's seed; None: nominal MuJoCo, no randomisation.
    estimator: noisy sensors, the state estimator and the start-up sequence (module docstring).
    commands: (K, 3) (vx [m/s], vy [m/s], yaw rate [rad/s]) one after another; None: the
        policy's own tour, `tour_commands` of its command box.
    segment_seconds: [s] per command (None: `TOUR_SEGMENT_SECONDS`); the run lasts
        `STAND_SECONDS + K segment_seconds`; the commands ramp at `tour_ramp` of the box.
    runtime: "numpy", "onnx" or "jax" (`load_runtime`).

    Returns {"policy", "robot", "seed", "estimator", "runtime", "seconds" (simulated),
    "wall_seconds", "commands" [[vx, vy, yaw rate]], "segment_seconds", "command_ranges",
    "tracking" (per command: "command", "start_s", "end_s", "mean_v_xy", "mean_yaw_rate",
    "linear_error" [m/s], "yaw_rate_error" [rad/s]; NaN for a command the run did not reach
    `SETTLE_SECONDS` into), "mean_linear_error_m_per_s", "worst_linear_error_m_per_s",
    "mean_yaw_rate_error_rad_per_s", "controller_started_s" (loop time [s] the policy took
    over, None if never), "startup_phases" (the start-up sequence's phases in order, None
    without the estimator), "fell", "min_true_base_height_m", "fell_below_m" [m], "damped",
    "damped_at_s" (None if never), "damped_because" (e.g. "damping after
    base_tilt_violation"), "safety_mode" (final), "safety_events" ({kind: ticks} of the safety
    layer's events), "estimate" (`estimator_summary`, None without the estimator),
    "randomization" (the draw, None without), "walked", "why_not" (`walk_failures`)}."""
    config = load_numpy_policy(folder).config
    ranges = command_ranges(config)
    commands = tour_commands(ranges) if commands is None else commands
    commands = np.asarray(commands, dtype=float).reshape(-1, 3)
    segment_seconds = TOUR_SEGMENT_SECONDS if segment_seconds is None else float(segment_seconds)
    seconds = STAND_SECONDS + len(commands) * segment_seconds
    accel, yaw_accel = tour_ramp(ranges)
    start = time.perf_counter()
    summary, _ = run_mujoco(
        folder, runtime, seconds, commands=commands, segment_seconds=segment_seconds,
        randomize=seed, accel=accel, yaw_accel=yaw_accel, estimator=estimator,
    )  # fmt: skip
    wall = time.perf_counter() - start
    events = summary["safety_events"]
    counts: dict = {}
    for e in events:
        counts[e["kind"]] = counts.get(e["kind"], 0) + e["count"]
    damping = [e for e in events if e["kind"] in ("damping", "estop")]
    damped = bool(damping) or summary["safety_mode"] in ("damping", "estop")
    linear = [r["linear_error"] for r in summary["tracking"]]
    row = {
        "policy": summary["policy"],
        "robot": summary["robot"],
        "seed": seed,
        "estimator": bool(estimator),
        "runtime": runtime,
        "seconds": float(seconds),
        "wall_seconds": float(wall),
        "commands": commands.tolist(),
        "segment_seconds": segment_seconds,
        "command_ranges": {k: list(v) for k, v in ranges.items()},
        "tracking": summary["tracking"],
        "mean_linear_error_m_per_s": summary["mean_linear_error_m_per_s"],
        "worst_linear_error_m_per_s": float(np.max(linear)) if linear else float("nan"),
        "mean_yaw_rate_error_rad_per_s": summary["mean_yaw_rate_error_rad_per_s"],
        "controller_started_s": summary["controller_started_s"],
        "startup_phases": summary["startup_phases"],
        "fell": summary["fell"],
        "min_true_base_height_m": summary["min_true_base_height_m"],
        "fell_below_m": FELL_HEIGHT_FRACTION * summary["standing_base_height_m"],
        "damped": damped,
        "damped_at_s": float(damping[0]["start"]) if damping else None,
        "damped_because": [f"{e['kind']} {e['detail']}".strip() for e in damping],
        "safety_mode": summary["safety_mode"],
        "safety_events": counts,
        "estimate": summary["estimator"],
        "randomization": summary["randomization"],
    }
    why_not = walk_failures(row)
    row["walked"], row["why_not"] = not why_not, why_not
    return row


def walk_failures(row: dict) -> list[str]:
    """Why a `run_tour` result did not walk ([] when it walked): the policy never took over
    from the start-up sequence, the base fell (below `FELL_HEIGHT_FRACTION` of its standing
    height), the safety layer damped, or the mean linear tracking error over the commands was
    not below `WALKED_LINEAR_ERROR` [m/s]."""
    out = []
    if row["controller_started_s"] is None:
        out.append("the policy never took over from the start-up sequence")
    if row["fell"]:
        out.append(
            f"fell: base down to {row['min_true_base_height_m']:.3f} m "
            f"(below {row['fell_below_m']:.3f} m)"
        )
    if row["damped"]:
        at = row["damped_at_s"]
        out.append(f"damped{'' if at is None else f' at {at:.2f} s'} "
                   f"({', '.join(row['damped_because']) or row['safety_mode']})")  # fmt: skip
    error = row["mean_linear_error_m_per_s"]
    if not error < WALKED_LINEAR_ERROR:
        out.append(f"mean linear tracking error {error:.3f} m/s, not below {WALKED_LINEAR_ERROR}")
    return out


def tour_check(
    folder: str,
    seeds: Sequence[int],
    *,
    estimator: bool = True,
    segment_seconds: float | None = None,
    progress: Callable[[str], object] | None = print,
) -> dict:
    """`run_tour` of the policy's own tour once per seed in `seeds` (each a randomisation draw,
    with the estimator when `estimator`, `segment_seconds` [s] per command, None:
    `TOUR_SEGMENT_SECONDS`); `progress(line)` after each (None: quiet).

    Returns {"seeds": [run_tour's dict per seed, in order], "walked": how many walked
    (`walk_failures`: the policy took over, no fall, no damping by the safety layer, mean
    linear tracking error below `WALKED_LINEAR_ERROR`), "of": how many ran}."""
    rows = []
    for seed in seeds:
        row = run_tour(folder, seed, estimator=estimator, segment_seconds=segment_seconds)
        rows.append(row)
        if progress is not None:
            verdict = "walked" if row["walked"] else "did not walk: " + "; ".join(row["why_not"])
            progress(
                f"{row['robot']} tour, seed {seed}: {verdict} (linear error mean "
                f"{row['mean_linear_error_m_per_s']:.3f}, worst "
                f"{row['worst_linear_error_m_per_s']:.3f} m/s; yaw rate mean "
                f"{row['mean_yaw_rate_error_rad_per_s']:.3f} rad/s; lowest base "
                f"{row['min_true_base_height_m']:.3f} m; {row['wall_seconds']:.0f} s)"
            )
    return {"seeds": rows, "walked": sum(r["walked"] for r in rows), "of": len(rows)}
