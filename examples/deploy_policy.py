"""Run an exported locomotion policy through the hardware interface and safety layer on MuJoCo.

    python examples/deploy_policy.py --policy results/policy_go2 --seconds 5 --velocity 0.5
    python examples/deploy_policy.py --policy results/policy_go2 --runtime onnx

The folder is what `learning.policy_export.export_policy` writes (weights, conventions,
the standalone NumPy runner, the ONNX graph). The policy runs with the folder's own NumPy runner
(`--runtime numpy`, what a robot computer without JAX runs), onnxruntime (`onnx`) or JAX (`jax`),
inside `PolicyController` at the period it was exported with (`control_dt`), with the exported
gains; the safety layer and the writes run at `--command-rate` = MuJoCo's rate, in simulated time.
The robot stands for 0.5 s, then gets `--velocity` forward (with `--vy`, `--yaw-rate`), or
the `--commands` one after another, `--segment-seconds` each (`--commands omni`: a tour of the
omnidirectional box, `OMNI_TOUR`), ramped at `--accel`, `--yaw-accel` (0: step changes).
`--randomize SEED` runs MuJoCo under one draw of domain
randomisation (`hardware.backends.mujoco_disturbances`: payload, friction, command
latency, pushes; the training environment's ranges, `--push` and `--latency-ms` to change
them). `--estimator` runs the robot as a Go2 with its sport service released would be: its
sensors noisy as a Go2's (`hardware.sensor_noise.SensorNoise.go2`), MuJoCo's true base state
taken away, and the base velocity and position estimated from the IMU, the joints and the
foot forces (`hardware.estimated_robot.EstimatedRobot`); a policy that observes the base
velocity then observes the estimate. The run then starts as on the robot, through the
start-up sequence (`hardware.startup`): the robot holds its standing pose until
`STAND_SECONDS`, while the estimator starts on four loaded feet, and the policy takes over
only if the measurement has every input the policy needs (refused before arming otherwise).
Prints timing statistics, safety interventions, the tracking per command (MuJoCo's base
velocity in the heading frame, averaged after `SETTLE_SECONDS` of each command) and the base
heights; saves the loop log (npz) and a summary (json).

    python examples/deploy_policy.py --policy examples/policies/go2_omni --commands omni \
        --seconds 28 --randomize 0
"""

from __future__ import annotations

import argparse
import logging
import os

import numpy as np

import dynamics
from hardware import control_loop
from hardware.backends.mujoco_disturbances import (
    DisturbanceRanges,
    DisturbedMuJoCoRobot,
)
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.estimated_robot import EstimatedRobot
from hardware.estimator import StateEstimator
from hardware.interface import JointMap, VelocityCommand, rotation_from_quat
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.sensor_noise import NoisySensors, SensorNoise
from hardware.startup import AutoStart, StartupSequence
from hardware.timing import format_summary
from learning.policy import ACTION_CLIP
from learning.policy_adapter import PolicyController
from learning.policy_export import (
    load_exported_policy,
    load_numpy_policy,
    load_onnx_policy,
    policy_inputs,
)

STAND_SECONDS = 0.5  # [s] zero velocity command before `--velocity`, as deploy_mujoco's MPC
SETTLE_SECONDS = 1.0  # [s] after a command change, not counted in its tracking
# the command ramp [m/s^2], [rad/s^2]: the largest change of the tour (vx 1 to -1 and so on)
# takes 1.1 s of linear, 1 s of yaw ramp, within SETTLE_SECONDS (BENCHMARKS.md: with step
# changes the omnidirectional policy tripped the velocity watchdog at corner-to-corner jumps)
COMMAND_ACCEL = 2.0
COMMAND_YAW_ACCEL = 2.0
# (vx [m/s], vy [m/s], yaw rate [rad/s]): the omnidirectional box's axes, a corner of each
# sign and mixed commands, ending at rest
OMNI_TOUR = ((0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.5, 0.0), (-1.0, 0.0, 0.0),
             (0.0, -0.5, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0), (1.0, 0.5, 1.0),
             (-1.0, -0.5, -1.0), (0.5, -0.3, 0.5), (0.0, 0.0, 0.0))  # fmt: skip
HOW_TO_EXPORT = """\
an exported policy folder is needed (--policy FOLDER). Train a policy
(learning.shac, learning.distill; examples/distill_policy.py --out results/distill_go2 exports to
results/distill_go2/export) or export a learning.policy.Policy yourself:

    from learning.policy_export import export_policy
    export_policy(policy, "results/policy_go2", robot="go2")

then run: python examples/deploy_policy.py --policy results/policy_go2"""


def load_runtime(folder: str, runtime: str):
    """`policy(observation (n,)) -> action (nu,)` on NumPy arrays, and its conventions."""
    numpy_policy = load_numpy_policy(folder)  # checks the folder; holds the conventions
    if runtime == "numpy":
        return numpy_policy, numpy_policy.config
    if runtime == "onnx":
        return load_onnx_policy(folder), numpy_policy.config
    import equinox as eqx

    return eqx.filter_jit(load_exported_policy(folder)), numpy_policy.config


def check_conventions(config: dict, joint_map: JointMap) -> None:
    """Raises ValueError when the robot's joints or the controller's clip differ from those the
    policy was exported with."""
    if tuple(config["joint_names"]) != joint_map.names:
        raise ValueError(
            f"the policy's joints {config['joint_names']} are not {joint_map.robot}'s "
            f"{list(joint_map.names)}"
        )
    if not np.allclose(config["q_default"], joint_map.q_default):
        raise ValueError("the policy's q_default differs from the robot model's standing pose")
    if config["action_clip"] != ACTION_CLIP:
        raise ValueError(
            f"the policy was exported with action clip {config['action_clip']}, "
            f"PolicyController applies {ACTION_CLIP}"
        )


def command_schedule(commands, segment_seconds: float, accel: float | None = None,
                     yaw_accel: float | None = None):
    """`(source, segments)`: `source(t) -> VelocityCommand` (rest before `STAND_SECONDS`, then
    each of `commands` (K, 3) for `segment_seconds` [s], the last one held), and the segments
    `[(start [s], end [s] or inf, (vx, vy, yaw_rate))]`.

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


class BaseVelocityRecorder:
    """`on_tick` of `control_loop.run` on a MuJoCo robot: after each write, MuJoCo's base
    velocity in the heading frame (world frame rotated by the base yaw): `v_xy` [m/s] and the
    yaw rate `omega_z` [rad/s] (world z), with the loop time `t` [s]."""

    def __init__(self, robot):
        self.robot = robot
        self.qpos, self.dof = robot.base_joint_addresses()
        self.t, self.v_xy, self.omega_z = [], [], []

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


def run(folder, runtime="numpy", seconds=5.0, velocity=0.5, command_rate=500.0, soft_start=0.2,
        max_target_rate=None, vy=0.0, yaw_rate=0.0, commands=None, segment_seconds=2.5,
        randomize=None, ranges=None, accel=COMMAND_ACCEL, yaw_accel=COMMAND_YAW_ACCEL,
        estimator=False):  # fmt: skip
    """`commands`: (K, 3) to run one after another (None: `(velocity, vy, yaw_rate)`);
    `randomize`: seed of a `ranges.sample` draw (`DisturbanceRanges`; None: nominal MuJoCo);
    `accel`, `yaw_accel`: the command ramp of `command_schedule`; `estimator`: Go2-like
    sensor noise and the state estimator in place of MuJoCo's true base state (module
    docstring)."""
    policy, config = load_runtime(folder, runtime)
    model = dynamics.load_robot(config["robot"])
    if randomize is None:
        robot = MuJoCoRobot(model, timestep=1.0 / command_rate)
        disturbances = None
    else:
        ranges = ranges or DisturbanceRanges()
        disturbances = ranges.sample(randomize, seconds, model.total_mass, start=STAND_SECONDS)
        robot = DisturbedMuJoCoRobot(model, disturbances, timestep=1.0 / command_rate)
    simulator = robot
    if estimator:
        noisy = NoisySensors(robot, SensorNoise.go2(), seed=0 if randomize is None else randomize)
        robot = EstimatedRobot(noisy, StateEstimator(model))
    check_conventions(config, robot.joint_map)
    controller = PolicyController(
        policy,
        robot.joint_map,
        action_scale=config["action_scale"],
        kp=np.asarray(config["kp"]),
        kd=np.asarray(config["kd"]),
    )
    if estimator:  # as on the robot: stand, hold, then the policy (module docstring)
        sequence = StartupSequence(controller, robot.joint_map, stand_duration=0.2,
                                   kp=np.asarray(config["kp"]), kd=np.asarray(config["kd"]),
                                   required_inputs=policy_inputs(config),
                                   estimated_inputs=("base_linear_velocity", "base_position"),
                                   warm_up=False,
                                   backend="MuJoCo with the state estimator")  # fmt: skip
        controller = AutoStart(sequence, auto=True, controller_after=STAND_SECONDS)
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
            "applied_pushes": [list(p) for p in robot.applied_pushes]},
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
        "estimator": _estimator_summary(robot) if estimator else None,
        "startup_phases": [p.value for p in controller.sequence.phases()] if estimator else None,
        **result.summary(),
    }  # fmt: skip
    return summary, result


def _estimator_summary(robot: EstimatedRobot) -> dict:
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
    return {"valid_share": float(valid.mean()), "fault": robot.fault,
            "velocity_rms_m_per_s": float(np.sqrt(np.mean(np.sum(dv**2, axis=1)))),
            "height_rms_m": float(np.sqrt(np.mean(dz**2))), "min_true_height_m": lowest}


def parse_commands(values) -> np.ndarray | None:
    """`--commands`: None, ["omni"] (`OMNI_TOUR`) or "vx,vy,yaw" strings -> (K, 3)."""
    if not values:
        return None
    if values == ["omni"]:
        return np.asarray(OMNI_TOUR)
    rows = []
    for v in values:
        parts = v.split(",")
        try:
            row = [float(x) for x in parts]
        except ValueError:
            row = []
        if len(row) != 3 or not np.all(np.isfinite(row)):
            raise ValueError(f"--commands: each command is 'vx,vy,yaw_rate' (three numbers) or "
                             f"the word omni, got {v!r}")  # fmt: skip
        rows.append(row)
    return np.asarray(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None, help="exported policy folder")
    parser.add_argument("--runtime", default="numpy", choices=("numpy", "onnx", "jax"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
    parser.add_argument("--vy", type=float, default=0.0, help="sideways command [m/s], left")
    parser.add_argument("--yaw-rate", type=float, default=0.0, help="[rad/s], counter-clockwise")
    parser.add_argument("--commands", nargs="+", metavar="VX,VY,YAW",
                        help="commands one after another (or: omni, a tour of the box)")
    parser.add_argument("--segment-seconds", type=float, default=2.5,
                        help="[s] per command of --commands")
    parser.add_argument("--accel", type=float, default=COMMAND_ACCEL,
                        help="command ramp [m/s^2] (0: step changes)")
    parser.add_argument("--yaw-accel", type=float, default=COMMAND_YAW_ACCEL,
                        help="yaw-rate command ramp [rad/s^2] (0: step changes)")
    parser.add_argument("--randomize", type=int, metavar="SEED",
                        help="domain randomisation in MuJoCo: payload, friction, latency, pushes")
    parser.add_argument("--push", type=float, default=DisturbanceRanges.push_velocity,
                        help="largest push with --randomize [m/s]")
    parser.add_argument("--latency-ms", type=float, default=1e3 * DisturbanceRanges.latency_s,
                        help="largest command latency with --randomize [ms]")
    parser.add_argument("--estimator", action="store_true",
                        help="Go2-like sensor noise, no true base state: the state estimator")
    parser.add_argument("--command-rate", type=float, default=500.0, help="[Hz] = MuJoCo rate")
    parser.add_argument("--soft-start", type=float, default=0.2, help="[s]")
    parser.add_argument("--max-target-rate", type=float, default=None,
                        help="[rad/s] the safety layer's limit on the PD targets' rate (default: "
                             "the joint velocity limits; the MPC runs with 30)")  # fmt: skip
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    if args.policy is None or not os.path.isdir(args.policy):
        where = "" if args.policy is None else f"no folder {args.policy!r}: "
        parser.error(where + HOW_TO_EXPORT)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        commands = parse_commands(args.commands)
    except ValueError as e:
        parser.error(str(e))
    ranges = DisturbanceRanges(push_velocity=args.push, latency_s=1e-3 * args.latency_ms)
    summary, result = run(args.policy, args.runtime, args.seconds, args.velocity,
                          args.command_rate, args.soft_start, args.max_target_rate, args.vy,
                          args.yaw_rate, commands, args.segment_seconds, args.randomize,
                          ranges, args.accel, args.yaw_accel, args.estimator)  # fmt: skip
    print(f"policy {summary['policy']} ({args.runtime}) on {summary['robot']}, "
          f"{summary['control_rate_hz']:.0f} Hz")  # fmt: skip
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    if summary["randomization"]:
        r = summary["randomization"]
        print(f"randomisation (seed {r['seed']}): payload {r['payload_kg']:+.2f} kg, friction "
              f"{r['friction']:.2f}, latency {1e3 * r['latency_s']:.1f} ms, "
              f"{len(r['applied_pushes'])} pushes applied")  # fmt: skip
    for r in summary["tracking"]:
        vx, vy, wz = r["command"]
        print(f"  command ({vx:+.2f}, {vy:+.2f}, {wz:+.2f}) from {r['start_s']:.1f} s: "
              f"linear error {r['linear_error']:.3f} m/s, yaw-rate error "
              f"{r['yaw_rate_error']:.3f} rad/s")  # fmt: skip
    if summary["estimator"]:
        e = summary["estimator"]
        print(f"estimator: velocity RMS error {e.get('velocity_rms_m_per_s', float('nan')):.3f} "
              f"m/s, height RMS error {e.get('height_rms_m', float('nan')):.4f} m, valid "
              f"{e['valid_share']:.0%}, fault {e['fault']}")  # fmt: skip
    print(f"average speed {summary['average_speed_m_per_s']:.3f} m/s "
          f"(command {args.velocity} m/s), base height min {summary['min_base_height_m']:.4f} "
          f"settled {summary['settled_base_height_m']:.4f} m, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    name = f"deploy_policy_{result.safety.joint_map.robot}"
    control_loop.save_run(args.out, name, result.log, summary)
    return summary


if __name__ == "__main__":
    main()
