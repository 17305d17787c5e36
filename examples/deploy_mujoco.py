"""Run a controller through the hardware interface on MuJoCo, with the safety layer.

    python examples/deploy_mujoco.py --robot go2 --seconds 5 --out results
    python examples/deploy_mujoco.py --robot go2 --stop-commands-at 3   # watch the watchdog
    python examples/deploy_mujoco.py --robot go2 --controller mpc --velocity 0.5   # MPC trot

The robot is MuJoCo running the model generated from the same robot (`dynamics.mjcf`), with an
IMU and joint sensors; the drivers' PD runs at every MuJoCo step. The controller (here the
stand controller: soft start to the standing pose, then hold) runs at `--control-rate`, the
safety layer and the writes at `--command-rate`, in simulated time. Any `Controller` (a
policy via `learning.policy_adapter`, an MPC via `controllers.state_feedback`) runs the
same way. Prints the joint conventions, timing statistics, safety interventions and the
settled base height; saves the loop log (npz) and a summary (json).
"""

from __future__ import annotations

import argparse
import logging

import dynamics
from controllers.state_feedback import mpc_controller, mpc_safety_config
from hardware import control_loop
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.faults import FaultyRobot
from hardware.interface import VelocityCommand
from hardware.pose import PoseController
from hardware.safety import SafetyConfig, SafetyLayer
from hardware.timing import format_summary


def run(robot_name="go2", seconds=5.0, control_rate=50.0, command_rate=500.0,
        stop_commands_at=None, soft_start=1.0, controller="stand", velocity=0.5,
        horizon=0.5, iterations=3):  # fmt: skip
    model = dynamics.load_robot(robot_name)
    robot = MuJoCoRobot(model, timestep=1.0 / command_rate)
    if stop_commands_at is not None:
        robot = FaultyRobot(robot, stop_commands_at=stop_commands_at)
    config = SafetyConfig(soft_start_duration=soft_start)
    source = None
    if controller == "mpc":
        ctrl = mpc_controller(robot_name, robot.joint_map, "trot", horizon, iterations)
        config = mpc_safety_config(soft_start=min(soft_start, 0.2))
        source = lambda t: VelocityCommand(velocity if t >= 0.5 else 0.0, 0.0, 0.0)  # noqa: E731
    else:
        ctrl = PoseController.standing(robot.joint_map)
    safety = SafetyLayer(robot.joint_map, config)
    result = control_loop.run(
        robot,
        ctrl,
        safety,
        duration=seconds,
        control_dt=1.0 / control_rate,
        command_dt=1.0 / command_rate,
        command_source=source,
    )
    summary = {
        "robot": robot_name,
        "seconds": seconds,
        "control_rate_hz": control_rate,
        "command_rate_hz": command_rate,
        "controller": controller,
        "average_speed_m_per_s": control_loop.average_speed(
            result.log, after=min(1.5, 0.5 * seconds)
        ),
        "drivers": dict(robot.driver.counters),
        "watchdog_trips": list(robot.driver.trip_times),
        **result.summary(),
    }
    return summary, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--control-rate", type=float, default=50.0, help="[Hz]")
    parser.add_argument("--command-rate", type=float, default=500.0, help="[Hz] = MuJoCo rate")
    parser.add_argument("--stop-commands-at", type=float, default=None, help="[s] fault")
    parser.add_argument("--controller", default="stand", choices=("stand", "mpc"))
    parser.add_argument("--velocity", type=float, default=0.5, help="MPC forward command [m/s]")
    parser.add_argument("--horizon", type=float, default=0.5, help="MPC horizon [s]")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    summary, result = run(
        args.robot, args.seconds, args.control_rate, args.command_rate, args.stop_commands_at,
        controller=args.controller, velocity=args.velocity, horizon=args.horizon,
    )  # fmt: skip
    print(result.safety.joint_map.describe())
    print(format_summary("command loop", summary["timing"]["command"]))
    print(format_summary("controller", summary["timing"]["controller"]))
    for e in summary["safety_events"]:
        print(f"  t={e['start']:.3f} {e['kind']} x{e['count']} {e['detail']}")
    print(f"settled base height {summary['settled_base_height_m']:.4f} m, "
          f"safety mode {summary['safety_mode']}")  # fmt: skip
    control_loop.save_run(args.out, f"deploy_mujoco_{args.robot}", result.log, summary)
    return summary


if __name__ == "__main__":
    main()
