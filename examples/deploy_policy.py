"""Run an exported locomotion policy through the hardware interface and safety layer on MuJoCo.

    python examples/deploy_policy.py --policy results/policy_go2 --seconds 5 --velocity 0.5
    python examples/deploy_policy.py --policy results/policy_go2 --runtime onnx

The folder is what `controllers.learning.policy_export.export_policy` writes (weights, conventions,
the standalone NumPy runner, the ONNX graph). The policy runs with the folder's own NumPy runner
(`--runtime numpy`, what a robot computer without JAX runs), onnxruntime (`onnx`) or JAX (`jax`),
inside `PolicyController` at the period it was exported with (`control_dt`), with the exported
gains; the safety layer and the writes run at `--command-rate` = MuJoCo's rate, in simulated time.
The robot stands for 0.5 s, then gets `--velocity` forward. Prints timing statistics, safety
interventions, the average speed and the base heights; saves the loop log (npz) and a summary
(json).
"""

from __future__ import annotations

import argparse
import logging
import os

import numpy as np

import dynamics
from controllers.hardware import control_loop
from controllers.hardware.backends.mujoco_sim import MuJoCoRobot
from controllers.hardware.interface import JointMap, VelocityCommand
from controllers.hardware.safety import SafetyConfig, SafetyLayer
from controllers.hardware.timing import format_summary
from controllers.learning.policy import ACTION_CLIP
from controllers.learning.policy_adapter import PolicyController
from controllers.learning.policy_export import (
    load_exported_policy,
    load_numpy_policy,
    load_onnx_policy,
)

STAND_SECONDS = 0.5  # [s] zero velocity command before `--velocity`, as deploy_mujoco's MPC
HOW_TO_EXPORT = """\
an exported policy folder is needed (--policy FOLDER). Train a policy
(controllers.learning.training; examples/distill_policy.py --out results/distill_go2 exports to
results/distill_go2/export) or export a controllers.learning.policy.Policy yourself:

    from controllers.learning.policy_export import export_policy
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


def run(folder, runtime="numpy", seconds=5.0, velocity=0.5, command_rate=500.0, soft_start=0.2,
        max_target_rate=None):  # fmt: skip
    policy, config = load_runtime(folder, runtime)
    model = dynamics.load_robot(config["robot"])
    robot = MuJoCoRobot(model, timestep=1.0 / command_rate)
    check_conventions(config, robot.joint_map)
    controller = PolicyController(
        policy,
        robot.joint_map,
        action_scale=config["action_scale"],
        kp=np.asarray(config["kp"]),
        kd=np.asarray(config["kd"]),
    )
    config_safety = SafetyConfig(soft_start_duration=soft_start, max_target_rate=max_target_rate)
    safety = SafetyLayer(robot.joint_map, config_safety)
    result = control_loop.run(
        robot,
        controller,
        safety,
        duration=seconds,
        control_dt=config["control_dt"],
        command_dt=1.0 / command_rate,
        command_source=lambda t: VelocityCommand(velocity if t >= STAND_SECONDS else 0.0),
    )
    summary = {
        "policy": os.path.abspath(folder),
        "runtime": runtime,
        "robot": config["robot"],
        "seconds": seconds,
        "velocity_command_m_per_s": velocity,
        "control_rate_hz": 1.0 / config["control_dt"],
        "command_rate_hz": command_rate,
        "average_speed_m_per_s": control_loop.average_speed(
            result.log, after=min(STAND_SECONDS + 1.0, 0.5 * seconds)
        ),
        "controller_calls": result.controller_calls,
        "controller_errors": result.controller_errors,
        "drivers": dict(robot.driver.counters),
        "watchdog_trips": list(robot.driver.trip_times),
        **result.summary(),
    }
    return summary, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None, help="exported policy folder")
    parser.add_argument("--runtime", default="numpy", choices=("numpy", "onnx", "jax"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--velocity", type=float, default=0.5, help="forward command [m/s]")
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
    summary, result = run(args.policy, args.runtime, args.seconds, args.velocity,
                          args.command_rate, args.soft_start, args.max_target_rate)  # fmt: skip
    print(f"policy {summary['policy']} ({args.runtime}) on {summary['robot']}, "
          f"{summary['control_rate_hz']:.0f} Hz")  # fmt: skip
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    print(f"average speed {summary['average_speed_m_per_s']:.3f} m/s "
          f"(command {args.velocity} m/s), base height min {summary['min_base_height_m']:.4f} "
          f"settled {summary['settled_base_height_m']:.4f} m, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    name = f"deploy_policy_{result.safety.joint_map.robot}"
    control_loop.save_run(args.out, name, result.log, summary)
    return summary


if __name__ == "__main__":
    main()
